// The losses on the GPU (cu_loss.h): one thread per sample walks its C outputs.
#include <math.h>

#include "cu_kern.cuh"
#include "cu_loss.h"

__global__ static void nll_rows(double *loss, float *d, const float *logp, const int64_t *target, int n, int c,
                                int64_t ignore, float scale) {
    float g = -scale;
    TAAS_CU_LOOP(i, (size_t)n) {
        int64_t t = target[i];
        int skip = t == ignore, ok = !skip && t >= 0 && t < c;
        loss[i] = ok ? -(double)logp[i * c + t] : skip ? 0.0 : NAN;
        if (!d) continue;
        for (int j = 0; j < c; j++) d[i * c + j] = (ok && j == t) ? g : 0.0f;
    }
}

// loss.c's taas_cross_entropy_forward and _backward for one row
__global__ static void ce_rows(double *loss, float *d, const float *logits, const int64_t *target, int n, int c,
                               float smoothing, int64_t ignore, float scale) {
    float off = smoothing / (float)c;
    double s = smoothing;
    TAAS_CU_LOOP(i, (size_t)n) {
        const float *x = logits + i * c;
        int64_t t = target[i];
        if (t == ignore) {
            loss[i] = 0.0;
            if (d)
                for (int j = 0; j < c; j++) d[i * c + j] = 0.0f;
            continue;
        }
        if (t < 0 || t >= c) {
            loss[i] = NAN;
            continue;
        }
        float mx = x[0];
        for (int j = 1; j < c; j++) mx = x[j] > mx ? x[j] : mx;
        double z = 0.0;
        for (int j = 0; j < c; j++) z += exp((double)x[j] - mx);
        double logz = log(z) + mx, rowsum = 0.0;
        for (int j = 0; j < c; j++) {
            double lp = (double)x[j] - logz;
            rowsum -= lp;
            if (d) d[i * c + j] = ((float)exp(lp) - off) * scale;
        }
        loss[i] = (1.0 - s) * -((double)x[t] - logz) + s / c * rowsum;
        if (d) d[i * c + t] -= (1.0f - smoothing) * scale;
    }
}

__global__ static void argmax_right(int *right, const float *out, const int64_t *target, int n, int c,
                                    int64_t ignore) {
    TAAS_CU_LOOP(i, (size_t)n) {
        const float *row = out + i * c;
        int best = 0;
        for (int q = 1; q < c; q++)
            if (row[q] > row[best]) best = q;
        right[i] = target[i] != ignore && best == target[i];
    }
}

extern "C" int taas_cu_nll_rows(taas_cu *cu, double *loss, float *d, const float *logp, const int64_t *target, int n,
                                int c, int64_t ignore_index, float scale, taas_error *err) {
    if (n <= 0) return 0;
    nll_rows<<<taas_cu_blocks((size_t)n), TAAS_CU_THREADS, 0, cu->stream>>>(loss, d, logp, target, n, c, ignore_index,
                                                                             scale);
    return TAAS_CU_LAUNCHED("NLLLoss", err);
}

extern "C" int taas_cu_cross_entropy_rows(taas_cu *cu, double *loss, float *d, const float *logits,
                                          const int64_t *target, int n, int c, float smoothing, int64_t ignore_index,
                                          float scale, taas_error *err) {
    if (n <= 0) return 0;
    ce_rows<<<taas_cu_blocks((size_t)n), TAAS_CU_THREADS, 0, cu->stream>>>(loss, d, logits, target, n, c, smoothing,
                                                                            ignore_index, scale);
    return TAAS_CU_LAUNCHED("CrossEntropyLoss", err);
}

extern "C" int taas_cu_argmax_right(taas_cu *cu, int *right, const float *out, const int64_t *target, int n, int c,
                                    int64_t ignore_index, taas_error *err) {
    if (n <= 0) return 0;
    argmax_right<<<taas_cu_blocks((size_t)n), TAAS_CU_THREADS, 0, cu->stream>>>(right, out, target, n, c,
                                                                                  ignore_index);
    return TAAS_CU_LAUNCHED("the accuracy", err);
}
