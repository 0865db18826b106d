/* Embedding (a table lookup by token id) and GPT-2's learned positions (a table row added by
 * position). Token ids travel as floats, exact for any vocabulary under 2^24. */
#include <math.h>
#include <string.h>

#include "errnames.h"
#include "layers.h"
#include "simd.h"

int taas_embedding_forward(float *y, const float *ids, const float *w, size_t rows, int v, int c, taas_error *e) {
    for (size_t r = 0; r < rows; r++) {
        float id = ids[r];
        if (!(id >= 0.0f && id < (float)v) || id != floorf(id)) {
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "Embedding: token %zu of the batch is %g, outside the "
                           "vocabulary [0, %d)", r, (double)id, v);
            taas_error_hint(e, "give token ids below num_embeddings (the model's vocab_size), or a larger vocabulary");
            return -1;
        }
    }
#pragma omp parallel for if (rows * (size_t)c >= TAAS_PAR_MIN) schedule(static)
    for (size_t r = 0; r < rows; r++) memcpy(y + r * (size_t)c, w + (size_t)ids[r] * (size_t)c, (size_t)c * sizeof(float));
    return 0;
}

/* dw (V, C) += dy's rows at their ids: threads take blocks of columns and walk the rows in
 * order, so a token seen twice adds in the same order for any thread count. */
enum { EMB_COLS = 64 };

TAAS_VEC static void scatter_rows(float *dw, const float *dy, const float *ids, size_t rows, int c, int o0, int w) {
    for (size_t r = 0; r < rows; r++) {
        float *q = dw + (size_t)ids[r] * (size_t)c + o0;
        const float *g = dy + r * (size_t)c + o0;
#pragma omp simd
        for (int o = 0; o < w; o++) q[o] += g[o];
    }
}

void taas_embedding_backward(float *dw, const float *dy, const float *ids, size_t rows, int c) {
    int nb = (c + EMB_COLS - 1) / EMB_COLS;
#pragma omp parallel for if (rows * (size_t)c >= TAAS_PAR_MIN) schedule(static)
    for (int blk = 0; blk < nb; blk++) {
        int o0 = blk * EMB_COLS;
        scatter_rows(dw, dy, ids, rows, c, o0, c - o0 < EMB_COLS ? c - o0 : EMB_COLS);
    }
}

TAAS_VEC static void add_row(float *y, const float *x, const float *w, int c) {
#pragma omp simd
    for (int k = 0; k < c; k++) y[k] = x[k] + w[k];
}

void taas_pos_embedding_forward(float *y, const float *x, const float *w, int n, int t, int c) {
#pragma omp parallel for collapse(2) if ((size_t)n * t * c >= TAAS_PAR_MIN) schedule(static)
    for (int i = 0; i < n; i++)
        for (int p = 0; p < t; p++) {
            size_t at = ((size_t)i * t + p) * (size_t)c;
            add_row(y + at, x + at, w + (size_t)p * c, c);
        }
}

TAAS_VEC static void sum_samples(float *dw, const float *dy, int n, int t, int c) {
    for (int i = 0; i < n; i++) {
        const float *g = dy + (size_t)i * t * c;
#pragma omp simd
        for (int k = 0; k < c; k++) dw[k] += g[k];
    }
}

void taas_pos_embedding_backward(float *dx, float *dw, const float *dy, int n, int t, int c) {
    if (dx && dx != dy) memcpy(dx, dy, (size_t)n * t * c * sizeof(float));
    if (!dw) return;
#pragma omp parallel for if ((size_t)n * t * c >= TAAS_PAR_MIN) schedule(static)
    for (int p = 0; p < t; p++) sum_samples(dw + (size_t)p * c, dy + (size_t)p * c, n, t, c);
}
