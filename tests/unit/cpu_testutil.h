/* The training core's tests run once per kernel set (tests/CMakeLists.txt sets TAAS_CPU):
 * a set this CPU lacks is skipped by name (77, ctest's skip), and the run says which set it
 * checks, so a pass cannot come from another one. */
#ifndef TAAS_CPU_TESTUTIL_H
#define TAAS_CPU_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "error.h"

static void tu_kernel_set(void) {
    taas_error err;
    taas_error_clear(&err);
    const char *want = getenv("TAAS_CPU");
    if (taas_cpu_check(&err)) {
        if (want && taas_cpu_best() < TAAS_CPU_AVX512 && (!strcmp(want, "avx512") || !strcmp(want, "avx2"))) {
            printf("skipped: %s (%s)\n", err.message, err.hint);
            exit(77);
        }
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
    const char *got = taas_cpu_set_name(taas_cpu_kernels());
    if (want && *want && strcmp(want, got)) {
        fprintf(stderr, "TAAS_CPU=%s but the kernels in use are %s\n", want, got);
        exit(1);
    }
    printf("kernel set: %s (the CPU's best: %s)\n", got, taas_cpu_set_name(taas_cpu_best()));
}

#endif
