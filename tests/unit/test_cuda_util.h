/* What the CUDA tests share (test_cuda_*.c): the skip where there is no GPU (exit status 77,
 * which ctest's SKIP_RETURN_CODE reports as skipped, by name), device buffers filled from the
 * fixtures, and the layer tests' comparison. */
#ifndef TAAS_TEST_CUDA_UTIL_H
#define TAAS_TEST_CUDA_UTIL_H

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cu_device.h"
#include "cuda_plugin.h"

#define TU_SKIP 77

/* Exits with 77 and says why when this process sees fewer than `need` GPUs; with
 * TAAS_REQUIRE_GPU=1 (scripts/gpu.sh run, where nvidia-smi is) seeing none fails instead,
 * with the runtime's reason, so that a driver the plugin cannot use is no skip. */
static inline void tu_cuda_require(int need) {
    int n = taas_cuda_devices();
    if (n == 0 && taas_cu_env_on("TAAS_REQUIRE_GPU")) {
        int seen = 0;
        cudaError_t rc = cudaGetDeviceCount(&seen);
        printf("TAAS_REQUIRE_GPU=1, but no CUDA device: %s: failed\n",
               rc == cudaSuccess ? "the count is 0" : cudaGetErrorString(rc));
        fflush(stdout);
        exit(1);
    }
    if (n < need) {
        if (need == 1) printf("no CUDA device: skipped\n");
        else printf("%d CUDA device%s, the test needs %d: skipped\n", n, n == 1 ? "" : "s", need);
        fflush(stdout);
        exit(TU_SKIP);
    }
}

/* A cmocka group on GPU 0 (include cmocka.h first): defines CU, its stream and cuBLAS, E for
 * the errors, and tu_cuda_setup / tu_cuda_teardown for cmocka_run_group_tests. */
#define TU_CUDA_GROUP                                                 \
    static taas_cu CU;                                                \
    static taas_error E;                                              \
    static int tu_cuda_setup(void **state) {                          \
        (void)state;                                                  \
        taas_error_clear(&E);                                         \
        if (taas_cu_init(&CU, 0, &E) == 0) return 0;                  \
        fprintf(stderr, "%s (%s)\n", E.message, E.hint);              \
        return -1;                                                    \
    }                                                                 \
    static int tu_cuda_teardown(void **state) {                       \
        (void)state;                                                  \
        taas_cu_free(&CU);                                            \
        return 0;                                                     \
    }

/* Fails the cmocka test (include cmocka.h first) when call, which fills the taas_error e,
 * does not return 0. */
#define TU_OK(call, e)                                                                                \
    do {                                                                                              \
        if ((call) != 0) fail_msg("%s: %s (%s)", #call, (e)->message, (e)->hint);                     \
    } while (0)

/* n floats on the device (at least one), filled from host (or with v when host is NULL). */
static inline float *tu_dev(const float *host, size_t n, float v) {
    float *d = NULL, *tmp = NULL;
    size_t bytes = (n ? n : 1) * sizeof(float);
    if (cudaMalloc((void **)&d, bytes) != cudaSuccess) abort();
    if (!host) {
        tmp = malloc(bytes);
        for (size_t i = 0; i < (n ? n : 1); i++) tmp[i] = v;
        host = tmp;
    }
    /* the copy must be over before a kernel on a non-blocking stream reads it */
    if (cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        abort();
    free(tmp);
    return d;
}

/* n floats of dev set to 0, in order with cu's stream. */
static inline void tu_zero(taas_cu *cu, float *dev, size_t n) {
    if (cudaMemsetAsync(dev, 0, n * sizeof(float), cu->stream) != cudaSuccess) abort();
}

static inline void *tu_dev_bytes(const void *host, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) abort();
    if (host && bytes && cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) abort();
    if (cudaDeviceSynchronize() != cudaSuccess) abort();
    return d;
}

/* Waits for cu's stream; a kernel that failed stops the test program. */
static inline void tu_sync(taas_cu *cu) {
    cudaError_t rc = cudaStreamSynchronize(cu->stream);
    if (rc != cudaSuccess) {
        fprintf(stderr, "the GPU failed: %s\n", cudaGetErrorString(rc));
        abort();
    }
}

/* n bytes of the device's dev into host, after the stream's work. */
static inline void tu_get(taas_cu *cu, void *host, const void *dev, size_t n) {
    tu_sync(cu);
    if (n && cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost) != cudaSuccess) abort();
}

/* The device's n floats in a malloc'd host copy (after the stream's work). */
static inline float *tu_host(taas_cu *cu, const float *dev, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    tu_get(cu, h, dev, n * sizeof(float));
    return h;
}

/* The JSON array `key` of j as floats (malloc'd); *n its length. */
static inline float *tu_floats(const json_t *j, const char *key, size_t *n) {
    const json_t *a = json_object_get(j, key);
    if (!json_is_array(a)) {
        fprintf(stderr, "fixture lacks %s\n", key);
        abort();
    }
    size_t len = json_array_size(a);
    float *out = malloc((len ? len : 1) * sizeof(float));
    for (size_t i = 0; i < len; i++) out[i] = (float)json_number_value(json_array_get(a, i));
    if (n) *n = len;
    return out;
}

/* max|got - (ref + base)| / max(1, max|ref|): the layer tests' measure (test_layers.c). */
static inline double tu_diff(const float *got, const float *ref, size_t n, float base) {
    double maxdiff = 0, maxref = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ((double)ref[i] + base));
        if (!(d <= maxdiff)) maxdiff = d;  /* NaN propagates */
        if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
    }
    return maxdiff / maxref;
}

#endif
