/* The job's processes on this machine, for the backends that start them (backend_procs.h). */
#include "backend_procs.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "errnames.h"

extern char **environ;

char **taas_procs_env(const taas_job *j, const char *const *extra, char threads[2][48]) {
    size_t n = 0, ne = 0;
    while (environ[n]) n++;
    while (extra && extra[ne]) ne++;
    char **env = calloc(n + ne + 8, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "OMP_NUM_THREADS=", 16) && strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) &&
            strncmp(environ[i], TAAS_ZKEYS_ENV "=", sizeof TAAS_ZKEYS_ENV))
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
    for (size_t i = 0; i < ne; i++) env[k++] = (char *)extra[i];
    env[k] = NULL;
    return env;
}

taas_proc *taas_procs_spawn(taas_job *j, const char *what, char **argv, char **env, const char *input,
                            int keep_stdin, taas_error *err) {
    if (!env) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting %s", what);
        return NULL;
    }
    taas_proc *p = taas_proc_spawn(what, argv, env, input, keep_stdin, err);
    if (!p) return NULL;
    taas_job_watch(j, p->out_fd);
    taas_job_watch(j, p->pidfd);
    return p;
}

void taas_procs_set(taas_job *j, job_procs *p, int i, taas_proc *proc) {
    taas_proc **slot = i < 0 ? &p->ranks : &p->loaders[i];
    if (*slot) {
        taas_job_unwatch(j, (*slot)->pidfd);
        taas_job_unwatch(j, (*slot)->out_fd);
        taas_proc_free(*slot);
    }
    *slot = proc;
}

static void on_line(void *ctx, taas_proc *p, const char *text) {
    job_procs *ps = ctx;
    if (ps->mpirun && p == ps->ranks && strstr(text, "noticed that process rank ")) ps->reported = 1;
    if (ps->line) ps->line(ps->job, text);
    taas_job_line(ps->job, p->what, text);
}

/* "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)." */
static int mpirun_rank_death(const char *tail, int *rank, char *host, size_t hn, char *how, size_t wn) {
    const char *p = strstr(tail, "noticed that process rank ");
    if (!p) return 0;
    char h[64] = "";
    int r;
    if (sscanf(p, "noticed that process rank %d with PID %*d on node %63s", &r, h) != 2) return 0;
    const char *e = strstr(p, "exited on ");
    *rank = r;
    snprintf(host, hn, "%s", h);
    if (e) {
        const char *end = strpbrk(e, ".\n");
        snprintf(how, wn, "%.*s", end ? (int)(end - e) : (int)strlen(e), e);
    } else {
        snprintf(how, wn, "died");
    }
    return 1;
}

static void ranks_ended(taas_job *j, job_procs *ps, taas_proc *p) {
    char how[96], host[64], what[1024];
    int rank;
    /* what the loaders printed up to now first: their lines may say why (a preemption) */
    for (int i = 0; ps->loaders && i < j->nloaders; i++)
        if (ps->loaders[i]) taas_proc_read(ps->loaders[i], on_line, ps);
    /* the backend's words first: srun may exit 0 after a node failure */
    if (ps->why && ps->why(j, p, what, sizeof what)) {
        taas_job_ranks_ended(j, 0, what);
        return;
    }
    if (taas_proc_ok(p)) {
        taas_job_ranks_ended(j, 1, "");
        return;
    }
    if (ps->mpirun && mpirun_rank_death(p->tail, &rank, host, sizeof host, how, sizeof how)) {
        const job_rank *k = rank >= 0 && rank < j->world ? &j->ranks[rank] : NULL;
        char pid[32] = "";  /* a rank that died before its hello has not said it */
        if (k && k->pid > 0) snprintf(pid, sizeof pid, " (pid %d)", (int)k->pid);
        snprintf(what, sizeof what, "trainer rank %d on %s%s %s", rank, k && k->host[0] ? k->host : host, pid, how);
    } else if (ps->mpirun && WIFEXITED(p->status) && WEXITSTATUS(p->status) > 128) {
        /* mpirun gives a rank's death as its status, 128 + the signal, when it said no more */
        int sig = WEXITSTATUS(p->status) - 128;
        snprintf(what, sizeof what, "a trainer rank exited on signal %d (%s) (mpirun's exit status %d)", sig,
                 strsignal(sig), WEXITSTATUS(p->status));
    } else {
        taas_proc_describe(p, how, sizeof how);
        snprintf(what, sizeof what, "%s ended with %s before the job was done: %.600s", p->what, how,
                 p->tail[0] ? p->tail : "(no output)");
    }
    taas_job_ranks_ended(j, 0, what);
}

void taas_procs_watch(taas_job *j, job_procs *ps) {
    ps->job = j;
    taas_proc *p = ps->ranks;
    if (p && !p->exited) {
        taas_proc_read(p, on_line, ps);
        /* mpirun's report of a dead rank is its last word, but Open MPI 4.1 may then hang
         * (a rank killed while it connects to PMIx): the report is the ranks' end */
        if (ps->reported && !taas_proc_reap(p)) {
            taas_job_unwatch(j, p->pidfd);
            taas_proc_kill(p);
        }
        if (taas_proc_reap(p)) {
            taas_proc_read(p, on_line, ps);
            ranks_ended(j, ps, p);
        }
    }
    for (int i = 0; ps->loaders && i < j->nloaders; i++) {
        p = ps->loaders[i];
        if (!p || p->exited) continue;
        taas_proc_read(p, on_line, ps);
        if (taas_proc_reap(p)) {
            taas_proc_read(p, on_line, ps);
            char how[96];
            taas_proc_describe(p, how, sizeof how);
            taas_job_loader_ended(j, &j->loaders[i], taas_proc_ok(p), how);
        }
    }
}

void taas_procs_kill(taas_job *j, job_procs *ps) {
    if (ps->ranks) {
        taas_job_unwatch(j, ps->ranks->pidfd);
        taas_proc_kill(ps->ranks);
    }
    for (int i = 0; ps->loaders && i < j->nloaders; i++)
        if (ps->loaders[i]) {
            taas_job_unwatch(j, ps->loaders[i]->pidfd);
            taas_proc_kill(ps->loaders[i]);
        }
}

void taas_procs_free(taas_job *j, job_procs *ps) {
    taas_proc_free(ps->ranks);
    for (int i = 0; ps->loaders && i < j->nloaders; i++) taas_proc_free(ps->loaders[i]);
    free(ps->loaders);
    int (*why)(taas_job *, const taas_proc *, char *, size_t) = ps->why;
    void (*line)(taas_job *, const char *) = ps->line;
    memset(ps, 0, sizeof *ps);
    ps->why = why;
    ps->line = line;
}

int taas_procs_run(const char *what, char *const argv[], const char *input, double timeout_s, char *out, size_t n,
                   int *status, taas_error *err) {
    taas_proc *p = taas_proc_spawn(what, argv, NULL, input, 0, err);
    if (!p) return -1;
    double until = taas_now() + timeout_s;
    int rc = 0;
    while (!taas_proc_reap(p)) {
        taas_proc_read(p, NULL, NULL);
        double left = until - taas_now();
        if (left <= 0) {
            taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "%s did not finish within %.0f s", what, timeout_s);
            taas_error_hint(err, "the cluster may be busy or unreachable; run the cell again");
            rc = -1;
            break;
        }
        struct pollfd pf[2] = {{p->pidfd, POLLIN, 0}, {p->out_fd, POLLIN, 0}};
        poll(pf, p->out_fd >= 0 ? 2 : 1, (int)(left * 1000) + 1);
    }
    if (rc == 0) {
        while (taas_proc_read(p, NULL, NULL) == 0) {
            struct pollfd pf = {p->out_fd, POLLIN, 0};
            if (poll(&pf, 1, 1000) <= 0) break;  /* a grandchild holding the pipe: not ours to wait for */
        }
        *status = p->status;
        snprintf(out, n, "%s", p->tail);
    }
    taas_proc_free(p);
    return rc;
}
