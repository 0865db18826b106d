/* kernel/protocol/history: tail, range, search (glob, unique, n) and output pairs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"

/* Lines 1..6 as a session would hold them (line 4 not stored: store_history=False). */
static taas_history *sample(void) {
    taas_history *h = taas_history_new();
    assert_non_null(h);
    assert_int_equal(taas_history_add(h, 1, "1 + 2", "3"), 0);
    assert_int_equal(taas_history_add(h, 2, "x = 10", NULL), 0);
    assert_int_equal(taas_history_add(h, 3, "1 + 2", "3"), 0);
    assert_int_equal(taas_history_add(h, 5, "print('h\xc3\xa9')", NULL), 0);
    assert_int_equal(taas_history_add(h, 6, "1 * 2", "2"), 0);
    assert_int_equal(taas_history_count(h), 5);
    return h;
}

/* "[[1,3,\"1 + 2\"],...]" for compact comparison */
static void expect(json_t *got, const char *want) {
    assert_non_null(got);
    char *s = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
    if (strcmp(s, want) != 0) fail_msg("got %s, want %s", s, want);
    free(s);
    json_decref(got);
}

static void test_tail(void **state) {
    (void)state;
    taas_history *h = sample();
    expect(taas_history_tail(h, 2, 0), "[[1,5,\"print('h\xc3\xa9')\"],[1,6,\"1 * 2\"]]");
    expect(taas_history_tail(h, 1, 1), "[[1,6,[\"1 * 2\",\"2\"]]]");
    expect(taas_history_tail(h, 0, 0), "[]");
    expect(taas_history_tail(h, 100, 0),
           "[[1,1,\"1 + 2\"],[1,2,\"x = 10\"],[1,3,\"1 + 2\"],[1,5,\"print('h\xc3\xa9')\"],"
           "[1,6,\"1 * 2\"]]");
    json_t *all = taas_history_tail(h, -1, 0);
    assert_int_equal(json_array_size(all), 5);
    json_decref(all);
    taas_history_free(h);
    h = taas_history_new();
    expect(taas_history_tail(h, 10, 0), "[]");
    taas_history_free(h);
}

static void test_range(void **state) {
    (void)state;
    taas_history *h = sample();
    /* start <= line < stop, in this session (1, or 0 for "current") */
    expect(taas_history_range(h, 1, 2, 4, 0), "[[1,2,\"x = 10\"],[1,3,\"1 + 2\"]]");
    expect(taas_history_range(h, 0, 3, 4, 1), "[[1,3,[\"1 + 2\",\"3\"]]]");
    expect(taas_history_range(h, 1, 5, 0, 1),
           "[[1,5,[\"print('h\xc3\xa9')\",null]],[1,6,[\"1 * 2\",\"2\"]]]");
    expect(taas_history_range(h, 1, 4, 5, 0), "[]");   /* line 4 was not stored */
    expect(taas_history_range(h, 2, 1, 0, 0), "[]");   /* no other sessions */
    expect(taas_history_range(h, -1, 1, 0, 0), "[]");
    taas_history_free(h);
}

static void test_search(void **state) {
    (void)state;
    taas_history *h = sample();
    /* a glob over the whole input, as IPython's sqlite GLOB */
    expect(taas_history_search(h, "1*2", -1, 0, 0),
           "[[1,1,\"1 + 2\"],[1,3,\"1 + 2\"],[1,6,\"1 * 2\"]]");
    expect(taas_history_search(h, "1?2*", -1, 0, 0), "[]");   /* ? is exactly one character */
    expect(taas_history_search(h, "1 ? 2", -1, 0, 0),
           "[[1,1,\"1 + 2\"],[1,3,\"1 + 2\"],[1,6,\"1 * 2\"]]");
    expect(taas_history_search(h, "1 +", -1, 0, 0), "[]");   /* anchored, as IPython's GLOB */
    expect(taas_history_search(h, "*h\xc3\xa9*", -1, 0, 1),
           "[[1,5,[\"print('h\xc3\xa9')\",null]]]");
    expect(taas_history_search(h, "[x]*", -1, 0, 0), "[[1,2,\"x = 10\"]]");
    /* n: the last n matches, oldest first */
    expect(taas_history_search(h, "1*", 2, 0, 0), "[[1,3,\"1 + 2\"],[1,6,\"1 * 2\"]]");
    expect(taas_history_search(h, "*", 0, 0, 0), "[]");
    /* unique: the latest of each distinct input */
    expect(taas_history_search(h, "1*", -1, 1, 0), "[[1,3,\"1 + 2\"],[1,6,\"1 * 2\"]]");
    expect(taas_history_search(h, "1 + 2", -1, 1, 0), "[[1,3,\"1 + 2\"]]");
    expect(taas_history_search(h, "1*", 1, 1, 1), "[[1,6,[\"1 * 2\",\"2\"]]]");
    /* NULL pattern = everything */
    json_t *all = taas_history_search(h, NULL, -1, 0, 0);
    assert_int_equal(json_array_size(all), 5);
    json_decref(all);
    taas_history_free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tail),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
