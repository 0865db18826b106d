/* Detached jobs in the cell language (kernel/job/detached.h): a fit in a `#pragma taas
 * --detach` cell starts one and shows it as attach() would; jobs() lists them, attach()
 * shows one and gives its History, cancel() stops one. Showing a job never holds it: the
 * stop button or the kernel's end only stops the showing. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dataview.h"
#include "detached.h"
#include "errnames.h"
#include "fit.h"
#include "modules.h"
#include "modelview.h"
#include "pragma.h"
#include "result.h"

/* A shown job's folder is looked at this often besides its changes (a lost coordinator). */
#define LOOK_EVERY_S 1.0
/* cancel(): how long the coordinator has to stop the job (the stop button's grace, and the
 * processes' ends) before the cell says it did not. */
#define CANCEL_WAIT_S 60.0

typedef struct attach_wait {
    taas_waiter base;
    taas_follow *follow;
    taas_value *model;    /* a reference that gets the weights, or NULL */
    int quiet;            /* cancel(): waits for the end without showing the job */
    int finished;
    double give_up;       /* cancel(): when to stop waiting; 0: never */
    const taas_io *io;    /* the cell's, for the line the stop button leaves */
    taas_srcpos pos;
    char dir[PATH_MAX / 2];
    char id[80];
    char model_name[64];
} attach_wait;

static const taas_io QUIET = {0};

/* A job that ended: its History (and the weights into the model), or the error it ended
 * with, placed at the call. */
static int ended(attach_wait *o, json_t *state, taas_error *err) {
    const char *st = json_string_value(json_object_get(state, "state"));
    const char *weights = json_string_value(json_object_get(state, "weights"));
    const json_t *done = json_object_get(state, "done");
    int kept = 0;
    if (o->model && weights && done) {
        if (taas_model_check_weights(o->model, weights, err)) {
            taas_error_prefix(err, "job %s's weights do not fit %s: ", o->id, o->model_name);
            err->pos = o->pos;
            return -1;
        }
        taas_call_ctx cx = {.pos = o->pos, .err = err};
        if (taas_weights_copy_in(&cx, o->model, weights)) return -1;
        kept = 1;
    }
    if (st && !strcmp(st, "done")) {
        size_t mark = taas_json_mark();
        o->base.result = taas_result_of_fit(done);
        if (o->base.result) return 0;
        if (taas_json_lost(mark)) return taas_value_oom(err, o->pos, "reading the job's History");
        taas_error_set(err, TAAS_ERR_JOB, o->pos, "job %s ended without a History in its state", o->id);
        taas_error_hint(err, "its folder %s may come from another version of taas", o->dir);
        return -1;
    }
    taas_detached_ended_error(state, o->id, o->dir, o->model ? o->model_name : NULL, kept, err);
    err->pos = o->pos;
    return -1;
}

static int attach_poll(taas_waiter *w, const taas_io *io, int expired, taas_error *err) {
    attach_wait *o = (attach_wait *)w;
    o->io = io;
    json_t *state = NULL;
    if (taas_follow_poll(o->follow, o->quiet ? &QUIET : io, &state) == 1) {
        if (o->give_up > 0 && expired && taas_now() >= o->give_up) {
            o->finished = 1;
            taas_error_set(err, TAAS_ERR_JOB, o->pos, "job %s did not stop within %.0f s", o->id, CANCEL_WAIT_S);
            taas_error_hint(err, "its coordinator may hang: see %s/coordinator.log; its pid is in %s/state.json",
                            o->dir, o->dir);
            return -1;
        }
        double next = taas_now() + LOOK_EVERY_S;
        o->base.deadline = o->give_up > 0 && o->give_up < next ? o->give_up : next;
        return 1;
    }
    o->finished = 1;
    int rc;
    if (o->quiet) {  /* cancel(): it ended, however it did */
        const char *st = json_string_value(json_object_get(state, "state"));
        if (io && io->stream) {
            char line[256];
            snprintf(line, sizeof line, "job %s: %s\n", o->id, st ? st : "ended");
            io->stream(io->ctx, "stdout", line);
        }
        o->base.result = taas_none();
        rc = o->base.result ? 0 : taas_value_oom(err, o->pos, "following the job");
    } else {
        rc = ended(o, state, err);
    }
    json_decref(state);
    return rc;
}

static void attach_free(taas_waiter *w) {
    attach_wait *o = (attach_wait *)w;
    if (!o->finished && !o->quiet && o->io && o->io->stream) {
        char line[512];
        snprintf(line, sizeof line, "detached from job %s: it keeps running; attach('%s'%s%s) shows it again, "
                 "cancel('%s') stops it\n", o->id, o->id, o->model ? ", into=" : "", o->model ? o->model_name : "",
                 o->id);
        o->io->stream(o->io->ctx, "stderr", line);
    }
    taas_follow_free(o->follow);
    taas_unref(o->model);
    free(o);
}

/* The cell waits on the job in dir: shown (through the cell's io) unless quiet. */
static int wait_on(taas_call_ctx *cx, const char *dir, taas_value *model, int quiet) {
    attach_wait *o = calloc(1, sizeof *o);
    if (!o) return taas_error_set(cx->err, TAAS_ERR_MEMORY, cx->pos, "out of memory following the job");
    snprintf(o->dir, sizeof o->dir, "%s", dir);
    const char *slash = strrchr(dir, '/');
    snprintf(o->id, sizeof o->id, "%s", slash ? slash + 1 : dir);
    o->follow = taas_follow_open(dir, cx->err);
    if (!o->follow) {
        cx->err->pos = cx->pos;
        free(o);
        return -1;
    }
    const char *name = model && cx->interp ? taas_interp_name_of(cx->interp, model) : NULL;
    snprintf(o->model_name, sizeof o->model_name, "%s", name ? name : "net");
    o->model = model ? taas_ref(model) : NULL;
    o->quiet = quiet;
    o->pos = cx->pos;
    o->io = cx->io;
    o->give_up = quiet ? taas_now() + CANCEL_WAIT_S : 0;
    o->base.fd = taas_follow_fd(o->follow);
    o->base.poll = attach_poll;
    o->base.free = attach_free;
    taas_interp_wait_on(cx->interp, &o->base);
    cx->wait_until = taas_now();  /* the first look at once: a job that ended shows all it said */
    return 0;
}

/* The header the coordinator reads again: the pragma's own flags, in their canonical form. */
static void header_of(const taas_pragma *pr, char *out, size_t n) {
    char units[40] = "", cpus[40], budget[96] = "";
    if (pr->units) snprintf(units, sizeof units, " --units %lld", pr->units);
    if (pr->cpus_auto && pr->cpus_max) snprintf(cpus, sizeof cpus, "auto:%d", pr->cpus_max);
    else if (pr->cpus_auto) snprintf(cpus, sizeof cpus, "auto");
    else snprintf(cpus, sizeof cpus, "%d", pr->cpus);
    if (pr->budget_kind) snprintf(budget, sizeof budget, " --budget %s", pr->budget_text);
    snprintf(out, n, "%s%s%s#pragma taas --gpus %d --cpus %s%s%s --detach\n", pr->has_config ? "#!" : "",
             pr->has_config ? pr->config.name : "", pr->has_config ? "\n" : "", pr->gpus, cpus, units, budget);
}

int taas_fit_detached(taas_call_ctx *cx, const taas_job_cfg *cfg, taas_value *model) {
    char header[256];
    header_of(cfg->pragma, header, sizeof header);
    if (taas_detached_start(cfg, header, cx->err)) {
        cx->err->pos = cx->pos;
        return -1;
    }
    return wait_on(cx, cfg->dir, model, 0);
}

static int find(taas_call_ctx *cx, const taas_value *id, char *dir, size_t n) {
    if (taas_detached_find(id->u.str.s, dir, n, cx->err) == 0) return 0;
    cx->err->pos = cx->pos;
    return -1;
}

/* jobs() */
int taas_jobs_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    (void)a;
    json_t *list = taas_detached_list(cx->err);
    if (!list) {
        cx->err->pos = cx->pos;
        return -1;
    }
    *out = taas_result_of_jobs(list);
    json_decref(list);
    return 0;
}

/* attach(job, into) */
int taas_attach_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    char dir[PATH_MAX];
    if (taas_need_session(cx, "attach") || find(cx, a[0], dir, sizeof dir)) return -1;
    if (a[1]->type != TAAS_V_NONE && !taas_value_is_model(a[1])) {
        taas_error_set(cx->err, TAAS_ERR_TYPE, cx->pos, "attach() into= takes the model that gets the job's "
                       "weights, " TAAS_MODEL_WORDS ", not %s", taas_value_type_name(a[1]));
        taas_error_hint(cx->err, "attach('%s', into=net) with net = the model the job trains", a[0]->u.str.s);
        return -1;
    }
    if (wait_on(cx, dir, a[1]->type == TAAS_V_NONE ? NULL : a[1], 0)) return -1;
    *out = taas_none();
    return 0;
}

/* cancel(job) */
int taas_cancel_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    char dir[PATH_MAX];
    if (taas_need_session(cx, "cancel") || find(cx, a[0], dir, sizeof dir)) return -1;
    if (taas_detached_cancel(dir, cx->err)) {
        cx->err->pos = cx->pos;
        return -1;
    }
    if (wait_on(cx, dir, NULL, 1)) return -1;
    *out = taas_none();
    return 0;
}
