#include "kernel_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "errnames.h"
#include "log.h"
#include "zsock.h"

#define ENAME TAAS_ERR_CONNECTION
/* How long closing sockets waits for the last replies to leave (ms). */
#define LINGER_MS 1000

/* The write end of the self-pipe. A signal handler can reach nothing else, so this one
 * file-scope variable is the price of async-signal safety (one kernel per process). */
static volatile sig_atomic_t g_sig_tx = -1;

/* SIGTERM's grace: the loop shuts down in far less; a kernel held where it cannot see the
 * signal (a file that blocks, a bug) is ended by SIGALRM's default action instead. */
#define TERM_GRACE_S 10

static void on_signal(int sig) {
    int saved = errno;
    char c = sig == SIGINT ? 'i' : 't';
    if (sig == SIGTERM) alarm(TERM_GRACE_S);
    if (g_sig_tx >= 0) {
        ssize_t r = write(g_sig_tx, &c, 1);
        (void)r;   /* a full pipe already holds a pending wake-up */
    }
    errno = saved;
}

void taas_kernel_publish(taas_kernel *k, const char *msg_type, const json_t *parent,
                         json_t *content) {
    /* the topic frame, as ipykernel names it; subscribers take everything */
    char topic[128];
    snprintf(topic, sizeof topic, "kernel.%s.%s", taas_session_id(k->session), msg_type);
    taas_blob id = {topic, strlen(topic)};
    taas_session_send(k->session, k->iopub, &id, 1, msg_type, parent, NULL, content);
}

void taas_kernel_status(taas_kernel *k, const char *state, const json_t *parent) {
    taas_kernel_publish(k, "status", parent, json_pack("{s:s}", "execution_state", state));
}

void taas_kernel_reply(taas_kernel *k, void *sock, const taas_msg *req, const char *msg_type,
                       json_t *content) {
    taas_session_send(k->session, sock, req->ids, req->n_ids, msg_type, req->header, NULL,
                      content);
}

json_t *taas_error_reply_content(const char *ename, const char *evalue) {
    return json_pack("{s:s, s:o, s:o, s:[]}", "status", "error", "ename",
                     taas_json_string(ename), "evalue", taas_json_string(evalue), "traceback");
}

static int bind_channel(taas_kernel *k, const taas_connection *c, void **sock, int type,
                        const char *name, int port, taas_error *err) {
    char ep[300];
    if (taas_connection_endpoint(c, port, ep, sizeof ep)) {
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "the %s channel's address is too long",
                       name);
        taas_error_hint(err, "use a shorter \"ip\" in the connection file");
        return -1;
    }
    char what[32];
    snprintf(what, sizeof what, "the %s channel's", name);
    /* plain: Jupyter signs every message with the connection file's key; a client that
     * reconnects with the same identity takes over its route. A message over
     * TAAS_WIRE_MAX_BYTES is read and answered with an error; only a frame over 1 GiB makes
     * ZeroMQ drop its peer (TAAS_WIRE_ZMQ_MAXMSGSIZE). */
    taas_zsock_cfg zc = {.type = type, .what = what, .linger_ms = LINGER_MS, .sndhwm = -1, .rcvhwm = -1,
                         .maxmsg = TAAS_WIRE_ZMQ_MAXMSGSIZE, .flags = type == ZMQ_ROUTER ? TAAS_ZSOCK_HANDOVER
                                 : type == ZMQ_XPUB ? TAAS_ZSOCK_VERBOSE : 0};
    *sock = taas_zsock_bind(k->zctx, &zc, ep, NULL, 0, err);
    if (!*sock) {
        snprintf(err->ename, sizeof err->ename, "%s", ENAME);
        taas_error_hint(err, "another process may hold the port; let Jupyter start the kernel "
                             "again, which picks free ports");
        return -1;
    }
    return 0;
}

static int install_signals(taas_kernel *k, taas_error *err) {
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "cannot create the signal pipe: %s",
                       strerror(errno));
        return -1;
    }
    k->sig_rx = fds[0];
    k->sig_tx = fds[1];
    g_sig_tx = fds[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int serve_one(taas_kernel *k, void *sock, taas_channel ch);

/* A cell's long walk over values asks now and then whether to stop (interp.h): control is
 * served meanwhile, as while a cell waits, so that an interrupt_request (interrupt_mode
 * "message") or a shutdown_request ends the walk as the stop button's SIGINT does. */
static int walk_stops(void *ctx) {
    taas_kernel *k = ctx;
    k->in_walk = 1;
    k->walk_interrupted = 0;
    while (!k->stopping && !k->walk_interrupted && serve_one(k, k->control, TAAS_CH_CONTROL) == 0) {}
    k->in_walk = 0;
    return k->walk_interrupted || k->stopping;
}

taas_kernel *taas_kernel_new(const taas_connection *c, taas_error *err) {
    taas_kernel *k = calloc(1, sizeof *k);
    if (!k) {
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "out of memory");
        return NULL;
    }
    k->sig_rx = k->sig_tx = -1;
    k->ports[0] = c->shell_port;
    k->ports[1] = c->iopub_port;
    k->ports[2] = c->stdin_port;
    k->ports[3] = c->control_port;
    k->ports[4] = c->hb_port;
    if (install_signals(k, err)) goto fail;
    k->session = taas_session_new(c->key, c->key_len, err);
    if (!k->session) goto fail;
    if (c->key_len == 0)
        taas_log("the connection file has an empty key: messages are neither signed nor "
                 "verified");
    k->zctx = zmq_ctx_new();
    if (!k->zctx) {
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "cannot start ZeroMQ: %s",
                       zmq_strerror(errno));
        goto fail;
    }
    if (bind_channel(k, c, &k->shell, ZMQ_ROUTER, "shell", c->shell_port, err) ||
        bind_channel(k, c, &k->control, ZMQ_ROUTER, "control", c->control_port, err) ||
        bind_channel(k, c, &k->stdin_sock, ZMQ_ROUTER, "stdin", c->stdin_port, err) ||
        bind_channel(k, c, &k->iopub, ZMQ_XPUB, "iopub", c->iopub_port, err))
        goto fail;
    char ep[300];
    if (taas_connection_endpoint(c, c->hb_port, ep, sizeof ep)) {
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "the hb channel's address is too long");
        goto fail;
    }
    k->hb = taas_heartbeat_new(k->zctx, ep, err);
    if (!k->hb) goto fail;
    k->history = taas_history_new();
    k->interp = taas_interp_new();
    if (!k->history || !k->interp) {
        taas_error_set(err, TAAS_ERR_INTERNAL, (taas_srcpos){0, 0},
                       "cannot create the interpreter (out of memory)");
        goto fail;
    }
    /* a dataset's probe runs synchronously inside a cell; SIGINT ends it through this */
    taas_interp_set_interrupt_fd(k->interp, k->sig_rx);
    taas_interp_set_interrupt_check(k->interp, walk_stops, k);
    taas_execute_io_init(k);
    return k;
fail:
    taas_kernel_free(k);
    return NULL;
}

void taas_kernel_free(taas_kernel *k) {
    if (!k) return;
    taas_execute_discard(k);
    for (size_t i = k->queued_next; i < k->n_queued; i++) taas_msg_free(k->queued[i]);
    free(k->queued);
    taas_heartbeat_free(k->hb);
    void *socks[4] = {k->shell, k->control, k->stdin_sock, k->iopub};
    for (int i = 0; i < 4; i++)
        if (socks[i]) zmq_close(socks[i]);
    if (k->zctx) zmq_ctx_term(k->zctx);
    if (k->interp) taas_interp_free(k->interp);
    taas_history_free(k->history);
    taas_session_free(k->session);
    if (k->sig_tx >= 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        g_sig_tx = -1;
        close(k->sig_tx);
        close(k->sig_rx);
    }
    free(k);
}

static void handle_signals(taas_kernel *k) {
    char buf[64];
    ssize_t n;
    while ((n = read(k->sig_rx, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == 't') {
                taas_log("SIGTERM: shutting down");
                k->stopping = 1;
            } else if (k->running) {
                taas_log("SIGINT: interrupting the running cell");
                taas_execute_interrupt(k);
            } else {
                taas_log("SIGINT with no cell running: nothing to interrupt");
            }
        }
    }
}

/* Receives one message from sock: 0 and *msg, 1 when none is waiting, -1 when one was
 * dropped (logged). */
static int receive(taas_kernel *k, void *sock, taas_channel ch, taas_msg **msg) {
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_wire_recv(sock, taas_session_signer(k->session),
                            taas_session_digests(k->session), msg, &err);
    if (rc < 0)
        taas_log("dropped a message on %s: %s", ch == TAAS_CH_SHELL ? "shell" : "control",
                 err.message);
    return rc;
}

/* Receives and dispatches one message; 1 when there was none waiting. */
static int serve_one(taas_kernel *k, void *sock, taas_channel ch) {
    taas_msg *msg;
    int rc = receive(k, sock, ch, &msg);
    if (rc == 0) taas_kernel_dispatch(k, sock, ch, msg);
    return rc == 1;
}

/* IOPub's welcome (JEP 65's problem, as recent ipykernel solves it): iopub is an XPUB, and
 * each new subscription gets a status of the kernel's state, so a client that subscribed
 * after the first "starting" went out (ZeroMQ drops what is published before) still hears
 * one, and knows its subscription is up. */
static void welcome(taas_kernel *k) {
    for (int n = 0; n < 1024; n++) {  /* bounded: the rest at the next poll */
        unsigned char frame[256];
        int len = zmq_recv(k->iopub, frame, sizeof frame, ZMQ_DONTWAIT);
        if (len < 0) return;
        if (len >= 1 && frame[0] == 1)
            taas_kernel_status(k, !k->served ? "starting" : k->running ? "busy" : "idle", NULL);
    }
}

/* At most this many requests wait in the queue; beyond, they wait in ZeroMQ's. */
#define QUEUED_MAX 4096

static int queue_full(const taas_kernel *k) {
    return k->n_queued - k->queued_next >= QUEUED_MAX;
}

/* 0, or -1 when out of memory (the request is dropped, and said so). */
static int enqueue(taas_kernel *k, taas_msg *msg) {
    if (k->n_queued == k->queued_cap) {
        size_t ncap = k->queued_cap ? k->queued_cap * 2 : 16;
        taas_msg **nq = realloc(k->queued, ncap * sizeof *nq);
        if (!nq) {
            taas_log("out of memory queueing a %.80s: it is dropped", msg->msg_type);
            taas_msg_free(msg);
            return -1;
        }
        k->queued = nq;
        k->queued_cap = ncap;
    }
    k->queued[k->n_queued++] = msg;
    return 0;
}

void taas_kernel_hold_queued(taas_kernel *k) {
    for (int n = 0; n < 1000000; n++) {  /* bounded: ZeroMQ's queue is */
        taas_msg *msg;
        int rc = receive(k, k->shell, TAAS_CH_SHELL, &msg);
        if (rc == 1) break;
        if (rc == 0) enqueue(k, msg);
    }
    k->n_abort = k->n_queued;
}

/* One shell request off the socket: answered now if it may be while a cell waits, else
 * queued behind the others. */
static void take_shell(taas_kernel *k) {
    taas_msg *msg;
    if (receive(k, k->shell, TAAS_CH_SHELL, &msg) != 0) return;
    if (k->running && !msg->undecodable && !strcmp(msg->msg_type, "is_complete_request"))
        taas_kernel_dispatch(k, k->shell, TAAS_CH_SHELL, msg);
    else
        enqueue(k, msg);
}

/* The next queued request, in order; 0 when there was none. */
static int serve_queued(taas_kernel *k) {
    if (k->queued_next == k->n_queued) return 0;
    k->aborting = k->queued_next < k->n_abort;
    taas_msg *msg = k->queued[k->queued_next++];
    taas_kernel_dispatch(k, k->shell, TAAS_CH_SHELL, msg);
    k->aborting = 0;
    if (k->queued_next == k->n_queued) {  /* empty: start over */
        free(k->queued);
        k->queued = NULL;
        k->n_queued = k->queued_next = k->n_abort = k->queued_cap = 0;
    }
    return 1;
}

/* Milliseconds until the waiting cell's deadline (0 when it has passed or is unknown). */
static long wait_ms(taas_kernel *k) {
    double d = taas_interp_deadline(k->interp);
    if (d < 0) return 0;
    double ms = ceil((d - taas_now()) * 1000.0);
    if (ms <= 0) return 0;
    return ms > 3600e3 ? 3600000L : (long)ms;
}

int taas_kernel_run(taas_kernel *k, taas_error *err) {
    taas_kernel_status(k, "starting", NULL);
    while (!k->stopping) {
        /* shell is read while a cell waits too (its requests queue in order); a cell that
         * waits on a worker (show) has its output polled */
        int wfd = k->running ? taas_interp_wait_fd(k->interp) : -1;
        zmq_pollitem_t items[5] = {
            {k->control, 0, ZMQ_POLLIN, 0},
            {NULL, k->sig_rx, ZMQ_POLLIN, 0},
            {k->iopub, 0, ZMQ_POLLIN, 0},
        };
        int n = 3, shell_at = -1, wfd_at = -1;
        if (!queue_full(k)) items[shell_at = n++] = (zmq_pollitem_t){k->shell, 0, ZMQ_POLLIN, 0};
        if (wfd >= 0) items[wfd_at = n++] = (zmq_pollitem_t){NULL, wfd, ZMQ_POLLIN, 0};
        int queued = k->queued_next < k->n_queued;
        long timeout = k->running ? wait_ms(k) : queued ? 0 : -1;
        if (zmq_poll(items, n, timeout) < 0) {
            if (errno == EINTR) continue;
            taas_error_set(err, TAAS_ERR_INTERNAL, (taas_srcpos){0, 0},
                           "polling the kernel's sockets failed: %s", zmq_strerror(errno));
            return -1;
        }
        if (items[1].revents & ZMQ_POLLIN) handle_signals(k);
        if (items[2].revents & ZMQ_POLLIN) welcome(k);
        if (items[0].revents & ZMQ_POLLIN)
            while (!k->stopping && serve_one(k, k->control, TAAS_CH_CONTROL) == 0) {}
        if (k->stopping) break;
        /* a pipe at its end polls as an error condition: the worker is done either way */
        int fd_ready = wfd_at >= 0 && (items[wfd_at].revents & (ZMQ_POLLIN | ZMQ_POLLERR));
        if (k->running && (fd_ready || wait_ms(k) == 0)) taas_execute_resume(k);
        if (shell_at >= 0 && (items[shell_at].revents & ZMQ_POLLIN)) take_shell(k);
        if (!k->running && !k->stopping) serve_queued(k);
    }
    return 0;
}
