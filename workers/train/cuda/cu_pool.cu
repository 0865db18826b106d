// MaxPool2d and AvgPool2d on the GPU, with the CPU's rules (layer_pool.c): padding is -inf
// for max and zeros, counted in the divisor, for average; a NaN wins a max window, then the
// first maximum. Backward is a gather: each input element adds up, in the order of the
// outputs, the gradients of the windows that hold it, so no two threads write one place.
// AdaptiveAvgPool2d takes the CPU's bins (pool_bins.h) the same way.
#include <float.h>

#include "cu_kern.cuh"
#include "cu_layers.h"
#include "pool_bins.h"

struct pool_args {
    int h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

static pool_args args(const taas_pool2d_shape *s) {
    pool_args a = {s->h, s->w, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw, (s->h + 2 * s->ph - s->kh) / s->sh + 1,
                   (s->w + 2 * s->pw - s->kw) / s->sw + 1};
    return a;
}

// The outputs along one axis whose window holds input position x: [*lo, *hi]
__device__ static void outputs_of(int x, int k, int st, int pad, int n_out, int *lo, int *hi) {
    int a = x + pad - k + 1;
    *lo = a <= 0 ? 0 : (a + st - 1) / st;
    *hi = (x + pad) / st;
    if (*hi > n_out - 1) *hi = n_out - 1;
}

// The window's rows [*lo, *hi) inside the input, and its extent counting the padding
__device__ static int window(int o, int st, int pad, int k, int size, int *lo, int *hi) {
    int start = o * st - pad, end = start + k;
    if (end > size + pad) end = size + pad;
    *lo = start < 0 ? 0 : start;
    *hi = end > size ? size : end;
    return end - start;
}

__global__ static void max_fwd(float *y, int32_t *argmax, const float *x, pool_args a, size_t total) {
    TAAS_CU_LOOP(t, total) {
        int j = (int)(t % a.ow), i = (int)(t / a.ow % a.oh);
        const float *in = x + t / ((size_t)a.ow * a.oh) * a.h * a.w;
        float best = -FLT_MAX;
        int32_t at = -1;
        for (int ki = 0; ki < a.kh && !(at >= 0 && best != best); ki++) {
            int yy = i * a.sh - a.ph + ki;
            if (yy < 0 || yy >= a.h) continue;
            for (int kj = 0; kj < a.kw; kj++) {
                int xx = j * a.sw - a.pw + kj;
                if (xx < 0 || xx >= a.w) continue;
                float v = in[yy * a.w + xx];
                if (at < 0 || v > best || v != v) {
                    best = v;
                    at = yy * a.w + xx;
                    if (v != v) break;
                }
            }
        }
        y[t] = best;
        argmax[t] = at;
    }
}

__global__ static void max_bwd(float *dx, const float *dy, const int32_t *argmax, pool_args a, size_t total) {
    TAAS_CU_LOOP(t, total) {
        int xx = (int)(t % a.w), yy = (int)(t / a.w % a.h);
        size_t plane = t / ((size_t)a.w * a.h), base = plane * a.oh * a.ow;
        int32_t me = yy * a.w + xx;
        int i0, i1, j0, j1;
        outputs_of(yy, a.kh, a.sh, a.ph, a.oh, &i0, &i1);
        outputs_of(xx, a.kw, a.sw, a.pw, a.ow, &j0, &j1);
        float s = 0.0f;
        for (int i = i0; i <= i1; i++)
            for (int j = j0; j <= j1; j++) {
                size_t q = base + (size_t)i * a.ow + j;
                if (argmax[q] == me) s += dy[q];
            }
        dx[t] = s;
    }
}

__global__ static void avg_fwd(float *y, const float *x, pool_args a, size_t total) {
    TAAS_CU_LOOP(t, total) {
        int j = (int)(t % a.ow), i = (int)(t / a.ow % a.oh);
        const float *in = x + t / ((size_t)a.ow * a.oh) * a.h * a.w;
        int y0, y1, x0, x1;
        int eh = window(i, a.sh, a.ph, a.kh, a.h, &y0, &y1), ew = window(j, a.sw, a.pw, a.kw, a.w, &x0, &x1);
        float sum = 0.0f;
        for (int yy = y0; yy < y1; yy++)
            for (int xx = x0; xx < x1; xx++) sum += in[yy * a.w + xx];
        y[t] = sum / (float)(eh * ew);
    }
}

__global__ static void avg_bwd(float *dx, const float *dy, pool_args a, size_t total) {
    TAAS_CU_LOOP(t, total) {
        int xx = (int)(t % a.w), yy = (int)(t / a.w % a.h);
        size_t base = t / ((size_t)a.w * a.h) * a.oh * a.ow;
        int i0, i1, j0, j1, lo, hi;
        outputs_of(yy, a.kh, a.sh, a.ph, a.oh, &i0, &i1);
        outputs_of(xx, a.kw, a.sw, a.pw, a.ow, &j0, &j1);
        float s = 0.0f;
        for (int i = i0; i <= i1; i++) {
            int eh = window(i, a.sh, a.ph, a.kh, a.h, &lo, &hi);
            for (int j = j0; j <= j1; j++) {
                int ew = window(j, a.sw, a.pw, a.kw, a.w, &lo, &hi);
                s += dy[base + (size_t)i * a.ow + j] / (float)(eh * ew);
            }
        }
        dx[t] = s;
    }
}

static size_t outputs(const taas_pool2d_shape *s, const pool_args &a) {
    return (size_t)s->n * s->c * a.oh * a.ow;
}

static size_t inputs(const taas_pool2d_shape *s) {
    return (size_t)s->n * s->c * s->h * s->w;
}

extern "C" int taas_cu_maxpool2d_forward(taas_cu *cu, float *y, int32_t *argmax, const float *x,
                                         const taas_pool2d_shape *s, taas_error *err) {
    pool_args a = args(s);
    size_t n = outputs(s, a);
    max_fwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(y, argmax, x, a, n);
    return TAAS_CU_LAUNCHED("MaxPool2d's forward", err);
}

extern "C" int taas_cu_maxpool2d_backward(taas_cu *cu, float *dx, const float *dy, const int32_t *argmax,
                                          const taas_pool2d_shape *s, taas_error *err) {
    size_t n = inputs(s);
    max_bwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(dx, dy, argmax, args(s), n);
    return TAAS_CU_LAUNCHED("MaxPool2d's backward", err);
}

extern "C" int taas_cu_avgpool2d_forward(taas_cu *cu, float *y, const float *x, const taas_pool2d_shape *s,
                                         taas_error *err) {
    pool_args a = args(s);
    size_t n = outputs(s, a);
    avg_fwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(y, x, a, n);
    return TAAS_CU_LAUNCHED("AvgPool2d's forward", err);
}

extern "C" int taas_cu_avgpool2d_backward(taas_cu *cu, float *dx, const float *dy, const taas_pool2d_shape *s,
                                          taas_error *err) {
    size_t n = inputs(s);
    avg_bwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(dx, dy, args(s), n);
    return TAAS_CU_LAUNCHED("AvgPool2d's backward", err);
}

struct adaptive_args {
    int h, w, oh, ow;
};

// y (planes, OH, OW): each bin's mean, summed row by row as the CPU
__global__ static void adaptive_fwd(float *y, const float *x, adaptive_args a, size_t total) {
    TAAS_CU_LOOP(t, total) {
        int j = (int)(t % a.ow), i = (int)(t / a.ow % a.oh);
        const float *in = x + t / ((size_t)a.ow * a.oh) * a.h * a.w;
        int y0 = taas_bin_start(i, a.h, a.oh), y1 = taas_bin_end(i, a.h, a.oh);
        int x0 = taas_bin_start(j, a.w, a.ow), x1 = taas_bin_end(j, a.w, a.ow);
        float sum = 0.0f;
        for (int yy = y0; yy < y1; yy++)
            for (int xx = x0; xx < x1; xx++) sum += in[(size_t)yy * a.w + xx];
        y[t] = sum / (float)((y1 - y0) * (x1 - x0));
    }
}

// dx (planes, H, W): the gradients of the bins that hold each element, in output order
__global__ static void adaptive_bwd(float *dx, const float *dy, adaptive_args a, size_t total) {
    TAAS_CU_LOOP(t, total) {
        int xx = (int)(t % a.w), yy = (int)(t / a.w % a.h);
        const float *g = dy + t / ((size_t)a.w * a.h) * a.oh * a.ow;
        int i0, i1, j0, j1;
        taas_bins_of(yy, a.h, a.oh, &i0, &i1);
        taas_bins_of(xx, a.w, a.ow, &j0, &j1);
        float s = 0.0f;
        for (int i = i0; i < i1; i++) {
            int eh = taas_bin_end(i, a.h, a.oh) - taas_bin_start(i, a.h, a.oh);
            for (int j = j0; j < j1; j++) {
                int ew = taas_bin_end(j, a.w, a.ow) - taas_bin_start(j, a.w, a.ow);
                s += g[(size_t)i * a.ow + j] / (float)(eh * ew);
            }
        }
        dx[t] = s;
    }
}

extern "C" int taas_cu_adaptive_avgpool2d_forward(taas_cu *cu, float *y, const float *x, int n, int c, int h, int w,
                                                  int oh, int ow, taas_error *err) {
    adaptive_args a = {h, w, oh, ow};
    size_t total = (size_t)n * c * oh * ow;
    if (total == 0) return 0;
    adaptive_fwd<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(y, x, a, total);
    return TAAS_CU_LAUNCHED("AdaptiveAvgPool2d's forward", err);
}

extern "C" int taas_cu_adaptive_avgpool2d_backward(taas_cu *cu, float *dx, const float *dy, int n, int c, int h,
                                                   int w, int oh, int ow, taas_error *err) {
    adaptive_args a = {h, w, oh, ow};
    size_t total = (size_t)n * c * h * w;
    if (total == 0) return 0;
    adaptive_bwd<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(dx, dy, a, total);
    return TAAS_CU_LAUNCHED("AdaptiveAvgPool2d's backward", err);
}
