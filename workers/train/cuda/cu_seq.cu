// The sequence layers on the GPU (layers.h's Embedding, GPT-2's positions, LayerNorm and the
// fused causal attention), with the CPU's formulas. No atomics: every sum is one thread's loop
// in a fixed order or a block's fixed tree, so a run repeats to the last bit. The attention
// is plain: a thread per query row (its scores, softmax and output), then for the backward a
// thread per query row (dq) and per key row (dk, dv), each recomputing the probabilities
// from the forward's log-sum-exp and redrawing the dropout mask from the counter RNG.
#include <math.h>

#include "ctr_rng.h"
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

// a thread per column, down the rows in order (the CPU's order)
__global__ static void embedding_bwd(float *dw, const float *dy, const float *ids, size_t rows, int v, int c) {
    TAAS_CU_LOOP(col, (size_t)c) {
        for (size_t r = 0; r < rows; r++) {
            float id = ids[r];
            if (id >= 0.0f && id < (float)v) dw[(size_t)id * c + col] += dy[r * c + col];
        }
    }
}

extern "C" int taas_cu_embedding_forward(taas_cu *cu, float *y, const float *ids, const float *w, size_t rows, int v,
                                         int c, taas_error *err) {
    size_t n = rows * (size_t)c;
    embedding_fwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(y, ids, w, rows, v, c);
    return TAAS_CU_LAUNCHED("Embedding's forward", err);
}

extern "C" int taas_cu_embedding_backward(taas_cu *cu, float *dw, const float *dy, const float *ids, size_t rows,
                                          int v, int c, taas_error *err) {
    embedding_bwd<<<taas_cu_blocks((size_t)c), TAAS_CU_THREADS, 0, cu->stream>>>(dw, dy, ids, rows, v, c);
    return TAAS_CU_LAUNCHED("Embedding's backward", err);
}

// ---- GPT-2's positions: y (N, T, C) = x + w[t] ----

__global__ static void pos_fwd(float *y, const float *x, const float *w, size_t total, int t, int c) {
    TAAS_CU_LOOP(i, total) y[i] = x[i] + w[i % ((size_t)t * c)];
}

// a thread per (t, c), the samples in order
__global__ static void pos_bwd(float *dw, const float *dy, int n, int t, int c) {
    size_t plane = (size_t)t * c;
    TAAS_CU_LOOP(i, plane) {
        float s = 0.0f;
        for (int k = 0; k < n; k++) s += dy[(size_t)k * plane + i];
        dw[i] += s;
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

// a thread per column, down the rows in order
__global__ static void ln_bwd_params(float *dg, float *db, const float *dy, const float *x, const float *mean,
                                     const float *rstd, size_t rows, int c) {
    TAAS_CU_LOOP(k, (size_t)c) {
        double sg = 0.0, sb = 0.0;
        for (size_t r = 0; r < rows; r++) {
            float d = dy[r * c + k];
            sg += d * ((x[r * c + k] - mean[r]) * rstd[r]);
            sb += d;
        }
        if (dg) dg[k] += (float)sg;
        if (db) db[k] += (float)sb;
    }
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
    ln_bwd_params<<<taas_cu_blocks((size_t)c), TAAS_CU_THREADS, 0, cu->stream>>>(dg, db, dy, x, mean, rstd, rows, c);
    return TAAS_CU_LAUNCHED("LayerNorm's parameter gradients", err);
}

// ---- causal self-attention ----

// The shape as the kernels use it; a unit is a (sample, head).
struct att {
    int n, t, c, h, d;
    float p, ks, scale;
    uint64_t seed, offset;
    const uint64_t *step;  // the counters' step part (cu_device.h), or NULL
    uint64_t stride;
};

static att att_of(const taas_cu *cu, const taas_attention_shape *s, uint64_t seed, uint64_t offset) {
    att a;
    a.n = s->n, a.t = s->t, a.c = s->c, a.h = s->heads, a.d = s->c / s->heads;
    a.p = s->p, a.ks = s->p >= 1.0f ? 0.0f : 1.0f / (1.0f - s->p);
    a.scale = 1.0f / sqrtf((float)a.d);
    a.seed = seed, a.offset = offset;
    a.step = cu->step, a.stride = cu->step_stride;
    return a;
}

// thread i's place: unit u = (sample s, head hd) and row; base: the unit's q at row 0 in qkv
// (its k and v C and 2C further), when qkv is given
struct place {
    size_t u;
    int row, s, hd;
    const float *base;
};

__device__ static place place_of(const att &a, size_t i, const float *qkv) {
    place w;
    w.u = i / a.t;
    w.row = (int)(i % a.t), w.s = (int)(w.u / a.h), w.hd = (int)(w.u % a.h);
    w.base = qkv ? qkv + (size_t)w.s * a.t * 3 * a.c + (size_t)w.hd * a.d : NULL;
    return w;
}

// the dropout factor of probability (row, key) of unit u: layer_attention.c's counter
__device__ static float keep(const att &a, size_t u, int row, int key) {
    if (a.p <= 0.0f) return 1.0f;
    uint64_t base = a.step ? a.offset + *a.step * a.stride : a.offset;
    uint64_t ctr = base + ((uint64_t)u * (uint64_t)a.t + (uint64_t)row) * (uint64_t)a.t + (uint64_t)key;
    return taas_ctr_uniform(a.seed, ctr) < a.p ? 0.0f : a.ks;
}

__device__ static float score(const att &a, const float *q, const float *k) {
    float s = 0.0f;
    for (int x = 0; x < a.d; x++) s += q[x] * k[x];
    return s * a.scale;
}

// a thread per (unit, row): q at qkv's row, head columns; keys 0..row
__global__ static void att_fwd(float *y, float *lse, const float *qkv, att a) {
    size_t ld = 3 * (size_t)a.c;
    TAAS_CU_LOOP(i, (size_t)a.n * a.h * a.t) {
        place w = place_of(a, i, qkv);
        size_t u = w.u;
        int row = w.row;
        const float *base = w.base, *q = base + (size_t)row * ld;
        float *o = y + ((size_t)w.s * a.t + row) * a.c + (size_t)w.hd * a.d;
        float m = -INFINITY, l = 0.0f;
        for (int j = 0; j <= row; j++) m = fmaxf(m, score(a, q, base + (size_t)j * ld + a.c));
        for (int x = 0; x < a.d; x++) o[x] = 0.0f;
        for (int j = 0; j <= row; j++) {
            float e = expf(score(a, q, base + (size_t)j * ld + a.c) - m), pd = e * keep(a, u, row, j);
            l += e;
            const float *v = base + (size_t)j * ld + 2 * (size_t)a.c;
            for (int x = 0; x < a.d; x++) o[x] += pd * v[x];
        }
        for (int x = 0; x < a.d; x++) o[x] /= l;
        lse[i] = m + logf(l);
    }
}

// D_r = dO_r . O_r, a thread per (unit, row), into dr (N*H*T)
__global__ static void att_rowdot(float *dr, const float *dy, const float *y, att a) {
    TAAS_CU_LOOP(i, (size_t)a.n * a.h * a.t) {
        place w = place_of(a, i, NULL);
        size_t at = ((size_t)w.s * a.t + w.row) * a.c + (size_t)w.hd * a.d;
        double acc = 0.0;
        for (int x = 0; x < a.d; x++) acc += (double)dy[at + x] * y[at + x];
        dr[i] = (float)acc;
    }
}

// dS_rj = P_rj (dP_rj * keep - D_r), dP_rj = dO_r . v_j
__device__ static float dscore(const att &a, size_t u, const float *base, const float *dor, float lse_r, float d_r,
                               int row, int j, float *pd) {
    size_t ld = 3 * (size_t)a.c;
    float p = expf(score(a, base + (size_t)row * ld, base + (size_t)j * ld + a.c) - lse_r), kp = keep(a, u, row, j);
    const float *v = base + (size_t)j * ld + 2 * (size_t)a.c;
    float dp = 0.0f;
    for (int x = 0; x < a.d; x++) dp += dor[x] * v[x];
    *pd = p * kp;
    return p * (dp * kp - d_r);
}

// a thread per (unit, row): dq_r = scale sum_j dS_rj k_j
__global__ static void att_bwd_q(float *dqkv, const float *dy, const float *qkv, const float *lse, const float *dr,
                                 att a) {
    size_t ld = 3 * (size_t)a.c;
    TAAS_CU_LOOP(i, (size_t)a.n * a.h * a.t) {
        place w = place_of(a, i, qkv);
        const float *dor = dy + ((size_t)w.s * a.t + w.row) * a.c + (size_t)w.hd * a.d;
        float *dq = dqkv + (w.base - qkv) + (size_t)w.row * ld, pd;
        for (int x = 0; x < a.d; x++) dq[x] = 0.0f;
        for (int j = 0; j <= w.row; j++) {
            float ds = dscore(a, w.u, w.base, dor, lse[i], dr[i], w.row, j, &pd) * a.scale;
            const float *k = w.base + (size_t)j * ld + a.c;
            for (int x = 0; x < a.d; x++) dq[x] += ds * k[x];
        }
    }
}

// a thread per (unit, key j): dk_j = scale sum_{r >= j} dS_rj q_r, dv_j = sum_{r >= j} P'_rj dO_r
__global__ static void att_bwd_kv(float *dqkv, const float *dy, const float *qkv, const float *lse, const float *dr,
                                  att a) {
    size_t ld = 3 * (size_t)a.c;
    TAAS_CU_LOOP(i, (size_t)a.n * a.h * a.t) {
        place w = place_of(a, i, qkv);
        int j = w.row;
        float *dk = dqkv + (w.base - qkv) + (size_t)j * ld + a.c, *dv = dk + a.c, pd;
        for (int x = 0; x < a.d; x++) dk[x] = dv[x] = 0.0f;
        for (int row = j; row < a.t; row++) {
            size_t ri = w.u * a.t + row;
            const float *dor = dy + ((size_t)w.s * a.t + row) * a.c + (size_t)w.hd * a.d;
            float ds = dscore(a, w.u, w.base, dor, lse[ri], dr[ri], row, j, &pd) * a.scale;
            const float *q = w.base + (size_t)row * ld;
            for (int x = 0; x < a.d; x++) {
                dk[x] += ds * q[x];
                dv[x] += pd * dor[x];
            }
        }
    }
}

extern "C" size_t taas_cu_attention_scratch_floats(const taas_attention_shape *s) {
    return (size_t)s->n * s->heads * s->t;
}

extern "C" int taas_cu_attention_forward(taas_cu *cu, float *y, float *lse, const float *qkv,
                                         const taas_attention_shape *s, uint64_t seed, uint64_t offset,
                                         taas_error *err) {
    size_t rows = (size_t)s->n * s->heads * s->t;
    att_fwd<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(y, lse, qkv, att_of(cu, s, seed, offset));
    return TAAS_CU_LAUNCHED("the attention's forward", err);
}

extern "C" int taas_cu_attention_backward(taas_cu *cu, float *dqkv, const float *dy, const float *qkv, const float *y,
                                          const float *lse, const taas_attention_shape *s, float *scratch,
                                          size_t room, uint64_t seed, uint64_t offset, taas_error *err) {
    size_t rows = (size_t)s->n * s->heads * s->t;
    att a = att_of(cu, s, seed, offset);
    if (room < rows) {
        taas_srcpos nowhere = {0, 0};
        taas_error_set(err, TAAS_ERR_INTERNAL, nowhere, "the attention's backward needs %zu floats of scratch, has %zu",
                       rows, room);
        taas_error_hint(err, "this is a bug in taas; please report it");
        return -1;
    }
    att_rowdot<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(scratch, dy, y, a);
    if (TAAS_CU_LAUNCHED("the attention's row sums", err)) return -1;
    att_bwd_q<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
    if (TAAS_CU_LAUNCHED("the attention's query gradient", err)) return -1;
    att_bwd_kv<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
    return TAAS_CU_LAUNCHED("the attention's key and value gradients", err);
}
