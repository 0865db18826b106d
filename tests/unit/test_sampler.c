/* dataloader/rng.c (Philox4x32-10 against Random123's known answers) and dataloader/sampler.c:
 * permutations per (seed, epoch), the work item layout of docs/design.md §3, sharding over
 * loaders, drop_last, the units limit, and concurrent use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sampler.h"

/* ---- rng -------------------------------------------------------------------------------- */

static void test_philox_known_answers(void **state) {
    (void)state;
    /* Random123's kat_vectors, philox4x32 10 rounds: counter, key -> output */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
         0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
         0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        taas_philox4x32_10(kat[i], kat[i] + 4, out);
        for (int j = 0; j < 4; j++) assert_int_equal(out[j], kat[i][6 + j]);
    }
}

static void test_rng_streams(void **state) {
    (void)state;
    taas_rng a, b;
    /* the stream is a pure function of (seed, epoch, index, stream) */
    taas_rng_init(&a, 99, 3, 12345, TAAS_RNG_TRANSFORM);
    taas_rng_init(&b, 99, 3, 12345, TAAS_RNG_TRANSFORM);
    for (int i = 0; i < 100; i++) assert_int_equal(taas_rng_u32(&a), taas_rng_u32(&b));
    /* the first block is Philox of (0, stream << 24 | epoch, index) under key seed */
    uint32_t ctr[4] = {0, (1u << 24) | 3u, 12345, 0}, key[2] = {99, 0}, want[4];
    taas_philox4x32_10(ctr, key, want);
    taas_rng_init(&a, 99, 3, 12345, TAAS_RNG_TRANSFORM);
    for (int j = 0; j < 4; j++) assert_int_equal(taas_rng_u32(&a), want[j]);
    /* each coordinate changes the stream */
    const uint64_t alt[4][4] = {{100, 3, 12345, 1}, {99, 4, 12345, 1}, {99, 3, 12346, 1}, {99, 3, 12345, 2}};
    for (int k = 0; k < 4; k++) {
        taas_rng_init(&a, 99, 3, 12345, TAAS_RNG_TRANSFORM);
        taas_rng_init(&b, alt[k][0], alt[k][1], alt[k][2], (uint32_t)alt[k][3]);
        int same = 0;
        for (int i = 0; i < 8; i++) same += taas_rng_u32(&a) == taas_rng_u32(&b);
        assert_true(same < 2);
    }
    /* uniform draws lie in [0, 1) and average 1/2 */
    double sum = 0;
    for (int i = 0; i < 20000; i++) {
        double u = taas_rng_uniform(&a);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
    }
    assert_true(sum / 20000 > 0.49 && sum / 20000 < 0.51);
}

static void test_rng_below_unbiased(void **state) {
    (void)state;
    taas_rng r;
    taas_rng_init(&r, 5, 0, 0, TAAS_RNG_SAMPLER);
    /* n = 7 over 70000 draws: chi-square with 6 degrees of freedom below 22.5 (p = 0.001) */
    int count[7] = {0};
    for (int i = 0; i < 70000; i++) {
        uint64_t v = taas_rng_below(&r, 7);
        assert_true(v < 7);
        count[v]++;
    }
    double chi = 0;
    for (int i = 0; i < 7; i++) chi += (count[i] - 10000.0) * (count[i] - 10000.0) / 10000.0;
    assert_true(chi < 22.5);
    /* the 64-bit path and the edges */
    assert_int_equal(taas_rng_below(&r, 1), 0);
    assert_int_equal(taas_rng_below(&r, 0), 0);
    uint64_t big = (1ull << 40) + 17, hi = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t v = taas_rng_below(&r, big);
        assert_true(v < big);
        if (v > hi) hi = v;
    }
    assert_true(hi > (1ull << 39)); /* the upper half is reached */
    uint64_t top = UINT32_MAX;
    for (int i = 0; i < 1000; i++) assert_true(taas_rng_below(&r, top) < top);
}

/* ---- sampler ---------------------------------------------------------------------------- */

static taas_sampler *make(uint64_t size, uint32_t batch, uint32_t world, uint64_t seed, int shuffle, int drop_last,
                          uint64_t units) {
    taas_sampler_cfg cfg = {size, batch, world, seed, shuffle, drop_last, units};
    taas_error err;
    taas_error_clear(&err);
    taas_sampler *s = taas_sampler_new(&cfg, &err);
    if (!s) fail_msg("sampler_new: %s", err.message);
    return s;
}

/* Every index exactly once per epoch, items laid out as k = s*W + r: item k is positions
 * [k*B, (k+1)*B) of the permutation (so rank r of step s gets [s*B*W + r*B, ...)). */
static void check_epoch(uint64_t n, uint32_t b, uint32_t w, int drop_last, int shuffle, uint64_t epoch) {
    taas_sampler *s = make(n, b, w, 1234, shuffle, drop_last, 0);
    uint64_t span = (uint64_t)b * w;
    uint64_t steps = drop_last ? n / span : (n + span - 1) / span;
    assert_int_equal(taas_sampler_steps(s), steps);
    assert_int_equal(taas_sampler_items(s), steps * w);
    uint64_t used = drop_last ? steps * span : n;
    int *seen = calloc(n, sizeof *seen);
    uint64_t *idx = malloc(b * sizeof *idx), total = 0;
    uint64_t *order = malloc(n * sizeof *order); /* positions of the permutation, in item order */
    for (uint64_t k = 0; k < taas_sampler_items(s); k++) {
        size_t got = taas_sampler_item(s, epoch, k, idx);
        uint64_t start = k * b;
        uint64_t want = start >= used ? 0 : (used - start < b ? used - start : b);
        assert_int_equal(got, want);
        /* step s = k / W, rank r = k % W */
        uint64_t st = k / w, rank = k % w;
        assert_int_equal(start, st * span + rank * b);
        for (size_t i = 0; i < got; i++) {
            assert_true(idx[i] < n);
            seen[idx[i]]++;
            order[total++] = idx[i];
            if (!shuffle) assert_int_equal(idx[i], start + i);
        }
    }
    assert_int_equal(total, used);
    for (uint64_t i = 0; i < n; i++) assert_true(seen[i] <= 1);
    if (!drop_last)
        for (uint64_t i = 0; i < n; i++) assert_int_equal(seen[i], 1);
    /* beyond the items of an epoch there is nothing */
    assert_int_equal(taas_sampler_item(s, epoch, taas_sampler_items(s), idx), 0);
    assert_false(taas_sampler_done(s, epoch));
    free(seen);
    free(idx);
    free(order);
    taas_sampler_free(s);
}

static void test_every_index_once(void **state) {
    (void)state;
    const struct { uint64_t n; uint32_t b, w; } shapes[] = {
        {1, 1, 1}, {10, 3, 1}, {10, 3, 2}, {100, 7, 3}, {64, 8, 8}, {1000, 64, 1}, {1000, 17, 4}, {5, 4, 4}, {10000, 1000, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        for (int drop = 0; drop < 2; drop++) {
            if (drop && shapes[i].n < (uint64_t)shapes[i].b * shapes[i].w) continue;
            for (int shuf = 0; shuf < 2; shuf++)
                for (uint64_t e = 0; e < 3; e++) check_epoch(shapes[i].n, shapes[i].b, shapes[i].w, drop, shuf, e);
        }
    }
}

static void test_permutation_per_seed_and_epoch(void **state) {
    (void)state;
    taas_sampler *a = make(1000, 1000, 1, 7, 1, 0, 0), *b = make(1000, 1000, 1, 7, 1, 0, 0);
    taas_sampler *c = make(1000, 1000, 1, 8, 1, 0, 0);
    uint64_t *x = malloc(1000 * sizeof *x), *y = malloc(1000 * sizeof *y);
    /* the same (seed, epoch) in another sampler (another loader, another process): identical */
    for (uint64_t e = 0; e < 5; e++) {
        taas_sampler_item(a, e, 0, x);
        taas_sampler_item(b, e, 0, y);
        assert_memory_equal(x, y, 1000 * sizeof *x);
    }
    /* other epochs and other seeds differ; asking again for an evicted epoch gives it back */
    taas_sampler_item(a, 0, 0, x);
    taas_sampler_item(a, 1, 0, y);
    assert_memory_not_equal(x, y, 1000 * sizeof *x);
    taas_sampler_item(c, 0, 0, y);
    assert_memory_not_equal(x, y, 1000 * sizeof *x);
    for (uint64_t e = 2; e < 9; e++) taas_sampler_item(a, e, 0, y);
    taas_sampler_item(a, 0, 0, y);
    assert_memory_equal(x, y, 1000 * sizeof *x);
    /* shuffled, not the identity */
    int fixed = 0;
    for (int i = 0; i < 1000; i++) fixed += x[i] == (uint64_t)i;
    assert_true(fixed < 20);
    free(x);
    free(y);
    taas_sampler_free(a);
    taas_sampler_free(b);
    taas_sampler_free(c);
}

/* All 24 orders of 4 samples come up equally often over epochs (Fisher-Yates is uniform). */
static void test_permutation_uniform(void **state) {
    (void)state;
    taas_sampler *s = make(4, 4, 1, 3, 1, 0, 0);
    int count[256] = {0};
    const int epochs = 9600;
    for (uint64_t e = 0; e < (uint64_t)epochs; e++) {
        uint64_t p[4];
        assert_int_equal(taas_sampler_item(s, e, 0, p), 4);
        count[p[0] * 64 + p[1] * 16 + p[2] * 4 + p[3]]++;
    }
    int orders = 0;
    double chi = 0;
    for (int i = 0; i < 256; i++) {
        if (!count[i]) continue;
        orders++;
        chi += (count[i] - 400.0) * (count[i] - 400.0) / 400.0;
    }
    assert_int_equal(orders, 24);
    assert_true(chi < 49.7); /* 23 degrees of freedom, p = 0.001 */
    taas_sampler_free(s);
}

/* Loader j of L takes the items with k % L == j: together they draw every sample once. */
static void test_loader_sharding(void **state) {
    (void)state;
    const uint64_t n = 1003;
    taas_sampler *s = make(n, 10, 3, 77, 1, 0, 0);
    for (uint32_t loaders = 1; loaders <= 5; loaders++) {
        int *seen = calloc(n, sizeof *seen);
        uint64_t idx[10];
        for (uint32_t j = 0; j < loaders; j++)
            for (uint64_t k = j; k < taas_sampler_items(s); k += loaders) {
                size_t got = taas_sampler_item(s, 2, k, idx);
                for (size_t i = 0; i < got; i++) seen[idx[i]]++;
            }
        for (uint64_t i = 0; i < n; i++) assert_int_equal(seen[i], 1);
        free(seen);
    }
    taas_sampler_free(s);
}

/* units counts samples in (epoch, k) order across epochs and cuts exactly. */
static void check_units(uint64_t n, uint32_t b, uint32_t w, int drop_last, uint64_t units) {
    taas_sampler *s = make(n, b, w, 5, 1, drop_last, units);
    taas_sampler *all = make(n, b, w, 5, 1, drop_last, 0);
    uint64_t total = 0, *idx = malloc(b * sizeof *idx), *ref = malloc(b * sizeof *ref);
    uint64_t e = 0;
    for (; !taas_sampler_done(s, e); e++) {
        assert_true(e < 1000);
        for (uint64_t k = 0; k < taas_sampler_items(s); k++) {
            size_t got = taas_sampler_item(s, e, k, idx);
            size_t full = taas_sampler_item(all, e, k, ref);
            assert_true(got <= full);
            /* a cut item is the head of the full one */
            assert_memory_equal(idx, ref, got * sizeof *idx);
            if (got < full) assert_true(total + got == units);
            total += got;
        }
    }
    assert_int_equal(total, units);
    /* and nothing after: the next epochs are done, no item of them draws */
    assert_true(taas_sampler_done(s, e + 1));
    assert_int_equal(taas_sampler_item(s, e, 0, idx), 0);
    free(idx);
    free(ref);
    taas_sampler_free(s);
    taas_sampler_free(all);
}

static void test_units_stop_exactly(void **state) {
    (void)state;
    check_units(100, 10, 1, 0, 100);   /* one whole epoch */
    check_units(100, 10, 1, 0, 35);    /* mid-batch, mid-epoch */
    check_units(100, 10, 1, 0, 250);   /* mid-epoch of the third */
    check_units(103, 10, 2, 0, 211);   /* short last items, cut in epoch 2's middle */
    check_units(103, 10, 2, 1, 199);   /* drop_last: 100 per epoch */
    check_units(103, 10, 2, 1, 200);   /* exactly two epochs */
    check_units(7, 3, 4, 0, 1);        /* a single sample */
    check_units(60000, 64, 8, 0, 123457);
    taas_sampler *s = make(100, 10, 1, 1, 0, 0, 35);
    assert_false(taas_sampler_done(s, 0));
    assert_true(taas_sampler_done(s, 1));
    uint64_t idx[10];
    assert_int_equal(taas_sampler_item(s, 0, 3, idx), 5);
    assert_int_equal(taas_sampler_item(s, 0, 4, idx), 0);
    taas_sampler_free(s);
}

static void expect_error(uint64_t size, uint32_t batch, uint32_t world, int shuffle, int drop_last, const char *msg,
                         const char *hint) {
    taas_sampler_cfg cfg = {size, batch, world, 0, shuffle, drop_last, 0};
    taas_error err;
    taas_error_clear(&err);
    assert_null(taas_sampler_new(&cfg, &err));
    assert_string_equal(err.ename, "TaasValueError");
    if (!strstr(err.message, msg)) fail_msg("message '%s' lacks '%s'", err.message, msg);
    if (!strstr(err.hint, hint)) fail_msg("hint '%s' lacks '%s'", err.hint, hint);
}

static void test_errors(void **state) {
    (void)state;
    expect_error(0, 64, 1, 0, 0, "the dataset has no samples", "check the dataset's files");
    expect_error(100, 0, 1, 0, 0, "batch_size must be at least 1, got 0", "batch_size=64");
    expect_error(100, 8, 0, 0, 0, "the number of ranks must be at least 1, got 0", "world = 1");
    expect_error(100, 64, 2, 0, 1,
                 "drop_last=True leaves no batch: 100 samples are fewer than one step of batch_size 64 x 2 ranks = 128",
                 "drop_last=False");
    expect_error((1ull << 32) + 2, 64, 1, 1, 0, "shuffle=True supports at most 4294967296 samples", "shuffle=False");
}

/* Threads asking for items of several epochs at once get what one thread gets. */
typedef struct worker_arg {
    taas_sampler *s;
    int id;
    uint64_t *out; /* epochs x n */
} worker_arg;

enum { T_N = 2000, T_B = 50, T_EPOCHS = 6 };

static void *worker(void *p) {
    worker_arg *a = p;
    uint64_t items = taas_sampler_items(a->s);
    for (uint64_t round = 0; round < items * T_EPOCHS; round++) {
        uint64_t e = (round + (uint64_t)a->id) % T_EPOCHS, k = (round / T_EPOCHS + (uint64_t)a->id * 7) % items;
        taas_sampler_item(a->s, e, k, a->out + e * T_N + k * T_B);
    }
    return NULL;
}

static void test_concurrent_use(void **state) {
    (void)state;
    taas_sampler *s = make(T_N, T_B, 1, 11, 1, 0, 0), *ref = make(T_N, T_B, 1, 11, 1, 0, 0);
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){s, i, calloc(T_EPOCHS * T_N, sizeof(uint64_t))};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    uint64_t *want = malloc(T_N * sizeof *want);
    for (uint64_t e = 0; e < T_EPOCHS; e++) {
        taas_sampler_item(ref, e, 0, want); /* items are [k*B, (k+1)*B) of one permutation */
        for (uint64_t k = 1; k < T_N / T_B; k++) taas_sampler_item(ref, e, k, want + k * T_B);
        for (int i = 0; i < 4; i++) assert_memory_equal(args[i].out + e * T_N, want, T_N * sizeof *want);
    }
    for (int i = 0; i < 4; i++) free(args[i].out);
    free(want);
    taas_sampler_free(s);
    taas_sampler_free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_rng_streams),
        cmocka_unit_test(test_rng_below_unbiased),
        cmocka_unit_test(test_every_index_once),
        cmocka_unit_test(test_permutation_per_seed_and_epoch),
        cmocka_unit_test(test_permutation_uniform),
        cmocka_unit_test(test_loader_sharding),
        cmocka_unit_test(test_units_stop_exactly),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_concurrent_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
