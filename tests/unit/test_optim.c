/* workers/train/optim.c against real PyTorch 1.13 (tests/data/optim/optim.json, made by
 * tests/gen_optim_ref.py): every optimizer configuration runs 20 steps on the linear
 * least-squares model loss = mean((X @ w + b - y)^2), whose gradient this test computes
 * itself; the loss at each step and the final parameters must match within 1e-4 relative.
 * Also the config checks, with their messages. */
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

#include "optim.h"
#include "optim_testutil.h"
#include "fixture_testutil.h"

TU_FIXTURE_GROUP(REF, "optim/optim.json")

static void floats(json_t *arr, float *out, size_t n) {
    assert_int_equal(json_array_size(arr), n);
    for (size_t i = 0; i < n; i++) out[i] = (float)json_number_value(json_array_get(arr, i));
}

static void close_to(double got, double want, const char *what, size_t case_i, size_t i) {
    if (!(fabs(got - want) <= 1e-4 * fabs(want) + 1e-7)) {
        fprintf(stderr, "case %zu %s[%zu]: got %.9g, torch %.9g\n", case_i, what, i, got, want);
        fail();
    }
}

static void test_twenty_steps_match_torch(void **state) {
    (void)state;
    int n = (int)json_integer_value(json_object_get(REF, "n")), d = (int)json_integer_value(json_object_get(REF, "d"));
    float X[64], y[16], init[8], p[8], g[8], want[8];
    assert_true(n <= 16 && d < 8);
    floats(json_object_get(REF, "X"), X, (size_t)n * d);
    floats(json_object_get(REF, "y"), y, (size_t)n);
    floats(json_object_get(REF, "init"), init, (size_t)d + 1);
    json_t *cases = json_object_get(REF, "cases"), *c;
    size_t ci;
    assert_true(json_array_size(cases) >= 10);
    json_array_foreach(cases, ci, c) {
        taas_optim_config cfg = tu_optim_config(json_string_value(json_object_get(c, "optimizer")),
                                            json_object_get(c, "options"));
        taas_error err;
        taas_error_clear(&err);
        assert_int_equal(taas_optim_config_check(&cfg, &err), 0);
        size_t np = (size_t)d + 1, ns = taas_optim_state_floats(&cfg, np);
        float *st = calloc(ns + 1, sizeof *st);
        memcpy(p, init, np * sizeof *p);
        json_t *losses = json_object_get(c, "losses");
        assert_int_equal(json_array_size(losses), 20);
        for (long step = 1; step <= 20; step++) {
            float loss = tu_lsq(X, y, p, g, n, d);
            close_to(loss, json_number_value(json_array_get(losses, (size_t)step - 1)), "loss", ci, (size_t)step);
            taas_optim_step(&cfg, p, g, st, np, step);
        }
        floats(json_object_get(c, "final"), want, np);
        for (size_t j = 0; j < np; j++) close_to(p[j], want[j], "param", ci, j);
        free(st);
    }
}

static void test_state_sizes(void **state) {
    (void)state;
    taas_optim_config c;
    taas_optim_config_default(&c, TAAS_OPTIM_SGD);
    assert_int_equal(taas_optim_state_floats(&c, 10), 0);
    c.momentum = 0.9;
    assert_int_equal(taas_optim_state_floats(&c, 10), 10);
    taas_optim_config_default(&c, TAAS_OPTIM_ADAMW);
    assert_int_equal(taas_optim_state_floats(&c, 10), 20);
    c.amsgrad = 1;
    assert_int_equal(taas_optim_state_floats(&c, 10), 30);
    taas_optim_config_default(&c, TAAS_OPTIM_ADADELTA);
    assert_int_equal(taas_optim_state_floats(&c, 10), 20);
    taas_optim_config_default(&c, TAAS_OPTIM_RMSPROP);
    assert_int_equal(taas_optim_state_floats(&c, 10), 10);
    c.momentum = 0.5, c.centered = 1;
    assert_int_equal(taas_optim_state_floats(&c, 10), 30);
}

/* A buffer large enough for the OpenMP path gives the same numbers as small pieces of it,
 * for every optimizer (both are vectorised; the pieces are split differently). */
static void parallel_case(taas_optim_config c) {
    const size_t n = 100000;
    size_t ns = taas_optim_state_floats(&c, n) / n;
    float *p1 = malloc(n * sizeof *p1), *p2 = malloc(n * sizeof *p2), *g = malloc(n * sizeof *g);
    float *s1 = calloc(3 * n, sizeof *s1), *s2 = calloc(3 * n, sizeof *s2);
    for (size_t i = 0; i < n; i++) {
        p1[i] = p2[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
        g[i] = (float)((i * 104729) % 997) / 498.5f - 1.0f;
    }
    for (long step = 1; step <= 3; step++) {
        taas_optim_step(&c, p1, g, s1, n, step);
        for (size_t off = 0; off < n; off += 1000) {
            float tmp[3000];
            for (size_t b = 0; b < ns; b++) memcpy(tmp + b * 1000, s2 + b * n + off, 1000 * sizeof *tmp);
            taas_optim_step(&c, p2 + off, g + off, tmp, 1000, step);
            for (size_t b = 0; b < ns; b++) memcpy(s2 + b * n + off, tmp + b * 1000, 1000 * sizeof *tmp);
        }
    }
    assert_memory_equal(p1, p2, n * sizeof *p1);
    free(p1), free(p2), free(g), free(s1), free(s2);
}

static void test_parallel_path_matches_serial(void **state) {
    (void)state;
    taas_optim_config c;
    taas_optim_config_default(&c, TAAS_OPTIM_ADAM);
    c.weight_decay = 0.01;
    parallel_case(c);
    taas_optim_config_default(&c, TAAS_OPTIM_SGD);
    c.momentum = 0.9, c.nesterov = 1;
    parallel_case(c);
    taas_optim_config_default(&c, TAAS_OPTIM_ADADELTA);
    parallel_case(c);
    taas_optim_config_default(&c, TAAS_OPTIM_RMSPROP);
    c.momentum = 0.5, c.centered = 1;
    parallel_case(c);
}

static void expect_bad(taas_optim_config c, const char *msg, const char *hint) {
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_optim_config_check(&c, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    if (!strstr(err.message, msg) || !strstr(err.hint, hint)) {
        fprintf(stderr, "message '%s' hint '%s'\n", err.message, err.hint);
        fail();
    }
}

static void test_bad_configs_are_refused(void **state) {
    (void)state;
    taas_optim_config c;
    taas_optim_config_default(&c, TAAS_OPTIM_SGD);
    c.lr = -0.1;
    expect_bad(c, "SGD: invalid learning rate -0.1", "lr must be >= 0");
    taas_optim_config_default(&c, TAAS_OPTIM_SGD);
    c.nesterov = 1;
    expect_bad(c, "nesterov=True needs momentum > 0 and dampening = 0", "momentum");
    c.momentum = 0.9, c.dampening = 0.1;
    expect_bad(c, "dampening=0.1", "dampening at 0");
    taas_optim_config_default(&c, TAAS_OPTIM_ADAM);
    c.beta2 = 1.0;
    expect_bad(c, "Adam: invalid beta parameter at index 1 1", "[0, 1)");
    taas_optim_config_default(&c, TAAS_OPTIM_ADAMW);
    c.weight_decay = -1;
    expect_bad(c, "AdamW: invalid weight_decay -1", ">= 0");
    taas_optim_config_default(&c, TAAS_OPTIM_ADADELTA);
    c.rho = 1.5;
    expect_bad(c, "Adadelta: invalid rho value 1.5", "[0, 1]");
    taas_optim_config_default(&c, TAAS_OPTIM_RMSPROP);
    c.eps = -1e-8;
    expect_bad(c, "RMSprop: invalid epsilon value", "eps must be >= 0");
    taas_optim_config_default(&c, TAAS_OPTIM_RMSPROP);
    c.alpha = -0.5;
    expect_bad(c, "RMSprop: invalid alpha value -0.5", "alpha=0.99");
    c.alpha = 0.99, c.momentum = NAN;
    expect_bad(c, "invalid momentum", "momentum=0.9");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twenty_steps_match_torch),
        cmocka_unit_test(test_state_sizes),
        cmocka_unit_test(test_parallel_path_matches_serial),
        cmocka_unit_test(test_bad_configs_are_refused),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
