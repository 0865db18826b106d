/* taas_buf: a growable NUL-terminated byte string, for building text and reprs. */
#ifndef TAAS_BUF_H
#define TAAS_BUF_H

#include <stddef.h>

typedef struct taas_buf {
    char *data;   /* always NUL-terminated once anything was added; NULL when empty */
    size_t len;
    size_t cap;
} taas_buf;

#define TAAS_BUF_INIT {NULL, 0, 0}

void taas_buf_add(taas_buf *b, const char *s, size_t n);
void taas_buf_puts(taas_buf *b, const char *s);
void taas_buf_putc(taas_buf *b, char c);
void taas_buf_printf(taas_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with HTML's special characters (& < > " ') escaped; s may be NULL. */
void taas_buf_html(taas_buf *b, const char *s);
/* Appends an integer with thousands separators: 1200138 -> "1,200,138". */
void taas_buf_thousands(taas_buf *b, long long n);
/* Hands the string to the caller (never NULL: "" for an empty buffer) and resets b. */
char *taas_buf_take(taas_buf *b);
void taas_buf_free(taas_buf *b);

#endif
