/* fit() and evaluate(): the kernel checks the model against the data and writes a job spec
 * (docs/jobspec.md), which runs as a job (action_job.c, kernel/job). The kernel never holds
 * weights: a model value keeps the path of its safetensors file (u.obj.weights). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "clock.h"
#include "cpu.h"
#include "dataview.h"
#include "errnames.h"
#include "fit.h"
#include "modelview.h"
#include "pragma.h"
#include "result.h"
#include "utf8.h"
#include "worker.h"


void taas_weights_replace(taas_value *model, char *path, int owned) {
    char *old = model->u.obj.weights;
    int old_owned = model->u.obj.weights_owned;
    model->u.obj.weights = path;
    model->u.obj.weights_owned = owned;
    if (old && path && !strcmp(old, path)) free(old);  /* the same file, kept */
    else taas_weights_drop(old, old_owned);
}

int taas_weights_attach(taas_value *model, const char *path, int owned) {
    char *p = strdup(path);
    if (!p) return -1;
    taas_weights_replace(model, p, owned);
    return 0;
}

static int sys_fail(taas_call_ctx *cx, const char *what) {
    taas_error_set(cx->err, TAAS_ERR_WORKER, cx->pos, "cannot prepare the job: %s: %s", what, strerror(errno));
    taas_error_hint(cx->err, "the temporary folder ($TMPDIR or /tmp) must be writable with free space");
    return -1;
}

int taas_job_folder(taas_call_ctx *cx, char *dir, size_t n) {
    const char *tmp = getenv("TMPDIR");
    if ((size_t)snprintf(dir, n, "%s/taas-job-XXXXXX", tmp && *tmp ? tmp : "/tmp") >= n)
        snprintf(dir, n, "/tmp/taas-job-XXXXXX");
    return mkdtemp(dir) ? 0 : sys_fail(cx, "mkdtemp");
}

int taas_need_session(taas_call_ctx *cx, const char *name) {
    if (cx->interp) return 0;
    taas_error_set(cx->err, TAAS_ERR_INTERNAL, cx->pos, "%s() needs the session, which is not there", name);
    taas_error_hint(cx->err, "this is a bug in taas; please report it");
    return -1;
}

static json_t *spec_or_null(const taas_value *v) {
    return v->type == TAAS_V_NONE ? json_null() : taas_value_spec(v);
}

static json_t *weights_of(const taas_value *model) {
    return model->u.obj.weights ? json_string(model->u.obj.weights) : json_null();
}

/* Before anything starts: the model's plan for the samples of the loader (shape errors
 * named by layer), and for NLLLoss or CrossEntropyLoss an output for every class. `what`
 * names the loader when it is not the one the model trains on. */
static int check_model(taas_call_ctx *cx, taas_value *model, const taas_value *loader, const taas_value *loss,
                       const char *what) {
    taas_model_plan plan;
    if (taas_model_plan_for(cx->interp, model, loader, what ? what : "the loader", &plan, cx->err)) {
        if (what) taas_error_prefix(cx->err, "with the samples of %s: ", what);
        cx->err->pos = cx->pos;
        return -1;
    }
    /* a fit without a pragma trains on this machine: a model bigger than its memory is
     * refused before a worker allocates it (a pragma's ranks check on their machines) */
    if (!taas_interp_pragma(cx->interp) && taas_model_plan_check_memory(&plan, cx->err)) {
        taas_model_plan_free(&plan);
        cx->err->pos = cx->pos;
        return -1;
    }
    /* the model has seen its input: its summary shows shapes and memory from now on */
    model->u.obj.sample[0] = plan.in_shape.d[0];
    model->u.obj.sample[1] = plan.in_shape.rank == 3 ? plan.in_shape.d[1] : 0;
    model->u.obj.sample[2] = plan.in_shape.rank == 3 ? plan.in_shape.d[2] : 0;
    const taas_model_layer *last = &plan.layers[plan.nlayers - 1];
    /* a classifier's outputs a sample, a token model's a token (its vocabulary) */
    int outputs = last->out.rank == 1 ? last->out.d[0] : last->out.rank == 2 ? last->out.d[1] : 0;
    int classifier = loss->type != TAAS_V_OBJECT || taas_value_is(loss, "NLLLoss") ||
                     taas_value_is(loss, "CrossEntropyLoss");
    taas_model_plan_free(&plan);
    const json_t *info;
    const taas_value *ds = taas_data_dataset_of(loader);
    if (!classifier || !outputs || taas_data_probe(cx->interp, ds, &info, cx->err)) return 0;
    long long classes = (long long)json_integer_value(json_object_get(info, "num_classes"));
    if (classes <= outputs) return 0;
    if (json_is_true(json_object_get(info, "tokens"))) {
        taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "the model predicts %d tokens, but %s has a vocabulary of %lld",
                       outputs, ds->u.obj.def->name, classes);
        taas_error_hint(cx->err, "give the model a vocabulary of the data's: GPT2Config(vocab_size=%lld)", classes);
        return -1;
    }
    taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "the model gives %d output%s per sample, but %s has %lld classes",
                   outputs, outputs == 1 ? "" : "s", ds->u.obj.def->name, classes);
    taas_error_hint(cx->err, "make the last layer give one output per class, e.g. Linear(128, %lld)", classes);
    return -1;
}

/* Compute threads for a job on this machine: every core the kernel may run on. */
static int job_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* What fit and evaluate specs share (docs/jobspec.md): the model with its weights, the
 * training loader (or null), the units limit (None: 0) and the threads. */
static json_t *job_spec(const char *kind, const taas_value *model, const taas_value *train, const taas_value *units) {
    json_t *job = json_object();
    json_object_set_new(job, "version", json_integer(1));
    json_object_set_new(job, "job", json_string(kind));
    json_object_set_new(job, "model", taas_value_spec(model));
    json_object_set_new(job, "weights", weights_of(model));
    json_object_set_new(job, "train", train ? taas_value_spec(train) : json_null());
    json_object_set_new(job, "units", json_integer(units->type == TAAS_V_INT ? units->u.i : 0));
    json_object_set_new(job, "threads", json_integer(job_threads()));
    return job;
}

/* A job spec that lost a part to a failed allocation never reaches a worker (it would read
 * what is missing as a default): 1 with a TaasMemoryError, and the spec dropped. */
static int lost(taas_call_ctx *cx, json_t *job, size_t mark) {
    if (job && !taas_json_lost(mark)) return 0;
    json_decref(job);
    taas_value_oom(cx->err, cx->pos, "writing the job's spec");
    return 1;
}

/* resume=path: a checkpoint of this model (its tensors fit) and of this fit (its record
 * checked against what the kernel knows of it: the ranks check the rest), as an absolute
 * path for the spec's "weights", and where it stands. */
static json_t *resume_from(taas_call_ctx *cx, taas_value **a, const char *path, taas_fit_resume *rs) {
    if (taas_model_check_weights(a[0], path, cx->err)) {
        taas_error_prefix(cx->err, "fit() resume: ");
        cx->err->pos = cx->pos;
        return NULL;
    }
    json_t *opt = taas_value_spec(a[4]);
    const taas_checkpoint_fit fit = {json_string_value(json_object_get(opt, "type")), a[5]->type != TAAS_V_NONE, -1,
                                     a[7]->u.i, a[2]->u.i, -1, -1, a[15]->u.i};
    json_t *meta = taas_checkpoint_meta(path, cx->err);
    if (meta && taas_checkpoint_check(meta, &fit, path, cx->err)) {
        json_decref(meta);
        meta = NULL;
        taas_error_prefix(cx->err, "fit() resume: ");
    }
    json_decref(opt);
    char *abs = meta ? realpath(path, NULL) : NULL;
    if (!meta || !abs) {
        if (meta) taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "fit() resume: cannot resolve %s: %s", path,
                                 strerror(errno));
        json_decref(meta);
        cx->err->pos = cx->pos;
        return NULL;
    }
    /* the set it was trained with: the job keeps it (docs/training.md) */
    const char *kernels = json_string_value(json_object_get(meta, "kernels"));
    rs->kernels = taas_cpu_parse(kernels);
    rs->epoch = (long long)json_integer_value(json_object_get(meta, "epoch"));
    rs->step = (long long)json_integer_value(json_object_get(meta, "step"));
    json_decref(meta);
    json_t *p = json_string(abs);
    free(abs);
    return p;
}

/* max_steps: the epochs it takes and the samples of exactly that many optimizer steps, for
 * the job's "epochs" and "units" (a step is accum batches on every rank, an epoch's last step
 * fewer when they do not divide its batches; an epoch's last batch may be partial). 0, or -1
 * with err. */
static int steps_to_units(taas_call_ctx *cx, const taas_value *loader, long long max_steps, long long accum,
                          long long *epochs, long long *units) {
    const json_t *info;
    const taas_value *ds = taas_data_dataset_of(loader);
    if (taas_data_probe(cx->interp, ds, &info, cx->err)) return -1;
    const struct taas_pragma *pr = taas_interp_pragma(cx->interp);
    long long size = (long long)json_integer_value(json_object_get(info, "size"));
    long long world = pr ? pr->gpus : 1, batch = taas_object_arg(loader, "batch_size")->u.i;
    int drop = taas_object_arg(loader, "drop_last")->u.b;
    long long per_step = batch * world;
    long long steps = drop ? size / per_step : (size + per_step - 1) / per_step;
    if (steps < 1) {
        taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "fit() max_steps: an epoch of %s has no whole step of %lld "
                       "samples", ds->u.obj.def->name, per_step);
        taas_error_hint(cx->err, "use a smaller batch_size, or drop_last=False");
        return -1;
    }
    long long per_epoch = drop ? steps * per_step : size;
    long long batches = steps;
    steps = (batches + accum - 1) / accum;  /* optimizer steps an epoch */
    *epochs = (max_steps + steps - 1) / steps;
    if (*epochs > 1000000) {
        taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "fit() max_steps=%lld takes %lld epochs of %lld steps, more "
                       "than 1000000", max_steps, *epochs, steps);
        taas_error_hint(cx->err, "ask for fewer steps");
        return -1;
    }
    /* the whole epochs, then the first steps of the next: full batches (fewer steps than an
     * epoch's never reach its last, partial batch) */
    *units = max_steps / steps * per_epoch + max_steps % steps * accum * per_step;
    return 0;
}

/* fit(model, loader, epochs, loss, optimizer, scheduler, validate, seed, units, checkpoint_every,
 * resume, max_restarts, clip_grad_norm, max_steps, scheduler_interval, accumulate, precision) */
int taas_fit_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (taas_need_session(cx, "fit") || check_model(cx, a[0], a[1], a[3], NULL) ||
        (a[6]->type != TAAS_V_NONE && check_model(cx, a[0], a[6], a[3], "validate")))
        return -1;
    taas_fit_resume rs = {(int)a[11]->u.i, 0, 0, -1};
    json_t *from = a[10]->type == TAAS_V_NONE ? NULL : resume_from(cx, a, a[10]->u.str.s, &rs);
    if (a[10]->type != TAAS_V_NONE && !from) return -1;
    long long epochs = a[2]->u.i, units = 0;
    if (a[13]->type == TAAS_V_INT && steps_to_units(cx, a[1], a[13]->u.i, a[15]->u.i, &epochs, &units)) return -1;
    size_t mark = taas_json_mark();
    json_t *job = job_spec("fit", a[0], a[1], a[8]);
    if (a[13]->type == TAAS_V_INT) {  /* max_steps: its samples, unless units asks for fewer */
        long long u = json_integer_value(json_object_get(job, "units"));
        json_object_set_new(job, "units", json_integer(u > 0 && u < units ? u : units));
    }
    if (from) {  /* the checkpoint's weights, optimizer state and position, not the model's */
        json_object_set_new(job, "weights", from);
        json_object_set_new(job, "resume", json_true());
        if (rs.kernels >= 0) json_object_set_new(job, "kernels", json_string(taas_cpu_set_name((taas_cpu_set)rs.kernels)));
    }
    json_object_set_new(job, "checkpoint_every", a[9]->type == TAAS_V_INT   ? json_integer(a[9]->u.i)
                                                 : a[9]->type == TAAS_V_STR ? json_string(a[9]->u.str.s)
                                                                            : json_null());
    json_object_set_new(job, "epochs", json_integer(epochs));
    json_object_set_new(job, "loss", taas_value_spec(a[3]));
    json_object_set_new(job, "optimizer", taas_value_spec(a[4]));
    json_object_set_new(job, "scheduler", spec_or_null(a[5]));
    json_object_set_new(job, "scheduler_interval", spec_or_null(a[14]));
    json_object_set_new(job, "max_steps", spec_or_null(a[13]));
    json_object_set_new(job, "accumulate", json_integer(a[15]->u.i));
    json_object_set_new(job, "precision", json_string(a[16]->u.str.s));
    json_object_set_new(job, "validate", spec_or_null(a[6]));
    json_object_set_new(job, "seed", json_integer(a[7]->u.i));
    json_object_set_new(job, "clip_grad_norm", a[12]->type == TAAS_V_NONE ? json_null()
                                                                           : json_real(taas_value_number(a[12])));
    if (lost(cx, job, mark)) return -1;
    const struct taas_pragma *pr = taas_interp_pragma(cx->interp);
    if (taas_fit_job(cx, pr, job, a[0], a[1], a[6], &rs)) return -1;
    *out = taas_none();
    return 0;
}

/* evaluate()'s loss=None: NLLLoss after a LogSoftmax, else CrossEntropyLoss on the logits (a
 * ResNet's, a GPT's). */
static json_t *default_loss(const taas_value *model) {
    taas_model_plan plan;
    taas_error e;
    json_t *spec = taas_value_spec(model);
    int logp = spec && taas_model_plan_build(&plan, spec, 0, 0, 0, &e) == 0 && plan.nlayers &&
               plan.layers[plan.nlayers - 1].kind == TAAS_L_LOG_SOFTMAX;
    if (spec && plan.layers) taas_model_plan_free(&plan);
    json_decref(spec);
    return json_pack("{s:s}", "type", logp || !spec ? "NLLLoss" : "CrossEntropyLoss");
}

/* evaluate(model, loader, loss, units) */
int taas_evaluate_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (taas_need_session(cx, "evaluate") || taas_need_weights(cx, a[0]) || check_model(cx, a[0], a[1], a[2], NULL))
        return -1;
    size_t mark = taas_json_mark();
    json_t *job = job_spec("evaluate", a[0], NULL, a[3]);
    json_object_set_new(job, "validate", taas_value_spec(a[1]));
    json_object_set_new(job, "loss", a[2]->type == TAAS_V_NONE ? default_loss(a[0]) : taas_value_spec(a[2]));
    json_object_set_new(job, "seed", json_integer(0));
    if (lost(cx, job, mark)) return -1;
    if (taas_evaluate_job(cx, job, a[0])) return -1;
    *out = taas_none();
    return 0;
}
