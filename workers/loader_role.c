/* taas-worker loader: worker j of the M workers of one registered DataLoader of an
 * offloaded job. It makes the work items k % M == j of every epoch (docs/design.md §3: a batch's
 * content depends only on (seed, epoch, k)) and streams each to the rank that trains it,
 * under that rank's credit. It joins the job as the ranks do (offload.h): the kernel sends
 * the spec, and to a replacement for a worker that died the step the ranks have reached, where
 * it starts; the ranks drop what they already have. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bounds.h"
#include "clock.h"
#include "errnames.h"
#include "jobctl.h"
#include "offload.h"
#include "role.h"
#include "stream_send.h"
#include "train_job.h"

/* Seconds for the kernel to start the job (every rank said hello). */
#define START_TIMEOUT_S 120.0
/* Seconds between its reports of how busy it is (the kernel sizes the pool by them). */
#define LOAD_EVERY_S 1.0

typedef struct loader_args {
    long long stream, worker, generation;
} loader_args;

static int run(const char *control, const loader_args *a, const char *keys_from, taas_joined *jn, taas_error *err) {
    char id[64];
    snprintf(id, sizeof id, "loader.%lld.%lld.%lld", a->stream, a->worker, a->generation);
    json_t *hello = json_pack("{s:s, s:I, s:I, s:I}", "role", "loader", "stream", (json_int_t)a->stream, "worker",
                              (json_int_t)a->worker, "generation", (json_int_t)a->generation);
    if (taas_offload_join(control, id, hello, keys_from, jn, err)) return -1;
    taas_ctl_client **ctl = &jn->ctl;
    const json_t *job = jn->spec;
    taas_offload off;
    if (taas_offload_parse(job, &off, err)) return -1;
    if (a->stream >= off.nstreams || a->worker >= off.workers[a->stream]) {
        taas_error_set(err, TAAS_ERR_USAGE, TAAS_NOPOS, "loader: --stream %lld --worker %lld is not in the job spec "
                       "(%u streams)", a->stream, a->worker, off.nstreams);
        taas_error_hint(err, "the kernel starts the loader workers with the right numbers");
        return -1;
    }
    uint32_t s = (uint32_t)a->stream, j = (uint32_t)a->worker, m = off.workers[s];
    const char *role = off.role[s];
    volatile int *stop = taas_ctl_client_stop_flag(*ctl);

    long long epochs, units, seed;
    if (taas_train_int(job, "the job spec", "epochs", 1, 1, TAAS_MAX_EPOCHS, &epochs, err) ||
        taas_train_int(job, "the job spec", "units", 0, 0, INT64_MAX, &units, err) ||
        taas_train_int(job, "the job spec", "seed", 0, 0, INT64_MAX, &seed, err))
        return -1;
    if (off.resume_epoch >= epochs) return 0;  /* nothing left to make */
    taas_fetcher *f = taas_cli_fetcher(err);
    if (!f) return -1;
    const json_t *spec = json_object_get(job, role);
    int train = !strcmp(role, "train");
    taas_train_rank none = {0, off.world, 0, NULL};  /* the sampler of W ranks, no pipeline of a rank */
    taas_train_loader l;
    taas_pipeline_cfg pc;
    taas_pipeline *p = NULL;
    taas_stream_send *snd = NULL;
    uint64_t *only = NULL;
    int rc = -1;
    json_t *start = NULL;
    if (taas_train_loader_open(spec, role, f, (uint64_t)seed, train ? (uint64_t)units : 0, (uint64_t)epochs, &none,
                             &l, err))
        goto out_fetcher;
    if (taas_train_pipeline_cfg(spec, &l, (uint64_t)seed, &pc, err)) goto out;
    pc.loader = j;
    pc.loaders = m;
    pc.first_epoch = (uint64_t)off.resume_epoch;
    pc.epochs = (uint64_t)(epochs - off.resume_epoch);
    if (off.resume_step > 0) {
        if (!(only = taas_train_resume_items(&l, (uint64_t)off.resume_step, j, m, &pc.n_only, err))) goto out;
        pc.only_items = only;
    }
    if (!(p = taas_pipeline_new(&pc, err))) goto out;
    if (!(start = taas_ctl_client_wait(*ctl, "start", START_TIMEOUT_S, NULL, NULL, err))) goto out;
    const json_t *ranks = json_object_get(start, "ranks");
    const char *eps[4096];
    if (!json_is_array(ranks) || json_array_size(ranks) != off.world || off.world > 4096) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the kernel's start message does not list the %u ranks", off.world);
        taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
        goto out;
    }
    for (uint32_t r = 0; r < off.world; r++) eps[r] = json_string_value(json_array_get(ranks, r));
    void *zctx = zmq_ctx_new();
    taas_zsec *sec = jn->curve && zctx ? taas_zsec_new(zctx, &jn->keys, 0, err) : NULL;
    taas_stream_send_cfg sc = {.zctx = zctx, .sec = sec, .stream = s, .worker = j, .world = off.world, .ranks = eps};
    if ((jn->curve && !sec) || !(snd = taas_stream_send_new(&sc, err))) {
        if (!zctx) taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot start ZeroMQ: out of file descriptors");
        taas_zsec_free(sec);
        if (zctx) zmq_ctx_term(zctx);
        goto out;
    }
    /* how busy it is, for a pool that sizes itself: the time it waited for the ranks'
     * credit is idle, the rest (making and sending) busy */
    double t_up = taas_now(), idle = 0, last_load = t_up;
    long long sent = 0;
    for (;;) {
        taas_batch *b = NULL;
        double now = taas_now();
        if (now - last_load >= LOAD_EVERY_S) {
            last_load = now;
            json_t *load = taas_ctl_body("load");
            json_object_set_new(load, "up_s", json_real(now - t_up));
            json_object_set_new(load, "idle_s", json_real(idle));
            json_object_set_new(load, "items", json_integer(sent));
            taas_error e;  /* a kernel that is gone is the heartbeat's to notice */
            taas_ctl_client_send(*ctl, load, NULL, 0, &e);
        }
        int r = taas_pipeline_next(p, &b, err);
        if (r < 0) break;
        if (r == 1) {
            /* every rank has acknowledged the end: all our batches arrived */
            r = taas_stream_send_end(snd, -1, stop, err);
            if (r == 0) taas_ctl_client_send(*ctl, taas_ctl_body("ended"), NULL, 0, err);
            if (r >= 0) rc = 0;
            break;
        }
        double t_send = taas_now();
        r = taas_stream_send_batch(snd, b, -1, stop, err);
        idle += taas_now() - t_send;
        sent += r == 0;
        if (r == 1) rc = 0;  /* cancelled */
        if (r) break;
    }
    taas_stream_send_free(snd);
    taas_zsec_free(sec);
    zmq_ctx_term(zctx);
out:
    json_decref(start);
    taas_pipeline_free(p);
    free(only);
    taas_train_loader_close(&l);
out_fetcher:
    taas_fetcher_free(f);
    return rc;
}

int taas_role_loader(int argc, char **argv) {
    const char *control = NULL, *help = NULL, *st = NULL, *wk = NULL, *gen = NULL, *keys_from = NULL;
    const taas_opt opts[] = {{"control", 1, &control}, {"stream", 1, &st}, {"worker", 1, &wk},
                             {"generation", 1, &gen}, {"keys-from", 1, &keys_from}, {"help", 0, &help},
                             {NULL, 0, NULL}};
    taas_error err;
    taas_error_clear(&err);
    loader_args a = {0, 0, 0};
    if (taas_cli_parse(argc, argv, opts, &err) ||
        (st && taas_cli_int("--stream", st, 0, 1, &a.stream, &err)) ||
        (wk && taas_cli_int("--worker", wk, 0, 255, &a.worker, &err)) ||
        (gen && taas_cli_int("--generation", gen, 0, 1000, &a.generation, &err))) {
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_USAGE;
    }
    if (help) {
        puts("usage: taas-worker loader --control ENDPOINT --stream S --worker J [--generation G]\n"
             "                          [--keys-from -|munge|PATH]\n\n"
             "Worker J of a registered DataLoader (stream S) of a job: joins the kernel's control\n"
             "endpoint (with the job's keys in $TAAS_JOB_KEYS when its planes are encrypted),\n"
             "receives the job spec, makes the items k % M == J of every epoch and streams each to\n"
             "rank k % W under its credit. The kernel starts it; G counts replacements.\n"
             "--keys-from: the job's keys are stdin's first line (-), and stdin's end is the\n"
             "kernel's (a worker started over ssh); or the MUNGE credential $TAAS_JOB_MUNGE (a job\n"
             "under Slurm); or a file of this host's, mode 0600.");
        return TAAS_EXIT_OK;
    }
    if (!control || !st || !wk) {
        taas_error_set(&err, TAAS_ERR_USAGE, TAAS_NOPOS, "loader: --control, --stream and --worker are required");
        taas_error_hint(&err, "the kernel starts the loader workers of a #pragma taas cell");
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN);
    taas_joined jn;
    int rc = run(control, &a, keys_from, &jn, &err);
    if (rc) taas_offload_report(jn.ctl, &err, -1);
    taas_offload_leave(&jn);
    return rc ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
