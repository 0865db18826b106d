/* Vectorised and threaded loops of the training core.
 *
 * TAAS_VEC marks a hot loop's function to be compiled three times, for AVX-512 (x86-64-v4),
 * AVX2+FMA (x86-64-v3) and the x86-64 baseline, the version picked once at load time from
 * the CPU (GCC's function multiversioning); elsewhere it is an ordinary function. The loops
 * are plain C with `#pragma omp simd`, vectorised by the compiler, not intrinsics.
 * Element-wise results are the same in every version (the build's strict C11 does not
 * contract a*b+c into an FMA); reductions may differ between versions in the last bits,
 * but a machine always runs the same one. */
#ifndef TAAS_SIMD_H
#define TAAS_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TAAS_VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TAAS_VEC
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(x) in float within 2 ulp for finite x in [-87, 88] (clamped there: below it, a value
 * too small to matter beside the 1 a softmax's largest term is; not for infinities), in plain
 * arithmetic that a loop under `#pragma omp simd` runs in vectors, where libm's expf is a call
 * an element: Cody and Waite's reduction by ln 2 in two parts, then Cephes' degree-5
 * polynomial. The same bits on every kernel set (no FMA is contracted). Written for the
 * vectoriser: the clamp's bounds are computed, not constants (a constant lets the compiler
 * specialise each side into control flow it cannot vectorise), and n is rounded by adding
 * and taking away 1.5 * 2^23 (floorf does not vectorise without SSE4.1). */
static inline float taas_expf(float x) {
    float lo = x * 0.0f - 87.0f, hi = x * 0.0f + 88.0f;
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    int32_t k = (int32_t)n;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = (k + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* tanh(x) = 1 - 2 / (exp(2x) + 1), within a few float ulp of 1 absolutely (its relative error
 * grows near 0, where GELU multiplies it by x anyway) */
static inline float taas_tanhf(float x) { return 1.0f - 2.0f / (taas_expf(2.0f * x) + 1.0f); }

/* Below this many elements an OpenMP parallel region costs more than it saves. */
#define TAAS_PAR_MIN 32768

#endif
