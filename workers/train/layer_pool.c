/* MaxPool2d and AvgPool2d, ceil_mode False. Padding counts as -inf for max and as zeros
 * (included in the divisor, count_include_pad=True) for average, as PyTorch's defaults. */
#include <float.h>
#include <string.h>
#include "layers.h"

int taas_pool2d_out_h(const taas_pool2d_shape *s) { return (s->h + 2 * s->ph - s->kh) / s->sh + 1; }
int taas_pool2d_out_w(const taas_pool2d_shape *s) { return (s->w + 2 * s->pw - s->kw) / s->sw + 1; }

int taas_pool2d_check(const taas_pool2d_shape *s, taas_error *e) {
    taas_srcpos nowhere = {0, 0};
    if (s->n <= 0 || s->c <= 0 || s->h <= 0 || s->w <= 0 || s->kh <= 0 || s->kw <= 0 ||
        s->sh <= 0 || s->sw <= 0 || s->ph < 0 || s->pw < 0) {
        taas_error_set(e, "TaasValueError", nowhere,
                       "pooling: sizes must be positive (input %dx%dx%dx%d, kernel %dx%d, "
                       "stride %dx%d) and padding non-negative (%dx%d)",
                       s->n, s->c, s->h, s->w, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw);
        taas_error_hint(e, "check the pooling layer's arguments and the input shape");
        return -1;
    }
    if (2 * s->ph > s->kh || 2 * s->pw > s->kw) {
        taas_error_set(e, "TaasValueError", nowhere,
                       "pooling: padding %dx%d is more than half the kernel %dx%d",
                       s->ph, s->pw, s->kh, s->kw);
        taas_error_hint(e, "use padding <= kernel_size // 2, as PyTorch requires");
        return -1;
    }
    if (s->h + 2 * s->ph < s->kh || s->w + 2 * s->pw < s->kw) {
        taas_error_set(e, "TaasValueError", nowhere,
                       "pooling: kernel %dx%d is larger than the padded input %dx%d",
                       s->kh, s->kw, s->h + 2 * s->ph, s->w + 2 * s->pw);
        taas_error_hint(e, "use a smaller kernel_size or pool earlier in the network");
        return -1;
    }
    return 0;
}

void taas_maxpool2d_forward(float *y, int32_t *argmax, const float *x, const taas_pool2d_shape *s) {
    int oh = taas_pool2d_out_h(s), ow = taas_pool2d_out_w(s);
    size_t planes = (size_t)s->n * s->c;
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < planes; p++) {
        const float *in = x + p * s->h * s->w;
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                float best = -FLT_MAX;
                int32_t at = -1;
                for (int ki = 0; ki < s->kh; ki++) {
                    int yy = i * s->sh - s->ph + ki;
                    if (yy < 0 || yy >= s->h) continue;
                    for (int kj = 0; kj < s->kw; kj++) {
                        int xx = j * s->sw - s->pw + kj;
                        if (xx < 0 || xx >= s->w) continue;
                        float v = in[yy * s->w + xx];
                        /* NaN wins, as in PyTorch; first maximum otherwise */
                        if (at < 0 || v > best || v != v) {
                            best = v;
                            at = yy * s->w + xx;
                            if (v != v) goto done;
                        }
                    }
                }
            done:
                y[(p * oh + i) * ow + j] = best;
                argmax[(p * oh + i) * ow + j] = at;
            }
    }
}

void taas_maxpool2d_backward(float *dx, const float *dy, const int32_t *argmax,
                             const taas_pool2d_shape *s) {
    int oh = taas_pool2d_out_h(s), ow = taas_pool2d_out_w(s);
    size_t planes = (size_t)s->n * s->c;
    memset(dx, 0, sizeof(float) * planes * s->h * s->w);
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < planes; p++)
        for (int q = 0; q < oh * ow; q++) {
            int32_t at = argmax[p * oh * ow + q];
            if (at >= 0) dx[p * s->h * s->w + at] += dy[p * oh * ow + q];
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
#pragma omp parallel for schedule(static)
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
    memset(dx, 0, sizeof(float) * planes * s->h * s->w);
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < planes; p++) {
        float *out = dx + p * s->h * s->w;
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
