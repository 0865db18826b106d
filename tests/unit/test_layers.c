/* Layers against PyTorch references (the JSON files in tests/data/layers, made by tests/gen_layer_ref.py).
 * Tolerance: max|got - ref| / max(1, max|ref|) <= 1e-4 per array, i.e. 1e-4 absolute for
 * values of order 1 and 1e-4 relative to the largest magnitude otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_direct.h"
#include "conv_winograd.h"
#include "init.h"
#include "layers.h"
#include "pool_bins.h"
#include "cpu_testutil.h"

#define TOL 1e-4

static const char *fixture = ""; /* names the failing fixture in messages */

static json_t *load(const char *name) {
    fixture = name;
    const char *src = getenv("TAAS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/layers/%s.json", src ? src : ".", name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fprintf(stderr, "cannot read %s: %s (set TAAS_SOURCE_DIR)\n", path, je.text);
    assert_non_null(j);
    return j;
}

static int cfg(json_t *j, const char *key) {
    json_t *v = json_object_get(j, key);
    assert_non_null(v);
    return (int)json_integer_value(v);
}

/* cfg(j, key), or dflt where the fixture leaves it out */
static int cfg_or(json_t *j, const char *key, int dflt) {
    return json_object_get(j, key) ? cfg(j, key) : dflt;
}

/* malloc'd copy of array `key`; *n gets its length */
static float *arr(json_t *j, const char *key, size_t *n) {
    json_t *a = json_object_get(j, key);
    if (!a) fprintf(stderr, "fixture lacks %s\n", key);
    assert_true(json_is_array(a));
    size_t len = json_array_size(a);
    float *out = malloc(sizeof(float) * (len ? len : 1));
    for (size_t i = 0; i < len; i++) out[i] = (float)json_number_value(json_array_get(a, i));
    if (n) *n = len;
    return out;
}

/* n floats pre-filled with `v` (to see that outputs are written, gradients accumulated) */
static float *filled(size_t n, float v) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

static void close_to(const char *what, const float *got, const float *ref, size_t n, float base) {
    double maxdiff = 0, maxref = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ((double)ref[i] + base));
        if (!(d <= maxdiff)) maxdiff = d; /* NaN propagates */
        if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
    }
    if (!(maxdiff / maxref <= TOL))
        fail_msg("%s.json, %s: max abs diff %g (scale %g) exceeds tolerance %g", fixture, what,
                 maxdiff, maxref, TOL);
}

static void expect(json_t *j, const char *key, const float *got, float base) {
    size_t n;
    float *ref = arr(j, key, &n);
    close_to(key, got, ref, n, base);
    free(ref);
}

static void test_linear(void **state) {
    (void)state;
    json_t *j = load("linear");
    int in = cfg(j, "in"), out = cfg(j, "out");
    size_t nx, ny;
    float *x = arr(j, "x", &nx), *w = arr(j, "weight", NULL), *b = arr(j, "bias", NULL);
    float *dy = arr(j, "dy", &ny);
    int n = (int)(nx / in);
    float *y = filled(ny, 7), *dx = filled(nx, 7);
    float *dw = filled((size_t)in * out, 1), *db = filled(out, 1);
    taas_linear_forward(y, x, w, b, n, in, out);
    expect(j, "y", y, 0);
    taas_linear_backward(dx, dw, db, dy, x, w, n, in, out);
    expect(j, "dx", dx, 0);
    expect(j, "dweight", dw, 1); /* accumulated onto 1 */
    expect(j, "dbias", db, 1);
    taas_linear_backward(NULL, dw, NULL, dy, x, w, n, in, out); /* accumulates once more */
    size_t nw;
    float *ref = arr(j, "dweight", &nw);
    for (size_t i = 0; i < nw; i++) ref[i] *= 2;
    close_to("dweight twice", dw, ref, nw, 1);
    free(ref);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    json_decref(j);
}

/* A fixture without "bias" is a convolution with bias=False: b and db are NULL. */
static void conv_case(const char *name, int nthreads) {
    json_t *j = load(name);
    taas_conv2d_shape s = {cfg(j, "n"), cfg(j, "c"), cfg(j, "h"), cfg(j, "w"), cfg(j, "oc"),
                           cfg(j, "kh"), cfg(j, "kw"), cfg(j, "sh"), cfg(j, "sw"),
                           cfg(j, "ph"), cfg(j, "pw"), cfg_or(j, "groups", 0)};
    taas_error e;
    taas_error_clear(&e);
    assert_int_equal(taas_conv2d_check(&s, &e), 0);
    int has_bias = json_object_get(j, "bias") != NULL;
    size_t nx, ny, nw;
    float *x = arr(j, "x", &nx), *w = arr(j, "weight", &nw), *b = has_bias ? arr(j, "bias", NULL) : NULL;
    float *dy = arr(j, "dy", &ny);
    assert_int_equal(ny, (size_t)s.n * s.oc * taas_conv2d_out_h(&s) * taas_conv2d_out_w(&s));
    assert_int_equal(nw, (size_t)s.oc * (s.c / taas_conv2d_groups(&s)) * s.kh * s.kw);
    float *scratch = filled(taas_conv2d_scratch_floats(&s, nthreads), 9);
    float *y = filled(ny, 7), *dx = filled(nx, 7), *dw = filled(nw, 1);
    float *db = has_bias ? filled(s.oc, 1) : NULL;
    taas_conv2d_forward(y, x, w, b, &s, scratch, nthreads);
    expect(j, "y", y, 0);
    taas_conv2d_backward(dx, dw, db, dy, x, w, &s, scratch, nthreads);
    expect(j, "dx", dx, 0);
    expect(j, "dweight", dw, 1);
    if (db) expect(j, "dbias", db, 1);
    /* first layer: no input gradient, parameter gradients unchanged */
    for (size_t i = 0; i < nw; i++) dw[i] = 0;
    for (int i = 0; db && i < s.oc; i++) db[i] = 0;
    taas_conv2d_backward(NULL, dw, db, dy, x, w, &s, scratch, nthreads);
    expect(j, "dweight", dw, 0);
    if (db) expect(j, "dbias", db, 0);
    /* fused with a ReLU: the same bits as the convolution, then ReLU and its backward */
    float *yr = filled(ny, 7), *dym = filled(ny, 0), *dxr = filled(nx, 7), *dwr = filled(nw, 0),
          *dbr = has_bias ? filled(s.oc, 0) : NULL;
    taas_conv2d_relu_forward(yr, x, w, b, &s, scratch, nthreads);
    for (size_t i = 0; i < ny; i++) {
        float r = y[i] > 0.0f ? y[i] : 0.0f;
        assert_memory_equal(&yr[i], &r, sizeof r);
        dym[i] = yr[i] > 0.0f ? dy[i] : 0.0f;
    }
    for (size_t i = 0; i < nw; i++) dw[i] = 0;
    for (int i = 0; db && i < s.oc; i++) db[i] = 0;
    taas_conv2d_backward(dx, dw, db, dym, x, w, &s, scratch, nthreads);
    taas_conv2d_relu_backward(dxr, dwr, dbr, dy, yr, x, w, &s, scratch, nthreads);
    assert_memory_equal(dxr, dx, nx * sizeof *dx);
    assert_memory_equal(dwr, dw, nw * sizeof *dw);
    if (db) assert_memory_equal(dbr, db, s.oc * sizeof *db);
    free(yr), free(dym), free(dxr), free(dwr), free(dbr);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db), free(scratch);
    json_decref(j);
}

static void test_conv2d(void **state) {
    (void)state;
    /* stride 1 runs the direct kernels on an AVX-512 or AVX2 CPU, and planes this small
     * several samples a product: every case each way (products of several samples; one
     * sample at a time with the direct kernels; one at a time with im2col) */
    for (int way = 0; way < 3; way++) {
        taas_conv2d_sample_products(way == 0);
        taas_conv_direct_enable(way < 2);
        conv_case("conv2d_basic", 1);
        conv_case("conv2d_basic", 2);
        conv_case("conv2d_strided", 2);
        conv_case("conv2d_strided", 5); /* more threads than samples */
        conv_case("conv2d_padded", 1);  /* channel, row and position tails; zero padding */
        conv_case("conv2d_padded", 2);
        conv_case("conv2d_1x1", 2); /* im2col: no copy, the image is the matrix */
        conv_case("conv2d_wide", 2);  /* OC past a tile of channels, whole transposed blocks */
    }
    taas_conv2d_sample_products(1);
    taas_conv_direct_enable(1);
}

/* Grouped convolutions: im2col and a product per group, with and without bias; the fused
 * ReLU too (conv_case). Stride 1 would take the direct kernels without groups. */
static void test_conv2d_groups(void **state) {
    (void)state;
    conv_case("conv2d_groups2", 1);
    conv_case("conv2d_groups2", 2);
    conv_case("conv2d_groups2_strided_nobias", 2);
    conv_case("conv2d_groups2_1x1", 2); /* each group's channels are its matrix */
    conv_case("conv2d_depthwise", 1);   /* groups = C, stride 2 */
    conv_case("conv2d_depthwise", 3);   /* more threads than samples */
    conv_case("conv2d_depthwise_x2_nobias", 2);
}

/* The same threads give the same bits, and a grouped convolution is its groups apart: each
 * group through an ungrouped convolution of its channels gives the same bits. */
static void test_conv2d_groups_are_convolutions_apart(void **state) {
    (void)state;
    enum { N = 3, C = 4, H = 6, W = 5, OC = 6, G = 2, K = 3 };
    taas_conv2d_shape s = {N, C, H, W, OC, K, K, 1, 1, 1, 1, G}, sg = {N, C / G, H, W, OC / G, K, K, 1, 1, 1, 1};
    int oh = taas_conv2d_out_h(&s), ow = taas_conv2d_out_w(&s);
    size_t nx = (size_t)N * C * H * W, ny = (size_t)N * OC * oh * ow, nw = (size_t)OC * (C / G) * K * K;
    float *x = filled(nx, 0), *w = filled(nw, 0), *b = filled(OC, 0), *y = filled(ny, 7);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (size_t i = 0; i < nw; i++) w[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
    for (int i = 0; i < OC; i++) b[i] = (float)i / 4.0f - 0.5f;
    float *scratch = filled(taas_conv2d_scratch_floats(&s, 2), 9);
    taas_conv2d_forward(y, x, w, b, &s, scratch, 2);
    size_t gin = (size_t)(C / G) * H * W, gout = (size_t)(OC / G) * oh * ow;
    float *xg = filled((size_t)N * gin, 0), *yg = filled((size_t)N * gout, 7);
    float *sc = filled(taas_conv2d_scratch_floats(&sg, 2), 9);
    for (int g = 0; g < G; g++) {
        for (int n = 0; n < N; n++) memcpy(xg + n * gin, x + n * C * H * W + g * gin, gin * sizeof *x);
        taas_conv_direct_enable(0); /* the grouped one runs im2col: the same path for the bits */
        taas_conv2d_forward(yg, xg, w + g * nw / G, b + g * (OC / G), &sg, sc, 2);
        taas_conv_direct_enable(1);
        for (int n = 0; n < N; n++)
            assert_memory_equal(yg + n * gout, y + n * OC * oh * ow + g * gout, gout * sizeof *y);
    }
    float *y2 = filled(ny, 5);
    taas_conv2d_forward(y2, x, w, b, &s, scratch, 2);
    assert_memory_equal(y, y2, ny * sizeof *y);
    free(x), free(w), free(b), free(y), free(y2), free(scratch), free(xg), free(yg), free(sc);
}

/* got within rel of the largest magnitude of want, element by element (n floats) */
static void expect_close(const float *got, const float *want, size_t n, float rel, const char *what) {
    float top = 0.0f;
    for (size_t i = 0; i < n; i++) top = fabsf(want[i]) > top ? fabsf(want[i]) : top;
    assert_true(top > 0.0f);
    for (size_t i = 0; i < n; i++)
        if (fabsf(got[i] - want[i]) > rel * top) {
            print_error("%s [%zu]: %g, against %g\n", what, i, (double)got[i], (double)want[i]);
            fail();
        }
}

/* Products of several samples (small planes) against one sample at a time through im2col:
 * 7 samples of 10x10 outputs make products of 3 samples (256 / 100 rounded up), and slices
 * of the batch end in a product of fewer, for 1, 2 and 3 threads, with and without the fused
 * ReLU and a stride. Within 1e-5 of the largest value: the weight and bias gradients are
 * summed over the samples in another order. */
static void conv_samples_case(const taas_conv2d_shape *s, int nthreads, int relu) {
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s);
    size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->oc * oh * ow;
    size_t nw = (size_t)s->oc * s->c * s->kh * s->kw;
    float *x = filled(nx, 0), *w = filled(nw, 0), *b = filled(s->oc, 0), *dy = filled(ny, 0);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (size_t i = 0; i < nw; i++) w[i] = (float)((i * 53) % 97) / 480.0f - 0.1f;
    for (int i = 0; i < s->oc; i++) b[i] = (float)i / 40.0f - 0.05f;
    for (size_t i = 0; i < ny; i++) dy[i] = (float)((i * 29) % 89) / 44.0f - 1.0f;
    float *got[2][5];
    for (int way = 0; way < 2; way++) {
        taas_conv2d_sample_products(way == 0);
        taas_conv_direct_enable(0);
        float *scratch = filled(taas_conv2d_scratch_floats(s, nthreads), 9);
        float *y = filled(ny, 7), *dx = filled(nx, 7), *dw = filled(nw, 0), *db = filled(s->oc, 0);
        (relu ? taas_conv2d_relu_forward : taas_conv2d_forward)(y, x, w, b, s, scratch, nthreads);
        if (relu) taas_conv2d_relu_backward(dx, dw, db, dy, y, x, w, s, scratch, nthreads);
        else taas_conv2d_backward(dx, dw, db, dy, x, w, s, scratch, nthreads);
        got[way][0] = y, got[way][1] = dx, got[way][2] = dw, got[way][3] = db, got[way][4] = scratch;
    }
    taas_conv2d_sample_products(1);
    taas_conv_direct_enable(1);
    size_t len[4] = {ny, nx, nw, (size_t)s->oc};
    const char *names[4] = {"y", "dx", "dw", "db"};
    for (int a = 0; a < 4; a++) expect_close(got[0][a], got[1][a], len[a], 1e-5f, names[a]);
    for (int way = 0; way < 2; way++)
        for (int a = 0; a < 5; a++) free(got[way][a]);
    free(x), free(w), free(b), free(dy);
}

static void test_conv2d_sample_products(void **state) {
    (void)state;
    taas_conv2d_shape same = {7, 3, 10, 10, 5, 3, 3, 1, 1, 1, 1, 1};
    taas_conv2d_shape strided = {7, 4, 20, 19, 6, 3, 3, 2, 2, 1, 1, 1};  /* 10x10 outputs */
    taas_conv2d_shape pointwise = {9, 6, 8, 8, 4, 1, 1, 1, 1, 0, 0, 1};  /* 4 samples a product */
    for (int t = 1; t <= 3; t++) {
        conv_samples_case(&same, t, 0);
        conv_samples_case(&same, t, 1);
        conv_samples_case(&strided, t, 0);
        conv_samples_case(&pointwise, t, 1);
    }
}

/* Winograd's F(2x2, 3x3) and F(4x4, 3x3) against im2col + sgemm a sample at a time, all
 * three of the forward, the input gradient and the weight gradient (with db): padding 0, 1
 * and 2, odd and even planes, more tiles than a product or a chunk takes, the fused ReLU's
 * mask, 1 to 3 threads; in products of a few samples a thread and grouped (conv_winograd.h),
 * in one group and in groups of 2 samples. Within 2e-5 of the largest value for F(2x2) and
 * 6e-5 for F(4x4) (the products are summed in another order, of transformed values, and
 * F(4x4)'s transforms round more: its RMS error against float64 is 4-6 times the direct
 * sum's, bench/RESULTS.md), the same bits for the same threads twice, and the same dw when
 * neither dx nor db is asked for (a bias-free convolution at a network's input). Grouped, the
 * bits are those of one thread on three too (`alone`: the results with one). */
/* got[way][0..4]: y, dx, dw, db and the scratch of each way; way 2 (im2col, which grouping does
 * not touch) only with `im2col`, else NULLs */
static void winograd_way(taas_conv2d_shape s, int nthreads, int relu, int grouping, int im2col, float *got[4][6]) {
    int oh = taas_conv2d_out_h(&s), ow = taas_conv2d_out_w(&s);
    size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = (size_t)s.n * s.oc * oh * ow, nw = (size_t)s.oc * s.c * 9;
    float *x = filled(nx, 0), *w = filled(nw, 0), *b = filled(s.oc, 0), *dy = filled(ny, 0);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (size_t i = 0; i < nw; i++) w[i] = (float)((i * 53) % 97) / 480.0f - 0.1f;
    for (int i = 0; i < s.oc; i++) b[i] = (float)i / 40.0f - 0.05f;
    for (size_t i = 0; i < ny; i++) dy[i] = (float)((i * 29) % 89) / 44.0f - 1.0f;
    taas_conv_winograd_grouping(grouping);
    for (int way = 0; way < 4; way++) {  /* Winograd, Winograd again, im2col, Winograd's dw alone */
        if (way == 2 && !im2col) {
            for (int a = 0; a < 5; a++) got[way][a] = NULL;
            continue;
        }
        taas_conv2d_winograd(way != 2);
        taas_conv2d_sample_products(0);
        taas_conv_direct_enable(0);
        float *scratch = filled(taas_conv2d_scratch_floats(&s, nthreads), 9);
        float *y = filled(ny, 7), *dx = filled(nx, 7), *dw = filled(nw, 0), *db = filled(s.oc, 0);
        (relu ? taas_conv2d_relu_forward : taas_conv2d_forward)(y, x, w, b, &s, scratch, nthreads);
        float *gx = way == 3 ? NULL : dx, *gb = way == 3 ? NULL : db;
        if (relu) taas_conv2d_relu_backward(gx, dw, gb, dy, y, x, w, &s, scratch, nthreads);
        else taas_conv2d_backward(gx, dw, gb, dy, x, w, &s, scratch, nthreads);
        got[way][0] = y, got[way][1] = dx, got[way][2] = dw, got[way][3] = db, got[way][4] = scratch;
    }
    taas_conv2d_winograd(1);
    taas_conv2d_sample_products(1);
    taas_conv_direct_enable(1);
    taas_conv_winograd_grouping(-1);
    free(x), free(w), free(b), free(dy);
}

static void winograd_case(taas_conv2d_shape s, int nthreads, int relu) {
    assert_true(taas_conv_winograd_usable(&s));  /* the case takes the path it tests */
    int oh = taas_conv2d_out_h(&s), ow = taas_conv2d_out_w(&s);
    size_t len[4] = {(size_t)s.n * s.oc * oh * ow, (size_t)s.n * s.c * s.h * s.w, (size_t)s.oc * s.c * 9, (size_t)s.oc};
    const char *names[4] = {"y", "dx", "dw", "db"};
    float *ref[5] = {NULL};  /* im2col's, from the first way */
    for (int way = 0; way < 3; way++) {
        int grouping = (int[]){0, 1 << 20, 2}[way];  /* never, in one group, in groups of 2 samples */
        float *got[4][6], *alone[4][6];
        winograd_way(s, nthreads, relu, grouping, way == 0, got);
        if (way == 0)
            for (int a = 0; a < 5; a++) ref[a] = got[2][a], got[2][a] = NULL;
        if (grouping && nthreads == 3) winograd_way(s, 1, relu, grouping, 0, alone);
        for (int a = 0; a < 4; a++) {
            assert_memory_equal(got[0][a], got[1][a], len[a] * sizeof(float));
            expect_close(got[0][a], ref[a], len[a], taas_conv_winograd_tile_side(&s) == 4 ? 6e-5f : 2e-5f, names[a]);
            if (grouping && nthreads == 3) assert_memory_equal(got[0][a], alone[0][a], len[a] * sizeof(float));
        }
        assert_memory_equal(got[0][2], got[3][2], len[2] * sizeof(float));
        for (int w = 0; w < 4; w++)
            for (int a = 0; a < 5; a++) {
                free(got[w][a]);
                if (grouping && nthreads == 3) free(alone[w][a]);
            }
    }
    for (int a = 0; a < 5; a++) free(ref[a]);
}

static void test_conv2d_winograd(void **state) {
    (void)state;
    taas_conv2d_shape f2 = {3, 65, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1}, f4 = {5, 64, 8, 8, 72, 3, 3, 1, 1, 1, 1, 1};
    taas_conv2d_shape small = {64, 512, 4, 4, 512, 3, 3, 1, 1, 1, 1, 1}, big = {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1};
    assert_int_equal(taas_conv_winograd_tile_side(&f2), 2);  /* both tile sizes are among the cases */
    assert_int_equal(taas_conv_winograd_tile_side(&f4), 4);
    assert_true(taas_conv_winograd_grouped(&small));  /* the rule: a CIFAR ResNet's layer4 grouped, */
    assert_false(taas_conv_winograd_grouped(&big));   /* its layer1 not */
    for (int t = 1; t <= 3; t++) {
        winograd_case((taas_conv2d_shape){5, 64, 8, 8, 72, 3, 3, 1, 1, 1, 1, 1}, t, 0);    /* F(4x4): 8x8 */
        winograd_case((taas_conv2d_shape){3, 65, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1}, t, 1);  /* odd planes */
        winograd_case((taas_conv2d_shape){4, 64, 12, 10, 67, 3, 3, 1, 1, 0, 0, 1}, t, 0); /* no padding */
        winograd_case((taas_conv2d_shape){2, 66, 7, 9, 64, 3, 3, 1, 1, 2, 1, 1}, t, 1);   /* padding 2 and 1 */
        winograd_case((taas_conv2d_shape){12, 64, 13, 13, 64, 3, 3, 1, 1, 1, 1, 1}, t, 1); /* F(2x2), 2 chunks */
        winograd_case((taas_conv2d_shape){7, 64, 40, 38, 64, 3, 3, 1, 1, 1, 1, 1}, t, 0); /* F(4x4), partial tiles, 2 chunks */
        winograd_case((taas_conv2d_shape){2, 64, 27, 29, 66, 3, 3, 1, 1, 0, 0, 1}, t, 1); /* F(4x4), no padding */
        winograd_case((taas_conv2d_shape){3, 65, 25, 26, 64, 3, 3, 1, 1, 2, 1, 1}, t, 1); /* F(4x4), padding 2 and 1 */
        winograd_case((taas_conv2d_shape){3, 512, 4, 4, 512, 3, 3, 1, 1, 1, 1, 1}, t, 1);  /* a CIFAR layer4's */
    }
}

static void pool_case(const char *name, int is_max) {
    json_t *j = load(name);
    taas_pool2d_shape s = {cfg(j, "n"), cfg(j, "c"), cfg(j, "h"), cfg(j, "w"), cfg(j, "kh"),
                           cfg(j, "kw"), cfg(j, "sh"), cfg(j, "sw"), cfg(j, "ph"), cfg(j, "pw")};
    taas_error e;
    taas_error_clear(&e);
    assert_int_equal(taas_pool2d_check(&s, &e), 0);
    size_t nx, ny;
    float *x = arr(j, "x", &nx), *dy = arr(j, "dy", &ny);
    assert_int_equal(ny, (size_t)s.n * s.c * taas_pool2d_out_h(&s) * taas_pool2d_out_w(&s));
    float *y = filled(ny, 7), *dx = filled(nx, 7);
    int32_t *am = malloc(sizeof(int32_t) * ny);
    if (is_max) {
        taas_maxpool2d_forward(y, am, x, &s);
        taas_maxpool2d_backward(dx, dy, am, &s);
    } else {
        taas_avgpool2d_forward(y, x, &s);
        taas_avgpool2d_backward(dx, dy, &s);
    }
    expect(j, "y", y, 0);
    expect(j, "dx", dx, 0);
    free(x), free(dy), free(y), free(dx), free(am);
    json_decref(j);
}

static void adaptive_case(const char *name) {
    json_t *j = load(name);
    int n = cfg(j, "n"), c = cfg(j, "c"), h = cfg(j, "h"), w = cfg(j, "w"), oh = cfg(j, "oh"), ow = cfg(j, "ow");
    size_t nx, ny;
    float *x = arr(j, "x", &nx), *dy = arr(j, "dy", &ny);
    assert_int_equal(nx, (size_t)n * c * h * w);
    assert_int_equal(ny, (size_t)n * c * oh * ow);
    taas_error e;
    taas_error_clear(&e);
    assert_int_equal(taas_adaptive_avgpool2d_check(h, w, oh, ow, &e), 0);
    float *y = filled(ny, 7), *dx = filled(nx, 7);
    taas_adaptive_avgpool2d_forward(y, x, n, c, h, w, oh, ow);
    expect(j, "y", y, 0);
    taas_adaptive_avgpool2d_backward(dx, dy, n, c, h, w, oh, ow);
    expect(j, "dx", dx, 0);
    free(x), free(dy), free(y), free(dx);
    json_decref(j);
}

static void test_adaptive_avgpool2d(void **state) {
    (void)state;
    adaptive_case("adaptive_avgpool2d_6x6_3x3"); /* bins that divide the input */
    adaptive_case("adaptive_avgpool2d_7x5_3x2"); /* overlapping bins */
    adaptive_case("adaptive_avgpool2d_4x4_1x1"); /* a ResNet's head: one bin per plane */
    adaptive_case("adaptive_avgpool2d_5x5_7x7"); /* more outputs than inputs: bins repeat rows */
}

/* The backward's (and the GPU's) inverse of the bins: input x lies in bins [lo, hi) and in
 * no other, for every size up to 40 in and out. */
static void test_adaptive_bins(void **state) {
    (void)state;
    for (int in = 1; in <= 40; in++)
        for (int out = 1; out <= 40; out++)
            for (int x = 0; x < in; x++) {
                int lo, hi;
                taas_bins_of(x, in, out, &lo, &hi);
                assert_true(0 <= lo && lo < hi && hi <= out);
                for (int i = 0; i < out; i++) {
                    int holds = taas_bin_start(i, in, out) <= x && x < taas_bin_end(i, in, out);
                    if (holds != (i >= lo && i < hi))
                        fail_msg("in %d, out %d: input %d, bin %d [%d, %d), bins_of [%d, %d)", in, out, x, i,
                                 taas_bin_start(i, in, out), taas_bin_end(i, in, out), lo, hi);
                }
            }
}

/* y = a + b and y += x are float additions: PyTorch's sums bit for bit, whichever of the
 * inputs the output is. */
static void test_add_and_accumulate(void **state) {
    (void)state;
    json_t *j = load("add");
    size_t n;
    float *a = arr(j, "a", &n), *b = arr(j, "b", NULL), *ref = arr(j, "y", NULL), *y = filled(n, 7);
    float *a2 = arr(j, "a", NULL), *b2 = arr(j, "b", NULL);
    taas_add_forward(y, a, b, n);
    assert_memory_equal(y, ref, n * sizeof *y);
    taas_add_forward(a2, a2, b, n); /* y is a */
    assert_memory_equal(a2, ref, n * sizeof *y);
    taas_add_forward(b2, a, b2, n); /* y is b */
    assert_memory_equal(b2, ref, n * sizeof *y);
    memcpy(y, a, n * sizeof *y);
    taas_accumulate(y, b, n);
    assert_memory_equal(y, ref, n * sizeof *y);
    taas_accumulate(y, y, n); /* x is y: doubled, exactly */
    for (size_t i = 0; i < n; i++) assert_true(y[i] == 2.0f * ref[i]);
    /* past TAAS_PAR_MIN the loop is split across threads: the same sums */
    size_t big = 100003;
    float *p = filled(big, 0), *q = filled(big, 0), *r = filled(big, 0);
    for (size_t i = 0; i < big; i++) p[i] = a[i % n] * (float)(i % 7), q[i] = b[i % n];
    taas_add_forward(r, p, q, big);
    taas_accumulate(p, q, big);
    for (size_t i = 0; i < big; i++) assert_true(r[i] == p[i] && r[i] == a[i % n] * (float)(i % 7) + b[i % n]);
    free(a), free(b), free(ref), free(y), free(a2), free(b2), free(p), free(q), free(r);
    json_decref(j);
}

static void test_pool2d(void **state) {
    (void)state;
    pool_case("maxpool2d_k2", 1);
    pool_case("maxpool2d_k3p1", 1);
    pool_case("maxpool2d_k2_wide", 1); /* the vectorised 2x2 rows */
    pool_case("avgpool2d_k2", 0);
    pool_case("avgpool2d_k3p1", 0);
}

/* As PyTorch: the first maximum wins a tie, and a NaN wins over any number. */
static void test_maxpool_ties_and_nan(void **state) {
    (void)state;
    taas_pool2d_shape s = {1, 1, 2, 2, 2, 2, 2, 2, 0, 0};
    float tie[4] = {3, 3, 1, 3}, nan_in[4] = {1, NAN, 5, 2}, y, dx[4], dy = 2;
    int32_t am;
    taas_maxpool2d_forward(&y, &am, tie, &s);
    assert_true(y == 3.0f);
    assert_int_equal(am, 0);
    taas_maxpool2d_backward(dx, &dy, &am, &s);
    assert_true(dx[0] == 2.0f && dx[1] == 0.0f && dx[2] == 0.0f && dx[3] == 0.0f);
    taas_maxpool2d_forward(&y, &am, nan_in, &s);
    assert_true(isnan(y));
    assert_int_equal(am, 1);
    /* the same rules in rows of 10 windows (the vectorised path), each window its own case */
    enum { W = 20, OW = W / 2 };
    const float cases[OW][4] = {{3, 3, 1, 3}, {1, NAN, 5, 2}, {NAN, NAN, 1, 1}, {1, 2, NAN, 9},
                                {-1, -2, -3, -4}, {0, 5, 5, 5}, {-0.0f, 0.0f, 0, 0},
                                {1, 2, 3, 4}, {4, 3, 2, 1}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY}};
    const int32_t want[OW] = {0, 1, 0, W, 0, 1, 0, W + 1, 0, 0}; /* offset in the window */
    float x[2 * W], yw[OW];
    int32_t amw[OW];
    for (int j = 0; j < OW; j++)
        x[2 * j] = cases[j][0], x[2 * j + 1] = cases[j][1], x[W + 2 * j] = cases[j][2], x[W + 2 * j + 1] = cases[j][3];
    taas_pool2d_shape sw = {1, 1, 2, W, 2, 2, 2, 2, 0, 0};
    taas_maxpool2d_forward(yw, amw, x, &sw);
    for (int j = 0; j < OW; j++) {
        int32_t at = 2 * j + want[j];
        if (amw[j] != at) fail_msg("window %d: argmax %d, expected %d", j, amw[j], at);
        assert_memory_equal(&yw[j], &x[at], sizeof(float)); /* NaN and the sign of zero too */
    }
}

/* Windows of any size, stride and padding, whose runs of outputs inside the plane are
 * vector loops over one tap at a time: the same rule (the first maximum, the first NaN) as
 * a plain loop over each window, on values that tie often and hold NaNs and -inf. */
static void test_maxpool_windows(void **state) {
    (void)state;
    const taas_pool2d_shape shapes[] = {
        {2, 3, 17, 23, 3, 3, 2, 2, 1, 1},  /* a ResNet's stem pool */
        {1, 2, 9, 30, 3, 3, 1, 1, 1, 1},   {1, 2, 8, 19, 2, 2, 1, 1, 0, 0},
        {1, 1, 11, 26, 3, 3, 2, 2, 0, 0},  {1, 2, 12, 31, 5, 5, 3, 3, 2, 2},
        {1, 1, 4, 6, 3, 2, 1, 2, 1, 1},    /* no output inside: every one at an edge */
    };
    const float values[] = {0.0f, 1.0f, 1.0f, 2.0f, -1.0f, NAN, -INFINITY, 2.0f, -0.0f, 3.0f, 3.0f};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const taas_pool2d_shape *s = &shapes[c];
        int oh = taas_pool2d_out_h(s), ow = taas_pool2d_out_w(s);
        size_t planes = (size_t)s->n * s->c, nx = planes * s->h * s->w, ny = planes * oh * ow;
        float *x = filled(nx, 0), *y = filled(ny, 7);
        int32_t *am = malloc(sizeof(int32_t) * ny);
        for (size_t i = 0; i < nx; i++) x[i] = values[(i * 7 + i / 5) % (sizeof values / sizeof values[0])];
        taas_maxpool2d_forward(y, am, x, s);
        for (size_t p = 0; p < planes; p++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    const float *in = x + p * s->h * s->w;
                    int32_t want = -1;
                    for (int ki = 0; ki < s->kh; ki++)
                        for (int kj = 0; kj < s->kw; kj++) {
                            int yy = i * s->sh - s->ph + ki, xx = j * s->sw - s->pw + kj;
                            if (yy < 0 || yy >= s->h || xx < 0 || xx >= s->w) continue;
                            float v = in[yy * s->w + xx];
                            if (want < 0 || (in[want] == in[want] && (v > in[want] || v != v))) want = yy * s->w + xx;
                        }
                    size_t q = (p * oh + i) * ow + j;
                    if (am[q] != want)
                        fail_msg("shape %zu plane %zu (%d, %d): argmax %d, expected %d", c, p, i, j, am[q], want);
                    assert_memory_equal(&y[q], &in[want], sizeof(float));
                }
        free(x), free(y), free(am);
    }
}

enum act { RELU, LEAKY, TANH, SIGMOID, GELU };

static void act_case(const char *name, enum act kind) {
    json_t *j = load(name);
    size_t n;
    float *x = arr(j, "x", &n), *dy = arr(j, "dy", NULL);
    float *y = filled(n, 7), *dx = filled(n, 7);
    float slope = kind == LEAKY ? (float)json_number_value(json_object_get(j, "slope")) : 0;
    switch (kind) {
    case RELU: taas_relu_forward(y, x, n), taas_relu_backward(dx, dy, x, n); break;
    case LEAKY:
        taas_leaky_relu_forward(y, x, n, slope), taas_leaky_relu_backward(dx, dy, x, n, slope);
        break;
    case TANH: taas_tanh_forward(y, x, n), taas_tanh_backward(dx, dy, y, n); break;
    case SIGMOID: taas_sigmoid_forward(y, x, n), taas_sigmoid_backward(dx, dy, y, n); break;
    case GELU: taas_gelu_forward(y, x, n), taas_gelu_backward(dx, dy, x, n); break;
    }
    expect(j, "y", y, 0);
    expect(j, "dx", dx, 0);
    free(x), free(dy), free(y), free(dx);
    json_decref(j);
}

static void test_activations(void **state) {
    (void)state;
    act_case("relu", RELU);
    act_case("leaky_relu", LEAKY);
    act_case("tanh", TANH);
    act_case("sigmoid", SIGMOID);
    act_case("gelu", GELU);
}

static void softmax_case(const char *name, int logspace) {
    json_t *j = load(name);
    json_t *shape = json_object_get(j, "x_shape");
    int n = (int)json_integer_value(json_array_get(shape, 0));
    int c = (int)json_integer_value(json_array_get(shape, 1)), d = 1;
    for (size_t i = 2; i < json_array_size(shape); i++)
        d *= (int)json_integer_value(json_array_get(shape, i));
    size_t nx;
    float *x = arr(j, "x", &nx), *dy = arr(j, "dy", NULL);
    float *y = filled(nx, 7), *dx = filled(nx, 7);
    if (logspace) {
        taas_log_softmax_forward(y, x, n, c, d);
        taas_log_softmax_backward(dx, dy, y, n, c, d);
    } else {
        taas_softmax_forward(y, x, n, c, d);
        taas_softmax_backward(dx, dy, y, n, c, d);
    }
    expect(j, "y", y, 0);
    expect(j, "dx", dx, 0);
    free(x), free(dy), free(y), free(dx);
    json_decref(j);
}

static void test_softmax(void **state) {
    (void)state;
    softmax_case("softmax_2d", 0);
    softmax_case("softmax_4d", 0);
    softmax_case("log_softmax_2d", 1);
    softmax_case("log_softmax_4d", 1);
}

static void bn_case(const char *name) {
    json_t *j = load(name);
    json_t *shape = json_object_get(j, "x_shape");
    int n = (int)json_integer_value(json_array_get(shape, 0));
    int c = (int)json_integer_value(json_array_get(shape, 1)), hw = 1;
    for (size_t i = 2; i < json_array_size(shape); i++)
        hw *= (int)json_integer_value(json_array_get(shape, i));
    float momentum = (float)json_number_value(json_object_get(j, "momentum"));
    float eps = (float)json_number_value(json_object_get(j, "eps"));
    size_t nx;
    float *x = arr(j, "x", &nx), *dy = arr(j, "dy", NULL);
    float *g = arr(j, "gamma", NULL), *b = arr(j, "beta", NULL);
    float *rm = arr(j, "running_mean0", NULL), *rv = arr(j, "running_var0", NULL);
    float *y = filled(nx, 7), *dx = filled(nx, 7), *mean = filled(c, 0), *invstd = filled(c, 0);
    float *dg = filled(c, 1), *db = filled(c, 1);
    taas_error e;
    taas_error_clear(&e);
    assert_int_equal(taas_batchnorm_forward_train(y, mean, invstd, rm, rv, x, g, b, n, c, hw,
                                                  momentum, eps, &e), 0);
    expect(j, "y", y, 0);
    expect(j, "running_mean1", rm, 0);
    expect(j, "running_var1", rv, 0);
    taas_batchnorm_backward(dx, dg, db, dy, x, mean, invstd, g, n, c, hw);
    expect(j, "dx", dx, 0);
    expect(j, "dgamma", dg, 1);
    expect(j, "dbeta", db, 1);
    /* eval mode, with the running stats this step produced */
    float *ex = arr(j, "eval_x", NULL), *edy = arr(j, "eval_dy", NULL);
    for (int i = 0; i < c; i++) dg[i] = db[i] = 0;
    taas_batchnorm_forward_eval(y, ex, g, b, rm, rv, n, c, hw, eps);
    expect(j, "eval_y", y, 0);
    taas_batchnorm_backward_eval(dx, dg, db, edy, ex, g, rm, rv, n, c, hw, eps);
    expect(j, "eval_dx", dx, 0);
    expect(j, "eval_dgamma", dg, 0);
    expect(j, "eval_dbeta", db, 0);
    free(x), free(dy), free(g), free(b), free(rm), free(rv), free(y), free(dx), free(mean);
    free(invstd), free(dg), free(db), free(ex), free(edy);
    json_decref(j);
}

static void test_batchnorm(void **state) {
    (void)state;
    bn_case("batchnorm1d");
    bn_case("batchnorm2d");
}

static void test_batchnorm_batch_of_one(void **state) {
    (void)state;
    float x[3] = {1, 2, 3}, y[3], mean[3], invstd[3], g[3] = {1, 1, 1}, b[3] = {0, 0, 0};
    taas_error e;
    taas_error_clear(&e);
    assert_int_equal(taas_batchnorm_forward_train(y, mean, invstd, NULL, NULL, x, g, b, 1, 3, 1,
                                                  0.1f, 1e-5f, &e), -1);
    assert_string_equal(e.ename, "TaasValueError");
    assert_non_null(strstr(e.message, "more than 1 value per channel"));
    assert_non_null(strstr(e.message, "1 x 3 x 1"));
    assert_non_null(strstr(e.hint, "batch size of at least 2"));
}

/* Forward and backward agree with the mask; the kept fraction is 1-p within 7 sigma. */
static void test_dropout(void **state) {
    (void)state;
    const size_t n = 100000;
    const float p = 0.3f;
    float *x = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
    float *y = filled(n, 7), *m = filled(n, 7), *dx = filled(n, 7), *m2 = filled(n, 7);
    for (size_t i = 0; i < n; i++) x[i] = (float)i * 0.001f - 3.0f, dy[i] = 1.0f + (float)(i % 7);
    taas_dropout_forward(y, m, x, n, p, 42, 1000);
    taas_dropout_backward(dx, dy, m, n);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        /* the vectorised mask draws what the generator gives element by element */
        assert_true(m[i] == (taas_ctr_uniform(42, 1000 + i) >= p ? 1.0f / (1.0f - p) : 0.0f));
        assert_true(m[i] == 0.0f || fabsf(m[i] - 1.0f / (1.0f - p)) < 1e-6f);
        kept += m[i] != 0.0f;
        assert_true(y[i] == x[i] * m[i]);
        assert_true(dx[i] == dy[i] * m[i]);
    }
    double rate = (double)kept / n, sd = sqrt(p * (1 - p) / n);
    if (fabs(rate - (1 - p)) > 7 * sd) fail_msg("keep rate %g, expected %g", rate, 1 - p);
    /* same (seed, offset) -> same mask; another offset or seed -> another mask */
    float *y2 = filled(n, 0);
    taas_dropout_forward(y2, m2, x, n, p, 42, 1000);
    assert_memory_equal(m, m2, sizeof(float) * n);
    taas_dropout_forward(y2, m2, x, n, p, 42, 1001);
    assert_memory_not_equal(m, m2, sizeof(float) * n);
    taas_dropout_forward(y2, m2, x, n, p, 43, 1000);
    assert_memory_not_equal(m, m2, sizeof(float) * n);
    /* p = 0 is the identity, p = 1 zeroes all */
    taas_dropout_forward(y2, m2, x, n, 0.0f, 1, 0);
    assert_memory_equal(y2, x, sizeof(float) * n);
    taas_dropout_forward(y2, m2, x, n, 1.0f, 1, 0);
    for (size_t i = 0; i < n; i++) assert_true(y2[i] == 0.0f);
    free(x), free(dy), free(y), free(m), free(dx), free(m2), free(y2);
}

static void test_dropout2d(void **state) {
    (void)state;
    const int n = 100, c = 200, hw = 6;
    const float p = 0.5f;
    size_t total = (size_t)n * c * hw;
    float *x = malloc(sizeof(float) * total), *dy = malloc(sizeof(float) * total);
    float *y = filled(total, 7), *dx = filled(total, 7), *m = filled((size_t)n * c, 7);
    for (size_t i = 0; i < total; i++) x[i] = 1.0f + (float)(i % 13), dy[i] = (float)(i % 5) - 2;
    taas_dropout2d_forward(y, m, x, n, c, hw, p, 7, 0);
    taas_dropout2d_backward(dx, dy, m, n, c, hw);
    size_t kept = 0;
    for (size_t ch = 0; ch < (size_t)n * c; ch++) {
        assert_true(m[ch] == 0.0f || m[ch] == 2.0f);
        kept += m[ch] != 0.0f;
        for (int i = 0; i < hw; i++) { /* whole channels at once */
            assert_true(y[ch * hw + i] == x[ch * hw + i] * m[ch]);
            assert_true(dx[ch * hw + i] == dy[ch * hw + i] * m[ch]);
        }
    }
    double rate = (double)kept / (n * c), sd = sqrt(p * (1 - p) / (n * c));
    if (fabs(rate - (1 - p)) > 7 * sd) fail_msg("channel keep rate %g, expected %g", rate, 1 - p);
    free(x), free(dy), free(y), free(dx), free(m);
}

static void test_dropout_bad_p(void **state) {
    (void)state;
    taas_error e;
    taas_error_clear(&e);
    assert_int_equal(taas_dropout_check(0.5f, &e), 0);
    assert_int_equal(taas_dropout_check(1.5f, &e), -1);
    assert_non_null(strstr(e.message, "p=1.5 is outside [0, 1]"));
    assert_non_null(strstr(e.hint, "Dropout(0.5)"));
    taas_error_clear(&e);
    assert_int_equal(taas_dropout_check(NAN, &e), -1);
    assert_non_null(strstr(e.message, "outside [0, 1]"));
}

static void test_shape_errors(void **state) {
    (void)state;
    taas_error e;
    taas_error_clear(&e);
    taas_conv2d_shape big = {2, 1, 4, 4, 8, 5, 5, 1, 1, 0, 0};
    assert_int_equal(taas_conv2d_check(&big, &e), -1);
    assert_non_null(strstr(e.message, "kernel 5x5 is larger than the padded input 4x4"));
    assert_non_null(strstr(e.hint, "padding"));
    taas_error_clear(&e);
    taas_conv2d_shape zero = {2, 1, 4, 4, 8, 3, 3, 0, 1, 0, 0};
    assert_int_equal(taas_conv2d_check(&zero, &e), -1);
    assert_non_null(strstr(e.message, "stride 0x1"));
    taas_error_clear(&e);
    taas_conv2d_shape grouped = {2, 6, 4, 4, 4, 3, 3, 1, 1, 0, 0, 4};
    assert_int_equal(taas_conv2d_check(&grouped, &e), -1);
    assert_string_equal(e.ename, "TaasValueError");
    assert_non_null(strstr(e.message, "groups=4 must be at least 1 and divide in_channels 6 and out_channels 4"));
    assert_non_null(strstr(e.hint, "depthwise"));
    taas_error_clear(&e);
    grouped.groups = 3; /* divides C, not OC */
    assert_int_equal(taas_conv2d_check(&grouped, &e), -1);
    assert_non_null(strstr(e.message, "groups=3"));
    taas_error_clear(&e);
    grouped.groups = -2;
    assert_int_equal(taas_conv2d_check(&grouped, &e), -1);
    assert_non_null(strstr(e.message, "groups=-2 must be at least 1"));
    taas_error_clear(&e);
    grouped.groups = 2;
    assert_int_equal(taas_conv2d_check(&grouped, &e), 0);
    grouped.groups = 0; /* 0 is 1 */
    assert_int_equal(taas_conv2d_check(&grouped, &e), 0);
    taas_error_clear(&e);
    taas_pool2d_shape pad = {1, 1, 8, 8, 2, 2, 2, 2, 2, 0};
    assert_int_equal(taas_pool2d_check(&pad, &e), -1);
    assert_non_null(strstr(e.message, "padding 2x0 is more than half the kernel 2x2"));
    assert_non_null(strstr(e.hint, "kernel_size // 2"));
    taas_error_clear(&e);
    assert_int_equal(taas_adaptive_avgpool2d_check(5, 5, 7, 7, &e), 0);
    assert_int_equal(taas_adaptive_avgpool2d_check(4, 4, 0, 1, &e), -1);
    assert_string_equal(e.ename, "TaasValueError");
    assert_non_null(strstr(e.message, "AdaptiveAvgPool2d: output size 0x1 from an input of 4x4"));
    assert_non_null(strstr(e.hint, "AdaptiveAvgPool2d(1)"));
    taas_error_clear(&e);
    assert_int_equal(taas_adaptive_avgpool2d_check(0, 3, 1, 1, &e), -1);
    assert_non_null(strstr(e.message, "input of 0x3"));
    taas_error_clear(&e);
    taas_pool2d_shape small = {1, 1, 1, 1, 2, 2, 2, 2, 0, 0};
    assert_int_equal(taas_pool2d_check(&small, &e), -1);
    assert_non_null(strstr(e.message, "kernel 2x2 is larger than the padded input 1x1"));
}

static void test_init_linear_conv(void **state) {
    (void)state;
    taas_error e;
    taas_error_clear(&e);
    taas_init_rng rng = {123, 0};
    enum { IN = 50, OUT = 400 };
    float *w = malloc(sizeof(float) * IN * OUT), *b = malloc(sizeof(float) * OUT);
    assert_int_equal(taas_init_linear(w, b, IN, OUT, &rng, &e), 0);
    assert_int_equal(rng.offset, (uint64_t)IN * OUT + OUT);
    double bound = 1.0 / sqrt(IN), sum = 0, sq = 0, mx = 0;
    for (int i = 0; i < IN * OUT; i++) {
        assert_true(fabs(w[i]) <= bound);
        sum += w[i], sq += (double)w[i] * w[i];
        if (fabs(w[i]) > mx) mx = fabs(w[i]);
    }
    size_t cnt = IN * OUT;
    double mean = sum / cnt, var = sq / cnt - mean * mean, want = bound * bound / 3;
    /* U(-b, b): mean 0 (sd b/sqrt(3 n)), variance b^2/3; the extremes get close to b */
    assert_true(fabs(mean) < 7 * bound / sqrt(3.0 * cnt));
    assert_true(fabs(var - want) < 0.03 * want);
    assert_true(mx > 0.99 * bound);
    for (int i = 0; i < OUT; i++) assert_true(fabs(b[i]) <= bound);
    /* same seed -> same numbers */
    float *w2 = malloc(sizeof(float) * IN * OUT), *b2 = malloc(sizeof(float) * OUT);
    taas_init_rng again = {123, 0};
    assert_int_equal(taas_init_linear(w2, b2, IN, OUT, &again, &e), 0);
    assert_memory_equal(w, w2, sizeof(float) * IN * OUT);
    assert_memory_equal(b, b2, sizeof(float) * OUT);
    /* Conv2d(4, 25, 5): fan_in 4*5*5 = 100, bound 0.1 */
    taas_init_rng r2 = {9, 0};
    assert_int_equal(taas_init_conv2d(w, b, 4, 25, 5, 5, &r2, &e), 0);
    mx = 0;
    for (int i = 0; i < 25 * 100; i++) {
        assert_true(fabs(w[i]) <= 0.1 + 1e-7);
        if (fabs(w[i]) > mx) mx = fabs(w[i]);
    }
    assert_true(mx > 0.098);
    for (int i = 0; i < 25; i++) assert_true(fabs(b[i]) <= 0.1 + 1e-7);
    /* general kaiming_uniform: a = 0 gives bound sqrt(6 / fan_in) */
    taas_init_rng r3 = {5, 0};
    assert_int_equal(taas_init_kaiming_uniform(w, 20000, 24, 0.0, &r3, &e), 0);
    mx = 0;
    for (int i = 0; i < 20000; i++) mx = fabs(w[i]) > mx ? fabs(w[i]) : mx;
    assert_true(mx <= 0.5 + 1e-7 && mx > 0.49);
    free(w), free(b), free(w2), free(b2);
}

static void test_init_batchnorm_and_errors(void **state) {
    (void)state;
    float g[3], b[3], rm[3], rv[3];
    taas_init_batchnorm(g, b, rm, rv, 3);
    for (int i = 0; i < 3; i++) {
        assert_true(g[i] == 1.0f && b[i] == 0.0f && rm[i] == 0.0f && rv[i] == 1.0f);
    }
    taas_error e;
    taas_error_clear(&e);
    taas_init_rng rng = {1, 0};
    float w[4];
    assert_int_equal(taas_init_linear(w, NULL, 0, 4, &rng, &e), -1);
    assert_non_null(strstr(e.message, "Linear: cannot initialise a layer with fan_in 0"));
    assert_non_null(strstr(e.hint, "at least 1"));
    taas_error_clear(&e);
    assert_int_equal(taas_init_conv2d(w, NULL, 1, 4, 0, 3, &rng, &e), -1);
    assert_non_null(strstr(e.message, "Conv2d: cannot initialise"));
    /* uniform draws lie in [0, 1) and are not all alike */
    double s = 0;
    for (uint64_t i = 0; i < 10000; i++) {
        float u = taas_ctr_uniform(77, i);
        assert_true(u >= 0.0f && u < 1.0f);
        s += u;
    }
    assert_true(fabs(s / 10000 - 0.5) < 0.02);
}

int main(void) {
    tu_kernel_set();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv2d_sample_products),
        cmocka_unit_test(test_conv2d_winograd),
        cmocka_unit_test(test_conv2d_groups),
        cmocka_unit_test(test_conv2d_groups_are_convolutions_apart),
        cmocka_unit_test(test_pool2d),
        cmocka_unit_test(test_adaptive_avgpool2d),
        cmocka_unit_test(test_adaptive_bins),
        cmocka_unit_test(test_add_and_accumulate),
        cmocka_unit_test(test_maxpool_ties_and_nan),
        cmocka_unit_test(test_maxpool_windows),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_batchnorm_batch_of_one),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_dropout2d),
        cmocka_unit_test(test_dropout_bad_p),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_init_linear_conv),
        cmocka_unit_test(test_init_batchnorm_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
