/* Linear: y = x w^T + b, with sgemm split across the OpenMP threads (blas.h). */
#include <omp.h>
#include "blas.h"
#include "layers.h"
#include "simd.h"

/* db (OUT) += the column sums of dy (R, OUT), each in double down its rows in order: the
 * same bits for any thread count, threads taking blocks of columns. */
enum { BIAS_COLS = 256 };
TAAS_VEC static void column_sums(double *acc, const float *dy, size_t rows, int out, int w) {
    for (size_t i = 0; i < rows; i++) {
        const float *g = dy + i * (size_t)out;
#pragma omp simd
        for (int o = 0; o < w; o++) acc[o] += g[o];
    }
}

void taas_bias_grad(float *db, const float *dy, size_t rows, int out) {
    int nb = (out + BIAS_COLS - 1) / BIAS_COLS;
#pragma omp parallel for if (rows * (size_t)out >= TAAS_PAR_MIN) schedule(static)
    for (int blk = 0; blk < nb; blk++) {
        int o0 = blk * BIAS_COLS, w = out - o0 < BIAS_COLS ? out - o0 : BIAS_COLS;
        double acc[BIAS_COLS] = {0};
        column_sums(acc, dy + o0, rows, out, w);
        for (int o = 0; o < w; o++) db[o0 + o] += (float)acc[o];
    }
}

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
    if (db) taas_bias_grad(db, dy, (size_t)n, out);
}

/* Conv1D (Hugging Face's, GPT-2's projections): the weight is stored (IN, OUT), y = x w + b. */
void taas_conv1d_forward(float *y, const float *x, const float *w, const float *b, size_t rows, int in, int out) {
    if (b)
        for (size_t i = 0; i < rows; i++)
            for (int o = 0; o < out; o++) y[i * (size_t)out + o] = b[o];
    taas_sgemm(omp_get_max_threads(), 0, 0, (int)rows, out, in, 1.0f, x, in, w, out, b ? 1.0f : 0.0f, y, out);
}

void taas_conv1d_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                          size_t rows, int in, int out) {
    int nt = omp_get_max_threads();
    if (dx) /* dx (R,IN) = dy (R,OUT) * w^T (OUT,IN) */
        taas_sgemm(nt, 0, 1, (int)rows, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
    if (dw) /* dw (IN,OUT) += x^T (IN,R) * dy (R,OUT) */
        taas_sgemm(nt, 1, 0, in, out, (int)rows, 1.0f, x, in, dy, out, 1.0f, dw, out);
    if (db) taas_bias_grad(db, dy, rows, out);
}
