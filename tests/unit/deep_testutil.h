/* For the tests of deep and large input (test_parser.c, test_interp.c, test_value.c):
 * long sources made by repetition, and the note that ends a repr cut at its limit.
 * Header-only (static functions). */
#ifndef TAAS_DEEP_TESTUTIL_H
#define TAAS_DEEP_TESTUTIL_H

#include <stdlib.h>
#include <string.h>

/* What value.h's repr appends where it cuts a value's text at TAAS_REPR_MAX_BYTES. */
#define TU_REPR_CUT_NOTE "... (repr cut at 1 MiB; the value is bigger)"

/* head, then unit n times, then tail (malloc'd). */
static inline char *tu_repeated(const char *head, const char *unit, size_t n, const char *tail) {
    size_t h = strlen(head), u = strlen(unit), t = strlen(tail);
    char *s = malloc(h + u * n + t + 1);
    if (!s) abort();
    memcpy(s, head, h);
    for (size_t i = 0; i < n; i++) memcpy(s + h + i * u, unit, u);
    memcpy(s + h + u * n, tail, t + 1);
    return s;
}

static inline int tu_ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

#endif
