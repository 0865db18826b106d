/* Inside the kernel: the state shared by the event loop (kernel.c), the dispatch table
 * (handlers.c) and cell execution (execute.c). Not for use outside kernel/protocol. */
#ifndef TAAS_KERNEL_PRIV_H
#define TAAS_KERNEL_PRIV_H

#include <jansson.h>

#include "heartbeat.h"
#include "history.h"
#include "interp.h"
#include "kernel.h"
#include "session.h"
#include "wire.h"

typedef enum taas_channel { TAAS_CH_SHELL = 1, TAAS_CH_CONTROL = 2 } taas_channel;

/* A cell being run: its request is the parent of everything it outputs. */
typedef struct taas_exec {
    taas_msg *req;
    void *sock;            /* where the execute_reply goes */
    char *code;
    int silent;
    int store_history;
    int stop_on_error;
    int count;             /* the execution_count this cell reports */
    json_t *payload;       /* pager payloads collected from help() */
    char started[32];
} taas_exec;

struct taas_kernel {
    void *zctx;
    void *shell, *control, *stdin_sock, *iopub;
    taas_heartbeat *hb;
    taas_session *session;
    int ports[5];          /* shell, iopub, stdin, control, hb: for connect_reply */
    taas_interp *interp;
    taas_history *history;
    taas_io io;
    int execution_count;
    taas_exec *current;    /* the cell whose outputs io writes, while it runs */
    taas_exec *running;    /* set while the cell waits (TAAS_RUN_WAIT) */
    /* Shell requests read while a cell waits, served in order once it ends (an
     * is_complete_request is answered at once: it needs nothing the cell changes, and a
     * console asks it on every Enter). When a cell fails with stop_on_error, every request
     * already sent is taken off the socket BEFORE its reply goes out, so that nothing the
     * client sends after seeing the error is aborted: the first n_abort are those, whose
     * execute_requests are answered "aborted", the rest served as usual. */
    taas_msg **queued;
    size_t n_queued, queued_next, n_abort, queued_cap;
    int aborting;          /* while one of the first n_abort is served */
    int served;            /* a request was handled: a welcome then says busy or idle */
    int stopping;          /* shutdown requested: the loop ends */
    int in_walk;           /* a running cell's walk over values serves control (kernel.c) */
    int walk_interrupted;  /* an interrupt_request came meanwhile: the walk ends */
    int restart;
    int sig_rx;            /* read end of the signal self-pipe */
    int sig_tx;
};

/* iopub: a message with the given parent header (NULL for none); steals content. */
void taas_kernel_publish(taas_kernel *k, const char *msg_type, const json_t *parent,
                         json_t *content);
void taas_kernel_status(taas_kernel *k, const char *state, const json_t *parent);
/* A reply to req on sock, addressed to its identities; steals content. */
void taas_kernel_reply(taas_kernel *k, void *sock, const taas_msg *req, const char *msg_type,
                       json_t *content);
/* {status: "error", ename, evalue, traceback: []} (new reference). */
json_t *taas_error_reply_content(const char *ename, const char *evalue);

/* Takes every shell request waiting in ZeroMQ into the queue, all to be aborted
 * (stop_on_error). */
void taas_kernel_hold_queued(taas_kernel *k);

/* handlers.c: busy, the handler for msg's type, idle. Takes msg. */
void taas_kernel_dispatch(taas_kernel *k, void *sock, taas_channel ch, taas_msg *msg);

/* execute.c */
void taas_execute_io_init(taas_kernel *k);
/* Handles an execute_request; takes msg and sends its idle status itself (at once, or
 * when a waiting cell ends). */
void taas_execute_request(taas_kernel *k, void *sock, taas_msg *msg);
/* Continues the waiting cell (its deadline passed). */
void taas_execute_resume(taas_kernel *k);
/* Ends the waiting cell with KeyboardInterrupt. Without one, only logs. */
void taas_execute_interrupt(taas_kernel *k);
/* execute_reply {status: "aborted"} for an execute_request queued behind a failed cell. */
void taas_execute_abort(taas_kernel *k, void *sock, const taas_msg *msg);
/* Frees a cell left waiting at shutdown. */
void taas_execute_discard(taas_kernel *k);

#endif
