/* kernel/protocol/cursor: cursor_pos in code points <-> byte offsets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "cursor.h"

static size_t to_byte(const char *code, json_t *pos) {
    size_t b = taas_cursor_to_byte(code, pos);
    json_decref(pos);
    return b;
}

static void test_to_byte(void **state) {
    (void)state;
    /* "é" is 2 bytes, the emoji 4: code points 0..6 of "é = '😀'" */
    const char *code = "\xc3\xa9 = '\xf0\x9f\x98\x80'";
    assert_int_equal(strlen(code), 11);
    assert_int_equal(to_byte(code, json_integer(0)), 0);
    assert_int_equal(to_byte(code, json_integer(1)), 2);    /* after é */
    assert_int_equal(to_byte(code, json_integer(5)), 6);    /* before the emoji */
    assert_int_equal(to_byte(code, json_integer(6)), 10);   /* after it */
    assert_int_equal(to_byte(code, json_integer(7)), 11);   /* the end */
    assert_int_equal(to_byte(code, json_integer(99)), 11);  /* clamped */
    assert_int_equal(to_byte(code, json_integer(-3)), 0);
    assert_int_equal(to_byte(code, json_real(1.0)), 2);
    assert_int_equal(to_byte(code, NULL), 11);              /* missing: the end */
    assert_int_equal(to_byte(code, json_string("3")), 11);
    assert_int_equal(to_byte("", json_integer(4)), 0);
    assert_int_equal(to_byte("abc", json_integer(2)), 2);
}

static void test_from_byte(void **state) {
    (void)state;
    const char *code = "\xc3\xa9 = '\xf0\x9f\x98\x80'";
    assert_int_equal(taas_cursor_from_byte(code, 0), 0);
    assert_int_equal(taas_cursor_from_byte(code, 2), 1);
    assert_int_equal(taas_cursor_from_byte(code, 10), 6);
    assert_int_equal(taas_cursor_from_byte(code, 11), 7);
    assert_int_equal(taas_cursor_from_byte(code, 500), 7);  /* clamped */
    /* round trip at every code point */
    for (int cp = 0; cp <= 7; cp++) {
        json_t *p = json_integer(cp);
        assert_int_equal(taas_cursor_from_byte(code, taas_cursor_to_byte(code, p)), cp);
        json_decref(p);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_byte),
        cmocka_unit_test(test_from_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
