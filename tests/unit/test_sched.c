/* workers/train/lr_sched.c against real PyTorch 1.13 (tests/data/optim/sched.json, made by
 * tests/gen_optim_ref.py): the lr get_last_lr() gives after each scheduler.step() (and
 * OneCycleLR's cycled momentum) within 1e-15 relative: torch's recursive forms are
 * reproduced operation for operation (CosineAnnealingLR's closed form is off by ~1e-14 and
 * fails here), plus the errors a user can reach. */
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

#include "lr_sched.h"
#include "fixture_testutil.h"

TU_FIXTURE_GROUP(REF, "optim/sched.json")

static double num(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }

static void close_to(double got, double want, const char *what, size_t case_i, size_t i) {
    if (!(fabs(got - want) <= 1e-15 * fabs(want) + 1e-18)) {
        fprintf(stderr, "case %zu %s at step %zu: got %.17g, torch %.17g\n", case_i, what, i, got, want);
        fail();
    }
}

/* A case's scheduler as the fit would configure it. */
static taas_sched_kind config_of(json_t *c, taas_sched_config *out) {
    const char *kind = json_string_value(json_object_get(c, "kind"));
    taas_sched_kind k = !strcmp(kind, "step") ? TAAS_SCHED_STEP : !strcmp(kind, "multistep") ? TAAS_SCHED_MULTISTEP
                      : !strcmp(kind, "exponential") ? TAAS_SCHED_EXPONENTIAL : !strcmp(kind, "cosine") ? TAAS_SCHED_COSINE
                      : !strcmp(kind, "linear") ? TAAS_SCHED_LINEAR : TAAS_SCHED_ONECYCLE;
    taas_sched_config cfg;
    {
        taas_sched_config_default(&cfg, k);
        cfg.base_lr = num(c, "lr");
        if (json_object_get(c, "gamma")) cfg.gamma = num(c, "gamma");
        cfg.step_size = (long)json_integer_value(json_object_get(c, "step_size"));
        json_t *ms = json_object_get(c, "milestones");
        cfg.n_milestones = (int)json_array_size(ms);
        for (int i = 0; i < cfg.n_milestones; i++) cfg.milestones[i] = (long)json_integer_value(json_array_get(ms, (size_t)i));
        cfg.t_max = (long)json_integer_value(json_object_get(c, "t_max"));
        cfg.eta_min = num(c, "eta_min");
        if (k == TAAS_SCHED_ONECYCLE) {
            cfg.max_lr = num(c, "max_lr");
            cfg.total_steps = (long)json_integer_value(json_object_get(c, "total_steps"));
            cfg.pct_start = num(c, "pct_start");
            if (json_object_get(c, "div_factor")) {
                cfg.div_factor = num(c, "div_factor");
                cfg.final_div_factor = num(c, "final_div_factor");
                cfg.base_momentum = num(c, "base_momentum");
                cfg.max_momentum = num(c, "max_momentum");
            }
        }
        if (k == TAAS_SCHED_LINEAR) {
            cfg.start_factor = num(c, "start_factor");
            cfg.end_factor = num(c, "end_factor");
            cfg.total_iters = (long)json_integer_value(json_object_get(c, "total_iters"));
        }
    }
    *out = cfg;
    return k;
}

static void test_lr_sequences_match_torch(void **state) {
    (void)state;
    json_t *c;
    size_t ci;
    int seen[7] = {0};
    json_array_foreach(REF, ci, c) {
        taas_sched s;
        taas_error err;
        taas_error_clear(&err);
        json_t *parts = json_object_get(c, "parts");
        if (parts) {  /* SequentialLR */
            taas_sched_config cfg[TAAS_SCHED_MAX_PARTS];
            long ms[TAAS_SCHED_MAX_PARTS];
            size_t np = json_array_size(parts);
            for (size_t p = 0; p < np; p++) {
                config_of(json_array_get(parts, p), &cfg[p]);
                if (p + 1 < np) ms[p] = (long)json_integer_value(json_array_get(json_object_get(c, "milestones"), p));
            }
            assert_int_equal(taas_sched_init_sequential(&s, cfg, (int)np, ms, &err), 0);
            seen[6] = 1;
        } else {
            taas_sched_config cfg;
            seen[config_of(c, &cfg)] = 1;
            assert_int_equal(taas_sched_init(&s, &cfg, &err), 0);
        }
        json_t *lrs = json_object_get(c, "lrs"), *moms = json_object_get(c, "momentums");
        assert_true(json_array_size(lrs) >= 20);
        for (size_t i = 0; i < json_array_size(lrs); i++) {
            if (i > 0) assert_int_equal(taas_sched_step(&s, &err), 0);
            close_to(s.lr, json_number_value(json_array_get(lrs, i)), "lr", ci, i);
            if (moms) close_to(s.momentum, json_number_value(json_array_get(moms, i)), "momentum", ci, i);
        }
    }
    for (int k = 0; k < 7; k++) assert_true(seen[k]);
}

/* The warm restart: after T_max steps down, T_max steps back up to the base lr. */
static void test_cosine_restarts_after_period(void **state) {
    (void)state;
    taas_sched_config cfg;
    taas_sched_config_default(&cfg, TAAS_SCHED_COSINE);
    cfg.base_lr = 1.0, cfg.t_max = 4;
    taas_sched s;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_sched_init(&s, &cfg, &err), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(taas_sched_step(&s, &err), 0);
    assert_true(fabs(s.lr) < 1e-12);          /* the bottom at T_max */
    for (int i = 0; i < 4; i++) assert_int_equal(taas_sched_step(&s, &err), 0);
    assert_true(fabs(s.lr - 1.0) < 1e-12);    /* back up at 2 T_max */
}

static void expect_bad(const taas_sched_config *cfg, const char *msg, const char *hint) {
    taas_sched s;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_sched_init(&s, cfg, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    if (!strstr(err.message, msg) || !strstr(err.hint, hint)) {
        fprintf(stderr, "message '%s' hint '%s'\n", err.message, err.hint);
        fail();
    }
}

static void test_bad_configs_are_refused(void **state) {
    (void)state;
    taas_sched_config c;
    taas_sched_config_default(&c, TAAS_SCHED_STEP);
    c.base_lr = 0.1;
    expect_bad(&c, "StepLR: step_size must be >= 1 (got 0)", "step_size=10");
    taas_sched_config_default(&c, TAAS_SCHED_MULTISTEP);
    expect_bad(&c, "MultiStepLR: milestones count must be 1..64 (got 0)", "milestones=[30, 80]");
    c.n_milestones = 2, c.milestones[0] = 3, c.milestones[1] = 0;
    expect_bad(&c, "milestone 1 is 0", "counted from 1");
    taas_sched_config_default(&c, TAAS_SCHED_EXPONENTIAL);
    expect_bad(&c, "ExponentialLR: gamma must be > 0 (got 0)", "gamma=0.95");
    taas_sched_config_default(&c, TAAS_SCHED_COSINE);
    expect_bad(&c, "CosineAnnealingLR: T_max must be >= 1", "T_max");
    taas_sched_config_default(&c, TAAS_SCHED_ONECYCLE);
    c.max_lr = 0.1;
    expect_bad(&c, "OneCycleLR: total_steps must be >= 1 (got 0)", "epochs * batches");
    c.total_steps = 10, c.pct_start = 1.2;
    expect_bad(&c, "pct_start must be in [0, 1] (got 1.2)", "0.3");
    c.pct_start = 0.3, c.max_lr = 0;
    expect_bad(&c, "max_lr must be > 0", "peak");
    taas_sched_config_default(&c, TAAS_SCHED_LINEAR);
    c.start_factor = 0;
    expect_bad(&c, "LinearLR: start_factor must be in (0, 1] (got 0)", "start_factor=0.01");
    c.start_factor = 0.5, c.end_factor = 1.5;
    expect_bad(&c, "LinearLR: end_factor must be in [0, 1] (got 1.5)", "end_factor=1.0");
    c.end_factor = 1, c.total_iters = 0;
    expect_bad(&c, "LinearLR: total_iters must be >= 1 (got 0)", "warmup");
}

static void expect_bad_sequential(const taas_sched_config *parts, int n, const long *ms, const char *msg) {
    taas_sched s;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_sched_init_sequential(&s, parts, n, ms, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    if (!strstr(err.message, msg)) {
        fprintf(stderr, "message '%s'\n", err.message);
        fail();
    }
}

static void test_bad_sequential_is_refused(void **state) {
    (void)state;
    taas_sched_config p[3];
    taas_sched_config_default(&p[0], TAAS_SCHED_LINEAR);
    taas_sched_config_default(&p[1], TAAS_SCHED_COSINE);
    taas_sched_config_default(&p[2], TAAS_SCHED_EXPONENTIAL);
    p[0].base_lr = p[1].base_lr = p[2].base_lr = 0.1;
    p[1].t_max = 10, p[2].gamma = 0.9;
    long ms[2] = {5, 5};
    expect_bad_sequential(p, 0, ms, "SequentialLR: schedulers count must be 1..8 (got 0)");
    expect_bad_sequential(p, 3, ms, "SequentialLR: milestones must increase from 1 (milestone 1 is 5)");
    ms[0] = 0;
    expect_bad_sequential(p, 2, ms, "milestone 0 is 0");
    ms[0] = 5;
    p[1].base_lr = 0.2;
    expect_bad_sequential(p, 2, ms, "must all start from one lr (scheduler 1: 0.2, not 0.1)");
    taas_sched_config_default(&p[1], TAAS_SCHED_ONECYCLE);
    p[1].base_lr = 0.1, p[1].max_lr = 0.1, p[1].total_steps = 10;
    expect_bad_sequential(p, 2, ms, "cannot hold OneCycleLR (scheduler 1)");
    p[1].t_max = 0, p[1].kind = TAAS_SCHED_COSINE;
    expect_bad_sequential(p, 2, ms, "CosineAnnealingLR: T_max must be >= 1");
}

static void test_onecycle_past_total_steps(void **state) {
    (void)state;
    taas_sched_config c;
    taas_sched_config_default(&c, TAAS_SCHED_ONECYCLE);
    c.max_lr = 0.1, c.total_steps = 5;
    taas_sched s;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_sched_init(&s, &c, &err), 0);
    for (int i = 0; i < 5; i++) assert_int_equal(taas_sched_step(&s, &err), 0);
    double last = s.lr;
    assert_int_equal(taas_sched_step(&s, &err), -1);
    assert_non_null(strstr(err.message, "tried to step 6 times; total_steps is 5"));
    assert_non_null(strstr(err.hint, "epochs * batches per epoch"));
    assert_true(s.lr == last && s.last_epoch == 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_sequences_match_torch),
        cmocka_unit_test(test_bad_sequential_is_refused),
        cmocka_unit_test(test_cosine_restarts_after_period),
        cmocka_unit_test(test_bad_configs_are_refused),
        cmocka_unit_test(test_onecycle_past_total_steps),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
