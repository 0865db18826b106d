/* taas-worker train: runs a fit job (docs/jobspec.md) on this process's CPU and reports its
 * progress as JSON lines on stdout. SIGINT/SIGTERM end it after the step in progress, with
 * the weights of the last completed step written. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "role.h"
#include "train_job.h"

static const taas_srcpos NOPOS = {0, 0};

/* Set by the signal handler, read between steps: a signal cannot carry a pointer. */
static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

/* The pipeline's decode threads inherit the mask at creation: with the stop signals blocked
 * there, they reach this thread and never interrupt a decode thread's read. */
static void block_stop_signals(int block) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL);
}

typedef struct fit {
    const json_t *job;
    const char *out;
    long long epochs, units, seed;
    taas_fetcher *fetcher;
    taas_job_loader train, val;
    int has_val;
    taas_model *model;
    taas_job_loss loss;
    taas_optim_config opt;
    taas_sched_config sc;
    taas_sched sched;
    int has_sched;
    float *state, *dout;
    size_t dout_cap;
    long long steps;      /* optimizer steps done */
    json_t *history;
    int interrupted;
} fit;

static int setup(fit *f, taas_error *err) {
    const json_t *job = f->job;
    const json_t *v = json_object_get(job, "version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        taas_error_set(err, "TaasValueError", NOPOS, "the job spec's \"version\" must be 1");
        taas_error_hint(err, "this worker runs version 1 job specs (docs/jobspec.md); the kernel and worker may be of different builds");
        return -1;
    }
    const char *kind = json_string_value(json_object_get(job, "job"));
    if (!kind || strcmp(kind, "fit") != 0) {
        taas_error_set(err, "TaasValueError", NOPOS, "taas-worker train runs \"job\": \"fit\", not %s%s%s",
                       kind ? "\"" : "", kind ? kind : "a spec without one", kind ? "\"" : "");
        taas_error_hint(err, "run evaluate jobs with taas-worker evaluate");
        return -1;
    }
    f->out = json_string_value(json_object_get(job, "out"));
    if (!f->out || !*f->out) {
        taas_error_set(err, "TaasValueError", NOPOS, "the job spec has no \"out\" path for the trained weights");
        taas_error_hint(err, "give \"out\": \"PATH.safetensors\"");
        return -1;
    }
    if (taas_job_int(job, "the job spec", "epochs", 1, 1, 1000000, &f->epochs, err) ||
        taas_job_int(job, "the job spec", "units", 0, 0, INT64_MAX, &f->units, err) ||
        taas_job_int(job, "the job spec", "seed", 0, 0, INT64_MAX, &f->seed, err) ||
        taas_job_loss_parse(json_object_get(job, "loss"), &f->loss, err) ||
        taas_job_optim_parse(json_object_get(job, "optimizer"), &f->opt, err))
        return -1;
    const json_t *tr = json_object_get(job, "train");
    if (!tr || json_is_null(tr)) {
        taas_error_set(err, "TaasValueError", NOPOS, "the fit job has no \"train\" DataLoader");
        taas_error_hint(err, "give fit() a training loader: fit(model, DataLoader(train_set, batch_size=64), ...)");
        return -1;
    }
    if (!(f->fetcher = taas_cli_fetcher(err))) return -1;
    if (taas_job_loader_open(tr, "train", f->fetcher, (uint64_t)f->seed, (uint64_t)f->units,
                             (uint64_t)f->epochs, &f->train, err))
        return -1;
    const json_t *va = json_object_get(job, "validate");
    if (va && !json_is_null(va)) {
        if (taas_job_loader_open(va, "validate", f->fetcher, (uint64_t)f->seed, 0, 1, &f->val, err)) return -1;
        f->has_val = 1;
    }
    if (!(f->model = taas_job_model(job, &f->train, err))) return -1;
    if (taas_job_sched_parse(json_object_get(job, "scheduler"), f->opt.lr, (long)f->epochs,
                             (long)f->train.steps, &f->sc, &f->has_sched, err))
        return -1;
    if (f->has_sched) {
        if (taas_sched_init(&f->sched, &f->sc, err)) return -1;
        f->opt.lr = f->sched.lr;
        if (f->sc.kind == TAAS_SCHED_ONECYCLE && f->sc.cycle_momentum) {
            if (f->opt.kind == TAAS_OPTIM_ADAM || f->opt.kind == TAAS_OPTIM_ADAMW) f->opt.beta1 = f->sched.momentum;
            else f->opt.momentum = f->sched.momentum;
        }
    }
    size_t nstate = taas_optim_state_floats(&f->opt, f->model->nparams);
    f->state = calloc(nstate ? nstate : 1, sizeof *f->state);
    f->history = json_array();
    if (!f->state || !f->history) return taas_error_set(err, "TaasMemoryError", NOPOS, "out of memory for the optimizer state");
    return 0;
}

static int sched_step(fit *f, taas_error *err) {
    if (taas_sched_step(&f->sched, err)) return -1;
    f->opt.lr = f->sched.lr;
    if (f->sc.kind == TAAS_SCHED_ONECYCLE && f->sc.cycle_momentum) {
        if (f->opt.kind == TAAS_OPTIM_ADAM || f->opt.kind == TAAS_OPTIM_ADAMW) f->opt.beta1 = f->sched.momentum;
        else f->opt.momentum = f->sched.momentum;
    }
    return 0;
}

/* One optimizer step on batch b; *loss gets its loss. */
static int step(fit *f, const taas_batch *b, float *loss, taas_error *err) {
    int c = (int)taas_model_out_numel(f->model);
    size_t need = (size_t)b->n * (size_t)c;
    if (need > f->dout_cap) {
        float *d = realloc(f->dout, need * sizeof *d);
        if (!d) return taas_error_set(err, "TaasMemoryError", NOPOS, "out of memory for the loss gradient");
        f->dout = d;
        f->dout_cap = need;
    }
    const float *out;
    taas_model_zero_grad(f->model);
    if (taas_model_forward(f->model, b->images, (int)b->n, 1, (uint64_t)f->steps, &out, err) ||
        taas_job_loss_run(&f->loss, out, b->labels, (int)b->n, c, f->dout, loss, err))
        return -1;
    if (!isfinite(*loss)) return 0;  /* the caller reports it; the weights stay as they were */
    if (taas_model_backward(f->model, f->dout, err)) return -1;
    f->steps++;
    taas_optim_step(&f->opt, f->model->params, f->model->grads, f->state, f->model->nparams, (long)f->steps);
    if (f->has_sched && f->sc.kind == TAAS_SCHED_ONECYCLE) return sched_step(f, err);
    return 0;
}

static json_t *epoch_line(long long e, double train_loss, double val_loss, double val_acc, int has_val,
                          double secs, uint64_t samples) {
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("epoch"));
    json_object_set_new(j, "epoch", json_integer(e));
    json_object_set_new(j, "train_loss", json_real(train_loss));
    json_object_set_new(j, "val_loss", has_val ? json_real(val_loss) : json_null());
    json_object_set_new(j, "val_accuracy", has_val ? json_real(val_acc) : json_null());
    json_object_set_new(j, "time_s", json_real(secs));
    json_object_set_new(j, "samples_per_s", json_real(secs > 0 ? samples / secs : 0));
    return j;
}

/* The end of epoch e (1-based): validation, the epoch line, the epoch scheduler. */
static int end_epoch(fit *f, long long e, double loss_sum, uint64_t samples, double t0, taas_error *err) {
    double secs = taas_job_now() - t0, vl = 0, va = 0;
    uint64_t vn = 0;
    if (f->has_val) {
        block_stop_signals(1);
        int rc = e > 1 ? taas_job_loader_restart(&f->val, json_object_get(f->job, "validate"), (uint64_t)f->seed, 1, err) : 0;
        block_stop_signals(0);
        if (rc || taas_job_evaluate(f->model, &f->val, &f->loss, &vl, &va, &vn, err)) return -1;
    }
    json_t *line = epoch_line(e, samples ? loss_sum / (double)samples : NAN, vl, va, f->has_val, secs, samples);
    json_array_append(f->history, line);
    taas_job_emit(line);
    if (f->has_sched && f->sc.kind != TAAS_SCHED_ONECYCLE) return sched_step(f, err);
    return 0;
}

static int run(fit *f, taas_error *err) {
    uint64_t total = (uint64_t)f->epochs * f->train.per_epoch;
    if (f->units && (uint64_t)f->units < total) total = (uint64_t)f->units;
    json_t *start = json_object();
    json_object_set_new(start, "event", json_string("start"));
    json_object_set_new(start, "epochs", json_integer(f->epochs));
    json_object_set_new(start, "steps_per_epoch", json_integer((json_int_t)f->train.steps));
    json_object_set_new(start, "samples", json_integer((json_int_t)total));
    json_object_set_new(start, "params", json_integer((json_int_t)f->model->nparams));
    taas_job_emit(start);
    long long epoch = -1, in_epoch = 0;
    double loss_sum = 0, t0 = taas_job_now(), last_line = 0;
    uint64_t samples = 0;
    while (!g_stop) {
        taas_batch *b = NULL;
        int rc = taas_pipeline_next(f->train.pipeline, &b, err);
        if (rc < 0) return -1;
        if (rc == 1) break;
        if ((long long)b->epoch != epoch) {
            if (epoch >= 0 && end_epoch(f, epoch + 1, loss_sum, samples, t0, err)) {
                taas_batch_free(b);
                return -1;
            }
            epoch = (long long)b->epoch;
            in_epoch = 0, loss_sum = 0, samples = 0, t0 = taas_job_now();
        }
        float loss;
        rc = step(f, b, &loss, err);
        uint32_t n = b->n;
        taas_batch_free(b);
        if (rc) return -1;
        in_epoch++;
        if (!isfinite(loss)) {
            taas_error_set(err, "TaasValueError", NOPOS, "the loss is %s at epoch %lld step %lld",
                           isnan(loss) ? "nan" : "inf", epoch + 1, in_epoch);
            taas_error_hint(err, "lower the learning rate (lr=%g now), or check the data and the model's last layer",
                            f->opt.lr);
            return -2;
        }
        loss_sum += (double)loss * n;
        samples += n;
        double now = taas_job_now();
        if (now - last_line >= 0.2) {  /* at most ~5 step lines a second */
            last_line = now;
            json_t *j = json_object();
            json_object_set_new(j, "event", json_string("step"));
            json_object_set_new(j, "epoch", json_integer(epoch + 1));
            json_object_set_new(j, "step", json_integer(in_epoch));
            json_object_set_new(j, "loss", json_real(loss));
            json_object_set_new(j, "samples_per_s", json_real(now > t0 ? samples / (now - t0) : 0));
            taas_job_emit(j);
        }
    }
    f->interrupted = g_stop != 0;
    /* An interrupted epoch gets no epoch line: its loss covers part of the data only. */
    if (!f->interrupted && epoch >= 0 && end_epoch(f, epoch + 1, loss_sum, samples, t0, err)) return -1;
    return 0;
}

static int finish(fit *f, taas_error *err) {
    if (taas_job_save(f->model, f->out, err)) return -1;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("done"));
    json_object_set_new(j, "weights", taas_cli_text(f->out));
    json_object_set_new(j, "steps", json_integer(f->steps));
    json_object_set_new(j, "history", json_incref(f->history));
    json_object_set_new(j, "interrupted", json_boolean(f->interrupted));
    return taas_job_emit(j);
}

static void fit_free(fit *f) {
    taas_job_loader_close(&f->train);
    if (f->has_val) taas_job_loader_close(&f->val);
    taas_model_free(f->model);
    taas_job_loss_free(&f->loss);
    taas_fetcher_free(f->fetcher);
    free(f->state);
    free(f->dout);
    json_decref(f->history);
}

int taas_role_train(int argc, char **argv) {
    const char *spec_path = NULL, *help = NULL;
    const taas_opt opts[] = {{"spec", 1, &spec_path}, {"help", 0, &help}, {NULL, 0, NULL}};
    taas_error err;
    taas_error_clear(&err);
    if (taas_cli_parse(argc, argv, opts, &err)) {
        taas_job_report(&err, -1);
        return TAAS_EXIT_USAGE;
    }
    if (help) {
        puts("usage: taas-worker train --spec FILE|-\n\n"
             "Runs a fit job spec (docs/jobspec.md): trains the model on the \"train\" loader,\n"
             "validates after each epoch, writes the weights to \"out\" (safetensors) and prints\n"
             "progress as JSON lines (start, step, epoch, done, error) on stdout.\n"
             "SIGINT/SIGTERM stop it after the step in progress, weights written.");
        return TAAS_EXIT_OK;
    }
    if (!spec_path) {
        taas_error_set(&err, "TaasUsageError", NOPOS, "train: --spec is required");
        taas_error_hint(&err, "give --spec FILE, or --spec - to read the job spec from stdin");
        taas_job_report(&err, -1);
        return TAAS_EXIT_USAGE;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fit f;
    memset(&f, 0, sizeof f);
    f.job = taas_job_read(spec_path, &err);
    int rc = -1;
    block_stop_signals(1);
    int ok = f.job && setup(&f, &err) == 0;
    block_stop_signals(0);
    if (ok) {
        rc = run(&f, &err);
        if (rc == 0) rc = finish(&f, &err);
    }
    if (rc) taas_job_report(&err, f.job && rc != -1 ? f.steps + 1 : (f.steps ? f.steps : -1));
    json_decref((json_t *)f.job);
    fit_free(&f);
    return rc ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
