/* Dropout and Dropout2d in train mode: inverted dropout, survivors scaled by 1/(1-p). */
#include "init.h"
#include "layers.h"

static float keep_scale(float p) { return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p); }

void taas_dropout_forward(float *y, float *mask, const float *x, size_t n, float p,
                          uint64_t seed, uint64_t offset) {
    float scale = keep_scale(p);
    for (size_t i = 0; i < n; i++) {
        mask[i] = taas_ctr_uniform(seed, offset + i) >= p ? scale : 0.0f;
        y[i] = x[i] * mask[i];
    }
}

void taas_dropout2d_forward(float *y, float *mask, const float *x, int n, int c, int hw,
                            float p, uint64_t seed, uint64_t offset) {
    float scale = keep_scale(p);
    for (size_t ch = 0; ch < (size_t)n * c; ch++) {
        mask[ch] = taas_ctr_uniform(seed, offset + ch) >= p ? scale : 0.0f;
        for (int i = 0; i < hw; i++) y[ch * hw + i] = x[ch * hw + i] * mask[ch];
    }
}

void taas_dropout_backward(float *dx, const float *dy, const float *mask, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * mask[i];
}

void taas_dropout2d_backward(float *dx, const float *dy, const float *mask, int n, int c, int hw) {
    for (size_t ch = 0; ch < (size_t)n * c; ch++)
        for (int i = 0; i < hw; i++) dx[ch * hw + i] = dy[ch * hw + i] * mask[ch];
}
