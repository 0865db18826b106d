/* OpenBLAS as the training core uses it: one set-up per process, and sgemm split across
 * the caller's OpenMP threads. All parallelism is OpenMP's: OpenBLAS runs single-threaded,
 * because its own thread pool spinning next to OpenMP's on the same cores made every GEMM
 * slower than either alone. */
#ifndef TAAS_BLAS_H
#define TAAS_BLAS_H

#include <cblas.h>

/* Once per process, before any sgemm (cheap to call again; every layer that multiplies
 * calls it): makes OpenBLAS single-threaded and gives it the one core of the kernel set in
 * use (cpu.h): SkylakeX for avx512, Haswell for avx2, Nehalem for generic. Neither its own
 * CPU detection (OpenBLAS 0.3.21 takes unknown Intel models, such as Emerald Rapids, for a
 * Prescott and runs SSE3 code on AVX-512 cores: 3.5x slower) nor OPENBLAS_CORETYPE in the
 * environment changes it: the same set sums in the same order on every host. */
void taas_blas_setup(void);
/* After taas_cpu_use changed the set: OpenBLAS's core follows it (before any compute thread). */
void taas_blas_follow(void);
/* The OpenBLAS kernel set in use ("SkylakeX", "Haswell", ...). */
const char *taas_blas_core(void);

/* Row-major C (M, N) = alpha * op(A) op(B) + beta * C, as cblas_sgemm, with the larger of M
 * and N split into `nthreads` OpenMP slices, each one single-threaded sgemm. The split
 * depends only on the sizes and the thread count, so results repeat run to run. Call it
 * outside parallel regions. */
void taas_sgemm(int nthreads, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

#endif
