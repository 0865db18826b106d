/* Softmax and LogSoftmax over dim 1 of (N, C, D), max-subtracted for stability. */
#include <math.h>
#include "layers.h"

static void softmax_any(float *y, const float *x, int n, int c, int d, int logspace) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d; k++) {
            const float *p = x + (size_t)i * c * d + k;
            float *q = y + (size_t)i * c * d + k;
            float mx = p[0];
            for (int j = 1; j < c; j++) mx = p[(size_t)j * d] > mx ? p[(size_t)j * d] : mx;
            double s = 0;
            for (int j = 0; j < c; j++) s += exp((double)(p[(size_t)j * d] - mx));
            float lse = (float)log(s);
            for (int j = 0; j < c; j++) {
                float z = p[(size_t)j * d] - mx - lse;
                q[(size_t)j * d] = logspace ? z : expf(z);
            }
        }
}

void taas_softmax_forward(float *y, const float *x, int n, int c, int d) {
    softmax_any(y, x, n, c, d, 0);
}

void taas_log_softmax_forward(float *y, const float *x, int n, int c, int d) {
    softmax_any(y, x, n, c, d, 1);
}

void taas_softmax_backward(float *dx, const float *dy, const float *y, int n, int c, int d) {
    /* dx = y * (dy - sum_j dy_j y_j) */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d; k++) {
            size_t base = (size_t)i * c * d + k;
            double s = 0;
            for (int j = 0; j < c; j++) s += dy[base + (size_t)j * d] * y[base + (size_t)j * d];
            for (int j = 0; j < c; j++) {
                size_t at = base + (size_t)j * d;
                dx[at] = y[at] * (dy[at] - (float)s);
            }
        }
}

void taas_log_softmax_backward(float *dx, const float *dy, const float *y, int n, int c, int d) {
    /* dx = dy - exp(y) * sum_j dy_j */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d; k++) {
            size_t base = (size_t)i * c * d + k;
            double s = 0;
            for (int j = 0; j < c; j++) s += dy[base + (size_t)j * d];
            for (int j = 0; j < c; j++) {
                size_t at = base + (size_t)j * d;
                dx[at] = dy[at] - expf(y[at]) * (float)s;
            }
        }
}
