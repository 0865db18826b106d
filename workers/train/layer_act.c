/* Element-wise activations, vectorised and split across the OpenMP threads. Backward of
 * Tanh and Sigmoid reads the output y. */
#include <math.h>
#include "layers.h"
#include "simd.h"

TAAS_VEC void taas_relu_forward(float *y, const float *x, size_t n) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
TAAS_VEC void taas_relu_backward(float *dx, const float *dy, const float *x, size_t n) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

TAAS_VEC void taas_leaky_relu_forward(float *y, const float *x, size_t n, float slope) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : x[i] * slope;
}
TAAS_VEC void taas_leaky_relu_backward(float *dx, const float *dy, const float *x, size_t n, float slope) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : dy[i] * slope;
}

void taas_tanh_forward(float *y, const float *x, size_t n) {
#pragma omp parallel for if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}
TAAS_VEC void taas_tanh_backward(float *dx, const float *dy, const float *y, size_t n) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void taas_sigmoid_forward(float *y, const float *x, size_t n) {
#pragma omp parallel for if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}
TAAS_VEC void taas_sigmoid_backward(float *dx, const float *dy, const float *y, size_t n) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

void taas_gelu_forward(float *y, const float *x, size_t n) {
#pragma omp parallel for if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}
void taas_gelu_backward(float *dx, const float *dy, const float *x, size_t n) {
    /* d/dx x*Phi(x) = Phi(x) + x*phi(x) */
    const float inv_sqrt_2pi = 0.3989422804014327f;
#pragma omp parallel for if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * (float)M_SQRT1_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
}

/* GELU(approximate='tanh'), GPT-2's "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * with simd.h's tanh (libm's tanhf, a call an element, was a fifth of a GPT's step); the
 * threads take chunks of ACT_CHUNK elements, each a vector loop. */
static const float GELU_K = 0.7978845608028654f, GELU_A = 0.044715f;
enum { ACT_CHUNK = 4096 };

TAAS_VEC static void gelu_tanh_chunk(float *y, const float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + taas_tanhf(GELU_K * (v + GELU_A * v * v * v)));
    }
}

TAAS_VEC static void gelu_tanh_grad_chunk(float *dx, const float *dy, const float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i], th = taas_tanhf(GELU_K * (v + GELU_A * v * v * v));
        float dth = (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * dth);
    }
}

void taas_gelu_tanh_forward(float *y, const float *x, size_t n) {
    size_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
#pragma omp parallel for if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t at = c * ACT_CHUNK;
        gelu_tanh_chunk(y + at, x + at, n - at < ACT_CHUNK ? n - at : ACT_CHUNK);
    }
}

void taas_gelu_tanh_backward(float *dx, const float *dy, const float *x, size_t n) {
    size_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
#pragma omp parallel for if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t at = c * ACT_CHUNK;
        gelu_tanh_grad_chunk(dx + at, dy + at, x + at, n - at < ACT_CHUNK ? n - at : ACT_CHUNK);
    }
}
