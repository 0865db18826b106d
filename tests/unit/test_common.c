/* common/: UTF-8 handling, error tracebacks, the string buffer, plain words and shell quoting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "error.h"
#include "shell.h"
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

/* A plain word: ASCII letters, digits and _ @ % + = : , . / -, not empty, not starting
 * with '-'; anything else is where the rule breaks. */
static void test_shell_plain(void **state) {
    (void)state;
    static const char *const plain[] = {"/usr/bin/ssh", "me@gpu1.example.org", "fe80::1%eth0", "a_b+c=d,e:f.g/h-i",
                                        "10.0.0.21", "x-"};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) assert_null(taas_shell_unplain(plain[i]));
    static const struct { const char *s; size_t at; } bad[] = {
        {"", 0}, {"-oProxyCommand=x", 0}, {"/x/a b", 4}, {"/x/$(id)", 3}, {"/x/`id`", 3}, {"a;b", 1}, {"a|b", 1},
        {"a&b", 1}, {"a\nb", 1}, {"a'b", 1}, {"a\"b", 1}, {"a\\b", 1}, {"a*", 1}, {"a?", 1}, {"~/x", 0}, {"a#b", 1},
        {"a<b", 1}, {"a>b", 1}, {"a(b", 1}, {"a{b}", 1}, {"a[1]", 1}, {"a!b", 1}, {"t\xc3\xa4", 1}, {"a\x7f", 1},
        {"a\tb", 1}, {"a^b", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *at = taas_shell_unplain(bad[i].s);
        if (at != bad[i].s + bad[i].at) fail_msg("'%s': wanted offset %zu, got %s", bad[i].s, bad[i].at, at ? "another" : "plain");
    }
    assert_true(taas_shell_plain_char('%'));
    assert_false(taas_shell_plain_char('\0'));
    assert_false(taas_shell_plain_char(' '));
}

/* A quoted word reads back as itself through a real shell (printf '%s' WORD), whatever it
 * holds, and nothing in it runs; plain words stay as they are. */
static void test_shell_quote(void **state) {
    (void)state;
    char dir[] = "/tmp/taas-test-shell-XXXXXX", pwned[64];
    assert_non_null(mkdtemp(dir));
    snprintf(pwned, sizeof pwned, "%s/pwned", dir);
    char inject[5][128];
    snprintf(inject[0], sizeof inject[0], "a;touch${IFS}%s", pwned);
    snprintf(inject[1], sizeof inject[1], "$(touch %s)", pwned);
    snprintf(inject[2], sizeof inject[2], "`touch %s`", pwned);
    snprintf(inject[3], sizeof inject[3], "'; touch %s; '", pwned);
    snprintf(inject[4], sizeof inject[4], "a\ntouch %s", pwned);
    const char *words[] = {inject[0], inject[1], inject[2], inject[3], inject[4], "", "it's", "a b", "-v", "\\",
                           "\"x\"", "*", "~", "/usr/bin/ssh"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        taas_buf cmd = TAAS_BUF_INIT;
        taas_buf_puts(&cmd, "printf '%s' ");
        taas_shell_quote(&cmd, words[i]);
        FILE *p = popen(cmd.data, "r");
        assert_non_null(p);
        char out[256];
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        assert_int_equal(pclose(p), 0);
        if (strcmp(out, words[i])) fail_msg("%s printed '%s'", cmd.data, out);
        taas_buf_free(&cmd);
    }
    assert_int_equal(access(pwned, F_OK), -1);
    rmdir(dir);
    taas_buf b = TAAS_BUF_INIT;
    taas_shell_quote(&b, "/usr/bin/ssh");
    assert_string_equal(b.data, "/usr/bin/ssh");
    taas_buf_free(&b);
    taas_shell_quote(&b, "");
    assert_string_equal(b.data, "''");
    taas_buf_free(&b);
    taas_shell_quote(&b, "it's");
    assert_string_equal(b.data, "'it'\\''s'");
    taas_buf_free(&b);
    /* the hint's command: ssh a;touch${IFS}/tmp/pwned true, quoted word by word */
    const char *argv[] = {"ssh", "-F", "/home/me/my ssh", "a;touch${IFS}/tmp/pwned", "true"};
    taas_shell_command(&b, argv, 5);
    assert_string_equal(b.data, "ssh -F '/home/me/my ssh' 'a;touch${IFS}/tmp/pwned' true");
    taas_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_valid),        cmocka_unit_test(test_utf8_sanitize),
        cmocka_unit_test(test_utf8_positions),    cmocka_unit_test(test_utf8_clip),    cmocka_unit_test(test_error_traceback),
        cmocka_unit_test(test_error_without_place), cmocka_unit_test(test_buf), cmocka_unit_test(test_buf_duration),
        cmocka_unit_test(test_shell_plain),       cmocka_unit_test(test_shell_quote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
