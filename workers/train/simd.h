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

/* Below this many elements an OpenMP parallel region costs more than it saves. */
#define TAAS_PAR_MIN 32768

#endif
