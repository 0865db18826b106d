/* The header directives of a cell: `#pragma taas ...` and `#!CONFIG` lines, as the kernel
 * parses them before anything of the cell runs (pragma/pragma.h). The machine
 * configurations come from a small fixed file, so that #!NAME lines resolve against
 * user-defined configurations as well as the built-in ones. */
#include <stdlib.h>

#include "fuzz_util.h"
#include "pragma.h"

static const char CONFIG[] =
    "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"description\": \"four GPUs\", \"price_per_hour\": 12.5},"
    " \"c1.2\": {\"gpus\": 0, \"cpus\": 2}, \"g2.8\": {\"gpus\": 8, \"cpus\": 96}}}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("TAAS_CONFIG", fz_write("config.json", CONFIG, sizeof CONFIG - 1), 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *cell = fz_cstr(data, size);
    taas_pragma p;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_pragma_parse(cell, &p, &err);
    fz_say("pragma: %s", rc ? err.message : p.present ? "present" : "none");
    if (rc != 0) {
        /* the kernel shows the error with its source line and caret */
        taas_error_attach_source(&err, cell);
        char **tb = taas_error_traceback(&err);
        taas_error_traceback_free(tb);
    }
    free(cell);
    return 0;
}
