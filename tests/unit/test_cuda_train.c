/* The GPU's losses and optimizers (workers/train/cuda/cu_loss.h, cu_optim.h) against the
 * PyTorch fixtures of test_loss.c and test_optim.c, with their tolerances: loss values within
 * 1e-5 and gradients within 1e-4 relative; every optimizer configuration 20 steps on the
 * least-squares model, the loss at each step and the final parameters within 1e-4 relative.
 * Also: rows far wider than a warp against the CPU's loss.c; each optimizer's step gives the
 * CPU's bits (optim.c) on a large buffer. Exits 77 (skipped) where there is no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmocka_testutil.h"
#include "cu_loss.h"
#include "cu_optim.h"
#include "fixture_testutil.h"
#include "loss.h"
#include "optim.h"
#include "optim_testutil.h"
#include "test_cuda_util.h"

TU_CUDA_GROUP

static void close_to(double got, double want, double rel, const char *what, size_t i) {
    if (!(fabs(got - want) <= rel * fabs(want) + 1e-7)) fail_msg("%s[%zu]: got %.9g, torch %.9g", what, i, got, want);
}

/* ---- losses ---- */

/* The case of that kind, label_smoothing and ignore_index (absent in the file: -100). */
static json_t *find_case(json_t *ref, const char *kind, double ls, json_int_t ignore_index) {
    size_t i;
    json_t *c;
    json_array_foreach(ref, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "kind")), kind) != 0) continue;
        json_t *s = json_object_get(c, "label_smoothing"), *ii = json_object_get(c, "ignore_index");
        if ((ii ? json_integer_value(ii) : -100) != ignore_index) continue;
        if (!s || fabs(json_number_value(s) - ls) < 1e-12) return c;
    }
    return NULL;
}

/* One loss case on the GPU: the mean of the counted rows against "loss" (null: torch's nan,
 * every row ignored), the gradient against "grad"; the host counts the rows, as cu_engine.c. */
static void loss_case(json_t *c, int ce, float smoothing) {
    int n = (int)json_integer_value(json_object_get(c, "n")), k = (int)json_integer_value(json_object_get(c, "c"));
    json_t *ii = json_object_get(c, "ignore_index"), *want_loss = json_object_get(c, "loss");
    int64_t ignore = ii ? json_integer_value(ii) : -100;
    size_t cnt;
    float *x = tu_floats(c, "input", &cnt), *want = tu_floats(c, "grad", NULL);
    int64_t t[64];
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) t[i] = json_integer_value(json_array_get(json_object_get(c, "target"), (size_t)i));
    int counted = taas_loss_counted(t, n, ignore);
    float scale = counted ? 1.0f / (float)counted : 0.0f;
    float *dx = tu_dev(x, cnt, 0), *dd = tu_dev(NULL, cnt, 7);
    int64_t *dt = tu_dev_bytes(t, (size_t)n * sizeof *t);
    double *rows = tu_dev_bytes(NULL, (size_t)n * sizeof(double)), hrows[64];
    if (ce) TU_OK(taas_cu_cross_entropy_rows(&CU, rows, dd, dx, dt, n, k, smoothing, ignore, scale, &E), &E);
    else TU_OK(taas_cu_nll_rows(&CU, rows, dd, dx, dt, n, k, ignore, scale, &E), &E);
    float *grad = tu_host(&CU, dd, cnt);
    tu_get(&CU, hrows, rows, (size_t)n * sizeof(double));
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (t[i] == ignore && hrows[i] != 0.0) fail_msg("ignored row %d: loss %g, not 0", i, hrows[i]);
        sum += hrows[i];
    }
    if (json_is_null(want_loss)) assert_int_equal(counted, 0);
    else close_to((float)(sum / counted), json_number_value(want_loss), 1e-5, ce ? "ce loss" : "nll loss", 0);
    for (size_t i = 0; i < cnt; i++) close_to(grad[i], want[i], 1e-4, ce ? "ce grad" : "nll grad", i);
    /* without a gradient buffer: the same losses */
    double again[64];
    if (ce) TU_OK(taas_cu_cross_entropy_rows(&CU, rows, NULL, dx, dt, n, k, smoothing, ignore, scale, &E), &E);
    else TU_OK(taas_cu_nll_rows(&CU, rows, NULL, dx, dt, n, k, ignore, scale, &E), &E);
    tu_get(&CU, again, rows, (size_t)n * sizeof(double));
    assert_memory_equal(again, hrows, (size_t)n * sizeof(double));
    free(x), free(want), free(grad);
    cudaFree(dx), cudaFree(dd), cudaFree(dt), cudaFree(rows);
}

static void test_losses_match_torch(void **state) {
    (void)state;
    json_t *ref = tu_fixture_load("optim/loss.json");
    assert_non_null(ref);
    json_t *nll = find_case(ref, "nll", 0, -100);
    assert_non_null(nll);
    loss_case(nll, 0, 0);
    const double smoothing[] = {0.0, 0.1, 0.35};
    for (int s = 0; s < 3; s++) {
        json_t *c = find_case(ref, "cross_entropy", smoothing[s], -100);
        assert_non_null(c);
        loss_case(c, 1, (float)smoothing[s]);
    }
    /* ignore_index: some targets (out of range for -1), and all of them (2) */
    const struct { int ce; double ls; json_int_t ignore; } ignoring[] = {
        {0, 0, 1}, {1, 0.0, 1}, {1, 0.1, 1}, {0, 0, -1}, {1, 0.35, -1}, {0, 0, 2}, {1, 0.1, 2},
    };
    for (size_t i = 0; i < sizeof ignoring / sizeof *ignoring; i++) {
        json_t *c = find_case(ref, ignoring[i].ce ? "cross_entropy" : "nll", ignoring[i].ls, ignoring[i].ignore);
        assert_non_null(c);
        loss_case(c, ignoring[i].ce, (float)ignoring[i].ls);
    }
    json_decref(ref);
}

/* Rows far wider than a warp (a GPT-2 head's vocabulary is 50,257), against the CPU's loss.c:
 * the mean loss, every gradient, with and without smoothing, an ignored row, targets at both
 * ends of a row; and the accuracy's first highest value where the ties and the NaNs fall in
 * different lanes. */
static void test_wide_rows(void **state) {
    (void)state;
    enum { N = 6, C = 5003 };
    static float x[N * C], probs[N * C], want[N * C];
    const int64_t t[N] = {3, C - 1, -100, 0, 2500, 17};
    for (size_t i = 0; i < (size_t)N * C; i++) x[i] = (float)(((i * 2654435761u) % 20011) / 1000.0 - 10.0);
    float *dx = tu_dev(x, (size_t)N * C, 0), *dd = tu_dev(NULL, (size_t)N * C, 7);
    int64_t *dt = tu_dev_bytes(t, sizeof t);
    double *rows = tu_dev_bytes(NULL, N * sizeof(double)), hrows[N];
    int counted = taas_loss_counted(t, N, -100);
    const float smoothing[] = {0.0f, 0.1f};
    for (int k = 0; k < 2; k++) {
        float loss;
        TU_OK(taas_cross_entropy_forward(&loss, probs, x, t, N, C, smoothing[k], -100, &E), &E);
        taas_cross_entropy_backward(want, probs, t, N, C, smoothing[k], -100, 1.0f);
        TU_OK(taas_cu_cross_entropy_rows(&CU, rows, dd, dx, dt, N, C, smoothing[k], -100, 1.0f / (float)counted, &E),
              &E);
        float *grad = tu_host(&CU, dd, (size_t)N * C);
        tu_get(&CU, hrows, rows, sizeof hrows);
        double sum = 0;
        for (int i = 0; i < N; i++) sum += hrows[i];
        close_to((float)(sum / counted), loss, 1e-6, "wide ce loss", (size_t)k);
        for (size_t i = 0; i < (size_t)N * C; i++) close_to(grad[i], want[i], 1e-5, "wide ce grad", i);
        free(grad);
    }
    /* the highest values: row 0 at 4000 and 4001 (4000 wins), row 1 NaN first (0 wins), row 2
     * a NaN at 5 and the highest at 37, row 3 -0.0 at 64 and +0.0 at 33 over negatives (33) */
    for (size_t i = 0; i < (size_t)N * C; i++) x[i] = -1.0f - (float)(i % 7);
    x[0 * C + 4000] = x[0 * C + 4001] = 5.0f;
    x[1 * C + 0] = NAN, x[1 * C + 9] = 9.0f;
    x[2 * C + 5] = NAN, x[2 * C + 37] = 3.0f;
    x[3 * C + 64] = -0.0f, x[3 * C + 33] = 0.0f;
    int64_t at[N];
    for (int i = 0; i < N; i++) {  /* the CPU's loop (engine_cpu.c) */
        const float *row = x + (size_t)i * C;
        int best = 0;
        for (int q = 1; q < C; q++)
            if (row[q] > row[best]) best = q;
        at[i] = best + (i == N - 1);  /* the last row's target is not its highest */
    }
    assert_true(at[0] == 4000 && at[1] == 0 && at[2] == 37 && at[3] == 33);
    const int want_right[N] = {1, 1, 1, 1, 1, 0};
    float *dx2 = tu_dev(x, (size_t)N * C, 0);
    int64_t *dat = tu_dev_bytes(at, sizeof at);
    int *r = tu_dev_bytes(NULL, sizeof want_right), got[N];
    TU_OK(taas_cu_argmax_right(&CU, r, dx2, dat, N, C, -100, &E), &E);
    tu_get(&CU, got, r, sizeof got);
    assert_memory_equal(got, want_right, sizeof want_right);
    cudaFree(dx), cudaFree(dd), cudaFree(dt), cudaFree(rows), cudaFree(dx2), cudaFree(dat), cudaFree(r);
}

/* The first highest value wins, as the CPU's loop (engine_cpu.c) picks it: a tie goes to the
 * first, and a NaN in the first place stays the highest (nothing is greater than it). A row
 * whose target is ignore_index is never right. */
static void test_argmax_right(void **state) {
    (void)state;
    const float out[5 * 3] = {0.1f, 0.9f, 0.9f, 2, 1, 0, NAN, 1, 0, -1, -1, -2, 0, 0, 1};
    const int64_t t[5] = {1, 0, 0, 0, 0};
    const int want[5] = {1, 1, 1, 1, 0}, ignoring0[5] = {1, 0, 0, 0, 0};
    float *d = tu_dev(out, 15, 0);
    int64_t *dt = tu_dev_bytes(t, sizeof t);
    int *r = tu_dev_bytes(NULL, sizeof want), got[5];
    TU_OK(taas_cu_argmax_right(&CU, r, d, dt, 5, 3, -100, &E), &E);
    tu_get(&CU, got, r, sizeof got);
    assert_memory_equal(got, want, sizeof want);
    TU_OK(taas_cu_argmax_right(&CU, r, d, dt, 5, 3, 0, &E), &E);
    tu_get(&CU, got, r, sizeof got);
    assert_memory_equal(got, ignoring0, sizeof ignoring0);
    cudaFree(d), cudaFree(dt), cudaFree(r);
}

/* ---- optimizers ---- */

/* Each step: the gradient on the host from the GPU's parameters, the step on the GPU. */
static void test_twenty_steps_match_torch(void **state) {
    (void)state;
    json_t *ref = tu_fixture_load("optim/optim.json");
    assert_non_null(ref);
    int n = (int)json_integer_value(json_object_get(ref, "n")), d = (int)json_integer_value(json_object_get(ref, "d"));
    size_t np = (size_t)d + 1;
    size_t nx, ny, ninit;
    float *X = tu_floats(ref, "X", &nx), *y = tu_floats(ref, "y", &ny), *init = tu_floats(ref, "init", &ninit);
    float g[16];
    assert_true(n >= 1 && d >= 1 && np <= 16);
    assert_true(nx == (size_t)n * d && ny == (size_t)n && ninit == np);
    json_t *cases = json_object_get(ref, "cases"), *c;
    size_t ci;
    assert_true(json_array_size(cases) >= 10);
    json_array_foreach(cases, ci, c) {
        taas_optim_config cfg = tu_optim_config(json_string_value(json_object_get(c, "optimizer")),
                                            json_object_get(c, "options"));
        assert_int_equal(taas_optim_config_check(&cfg, &E), 0);
        size_t ns = taas_optim_state_floats(&cfg, np);
        float *dp = tu_dev(init, np, 0), *dg = tu_dev(NULL, np, 0), *st = tu_dev(NULL, ns, 0);
        json_t *losses = json_object_get(c, "losses");
        assert_int_equal(json_array_size(losses), 20);
        for (long step = 1; step <= 20; step++) {
            float *p = tu_host(&CU, dp, np);
            float loss = tu_lsq(X, y, p, g, n, d);
            free(p);
            close_to(loss, json_number_value(json_array_get(losses, (size_t)step - 1)), 1e-4, "loss", ci);
            if (cudaMemcpy(dg, g, np * sizeof *g, cudaMemcpyHostToDevice) != cudaSuccess || cudaDeviceSynchronize())
                fail_msg("copying the gradient to the GPU failed");
            TU_OK(taas_cu_optim_step(&CU, &cfg, dp, dg, st, np, step, &E), &E);
        }
        float *p = tu_host(&CU, dp, np), *want = tu_floats(c, "final", NULL);
        for (size_t j = 0; j < np; j++) close_to(p[j], want[j], 1e-4, "param", ci);
        free(p), free(want);
        cudaFree(dp), cudaFree(dg), cudaFree(st);
    }
    free(X), free(y), free(init);
    json_decref(ref);
}

/* Three steps of the GPU and of optim.c from the same start: the same bits. */
static void same_bits(taas_optim_config c) {
    const size_t n = 100003;
    size_t ns = taas_optim_state_floats(&c, n);
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *s = calloc(ns + 1, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
        g[i] = (float)((i * 104729) % 997) / 498.5f - 1.0f;
    }
    float *dp = tu_dev(p, n, 0), *dg = tu_dev(g, n, 0), *ds = tu_dev(NULL, ns, 0);
    for (long step = 1; step <= 3; step++) {
        taas_optim_step(&c, p, g, s, n, step);
        TU_OK(taas_cu_optim_step(&CU, &c, dp, dg, ds, n, step, &E), &E);
    }
    float *gp = tu_host(&CU, dp, n), *gs = tu_host(&CU, ds, ns);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&gp[i], &p[i], sizeof *p))
            fail_msg("%s: parameter %zu is %.9g on the GPU, %.9g on the CPU", taas_optim_name(c.kind), i, gp[i], p[i]);
    assert_memory_equal(gs, s, ns * sizeof *s);
    free(p), free(g), free(s), free(gp), free(gs);
    cudaFree(dp), cudaFree(dg), cudaFree(ds);
}

static void test_steps_give_the_cpus_bits(void **state) {
    (void)state;
    taas_optim_config c;
    taas_optim_config_default(&c, TAAS_OPTIM_SGD);
    c.lr = 0.1, c.momentum = 0.9, c.nesterov = 1, c.weight_decay = 0.01;
    same_bits(c);
    c.nesterov = 0, c.dampening = 0.3;
    same_bits(c);
    taas_optim_config_default(&c, TAAS_OPTIM_ADAM);
    c.weight_decay = 0.01, c.amsgrad = 1;
    same_bits(c);
    taas_optim_config_default(&c, TAAS_OPTIM_ADAMW);
    same_bits(c);
    taas_optim_config_default(&c, TAAS_OPTIM_ADADELTA);
    c.weight_decay = 0.001;
    same_bits(c);
    taas_optim_config_default(&c, TAAS_OPTIM_RMSPROP);
    c.momentum = 0.5, c.centered = 1;
    same_bits(c);
    taas_optim_config_default(&c, TAAS_OPTIM_RMSPROP);
    same_bits(c);
}

static void test_scale(void **state) {
    (void)state;
    float h[5] = {1, -2, 3.5f, 0, 1e-3f}, *d = tu_dev(h, 5, 0);
    TU_OK(taas_cu_scale(&CU, d, 5, 0.25f, &E), &E);
    float *got = tu_host(&CU, d, 5);
    for (int i = 0; i < 5; i++) assert_true(got[i] == h[i] * 0.25f);
    free(got);
    cudaFree(d);
}

int main(void) {
    tu_cuda_require(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_losses_match_torch),
        cmocka_unit_test(test_argmax_right),
        cmocka_unit_test(test_wide_rows),
        cmocka_unit_test(test_twenty_steps_match_torch),
        cmocka_unit_test(test_steps_give_the_cpus_bits),
        cmocka_unit_test(test_scale),
    };
    return cmocka_run_group_tests(tests, tu_cuda_setup, tu_cuda_teardown);
}
