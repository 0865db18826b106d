/* taas_error: what went wrong, where, and what to do about it.
 * Every module reports user-facing failures through one of these; the kernel turns it
 * into a Jupyter `error` output (ename, evalue, traceback). */
#ifndef TAAS_ERROR_H
#define TAAS_ERROR_H

#include <stdarg.h>

/* A place in a cell: 1-based line and column (column counts code points). 0 = unknown. */
typedef struct taas_srcpos {
    int line;
    int col;
} taas_srcpos;

/* An error tied to no place in a cell (a file, a worker, the network). An object, not a
 * compound literal: a function that calls setjmp (libpng's, libjpeg's) may use it. */
extern const taas_srcpos taas_nopos;
#define TAAS_NOPOS taas_nopos

typedef struct taas_error {
    char ename[48];         /* TaasSyntaxError, TaasTypeError, TaasNameError, TaasValueError, ... */
    char message[1024];     /* evalue: what is wrong */
    char hint[512];         /* what to do; "" when there is nothing useful to say */
    taas_srcpos pos;        /* where; line 0 = not tied to a place in the cell */
    int width;              /* how many code points the caret underlines (>= 1) */
    char source_line[512];  /* the cell line at pos.line, filled by taas_error_attach_source */
} taas_error;

void taas_error_clear(taas_error *e);
int taas_error_is_set(const taas_error *e);

/* Sets ename, position and message; returns -1 so callers can `return taas_error_set(...)`. */
int taas_error_set(taas_error *e, const char *ename, taas_srcpos pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int taas_error_vset(taas_error *e, const char *ename, taas_srcpos pos, const char *fmt, va_list ap);
void taas_error_hint(taas_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Puts context before the message ("layer 3 (BatchNorm1d): " + message); ename, hint and
 * position stay. */
void taas_error_prefix(taas_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies line e->pos.line of the cell into e->source_line (no-op when unknown). */
void taas_error_attach_source(taas_error *e, const char *cell);

/* Plain-text traceback lines, each malloc'd, NULL-terminated array (caller frees with
 * taas_error_traceback_free):
 *   Cell line 2, column 14
 *     net = Linear(9000, 128, bias=Flase)
 *                                  ^^^^^
 *   TaasNameError: name 'Flase' is not defined
 *   hint: did you mean 'False'? */
char **taas_error_traceback(const taas_error *e);
void taas_error_traceback_free(char **lines);

#endif
