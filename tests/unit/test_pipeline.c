/* dataloader/pipeline.c and batch.c on real datasets: the Fashion-MNIST test split that Debian's
 * dataset-fashion-mnist installs, and WebDataset shards written here with libpng. Order,
 * exactly-once, determinism over threads and loaders, units, back-pressure, cancellation,
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "clock.h"
#include "pipeline.h"
#include "pipeline_testutil.h"

/* ---- tests ------------------------------------------------------------------------------- */

/* One loader, two epochs: batches in (epoch, k) order, every index once per epoch, and the
 * pixels and labels those of the dataset through the transform. */
static void test_fashion_mnist_epochs(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist(AUGMENT, &t);
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_int_equal(info->size, 10000);
    taas_sampler *s = sampler(10000, 64, 1, 1, 0);
    taas_pipeline *p = start(d, t, s, 2, 0, 1, 2, 4);
    run r = {0};
    drain(p, &r);
    assert_int_equal(r.n, 2 * 157);
    int *seen = calloc(2 * 10000, sizeof *seen);
    for (size_t i = 0; i < r.n; i++) {
        taas_batch *b = r.b[i];
        assert_int_equal(b->epoch, i / 157);
        assert_int_equal(b->k, i % 157);
        assert_int_equal(b->n, b->k == 156 ? 10000 - 156 * 64 : 64);
        assert_true(b->c == 1 && b->h == 28 && b->w == 28);
        assert_int_equal((uintptr_t)b->buf % 64, 0);
        assert_int_equal((uintptr_t)b->images % 64, 0);
        assert_int_equal((uintptr_t)b->labels % 64, 0);
        assert_int_equal((uintptr_t)b->indices % 64, 0);
        assert_true((char *)b->indices + b->n * 8 == (char *)b->buf + b->buf_len);
        for (uint32_t j = 0; j < b->n; j++) seen[b->epoch * 10000 + b->indices[j]]++;
    }
    for (int i = 0; i < 2 * 10000; i++) assert_int_equal(seen[i], 1);
    /* a few samples recomputed one by one */
    for (size_t i = 0; i < r.n; i += 41) {
        taas_batch *b = r.b[i];
        for (uint32_t j = 0; j < b->n; j += 13) {
            taas_image img;
            int64_t label;
            float want[784];
            taas_error err;
            assert_int_equal(taas_dataset_get(d, b->indices[j], &img, &label, &err), 0);
            assert_int_equal(label, b->labels[j]);
            assert_true(label >= 0 && label < 10);
            assert_int_equal(taas_transform_apply(t, &img, 99, b->epoch, b->indices[j], want, &err), 0);
            assert_memory_equal(want, b->images + j * 784, sizeof want);
        }
    }
    taas_pipeline_stats st;
    taas_pipeline_stats_get(p, &st);
    assert_int_equal(st.batches, r.n);
    assert_int_equal(st.samples, 20000);
    assert_int_equal(st.skipped, 0);
    free(seen);
    run_free(&r);
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

/* The same (seed, epoch) gives byte-identical batches with 1, 2 or 4 threads, and with 1 or 3
 * loaders sharing the items (merged by k). */
static void test_determinism(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist(AUGMENT, &t);
    taas_sampler *s = sampler(10000, 100, 2, 1, 0); /* 2 ranks: items k = step * 2 + rank */
    run ref = {0};
    taas_pipeline *p = start(d, t, s, 2, 0, 1, 1, 3);
    drain(p, &ref);
    taas_pipeline_free(p);
    assert_int_equal(ref.n, 200);
    for (int threads = 2; threads <= 4; threads += 2) {
        run r = {0};
        p = start(d, t, s, 2, 0, 1, threads, 2 * threads);
        drain(p, &r);
        taas_pipeline_free(p);
        assert_int_equal(r.n, ref.n);
        assert_same_batches(ref.b, r.b, r.n);
        run_free(&r);
    }
    /* three loaders, each with its own sampler (another process would have one) */
    run part[3] = {{0}};
    for (uint32_t j = 0; j < 3; j++) {
        taas_sampler *sj = sampler(10000, 100, 2, 1, 0);
        p = start(d, t, sj, 2, j, 3, 2, 3);
        drain(p, &part[j]);
        taas_pipeline_free(p);
        taas_sampler_free(sj);
        for (size_t i = 0; i < part[j].n; i++) assert_int_equal(part[j].b[i]->k % 3, j);
    }
    assert_int_equal(part[0].n + part[1].n + part[2].n, ref.n);
    size_t at[3] = {0, 0, 0};
    for (size_t i = 0; i < ref.n; i++) {
        uint32_t j = (uint32_t)(ref.b[i]->k % 3);
        assert_true(at[j] < part[j].n);
        assert_same_batches(&ref.b[i], &part[j].b[at[j]++], 1);
    }
    /* another seed changes the augmentation, not the sample order */
    taas_pipeline_cfg c = {d, t, s, 100, 0, 1, 0, 1, NULL, 0, 2, 2};
    taas_error err;
    p = taas_pipeline_new(&c, &err);
    assert_non_null(p);
    taas_batch *b;
    assert_int_equal(taas_pipeline_next(p, &b, &err), 0);
    assert_memory_equal(b->indices, ref.b[0]->indices, b->n * sizeof *b->indices);
    assert_memory_not_equal(b->images, ref.b[0]->images, b->n * 784 * sizeof(float));
    taas_batch_free(b);
    taas_pipeline_free(p);
    for (int j = 0; j < 3; j++) run_free(&part[j]);
    run_free(&ref);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

/* units stops the batches exactly, mid-batch and mid-epoch; empty items are skipped. */
static void test_units_and_empty_items(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist("null", &t);
    const uint64_t cuts[] = {1, 64, 1000, 10000, 12345, 25001};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        for (uint32_t loaders = 1; loaders <= 2; loaders++) {
            uint64_t total = 0, last_epoch = 0;
            for (uint32_t j = 0; j < loaders; j++) {
                taas_sampler *s = sampler(10000, 64, 4, 1, cuts[c]);
                taas_pipeline *p = start(d, t, s, 0, j, loaders, 3, 4); /* no epoch limit: units end it */
                run r = {0};
                drain(p, &r);
                for (size_t i = 0; i < r.n; i++) {
                    assert_true(r.b[i]->n > 0);
                    total += r.b[i]->n;
                    if (r.b[i]->epoch > last_epoch) last_epoch = r.b[i]->epoch;
                }
                run_free(&r);
                taas_pipeline_free(p);
                taas_sampler_free(s);
            }
            assert_int_equal(total, cuts[c]);
            assert_int_equal(last_epoch, (cuts[c] - 1) / 10000);
        }
    }
    /* 10000 samples in steps of 4 x 64 = 256: the last step has 16, so ranks 1-3 get nothing */
    taas_sampler *s = sampler(10000, 64, 4, 0, 0);
    taas_pipeline *p = start(d, t, s, 1, 0, 1, 2, 4);
    run r = {0};
    drain(p, &r);
    taas_pipeline_stats st;
    taas_pipeline_stats_get(p, &st);
    assert_int_equal(st.skipped, 3);
    assert_int_equal(r.n, 157);
    assert_int_equal(r.b[r.n - 1]->n, 16);
    assert_int_equal(r.b[r.n - 1]->k, 156);
    run_free(&r);
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

/* A replacement loader takes exactly the given items of its first epoch, then its share. */
static void test_only_items(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist("null", &t);
    taas_sampler *s = sampler(10000, 500, 1, 1, 0); /* 20 items per epoch */
    const uint64_t only[] = {17, 3, 9};
    taas_pipeline_cfg c = {d, t, s, 5, 4, 2, 1, 2, only, 3, 2, 2};
    taas_error err;
    taas_pipeline *p = taas_pipeline_new(&c, &err);
    assert_non_null(p);
    run r = {0};
    drain(p, &r);
    const uint64_t want_k[] = {3, 9, 17, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19};
    assert_int_equal(r.n, 13);
    for (size_t i = 0; i < r.n; i++) {
        assert_int_equal(r.b[i]->epoch, i < 3 ? 4 : 5);
        assert_int_equal(r.b[i]->k, want_k[i]);
    }
    run_free(&r);
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A slow consumer: the pipeline stops at queue_depth batches and sleeps on its condition
 * variables (no CPU) until the consumer takes one. */
static void test_back_pressure(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist(AUGMENT, &t);
    taas_sampler *s = sampler(10000, 32, 1, 1, 0);
    const int threads = 4, depth = 3;
    taas_pipeline *p = start(d, t, s, 0, 0, 1, threads, depth);
    taas_error err;
    taas_batch *b;
    assert_int_equal(taas_pipeline_next(p, &b, &err), 0);
    taas_batch_free(b);
    sleep_s(0.5); /* the window fills long before this */
    double c0 = cpu_now();
    sleep_s(0.4);
    double idle = cpu_now() - c0;
    assert_true(idle < 0.05); /* waiting, not spinning */
    for (int i = 0; i < 12; i++) {
        assert_int_equal(taas_pipeline_next(p, &b, &err), 0);
        sleep_s(0.02); /* the consumer holds one batch while it works */
        taas_batch_free(b);
    }
    taas_pipeline_stats st;
    taas_pipeline_stats_get(p, &st);
    assert_true(st.max_alive >= 1);
    assert_true(st.max_alive <= (unsigned)depth);
    assert_true(st.max_alive + 1 <= (unsigned)(depth + threads)); /* with the one the consumer holds */
    assert_int_equal(st.batches, 13);
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

/* Freeing a pipeline stops its threads between two samples, not at the end of a batch. */
static void test_cancel_mid_batch(void **state) {
    (void)state;
    /* up to 1200 x 1200 and back down: a few ms per sample, a whole batch of 64 takes long */
    const char *slow = "{\"type\":\"Compose\",\"transforms\":[{\"type\":\"Resize\",\"size\":[1200,1200],"
                       "\"interpolation\":\"bilinear\",\"max_size\":null,\"antialias\":null},{\"type\":\"Resize\","
                       "\"size\":[28,28],\"interpolation\":\"bilinear\",\"max_size\":null,\"antialias\":null}]}";
    taas_transform *t;
    taas_dataset *d = fmnist(slow, &t);
    taas_image img;
    int64_t label;
    float out[784];
    taas_error err;
    assert_int_equal(taas_dataset_get(d, 0, &img, &label, &err), 0);
    double t0 = taas_now();
    assert_int_equal(taas_transform_apply(t, &img, 0, 0, 0, out, &err), 0);
    double per_sample = taas_now() - t0, per_batch = 64 * per_sample;
    taas_sampler *s = sampler(10000, 64, 1, 1, 0);
    taas_pipeline *p = start(d, t, s, 1, 0, 1, 2, 2);
    sleep_s(per_sample * 8); /* both threads are inside their first batch */
    t0 = taas_now();
    taas_pipeline_free(p);
    double took = taas_now() - t0;
    if (took > per_batch / 4)
        fail_msg("free took %.3f s; a sample takes %.4f s, a batch %.3f s", took, per_sample, per_batch);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

/* A sample that fails to decode: the batches before it come out, then its error with the
 * sample index and the shard and member, again on every later call. */
static void test_decode_error(void **state) {
    (void)state;
    const char *path = write_shard("broken.tar", 20, 1, 13);
    taas_transform *t;
    taas_dataset *d = webdataset(path, "null", &t);
    taas_sampler *s = sampler(20, 4, 1, 0, 0);
    taas_pipeline *p = start(d, t, s, 1, 0, 1, 3, 2);
    taas_batch *b;
    taas_error err;
    for (uint64_t k = 0; k < 3; k++) {
        assert_int_equal(taas_pipeline_next(p, &b, &err), 0);
        assert_int_equal(b->k, k);
        for (uint32_t j = 0; j < b->n; j++) {
            assert_int_equal(b->labels[j], (int64_t)((k * 4 + j) % 10));
            assert_true(b->images[j * 64] == (float)(k * 4 + j) / 255.0f);
        }
        taas_batch_free(b);
    }
    for (int again = 0; again < 2; again++) {
        taas_error_clear(&err);
        assert_int_equal(taas_pipeline_next(p, &b, &err), -1);
        assert_null(b);
        if (!strstr(err.message, "sample 13 (") || !strstr(err.message, "broken.tar") ||
            !strstr(err.message, "000013.png"))
            fail_msg("the error does not name sample 13 and its member: %s", err.message);
    }
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

/* Samples of several sizes: a clear error without a Resize, batches with one. */
static void test_sample_shapes(void **state) {
    (void)state;
    const char *path = write_shard("sizes.tar", 12, 3, -1);
    taas_transform *t;
    taas_dataset *d = webdataset(path, "null", &t);
    taas_sampler *s = sampler(12, 4, 1, 0, 0);
    taas_pipeline *p = start(d, t, s, 1, 0, 1, 1, 1);
    taas_batch *b;
    taas_error err;
    assert_int_equal(taas_pipeline_next(p, &b, &err), -1);
    if (!strstr(err.message, "sample 1 (") ||
        !strstr(err.message, "its image of 9x8 with 1 channel comes out of the transforms as 1x9x8, but the "
                             "batch's samples are 1x8x8"))
        fail_msg("message: %s", err.message);
    assert_non_null(strstr(err.hint, "Resize((h, w))"));
    taas_pipeline_free(p);
    taas_transform_free(t);
    taas_dataset_free(d);
    d = webdataset(path, "{\"type\":\"Resize\",\"size\":[6,5],\"interpolation\":\"bilinear\",\"max_size\":null,"
                         "\"antialias\":null}", &t);
    p = start(d, t, s, 1, 0, 1, 2, 2);
    run r = {0};
    drain(p, &r);
    assert_int_equal(r.n, 3);
    for (size_t i = 0; i < r.n; i++) assert_true(r.b[i]->c == 1 && r.b[i]->h == 6 && r.b[i]->w == 5);
    run_free(&r);
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

static void expect_cfg_error(taas_pipeline_cfg c, const char *msg, const char *hint) {
    taas_error err;
    taas_error_clear(&err);
    taas_pipeline *p = taas_pipeline_new(&c, &err);
    if (p) fail_msg("accepted a config that should fail with '%s'", msg);
    if (!strstr(err.message, msg)) fail_msg("message '%s' lacks '%s'", err.message, msg);
    if (!strstr(err.hint, hint)) fail_msg("hint '%s' lacks '%s'", err.hint, hint);
}

static void test_config_errors(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist("null", &t);
    taas_sampler *s = sampler(10000, 500, 1, 0, 0);
    taas_pipeline_cfg ok = {d, t, s, 0, 0, 1, 0, 1, NULL, 0, 2, 2}, c;
    c = ok, c.threads = 0;
    expect_cfg_error(c, "pipeline: threads must be between 1 and 1024, got 0", "num_workers");
    c = ok, c.queue_depth = 0;
    expect_cfg_error(c, "pipeline: queue_depth must be between 1 and 65536, got 0", "prefetch_factor");
    c = ok, c.loader = 3, c.loaders = 3;
    expect_cfg_error(c, "pipeline: loader 3 of 3 does not exist", "loader < loaders");
    const uint64_t beyond[] = {2, 20}, twice[] = {4, 1, 4};
    c = ok, c.only_items = beyond, c.n_only = 2;
    expect_cfg_error(c, "only_items names item 20, but an epoch has 20 items (0 to 19)", "same sampler");
    c = ok, c.only_items = twice, c.n_only = 3;
    expect_cfg_error(c, "only_items names item 4 twice", "remove the duplicate");
    json_t *rgb_spec = spec_of("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"ToTensor\"},{\"type\":"
                               "\"Normalize\",\"mean\":[0.5,0.5,0.5],\"std\":[0.2,0.2,0.2]}]}");
    taas_error err;
    taas_transform *rgb = taas_transform_new(rgb_spec, &err);
    json_decref(rgb_spec);
    assert_non_null(rgb);
    c = ok, c.transform = rgb;
    expect_cfg_error(c, "FashionMNIST's samples (28x28, 1 channel): Normalize (transform 2 of 2) has 3 mean values "
                        "for a tensor of 1 channel", "one value for all");
    taas_transform_free(rgb);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

static void test_batch_view(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist("null", &t);
    taas_sampler *s = sampler(10000, 10, 1, 1, 0);
    taas_pipeline *p = start(d, t, s, 1, 0, 1, 1, 1);
    taas_batch *b, v;
    taas_error err;
    assert_int_equal(taas_pipeline_next(p, &b, &err), 0);
    /* a copy, as a receiver has it */
    void *copy = aligned_alloc(64, (b->buf_len + 63) / 64 * 64);
    memcpy(copy, b->buf, b->buf_len);
    assert_int_equal(taas_batch_view(copy, b->buf_len, &v, &err), 0);
    assert_true(v.epoch == b->epoch && v.k == b->k && v.n == 10 && v.c == 1 && v.h == 28 && v.w == 28);
    assert_memory_equal(v.images, b->images, 10 * 784 * sizeof(float));
    assert_memory_equal(v.labels, b->labels, 10 * sizeof(int64_t));
    assert_memory_equal(v.indices, b->indices, 10 * sizeof(uint64_t));
    assert_int_equal(taas_batch_view(copy, 40, &v, &err), -1);
    assert_string_equal(err.message, "a batch of 40 bytes is shorter than its 64-byte header");
    assert_int_equal(taas_batch_view(copy, b->buf_len - 1, &v, &err), -1);
    assert_non_null(strstr(err.message, "a batch of 10 samples of 1x28x28 should be"));
    assert_non_null(strstr(err.hint, "the message was cut"));
    ((char *)copy)[0] = 'X';
    assert_int_equal(taas_batch_view(copy, b->buf_len, &v, &err), -1);
    assert_string_equal(err.message, "not a batch: the header does not start with TAASBT01");
    free(copy);
    taas_batch_free(b);
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

/* ---- batch buffers reused ---------------------------------------------------------------- */

/* A pool gives a freed buffer to the next batch of its size: the header rewritten, the gaps
 * zeroed again. A batch of another size gets a buffer of its own, and an idle one that does
 * not fit goes: never more buffers than batches were out at once. */
static void test_batch_pool(void **state) {
    (void)state;
    taas_batch_pool *pool = taas_batch_pool_new();
    assert_non_null(pool);
    taas_batch *a = taas_batch_alloc_pooled(pool, 0, 1, 3, 1, 5, 5), *b = taas_batch_alloc_pooled(pool, 0, 2, 3, 1, 5, 5);
    taas_batch *c = taas_batch_alloc_pooled(pool, 0, 3, 3, 1, 5, 5);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    void *bufs[3] = {a->buf, b->buf, c->buf};
    assert_true(bufs[0] != bufs[1] && bufs[1] != bufs[2] && bufs[0] != bufs[2]);
    memset(a->buf, 0xEE, a->buf_len); /* dirty, gaps included */
    taas_batch_free(a);
    taas_batch_free(b);
    taas_batch_free(c);
    assert_int_equal(taas_batch_pool_idle(pool), 3);
    assert_int_equal(taas_batch_pool_allocated(pool), 3);
    taas_batch *d = taas_batch_alloc_pooled(pool, 7, 9, 3, 1, 5, 5);
    assert_non_null(d);
    assert_true(d->buf == bufs[2]); /* the last one back: the warmest */
    assert_int_equal(taas_batch_pool_idle(pool), 2);
    assert_true(d->epoch == 7 && d->k == 9 && d->n == 3 && d->c == 1 && d->h == 5 && d->w == 5);
    /* the same bytes as a fresh batch's, outside the payload that the pipeline writes */
    taas_batch *fresh = taas_batch_alloc(7, 9, 3, 1, 5, 5);
    assert_int_equal(fresh->buf_len, d->buf_len);
    size_t img = (size_t)((char *)d->images - (char *)d->buf), lab = (size_t)((char *)d->labels - (char *)d->buf);
    size_t idx = (size_t)((char *)d->indices - (char *)d->buf);
    assert_memory_equal(d->buf, fresh->buf, img);
    assert_memory_equal((char *)d->buf + img + 75 * sizeof(float), (char *)fresh->buf + img + 75 * sizeof(float),
                        lab - img - 75 * sizeof(float));
    assert_memory_equal((char *)d->buf + lab + 3 * sizeof(int64_t), (char *)fresh->buf + lab + 3 * sizeof(int64_t),
                        idx - lab - 3 * sizeof(int64_t));
    taas_batch_free(fresh);
    /* a batch of another size gets a buffer of its own */
    taas_batch *e = taas_batch_alloc_pooled(pool, 0, 4, 64, 3, 32, 32);
    assert_non_null(e);
    assert_true(e->buf != bufs[0] && e->buf != bufs[1] && e->buf != bufs[2]);
    assert_int_equal(taas_batch_pool_allocated(pool), 4);
    assert_int_equal(taas_batch_pool_idle(pool), 1); /* the oldest small one went */
    e->images[64 * 3 * 32 * 32 - 1] = 1.0f;          /* all of it is there (ASan) */
    /* the owner lets go while batches are out: they still free cleanly (ASan) */
    taas_batch_pool_release(pool);
    taas_batch_free(d);
    taas_batch_free(e);
}

static void *free_elsewhere(void *b) {
    taas_batch_free(b); /* as ZeroMQ's I/O thread frees a sent batch */
    return NULL;
}

/* Through a pipeline: the buffers of the batches the consumer frees are reused, so one epoch
 * of 313 batches allocates no more than were alive at once (the window, the one the consumer
 * holds, and the short last batch of another size). Batches freed on other threads, and
 * batches that outlive the pipeline, come back or go cleanly. */
static void test_pipeline_reuses_buffers(void **state) {
    (void)state;
    taas_transform *t;
    taas_dataset *d = fmnist(AUGMENT, &t);
    taas_sampler *s = sampler(10000, 32, 1, 1, 0);
    const int threads = 2, depth = 3;
    taas_pipeline *p = start(d, t, s, 1, 0, 1, threads, depth);
    taas_error err;
    taas_batch *b;
    pthread_t th[2];
    int pending = 0, rc;
    uint64_t n = 0;
    while ((rc = taas_pipeline_next(p, &b, &err)) == 0) {
        n++;
        if (n % 2) {
            taas_batch_free(b);
            continue;
        }
        if (pending == 2) {
            pthread_join(th[0], NULL);
            th[0] = th[1];
            pending--;
        }
        assert_int_equal(pthread_create(&th[pending++], NULL, free_elsewhere, b), 0);
    }
    assert_int_equal(rc, 1);
    for (int i = 0; i < pending; i++) pthread_join(th[i], NULL);
    taas_pipeline_stats st;
    taas_pipeline_stats_get(p, &st);
    assert_int_equal(st.batches, 313);
    printf("313 batches, %llu buffers\n", (unsigned long long)st.buffers);
    assert_true(st.buffers <= (uint64_t)depth + 1 + 2 + 1); /* + the two on the freeing threads */
    taas_pipeline_free(p);
    /* one that outlives its pipeline */
    p = start(d, t, s, 1, 0, 1, threads, depth);
    assert_int_equal(taas_pipeline_next(p, &b, &err), 0);
    taas_pipeline_free(p);
    b->images[b->n * b->c * b->h * b->w - 1] = 0.5f;
    taas_batch_free(b);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fashion_mnist_epochs),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_units_and_empty_items),
        cmocka_unit_test(test_only_items),
        cmocka_unit_test(test_back_pressure),
        cmocka_unit_test(test_cancel_mid_batch),
        cmocka_unit_test(test_decode_error),
        cmocka_unit_test(test_sample_shapes),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_batch_view),
        cmocka_unit_test(test_batch_pool),
        cmocka_unit_test(test_pipeline_reuses_buffers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
