/* The kernel set (cpu.h): read once, from the CPU's features and TAAS_CPU. */
#include "cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"

static const char *const NAMES[] = {"generic", "avx2", "avx512"};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static taas_cpu_set chosen, best;
static int asked = -1;  /* TAAS_CPU's set, -2 for a name that is none, -1 unset */

taas_cpu_set taas_cpu_best(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return TAAS_CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return TAAS_CPU_AVX2;
#endif
    return TAAS_CPU_GENERIC;
}

static void decide(void) {
    best = taas_cpu_best();
    chosen = best;
    const char *want = getenv("TAAS_CPU");
    if (!want || !*want) return;
    asked = -2;
    for (int i = 0; i < 3; i++)
        if (!strcmp(want, NAMES[i])) asked = i;
    if (asked >= 0 && asked <= (int)best) chosen = (taas_cpu_set)asked;
}

taas_cpu_set taas_cpu_kernels(void) {
    pthread_once(&once, decide);
    return chosen;
}

const char *taas_cpu_set_name(taas_cpu_set s) {
    return (unsigned)s < 3 ? NAMES[s] : "?";
}

int taas_cpu_check(taas_error *err) {
    pthread_once(&once, decide);
    if (asked == -2) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "TAAS_CPU=%.40s names no kernel set", getenv("TAAS_CPU"));
        taas_error_hint(err, "use avx512, avx2 or generic (this CPU runs up to %s), or leave TAAS_CPU unset",
                        NAMES[best]);
        return -1;
    }
    if (asked > (int)best) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "TAAS_CPU=%s asks for kernels this CPU cannot run",
                       NAMES[asked]);
        taas_error_hint(err, "this CPU runs up to %s; use that or a lower set, or leave TAAS_CPU unset", NAMES[best]);
        return -1;
    }
    return 0;
}
