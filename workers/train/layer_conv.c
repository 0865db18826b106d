/* Conv2d with the samples spread over OpenMP threads, each thread working on one sample at
 * a time so that its intermediate matrices stay in the core's L2 (on small planes a few
 * samples at a time: samples_per_product). A ResNet's 3x3 stride-1 convolutions take
 * Winograd where conv_winograd.h says it wins. Otherwise stride 1 on an AVX-512
 * CPU runs conv_direct.c's kernels (no im2col); otherwise im2col + single-threaded sgemm
 * (conv2 of docs/design.md §1: a 288 x 576 im2col matrix, 663 KB). The caller's scratch holds
 * the packed weights, shared, then one slice per thread: that path's work memory and, in
 * backward, private dw and db sums, added up in thread order so that a run repeats itself
 * bit for bit. A grouped convolution takes the im2col path, one product per group: each
 * group is a convolution of C/G input channels into OC/G outputs (group_shape). */
#include <string.h>
#include <omp.h>
#include "blas.h"
#include "conv_direct.h"
#include "conv_winograd.h"
#include "layers.h"
#include "simd.h"

/* One group's convolution: C/G channels in, OC/G out (the whole one without groups). */
static taas_conv2d_shape group_shape(const taas_conv2d_shape *s) {
    taas_conv2d_shape g = *s;
    int n = taas_conv2d_groups(s);
    g.c /= n;
    g.oc /= n;
    g.groups = 1;
    return g;
}

/* The direct kernels' sizes count only where they can run: without groups. */
static int ungrouped(const taas_conv2d_shape *s) { return taas_conv2d_groups(s) == 1; }

/* im2col's matrix, one group's (C/G*KH*KW, OH*OW) */
static size_t col_floats(const taas_conv2d_shape *s) {
    return (size_t)(s->c / taas_conv2d_groups(s)) * s->kh * s->kw * taas_conv2d_out_h(s) * taas_conv2d_out_w(s);
}

/* Samples one product takes on the im2col path. A small plane (4x4 in a CIFAR ResNet's last
 * stage) makes one sample's product too thin to reuse a weight it loads, so the columns of
 * several samples lie side by side, about COLS of them; from COLS outputs a sample on, one
 * sample at a time, and stride 1 there runs the direct kernels. A function of the shape
 * alone (never of the threads), so that the sums' order is too. Without conv groups. */
enum { COLS = 256 };
static int sample_products = 1;

void taas_conv2d_sample_products(int on) { sample_products = on; }

static int samples_per_product(const taas_conv2d_shape *s) {
    int l = taas_conv2d_out_h(s) * taas_conv2d_out_w(s);
    if (!sample_products || !ungrouped(s) || l >= COLS || l < 1) return 1;
    int g = (COLS + l - 1) / l;
    return g < s->n ? g : (s->n > 1 ? s->n : 1);
}

static int use_direct(const taas_conv2d_shape *s) { return samples_per_product(s) == 1 && taas_conv_direct_usable(s); }

/* Winograd where it applies (conv_winograd.h); a bias's gradient alone, without the
 * weight's, stays on the paths above. */
static int winograd = 1;

void taas_conv2d_winograd(int on) { winograd = on; }

static int use_winograd(const taas_conv2d_shape *s) { return winograd && taas_conv_winograd_usable(s); }

/* Winograd in groups of samples, every thread on each phase (conv_winograd.h) */
static int use_grouped(const taas_conv2d_shape *s) { return use_winograd(s) && taas_conv_winograd_grouped(s); }

/* Work memory of either path: im2col's matrix and the output (or masked output gradient) of
 * the samples a product takes, or the direct kernels' buffers. */
static size_t work_floats(const taas_conv2d_shape *s) {
    size_t im2col = (col_floats(s) + (size_t)s->oc * taas_conv2d_out_h(s) * taas_conv2d_out_w(s)) *
                    (size_t)samples_per_product(s);
    size_t direct = use_direct(s) ? taas_conv_direct_thread_floats(s) : 0;
    size_t wino = use_winograd(s) && !use_grouped(s)
                      ? taas_conv_winograd_thread_floats(s, taas_conv_winograd_samples(s))
                      : 0;
    if (wino > im2col) im2col = wino;
    return im2col > direct ? im2col : direct;
}

/* 16 floats: a scratch allocated 64-byte aligned keeps every slice so */
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* dw's partial sums: (OC, K) with K = C/G*KH*KW, transposed with padding on the direct path,
 * Winograd's dU (XI, OC, C) on its */
static size_t dw_floats(const taas_conv2d_shape *s) {
    size_t plain = (size_t)s->oc * (s->c / taas_conv2d_groups(s)) * s->kh * s->kw;
    size_t direct = use_direct(s) ? taas_conv_direct_dw_floats(s) : 0;
    size_t wino = use_winograd(s) && !use_grouped(s) ? taas_conv_winograd_weight_floats(s) : 0;
    if (wino > plain) plain = wino;
    return plain > direct ? plain : direct;
}

/* One thread's slice: work memory, dw's partial sums, db (OC). */
static size_t per_thread(const taas_conv2d_shape *s) {
    return round16(work_floats(s) + dw_floats(s) + (size_t)s->oc);
}

static size_t shared_floats(const taas_conv2d_shape *s) {
    size_t direct = use_direct(s) ? taas_conv_direct_shared_floats(s) : 0;
    size_t wino = use_winograd(s) ? taas_conv_winograd_weight_floats(s) : 0;
    return round16(direct > wino ? direct : wino);
}

size_t taas_conv2d_scratch_floats(const taas_conv2d_shape *s, int nthreads) {
    if (nthreads < 1) nthreads = 1;
    size_t slices = (size_t)nthreads * per_thread(s);
    size_t group = use_grouped(s) ? taas_conv_winograd_group_floats(s, nthreads) : 0;
    return shared_floats(s) + (slices > group ? slices : group);
}

/* Output columns [*j0, *j1) whose input column j*sw - pw + kj falls inside the image. */
static void valid_cols(const taas_conv2d_shape *s, int ow, int kj, int *j0, int *j1) {
    int lo = s->pw - kj, hi = s->w + s->pw - kj;  /* need lo <= j*sw < hi */
    *j0 = lo > 0 ? (lo + s->sw - 1) / s->sw : 0;
    *j1 = hi > 0 ? (hi + s->sw - 1) / s->sw : 0;
    if (*j1 > ow) *j1 = ow;
    if (*j0 > *j1) *j0 = *j1;
}

/* col (C*KH*KW, OH*OW) from one image (C,H,W), its rows ld floats apart (OH*OW alone, more
 * where several samples' columns lie side by side); zeros where the window hits padding. */
TAAS_VEC static void im2col(float *col, const float *img, const taas_conv2d_shape *s, int oh, int ow, size_t ld) {
    for (int c = 0; c < s->c; c++)
        for (int ki = 0; ki < s->kh; ki++)
            for (int kj = 0; kj < s->kw; kj++) {
                float *row = col + ((size_t)(c * s->kh + ki) * s->kw + kj) * ld;
                const float *plane = img + (size_t)c * s->h * s->w;
                int j0, j1;
                valid_cols(s, ow, kj, &j0, &j1);
                for (int i = 0; i < oh; i++) {
                    float *r = row + (size_t)i * ow;
                    int y = i * s->sh - s->ph + ki;
                    if (y < 0 || y >= s->h) {
                        for (int j = 0; j < ow; j++) r[j] = 0.0f;
                        continue;
                    }
                    const float *in = plane + (size_t)y * s->w + kj - s->pw;
                    for (int j = 0; j < j0; j++) r[j] = 0.0f;
                    if (s->sw == 1) {
#pragma omp simd
                        for (int j = j0; j < j1; j++) r[j] = in[j];
                    } else {
                        for (int j = j0; j < j1; j++) r[j] = in[(size_t)j * s->sw];
                    }
                    for (int j = j1; j < ow; j++) r[j] = 0.0f;
                }
            }
}

/* img (C,H,W) = sum of the col entries that map to each pixel (written); col's rows ld
 * floats apart, as im2col's. */
TAAS_VEC static void col2im(float *img, const float *col, const taas_conv2d_shape *s, int oh, int ow, size_t ld) {
    memset(img, 0, sizeof(float) * (size_t)s->c * s->h * s->w);
    for (int c = 0; c < s->c; c++)
        for (int ki = 0; ki < s->kh; ki++)
            for (int kj = 0; kj < s->kw; kj++) {
                const float *row = col + ((size_t)(c * s->kh + ki) * s->kw + kj) * ld;
                float *plane = img + (size_t)c * s->h * s->w;
                int j0, j1;
                valid_cols(s, ow, kj, &j0, &j1);
                for (int i = 0; i < oh; i++) {
                    int y = i * s->sh - s->ph + ki;
                    if (y < 0 || y >= s->h) continue;
                    const float *r = row + (size_t)i * ow;
                    float *out = plane + (size_t)y * s->w + kj - s->pw;
                    if (s->sw == 1) {
#pragma omp simd
                        for (int j = j0; j < j1; j++) out[j] += r[j];
                    } else {
                        for (int j = j0; j < j1; j++) out[(size_t)j * s->sw] += r[j];
                    }
                }
            }
}

/* y (OC, L) += b per row (b may be NULL), then max(y, 0) with relu */
TAAS_VEC static void bias_relu(float *y, const float *b, int oc, int l, int relu) {
    for (int o = 0; o < oc; o++) {
        float *r = y + (size_t)o * l, v = b ? b[o] : 0.0f;
        if (relu) {
#pragma omp simd
            for (int p = 0; p < l; p++) r[p] = r[p] + v > 0.0f ? r[p] + v : 0.0f;
        } else if (b) {
#pragma omp simd
            for (int p = 0; p < l; p++) r[p] += v;
        }
    }
}

/* out = dy where the ReLU's output y is positive, else 0 (n floats) */
TAAS_VEC static void relu_mask(float *out, const float *dy, const float *y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* db (OC) += row sums of dy (OC, L); each row summed in float, in a fixed order. */
TAAS_VEC static void add_row_sums(float *db, const float *dy, int oc, int l) {
    for (int o = 0; o < oc; o++) {
        const float *r = dy + (size_t)o * l;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int p = 0; p < l; p++) acc += r[p];
        db[o] += acc;
    }
}

static int clamp_threads(int nthreads, int n) {
    if (nthreads < 1) nthreads = 1;
    return nthreads > n ? n : nthreads;
}

/* A 1x1 convolution with stride 1 and no padding multiplies the image itself. */
static int col_is_input(const taas_conv2d_shape *s) {
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->ph == 0 && s->pw == 0;
}

/* Samples [n0, n0 + m) through one product: their columns side by side in col (K, m*L),
 * y's (OC, m*L) into out, then each sample's block of columns to its place in y. */
static void forward_samples(float *y, const float *x, const float *w, const float *b, const taas_conv2d_shape *s,
                            float *mine, int n0, int m, int relu) {
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s), l = oh * ow, k = s->c * s->kh * s->kw;
    size_t ld = (size_t)m * l, in = (size_t)s->c * s->h * s->w;
    float *col = mine, *out = mine + (size_t)k * ld;
    for (int j = 0; j < m; j++) im2col(col + (size_t)j * l, x + (n0 + j) * in, s, oh, ow, ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->oc, (int)ld, k, 1.0f, w, k, col, (int)ld, 0.0f, out,
                (int)ld);
    for (int j = 0; j < m; j++) {
        float *yn = y + (size_t)(n0 + j) * s->oc * l;
        for (int o = 0; o < s->oc; o++) memcpy(yn + (size_t)o * l, out + o * ld + (size_t)j * l, sizeof(float) * l);
        bias_relu(yn, b, s->oc, l, relu);
    }
}

/* A forward, or one of Winograd's gradients, that runs in products of several samples */
enum { PRODUCT_SAMPLES, PRODUCT_WINOGRAD, PRODUCT_WINOGRAD_DX, PRODUCT_WINOGRAD_DW };
typedef struct product {
    int what;
    float *out;
    const float *in, *w, *b, *mask;  /* w: the weights, Winograd's transforms of them, or x for dw */
    const taas_conv2d_shape *s;
    int relu;
    int db;  /* PRODUCT_WINOGRAD_DW: db's sums too */
} product;

/* A slice of the batch a thread (backward's slices), each slice in products of `m` samples,
 * the last of a slice shorter. The weight gradient sums into the slice's own dw and db. */
static void products(product p, int m, float *slices, size_t per, int nthreads) {
    int n = p.s->n, nt = clamp_threads(nthreads, n), q = n / nt, r = n % nt;
    size_t work = work_floats(p.s), dwsz = dw_floats(p.s);
#pragma omp parallel num_threads(nt)
    for (int t = omp_get_thread_num(); t < nt; t += omp_get_num_threads()) {
        int lo = t * q + (t < r ? t : r), hi = lo + q + (t < r);
        float *mine = slices + (size_t)t * per, *dwt = mine + work, *dbt = dwt + dwsz;
        if (p.what == PRODUCT_WINOGRAD_DW) memset(dwt, 0, sizeof(float) * (dwsz + (size_t)p.s->oc));
        for (int n0 = lo; n0 < hi; n0 += m) {
            int k = hi - n0 < m ? hi - n0 : m;
            switch (p.what) {
            case PRODUCT_SAMPLES: forward_samples(p.out, p.in, p.w, p.b, p.s, mine, n0, k, p.relu); break;
            case PRODUCT_WINOGRAD: taas_conv_winograd_forward(p.out, p.in, p.w, p.b, p.s, mine, n0, k, p.relu); break;
            case PRODUCT_WINOGRAD_DX: taas_conv_winograd_input_grad(p.out, p.in, p.mask, p.w, p.s, mine, n0, k); break;
            default:
                taas_conv_winograd_weight_grad(dwt, p.db ? dbt : NULL, p.in, p.mask, p.w, p.s, mine, n0, k);
                break;
            }
        }
    }
}

/* Winograd's weight gradient: each slice's dU and db, added in slice order; dw += G^T dU G
 * once */
static void winograd_weight_grad(float *dw, float *db, const float *dy, const float *relu_y, const float *x,
                                 const taas_conv2d_shape *s, float *slices, int nthreads) {
    size_t per = per_thread(s), work = work_floats(s), dwsz = dw_floats(s);
    products((product){PRODUCT_WINOGRAD_DW, NULL, dy, x, NULL, relu_y, s, 0, db != NULL},
             taas_conv_winograd_samples(s), slices, per, nthreads);
    int nt = clamp_threads(nthreads, s->n);
    taas_conv_winograd_weight_grad_finish(dw, slices + work, per, nt, s, nthreads);
    for (int t = 0; t < nt && db; t++)  /* thread order, as the other paths */
        for (int o = 0; o < s->oc; o++) db[o] += slices[(size_t)t * per + work + dwsz + o];
}

static void forward(float *y, const float *x, const float *w, const float *b,
                    const taas_conv2d_shape *s, float *scratch, int nthreads, int relu) {
    taas_blas_setup();
    taas_conv2d_shape sg = group_shape(s);
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s), l = oh * ow, groups = taas_conv2d_groups(s);
    int k = sg.c * s->kh * s->kw, direct = use_direct(s), gs = samples_per_product(s);
    size_t per = per_thread(s), in = (size_t)s->c * s->h * s->w, in_g = (size_t)sg.c * s->h * s->w;
    size_t w_g = (size_t)sg.oc * k, out_g = (size_t)sg.oc * l;
    float *packed = scratch, *slices = scratch + shared_floats(s);
    if (use_winograd(s)) {
        taas_conv_winograd_weights(packed, w, s, 0, nthreads);
        if (use_grouped(s)) {
            taas_conv_winograd_forward_grouped(y, x, packed, b, s, slices, relu, nthreads);
            return;
        }
        products((product){PRODUCT_WINOGRAD, y, x, packed, b, NULL, s, relu, 0}, taas_conv_winograd_samples(s), slices,
                 per, nthreads);
        return;
    }
    if (direct) taas_conv_direct_pack_forward(packed, w, s);
    if (gs > 1) {
        products((product){PRODUCT_SAMPLES, y, x, w, b, NULL, s, relu, 0}, gs, slices, per, nthreads);
        return;
    }
#pragma omp parallel for num_threads(clamp_threads(nthreads, s->n)) schedule(static)
    for (int n = 0; n < s->n; n++) {
        float *mine = slices + (size_t)omp_get_thread_num() * per, *yn = y + (size_t)n * s->oc * l;
        if (direct) {
            taas_conv_direct_forward(yn, x + n * in, packed, b, s, mine, relu);
            continue;
        }
        for (int g = 0; g < groups; g++) {
            const float *col = x + n * in + g * in_g;
            if (!col_is_input(s)) {
                im2col(mine, col, &sg, oh, ow, (size_t)l);
                col = mine;
            }
            /* group g of y_n (OC/G, L) = its rows of w (OC/G, K) * col (K, L) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sg.oc, l, k, 1.0f, w + g * w_g, k, col,
                        l, 0.0f, yn + g * out_g, l);
        }
        bias_relu(yn, b, s->oc, l, relu);
    }
}

void taas_conv2d_forward(float *y, const float *x, const float *w, const float *b,
                         const taas_conv2d_shape *s, float *scratch, int nthreads) {
    forward(y, x, w, b, s, scratch, nthreads, 0);
}

void taas_conv2d_relu_forward(float *y, const float *x, const float *w, const float *b,
                              const taas_conv2d_shape *s, float *scratch, int nthreads) {
    forward(y, x, w, b, s, scratch, nthreads, 1);
}

/* Samples [n0, n0 + m) through one product each for dw and dx (forward_samples's layout):
 * their (masked) output gradients side by side in dyc (OC, m*L), their columns in col. */
static void backward_samples(float *dx, float *dwt, float *dbt, const float *dy, const float *relu_y,
                             const float *x, const float *w, const taas_conv2d_shape *s, float *mine, int n0,
                             int m) {
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s), l = oh * ow, k = s->c * s->kh * s->kw;
    size_t ld = (size_t)m * l, in = (size_t)s->c * s->h * s->w, out = (size_t)s->oc * l;
    float *col = mine, *dyc = mine + (size_t)k * ld;
    for (int j = 0; j < m; j++) {
        const float *dyn = dy + (n0 + j) * out, *yn = relu_y ? relu_y + (n0 + j) * out : NULL;
        for (int o = 0; o < s->oc; o++) {
            float *to = dyc + o * ld + (size_t)j * l;
            if (yn) relu_mask(to, dyn + (size_t)o * l, yn + (size_t)o * l, (size_t)l);
            else memcpy(to, dyn + (size_t)o * l, sizeof(float) * l);
        }
    }
    if (dbt) add_row_sums(dbt, dyc, s->oc, (int)ld);
    if (dwt) {
        for (int j = 0; j < m; j++) im2col(col + (size_t)j * l, x + (n0 + j) * in, s, oh, ow, ld);
        /* dw_t (OC, K) += dyc (OC, mL) * col^T (mL, K) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->oc, k, (int)ld, 1.0f, dyc, (int)ld, col, (int)ld,
                    1.0f, dwt, k);
    }
    if (!dx) return;
    /* dcol (K, mL) = w^T (K, OC) * dyc (OC, mL), then scattered back to each sample's pixels */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, (int)ld, s->oc, 1.0f, w, k, dyc, (int)ld, 0.0f, col,
                (int)ld);
    for (int j = 0; j < m; j++) col2im(dx + (n0 + j) * in, col + (size_t)j * l, s, oh, ow, ld);
}

/* relu_y: the fused ReLU's output, whose sign masks dy; NULL without one */
static void backward(float *dx, float *dw, float *db, const float *dy, const float *relu_y,
                     const float *x, const float *w, const taas_conv2d_shape *s, float *scratch,
                     int nthreads) {
    taas_blas_setup();
    if (use_winograd(s) && (dx || dw)) {
        float *slices = scratch + shared_floats(s);
        int grouped = use_grouped(s);
        if (dw && grouped) taas_conv_winograd_weight_grad_grouped(dw, db, dy, relu_y, x, s, scratch, slices, nthreads);
        else if (dw) winograd_weight_grad(dw, db, dy, relu_y, x, s, slices, nthreads);
        else if (db) backward(NULL, NULL, db, dy, relu_y, x, w, s, scratch, nthreads);
        if (!dx) return;
        taas_conv_winograd_weights(scratch, w, s, 1, nthreads);
        if (grouped) {
            taas_conv_winograd_input_grad_grouped(dx, dy, relu_y, scratch, s, slices, nthreads);
            return;
        }
        products((product){PRODUCT_WINOGRAD_DX, dx, dy, scratch, NULL, relu_y, s, 0, 0},
                 taas_conv_winograd_samples(s), slices, per_thread(s), nthreads);
        return;
    }
    taas_conv2d_shape sg = group_shape(s);
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s), l = oh * ow, groups = taas_conv2d_groups(s);
    int k = sg.c * s->kh * s->kw, direct = use_direct(s), gs = samples_per_product(s);
    size_t wsz = (size_t)s->oc * k, dwsz = dw_floats(s), per = per_thread(s), work = work_floats(s);
    size_t in = (size_t)s->c * s->h * s->w, out = (size_t)s->oc * l;
    size_t in_g = (size_t)sg.c * s->h * s->w, w_g = (size_t)sg.oc * k, out_g = (size_t)sg.oc * l;
    float *packed = scratch, *slices = scratch + shared_floats(s);
    int nt = clamp_threads(nthreads, s->n);
    if (direct && dx) taas_conv_direct_pack_backward(packed, w, s);
    /* nt slices of the batch, each summed into its own dw_t in a fixed order: the team
     * OpenMP gives (OMP_DYNAMIC or OMP_THREAD_LIMIT may make it smaller) takes them in turn,
     * so the sums never depend on how many threads came */
    int q = s->n / nt, r = s->n % nt;
#pragma omp parallel num_threads(nt)
    for (int t = omp_get_thread_num(); t < nt; t += omp_get_num_threads()) {
        float *mine = slices + (size_t)t * per;
        float *dwt = mine + work, *dbt = dwt + dwsz, *masked = mine + col_floats(s);
        memset(dwt, 0, sizeof(float) * (dwsz + (size_t)s->oc));
        int lo = t * q + (t < r ? t : r), hi = lo + q + (t < r);
        if (gs > 1) {
            for (int n0 = lo; n0 < hi; n0 += gs)
                backward_samples(dx, dw ? dwt : NULL, db ? dbt : NULL, dy, relu_y, x, w, s, mine, n0,
                                 hi - n0 < gs ? hi - n0 : gs);
            continue;
        }
        for (int n = lo; n < hi; n++) {
            const float *dyn = dy + n * out;
            if (direct) {
                taas_conv_direct_backward(dx ? dx + n * in : NULL, dw ? dwt : NULL, db ? dbt : NULL, dyn,
                                          relu_y ? relu_y + n * out : NULL, x + n * in, packed, s, mine);
                continue;
            }
            if (relu_y) {
                relu_mask(masked, dyn, relu_y + n * out, out);
                dyn = masked;
            }
            if (db) add_row_sums(dbt, dyn, s->oc, l);
            for (int g = 0; g < groups; g++) {
                const float *dyg = dyn + g * out_g, *wg = w + g * w_g;
                if (dw) {
                    const float *xg = x + n * in + g * in_g;
                    if (!col_is_input(s)) {
                        im2col(mine, xg, &sg, oh, ow, (size_t)l);
                        xg = mine;
                    }
                    /* group g's rows of dw_t (OC/G, K) += dy_n's (OC/G, L) * col^T (L, K) */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sg.oc, k, l, 1.0f, dyg, l, xg, l,
                                1.0f, dwt + g * w_g, k);
                }
                if (!dx) continue;
                float *dxg = dx + n * in + g * in_g;
                /* dcol (K, L) = w_g^T (K, OC/G) * dy_n's (OC/G, L), then scattered back to pixels */
                if (col_is_input(s)) {
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, l, sg.oc, 1.0f, wg, k, dyg, l,
                                0.0f, dxg, l);
                } else {
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, l, sg.oc, 1.0f, wg, k, dyg, l,
                                0.0f, mine, l);
                    col2im(dxg, mine, &sg, oh, ow, (size_t)l);
                }
            }
        }
    }
    /* thread order, whatever finished first */
    for (int t = 0; t < nt; t++) {
        const float *dwt = slices + (size_t)t * per + work, *dbt = dwt + dwsz;
        if (dw && direct) taas_conv_direct_add_dw(dw, dwt, s);
        else if (dw)
            for (size_t i = 0; i < wsz; i++) dw[i] += dwt[i];
        if (db)
            for (int o = 0; o < s->oc; o++) db[o] += dbt[o];
    }
}

void taas_conv2d_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, const taas_conv2d_shape *s, float *scratch,
                          int nthreads) {
    backward(dx, dw, db, dy, NULL, x, w, s, scratch, nthreads);
}

void taas_conv2d_relu_backward(float *dx, float *dw, float *db, const float *dy, const float *y,
                               const float *x, const float *w, const taas_conv2d_shape *s,
                               float *scratch, int nthreads) {
    backward(dx, dw, db, dy, y, x, w, s, scratch, nthreads);
}
