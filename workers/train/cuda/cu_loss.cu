// The losses on the GPU (cu_loss.h).
#include <math.h>

#include "cu_kern.cuh"
#include "cu_loss.h"

// A warp per row: the lanes walk the row's columns 32 apart (coalesced), and the row's sums
// are the lanes' partial sums added in a fixed tree (cu_kern.cuh). (A thread a row left a
// GPT-2 head's 4,096 rows of 50,257 columns to 16 blocks of sequential loops.)

__global__ static void nll_rows(double *loss, float *d, const float *logp, const int64_t *target, int n, int c,
                                int64_t ignore, float scale) {
    float g = -scale;
    int lane = (int)(threadIdx.x % TAAS_CU_WARP);
    TAAS_CU_ROWS(i, n) {
        int64_t t = target[i];
        int skip = t == ignore, ok = !skip && t >= 0 && t < c;
        if (lane == 0) loss[i] = ok ? -(double)logp[i * c + t] : skip ? 0.0 : NAN;
        if (!d) continue;
        for (int j = lane; j < c; j += TAAS_CU_WARP) d[i * c + j] = (ok && j == t) ? g : 0.0f;
    }
}

// loss.c's taas_cross_entropy_forward and _backward for one row
__global__ static void ce_rows(double *loss, float *d, const float *logits, const int64_t *target, int n, int c,
                               float smoothing, int64_t ignore, float scale) {
    float off = smoothing / (float)c;
    double s = smoothing;
    int lane = (int)(threadIdx.x % TAAS_CU_WARP);
    TAAS_CU_ROWS(i, n) {
        const float *x = logits + i * c;
        float *di = d ? d + i * c : NULL;
        int64_t t = target[i];
        if (t == ignore) {
            if (lane == 0) loss[i] = 0.0;
            if (di)
                for (int j = lane; j < c; j += TAAS_CU_WARP) di[j] = 0.0f;
            continue;
        }
        if (t < 0 || t >= c) {
            if (lane == 0) loss[i] = NAN;
            if (di)
                for (int j = lane; j < c; j += TAAS_CU_WARP) di[j] = 0.0f;
            continue;
        }
        float mx = x[0];
        for (int j = lane; j < c; j += TAAS_CU_WARP) mx = x[j] > mx ? x[j] : mx;
        mx = taas_cu_warp_max(mx);
        double z = 0.0;
        for (int j = lane; j < c; j += TAAS_CU_WARP) z += exp((double)x[j] - mx);
        z = taas_cu_warp_sum(z);
        double logz = log(z) + mx, rowsum = 0.0;
        for (int j = lane; j < c; j += TAAS_CU_WARP) {
            double lp = (double)x[j] - logz;
            rowsum -= lp;
            if (!di) continue;
            float g = ((float)exp(lp) - off) * scale;
            if (j == t) g -= (1.0f - smoothing) * scale;
            di[j] = g;
        }
        rowsum = taas_cu_warp_sum(rowsum);
        if (lane == 0) loss[i] = (1.0 - s) * -((double)x[t] - logz) + s / c * rowsum;
    }
}

// The first highest value, as the CPU's loop: a lane keeps its columns' first highest (a NaN
// never is), the lanes' bests meet with ties to the lower column; a NaN in the first place
// stays the highest, as nothing is greater than it there.
__global__ static void argmax_right(int *right, const float *out, const int64_t *target, int n, int c,
                                    int64_t ignore) {
    int lane = (int)(threadIdx.x % TAAS_CU_WARP);
    TAAS_CU_ROWS(i, n) {
        const float *row = out + i * c;
        int best = -1;
        float bv = 0.0f;
        for (int q = lane; q < c; q += TAAS_CU_WARP)
            if (row[q] == row[q] && (best < 0 || row[q] > bv)) best = q, bv = row[q];
        for (int o = TAAS_CU_WARP / 2; o > 0; o >>= 1) {
            int ob = __shfl_down_sync(TAAS_CU_ALL, best, o);
            float ov = __shfl_down_sync(TAAS_CU_ALL, bv, o);
            if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best))) best = ob, bv = ov;
        }
        if (lane == 0) {
            if (row[0] != row[0] || best < 0) best = 0;
            right[i] = target[i] != ignore && best == target[i];
        }
    }
}

extern "C" int taas_cu_nll_rows(taas_cu *cu, double *loss, float *d, const float *logp, const int64_t *target, int n,
                                int c, int64_t ignore_index, float scale, taas_error *err) {
    if (n <= 0) return 0;
    nll_rows<<<taas_cu_warp_rows((size_t)n), TAAS_CU_THREADS, 0, cu->stream>>>(loss, d, logp, target, n, c, ignore_index,
                                                                             scale);
    return TAAS_CU_LAUNCHED("NLLLoss", err);
}

extern "C" int taas_cu_cross_entropy_rows(taas_cu *cu, double *loss, float *d, const float *logits,
                                          const int64_t *target, int n, int c, float smoothing, int64_t ignore_index,
                                          float scale, taas_error *err) {
    if (n <= 0) return 0;
    ce_rows<<<taas_cu_warp_rows((size_t)n), TAAS_CU_THREADS, 0, cu->stream>>>(loss, d, logits, target, n, c, smoothing,
                                                                            ignore_index, scale);
    return TAAS_CU_LAUNCHED("CrossEntropyLoss", err);
}

extern "C" int taas_cu_argmax_right(taas_cu *cu, int *right, const float *out, const int64_t *target, int n, int c,
                                    int64_t ignore_index, taas_error *err) {
    if (n <= 0) return 0;
    argmax_right<<<taas_cu_warp_rows((size_t)n), TAAS_CU_THREADS, 0, cu->stream>>>(right, out, target, n, c,
                                                                                  ignore_index);
    return TAAS_CU_LAUNCHED("the accuracy", err);
}
