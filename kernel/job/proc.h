/* Processes of an offloaded job on this machine (the local backend): started in a session
 * of their own, so the notebook's interrupt reaches only the kernel and the kernel can end
 * each one's whole process group; killed by the system when the kernel dies
 * (PR_SET_PDEATHSIG), so no worker outlives a crashed kernel. stdout and stderr go to one
 * pipe that the job reads line by line; a pidfd tells when the process has ended. */
#ifndef TAAS_PROC_H
#define TAAS_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "error.h"

typedef struct taas_proc {
    char what[48];       /* "mpirun", "loader 0.1": for messages */
    pid_t pid;
    int pidfd;           /* readable once the process has ended; -1 after it was reaped */
    int out_fd;          /* stdout + stderr, non-blocking; -1 at its end */
    int in_fd;           /* the write end of its stdin while it is kept open, else -1 */
    taas_buf partial;    /* output not yet ended by a newline */
    char tail[2048];     /* the last output, for error messages */
    int exited;          /* reaped */
    int status;          /* from waitpid, once exited */
} taas_proc;

/* Starts argv[0] (a path) with the environment env (NULL: the kernel's). Its stdin is
 * /dev/null, or with input (not NULL) a pipe that gets input first and stays open until
 * the process is killed (keep_stdin: a lifeline — a worker behind ssh sees its end as the
 * kernel's) or is closed after it. NULL with err. */
taas_proc *taas_proc_spawn(const char *what, char *const argv[], char *const env[], const char *input,
                           int keep_stdin, taas_error *err);
/* SIGKILL to its children, its process group and it, then reaps it. */
void taas_proc_kill(taas_proc *p);
/* Kills and reaps it if it still runs, closes everything, frees. */
void taas_proc_free(taas_proc *p);

/* Reads what the pipe has and calls line() for each complete line (without the newline).
 * Returns 1 at the end of the output, 0 otherwise. */
int taas_proc_read(taas_proc *p, void (*line)(void *ctx, taas_proc *p, const char *text), void *ctx);
/* Reaps it if it has ended (never blocks): 1 when it has, 0 when it still runs. */
int taas_proc_reap(taas_proc *p);
/* "exit status 3", "signal 9 (Killed)", for messages; only after taas_proc_reap said 1. */
void taas_proc_describe(const taas_proc *p, char *out, size_t n);
/* 1 when it ended by exit status 0. */
int taas_proc_ok(const taas_proc *p);

#endif
