/* Planning a job, whatever the backend: the plan line, the backend's checks and addresses,
 * the control plane, the spec the workers are sent and the weights the model starts from. */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "buf.h"
#include "cpu.h"
#include "errnames.h"
#include "job_priv.h"
#include "jobctl.h"
#include "worker.h"

/* The weights files a model starts from are ours (safetensors of a model that fits in memory);
 * a bigger one is refused rather than read. */
#define MAX_INIT_WEIGHTS ((size_t)16 << 30)

/* "plan: 1 machine x 2 GPUs (g2.8), 2 loader workers for 'train', up to 6,400 samples" */
static void plan_line(const taas_job *j, const taas_pragma *pr, taas_buf *b) {
    taas_buf_printf(b, "plan: %d machine%s \xC3\x97 %d GPU%s", pr->machines, pr->machines == 1 ? "" : "s",
                    pr->ranks_per_machine, pr->ranks_per_machine == 1 ? "" : "s");
    if (pr->has_config) taas_buf_printf(b, " (%s)", pr->config.name);
    if (j->nstreams == 0) taas_buf_puts(b, ", no registered loader: each rank loads its own batches");
    for (int s = 0; s < j->nstreams; s++) {
        if (j->autosize) taas_buf_printf(b, ", 1 to %d loader workers (auto) for ", j->cpus);
        else taas_buf_printf(b, ", %d loader worker%s for ", j->cpus, j->cpus == 1 ? "" : "s");
        if (j->streams[s].name) taas_buf_printf(b, "'%s'", j->streams[s].name);
        else taas_buf_printf(b, "the %s loader", j->streams[s].role);
    }
    if (pr->units > 0) {
        taas_buf_puts(b, ", up to ");
        taas_buf_thousands(b, pr->units);
        taas_buf_puts(b, " samples\n");
    } else {
        taas_buf_puts(b, ", no sample limit\n");
    }
}

/* Batches in flight per loader-to-rank connection: a window of about 4 MiB, so that small
 * batches (64 x 28 x 28 floats: 0.2 MB) do not pay a credit message each, and large ones
 * (154 MB) stay at the minimum of 4 (bench/RESULTS.md, the data plane). */
static int credit_for(const taas_job_cfg *cfg) {
    double bytes = 0;
    for (int s = 0; s < cfg->nstreams; s++) {
        const json_t *shape = json_object_get(cfg->streams[s].facts, "shape");
        const json_t *loader = json_object_get(cfg->spec, cfg->streams[s].role);
        double b = (double)json_integer_value(json_object_get(loader, "batch_size")) * 4.0;
        for (size_t i = 0; i < json_array_size(shape); i++) b *= (double)json_integer_value(json_array_get(shape, i));
        if (b > bytes) bytes = b;
    }
    if (bytes <= 0) return 4;
    double c = ceil(4.0 * 1048576.0 / bytes);
    return c < 4 ? 4 : c > 64 ? 64 : (int)c;
}

/* The control plane: a ROUTER on the address the backend chose, CURVE when it leaves this
 * machine. A restarted worker keeps its name (handover); a send to a worker that is gone
 * fails instead of queueing (mandatory). */
static int bind_control(taas_job *j, taas_error *err) {
    j->zctx = zmq_ctx_new();
    if (!j->zctx) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "cannot open the job's control plane: %s", zmq_strerror(errno));
        taas_error_hint(err, "the kernel may be out of file descriptors; restart it");
        return -1;
    }
    if (j->curve && (taas_zkeys_new(&j->keys, err) || !(j->sec = taas_zsec_new(j->zctx, &j->keys, 1, err))))
        return -1;
    taas_zsock_cfg c = {.type = ZMQ_ROUTER, .what = "the job's control", .sec = j->sec, .linger_ms = 0,
                        .sndhwm = -1, .rcvhwm = -1, .maxmsg = (int64_t)MAX_INIT_WEIGHTS,
                        .flags = TAAS_ZSOCK_HANDOVER | TAAS_ZSOCK_MANDATORY};
    j->router = taas_zsock_bind(j->zctx, &c, j->bind, j->endpoint, sizeof j->endpoint, err);
    if (!j->router) return -1;
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(j->router, ZMQ_FD, &fd, &len) < 0) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "cannot watch the job's control plane: %s", zmq_strerror(errno));
        taas_error_hint(err, "restart the kernel");
        return -1;
    }
    taas_job_watch(j, fd);
    return 0;
}

/* The model's weights before the fit, when it has some: the workers may run where the
 * kernel's files are not, so they travel with the spec. */
int taas_job_read_weights(taas_job *j, const char *path, taas_error *err) {
    free(j->init_weights);
    j->init_weights = NULL;
    j->init_weights_len = 0;
    /* O_NONBLOCK: a FIFO put where the weights were is refused below, never waited on */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f) close(fd);
    struct stat st;
    if (!f || fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > MAX_INIT_WEIGHTS) {
        int e = errno;
        if (f) fclose(f);
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "cannot read the model's weights %s: %s", path,
                       f ? "not a regular file of at most 16 GiB" : strerror(e));
        taas_error_hint(err, "load(model, PATH) again, or build the model anew");
        return -1;
    }
    j->init_weights_len = (size_t)st.st_size;
    j->init_weights = malloc(j->init_weights_len ? j->init_weights_len : 1);
    size_t got = j->init_weights ? fread(j->init_weights, 1, j->init_weights_len, f) : 0;
    fclose(f);
    if (!j->init_weights || got != j->init_weights_len) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "cannot read the model's weights %s: %s", path,
                       j->init_weights ? "it changed while it was read" : "out of memory");
        taas_error_hint(err, "run the cell again");
        return -1;
    }
    return 0;
}

/* The kernel set the job asks its ranks for, and why: TAAS_CPU in the kernel's environment,
 * else the cluster section's "kernels" (config), else the checkpoint's that a resumed fit
 * goes on from (the spec's "kernels"), else none (-1: the best every rank's host runs). */
static int asked_kernels(taas_job *j, int config, taas_error *err) {
    const char *env = getenv("TAAS_CPU");
    const char *ckpt = json_string_value(json_object_get(j->spec, "kernels"));
    j->kernels_asked = -1;
    if (env && *env) {
        if ((j->kernels_asked = taas_cpu_parse(env)) < 0) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "TAAS_CPU=%.40s names no kernel set", env);
            taas_error_hint(err, "use avx512, avx2 or generic, or leave TAAS_CPU unset for the best every rank's host "
                                 "runs");
            return -1;
        }
        snprintf(j->kernels_why, sizeof j->kernels_why, "TAAS_CPU");
    } else if (config >= 0) {
        j->kernels_asked = config;
        snprintf(j->kernels_why, sizeof j->kernels_why, "\"kernels\" in %s", j->cluster.path);
    } else if (ckpt) {
        j->kernels_asked = taas_cpu_parse(ckpt);
        snprintf(j->kernels_why, sizeof j->kernels_why, "the checkpoint's, which the fit goes on from");
    }
    if (ckpt && j->kernels_asked >= 0 && taas_cpu_parse(ckpt) != j->kernels_asked) {
        size_t n = strlen(j->kernels_why);
        snprintf(j->kernels_why + n, sizeof j->kernels_why - n, "; the checkpoint's were %.16s: the numbers from "
                 "here on differ from an uninterrupted run's", ckpt);
    }
    return 0;
}

int taas_job_plan(taas_job *j, const taas_job_cfg *cfg, const taas_io *io, taas_error *err) {
    const taas_pragma *pr = cfg->pragma;
    j->offloaded = pr != NULL;
    j->pragma = pr;
    j->world = pr ? pr->gpus : 1;
    j->cpus = pr ? pr->cpus : 0;
    j->pool = j->cpus;
    if (pr && pr->cpus_auto) {  /* one loader each to start with, as many slots as it may grow to */
        j->autosize = 1;
        j->pool = pr->cpus;
        j->cpus = pr->cpus_max > 0 ? pr->cpus_max : TAAS_POOL_MAX_DEFAULT;
        if (j->cpus < j->pool) j->cpus = j->pool;
    }
    j->nstreams = pr ? (cfg->nstreams > 2 ? 2 : cfg->nstreams) : 0;
    for (int s = 0; s < j->nstreams; s++) {
        j->streams[s].role = cfg->streams[s].role;
        j->streams[s].name = NULL;
        if (cfg->streams[s].name) {
            snprintf(j->names[s], sizeof j->names[s], "%s", cfg->streams[s].name);
            j->streams[s].name = j->names[s];
        }
    }
    j->spec = json_deep_copy(cfg->spec);
    if (!j->spec) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the job spec");
    j->be = cfg->backend ? cfg->backend : &taas_backend_local;
    if (pr && !cfg->backend && taas_cluster_load(&j->cluster, err)) return -1;
    if (asked_kernels(j, pr && !cfg->backend ? j->cluster.kernels : -1, err)) return -1;
    static const taas_backend *const backends[] = {&taas_backend_local, &taas_backend_ssh, &taas_backend_slurm};
    for (size_t i = 0; pr && !cfg->backend && i < sizeof backends / sizeof backends[0]; i++)
        if (!strcmp(j->cluster.backend, backends[i]->name)) j->be = backends[i];
    if (pr) {
        taas_buf b = TAAS_BUF_INIT;
        plan_line(j, pr, &b);
        int rc = taas_job_cost_plan(j, cfg, &b, err);
        io->stream(io->ctx, "stdout", b.data);
        taas_buf_free(&b);
        if (rc) return -1;
    }
    if (taas_worker_find(j->worker_path, sizeof j->worker_path, err) || j->be->plan(j, io, err) ||
        bind_control(j, err) || (json_is_string(json_object_get(j->spec, "weights")) &&
                                 taas_job_read_weights(j, json_string_value(json_object_get(j->spec, "weights")), err)))
        return -1;
    j->pragma = NULL;

    json_t *off = json_object(), *streams = json_array();
    for (int s = 0; s < j->nstreams; s++) {
        json_t *st = json_pack("{s:s, s:i}", "role", j->streams[s].role, "workers", j->pool);
        if (j->autosize) json_object_set_new(st, "slots", json_integer(j->cpus));
        const json_t *facts = cfg->streams[s].facts;
        if (facts)  /* the ranks need the size and shape only: they need not open the data */
            json_object_set_new(st, "facts", json_pack("{s:O, s:O, s:O, s:b}", "size", json_object_get(facts, "size"),
                                                       "shape", json_object_get(facts, "shape"), "num_classes",
                                                       json_object_get(facts, "num_classes"), "tokens",
                                                       json_is_true(json_object_get(facts, "tokens"))));
        json_array_append_new(streams, st);
    }
    json_object_set_new(off, "id", json_string(j->id));
    json_object_set_new(off, "world", json_integer(j->world));
    json_object_set_new(off, "streams", streams);
    json_object_set_new(off, "credit", json_integer(credit_for(cfg)));
    json_object_set_new(j->spec, "offload", off);
    if (pr) json_object_set_new(j->spec, "threads", json_integer(j->threads));
    if (pr && pr->units > 0) json_object_set_new(j->spec, "units", json_integer(pr->units));
    json_t *epochs = json_object_get(j->spec, "epochs");
    j->epochs = json_is_integer(epochs) ? (long long)json_integer_value(epochs) : 1;
    return 0;
}
