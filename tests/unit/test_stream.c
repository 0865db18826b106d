/* workers/stream_send.c and stream_recv.c over real ZeroMQ sockets (tcp://127.0.0.1) with
 * real threads: order and content across ranks, workers and streams, empty items, credit
 * bounding memory, duplicates from a replacement worker, timeouts, stop flags, freeing
 * while a take waits, and malformed frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "batch.h"
#include "clock.h"
#include "sampler.h"
#include "stream_recv.h"
#include "stream_send.h"

static void *ZCTX;

#ifdef __SANITIZE_THREAD__
/* libzmq is not built with ThreadSanitizer: the memory its I/O threads read and write (the
 * bytes of a message, through memcpy, send and recv) passes between threads through atomics
 * it cannot see. Its accesses are not checked; the data plane's own are. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) {
    return "called_from_lib:libzmq.so.5\n";
}
#endif

static int setup(void **state) {
    (void)state;
    ZCTX = zmq_ctx_new();
    return ZCTX ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    alarm(20); /* a failed test leaves sockets open, and zmq_ctx_term waits for them */
    zmq_ctx_term(ZCTX);
    return 0;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Waits (up to 5 s) until a receiver's stat reaches want; *st as last seen. */
enum { HELD, STALE };
static void await_stats(taas_stream_recv *r, taas_stream_recv_stats *st, int which, uint64_t want) {
    for (int i = 0; i < 500; i++) {
        taas_stream_recv_stats_get(r, st);
        if ((which == HELD ? st->held : st->stale) >= want) break;
        sleep_s(0.01);
    }
    assert_int_equal(which == HELD ? st->held : st->stale, want);
}

/* ---- batches: content that depends on (stream, epoch, sample index) only -------------------- */

enum { C = 1, H = 2, W = 3, PX = C * H * W };

static float pixel(uint32_t stream, uint64_t epoch, uint64_t index, int j) {
    return (float)(stream * 100000 + index) + 0.25f * (float)j + 0.5f * (float)(epoch % 2);
}

static taas_batch *make_batch(uint32_t stream, uint64_t epoch, uint64_t k, const uint64_t *idx, size_t n) {
    taas_batch *b = taas_batch_alloc(epoch, k, (uint32_t)n, C, H, W);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < PX; j++) b->images[i * PX + j] = pixel(stream, epoch, idx[i], j);
        b->labels[i] = (int64_t)(idx[i] % 10) + 100 * stream;
        b->indices[i] = idx[i];
    }
    return b;
}

/* A batch of n samples 1000k .. 1000k + n - 1: for tests without a sampler. */
static taas_batch *simple_batch(uint64_t epoch, uint64_t k, size_t n) {
    uint64_t idx[16];
    for (size_t i = 0; i < n; i++) idx[i] = 1000 * k + i;
    return make_batch(0, epoch, k, idx, n);
}

static size_t batch_len(size_t n) {
    taas_batch *b = simple_batch(0, 0, n);
    size_t len = b->buf_len;
    taas_batch_free(b);
    return len;
}

static void check_batch(const taas_batch *b, uint32_t stream, uint64_t epoch, uint64_t k, const uint64_t *idx,
                        size_t n) {
    assert_int_equal(b->epoch, epoch);
    assert_int_equal(b->k, k);
    assert_int_equal(b->n, n);
    assert_true(b->c == C && b->h == H && b->w == W);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(b->indices[i], idx[i]);
        assert_int_equal(b->labels[i], (int64_t)(idx[i] % 10) + 100 * stream);
        for (int j = 0; j < PX; j++) assert_true(b->images[i * PX + j] == pixel(stream, epoch, idx[i], j));
    }
}

static taas_sampler *sampler(uint64_t size, uint32_t batch, uint32_t world, int shuffle) {
    taas_sampler_cfg c = {.size = size, .batch = batch, .world = world, .seed = 7, .shuffle = shuffle};
    taas_error err;
    taas_sampler *s = taas_sampler_new(&c, &err);
    assert_non_null(s);
    return s;
}

/* ---- the two sides ---------------------------------------------------------------------- */

static taas_stream_recv *rank_new(uint32_t rank, uint32_t world, uint32_t nstreams, const uint32_t *workers,
                                  uint32_t credit) {
    taas_stream_recv_cfg c = {.zctx = ZCTX, .bind = "tcp://127.0.0.1:*", .rank = rank, .world = world,
                              .nstreams = nstreams, .workers = workers, .credit = credit};
    taas_error err;
    taas_error_clear(&err);
    taas_stream_recv *r = taas_stream_recv_new(&c, &err);
    if (!r) fail_msg("taas_stream_recv_new: %s", err.message);
    return r;
}

static taas_stream_send *loader_new(uint32_t stream, uint32_t worker, uint32_t world, const char *const *eps) {
    taas_stream_send_cfg c = {.zctx = ZCTX, .stream = stream, .worker = worker, .world = world, .ranks = eps};
    taas_error err;
    taas_error_clear(&err);
    taas_stream_send *s = taas_stream_send_new(&c, &err);
    if (!s) fail_msg("taas_stream_send_new: %s", err.message);
    return s;
}

/* Rank 0 of 1 with one stream of one worker, and that worker. */
static taas_stream_recv *one_rank(uint32_t credit) {
    uint32_t workers[1] = {1};
    return rank_new(0, 1, 1, workers, credit);
}

static taas_stream_send *one_loader(taas_stream_recv *r) {
    const char *ep = taas_stream_recv_endpoint(r);
    return loader_new(0, 0, 1, &ep);
}

static void send_ok(taas_stream_send *s, taas_batch *b) {
    taas_error err;
    taas_error_clear(&err);
    if (taas_stream_send_batch(s, b, 5, NULL, &err) != 0) fail_msg("send: %s (%s)", err.message, err.hint);
}

static taas_batch *take_ok(taas_stream_recv *r, uint32_t stream, uint64_t epoch, uint64_t k) {
    taas_batch *b = NULL;
    taas_error err;
    taas_error_clear(&err);
    if (taas_stream_recv_take(r, stream, epoch, k, 5, NULL, &b, &err) != 0)
        fail_msg("take: %s: %s (%s)", err.ename, err.message, err.hint);
    return b;
}

/* A loader worker on its own thread: the non-empty items k % workers == worker of its
 * stream for the epochs, then the end. */
typedef struct loader {
    uint32_t stream, worker, workers, world, epochs;
    const char *const *eps;
    taas_sampler *sampler;
    double delay_s;       /* after each batch */
    int rc;
    taas_error err;
    taas_stream_send_stats st;
} loader;

static void *loader_run(void *arg) {
    loader *l = arg;
    taas_stream_send *s = loader_new(l->stream, l->worker, l->world, l->eps);
    uint64_t idx[64];
    taas_error_clear(&l->err);
    l->rc = 0;
    for (uint64_t e = 0; e < l->epochs && !l->rc; e++) {
        for (uint64_t k = l->worker; k < taas_sampler_items(l->sampler) && !l->rc; k += l->workers) {
            size_t n = taas_sampler_item(l->sampler, e, k, idx);
            if (!n) continue; /* as the pipeline does: empty items are not made */
            l->rc = taas_stream_send_batch(s, make_batch(l->stream, e, k, idx, n), 10, NULL, &l->err);
            if (l->delay_s > 0) sleep_s(l->delay_s);
        }
    }
    if (!l->rc) l->rc = taas_stream_send_end(s, 10, NULL, &l->err);
    taas_stream_send_stats_get(s, &l->st);
    taas_stream_send_free(s);
    return NULL;
}

/* A rank on its own thread: every non-empty item of its share of each stream, in (epoch, k)
 * order per stream, the streams interleaved as a training loop with two loaders would. */
typedef struct ranker {
    taas_stream_recv *r;
    uint32_t rank, world, nstreams, epochs;
    taas_sampler **samplers;
    uint64_t taken, skipped;
} ranker;

static void *rank_run(void *arg) {
    ranker *t = arg;
    uint64_t idx[64];
    for (uint64_t e = 0; e < t->epochs; e++) {
        for (uint64_t k = t->rank;; k += t->world) {
            int more = 0;
            for (uint32_t s = 0; s < t->nstreams; s++) {
                if (k >= taas_sampler_items(t->samplers[s])) continue;
                more = 1;
                size_t n = taas_sampler_item(t->samplers[s], e, k, idx);
                if (!n) {
                    t->skipped++;
                    continue;
                }
                taas_batch *b = take_ok(t->r, s, e, k);
                check_batch(b, s, e, k, idx, n);
                taas_batch_free(b);
                t->taken++;
            }
            if (!more) break;
        }
    }
    return NULL;
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Two ranks; stream 0 from two workers (worker 0 slower, so rank 0's items arrive out of
 * order), stream 1 from one, shuffled; two epochs. Every rank gets every non-empty item of
 * its share exactly once, in order, with the content made for it; empty items (the last
 * step of stream 0 leaves rank 1 nothing) are skipped by both sides. */
/* The planes of a job across machines: CURVE with the job's keys, a ZAP handler on the rank's
 * side. Many credit windows of batches pass, in order and whole. */
typedef struct curve_loader {
    void *zctx;
    taas_zsec *sec;
    const char *ep;
    int n, rc;
    taas_error err;
} curve_loader;

static void *curve_send(void *arg) {
    curve_loader *l = arg;
    taas_stream_send_cfg c = {.zctx = l->zctx, .sec = l->sec, .stream = 0, .worker = 0, .world = 1, .ranks = &l->ep};
    taas_stream_send *s = taas_stream_send_new(&c, &l->err);
    l->rc = s ? 0 : -1;
    for (int k = 0; s && k < l->n && !l->rc; k++) {
        uint64_t idx[3] = {(uint64_t)k * 3, (uint64_t)k * 3 + 1, (uint64_t)k * 3 + 2};
        l->rc = taas_stream_send_batch(s, make_batch(0, 0, (uint64_t)k, idx, 3), 10, NULL, &l->err);
    }
    if (s && !l->rc) l->rc = taas_stream_send_end(s, 10, NULL, &l->err);
    taas_stream_send_free(s);
    return NULL;
}

static void test_encrypted_stream(void **state) {
    (void)state;
    taas_zkeys keys;
    taas_error err;
    assert_int_equal(taas_zkeys_new(&keys, &err), 0);
    void *rctx = zmq_ctx_new(), *lctx = zmq_ctx_new();
    taas_zsec *rsec = taas_zsec_new(rctx, &keys, 1, &err), *lsec = taas_zsec_new(lctx, &keys, 0, &err);
    assert_non_null(rsec);
    assert_non_null(lsec);
    uint32_t workers[1] = {1};
    taas_stream_recv_cfg rc = {.zctx = rctx, .sec = rsec, .bind = "tcp://127.0.0.1:*", .rank = 0, .world = 1,
                               .nstreams = 1, .workers = workers, .credit = 4};
    taas_stream_recv *r = taas_stream_recv_new(&rc, &err);
    assert_non_null(r);
    curve_loader l = {.zctx = lctx, .sec = lsec, .ep = taas_stream_recv_endpoint(r), .n = 50};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, curve_send, &l), 0);
    for (uint64_t k = 0; k < 50; k++) {
        taas_batch *b = take_ok(r, 0, 0, k);
        uint64_t idx[3] = {k * 3, k * 3 + 1, k * 3 + 2};
        check_batch(b, 0, 0, k, idx, 3);
        taas_batch_free(b);
    }
    pthread_join(t, NULL);
    if (l.rc) fail_msg("loader: %s", l.err.message);
    taas_stream_recv_free(r);
    taas_zsec_free(rsec);
    taas_zsec_free(lsec);
    zmq_ctx_term(rctx);
    zmq_ctx_term(lctx);
}

static void test_order_and_content(void **state) {
    (void)state;
    enum { WORLD = 2 };
    uint32_t workers[2] = {2, 1};
    taas_sampler *smp[2] = {sampler(1000, 16, WORLD, 0), sampler(300, 10, WORLD, 1)};
    /* 1000 samples in steps of 32: the last step gives rank 0 eight, rank 1 none */
    uint64_t idx[16];
    assert_int_equal(taas_sampler_items(smp[0]), 64);
    assert_int_equal(taas_sampler_item(smp[0], 0, 62, idx), 8);
    assert_int_equal(taas_sampler_item(smp[0], 0, 63, idx), 0);

    taas_stream_recv *r[WORLD];
    const char *eps[WORLD];
    for (uint32_t i = 0; i < WORLD; i++) {
        r[i] = rank_new(i, WORLD, 2, workers, 2);
        eps[i] = taas_stream_recv_endpoint(r[i]);
        assert_non_null(strstr(eps[i], "tcp://127.0.0.1:"));
    }
    loader l[3] = {{.stream = 0, .worker = 0, .workers = 2, .delay_s = 0.001},
                   {.stream = 0, .worker = 1, .workers = 2},
                   {.stream = 1, .worker = 0, .workers = 1}};
    ranker t[WORLD];
    pthread_t lt[3], rt[WORLD];
    for (int i = 0; i < 3; i++) {
        l[i].world = WORLD;
        l[i].epochs = 2;
        l[i].eps = eps;
        l[i].sampler = smp[l[i].stream];
        assert_int_equal(pthread_create(&lt[i], NULL, loader_run, &l[i]), 0);
    }
    for (uint32_t i = 0; i < WORLD; i++) {
        t[i] = (ranker){.r = r[i], .rank = i, .world = WORLD, .nstreams = 2, .epochs = 2, .samplers = smp};
        assert_int_equal(pthread_create(&rt[i], NULL, rank_run, &t[i]), 0);
    }
    for (uint32_t i = 0; i < WORLD; i++) pthread_join(rt[i], NULL);
    uint64_t sent = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(lt[i], NULL);
        if (l[i].rc) fail_msg("loader %d: %s", i, l[i].err.message);
        sent += l[i].st.batches;
    }
    /* per epoch: stream 0 has 63 non-empty items, stream 1 30 */
    assert_int_equal(sent, 2 * (63 + 30));
    assert_int_equal(t[0].taken + t[1].taken, sent);
    assert_int_equal(t[1].skipped, 2);
    for (uint32_t i = 0; i < WORLD; i++) {
        taas_stream_recv_stats st;
        taas_stream_recv_stats_get(r[i], &st);
        assert_int_equal(st.batches, t[i].taken);
        assert_int_equal(st.duplicates, 0);
        assert_int_equal(st.stale, 0);
        assert_true(st.max_held <= 2 * 3); /* credit x the workers of both streams */
        taas_stream_recv_free(r[i]);
    }
    taas_sampler_free(smp[0]);
    taas_sampler_free(smp[1]);
}

/* An item that a loader made but the taker passes over (it asks for a later one) is dropped
 * at once and its credit goes back: with a window of 1 the loader could not make the item
 * the taker waits for otherwise. */
static void *send_three(void *arg) {
    taas_stream_send *s = arg;
    for (uint64_t k = 0; k < 3; k++) send_ok(s, simple_batch(0, k, 3));
    return NULL;
}

static void test_skipped_item_gives_credit_back(void **state) {
    (void)state;
    taas_stream_recv *r = one_rank(1);
    taas_stream_send *s = one_loader(r);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, send_three, s), 0);
    taas_batch_free(take_ok(r, 0, 0, 0));
    taas_batch *b = take_ok(r, 0, 0, 2);
    assert_int_equal(b->k, 2);
    taas_batch_free(b);
    pthread_join(th, NULL);
    taas_stream_recv_stats st;
    taas_stream_recv_stats_get(r, &st);
    assert_int_equal(st.batches, 2);
    assert_int_equal(st.duplicates, 1);
    assert_true(st.max_held <= 1);
    taas_stream_send_free(s);
    taas_stream_recv_free(r);
}

/* A slow taker: the sender blocks once its window is spent, the rank never holds more than
 * the credit, and the waiting shows in both sides' stats. */
typedef struct counted {
    taas_stream_send *s;
    int n;
    atomic_int sent;
    int rc;
} counted;

static void *send_counted(void *arg) {
    counted *c = arg;
    taas_error err;
    for (int k = 0; k < c->n; k++) {
        if ((c->rc = taas_stream_send_batch(c->s, simple_batch(0, (uint64_t)k, 16), 10, NULL, &err))) break;
        atomic_fetch_add(&c->sent, 1);
    }
    if (!c->rc) c->rc = taas_stream_send_end(c->s, 10, NULL, &err);
    return NULL;
}

static void credit_bounds_memory(uint32_t credit) {
    enum { N = 40 };
    taas_stream_recv *r = one_rank(credit);
    counted c = {.s = one_loader(r), .n = N};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, send_counted, &c), 0);
    /* nothing is taken yet: exactly the window goes out, and the sender waits */
    for (int i = 0; i < 200 && atomic_load(&c.sent) < (int)credit; i++) sleep_s(0.01);
    taas_stream_recv_stats st;
    await_stats(r, &st, HELD, credit);
    sleep_s(0.2);
    assert_int_equal(atomic_load(&c.sent), credit);
    taas_stream_recv_stats_get(r, &st);
    assert_int_equal(st.max_held, credit);
    for (uint64_t k = 0; k < N; k++) {
        taas_batch *b = take_ok(r, 0, 0, k);
        assert_int_equal(b->n, 16);
        assert_int_equal(b->indices[15], 1000 * k + 15);
        taas_batch_free(b);
        sleep_s(0.002);
        taas_stream_recv_stats_get(r, &st);
        assert_true(st.max_held <= credit);
    }
    pthread_join(th, NULL);
    assert_int_equal(c.rc, 0);
    taas_stream_send_stats ss;
    taas_stream_send_stats_get(c.s, &ss);
    assert_int_equal(ss.batches, N);
    assert_int_equal(ss.bytes, N * batch_len(16));
    assert_true(ss.credit_wait_s > 0.2);
    taas_stream_recv_stats_get(r, &st);
    assert_int_equal(st.batches, N);
    assert_int_equal(st.bytes, ss.bytes);
    assert_int_equal(st.max_held, credit);
    taas_stream_send_free(c.s);
    taas_stream_recv_free(r);
}

/* A window of 3 goes back a credit at a time, one of 9 in chunks of 2. */
static void test_credit_bounds_memory(void **state) {
    (void)state;
    credit_bounds_memory(3);
    credit_bounds_memory(9);
}

/* A replacement worker (a new hello as the same stream and worker) redoes items, some taken
 * already, some held: each is dropped exactly, what the old connection still sends is stale,
 * and the rank takes every item once. */
static void test_replacement_drops_duplicates(void **state) {
    (void)state;
    taas_stream_recv *r = one_rank(4);
    taas_stream_send *a = one_loader(r);
    for (uint64_t k = 0; k < 4; k++) send_ok(a, simple_batch(0, k, 2));
    for (uint64_t k = 0; k < 3; k++) taas_batch_free(take_ok(r, 0, 0, k));
    send_ok(a, simple_batch(0, 4, 2));
    send_ok(a, simple_batch(0, 5, 2)); /* a has one credit left */
    taas_stream_recv_stats st;
    await_stats(r, &st, HELD, 3); /* 3, 4 and 5 arrived */

    taas_stream_send *b = one_loader(r);
    send_ok(b, simple_batch(0, 1, 2)); /* returns once the rank has taken b's hello */
    send_ok(a, simple_batch(0, 6, 2)); /* a was replaced: stale */
    await_stats(r, &st, STALE, 1);
    for (uint64_t k = 2; k < 8; k++) send_ok(b, simple_batch(0, k, 2));
    for (uint64_t k = 3; k < 8; k++) {
        taas_batch *x = take_ok(r, 0, 0, k);
        assert_int_equal(x->indices[1], 1000 * k + 1);
        taas_batch_free(x);
    }
    taas_error err;
    assert_int_equal(taas_stream_send_end(b, 5, NULL, &err), 0);
    taas_stream_recv_stats_get(r, &st);
    assert_int_equal(st.batches, 8);
    assert_int_equal(st.duplicates, 5); /* b's 1 and 2 (taken), 3, 4 and 5 (held or taken) */
    assert_int_equal(st.stale, 1);
    assert_true(st.max_held <= 4 + 4);
    /* taking again, or out of order, is the caller's mistake */
    taas_batch *x = NULL;
    assert_int_equal(taas_stream_recv_take(r, 0, 0, 7, 1, NULL, &x, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "item 7 of epoch 0 of stream 0 comes at or before item 7"));
    assert_null(x);
    taas_stream_send_free(a);
    taas_stream_send_free(b);
    taas_stream_recv_free(r);
}

/* A take that times out says which stream, item and worker it waited for, and why that
 * worker may be late: not connected, connected, or ended. */
static void test_take_timeout_message(void **state) {
    (void)state;
    uint32_t workers[1] = {2};
    taas_stream_recv *r = rank_new(1, 2, 1, workers, 2), *r0 = rank_new(0, 2, 1, workers, 2);
    const char *eps[2] = {taas_stream_recv_endpoint(r0), taas_stream_recv_endpoint(r)};
    taas_batch *b = NULL;
    taas_error err;
    double t0 = taas_now();
    assert_int_equal(taas_stream_recv_take(r, 0, 0, 3, 0.2, NULL, &b, &err), -1);
    double took = taas_now() - t0;
    assert_true(took >= 0.2 && took < 1.5);
    assert_null(b);
    assert_string_equal(err.ename, "TaasTimeoutError");
    assert_non_null(strstr(err.message, "rank 1: item 3 of epoch 0 of stream 0 has not come from loader worker 1 of 2"));
    assert_non_null(strstr(err.hint, "worker 1 of stream 0 has not connected to this rank (tcp://127.0.0.1:"));

    /* worker 1 connected (it sent item 5) but does not send item 3 */
    taas_stream_send *s = loader_new(0, 1, 2, eps);
    send_ok(s, simple_batch(0, 5, 2));
    taas_stream_recv_stats st;
    await_stats(r, &st, HELD, 1);
    assert_int_equal(taas_stream_recv_take(r, 0, 0, 3, 0.2, NULL, &b, &err), -1);
    assert_non_null(strstr(err.message, "item 3 of epoch 0 of stream 0"));
    assert_non_null(strstr(err.hint, "worker 1 of stream 0 is connected and has sent 1 batches here, 1 of them"));
    /* and ended without it (a replacement, with the end at once) */
    taas_stream_send_free(s);
    s = loader_new(0, 1, 2, eps);
    assert_int_equal(taas_stream_send_end(s, 5, NULL, &err), 0);
    assert_int_equal(taas_stream_recv_take(r, 0, 0, 3, 0.2, NULL, &b, &err), -1);
    assert_non_null(strstr(err.message, "item 3 of epoch 0 of stream 0 has not come from loader worker 1 of 2"));
    assert_non_null(strstr(err.hint, "has sent its end without this item"));
    taas_stream_send_free(s);
    /* the item the first connection sent is still there */
    b = take_ok(r, 0, 0, 5);
    assert_int_equal(b->indices[0], 5000);
    taas_batch_free(b);

    /* a take that cannot be right */
    assert_int_equal(taas_stream_recv_take(r, 0, 0, 4, 0.2, NULL, &b, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "rank 1 of 2 cannot take item 4 of stream 0: another rank trains it"));
    assert_int_equal(taas_stream_recv_take(r, 3, 0, 1, 0.2, NULL, &b, &err), -1);
    assert_non_null(strstr(err.message, "there is no such stream"));
    taas_stream_recv_free(r);
    taas_stream_recv_free(r0);
}

/* Stop flags, raised from another thread, end every wait within a slice. */
typedef struct raiser {
    volatile int *flag;
    double after;
} raiser;

static void *raise_later(void *arg) {
    raiser *x = arg;
    sleep_s(x->after);
    __atomic_store_n(x->flag, 1, __ATOMIC_RELAXED);
    return NULL;
}

static double stop_after(volatile int *flag, double after, pthread_t *th, raiser *x) {
    *flag = 0;
    *x = (raiser){flag, after};
    assert_int_equal(pthread_create(th, NULL, raise_later, x), 0);
    return taas_now();
}

static void test_stop_flags(void **state) {
    (void)state;
    taas_stream_recv *r = one_rank(1);
    volatile int stop = 0;
    pthread_t th;
    raiser x;
    taas_error err;
    taas_batch *b = NULL;

    /* a take with no time limit */
    double t0 = stop_after(&stop, 0.1, &th, &x);
    assert_int_equal(taas_stream_recv_take(r, 0, 0, 0, -1, &stop, &b, &err), 1);
    double took = taas_now() - t0;
    pthread_join(th, NULL);
    assert_true(took >= 0.09 && took < 0.6);
    assert_null(b);

    /* a sender waiting for credit: the window (1) is spent and nothing is taken */
    taas_stream_send *s = one_loader(r);
    send_ok(s, simple_batch(0, 0, 2));
    t0 = stop_after(&stop, 0.1, &th, &x);
    assert_int_equal(taas_stream_send_batch(s, simple_batch(0, 1, 2), -1, &stop, &err), 1);
    took = taas_now() - t0;
    pthread_join(th, NULL);
    assert_true(took >= 0.09 && took < 0.6);
    /* already up: no wait at all */
    assert_int_equal(taas_stream_send_batch(s, simple_batch(0, 1, 2), -1, &stop, &err), 1);
    taas_stream_send_stats ss;
    taas_stream_send_stats_get(s, &ss);
    assert_int_equal(ss.batches, 1);
    taas_stream_send_free(s);

    /* an end that no rank acknowledges (nothing listens on port 1) */
    const char *dead_ep = "tcp://127.0.0.1:1";
    s = loader_new(0, 0, 1, &dead_ep);
    t0 = stop_after(&stop, 0.1, &th, &x);
    assert_int_equal(taas_stream_send_end(s, -1, &stop, &err), 1);
    took = taas_now() - t0;
    pthread_join(th, NULL);
    assert_true(took >= 0.09 && took < 0.6);
    assert_int_equal(taas_stream_send_end(s, 0.1, NULL, &err), -1);
    assert_string_equal(err.ename, "TaasTimeoutError");
    assert_non_null(strstr(err.message, "loader worker 0 of stream 0: rank 0 (tcp://127.0.0.1:1)"));
    assert_non_null(strstr(err.message, "did not acknowledge its end in 0.1 s"));
    if (!strstr(err.hint, "not reachable")) fail_msg("hint: %s", err.hint);
    /* no batch after the end */
    assert_int_equal(taas_stream_send_batch(s, simple_batch(0, 0, 2), 1, NULL, &err), -1);
    assert_non_null(strstr(err.message, "a batch after the end"));
    taas_stream_send_free(s);
    taas_stream_recv_free(r);
}

/* Freeing the receiver while another thread waits in take (and a loader is connected)
 * wakes the take (1, stopped) and returns promptly. */
typedef struct waiter {
    taas_stream_recv *r;
    int rc;
    taas_batch *b;
} waiter;

static void *take_forever(void *arg) {
    waiter *w = arg;
    taas_error err;
    w->rc = taas_stream_recv_take(w->r, 0, 0, 1, -1, NULL, &w->b, &err);
    return NULL;
}

static void test_free_while_take_waits(void **state) {
    (void)state;
    taas_stream_recv *r = one_rank(2);
    taas_stream_send *s = one_loader(r);
    send_ok(s, simple_batch(0, 0, 2)); /* held, never taken: freed with the receiver */
    waiter w = {.r = r, .rc = 99};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, take_forever, &w), 0);
    sleep_s(0.1);
    double t0 = taas_now();
    taas_stream_recv_free(r);
    double took = taas_now() - t0;
    pthread_join(th, NULL);
    assert_true(took < 0.5);
    assert_int_equal(w.rc, 1);
    assert_null(w.b);
    /* the loader finds no one to acknowledge its end now */
    taas_error err;
    assert_int_equal(taas_stream_send_end(s, 0.1, NULL, &err), -1);
    assert_string_equal(err.ename, "TaasTimeoutError");
    taas_stream_send_free(s);
}

/* ---- a raw DEALER speaking the wire, for what a correct loader never sends ----------------- */

static void *raw_loader(const char *ep, const char *hello) {
    void *d = zmq_socket(ZCTX, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(d, ep), 0);
    assert_int_equal(zmq_send(d, "H", 1, ZMQ_SNDMORE), 1);
    assert_int_equal(zmq_send(d, hello, strlen(hello), 0), (int)strlen(hello));
    return d;
}

static void raw_credit(void *d) {
    char kind = 0;
    unsigned char n[4];
    int ms = 5000;
    zmq_setsockopt(d, ZMQ_RCVTIMEO, &ms, sizeof ms);
    assert_int_equal(zmq_recv(d, &kind, 1, 0), 1);
    assert_int_equal(kind, 'C');
    assert_int_equal(zmq_recv(d, n, sizeof n, 0), 4);
}

static void raw_send(void *d, const char *kind, const void *body, size_t len) {
    assert_int_equal(zmq_send(d, kind, 1, body ? ZMQ_SNDMORE : 0), 1);
    if (body) assert_int_equal(zmq_send(d, body, len, 0), (int)len);
}

/* Sends the end and waits for its acknowledgement: the rank has read all sent before. */
static void raw_end(void *d) {
    raw_send(d, "E", "{}", 2);
    char kind = 0, body[8];
    int ms = 5000;
    zmq_setsockopt(d, ZMQ_RCVTIMEO, &ms, sizeof ms);
    while (kind != 'A') {
        assert_int_equal(zmq_recv(d, &kind, 1, 0), 1);
        int more = 0;
        size_t len = sizeof more;
        zmq_getsockopt(d, ZMQ_RCVMORE, &more, &len);
        if (more) assert_true(zmq_recv(d, body, sizeof body, 0) >= 0);
    }
}

/* take's error after the raw loader sent what it sent */
static void take_fails(taas_stream_recv *r, uint64_t k, const char *ename, const char *part) {
    taas_batch *b = NULL;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_stream_recv_take(r, 0, 0, k, 5, NULL, &b, &err);
    if (rc != -1 || strcmp(err.ename, ename) || !strstr(err.message, part))
        fail_msg("wanted %s with '%s', got %d, %s: %s", ename, part, rc, err.ename, err.message);
    assert_null(b);
    assert_true(err.hint[0] != '\0');
}

static void test_malformed_frames(void **state) {
    (void)state;
    const char *hello = "{\"stream\": 0, \"worker\": 0, \"pid\": 1}";
    taas_batch *good = simple_batch(0, 0, 4);
    unsigned char junk[200];
    memset(junk, 0x5a, sizeof junk);
    struct {
        const void *body;
        size_t len;
        const char *part;
    } cases[] = {
        {junk, 40, "worker 0 of stream 0 sent a malformed batch: a batch of 40 bytes is shorter than its 64-byte"},
        {junk, sizeof junk, "sent a malformed batch: not a batch: the header does not start with TAASBT01"},
        {good->buf, good->buf_len - 8, "sent a malformed batch: a batch of 4 samples of 1x2x3 should be"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        taas_stream_recv *r = one_rank(2);
        void *d = raw_loader(taas_stream_recv_endpoint(r), hello);
        raw_credit(d);
        raw_send(d, "B", cases[i].body, cases[i].len);
        take_fails(r, 0, "TaasValueError", cases[i].part);
        take_fails(r, 1, "TaasValueError", cases[i].part); /* every later take too */
        zmq_close(d);
        taas_stream_recv_free(r);
    }
    /* a kind the wire does not have, a batch beyond the credit, bad hellos */
    taas_stream_recv *r = one_rank(2);
    void *d = raw_loader(taas_stream_recv_endpoint(r), hello);
    raw_credit(d);
    raw_send(d, "Q", NULL, 0);
    take_fails(r, 0, "TaasValueError", "sent a message of 1 frames with kind 'Q'");
    zmq_close(d);
    taas_stream_recv_free(r);

    r = one_rank(1);
    d = raw_loader(taas_stream_recv_endpoint(r), hello);
    raw_credit(d);
    raw_send(d, "B", good->buf, good->buf_len);
    raw_send(d, "B", good->buf, good->buf_len);
    raw_end(d); /* before a take could drop the first and give its credit back */
    take_fails(r, 1, "TaasValueError", "worker 0 of stream 0 sent more batches than its credit of 1");
    zmq_close(d);
    taas_stream_recv_free(r);

    const char *hellos[][2] = {
        {"[1, 2]", "a loader said hello with no integer \"stream\" and \"worker\" in it"},
        {"{\"stream\": 2, \"worker\": 0}", "a loader said hello with stream 2, but this rank has 1 streams"},
        {"{\"stream\": 0, \"worker\": 1}", "worker 1 of stream 0, but that stream has 1 workers"},
    };
    for (size_t i = 0; i < 3; i++) {
        r = one_rank(2);
        d = raw_loader(taas_stream_recv_endpoint(r), hellos[i][0]);
        take_fails(r, 0, "TaasValueError", hellos[i][1]);
        zmq_close(d);
        taas_stream_recv_free(r);
    }
    taas_batch_free(good);
}

/* Configurations that cannot work fail at once with a message that says why. */
static void test_config_errors(void **state) {
    (void)state;
    taas_error err;
    uint32_t workers[1] = {1}, none[1] = {0};
    taas_stream_recv_cfg rc = {.zctx = ZCTX, .bind = "tcp://127.0.0.1:*", .rank = 2, .world = 2, .nstreams = 1,
                               .workers = workers, .credit = 1};
    assert_null(taas_stream_recv_new(&rc, &err));
    assert_string_equal(err.ename, "TaasValueError");
    rc.rank = 0;
    rc.workers = none;
    assert_null(taas_stream_recv_new(&rc, &err));
    rc.workers = workers;
    rc.bind = "tcp://256.1.1.1:5";
    assert_null(taas_stream_recv_new(&rc, &err));
    assert_string_equal(err.ename, "TaasIOError");
    assert_non_null(strstr(err.message, "rank 0: cannot bind the rank's data socket to tcp://256.1.1.1:5"));
    /* the port is taken */
    rc.bind = "tcp://127.0.0.1:*";
    taas_stream_recv *r = taas_stream_recv_new(&rc, &err);
    assert_non_null(r);
    rc.bind = taas_stream_recv_endpoint(r);
    assert_null(taas_stream_recv_new(&rc, &err));
    assert_non_null(strstr(err.message, "Address already in use"));
    taas_stream_recv_free(r);

    const char *bad[1] = {"nonsense://x"};
    taas_stream_send_cfg sc = {.zctx = ZCTX, .world = 1, .ranks = bad};
    assert_null(taas_stream_send_new(&sc, &err));
    assert_string_equal(err.ename, "TaasIOError");
    assert_non_null(strstr(err.message, "loader worker 0 of stream 0, to rank 0: cannot connect the loader's data "
                                        "socket to nonsense://x"));
    sc.ranks = NULL;
    assert_null(taas_stream_send_new(&sc, &err));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_content),
        cmocka_unit_test(test_encrypted_stream),
        cmocka_unit_test(test_skipped_item_gives_credit_back),
        cmocka_unit_test(test_credit_bounds_memory),
        cmocka_unit_test(test_replacement_drops_duplicates),
        cmocka_unit_test(test_take_timeout_message),
        cmocka_unit_test(test_stop_flags),
        cmocka_unit_test(test_free_while_take_waits),
        cmocka_unit_test(test_malformed_frames),
        cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
