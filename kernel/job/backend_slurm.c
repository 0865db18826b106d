/* The slurm backend: a cell's job is one heterogeneous Slurm allocation, made with
 * `salloc --no-shell` — component 0 the ranks' nodes (the cell's #! configuration: its
 * partition, constraint, gres; its GPUs a node as tasks a node), component 1 the loader
 * workers (the cluster section's "loaders" configuration) — and job steps in it: the ranks
 * as one `srun --mpi=pmix` step (Open MPI's PMIx under Slurm), each loader worker as a step of
 * one task. The kernel runs salloc and srun as its own processes, so it sees every step end;
 * the stop button, a failure and the end cancel the allocation (scancel), and a small reaper
 * process, whose stdin is a pipe from the kernel, cancels it when the kernel dies. The job's
 * keys travel in MUNGE credentials (one per task: munged decodes each once), made when the
 * allocation is granted, restricted to this user: Slurm carries a step's environment in the
 * clear. docs/cluster.md has the whole story. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_procs.h"
#include "buf.h"
#include "clock.h"
#include "errnames.h"
#include "worker.h"

extern char **environ;

static int slurm_why(taas_job *j, const taas_proc *p, char *out, size_t n);

/* Slurm says the allocation's end in the steps' words, in whichever step's output it comes
 * first: a preemption ("*** STEP 40.1 ON cpu1 CANCELLED AT ... DUE TO PREEMPTION ***"), a node
 * that failed (srun tells every step of the job: "srun: error: Node failure on gpu2"), a step
 * asked of an allocation that is ending ("Job/step already completing or completed"). */
static void slurm_line(taas_job *j, const char *text) {
    if (strstr(text, "DUE TO PREEMPTION")) j->preempted = j->allocation_gone = 1;
    if (strstr(text, "Node failure on ") || strstr(text, "already completing or completed")) j->allocation_gone = 1;
}

/* Seconds for a Slurm client command that answers at once (sinfo, squeue, scancel). */
#define CLIENT_S 30.0

typedef struct slurm_state {
    char salloc[PATH_MAX], srun[PATH_MAX], scancel[PATH_MAX], sinfo[PATH_MAX], squeue[PATH_MAX];
    char sbatch[PATH_MAX], scontrol[PATH_MAX], munge[PATH_MAX];
    char worker[PATH_MAX];
    char name[64];             /* the Slurm job's name: taas-<job id> */
    char cidr[64];             /* the kernel's network: Open MPI's interfaces */
    taas_machine_config ranks_cfg, loaders_cfg;
    int has_ranks_cfg;
    int nodes, per_node;       /* the ranks' component */
    taas_proc *alloc;          /* salloc, until the grant */
    long long jobid;           /* 0 until granted */
    int loader_nodes;          /* nodes of the loaders' component */
    int ranks_wanted;          /* launch_ranks came before the grant */
    int *loaders_wanted;       /* launch_loader came before the grant, by loader */
    pid_t reaper;
    int reaper_fd;             /* its stdin: the kernel's end closes it */
    int cancelled;
    char exclude[256];         /* nodes that failed the job: a resumed job's ranks go elsewhere */
    job_procs procs;
} slurm_state;

/* A Slurm client to its end: 0 when it succeeded, 1 when it said no (its words in out), -1
 * with err when it could not run or took too long. */
static int run(const char *what, char *const argv[], const char *input, char *out, size_t n, taas_error *err) {
    int status;
    if (taas_procs_run(what, argv, input, CLIENT_S, out, n, &status, err)) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* Slurm's last error line from a client's output ("sbatch: error: ..."), one line. */
static const char *slurm_says(char *out) {
    char *e = strstr(out, "error: ");
    char *s = e ? e + 7 : out;
    for (char *c = s; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    return s[0] ? s : "(no message)";
}

/* The partitions Slurm has: "cpu gpu" (the default one's '*' removed). */
static int check_partition(taas_job *j, slurm_state *st, const char *part, const char *cfg, const char *key,
                           taas_error *err) {
    if (!part[0]) return 0;
    char out[2048];
    char *argv[] = {st->sinfo, "-h", "-o", "%R", NULL};
    int rc = run("sinfo", argv, NULL, out, sizeof out, err);
    if (rc < 0) return -1;
    if (rc > 0) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "Slurm does not answer: sinfo: %s", slurm_says(out));
        taas_error_hint(err, "check that slurmctld is up and this machine can reach it: sinfo");
        return -1;
    }
    char known[2048] = "";  /* the list for the message, "cpu, gpu" */
    for (char *save = NULL, *tok = strtok_r(out, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        if (!strcmp(tok, part)) return 0;
        size_t k = strlen(known);
        snprintf(known + k, sizeof known - k, "%s%s", k ? ", " : "", tok);
    }
    taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "Slurm has no partition '%s' (%s of configuration %s)", part, key,
                   cfg);
    taas_error_hint(err, "the partitions are: %s; fix \"partition\" of %s in %s", known, cfg, j->cluster.path);
    return -1;
}

/* The ranks' GPUs from the configuration's "gres": "gpu" or "gpu:TYPE" (no count) asks for
 * one GPU a rank on each node, as --gpus-per-node=[TYPE:]R; any other gres ("gpu:a100:8",
 * "nvme") is passed as it is, --gres. Without one, nothing: the partition or constraint says
 * where the GPUs are. */
static void gpu_request(const taas_machine_config *c, int per_node, char **out, int *n, char *buf, size_t cap) {
    if (!c->gres[0]) return;
    const char *colon = strchr(c->gres, ':');
    int counted = colon && strchr(colon + 1, ':');
    if (!strncmp(c->gres, "gpu", 3) && (c->gres[3] == '\0' || c->gres[3] == ':') && !counted &&
        !(colon && colon[1] >= '0' && colon[1] <= '9')) {
        if (colon) snprintf(buf, cap, "--gpus-per-node=%s:%d", colon + 1, per_node);
        else snprintf(buf, cap, "--gpus-per-node=%d", per_node);
        out[(*n)++] = buf;
        return;
    }
    out[(*n)++] = "--gres";
    out[(*n)++] = (char *)c->gres;
}

/* The two components' options; a NULL separates them, out has room for 48. */
static int component_args(taas_job *j, slurm_state *st, char **out, char bufs[8][96]) {
    int n = 0;
    snprintf(bufs[0], 96, "%d", st->nodes);
    snprintf(bufs[1], 96, "%d", st->per_node);
    snprintf(bufs[2], 96, "%d", j->threads);
    out[n++] = "--nodes";
    out[n++] = bufs[0];
    out[n++] = "--ntasks-per-node";
    out[n++] = bufs[1];
    out[n++] = "--cpus-per-task";
    out[n++] = bufs[2];
    const taas_machine_config *c = &st->ranks_cfg;
    if (c->partition[0]) out[n++] = "--partition", out[n++] = (char *)c->partition;
    if (c->constraint[0]) out[n++] = "--constraint", out[n++] = (char *)c->constraint;
    gpu_request(c, st->per_node, out, &n, bufs[4], sizeof bufs[4]);
    if (st->exclude[0]) out[n++] = "--exclude", out[n++] = st->exclude;
    if (j->nstreams * j->cpus > 0) {
        snprintf(bufs[3], 96, "%d", j->nstreams * j->cpus);
        out[n++] = ":";
        out[n++] = "--ntasks";
        out[n++] = bufs[3];
        out[n++] = "--spread-job";
        out[n++] = "--cpus-per-task";
        out[n++] = "1";
        c = &st->loaders_cfg;
        if (c->partition[0]) out[n++] = "--partition", out[n++] = (char *)c->partition;
        if (c->constraint[0]) out[n++] = "--constraint", out[n++] = (char *)c->constraint;
    }
    out[n] = NULL;
    return n;
}

/* SlurmctldHost's address (or name) from `scontrol show config`. */
static int controller(slurm_state *st, char *out, size_t n, taas_error *err) {
    /* the whole dump (a job's processes keep only the last 2 KiB of what they print) */
    char *argv[] = {st->scontrol, "show", "config", NULL};
    size_t cap = 262144;
    char *full = malloc(cap);
    FILE *f = NULL;
    if (!full) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory reading Slurm's configuration");
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        free(full);
        return taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "pipe: %s", strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    pid_t pid;
    int rc = posix_spawn(&pid, st->scontrol, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    size_t got = 0;
    if (rc == 0 && (f = fdopen(pipefd[0], "r"))) {
        got = fread(full, 1, cap - 1, f);
        fclose(f);
    } else {
        close(pipefd[0]);
    }
    full[got] = '\0';
    if (rc == 0) waitpid(pid, NULL, 0);
    const char *line = strstr(full, "SlurmctldHost[0]");
    const char *eq = line ? strchr(line, '=') : NULL;
    if (!eq) {
        free(full);
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "scontrol show config does not name the Slurm controller");
        taas_error_hint(err, "set \"kernel_address\" in the cluster section to this machine's address on the "
                             "cluster's network");
        return -1;
    }
    eq++;
    while (*eq == ' ') eq++;
    const char *open_ = strchr(eq, '('), *nl = strchr(eq, '\n');
    if (open_ && (!nl || open_ < nl)) {
        const char *close_ = strchr(open_, ')');
        snprintf(out, n, "%.*s", close_ ? (int)(close_ - open_ - 1) : 0, open_ + 1);
    } else {
        snprintf(out, n, "%.*s", nl ? (int)(nl - eq) : (int)strlen(eq), eq);
    }
    free(full);
    return 0;
}

static int slurm_plan(taas_job *j, const taas_io *io, taas_error *err) {
    slurm_state *st = calloc(1, sizeof *st);
    if (!st) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory planning the job");
    j->be_state = st;
    st->reaper_fd = -1;
    st->procs.why = slurm_why;
    st->procs.line = slurm_line;
    const taas_pragma *pr = j->pragma;
    const taas_cluster *cl = &j->cluster;
    snprintf(st->name, sizeof st->name, "taas-%s", j->id);
    static const struct { const char *name; size_t off; } progs[] = {
        {"salloc", offsetof(slurm_state, salloc)},     {"srun", offsetof(slurm_state, srun)},
        {"scancel", offsetof(slurm_state, scancel)},   {"sinfo", offsetof(slurm_state, sinfo)},
        {"squeue", offsetof(slurm_state, squeue)},     {"sbatch", offsetof(slurm_state, sbatch)},
        {"scontrol", offsetof(slurm_state, scontrol)},
    };
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char env[32];
        snprintf(env, sizeof env, "TAAS_%s", progs[i].name);
        for (char *c = env; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        if (taas_program_find(progs[i].name, env, "slurm-client", (char *)st + progs[i].off, PATH_MAX, err)) return -1;
    }
    if (taas_program_find("munge", "TAAS_MUNGE", "munge", st->munge, sizeof st->munge, err)) return -1;
    st->has_ranks_cfg = pr->has_config;
    if (pr->has_config) st->ranks_cfg = pr->config;
    st->nodes = pr->machines;
    st->per_node = pr->ranks_per_machine;
    if (taas_config_find(cl->loaders, &st->loaders_cfg, err)) return -1;
    int cores = st->has_ranks_cfg ? st->ranks_cfg.cpus_per_machine : 1;
    j->threads = cores / st->per_node > 1 ? cores / st->per_node : 1;
    if (check_partition(j, st, st->ranks_cfg.partition, st->ranks_cfg.name, "the ranks'", err) ||
        (j->nstreams && check_partition(j, st, st->loaders_cfg.partition, st->loaders_cfg.name, "the loaders'", err)))
        return -1;
    /* can Slurm ever run it? sbatch --test-only asks without submitting */
    char *argv[64], bufs[8][96], out[2048];
    int n = 0;
    argv[n++] = st->sbatch;
    argv[n++] = "--test-only";
    argv[n++] = "--job-name";
    argv[n++] = st->name;
    n += component_args(j, st, argv + n, bufs);
    argv[n++] = "--wrap";
    argv[n++] = "true";
    argv[n] = NULL;
    int rc = run("sbatch --test-only", argv, NULL, out, sizeof out, err);
    if (rc < 0) return -1;
    if (rc > 0) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, (taas_srcpos){pr->line, 1}, "Slurm cannot run this job (%d node%s "
                       "of %d rank%s%s%s): %s", st->nodes, st->nodes == 1 ? "" : "s", st->per_node,
                       st->per_node == 1 ? "" : "s", st->ranks_cfg.partition[0] ? " in partition " : "",
                       st->ranks_cfg.partition, slurm_says(out));
        taas_error_hint(err, "ask for what the cluster has (sinfo shows its nodes), e.g. fewer --gpus, or another "
                             "#! configuration");
        return -1;
    }
    char addr[256];
    int v6 = 0;
    if (cl->kernel_address[0]) {
        snprintf(addr, sizeof addr, "%s", cl->kernel_address);
    } else {
        char ctl[256];
        if (controller(st, ctl, sizeof ctl, err) || taas_zsock_route(ctl, addr, sizeof addr, &v6, err)) return -1;
    }
    if (taas_zsock_network(addr, st->cidr, sizeof st->cidr) ||
        (size_t)snprintf(j->bind, sizeof j->bind, "tcp://%s:*", addr) >= sizeof j->bind) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "the kernel's address %s is not an IPv4 address of this "
                       "machine", addr);
        taas_error_hint(err, "set \"kernel_address\" in the cluster section of %s to this machine's address on the "
                             "cluster's network", cl->path);
        return -1;
    }
    snprintf(j->rank_bind, sizeof j->rank_bind, "route");
    j->curve = 1;
    snprintf(st->worker, sizeof st->worker, "%s", cl->worker[0] ? cl->worker : j->worker_path);
    taas_buf b = TAAS_BUF_INIT;
    taas_buf_printf(&b, "slurm: one heterogeneous job: the %d rank%s on %d node%s", j->world, j->world == 1 ? "" : "s",
                    st->nodes, st->nodes == 1 ? "" : "s");
    if (st->ranks_cfg.partition[0]) taas_buf_printf(&b, " of partition %s", st->ranks_cfg.partition);
    if (st->has_ranks_cfg) taas_buf_printf(&b, " (%s)", st->ranks_cfg.name);
    taas_buf_printf(&b, ", %d thread%s each", j->threads, j->threads == 1 ? "" : "s");
    if (j->nstreams) {
        taas_buf_printf(&b, "; %d loader worker%s", j->nstreams * j->cpus, j->nstreams * j->cpus == 1 ? "" : "s");
        if (st->loaders_cfg.partition[0]) taas_buf_printf(&b, " on partition %s", st->loaders_cfg.partition);
        taas_buf_printf(&b, " (%s)", st->loaders_cfg.name);
    }
    taas_buf_printf(&b, "; the kernel at %s; data paths are read on each loader's host\n", addr);
    io->stream(io->ctx, "stdout", b.data);
    taas_buf_free(&b);
    return 0;
}

/* A process, outside the job's session and not killed with the kernel, that cancels the
 * Slurm job by name when its stdin (a pipe the kernel holds) ends: the kernel died. */
static void start_reaper(slurm_state *st) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
    char *argv[] = {"/bin/sh", "-c", "read _ ; exec \"$0\" --name \"$1\"", st->scancel, st->name, NULL};
    if (posix_spawn(&st->reaper, "/bin/sh", &fa, &at, argv, environ) != 0) st->reaper = 0;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(fds[0]);
    if (st->reaper) st->reaper_fd = fds[1];
    else close(fds[1]);
}

static int slurm_launch_ranks(taas_job *j, taas_error *err) {
    slurm_state *st = j->be_state;
    char *argv[64], bufs[8][96];
    int n = 0;
    argv[n++] = st->salloc;
    argv[n++] = "--no-shell";
    argv[n++] = "--job-name";
    argv[n++] = st->name;
    char immediate[48];
    /* a job resuming after a failure runs on what the cluster has now, or says it cannot; a
     * preempted one waits in the queue as a requeued job would */
    if (j->restarts > 0 && !j->preempted) {
        snprintf(immediate, sizeof immediate, "--immediate=%.0f", j->start_timeout);
        argv[n++] = immediate;
    }
    n += component_args(j, st, argv + n, bufs);
    argv[n] = NULL;
    start_reaper(st);
    char threads[2][48];
    char **env = taas_procs_env(j, NULL, threads);
    st->alloc = taas_procs_spawn(j, "salloc", argv, env, NULL, 0, err);
    free(env);
    st->ranks_wanted = 1;
    return st->alloc ? 0 : -1;
}

/* A MUNGE credential of the job's keys, for this user only (uid-restricted); NULL with err. */
static char *credential(taas_job *j, slurm_state *st, taas_error *err) {
    char uid[24], keys[TAAS_ZKEYS_TEXT + 2], out[2048];
    snprintf(uid, sizeof uid, "%u", (unsigned)geteuid());
    taas_zkeys_text(&j->keys, keys);
    char *argv[] = {st->munge, "--restrict-uid", uid, j->cluster.munge_socket[0] ? "--socket" : NULL,
                    j->cluster.munge_socket, NULL};
    int status;
    int rc = taas_procs_run("munge", argv, keys, CLIENT_S, out, sizeof out, &status, err);
    explicit_bzero(keys, sizeof keys);
    if (rc) return NULL;
    char *cred = strstr(out, "MUNGE:");
    if (!WIFEXITED(status) || WEXITSTATUS(status) || !cred) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "munge cannot make a credential for the job's keys: %s",
                       slurm_says(out));
        taas_error_hint(err, "munged must run on this machine with the cluster's key (as Slurm's own "
                             "authentication needs); give its socket as \"munge_socket\" if it is not the default");
        return NULL;
    }
    cred[strcspn(cred, "\r\n")] = '\0';
    return strdup(cred);
}

/* The environment of a step: the kernel's, the job's threads, Open MPI on the kernel's
 * network, and its tasks' credentials (NAME_0..NAME_{n-1} when n > 1). */
static char **step_env(taas_job *j, slurm_state *st, int tasks, char ***owned, taas_error *err) {
    int extra = tasks + 4;
    char **mine = calloc((size_t)extra + 1, sizeof *mine);
    if (!mine) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting a Slurm step");
        return NULL;
    }
    int k = 0;
    for (int t = 0; t < tasks; t++) {
        char *cred = credential(j, st, err);
        if (!cred) goto fail;
        size_t len = strlen(cred) + 40;
        mine[k] = malloc(len);
        if (mine[k]) {
            if (tasks == 1) snprintf(mine[k], len, "TAAS_JOB_MUNGE=%s", cred);
            else snprintf(mine[k], len, "TAAS_JOB_MUNGE_%d=%s", t, cred);
        }
        free(cred);
        if (!mine[k++]) goto fail;
    }
    size_t cl = strlen(st->cidr) + 40;
    if (!(mine[k++] = malloc(cl))) goto fail;
    snprintf(mine[k - 1], cl, "OMPI_MCA_oob_tcp_if_include=%s", st->cidr);
    if (!(mine[k++] = malloc(cl))) goto fail;
    snprintf(mine[k - 1], cl, "OMPI_MCA_btl_tcp_if_include=%s", st->cidr);
    if (j->cluster.munge_socket[0]) {
        size_t ml = strlen(j->cluster.munge_socket) + 24;
        if (!(mine[k++] = malloc(ml))) goto fail;
        snprintf(mine[k - 1], ml, "TAAS_MUNGE_SOCKET=%s", j->cluster.munge_socket);
    }
    mine[k] = NULL;
    *owned = mine;
    char threads[2][48];
    char **env = taas_procs_env(j, (const char *const *)mine, threads);
    /* the threads' two strings live in this frame: copy them into the array's own */
    for (int i = 0; env && env[i]; i++)
        if (env[i] == threads[0] || env[i] == threads[1]) env[i] = strdup(env[i]);
    return env;
fail:
    for (int i = 0; i < k; i++) free(mine[i]);
    free(mine);
    return NULL;
}

static void env_free(char **env, char **owned) {
    for (int i = 0; env && env[i]; i++)
        if (!strncmp(env[i], "OMP_NUM_THREADS=", 16) || !strncmp(env[i], "OPENBLAS_NUM_THREADS=", 21)) free(env[i]);
    free(env);
    for (int i = 0; owned && owned[i]; i++) {
        explicit_bzero(owned[i], strlen(owned[i]));
        free(owned[i]);
    }
    free(owned);
}

static int start_ranks(taas_job *j, slurm_state *st, taas_error *err) {
    char id[32], np[16];
    snprintf(id, sizeof id, "%lld", st->jobid);
    snprintf(np, sizeof np, "%d", j->world);
    char *argv[] = {st->srun, "--jobid", id, "--het-group", "0", "--ntasks", np, "--mpi", "pmix",
                    "--kill-on-bad-exit=1", "--chdir", "/tmp", "--export", "ALL", st->worker, "trainer", "--control", j->endpoint,
                    "--keys-from", "munge", NULL};
    char **owned = NULL;
    char **env = step_env(j, st, j->world, &owned, err);
    if (!env) return -1;
    st->procs.ranks = taas_procs_spawn(j, "srun (ranks)", argv, env, NULL, 0, err);
    env_free(env, owned);
    return st->procs.ranks ? 0 : -1;
}

static int start_loader(taas_job *j, slurm_state *st, job_loader *l, taas_error *err) {
    int i = (int)(l - j->loaders);
    char id[32], rel[16], s[16], w[16], g[16], what[96];
    snprintf(id, sizeof id, "%lld", st->jobid);
    /* loaders spread over the component's nodes; a replacement moves to the next */
    snprintf(rel, sizeof rel, "%d", st->loader_nodes > 0 ? (i + l->gen) % st->loader_nodes : 0);
    snprintf(s, sizeof s, "%d", l->stream);
    snprintf(w, sizeof w, "%d", l->worker);
    snprintf(g, sizeof g, "%d", l->gen);
    taas_job_loader_label(j, l, what, sizeof what);
    /* --overlap: several loader steps on one node share what the component holds there (by
     * default a step takes the node's memory and the next waits for it) */
    char *argv[] = {st->srun, "--jobid", id, "--het-group", "1", "--nodes", "1", "--ntasks", "1", "--relative", rel,
                    "--overlap", "--chdir", "/tmp", "--export", "ALL", st->worker, "loader", "--control", j->endpoint, "--stream", s, "--worker", w,
                    "--generation", g, "--keys-from", "munge", NULL};
    char **owned = NULL;
    char **env = step_env(j, st, 1, &owned, err);
    if (!env) return -1;
    taas_proc *p = taas_procs_spawn(j, what, argv, env, NULL, 0, err);
    env_free(env, owned);
    taas_procs_set(j, &st->procs, i, p);
    return p ? 0 : -1;
}

static int slurm_launch_loader(taas_job *j, job_loader *l, taas_error *err) {
    slurm_state *st = j->be_state;
    int i = (int)(l - j->loaders);
    if (!st->procs.loaders && !(st->procs.loaders = calloc((size_t)j->nloaders, sizeof *st->procs.loaders)))
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting a loader");
    if (!st->loaders_wanted && !(st->loaders_wanted = calloc((size_t)j->nloaders, sizeof *st->loaders_wanted)))
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting a loader");
    if (!st->jobid) {
        st->loaders_wanted[i] = 1;
        return 0;
    }
    return start_loader(j, st, l, err);
}

/* The allocation was granted: its id from salloc's words, the loaders' nodes from squeue. */
static int granted(taas_job *j, slurm_state *st, taas_error *err) {
    const char *g = strstr(st->alloc->tail, "Granted job allocation ");
    if (!g || sscanf(g, "Granted job allocation %lld", &st->jobid) != 1 || st->jobid <= 0) {
        st->jobid = 0;
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "salloc did not say which allocation it made: %.300s",
                       st->alloc->tail);
        taas_error_hint(err, "taas reads salloc's \"Granted job allocation N\"; check the Slurm version");
        return -1;
    }
    taas_job_launched(j);  /* the wait in Slurm's queue is not the ranks' start */
    char line[128];
    snprintf(line, sizeof line, "slurm: job %lld granted\n", st->jobid);
    if (j->io && j->io->stream) j->io->stream(j->io->ctx, "stdout", line);
    if (j->nloaders) {
        char id[40], out[2048];
        snprintf(id, sizeof id, "%lld+1", st->jobid);
        char *argv[] = {st->squeue, "-h", "-j", id, "-o", "%D", NULL};
        if (run("squeue", argv, NULL, out, sizeof out, err) < 0) return -1;
        st->loader_nodes = atoi(out);
        if (st->loader_nodes < 1) st->loader_nodes = 1;
    }
    if (st->ranks_wanted && start_ranks(j, st, err)) return -1;
    for (int i = 0; st->loaders_wanted && i < j->nloaders; i++)
        if (st->loaders_wanted[i] && start_loader(j, st, &j->loaders[i], err)) return -1;
    return 0;
}

/* srun's words for a preemption ("... CANCELLED AT ... DUE TO PREEMPTION"), a node that failed,
 * "Node failure on gpu2" (the node is left out of the allocation a resumed job asks for), or
 * a task that ended, "gpu2: task 1: Killed". */
static int slurm_why(taas_job *j, const taas_proc *p, char *out, size_t n) {
    slurm_state *st = j->be_state;
    if (j->preempted || strstr(p->tail, "DUE TO PREEMPTION")) {
        j->preempted = 1;
        snprintf(out, n, "Slurm preempted the job (allocation %lld)", st->jobid);
        return 1;
    }
    const char *nf = strstr(p->tail, "Node failure on ");
    char node[64] = "", how[64] = "";
    int task = -1;
    if (nf) {
        sscanf(nf, "Node failure on %63[^ \n.,]", node);
    } else {  /* "srun: error: gpu2: task 1: Killed" */
        for (const char *e = strstr(p->tail, "error: "); e && !node[0]; e = strstr(e + 1, "error: "))
            if (sscanf(e, "error: %63[^: \n]: task %d: %63[^\n]", node, &task, how) != 3) node[0] = '\0';
    }
    if (!node[0]) return 0;
    size_t len = strlen(st->exclude);
    /* a node that failed, not a task that was killed on a node that works */
    if (nf && !strstr(st->exclude, node) && len + strlen(node) + 2 < sizeof st->exclude)
        snprintf(st->exclude + len, sizeof st->exclude - len, "%s%s", len ? "," : "", node);
    if (nf) snprintf(out, n, "the ranks' node %s failed (Slurm: Node failure on %s)", node, node);
    else snprintf(out, n, "trainer rank %d on node %s ended: %s", task, node, how);
    return 1;
}

static void slurm_watch(taas_job *j) {
    slurm_state *st = j->be_state;
    if (st->alloc && !st->alloc->exited) {
        taas_proc_read(st->alloc, NULL, NULL);
        if (taas_proc_reap(st->alloc)) {
            taas_proc_read(st->alloc, NULL, NULL);
            taas_error e;
            if (!taas_proc_ok(st->alloc)) {
                char tail[600];
                snprintf(tail, sizeof tail, "%.500s", st->alloc->tail);
                taas_job_fail(j, TAAS_ERR_OFFLOAD, "sinfo and squeue show what the cluster has and does",
                              "Slurm did not grant the job's allocation: %s", slurm_says(tail));
            } else if (granted(j, st, &e)) {
                taas_job_fail(j, e.ename, e.hint, "%s", e.message);
            }
        }
    }
    taas_procs_watch(j, &st->procs);
}

/* Ends the allocation (every step with it) and what runs here. */
static void slurm_cancel(taas_job *j) {
    slurm_state *st = j->be_state;
    taas_procs_kill(j, &st->procs);
    if (st->alloc) {
        taas_job_unwatch(j, st->alloc->pidfd);
        taas_proc_kill(st->alloc);
    }
    if (!st->cancelled) {
        st->cancelled = 1;
        char out[1024];
        taas_error e;
        char *argv[] = {st->scancel, "--name", st->name, NULL};
        taas_procs_run("scancel", argv, NULL, CLIENT_S, out, sizeof out, &(int){0}, &e);
    }
    if (st->reaper > 0) {
        kill(st->reaper, SIGKILL);
        while (waitpid(st->reaper, NULL, 0) < 0 && errno == EINTR) {}
        st->reaper = 0;
    }
    if (st->reaper_fd >= 0) close(st->reaper_fd);
    st->reaper_fd = -1;
}

/* After cancel (the allocation is gone): the next launch asks Slurm for a new one, without
 * the nodes that failed. */
static void slurm_reset(taas_job *j) {
    slurm_state *st = j->be_state;
    taas_procs_free(j, &st->procs);
    taas_proc_free(st->alloc);
    st->alloc = NULL;
    st->jobid = 0;
    st->loader_nodes = 0;
    st->ranks_wanted = 0;
    if (st->loaders_wanted) memset(st->loaders_wanted, 0, (size_t)j->nloaders * sizeof *st->loaders_wanted);
    st->cancelled = 0;
}

static void slurm_free(taas_job *j) {
    slurm_state *st = j->be_state;
    taas_procs_free(j, &st->procs);
    taas_proc_free(st->alloc);
    free(st->loaders_wanted);
    free(st);
    j->be_state = NULL;
}

const taas_backend taas_backend_slurm = {
    .name = "slurm",
    .plan = slurm_plan,
    .launch_ranks = slurm_launch_ranks,
    .launch_loader = slurm_launch_loader,
    .watch = slurm_watch,
    .cancel = slurm_cancel,
    .free = slurm_free,
    .reset = slurm_reset,
    .queued = 1,
};
