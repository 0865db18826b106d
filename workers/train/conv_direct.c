/* Stride-1 Conv2d on AVX-512 register tiles (see conv_direct.h). A tile is MR output rows
 * by NV vectors of 16 positions: MR*NV = 24 accumulators in zmm registers, NV vector loads
 * and MR broadcasts per step of the reduction, 24 FMAs. The build's baseline is x86-64, so
 * the kernels carry target("avx512f") and run only after the CPU check. */
#include "conv_direct.h"

#include <string.h>

enum { MR = 4, NV = 6, NS = 6, OV = 4, VL = 16 };

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KERNELS 1
#define AVX512 __attribute__((target("avx512f")))
#define TILE static inline __attribute__((always_inline, target("avx512f")))
#else
#define KERNELS 0
#endif

static int enabled = 1;

void taas_conv_direct_enable(int on) { enabled = on; }

int taas_conv_direct_usable(const taas_conv2d_shape *s) {
#if KERNELS
    /* With under 16 products per output (C*KH*KW: a first layer on grey images) the tiles'
     * set-up outweighs them; im2col + sgemm was faster there (conv1 of docs/design.md §1). */
    return enabled && s->sh == 1 && s->sw == 1 && s->c * s->kh * s->kw >= 16 &&
           __builtin_cpu_supports("avx512f");
#else
    (void)s;
    return 0;
#endif
}

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
size_t taas_conv_direct_thread_floats(const taas_conv2d_shape *s) {
    geom g = geometry(s);
    return 2 * g.xp + 2 * ((size_t)g.ldq + VL) + 2 * (size_t)g.ocw * g.ldq;
}

size_t taas_conv_direct_dw_floats(const taas_conv2d_shape *s) {
    geom g = geometry(s);
    return (size_t)(g.k + NS - 1) / NS * NS * g.ocw;  /* a last tile's rows past C*KH*KW */
}

void taas_conv_direct_add_dw(float *dw, const float *dwt, const taas_conv2d_shape *s) {
    geom g = geometry(s);
    for (int o = 0; o < s->oc; o++)
        for (int k = 0; k < g.k; k++) dw[(size_t)o * g.k + k] += dwt[(size_t)k * g.ocw + o];
}

size_t taas_conv_direct_shared_floats(const taas_conv2d_shape *s) {
    geom g = geometry(s);
    size_t fwd = (size_t)g.ocp * g.k, bwd = (size_t)s->kh * s->kw * g.cp * s->oc;
    return fwd > bwd ? fwd : bwd;
}

/* Forward: block ob, step k, lane r holds w[ob*MR + r][k] (zero past OC). */
void taas_conv_direct_pack_forward(float *packed, const float *w, const taas_conv2d_shape *s) {
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
void taas_conv_direct_pack_backward(float *packed, const float *w, const taas_conv2d_shape *s) {
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

#if KERNELS

/* dst = the image zero-padded into planes of Hp x Wp, then zeros to the end of the slack. */
AVX512 static void pad_image(float *dst, const float *img, const taas_conv2d_shape *s, const geom *g) {
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
static void tile_masks(__mmask16 *m, int q0, int q) {
    for (int v = 0; v < NV; v++) {
        int left = q - q0 - VL * v;
        m[v] = left >= VL ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
    }
}

#define LOAD(p, v) (full ? _mm512_loadu_ps((p) + VL * (v)) : _mm512_maskz_loadu_ps(m[v], (p) + VL * (v)))

/* acc (MR x NV) = 0 */
TILE void zero_tile(__m512 acc[MR][NV]) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
}

/* acc (MR x NV) += w[0..MR) broadcast, times the NV vectors of row: one step of a tile */
TILE void rank1(__m512 acc[MR][NV], const float *row, const float *w, const __mmask16 *m, int full) {
    __m512 b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) b[v] = LOAD(row, v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        __m512 wr = _mm512_set1_ps(w[r]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(wr, b[v], acc[r][v]);
    }
}

/* stage rows ob*MR.. (MR x NV vectors from q0) = packed block * im2col rows read in place */
TILE void fwd_tile(float *stage, int ldq, const float *wp, const float *xp, const taas_conv2d_shape *s,
                   const geom *g, int q0, const __mmask16 *m, int full) {
    __m512 acc[MR][NV];
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
            if (full) _mm512_storeu_ps(out, acc[r][v]);
            else _mm512_mask_storeu_ps(out, m[v], acc[r][v]);
        }
}

/* dxp at the MR offsets += packed block (OC x MR)^T * output-gradient rows, NV vectors */
TILE void dx_tile(float *dxp, const ptrdiff_t *off, const float *pt, const float *dyq, int ldq, int oc,
                  int q0, const __mmask16 *m, int full) {
    __m512 acc[MR][NV];
    zero_tile(acc);
    for (int o = 0; o < oc; o++, pt += MR) rank1(acc, dyq + (size_t)o * ldq + q0, pt, m, full);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            float *out = dxp + off[r] + q0 + VL * v;
            if (full)
                _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), acc[r][v]));
            else
                _mm512_mask_storeu_ps(out, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], out), acc[r][v]));
        }
}

/* dst (16 x 16, row stride ldd) = src (16 x 16, row stride lds) transposed */
TILE void transpose16(float *dst, size_t ldd, const float *src, size_t lds) {
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
    /* pairs of rows interleaved, then pairs of pairs: r[4i+j] holds columns j, j+4, j+8,
     * j+12 of rows 4i..4i+3, one 128-bit lane each */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
        __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    /* then the 128-bit lanes gathered across groups of rows */
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
        }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
        r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xDD);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ldd, r[i]);
}

/* dwt rows k.. (NS x OV vectors of output channels) += im2col rows at the NS offsets, one
 * position at a time broadcast, times that position's output gradient (OV vectors of dyt):
 * the output channels lie along the vectors, so nothing is summed across lanes. */
TILE void dw_tile(float *dwt, int ldw, const float *dyt, int ldt, const float *xp, const ptrdiff_t *off, int q) {
    __m512 acc[NS][OV];
#pragma GCC unroll 8
    for (int t = 0; t < NS; t++)
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) acc[t][v] = _mm512_setzero_ps();
    const float *x[NS];
#pragma GCC unroll 8
    for (int t = 0; t < NS; t++) x[t] = xp + off[t];
    for (int p = 0; p < q; p++, dyt += ldt) {
        __m512 d[OV];
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) d[v] = _mm512_loadu_ps(dyt + VL * v);
#pragma GCC unroll 8
        for (int t = 0; t < NS; t++) {
            __m512 xv = _mm512_set1_ps(x[t][p]);
#pragma GCC unroll 8
            for (int v = 0; v < OV; v++) acc[t][v] = _mm512_fmadd_ps(xv, d[v], acc[t][v]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NS; t++)
#pragma GCC unroll 8
        for (int v = 0; v < OV; v++) {
            float *out = dwt + (size_t)t * ldw + VL * v;
            _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), acc[t][v]));
        }
}

AVX512 void taas_conv_direct_forward(float *y, const float *x, const float *packed, const float *b,
                                     const taas_conv2d_shape *s, float *mine, int relu) {
    geom g = geometry(s);
    float *xp = mine, *stage = mine + g.xp + g.ldq + VL;
    pad_image(xp, x, s, &g);
    for (int q0 = 0; q0 < g.q; q0 += NV * VL) {
        __mmask16 m[NV];
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
AVX512 static void stage_grad(float *dyq, float *db, const float *dy, const float *relu_y,
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
        __m512 acc = _mm512_setzero_ps();
        for (int v = 0; v < g->qv; v++) acc = _mm512_add_ps(acc, _mm512_loadu_ps(row + VL * v));
        db[o] += _mm512_reduce_add_ps(acc);
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

AVX512 void taas_conv_direct_backward(float *dx, float *dwt, float *db, const float *dy, const float *relu_y,
                                      const float *x, const float *packed, const taas_conv2d_shape *s,
                                      float *mine) {
    geom g = geometry(s);
    float *xp = mine, *zeros = xp + g.xp, *dyq = zeros + g.ldq + VL, *dxp = dyq + (size_t)g.ocw * g.ldq;
    float *sink = dxp + g.xp, *dyt = sink + g.ldq + VL;
    stage_grad(dyq, db, dy, relu_y, s, &g);
    if (dwt) {
        pad_image(xp, x, s, &g);
        memset(zeros, 0, sizeof(float) * (g.ldq + VL));
        for (int qb = 0; qb < g.qv; qb++)
            for (int ob = 0; ob < g.ocw / VL; ob++)
                transpose16(dyt + (size_t)qb * VL * g.ocw + ob * VL, g.ocw, dyq + (size_t)ob * VL * g.ldq + qb * VL,
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
        __mmask16 m[NV];
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

#else /* no kernels: taas_conv_direct_usable() is 0 and these are never called */

void taas_conv_direct_forward(float *y, const float *x, const float *packed, const float *b,
                              const taas_conv2d_shape *s, float *mine, int relu) {
    (void)y, (void)x, (void)packed, (void)b, (void)s, (void)mine, (void)relu;
}

void taas_conv_direct_backward(float *dx, float *dwt, float *db, const float *dy, const float *relu_y,
                               const float *x, const float *packed, const taas_conv2d_shape *s,
                               float *mine) {
    (void)dx, (void)dwt, (void)db, (void)dy, (void)relu_y, (void)x, (void)packed, (void)s, (void)mine;
}

#endif
