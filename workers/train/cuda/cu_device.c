/* A GPU's stream and cuBLAS handle (cu_device.h), and the plugin's device queries
 * (cuda_plugin.h). */
#include "cu_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_cudnn.h"
#include "cu_lt.h"
#include "cuda_plugin.h"
#include "errnames.h"

__attribute__((visibility("default"))) int taas_cuda_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;  /* no driver, or no device: the CPU trains */
    }
    return n;
}

__attribute__((visibility("default"))) int taas_cuda_device_info(int index, char *name, size_t cap,
                                                                 size_t *memory_bytes) {
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    if (cap) snprintf(name, cap, "%s", p.name);
    *memory_bytes = p.totalGlobalMem;
    return 0;
}

int taas_cu_env_on(const char *name) {
    const char *v = getenv(name);
    return v && !strcmp(v, "1");
}

void taas_cu_set_math(taas_cu *cu, taas_cu_math math) {
    cu->math = math;
}

const char *taas_cu_math_name(const taas_cu *cu) {
    return cu->math == TAAS_CU_TF32 ? ", TF32" : cu->math == TAAS_CU_BF16 ? ", BF16" : "";
}

/* cuBLAS's own default on Hopper; it allocates nothing more while a CUDA Graph is captured */
enum { BLAS_WORKSPACE = 32 << 20 };

/* Whether cuBLASLt took a product (else cublasGemmEx runs it), counted for the tests. */
static int lt_took(taas_cu *cu, cublasStatus_t rc) {
    if (rc == CUBLAS_STATUS_NOT_SUPPORTED) {
        cu->lt_fallbacks++;
        return 0;
    }
    cu->lt_products++;
    return 1;
}

static cublasComputeType_t compute_type(const taas_cu *cu) {
    return cu->math == TAAS_CU_TF32   ? CUBLAS_COMPUTE_32F_FAST_TF32
           : cu->math == TAAS_CU_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                      : CUBLAS_COMPUTE_32F;
}

cublasStatus_t taas_cu_gemm(taas_cu *cu, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                            float *c, int ldc) {
    if (cu->lt) {
        cublasStatus_t rc = taas_cu_lt_gemm(cu->lt, cu->stream, cu->blas_ws, BLAS_WORKSPACE, compute_type(cu), ta, tb, m,
                                            n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
        if (lt_took(cu, rc)) return rc;
    }
    return cublasGemmEx(cu->blas, ta, tb, m, n, k, alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, beta, c, CUDA_R_32F,
                        ldc, compute_type(cu), CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t taas_cu_gemm_strided(taas_cu *cu, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    const float *alpha, const float *a, int lda, long long sa, const float *b,
                                    int ldb, long long sb, const float *beta, float *c, int ldc, long long sc,
                                    int batches) {
    if (cu->lt) {
        cublasStatus_t rc = taas_cu_lt_gemm(cu->lt, cu->stream, cu->blas_ws, BLAS_WORKSPACE, compute_type(cu), ta, tb, m,
                                            n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batches);
        if (lt_took(cu, rc)) return rc;
    }
    return cublasGemmStridedBatchedEx(cu->blas, ta, tb, m, n, k, alpha, a, CUDA_R_32F, lda, sa, b, CUDA_R_32F, ldb, sb,
                                      beta, c, CUDA_R_32F, ldc, sc, batches, compute_type(cu), CUBLAS_GEMM_DEFAULT);
}

int taas_cu_init(taas_cu *cu, int device, taas_error *err) {
    memset(cu, 0, sizeof *cu);
    cu->device = device;
    const char *att = getenv("TAAS_CUDA_ATTENTION");
    if (!att || !*att || !strcmp(att, "tiled")) cu->attention = TAAS_CU_ATT_TILED;
    else if (!strcmp(att, "plain")) cu->attention = TAAS_CU_ATT_PLAIN;
    else if (!strcmp(att, "gemm")) cu->attention = TAAS_CU_ATT_GEMM;
    else {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "TAAS_CUDA_ATTENTION=%.40s: not a kind of attention kernel", att);
        taas_error_hint(err, "set it to tiled (the default), plain or gemm, or unset it");
        return -1;
    }
    int n = taas_cuda_devices();
    if (device < 0 || device >= n) {
        taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "there is no GPU %d: this process sees %d", device, n);
        taas_error_hint(err, "check CUDA_VISIBLE_DEVICES and nvidia-smi");
        return -1;
    }
    size_t mem;
    if (taas_cuda_device_info(device, cu->name, sizeof cu->name, &mem)) snprintf(cu->name, sizeof cu->name, "?");
    if (taas_cu_check(cudaSetDevice(device), "selecting the GPU", err) || taas_cu_check_code(cu, err) ||
        taas_cu_check(cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking), "creating a CUDA stream", err))
        return -1;
    if (taas_cu_check_blas(cublasCreate(&cu->blas), "starting cuBLAS", err)) {
        cu->blas = NULL;
        taas_cu_free(cu);
        return -1;
    }
    if (taas_cu_check_blas(cublasSetStream(cu->blas, cu->stream), "putting cuBLAS on the stream", err) ||
        taas_cu_alloc(&cu->blas_ws, BLAS_WORKSPACE, "cuBLAS's workspace", err) ||
        taas_cu_check_blas(cublasSetWorkspace(cu->blas, cu->blas_ws, BLAS_WORKSPACE), "giving cuBLAS its workspace",
                           err)) {
        taas_cu_free(cu);
        return -1;
    }
    taas_cu_set_math(cu, taas_cu_env_on("TAAS_CUDA_TF32") ? TAAS_CU_TF32 : TAAS_CU_FP32);
    if (taas_cu_env_on("TAAS_CUDA_LT") && !(cu->lt = taas_cu_lt_new())) {
        taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "TAAS_CUDA_LT=1, but cuBLASLt did not start");
        taas_error_hint(err, "unset TAAS_CUDA_LT to use cuBLAS's own products");
        taas_cu_free(cu);
        return -1;
    }
    if (taas_cu_env_on("TAAS_CUDA_CUDNN") && !(cu->dnn = taas_cu_dnn_new(cu->stream, err))) {
        taas_cu_free(cu);
        return -1;
    }
    return 0;
}

int taas_cu_sync(taas_cu *cu, const char *what, taas_error *err) {
    return taas_cu_check(cudaStreamSynchronize(cu->stream), what, err);
}

void taas_cu_free(taas_cu *cu) {
    taas_cu_dnn_free(cu->dnn);
    cu->dnn = NULL;
    taas_cu_lt_free(cu->lt);
    cu->lt = NULL;
    if (cu->blas) cublasDestroy(cu->blas);
    if (cu->blas_ws) cudaFree(cu->blas_ws);
    cu->blas_ws = NULL;
    if (cu->stream) cudaStreamDestroy(cu->stream);
    cu->blas = NULL;
    cu->stream = NULL;
}

int taas_cu_alloc(void **p, size_t n, const char *what, taas_error *err) {
    *p = NULL;
    char msg[160];
    snprintf(msg, sizeof msg, "allocating %.1f MiB for %s", (double)n / (1 << 20), what);
    return taas_cu_check(cudaMalloc(p, n ? n : 1), msg, err);
}

static int copy(taas_cu *cu, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, const char *what,
                taas_error *err) {
    if (n == 0) return 0;
    if (taas_cu_check(cudaMemcpyAsync(dst, src, n, kind, cu->stream), what, err)) return -1;
    return taas_cu_sync(cu, what, err);
}

int taas_cu_upload(taas_cu *cu, void *dst, const void *src, size_t n, const char *what, taas_error *err) {
    return copy(cu, dst, src, n, cudaMemcpyHostToDevice, what, err);
}

int taas_cu_download(taas_cu *cu, void *dst, const void *src, size_t n, const char *what, taas_error *err) {
    return copy(cu, dst, src, n, cudaMemcpyDeviceToHost, what, err);
}
