/* "Did you mean ...?": the candidate closest to a misspelt word. */
#ifndef TAAS_SUGGEST_H
#define TAAS_SUGGEST_H

#include <stddef.h>

/* Index in cands[0..n) of the candidate closest to word[0..len), or -1 when none is close
 * enough. Python's rule (Python/suggestions.c): a case change costs 1, any other edit 2,
 * and a candidate counts within (len(word) + len(candidate) + 3) * 2 / 6. An exact match
 * (distance 0) wins; NULL candidates are skipped; ties go to the earlier candidate. */
int taas_suggest(const char *word, size_t len, const char *const *cands, size_t n);

#endif
