/* common/: UTF-8 handling, error tracebacks, the string buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "buf.h"
#include "error.h"
#include "utf8.h"

static void test_utf8_valid(void **state) {
    (void)state;
    assert_true(taas_utf8_valid("abc", 3));
    assert_true(taas_utf8_valid("\xC3\xA9", 2));          /* é */
    assert_true(taas_utf8_valid("\xF0\x9F\x98\x80", 4));  /* emoji */
    assert_false(taas_utf8_valid("\xC3", 1));             /* truncated */
    assert_false(taas_utf8_valid("\xC0\xAF", 2));         /* overlong */
    assert_false(taas_utf8_valid("\xED\xA0\x80", 3));     /* surrogate */
    assert_false(taas_utf8_valid("\xF4\x90\x80\x80", 4)); /* above U+10FFFF */
    assert_false(taas_utf8_valid("\xFF", 1));
}

static void test_utf8_sanitize(void **state) {
    (void)state;
    size_t n;
    char *s = taas_utf8_sanitize("a\xFF" "b\xC3", 4, &n);
    assert_string_equal(s, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
    assert_int_equal(n, strlen(s));
    free(s);
    /* an embedded NUL cannot reach a C string or JSON */
    s = taas_utf8_sanitize("a\0b", 3, &n);
    assert_string_equal(s, "a\xEF\xBF\xBD" "b");
    free(s);
    s = taas_utf8_sanitize("", 0, &n);
    assert_string_equal(s, "");
    assert_int_equal(n, 0);
    free(s);
}

static void test_utf8_positions(void **state) {
    (void)state;
    const char *s = "\xC3\xA9t\xF0\x9F\x98\x80x"; /* é t 😀 x */
    assert_int_equal(taas_utf8_count(s, strlen(s)), 4);
    assert_int_equal(taas_utf8_offset(s, 0), 0);
    assert_int_equal(taas_utf8_offset(s, 1), 2);
    assert_int_equal(taas_utf8_offset(s, 2), 3);
    assert_int_equal(taas_utf8_offset(s, 3), 7);
    assert_int_equal(taas_utf8_offset(s, 99), strlen(s)); /* clamped */
    assert_int_equal(taas_utf8_seqlen("\xFF"), 1);
    assert_int_equal(taas_utf8_seqlen("\xF0\x9F\x98\x80"), 4);
}

static void test_utf8_clip(void **state) {
    (void)state;
    char out[64];
    assert_string_equal(taas_utf8_clip(out, sizeof out, "abc", 3, 40), "abc");
    assert_string_equal(taas_utf8_clip(out, sizeof out, "abcdef", 6, 3), "abc\xE2\x80\xA6");
    assert_string_equal(taas_utf8_clip(out, sizeof out, "a\xFF\0b", 4, 40), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
    /* a small buffer cuts on a whole code point and still ends with the ellipsis */
    char small[8];
    assert_string_equal(taas_utf8_clip(small, sizeof small, "\xC3\xA9\xC3\xA9\xC3\xA9", 6, 40),
                        "\xC3\xA9\xC3\xA9\xE2\x80\xA6");
}

static void test_error_traceback(void **state) {
    (void)state;
    taas_error e;
    taas_error_clear(&e);
    assert_false(taas_error_is_set(&e));
    int rc = taas_error_set(&e, "TaasNameError", (taas_srcpos){2, 9},
                            "name '%s' is not defined", "Flase");
    assert_int_equal(rc, -1);
    assert_true(taas_error_is_set(&e));
    e.width = 5;
    taas_error_hint(&e, "did you mean '%s'?", "False");
    taas_error_attach_source(&e, "x = 1\n\xC3\xA9 = f(Flase)\nz = 3\n");
    char **tb = taas_error_traceback(&e);
    assert_string_equal(tb[0], "Cell line 2, column 9");
    assert_string_equal(tb[1], "    \xC3\xA9 = f(Flase)");
    /* the caret counts code points: é is one column */
    assert_string_equal(tb[2], "            ^^^^^");
    assert_string_equal(tb[3], "TaasNameError: name 'Flase' is not defined");
    assert_string_equal(tb[4], "hint: did you mean 'False'?");
    assert_null(tb[5]);
    taas_error_traceback_free(tb);
}

static void test_error_without_place(void **state) {
    (void)state;
    taas_error e;
    taas_error_set(&e, "KeyboardInterrupt", (taas_srcpos){0, 0}, "interrupted");
    taas_error_attach_source(&e, "sleep(30)");
    char **tb = taas_error_traceback(&e);
    assert_string_equal(tb[0], "KeyboardInterrupt: interrupted");
    assert_null(tb[1]);
    taas_error_traceback_free(tb);
    /* a line past the end of the cell leaves no source line but keeps the place */
    taas_error_set(&e, "TaasSyntaxError", (taas_srcpos){9, 1}, "x");
    taas_error_attach_source(&e, "a\nb");
    tb = taas_error_traceback(&e);
    assert_string_equal(tb[0], "Cell line 9, column 1");
    assert_string_equal(tb[1], "TaasSyntaxError: x");
    taas_error_traceback_free(tb);
}

static void test_buf(void **state) {
    (void)state;
    taas_buf b = TAAS_BUF_INIT;
    char *s = taas_buf_take(&b);
    assert_string_equal(s, "");
    free(s);
    for (int i = 0; i < 100; i++) taas_buf_printf(&b, "%d,", i);
    taas_buf_puts(&b, "end");
    taas_buf_putc(&b, '!');
    assert_int_equal(b.len, strlen(b.data));
    assert_non_null(strstr(b.data, "99,end!"));
    s = taas_buf_take(&b);
    assert_null(b.data);
    free(s);
    taas_buf_free(&b);
}

/* Durations as the display, the cost line and the budget say them; nothing an estimate
 * holds (huge, negative, NaN) is undefined behaviour. */
static void test_buf_duration(void **state) {
    (void)state;
    struct { double s; int tenths; const char *want; } cases[] = {
        {5.24, 1, "5.2 s"}, {5.24, 0, "5 s"}, {0.2, 0, "1 s"}, {0.2, 1, "0.2 s"}, {65, 1, "1 min 5 s"},
        {7200, 0, "2 h 0 min"}, {3725, 0, "1 h 2 min"}, {-3, 0, "1 s"}, {NAN, 1, "0.0 s"},
        {1e300, 0, "277777777 h 46 min"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        taas_buf b = TAAS_BUF_INIT;
        taas_buf_duration(&b, cases[i].s, cases[i].tenths);
        assert_string_equal(b.data, cases[i].want);
        taas_buf_free(&b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_valid),        cmocka_unit_test(test_utf8_sanitize),
        cmocka_unit_test(test_utf8_positions),    cmocka_unit_test(test_utf8_clip),    cmocka_unit_test(test_error_traceback),
        cmocka_unit_test(test_error_without_place), cmocka_unit_test(test_buf), cmocka_unit_test(test_buf_duration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
