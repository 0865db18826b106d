#include "history.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

typedef struct entry {
    int line;
    char *input;
    char *output;   /* NULL: the cell had no execute_result */
} entry;

struct taas_history {
    entry *e;
    size_t n, cap;
};

taas_history *taas_history_new(void) {
    return calloc(1, sizeof(taas_history));
}

void taas_history_free(taas_history *h) {
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) {
        free(h->e[i].input);
        free(h->e[i].output);
    }
    free(h->e);
    free(h);
}

int taas_history_add(taas_history *h, int line, const char *input, const char *output) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        entry *e = realloc(h->e, cap * sizeof *e);
        if (!e) return -1;
        h->e = e;
        h->cap = cap;
    }
    entry *x = &h->e[h->n];
    x->line = line;
    x->input = strdup(input ? input : "");
    x->output = output ? strdup(output) : NULL;
    if (!x->input || (output && !x->output)) {
        free(x->input);
        free(x->output);
        return -1;
    }
    h->n++;
    return 0;
}

size_t taas_history_count(const taas_history *h) {
    return h->n;
}

static int append(json_t *arr, const entry *x, int output) {
    json_t *what = output ? json_pack("[o, o]", taas_json_string(x->input),
                                      x->output ? taas_json_string(x->output) : json_null())
                          : taas_json_string(x->input);
    json_t *row = json_pack("[i, i, o]", TAAS_HISTORY_SESSION, x->line, what);
    return row ? json_array_append_new(arr, row) : -1;
}

json_t *taas_history_tail(const taas_history *h, long n, int output) {
    json_t *arr = json_array();
    size_t first = (n < 0 || (size_t)n >= h->n) ? 0 : h->n - (size_t)n;
    for (size_t i = first; arr && i < h->n; i++) append(arr, &h->e[i], output);
    return arr;
}

json_t *taas_history_range(const taas_history *h, long session, long start, long stop,
                           int output) {
    json_t *arr = json_array();
    if (!arr || (session != 0 && session != TAAS_HISTORY_SESSION)) return arr;
    for (size_t i = 0; i < h->n; i++) {
        const entry *x = &h->e[i];
        if (x->line >= start && (stop <= 0 || x->line < stop)) append(arr, x, output);
    }
    return arr;
}

json_t *taas_history_search(const taas_history *h, const char *pattern, long n, int unique,
                            int output) {
    json_t *arr = json_array();
    if (!arr || h->n == 0 || n == 0) return arr;
    if (!pattern) pattern = "*";
    /* newest first, so that "the last n" and "the latest of each input" fall out of one
     * pass; then put back in order */
    size_t *pick = malloc(h->n * sizeof *pick);
    if (!pick) return arr;
    size_t k = 0;
    for (size_t i = h->n; i-- > 0 && (n < 0 || k < (size_t)n);) {
        const entry *x = &h->e[i];
        if (fnmatch(pattern, x->input, 0) != 0) continue;
        int seen = 0;
        for (size_t j = 0; unique && j < k && !seen; j++)
            seen = strcmp(h->e[pick[j]].input, x->input) == 0;
        if (!seen) pick[k++] = i;
    }
    while (k-- > 0) append(arr, &h->e[pick[k]], output);
    free(pick);
    return arr;
}
