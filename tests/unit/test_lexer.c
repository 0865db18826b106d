/* kernel/lang/lexer: every token kind, positions in code points, and every error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lexer.h"

static taas_tokens lex_ok(const char *src) {
    taas_tokens t = TAAS_TOKENS_INIT;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_lex(src, &t, &err);
    if (rc) fail_msg("lexing %s failed: %s", src, err.message);
    assert_int_equal(t.v[t.n - 1].kind, TAAS_T_EOF);
    return t;
}

/* Lexes src, expects failure; checks the message contains want, and where it points. */
static int lex_fails(const char *src, const char *want, int line, int col, int width) {
    taas_tokens t = TAAS_TOKENS_INIT;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_lex(src, &t, &err);
    int incomplete = t.incomplete;
    taas_tokens_free(&t);
    if (rc != -1) fail_msg("lexing %s should fail with \"%s\"", src, want);
    assert_string_equal(err.ename, "TaasSyntaxError");
    if (!strstr(err.message, want)) fail_msg("message for %s is \"%s\", wanted \"%s\"", src, err.message, want);
    assert_true(err.hint[0] != '\0');  /* every error says what to do */
    assert_int_equal(err.pos.line, line);
    assert_int_equal(err.pos.col, col);
    if (width) assert_int_equal(err.width, width);
    return incomplete;
}

static void test_names_and_keywords(void **state) {
    (void)state;
    taas_tokens t = lex_ok("net = nn.Conv2d _x9 True False None");
    taas_tok want[] = {TAAS_T_NAME, TAAS_T_ASSIGN, TAAS_T_NAME, TAAS_T_DOT, TAAS_T_NAME, TAAS_T_NAME,
                       TAAS_T_TRUE, TAAS_T_FALSE, TAAS_T_NONE, TAAS_T_NEWLINE, TAAS_T_EOF};
    assert_int_equal(t.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < t.n; i++) assert_int_equal(t.v[i].kind, want[i]);
    assert_string_equal(t.v[0].s, "net");
    assert_string_equal(t.v[2].s, "nn");
    assert_string_equal(t.v[4].s, "Conv2d");
    assert_string_equal(t.v[5].s, "_x9");
    /* positions: line, column, byte offset and length */
    assert_int_equal(t.v[4].pos.line, 1);
    assert_int_equal(t.v[4].pos.col, 10);
    assert_int_equal(t.v[4].end.col, 16);
    assert_int_equal(t.v[4].off, 9);
    assert_int_equal(t.v[4].len, 6);
    taas_tokens_free(&t);
    /* soft keywords of Python are plain names */
    t = lex_ok("match = type");
    assert_int_equal(t.v[0].kind, TAAS_T_NAME);
    assert_int_equal(t.v[2].kind, TAAS_T_NAME);
    taas_tokens_free(&t);
}

static void test_integers(void **state) {
    (void)state;
    taas_tokens t = lex_ok("0 42 1_000_000 0x_fF 0o17 0b1010 00 9223372036854775807 0XA 0O7 0B1");
    int64_t want[] = {0, 42, 1000000, 255, 15, 10, 0, INT64_MAX, 10, 7, 1};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_int_equal(t.v[i].kind, TAAS_T_INT);
        assert_true(t.v[i].i == want[i]);
    }
    taas_tokens_free(&t);
}

static void test_floats(void **state) {
    (void)state;
    taas_tokens t = lex_ok("1.0 .5 1e-3 1_000.0 1. 2E+2 1_0e1_0 012.5 0.1");
    double want[] = {1.0, 0.5, 1e-3, 1000.0, 1.0, 200.0, 10e10, 12.5, 0.1};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_int_equal(t.v[i].kind, TAAS_T_FLOAT);
        assert_true(t.v[i].f == want[i]);
    }
    taas_tokens_free(&t);
}

static void test_strings(void **state) {
    (void)state;
    taas_tokens t = lex_ok("'a' \"b\" 'it\\'s' \"q\\\"\" '\\n\\t\\\\' '\\x41\\u00e9\\u20ac\\U0001F600' '\\101\\d' "
                           "r'\\n\\'' R\"\\x\" u'u' '''tri\nple''' \"\"\"x\"y\"\"\" 'line\\\ncont' '\\a\\b\\f\\v\\r'");
    const char *want[] = {"a", "b", "it's", "q\"", "\n\t\\", "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "A\\d",
                          "\\n\\'", "\\x", "u", "tri\nple", "x\"y", "linecont", "\a\b\f\v\r"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_int_equal(t.v[i].kind, TAAS_T_STRING);
        assert_string_equal(t.v[i].s, want[i]);
        assert_int_equal(t.v[i].slen, strlen(want[i]));
    }
    taas_tokens_free(&t);
}

static void test_operators(void **state) {
    (void)state;
    taas_tokens t = lex_ok("+ - * / // % ** = , ( ) [ ] .");
    taas_tok want[] = {TAAS_T_PLUS, TAAS_T_MINUS, TAAS_T_STAR, TAAS_T_SLASH, TAAS_T_DSLASH,
                       TAAS_T_PERCENT, TAAS_T_DSTAR, TAAS_T_ASSIGN, TAAS_T_COMMA, TAAS_T_LPAR,
                       TAAS_T_RPAR, TAAS_T_LSQB, TAAS_T_RSQB, TAAS_T_DOT, TAAS_T_NEWLINE, TAAS_T_EOF};
    assert_int_equal(t.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < t.n; i++) assert_int_equal(t.v[i].kind, want[i]);
    assert_int_equal(t.v[4].len, 2);
    assert_int_equal(t.v[6].len, 2);
    taas_tokens_free(&t);
    /* describe reads well in messages */
    assert_string_equal(taas_tok_describe(TAAS_T_RPAR), "')'");
    assert_string_equal(taas_tok_describe(TAAS_T_NEWLINE), "the end of the line");
    assert_string_equal(taas_tok_describe(TAAS_T_EOF), "the end of the cell");
}

static void test_newlines_comments_continuation(void **state) {
    (void)state;
    /* blank and comment lines give no NEWLINE; brackets and a backslash join lines */
    taas_tokens t = lex_ok("# header\n\nx = 1  # note\n  \ny = (1,\n  2)\nz = 1 + \\\n  2\n");
    taas_tok want[] = {TAAS_T_NAME, TAAS_T_ASSIGN, TAAS_T_INT, TAAS_T_NEWLINE,
                       TAAS_T_NAME, TAAS_T_ASSIGN, TAAS_T_LPAR, TAAS_T_INT, TAAS_T_COMMA, TAAS_T_INT,
                       TAAS_T_RPAR, TAAS_T_NEWLINE,
                       TAAS_T_NAME, TAAS_T_ASSIGN, TAAS_T_INT, TAAS_T_PLUS, TAAS_T_INT, TAAS_T_NEWLINE,
                       TAAS_T_EOF};
    assert_int_equal(t.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < t.n; i++) assert_int_equal(t.v[i].kind, want[i]);
    assert_int_equal(t.v[0].pos.line, 3);
    assert_int_equal(t.v[9].pos.line, 6);
    assert_int_equal(t.v[9].pos.col, 3);
    assert_int_equal(t.v[16].pos.line, 8);
    taas_tokens_free(&t);
    /* no final newline, CRLF line ends, a byte order mark, the empty cell */
    t = lex_ok("\xEF\xBB\xBFx\r\ny");
    assert_int_equal(t.v[0].pos.col, 1);
    assert_int_equal(t.v[1].kind, TAAS_T_NEWLINE);
    assert_int_equal(t.v[2].pos.line, 2);
    assert_int_equal(t.v[3].kind, TAAS_T_NEWLINE);
    taas_tokens_free(&t);
    t = lex_ok("");
    assert_int_equal(t.n, 1);
    taas_tokens_free(&t);
}

static void test_columns_count_code_points(void **state) {
    (void)state;
    /* "é" is two bytes but one column; a triple-quoted string ends on a later line */
    taas_tokens t = lex_ok("s = 'é' + x\nt = '''a\nbc''' + y");
    assert_int_equal(t.v[3].kind, TAAS_T_PLUS);
    assert_int_equal(t.v[3].pos.col, 9);
    assert_int_equal(t.v[3].off, 9);
    assert_int_equal(t.v[4].pos.col, 11);
    assert_int_equal(t.v[8].end.line, 3);
    assert_int_equal(t.v[8].end.col, 6);
    taas_tokens_free(&t);
}

static void test_python_keywords_are_errors(void **state) {
    (void)state;
    lex_fails("import torch", "import is not needed in taas: builtins such as nn.Conv2d are always available", 1, 1, 6);
    lex_fails("from torch import nn", "import is not needed", 1, 1, 4);
    lex_fails("x = 1\nif x: y", "'if' is not part of the taas cell language (this is not Python): there are no conditions", 2, 1, 2);
    lex_fails("def f(): pass", "there are no functions", 1, 1, 3);
    lex_fails("f = lambda x: x", "'lambda' is not part of the taas cell language", 1, 5, 6);
    lex_fails("class Net: pass", "there are no classes", 1, 1, 5);
    lex_fails("[x for x in y]", "there are no loops or comprehensions", 1, 4, 3);
    lex_fails("while True: x", "there are no loops", 1, 1, 5);
    lex_fails("a and b", "there are no boolean operators", 1, 3, 3);
    lex_fails("not a", "'not'", 1, 1, 3);
    lex_fails("del x", "variables stay for the kernel's session", 1, 1, 3);
    lex_fails("return 1", "'return' is not part of the taas cell language", 1, 1, 6);
    lex_fails("with x as y: z", "'with'", 1, 1, 4);
}

static void test_stray_characters(void **state) {
    (void)state;
    lex_fails("x = {1: 2}", "dict and set literals ('{') are not part of the taas cell language", 1, 5, 1);
    lex_fails("a[1:2]", "':' is not part of the taas cell language (this is not Python)", 1, 4, 1);
    lex_fails("x == 1", "comparisons ('==') are not part of the taas cell language", 1, 3, 2);
    lex_fails("x != 1", "comparisons ('!=')", 1, 3, 2);
    lex_fails("x <= 1", "comparisons ('<=')", 1, 3, 2);
    lex_fails("x > 1", "comparisons ('>')", 1, 3, 1);
    lex_fails("x << 1", "bitwise operators ('<<')", 1, 3, 2);
    lex_fails("x & 1", "bitwise operators ('&')", 1, 3, 1);
    lex_fails("~x", "bitwise operators ('~')", 1, 1, 1);
    lex_fails("x += 1", "augmented assignment ('+=') is not part of the taas cell language", 1, 3, 2);
    lex_fails("x //= 2", "augmented assignment ('//=')", 1, 3, 3);
    lex_fails("x **= 2", "augmented assignment ('**=')", 1, 3, 3);
    lex_fails("x -= 2", "augmented assignment ('-=')", 1, 3, 2);
    lex_fails("(y := 2)", "assignment expressions (':=')", 1, 4, 2);
    lex_fails("f() -> int", "annotations ('->')", 1, 5, 2);
    lex_fails("x = 1; y = 2", "write one statement per line", 1, 6, 1);
    lex_fails("@decorator", "'@' (decorators, matrix multiplication)", 1, 1, 1);
    lex_fails("!ls", "shell commands ('!')", 1, 1, 1);
    lex_fails("print?", "'?' is not part of the taas cell language", 1, 6, 1);
    lex_fails("x = $y", "character '$' is not part of the taas cell language", 1, 5, 1);
    lex_fails("caf\xC3\xA9 = 1", "character '\xC3\xA9' (U+00E9) is not allowed outside strings and comments", 1, 4, 1);
    lex_fails("x = \xFF", "invalid UTF-8 byte 0xFF", 1, 5, 1);
    lex_fails("x = \x01", "invalid non-printable character U+0001", 1, 5, 1);
}

static void test_string_errors(void **state) {
    (void)state;
    assert_false(lex_fails("x = 'abc", "unterminated string literal (detected at line 1)", 1, 5, 1));
    assert_false(lex_fails("x = \"abc\ny\"", "unterminated string literal (detected at line 1)", 1, 5, 1));
    assert_true(lex_fails("x = '''abc\ndef", "unterminated triple-quoted string literal (detected at line 2)", 1, 5, 3));
    lex_fails("x = f'{x}'", "f-strings are not supported in taas", 1, 5, 2);
    lex_fails("x = rf'a'", "f-strings are not supported", 1, 5, 3);
    lex_fails("x = b'a'", "bytes literals are not supported in taas", 1, 5, 2);
    lex_fails("'\\x4g'", "truncated \\x escape: it needs 2 hex digits", 1, 2, 0);
    lex_fails("'\\u12'", "truncated \\u escape: it needs 4 hex digits", 1, 2, 0);
    lex_fails("'\\U0011FFFF'", "illegal Unicode character", 1, 2, 10);
    lex_fails("'\\ud800'", "\\uD800 is a surrogate, not a character", 1, 2, 6);
    lex_fails("'\\N{BULLET}'", "\\N{...} escapes are not supported in taas", 1, 2, 2);
    lex_fails("'a\\0b'", "a string cannot hold the NUL character", 1, 3, 2);
    lex_fails("'\\x00'", "NUL character", 1, 2, 4);
}

static void test_number_errors(void **state) {
    (void)state;
    lex_fails("x = 012", "leading zeros in decimal integer literals are not permitted", 1, 5, 3);
    lex_fails("1__0", "misplaced '_'", 1, 2, 1);
    lex_fails("1_", "misplaced '_'", 1, 2, 1);
    lex_fails("1_.5", "misplaced '_'", 1, 2, 1);
    lex_fails("0b102", "invalid digit '2' in binary literal", 1, 1, 0);
    lex_fails("0o78", "invalid digit '8' in octal literal", 1, 1, 0);
    lex_fails("0x", "invalid hexadecimal literal", 1, 1, 0);
    lex_fails("0xfg", "invalid hexadecimal literal", 1, 1, 0);
    lex_fails("12abc", "invalid decimal literal", 1, 1, 0);
    lex_fails("1e", "invalid decimal literal", 1, 1, 0);
    lex_fails("2j", "complex numbers are not supported in taas", 1, 1, 2);
    lex_fails("9223372036854775808", "integer literal is too large: taas integers are 64-bit", 1, 1, 19);
    lex_fails("0x1_0000_0000_0000_0000", "integer literal is too large", 1, 1, 0);
}

static void test_bracket_errors(void **state) {
    (void)state;
    assert_true(lex_fails("f(1,\n  2", "'(' was never closed", 1, 2, 1));
    assert_true(lex_fails("[1, (2", "'(' was never closed", 1, 5, 1));
    assert_false(lex_fails("x = 1)", "unmatched ')'", 1, 6, 1));
    assert_false(lex_fails("(1]", "closing bracket ']' does not match opening bracket '(' on line 1, column 1", 1, 3, 1));
    char deep[260];
    memset(deep, '(', 201);
    deep[201] = '\0';
    assert_false(lex_fails(deep, "too many nested brackets (more than 200)", 1, 201, 1));
}

static void test_continuation_errors(void **state) {
    (void)state;
    assert_true(lex_fails("x = 1 + \\", "the cell ends after a line continuation character", 1, 10, 1));
    assert_true(lex_fails("x = 1 + \\\n", "the cell ends after a line continuation character", 2, 1, 1));
    assert_false(lex_fails("x = 1 \\ + 2", "unexpected character after line continuation character", 1, 7, 1));
}

static void test_tokens_before_an_error_are_kept(void **state) {
    (void)state;
    taas_tokens t = TAAS_TOKENS_INIT;
    taas_error err;
    assert_int_equal(taas_lex("Conv2d(1, st", &t, &err), -1);
    assert_true(t.incomplete);
    assert_int_equal(t.n, 5);  /* Conv2d ( 1 , st: what completion reads */
    assert_string_equal(t.v[4].s, "st");
    taas_tokens_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_keywords),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_floats),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_operators),
        cmocka_unit_test(test_newlines_comments_continuation),
        cmocka_unit_test(test_columns_count_code_points),
        cmocka_unit_test(test_python_keywords_are_errors),
        cmocka_unit_test(test_stray_characters),
        cmocka_unit_test(test_string_errors),
        cmocka_unit_test(test_number_errors),
        cmocka_unit_test(test_bracket_errors),
        cmocka_unit_test(test_continuation_errors),
        cmocka_unit_test(test_tokens_before_an_error_are_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
