/* Helpers of test_pipeline.c: real datasets (Debian's Fashion-MNIST, WebDataset shards
 * written with libpng and a small tar writer) and running pipelines to the end. Header-only
 * (static functions); include it after <cmocka.h>. */
#ifndef TAAS_PIPELINE_TESTUTIL_H
#define TAAS_PIPELINE_TESTUTIL_H

#include <ftw.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline.h"

#define FMNIST_ROOT "/usr/share/datasets/fashion-mnist"

static taas_fetcher *FETCH;
static char TMP[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int setup(void **state) {
    (void)state;
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = "";
    taas_error err;
    taas_error_clear(&err);
    FETCH = taas_fetcher_new(&o, &err);
    if (!FETCH) fprintf(stderr, "fetcher: %s\n", err.message);
    const char *t = getenv("TMPDIR");
    snprintf(TMP, sizeof TMP, "%s/taas-pipeline-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(TMP)) return -1;
    return FETCH ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    taas_fetcher_free(FETCH);
    nftw(TMP, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- datasets ------------------------------------------------------------------------- */

static json_t *spec_of(const char *text) {
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) fail_msg("bad spec %s: %s", text, je.text);
    return j;
}

/* FashionMNIST(root=Debian's, train=False, transform=<transform>) and its transform. */
static taas_dataset *fmnist(const char *transform, taas_transform **t) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"type\":\"FashionMNIST\",\"root\":\"" FMNIST_ROOT "\",\"train\":false,\"transform\":%s,"
             "\"target_transform\":null,\"download\":false}", transform);
    json_t *spec = spec_of(text);
    taas_error err;
    taas_error_clear(&err);
    taas_dataset *d = taas_dataset_open(spec, FETCH, &err);
    if (!d) fail_msg("FashionMNIST: %s (%s)", err.message, err.hint);
    *t = taas_transform_new(json_object_get(spec, "transform"), &err);
    if (!*t) fail_msg("transform: %s", err.message);
    json_decref(spec);
    return d;
}

#define AUGMENT "{\"type\":\"Compose\",\"transforms\":[{\"type\":\"RandomCrop\",\"size\":[28,28],\"padding\":4," \
                "\"pad_if_needed\":false,\"fill\":0,\"padding_mode\":\"constant\"},{\"type\":\"RandomHorizontalFlip\"," \
                "\"p\":0.5},{\"type\":\"ToTensor\"},{\"type\":\"Normalize\",\"mean\":[0.286],\"std\":[0.353]," \
                "\"inplace\":false}]}"

/* A tar member: ustar header, data, padding to 512. */
static void tar_add(FILE *f, const char *name, const void *data, size_t n) {
    unsigned char h[512];
    memset(h, 0, sizeof h);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011o", (unsigned)n);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    fwrite(h, 1, 512, f);
    fwrite(data, 1, n, f);
    static const unsigned char zero[512];
    fwrite(zero, 1, (512 - n % 512) % 512, f);
}

/* A shard of n grey PNG samples, sample i of (8 + i % sizes) x 8 pixels with value i and label
 * i % 10; the sample `corrupt` (or none: -1) gets a broken PNG. */
static const char *write_shard(const char *name, int n, int sizes, int corrupt) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", TMP, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < n; i++) {
        int h = 8 + i % sizes, w = 8;
        unsigned char px[16 * 8];
        memset(px, i, sizeof px);
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        im.width = (png_uint_32)w;
        im.height = (png_uint_32)h;
        im.format = PNG_FORMAT_GRAY;
        size_t len = 0;
        assert_true(png_image_write_to_memory(&im, NULL, &len, 0, px, 0, NULL));
        unsigned char *png = malloc(len);
        assert_true(png_image_write_to_memory(&im, png, &len, 0, px, 0, NULL));
        if (i == corrupt) memset(png + 16, 0xAB, len - 20); /* keeps the signature, breaks the rest */
        char member[64], cls[16];
        snprintf(member, sizeof member, "%06d.png", i);
        tar_add(f, member, png, len);
        snprintf(member, sizeof member, "%06d.cls", i);
        snprintf(cls, sizeof cls, "%d", i % 10);
        tar_add(f, member, cls, strlen(cls));
        free(png);
    }
    static const unsigned char end[1024];
    fwrite(end, 1, sizeof end, f);
    fclose(f);
    return path;
}

static taas_dataset *webdataset(const char *path, const char *transform, taas_transform **t) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"type\":\"WebDataset\",\"urls\":\"%s\",\"transform\":%s,\"image_key\":\"png\",\"label_key\":\"cls\","
             "\"length\":null}", path, transform);
    json_t *spec = spec_of(text);
    taas_error err;
    taas_error_clear(&err);
    taas_dataset *d = taas_dataset_open(spec, FETCH, &err);
    if (!d) fail_msg("WebDataset: %s (%s)", err.message, err.hint);
    *t = taas_transform_new(json_object_get(spec, "transform"), &err);
    if (!*t) fail_msg("transform: %s", err.message);
    json_decref(spec);
    return d;
}

/* ---- running a pipeline ---------------------------------------------------------------- */

static taas_sampler *sampler(uint64_t size, uint32_t batch, uint32_t world, int shuffle, uint64_t units) {
    taas_sampler_cfg c = {size, batch, world, 1234, shuffle, 0, units};
    taas_error err;
    taas_error_clear(&err);
    taas_sampler *s = taas_sampler_new(&c, &err);
    if (!s) fail_msg("sampler: %s", err.message);
    return s;
}

static taas_pipeline *start(taas_dataset *d, taas_transform *t, taas_sampler *s, uint64_t epochs, uint32_t loader,
                            uint32_t loaders, int threads, int depth) {
    taas_pipeline_cfg c = {d, t, s, 99, 0, epochs, loader, loaders, NULL, 0, threads, depth};
    taas_error err;
    taas_error_clear(&err);
    taas_pipeline *p = taas_pipeline_new(&c, &err);
    if (!p) fail_msg("pipeline: %s (%s)", err.message, err.hint);
    return p;
}

typedef struct run {
    taas_batch **b;
    size_t n, cap;
} run;

static void drain(taas_pipeline *p, run *r) {
    taas_error err;
    taas_batch *b;
    int rc;
    while ((rc = taas_pipeline_next(p, &b, &err)) == 0) {
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 64;
            r->b = realloc(r->b, r->cap * sizeof *r->b);
        }
        r->b[r->n++] = b;
    }
    if (rc < 0) fail_msg("pipeline_next: %s", err.message);
    assert_int_equal(rc, 1);
    assert_int_equal(taas_pipeline_next(p, &b, &err), 1); /* the end stays the end */
}

static void run_free(run *r) {
    for (size_t i = 0; i < r->n; i++) taas_batch_free(r->b[i]);
    free(r->b);
    memset(r, 0, sizeof *r);
}

static void assert_same_batches(taas_batch *const *a, taas_batch *const *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(a[i]->epoch, b[i]->epoch);
        assert_int_equal(a[i]->k, b[i]->k);
        assert_int_equal(a[i]->buf_len, b[i]->buf_len);
        assert_memory_equal(a[i]->buf, b[i]->buf, a[i]->buf_len);
    }
}

#endif
