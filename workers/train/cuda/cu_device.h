/* One GPU as the training core uses it: the device, the stream every kernel and cuBLAS call
 * of a rank is queued on (in order: no work needs another's event), and cuBLAS's handle on
 * that stream. FP32 throughout; the matrix products (Linear, Conv1D, Conv2d) on tensor cores
 * only when asked for: TF32 (TAAS_CUDA_TF32=1) rounds their inputs to 10 bits of mantissa,
 * BF16 (fit(precision='bf16')) to 7, both summing in FP32 (docs/cuda.md). */
#ifndef TAAS_CU_DEVICE_H
#define TAAS_CU_DEVICE_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cu_check.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The matrix products' arithmetic: cuBLAS's compute type for FP32 matrices. */
typedef enum taas_cu_math {
    TAAS_CU_FP32,  /* CUBLAS_COMPUTE_32F */
    TAAS_CU_TF32,  /* CUBLAS_COMPUTE_32F_FAST_TF32 */
    TAAS_CU_BF16,  /* CUBLAS_COMPUTE_32F_FAST_16BF: bf16 inputs, FP32 sums, FP32 in memory */
} taas_cu_math;

/* The fused attention's kernel sets (cu_attention.cu, docs/cuda.md "The attention's kernels"). */
typedef enum taas_cu_attention {
    TAAS_CU_ATT_TILED,  /* flash attention's way, heads up to 64 (the default) */
    TAAS_CU_ATT_PLAIN,  /* a thread per row, any head */
    TAAS_CU_ATT_GEMM,   /* the (T x T) scores through the matrix products (cuBLAS), a sample at a time */
} taas_cu_attention;

typedef struct taas_cu {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws;          /* cuBLAS's workspace, ours: a captured CUDA Graph allocates nothing */
    struct taas_cu_lt *lt;  /* the products through cuBLASLt (TAAS_CUDA_LT=1, cu_lt.h), or NULL */
    long lt_products, lt_fallbacks;  /* products cuBLASLt ran, and left to cublasGemmEx (tests) */
    struct taas_cu_dnn *dnn;         /* Conv2d through cuDNN (TAAS_CUDA_CUDNN=1, cu_cudnn.h), or NULL */
    long dnn_convs, dnn_fallbacks;   /* convolution passes cuDNN ran, and left to im2col (tests) */
    taas_cu_math math;
    taas_cu_attention attention;  /* the attention's kernels (TAAS_CUDA_ATTENTION, cu_attention.cu) */
    char name[96];          /* the device's name, "NVIDIA H100 80GB HBM3" */
    /* The step part of the dropout counters, read on the device so that a replayed CUDA Graph
     * draws the step's own masks (cu_model.c): a kernel's counter offset is the one it is
     * given plus *step * step_stride, when step (device memory) is set. */
    const uint64_t *step;
    uint64_t step_stride;
} taas_cu;

/* Whether the environment variable `name` is "1": the plugin's switches (TAAS_CUDA_LT, ...). */
int taas_cu_env_on(const char *name);
/* Makes device `device` this thread's and sets up the stream and cuBLAS (TF32 from
 * $TAAS_CUDA_TF32, "1" turns it on; cuBLASLt from $TAAS_CUDA_LT, "1"; cuDNN's convolutions
 * from $TAAS_CUDA_CUDNN, "1"; the attention's kernels from $TAAS_CUDA_ATTENTION: "tiled",
 * "plain" or "gemm"). 0, or -1 with err (nothing is left to free). */
int taas_cu_init(taas_cu *cu, int device, taas_error *err);
/* 0 when the plugin's kernels can run on cu's device, else -1 with err naming its compute
 * capability (cu_act.cu). */
int taas_cu_check_code(taas_cu *cu, taas_error *err);
/* The matrix products' arithmetic from now on. */
void taas_cu_set_math(taas_cu *cu, taas_cu_math math);
/* " TF32", " BF16" or "" (FP32), for the engine's name. */
const char *taas_cu_math_name(const taas_cu *cu);
/* Column-major C = alpha op(A) op(B) + beta C on FP32 matrices in cu's arithmetic
 * (cublasGemmEx), and its strided batches (cublasGemmStridedBatchedEx): every matrix product
 * of the plugin goes through these two. With TAAS_CUDA_LT=1, through cuBLASLt instead
 * (cu_lt.h), cublasGemmEx where cuBLASLt has no algorithm for a shape. */
cublasStatus_t taas_cu_gemm(taas_cu *cu, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                            float *c, int ldc);
cublasStatus_t taas_cu_gemm_strided(taas_cu *cu, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    const float *alpha, const float *a, int lda, long long sa, const float *b,
                                    int ldb, long long sb, const float *beta, float *c, int ldc, long long sc,
                                    int batches);
/* Waits for everything queued on the stream; its errors are err's. */
int taas_cu_sync(taas_cu *cu, const char *what, taas_error *err);
void taas_cu_free(taas_cu *cu);

/* cudaMalloc of n bytes (at least 1) with a message that says what for. */
int taas_cu_alloc(void **p, size_t n, const char *what, taas_error *err);
/* Host to device and back, on the stream, waiting for the copy (and what was queued before
 * it): for set-up and saving, not for the hot path. */
int taas_cu_upload(taas_cu *cu, void *dst, const void *src, size_t n, const char *what, taas_error *err);
int taas_cu_download(taas_cu *cu, void *dst, const void *src, size_t n, const char *what, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
