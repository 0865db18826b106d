/* A rank's side of the data plane (stream_recv.h). The receive thread owns the ROUTER: it
 * reads hellos, batches and ends, and sends credit. It and the takers (the training loop)
 * meet under one mutex: the thread puts batches into the reorder table and broadcasts
 * `arrived`; a take removes its item, counts a credit owed to the connection it came from
 * and wakes the thread through an eventfd that zmq_poll watches beside the socket (unless
 * the batch came while the take waited for it: then the thread owed it at once). Nothing
 * spins: the thread sleeps in zmq_poll, a taker on the condition variable (in short slices
 * only when it has a stop flag to look at, which nothing can signal).
 *
 * Memory is bounded by the credit: a connection sends only against credit, and a credit
 * goes back only when one of its batches leaves the table (taken, or dropped as a
 * duplicate), so a connection has at most `credit` batches here or on the way. There is one
 * live connection per (stream, worker), so at most credit x sum(M_s) batches are held (a
 * batch that arrives for a waiting take is that take's at once, as if taken); a
 * connection that a new hello replaced keeps what it had, gets no more credit, and whatever
 * it still sends is dropped (stale). A connection that sends beyond its credit is a fault. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errnames.h"
#include "stream_recv.h"
#include "stream_wire.h"

typedef struct conn {
    unsigned char id[256];   /* the ROUTER's routing id for it */
    size_t id_len;
    uint32_t stream, worker;
    int live, ended;
    uint32_t inside;         /* its batches received and not yet given back */
    uint32_t owed;           /* credit the thread is to send it */
    uint64_t received;
    struct conn *next;
} conn;

typedef struct held {
    uint64_t epoch, k;
    taas_batch *b;
    conn *from;              /* NULL once its credit went back (see on_batch) */
} held;

typedef struct stream_state {
    conn **cur;              /* per worker: its live connection or NULL */
    held *h;                 /* the reorder table, unsorted: it holds a few windows at most */
    size_t n, cap;
    /* The item the caller asked for last, and whether it took it: everything before it
     * (and it, once taken) is passed, never asked for again, and dropped on sight. */
    int asked;
    uint64_t want_epoch, want_k;
    int want_taken;
    int waiting;             /* a take waits for that item now */
    int failed;              /* a malformed batch or a broken protocol: every take fails */
    taas_error err;
} stream_state;

struct taas_stream_recv {
    uint32_t rank, world, nstreams, credit;
    uint32_t chunk;          /* credit goes back in chunks of this many (give_back) */
    uint32_t *workers;
    int sized;               /* cfg's */
    void *sock;              /* the receive thread's, from start to join */
    char endpoint[256];
    int wake_fd;
    pthread_t thread;
    int started;

    pthread_mutex_t mu;
    pthread_cond_t arrived;  /* a batch, a fault, an end, or closing */
    pthread_cond_t idle;     /* the last taker left, while closing */
    stream_state *streams;
    conn *conns;
    int closing, takers, wake_pending;
    int failed;              /* a fault of no one stream (a bad hello, the socket) */
    taas_error err;
    uint32_t held_now;       /* in the tables, less those promised to a waiting take */
    taas_stream_recv_stats st;
};

static int later(uint64_t e1, uint64_t k1, uint64_t e2, uint64_t k2) {
    return e1 > e2 || (e1 == e2 && k1 > k2);
}

/* Whether the caller is past item (epoch, k) of st. */
static int passed(const stream_state *st, uint64_t epoch, uint64_t k) {
    if (!st->asked) return 0;
    if (epoch == st->want_epoch && k == st->want_k) return st->want_taken;
    return !later(epoch, k, st->want_epoch, st->want_k);
}

/* ---- the receive thread (everything under mu unless said) -------------------------------- */

static void fault(taas_stream_recv *r, stream_state *st, const taas_error *e) {
    int *failed = st ? &st->failed : &r->failed;
    if (*failed) return; /* the first says most */
    *failed = 1;
    if (st) st->err = *e;
    else r->err = *e;
    pthread_cond_broadcast(&r->arrived);
}

static void send_credit(taas_stream_recv *r, conn *c, uint32_t n) {
    unsigned char le[4] = {(unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                           (unsigned char)(n >> 24)};
    /* a ROUTER drops what it cannot route (the loader is gone): nothing to do then */
    taas_stream_wire_send(r->sock, c->id, c->id_len, TAAS_STREAM_CREDIT, le, sizeof le);
}

/* One of c's batches left the table (or is about to): its credit goes back if c is still
 * the live one. */
static void owe(conn *c) {
    if (!c) return; /* given back already */
    c->inside--;
    if (c->live) c->owed++;
}

static conn *find_conn(taas_stream_recv *r, const void *id, size_t id_len) {
    for (conn *c = r->conns; c; c = c->next)
        if (c->id_len == id_len && !memcmp(c->id, id, id_len)) return c;
    return NULL;
}

static long long held_find(const stream_state *st, uint64_t epoch, uint64_t k) {
    for (size_t i = 0; i < st->n; i++)
        if (st->h[i].epoch == epoch && st->h[i].k == k) return (long long)i;
    return -1;
}

static void bad_hello(taas_stream_recv *r, const char *why) {
    taas_error e;
    taas_error_set(&e, TAAS_ERR_VALUE, TAAS_NOPOS, "rank %u: a loader said hello with %s", r->rank, why);
    taas_error_hint(&e, "the loaders and the ranks were started from different job plans or taas versions");
    fault(r, NULL, &e);
}

static void on_hello(taas_stream_recv *r, const zmq_msg_t *id, const zmq_msg_t *body) {
    json_t *j = body ? json_loadb(zmq_msg_data((zmq_msg_t *)body), zmq_msg_size((zmq_msg_t *)body), 0, NULL) : NULL;
    json_int_t s = json_integer_value(json_object_get(j, "stream"));
    json_int_t w = json_integer_value(json_object_get(j, "worker"));
    int shaped = json_is_integer(json_object_get(j, "stream")) && json_is_integer(json_object_get(j, "worker"));
    json_decref(j);
    char why[160];
    if (!shaped) {
        bad_hello(r, "no integer \"stream\" and \"worker\" in it");
        return;
    }
    if (s < 0 || s >= r->nstreams) {
        snprintf(why, sizeof why, "stream %lld, but this rank has %u streams", (long long)s, r->nstreams);
        bad_hello(r, why);
        return;
    }
    if (w < 0 || w >= r->workers[s]) {
        snprintf(why, sizeof why, "worker %lld of stream %lld, but that stream has %u workers", (long long)w,
                 (long long)s, r->workers[s]);
        bad_hello(r, why);
        return;
    }
    size_t id_len = zmq_msg_size((zmq_msg_t *)id);
    if (id_len > sizeof ((conn *)0)->id || find_conn(r, zmq_msg_data((zmq_msg_t *)id), id_len)) {
        bad_hello(r, "a second hello on one connection");
        return;
    }
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        bad_hello(r, "the rank out of memory");
        return;
    }
    memcpy(c->id, zmq_msg_data((zmq_msg_t *)id), id_len);
    c->id_len = id_len;
    c->stream = (uint32_t)s;
    c->worker = (uint32_t)w;
    c->live = 1;
    conn **cur = &r->streams[s].cur[w];
    if (*cur) {
        (*cur)->live = 0; /* replaced: its held batches stay, it gets no more credit */
        (*cur)->owed = 0;
    }
    *cur = c;
    c->next = r->conns;
    r->conns = c;
    send_credit(r, c, r->credit); /* the whole window */
}

/* Batch b from c (NULL: malformed, as *bad says). Returns what the caller is to free after
 * unlocking. */
static taas_batch *on_batch(taas_stream_recv *r, conn *c, taas_batch *b, taas_error *bad) {
    stream_state *st = &r->streams[c->stream];
    taas_error e;
    c->received++;
    if (c->inside >= r->credit) {
        taas_error_set(&e, TAAS_ERR_VALUE, TAAS_NOPOS, "rank %u: worker %u of stream %u sent more batches than its "
                       "credit of %u", r->rank, c->worker, c->stream, r->credit);
        taas_error_hint(&e, "the loaders and the ranks must run the same taas version");
        fault(r, st, &e);
        return b;
    }
    c->inside++;
    if (!b) {
        owe(c);
        taas_error_prefix(bad, "rank %u: worker %u of stream %u sent a malformed batch: ", r->rank, c->worker,
                          c->stream);
        fault(r, st, bad);
        return NULL;
    }
    if (b->k % r->world != r->rank) {
        owe(c);
        taas_error_set(&e, TAAS_ERR_VALUE, TAAS_NOPOS, "rank %u: worker %u of stream %u sent item %llu, which rank "
                       "%llu trains", r->rank, c->worker, c->stream, (unsigned long long)b->k,
                       (unsigned long long)(b->k % r->world));
        taas_error_hint(&e, "the loaders and the ranks were started with different numbers of ranks");
        fault(r, st, &e);
        return b;
    }
    if (passed(st, b->epoch, b->k) || held_find(st, b->epoch, b->k) >= 0) {
        owe(c);
        r->st.duplicates++;
        return b;
    }
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 16;
        held *h = realloc(st->h, cap * sizeof *h);
        if (!h) {
            owe(c);
            taas_error_set(&e, TAAS_ERR_MEMORY, TAAS_NOPOS, "rank %u: out of memory holding batches", r->rank);
            fault(r, st, &e);
            return b;
        }
        st->h = h;
        st->cap = cap;
    }
    held *h = &st->h[st->n++];
    *h = (held){b->epoch, b->k, b, c};
    if (st->waiting && b->epoch == st->want_epoch && b->k == st->want_k) {
        /* a take waits for exactly this batch: it is that take's now (the take finds it
         * first thing when it wakes, before looking at stop flags or the clock), so its
         * credit goes back with this wake-up rather than the taker waking this thread again */
        owe(c);
        h->from = NULL;
    } else if (++r->held_now > r->st.max_held) {
        r->st.max_held = r->held_now;
    }
    pthread_cond_broadcast(&r->arrived);
    return NULL;
}

/* One message off the socket: [routing id, kind, body]. */
static void on_message(taas_stream_recv *r, zmq_msg_t *f, int n, int extra) {
    char kind = n >= 2 && zmq_msg_size(&f[1]) == 1 ? *(const char *)zmq_msg_data(&f[1]) : 0;
    zmq_msg_t *body = n >= 3 ? &f[2] : NULL;
    int batch = kind == TAAS_STREAM_BATCH && body && !extra, ack = 0;
    taas_error bad;
    taas_batch *drop = batch ? taas_stream_wire_adopt(body, &bad) : NULL; /* outside the lock */
    pthread_mutex_lock(&r->mu);
    if (kind == TAAS_STREAM_HELLO && !extra) {
        on_hello(r, &f[0], body);
    } else {
        conn *c = n >= 1 ? find_conn(r, zmq_msg_data(&f[0]), zmq_msg_size(&f[0])) : NULL;
        if (!c || !c->live) {
            r->st.stale++; /* replaced, or never said hello */
        } else if (batch) {
            drop = on_batch(r, c, drop, &bad);
        } else if (kind == TAAS_STREAM_END && !extra) {
            c->ended = 1;
            ack = 1;
            pthread_cond_broadcast(&r->arrived);
        } else {
            taas_error e;
            taas_error_set(&e, TAAS_ERR_VALUE, TAAS_NOPOS, "rank %u: worker %u of stream %u sent a message of %d "
                           "frames with kind '%c', which the data plane does not have", r->rank, c->worker,
                           c->stream, n - 1 + extra, kind ? kind : '?');
            taas_error_hint(&e, "the loaders and the ranks must run the same taas version");
            fault(r, &r->streams[c->stream], &e);
        }
        if (ack) taas_stream_wire_send(r->sock, c->id, c->id_len, TAAS_STREAM_ACK, NULL, 0);
    }
    pthread_mutex_unlock(&r->mu);
    taas_batch_free(drop);
}

/* Sends the credit the takers and the drops owe, in chunks of a quarter window (the zguide's
 * way: fewer messages and wake-ups; the loader still has three quarters). Credit held back
 * here cannot stall a take: a loader sends its items in order, so while a take waits for one
 * of a connection's items none of its later ones is held, and all but less than a chunk of
 * its window is with the loader or on the way. */
static void give_back(taas_stream_recv *r) {
    pthread_mutex_lock(&r->mu);
    for (conn *c = r->conns; c; c = c->next) {
        if (c->owed < r->chunk) continue;
        send_credit(r, c, c->owed);
        c->owed = 0;
    }
    pthread_mutex_unlock(&r->mu);
}

static void socket_failed(taas_stream_recv *r, int e) {
    taas_error err;
    taas_error_set(&err, TAAS_ERR_IO, TAAS_NOPOS, "rank %u: the data plane's socket failed: %s", r->rank,
                   zmq_strerror(e));
    taas_error_hint(&err, "the process shut ZeroMQ down while the rank still received");
    pthread_mutex_lock(&r->mu);
    fault(r, NULL, &err);
    pthread_mutex_unlock(&r->mu);
}

static void *receive(void *arg) {
    taas_stream_recv *r = arg;
    zmq_pollitem_t it[2] = {{.socket = r->sock, .events = ZMQ_POLLIN}, {.fd = r->wake_fd, .events = ZMQ_POLLIN}};
    for (;;) {
        if (zmq_poll(it, 2, -1) < 0 && errno != EINTR) {
            socket_failed(r, errno);
            return NULL;
        }
        uint64_t v;
        if ((it[1].revents & ZMQ_POLLIN) && read(r->wake_fd, &v, sizeof v) < 0) { /* EAGAIN: nothing */
        }
        pthread_mutex_lock(&r->mu);
        int closing = r->closing;
        r->wake_pending = 0; /* a take from now on writes the eventfd again */
        pthread_mutex_unlock(&r->mu);
        if (closing) return NULL;
        zmq_msg_t f[3];
        int n, extra, got;
        while ((got = taas_stream_wire_recv(r->sock, f, 3, &n, &extra)) == 1) {
            on_message(r, f, n, extra);
            taas_stream_wire_close(f, n);
        }
        if (got < 0) {
            socket_failed(r, errno);
            return NULL;
        }
        give_back(r);
    }
}

/* Whether this caller is to write the eventfd (no one has since the thread last woke).
 * Under mu. */
static int claim_wake(taas_stream_recv *r) {
    if (r->wake_pending) return 0;
    r->wake_pending = 1;
    return 1;
}

static void wake(taas_stream_recv *r) {
    uint64_t one = 1;
    if (write(r->wake_fd, &one, sizeof one) < 0) { /* EAGAIN: the counter is full, so it is awake */
    }
}

/* ---- the caller's side ----------------------------------------------------------------- */

taas_stream_recv *taas_stream_recv_new(const taas_stream_recv_cfg *cfg, taas_error *err) {
    int ok = cfg && cfg->zctx && cfg->bind && cfg->world >= 1 && cfg->rank < cfg->world && cfg->credit >= 1 &&
             (cfg->nstreams == 0 || cfg->workers);
    for (uint32_t s = 0; ok && s < cfg->nstreams; s++) ok = cfg->workers[s] >= 1;
    if (!ok) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a rank's data plane needs a ZeroMQ context, an address to "
                       "bind, rank < world, a credit of at least 1 and at least one worker per stream");
        taas_error_hint(err, "fill every field of taas_stream_recv_cfg");
        return NULL;
    }
    taas_stream_recv *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->wake_fd = -1;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* taas_now's clock */
    pthread_cond_init(&r->arrived, &ca);
    pthread_cond_init(&r->idle, &ca);
    pthread_condattr_destroy(&ca);
    r->rank = cfg->rank;
    r->world = cfg->world;
    r->nstreams = cfg->nstreams;
    r->credit = cfg->credit;
    r->sized = cfg->sized;
    r->chunk = cfg->credit / 4 > 1 ? cfg->credit / 4 : 1;
    r->workers = calloc(cfg->nstreams + 1, sizeof *r->workers);
    r->streams = calloc(cfg->nstreams + 1, sizeof *r->streams);
    if (!r->workers || !r->streams) goto oom;
    for (uint32_t s = 0; s < cfg->nstreams; s++) {
        r->workers[s] = cfg->workers[s];
        if (!(r->streams[s].cur = calloc(cfg->workers[s], sizeof(conn *)))) goto oom;
    }
    /* No send HWM: a ROUTER drops what would pass it, and a lost credit would stall a loader
     * for good; the credit messages to a loader number at most the batches it sent. The
     * receive HWM is above what a loader keeping to its credit can have on the way (credit
     * batches, its hello and its end), so it never engages for one; a faulty loader is held
     * back by TCP instead of filling this process. */
    taas_zsock_cfg zc = {.type = ZMQ_ROUTER, .what = "the rank's data", .sec = cfg->sec, .linger_ms = 0,
                         .sndhwm = 0, .rcvhwm = (int)(cfg->credit < 1000000 ? cfg->credit + 4 : 0)};
    r->sock = taas_zsock_bind(cfg->zctx, &zc, cfg->bind, r->endpoint, sizeof r->endpoint, err);
    if (!r->sock) {
        taas_error_prefix(err, "rank %u: ", cfg->rank);
        taas_error_hint(err, "use tcp://HOST:* to let the system choose a free port, with HOST an address of this "
                             "machine that the loaders can reach");
        goto fail;
    }
    r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int e = r->wake_fd < 0 ? errno : pthread_create(&r->thread, NULL, receive, r);
    if (e) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "rank %u cannot start its data plane's receive thread: %s",
                       cfg->rank, strerror(e));
        taas_error_hint(err, "the process is out of threads or file descriptors");
        goto fail;
    }
    pthread_setname_np(r->thread, "taas-recv"); /* for top and profilers */
    r->started = 1;
    return r;
oom:
    taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting rank %u's data plane",
                   cfg->rank);
fail:
    taas_stream_recv_free(r);
    return NULL;
}

void taas_stream_recv_free(taas_stream_recv *r) {
    if (!r) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->closing = 1;
        pthread_cond_broadcast(&r->arrived);
        while (r->takers > 0) pthread_cond_wait(&r->idle, &r->mu);
        pthread_mutex_unlock(&r->mu);
        wake(r);
        pthread_join(r->thread, NULL);
    }
    if (r->sock) zmq_close(r->sock);
    for (uint32_t s = 0; r->streams && s < r->nstreams; s++) {
        for (size_t i = 0; i < r->streams[s].n; i++) taas_batch_free(r->streams[s].h[i].b);
        free(r->streams[s].h);
        free(r->streams[s].cur);
    }
    for (conn *c = r->conns, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(r->streams);
    free(r->workers);
    if (r->wake_fd >= 0) close(r->wake_fd);
    pthread_cond_destroy(&r->arrived);
    pthread_cond_destroy(&r->idle);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

const char *taas_stream_recv_endpoint(const taas_stream_recv *r) {
    return r->endpoint;
}

/* Why item k of stream s has not come: a TaasTimeoutError. Under mu. */
static int timed_out(taas_stream_recv *r, uint32_t s, uint64_t epoch, uint64_t k, double timeout_s, taas_error *err) {
    uint32_t w = (uint32_t)(k % r->workers[s]);
    if (r->sized) {
        taas_error_set(err, TAAS_ERR_TIMEOUT, TAAS_NOPOS, "rank %u: item %llu of epoch %llu of stream %u has not come "
                       "from its loader workers in %g s", r->rank, (unsigned long long)k, (unsigned long long)epoch, s,
                       timeout_s);
        taas_error_hint(err, "the stream's pool sizes itself (--cpus auto); see the kernel's lines on its loaders: "
                             "they are slow or stuck (a slow loader needs a longer timeout)");
        return -1;
    }
    const conn *c = r->streams[s].cur[w];
    taas_error_set(err, TAAS_ERR_TIMEOUT, TAAS_NOPOS, "rank %u: item %llu of epoch %llu of stream %u has not come from "
                   "loader worker %u of %u in %g s", r->rank, (unsigned long long)k, (unsigned long long)epoch, s, w,
                   r->workers[s], timeout_s);
    if (!c)
        taas_error_hint(err, "worker %u of stream %u has not connected to this rank (%s): check that it runs and can "
                        "reach this address", w, s, r->endpoint);
    else if (c->ended)
        taas_error_hint(err, "worker %u of stream %u has sent its end without this item: the loaders and the ranks "
                        "disagree on the items (were they started from the same job plan?)", w, s);
    else
        taas_error_hint(err, "worker %u of stream %u is connected and has sent %llu batches here, %u of them still "
                        "held: it is slow or stuck (a slow loader needs a longer timeout)", w, s,
                        (unsigned long long)c->received, c->inside);
    return -1;
}

/* Gives back the held batches the caller is past: it never asks for them, and their credit
 * must not wait (with a window of 1, the loader could not make the item the caller waits
 * for). 1 when a connection is owed a chunk now, which the thread must be woken to send.
 * Under mu. */
static int drop_passed(taas_stream_recv *r, stream_state *st) {
    int due = 0;
    for (size_t i = 0; i < st->n;) {
        if (!passed(st, st->h[i].epoch, st->h[i].k)) {
            i++;
            continue;
        }
        conn *c = st->h[i].from;
        if (c) r->held_now--;
        owe(c);
        due = due || (c && c->owed >= r->chunk);
        taas_batch_free(st->h[i].b);
        st->h[i] = st->h[--st->n];
        r->st.duplicates++;
    }
    return due;
}

int taas_stream_recv_take(taas_stream_recv *r, uint32_t stream, uint64_t epoch, uint64_t k, double timeout_s,
                          volatile int *stop, taas_batch **out, taas_error *err) {
    *out = NULL;
    if (stream >= r->nstreams || k % r->world != r->rank) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "rank %u of %u cannot take item %llu of stream %u: %s",
                       r->rank, r->world, (unsigned long long)k, stream,
                       stream >= r->nstreams ? "there is no such stream" : "another rank trains it");
        taas_error_hint(err, "rank r takes the items k with k %% world == r, of streams 0 to %u", r->nstreams - 1);
        return -1;
    }
    double t0 = taas_now(), deadline = timeout_s < 0 ? INFINITY : t0 + timeout_s;
    stream_state *st = &r->streams[stream];
    int rc, need_wake = 0;
    pthread_mutex_lock(&r->mu);
    r->takers++;
    if (passed(st, epoch, k)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "rank %u: item %llu of epoch %llu of stream %u comes at or "
                       "before item %llu of epoch %llu, which was %s already", r->rank, (unsigned long long)k,
                       (unsigned long long)epoch, stream, (unsigned long long)st->want_k,
                       (unsigned long long)st->want_epoch, st->want_taken ? "taken" : "asked for");
        taas_error_hint(err, "take each stream's items once, in increasing (epoch, k) order");
        rc = -1;
        goto out;
    }
    if (!st->asked || epoch != st->want_epoch || k != st->want_k) {
        st->asked = 1;
        st->want_epoch = epoch;
        st->want_k = k;
        st->want_taken = 0;
        if (drop_passed(r, st) && claim_wake(r)) {
            pthread_mutex_unlock(&r->mu);
            wake(r);
            pthread_mutex_lock(&r->mu);
        }
    }
    for (;;) {
        if (r->closing) {
            rc = 1;
            break;
        }
        if (st->failed || r->failed) {
            *err = st->failed ? st->err : r->err;
            rc = -1;
            break;
        }
        long long i = held_find(st, epoch, k);
        if (i >= 0) {
            held h = st->h[i];
            st->h[i] = st->h[--st->n];
            if (h.from) r->held_now--;
            owe(h.from);
            st->want_taken = 1;
            r->st.batches++;
            r->st.bytes += h.b->buf_len;
            *out = h.b;
            need_wake = h.from && h.from->owed >= r->chunk && claim_wake(r);
            rc = 0;
            break;
        }
        if (taas_stream_stopped(stop)) {
            rc = 1;
            break;
        }
        if (taas_now() >= deadline) {
            rc = timed_out(r, stream, epoch, k, timeout_s, err);
            break;
        }
        double wait = taas_stream_wire_wait_s(deadline, stop != NULL);
        st->waiting = 1;
        if (isinf(wait)) {
            pthread_cond_wait(&r->arrived, &r->mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double until = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + wait;
            ts.tv_sec = (time_t)until;
            ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
            if (ts.tv_nsec > 999999999) ts.tv_nsec = 999999999;
            pthread_cond_timedwait(&r->arrived, &r->mu, &ts);
        }
        st->waiting = 0;
    }
out:
    r->st.wait_s += taas_now() - t0;
    if (--r->takers == 0 && r->closing) pthread_cond_broadcast(&r->idle);
    pthread_mutex_unlock(&r->mu);
    if (need_wake) wake(r);
    return rc;
}

void taas_stream_recv_stats_get(taas_stream_recv *r, taas_stream_recv_stats *out) {
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    out->held = r->held_now;
    pthread_mutex_unlock(&r->mu);
}
