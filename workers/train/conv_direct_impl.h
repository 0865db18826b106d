/* The direct Conv2d kernels (conv_direct.h), written once for every vector width: a kernel
 * set's file (conv_direct_avx512.c, conv_direct_avx2.c) defines its vector type and width,
 * its tile sizes, its target and the few operations below, then includes this file, which
 * defines the set's table (taas_conv_kernels). Included only there.
 *
 * What a set defines:
 *   VL                  floats a vector
 *   MR, NV              a forward and input-gradient tile: MR rows by NV vectors
 *   NS, OV              a weight-gradient tile: NS im2col rows by OV vectors of channels
 *   VEC, MASK           the vector type, and a mask of a vector's first lanes
 *   TARGET              the functions' target ("avx512f", "avx2,fma")
 *   SET_TABLE, SET_NAME the table's name and the set's ("avx512", "avx2")
 *   v_zero v_set1 v_loadu v_storeu v_add v_fma v_reduce v_maskload v_maskstore mask_first
 *   transpose_block     (VL x VL floats, row strides ldd and lds)
 * Every buffer size follows from VL and the tiles, so the layouts of two sets differ; a
 * process uses one set throughout (taas_cpu_set). */
#include <string.h>

#include "conv_direct_kernels.h"

typedef struct geom {
    int hp, wp, oh, ow;  /* padded input, output */
    int q, qv, ldq;      /* outputs per channel on the padded-width grid; in vectors; row stride */
    size_t plane, xp;    /* a padded plane; a padded image with its zero slack */
    int k, ocp, cp;      /* C*KH*KW; OC and C rounded up to MR */
    int ocw;             /* OC rounded up to a weight-gradient tile's OV vectors */
} geom;

static geom geometry(const taas_conv2d_shape *s) {
    geom g;
    g.hp = s->h + 2 * s->ph, g.wp = s->w + 2 * s->pw;
    g.oh = g.hp - s->kh + 1, g.ow = g.wp - s->kw + 1;
    g.q = g.oh * g.wp, g.qv = (g.q + VL - 1) / VL, g.ldq = g.qv * VL;
    g.plane = (size_t)g.hp * g.wp;
    /* a read at q + ki*Wp + kj, q < ldq, ends at most KW + VL floats past the last plane */
    g.xp = ((size_t)s->c * g.plane + (size_t)s->kw + 2 * VL + VL - 1) / VL * VL;
    g.k = s->c * s->kh * s->kw;
    g.ocp = (s->oc + MR - 1) / MR * MR, g.cp = (s->c + MR - 1) / MR * MR;
    g.ocw = (s->oc + OV * VL - 1) / (OV * VL) * (OV * VL);
    return g;
}

/* Per thread: padded image | zeros (dummy weight-gradient rows read them) | staging rows
 * (the output, OCp x ldq; or the output gradient, OCw x ldq) | padded input gradient |
 * sink (dummy input-gradient rows write there) | the output gradient transposed (ldq x OCw). */
static size_t thread_floats(const taas_conv2d_shape *s) {
    geom g = geometry(s);
    return 2 * g.xp + 2 * ((size_t)g.ldq + VL) + 2 * (size_t)g.ocw * g.ldq;
}

static size_t dw_floats(const taas_conv2d_shape *s) {
    geom g = geometry(s);
    return (size_t)(g.k + NS - 1) / NS * NS * g.ocw;  /* a last tile's rows past C*KH*KW */
}

static void add_dw(float *dw, const float *dwt, const taas_conv2d_shape *s) {
    geom g = geometry(s);
    for (int o = 0; o < s->oc; o++)
        for (int k = 0; k < g.k; k++) dw[(size_t)o * g.k + k] += dwt[(size_t)k * g.ocw + o];
}

static size_t shared_floats(const taas_conv2d_shape *s) {
    geom g = geometry(s);
    size_t fwd = (size_t)g.ocp * g.k, bwd = (size_t)s->kh * s->kw * g.cp * s->oc;
    return fwd > bwd ? fwd : bwd;
}

/* Forward: block ob, step k, lane r holds w[ob*MR + r][k] (zero past OC). */
static void pack_forward(float *packed, const float *w, const taas_conv2d_shape *s) {
    geom g = geometry(s);
    for (int ob = 0; ob < g.ocp / MR; ob++)
        for (int k = 0; k < g.k; k++)
            for (int r = 0; r < MR; r++) {
                int o = ob * MR + r;
                packed[((size_t)ob * g.k + k) * MR + r] = o < s->oc ? w[(size_t)o * g.k + k] : 0.0f;
            }
}

/* Input gradient: block (ki, kj, cb), step o, lane r holds w[o][cb*MR + r][ki][kj]: a block
 * writes MR different planes, so its additions never overlap each other. */
static void pack_backward(float *packed, const float *w, const taas_conv2d_shape *s) {
    geom g = geometry(s);
    size_t kb = 0;
    for (int ki = 0; ki < s->kh; ki++)
        for (int kj = 0; kj < s->kw; kj++)
            for (int cb = 0; cb < g.cp / MR; cb++, kb++)
                for (int o = 0; o < s->oc; o++)
                    for (int r = 0; r < MR; r++) {
                        int c = cb * MR + r;
                        packed[(kb * s->oc + o) * MR + r] =
                            c < s->c ? w[(((size_t)o * s->c + c) * s->kh + ki) * s->kw + kj] : 0.0f;
                    }
}


/* dst = the image zero-padded into planes of Hp x Wp, then zeros to the end of the slack. */
KERNEL static void pad_image(float *dst, const float *img, const taas_conv2d_shape *s, const geom *g) {
    if (s->ph == 0 && s->pw == 0) {
        memcpy(dst, img, sizeof(float) * (size_t)s->c * g->plane);
        memset(dst + (size_t)s->c * g->plane, 0, sizeof(float) * (g->xp - (size_t)s->c * g->plane));
        return;
    }
    memset(dst, 0, sizeof(float) * g->xp);
    for (int c = 0; c < s->c; c++)
        for (int y = 0; y < s->h; y++)
            memcpy(dst + c * g->plane + (size_t)(y + s->ph) * g->wp + s->pw,
                   img + ((size_t)c * s->h + y) * s->w, sizeof(float) * s->w);
}

/* Masks of a tile's NV vectors from position q0: whole vectors, the last partial one,
 * none past the end. */
KERNEL static void tile_masks(MASK *m, int q0, int q) {
    for (int v = 0; v < NV; v++) {
        int left = q - q0 - VL * v;
        m[v] = mask_first(left < 0 ? 0 : left > VL ? VL : left);
    }
}

#define LOAD(p, v) (full ? v_loadu((p) + VL * (v)) : v_maskload((p) + VL * (v), m[v]))

/* acc (MR x NV) = 0 */
TILE void zero_tile(VEC acc[MR][NV]) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[r][v] = v_zero();
}

/* acc (MR x NV) += w[0..MR) broadcast, times the NV vectors of row: one step of a tile */
TILE void rank1(VEC acc[MR][NV], const float *row, const float *w, const MASK *m, int full) {
    VEC b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) b[v] = LOAD(row, v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        VEC wr = v_set1(w[r]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[r][v] = v_fma(wr, b[v], acc[r][v]);
    }
}

/* stage rows ob*MR.. (MR x NV vectors from q0) = packed block * im2col rows read in place */
TILE void fwd_tile(float *stage, int ldq, const float *wp, const float *xp, const taas_conv2d_shape *s,
                   const geom *g, int q0, const MASK *m, int full) {
    VEC acc[MR][NV];
    zero_tile(acc);
    for (int c = 0; c < s->c; c++)
        for (int ki = 0; ki < s->kh; ki++) {
            const float *base = xp + c * g->plane + (size_t)ki * g->wp + q0;
            for (int kj = 0; kj < s->kw; kj++, wp += MR) rank1(acc, base + kj, wp, m, full);
        }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            float *out = stage + (size_t)r * ldq + q0 + VL * v;
            if (full) v_storeu(out, acc[r][v]);
            else v_maskstore(out, m[v], acc[r][v]);
        }
}

/* dxp at the MR offsets += packed block (OC x MR)^T * output-gradient rows, NV vectors */
TILE void dx_tile(float *dxp, const ptrdiff_t *off, const float *pt, const float *dyq, int ldq, int oc,
                  int q0, const MASK *m, int full) {
    VEC acc[MR][NV];
    zero_tile(acc);
    for (int o = 0; o < oc; o++, pt += MR) rank1(acc, dyq + (size_t)o * ldq + q0, pt, m, full);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            float *out = dxp + off[r] + q0 + VL * v;
            if (full)
                v_storeu(out, v_add(v_loadu(out), acc[r][v]));
            else
                v_maskstore(out, m[v], v_add(v_maskload(out, m[v]), acc[r][v]));
        }
}

/* (Not inlined: on its own it keeps the rows' offsets in registers; inlined into backward,
 * GCC reloaded them from the stack at every position, a fifth more instructions.)
 * dwt rows k.. (NS x OV vectors of output channels) += im2col rows at the NS offsets, one
 * position at a time broadcast, times that position's output gradient (OV vectors of dyt):
 * the output channels lie along the vectors, so nothing is summed across lanes. */
KERNEL static __attribute__((noinline)) void dw_tile(float *dwt, int ldw, const float *dyt, int ldt, const float *xp,
                                                     const ptrdiff_t *off, int q) {
    VEC acc[NS][OV];
#pragma GCC unroll 8
    for (int t = 0; t < NS; t++)
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) acc[t][v] = v_zero();
    const float *x[NS];
#pragma GCC unroll 8
    for (int t = 0; t < NS; t++) x[t] = xp + off[t];
    for (int p = 0; p < q; p++, dyt += ldt) {
        VEC d[OV];
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) d[v] = v_loadu(dyt + VL * v);
#pragma GCC unroll 8
        for (int t = 0; t < NS; t++) {
            VEC xv = v_set1(x[t][p]);
#pragma GCC unroll 8
            for (int v = 0; v < OV; v++) acc[t][v] = v_fma(xv, d[v], acc[t][v]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NS; t++)
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) {
            float *out = dwt + (size_t)t * ldw + VL * v;
            v_storeu(out, v_add(v_loadu(out), acc[t][v]));
        }
}

KERNEL static void forward(float *y, const float *x, const float *packed, const float *b,
                           const taas_conv2d_shape *s, float *mine, int relu) {
    geom g = geometry(s);
    float *xp = mine, *stage = mine + g.xp + g.ldq + VL;
    pad_image(xp, x, s, &g);
    for (int q0 = 0; q0 < g.q; q0 += NV * VL) {
        MASK m[NV];
        tile_masks(m, q0, g.q);
        int full = q0 + NV * VL <= g.q;
        for (int ob = 0; ob < g.ocp / MR; ob++) {
            float *st = stage + (size_t)ob * MR * g.ldq;
            const float *wp = packed + (size_t)ob * g.k * MR;
            if (full) fwd_tile(st, g.ldq, wp, xp, s, &g, q0, m, 1);
            else fwd_tile(st, g.ldq, wp, xp, s, &g, q0, m, 0);
        }
    }
    /* the first OW columns of each row, with the bias and the ReLU */
    for (int o = 0; o < s->oc; o++) {
        float bo = b ? b[o] : 0.0f;
        for (int i = 0; i < g.oh; i++) {
            const float *src = stage + (size_t)o * g.ldq + (size_t)i * g.wp;
            float *dst = y + ((size_t)o * g.oh + i) * g.ow;
            if (relu) {
#pragma omp simd
                for (int j = 0; j < g.ow; j++) dst[j] = src[j] + bo > 0.0f ? src[j] + bo : 0.0f;
            } else {
#pragma omp simd
                for (int j = 0; j < g.ow; j++) dst[j] = src[j] + bo;
            }
        }
    }
}

/* dyq (OCw x ldq) = dy on the padded-width grid, masked by the ReLU's output, zero in the
 * extra columns and rows; db += its row sums (vector partial sums, then one reduction). */
KERNEL static void stage_grad(float *dyq, float *db, const float *dy, const float *relu_y,
                              const taas_conv2d_shape *s, const geom *g) {
    for (int o = 0; o < g->ocw; o++) {
        float *row = dyq + (size_t)o * g->ldq;
        if (o >= s->oc) {
            memset(row, 0, sizeof(float) * g->ldq);
            continue;
        }
        for (int i = 0; i < g->oh; i++) {
            size_t at = ((size_t)o * g->oh + i) * g->ow;
            float *dst = row + (size_t)i * g->wp;
            if (relu_y) {
#pragma omp simd
                for (int j = 0; j < g->ow; j++) dst[j] = relu_y[at + j] > 0.0f ? dy[at + j] : 0.0f;
            } else {
                memcpy(dst, dy + at, sizeof(float) * g->ow);
            }
            for (int j = g->ow; j < g->wp; j++) dst[j] = 0.0f;
        }
        memset(row + g->q, 0, sizeof(float) * (size_t)(g->ldq - g->q));
        if (!db) continue;
        VEC acc = v_zero();
        for (int v = 0; v < g->qv; v++) acc = v_add(acc, v_loadu(row + VL * v));
        db[o] += v_reduce(acc);
    }
}

/* Offsets in the padded image of im2col rows k0 .. k0+NS-1, walking (c, ki, kj) along;
 * rows past the last read the zeros. */
static void row_offsets(ptrdiff_t *off, int *c, int *ki, int *kj, int k0, const taas_conv2d_shape *s,
                        const geom *g, ptrdiff_t zeros) {
    for (int t = 0; t < NS; t++) {
        if (k0 + t >= g->k) {
            off[t] = zeros;
            continue;
        }
        off[t] = (ptrdiff_t)(*c * g->plane + (size_t)*ki * g->wp + *kj);
        if (++*kj == s->kw) {
            *kj = 0;
            if (++*ki == s->kh) *ki = 0, ++*c;
        }
    }
}

KERNEL static void backward(float *dx, float *dwt, float *db, const float *dy, const float *relu_y,
                            const float *x, const float *packed, const taas_conv2d_shape *s, float *mine) {
    geom g = geometry(s);
    float *xp = mine, *zeros = xp + g.xp, *dyq = zeros + g.ldq + VL, *dxp = dyq + (size_t)g.ocw * g.ldq;
    float *sink = dxp + g.xp, *dyt = sink + g.ldq + VL;
    stage_grad(dyq, db, dy, relu_y, s, &g);
    if (dwt) {
        pad_image(xp, x, s, &g);
        memset(zeros, 0, sizeof(float) * (g.ldq + VL));
        for (int qb = 0; qb < g.qv; qb++)
            for (int ob = 0; ob < g.ocw / VL; ob++)
                transpose_block(dyt + (size_t)qb * VL * g.ocw + ob * VL, g.ocw, dyq + (size_t)ob * VL * g.ldq + qb * VL,
                            g.ldq);
        for (int o0 = 0; o0 < g.ocw; o0 += OV * VL) {
            int c = 0, ki = 0, kj = 0;
            for (int k0 = 0; k0 < g.k; k0 += NS) {
                ptrdiff_t off[NS];
                row_offsets(off, &c, &ki, &kj, k0, s, &g, zeros - xp);
                /* rows past the last k land in dwt's slack (taas_conv_direct_dw_floats) */
                dw_tile(dwt + (size_t)k0 * g.ocw + o0, g.ocw, dyt + o0, g.ocw, xp, off, g.q);
            }
        }
    }
    if (!dx) return;
    memset(dxp, 0, sizeof(float) * g.xp);
    int cb_n = g.cp / MR;
    for (int q0 = 0; q0 < g.q; q0 += NV * VL) {
        MASK m[NV];
        tile_masks(m, q0, g.q);
        int full = q0 + NV * VL <= g.q;
        const float *pt = packed;
        for (int ki = 0; ki < s->kh; ki++)
            for (int kj = 0; kj < s->kw; kj++)
                for (int cb = 0; cb < cb_n; cb++, pt += (size_t)s->oc * MR) {
                    ptrdiff_t off[MR];
                    for (int r = 0; r < MR; r++) {
                        int c = cb * MR + r;
                        off[r] = c < s->c ? (ptrdiff_t)(c * g.plane + (size_t)ki * g.wp + kj) : sink - dxp;
                    }
                    if (full) dx_tile(dxp, off, pt, dyq, g.ldq, s->oc, q0, m, 1);
                    else dx_tile(dxp, off, pt, dyq, g.ldq, s->oc, q0, m, 0);
                }
    }
    /* the image without its padding */
    for (int c = 0; c < s->c; c++)
        for (int yy = 0; yy < s->h; yy++)
            memcpy(dx + ((size_t)c * s->h + yy) * s->w, dxp + c * g.plane + (size_t)(yy + s->ph) * g.wp + s->pw,
                   sizeof(float) * s->w);
}

const taas_conv_kernels SET_TABLE = {
    .name = SET_NAME,
    .thread_floats = thread_floats,
    .shared_floats = shared_floats,
    .dw_floats = dw_floats,
    .add_dw = add_dw,
    .pack_forward = pack_forward,
    .pack_backward = pack_backward,
    .forward = forward,
    .backward = backward,
};
