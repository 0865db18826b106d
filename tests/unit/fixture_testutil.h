/* Committed reference fixtures (tests/data/, written by the tests/gen_*_ref.py scripts from
 * PyTorch): found through $TAAS_SOURCE_DIR, which ctest sets. */
#ifndef TAAS_FIXTURE_TESTUTIL_H
#define TAAS_FIXTURE_TESTUTIL_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* tests/data/<rel> parsed, or NULL after saying on stderr why. */
static inline json_t *tu_fixture_load(const char *rel) {
    const char *src = getenv("TAAS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s", src && *src ? src : ".", rel);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fprintf(stderr, "cannot read %s: %s (set TAAS_SOURCE_DIR)\n", path, je.text);
    return j;
}

/* A cmocka group whose fixture is one file: TU_FIXTURE_GROUP(REF, "optim/optim.json")
 * defines REF, load_ref and free_ref. */
#define TU_FIXTURE_GROUP(var, rel)                      \
    static json_t *var;                                 \
    static int load_ref(void **state) {                 \
        (void)state;                                    \
        var = tu_fixture_load(rel);                     \
        return var ? 0 : -1;                            \
    }                                                   \
    static int free_ref(void **state) {                 \
        (void)state;                                    \
        json_decref(var);                               \
        return 0;                                       \
    }

#endif
