/* What the backends that start processes from the kernel share (local: the workers
 * themselves; ssh: ssh and mpirun over ssh; slurm: srun): the job's processes on this
 * machine — one that runs the ranks (mpirun, srun, or the one rank), one per loader worker —
 * their output as the job's lines, and their ends told to the job. Private to kernel/job. */
#ifndef TAAS_BACKEND_PROCS_H
#define TAAS_BACKEND_PROCS_H

#include "job_priv.h"
#include "proc.h"

typedef struct job_procs {
    taas_proc *ranks;      /* what runs the ranks */
    taas_proc **loaders;   /* by the loader's place in j->loaders */
    int mpirun;            /* the ranks' process is mpirun: its report names a rank that died */
    int reported;          /* mpirun printed that report (it is done, even if it does not exit) */
    /* the backend's own words for the ranks' end, when it has them (Slurm's node failure):
     * 1 with out written, else 0 */
    int (*why)(taas_job *j, const taas_proc *p, char *out, size_t n);
    /* sees every line a process prints before the job shows it (may be NULL) */
    void (*line)(taas_job *j, const char *text);
    taas_job *job;         /* while a watch runs: whose lines they are */
} job_procs;

/* The kernel's environment for a job's process: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS
 * from j->threads, Open MPI's switches (yield when idle; root allowed, as a container's root
 * is the usual case), the extra entries (NULL-terminated, may be NULL), and never a
 * $TAAS_JOB_KEYS of the kernel's own. malloc'd array; the strings are the caller's,
 * environ's or static; env_free frees it. */
char **taas_procs_env(const taas_job *j, const char *const *extra, char threads[2][48]);

/* Starts argv (env: taas_procs_env's) watched by the job; input (may be NULL) is written
 * to its stdin, which stays open while it runs (keep_stdin) or is closed after input. */
taas_proc *taas_procs_spawn(taas_job *j, const char *what, char **argv, char **env, const char *input,
                            int keep_stdin, taas_error *err);

/* Runs argv to its end, at most timeout_s, input (may be NULL) on its stdin; its output's
 * last 2 KiB into out (NUL-terminated, newlines kept). 0 with *status (waitpid's), or -1
 * with err when it could not start or ran out of time (it is killed then; what says who
 * for the message). */
int taas_procs_run(const char *what, char *const argv[], const char *input, double timeout_s, char *out, size_t n,
                   int *status, taas_error *err);

/* The ranks' process (index -1) or loader i's: replaces what was there. */
void taas_procs_set(taas_job *j, job_procs *p, int i, taas_proc *proc);

/* Reads every process's output into the job and tells it of the ones that ended. */
void taas_procs_watch(taas_job *j, job_procs *p);
/* Kills every process (SIGKILL to its session) and reaps it. */
void taas_procs_kill(taas_job *j, job_procs *p);
/* Frees the processes (after kill); the why and line hooks stay. */
void taas_procs_free(taas_job *j, job_procs *p);

#endif
