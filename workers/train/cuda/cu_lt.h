/* The matrix products through cuBLASLt (cublasLtMatmul), for cu_device.c's taas_cu_gemm and
 * taas_cu_gemm_strided when TAAS_CUDA_LT=1 (docs/cuda.md): the same column-major FP32
 * products as cublasGemmEx's, each shape's algorithm picked once by cuBLASLt's heuristic
 * and kept, with its descriptors, for the calls after. A shape's algorithm depends on the
 * operands' alignment (cuBLASLt's heuristic assumes 256 bytes unless told), so the alignment
 * the pointers really have is part of the shape. */
#ifndef TAAS_CU_LT_H
#define TAAS_CU_LT_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taas_cu_lt taas_cu_lt;

/* NULL when cuBLASLt cannot start (the caller keeps cublasGemmEx). */
taas_cu_lt *taas_cu_lt_new(void);
void taas_cu_lt_free(taas_cu_lt *lt);

/* One product, as taas_cu_gemm_strided's arguments (batches 1 for a single product), in
 * compute type ct, on stream st with workspace ws of wsz bytes. CUBLAS_STATUS_NOT_SUPPORTED
 * when cuBLASLt has no algorithm for it (nothing is queued: the caller uses cublasGemmEx). */
cublasStatus_t taas_cu_lt_gemm(taas_cu_lt *lt, cudaStream_t st, void *ws, size_t wsz, cublasComputeType_t ct,
                               cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                               const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                               const float *beta, float *c, int ldc, long long sc, int batches);

#ifdef __cplusplus
}
#endif

#endif
