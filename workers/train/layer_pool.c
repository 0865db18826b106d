/* MaxPool2d and AvgPool2d, ceil_mode False. Padding counts as -inf for max and as zeros
 * (included in the divisor, count_include_pad=True) for average, as PyTorch's defaults.
 * AdaptiveAvgPool2d at the end. */
#include <float.h>
#include <string.h>
#include "layers.h"
#include "pool_bins.h"
#include "simd.h"

/* One output of a window over plane `in`: NaN wins (the first one), otherwise the first
 * maximum, as PyTorch. */
static void max_window(const float *in, const taas_pool2d_shape *s, int i, int j, float *y, int32_t *argmax) {
    float best = -FLT_MAX;
    int32_t at = -1;
    for (int ki = 0; ki < s->kh; ki++) {
        int yy = i * s->sh - s->ph + ki;
        if (yy < 0 || yy >= s->h) continue;
        for (int kj = 0; kj < s->kw; kj++) {
            int xx = j * s->sw - s->pw + kj;
            if (xx < 0 || xx >= s->w) continue;
            float v = in[yy * s->w + xx];
            if (at < 0 || v > best || v != v) {
                best = v;
                at = yy * s->w + xx;
                if (v != v) goto done;
            }
        }
    }
done:
    *y = best;
    *argmax = at;
}

/* The same rule for 2x2 windows at stride 2 without padding, for outputs [j0, j0 + 8) of a
 * row, written as selects so that it compiles to vector code: the maximum (a NaN stops it),
 * then the first position that holds it (or the first NaN). */
static inline void max8_2x2(const float *restrict r0, const float *restrict r1, int w, int j0,
                            int32_t base, float *restrict y, int32_t *restrict argmax) {
#pragma omp simd
    for (int j = j0; j < j0 + 8; j++) {
        float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
        float m = a;
        m = (m == m && (b > m || b != b)) ? b : m;
        m = (m == m && (c > m || c != c)) ? c : m;
        m = (m == m && (d > m || d != d)) ? d : m;
        int32_t k = (a == m || a != a) ? 0 : (b == m || b != b) ? 1 : (c == m || c != c) ? w : w + 1;
        y[j] = m;
        argmax[j] = base + 2 * j + k;
    }
}

/* A row of ow >= 8 outputs in blocks of 8; the last block overlaps the one before rather
 * than leaving a scalar tail (ow = 12 in docs/design.md §1). */
TAAS_VEC static void max_row_2x2(const float *restrict r0, const float *restrict r1, int w, int ow,
                                 int32_t base, float *restrict y, int32_t *restrict argmax) {
    for (int j = 0; j < ow; j += 8) max8_2x2(r0, r1, w, j + 8 <= ow ? j : ow - 8, base, y, argmax);
}

static int is_2x2(const taas_pool2d_shape *s) {
    return taas_pool2d_out_w(s) >= 8 && s->kh == 2 && s->kw == 2 && s->sh == 2 && s->sw == 2 && s->ph == 0 && s->pw == 0;
}

/* One tap of the windows of outputs [j0, j1), at r[j * sw] (r's index off in the plane):
 * the first tap sets, the others take max_window's rule as selects. Inlined with a constant
 * stride, so that the loads are vector loads and shuffles, not a scalar loop with branches. */
static inline void max_tap(const float *restrict r, int32_t off, int sw, int j0, int j1, int first,
                           float *restrict y, int32_t *restrict argmax) {
    if (first) {
#pragma omp simd
        for (int j = j0; j < j1; j++) {
            y[j] = r[j * sw];
            argmax[j] = off + j * sw;
        }
        return;
    }
#pragma omp simd
    for (int j = j0; j < j1; j++) {
        float v = r[j * sw], m = y[j];
        int32_t a = argmax[j];
        int take = (m == m) & ((v > m) | (v != v));  /* no && or ||: they are branches */
        y[j] = take ? v : m;
        argmax[j] = take ? off + j * sw : a;
    }
}

/* Outputs [j0, j1) of row i, whose windows lie inside the plane's columns (rows are clipped as
 * max_window clips them): one tap of the window at a time, in its order, over the whole run of
 * outputs (a ResNet's 3x3 stride-2 stem pool). */
TAAS_VEC static void max_row_inside(const float *in, const taas_pool2d_shape *s, int i, int j0, int j1,
                                    float *restrict y, int32_t *restrict argmax) {
    int lo = i * s->sh - s->ph, hi = lo + s->kh;
    if (lo < 0) lo = 0;
    if (hi > s->h) hi = s->h;
    if (lo >= hi)  /* a window of padding alone: max_window says what it gives */
        for (int j = j0; j < j1; j++) max_window(in, s, i, j, y + j, argmax + j);
    for (int yy = lo; yy < hi; yy++)
        for (int kj = 0; kj < s->kw; kj++) {
            int32_t off = yy * s->w + kj - s->pw;
            int first = yy == lo && kj == 0;
            if (s->sw == 1) max_tap(in + off, off, 1, j0, j1, first, y, argmax);
            else if (s->sw == 2) max_tap(in + off, off, 2, j0, j1, first, y, argmax);
            else max_tap(in + off, off, s->sw, j0, j1, first, y, argmax);
        }
}

void taas_maxpool2d_forward(float *y, int32_t *argmax, const float *x, const taas_pool2d_shape *s) {
    int oh = taas_pool2d_out_h(s), ow = taas_pool2d_out_w(s), fast = is_2x2(s);
    /* outputs [j0, j1) have every column of their window inside the plane */
    int j0 = (s->pw + s->sw - 1) / s->sw, j1 = s->w + s->pw - s->kw < 0 ? 0 : (s->w + s->pw - s->kw) / s->sw + 1;
    if (j1 > ow) j1 = ow;
    if (j0 > j1) j0 = j1;
    size_t planes = (size_t)s->n * s->c;
#pragma omp parallel for if (planes * s->h * s->w >= TAAS_PAR_MIN) schedule(static)
    for (size_t p = 0; p < planes; p++) {
        const float *in = x + p * s->h * s->w;
        float *yp = y + p * oh * ow;
        int32_t *ap = argmax + p * oh * ow;
        for (int i = 0; i < oh; i++) {
            if (fast) {
                max_row_2x2(in + (size_t)2 * i * s->w, in + (size_t)(2 * i + 1) * s->w, s->w, ow, 2 * i * s->w,
                            yp + (size_t)i * ow, ap + (size_t)i * ow);
                continue;
            }
            float *yr = yp + (size_t)i * ow;
            int32_t *ar = ap + (size_t)i * ow;
            for (int j = 0; j < j0; j++) max_window(in, s, i, j, yr + j, ar + j);
            max_row_inside(in, s, i, j0, j1, yr, ar);
            for (int j = j1; j < ow; j++) max_window(in, s, i, j, yr + j, ar + j);
        }
    }
}

void taas_maxpool2d_backward(float *dx, const float *dy, const int32_t *argmax,
                             const taas_pool2d_shape *s) {
    int oh = taas_pool2d_out_h(s), ow = taas_pool2d_out_w(s);
    size_t planes = (size_t)s->n * s->c, hw = (size_t)s->h * s->w;
    /* plane by plane: each plane is zeroed while it is in cache, then receives its gradients */
#pragma omp parallel for if (planes * hw >= TAAS_PAR_MIN) schedule(static)
    for (size_t p = 0; p < planes; p++) {
        float *out = dx + p * hw;
        memset(out, 0, sizeof(float) * hw);
        for (int q = 0; q < oh * ow; q++) {
            int32_t at = argmax[p * oh * ow + q];
            if (at >= 0) out[at] += dy[p * oh * ow + q];
        }
    }
}

/* Window rows [*lo, *hi) clipped to the input; returns the padded extent for the divisor. */
static int window(int o, int stride, int pad, int k, int size, int *lo, int *hi) {
    int start = o * stride - pad, end = start + k;
    if (end > size + pad) end = size + pad;
    int extent = end - start;
    *lo = start < 0 ? 0 : start;
    *hi = end > size ? size : end;
    return extent;
}

void taas_avgpool2d_forward(float *y, const float *x, const taas_pool2d_shape *s) {
    int oh = taas_pool2d_out_h(s), ow = taas_pool2d_out_w(s);
    size_t planes = (size_t)s->n * s->c;
#pragma omp parallel for if (planes * s->h * s->w >= TAAS_PAR_MIN) schedule(static)
    for (size_t p = 0; p < planes; p++) {
        const float *in = x + p * s->h * s->w;
        for (int i = 0; i < oh; i++) {
            int y0, y1, eh = window(i, s->sh, s->ph, s->kh, s->h, &y0, &y1);
            for (int j = 0; j < ow; j++) {
                int x0, x1, ew = window(j, s->sw, s->pw, s->kw, s->w, &x0, &x1);
                float sum = 0;
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++) sum += in[yy * s->w + xx];
                y[(p * oh + i) * ow + j] = sum / (float)(eh * ew);
            }
        }
    }
}

void taas_avgpool2d_backward(float *dx, const float *dy, const taas_pool2d_shape *s) {
    int oh = taas_pool2d_out_h(s), ow = taas_pool2d_out_w(s);
    size_t planes = (size_t)s->n * s->c;
#pragma omp parallel for if (planes * s->h * s->w >= TAAS_PAR_MIN) schedule(static)
    for (size_t p = 0; p < planes; p++) {
        float *out = dx + p * s->h * s->w;
        memset(out, 0, sizeof(float) * s->h * s->w);
        for (int i = 0; i < oh; i++) {
            int y0, y1, eh = window(i, s->sh, s->ph, s->kh, s->h, &y0, &y1);
            for (int j = 0; j < ow; j++) {
                int x0, x1, ew = window(j, s->sw, s->pw, s->kw, s->w, &x0, &x1);
                float g = dy[(p * oh + i) * ow + j] / (float)(eh * ew);
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++) out[yy * s->w + xx] += g;
            }
        }
    }
}

/* AdaptiveAvgPool2d: each plane's bins (pool_bins.h), summed row by row in float. */
void taas_adaptive_avgpool2d_forward(float *y, const float *x, int n, int c, int h, int w, int oh, int ow) {
    size_t planes = (size_t)n * c;
#pragma omp parallel for if (planes * h * w >= TAAS_PAR_MIN) schedule(static)
    for (size_t p = 0; p < planes; p++) {
        const float *in = x + p * h * w;
        for (int i = 0; i < oh; i++) {
            int y0 = taas_bin_start(i, h, oh), y1 = taas_bin_end(i, h, oh);
            for (int j = 0; j < ow; j++) {
                int x0 = taas_bin_start(j, w, ow), x1 = taas_bin_end(j, w, ow);
                float sum = 0;
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++) sum += in[(size_t)yy * w + xx];
                y[(p * oh + i) * ow + j] = sum / (float)((y1 - y0) * (x1 - x0));
            }
        }
    }
}

/* A gather, as on the GPU: each input element adds up dy / (its bin's size) over the bins
 * that hold it, in output order, so the two sum alike and no memset is needed. */
void taas_adaptive_avgpool2d_backward(float *dx, const float *dy, int n, int c, int h, int w, int oh, int ow) {
    size_t planes = (size_t)n * c;
#pragma omp parallel for if (planes * h * w >= TAAS_PAR_MIN) schedule(static)
    for (size_t p = 0; p < planes; p++) {
        const float *g = dy + p * oh * ow;
        for (int yy = 0; yy < h; yy++) {
            int i0, i1;
            taas_bins_of(yy, h, oh, &i0, &i1);
            for (int xx = 0; xx < w; xx++) {
                int j0, j1;
                taas_bins_of(xx, w, ow, &j0, &j1);
                float s = 0;
                for (int i = i0; i < i1; i++) {
                    int eh = taas_bin_end(i, h, oh) - taas_bin_start(i, h, oh);
                    for (int j = j0; j < j1; j++) {
                        int ew = taas_bin_end(j, w, ow) - taas_bin_start(j, w, ow);
                        s += g[(size_t)i * ow + j] / (float)(eh * ew);
                    }
                }
                dx[(p * h + yy) * w + xx] = s;
            }
        }
    }
}
