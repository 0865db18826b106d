// The fused causal attention on the GPU (layers.h's), with the CPU's formulas and the CPU's
// dropout counters, so that a mask is the CPU's bit for bit. Three sets of kernels:
//
// - tiled (head width d <= 64, the default): flash attention's way. A block holds 64 query rows
//   of one (sample, head), a thread per row with its q and its output in registers; the keys
//   and values come through shared memory 32 at a time, and the softmax runs online, one
//   rescale per tile. The backward is two kernels, neither with atomics: one per block of 64
//   query rows for dq (walking the key tiles), one per block of 64 key rows for dk and dv
//   (walking the query tiles), each recomputing the probabilities from the forward's
//   log-sum-exp.
// - plain (any d, and TAAS_CUDA_ATTENTION=plain): a thread per query row reading keys and
//   values from global memory, a thread per key row for dk and dv. Kept as the reference
//   the tiled kernels are measured against, and for heads wider than 64.
// - gemm (TAAS_CUDA_ATTENTION=gemm): a sample's heads' (T x T) scores in scratch through
//   strided-batched cuBLAS products (on tensor cores with precision='bf16'), a warp per row
//   for the causal softmax and its backward, which recomputes the scores.
//
// Every sum is one thread's loop in a fixed order: a run repeats to the last bit.
#include <math.h>

#include "ctr_rng.h"
#include "cu_kern.cuh"
#include "cu_layers.h"
#include "errnames.h"

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

// the dropout factor of probability (row, key) of unit u: layer_attention.c's counter
__device__ static float keep(const att &a, size_t u, int row, int key) {
    if (a.p <= 0.0f) return 1.0f;
    uint64_t base = a.step ? a.offset + *a.step * a.stride : a.offset;
    uint64_t ctr = base + ((uint64_t)u * (uint64_t)a.t + (uint64_t)row) * (uint64_t)a.t + (uint64_t)key;
    return taas_ctr_uniform(a.seed, ctr) < a.p ? 0.0f : a.ks;
}

// D_r = dO_r . O_r, a thread per (unit, row), into dr (N*H*T): both kernel sets' first step
__global__ static void att_rowdot(float *dr, const float *dy, const float *y, att a) {
    TAAS_CU_LOOP(i, (size_t)a.n * a.h * a.t) {
        size_t u = i / a.t;
        int row = (int)(i % a.t), s = (int)(u / a.h), hd = (int)(u % a.h);
        size_t at = ((size_t)s * a.t + row) * a.c + (size_t)hd * a.d;
        double acc = 0.0;
        for (int x = 0; x < a.d; x++) acc += (double)dy[at + x] * y[at + x];
        dr[i] = (float)acc;
    }
}

// ---- plain ----

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

// ---- tiled ----

// BR rows a block (a thread each), BC keys or queries a tile in shared memory; DM >= d is
// the width the registers and tiles are sized for, the columns past d held at zero (a zero
// product adds nothing to a score or a dot). The products and sums are explicit fmaf (the
// build contracts nothing, for the CPU's bits where a kernel repeats the CPU's order; these
// sums are in an order of their own anyway, and the fused form is twice the arithmetic).
enum { BR = 64, BC = 32 };

// The block's unit and rows: blocks run over (unit, tile of BR rows), a thread a row.
struct tile_place {
    size_t u;
    int r0, s, hd;
    int row, last;      // the thread's row, and the block's last row (t - 1 at most)
    bool live;          // row < t: threads past the end only help load the tiles
    const float *base;  // the unit's q at row 0 in qkv
    size_t ld;
};

__device__ static tile_place tile_of(const att &a, const float *qkv) {
    tile_place w;
    int tiles = (a.t + BR - 1) / BR;
    w.u = blockIdx.x / tiles;
    w.r0 = (int)(blockIdx.x % tiles) * BR;
    w.row = w.r0 + (int)threadIdx.x, w.last = min(a.t, w.r0 + BR) - 1, w.live = w.row < a.t;
    w.s = (int)(w.u / a.h), w.hd = (int)(w.u % a.h);
    w.ld = 3 * (size_t)a.c;
    w.base = qkv + (size_t)w.s * a.t * w.ld + (size_t)w.hd * a.d;
    return w;
}

// x (DM floats) = the d floats at src (0 past d, and all 0 when !live)
template <int DM> __device__ static void load_row(float *x, const float *src, int d, bool live) {
#pragma unroll
    for (int c = 0; c < DM; c++) x[c] = live && c < d ? src[c] : 0.0f;
}

// x . row, row a tile's (16-byte aligned: 4 floats a load, broadcast to the warp), in x's order
// the d first of x (DM floats) to dst
template <int DM> __device__ static void store_row(float *dst, const float *x, int d) {
#pragma unroll
    for (int c = 0; c < DM; c++)
        if (c < d) dst[c] = x[c];
}

template <int DM> __device__ static float dot_tile(const float *x, const float *row) {
    const float4 *r4 = reinterpret_cast<const float4 *>(row);
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < DM / 4; c++) {
        float4 v = r4[c];
        s = fmaf(x[4 * c], v.x, s);
        s = fmaf(x[4 * c + 1], v.y, s);
        s = fmaf(x[4 * c + 2], v.z, s);
        s = fmaf(x[4 * c + 3], v.w, s);
    }
    return s;
}

// acc += a * row, row a tile's
template <int DM> __device__ static void axpy_tile(float *acc, float a, const float *row) {
    const float4 *r4 = reinterpret_cast<const float4 *>(row);
#pragma unroll
    for (int c = 0; c < DM / 4; c++) {
        float4 v = r4[c];
        acc[4 * c] = fmaf(a, v.x, acc[4 * c]);
        acc[4 * c + 1] = fmaf(a, v.y, acc[4 * c + 1]);
        acc[4 * c + 2] = fmaf(a, v.z, acc[4 * c + 2]);
        acc[4 * c + 3] = fmaf(a, v.w, acc[4 * c + 3]);
    }
}

// Shared memory is read again after this rather than kept in registers from the dot products
// before it: the registers go to the thread's sums (a tile row kept would spill them).
__device__ static inline void reload(void) { asm volatile("" ::: "memory"); }

// rows first..first+ROWS-1 of the unit at `from` (stride ld, d wide) into tile (ROWS x DM),
// zeros past t and past d; all the block's threads take part
template <int DM, int ROWS>
__device__ static void load_tile(float (*tile)[DM], const float *from, size_t ld, int first, int t, int d) {
    for (int e = threadIdx.x; e < ROWS * DM; e += BR) {
        int j = e / DM, c = e % DM, r = first + j;
        tile[j][c] = r < t && c < d ? from[(size_t)r * ld + c] : 0.0f;
    }
}

// keys and values k0..k0+BC-1 of the block's unit into ks and vs, once every thread is done
// with the tile before
template <int DM>
__device__ static void next_kv(float (*ks)[DM], float (*vs)[DM], const tile_place &w, const att &a, int k0) {
    __syncthreads();
    load_tile<DM, BC>(ks, w.base + a.c, w.ld, k0, a.t, a.d);
    load_tile<DM, BC>(vs, w.base + 2 * (size_t)a.c, w.ld, k0, a.t, a.d);
    __syncthreads();
}

template <int DM>
static __global__ void __launch_bounds__(BR) att_fwd_tiled(float *y, float *lse, const float *qkv, att a) {
    __shared__ __align__(16) float ks[BC][DM];
    __shared__ __align__(16) float vs[BC][DM];
    __shared__ float ss[BR][BC + 1];
    tile_place w = tile_of(a, qkv);
    int row = w.row;
    bool live = w.live;
    float q[DM], o[DM], m = -INFINITY, l = 0.0f;
    load_row<DM>(q, w.base + (size_t)row * w.ld, a.d, live);
#pragma unroll
    for (int c = 0; c < DM; c++) o[c] = 0.0f;
    for (int k0 = 0; k0 <= w.last; k0 += BC) {
        next_kv<DM>(ks, vs, w, a, k0);
        int keys = live ? min(BC, row - k0 + 1) : 0;  // keys k0..row of this tile
        if (keys <= 0) continue;
        float mt = -INFINITY;
#pragma unroll 1
        for (int j = 0; j < keys; j++) {
            float sc = dot_tile<DM>(q, ks[j]) * a.scale;
            ss[threadIdx.x][j] = sc;
            mt = fmaxf(mt, sc);
        }
        float mn = fmaxf(m, mt), al = expf(m - mn);  // m = -inf at first: al = 0
        l *= al;
#pragma unroll
        for (int c = 0; c < DM; c++) o[c] *= al;
#pragma unroll 1
        for (int j = 0; j < keys; j++) {
            float e = expf(ss[threadIdx.x][j] - mn), pd = e * keep(a, w.u, row, k0 + j);
            l += e;
            axpy_tile<DM>(o, pd, vs[j]);
        }
        m = mn;
    }
    if (!live) return;
#pragma unroll
    for (int c = 0; c < DM; c++) o[c] /= l;
    store_row<DM>(y + ((size_t)w.s * a.t + row) * a.c + (size_t)w.hd * a.d, o, a.d);
    lse[w.u * a.t + row] = m + logf(l);
}

// a block per (unit, BR query rows), a thread per row: dq_r = scale sum_{j <= r} dS_rj k_j.
// The thread's dO row is in shared memory (a row each, padded so that the lanes' rows fall in
// different banks), its q and dq in registers.
template <int DM>
static __global__ void __launch_bounds__(BR) att_bwd_q_tiled(float *dqkv, const float *dy, const float *qkv,
                                                             const float *lse, const float *dr, att a) {
    __shared__ __align__(16) float ks[BC][DM];
    __shared__ __align__(16) float vs[BC][DM];
    __shared__ float down[BR][DM + 1];
    tile_place w = tile_of(a, qkv);
    int row = w.row;
    bool live = w.live;
    size_t ri = w.u * a.t + (live ? row : 0);
    float q[DM], dq[DM], lse_r = lse[ri], d_r = dr[ri], *dor = down[threadIdx.x];
    load_row<DM>(q, w.base + (size_t)row * w.ld, a.d, live);
    load_row<DM>(dor, dy + ((size_t)w.s * a.t + row) * a.c + (size_t)w.hd * a.d, a.d, live);
#pragma unroll
    for (int c = 0; c < DM; c++) dq[c] = 0.0f;
    for (int k0 = 0; k0 <= w.last; k0 += BC) {
        next_kv<DM>(ks, vs, w, a, k0);
        int keys = live ? min(BC, row - k0 + 1) : 0;
#pragma unroll 1
        for (int j = 0; j < keys; j++) {
            float p = expf(dot_tile<DM>(q, ks[j]) * a.scale - lse_r), kp = keep(a, w.u, row, k0 + j);
            float ds = p * (dot_tile<DM>(dor, vs[j]) * kp - d_r) * a.scale;
            reload();
            axpy_tile<DM>(dq, ds, ks[j]);
        }
    }
    if (live) store_row<DM>(dqkv + (w.base - qkv) + (size_t)row * w.ld, dq, a.d);
}

// a block per (unit, BR key rows), a thread per key j: dk_j = scale sum_{r >= j} dS_rj q_r,
// dv_j = sum_{r >= j} P'_rj dO_r. The thread's k and v are in shared memory (padded rows), its
// dk and dv in registers; the queries come BQ at a time, so that all of it fits in 48 KiB.
enum { BQ = 16 };
template <int DM>
static __global__ void __launch_bounds__(BR) att_bwd_kv_tiled(float *dqkv, const float *dy, const float *qkv,
                                                              const float *lse, const float *dr, att a) {
    __shared__ __align__(16) float qs[BQ][DM];
    __shared__ __align__(16) float dos[BQ][DM];
    __shared__ float kown[BR][DM + 1], vown[BR][DM + 1], ls[BQ], ds_[BQ];
    tile_place w = tile_of(a, qkv);
    int j = w.row;
    bool live = w.live;
    float dk[DM], dv[DM], *k = kown[threadIdx.x], *v = vown[threadIdx.x];
    load_row<DM>(k, w.base + (size_t)j * w.ld + a.c, a.d, live);
    load_row<DM>(v, w.base + (size_t)j * w.ld + 2 * (size_t)a.c, a.d, live);
#pragma unroll
    for (int c = 0; c < DM; c++) dk[c] = dv[c] = 0.0f;
    const float *dyu = dy + (size_t)w.s * a.t * a.c + (size_t)w.hd * a.d;
    for (int q0 = w.r0; q0 < a.t; q0 += BQ) {
        __syncthreads();
        load_tile<DM, BQ>(qs, w.base, w.ld, q0, a.t, a.d);
        load_tile<DM, BQ>(dos, dyu, (size_t)a.c, q0, a.t, a.d);
        if (threadIdx.x < BQ) {
            int r = q0 + (int)threadIdx.x;
            ls[threadIdx.x] = r < a.t ? lse[w.u * a.t + r] : 0.0f;
            ds_[threadIdx.x] = r < a.t ? dr[w.u * a.t + r] : 0.0f;
        }
        __syncthreads();
        if (!live) continue;
        int from = max(0, j - q0), to = min(BQ, a.t - q0);  // queries r = q0 + i >= j, r < t
#pragma unroll 1
        for (int i = from; i < to; i++) {
            float p = expf(dot_tile<DM>(k, qs[i]) * a.scale - ls[i]), kp = keep(a, w.u, q0 + i, j);
            float ds = p * (dot_tile<DM>(v, dos[i]) * kp - ds_[i]) * a.scale, pd = p * kp;
            reload();
            axpy_tile<DM>(dk, ds, qs[i]);
            axpy_tile<DM>(dv, pd, dos[i]);
        }
    }
    if (!live) return;
    float *out = dqkv + (w.base - qkv) + (size_t)j * w.ld + a.c;
    store_row<DM>(out, dk, a.d);
    store_row<DM>(out + a.c, dv, a.d);
}

// ---- through the matrix products ----

// A sample at a time, its heads a strided batch of cuBLAS products (taas_cu_gemm_strided, in
// the rank's arithmetic: FP32, TF32 or BF16 on tensor cores), the (T x T) scores of all heads
// in scratch (S, and dP for the backward), row-major: S[h][i][j] = q_i . k_j. The causal
// softmax and its backward are a warp per row; the products run over the whole square, the
// masked half zero.

// S rows of sample `smp` (heads x T rows): P' = softmax(S * scale) * keep on keys 0..i, 0 past
// i; lse
__global__ static void gemm_softmax_fwd(float *S, float *lse, att a, int smp) {
    int lane = (int)(threadIdx.x % TAAS_CU_WARP);
    TAAS_CU_ROWS(r, (size_t)a.h * a.t) {
        int i = (int)(r % a.t);
        size_t u = (size_t)smp * a.h + r / a.t;
        float *row = S + r * a.t, m = -INFINITY, l = 0.0f;
        for (int j = lane; j <= i; j += TAAS_CU_WARP) m = fmaxf(m, row[j] * a.scale);
        m = taas_cu_warp_max(m);
        for (int j = lane; j <= i; j += TAAS_CU_WARP) l += expf(row[j] * a.scale - m);
        l = taas_cu_warp_sum(l);
        for (int j = lane; j < a.t; j += TAAS_CU_WARP)
            row[j] = j <= i ? expf(row[j] * a.scale - m) / l * keep(a, u, i, j) : 0.0f;
        if (!lane) lse[u * a.t + i] = m + logf(l);
    }
}

// S (the scores again) -> P' = P * keep; dP -> dS = P (dP * keep - D_i) * scale; 0 past i
__global__ static void gemm_softmax_bwd(float *S, float *dp, const float *lse, const float *dr, att a, int smp) {
    int lane = (int)(threadIdx.x % TAAS_CU_WARP);
    TAAS_CU_ROWS(r, (size_t)a.h * a.t) {
        int i = (int)(r % a.t);
        size_t u = (size_t)smp * a.h + r / a.t;
        float *row = S + r * a.t, *drow = dp + r * a.t, l = lse[u * a.t + i], d = dr[u * a.t + i];
        for (int j = lane; j < a.t; j += TAAS_CU_WARP) {
            if (j > i) {
                row[j] = drow[j] = 0.0f;
                continue;
            }
            float p = expf(row[j] * a.scale - l), kp = keep(a, u, i, j);
            row[j] = p * kp;
            drow[j] = p * (drow[j] * kp - d) * a.scale;
        }
    }
}

// The heads' (T x T) squares fit the scratch this caps (per buffer, floats).
enum { GEMM_SQUARES_MAX = 1 << 26 };

static int gemm_fits(const taas_attention_shape *s) {
    return (size_t)s->heads * s->t * s->t <= GEMM_SQUARES_MAX;
}

// C (column-major) = op(A) op(B) for each head of one sample: the strided batch the products
// below share
static int heads_gemm(taas_cu *cu, const att &a, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const float *A, int lda, const float *B, int ldb, float *C, int ldc, long long sa, long long sb,
                      long long sc, const char *what, taas_error *err) {
    const float one = 1.0f, zero = 0.0f;
    return taas_cu_check_blas(taas_cu_gemm_strided(cu, ta, tb, m, n, k, &one, A, lda, sa, B, ldb, sb, &zero, C, ldc,
                                                   sc, a.h),
                              what, err);
}

// Row-major X (r x c, ld) is column-major X^T: so S^T = K Q^T reads K and Q as they lie.
static int gemm_scores(taas_cu *cu, const att &a, float *S, const float *base, taas_error *err) {
    int ld = 3 * a.c;
    long long sq = (long long)a.t * a.t;
    return heads_gemm(cu, a, CUBLAS_OP_T, CUBLAS_OP_N, a.t, a.t, a.d, base + a.c, ld, base, ld, S, a.t, a.d, a.d, sq,
                      "the attention's scores", err);
}

static int attention_forward_gemm(taas_cu *cu, float *y, float *lse, const float *qkv, const att &a, float *S,
                                  taas_error *err) {
    int ld = 3 * a.c;
    long long sq = (long long)a.t * a.t;
    for (int smp = 0; smp < a.n; smp++) {
        const float *base = qkv + (size_t)smp * a.t * ld;
        if (gemm_scores(cu, a, S, base, err)) return -1;
        gemm_softmax_fwd<<<taas_cu_warp_rows((size_t)a.h * a.t), TAAS_CU_THREADS, 0, cu->stream>>>(S, lse, a, smp);
        if (TAAS_CU_LAUNCHED("the attention's softmax", err)) return -1;
        // O^T (d x T, ld C) = V^T P'^T
        if (heads_gemm(cu, a, CUBLAS_OP_N, CUBLAS_OP_N, a.d, a.t, a.t, base + 2 * a.c, ld, S, a.t,
                       y + (size_t)smp * a.t * a.c, a.c, a.d, sq, a.d, "the attention's output", err))
            return -1;
    }
    return 0;
}

static int attention_backward_gemm(taas_cu *cu, float *dqkv, const float *dy, const float *qkv, const float *lse,
                                   const float *dr, const att &a, float *S, float *dP, taas_error *err) {
    int ld = 3 * a.c;
    long long sq = (long long)a.t * a.t;
    for (int smp = 0; smp < a.n; smp++) {
        const float *base = qkv + (size_t)smp * a.t * ld, *dys = dy + (size_t)smp * a.t * a.c;
        float *dbase = dqkv + (size_t)smp * a.t * ld;
        // dP^T = V dO^T
        if (gemm_scores(cu, a, S, base, err) ||
            heads_gemm(cu, a, CUBLAS_OP_T, CUBLAS_OP_N, a.t, a.t, a.d, base + 2 * a.c, ld, dys, a.c, dP, a.t, a.d,
                       a.d, sq, "the attention's probability gradient", err))
            return -1;
        gemm_softmax_bwd<<<taas_cu_warp_rows((size_t)a.h * a.t), TAAS_CU_THREADS, 0, cu->stream>>>(S, dP, lse, dr, a,
                                                                                                    smp);
        if (TAAS_CU_LAUNCHED("the attention's softmax backward", err)) return -1;
        // dV^T = dO^T P', dQ^T = K^T dS^T, dK^T = Q^T dS: each written whole
        if (heads_gemm(cu, a, CUBLAS_OP_N, CUBLAS_OP_T, a.d, a.t, a.t, dys, a.c, S, a.t, dbase + 2 * a.c, ld, a.d, sq,
                       a.d, "the attention's value gradient", err) ||
            heads_gemm(cu, a, CUBLAS_OP_N, CUBLAS_OP_N, a.d, a.t, a.t, base + a.c, ld, dP, a.t, dbase, ld, a.d, sq,
                       a.d, "the attention's query gradient", err) ||
            heads_gemm(cu, a, CUBLAS_OP_N, CUBLAS_OP_T, a.d, a.t, a.t, base, ld, dP, a.t, dbase + a.c, ld, a.d, sq,
                       a.d, "the attention's key gradient", err))
            return -1;
    }
    return 0;
}

// ---- the entry points ----

// The set a shape runs: the one cu names where it can take the shape, else tiled, else plain.
static taas_cu_attention set_for(const taas_cu *cu, const taas_attention_shape *s) {
    int d = s->c / s->heads;
    if (cu->attention == TAAS_CU_ATT_GEMM && gemm_fits(s)) return TAAS_CU_ATT_GEMM;
    if (cu->attention == TAAS_CU_ATT_PLAIN || d > 64) return TAAS_CU_ATT_PLAIN;
    return TAAS_CU_ATT_TILED;
}

static unsigned tile_blocks(const att &a) {
    return (unsigned)((size_t)a.n * a.h * (size_t)((a.t + BR - 1) / BR));
}

extern "C" size_t taas_cu_attention_scratch_floats(const taas_cu *cu, const taas_attention_shape *s) {
    size_t rows = (size_t)s->n * s->heads * s->t;
    return set_for(cu, s) == TAAS_CU_ATT_GEMM ? rows + 2 * (size_t)s->heads * s->t * s->t : rows;
}

static int scratch_short(const taas_cu *cu, const taas_attention_shape *s, size_t room, taas_error *err) {
    size_t need = taas_cu_attention_scratch_floats(cu, s);
    if (room >= need) return 0;
    taas_srcpos nowhere = {0, 0};
    taas_error_set(err, TAAS_ERR_INTERNAL, nowhere, "the attention needs %zu floats of scratch, has %zu", need, room);
    taas_error_hint(err, "this is a bug in taas; please report it");
    return -1;
}

extern "C" int taas_cu_attention_forward(taas_cu *cu, float *y, float *lse, const float *qkv,
                                         const taas_attention_shape *s, float *scratch, size_t room, uint64_t seed,
                                         uint64_t offset, taas_error *err) {
    att a = att_of(cu, s, seed, offset);
    size_t rows = (size_t)s->n * s->heads * s->t;
    if (rows == 0) return 0;  // (no block to launch: a grid of none is an error)
    if (scratch_short(cu, s, room, err)) return -1;
    taas_cu_attention set = set_for(cu, s);
    if (set == TAAS_CU_ATT_GEMM) return attention_forward_gemm(cu, y, lse, qkv, a, scratch + rows, err);
    if (set == TAAS_CU_ATT_PLAIN)
        att_fwd<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(y, lse, qkv, a);
    else if (a.d <= 32)
        att_fwd_tiled<32><<<tile_blocks(a), BR, 0, cu->stream>>>(y, lse, qkv, a);
    else
        att_fwd_tiled<64><<<tile_blocks(a), BR, 0, cu->stream>>>(y, lse, qkv, a);
    return TAAS_CU_LAUNCHED("the attention's forward", err);
}

extern "C" int taas_cu_attention_backward(taas_cu *cu, float *dqkv, const float *dy, const float *qkv, const float *y,
                                          const float *lse, const taas_attention_shape *s, float *scratch,
                                          size_t room, uint64_t seed, uint64_t offset, taas_error *err) {
    size_t rows = (size_t)s->n * s->heads * s->t;
    att a = att_of(cu, s, seed, offset);
    if (rows == 0) return 0;
    if (scratch_short(cu, s, room, err)) return -1;
    att_rowdot<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(scratch, dy, y, a);
    if (TAAS_CU_LAUNCHED("the attention's row sums", err)) return -1;
    taas_cu_attention set = set_for(cu, s);
    if (set == TAAS_CU_ATT_GEMM) {
        size_t sq = (size_t)s->heads * s->t * s->t;
        return attention_backward_gemm(cu, dqkv, dy, qkv, lse, scratch, a, scratch + rows, scratch + rows + sq, err);
    }
    if (set == TAAS_CU_ATT_PLAIN) {
        att_bwd_q<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
        if (TAAS_CU_LAUNCHED("the attention's query gradient", err)) return -1;
        att_bwd_kv<<<taas_cu_blocks(rows), TAAS_CU_THREADS, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
    } else if (a.d <= 32) {
        att_bwd_q_tiled<32><<<tile_blocks(a), BR, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
        if (TAAS_CU_LAUNCHED("the attention's query gradient", err)) return -1;
        att_bwd_kv_tiled<32><<<tile_blocks(a), BR, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
    } else {
        att_bwd_q_tiled<64><<<tile_blocks(a), BR, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
        if (TAAS_CU_LAUNCHED("the attention's query gradient", err)) return -1;
        att_bwd_kv_tiled<64><<<tile_blocks(a), BR, 0, cu->stream>>>(dqkv, dy, qkv, lse, scratch, a);
    }
    return TAAS_CU_LAUNCHED("the attention's key and value gradients", err);
}
