/* The local backend: every process of the job on this machine. The ranks run under Open
 * MPI's mpirun (one rank: the worker alone, no MPI), each loader worker is a process of its
 * own; all in sessions of their own with PR_SET_PDEATHSIG (proc.h). The planes are ipc://
 * sockets in the job folder, which is mode 0700: no other user of the machine can connect. */
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend_procs.h"
#include "buf.h"
#include "errnames.h"
#include "worker.h"

typedef struct local_state {
    char mpirun[PATH_MAX];
    job_procs procs;       /* mpirun (or the one rank), the loaders */
} local_state;

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
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "taas-worker gpus did not answer with the machine's GPUs");
        taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
        return -1;
    }
    *gpus = json_incref(json_object_get(j, "gpus"));
    json_decref(j);
    return 0;
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* This machine holds one machine's worth of ranks, on its GPUs or its CPU. */
static int check_machine(taas_job *j, const taas_pragma *pr, const taas_io *io, taas_error *err) {
    if (pr->machines > 1) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, (taas_srcpos){pr->line, 1},
                       "--gpus %d with %s (%d GPUs a machine) needs %d machines, but the local backend runs "
                       "on this machine only", pr->gpus, pr->config.name, pr->config.gpus_per_machine, pr->machines);
        taas_error_hint(err, "ask for at most %d GPUs here (--gpus %d), or configure a cluster (docs/cluster.md)",
                        pr->config.gpus_per_machine, pr->config.gpus_per_machine);
        return -1;
    }
    json_t *list;
    if (taas_gpu_list(&list, err)) return -1;
    int gpus = (int)json_array_size(list);
    if (gpus > 0 && gpus < pr->gpus) {
        json_decref(list);
        taas_error_set(err, TAAS_ERR_OFFLOAD, (taas_srcpos){pr->line, 1},
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

static int local_plan(taas_job *j, const taas_io *io, taas_error *err) {
    local_state *st = calloc(1, sizeof *st);
    if (!st) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory planning the job");
    j->be_state = st;
    int cores = online_cpus();
    j->threads = cores / j->world > 1 ? cores / j->world : 1;
    /* the folder is mkdtemp's (0700): its sockets are this user's alone */
    struct sockaddr_un sa;
    if (strlen(j->dir) + sizeof "/data-65535" > sizeof sa.sun_path ||
        (size_t)snprintf(j->bind, sizeof j->bind, "ipc://%s/control", j->dir) >= sizeof j->bind ||
        (size_t)snprintf(j->rank_bind, sizeof j->rank_bind, "ipc://%s/data-", j->dir) >= sizeof j->rank_bind) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "the job folder %s is too long a path for the job's local "
                       "sockets (at most %zu bytes)", j->dir, sizeof sa.sun_path - sizeof "/data-65535");
        taas_error_hint(err, "set TMPDIR to a shorter folder before starting Jupyter");
        return -1;
    }
    j->curve = 0;
    if (j->offloaded && check_machine(j, j->pragma, io, err)) return -1;
    if (j->world > 1 && taas_program_find("mpirun", "TAAS_MPIRUN", "openmpi-bin", st->mpirun, sizeof st->mpirun, err))
        return -1;
    return 0;
}

static taas_proc *spawn(taas_job *j, const char *what, char **argv, taas_error *err) {
    char threads[2][48];
    char **env = taas_procs_env(j, NULL, threads);
    taas_proc *p = taas_procs_spawn(j, what, argv, env, NULL, 0, err);
    free(env);
    return p;
}

static int local_launch_ranks(taas_job *j, taas_error *err) {
    local_state *st = j->be_state;
    if (j->world == 1) {
        char *argv[] = {j->worker_path, "trainer", "--control", j->endpoint, "--solo", NULL};
        st->procs.ranks = spawn(j, j->offloaded ? "rank 0" : "taas-worker", argv, err);
        return st->procs.ranks ? 0 : -1;
    }
    char np[16];
    snprintf(np, sizeof np, "%d", j->world);
    /* Open MPI's own sockets stay on this machine: its out-of-band channel on the loopback,
     * and the ranks' messages through shared memory, with no TCP listener of their own. */
    char *argv[] = {st->mpirun, "-np", np, "--oversubscribe", "--bind-to", "none",
                    "--mca", "oob_tcp_if_include", "lo", "--mca", "btl", "self,vader",
                    j->worker_path, "trainer", "--control", j->endpoint, NULL};
    st->procs.ranks = spawn(j, "mpirun", argv, err);
    st->procs.mpirun = 1;
    return st->procs.ranks ? 0 : -1;
}

static int local_launch_loader(taas_job *j, job_loader *l, taas_error *err) {
    local_state *st = j->be_state;
    if (!st->procs.loaders && !(st->procs.loaders = calloc((size_t)j->nloaders, sizeof *st->procs.loaders)))
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting a loader");
    int i = (int)(l - j->loaders);
    char s[16], w[16], g[16], what[80];
    snprintf(s, sizeof s, "%d", l->stream);
    snprintf(w, sizeof w, "%d", l->worker);
    snprintf(g, sizeof g, "%d", l->gen);
    taas_job_loader_label(j, l, what, sizeof what);
    char *argv[] = {j->worker_path, "loader", "--control", j->endpoint, "--stream", s, "--worker", w,
                    "--generation", g, NULL};
    taas_proc *p = spawn(j, what, argv, err);
    taas_procs_set(j, &st->procs, i, p);
    return p ? 0 : -1;
}

static void local_watch(taas_job *j) {
    local_state *st = j->be_state;
    taas_procs_watch(j, &st->procs);
}

static void local_cancel(taas_job *j) {
    local_state *st = j->be_state;
    /* mpirun's ranks by their pids from their hellos: they are not in mpirun's session */
    for (int r = 0; j->ranks && r < j->world; r++)
        if (j->ranks[r].hello && j->ranks[r].pid > 0 && st->procs.ranks && !st->procs.ranks->exited)
            kill(j->ranks[r].pid, SIGKILL);
    taas_procs_kill(j, &st->procs);
}

static int remove_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

/* mpirun's session folder ($TMPDIR/ompi.HOST.UID/pid.PID, Open MPI 4), which it removes when
 * it ends by itself but not when the kernel kills it (a stop, a failed rank, the kernel's
 * shutdown): the kernel, its owner, removes it then. */
static void remove_mpirun_session(pid_t pid) {
    const char *tmp = getenv("TMPDIR");
    char host[256] = "", top[PATH_MAX], dir[PATH_MAX];
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = '\0';  /* Open MPI's node name: the host's short name */
    if ((size_t)snprintf(top, sizeof top, "%s/ompi.%s.%u", tmp && *tmp ? tmp : "/tmp", host, (unsigned)getuid()) >=
            sizeof top ||
        (size_t)snprintf(dir, sizeof dir, "%s/pid.%d", top, (int)pid) >= sizeof dir)
        return;
    /* only a real folder of this user's: in a shared /tmp another may have put a link there */
    struct stat sb;
    if (lstat(top, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid()) return;
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(top);  /* when no other mpirun of this user's still has its folder there */
}

static void local_reset(taas_job *j) {
    local_state *st = j->be_state;
    pid_t mpirun = st->procs.mpirun && st->procs.ranks ? st->procs.ranks->pid : 0;
    taas_procs_free(j, &st->procs);  /* mpirun ends here, if it had not */
    if (mpirun > 0) remove_mpirun_session(mpirun);
    /* a rank that was killed leaves its socket's file: the folder may outlive the job (it
     * holds the model's weights) */
    for (int r = 0; r < j->world; r++) {
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/data-%d", j->dir, r) < sizeof path) unlink(path);
    }
}

static void local_free(taas_job *j) {
    local_reset(j);
    free(j->be_state);
    j->be_state = NULL;
}

const taas_backend taas_backend_local = {
    .name = "local",
    .plan = local_plan,
    .launch_ranks = local_launch_ranks,
    .launch_loader = local_launch_loader,
    .watch = local_watch,
    .cancel = local_cancel,
    .free = local_free,
    .reset = local_reset,
};
