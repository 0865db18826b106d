/* MaxPool2d and AvgPool2d, ceil_mode False. Padding counts as -inf for max and as zeros
 * (included in the divisor, count_include_pad=True) for average, as PyTorch's defaults. */
#include <float.h>
#include <string.h>
#include "layers.h"

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
