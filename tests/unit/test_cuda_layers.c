/* The GPU's layers (workers/train/cuda/cu_layers.h) against the PyTorch fixtures the CPU's
 * are tested with (tests/data/layers, test_layers.c), with the same tolerance:
 * max|got - ref| / max(1, max|ref|) <= 1e-4 per array; with TF32 (an option, off by default)
 * the convolutions and Linear are held to 1e-2, the looser bound docs/cuda.md gives for it.
 * The grouped convolutions, AdaptiveAvgPool2d and the residual sum use the CPU's fixtures too.
 * Input gradients must be overwritten and parameter gradients accumulated; the fused
 * Conv2d+ReLU must give the bits of the two apart; Dropout's masks must be the CPU's bit for
 * bit. Exits 77 (skipped) where there is no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cu_layers.h"
#include "fixture_testutil.h"
#include "init.h"
#include "layers.h"
#include "test_cuda_util.h"

#define TOL 1e-4
#define TOL_TF32 1e-2
#define TOL_BF16 5e-2

TU_CUDA_GROUP
static const char *fixture = "";  /* names the failing fixture in messages */

static json_t *load(const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "layers/%s.json", name);
    fixture = name;
    json_t *j = tu_fixture_load(rel);
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

/* The fixture's array `key` on the device; *n its length. */
static float *dev(json_t *j, const char *key, size_t *n) {
    size_t len;
    float *h = tu_floats(j, key, &len), *d = tu_dev(h, len, 0);
    free(h);
    if (n) *n = len;
    return d;
}

/* The device's array against the fixture's `key` (+ base: what a gradient accumulated onto). */
static void expect_tol(json_t *j, const char *key, const float *d, float base, double scale, double tol) {
    size_t n;
    float *ref = tu_floats(j, key, &n), *got = tu_host(&CU, d, n);
    for (size_t i = 0; i < n; i++) ref[i] = (float)(ref[i] * scale);
    double diff = tu_diff(got, ref, n, base);
    if (!(diff <= tol)) fail_msg("%s.json, %s: max diff %g (relative to max(1, |ref|)) exceeds %g", fixture, key, diff, tol);
    free(ref);
    free(got);
}

static void expect(json_t *j, const char *key, const float *d, float base) {
    expect_tol(j, key, d, base, 1.0, TOL);
}

static void test_linear(double tol) {
    json_t *j = load("linear");
    int in = cfg(j, "in"), out = cfg(j, "out");
    size_t nx, ny;
    float *x = dev(j, "x", &nx), *w = dev(j, "weight", NULL), *b = dev(j, "bias", NULL), *dy = dev(j, "dy", &ny);
    int n = (int)(nx / (size_t)in);
    float *y = tu_dev(NULL, ny, 7), *dx = tu_dev(NULL, nx, 7);
    float *dw = tu_dev(NULL, (size_t)in * out, 1), *db = tu_dev(NULL, (size_t)out, 1);
    TU_OK(taas_cu_linear_forward(&CU, y, x, w, b, n, in, out, &E), &E);
    expect_tol(j, "y", y, 0, 1, tol);
    TU_OK(taas_cu_linear_backward(&CU, dx, dw, db, dy, x, w, n, in, out, &E), &E);
    expect_tol(j, "dx", dx, 0, 1, tol);
    expect_tol(j, "dweight", dw, 1, 1, tol);  /* accumulated onto 1 */
    expect_tol(j, "dbias", db, 1, 1, tol);
    TU_OK(taas_cu_linear_backward(&CU, NULL, dw, NULL, dy, x, w, n, in, out, &E), &E);  /* once more */
    expect_tol(j, "dweight", dw, 1, 2, tol);
    cudaFree(x), cudaFree(w), cudaFree(b), cudaFree(dy), cudaFree(y), cudaFree(dx), cudaFree(dw), cudaFree(db);
    json_decref(j);
}

static void test_linear_fp32(void **state) {
    (void)state;
    test_linear(TOL);
}

/* One fixture with the scratch room for `samples` samples at a time (0: the whole batch),
 * so that the chunked loop runs with chunks of 1, 2 and all. A fixture without "bias" is a
 * convolution with bias=False: b and db are NULL. */
static void conv_case(const char *name, int samples, double tol) {
    json_t *j = load(name);
    taas_conv2d_shape s = {cfg(j, "n"), cfg(j, "c"), cfg(j, "h"), cfg(j, "w"), cfg(j, "oc"), cfg(j, "kh"),
                           cfg(j, "kw"), cfg(j, "sh"), cfg(j, "sw"), cfg(j, "ph"), cfg(j, "pw"), cfg_or(j, "groups", 0)};
    int has_bias = json_object_get(j, "bias") != NULL;
    size_t nx, ny, nw, nb = (size_t)s.oc;
    float *x = dev(j, "x", &nx), *w = dev(j, "weight", &nw), *dy = dev(j, "dy", &ny);
    float *b = has_bias ? dev(j, "bias", NULL) : NULL;
    assert_int_equal(ny, (size_t)s.n * s.oc * taas_conv2d_out_h(&s) * taas_conv2d_out_w(&s));
    assert_int_equal(nw, (size_t)s.oc * (s.c / taas_conv2d_groups(&s)) * s.kh * s.kw);
    size_t room = taas_cu_conv2d_scratch_floats(&CU, &s);
    if (samples) room = room / (size_t)s.n * (size_t)samples;
    float *scratch = tu_dev(NULL, room, 9);
    float *y = tu_dev(NULL, ny, 7), *dx = tu_dev(NULL, nx, 7), *dw = tu_dev(NULL, nw, 1);
    float *db = has_bias ? tu_dev(NULL, nb, 1) : NULL;
    TU_OK(taas_cu_conv2d_forward(&CU, y, x, w, b, &s, 0, scratch, room, &E), &E);
    expect_tol(j, "y", y, 0, 1, tol);
    TU_OK(taas_cu_conv2d_backward(&CU, dx, dw, db, dy, NULL, x, w, &s, 0, scratch, room, &E), &E);
    expect_tol(j, "dx", dx, 0, 1, tol);
    expect_tol(j, "dweight", dw, 1, 1, tol);
    if (db) expect_tol(j, "dbias", db, 1, 1, tol);
    /* the first layer: no input gradient */
    tu_zero(&CU, dw, nw);
    if (db) tu_zero(&CU, db, nb);
    TU_OK(taas_cu_conv2d_backward(&CU, NULL, dw, db, dy, NULL, x, w, &s, 0, scratch, room, &E), &E);
    expect_tol(j, "dweight", dw, 0, 1, tol);
    if (db) expect_tol(j, "dbias", db, 0, 1, tol);
    /* fused with a ReLU: the bits of the convolution, then ReLU and its backward */
    float *yr = tu_dev(NULL, ny, 7), *dxr = tu_dev(NULL, nx, 7), *dwr = tu_dev(NULL, nw, 0);
    float *dbr = has_bias ? tu_dev(NULL, nb, 0) : NULL;
    TU_OK(taas_cu_conv2d_forward(&CU, yr, x, w, b, &s, 1, scratch, room, &E), &E);
    float *hy = tu_host(&CU, y, ny), *hyr = tu_host(&CU, yr, ny), *hdy = tu_host(&CU, dy, ny);
    for (size_t i = 0; i < ny; i++) {
        float r = hy[i] > 0.0f ? hy[i] : 0.0f;
        assert_memory_equal(&hyr[i], &r, sizeof r);
        hdy[i] = hyr[i] > 0.0f ? hdy[i] : 0.0f;
    }
    float *dym = tu_dev(hdy, ny, 0);
    tu_zero(&CU, dw, nw);
    if (db) tu_zero(&CU, db, nb);
    TU_OK(taas_cu_conv2d_backward(&CU, dx, dw, db, dym, NULL, x, w, &s, 0, scratch, room, &E), &E);
    TU_OK(taas_cu_conv2d_backward(&CU, dxr, dwr, dbr, dy, yr, x, w, &s, 1, scratch, room, &E), &E);
    float *a = tu_host(&CU, dx, nx), *c = tu_host(&CU, dxr, nx);
    assert_memory_equal(a, c, nx * sizeof *a);
    free(a), free(c);
    a = tu_host(&CU, dw, nw), c = tu_host(&CU, dwr, nw);
    assert_memory_equal(a, c, nw * sizeof *a);
    free(a), free(c);
    if (db) {
        a = tu_host(&CU, db, nb), c = tu_host(&CU, dbr, nb);
        assert_memory_equal(a, c, nb * sizeof *a);
        free(a), free(c);
    }
    free(hy), free(hyr), free(hdy);
    cudaFree(yr), cudaFree(dxr), cudaFree(dwr), cudaFree(dbr), cudaFree(dym);
    cudaFree(x), cudaFree(w), cudaFree(b), cudaFree(dy), cudaFree(y), cudaFree(dx), cudaFree(dw), cudaFree(db);
    cudaFree(scratch);
    json_decref(j);
}

static void conv_all(double tol) {
    /* then the grouped ones: groups 2 (stride 1, strided without bias, 1x1) and depthwise */
    const char *names[] = {"conv2d_basic", "conv2d_strided", "conv2d_padded", "conv2d_1x1",
                           "conv2d_groups2", "conv2d_groups2_strided_nobias", "conv2d_groups2_1x1",
                           "conv2d_depthwise", "conv2d_depthwise_x2_nobias"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        for (int samples = 0; samples <= 2; samples++) conv_case(names[i], samples, tol);
}

/* A bias gradient over many rows and channels that are not a multiple of 32 (a Linear's
 * rows: hw 1; a convolution's planes: hw 5), accumulated onto what is there, against a sum
 * in double. */
static void test_channel_sum(void **state) {
    (void)state;
    enum { N = 301, C = 100 };
    static float x[N * C * 5];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int hw = 1; hw <= 5; hw += 4) {
        float *dx = tu_dev(x, (size_t)N * C * hw, 0), *dout = tu_dev(NULL, C, 0.25f);
        TU_OK(taas_cu_channel_sum(&CU, dout, dx, N, C, hw, &E), &E);
        float *got = tu_host(&CU, dout, C);
        for (int ch = 0; ch < C; ch++) {
            double want = 0.25;
            for (int i = 0; i < N; i++)
                for (int k = 0; k < hw; k++) want += x[((size_t)i * C + ch) * hw + k];
            if (!(fabs(got[ch] - want) <= 1e-5 * (1 + fabs(want))))
                fail_msg("hw %d: channel %d: %.8g, want %.8g", hw, ch, got[ch], want);
        }
        free(got);
        cudaFree(dx), cudaFree(dout);
    }
}

static void test_conv2d(void **state) {
    (void)state;
    conv_all(TOL);
}

/* TF32 rounds the products' inputs to 10 bits: the convolutions and Linear stay within 1e-2,
 * and the default (FP32) comes back afterwards. BF16 rounds them to 7 bits (2^-8 relative
 * each), summing in FP32: within 5e-2 over these fixtures' sums of up to 576 products. */
static void test_tf32_option(void **state) {
    (void)state;
    taas_cu_set_math(&CU, TAAS_CU_TF32);
    conv_all(TOL_TF32);
    test_linear(TOL_TF32);
    taas_cu_set_math(&CU, TAAS_CU_BF16);
    conv_all(TOL_BF16);
    test_linear(TOL_BF16);
    taas_cu_set_math(&CU, TAAS_CU_FP32);
    conv_case("conv2d_basic", 0, TOL);
}

/* A room smaller than one sample's is refused, not overrun. */
static void test_conv2d_room_too_small(void **state) {
    (void)state;
    taas_conv2d_shape s = {2, 1, 5, 5, 2, 3, 3, 1, 1, 0, 0};
    float *buf = tu_dev(NULL, 256, 0);
    taas_error_clear(&E);
    assert_int_equal(taas_cu_conv2d_forward(&CU, buf, buf, buf, NULL, &s, 0, buf, 10, &E), -1);
    assert_non_null(strstr(E.message, "hold no sample's"));
    cudaFree(buf);
}

static void pool_case(const char *name, int is_max) {
    json_t *j = load(name);
    taas_pool2d_shape s = {cfg(j, "n"), cfg(j, "c"), cfg(j, "h"), cfg(j, "w"), cfg(j, "kh"),
                           cfg(j, "kw"), cfg(j, "sh"), cfg(j, "sw"), cfg(j, "ph"), cfg(j, "pw")};
    size_t nx, ny;
    float *x = dev(j, "x", &nx), *dy = dev(j, "dy", &ny);
    assert_int_equal(ny, (size_t)s.n * s.c * taas_pool2d_out_h(&s) * taas_pool2d_out_w(&s));
    float *y = tu_dev(NULL, ny, 7), *dx = tu_dev(NULL, nx, 7);
    int32_t *am = tu_dev_bytes(NULL, ny * sizeof(int32_t));
    if (is_max) {
        TU_OK(taas_cu_maxpool2d_forward(&CU, y, am, x, &s, &E), &E);
        TU_OK(taas_cu_maxpool2d_backward(&CU, dx, dy, am, &s, &E), &E);
    } else {
        TU_OK(taas_cu_avgpool2d_forward(&CU, y, x, &s, &E), &E);
        TU_OK(taas_cu_avgpool2d_backward(&CU, dx, dy, &s, &E), &E);
    }
    expect(j, "y", y, 0);
    expect(j, "dx", dx, 0);
    cudaFree(x), cudaFree(dy), cudaFree(y), cudaFree(dx), cudaFree(am);
    json_decref(j);
}

static void test_pool2d(void **state) {
    (void)state;
    pool_case("maxpool2d_k2", 1);
    pool_case("maxpool2d_k3p1", 1);
    pool_case("maxpool2d_k2_wide", 1);
    pool_case("avgpool2d_k2", 0);
    pool_case("avgpool2d_k3p1", 0);
}

static void adaptive_case(const char *name) {
    json_t *j = load(name);
    int n = cfg(j, "n"), c = cfg(j, "c"), h = cfg(j, "h"), w = cfg(j, "w"), oh = cfg(j, "oh"), ow = cfg(j, "ow");
    size_t nx, ny;
    float *x = dev(j, "x", &nx), *dy = dev(j, "dy", &ny);
    assert_int_equal(nx, (size_t)n * c * h * w);
    assert_int_equal(ny, (size_t)n * c * oh * ow);
    float *y = tu_dev(NULL, ny, 7), *dx = tu_dev(NULL, nx, 7);
    TU_OK(taas_cu_adaptive_avgpool2d_forward(&CU, y, x, n, c, h, w, oh, ow, &E), &E);
    TU_OK(taas_cu_adaptive_avgpool2d_backward(&CU, dx, dy, n, c, h, w, oh, ow, &E), &E);
    expect(j, "y", y, 0);
    expect(j, "dx", dx, 0);
    cudaFree(x), cudaFree(dy), cudaFree(y), cudaFree(dx);
    json_decref(j);
}

static void test_adaptive_avgpool2d(void **state) {
    (void)state;
    adaptive_case("adaptive_avgpool2d_6x6_3x3"); /* bins that divide the input */
    adaptive_case("adaptive_avgpool2d_7x5_3x2"); /* overlapping bins */
    adaptive_case("adaptive_avgpool2d_4x4_1x1"); /* a ResNet's head */
    adaptive_case("adaptive_avgpool2d_5x5_7x7"); /* more outputs than inputs */
}

/* y = a + b and y += x: PyTorch's float sums bit for bit, whichever input the output is. */
static void test_add_and_accumulate(void **state) {
    (void)state;
    json_t *j = load("add");
    size_t n;
    float *ref = tu_floats(j, "y", &n), *a = dev(j, "a", NULL), *b = dev(j, "b", NULL), *y = tu_dev(NULL, n, 7);
    TU_OK(taas_cu_add(&CU, y, a, b, n, &E), &E);
    float *h = tu_host(&CU, y, n);
    assert_memory_equal(h, ref, n * sizeof *h);
    free(h);
    TU_OK(taas_cu_accumulate(&CU, y, y, n, &E), &E); /* x is y: doubled, exactly */
    h = tu_host(&CU, y, n);
    for (size_t i = 0; i < n; i++) assert_true(h[i] == 2.0f * ref[i]);
    free(h);
    float *a2 = dev(j, "a", NULL), *b2 = dev(j, "b", NULL);
    TU_OK(taas_cu_add(&CU, a2, a2, b, n, &E), &E); /* y is a */
    TU_OK(taas_cu_add(&CU, b2, a, b2, n, &E), &E); /* y is b */
    h = tu_host(&CU, a2, n);
    assert_memory_equal(h, ref, n * sizeof *h);
    free(h);
    h = tu_host(&CU, b2, n);
    assert_memory_equal(h, ref, n * sizeof *h);
    free(h);
    TU_OK(taas_cu_accumulate(&CU, a, b, n, &E), &E);
    h = tu_host(&CU, a, n);
    assert_memory_equal(h, ref, n * sizeof *h);
    free(h), free(ref);
    TU_OK(taas_cu_add(&CU, y, a, b, 0, &E), &E); /* nothing to do */
    cudaFree(a), cudaFree(b), cudaFree(y), cudaFree(a2), cudaFree(b2);
    json_decref(j);
}

/* As PyTorch and the CPU: the first maximum wins a tie, a NaN wins over any number. */
static void test_maxpool_ties_and_nan(void **state) {
    (void)state;
    enum { W = 20, OW = W / 2 };
    const float cases[OW][4] = {{3, 3, 1, 3}, {1, NAN, 5, 2}, {NAN, NAN, 1, 1}, {1, 2, NAN, 9},
                                {-1, -2, -3, -4}, {0, 5, 5, 5}, {-0.0f, 0.0f, 0, 0},
                                {1, 2, 3, 4}, {4, 3, 2, 1}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY}};
    const int32_t want[OW] = {0, 1, 0, W, 0, 1, 0, W + 1, 0, 0}; /* offset in the window */
    float x[2 * W], yw[OW], dyh[OW], *dxh;
    for (int j = 0; j < OW; j++) {
        x[2 * j] = cases[j][0], x[2 * j + 1] = cases[j][1], x[W + 2 * j] = cases[j][2], x[W + 2 * j + 1] = cases[j][3];
        dyh[j] = (float)(j + 1);
    }
    taas_pool2d_shape s = {1, 1, 2, W, 2, 2, 2, 2, 0, 0};
    float *dx_ = tu_dev(x, 2 * W, 0), *dy_ = tu_dev(NULL, OW, 0), *dd = tu_dev(dyh, OW, 0), *gx = tu_dev(NULL, 2 * W, 7);
    int32_t *am = tu_dev_bytes(NULL, OW * sizeof(int32_t)), amh[OW];
    TU_OK(taas_cu_maxpool2d_forward(&CU, dy_, am, dx_, &s, &E), &E);
    TU_OK(taas_cu_maxpool2d_backward(&CU, gx, dd, am, &s, &E), &E);
    float *yh = tu_host(&CU, dy_, OW);
    memcpy(yw, yh, sizeof yw);
    cudaMemcpy(amh, am, sizeof amh, cudaMemcpyDeviceToHost);
    dxh = tu_host(&CU, gx, 2 * W);
    for (int j = 0; j < OW; j++) {
        int32_t at = 2 * j + want[j];
        if (amh[j] != at) fail_msg("window %d: argmax %d, expected %d", j, amh[j], at);
        assert_memory_equal(&yw[j], &x[at], sizeof(float)); /* NaN and the sign of zero too */
        assert_true(dxh[at] == dyh[j]);
    }
    free(yh), free(dxh);
    cudaFree(dx_), cudaFree(dy_), cudaFree(dd), cudaFree(gx), cudaFree(am);
}

static void act_case(const char *name, taas_cu_act kind) {
    json_t *j = load(name);
    size_t n;
    float *x = dev(j, "x", &n), *dy = dev(j, "dy", NULL), *y = tu_dev(NULL, n, 7), *dx = tu_dev(NULL, n, 7);
    float slope = kind == TAAS_CU_LEAKY_RELU ? (float)json_number_value(json_object_get(j, "slope")) : 0;
    TU_OK(taas_cu_act_forward(&CU, kind, y, x, n, slope, &E), &E);
    TU_OK(taas_cu_act_backward(&CU, kind, dx, dy, x, y, n, slope, &E), &E);
    expect(j, "y", y, 0);
    expect(j, "dx", dx, 0);
    cudaFree(x), cudaFree(dy), cudaFree(y), cudaFree(dx);
    json_decref(j);
}

static void test_activations(void **state) {
    (void)state;
    act_case("relu", TAAS_CU_RELU);
    act_case("leaky_relu", TAAS_CU_LEAKY_RELU);
    act_case("tanh", TAAS_CU_TANH);
    act_case("sigmoid", TAAS_CU_SIGMOID);
    act_case("gelu", TAAS_CU_GELU);
}

static void softmax_case(const char *name, int logspace) {
    json_t *j = load(name);
    json_t *shape = json_object_get(j, "x_shape");
    int n = (int)json_integer_value(json_array_get(shape, 0)), c = (int)json_integer_value(json_array_get(shape, 1)), d = 1;
    for (size_t i = 2; i < json_array_size(shape); i++) d *= (int)json_integer_value(json_array_get(shape, i));
    size_t nx;
    float *x = dev(j, "x", &nx), *dy = dev(j, "dy", NULL), *y = tu_dev(NULL, nx, 7), *dx = tu_dev(NULL, nx, 7);
    TU_OK(taas_cu_softmax_forward(&CU, y, x, n, c, d, logspace, &E), &E);
    TU_OK(taas_cu_softmax_backward(&CU, dx, dy, y, n, c, d, logspace, &E), &E);
    expect(j, "y", y, 0);
    expect(j, "dx", dx, 0);
    cudaFree(x), cudaFree(dy), cudaFree(y), cudaFree(dx);
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
    int n = (int)json_integer_value(json_array_get(shape, 0)), c = (int)json_integer_value(json_array_get(shape, 1));
    int hw = 1;
    for (size_t i = 2; i < json_array_size(shape); i++) hw *= (int)json_integer_value(json_array_get(shape, i));
    float momentum = (float)json_number_value(json_object_get(j, "momentum"));
    float eps = (float)json_number_value(json_object_get(j, "eps"));
    size_t nx;
    float *x = dev(j, "x", &nx), *dy = dev(j, "dy", NULL), *g = dev(j, "gamma", NULL), *b = dev(j, "beta", NULL);
    float *rm = dev(j, "running_mean0", NULL), *rv = dev(j, "running_var0", NULL);
    float *y = tu_dev(NULL, nx, 7), *dx = tu_dev(NULL, nx, 7), *mean = tu_dev(NULL, (size_t)c, 0);
    float *invstd = tu_dev(NULL, (size_t)c, 0), *dg = tu_dev(NULL, (size_t)c, 1), *db = tu_dev(NULL, (size_t)c, 1);
    TU_OK(taas_cu_batchnorm_forward_train(&CU, y, mean, invstd, rm, rv, x, g, b, n, c, hw, momentum, eps, &E), &E);
    expect(j, "y", y, 0);
    expect(j, "running_mean1", rm, 0);
    expect(j, "running_var1", rv, 0);
    TU_OK(taas_cu_batchnorm_backward(&CU, dx, dg, db, dy, x, mean, invstd, g, n, c, hw, &E), &E);
    expect(j, "dx", dx, 0);
    expect(j, "dgamma", dg, 1);
    expect(j, "dbeta", db, 1);
    /* eval mode, with the running stats this step produced */
    float *ex = dev(j, "eval_x", NULL), *edy = dev(j, "eval_dy", NULL);
    tu_zero(&CU, dg, (size_t)c);
    tu_zero(&CU, db, (size_t)c);
    TU_OK(taas_cu_batchnorm_forward_eval(&CU, y, ex, g, b, rm, rv, n, c, hw, eps, &E), &E);
    expect(j, "eval_y", y, 0);
    TU_OK(taas_cu_batchnorm_backward_eval(&CU, dx, dg, db, edy, ex, g, rm, rv, n, c, hw, eps, &E), &E);
    expect(j, "eval_dx", dx, 0);
    expect(j, "eval_dgamma", dg, 0);
    expect(j, "eval_dbeta", db, 0);
    cudaFree(x), cudaFree(dy), cudaFree(g), cudaFree(b), cudaFree(rm), cudaFree(rv), cudaFree(y), cudaFree(dx);
    cudaFree(mean), cudaFree(invstd), cudaFree(dg), cudaFree(db), cudaFree(ex), cudaFree(edy);
    json_decref(j);
}

static void test_batchnorm(void **state) {
    (void)state;
    bn_case("batchnorm1d");
    bn_case("batchnorm2d");
}

static void test_batchnorm_batch_of_one(void **state) {
    (void)state;
    float *buf = tu_dev(NULL, 16, 1);
    taas_error_clear(&E);
    assert_int_equal(taas_cu_batchnorm_forward_train(&CU, buf, buf, buf, NULL, NULL, buf, buf, buf, 1, 3, 1, 0.1f,
                                                     1e-5f, &E), -1);
    assert_string_equal(E.ename, "TaasValueError");
    assert_non_null(strstr(E.message, "more than 1 value per channel"));
    assert_non_null(strstr(E.message, "1 x 3 x 1"));
    assert_non_null(strstr(E.hint, "batch size of at least 2"));
    cudaFree(buf);
}

/* The GPU's masks are the CPU's, element by element, and so are the products. */
static void test_dropout_masks_are_the_cpus(void **state) {
    (void)state;
    const size_t n = 100003;  /* not a multiple of a block */
    const float p = 0.3f;
    float *x = malloc(n * sizeof *x), *dyh = malloc(n * sizeof *dyh), *y = malloc(n * sizeof *y),
          *m = malloc(n * sizeof *m), *dxh = malloc(n * sizeof *dxh);
    for (size_t i = 0; i < n; i++) x[i] = (float)i * 0.001f - 3.0f, dyh[i] = 1.0f + (float)(i % 7);
    const uint64_t offset = (5ull * 13 + 2) << 32;  /* as the model draws: (step, layer) */
    taas_dropout_forward(y, m, x, n, p, 42, offset);
    taas_dropout_backward(dxh, dyh, m, n);
    float *dx_ = tu_dev(x, n, 0), *ddy = tu_dev(dyh, n, 0), *gy = tu_dev(NULL, n, 7), *gm = tu_dev(NULL, n, 7),
          *gdx = tu_dev(NULL, n, 7);
    TU_OK(taas_cu_dropout_forward(&CU, gy, gm, dx_, n, p, 42, offset, &E), &E);
    TU_OK(taas_cu_dropout_backward(&CU, gdx, ddy, gm, n, &E), &E);
    float *hy = tu_host(&CU, gy, n), *hm = tu_host(&CU, gm, n), *hdx = tu_host(&CU, gdx, n);
    assert_memory_equal(hm, m, n * sizeof *m);
    assert_memory_equal(hy, y, n * sizeof *y);
    assert_memory_equal(hdx, dxh, n * sizeof *dxh);
    free(hy), free(hm), free(hdx);
    cudaFree(dx_), cudaFree(ddy), cudaFree(gy), cudaFree(gm), cudaFree(gdx);
    /* Dropout2d: whole channels, the CPU's channel masks */
    const int nn = 50, c = 70, hw = 6;
    size_t total = (size_t)nn * c * hw;
    taas_dropout2d_forward(y, m, x, nn, c, hw, 0.5f, 7, 99);
    float *gx2 = tu_dev(x, total, 0), *gy2 = tu_dev(NULL, total, 7), *gm2 = tu_dev(NULL, (size_t)nn * c, 7);
    TU_OK(taas_cu_dropout2d_forward(&CU, gy2, gm2, gx2, nn, c, hw, 0.5f, 7, 99, &E), &E);
    hy = tu_host(&CU, gy2, total), hm = tu_host(&CU, gm2, (size_t)nn * c);
    assert_memory_equal(hm, m, (size_t)nn * c * sizeof *m);
    assert_memory_equal(hy, y, total * sizeof *y);
    TU_OK(taas_cu_dropout2d_backward(&CU, gy2, gx2, gm2, nn, c, hw, &E), &E);  /* the same product */
    free(hy);
    hy = tu_host(&CU, gy2, total);
    assert_memory_equal(hy, y, total * sizeof *y);
    free(hy), free(hm);
    cudaFree(gx2), cudaFree(gy2), cudaFree(gm2);
    free(x), free(dyh), free(y), free(m), free(dxh);
}

/* With `var`=1 a library (non-NULL `lib`) ran `ran` of the passes and left `left` to taas's
 * own; without it there is none and nothing went through it. */
static void check_route(const char *var, const void *lib, long ran, long left, const char *what) {
    if (taas_cu_env_on(var)) {
        assert_non_null(lib);
        if (ran <= 0) fail_msg("%s=1: nothing went through %s", var, what);
        printf("%s: %ld passes, %ld left to taas's own\n", what, ran, left);
    } else {
        assert_null(lib);
        assert_int_equal(ran + left, 0);
    }
}

/* The .lt copy of this test (TAAS_CUDA_LT=1) ran its products through cuBLASLt, not through
 * cublasGemmEx after a silent fallback, and the .cudnn copy (TAAS_CUDA_CUDNN=1) its
 * convolutions through cuDNN; the plain copy neither. Last, after the tests above. */
static void test_products_went_where_asked(void **state) {
    (void)state;
    check_route("TAAS_CUDA_LT", CU.lt, CU.lt_products, CU.lt_fallbacks, "cuBLASLt");
    check_route("TAAS_CUDA_CUDNN", CU.dnn, CU.dnn_convs, CU.dnn_fallbacks, "cuDNN");
}

/* Whatever a failed test left set: FP32 for the next (a tolerance judged in TF32 would pass
 * what FP32 should not). */
static int reset_math(void **state) {
    (void)state;
    taas_cu_set_math(&CU, TAAS_CU_FP32);
    return 0;
}

int main(void) {
    tu_cuda_require(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_fp32),
        cmocka_unit_test(test_channel_sum),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv2d_room_too_small),
        cmocka_unit_test_teardown(test_tf32_option, reset_math),
        cmocka_unit_test(test_pool2d),
        cmocka_unit_test(test_adaptive_avgpool2d),
        cmocka_unit_test(test_add_and_accumulate),
        cmocka_unit_test(test_maxpool_ties_and_nan),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_batchnorm_batch_of_one),
        cmocka_unit_test(test_dropout_masks_are_the_cpus),
        cmocka_unit_test(test_products_went_where_asked),
    };
    return cmocka_run_group_tests(tests, tu_cuda_setup, tu_cuda_teardown);
}
