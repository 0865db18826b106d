/* Planning an offloaded job and starting its processes on this machine (the local
 * backend): the ranks under mpirun, each loader worker as a process of its own. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <zmq.h>

#include "buf.h"
#include "job_priv.h"
#include "worker.h"

extern char **environ;

static const taas_srcpos NOPOS = {0, 0};

int taas_gpu_list(json_t **gpus, taas_error *err) {
    static const char *const args[] = {NULL};
    taas_buf out = TAAS_BUF_INIT;
    *gpus = NULL;
    /* the worker loads the CUDA plugin (the kernel does not), which asks the driver */
    if (taas_worker_run("gpus", args, NULL, 0, taas_worker_timeout("TAAS_GPUS_TIMEOUT", 30.0), "TAAS_GPUS_TIMEOUT", -1,
                        &out, err)) {
        taas_buf_free(&out);
        return -1;
    }
    json_t *j = out.data ? json_loads(out.data, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    taas_buf_free(&out);
    if (!json_is_array(json_object_get(j, "gpus"))) {
        json_decref(j);
        taas_error_set(err, "TaasOffloadError", NOPOS, "taas-worker gpus did not answer with the machine's GPUs");
        taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
        return -1;
    }
    *gpus = json_incref(json_object_get(j, "gpus"));
    json_decref(j);
    return 0;
}

void taas_job_watch(taas_job *j, int fd) {
    if (fd < 0) return;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(j->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* "plan: 1 machine x 2 GPUs (g2.8), 2 loader workers for 'train', up to 6,400 samples" */
static void plan_line(const taas_job *j, const taas_pragma *pr, taas_buf *b) {
    taas_buf_printf(b, "plan: %d machine%s \xC3\x97 %d GPU%s", pr->machines, pr->machines == 1 ? "" : "s",
                    pr->ranks_per_machine, pr->ranks_per_machine == 1 ? "" : "s");
    if (pr->has_config) taas_buf_printf(b, " (%s)", pr->config.name);
    if (j->nstreams == 0) taas_buf_puts(b, ", no registered loader: each rank loads its own batches");
    for (int s = 0; s < j->nstreams; s++) {
        taas_buf_printf(b, ", %d loader worker%s for ", j->cpus, j->cpus == 1 ? "" : "s");
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

/* The local backend is this machine: one machine's worth of ranks, on its GPUs or its CPU. */
static int check_machine(taas_job *j, const taas_pragma *pr, const taas_io *io, taas_error *err) {
    if (pr->machines > 1) {
        taas_error_set(err, "TaasOffloadError", (taas_srcpos){pr->line, 1},
                       "--gpus %d with %s (%d GPUs a machine) needs %d machines, but the local backend runs "
                       "on this machine only", pr->gpus, pr->config.name, pr->config.gpus_per_machine, pr->machines);
        taas_error_hint(err, "ask for at most %d GPUs here (--gpus %d), or run the kernel where a multi-machine "
                             "backend is configured", pr->config.gpus_per_machine, pr->config.gpus_per_machine);
        return -1;
    }
    json_t *list;
    if (taas_gpu_list(&list, err)) return -1;
    int gpus = (int)json_array_size(list);
    if (gpus > 0 && gpus < pr->gpus) {
        json_decref(list);
        taas_error_set(err, "TaasOffloadError", (taas_srcpos){pr->line, 1},
                       "--gpus %d asks for more GPUs than this machine has (%d)", pr->gpus, gpus);
        taas_error_hint(err, "use --gpus %d or fewer", gpus);
        return -1;
    }
    taas_buf line = TAAS_BUF_INIT;
    if (gpus == 0) {
        taas_buf_printf(&line, "no GPU on this machine: the %d rank%s train%s on the CPU, %d thread%s each\n",
                        j->world, j->world == 1 ? "" : "s", j->world == 1 ? "s" : "", j->threads,
                        j->threads == 1 ? "" : "s");
    } else {
        const json_t *g0 = json_array_get(list, 0);
        taas_buf_printf(&line, "GPUs: the %d rank%s train%s on %d of this machine's %d (%s, %.0f GiB%s)\n", j->world,
                        j->world == 1 ? "" : "s", j->world == 1 ? "s" : "", j->world, gpus,
                        json_string_value(json_object_get(g0, "name")),
                        json_number_value(json_object_get(g0, "memory_bytes")) / 1073741824.0,
                        gpus > 1 ? " each" : "");
    }
    io->stream(io->ctx, "stdout", line.data);
    taas_buf_free(&line);
    json_decref(list);
    return 0;
}

static int bind_control(taas_job *j, taas_error *err) {
    j->zctx = zmq_ctx_new();
    j->router = j->zctx ? zmq_socket(j->zctx, ZMQ_ROUTER) : NULL;
    if (!j->router) goto fail;
    int linger = 0, one = 1;
    zmq_setsockopt(j->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(j->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(j->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);  /* a restarted worker keeps its name */
    if (zmq_bind(j->router, "tcp://127.0.0.1:*") < 0) goto fail;
    size_t len = sizeof j->endpoint;
    if (zmq_getsockopt(j->router, ZMQ_LAST_ENDPOINT, j->endpoint, &len) < 0) goto fail;
    int fd;
    len = sizeof fd;
    if (zmq_getsockopt(j->router, ZMQ_FD, &fd, &len) < 0) goto fail;
    taas_job_watch(j, fd);
    return 0;
fail:
    taas_error_set(err, "TaasOffloadError", NOPOS, "cannot open the job's control plane: %s", zmq_strerror(errno));
    taas_error_hint(err, "the kernel may be out of file descriptors; restart it");
    return -1;
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

int taas_job_plan(taas_job *j, const taas_job_cfg *cfg, const taas_io *io, taas_error *err) {
    const taas_pragma *pr = cfg->pragma;
    j->world = pr->gpus;
    j->cpus = pr->cpus;
    j->nstreams = cfg->nstreams > 2 ? 2 : cfg->nstreams;
    for (int s = 0; s < j->nstreams; s++) {
        j->streams[s].role = cfg->streams[s].role;
        j->streams[s].name = NULL;
        if (cfg->streams[s].name) {
            snprintf(j->names[s], sizeof j->names[s], "%s", cfg->streams[s].name);
            j->streams[s].name = j->names[s];
        }
    }
    int cores = online_cpus();
    j->threads = cores / j->world > 1 ? cores / j->world : 1;
    taas_buf b = TAAS_BUF_INIT;
    plan_line(j, pr, &b);
    io->stream(io->ctx, "stdout", b.data);
    taas_buf_free(&b);
    if (check_machine(j, pr, io, err) || taas_worker_find(j->worker_path, sizeof j->worker_path, err) ||
        taas_program_find("mpirun", "TAAS_MPIRUN", "openmpi-bin", j->mpirun_path, sizeof j->mpirun_path, err) ||
        bind_control(j, err))
        return -1;

    json_t *spec = cfg->spec, *off = json_object(), *streams = json_array();
    for (int s = 0; s < j->nstreams; s++) {
        json_t *st = json_pack("{s:s, s:i}", "role", j->streams[s].role, "workers", j->cpus);
        const json_t *facts = cfg->streams[s].facts;
        if (facts)  /* the ranks need the size and shape only: they need not open the data */
            json_object_set_new(st, "facts", json_pack("{s:O, s:O, s:O}", "size", json_object_get(facts, "size"),
                                                       "shape", json_object_get(facts, "shape"), "num_classes",
                                                       json_object_get(facts, "num_classes")));
        json_array_append_new(streams, st);
    }
    json_object_set_new(off, "id", json_string(j->id));
    json_object_set_new(off, "control", json_string(j->endpoint));
    json_object_set_new(off, "world", json_integer(j->world));
    json_object_set_new(off, "streams", streams);
    json_object_set_new(off, "credit", json_integer(credit_for(cfg)));
    json_object_set_new(off, "bind", json_string("tcp://127.0.0.1:*"));
    json_object_set_new(spec, "offload", off);
    json_object_set_new(spec, "threads", json_integer(j->threads));
    if (pr->units > 0) json_object_set_new(spec, "units", json_integer(pr->units));
    snprintf(j->spec_path, sizeof j->spec_path, "%s/spec.json", j->dir);
    if (json_dump_file(spec, j->spec_path, JSON_COMPACT | JSON_SORT_KEYS)) {
        taas_error_set(err, "TaasOffloadError", NOPOS, "cannot write the job spec %s: %s", j->spec_path,
                       strerror(errno));
        taas_error_hint(err, "the temporary folder ($TMPDIR or /tmp) must be writable with free space");
        return -1;
    }
    json_t *epochs = json_object_get(spec, "epochs");
    j->epochs = json_is_integer(epochs) ? (long long)json_integer_value(epochs) : 1;
    return 0;
}

/* The kernel's environment, plus what mpirun needs: running as root is refused unless
 * asked for (a container's root is the usual case), idle ranks should yield the CPU to the
 * loaders, and the compute threads are the job's. malloc'd, NULL-terminated. */
static char **job_env(const taas_job *j, char threads[2][48]) {
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 8, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "OMP_NUM_THREADS=", 16) && strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21))
            env[k++] = environ[i];
    snprintf(threads[0], sizeof threads[0], "OMP_NUM_THREADS=%d", j->threads);
    snprintf(threads[1], sizeof threads[1], "OPENBLAS_NUM_THREADS=%d", j->threads);
    env[k++] = threads[0];
    env[k++] = threads[1];
    env[k++] = "OMPI_MCA_mpi_yield_when_idle=1";
    if (geteuid() == 0) {
        env[k++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
        env[k++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    }
    env[k] = NULL;
    return env;
}

int taas_job_launch_ranks(taas_job *j, taas_error *err) {
    char np[16];
    snprintf(np, sizeof np, "%d", j->world);
    char *argv[] = {(char *)j->mpirun_path, "-np", np, "--oversubscribe", "--bind-to", "none",
                    (char *)j->worker_path, "trainer", "--spec", j->spec_path, NULL};
    char extra[2][48];
    char **env = job_env(j, extra);
    if (!env) return taas_error_set(err, "TaasMemoryError", NOPOS, "out of memory starting the ranks");
    j->mpirun = taas_proc_spawn("mpirun", argv, env, err);
    free(env);
    if (!j->mpirun) return -1;
    taas_job_watch(j, j->mpirun->out_fd);
    taas_job_watch(j, j->mpirun->pidfd);
    return 0;
}

int taas_job_launch_loader(taas_job *j, job_loader *l, long long epoch, long long step, taas_error *err) {
    char s[16], w[16], g[16], e[24], t[24], what[48];
    snprintf(s, sizeof s, "%d", l->stream);
    snprintf(w, sizeof w, "%d", l->worker);
    snprintf(g, sizeof g, "%d", l->gen);
    snprintf(e, sizeof e, "%lld", epoch);
    snprintf(t, sizeof t, "%lld", step);
    snprintf(what, sizeof what, "loader %s.%d", j->streams[l->stream].name ? j->streams[l->stream].name
                                                                          : j->streams[l->stream].role, l->worker);
    snprintf(l->peer, sizeof l->peer, "loader.%d.%d.%d", l->stream, l->worker, l->gen);
    char *argv[] = {(char *)j->worker_path, "loader", "--spec", j->spec_path, "--stream", s, "--worker", w,
                    "--generation", g, "--resume-epoch", e, "--resume-step", t, NULL};
    char extra[2][48];
    char **env = job_env(j, extra);
    if (!env) return taas_error_set(err, "TaasMemoryError", NOPOS, "out of memory starting a loader");
    taas_proc_free(l->proc);
    l->proc = taas_proc_spawn(what, argv, env, err);
    free(env);
    l->hello = l->started = l->ended = 0;
    if (!l->proc) return -1;
    taas_job_watch(j, l->proc->out_fd);
    taas_job_watch(j, l->proc->pidfd);
    return 0;
}
