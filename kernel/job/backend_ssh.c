/* The ssh backend: hosts the user reaches by ssh with keys (docs/cluster.md). The ranks run
 * under Open MPI's mpirun with its ssh launcher (--host, plm_rsh_agent), restricted to the
 * kernel's network; each loader worker is `ssh HOST taas-worker loader ...`, its keys on the
 * first line of its stdin, whose end is the kernel's (the worker exits when ssh goes). Every
 * plane is CURVE with the job's keys. Before anything trains, every host must answer
 * `taas-worker gpus` over ssh: a login that is refused, or a worker that is missing, is the
 * cell's error. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_procs.h"
#include "buf.h"
#include "clock.h"
#include "errnames.h"
#include "shell.h"
#include "utf8.h"
#include "worker.h"

/* Seconds for every host to answer the check before the job starts, and to confirm a
 * cancel: a round trip through a bastion, or a loaded host, takes seconds, not one. */
#define CHECK_S 30.0
/* Seconds a host waits, after SIGKILL, for the job's processes to be gone. */
#define GONE_S 10

typedef struct ssh_state {
    char mpirun[PATH_MAX], ssh[PATH_MAX];
    char worker[PATH_MAX];    /* taas-worker on the hosts */
    char cidr[64];            /* the kernel's network: Open MPI's interfaces */
    int *rank_host;           /* the host of each rank (mpirun fills --host slots in order) */
    int *loader_host;         /* the host of each loader slot */
    int *cpu_hosts, ncpu;     /* where loaders go */
    int killed;               /* the hosts were told to kill the job's pids */
    int launches;             /* the ranks' launches: each has its own keys file */
    char keys_file[96];       /* on each rank host: the job's keys, mode 0600 */
    int *rank_hosts;          /* used[] of the hosts with ranks */
    job_procs procs;
} ssh_state;

static const taas_cluster_host *host_of(const taas_job *j, int i) {
    return &j->cluster.hosts[i];
}

/* ssh's own options: the user's file, never a question on a terminal, a bounded wait. */
static int ssh_argv(const taas_job *j, const ssh_state *st, const char **argv, int max) {
    int n = 0;
    argv[n++] = st->ssh;
    if (j->cluster.ssh_config[0]) {
        argv[n++] = "-F";
        argv[n++] = j->cluster.ssh_config;
    }
    argv[n++] = "-o";
    argv[n++] = "BatchMode=yes";
    argv[n++] = "-o";
    argv[n++] = "ConnectTimeout=10";
    argv[n++] = "-T";
    (void)max;
    return n;
}

/* One word of a command for the remote shell, and a space. */
static void shell_word(taas_buf *b, const char *s) {
    taas_shell_quote(b, s);
    taas_buf_putc(b, ' ');
}

/* The command that reaches host h as the backend does, to paste into a shell for a hint:
 * ssh [-F FILE] -o BatchMode=yes ADDRESS true, every word quoted. */
static const char *ssh_true(const taas_job *j, const ssh_state *st, const taas_cluster_host *h, char *out,
                            size_t n) {
    const char *argv[8];
    size_t k = 0;
    argv[k++] = st && st->ssh[0] ? st->ssh : "ssh";
    if (j->cluster.ssh_config[0]) argv[k++] = "-F", argv[k++] = j->cluster.ssh_config;
    argv[k++] = "-o";
    argv[k++] = "BatchMode=yes";
    argv[k++] = h ? h->address : "HOST";
    argv[k++] = "true";
    taas_buf b = TAAS_BUF_INIT;
    taas_shell_command(&b, argv, k);
    taas_utf8_clip(out, n, b.data, b.len, n / 4);
    taas_buf_free(&b);
    return out;
}

/* A program or path that reaches a shell — Open MPI hands the ssh agent string to one, ssh
 * runs its remote command through the host's — and came from the environment or PATH (the
 * cluster section checks its own values): refused unless plain (shell.h), never quoted.
 * env_var names where it came from when set, found otherwise; fix says what to do. */
static int plain_program(const char *value, const char *env_var, const char *found, const char *why,
                         const char *fix, taas_error *err) {
    const char *bad = taas_shell_unplain(value);
    if (!bad) return 0;
    char q[300], ch[64];
    taas_utf8_clip(q, sizeof q, value, strlen(value), 200);
    if (bad == value && value[0] == '-') snprintf(ch, sizeof ch, "a '-' first");
    else taas_utf8_char_name(ch, sizeof ch, bad);
    const char *env = getenv(env_var);
    if (env && env[0])
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "%s names %s, which has %s: %s", env_var, q, ch, why);
    else
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "%s, %s, has %s: %s", found, q, ch, why);
    taas_error_hint(err, "%s; a plain path holds %s", fix, TAAS_SHELL_PLAIN_RULE);
    return -1;
}

/* The ssh program, mpirun and taas-worker of the job, each plain where it did not come from
 * the cluster section. */
static int plain_programs(const taas_job *j, const ssh_state *st, taas_error *err) {
    const taas_cluster *cl = &j->cluster;
    char fix[600];
    snprintf(fix, sizeof fix, "set TAAS_SSH, or \"ssh\" in the cluster section of %.400s, to a plain path of ssh (a "
             "symlink will do)", cl->path);
    if (!cl->ssh[0] && plain_program(st->ssh, "TAAS_SSH", "the ssh found on PATH",
                                     "backend ssh puts it in the ssh agent string that Open MPI hands to a shell", fix,
                                     err))
        return -1;
    if (plain_program(st->mpirun, "TAAS_MPIRUN", "the mpirun found on PATH",
                      "Open MPI puts its folder (its --prefix) in the command it runs on each host through the "
                      "host's shell", "set TAAS_MPIRUN to a plain path of mpirun (a symlink will do)", err))
        return -1;
    snprintf(fix, sizeof fix, "give \"worker\", its plain path on the hosts, in the cluster section of %.400s, or set "
             "TAAS_WORKER to a plain path (a symlink will do)", cl->path);
    if (!cl->worker[0] && plain_program(st->worker, "TAAS_WORKER", "taas-worker (next to taas-kernel, or on PATH)",
                                        "backend ssh runs it on the hosts through their shell", fix, err))
        return -1;
    return 0;
}

/* Runs the remote shell command cmd on every host with used[h], all at once, input (may be
 * NULL) on its stdin, within CHECK_S; doing says what for the errors ("run taas-worker"). */
static int on_hosts(taas_job *j, ssh_state *st, const int *used, const char *cmd, const char *input,
                    const char *doing, taas_error *err) {
    size_t nh = j->cluster.nhosts;
    taas_proc **p = calloc(nh, sizeof *p);
    if (!p) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory reaching the hosts");
    int rc = 0;
    for (size_t h = 0; h < nh && !rc; h++) {
        if (!used[h]) continue;
        const char *argv[24];
        int n = ssh_argv(j, st, argv, 20);
        argv[n++] = host_of(j, (int)h)->address;
        argv[n++] = cmd;
        argv[n] = NULL;
        char what[96];
        snprintf(what, sizeof what, "ssh %s", host_of(j, (int)h)->name);
        p[h] = taas_proc_spawn(what, (char **)argv, NULL, input, 0, err);
        if (!p[h]) rc = -1;
    }
    double until = taas_now() + CHECK_S;
    for (size_t h = 0; h < nh && !rc; h++) {
        if (!p[h]) continue;
        while (!rc && !taas_proc_reap(p[h])) {
            taas_proc_read(p[h], NULL, NULL);
            double left = until - taas_now();
            if (left <= 0) {
                taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "host %s (%s) did not answer over ssh within %.0f s",
                               host_of(j, (int)h)->name, host_of(j, (int)h)->address, CHECK_S);
                char paste[1024];
                taas_error_hint(err, "check that it is up and reachable from here: %s",
                                ssh_true(j, st, host_of(j, (int)h), paste, sizeof paste));
                rc = -1;
                break;
            }
            struct pollfd pf[2] = {{p[h]->pidfd, POLLIN, 0}, {p[h]->out_fd, POLLIN, 0}};
            poll(pf, p[h]->out_fd >= 0 ? 2 : 1, (int)(left * 1000) + 1);
        }
        if (rc) break;
        taas_proc_read(p[h], NULL, NULL);
        if (taas_proc_ok(p[h])) continue;
        int status = WIFEXITED(p[h]->status) ? WEXITSTATUS(p[h]->status) : -1;
        char tail[600];
        snprintf(tail, sizeof tail, "%.500s", p[h]->tail[0] ? p[h]->tail : "(no output)");
        for (char *c = tail; *c; c++)
            if (*c == '\n' || *c == '\r') *c = ' ';
        if (status == 255) {
            taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "cannot log in to host %s (%s) with ssh: %s",
                           host_of(j, (int)h)->name, host_of(j, (int)h)->address, tail);
            char paste[1024];
            taas_error_hint(err, "the ssh backend logs in with keys only: %s must work without a password (an agent or "
                            "a key in ~/.ssh, or \"ssh_config\")",
                            ssh_true(j, st, host_of(j, (int)h), paste, sizeof paste));
        } else {
            taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "host %s (%s) cannot %s: %s", host_of(j, (int)h)->name,
                           host_of(j, (int)h)->address, doing, tail);
            taas_error_hint(err, "install taas-worker on every host at the same path (or give its path as \"worker\" "
                                 "in the cluster section of %s); the hosts' /tmp must be writable", j->cluster.path);
        }
        rc = -1;
    }
    for (size_t h = 0; h < nh; h++) taas_proc_free(p[h]);
    free(p);
    return rc;
}

/* Every host the job uses answers `taas-worker gpus` over ssh: it is up, lets us in, and has
 * the worker. */
static int check_hosts(taas_job *j, ssh_state *st, const int *used, taas_error *err) {
    taas_buf cmd = TAAS_BUF_INIT;
    taas_buf_puts(&cmd, "exec ");
    shell_word(&cmd, st->worker);
    taas_buf_puts(&cmd, "gpus");
    int rc = on_hosts(j, st, used, cmd.data, NULL, "run taas-worker", err);
    taas_buf_free(&cmd);
    return rc;
}

static int ssh_plan(taas_job *j, const taas_io *io, taas_error *err) {
    ssh_state *st = calloc(1, sizeof *st);
    if (!st) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory planning the job");
    j->be_state = st;
    const taas_pragma *pr = j->pragma;
    const taas_cluster *cl = &j->cluster;
    int nh = (int)cl->nhosts, slots = 0;
    st->rank_host = calloc((size_t)j->world, sizeof *st->rank_host);
    st->cpu_hosts = calloc((size_t)nh, sizeof *st->cpu_hosts);
    st->rank_hosts = calloc((size_t)nh, sizeof *st->rank_hosts);
    st->loader_host = calloc((size_t)(j->nstreams * j->cpus + 1), sizeof *st->loader_host);
    int *used = calloc((size_t)nh, sizeof *used), *ranks_on = calloc((size_t)nh, sizeof *ranks_on);
    if (!st->rank_host || !st->cpu_hosts || !st->rank_hosts || !st->loader_host || !used || !ranks_on) {
        free(used);
        free(ranks_on);
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory planning the job");
    }
    for (int h = 0; h < nh; h++) slots += host_of(j, h)->gpus;
    int rc = -1;
    if (j->world > slots) {
        taas_buf have = TAAS_BUF_INIT;
        for (int h = 0; h < nh; h++)
            if (host_of(j, h)->gpus) taas_buf_printf(&have, "%s%s %d", have.len ? ", " : "", host_of(j, h)->name,
                                                     host_of(j, h)->gpus);
        taas_error_set(err, TAAS_ERR_OFFLOAD, (taas_srcpos){pr->line, 1}, "--gpus %d asks for more ranks than the "
                       "cluster's hosts have GPUs: %d (%s)", j->world, slots, have.data ? have.data : "none");
        taas_error_hint(err, "use --gpus %d or fewer, or add hosts to the cluster section of %s", slots, cl->path);
        taas_buf_free(&have);
        goto out;
    }
    /* ranks fill the GPU hosts in order, as mpirun's --host slots do */
    for (int r = 0, h = 0, used_here = 0; r < j->world; r++) {
        while (host_of(j, h)->gpus == used_here) h++, used_here = 0;
        st->rank_host[r] = h;
        used[h] = 1;
        ranks_on[h]++;
        used_here++;
    }
    for (int h = 0; h < nh; h++) st->rank_hosts[h] = ranks_on[h] > 0;
    for (int h = 0; h < nh; h++)
        if (host_of(j, h)->gpus == 0) st->cpu_hosts[st->ncpu++] = h;
    if (st->ncpu == 0)
        for (int h = 0; h < nh; h++) st->cpu_hosts[st->ncpu++] = h;
    for (int i = 0; i < j->nstreams * j->cpus; i++) {
        st->loader_host[i] = st->cpu_hosts[i % st->ncpu];
        used[st->loader_host[i]] = 1;
    }
    /* the compute threads of a rank: its host's cores shared by the ranks there */
    j->threads = 1 << 30;
    for (int h = 0; h < nh; h++)
        if (ranks_on[h]) {
            int t = host_of(j, h)->cpus / ranks_on[h];
            if (t < j->threads) j->threads = t;
        }
    if (j->threads < 1) j->threads = 1;
    /* the kernel's address on the hosts' network */
    char addr[sizeof cl->kernel_address];
    int v6 = 0;
    if (cl->kernel_address[0]) snprintf(addr, sizeof addr, "%s", cl->kernel_address);
    else if (taas_zsock_route(host_of(j, 0)->address, addr, sizeof addr, &v6, err)) goto out;
    if (taas_zsock_network(addr, st->cidr, sizeof st->cidr)) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "the kernel's address %s is not an IPv4 address of this "
                       "machine", addr);
        taas_error_hint(err, "set \"kernel_address\" in the cluster section of %s to this machine's address on the "
                             "hosts' network", cl->path);
        goto out;
    }
    if ((size_t)snprintf(j->bind, sizeof j->bind, "tcp://%s:*", addr) >= sizeof j->bind) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "the kernel's address %s is too long", addr);
        taas_error_hint(err, "give \"kernel_address\" as an IPv4 address in %s", cl->path);
        goto out;
    }
    snprintf(j->rank_bind, sizeof j->rank_bind, "route");
    j->curve = 1;
    if ((size_t)snprintf(st->worker, sizeof st->worker, "%s", cl->worker[0] ? cl->worker : j->worker_path) >=
        sizeof st->worker) {
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "taas-worker's path is too long");
        taas_error_hint(err, "give \"worker\" in the cluster section of %s", cl->path);
        goto out;
    }
    if (cl->ssh[0]) snprintf(st->ssh, sizeof st->ssh, "%s", cl->ssh);
    if ((!cl->ssh[0] && taas_program_find("ssh", "TAAS_SSH", "openssh-client", st->ssh, sizeof st->ssh, err)) ||
        taas_program_find("mpirun", "TAAS_MPIRUN", "openmpi-bin", st->mpirun, sizeof st->mpirun, err) ||
        plain_programs(j, st, err) || check_hosts(j, st, used, err))
        goto out;
    taas_buf b = TAAS_BUF_INIT;
    taas_buf_printf(&b, "ssh: the %d rank%s on ", j->world, j->world == 1 ? "" : "s");
    for (int h = 0, k = 0; h < nh; h++)
        if (ranks_on[h]) taas_buf_printf(&b, "%s%s (%d)", k++ ? ", " : "", host_of(j, h)->name, ranks_on[h]);
    taas_buf_printf(&b, ", %d thread%s each", j->threads, j->threads == 1 ? "" : "s");
    for (int i = 0; i < j->nstreams * j->cpus; i++) {
        char who[96];
        job_loader l = {.stream = i / j->cpus, .worker = i % j->cpus};
        taas_job_loader_label(j, &l, who, sizeof who);
        taas_buf_printf(&b, "%s%s on %s", i ? ", " : "; ", who, host_of(j, st->loader_host[i])->name);
    }
    taas_buf_printf(&b, "; the kernel at %s; data paths are read on each loader's host\n", addr);
    io->stream(io->ctx, "stdout", b.data);
    taas_buf_free(&b);
    rc = 0;
out:
    free(used);
    free(ranks_on);
    return rc;
}

/* The keys reach the ranks' hosts over ssh, into a file that only this user may read
 * (noclobber: a file someone put there first is an error, never written through): not on
 * mpirun's command line, nor in its environment, which Open MPI sends to its daemons in the
 * clear. */
static int send_keys(taas_job *j, ssh_state *st, taas_error *err) {
    /* a launch's own name: a relaunch never meets a file of the job's, kept or not */
    snprintf(st->keys_file, sizeof st->keys_file, "/tmp/taas-keys-%s-%d", j->id, st->launches++);
    taas_buf cmd = TAAS_BUF_INIT;
    taas_buf_puts(&cmd, "umask 077 && set -C && cat > ");
    shell_word(&cmd, st->keys_file);
    char keys[TAAS_ZKEYS_TEXT + 2];
    taas_zkeys_text(&j->keys, keys);
    strcat(keys, "\n");
    int rc = on_hosts(j, st, st->rank_hosts, cmd.data, keys, "keep the job's keys in /tmp", err);
    explicit_bzero(keys, sizeof keys);
    taas_buf_free(&cmd);
    return rc;
}

static int ssh_launch_ranks(taas_job *j, taas_error *err) {
    ssh_state *st = j->be_state;
    char np[16];
    if (send_keys(j, st, err)) return -1;
    snprintf(np, sizeof np, "%d", j->world);
    taas_buf hosts = TAAS_BUF_INIT;
    for (int r = 0; r < j->world; r++) {
        int h = st->rank_host[r], n = 1;
        while (r + 1 < j->world && st->rank_host[r + 1] == h) r++, n++;
        taas_buf_printf(&hosts, "%s%s:%d", hosts.len ? "," : "", host_of(j, h)->address, n);
    }
    /* Open MPI hands the agent string to a shell: its words are plain (cluster.c, plain_programs) */
    taas_buf agent = TAAS_BUF_INIT;
    taas_buf_puts(&agent, st->ssh);
    if (j->cluster.ssh_config[0]) taas_buf_printf(&agent, " -F %s", j->cluster.ssh_config);
    taas_buf_puts(&agent, " -o BatchMode=yes");
    /* Open MPI's channels on the kernel's network only */
    char *argv[] = {st->mpirun, "-np", np, "--host", hosts.data, "--bind-to", "none",
                    "--mca", "plm_rsh_agent", agent.data, "--mca", "oob_tcp_if_include", st->cidr,
                    "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", st->cidr,
                    "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS", "-x", "OMPI_MCA_mpi_yield_when_idle",
                    st->worker, "trainer", "--control", j->endpoint, "--keys-from", st->keys_file, NULL};
    char threads[2][48];
    char **env = taas_procs_env(j, NULL, threads);
    st->procs.ranks = taas_procs_spawn(j, "mpirun", argv, env, NULL, 0, err);
    st->procs.mpirun = 1;
    free(env);
    taas_buf_free(&hosts);
    taas_buf_free(&agent);
    return st->procs.ranks ? 0 : -1;
}

static int ssh_launch_loader(taas_job *j, job_loader *l, taas_error *err) {
    ssh_state *st = j->be_state;
    int i = (int)(l - j->loaders);
    if (!st->procs.loaders && !(st->procs.loaders = calloc((size_t)j->nloaders, sizeof *st->procs.loaders)))
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting a loader");
    if (l->gen > 0 && st->ncpu > 1) {  /* a replacement goes to the next loader host: its own may be down */
        int k = 0;
        while (st->cpu_hosts[k] != st->loader_host[i]) k++;
        st->loader_host[i] = st->cpu_hosts[(k + 1) % st->ncpu];
    }
    char s[16], w[16], g[16], what[128];
    snprintf(s, sizeof s, "%d", l->stream);
    snprintf(w, sizeof w, "%d", l->worker);
    snprintf(g, sizeof g, "%d", l->gen);
    char label[64];
    taas_job_loader_label(j, l, label, sizeof label);
    if ((size_t)snprintf(what, sizeof what, "%s on %s", label, host_of(j, st->loader_host[i])->name) >= sizeof what)
        what[sizeof what - 1] = '\0';
    taas_buf cmd = TAAS_BUF_INIT;
    taas_buf_puts(&cmd, "exec ");
    const char *words[] = {st->worker, "loader", "--control", j->endpoint, "--stream", s, "--worker", w,
                           "--generation", g, "--keys-from", "-", NULL};
    for (int k = 0; words[k]; k++) shell_word(&cmd, words[k]);
    const char *argv[24];
    int n = ssh_argv(j, st, argv, 20);
    argv[n++] = host_of(j, st->loader_host[i])->address;
    argv[n++] = cmd.data;
    argv[n] = NULL;
    char keys[TAAS_ZKEYS_TEXT + 2];
    taas_zkeys_text(&j->keys, keys);
    strcat(keys, "\n");
    char threads[2][48];
    char **env = taas_procs_env(j, NULL, threads);
    taas_proc *p = taas_procs_spawn(j, what, (char **)argv, env, keys, 1, err);
    explicit_bzero(keys, sizeof keys);
    free(env);
    taas_buf_free(&cmd);
    taas_procs_set(j, &st->procs, i, p);
    return p ? 0 : -1;
}

static void ssh_watch(taas_job *j) {
    ssh_state *st = j->be_state;
    taas_procs_watch(j, &st->procs);
}

/* A host that did not confirm the cancel: a job that was to resume cannot (its old ranks
 * may still run there); one that ends anyway says it. */
static void fail_or_say(taas_job *j, const taas_cluster_host *h, const char *why) {
    char what[1024];
    snprintf(what, sizeof what, "host %s (%s) did not confirm that the job's processes are gone and its keys removed: "
             "%.600s", h ? h->name : "?", h ? h->address : "?", why);
    if (j->resuming) {
        if (j->failed) return;
        taas_job_fail(j, TAAS_ERR_OFFLOAD, NULL, "%s", what);
        char paste[1024];
        taas_error_hint(&j->failure, "check the host (%s), end any taas-worker left there, and run the cell again",
                        ssh_true(j, j->be_state, h, paste, sizeof paste));
        return;
    }
    char line[1100];
    snprintf(line, sizeof line, "[job] %s\n", what);
    if (j->io && j->io->stream) j->io->stream(j->io->ctx, "stderr", line);
}

/* The command that ends the job on one host: SIGKILL to its pids, its keys file removed,
 * then a wait (GONE_S at most) until the pids are gone; "gone" on stdout says all of it held.
 * The pids are numbers from the hellos; the keys file's name is the job's own. */
static void cancel_command(const ssh_state *st, const taas_buf *pids, int keys, taas_buf *cmd) {
    if (pids->len) taas_buf_printf(cmd, "kill -9%s 2>/dev/null; ", pids->data);
    if (keys) {
        taas_buf_puts(cmd, "rm -f ");
        shell_word(cmd, st->keys_file);
        taas_buf_puts(cmd, "|| exit 3; ");
    }
    /* gone: no /proc entry, or a zombie (its parent may be slow to reap it) */
    if (pids->len)
        taas_buf_printf(cmd, "for p in%s; do i=0; while :; do s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -c1); "
                        "[ -z \"$s\" ] || [ \"$s\" = Z ] && break; i=$((i+1)); [ $i -gt %d ] && exit 4; sleep 0.1; "
                        "done; done; ", pids->data, GONE_S * 10);
    taas_buf_puts(cmd, "echo gone");
}

/* Ends every process of the job on every host: the local ssh and mpirun go (a loader's stdin
 * closes, so it exits; Open MPI's daemons end their ranks when mpirun's connection goes),
 * and each host is told to kill the pids the workers gave in their hellos and remove the
 * keys, in parallel, and to say when they are gone: it waits for every host's word, CHECK_S
 * at most, so that a relaunch never starts beside the old processes. A host that does not
 * confirm is named: the job's error when it was to resume, a line otherwise. */
static void ssh_cancel(taas_job *j) {
    ssh_state *st = j->be_state;
    taas_procs_kill(j, &st->procs);
    if (st->killed) return;
    st->killed = 1;
    int nh = (int)j->cluster.nhosts;
    taas_buf *pids = calloc((size_t)nh, sizeof *pids);
    taas_proc **p = calloc((size_t)nh, sizeof *p);
    if (!pids || !p) {
        free(pids);
        free(p);
        fail_or_say(j, NULL, "out of memory");
        return;
    }
    for (int r = 0; j->ranks && r < j->world; r++)
        if (j->ranks[r].hello && j->ranks[r].pid > 0)
            taas_buf_printf(&pids[st->rank_host[r]], " %d", (int)j->ranks[r].pid);
    for (int i = 0; j->loaders && i < j->nloaders; i++)
        if (j->loaders[i].hello && j->loaders[i].pid > 0)
            taas_buf_printf(&pids[st->loader_host[i]], " %d", (int)j->loaders[i].pid);
    for (int h = 0; h < nh; h++) {
        int keys = st->keys_file[0] && st->rank_hosts[h];
        if (!pids[h].len && !keys) continue;
        taas_buf cmd = TAAS_BUF_INIT;
        cancel_command(st, &pids[h], keys, &cmd);
        const char *argv[24];
        int n = ssh_argv(j, st, argv, 20);
        argv[n++] = host_of(j, h)->address;
        argv[n++] = cmd.data;
        argv[n] = NULL;
        taas_error e;
        if (!(p[h] = taas_proc_spawn("ssh kill", (char **)argv, NULL, NULL, 0, &e))) fail_or_say(j, host_of(j, h), e.message);
        taas_buf_free(&cmd);
    }
    double until = taas_now() + CHECK_S;
    for (int h = 0; h < nh; h++) {
        if (!p[h]) continue;
        while (!taas_proc_reap(p[h]) && taas_now() < until) {
            taas_proc_read(p[h], NULL, NULL);
            struct pollfd pf[2] = {{p[h]->pidfd, POLLIN, 0}, {p[h]->out_fd, POLLIN, 0}};
            poll(pf, p[h]->out_fd >= 0 ? 2 : 1, 100);
        }
        taas_proc_read(p[h], NULL, NULL);
        if (!p[h]->exited) {
            char why[64];
            snprintf(why, sizeof why, "no answer over ssh within %.0f s", CHECK_S);
            fail_or_say(j, host_of(j, h), why);
        } else if (!taas_proc_ok(p[h]) || !strstr(p[h]->tail, "gone")) {
            int status = WIFEXITED(p[h]->status) ? WEXITSTATUS(p[h]->status) : -1;
            char why[700];
            snprintf(why, sizeof why, "%.600s", status == 4   ? "its processes outlived SIGKILL"
                                            : status == 3 ? "it could not remove the job's keys file"
                                                          : p[h]->tail[0] ? p[h]->tail : "ssh failed");
            for (char *c = why; *c; c++)
                if (*c == '\n' || *c == '\r') *c = ' ';
            fail_or_say(j, host_of(j, h), why);
        }
        taas_proc_free(p[h]);
    }
    for (int h = 0; h < nh; h++) taas_buf_free(&pids[h]);
    free(pids);
    free(p);
}

static void ssh_free(taas_job *j) {
    ssh_state *st = j->be_state;
    taas_procs_free(j, &st->procs);
    free(st->rank_host);
    free(st->loader_host);
    free(st->cpu_hosts);
    free(st->rank_hosts);
    free(st);
    j->be_state = NULL;
}

/* After cancel (the hosts' pids killed, the keys' files gone): launches again. */
static void ssh_reset(taas_job *j) {
    ssh_state *st = j->be_state;
    taas_procs_free(j, &st->procs);
    st->killed = 0;
}

const taas_backend taas_backend_ssh = {
    .name = "ssh",
    .plan = ssh_plan,
    .launch_ranks = ssh_launch_ranks,
    .launch_loader = ssh_launch_loader,
    .watch = ssh_watch,
    .cancel = ssh_cancel,
    .free = ssh_free,
    .reset = ssh_reset,
};
