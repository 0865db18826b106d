/* The kernel process: the ZeroMQ sockets of the five channels and the event loop that
 * serves them. One thread owns shell, control, stdin and iopub; the heartbeat echoes on
 * its own. Running a cell is a state of the loop, never a blocking call, so control
 * requests (interrupt, shutdown, kernel_info) are answered while a cell waits. */
#ifndef TAAS_KERNEL_H
#define TAAS_KERNEL_H

#include "connection.h"
#include "error.h"

typedef struct taas_kernel taas_kernel;

/* Binds every channel of c, starts the heartbeat, installs the SIGINT (interrupt) and
 * SIGTERM (orderly shutdown) handlers and creates the interpreter. NULL with a
 * TaasConnectionError when a port cannot be bound. One kernel per process. */
taas_kernel *taas_kernel_new(const taas_connection *c, taas_error *err);

/* Publishes status "starting" and serves requests until a shutdown_request or SIGTERM.
 * 0 on an orderly end; -1 with an error when polling the sockets fails. */
int taas_kernel_run(taas_kernel *k, taas_error *err);

/* Stops the heartbeat, closes the sockets (after a short linger, so the last replies
 * reach the client), restores the signal handlers and frees everything. */
void taas_kernel_free(taas_kernel *k);

#endif
