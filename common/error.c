#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

const taas_srcpos taas_nopos = {0, 0};

void taas_error_clear(taas_error *e) {
    memset(e, 0, sizeof *e);
}

int taas_error_is_set(const taas_error *e) {
    return e->ename[0] != '\0';
}

int taas_error_vset(taas_error *e, const char *ename, taas_srcpos pos, const char *fmt, va_list ap) {
    taas_error_clear(e);
    snprintf(e->ename, sizeof e->ename, "%s", ename);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    e->pos = pos;
    e->width = 1;
    return -1;
}

int taas_error_set(taas_error *e, const char *ename, taas_srcpos pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    taas_error_vset(e, ename, pos, fmt, ap);
    va_end(ap);
    return -1;
}

void taas_error_hint(taas_error *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
}

void taas_error_prefix(taas_error *e, const char *fmt, ...) {
    char msg[sizeof e->message];
    memcpy(msg, e->message, sizeof msg);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof e->message)
        snprintf(e->message + n, sizeof e->message - (size_t)n, "%s", msg);
}

void taas_error_attach_source(taas_error *e, const char *cell) {
    e->source_line[0] = '\0';
    if (!cell || e->pos.line <= 0) return;
    const char *p = cell;
    for (int l = 1; l < e->pos.line && p; l++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p) return;
    size_t n = strcspn(p, "\r\n");
    if (n >= sizeof e->source_line) n = sizeof e->source_line - 1;
    /* never cut a UTF-8 sequence in half */
    while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80) n--;
    memcpy(e->source_line, p, n);
    e->source_line[n] = '\0';
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

char **taas_error_traceback(const taas_error *e) {
    char **lines = calloc(7, sizeof *lines);
    if (!lines) return NULL;
    int n = 0;
    if (e->pos.line > 0) {
        if (e->pos.col > 0)
            lines[n++] = dupf("Cell line %d, column %d", e->pos.line, e->pos.col);
        else
            lines[n++] = dupf("Cell line %d", e->pos.line);
        if (e->source_line[0]) {
            lines[n++] = dupf("    %s", e->source_line);
            if (e->pos.col > 0) {
                /* caret under the column, counting code points; tabs kept so it lines up */
                size_t cols = (size_t)e->pos.col - 1;
                size_t w = e->width > 0 ? (size_t)e->width : 1;
                char *c = malloc(4 + cols + w + 1);
                if (c) {
                    size_t k = 0;
                    memcpy(c, "    ", 4);
                    k = 4;
                    const char *s = e->source_line;
                    for (size_t i = 0; i < cols; i++) {
                        c[k++] = (*s == '\t') ? '\t' : ' ';
                        if (*s) s += taas_utf8_seqlen(s);
                    }
                    for (size_t i = 0; i < w; i++) c[k++] = '^';
                    c[k] = '\0';
                    lines[n++] = c;
                }
            }
        }
    }
    lines[n++] = dupf("%s: %s", e->ename, e->message);
    if (e->hint[0]) lines[n++] = dupf("hint: %s", e->hint);
    lines[n] = NULL;
    return lines;
}

void taas_error_traceback_free(char **lines) {
    if (!lines) return;
    for (char **l = lines; *l; l++) free(*l);
    free(lines);
}
