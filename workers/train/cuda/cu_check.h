/* CUDA and cuBLAS return codes as taas_errors: every call into them is checked, and a
 * failure becomes a TaasDeviceError that says what was being done, CUDA's own words, and
 * what the user can do about it. */
#ifndef TAAS_CU_CHECK_H
#define TAAS_CU_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "error.h"

/* 0 when rc is cudaSuccess; else -1 with err: "<what> failed on the GPU: <CUDA's message>". */
int taas_cu_check(cudaError_t rc, const char *what, taas_error *err);
/* The same for a cuBLAS status. */
int taas_cu_check_blas(cublasStatus_t rc, const char *what, taas_error *err);
/* After a kernel launch: its configuration error, if any (cudaGetLastError). Errors while it
 * runs show at the next synchronisation, which is checked too. */
int taas_cu_check_launch(const char *what, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
