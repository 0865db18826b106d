/* The sizes taas takes, in one place: the builtin table (kernel/lang) checks a cell's
 * arguments against them, naming the argument, and the worker checks the job spec against
 * the same numbers. And the one way to compute a size from untrusted numbers: saturating
 * arithmetic, so that an overflow is a size too big for any machine, never a small one. */
#ifndef TAAS_BOUNDS_H
#define TAAS_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#define TAAS_MAX_EPOCHS 1000000
#define TAAS_MAX_BATCH_SIZE (1 << 24)
#define TAAS_MAX_PREFETCH 1024
#define TAAS_MAX_LOADER_THREADS 256
/* a layer's sizes (features, channels, kernel) and an input's: the planner's int */
#define TAAS_MAX_DIM INT32_MAX
/* an image's side, as the decoders take it */
#define TAAS_MAX_SIDE 65536
/* an image's pixels: bigger is refused before anything is allocated (a corrupt header can
 * claim 2^31). The fuzz build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, libFuzzer's
 * convention) takes 2^22, so that a 300-byte input cannot make one run decode 800 MB and
 * the fuzzer spends its time on the parsers; the refusal's code is the same. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define TAAS_MAX_PIXELS ((size_t)1 << 22)
#else
#define TAAS_MAX_PIXELS ((size_t)1 << 28)
#endif

/* a * b, or SIZE_MAX when it does not fit */
static inline size_t taas_size_mul(size_t a, size_t b) {
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

/* a + b, or SIZE_MAX when it does not fit */
static inline size_t taas_size_add(size_t a, size_t b) {
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}

#endif
