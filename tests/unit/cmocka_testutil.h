/* For clang's static analyzer only: cmocka 1.1 ends a failed check with a longjmp out of
 * _fail(), which it does not declare noreturn, so the analyzer follows every failed check on
 * and reports the leaks and NULL uses after it. Here a failed check ends the path, as it
 * ends the test. Compilers see cmocka's own macros. Include after <cmocka.h>. */
#ifndef TAAS_CMOCKA_TESTUTIL_H
#define TAAS_CMOCKA_TESTUTIL_H

#ifdef __clang_analyzer__
#include <stddef.h>

void _fail(const char *const file, const int line) __attribute__((analyzer_noreturn));

#undef assert_true
#define assert_true(c) ((c) ? (void)0 : _fail(__FILE__, __LINE__))
#undef assert_false
#define assert_false(c) ((c) ? _fail(__FILE__, __LINE__) : (void)0)
#undef assert_null
#define assert_null(c) assert_true((c) == NULL)
#undef assert_non_null
#define assert_non_null(c) assert_true((c) != NULL)
#undef assert_int_equal
#define assert_int_equal(a, b) \
    assert_true(cast_to_largest_integral_type(a) == cast_to_largest_integral_type(b))
#undef assert_int_not_equal
#define assert_int_not_equal(a, b) \
    assert_true(cast_to_largest_integral_type(a) != cast_to_largest_integral_type(b))
#endif

#endif
