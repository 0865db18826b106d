#include "heartbeat.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

#include "errnames.h"
#include "log.h"
#include "zsock.h"

struct taas_heartbeat {
    void *rep;        /* owned by the thread once it runs */
    void *stop_rx;    /* the thread's end of the stop pipe */
    void *stop_tx;    /* ours */
    pthread_t thread;
    int running;
};

/* REP answers only once the whole request is read: read every part, then send them
 * back in order. Jupyter pings with one part; more are echoed up to a bound. */
#define MAX_PARTS 64
static void echo_one(void *rep) {
    zmq_msg_t parts[MAX_PARTS];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, rep, n ? 0 : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            if (n == 0) return;
            break;
        }
        more = zmq_msg_more(&m);
        if (n < MAX_PARTS) {
            zmq_msg_init(&parts[n]);
            zmq_msg_move(&parts[n++], &m);
        }
        zmq_msg_close(&m);
    }
    for (int i = 0; i < n; i++)
        if (zmq_msg_send(&parts[i], rep, i + 1 < n ? ZMQ_SNDMORE : 0) < 0) zmq_msg_close(&parts[i]);
}

static void *echo_loop(void *arg) {
    taas_heartbeat *hb = arg;
    zmq_pollitem_t items[2] = {{hb->rep, 0, ZMQ_POLLIN, 0}, {hb->stop_rx, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(items, 2, -1) < 0) {
            if (errno == EINTR) continue;
            taas_log("heartbeat stopped: %s", zmq_strerror(errno));
            break;
        }
        if (items[1].revents & ZMQ_POLLIN) break;
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        echo_one(hb->rep);
    }
    zmq_close(hb->rep);
    zmq_close(hb->stop_rx);
    return NULL;
}

static taas_heartbeat *fail(taas_heartbeat *hb, taas_error *err, const char *what,
                            const char *endpoint) {
    taas_error_set(err, TAAS_ERR_CONNECTION, (taas_srcpos){0, 0},
                   "cannot %s the heartbeat socket on %s: %s", what, endpoint,
                   zmq_strerror(errno));
    taas_error_hint(err, "another process may hold the port; let Jupyter start the kernel "
                         "again, which picks free ports");
    if (hb->rep) zmq_close(hb->rep);
    if (hb->stop_rx) zmq_close(hb->stop_rx);
    if (hb->stop_tx) zmq_close(hb->stop_tx);
    free(hb);
    return NULL;
}

taas_heartbeat *taas_heartbeat_new(void *zctx, const char *endpoint, taas_error *err) {
    taas_heartbeat *hb = calloc(1, sizeof *hb);
    if (!hb) {
        taas_error_set(err, TAAS_ERR_CONNECTION, (taas_srcpos){0, 0}, "out of memory");
        return NULL;
    }
    char pipe_ep[64];
    snprintf(pipe_ep, sizeof pipe_ep, "inproc://taas-heartbeat-stop-%p", (void *)hb);
    taas_error e;
    taas_zsock_cfg rep = {.type = ZMQ_REP, .what = "the heartbeat", .sndhwm = -1, .rcvhwm = -1};
    taas_zsock_cfg pair = {.type = ZMQ_PAIR, .what = "the heartbeat's stop", .sndhwm = -1, .rcvhwm = -1};
    if (!(hb->rep = taas_zsock_bind(zctx, &rep, endpoint, NULL, 0, &e))) return fail(hb, err, "bind", endpoint);
    if (!(hb->stop_rx = taas_zsock_bind(zctx, &pair, pipe_ep, NULL, 0, &e)) ||
        !(hb->stop_tx = taas_zsock_connect(zctx, &pair, pipe_ep, &e)))
        return fail(hb, err, "set up", endpoint);
    /* sockets move to the new thread; pthread_create is the memory barrier ZeroMQ asks for */
    /* signals (SIGINT above all) belong to the loop thread: the echo thread blocks them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&hb->thread, NULL, echo_loop, hb);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        errno = rc;
        return fail(hb, err, "start a thread for", endpoint);
    }
    hb->running = 1;
    return hb;
}

void taas_heartbeat_free(taas_heartbeat *hb) {
    if (!hb) return;
    if (hb->running) {
        if (zmq_send(hb->stop_tx, "", 0, 0) < 0) taas_log("cannot stop the heartbeat thread");
        pthread_join(hb->thread, NULL);
    }
    zmq_close(hb->stop_tx);
    free(hb);
}
