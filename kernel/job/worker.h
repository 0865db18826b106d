/* Running taas-worker from the kernel. The kernel does not link the data loading library
 * (it would double the kernel's memory): to look at data it runs `taas-worker probe` or
 * `taas-worker show` as a child process in its own process group (so the notebook's SIGINT
 * reaches only the kernel), hands it the spec on stdin and collects stdout. stderr goes to
 * an anonymous memory file read at the end, so only stdout has to be watched. */
#ifndef TAAS_WORKER_H
#define TAAS_WORKER_H

#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "error.h"

/* Where taas-worker is: $TAAS_WORKER when set, else next to the running executable
 * (/proc/self/exe's folder), else the first one on $PATH. */
int taas_worker_find(char *out, size_t n, taas_error *err);
/* The same with the three inputs given (override and path_env may be NULL). */
int taas_worker_find_in(const char *override, const char *self_exe, const char *path_env, char *out, size_t n,
                        taas_error *err);

/* Another program the kernel runs (mpirun): $env_var when set, else the first on $PATH;
 * the error names the Debian package that has it. */
int taas_program_find(const char *name, const char *env_var, const char *package, char *out, size_t n,
                      taas_error *err);

typedef struct taas_child taas_child;

/* Starts `taas-worker ROLE ARGS...` (args NULL-terminated) with input on its stdin. */
taas_child *taas_child_start(const char *role, const char *const *args, const char *input, size_t len,
                             taas_error *err);
/* Stops it if it still runs (SIGKILL to its process group), reaps it, closes everything. */
void taas_child_free(taas_child *c);

/* Its process id (also its process group's), for a gentle stop (SIGINT) before the kill. */
pid_t taas_child_pid(const taas_child *c);
/* The read end of its stdout (non-blocking): readable when there is output or at the end. */
int taas_child_fd(const taas_child *c);
/* Reads what stdout has now: 1 at its end, 0 when more is to come, -1 with an error when
 * the output passes max bytes or cannot be read. */
int taas_child_pump(taas_child *c, size_t max, taas_error *err);
/* stdout so far. */
const taas_buf *taas_child_output(const taas_child *c);
/* After the end of stdout: waits for the child and turns its exit into a status: 0 for
 * exit status 0; else -1 with the error the worker reported (the last {"error": ...} line
 * of stdout or stderr, taken over as it is), or one naming the exit status or signal and
 * quoting stderr. */
int taas_child_finish(taas_child *c, taas_error *err);
/* stderr's last line (malloc'd, "" when none), once the child has exited. */
char *taas_child_last_line(const taas_child *c);

/* Runs the worker to its end, reading stdout into out, for at most timeout_s seconds;
 * returns early with KeyboardInterrupt when intr_fd (>= 0) becomes readable. Errors as
 * taas_child_finish, TaasTimeoutError naming the setting (timeout_name) to raise. */
int taas_worker_run(const char *role, const char *const *args, const char *input, size_t len, double timeout_s,
                    const char *timeout_name, int intr_fd, taas_buf *out, taas_error *err);

/* A timeout in seconds from the environment variable name (a positive number), else dflt. */
double taas_worker_timeout(const char *name, double dflt);

#endif
