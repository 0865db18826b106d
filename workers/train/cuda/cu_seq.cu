// The sequence layers on the GPU (layers.h's Embedding, GPT-2's positions, LayerNorm), with
// the CPU's formulas; the attention is cu_attention.cu's. No atomics: every sum is one
// thread's loop in a fixed order or a block's fixed tree, so a run repeats to the last bit.
#include <limits.h>
#include <math.h>

#include "cu_kern.cuh"
#include "cu_layers.h"
#include "errnames.h"

// ---- Embedding ----

__global__ static void embedding_fwd(float *y, const float *ids, const float *w, size_t rows, int v, int c) {
    TAAS_CU_LOOP(i, rows * (size_t)c) {
        size_t r = i / (size_t)c;
        float id = ids[r];
        // the rank refuses such a batch before it is uploaded; never read outside the table
        y[i] = id >= 0.0f && id < (float)v ? w[(size_t)id * c + i % (size_t)c] : 0.0f;
    }
}

// The embedding's backward adds each id's rows in row order (the CPU's, so the CPU's bits),
// a block per id: embedding_links finds, a thread per row, whether the row is its id's first
// and the id's next row; embedding_bwd has the block of a first row walk that chain, a thread
// per column. (A thread per column walking every row left GPT-2's 768 columns to 3 blocks
// of a read-modify-write per row.)
__global__ static void embedding_links(int *next, int *first, const float *ids, size_t rows) {
    TAAS_CU_LOOP(r, rows) {
        float id = ids[r];
        int f = 1, nx = -1;
        for (size_t q = 0; q < r && f; q++) f = ids[q] != id;
        for (size_t q = r + 1; q < rows; q++)
            if (ids[q] == id) {
                nx = (int)q;
                break;
            }
        next[r] = nx, first[r] = f;
    }
}

__global__ static void embedding_bwd(float *dw, const float *dy, const float *ids, const int *next, const int *first,
                                     size_t rows, int v, int c) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float id = ids[r];
        // (a fractional id the rank refuses before upload; passed over here too, since two
        // chains would race on its row)
        if (!first[r] || !(id >= 0.0f && id < (float)v) || id != floorf(id)) continue;
        float *w = dw + (size_t)id * c;
        for (int col = threadIdx.x; col < c; col += blockDim.x) {
            float s = w[col];
            for (int q = (int)r; q >= 0; q = next[q]) s += dy[(size_t)q * c + col];
            w[col] = s;
        }
    }
}

extern "C" int taas_cu_embedding_forward(taas_cu *cu, float *y, const float *ids, const float *w, size_t rows, int v,
                                         int c, taas_error *err) {
    size_t n = rows * (size_t)c;
    embedding_fwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(y, ids, w, rows, v, c);
    return TAAS_CU_LAUNCHED("Embedding's forward", err);
}

extern "C" size_t taas_cu_embedding_scratch_floats(size_t rows) { return 2 * rows; }

extern "C" int taas_cu_embedding_backward(taas_cu *cu, float *dw, const float *dy, const float *ids, size_t rows,
                                          int v, int c, void *scratch, size_t room, taas_error *err) {
    if (!rows) return 0;
    if (rows > INT_MAX || room < taas_cu_embedding_scratch_floats(rows)) {
        taas_srcpos nowhere = {0, 0};
        taas_error_set(err, TAAS_ERR_INTERNAL, nowhere, "the embedding's backward of %zu rows has %zu floats of scratch",
                       rows, room);
        taas_error_hint(err, "this is a bug in taas; please report it");
        return -1;
    }
    int *next = (int *)scratch, *first = next + rows;
    embedding_links<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(next, first, ids, rows);
    if (TAAS_CU_LAUNCHED("Embedding's backward (its rows' links)", err)) return -1;
    unsigned blocks = (unsigned)(rows < (1u << 20) ? rows : (1u << 20));
    embedding_bwd<<<blocks, TAAS_CU_THREADS, 0, cu->stream>>>(dw, dy, ids, next, first, rows, v, c);
    return TAAS_CU_LAUNCHED("Embedding's backward", err);
}

// ---- GPT-2's positions: y (N, T, C) = x + w[t] ----

__global__ static void pos_fwd(float *y, const float *x, const float *w, size_t total, int t, int c) {
    TAAS_CU_LOOP(i, total) y[i] = x[i] + w[i % ((size_t)t * c)];
}

// a thread per (t, c), the samples added in order onto the gradient so far (the CPU's
// sum_samples: the same bits when gradients are kept across micro-batches)
__global__ static void pos_bwd(float *dw, const float *dy, int n, int t, int c) {
    size_t plane = (size_t)t * c;
    TAAS_CU_LOOP(i, plane) {
        float s = dw[i];
        for (int k = 0; k < n; k++) s += dy[(size_t)k * plane + i];
        dw[i] = s;
    }
}

extern "C" int taas_cu_pos_embedding_forward(taas_cu *cu, float *y, const float *x, const float *w, int n, int t,
                                             int c, taas_error *err) {
    size_t total = (size_t)n * t * c;
    pos_fwd<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(y, x, w, total, t, c);
    return TAAS_CU_LAUNCHED("the positions' forward", err);
}

extern "C" int taas_cu_pos_embedding_backward(taas_cu *cu, float *dx, float *dw, const float *dy, int n, int t, int c,
                                              taas_error *err) {
    if (dx && dx != dy && taas_cu_copy(cu, dx, dy, (size_t)n * t * c, err)) return -1;
    if (!dw) return 0;
    pos_bwd<<<taas_cu_blocks((size_t)t * c), TAAS_CU_THREADS, 0, cu->stream>>>(dw, dy, n, t, c);
    return TAAS_CU_LAUNCHED("the positions' backward", err);
}

// ---- LayerNorm over the last axis: a block per row, sums in double ----

__global__ static void ln_fwd(float *y, float *mean, float *rstd, const float *x, const float *g, const float *b,
                              int c, float eps) {
    __shared__ double sh[TAAS_CU_THREADS];
    size_t r = blockIdx.x;
    const float *p = x + r * c;
    double s = 0.0;
    for (int k = threadIdx.x; k < c; k += blockDim.x) s += p[k];
    double mu = taas_cu_block_sum(s, sh) / c;
    double q = 0.0;
    for (int k = threadIdx.x; k < c; k += blockDim.x) q += (p[k] - mu) * (p[k] - mu);
    double var = taas_cu_block_sum(q, sh) / c;
    float m = (float)mu, is = (float)(1.0 / sqrt(var + eps));
    if (threadIdx.x == 0) mean[r] = m, rstd[r] = is;
    for (int k = threadIdx.x; k < c; k += blockDim.x) y[r * c + k] = (p[k] - m) * is * g[k] + b[k];
}

__global__ static void ln_bwd_dx(float *dx, const float *dy, const float *x, const float *mean, const float *rstd,
                                 const float *g, int c) {
    __shared__ double sh[TAAS_CU_THREADS];
    size_t r = blockIdx.x;
    const float *d = dy + r * c, *p = x + r * c;
    float mu = mean[r], is = rstd[r];
    double s1 = 0.0, s2 = 0.0;
    for (int k = threadIdx.x; k < c; k += blockDim.x) {
        float v = d[k] * g[k];
        s1 += v;
        s2 += v * ((p[k] - mu) * is);
    }
    float m1 = (float)(taas_cu_block_sum(s1, sh) / c), m2 = (float)(taas_cu_block_sum(s2, sh) / c);
    for (int k = threadIdx.x; k < c; k += blockDim.x) dx[r * c + k] = is * (d[k] * g[k] - m1 - (p[k] - mu) * is * m2);
}

// A block per 32 columns, its 32 phases taking every 32nd row, sums in double (a thread per
// column walking all the rows left a GPT-2 LayerNorm's 768 columns to 3 blocks of 4,096 steps)
__global__ static void ln_bwd_params(float *dg, float *db, const float *dy, const float *x, const float *mean,
                                     const float *rstd, size_t rows, int c) {
    __shared__ double sh[TAAS_CU_PHASES][TAAS_CU_COLS];
    int k = (int)(blockIdx.x * TAAS_CU_COLS + threadIdx.x);
    double sg = 0.0, sb = 0.0;
    if (k < c)
        for (size_t r = threadIdx.y; r < rows; r += TAAS_CU_PHASES) {
            float d = dy[r * c + k];
            sg += d * ((x[r * c + k] - mean[r]) * rstd[r]);
            sb += d;
        }
    sg = taas_cu_phase_sum(sg, sh);
    sb = taas_cu_phase_sum(sb, sh);
    if (threadIdx.y || k >= c) return;
    if (dg) dg[k] += (float)sg;
    if (db) db[k] += (float)sb;
}

extern "C" int taas_cu_layernorm_forward(taas_cu *cu, float *y, float *mean, float *rstd, const float *x,
                                         const float *g, const float *b, size_t rows, int c, float eps,
                                         taas_error *err) {
    if (!rows) return 0;
    ln_fwd<<<(unsigned)rows, TAAS_CU_THREADS, 0, cu->stream>>>(y, mean, rstd, x, g, b, c, eps);
    return TAAS_CU_LAUNCHED("LayerNorm's forward", err);
}

extern "C" int taas_cu_layernorm_backward(taas_cu *cu, float *dx, float *dg, float *db, const float *dy,
                                          const float *x, const float *mean, const float *rstd, const float *g,
                                          size_t rows, int c, taas_error *err) {
    if (!rows) return 0;
    if (dx) {
        ln_bwd_dx<<<(unsigned)rows, TAAS_CU_THREADS, 0, cu->stream>>>(dx, dy, x, mean, rstd, g, c);
        if (TAAS_CU_LAUNCHED("LayerNorm's input gradient", err)) return -1;
    }
    if (!dg && !db) return 0;
    ln_bwd_params<<<(unsigned)((c + TAAS_CU_COLS - 1) / TAAS_CU_COLS), dim3(TAAS_CU_COLS, TAAS_CU_PHASES), 0,
                    cu->stream>>>(dg, db, dy, x, mean, rstd, rows, c);
    return TAAS_CU_LAUNCHED("LayerNorm's parameter gradients", err);
}
