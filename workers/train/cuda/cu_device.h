/* One GPU as the training core uses it: the device, the stream every kernel and cuBLAS call
 * of a rank is queued on (in order: no work needs another's event), and cuBLAS's handle on
 * that stream. FP32 throughout; TF32 tensor cores only when asked for (TAAS_CUDA_TF32=1,
 * docs/cuda.md): they round the matrices' inputs to 10 bits of mantissa. */
#ifndef TAAS_CU_DEVICE_H
#define TAAS_CU_DEVICE_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cu_check.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taas_cu {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    int tf32;
    char name[96];          /* the device's name, "NVIDIA H100 80GB HBM3" */
} taas_cu;

/* Makes device `device` this thread's and sets up the stream and cuBLAS (TF32 from
 * $TAAS_CUDA_TF32, "1" turns it on). 0, or -1 with err (nothing is left to free). */
int taas_cu_init(taas_cu *cu, int device, taas_error *err);
/* 0 when the plugin's kernels can run on cu's device, else -1 with err naming its compute
 * capability (cu_act.cu). */
int taas_cu_check_code(taas_cu *cu, taas_error *err);
/* Changes the matrix products' arithmetic: TF32 (on) or FP32 (off). */
int taas_cu_set_tf32(taas_cu *cu, int on, taas_error *err);
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
