/* Dropout and Dropout2d in train mode: inverted dropout, survivors scaled by 1/(1-p). The
 * mask comes from the counter-based generator inlined into the loop, which vectorises and
 * splits across the OpenMP threads: every element's draw depends on its index alone. */
#include "init.h"
#include "layers.h"
#include "simd.h"

static float keep_scale(float p) { return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p); }

TAAS_VEC void taas_dropout_forward(float *y, float *mask, const float *x, size_t n, float p,
                                   uint64_t seed, uint64_t offset) {
    float scale = keep_scale(p);
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN / 4) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float m = taas_ctr_uniform(seed, offset + i) >= p ? scale : 0.0f;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

void taas_dropout2d_forward(float *y, float *mask, const float *x, int n, int c, int hw,
                            float p, uint64_t seed, uint64_t offset) {
    float scale = keep_scale(p);
    for (size_t ch = 0; ch < (size_t)n * c; ch++) mask[ch] = taas_ctr_uniform(seed, offset + ch) >= p ? scale : 0.0f;
    taas_dropout2d_backward(y, x, mask, n, c, hw);  /* the same product: y = x * channel mask */
}

TAAS_VEC void taas_dropout_backward(float *dx, const float *dy, const float *mask, size_t n) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * mask[i];
}

TAAS_VEC void taas_dropout2d_backward(float *dx, const float *dy, const float *mask, int n, int c, int hw) {
    size_t planes = (size_t)n * c;
#pragma omp parallel for if (planes * hw >= TAAS_PAR_MIN) schedule(static)
    for (size_t ch = 0; ch < planes; ch++) {
        float m = mask[ch];
#pragma omp simd
        for (int i = 0; i < hw; i++) dx[ch * hw + i] = dy[ch * hw + i] * m;
    }
}
