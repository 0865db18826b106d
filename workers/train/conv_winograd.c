/* Winograd F(2x2, 3x3) for Conv2d (conv_winograd.h). The transforms, with d a 4x4 block of
 * input, g a 3x3 kernel and m a 4x4 block of products:
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]      V = B^T d B
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]      U = G g G^T
 *   A^T = [1 1 1 0; 0 1 -1 -1]                           Y = A^T m A
 * A product's buffers, per thread: V (16, Cin, T) and M (16, Cout, T) for its T tiles (a
 * sample's tiles in row order, the samples one after another), and a few rows. The loops run
 * along a row of tiles, so that they vectorise.
 *
 * The weight gradient is the forward's adjoint: with Z = sum_c U (.) V and Y = A^T Z A, a
 * tile's dZ = A dY A^T, dU = sum over tiles of dZ (.) V, and dg = G^T dU G. Exact for every
 * g, so it is the gradient of the convolution itself, not of an approximation. */
#include "conv_winograd.h"

#include <string.h>

#include "blas.h"
#include "simd.h"

/* One direction's shapes: in (N, cin, h, w) -> out (N, cout, oh, ow), padding ph, pw */
typedef struct wshape {
    int cin, h, w, cout, oh, ow, ph, pw;
    int ty, tx, t;  /* tiles down, across, a sample */
    int wp;         /* a padded row's floats: 2 * tx + 2 */
} wshape;

static wshape shape_of(int cin, int h, int w, int cout, int oh, int ow, int ph, int pw) {
    wshape g = {cin, h, w, cout, oh, ow, ph, pw, (oh + 1) / 2, (ow + 1) / 2, 0, 0};
    g.t = g.ty * g.tx;
    g.wp = 2 * g.tx + 2;
    return g;
}

static wshape forward_shape(const taas_conv2d_shape *s) {
    return shape_of(s->c, s->h, s->w, s->oc, taas_conv2d_out_h(s), taas_conv2d_out_w(s), s->ph, s->pw);
}

/* The input gradient is the forward of dy with padding 2 - p: out H x W */
static wshape backward_shape(const taas_conv2d_shape *s) {
    return shape_of(s->oc, taas_conv2d_out_h(s), taas_conv2d_out_w(s), s->c, s->h, s->w, 2 - s->ph, 2 - s->pw);
}

int taas_conv_winograd_usable(const taas_conv2d_shape *s) {
    int least = s->c >= 512 && s->oc >= 512 ? 4 : 8;  /* the smallest output plane, measured */
    return taas_conv2d_groups(s) == 1 && s->kh == 3 && s->kw == 3 && s->sh == 1 && s->sw == 1 && s->ph <= 2 &&
           s->pw <= 2 && s->c >= 64 && s->oc >= 64 && taas_conv2d_out_h(s) >= least && taas_conv2d_out_w(s) >= least;
}

size_t taas_conv_winograd_weight_floats(const taas_conv2d_shape *s) { return (size_t)16 * s->oc * s->c; }

int taas_conv_winograd_tiles(const taas_conv2d_shape *s) { return forward_shape(s).t; }

int taas_conv_winograd_samples(const taas_conv2d_shape *s) {
    int tiles = forward_shape(s).t, want = 32768 / (s->c + s->oc), k;
    if (want < 64) want = 64;
    k = want / tiles;
    return k < 1 ? 1 : k > s->n ? (s->n > 1 ? s->n : 1) : k;
}

static size_t floats_for(const wshape *g, int samples) {
    return (size_t)16 * samples * g->t * (g->cin + g->cout) + 8 * (size_t)g->wp;  /* rows: input's 8, then output's 2 */
}

size_t taas_conv_winograd_thread_floats(const taas_conv2d_shape *s, int samples) {
    wshape f = forward_shape(s), b = backward_shape(s);
    size_t a = floats_for(&f, samples), c = floats_for(&b, samples);
    return a > c ? a : c;
}

/* The channels a transform takes at once: its rows live on the stack (37 x WBLOCK floats) */
enum { WBLOCK = 64 };

/* One output channel's row of u: u[xi][c] = (G g G^T)[xi] for g = w[c] (C, 3, 3), the
 * kernels first turned into 9 rows of WBLOCK channels so that every step is a vector loop */
TAAS_VEC static void weights_row(float *u, size_t plane, const float *w, int cin) {
    for (int c0 = 0; c0 < cin; c0 += WBLOCK) {
        int nb = cin - c0 < WBLOCK ? cin - c0 : WBLOCK;
        float g[9][WBLOCK], gg[4][3][WBLOCK];
        for (int c = 0; c < nb; c++)
            for (int t = 0; t < 9; t++) g[t][c] = w[(size_t)(c0 + c) * 9 + t];
        for (int j = 0; j < 3; j++) {
#pragma omp simd
            for (int c = 0; c < nb; c++) {
                float a = g[j][c], b = g[3 + j][c], d = g[6 + j][c];
                gg[0][j][c] = a;
                gg[1][j][c] = 0.5f * (a + b + d);
                gg[2][j][c] = 0.5f * (a - b + d);
                gg[3][j][c] = d;
            }
        }
        for (int i = 0; i < 4; i++) {
            float *u0 = u + (size_t)(4 * i) * plane + c0, *u1 = u0 + plane, *u2 = u1 + plane, *u3 = u2 + plane;
#pragma omp simd
            for (int c = 0; c < nb; c++) {
                float a = gg[i][0][c], b = gg[i][1][c], d = gg[i][2][c];
                u0[c] = a;
                u1[c] = 0.5f * (a + b + d);
                u2[c] = 0.5f * (a - b + d);
                u3[c] = d;
            }
        }
    }
}

void taas_conv_winograd_weights(float *u, const float *w, const taas_conv2d_shape *s, int nthreads) {
    size_t plane = (size_t)s->oc * s->c;
#pragma omp parallel for num_threads(nthreads > 1 ? nthreads : 1) schedule(static)
    for (int o = 0; o < s->oc; o++) weights_row(u + (size_t)o * s->c, plane, w + (size_t)o * s->c * 9, s->c);
}

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

/* V's columns for one channel's plane of one sample: base is the sample's first tile. */
TAAS_VEC static void input_tiles(float *v, size_t vstride, size_t base, const float *plane, const float *mask,
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
TAAS_VEC static void output_tiles(float *plane, const float *mm, size_t mstride, size_t base, float bias, int relu,
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

/* out (N, cout, oh, ow) for samples [n0, n0 + m) = the correlation of in with the 3x3
 * kernels whose transforms u (16, cout, cin) holds, + b, ReLU if asked */
static void run(float *out, const float *in, const float *mask, const float *u, const float *b, const wshape *g,
                float *mine, int n0, int m, int relu, int turned) {
    size_t mt = (size_t)m * g->t, inp = (size_t)g->h * g->w, outp = (size_t)g->oh * g->ow;
    float *v = mine, *mm = v + (size_t)16 * g->cin * mt, *rows = mm + (size_t)16 * g->cout * mt;
    for (int j = 0; j < m; j++)
        for (int c = 0; c < g->cin; c++) {
            size_t at = ((size_t)(n0 + j) * g->cin + c) * inp;
            input_tiles(v + (size_t)c * mt, (size_t)g->cin * mt, (size_t)j * g->t, in + at, mask ? mask + at : NULL,
                        g, rows);
        }
    /* turned: the kernels turned 180 degrees with their channels swapped, whose transform at
     * tile position (i, j) is the forward's at (3 - i, 3 - j) for i, j in {0, 3} (G's first
     * and last rows swap places when g's do; the middle two stay), transposed */
    static const int mirror[4] = {3, 1, 2, 0};
    for (int xi = 0; xi < 16; xi++) {
        float *mx = mm + (size_t)xi * g->cout * mt;
        const float *vx = v + (size_t)xi * g->cin * mt;
        if (turned)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g->cout, (int)mt, g->cin, 1.0f,
                        u + (size_t)(4 * mirror[xi / 4] + mirror[xi % 4]) * g->cout * g->cin, g->cout, vx, (int)mt,
                        0.0f, mx, (int)mt);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->cout, (int)mt, g->cin, 1.0f,
                        u + (size_t)xi * g->cout * g->cin, g->cin, vx, (int)mt, 0.0f, mx, (int)mt);
    }
    for (int j = 0; j < m; j++)
        for (int o = 0; o < g->cout; o++)
            output_tiles(out + ((size_t)(n0 + j) * g->cout + o) * outp, mm + (size_t)o * mt, (size_t)g->cout * mt,
                         (size_t)j * g->t, b ? b[o] : 0.0f, relu, g, rows);
}

/* P's columns (16, OC, T) for one output channel's gradient plane of one sample, masked
 * where mask (the fused ReLU's output) is not positive: A dY A^T of each 2x2 block, zeros
 * past the plane's edge. Returns the plane's sum, the bias's gradient. */
TAAS_VEC static float grad_tiles(float *p, size_t pstride, size_t base, const float *plane, const float *mask,
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

void taas_conv_winograd_weight_grad(float *du, float *db, const float *dy, const float *relu_y, const float *x,
                                    const taas_conv2d_shape *s, float *mine, int n0, int m) {
    wshape g = forward_shape(s);
    size_t mt = (size_t)m * g.t, inp = (size_t)g.h * g.w, outp = (size_t)g.oh * g.ow;
    float *v = mine, *p = v + (size_t)16 * g.cin * mt, *rows = p + (size_t)16 * g.cout * mt;
    for (int j = 0; j < m; j++) {
        for (int c = 0; c < g.cin; c++)
            input_tiles(v + (size_t)c * mt, (size_t)g.cin * mt, (size_t)j * g.t,
                        x + ((size_t)(n0 + j) * g.cin + c) * inp, NULL, &g, rows);
        for (int o = 0; o < g.cout; o++) {
            size_t at = ((size_t)(n0 + j) * g.cout + o) * outp;
            float sum = grad_tiles(p + (size_t)o * mt, (size_t)g.cout * mt, (size_t)j * g.t, dy + at,
                                   relu_y ? relu_y + at : NULL, &g, rows);
            if (db) db[o] += sum;
        }
    }
    /* dU[xi] (OC, C) += P[xi] (OC, T) * V[xi]^T (T, C) */
    for (int xi = 0; xi < 16; xi++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.cout, g.cin, (int)mt, 1.0f,
                    p + (size_t)xi * g.cout * mt, (int)mt, v + (size_t)xi * g.cin * mt, (int)mt, 1.0f,
                    du + (size_t)xi * g.cout * g.cin, g.cin);
}

/* One output channel's row of dw += G^T dU G, dU the slices' sums in their order */
TAAS_VEC static void finish_row(float *dw, const float *du, size_t plane, size_t stride, int slices, int cin) {
    for (int c0 = 0; c0 < cin; c0 += WBLOCK) {
        int nb = cin - c0 < WBLOCK ? cin - c0 : WBLOCK;
        float d[16][WBLOCK], h[3][4][WBLOCK], k[9][WBLOCK];
        for (int xi = 0; xi < 16; xi++) {
            const float *at = du + (size_t)xi * plane + c0;
#pragma omp simd
            for (int c = 0; c < nb; c++) d[xi][c] = at[c];
            for (int t = 1; t < slices; t++) {
#pragma omp simd
                for (int c = 0; c < nb; c++) d[xi][c] += at[t * stride + c];
            }
        }
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
        for (int c = 0; c < nb; c++)
            for (int t = 0; t < 9; t++) dw[(size_t)(c0 + c) * 9 + t] += k[t][c];
    }
}

void taas_conv_winograd_weight_grad_finish(float *dw, const float *du, size_t stride, int slices,
                                           const taas_conv2d_shape *s, int nthreads) {
    size_t plane = (size_t)s->oc * s->c;
#pragma omp parallel for num_threads(nthreads > 1 ? nthreads : 1) schedule(static)
    for (int o = 0; o < s->oc; o++)
        finish_row(dw + (size_t)o * s->c * 9, du + (size_t)o * s->c, plane, stride, slices, s->c);
}

void taas_conv_winograd_forward(float *y, const float *x, const float *u, const float *b,
                                const taas_conv2d_shape *s, float *mine, int n0, int m, int relu) {
    wshape g = forward_shape(s);
    run(y, x, NULL, u, b, &g, mine, n0, m, relu, 0);
}

void taas_conv_winograd_input_grad(float *dx, const float *dy, const float *relu_y, const float *u,
                                   const taas_conv2d_shape *s, float *mine, int n0, int m) {
    wshape g = backward_shape(s);
    run(dx, dy, relu_y, u, NULL, &g, mine, n0, m, 0, 1);
}
