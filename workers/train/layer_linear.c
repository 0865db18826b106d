/* Linear: y = x w^T + b, with sgemm split across the OpenMP threads (blas.h). */
#include <omp.h>
#include "blas.h"
#include "layers.h"

void taas_linear_forward(float *y, const float *x, const float *w, const float *b,
                         int n, int in, int out) {
    if (b) {
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out; o++) y[(size_t)i * out + o] = b[o];
    }
    /* y (N,OUT) = x (N,IN) * w^T (IN,OUT) + beta*y */
    taas_sgemm(omp_get_max_threads(), 0, 1, n, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

void taas_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, int n, int in, int out) {
    int nt = omp_get_max_threads();
    if (dx) /* dx (N,IN) = dy (N,OUT) * w (OUT,IN) */
        taas_sgemm(nt, 0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    if (dw) /* dw (OUT,IN) += dy^T (OUT,N) * x (N,IN) */
        taas_sgemm(nt, 1, 0, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db) {
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += dy[(size_t)i * out + o];
            db[o] += (float)s;
        }
    }
}
