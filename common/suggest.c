#include "suggest.h"

#include <string.h>

#define MAXLEN 64

static int lower(int c) {
    return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

static size_t distance(const char *a, size_t la, const char *b, size_t lb) {
    size_t row[MAXLEN + 1];
    for (size_t j = 0; j <= lb; j++) row[j] = j * 2;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i * 2;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            char ca = a[i - 1], cb = b[j - 1];
            size_t sub = ca == cb ? 0 : (lower(ca) == lower(cb)) ? 1 : 2;
            size_t best = diag + sub;
            if (row[j - 1] + 2 < best) best = row[j - 1] + 2;
            if (up + 2 < best) best = up + 2;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

int taas_suggest(const char *word, size_t len, const char *const *cands, size_t n) {
    if (!word || len > MAXLEN) return -1;
    int best = -1;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i]) continue;
        size_t lc = strlen(cands[i]);
        if (lc > MAXLEN) continue;
        size_t d = distance(word, len, cands[i], lc);
        if (d > (len + lc + 3) * 2 / 6) continue;
        if (d < best_d) {
            best_d = d;
            best = (int)i;
        }
    }
    return best;
}
