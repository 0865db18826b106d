/* The loader's side of the data plane (stream_send.h). One DEALER per rank rather than one
 * connected to all: a batch must reach the one rank that trains it, and credit is counted
 * per rank. The DEALERs are only used from the calling thread; between calls ZeroMQ queues
 * what the ranks send (credit, acknowledgements), at most a window's worth. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "errnames.h"
#include "stream_send.h"
#include "stream_wire.h"

typedef struct peer {
    void *sock;
    char *endpoint;
    uint64_t credit;     /* batches this rank will take from us now */
    int hello_sent, end_sent, end_acked;
} peer;

struct taas_stream_send {
    uint32_t stream, worker, world;
    peer *peers;
    zmq_pollitem_t *items;
    char *hello, *end;   /* the JSON of the two messages */
    int ending;          /* taas_stream_send_end was called */
    uint32_t greeted;    /* ranks that have had the hello */
    taas_stream_send_stats st;
};

static int io_error(taas_error *err, const taas_stream_send *s, uint32_t rank, const char *doing) {
    taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "loader worker %u of stream %u: %s rank %u (%s) failed: %s", s->worker,
                   s->stream, doing, rank, s->peers[rank].endpoint, zmq_strerror(errno));
    taas_error_hint(err, "the job is shutting down or the rank's machine is unreachable");
    return -1;
}

taas_stream_send *taas_stream_send_new(const taas_stream_send_cfg *cfg, taas_error *err) {
    if (!cfg || !cfg->zctx || cfg->world < 1 || !cfg->ranks) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a loader worker's data plane needs a ZeroMQ context and the "
                                                       "endpoints of at least one rank");
        taas_error_hint(err, "fill zctx, world and ranks in taas_stream_send_cfg");
        return NULL;
    }
    taas_stream_send *s = calloc(1, sizeof *s);
    if (s) {
        s->peers = calloc(cfg->world, sizeof *s->peers);
        s->items = calloc(cfg->world, sizeof *s->items);
        json_t *hello = json_pack("{s:I, s:I, s:I}", "stream", (json_int_t)cfg->stream, "worker",
                                  (json_int_t)cfg->worker, "pid", (json_int_t)getpid());
        json_t *end = json_pack("{s:I, s:I}", "stream", (json_int_t)cfg->stream, "worker", (json_int_t)cfg->worker);
        s->hello = hello ? json_dumps(hello, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        s->end = end ? json_dumps(end, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(hello);
        json_decref(end);
    }
    if (!s || !s->peers || !s->items || !s->hello || !s->end) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting loader worker %u of stream %u",
                       cfg->worker, cfg->stream);
        taas_stream_send_free(s);
        return NULL;
    }
    s->stream = cfg->stream;
    s->worker = cfg->worker;
    s->world = cfg->world;
    for (uint32_t r = 0; r < cfg->world; r++) {
        peer *p = &s->peers[r];
        const char *ep = cfg->ranks[r] ? cfg->ranks[r] : "";
        p->endpoint = strdup(ep);
        /* No high-water mark: a rank lets this connection have `credit` batches in flight and
         * this side sends none without credit, so the window bounds the queue; a HWM below
         * the window (which only the rank knows) would throttle instead of the credit. */
        /* Immediate: nothing is queued for a rank that is not connected yet; the hello goes
         * when the connection is up (pump), and no batch goes before the rank's credit. */
        taas_zsock_cfg zc = {.type = ZMQ_DEALER, .what = "the loader's data", .sec = cfg->sec, .linger_ms = 0,
                             .sndhwm = 0, .rcvhwm = 0, .flags = TAAS_ZSOCK_IMMEDIATE};
        p->sock = p->endpoint ? taas_zsock_connect(cfg->zctx, &zc, ep, err) : NULL;
        if (!p->sock) {
            if (!p->endpoint) taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory");
            else taas_error_prefix(err, "loader worker %u of stream %u, to rank %u: ", cfg->worker, cfg->stream, r);
            taas_stream_send_free(s);
            return NULL;
        }
    }
    return s;
}

void taas_stream_send_free(taas_stream_send *s) {
    if (!s) return;
    for (uint32_t r = 0; s->peers && r < s->world; r++) {
        if (s->peers[r].sock) zmq_close(s->peers[r].sock);
        free(s->peers[r].endpoint);
    }
    free(s->peers);
    free(s->items);
    free(s->hello);
    free(s->end);
    free(s);
}

/* Says hello (and end, once ending) to rank r if it is due and the connection is up. */
static int greet(taas_stream_send *s, uint32_t r, taas_error *err) {
    peer *p = &s->peers[r];
    if (!p->hello_sent) {
        if (taas_stream_wire_send(p->sock, NULL, 0, TAAS_STREAM_HELLO, s->hello, strlen(s->hello)) < 0)
            return errno == EAGAIN ? 0 : io_error(err, s, r, "saying hello to");
        p->hello_sent = 1;
        s->greeted++;
    }
    if (s->ending && !p->end_sent) {
        if (taas_stream_wire_send(p->sock, NULL, 0, TAAS_STREAM_END, s->end, strlen(s->end)) < 0)
            return errno == EAGAIN ? 0 : io_error(err, s, r, "sending the end to");
        p->end_sent = 1;
    }
    return 0;
}

/* Everything rank r has sent: credit and the end's acknowledgement. */
static int read_rank(taas_stream_send *s, uint32_t r, taas_error *err) {
    peer *p = &s->peers[r];
    zmq_msg_t f[2];
    int n, extra, got;
    while ((got = taas_stream_wire_recv(p->sock, f, 2, &n, &extra)) == 1) {
        char kind = zmq_msg_size(&f[0]) == 1 ? *(const char *)zmq_msg_data(&f[0]) : '?';
        int ok = !extra && kind != '?';
        if (ok && kind == TAAS_STREAM_CREDIT && n == 2 && zmq_msg_size(&f[1]) == 4) {
            const unsigned char *c = zmq_msg_data(&f[1]);
            p->credit += (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
        } else if (ok && kind == TAAS_STREAM_ACK && n == 1) {
            p->end_acked = 1;
        } else {
            ok = 0;
        }
        taas_stream_wire_close(f, n);
        if (!ok) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "loader worker %u of stream %u: rank %u (%s) sent a "
                           "message that is neither credit nor an acknowledgement (%d frames, kind '%c')",
                           s->worker, s->stream, r, p->endpoint, n + extra, kind);
            taas_error_hint(err, "the loaders and the ranks must run the same taas version");
            return -1;
        }
    }
    return got < 0 ? io_error(err, s, r, "reading from") : 0;
}

/* One round: waits up to wait_s (INFINITY: until something happens) for any rank to send or
 * become reachable, then reads every rank and says what is due. */
static int pump(taas_stream_send *s, double wait_s, taas_error *err) {
    for (uint32_t r = 0; r < s->world; r++) {
        peer *p = &s->peers[r];
        int due = !p->hello_sent || (s->ending && !p->end_sent);
        s->items[r] = (zmq_pollitem_t){.socket = p->sock, .events = (short)(ZMQ_POLLIN | (due ? ZMQ_POLLOUT : 0))};
    }
    long ms = isinf(wait_s) ? -1 : (long)ceil(wait_s * 1000);
    if (zmq_poll(s->items, (int)s->world, ms) < 0) {
        if (errno == EINTR) return 0; /* a signal: the caller looks at its stop flag */
        return io_error(err, s, 0, "waiting for");
    }
    for (uint32_t r = 0; r < s->world; r++) {
        if ((s->items[r].revents & ZMQ_POLLOUT) && greet(s, r, err)) return -1;
        if ((s->items[r].revents & ZMQ_POLLIN) && read_rank(s, r, err)) return -1;
    }
    return 0;
}

static int rank_ready(const taas_stream_send *s, uint32_t r) {
    return s->peers[r].hello_sent && s->peers[r].credit > 0;
}

static int all_acked(const taas_stream_send *s) {
    for (uint32_t r = 0; r < s->world; r++)
        if (!s->peers[r].end_acked) return 0;
    return 1;
}

/* Pumps until ready (rank >= 0: that rank has credit; -1: every rank acknowledged the end).
 * 0 ready, 1 stopped, -1 with err (a TaasTimeoutError says what it waited for). */
static int wait_for(taas_stream_send *s, int64_t rank, const taas_batch *b, double timeout_s, volatile int *stop,
                    taas_error *err) {
    double t0 = taas_now(), deadline = timeout_s < 0 ? INFINITY : t0 + timeout_s;
    int rc = 0;
    while (!(rank >= 0 ? rank_ready(s, (uint32_t)rank) : all_acked(s))) {
        if (taas_stream_stopped(stop)) {
            rc = 1;
            break;
        }
        if (taas_now() >= deadline) {
            uint32_t r = 0;
            while (rank < 0 && s->peers[r].end_acked) r++;
            if (rank >= 0) r = (uint32_t)rank;
            const peer *p = &s->peers[r];
            if (rank >= 0)
                taas_error_set(err, TAAS_ERR_TIMEOUT, TAAS_NOPOS, "loader worker %u of stream %u: rank %u (%s) gave "
                               "no credit for item %llu of epoch %llu in %g s", s->worker, s->stream, r, p->endpoint,
                               (unsigned long long)b->k, (unsigned long long)b->epoch, timeout_s);
            else
                taas_error_set(err, TAAS_ERR_TIMEOUT, TAAS_NOPOS, "loader worker %u of stream %u: rank %u (%s) did "
                               "not acknowledge its end in %g s", s->worker, s->stream, r, p->endpoint, timeout_s);
            taas_error_hint(err, "%s", !p->hello_sent ? "the rank is not reachable: check that it runs and that "
                                                        "this machine can connect to its address"
                                       : rank >= 0 ? "the rank is connected but does not take its batches: it is "
                                                     "slow or stuck (a long step needs a longer timeout)"
                                                   : "the rank is connected but does not answer: it may have "
                                                     "stopped receiving");
            rc = -1;
            break;
        }
        if (pump(s, taas_stream_wire_wait_s(deadline, stop != NULL), err)) {
            rc = -1;
            break;
        }
    }
    s->st.credit_wait_s += taas_now() - t0;
    return rc;
}

static void free_sent(void *data, void *hint) {
    (void)data;
    TAAS_STREAM_TAKEOVER(hint);
    taas_batch_free(hint); /* on ZeroMQ's I/O thread, once the bytes are on the wire */
}

int taas_stream_send_batch(taas_stream_send *s, taas_batch *b, double timeout_s, volatile int *stop,
                           taas_error *err) {
    if (!b) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "loader worker %u of stream %u: no batch to send", s->worker,
                       s->stream);
        return -1;
    }
    if (s->ending) {
        taas_batch_free(b);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "loader worker %u of stream %u: a batch after the end",
                       s->worker, s->stream);
        taas_error_hint(err, "send every batch before taas_stream_send_end");
        return -1;
    }
    uint32_t r = (uint32_t)(b->k % s->world);
    /* a rank that gets no batch for a while still learns early that this worker is there */
    int rc = s->greeted < s->world ? pump(s, 0, err) : 0;
    peer *p = &s->peers[r];
    char kind = TAAS_STREAM_BATCH;
    for (;;) {
        if (!rc && !rank_ready(s, r)) rc = wait_for(s, r, b, timeout_s, stop, err);
        if (rc) {
            taas_batch_free(b);
            return rc;
        }
        /* the kind frame goes first, alone: no HWM, so it waits only when the connection is
         * gone (ZMQ_IMMEDIATE): the rank died after it gave credit. Then the credit is void
         * and the batch waits for new credit, or for the stop that the rank's end brings. */
        if (zmq_send(p->sock, &kind, 1, ZMQ_SNDMORE | ZMQ_DONTWAIT) == 1) break;
        if (errno != EAGAIN) {
            taas_batch_free(b);
            return io_error(err, s, r, "sending a batch to");
        }
        p->credit = 0;
    }
    size_t len = b->buf_len;
    zmq_msg_t m;
    if (zmq_msg_init_data(&m, b->buf, len, free_sent, b) < 0) {
        taas_batch_free(b);
        return io_error(err, s, r, "sending a batch to");
    }
    /* once the kind frame is queued, ZeroMQ takes the rest of the message whole */
    TAAS_STREAM_HANDOVER(b);
    if (zmq_msg_send(&m, p->sock, ZMQ_DONTWAIT) < 0) {
        int e = errno;
        zmq_msg_close(&m); /* frees b */
        errno = e;
        return io_error(err, s, r, "sending a batch to");
    }
    p->credit--;
    s->st.batches++;
    s->st.bytes += len;
    return 0;
}

int taas_stream_send_end(taas_stream_send *s, double timeout_s, volatile int *stop, taas_error *err) {
    s->ending = 1;
    for (uint32_t r = 0; r < s->world; r++)
        if (greet(s, r, err)) return -1;
    return wait_for(s, -1, NULL, timeout_s, stop, err);
}

void taas_stream_send_stats_get(const taas_stream_send *s, taas_stream_send_stats *out) {
    *out = s->st;
}
