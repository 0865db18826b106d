// Softmax and LogSoftmax over dim 1 of (N, C, D) on the GPU: one thread per (sample, position)
// walks its C values, with the CPU's arithmetic (layer_softmax.c): the maximum subtracted and
// the exponentials summed in double.
#include <math.h>

#include "cu_kern.cuh"
#include "cu_layers.h"

__global__ static void softmax_fwd(float *y, const float *x, int n, int c, int d, int logspace) {
    TAAS_CU_LOOP(r, (size_t)n * d) {
        size_t base = r / (size_t)d * c * d + r % (size_t)d;
        const float *p = x + base;
        float *q = y + base;
        float mx = p[0];
        for (int j = 1; j < c; j++) mx = p[(size_t)j * d] > mx ? p[(size_t)j * d] : mx;
        double s = 0.0;
        for (int j = 0; j < c; j++) s += exp((double)(p[(size_t)j * d] - mx));
        float lse = (float)log(s);
        for (int j = 0; j < c; j++) {
            float z = p[(size_t)j * d] - mx - lse;
            q[(size_t)j * d] = logspace ? z : expf(z);
        }
    }
}

// Softmax: dx = y (dy - sum_j dy_j y_j); LogSoftmax: dx = dy - exp(y) sum_j dy_j
__global__ static void softmax_bwd(float *dx, const float *dy, const float *y, int n, int c, int d, int logspace) {
    TAAS_CU_LOOP(r, (size_t)n * d) {
        size_t base = r / (size_t)d * c * d + r % (size_t)d;
        double s = 0.0;
        for (int j = 0; j < c; j++) {
            size_t at = base + (size_t)j * d;
            s += logspace ? dy[at] : dy[at] * y[at];
        }
        for (int j = 0; j < c; j++) {
            size_t at = base + (size_t)j * d;
            dx[at] = logspace ? dy[at] - expf(y[at]) * (float)s : y[at] * (dy[at] - (float)s);
        }
    }
}

extern "C" int taas_cu_softmax_forward(taas_cu *cu, float *y, const float *x, int n, int c, int d, int logspace,
                                       taas_error *err) {
    size_t rows = (size_t)n * d;
    if (rows == 0 || c <= 0) return 0;
    softmax_fwd<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(y, x, n, c, d, logspace);
    return TAAS_CU_LAUNCHED(logspace ? "LogSoftmax's forward" : "Softmax's forward", err);
}

extern "C" int taas_cu_softmax_backward(taas_cu *cu, float *dx, const float *dy, const float *y, int n, int c, int d,
                                        int logspace, taas_error *err) {
    size_t rows = (size_t)n * d;
    if (rows == 0 || c <= 0) return 0;
    softmax_bwd<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(dx, dy, y, n, c, d, logspace);
    return TAAS_CU_LAUNCHED(logspace ? "LogSoftmax's backward" : "Softmax's backward", err);
}
