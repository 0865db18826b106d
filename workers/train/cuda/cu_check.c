/* CUDA and cuBLAS return codes as taas_errors (cu_check.h). */
#include "cu_check.h"
#include "errnames.h"

int taas_cu_check(cudaError_t rc, const char *what, taas_error *err) {
    if (rc == cudaSuccess) return 0;
    taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "%s failed on the GPU: %s (%s)", what, cudaGetErrorString(rc),
                   cudaGetErrorName(rc));
    if (rc == cudaErrorMemoryAllocation) {
        size_t free_b = 0, total = 0;
        if (cudaMemGetInfo(&free_b, &total) == cudaSuccess)
            taas_error_hint(err, "the GPU has %zu MiB free of %zu MiB: use a smaller batch_size or model",
                            free_b >> 20, total >> 20);
        else
            taas_error_hint(err, "use a smaller batch_size or model");
    } else if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
        taas_error_hint(err, "this machine's NVIDIA driver does not offer the GPU; nvidia-smi shows what it sees");
    } else {
        taas_error_hint(err, "the GPU or its driver failed; nvidia-smi shows its state (an Xid error in dmesg "
                             "names a hardware fault)");
    }
    (void)cudaGetLastError();  /* a sticky error stays; a non-sticky one is now reported */
    return -1;
}

static const char *blas_text(cublasStatus_t rc) {
    switch (rc) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS is not initialised";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate memory";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value (a matrix size or leading dimension)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the GPU lacks a feature the call needs";
    case CUBLAS_STATUS_MAPPING_ERROR: return "GPU memory could not be accessed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to run";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal cuBLAS error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "a licence error";
    default: return "an unknown error";
    }
}

int taas_cu_check_blas(cublasStatus_t rc, const char *what, taas_error *err) {
    if (rc == CUBLAS_STATUS_SUCCESS) return 0;
    taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "%s failed in cuBLAS: %s (status %d)", what, blas_text(rc), (int)rc);
    if (rc == CUBLAS_STATUS_ALLOC_FAILED)
        taas_error_hint(err, "use a smaller batch_size or model");
    else
        taas_error_hint(err, "this is likely a bug in taas's CUDA path; please report it with the model");
    return -1;
}

int taas_cu_check_launch(const char *what, taas_error *err) {
    return taas_cu_check(cudaGetLastError(), what, err);
}
