/* fit() as a job (kernel/job/job.h) that the cell waits on: in a #pragma taas cell, the
 * registered DataLoaders among the fit's train and validate loaders run on loader workers
 * and the others are loaded by each rank itself; without a pragma, one rank here loads
 * everything. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "dataview.h"
#include "detached.h"
#include "errnames.h"
#include "fit.h"
#include "job.h"
#include "result.h"

typedef struct job_wait {
    taas_waiter base;
    taas_job *job;
    taas_value *model;    /* a reference; gets the weights (fit) */
    int evaluate;         /* evaluate(): its result is an Evaluation, no weights come back */
    int finished;
    const taas_io *io;    /* the cell's, for the display's last state when it is stopped */
    char dir[PATH_MAX / 2];
    char weights[PATH_MAX];
} job_wait;

static int job_poll(taas_waiter *w, const taas_io *io, int expired, taas_error *err) {
    (void)expired;
    job_wait *o = (job_wait *)w;
    o->io = io;
    int r = taas_job_poll(o->job, io, err);
    if (r == 1) {
        o->base.deadline = taas_job_deadline(o->job);
        return 1;
    }
    o->finished = 1;
    if (r >= 2) {  /* stopped: the model keeps the weights of the last completed step */
        if (r == 3 && !o->evaluate && taas_weights_attach(o->model, o->weights, 1))
            return taas_value_oom(err, TAAS_NOPOS, "keeping the trained weights");
        return 0;
    }
    if (r < 0) return -1;
    const json_t *done = taas_job_done(o->job);
    size_t mark = taas_json_mark();
    o->base.result = o->evaluate ? taas_result_of_evaluate(done) : taas_result_of_fit(done);
    if (!o->base.result && taas_json_lost(mark)) return taas_value_oom(err, TAAS_NOPOS, "reading the job's result");
    if (!o->base.result) {
        taas_error_set(err, TAAS_ERR_WORKER, (taas_srcpos){0, 0}, "rank 0 ended with a \"done\" message that "
                       "lacks the %s", o->evaluate ? "loss and accuracy" : "history");
        taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
        return -1;
    }
    if (!o->evaluate && taas_weights_attach(o->model, o->weights, 1)) {
        taas_unref(o->base.result);
        o->base.result = NULL;
        return taas_value_oom(err, TAAS_NOPOS, "keeping the trained weights");
    }
    return 0;
}

/* TAAS_STOP_GRACE_S: seconds for rank 0's last weights after the stop button (tests hold a
 * stop open with a long one); else TAAS_JOB_STOP_GRACE_S. */
static double stop_grace(void) {
    const char *e = getenv("TAAS_STOP_GRACE_S");
    char *end;
    double g = e && *e ? strtod(e, &end) : 0;
    return e && *e && !*end && g > 0 && g <= 86400 ? g : TAAS_JOB_STOP_GRACE_S;
}

static void job_stop(taas_waiter *w, const taas_io *io) {
    job_wait *o = (job_wait *)w;
    o->io = io;
    taas_job_stop(o->job, stop_grace());
    o->base.deadline = taas_job_deadline(o->job);
}

static void job_free(taas_waiter *w) {
    job_wait *o = (job_wait *)w;
    if (o->job && !o->finished && taas_job_cancel(o->job, TAAS_JOB_STOP_GRACE_S, o->io) && !o->evaluate)
        (void)taas_weights_attach(o->model, o->weights, 1);  /* without memory the file goes, below */
    taas_job_free(o->job);
    if (!o->model->u.obj.weights || strcmp(o->model->u.obj.weights, o->weights) != 0) {
        unlink(o->weights);
        rmdir(o->dir);
    }
    taas_unref(o->model);
    free(o);
}

/* Is v one of the registered loaders? Its variable's name, for messages, and what the probe
 * knows of its dataset (cached: the fit's checks asked already). */
static int registered(taas_interp *in, const taas_value *v, taas_job_stream *out) {
    for (size_t i = 0; i < taas_interp_loader_count(in); i++)
        if (taas_interp_loader_at(in, i) == v) {
            const json_t *info = NULL;
            taas_error e;
            if (taas_data_probe(in, taas_data_dataset_of(v), &info, &e)) info = NULL;
            out->name = taas_interp_name_of(in, v);
            out->facts = info;
            return 1;
        }
    return 0;
}

static int placed(taas_call_ctx *cx) {
    if (cx->err->pos.line == 0) cx->err->pos = cx->pos;
    return -1;
}

static int start_job(taas_call_ctx *cx, const struct taas_pragma *pr, json_t *job, taas_value *model,
                     taas_value *train, taas_value *validate, const taas_fit_resume *rs) {
    int evaluate = rs == NULL;
    int detach = pr && pr->detach && !evaluate;
    job_wait *o = calloc(1, sizeof *o);
    if (!o || (detach ? taas_detached_folder(o->dir, sizeof o->dir, cx->err) && placed(cx)
                      : taas_job_folder(cx, o->dir, sizeof o->dir))) {
        if (!o) taas_error_set(cx->err, TAAS_ERR_MEMORY, cx->pos, "out of memory starting the job");
        free(o);
        json_decref(job);
        return -1;
    }
    snprintf(o->weights, sizeof o->weights, "%s/weights.safetensors", o->dir);
    taas_job_stream streams[2] = {{"train", NULL, NULL}, {"validate", NULL, NULL}};
    int n = 0;
    if (pr && registered(cx->interp, train, &streams[n])) n++;
    streams[n].role = "validate";
    if (pr && validate->type != TAAS_V_NONE && validate != train && registered(cx->interp, validate, &streams[n])) n++;
    taas_job_cfg cfg = {.pragma = pr, .spec = job, .streams = streams, .nstreams = n, .dir = o->dir,
                        .weights = o->weights, .model = taas_interp_name_of(cx->interp, model),
                        .evaluate = evaluate, .max_restarts = rs ? rs->max_restarts : 0,
                        .resume_epoch = rs ? rs->epoch : 0, .resume_step = rs ? rs->step : 0};
    if (detach) {  /* the job is the coordinator's; the cell shows it */
        int rc = taas_fit_detached(cx, &cfg, model);
        json_decref(job);
        free(o);
        return rc;
    }
    o->job = taas_job_start(&cfg, cx->io, cx->err);
    json_decref(job);
    if (!o->job) {
        if (cx->err->pos.line == 0) cx->err->pos = cx->pos;
        rmdir(o->dir);
        free(o);
        return -1;
    }
    o->model = taas_ref(model);
    o->evaluate = evaluate;
    o->io = cx->io;
    o->base.fd = taas_job_fd(o->job);
    o->base.poll = job_poll;
    o->base.free = job_free;
    o->base.stop = job_stop;
    taas_interp_wait_on(cx->interp, &o->base);
    cx->wait_until = taas_job_deadline(o->job);
    return 0;
}

int taas_fit_job(taas_call_ctx *cx, const struct taas_pragma *pr, json_t *job, taas_value *model,
                 taas_value *train, taas_value *validate, const taas_fit_resume *rs) {
    return start_job(cx, pr, job, model, train, validate, rs);
}

int taas_evaluate_job(taas_call_ctx *cx, json_t *job, taas_value *model) {
    return start_job(cx, NULL, job, model, NULL, NULL, NULL);
}
