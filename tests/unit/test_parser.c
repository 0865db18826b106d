/* kernel/lang/parser: precedence, calls, tuples, continuation lines, and every syntax
 * error with its line and column. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deep_testutil.h"
#include "parser.h"

/* Parses src and compares the dump of its statements with want. */
static void parses_to(const char *src, const char *want) {
    taas_program p;
    taas_error err;
    taas_error_clear(&err);
    if (taas_parse(src, &p, &err)) fail_msg("parsing %s failed: %s", src, err.message);
    char *got = taas_program_dump(&p);
    if (strcmp(got, want)) fail_msg("%s parsed to\n%s\nwanted\n%s", src, got, want);
    free(got);
    taas_program_free(&p);
}

static void parse_fails(const char *src, const char *want, int line, int col, int width) {
    taas_program p;
    taas_error err;
    taas_error_clear(&err);
    if (taas_parse(src, &p, &err) != -1) fail_msg("parsing %s should fail with \"%s\"", src, want);
    assert_int_equal(p.n, 0);
    assert_string_equal(err.ename, "TaasSyntaxError");
    if (!strstr(err.message, want)) fail_msg("message for %s is \"%s\", wanted \"%s\"", src, err.message, want);
    if (!err.hint[0]) fail_msg("no hint for %s", src);
    if (err.pos.line != line || err.pos.col != col)
        fail_msg("%s: error at %d:%d, wanted %d:%d", src, err.pos.line, err.pos.col, line, col);
    if (width && err.width != width) fail_msg("%s: caret width %d, wanted %d", src, err.width, width);
}

static void test_atoms(void **state) {
    (void)state;
    parses_to("1\n2.5\n'a' \"b\"\nTrue\nFalse\nNone\nx\nnn.Conv2d\ntorch.nn.ReLU\n",
              "1\n2.5\n\"ab\"\nTrue\nFalse\nNone\nx\nnn.Conv2d\ntorch.nn.ReLU\n");
    parses_to("1e-05", "1e-05\n");
}

static void test_precedence(void **state) {
    (void)state;
    parses_to("1 + 2 * 3", "(+ 1 (* 2 3))\n");
    parses_to("1 - 2 - 3", "(- (- 1 2) 3)\n");
    parses_to("8 / 4 // 2 % 3 * 5", "(* (% (// (/ 8 4) 2) 3) 5)\n");
    parses_to("2 ** 3 ** 2", "(** 2 (** 3 2))\n");
    parses_to("-2 ** 2", "(neg (** 2 2))\n");
    parses_to("2 ** -1", "(** 2 (neg 1))\n");
    parses_to("- - +x", "(neg (neg (pos x)))\n");
    parses_to("(1 + 2) * 3", "(* (+ 1 2) 3)\n");
    parses_to("Linear(64 * 12 * 12, 128)", "(call Linear (* (* 64 12) 12) 128)\n");
    parses_to("-x * y", "(* (neg x) y)\n");
}

static void test_tuples_and_lists(void **state) {
    (void)state;
    parses_to("()", "(tuple)\n");
    parses_to("(1)", "1\n");
    parses_to("(1,)", "(tuple 1)\n");
    parses_to("(1, 2, )", "(tuple 1 2)\n");
    parses_to("x = 1, 2", "(= x (tuple 1 2))\n");
    parses_to("x = 1,", "(= x (tuple 1))\n");
    parses_to("[]", "(list)\n");
    parses_to("[1, [2, 3], (4,)]", "(list 1 (list 2 3) (tuple 4))\n");
    parses_to("[1,]", "(list 1)\n");
}

static void test_calls(void **state) {
    (void)state;
    parses_to("f()", "(call f)\n");
    parses_to("nn.Conv2d(1, 32, 3, stride=1, bias=False,)",
              "(call nn.Conv2d 1 32 3 (= stride 1) (= bias False))\n");
    parses_to("LogSoftmax(dim=-1)", "(call LogSoftmax (= dim (neg 1)))\n");
    parses_to("Compose([ToTensor(), Normalize((0.5,), (0.5,))])",
              "(call Compose (list (call ToTensor) (call Normalize (tuple 0.5) (tuple 0.5))))\n");
    parses_to("f(x)(y)", "(call (call f x) y)\n");
    parses_to("print('a', file=sys.stderr)", "(call print \"a\" (= file sys.stderr))\n");
}

/* Attributes, subscripts and method calls on values, and stores into a model's parts. */
static void test_attributes_and_subscripts(void **state) {
    (void)state;
    parses_to("net.fc", "net.fc\n");  /* a dotted name: the evaluator reads the attributes */
    parses_to("net[-1]", "(index net (neg 1))\n");
    parses_to("net.layer1[0].conv1", "(attr (index net.layer1 0) conv1)\n");
    parses_to("net[0][1 + 1]", "(index (index net 0) (+ 1 1))\n");
    parses_to("f(x).fc.out_features", "(attr (attr (call f x) fc) out_features)\n");
    parses_to("net.requires_grad_(False)", "(call net.requires_grad_ False)\n");
    parses_to("net[0].requires_grad_(False)", "(call (attr (index net 0) requires_grad_) False)\n");
    parses_to("net.fc = Linear(512, 10)", "(= net.fc (call Linear 512 10))\n");
    parses_to("net[-1] = Linear(16, 3)", "(= (index net (neg 1)) (call Linear 16 3))\n");
    parses_to("net.layer1[0].downsample = None", "(= (attr (index net.layer1 0) downsample) None)\n");
    parses_to("x = net[0]", "(= x (index net 0))\n");
}

static void test_statements_and_lines(void **state) {
    (void)state;
    parses_to("# comment\n\nx = 1\ny = x  # why\n\n", "(= x 1)\n(= y x)\n");
    parses_to("net = Sequential(\n    Linear(1, 2),\n    ReLU())\nnet",
              "(= net (call Sequential (call Linear 1 2) (call ReLU)))\nnet\n");
    parses_to("x = 1 + \\\n    2", "(= x (+ 1 2))\n");
    parses_to("s = ('a'\n     'b')", "(= s \"ab\")\n");
    parses_to("  x = 1\n", "(= x 1)\n");  /* indentation is not significant */
    parses_to("", "");
}

static void test_positions(void **state) {
    (void)state;
    taas_program p;
    taas_error err;
    assert_int_equal(taas_parse("x = 1\nnet = Linear(1,\n  bias=True)", &p, &err), 0);
    assert_int_equal(p.n, 2);
    const taas_stmt *s = &p.stmts[1];
    assert_int_equal(s->kind, TAAS_S_ASSIGN);
    assert_string_equal(s->target, "net");
    assert_int_equal(s->pos.line, 2);
    const taas_expr *call = s->value;
    assert_int_equal(call->kind, TAAS_E_CALL);
    assert_int_equal(call->pos.line, 2);
    assert_int_equal(call->pos.col, 7);
    assert_int_equal(call->end.line, 3);
    assert_int_equal(call->end.col, 13);
    assert_int_equal(call->off, 12);
    assert_int_equal(call->u.call.nargs, 2);
    assert_string_equal(call->u.call.args[1].keyword, "bias");
    assert_int_equal(call->u.call.args[1].pos.line, 3);
    assert_int_equal(call->u.call.args[1].pos.col, 3);
    taas_program_free(&p);
}

static void test_expression_errors(void **state) {
    (void)state;
    parse_fails("x = 1 +", "expected an expression after '+', found the end of the line", 1, 8, 1);
    parse_fails("x = 1 +\n2", "expected an expression after '+', found the end of the line", 1, 8, 1);
    parse_fails("x =", "expected an expression after '=', found the end of the line", 1, 4, 1);
    parse_fails("x = (1, , 2)", "expected an expression after ',', found ','", 1, 9, 1);
    parse_fails("= 1", "expected an expression, found '='", 1, 1, 1);
    parse_fails("x = *y", "unpacking ('*') is not part of the taas cell language", 1, 5, 1);
    parse_fails("[1, **y]", "unpacking ('**')", 1, 5, 2);
    parse_fails("1 2", "invalid syntax: expected the end of the statement, found an integer", 1, 3, 1);
    parse_fails("x = 1\ny = 2 'a'", "expected the end of the statement, found a string", 2, 7, 3);
    parse_fails("print 'hi'", "missing parentheses in call to 'print'", 1, 7, 4);
    parse_fails("[1 2]", "invalid syntax: expected ',' or ']', found an integer", 1, 4, 1);
    parse_fails("(1 2)", "expected ',' or ')', found an integer", 1, 4, 1);
    parse_fails("(a = 1)", "'=' is not allowed here", 1, 4, 1);
    parse_fails("Linear(1, 2).", "expected a name after '.', found the end of the line", 1, 14, 1);
    parse_fails("net[]", "expected an expression after '[', found ']'", 1, 5, 1);
    parse_fails("net[0, 1]", "invalid syntax: expected ']' after the index, found ','", 1, 6, 1);
    parse_fails("nn.", "expected a name after '.', found the end of the line", 1, 4, 1);
    parse_fails("nn.(1)", "expected a name after '.', found '('", 1, 4, 1);
    parse_fails("nn.1", "expected the end of the statement, found a float", 1, 3, 2);  /* .1 is a number */
    parse_fails("%timeit f()", "IPython magics ('%...') are not part of the taas cell language", 1, 1, 1);
}

static void test_call_errors(void **state) {
    (void)state;
    parse_fails("f(a=1, 2)", "positional argument follows keyword argument", 1, 8, 1);
    parse_fails("f(a=1, g(\n2))", "positional argument follows keyword argument", 1, 8, 2);
    parse_fails("Conv2d(1, stride=1, stride=2)", "keyword argument repeated: 'stride'", 1, 21, 6);
    parse_fails("f(a.b=1)", "a keyword argument needs a plain name before '='", 1, 3, 3);
    parse_fails("f(1=2)", "a keyword argument needs a plain name", 1, 3, 1);
    parse_fails("f(a=)", "expected a value for keyword argument 'a', found ')'", 1, 5, 1);
    parse_fails("f(a=, b=1)", "expected a value for keyword argument 'a', found ','", 1, 5, 1);
    parse_fails("f(*args)", "argument unpacking (*args, **kwargs) is not part of the taas cell language", 1, 3, 1);
    parse_fails("f(**kw)", "argument unpacking", 1, 3, 2);
    parse_fails("f(1 2)", "invalid syntax: expected ',' or ')' after an argument, found an integer", 1, 5, 1);
    parse_fails("f(x=1 y=2)", "expected ',' or ')' after an argument, found a name", 1, 7, 1);
}

static void test_assignment_errors(void **state) {
    (void)state;
    parse_fails("a = b.c = 1", "cannot assign to 'b.c': only plain names can be assigned", 1, 5, 3);
    parse_fails("a.b = c = 1", "chained assignment (a = b = ...) is not part of the taas cell language", 1, 9, 1);
    parse_fails("f().fc = 1", "cannot assign to a part of a value that is not a variable", 1, 1, 6);
    parse_fails("f()[0] = 1", "cannot assign to a part of a value that is not a variable", 1, 1, 6);
    parse_fails("a, b = 1, 2", "unpacking assignment (a, b = ...) is not part of the taas cell language", 1, 1, 4);
    parse_fails("[a] = 1", "unpacking assignment", 1, 1, 3);
    parse_fails("f() = 1", "cannot assign to a function call", 1, 1, 3);
    parse_fails("True = 1", "cannot assign to True", 1, 1, 4);
    parse_fails("None = 1", "cannot assign to None", 1, 1, 4);
    parse_fails("1 = x", "cannot assign to a literal", 1, 1, 1);
    parse_fails("x + 1 = 2", "cannot assign to an expression", 1, 1, 5);
    parse_fails("-x = 2", "cannot assign to an expression", 1, 1, 2);
    parse_fails("a = b = 1", "chained assignment (a = b = ...) is not part of the taas cell language", 1, 7, 1);
    parse_fails("a = f() = 1", "cannot assign to a function call", 1, 5, 3);
}

static void test_nesting_limit(void **state) {
    (void)state;
    /* a long unary chain: the parser stops before the stack does */
    size_t n = 2 * TAAS_MAX_EXPR_DEPTH + 10;
    char *src = malloc(n + 2);
    memset(src, '-', n);
    src[n] = '1';
    src[n + 1] = '\0';
    parse_fails(src, "nested too deeply", 1, TAAS_MAX_EXPR_DEPTH + 1, 0);
    free(src);
    /* a long left-leaning sum builds a deep tree too */
    size_t terms = TAAS_MAX_EXPR_DEPTH + 5;
    src = malloc(terms * 2 + 1);
    for (size_t i = 0; i < terms; i++) memcpy(src + 2 * i, i ? "+1" : "01", 2);
    src[terms * 2] = '\0';
    src[0] = ' ';
    parse_fails(src, "expression is nested too deeply (more than 500 levels)", 1, 2, 0);
    free(src);
    /* just under the limit is fine */
    src = malloc(400 * 2 + 1);
    for (size_t i = 0; i < 400; i++) memcpy(src + 2 * i, i ? "+1" : " 1", 2);
    src[800] = '\0';
    taas_program p;
    taas_error err;
    assert_int_equal(taas_parse(src, &p, &err), 0);
    taas_program_free(&p);
    free(src);
}

static void parses(const char *src) {
    taas_program p;
    taas_error err;
    taas_error_clear(&err);
    if (taas_parse(src, &p, &err)) fail_msg("parsing %.40s... failed: %s", src, err.message);
    taas_program_free(&p);
}

static void test_deep_chains_stop_on_the_way_down(void **state) {
    (void)state;
    /* 100,000 right-associative `** 2` (600 KB) once took the stack before any check ran;
     * the 501st ** is refused as the descent reaches it */
    char *src = tu_repeated("2", " ** 2", 100000, "");
    parse_fails(src, "expression is nested too deeply (more than 500 levels)", 1, 3 + 5 * 500, 2);
    free(src);
    /* every recursion of the descent counts: signs, ** with signs, calls and brackets */
    src = tu_repeated("", "-+", 50000, "1");
    parse_fails(src, "nested too deeply", 1, TAAS_MAX_EXPR_DEPTH + 1, 0);
    free(src);
    src = tu_repeated("2", " ** -2", 100000, "");   /* the 251st ** is the 501st level */
    parse_fails(src, "nested too deeply", 1, 3 + 6 * 250, 2);
    free(src);
    src = tu_repeated("", "-(", 150, "1");   /* 150 brackets and 150 signs, inside the lexer's 200 */
    char *tail = tu_repeated(src, ")", 150, "");
    parses(tail);
    free(src);
    free(tail);
    src = tu_repeated("", "-(-", 199, "1");  /* 199 brackets, 398 signs: past 500 on the way down */
    tail = tu_repeated(src, ")", 199, "");
    parse_fails(tail, "nested too deeply", 1, 501, 1);
    free(src);
    free(tail);
    src = tu_repeated("", "f(", 199, "1");
    tail = tu_repeated(src, ")", 199, "");
    parses(tail);
    free(src);
    free(tail);
    /* just under the limit, the same chains parse */
    src = tu_repeated("2", " ** 2", TAAS_MAX_EXPR_DEPTH - 1, "");
    parses(src);
    free(src);
    src = tu_repeated("", "-", TAAS_MAX_EXPR_DEPTH - 1, "1");
    parses(src);
    free(src);
}

static void test_lexer_errors_come_through(void **state) {
    (void)state;
    parse_fails("x = 1\nimport torch", "import is not needed in taas", 2, 1, 6);
    parse_fails("x = (1,\n", "'(' was never closed", 1, 5, 1);
}

static int count_calls(const taas_expr *e, int top, void *ctx) {
    if (e->kind == TAAS_E_CALL) *(int *)ctx += top ? 1 : 10;
    return 0;
}

static void test_walk_visits_every_node(void **state) {
    (void)state;
    taas_program p;
    taas_error err;
    assert_int_equal(taas_parse("f(g(1), [h()], -k(2) ** 2, x=(m(),))", &p, &err), 0);
    int calls = 0;
    assert_int_equal(taas_expr_walk(p.stmts[0].value, count_calls, &calls), 0);
    assert_int_equal(calls, 4 * 10 + 1);  /* f is the statement's own call; g, h, k, m are inside */
    taas_program_free(&p);
    assert_int_equal(taas_parse("f(g(1)[h()].a)", &p, &err), 0);  /* into subscripts and attributes */
    calls = 0;
    assert_int_equal(taas_expr_walk(p.stmts[0].value, count_calls, &calls), 0);
    assert_int_equal(calls, 2 * 10 + 1);
    taas_program_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atoms),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_tuples_and_lists),
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_attributes_and_subscripts),
        cmocka_unit_test(test_statements_and_lines),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_expression_errors),
        cmocka_unit_test(test_call_errors),
        cmocka_unit_test(test_assignment_errors),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_deep_chains_stop_on_the_way_down),
        cmocka_unit_test(test_lexer_errors_come_through),
        cmocka_unit_test(test_walk_visits_every_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
