/* The kernel set (cpu.h): the process's own from the CPU's features and TAAS_CPU, or the
 * job's. */
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
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return TAAS_CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return TAAS_CPU_AVX2;
#endif
    return TAAS_CPU_GENERIC;
}

int taas_cpu_parse(const char *name) {
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, NAMES[i])) return i;
    return -1;
}

static void decide(void) {
    best = taas_cpu_best();
    chosen = best;
    const char *want = getenv("TAAS_CPU");
    if (!want || !*want) return;
    asked = taas_cpu_parse(want);
    if (asked < 0) asked = -2;
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

int taas_cpu_use(taas_cpu_set s, taas_error *err) {
    pthread_once(&once, decide);
    if ((unsigned)s > (unsigned)best) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "this CPU cannot run the job's %s kernels (it runs up to %s)",
                       taas_cpu_set_name(s), NAMES[best]);
        taas_error_hint(err, "the kernel gives every rank a set all their hosts run; the worker and the kernel may "
                             "come from different builds");
        return -1;
    }
    chosen = s;
    return 0;
}
