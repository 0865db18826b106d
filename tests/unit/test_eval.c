/* kernel/lang/eval: Python's arithmetic on ints and floats, sequences, names, calls, and
 * every evaluation error with its position. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "eval.h"
#include "interp.h"
#include "parser.h"

static taas_buf out_text;

static void cap_stream(void *ctx, const char *name, const char *text) {
    (void)ctx;
    taas_buf_printf(&out_text, "[%s]%s", name, text);
}
static void cap_display(void *ctx, json_t *d, json_t *m, const char *id, int u) {
    (void)ctx; (void)id; (void)u;
    json_decref(d);
    json_decref(m);
}
static void cap_clear(void *ctx, int w) { (void)ctx; (void)w; }
static void cap_page(void *ctx, json_t *d) { (void)ctx; json_decref(d); }
static const taas_io IO = {.stream = cap_stream, .display = cap_display, .clear_output = cap_clear, .page = cap_page};

static taas_scope *scope;

static int setup(void **state) {
    (void)state;
    scope = taas_scope_new();
    taas_buf_free(&out_text);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    taas_scope_free(scope);
    taas_buf_free(&out_text);
    return 0;
}

/* Runs every statement of src; returns the last one's value (new reference). */
static int run(const char *src, taas_value **last, double *wait, taas_error *err) {
    taas_program p;
    taas_error_clear(err);
    *last = NULL;
    if (taas_parse(src, &p, err)) return -1;
    taas_eval_env env = {scope, src, &IO, NULL};
    int rc = 0;
    for (size_t i = 0; i < p.n && !rc; i++) {
        taas_unref(*last);
        *last = NULL;
        rc = taas_eval_stmt(&env, &p.stmts[i], last, wait, err);
    }
    taas_program_free(&p);
    return rc;
}

/* repr of the value of src. */
static void evals_to(const char *src, const char *want) {
    taas_value *v;
    double wait;
    taas_error err;
    if (run(src, &v, &wait, &err)) fail_msg("%s failed: %s: %s", src, err.ename, err.message);
    char *got = taas_value_repr(v);
    if (strcmp(got, want)) fail_msg("%s gave %s, wanted %s", src, got, want);
    free(got);
    taas_unref(v);
}

static const taas_error *fails(const char *src, const char *ename, const char *msg, int line, int col, int width) {
    static taas_error err;
    taas_value *v;
    double wait;
    if (!run(src, &v, &wait, &err)) fail_msg("%s should fail with %s", src, msg);
    assert_null(v);
    if (strcmp(err.ename, ename)) fail_msg("%s: ename %s, wanted %s (%s)", src, err.ename, ename, err.message);
    if (!strstr(err.message, msg)) fail_msg("%s: message \"%s\", wanted \"%s\"", src, err.message, msg);
    if (!err.hint[0]) fail_msg("%s: no hint", src);
    if (err.pos.line != line || err.pos.col != col)
        fail_msg("%s: error at %d:%d, wanted %d:%d", src, err.pos.line, err.pos.col, line, col);
    if (width && err.width != width) fail_msg("%s: caret width %d, wanted %d", src, err.width, width);
    return &err;
}

static void test_int_arithmetic(void **state) {
    (void)state;
    evals_to("1 + 2 * 3", "7");
    evals_to("7 // 2, -7 // 2, 7 // -2, -7 // -2", "(3, -4, -4, 3)");
    evals_to("7 % 3, -7 % 3, 7 % -3, -7 % -3", "(1, 2, -2, -1)");
    evals_to("7 / 2, 6 / 3, -1 / 4", "(3.5, 2.0, -0.25)");
    evals_to("2 ** 10, 2 ** 0, (-2) ** 3, 2 ** 62", "(1024, 1, -8, 4611686018427387904)");
    evals_to("2 ** -1, 4 ** -2", "(0.5, 0.0625)");
    evals_to("-3, +3, - -3", "(-3, 3, 3)");
    evals_to("True + True, True * 3, -True, False ** 0", "(2, 3, -1, 1)");
    evals_to("(-9223372036854775807 - 1) % -1, 5 % -1", "(0, 0)");
    evals_to("Linear(64 * 12 * 12, 128)", "Linear(in_features=9216, out_features=128, bias=True)");
}

static void test_float_arithmetic(void **state) {
    (void)state;
    evals_to("0.1 + 0.2", "0.30000000000000004");
    evals_to("1 + 2.5, 2.5 - 1, 2 * 1.5, 1.0 / 4", "(3.5, 1.5, 3.0, 0.25)");
    evals_to("-7.5 // 2, -7.5 % 2, 7.5 % -2, 7.5 // -2", "(-4.0, 0.5, -0.5, -4.0)");
    evals_to("2.0 ** 0.5, 2 ** 0.5, 4.0 ** -1, (-8.0) ** 3", "(1.4142135623730951, 1.4142135623730951, 0.25, -512.0)");
    evals_to("1.0 ** 1e308, 0.0 ** 0, -0.0", "(1.0, 1.0, -0.0)");
    evals_to("1e308 * 10", "inf");
    evals_to("True / 2", "0.5");
}

static void test_sequences(void **state) {
    (void)state;
    evals_to("'ab' + 'cd'", "'abcd'");
    evals_to("(1,) + (2, 3)", "(1, 2, 3)");
    evals_to("[1] + [2]", "[1, 2]");
    evals_to("'ab' * 3, 2 * 'x', 'a' * 0, 'a' * -2", "('ababab', 'xx', '', '')");
    evals_to("[0] * 3, (1, 2) * 2, 3 * [None]", "([0, 0, 0], (1, 2, 1, 2), [None, None, None])");
    evals_to("[] * 1000000000000", "[]");
    evals_to("len([0] * 1048576), len(3 * 'abcd')", "(1048576, 12)");
    evals_to("'é' + 'ü'", "'éü'");
}

static void test_arithmetic_errors(void **state) {
    (void)state;
    fails("9223372036854775807 + 1", "TaasValueError",
          "integer overflow: 9223372036854775807 + 1 does not fit in 64 bits", 1, 1, 23);
    fails("-9223372036854775807 - 2", "TaasValueError", "integer overflow", 1, 1, 0);
    fails("3037000500 * 3037000500", "TaasValueError", "integer overflow", 1, 1, 0);
    fails("2 ** 63", "TaasValueError", "integer overflow: 2 ** 63", 1, 1, 7);
    fails("-(-9223372036854775807 - 1)", "TaasValueError", "integer overflow: -(-9223372036854775808)", 1, 1, 0);
    fails("(-9223372036854775807 - 1) // -1", "TaasValueError", "integer overflow", 1, 1, 0);
    fails("x = 1 + (2 / 0)", "TaasValueError", "division by zero", 1, 10, 5);
    fails("1 // 0", "TaasValueError", "division by zero", 1, 1, 6);
    fails("1 % 0", "TaasValueError", "division by zero", 1, 1, 5);
    fails("1.0 / 0.0", "TaasValueError", "division by zero", 1, 1, 0);
    fails("1.5 // 0", "TaasValueError", "division by zero", 1, 1, 0);
    fails("1.5 % 0.0", "TaasValueError", "division by zero", 1, 1, 0);
    fails("0 ** -1", "TaasValueError", "0 cannot be raised to a negative power", 1, 1, 7);
    fails("0.0 ** -1", "TaasValueError", "0.0 cannot be raised to a negative power", 1, 1, 0);
    fails("(-8) ** 0.5", "TaasValueError", "a negative number cannot be raised to a fractional power", 1, 1, 0);
    fails("10.0 ** 400", "TaasValueError", "float overflow", 1, 1, 0);
    fails("[0] * 100000000", "TaasValueError", "the list would be too large", 1, 1, 15);
    fails("400000 * (1, 2, 3)", "TaasValueError", "the tuple would be too large", 1, 1, 0);
    fails("'ab' * 40000000", "TaasValueError", "the str would be too large", 1, 1, 0);
    fails("x = [0] * 1048576\ny = x + [1]", "TaasValueError", "the list would be too large", 2, 5, 7);
}

static void test_type_errors(void **state) {
    (void)state;
    const taas_error *e = fails("'a' + 1", "TaasTypeError", "unsupported operand types for +: 'str' and 'int'", 1, 1, 7);
    assert_non_null(strstr(e->hint, "print(\"n =\", n)"));
    fails("x = 2\ny = (1,) + [x]", "TaasTypeError", "unsupported operand types for +: 'tuple' and 'list'", 2, 5, 10);
    fails("'a' - 'b'", "TaasTypeError", "unsupported operand types for -: 'str' and 'str'", 1, 1, 0);
    fails("'a' * 'b'", "TaasTypeError", "unsupported operand types for *: 'str' and 'str'", 1, 1, 0);
    fails("'a' * 1.5", "TaasTypeError", "unsupported operand types for *: 'str' and 'float'", 1, 1, 0);
    fails("None + 1", "TaasTypeError", "unsupported operand types for +: 'NoneType' and 'int'", 1, 1, 0);
    fails("ReLU() ** 2", "TaasTypeError", "unsupported operand types for **: 'ReLU' and 'int'", 1, 1, 0);
    fails("-'a'", "TaasTypeError", "bad operand type for unary -: 'str'", 1, 1, 4);
    fails("+[1]", "TaasTypeError", "bad operand type for unary +: 'list'", 1, 1, 4);
}

static void test_names(void **state) {
    (void)state;
    evals_to("x = 3\ny = x * 2\ny", "6");
    evals_to("x = 1\nx = 'again'\nx", "'again'");
    evals_to("sys.stdout, sys.stderr", "('stdout', 'stderr')");
    taas_value *v;
    double wait;
    taas_error err;
    const char *spellings[] = {"Conv2d", "nn.Conv2d", "torch.nn.Conv2d"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(run(spellings[i], &v, &wait, &err), 0);
        assert_int_equal(v->type, TAAS_V_BUILTIN);
        assert_string_equal(v->u.fn->name, "Conv2d");
        taas_unref(v);
    }
    /* a variable shadows a builtin */
    evals_to("Linear = 5\nLinear", "5");
    /* definition order is kept for completion */
    assert_string_equal(taas_scope_name_at(scope, 0), "x");
    assert_string_equal(taas_scope_name_at(scope, 1), "y");
}

static void test_name_errors(void **state) {
    (void)state;
    const taas_error *e = fails("Linear(1, 2, bias=Flase)", "TaasNameError", "name 'Flase' is not defined", 1, 19, 5);
    assert_string_equal(e->hint, "did you mean 'False'?");
    e = fails("Conv2D(1, 2, 3)", "TaasNameError", "name 'Conv2D' is not defined", 1, 1, 6);
    assert_string_equal(e->hint, "did you mean 'Conv2d'?");
    e = fails("learning_rate = 0.1\nAdam(lr=learning_rat)", "TaasNameError", "name 'learning_rat' is not defined", 2, 9, 12);
    assert_string_equal(e->hint, "did you mean 'learning_rate'?");
    e = fails("nn.Conv2D", "TaasNameError", "name 'nn.Conv2D' is not defined", 1, 1, 9);
    assert_string_equal(e->hint, "did you mean 'nn.Conv2d'?");
    e = fails("foo.Conv2d", "TaasNameError", "name 'foo.Conv2d' is not defined", 1, 1, 10);
    assert_string_equal(e->hint, "did you mean 'nn.Conv2d'?");
    e = fails("nn", "TaasNameError", "name 'nn' is not defined", 1, 1, 2);
    assert_non_null(strstr(e->hint, "'nn' is a module prefix, not a value"));
    e = fails("print(1, file=sys.stdin)", "TaasNameError", "name 'sys.stdin' is not defined", 1, 15, 9);
    assert_non_null(strstr(e->hint, "sys.stdout and sys.stderr"));
    e = fails("zzqqxx", "TaasNameError", "name 'zzqqxx' is not defined", 1, 1, 6);
    assert_non_null(strstr(e->hint, "define it first (zzqqxx = ...)"));
    e = fails("x = 1\nx.shape", "TaasTypeError", "'int' object has no attribute 'shape'", 2, 1, 7);
    assert_non_null(strstr(e->hint, "attributes are those of models"));
}

static void test_calls(void **state) {
    (void)state;
    evals_to("print('a', 1, file=sys.stderr)", "None");
    assert_string_equal(out_text.data, "[stderr]a 1\n");
    evals_to("len([1, 2, 3])", "3");
    evals_to("l = nn.Linear\nl(2, 3)", "Linear(in_features=2, out_features=3, bias=True)");
    fails("x = 1\nx(2)", "TaasTypeError", "'int' object is not callable", 2, 1, 1);
    fails("'abc'(2)", "TaasTypeError", "'str' object is not callable", 1, 1, 5);
    fails("ReLU()(2)", "TaasTypeError", "'ReLU' object is not callable", 1, 1, 6);
    /* errors of the builtin table point at the argument (widened here) or the call */
    const taas_error *e = fails("net = Linear(1, 2, bias=3)", "TaasTypeError", "bias", 1, 20, 6);
    assert_non_null(strstr(e->message, "Linear()"));
    fails("Linear(1)", "TaasTypeError", "out_features", 1, 1, 9);
    fails("Conv2d(1, 2, 3, strid=1)", "TaasTypeError", "strid", 1, 17, 7);
    /* a failing argument stops the call before it runs */
    taas_buf_free(&out_text);
    fails("print(1 / 0)", "TaasValueError", "division by zero", 1, 7, 5);
    assert_null(out_text.data);
}

static void test_waiting_calls(void **state) {
    (void)state;
    taas_value *v;
    double wait = -1;
    taas_error err;
    double before = taas_now();
    assert_int_equal(run("sleep(0.5)", &v, &wait, &err), 0);
    assert_true(wait >= before + 0.5 && wait < before + 5);
    taas_unref(v);
    assert_int_equal(run("x = sleep(0.25)", &v, &wait, &err), 0);
    assert_true(wait > 0);
    taas_unref(v);
    assert_int_equal(run("print(1)", &v, &wait, &err), 0);
    assert_true(wait < 0);
    taas_unref(v);
    /* anywhere else it is a syntax error, found when it would run ... */
    const taas_error *e = fails("[sleep(1)]", "TaasSyntaxError",
                                "sleep() waits, so it must be a whole statement or the whole right side of an assignment",
                                1, 2, 8);
    assert_non_null(strstr(e->hint, "on a line of its own"));
    fails("s = sleep\nx = 1 + s(1)", "TaasSyntaxError", "sleep() waits", 2, 9, 4);
    /* ... and, for builtins named directly, before the cell runs */
    taas_program p;
    assert_int_equal(taas_parse("print(1)\ny = (2, taas.sleep(1))", &p, &err), 0);
    taas_eval_env env = {scope, "print(1)\ny = (2, taas.sleep(1))", &IO, NULL};
    assert_int_equal(taas_eval_check_waits(&env, &p, &err), -1);
    assert_string_equal(err.ename, "TaasSyntaxError");
    assert_int_equal(err.pos.line, 2);
    assert_int_equal(err.pos.col, 9);
    assert_int_equal(err.width, 13);
    taas_program_free(&p);
    assert_int_equal(taas_parse("sleep(1)\nx = sleep(2)", &p, &err), 0);
    assert_int_equal(taas_eval_check_waits(&env, &p, &err), 0);
    taas_program_free(&p);
}

static void test_span_width(void **state) {
    (void)state;
    const char *src = "ab\ncdéf\n";
    assert_int_equal(taas_span_width(src, (taas_srcpos){2, 2}, (taas_srcpos){2, 4}), 2);
    assert_int_equal(taas_span_width(src, (taas_srcpos){2, 2}, (taas_srcpos){3, 1}), 3);  /* to the line's end */
    assert_int_equal(taas_span_width(src, (taas_srcpos){1, 1}, (taas_srcpos){1, 1}), 1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_int_arithmetic), T(test_float_arithmetic), T(test_sequences),
        T(test_arithmetic_errors), T(test_type_errors), T(test_names),
        T(test_name_errors), T(test_calls), T(test_waiting_calls), T(test_span_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
