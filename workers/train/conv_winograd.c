/* Winograd's F(2x2, 3x3) and F(4x4, 3x3) for Conv2d (conv_winograd.h). The transforms,
 * with d a block of input, g a 3x3 kernel and m a block of products:
 * F(2x2), 4x4 blocks:
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]      V = B^T d B
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]      U = G g G^T
 *   A^T = [1 1 1 0; 0 1 -1 -1]                           Y = A^T m A
 * F(4x4), 6x6 blocks, at the points 0, 1, -1, 2, -2 and infinity:
 *   B^T = [4  0 -5  0 1 0;  0 -4 -4  1 1 0;  0 4 -4 -1 1 0;
 *          0 -2 -1  2 1 0;  0  2 -1 -2 1 0;  0 4  0 -5 0 1]
 *   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * A product's buffers, per thread: V (XI, Cin, T) and M (XI, Cout, T) for its T tiles (a
 * sample's tiles in row order, the samples one after another; XI = 16 or 36 tile
 * positions), and a few rows. F(2x2)'s loops run along a row of tiles; F(4x4)'s over a
 * block of channels' tiles at once, so that they vectorise on small planes too.
 * Each tile size has its own transforms behind one small table (wino_tiles); the products,
 * the shapes and the sums are shared.
 *
 * The weight gradient is the forward's adjoint: with Z = sum_c U (.) V and Y = A^T Z A, a
 * tile's dZ = A dY A^T, dU = sum over tiles of dZ (.) V, and dg = G^T dU G. Exact for every
 * g, so it is the gradient of the convolution itself, not of an approximation. */
#include "conv_winograd.h"

#include <omp.h>
#include <string.h>

#include "blas.h"
#include "simd.h"

/* One direction's shapes: in (N, cin, h, w) -> out (N, cout, oh, ow), padding ph, pw, tiles
 * of m x m outputs from (m + 2) x (m + 2) inputs */
typedef struct wshape {
    int cin, h, w, cout, oh, ow, ph, pw;
    int m, xi;      /* a tile's outputs a side (2 or 4), its products ((m + 2)^2) */
    int ty, tx, t;  /* tiles down, across, a sample */
    int wp;         /* a padded row's floats: m * tx + 2 (>= pw + w, as ow = w + 2 pw - 2) */
} wshape;

/* F(4x4) on output planes of 24 and more a side, or whose sides are multiples of 4 from 8 on;
 * F(2x2) elsewhere (conv_winograd.h). Measured, one layer forward and backward, GFLOP/s
 * counted as the direct convolution's: F(4x4) 335 against F(2x2)'s 233 for 64 channels at
 * 56x56, 450 against 313 for 128 at 28x28, 389 against 298 for 128 at 16x16, 258 against
 * 247 for 256 at 8x8; but 285 against 318 for 256 at 14x14 (14 = 16 - 2: a quarter of its
 * tiles' outputs fall outside) and 157 against 205 for 512 at 4x4 (36 planes of 512 x 512
 * transformed weights for one tile a sample). */
int taas_conv_winograd_tile_side(const taas_conv2d_shape *s) {
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s);
    int big = oh >= 24 && ow >= 24, whole = oh >= 8 && ow >= 8 && oh % 4 == 0 && ow % 4 == 0;
    return big || whole ? 4 : 2;
}

static wshape shape_of(int cin, int h, int w, int cout, int oh, int ow, int ph, int pw, int m) {
    wshape g = {cin, h, w, cout, oh, ow, ph, pw, m, (m + 2) * (m + 2), (oh + m - 1) / m, (ow + m - 1) / m, 0, 0};
    g.t = g.ty * g.tx;
    g.wp = m * g.tx + 2;
    return g;
}

static wshape forward_shape(const taas_conv2d_shape *s) {
    return shape_of(s->c, s->h, s->w, s->oc, taas_conv2d_out_h(s), taas_conv2d_out_w(s), s->ph, s->pw,
                    taas_conv_winograd_tile_side(s));
}

/* The input gradient is the forward of dy with padding 2 - p: out H x W, the forward's tiles */
static wshape backward_shape(const taas_conv2d_shape *s) {
    return shape_of(s->oc, taas_conv2d_out_h(s), taas_conv2d_out_w(s), s->c, s->h, s->w, 2 - s->ph, 2 - s->pw,
                    taas_conv_winograd_tile_side(s));
}

int taas_conv_winograd_usable(const taas_conv2d_shape *s) {
    int least = s->c >= 512 && s->oc >= 512 ? 4 : 8;  /* the smallest output plane, measured */
    return taas_conv2d_groups(s) == 1 && s->kh == 3 && s->kw == 3 && s->sh == 1 && s->sw == 1 && s->ph <= 2 &&
           s->pw <= 2 && s->c >= 64 && s->oc >= 64 && taas_conv2d_out_h(s) >= least && taas_conv2d_out_w(s) >= least;
}

size_t taas_conv_winograd_weight_floats(const taas_conv2d_shape *s) {
    return (size_t)forward_shape(s).xi * s->oc * s->c;
}

int taas_conv_winograd_samples(const taas_conv2d_shape *s) {
    wshape g = forward_shape(s);
    int want = (1 << 19) / (g.xi * (s->c + s->oc)), least = 1024 / g.xi, k;
    if (want < least) want = least;
    k = want / g.t;
    return k < 1 ? 1 : k > s->n ? (s->n > 1 ? s->n : 1) : k;
}

/* F(4x4)'s transforms, and the grouped products' (a channel's planes of several samples),
 * run over a block of planes at once, about FLAT tiles, as flat vector loops (a plane's own
 * tiles are too few: 4 at 8x8, 1 at 4x4) */
enum { FLAT = 512 };

static int flat_planes(const wshape *g) { return g->t >= FLAT ? 1 : FLAT / g->t; }

/* A thread's rows. F(2x2): the input's 4 padded rows and their column transform's 4, the
 * output's or the gradient's 2. F(4x4): 108 planes of a block's tiles (the input's 36
 * gathered values, 36 after the row transform, 36 after the column transform; fewer for
 * the output and the gradient), a padded row and its 4 phases. */
static size_t rows_floats(const wshape *g) {
    if (g->m == 2) return (size_t)8 * g->wp;
    size_t zl = (size_t)flat_planes(g) * g->t;
    return 108 * zl + g->wp + 2 + (size_t)4 * (g->tx + 1);
}

static size_t floats_for(const wshape *g, int samples) {
    return (size_t)g->xi * samples * g->t * (g->cin + g->cout) + rows_floats(g);
}

size_t taas_conv_winograd_thread_floats(const taas_conv2d_shape *s, int samples) {
    wshape f = forward_shape(s), b = backward_shape(s);
    size_t a = floats_for(&f, samples), c = floats_for(&b, samples);
    return a > c ? a : c;
}

/* The channels a weight transform takes at once: its rows live on the stack */
enum { WBLOCK = 32 };

/* Row y of a plane (width w), masked by mask's row where mask is not NULL, into r (wp
 * floats) at offset pw, zeros elsewhere; all zeros outside the plane. */
TAAS_VEC static void padded_row(float *r, const float *plane, const float *mask, const wshape *g, int y) {
    memset(r, 0, sizeof(float) * g->wp);
    if (y < 0 || y >= g->h) return;
    const float *in = plane + (size_t)y * g->w;
    float *to = r + g->pw;
    if (mask) {
        const float *mk = mask + (size_t)y * g->w;
#pragma omp simd
        for (int q = 0; q < g->w; q++) to[q] = mk[q] > 0.0f ? in[q] : 0.0f;
    } else {
        memcpy(to, in, sizeof(float) * g->w);
    }
}

/* d[xi][c] = du's sum over the slices, in their order, for channels [c0, c0 + nb) */
TAAS_VEC static void slice_sums(float (*d)[WBLOCK], int xis, const float *du, size_t plane, size_t stride,
                                int slices, int c0, int nb) {
    for (int xi = 0; xi < xis; xi++) {
        const float *at = du + (size_t)xi * plane + c0;
#pragma omp simd
        for (int c = 0; c < nb; c++) d[xi][c] = at[c];
        for (int t = 1; t < slices; t++) {
#pragma omp simd
            for (int c = 0; c < nb; c++) d[xi][c] += at[t * stride + c];
        }
    }
}

/* g (9 rows of WBLOCK) = the kernels w + b * stride, b in [b0, b0 + nb), turned 180 degrees
 * with `turned` */
static void read_kernels(float (*g)[WBLOCK], const float *w, size_t stride, int b0, int nb, int turned) {
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < 9; t++) g[t][b] = w[(size_t)(b0 + b) * stride + (turned ? 8 - t : t)];
}

/* dw's kernels [c0, c0 + nb) += k (9 rows of WBLOCK) */
static void add_kernels(float *dw, float (*k)[WBLOCK], int c0, int nb) {
    for (int c = 0; c < nb; c++)
        for (int t = 0; t < 9; t++) dw[(size_t)(c0 + c) * 9 + t] += k[t][c];
}

/* ---- F(2x2, 3x3) ---- */

/* One row of u: u[xi][b] = (G g G^T)[xi] for the kernels k_b = w + b * stride (b < count),
 * turned 180 degrees with `turned`; the kernels are first read into 9 rows of WBLOCK so
 * that every step after is a vector loop along b */
TAAS_VEC static void weights_row2(float *u, size_t plane, const float *w, size_t stride, int count, int turned) {
    for (int b0 = 0; b0 < count; b0 += WBLOCK) {
        int nb = count - b0 < WBLOCK ? count - b0 : WBLOCK;
        float g[9][WBLOCK], gg[4][3][WBLOCK];
        read_kernels(g, w, stride, b0, nb, turned);
        for (int j = 0; j < 3; j++) {
#pragma omp simd
            for (int b = 0; b < nb; b++) {
                float a = g[j][b], c = g[3 + j][b], d = g[6 + j][b];
                gg[0][j][b] = a;
                gg[1][j][b] = 0.5f * (a + c + d);
                gg[2][j][b] = 0.5f * (a - c + d);
                gg[3][j][b] = d;
            }
        }
        for (int i = 0; i < 4; i++) {
            float *u0 = u + (size_t)(4 * i) * plane + b0, *u1 = u0 + plane, *u2 = u1 + plane, *u3 = u2 + plane;
#pragma omp simd
            for (int b = 0; b < nb; b++) {
                float a = gg[i][0][b], c = gg[i][1][b], d = gg[i][2][b];
                u0[b] = a;
                u1[b] = 0.5f * (a + c + d);
                u2[b] = 0.5f * (a - c + d);
                u3[b] = d;
            }
        }
    }
}

/* V's columns for one channel's plane of one sample: base is the sample's first tile. */
TAAS_VEC static void input_tiles2(float *v, size_t vstride, size_t base, const float *plane, const float *mask,
                                 const wshape *g, float *rows) {
    float *r[4] = {rows, rows + g->wp, rows + 2 * g->wp, rows + 3 * g->wp};
    float *e[4] = {rows + 4 * g->wp, rows + 5 * g->wp, rows + 6 * g->wp, rows + 7 * g->wp};
    for (int ti = 0; ti < g->ty; ti++) {
        for (int k = 0; k < 4; k++) padded_row(r[k], plane, mask, g, 2 * ti - g->ph + k);
#pragma omp simd
        for (int q = 0; q < g->wp; q++) {
            e[0][q] = r[0][q] - r[2][q];
            e[1][q] = r[1][q] + r[2][q];
            e[2][q] = r[2][q] - r[1][q];
            e[3][q] = r[1][q] - r[3][q];
        }
        size_t at = base + (size_t)ti * g->tx;
        for (int i = 0; i < 4; i++) {
            const float *x = e[i];
            float *v0 = v + (size_t)(4 * i) * vstride + at, *v1 = v0 + vstride, *v2 = v1 + vstride, *v3 = v2 + vstride;
#pragma omp simd
            for (int tj = 0; tj < g->tx; tj++) {
                float a = x[2 * tj], b = x[2 * tj + 1], c = x[2 * tj + 2], d = x[2 * tj + 3];
                v0[tj] = a - c;
                v1[tj] = b + c;
                v2[tj] = c - b;
                v3[tj] = b - d;
            }
        }
    }
}

/* One output channel's plane of one sample from M's columns, + bias, then ReLU if asked. */
TAAS_VEC static void output_tiles2(float *plane, const float *mm, size_t mstride, size_t base, float bias, int relu,
                                  const wshape *g, float *rows) {
    float *o0 = rows, *o1 = rows + g->wp;
    for (int ti = 0; ti < g->ty; ti++) {
        const float *m[16];
        for (int xi = 0; xi < 16; xi++) m[xi] = mm + (size_t)xi * mstride + base + (size_t)ti * g->tx;
#pragma omp simd
        for (int tj = 0; tj < g->tx; tj++) {
            float t0[4], t1[4];
            for (int k = 0; k < 4; k++) {
                t0[k] = m[k][tj] + m[4 + k][tj] + m[8 + k][tj];
                t1[k] = m[4 + k][tj] - m[8 + k][tj] - m[12 + k][tj];
            }
            o0[2 * tj] = t0[0] + t0[1] + t0[2];
            o0[2 * tj + 1] = t0[1] - t0[2] - t0[3];
            o1[2 * tj] = t1[0] + t1[1] + t1[2];
            o1[2 * tj + 1] = t1[1] - t1[2] - t1[3];
        }
        for (int a = 0; a < 2 && 2 * ti + a < g->oh; a++) {
            float *out = plane + (size_t)(2 * ti + a) * g->ow;
            const float *src = a ? o1 : o0;
            if (relu) {
#pragma omp simd
                for (int q = 0; q < g->ow; q++) out[q] = src[q] + bias > 0.0f ? src[q] + bias : 0.0f;
            } else {
#pragma omp simd
                for (int q = 0; q < g->ow; q++) out[q] = src[q] + bias;
            }
        }
    }
}

/* P's columns (16, OC, T) for one output channel's gradient plane of one sample, masked
 * where mask (the fused ReLU's output) is not positive: A dY A^T of each 2x2 block, zeros
 * past the plane's edge. Returns the plane's sum, the bias's gradient. */
TAAS_VEC static float grad_tiles2(float *p, size_t pstride, size_t base, const float *plane, const float *mask,
                                 const wshape *g, float *rows) {
    float *r0 = rows, *r1 = rows + g->wp, sum = 0.0f;
    for (int ti = 0; ti < g->ty; ti++) {
        float part = 0.0f;
        for (int a = 0; a < 2; a++) {
            float *r = a ? r1 : r0;
            int y = 2 * ti + a;
            memset(r, 0, sizeof(float) * g->wp);
            if (y >= g->oh) continue;
            const float *in = plane + (size_t)y * g->ow, *mk = mask ? mask + (size_t)y * g->ow : NULL;
#pragma omp simd reduction(+ : part)
            for (int q = 0; q < g->ow; q++) {
                r[q] = mk && !(mk[q] > 0.0f) ? 0.0f : in[q];
                part += r[q];
            }
        }
        sum += part;
        float *d[16];
        for (int xi = 0; xi < 16; xi++) d[xi] = p + (size_t)xi * pstride + base + (size_t)ti * g->tx;
#pragma omp simd
        for (int tj = 0; tj < g->tx; tj++) {
            float a = r0[2 * tj], b = r0[2 * tj + 1], c = r1[2 * tj], e = r1[2 * tj + 1];
            float row[4][2] = {{a, b}, {a + c, b + e}, {a - c, b - e}, {-c, -e}};
            for (int i = 0; i < 4; i++) {
                d[4 * i][tj] = row[i][0];
                d[4 * i + 1][tj] = row[i][0] + row[i][1];
                d[4 * i + 2][tj] = row[i][0] - row[i][1];
                d[4 * i + 3][tj] = -row[i][1];
            }
        }
    }
    return sum;
}

/* One output channel's row of dw += G^T dU G, dU the slices' sums in their order */
TAAS_VEC static void finish_row2(float *dw, const float *du, size_t plane, size_t stride, int slices, int cin) {
    for (int c0 = 0; c0 < cin; c0 += WBLOCK) {
        int nb = cin - c0 < WBLOCK ? cin - c0 : WBLOCK;
        float d[16][WBLOCK], h[3][4][WBLOCK], k[9][WBLOCK];
        slice_sums(d, 16, du, plane, stride, slices, c0, nb);
        for (int j = 0; j < 4; j++) {
#pragma omp simd
            for (int c = 0; c < nb; c++) {
                float a = d[j][c], b = d[4 + j][c], e = d[8 + j][c], f = d[12 + j][c];
                h[0][j][c] = a + 0.5f * (b + e);
                h[1][j][c] = 0.5f * (b - e);
                h[2][j][c] = 0.5f * (b + e) + f;
            }
        }
        for (int a = 0; a < 3; a++) {
#pragma omp simd
            for (int c = 0; c < nb; c++) {
                float h0 = h[a][0][c], h1 = h[a][1][c], h2 = h[a][2][c], h3 = h[a][3][c];
                k[3 * a][c] = h0 + 0.5f * (h1 + h2);
                k[3 * a + 1][c] = 0.5f * (h1 - h2);
                k[3 * a + 2][c] = 0.5f * (h1 + h2) + h3;
            }
        }
        add_kernels(dw, k, c0, nb);
    }
}

/* (o0, o1, o2, o3) = B^T (d0, d1, d2, d3), element by element: one pass of F(2x2)'s B^T d B */
TAAS_VEC static void bt_pass2(float *o0, float *o1, float *o2, float *o3, const float *d0, const float *d1,
                              const float *d2, const float *d3, int len) {
#pragma omp simd
    for (int z = 0; z < len; z++) {
        o0[z] = d0[z] - d2[z];
        o1[z] = d1[z] + d2[z];
        o2[z] = d2[z] - d1[z];
        o3[z] = d1[z] - d3[z];
    }
}

/* F(2x2): v[xi * vstride + z] = (B^T d B)[xi], z < len, through e: down k, then along l */
static void bt_rows2(float *v, size_t vstride, const float *d, float *e, size_t zl, int len) {
    for (int l = 0; l < 4; l++)
        bt_pass2(e + l * zl, e + (4 + l) * zl, e + (8 + l) * zl, e + (12 + l) * zl, d + l * zl, d + (4 + l) * zl,
                 d + (8 + l) * zl, d + (12 + l) * zl, len);
    for (int i = 0; i < 4; i++) {
        const float *e0 = e + (size_t)(4 * i) * zl;
        float *v0 = v + (size_t)(4 * i) * vstride;
        bt_pass2(v0, v0 + vstride, v0 + 2 * vstride, v0 + 3 * vstride, e0, e0 + zl, e0 + 2 * zl, e0 + 3 * zl, len);
    }
}

/* F(2x2): y[2a + b][z] = (A^T m A)[a][b] from m's 16 rows mm[xi * mstride + z], z < len */
TAAS_VEC static void at_rows2(float *y, size_t zl, const float *mm, size_t mstride, float *t, int len) {
    (void)t;
    const float *m[16];
    for (int xi = 0; xi < 16; xi++) m[xi] = mm + (size_t)xi * mstride;
    float *y0 = y, *y1 = y + zl, *y2 = y + 2 * zl, *y3 = y + 3 * zl;
#pragma omp simd
    for (int z = 0; z < len; z++) {
        float t0[4], t1[4];
        for (int k = 0; k < 4; k++) {
            t0[k] = m[k][z] + m[4 + k][z] + m[8 + k][z];
            t1[k] = m[4 + k][z] - m[8 + k][z] - m[12 + k][z];
        }
        y0[z] = t0[0] + t0[1] + t0[2];
        y1[z] = t0[1] - t0[2] - t0[3];
        y2[z] = t1[0] + t1[1] + t1[2];
        y3[z] = t1[1] - t1[2] - t1[3];
    }
}

/* F(2x2): p[xi * pstride + z] = (A dY A^T)[xi] from dY's 4 rows y[2a + b][z] */
TAAS_VEC static void a_rows2(float *p, size_t pstride, const float *y, size_t zl, float *t, int len) {
    (void)t;
    const float *y0 = y, *y1 = y + zl, *y2 = y + 2 * zl, *y3 = y + 3 * zl;
    float *d[16];
    for (int xi = 0; xi < 16; xi++) d[xi] = p + (size_t)xi * pstride;
#pragma omp simd
    for (int z = 0; z < len; z++) {
        float a = y0[z], b = y1[z], c = y2[z], e = y3[z];
        float row[4][2] = {{a, b}, {a + c, b + e}, {a - c, b - e}, {-c, -e}};
        for (int i = 0; i < 4; i++) {
            d[4 * i][z] = row[i][0];
            d[4 * i + 1][z] = row[i][0] + row[i][1];
            d[4 * i + 2][z] = row[i][0] - row[i][1];
            d[4 * i + 3][z] = -row[i][1];
        }
    }
}

/* F(2x2)'s transforms a channel at a time, as the table's sample-wide calls */
static void input_sample2(float *v, size_t vstride, size_t colstride, size_t base, const float *in,
                          const float *mask, const wshape *g, float *rows) {
    size_t inp = (size_t)g->h * g->w;
    for (int c = 0; c < g->cin; c++)
        input_tiles2(v + (size_t)c * colstride, vstride, base, in + (size_t)c * inp, mask ? mask + (size_t)c * inp : NULL,
                     g, rows);
}

static void output_sample2(float *out, const float *mm, size_t mstride, size_t colstride, size_t base,
                           const float *b, int relu, const wshape *g, float *rows) {
    size_t outp = (size_t)g->oh * g->ow;
    for (int o = 0; o < g->cout; o++)
        output_tiles2(out + (size_t)o * outp, mm + (size_t)o * colstride, mstride, base, b ? b[o] : 0.0f, relu, g, rows);
}

static void grad_sample2(float *p, size_t pstride, size_t colstride, size_t base, const float *dy, const float *mask,
                         float *db, const wshape *g, float *rows) {
    size_t outp = (size_t)g->oh * g->ow;
    for (int o = 0; o < g->cout; o++) {
        float sum = grad_tiles2(p + (size_t)o * colstride, pstride, base, dy + (size_t)o * outp,
                                mask ? mask + (size_t)o * outp : NULL, g, rows);
        if (db) db[o] += sum;
    }
}

/* ---- F(4x4, 3x3) ---- */

enum { M = 4, A = 6 };  /* F(4x4): outputs a tile's side, inputs a tile's side */

/* (G g) for the 3 values g0, g1, g2 of a column: 6 values */
#define G_ROWS(o, g0, g1, g2)                                   \
    do {                                                        \
        o[0] = 0.25f * (g0);                                    \
        o[1] = (-1.0f / 6.0f) * ((g0) + (g1) + (g2));           \
        o[2] = (-1.0f / 6.0f) * ((g0) - (g1) + (g2));           \
        o[3] = (1.0f / 24.0f) * ((g0) + 2.0f * (g1) + 4.0f * (g2)); \
        o[4] = (1.0f / 24.0f) * ((g0) - 2.0f * (g1) + 4.0f * (g2)); \
        o[5] = (g2);                                            \
    } while (0)

/* weights_row2 with F(4x4)'s G. One routine with the side as a parameter was measured
 * slower (its inner loops over the side no longer unroll inside the vector loop). */
TAAS_VEC static void weights_row4(float *u, size_t plane, const float *w, size_t stride, int count, int turned) {
    for (int b0 = 0; b0 < count; b0 += WBLOCK) {
        int nb = count - b0 < WBLOCK ? count - b0 : WBLOCK;
        float g[9][WBLOCK], gg[6][3][WBLOCK];
        read_kernels(g, w, stride, b0, nb, turned);
        for (int j = 0; j < 3; j++) {
#pragma omp simd
            for (int b = 0; b < nb; b++) {
                float o[6];
                G_ROWS(o, g[j][b], g[3 + j][b], g[6 + j][b]);
                for (int i = 0; i < 6; i++) gg[i][j][b] = o[i];
            }
        }
        for (int i = 0; i < 6; i++) {
            float *ui = u + (size_t)(6 * i) * plane + b0;
#pragma omp simd
            for (int b = 0; b < nb; b++) {
                float o[6];
                G_ROWS(o, gg[i][0][b], gg[i][1][b], gg[i][2][b]);
                for (int j = 0; j < 6; j++) ui[(size_t)j * plane + b] = o[j];
            }
        }
    }
}

/* B^T applied to d0..d5 (scalars), into o0..o5 */
#define BT6(d0, d1, d2, d3, d4, d5, o0, o1, o2, o3, o4, o5) \
    do {                                                   \
        o0 = 4.0f * (d0) - 5.0f * (d2) + (d4);             \
        o1 = -4.0f * ((d1) + (d2)) + (d3) + (d4);          \
        o2 = 4.0f * ((d1) - (d2)) - (d3) + (d4);           \
        o3 = 2.0f * ((d3) - (d1)) - (d2) + (d4);           \
        o4 = 2.0f * ((d1) - (d3)) - (d2) + (d4);           \
        o5 = 4.0f * (d1) - 5.0f * (d3) + (d5);             \
    } while (0)

/* A padded row split by phase: ph[l * n + t] = row[4 t + l], n = tx + 1 entries a phase (a
 * tile's 6 columns are then phases 0-3 at t and 0-1 at t + 1: unit strides for the vector
 * loops over tiles) */
TAAS_VEC static void split_row(float *ph, float *row, const wshape *g) {
    int n = g->tx + 1;
    row[g->wp] = row[g->wp + 1] = 0.0f;
    for (int t = 0; t < n; t++) {
        ph[t] = row[M * t];
        ph[n + t] = row[M * t + 1];
        ph[2 * n + t] = row[M * t + 2];
        ph[3 * n + t] = row[M * t + 3];
    }
}

/* A^T applied to m0..m5 (scalars), into o0..o3 */
#define AT6(m0, m1, m2, m3, m4, m5, o0, o1, o2, o3)                          \
    do {                                                                    \
        float s12_ = (m1) + (m2), d12_ = (m1) - (m2), s34_ = (m3) + (m4),   \
              d34_ = (m3) - (m4);                                           \
        o0 = (m0) + s12_ + s34_;                                            \
        o1 = d12_ + 2.0f * d34_;                                            \
        o2 = s12_ + 4.0f * s34_;                                            \
        o3 = d12_ + 8.0f * d34_ + (m5);                                     \
    } while (0)

/* A (A^T's transpose) applied to y0..y3 (scalars), into o0..o5 */
#define A4(y0, y1, y2, y3, o0, o1, o2, o3, o4, o5)                        \
    do {                                                                 \
        float s02_ = (y0) + (y2), s13_ = (y1) + (y3);                    \
        float e02_ = (y0) + 4.0f * (y2), e13_ = 2.0f * (y1) + 8.0f * (y3); \
        o0 = (y0);                                                       \
        o1 = s02_ + s13_;                                                \
        o2 = s02_ - s13_;                                                \
        o3 = e02_ + e13_;                                                \
        o4 = e02_ - e13_;                                                \
        o5 = (y3);                                                       \
    } while (0)

/* v[xi * vstride + z] = (B^T d B)[xi] for z < len, d's 36 rows zl apart, through e */
TAAS_VEC static void bt_rows4(float *v, size_t vstride, const float *d, float *e, size_t zl, int len) {
    for (int l = 0; l < A; l++) {
        const float *d0 = d + (size_t)l * zl;
        float *e0 = e + (size_t)l * zl;
#pragma omp simd
        for (int z = 0; z < len; z++)
            BT6(d0[z], d0[6 * zl + z], d0[12 * zl + z], d0[18 * zl + z], d0[24 * zl + z], d0[30 * zl + z], e0[z],
                e0[6 * zl + z], e0[12 * zl + z], e0[18 * zl + z], e0[24 * zl + z], e0[30 * zl + z]);
    }
    for (int i = 0; i < A; i++) {
        const float *e0 = e + (size_t)(A * i) * zl;
        float *w0 = v + (size_t)(A * i) * vstride;
#pragma omp simd
        for (int z = 0; z < len; z++)
            BT6(e0[z], e0[zl + z], e0[2 * zl + z], e0[3 * zl + z], e0[4 * zl + z], e0[5 * zl + z], w0[z],
                w0[vstride + z], w0[2 * vstride + z], w0[3 * vstride + z], w0[4 * vstride + z], w0[5 * vstride + z]);
    }
}

/* y[4a + b][z] = (A^T m A)[a][b] from m's 36 rows mm[xi * mstride + z], z < len, through t
 * (24 rows) */
TAAS_VEC static void at_rows4(float *y, size_t zl, const float *mm, size_t mstride, float *t, int len) {
    for (int j = 0; j < A; j++) {
        const float *w0 = mm + (size_t)j * mstride;
        float *q = t + (size_t)j * zl;
#pragma omp simd
        for (int z = 0; z < len; z++)
            AT6(w0[z], w0[6 * mstride + z], w0[12 * mstride + z], w0[18 * mstride + z], w0[24 * mstride + z],
                w0[30 * mstride + z], q[z], q[6 * zl + z], q[12 * zl + z], q[18 * zl + z]);
    }
    for (int a = 0; a < M; a++) {
        const float *q = t + (size_t)(A * a) * zl;
        float *r = y + (size_t)(M * a) * zl;
#pragma omp simd
        for (int z = 0; z < len; z++)
            AT6(q[z], q[zl + z], q[2 * zl + z], q[3 * zl + z], q[4 * zl + z], q[5 * zl + z], r[z], r[zl + z],
                r[2 * zl + z], r[3 * zl + z]);
    }
}

/* p[xi * pstride + z] = (A dY A^T)[xi] from dY's 16 rows y[4a + b][z], through t (24 rows) */
TAAS_VEC static void a_rows4(float *p, size_t pstride, const float *y, size_t zl, float *t, int len) {
    for (int c = 0; c < M; c++) {  /* t[i][c] = A down a */
        const float *y0 = y + (size_t)c * zl;
        float *q = t + (size_t)c * zl;
#pragma omp simd
        for (int z = 0; z < len; z++)
            A4(y0[z], y0[4 * zl + z], y0[8 * zl + z], y0[12 * zl + z], q[z], q[4 * zl + z], q[8 * zl + z],
               q[12 * zl + z], q[16 * zl + z], q[20 * zl + z]);
    }
    for (int i = 0; i < A; i++) {  /* p[i][j] = A along c */
        const float *q = t + (size_t)(M * i) * zl;
        float *r = p + (size_t)(A * i) * pstride;
#pragma omp simd
        for (int z = 0; z < len; z++)
            A4(q[z], q[zl + z], q[2 * zl + z], q[3 * zl + z], r[z], r[pstride + z], r[2 * pstride + z],
               r[3 * pstride + z], r[4 * pstride + z], r[5 * pstride + z]);
    }
}

/* V's columns for every channel of one sample (in: its planes), a block of channels at a time:
 * D[k][l][c T + t] = the padded input at (4 ti + k, 4 tj + l) of tile t, E = B^T down k,
 * W = B along l, then W's rows to V (element (xi, c, t) at v + xi vstride + c colstride +
 * base + t). Every transform is one flat vector loop over the block's tiles. */
TAAS_VEC static void input_sample4(float *v, size_t vstride, size_t colstride, size_t base, const float *in,
                                   const float *mask, const wshape *g, float *rows) {
    int T = g->t, tx = g->tx, n = tx + 1, cb = flat_planes(g);
    size_t zl = (size_t)cb * T, inp = (size_t)g->h * g->w;
    float *d = rows, *e = d + 36 * zl, *wv = e + 36 * zl, *row = wv + 36 * zl, *ph = row + g->wp + 2;
    for (int c0 = 0; c0 < g->cin; c0 += cb) {
        int nb = g->cin - c0 < cb ? g->cin - c0 : cb;
        int len = nb * T;
        for (int c = 0; c < nb; c++) {
            const float *plane = in + (size_t)(c0 + c) * inp, *mk = mask ? mask + (size_t)(c0 + c) * inp : NULL;
            for (int ti = 0; ti < g->ty; ti++)
                for (int k = 0; k < A; k++) {
                    padded_row(row, plane, mk, g, M * ti - g->ph + k);
                    split_row(ph, row, g);
                    float *dk = d + (size_t)(A * k) * zl + (size_t)c * T + (size_t)ti * tx;
                    for (int l = 0; l < A; l++) {
                        const float *src = ph + (l & 3) * n + (l >> 2);
                        float *dst = dk + (size_t)l * zl;
                        for (int tj = 0; tj < tx; tj++) dst[tj] = src[tj];
                    }
                }
        }
        bt_rows4(wv, zl, d, e, zl, len);
        for (int xi = 0; xi < 36; xi++)
            for (int c = 0; c < nb; c++)
                memcpy(v + (size_t)xi * vstride + (size_t)(c0 + c) * colstride + base, wv + (size_t)xi * zl + (size_t)c * T,
                       sizeof(float) * T);
    }
}

/* Every output channel's plane of one sample (out: its planes) from M's columns, + bias,
 * then ReLU if asked: M's rows for a block of channels gathered (W), A^T down i, A^T along
 * j into 16 phases (a, b) of the block's tiles, then each output row from its 4 phases. */
TAAS_VEC static void output_sample4(float *out, const float *mm, size_t mstride, size_t colstride, size_t base,
                                    const float *b, int relu, const wshape *g, float *rows) {
    int T = g->t, tx = g->tx, cb = flat_planes(g);
    size_t zl = (size_t)cb * T, outp = (size_t)g->oh * g->ow;
    float *wv = rows, *t4 = wv + 36 * zl, *o16 = t4 + 24 * zl, *row = o16 + 16 * zl;
    for (int o0 = 0; o0 < g->cout; o0 += cb) {
        int nb = g->cout - o0 < cb ? g->cout - o0 : cb;
        int len = nb * T;
        for (int xi = 0; xi < 36; xi++)
            for (int o = 0; o < nb; o++)
                memcpy(wv + (size_t)xi * zl + (size_t)o * T, mm + (size_t)xi * mstride + (size_t)(o0 + o) * colstride + base,
                       sizeof(float) * T);
        at_rows4(o16, zl, wv, zl, t4, len);
        for (int o = 0; o < nb; o++) {
            float bias = b ? b[o0 + o] : 0.0f, *plane = out + (size_t)(o0 + o) * outp;
            for (int ti = 0; ti < g->ty; ti++)
                for (int a = 0; a < M && M * ti + a < g->oh; a++) {
                    const float *q = o16 + (size_t)(M * a) * zl + (size_t)o * T + (size_t)ti * tx;
                    for (int tj = 0; tj < tx; tj++)
                        for (int c = 0; c < M; c++) row[M * tj + c] = q[(size_t)c * zl + tj];
                    float *to = plane + (size_t)(M * ti + a) * g->ow;
                    if (relu) {
#pragma omp simd
                        for (int x = 0; x < g->ow; x++) to[x] = row[x] + bias > 0.0f ? row[x] + bias : 0.0f;
                    } else {
#pragma omp simd
                        for (int x = 0; x < g->ow; x++) to[x] = row[x] + bias;
                    }
                }
        }
    }
}

/* P's columns (36, OC, T) for every output channel of one sample (dy: its planes), masked
 * where mask (the fused ReLU's output) is not positive, and db (OC) += each plane's sum when
 * db is not NULL: dY split into 16 phases (a, b) of a block's tiles (zeros past the plane's
 * edge), A down a, A along b, then to P. */
TAAS_VEC static void grad_sample4(float *p, size_t pstride, size_t colstride, size_t base, const float *dy,
                                  const float *mask, float *db, const wshape *g, float *rows) {
    int T = g->t, tx = g->tx, n = tx + 1, cb = flat_planes(g);
    size_t zl = (size_t)cb * T, outp = (size_t)g->oh * g->ow;
    float *y16 = rows, *t6 = y16 + 16 * zl, *p36 = t6 + 24 * zl, *row = p36 + 36 * zl, *ph = row + g->wp + 2;
    for (int o0 = 0; o0 < g->cout; o0 += cb) {
        int nb = g->cout - o0 < cb ? g->cout - o0 : cb;
        int len = nb * T;
        for (int o = 0; o < nb; o++) {
            const float *plane = dy + (size_t)(o0 + o) * outp, *mk = mask ? mask + (size_t)(o0 + o) * outp : NULL;
            float sum = 0.0f;
            for (int ti = 0; ti < g->ty; ti++)
                for (int a = 0; a < M; a++) {
                    int yy = M * ti + a;
                    float part = 0.0f;
                    memset(row, 0, sizeof(float) * g->wp);
                    if (yy < g->oh) {
                        const float *in = plane + (size_t)yy * g->ow, *mr = mk ? mk + (size_t)yy * g->ow : NULL;
#pragma omp simd reduction(+ : part)
                        for (int x = 0; x < g->ow; x++) {
                            row[x] = mr && !(mr[x] > 0.0f) ? 0.0f : in[x];
                            part += row[x];
                        }
                    }
                    sum += part;
                    split_row(ph, row, g);
                    float *dst = y16 + (size_t)(M * a) * zl + (size_t)o * T + (size_t)ti * tx;
                    for (int c = 0; c < M; c++)
                        for (int tj = 0; tj < tx; tj++) dst[(size_t)c * zl + tj] = ph[c * n + tj];
                }
            if (db) db[o0 + o] += sum;
        }
        a_rows4(p36, zl, y16, zl, t6, len);
        for (int xi = 0; xi < 36; xi++)
            for (int o = 0; o < nb; o++)
                memcpy(p + (size_t)xi * pstride + (size_t)(o0 + o) * colstride + base, p36 + (size_t)xi * zl + (size_t)o * T,
                       sizeof(float) * T);
    }
}

/* G^T applied to z0..z5: 3 values */
#define GT_ROWS(o, z0, z1, z2, z3, z4, z5)                                                            \
    do {                                                                                              \
        o[0] = 0.25f * (z0) - (1.0f / 6.0f) * ((z1) + (z2)) + (1.0f / 24.0f) * ((z3) + (z4));          \
        o[1] = (1.0f / 6.0f) * ((z2) - (z1)) + (1.0f / 12.0f) * ((z3) - (z4));                         \
        o[2] = (-1.0f / 6.0f) * ((z1) + (z2)) + (1.0f / 6.0f) * ((z3) + (z4)) + (z5);                  \
    } while (0)

/* One output channel's row of dw += G^T dU G, dU the slices' sums in their order */
TAAS_VEC static void finish_row4(float *dw, const float *du, size_t plane, size_t stride, int slices, int cin) {
    for (int c0 = 0; c0 < cin; c0 += WBLOCK) {
        int nb = cin - c0 < WBLOCK ? cin - c0 : WBLOCK;
        float d[36][WBLOCK], h[3][6][WBLOCK];
        slice_sums(d, 36, du, plane, stride, slices, c0, nb);
        for (int j = 0; j < 6; j++) {
#pragma omp simd
            for (int c = 0; c < nb; c++) {
                float o[3];
                GT_ROWS(o, d[j][c], d[A + j][c], d[2 * A + j][c], d[3 * A + j][c], d[4 * A + j][c], d[5 * A + j][c]);
                for (int a = 0; a < 3; a++) h[a][j][c] = o[a];
            }
        }
        float k[9][WBLOCK];
        for (int a = 0; a < 3; a++) {
#pragma omp simd
            for (int c = 0; c < nb; c++) {
                float o[3];
                GT_ROWS(o, h[a][0][c], h[a][1][c], h[a][2][c], h[a][3][c], h[a][4][c], h[a][5][c]);
                for (int b = 0; b < 3; b++) k[3 * a + b][c] = o[b];
            }
        }
        add_kernels(dw, k, c0, nb);
    }
}


/* ---- the table ---- */

/* A tile size's transforms, each over one sample: V, M and P hold element (xi, channel, t)
 * at xi * (channels * colstride) + channel * colstride + base + t */
typedef struct wino_tiles {
    void (*weights_row)(float *u, size_t plane, const float *w, size_t stride, int count, int turned);
    void (*input_sample)(float *v, size_t vstride, size_t colstride, size_t base, const float *in, const float *mask,
                         const wshape *g, float *rows);
    void (*output_sample)(float *out, const float *mm, size_t mstride, size_t colstride, size_t base,
                          const float *b, int relu, const wshape *g, float *rows);
    void (*grad_sample)(float *p, size_t pstride, size_t colstride, size_t base, const float *dy, const float *mask,
                        float *db, const wshape *g, float *rows);
    void (*finish_row)(float *dw, const float *du, size_t plane, size_t stride, int slices, int cin);
    /* the flat passes over rows of tiles, for the channel-major transforms */
    void (*bt_rows)(float *v, size_t vstride, const float *d, float *e, size_t zl, int len);
    void (*at_rows)(float *y, size_t zl, const float *mm, size_t mstride, float *t, int len);
    void (*a_rows)(float *p, size_t pstride, const float *y, size_t zl, float *t, int len);
} wino_tiles;

static const wino_tiles F2 = {weights_row2, input_sample2, output_sample2, grad_sample2, finish_row2,
                              bt_rows2,     at_rows2,      a_rows2};
static const wino_tiles F4 = {weights_row4, input_sample4, output_sample4, grad_sample4, finish_row4,
                              bt_rows4,     at_rows4,      a_rows4};

static const wino_tiles *tiles_of(const wshape *g) { return g->m == 4 ? &F4 : &F2; }

void taas_conv_winograd_weights(float *u, const float *w, const taas_conv2d_shape *s, int backward, int nthreads) {
    wshape g = forward_shape(s);
    const wino_tiles *k = tiles_of(&g);
    size_t plane = (size_t)s->oc * s->c;
    int rows = backward ? s->c : s->oc, cols = backward ? s->oc : s->c;
#pragma omp parallel for num_threads(nthreads > 1 ? nthreads : 1) schedule(static)
    for (int a = 0; a < rows; a++) {
        /* forward: row o, kernels w[o][c] 9 apart; backward: row c, kernels w[o][c] 9 C apart */
        if (backward) k->weights_row(u + (size_t)a * cols, plane, w + (size_t)a * 9, (size_t)s->c * 9, cols, 1);
        else k->weights_row(u + (size_t)a * cols, plane, w + (size_t)a * s->c * 9, 9, cols, 0);
    }
}

/* out (N, cout, oh, ow) for samples [n0, n0 + m) = the correlation of in with the 3x3
 * kernels whose transforms u (xi, cout, cin) holds, + b, ReLU if asked */
static void run(float *out, const float *in, const float *mask, const float *u, const float *b, const wshape *g,
                float *mine, int n0, int m, int relu) {
    const wino_tiles *k = tiles_of(g);
    size_t mt = (size_t)m * g->t, inp = (size_t)g->h * g->w, outp = (size_t)g->oh * g->ow;
    float *v = mine, *mm = v + (size_t)g->xi * g->cin * mt, *rows = mm + (size_t)g->xi * g->cout * mt;
    for (int j = 0; j < m; j++) {
        size_t at = (size_t)(n0 + j) * g->cin * inp;
        k->input_sample(v, (size_t)g->cin * mt, mt, (size_t)j * g->t, in + at, mask ? mask + at : NULL, g, rows);
    }
    for (int xi = 0; xi < g->xi; xi++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->cout, (int)mt, g->cin, 1.0f,
                    u + (size_t)xi * g->cout * g->cin, g->cin, v + (size_t)xi * g->cin * mt, (int)mt, 0.0f,
                    mm + (size_t)xi * g->cout * mt, (int)mt);
    for (int j = 0; j < m; j++)
        k->output_sample(out + (size_t)(n0 + j) * g->cout * outp, mm, (size_t)g->cout * mt, mt, (size_t)j * g->t, b,
                         relu, g, rows);
}

void taas_conv_winograd_weight_grad(float *du, float *db, const float *dy, const float *relu_y, const float *x,
                                    const taas_conv2d_shape *s, float *mine, int n0, int m) {
    wshape g = forward_shape(s);
    const wino_tiles *k = tiles_of(&g);
    size_t mt = (size_t)m * g.t, inp = (size_t)g.h * g.w, outp = (size_t)g.oh * g.ow;
    float *v = mine, *p = v + (size_t)g.xi * g.cin * mt, *rows = p + (size_t)g.xi * g.cout * mt;
    for (int j = 0; j < m; j++) {
        k->input_sample(v, (size_t)g.cin * mt, mt, (size_t)j * g.t, x + (size_t)(n0 + j) * g.cin * inp, NULL, &g, rows);
        size_t at = (size_t)(n0 + j) * g.cout * outp;
        k->grad_sample(p, (size_t)g.cout * mt, mt, (size_t)j * g.t, dy + at, relu_y ? relu_y + at : NULL, db, &g, rows);
    }
    /* dU[xi] (OC, C) += P[xi] (OC, T) * V[xi]^T (T, C) */
    for (int xi = 0; xi < g.xi; xi++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.cout, g.cin, (int)mt, 1.0f,
                    p + (size_t)xi * g.cout * mt, (int)mt, v + (size_t)xi * g.cin * mt, (int)mt, 1.0f,
                    du + (size_t)xi * g.cout * g.cin, g.cin);
}

void taas_conv_winograd_weight_grad_finish(float *dw, const float *du, size_t stride, int slices,
                                           const taas_conv2d_shape *s, int nthreads) {
    wshape g = forward_shape(s);
    const wino_tiles *k = tiles_of(&g);
    size_t plane = (size_t)s->oc * s->c;
#pragma omp parallel for num_threads(nthreads > 1 ? nthreads : 1) schedule(static)
    for (int o = 0; o < s->oc; o++)
        k->finish_row(dw + (size_t)o * s->c * 9, du + (size_t)o * s->c, plane, stride, slices, s->c);
}

void taas_conv_winograd_forward(float *y, const float *x, const float *u, const float *b,
                                const taas_conv2d_shape *s, float *mine, int n0, int m, int relu) {
    wshape g = forward_shape(s);
    run(y, x, NULL, u, b, &g, mine, n0, m, relu);
}

void taas_conv_winograd_input_grad(float *dx, const float *dy, const float *relu_y, const float *u,
                                   const taas_conv2d_shape *s, float *mine, int n0, int m) {
    wshape g = backward_shape(s);
    run(dx, dy, relu_y, u, NULL, &g, mine, n0, m, 0);
}

/* ---- channel-major transforms, for the grouped products ---- */
/* A group's V, M and P hold element (xi, channel, z) at xi * stride + channel * mt + z, z = j T
 * + t over the group's m samples' tiles: one channel's tiles of the whole group are one
 * contiguous row, so these transforms take a channel at a time, a chunk of its samples' tiles
 * at once, and read or write the rows in place. A chunk: about FLAT tiles. */


static size_t channel_rows_floats(const wshape *g) {
    size_t zl = (size_t)flat_planes(g) * g->t;
    return (size_t)2 * g->xi * zl + (size_t)(g->m * g->ty + 2) * g->wp;
}

/* P ((m ty + 2) rows of wp) = the plane, masked where mask is not NULL, at (r - ph, q - pw),
 * zeros outside */
static void pad_plane(float *P, const float *plane, const float *mask, const wshape *g) {
    for (int r = 0; r < g->m * g->ty + 2; r++) padded_row(P + (size_t)r * g->wp, plane, mask, g, r - g->ph);
}

/* d[k (m + 2) + l][z0 + ti tx + tj] = P at (m ti + k, m tj + l): each tile's input block */
TAAS_VEC static void gather_tiles(float *d, size_t zl, size_t z0, const float *P, const wshape *g) {
    int a = g->m + 2;
    for (int k = 0; k < a; k++)
        for (int l = 0; l < a; l++) {
            float *dst = d + (size_t)(a * k + l) * zl + z0;
            for (int ti = 0; ti < g->ty; ti++) {
                const float *src = P + (size_t)(g->m * ti + k) * g->wp + l;
                for (int tj = 0; tj < g->tx; tj++) dst[ti * g->tx + tj] = src[g->m * tj];
            }
        }
}

/* V's row of one channel for m samples (in: the channel's plane in the first, sstride floats
 * from one sample's to the next; v: the row in xi 0) */
static void input_channel(float *v, size_t vstride, const float *in, const float *mask, size_t sstride, int m,
                          const wshape *g, float *rows) {
    int cs = flat_planes(g);
    size_t zl = (size_t)cs * g->t;
    float *d = rows, *e = d + (size_t)g->xi * zl, *P = e + (size_t)g->xi * zl;
    for (int j0 = 0; j0 < m; j0 += cs) {
        int nb = m - j0 < cs ? m - j0 : cs;
        for (int j = 0; j < nb; j++) {
            size_t at = (size_t)(j0 + j) * sstride;
            pad_plane(P, in + at, mask ? mask + at : NULL, g);
            gather_tiles(d, zl, (size_t)j * g->t, P, g);
        }
        tiles_of(g)->bt_rows(v + (size_t)j0 * g->t, vstride, d, e, zl, nb * g->t);
    }
}

/* One output channel's planes of m samples (out: the plane in the first) from its row of M,
 * + bias, ReLU if asked */
TAAS_VEC static void output_channel(float *out, size_t sstride, const float *mm, size_t mstride, int m, float bias,
                                    int relu, const wshape *g, float *rows) {
    int cs = flat_planes(g), n = g->m;
    size_t zl = (size_t)cs * g->t;
    float *y = rows, *t = y + (size_t)n * n * zl;
    for (int j0 = 0; j0 < m; j0 += cs) {
        int nb = m - j0 < cs ? m - j0 : cs;
        tiles_of(g)->at_rows(y, zl, mm + (size_t)j0 * g->t, mstride, t, nb * g->t);
        for (int j = 0; j < nb; j++) {
            float *plane = out + (size_t)(j0 + j) * sstride;
            for (int r = 0; r < g->oh; r++) {
                const float *yr = y + (size_t)(r % n) * n * zl + (size_t)j * g->t + (size_t)(r / n) * g->tx;
                float *to = plane + (size_t)r * g->ow;
                for (int x = 0; x < g->ow; x++) {
                    float val = yr[(size_t)(x % n) * zl + x / n] + bias;
                    to[x] = relu && !(val > 0.0f) ? 0.0f : val;
                }
            }
        }
    }
}

/* P's row of one output channel for m samples (dy: the channel's plane in the first), dy
 * counting where mask > 0 when mask is not NULL; returns the planes' sum */
TAAS_VEC static float grad_channel(float *p, size_t pstride, const float *dy, const float *mask, size_t sstride,
                                   int m, const wshape *g, float *rows) {
    int cs = flat_planes(g), n = g->m;
    size_t zl = (size_t)cs * g->t;
    float *y = rows, *t = y + (size_t)n * n * zl, sum = 0.0f;
    for (int j0 = 0; j0 < m; j0 += cs) {
        int nb = m - j0 < cs ? m - j0 : cs;
        for (int j = 0; j < nb; j++) {
            size_t at = (size_t)(j0 + j) * sstride;
            const float *plane = dy + at, *mk = mask ? mask + at : NULL;
            for (int r = 0; r < n * g->ty; r++) {
                float *yr = y + (size_t)(r % n) * n * zl + (size_t)j * g->t + (size_t)(r / n) * g->tx;
                int inside = r < g->oh;
                const float *in = inside ? plane + (size_t)r * g->ow : NULL;
                const float *mr = inside && mk ? mk + (size_t)r * g->ow : NULL;
                float part = 0.0f;
                for (int x = 0; x < n * g->tx; x++) {
                    float val = inside && x < g->ow && !(mr && !(mr[x] > 0.0f)) ? in[x] : 0.0f;
                    yr[(size_t)(x % n) * zl + x / n] = val;
                    part += val;
                }
                sum += part;
            }
        }
        tiles_of(g)->a_rows(p + (size_t)j0 * g->t, pstride, y, zl, t, nb * g->t);
    }
    return sum;
}

/* ---- groups of samples, every thread on each phase ---- */

/* A group's V and M within about 32 MiB */
enum { GROUP_FLOATS = 1 << 23 };

static int grouping = -1;

void taas_conv_winograd_grouping(int mode) { grouping = mode; }

/* Where a product of a few samples holds fewer tiles than the channels: each of its sgemms
 * then packs an OC x C matrix of transformed weights for fewer columns than it has rows.
 * Measured, one layer forward and backward (bench/RESULTS.md), grouped against not:
 * 512 channels at 4x4 375 against 235 GFLOP/s, 256 at 8x8 473 against 281, 128 at 16x16
 * 409 against 389, 512 at 7x7 371 against 233; but 64 at 32x32 275 against 352, and 64 at
 * 56x56 271 against 363, where a product's tiles outnumber the channels. */
int taas_conv_winograd_grouped(const taas_conv2d_shape *s) {
    if (grouping >= 0) return grouping > 0;
    wshape g = forward_shape(s);
    int least = s->c < s->oc ? s->c : s->oc;
    return (long)taas_conv_winograd_samples(s) * g.t < least;
}

int taas_conv_winograd_group(const taas_conv2d_shape *s) {
    wshape g = forward_shape(s);
    size_t one = (size_t)g.xi * g.t * (g.cin + g.cout);
    int cap = one >= GROUP_FLOATS ? 1 : (int)(GROUP_FLOATS / one);
    if (grouping > 0 && cap > grouping) cap = grouping;
    int groups = (s->n + cap - 1) / cap;
    return (s->n + groups - 1) / groups;
}

/* A thread's rows, either direction's */
static size_t group_thread_floats(const taas_conv2d_shape *s) {
    wshape f = forward_shape(s), b = backward_shape(s);
    size_t r = channel_rows_floats(&f) > channel_rows_floats(&b) ? channel_rows_floats(&f) : channel_rows_floats(&b);
    return (r + 15) / 16 * 16;
}

/* V and M of m samples, either direction's (their tiles differ where the padding is not 1) */
static size_t group_vm_floats(const taas_conv2d_shape *s, int m) {
    wshape f = forward_shape(s), b = backward_shape(s);
    size_t t = f.t > b.t ? f.t : b.t;
    return ((size_t)f.xi * m * t * (f.cin + f.cout) + 15) / 16 * 16;
}

size_t taas_conv_winograd_group_floats(const taas_conv2d_shape *s, int nthreads) {
    size_t nt = (size_t)(nthreads > 1 ? nthreads : 1);
    return group_vm_floats(s, taas_conv_winograd_group(s)) + nt * group_thread_floats(s);
}

/* Samples [n0, n0 + m): V a channel at a time, then each tile position's product, then the
 * output a channel at a time, each phase shared out among the threads */
static void run_group(float *out, const float *in, const float *mask, const float *u, const float *b,
                      const wshape *g, float *work, float *rows0, size_t per, int n0, int m, int relu, int nthreads) {
    size_t mt = (size_t)m * g->t, inp = (size_t)g->h * g->w, outp = (size_t)g->oh * g->ow;
    size_t sin = (size_t)g->cin * inp, sout = (size_t)g->cout * outp;
    float *v = work, *mm = v + (size_t)g->xi * g->cin * mt;
    in += (size_t)n0 * sin, mask = mask ? mask + (size_t)n0 * sin : NULL, out += (size_t)n0 * sout;
#pragma omp parallel num_threads(nthreads > 1 ? nthreads : 1)
    {
        float *rows = rows0 + (size_t)omp_get_thread_num() * per;
#pragma omp for schedule(static)
        for (int c = 0; c < g->cin; c++)
            input_channel(v + (size_t)c * mt, (size_t)g->cin * mt, in + (size_t)c * inp,
                          mask ? mask + (size_t)c * inp : NULL, sin, m, g, rows);
#pragma omp for schedule(static)
        for (int xi = 0; xi < g->xi; xi++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->cout, (int)mt, g->cin, 1.0f,
                        u + (size_t)xi * g->cout * g->cin, g->cin, v + (size_t)xi * g->cin * mt, (int)mt, 0.0f,
                        mm + (size_t)xi * g->cout * mt, (int)mt);
#pragma omp for schedule(static)
        for (int o = 0; o < g->cout; o++)
            output_channel(out + (size_t)o * outp, sout, mm + (size_t)o * mt, (size_t)g->cout * mt, m, b ? b[o] : 0.0f,
                           relu, g, rows);
    }
}

static void run_groups(float *out, const float *in, const float *mask, const float *u, const float *b,
                       const wshape *g, const taas_conv2d_shape *s, float *work, int relu, int nthreads) {
    int G = taas_conv_winograd_group(s);
    float *rows0 = work + group_vm_floats(s, G);
    for (int n0 = 0; n0 < s->n; n0 += G)
        run_group(out, in, mask, u, b, g, work, rows0, group_thread_floats(s), n0, s->n - n0 < G ? s->n - n0 : G, relu,
                  nthreads);
}

void taas_conv_winograd_forward_grouped(float *y, const float *x, const float *u, const float *b,
                                        const taas_conv2d_shape *s, float *work, int relu, int nthreads) {
    wshape g = forward_shape(s);
    run_groups(y, x, NULL, u, b, &g, s, work, relu, nthreads);
}

void taas_conv_winograd_input_grad_grouped(float *dx, const float *dy, const float *relu_y, const float *u,
                                           const taas_conv2d_shape *s, float *work, int nthreads) {
    wshape g = backward_shape(s);
    run_groups(dx, dy, relu_y, u, NULL, &g, s, work, 0, nthreads);
}

void taas_conv_winograd_weight_grad_grouped(float *dw, float *db, const float *dy, const float *relu_y,
                                            const float *x, const taas_conv2d_shape *s, float *du, float *work,
                                            int nthreads) {
    wshape g = forward_shape(s);
    int G = taas_conv_winograd_group(s), nt = nthreads > 1 ? nthreads : 1;
    size_t per = group_thread_floats(s), inp = (size_t)g.h * g.w, outp = (size_t)g.oh * g.ow;
    size_t sin = (size_t)g.cin * inp, sout = (size_t)g.cout * outp;
    float *rows0 = work + group_vm_floats(s, G);
    for (int n0 = 0; n0 < s->n; n0 += G) {
        int m = s->n - n0 < G ? s->n - n0 : G;
        size_t mt = (size_t)m * g.t;
        float *v = work, *p = v + (size_t)g.xi * g.cin * mt;
        const float *xg = x + (size_t)n0 * sin, *dyg = dy + (size_t)n0 * sout;
        const float *mg = relu_y ? relu_y + (size_t)n0 * sout : NULL;
#pragma omp parallel num_threads(nt)
        {
            float *rows = rows0 + (size_t)omp_get_thread_num() * per;
#pragma omp for schedule(static)
            for (int c = 0; c < g.cin; c++)
                input_channel(v + (size_t)c * mt, (size_t)g.cin * mt, xg + (size_t)c * inp, NULL, sin, m, &g, rows);
#pragma omp for schedule(static)
            for (int o = 0; o < g.cout; o++) {
                float sum = grad_channel(p + (size_t)o * mt, (size_t)g.cout * mt, dyg + (size_t)o * outp,
                                         mg ? mg + (size_t)o * outp : NULL, sout, m, &g, rows);
                if (db) db[o] += sum;
            }
            /* dU[xi] (OC, C) (+)= P[xi] (OC, T) * V[xi]^T (T, C) */
#pragma omp for schedule(static)
            for (int xi = 0; xi < g.xi; xi++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.cout, g.cin, (int)mt, 1.0f,
                            p + (size_t)xi * g.cout * mt, (int)mt, v + (size_t)xi * g.cin * mt, (int)mt,
                            n0 ? 1.0f : 0.0f, du + (size_t)xi * g.cout * g.cin, g.cin);
        }
    }
    taas_conv_winograd_weight_grad_finish(dw, du, 0, 1, s, nthreads);
}
