/* The direct Conv2d kernels (conv_direct.h), written once for every vector width: a kernel
 * set's file (conv_direct_avx512.c, conv_direct_avx2.c) defines its vector type and width,
 * its tile sizes, its target and the few operations below, then includes this file, which
 * defines the set's table (taas_conv_kernels). Included only there.
 *
 * What a set defines:
 *   VL                  floats a vector
 *   MR, NV              the input-gradient tile: MR input channels by NV vectors of positions
 *   NS, OV              the forward and weight-gradient tiles: NS broadcast values (outputs,
 *                       im2col rows) by OV vectors of output channels
 *   VEC, MASK           the vector type, and a mask of a vector's first lanes
 *   TARGET              the functions' target ("avx512f", "avx2,fma")
 *   SET_TABLE, SET_NAME the table's name and the set's ("avx512", "avx2")
 *   v_zero v_set1 v_loadu v_storeu v_add v_max v_where_positive v_fma v_reduce v_maskload
 *   v_maskstore mask_first
 *   transpose_block     (VL x VL floats, row strides ldd and lds)
 * Every buffer size follows from VL and the tiles, so the layouts of two sets differ; a
 * process uses one set throughout (taas_cpu_set). */
#include <string.h>

#include "conv_direct_kernels.h"

/* The forward's outputs a chunk: whole tiles and whole transposed blocks */
enum { CHUNK = NS * VL };

typedef struct geom {
    int hp, wp, oh, ow;  /* padded input, output */
    int q, qv, ldq;      /* outputs per channel on the padded-width grid; in vectors; row stride */
    int qe;              /* the end of the last real output: a tile's reads stop inside the plane */
    size_t plane, xp;    /* a padded plane; a padded image with its zero slack */
    int k, cp;           /* C*KH*KW; C rounded up to MR */
    int ocw;             /* OC rounded up to a tile's OV vectors */
    int p;               /* real outputs a channel */
} geom;

static geom geometry(const taas_conv2d_shape *s) {
    geom g;
    g.hp = s->h + 2 * s->ph, g.wp = s->w + 2 * s->pw;
    g.oh = g.hp - s->kh + 1, g.ow = g.wp - s->kw + 1;
    g.q = g.oh * g.wp, g.qv = (g.q + VL - 1) / VL, g.ldq = g.qv * VL;
    /* q < qe reads at most q + (KH-1)*Wp + KW-1 < Hp*Wp; the extra columns past it are
     * dropped anyway */
    g.qe = (g.oh - 1) * g.wp + g.ow;
    g.plane = (size_t)g.hp * g.wp;
    /* with slack past the last plane (zeroed when padded); no read reaches it: tiles stop at qe */
    g.xp = ((size_t)s->c * g.plane + (size_t)s->kw + 2 * VL + VL - 1) / VL * VL;
    g.k = s->c * s->kh * s->kw;
    g.cp = (s->c + MR - 1) / MR * MR;
    g.ocw = (s->oc + OV * VL - 1) / (OV * VL) * (OV * VL);
    g.p = g.oh * g.ow;
    return g;
}

/* Per thread: padded image | zeros (dummy weight-gradient rows read them) | the output
 * gradient on the grid (OCw x ldq) | padded input gradient | sink (dummy input-gradient
 * rows write there) | the output gradient transposed (ldq x OCw). Without padding the kernels
 * read the image and write the input gradient in place, and the padded ones go unused. */
static size_t thread_floats(const taas_conv2d_shape *s) {
    geom g = geometry(s);
    size_t bwd = 2 * g.xp + 2 * ((size_t)g.ldq + VL) + 2 * (size_t)g.ocw * g.ldq;
    size_t fwd = g.xp + (size_t)CHUNK * g.ocw;
    return fwd > bwd ? fwd : bwd;
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
    size_t fwd = (size_t)g.ocw * g.k, bwd = (size_t)s->kh * s->kw * g.cp * s->oc;
    return fwd > bwd ? fwd : bwd;
}

/* Forward: block ob of OV vectors of output channels, step k = (c, ki, kj): lane l holds
 * w[ob*OV*VL + l][k] (zero past OC). */
static void pack_forward(float *packed, const float *w, const taas_conv2d_shape *s) {
    geom g = geometry(s);
    int bl = OV * VL;
    for (int ob = 0; ob < g.ocw / bl; ob++)
        for (int k = 0; k < g.k; k++)
            for (int l = 0; l < bl; l++) {
                int o = ob * bl + l;
                packed[((size_t)ob * g.k + k) * bl + l] = o < s->oc ? w[(size_t)o * g.k + k] : 0.0f;
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

static int padded(const taas_conv2d_shape *s) { return s->ph > 0 || s->pw > 0; }

/* The image as planes of Hp x Wp: itself without padding, else zero-padded into dst. */
KERNEL static const float *pad_image(float *dst, const float *img, const taas_conv2d_shape *s, const geom *g) {
    if (!padded(s)) return img;
    memset(dst, 0, sizeof(float) * g->xp);
    for (int c = 0; c < s->c; c++)
        for (int y = 0; y < s->h; y++)
            memcpy(dst + c * g->plane + (size_t)(y + s->ph) * g->wp + s->pw,
                   img + ((size_t)c * s->h + y) * s->w, sizeof(float) * s->w);
    return dst;
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

/* the MR planes' rows at q0 += packed block (OC x MR)^T * output-gradient rows, NV vectors;
 * = with first */
TILE void dx_tile(float *const *dst, const float *pt, const float *dyq, int ldq, int oc, int q0, const MASK *m,
                  int full, int first) {
    VEC acc[MR][NV];
    zero_tile(acc);
    for (int o = 0; o < oc; o++, pt += MR) rank1(acc, dyq + (size_t)o * ldq + q0, pt, m, full);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            float *out = dst[r] + q0 + VL * v;
            if (full)
                v_storeu(out, first ? acc[r][v] : v_add(v_loadu(out), acc[r][v]));
            else
                v_maskstore(out, m[v], first ? acc[r][v] : v_add(v_maskload(out, m[v]), acc[r][v]));
        }
}

/* acc (NS x OV) += x[t][off] broadcast, times the OV vectors at w: a step of the tiles whose
 * vectors run along the output channels (forward, weight gradient) */
TILE void bcast_step(VEC acc[NS][OV], const float *const *x, size_t off, const float *w) {
    VEC wv[OV];
#pragma GCC unroll 8
    for (int v = 0; v < OV; v++) wv[v] = v_loadu(w + VL * v);
#pragma GCC unroll 16
    for (int t = 0; t < NS; t++) {
        VEC xv = v_set1(x[t][off]);
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) acc[t][v] = v_fma(xv, wv[v], acc[t][v]);
    }
}

/* acc = 0, and the NS broadcast sources x from `from` */
TILE void bcast_start(VEC acc[NS][OV], const float **x, const float *const *from) {
#pragma GCC unroll 16
    for (int t = 0; t < NS; t++) {
        x[t] = from[t];
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) acc[t][v] = v_zero();
    }
}

/* (Not inlined: on its own it keeps the rows' offsets in registers; inlined into backward,
 * GCC reloaded them from the stack at every position, a fifth more instructions.)
 * dwt rows k.. (NS x OV vectors of output channels) += the NS im2col rows, one position
 * at a time broadcast, times that position's output gradient (OV vectors of dyt): the output
 * channels lie along the vectors, so nothing is summed across lanes. Only the real outputs'
 * positions: the grid's extra columns hold zeros there. */
KERNEL static __attribute__((noinline)) void dw_tile(float *dwt, int ldw, const float *dyt, int ldt,
                                                     const float *const *rows, const geom *g) {
    VEC acc[NS][OV];
    const float *x[NS];
    bcast_start(acc, x, rows);
    int ow = g->ow, skip = g->wp - g->ow;
    for (int i = 0; i < g->oh; i++, dyt += (size_t)skip * ldt) {
        for (int j = 0; j < ow; j++, dyt += ldt) bcast_step(acc, x, (size_t)j, dyt);
#pragma GCC unroll 8
        for (int t = 0; t < NS; t++) x[t] += g->wp;
    }
#pragma GCC unroll 8
    for (int t = 0; t < NS; t++)
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) {
            float *out = dwt + (size_t)t * ldw + VL * v;
            v_storeu(out, v_add(v_loadu(out), acc[t][v]));
        }
}

/* acc += the packed weights' steps times every tap of the NS columns x, channel by channel */
TILE void bcast_taps(VEC acc[NS][OV], const float **x, const float *wp, int c, int kh, int kw, const geom *g) {
    for (int ci = 0; ci < c; ci++) {
#pragma GCC unroll 8
        for (int ki = 0; ki < kh; ki++)
#pragma GCC unroll 8
            for (int kj = 0; kj < kw; kj++, wp += OV * VL) bcast_step(acc, x, (size_t)ki * g->wp + kj, wp);
#pragma GCC unroll 16
        for (int t = 0; t < NS; t++) x[t] += g->plane;
    }
}

/* (Not inlined, as dw_tile.) yt rows of NS outputs (ldt floats apart), OV vectors of output
 * channels = bias + a block of packed weights times the outputs' im2col columns, whose
 * first reads are cols[t] (the output's corner in the padded image); ReLU with relu. The
 * output channels lie along the vectors: an output is only ever broadcast. */
KERNEL static __attribute__((noinline)) void fwd_tile(float *yt, int ldt, const float *wp, const float *const *cols,
                                                      const float *bias, int relu, const taas_conv2d_shape *s,
                                                      const geom *g) {
    VEC acc[NS][OV];
    const float *x[NS];
    bcast_start(acc, x, cols);
    /* 3 x 3 with constant bounds, unrolled: 7-13 % faster than the loops over any size */
    if (s->kh == 3 && s->kw == 3) bcast_taps(acc, x, wp, s->c, 3, 3, g);
    else bcast_taps(acc, x, wp, s->c, s->kh, s->kw, g);
#pragma GCC unroll 8
    for (int v = 0; v < OV; v++) {
        VEC b = v_loadu(bias + VL * v);
#pragma GCC unroll 16
        for (int t = 0; t < NS; t++) {
            VEC out = v_add(acc[t][v], b);
            if (relu) out = v_max(out, v_zero());  /* 0 for a NaN too, as the ReLU's mask reads it */
            v_storeu(yt + (size_t)t * ldt + VL * v, out);
        }
    }
}

/* y (OC, P) at outputs p0 .. p0+n-1 = yt (n x OCw, by position) transposed, VL x VL blocks;
 * the edges through a block on the stack */
KERNEL static void untranspose(float *y, int p, const float *yt, int ldt, int p0, int n, int oc) {
    for (int o0 = 0; o0 < oc; o0 += VL)
        for (int i = 0; i < n; i += VL) {
            const float *src = yt + (size_t)i * ldt + o0;
            float *dst = y + (size_t)o0 * p + p0 + i;
            if (o0 + VL <= oc && i + VL <= n) {
                transpose_block(dst, (size_t)p, src, (size_t)ldt);
                continue;
            }
            float blk[VL * VL];
            transpose_block(blk, VL, src, (size_t)ldt);
            int rows = oc - o0 < VL ? oc - o0 : VL, cols = n - i < VL ? n - i : VL;
            for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * p, blk + r * VL, sizeof(float) * cols);
        }
}

KERNEL static void forward(float *y, const float *x, const float *packed, const float *b,
                           const taas_conv2d_shape *s, float *mine, int relu) {
    geom g = geometry(s);
    const float *xp = pad_image(mine, x, s, &g);
    float *yt = mine + g.xp;  /* a chunk of outputs by position: CHUNK x OCw */
    int bl = OV * VL;
    float bias[OV * VL];
    /* chunks of outputs, each written out while it is in cache and between the tiles' work */
    for (int c0 = 0; c0 < g.p; c0 += CHUNK) {
        int n = g.p - c0 < CHUNK ? g.p - c0 : CHUNK;
        for (int ob = 0; ob < g.ocw / bl; ob++) {
            for (int l = 0; l < bl; l++) bias[l] = b && ob * bl + l < s->oc ? b[ob * bl + l] : 0.0f;
            const float *wb = packed + (size_t)ob * g.k * bl;
            for (int p0 = c0; p0 < c0 + n; p0 += NS) {
                const float *cols[NS];
                for (int t = 0; t < NS; t++) {
                    int p = p0 + t < g.p ? p0 + t : g.p - 1;  /* past the last: its rows are slack */
                    cols[t] = xp + (size_t)(p / g.ow) * g.wp + p % g.ow;
                }
                fwd_tile(yt + (size_t)(p0 - c0) * g.ocw + ob * bl, g.ocw, wb, cols, bias, relu, s, &g);
            }
        }
        untranspose(y, g.p, yt, g.ocw, c0, n, s->oc);
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
        VEC sum = v_zero();
        for (int i = 0; i < g->oh; i++) {
            size_t at = ((size_t)o * g->oh + i) * g->ow;
            float *dst = row + (size_t)i * g->wp;
            /* whole vectors up to Wp: lanes past OW load as zeros, the extra columns' value */
            for (int j = 0; j < g->wp; j += VL) {
                int in = g->ow - j, all = g->wp - j;
                MASK ml = mask_first(in < 0 ? 0 : in), ms = mask_first(all);
                VEC d = v_maskload(dy + at + j, ml);
                if (relu_y) d = v_where_positive(d, v_maskload(relu_y + at + j, ml));
                v_maskstore(dst + j, ms, d);
                sum = v_add(sum, d);
            }
        }
        memset(row + g->q, 0, sizeof(float) * (size_t)(g->ldq - g->q));
        if (db) db[o] += v_reduce(sum);
    }
}

/* im2col rows k0 .. k0+NS-1 in the padded image, walking (c, ki, kj) along; rows past the
 * last read the zeros. */
static void im2col_rows(const float **rows, int *c, int *ki, int *kj, int k0, const taas_conv2d_shape *s,
                        const geom *g, const float *xp, const float *zeros) {
    for (int t = 0; t < NS; t++) {
        if (k0 + t >= g->k) {
            rows[t] = zeros;
            continue;
        }
        rows[t] = xp + *c * g->plane + (size_t)*ki * g->wp + *kj;
        if (++*kj == s->kw) {
            *kj = 0;
            if (++*ki == s->kh) *ki = 0, ++*c;
        }
    }
}

KERNEL static void backward(float *dx, float *dwt, float *db, const float *dy, const float *relu_y,
                            const float *x, const float *packed, const taas_conv2d_shape *s, float *mine) {
    geom g = geometry(s);
    float *zeros = mine + g.xp, *dyq = zeros + g.ldq + VL, *dxp = dyq + (size_t)g.ocw * g.ldq;
    float *sink = dxp + g.xp, *dyt = sink + g.ldq + VL;
    stage_grad(dyq, db, dy, relu_y, s, &g);
    if (dwt) {
        const float *xp = pad_image(mine, x, s, &g);
        memset(zeros, 0, sizeof(float) * (g.ldq + VL));
        for (int qb = 0; qb < g.qv; qb++)
            for (int ob = 0; ob < g.ocw / VL; ob++)
                transpose_block(dyt + (size_t)qb * VL * g.ocw + ob * VL, g.ocw, dyq + (size_t)ob * VL * g.ldq + qb * VL,
                                g.ldq);
        for (int o0 = 0; o0 < g.ocw; o0 += OV * VL) {
            int c = 0, ki = 0, kj = 0;
            for (int k0 = 0; k0 < g.k; k0 += NS) {
                const float *rows[NS];
                im2col_rows(rows, &c, &ki, &kj, k0, s, &g, xp, zeros);
                /* rows past the last k land in dwt's slack (taas_conv_direct_dw_floats) */
                dw_tile(dwt + (size_t)k0 * g.ocw + o0, g.ocw, dyt + o0, g.ocw, rows, &g);
            }
        }
    }
    if (!dx) return;
    if (!padded(s)) dxp = dx;  /* its planes are the grid's: written in place */
    /* The taps from the largest shift S = (KH-1)*Wp + KW-1 down: the tile at q0 writes
     * [q0 + S, q0 + 3 VL + S) first, which no earlier tile reached, so it stores instead of
     * adding, and the tiles' first taps cover each plane from S to its end; [0, S) is zeroed. */
    int cb_n = g.cp / MR, shift = (s->kh - 1) * g.wp + s->kw - 1;
    for (int c = 0; c < s->c; c++) memset(dxp + c * g.plane, 0, sizeof(float) * (size_t)shift);
    for (int q0 = 0; q0 < g.qe; q0 += NV * VL) {
        MASK m[NV];
        tile_masks(m, q0, g.qe);
        int full = q0 + NV * VL <= g.qe;
        for (int ki = s->kh - 1; ki >= 0; ki--)
            for (int kj = s->kw - 1; kj >= 0; kj--)
                for (int cb = 0; cb < cb_n; cb++) {
                    const float *pt = packed + ((size_t)(ki * s->kw + kj) * cb_n + cb) * s->oc * MR;
                    int first = ki == s->kh - 1 && kj == s->kw - 1;
                    float *dst[MR];
                    for (int r = 0; r < MR; r++) {
                        int c = cb * MR + r;
                        dst[r] = c < s->c ? dxp + c * g.plane + (size_t)ki * g.wp + kj : sink;
                    }
                    if (full && first) dx_tile(dst, pt, dyq, g.ldq, s->oc, q0, m, 1, 1);
                    else if (full) dx_tile(dst, pt, dyq, g.ldq, s->oc, q0, m, 1, 0);
                    else if (first) dx_tile(dst, pt, dyq, g.ldq, s->oc, q0, m, 0, 1);
                    else dx_tile(dst, pt, dyq, g.ldq, s->oc, q0, m, 0, 0);
                }
    }
    if (!padded(s)) return;
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
