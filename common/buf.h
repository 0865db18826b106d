/* taas_buf: a growable NUL-terminated byte string, for building text and reprs. */
#ifndef TAAS_BUF_H
#define TAAS_BUF_H

#include <stddef.h>

typedef struct taas_buf {
    char *data;   /* always NUL-terminated once anything was added; NULL when empty */
    size_t len;
    size_t cap;
    int failed;   /* an append found no memory: the text lacks it and all that came after;
                     the owner says so (taas_buf_take gives NULL) */
} taas_buf;

#define TAAS_BUF_INIT {NULL, 0, 0, 0}

void taas_buf_add(taas_buf *b, const char *s, size_t n);
/* s NULL (a text that could not be made, out of memory) fails b. */
void taas_buf_puts(taas_buf *b, const char *s);
void taas_buf_putc(taas_buf *b, char c);
void taas_buf_printf(taas_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with HTML's special characters (& < > " ') escaped; s may be NULL. */
void taas_buf_html(taas_buf *b, const char *s);
/* Appends an integer with thousands separators: 1200138 -> "1,200,138". */
void taas_buf_thousands(taas_buf *b, long long n);
/* Appends a duration as a person reads it: "1 h 2 min", "3 min 5 s", then below a minute
 * "5.2 s" (tenths), or "5 s" (whole seconds, at least 1: an estimate or a budget). */
void taas_buf_duration(taas_buf *b, double seconds, int tenths);
/* Hands the string to the caller ("" for an empty buffer) and resets b; NULL when b failed
 * (out of memory). */
char *taas_buf_take(taas_buf *b);
void taas_buf_free(taas_buf *b);

#endif
