/* Walks over values (kernel/lang/value.c's taas_walk): a DAG of shared values, v1 = [v0, v0]
 * up to v40, is checked, compared, shown and freed in bounded work; a walk that runs out of
 * its budget stops with a TaasValueError, and one the kernel is asked to stop (its signal
 * self-pipe readable) with KeyboardInterrupt; the session lives on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmocka_testutil.h"
#include "buf.h"
#include "deep_testutil.h"
#include "interp.h"
#include "value.h"

static taas_buf printed;
static void cap_stream(void *ctx, const char *name, const char *text) {
    (void)ctx;
    (void)name;
    taas_buf_puts(&printed, text);
}
static taas_io io;  /* the quiet one, but for what cells print */

static taas_interp *in;

static int setup(void **state) {
    (void)state;
    setenv("TAAS_CONFIG", "/nonexistent/taas-test-config.json", 1);
    unsetenv("TAAS_WALK_STEPS");
    in = taas_interp_new();
    return in ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    taas_interp_free(in);
    taas_buf_free(&printed);
    unsetenv("TAAS_WALK_STEPS");
    return 0;
}

/* The cell's text/plain result ("" for none), or the error as "ename: message" (malloc'd). */
static char *run(const char *code) {
    json_t *r = NULL;
    taas_error err;
    if (!io.stream) {
        io = *taas_interp_quiet_io();
        io.stream = cap_stream;
    }
    taas_run_state s = taas_interp_run(in, code, &io, &r, &err);
    char *text;
    if (s == TAAS_RUN_ERROR) {
        size_t n = strlen(err.ename) + strlen(err.message) + 3;
        text = malloc(n);
        snprintf(text, n, "%s: %s", err.ename, err.message);
        assert_true(err.hint[0] != '\0' || !strcmp(err.ename, "KeyboardInterrupt"));
    } else {
        assert_int_equal(s, TAAS_RUN_DONE);
        text = strdup(r ? json_string_value(json_object_get(r, "text/plain")) : "");
    }
    json_decref(r);
    return text;
}

static void expect(const char *code, const char *want) {
    char *got = run(code);
    if (strncmp(got, want, strlen(want))) fail_msg("%s: got \"%.300s\", wanted \"%s...\"", code, got, want);
    free(got);
}

static void define_dag(const char *name, int levels) {
    char code[128];
    snprintf(code, sizeof code, "%s0 = [1]", name);
    expect(code, "");
    for (int i = 1; i <= levels; i++) {
        snprintf(code, sizeof code, "%s%d = [%s%d, %s%d]", name, i, name, i - 1, name, i - 1);
        expect(code, "");
    }
}

/* The cells: each once took 2^40 steps of the argument check (and never ended). */
static void test_shared_dag_in_cells(void **state) {
    (void)state;
    define_dag("v", 40);
    expect("len(v40)", "2");                       /* the check walks each shared value once */
    expect("print(v40)", "");
    assert_true(tu_ends_with(printed.data, TU_REPR_CUT_NOTE "\n"));  /* the repr stops at its cap */
    expect("v40", "[[[[");
    expect("Compose(v40)", "TaasTypeError: Compose() argument 'transforms' must be a list of transforms, not list");
    expect("MultiStepLR(v40)", "TaasTypeError: MultiStepLR() argument 'milestones' must be list of ints, not list");
    expect("len([v40, 1e400])", "TaasValueError: len() argument 'obj' must be a finite number");
    expect("len(v3 + [1e400])", "TaasValueError: len() argument 'obj' must be a finite number");
    expect("len(v40 + v40)", "4");
}

static taas_value *dag(int levels, int64_t leaf) {
    taas_value *v = taas_list_new(1);
    v->u.seq.items[0] = taas_int(leaf);
    for (int i = 0; i < levels; i++) {
        taas_value *d = taas_list_new(2);
        d->u.seq.items[0] = v;
        d->u.seq.items[1] = taas_ref(v);
        v = d;
    }
    return v;
}

/* Two equal DAGs that share nothing with each other: each pair of values compared once. */
static void test_equality_of_shared_dags(void **state) {
    (void)state;
    taas_value *a = dag(40, 1), *b = dag(40, 1), *c = dag(40, 2);
    assert_true(taas_value_equal(a, b));
    assert_false(taas_value_equal(a, c));
    taas_error err;
    taas_walk w;
    taas_walk_begin(&w, "comparing", &err);
    assert_int_equal(taas_value_equal_walk(a, b, &w), 1);
    assert_true(w.steps < 1000);
    taas_unref(c);
    taas_unref(b);
    taas_unref(a);
}

/* A walk past its budget (TAAS_WALK_STEPS, the tests' smaller one) stops with a TaasValueError
 * that names the walk and says what to do; the next cell runs. */
static void test_budget(void **state) {
    (void)state;
    expect("a = [0.5] * 5000", "");
    setenv("TAAS_WALK_STEPS", "1000", 1);
    char *got = run("len(a)");
    assert_non_null(strstr(got, "TaasValueError: checking len() argument 'obj' takes more than 1000 steps: the value is too large or too widely shared"));
    free(got);
    taas_value *x = dag(3, 1), *y = dag(3, 1), *big = taas_list_new(5000);
    for (size_t i = 0; i < big->u.seq.n; i++) big->u.seq.items[i] = taas_int((int64_t)i);
    taas_value *big2 = taas_list_new(5000);
    for (size_t i = 0; i < big2->u.seq.n; i++) big2->u.seq.items[i] = taas_int((int64_t)i);
    taas_error err;
    taas_walk w;
    taas_walk_begin(&w, "comparing two lists", &err);
    assert_int_equal(taas_value_equal_walk(big, big2, &w), -1);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "comparing two lists"));
    assert_true(err.hint[0] != '\0');
    taas_walk_begin(&w, "comparing", &err);
    assert_int_equal(taas_value_equal_walk(x, y, &w), 1);  /* a small one fits */
    taas_unref(big2);
    taas_unref(big);
    taas_unref(y);
    taas_unref(x);
    unsetenv("TAAS_WALK_STEPS");
    expect("len(a)", "5000");
}

/* The stop button (SIGINT) and SIGTERM make the kernel's signal pipe readable: a walk that
 * sees it ends the cell with KeyboardInterrupt, and the session lives on. */
static void test_interrupt(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    taas_interp_set_interrupt_fd(in, fds[0]);
    expect("a = [0.5] * 100000\nb = 1", "");
    assert_int_equal(write(fds[1], "i", 1), 1);
    expect("b = 2\nlen(a)\nb = 3", "KeyboardInterrupt: ");
    taas_error err;
    taas_walk w;
    taas_value *x = taas_list_new(100000), *y = taas_list_new(100000);
    for (size_t i = 0; i < x->u.seq.n; i++) {
        x->u.seq.items[i] = taas_int(1);
        y->u.seq.items[i] = taas_int(1);
    }
    taas_walk_begin(&w, "comparing", &err);
    assert_int_equal(taas_value_equal_walk(x, y, &w), -1);
    assert_string_equal(err.ename, "KeyboardInterrupt");
    taas_unref(x);
    taas_unref(y);
    char c;
    assert_int_equal(read(fds[0], &c, 1), 1);  /* the kernel's loop drains the pipe */
    expect("b", "2");
    expect("len(a)", "100000");
    taas_interp_set_interrupt_fd(in, -1);
    close(fds[0]);
    close(fds[1]);
}

/* The spec the workers get (here a summary's) is a walk too: bounded and interruptible. */
static void test_spec_walk(void **state) {
    (void)state;
    char *code = tu_repeated("net = Sequential(", "ReLU(), ", 5000, "ReLU())");
    expect(code, "");
    free(code);
    setenv("TAAS_WALK_STEPS", "1000", 1);
    expect("summary(net)", "TaasValueError: writing the model's spec takes more than 1000 steps");
    unsetenv("TAAS_WALK_STEPS");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    taas_interp_set_interrupt_fd(in, fds[0]);
    assert_int_equal(write(fds[1], "i", 1), 1);
    expect("summary(net)", "KeyboardInterrupt: interrupted while writing the model's spec");
    taas_interp_set_interrupt_fd(in, -1);
    close(fds[0]);
    close(fds[1]);
    expect("summary(net)\nlen(net)", "5001");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shared_dag_in_cells, setup, teardown),
        cmocka_unit_test_setup_teardown(test_equality_of_shared_dags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spec_walk, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
