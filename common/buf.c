#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0, or -1 when there is no memory for extra more bytes: b is failed from then on. */
static int grow(taas_buf *b, size_t extra) {
    if (b->failed) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void taas_buf_add(taas_buf *b, const char *s, size_t n) {
    if (grow(b, n)) return;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void taas_buf_puts(taas_buf *b, const char *s) {
    if (!s) {
        b->failed = 1;  /* a text that could not be made: the whole is lost */
        return;
    }
    taas_buf_add(b, s, strlen(s));
}

void taas_buf_putc(taas_buf *b, char c) {
    taas_buf_add(b, &c, 1);
}

void taas_buf_printf(taas_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void taas_buf_html(taas_buf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': taas_buf_puts(b, "&amp;"); break;
        case '<': taas_buf_puts(b, "&lt;"); break;
        case '>': taas_buf_puts(b, "&gt;"); break;
        case '"': taas_buf_puts(b, "&quot;"); break;
        case '\'': taas_buf_puts(b, "&#39;"); break;
        default: taas_buf_putc(b, *s);
        }
    }
}

void taas_buf_thousands(taas_buf *b, long long n) {
    char d[32];
    int len = snprintf(d, sizeof d, "%lld", n);
    for (int i = 0; i < len; i++) {
        if (i && d[i - 1] != '-' && (len - i) % 3 == 0) taas_buf_putc(b, ',');
        taas_buf_putc(b, d[i]);
    }
}

char *taas_buf_take(taas_buf *b) {
    char *s = b->failed ? NULL : b->data ? b->data : calloc(1, 1);
    if (b->failed) free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
    return s;
}

void taas_buf_free(taas_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

void taas_buf_duration(taas_buf *b, double s, int tenths) {
    if (!(s >= 0)) s = 0;  /* and NaN */
    if (s > 1e12) s = 1e12;  /* within a long, whatever an estimate says */
    long t = (long)(s + 0.5);
    if (t >= 3600) taas_buf_printf(b, "%ld h %ld min", t / 3600, t / 60 % 60);
    else if (t >= 60) taas_buf_printf(b, "%ld min %ld s", t / 60, t % 60);
    else if (tenths) taas_buf_printf(b, "%.1f s", s);
    else taas_buf_printf(b, "%.0f s", s < 1 ? 1 : s);
}
