/* taas-worker trainer: one rank of a job, started by mpirun (or alone, --solo, as the one
 * rank of a job of one). It says hello to the kernel's control endpoint, gets the job spec
 * (and the model's starting weights), binds its data plane (batches of registered loaders
 * arrive there from loader workers) and tells the kernel where, runs the fit loop as rank r
 * of W with Open MPI's sums, and rank 0 sends the kernel the progress, the history and the
 * trained weights. Nothing is written to the disk but private files (offload.h: unlinked
 * as they are made) of the starting weights, rank 0's checkpoint and its last weights. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "collective.h"
#include "cpu.h"
#include "engine.h"
#include "errnames.h"
#include "fit_loop.h"
#include "jobctl.h"
#include "offload.h"
#include "role.h"
#include "stream_recv.h"
#include "train_job.h"

typedef struct rank_ctx {
    taas_collective coll;
    taas_offload off;
    taas_joined job;
    taas_ctl_client *ctl;
    void *zctx;
    taas_zsec *sec;
    taas_stream_recv *recv;
    int stream[2];            /* the train and validate streams, or -1 */
    volatile int *stop;
    int ckpt_fd;              /* rank 0's checkpoint file (taas_offload_private), or -1 */
} rank_ctx;

typedef struct stream_src {
    rank_ctx *rc;
    uint32_t stream;
} stream_src;

static int stream_take(void *ctx, uint64_t epoch, uint64_t k, taas_batch **out, taas_error *err) {
    stream_src *s = ctx;
    return taas_stream_recv_take(s->rc->recv, s->stream, epoch, k, -1, s->rc->stop, out, err);
}

/* Progress lines go to the kernel as control messages: {"event": X, ...} becomes {"t": X, ...}. */
static void emit_ctl(void *ctx, json_t *line) {
    rank_ctx *rc = ctx;
    const char *ev = json_string_value(json_object_get(line, "event"));
    json_object_set_new(line, "t", json_string(ev ? ev : "log"));
    json_object_del(line, "event");
    taas_error e;
    taas_ctl_client_send(rc->ctl, line, NULL, 0, &e);
}

/* A file rank 0 wrote, for the kernel: the message body (stolen) with the file's bytes. */
static int send_file(rank_ctx *rc, const char *path, json_t *body, taas_error *err) {
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n = 0;
    if (fp && fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) > 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (fp) fclose(fp);
    if (!buf) {
        json_decref(body);
        return taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "rank 0 cannot read back the file it wrote (%s)", path);
    }
    int r = taas_ctl_client_send(rc->ctl, body, buf, (size_t)n, err);
    free(buf);
    return r;
}

/* Rank 0's weights as safetensors bytes: written to a private file, read back. */
static int send_done(rank_ctx *rc, taas_fit *f, taas_error *err) {
    char p[64];
    int fd = taas_offload_private(p, sizeof p, "taas-rank0", err);
    if (fd < 0) return -1;
    int r = taas_fit_save(f, p, err);
    json_t *done = r ? NULL : taas_fit_done(f);
    if (done) {
        json_object_set_new(done, "t", json_string("done"));
        json_object_del(done, "event");
        r = send_file(rc, p, done, err);
    }
    close(fd);
    return r;
}

/* A checkpoint rank 0 wrote: to the kernel, which keeps it (docs/jobspec.md). */
static int send_checkpoint(void *ctx, const char *path, const json_t *info, taas_error *err) {
    json_t *body = json_deep_copy(info);
    json_object_set_new(body, "t", json_string("checkpoint"));
    return send_file(ctx, path, body, err);
}

/* One rank per GPU: the device from the rank's place on its machine (Open MPI's local rank),
 * or -1 (the CPU) where there is none. */
static int rank_device(void) {
    int n = taas_engine_cuda_devices();
    if (n <= 0) return -1;
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    return (lr ? atoi(lr) : 0) % n;
}

/* Does a pool size itself (its accepted workers beyond what it started with)? */
static int sized(const taas_offload *o) {
    for (uint32_t s = 0; s < o->nstreams; s++)
        if (o->slots[s] != o->workers[s]) return 1;
    return 0;
}

static int run(rank_ctx *rc, const char *control, const char *keys_file, long long *step, taas_error *err) {
    char id[32];
    snprintf(id, sizeof id, "rank.%d", rc->coll.rank);
    /* the set this host runs (TAAS_CPU may lower it): the kernel gives every rank the lowest */
    json_t *hello = json_pack("{s:s, s:i, s:s}", "role", "trainer", "rank", rc->coll.rank, "cpu",
                              taas_cpu_set_name(taas_cpu_kernels()));
    int joined = taas_offload_join(control, id, hello, keys_file, &rc->job, err);
    rc->ctl = rc->job.ctl;
    if (joined) return -1;
    const json_t *job = rc->job.spec;
    if (taas_offload_parse(job, &rc->off, err)) return -1;
    if ((uint32_t)rc->coll.world != rc->off.world) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%d ranks were started, the job spec asks for %u",
                       rc->coll.world, rc->off.world);
        taas_error_hint(err, "the kernel starts the ranks; run the cell again");
        return -1;
    }
    const char *kind = json_string_value(json_object_get(job, "job"));
    if (kind && !strcmp(kind, "evaluate")) {  /* one rank's evaluation: its result is the done */
        json_t *done = taas_evaluate_spec(job, err);
        if (!done) return -1;
        json_object_set_new(done, "t", json_string("done"));
        json_object_del(done, "event");
        return taas_ctl_client_send(rc->ctl, done, NULL, 0, err);
    }
    rc->stream[0] = taas_offload_stream_of(&rc->off, "train");
    rc->stream[1] = taas_offload_stream_of(&rc->off, "validate");
    rc->zctx = zmq_ctx_new();
    if (!rc->zctx) return taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot start ZeroMQ: out of file descriptors");
    char endpoint[256] = "";
    if (rc->off.nstreams) {
        char bind[256];
        if (taas_offload_bind(&rc->off, control, bind, sizeof bind, err)) return -1;
        if (rc->job.curve && !(rc->sec = taas_zsec_new(rc->zctx, &rc->job.keys, 1, err))) return -1;
        taas_stream_recv_cfg sc = {.zctx = rc->zctx, .sec = rc->sec, .bind = bind, .rank = (uint32_t)rc->coll.rank,
                                   .world = rc->off.world, .nstreams = rc->off.nstreams, .workers = rc->off.slots,
                                   .sized = sized(&rc->off),
                                   .credit = rc->off.credit};
        if (!(rc->recv = taas_stream_recv_new(&sc, err))) return -1;
        snprintf(endpoint, sizeof endpoint, "%s", taas_stream_recv_endpoint(rc->recv));
    }
    if (taas_ctl_client_send(rc->ctl, json_pack("{s:s, s:s}", "t", "ready", "data", endpoint), NULL, 0, err))
        return -1;
    rc->stop = taas_ctl_client_stop_flag(rc->ctl);
    char ckpt[64] = "";  /* rank 0's checkpoint, written there and sent */
    if (rc->coll.rank == 0 && (rc->ckpt_fd = taas_offload_private(ckpt, sizeof ckpt, "taas-ckpt", err)) < 0)
        return -1;
    taas_fit_cfg cfg = {.job = job,
                        .coll = &rc->coll,
                        .streamed_train = rc->stream[0] >= 0,
                        .streamed_val = rc->stream[1] >= 0,
                        .train_facts = rc->stream[0] >= 0 ? rc->off.facts[rc->stream[0]] : NULL,
                        .val_facts = rc->stream[1] >= 0 ? rc->off.facts[rc->stream[1]] : NULL,
                        .emit = emit_ctl,
                        .emit_ctx = rc,
                        .checkpointed = rc->coll.rank == 0 ? send_checkpoint : NULL,
                        .checkpoint_path = ckpt[0] ? ckpt : NULL,
                        .stop = rc->stop,
                        .device = rank_device()};
    taas_fit *f = taas_fit_new(&cfg, err);
    if (!f) return -1;
    stream_src srcs[2] = {{rc, (uint32_t)rc->stream[0]}, {rc, (uint32_t)rc->stream[1]}};
    if (rc->stream[0] >= 0) taas_fit_set_source(f, "train", (taas_fit_source){stream_take, &srcs[0]});
    if (rc->stream[1] >= 0) taas_fit_set_source(f, "validate", (taas_fit_source){stream_take, &srcs[1]});
    int r = taas_fit_run(f, step, err);
    if (r == 0 && rc->coll.rank == 0) r = send_done(rc, f, err);
    taas_fit_free(f);
    return r;
}

int taas_role_trainer(int argc, char **argv) {
    const char *control = NULL, *solo = NULL, *keys_file = NULL, *help = NULL;
    const taas_opt opts[] = {{"control", 1, &control}, {"solo", 0, &solo}, {"keys-from", 1, &keys_file},
                             {"help", 0, &help}, {NULL, 0, NULL}};
    taas_error err;
    taas_error_clear(&err);
    if (taas_cli_parse(argc, argv, opts, &err)) {
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_USAGE;
    }
    if (help) {
        puts("usage: mpirun -np W taas-worker trainer --control ENDPOINT [--keys-from munge|PATH]\n"
             "       taas-worker trainer --control ENDPOINT --solo\n\n"
             "One rank of a job: joins the kernel's control endpoint (with the job's keys in\n"
             "$TAAS_JOB_KEYS when its planes are encrypted), receives the job spec, trains rank r's\n"
             "share of every step, sums the gradients with the other ranks over MPI (--solo: the\n"
             "one rank of a job of one, no MPI) and reports to the kernel. --keys-from: the job's\n"
             "keys are in this file of the host's, mode 0600 (a job over ssh), or in the MUNGE\n"
             "credential $TAAS_JOB_MUNGE (a job under Slurm).");
        return TAAS_EXIT_OK;
    }
    if (!control) {
        taas_error_set(&err, TAAS_ERR_USAGE, TAAS_NOPOS, "trainer: --control is required");
        taas_error_hint(&err, "the kernel starts the ranks of a job with its control endpoint");
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN);
    rank_ctx rc;
    memset(&rc, 0, sizeof rc);
    rc.ckpt_fd = -1;
    if (solo) {
        rc.coll = taas_collective_solo();
    } else if (taas_collective_mpi_init(&argc, &argv, &rc.coll, &err)) {
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_ERROR;
    }
    long long step = 0;
    int r = run(&rc, control, keys_file, &step, &err);
    if (rc.ckpt_fd >= 0) close(rc.ckpt_fd);
    if (r) {
        taas_offload_name_weights(&rc.job, &err);  /* the user's file, not this rank's copy */
        taas_offload_report(rc.ctl, &err, step);
    }
    int gone = rc.ctl && taas_ctl_client_kernel_gone(rc.ctl);
    taas_offload_leave(&rc.job);  /* sends what is queued: the error, or done and the weights */
    taas_stream_recv_free(rc.recv);
    taas_zsec_free(rc.sec);
    if (rc.zctx) zmq_ctx_term(rc.zctx);
    if (solo) return r ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
    /* a failure on one rank leaves the others waiting in their next sum: end them all */
    if (r && !gone) taas_collective_mpi_abort(TAAS_EXIT_ERROR);
    taas_collective_mpi_finalize();
#ifdef __SANITIZE_ADDRESS__
    /* Open MPI keeps allocations until exit on purpose, many in components it has unloaded by
     * then, which no leak suppression can name: a rank of the sanitizer build skips the
     * leak check at exit (memory errors are still caught as they happen). The same training
     * code is leak-checked in the train role, the data plane in its unit tests. */
    fflush(NULL);
    _exit(r ? TAAS_EXIT_ERROR : TAAS_EXIT_OK);
#endif
    return r ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
