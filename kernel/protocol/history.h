/* The kernel's input history, answered to history_request: every cell run with
 * store_history, in memory for the kernel's life. One session, numbered 1; a cell's line
 * number is its execution_count, as in IPython. */
#ifndef TAAS_HISTORY_H
#define TAAS_HISTORY_H

#include <jansson.h>
#include <stddef.h>

#define TAAS_HISTORY_SESSION 1

typedef struct taas_history taas_history;

taas_history *taas_history_new(void);
void taas_history_free(taas_history *h);

/* Records a cell: line (its execution_count), its code and the text/plain of its
 * execute_result (NULL when it had none). Strings are copied. -1 when out of memory. */
int taas_history_add(taas_history *h, int line, const char *input, const char *output);
size_t taas_history_count(const taas_history *h);

/* The replies' "history" arrays: entries [session, line, input], or with output
 * [session, line, [input, output-or-null]], oldest first. New references.
 *
 * tail: the last n entries (n < 0: all).
 * range: session (0 = this one, 1 = its number; anything else has no entries) with
 *   start <= line < stop; stop <= 0 means to the end.
 * search: entries whose input matches the glob pattern (fnmatch: * ? [...]), the last n
 *   of them (n < 0: all); unique keeps only the latest entry of each distinct input. */
json_t *taas_history_tail(const taas_history *h, long n, int output);
json_t *taas_history_range(const taas_history *h, long session, long start, long stop,
                           int output);
json_t *taas_history_search(const taas_history *h, const char *pattern, long n, int unique,
                            int output);

#endif
