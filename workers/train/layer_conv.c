/* Conv2d by im2col + sgemm, one sample per OpenMP thread. Each thread owns a slice of the
 * caller's scratch: an im2col buffer, and in backward a private dw so threads never race. */
#include <string.h>
#include <cblas.h>
#include <omp.h>
#include "layers.h"

static size_t col_floats(const taas_conv2d_shape *s) {
    return (size_t)s->c * s->kh * s->kw * taas_conv2d_out_h(s) * taas_conv2d_out_w(s);
}

size_t taas_conv2d_scratch_floats(const taas_conv2d_shape *s, int nthreads) {
    if (nthreads < 1) nthreads = 1;
    size_t wsz = (size_t)s->oc * s->c * s->kh * s->kw;
    return (size_t)nthreads * (col_floats(s) + wsz);
}

/* col (C*KH*KW, OH*OW) from one image (C,H,W); zeros where the window hits padding. */
static void im2col(float *col, const float *img, const taas_conv2d_shape *s, int oh, int ow) {
    for (int c = 0; c < s->c; c++)
        for (int ki = 0; ki < s->kh; ki++)
            for (int kj = 0; kj < s->kw; kj++) {
                float *row = col + ((size_t)(c * s->kh + ki) * s->kw + kj) * oh * ow;
                const float *plane = img + (size_t)c * s->h * s->w;
                for (int i = 0; i < oh; i++) {
                    int y = i * s->sh - s->ph + ki;
                    for (int j = 0; j < ow; j++) {
                        int x = j * s->sw - s->pw + kj;
                        row[i * ow + j] = (y >= 0 && y < s->h && x >= 0 && x < s->w)
                                              ? plane[(size_t)y * s->w + x] : 0.0f;
                    }
                }
            }
}

/* img (C,H,W) = sum of col entries mapping to each pixel (written). */
static void col2im(float *img, const float *col, const taas_conv2d_shape *s, int oh, int ow) {
    memset(img, 0, sizeof(float) * (size_t)s->c * s->h * s->w);
    for (int c = 0; c < s->c; c++)
        for (int ki = 0; ki < s->kh; ki++)
            for (int kj = 0; kj < s->kw; kj++) {
                const float *row = col + ((size_t)(c * s->kh + ki) * s->kw + kj) * oh * ow;
                float *plane = img + (size_t)c * s->h * s->w;
                for (int i = 0; i < oh; i++) {
                    int y = i * s->sh - s->ph + ki;
                    if (y < 0 || y >= s->h) continue;
                    for (int j = 0; j < ow; j++) {
                        int x = j * s->sw - s->pw + kj;
                        if (x >= 0 && x < s->w) plane[(size_t)y * s->w + x] += row[i * ow + j];
                    }
                }
            }
}

static int clamp_threads(int nthreads, int n) {
    if (nthreads < 1) nthreads = 1;
    return nthreads > n ? n : nthreads;
}

/* When our threads each run an sgemm, OpenBLAS's own pool would fight them for the cores
 * (measured: conv backward 2.8x slower); single-threaded BLAS for the call's duration. */
static int blas_serial_begin(int nt) {
    int saved = openblas_get_num_threads();
    if (nt > 1 && saved > 1) openblas_set_num_threads(1);
    return saved;
}

static void blas_serial_end(int nt, int saved) {
    if (nt > 1 && saved > 1) openblas_set_num_threads(saved);
}

void taas_conv2d_forward(float *y, const float *x, const float *w, const float *b,
                         const taas_conv2d_shape *s, float *scratch, int nthreads) {
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s), l = oh * ow;
    int k = s->c * s->kh * s->kw;
    size_t per = col_floats(s) + (size_t)s->oc * k;
    int nt = clamp_threads(nthreads, s->n), saved = blas_serial_begin(nt);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int n = 0; n < s->n; n++) {
        float *col = scratch + (size_t)omp_get_thread_num() * per;
        float *yn = y + (size_t)n * s->oc * l;
        im2col(col, x + (size_t)n * s->c * s->h * s->w, s, oh, ow);
        for (int o = 0; o < s->oc; o++)
            for (int p = 0; p < l; p++) yn[(size_t)o * l + p] = b ? b[o] : 0.0f;
        /* y_n (OC, L) += w (OC, K) * col (K, L) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->oc, l, k, 1.0f, w, k, col, l,
                    1.0f, yn, l);
    }
    blas_serial_end(nt, saved);
}

void taas_conv2d_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, const taas_conv2d_shape *s, float *scratch,
                          int nthreads) {
    int oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s), l = oh * ow;
    int k = s->c * s->kh * s->kw;
    size_t wsz = (size_t)s->oc * k, per = col_floats(s) + wsz;
    int nt = clamp_threads(nthreads, s->n), saved = blas_serial_begin(nt);
    for (int t = 0; t < nt; t++) memset(scratch + t * per + col_floats(s), 0, sizeof(float) * wsz);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int n = 0; n < s->n; n++) {
        float *col = scratch + (size_t)omp_get_thread_num() * per;
        float *dwt = col + col_floats(s);
        const float *dyn = dy + (size_t)n * s->oc * l;
        if (dw) {
            im2col(col, x + (size_t)n * s->c * s->h * s->w, s, oh, ow);
            /* dw_t (OC, K) += dy_n (OC, L) * col^T (L, K) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->oc, k, l, 1.0f, dyn, l, col,
                        l, 1.0f, dwt, k);
        }
        if (dx) {
            /* dcol (K, L) = w^T (K, OC) * dy_n (OC, L), then scattered back to pixels */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, l, s->oc, 1.0f, w, k, dyn, l,
                        0.0f, col, l);
            col2im(dx + (size_t)n * s->c * s->h * s->w, col, s, oh, ow);
        }
    }
    blas_serial_end(nt, saved);
    if (dw)
        for (int t = 0; t < nt; t++) {
            const float *dwt = scratch + t * per + col_floats(s);
            for (size_t i = 0; i < wsz; i++) dw[i] += dwt[i];
        }
    if (db)
        for (int o = 0; o < s->oc; o++) {
            double acc = 0;
            for (int n = 0; n < s->n; n++) {
                const float *p = dy + ((size_t)n * s->oc + o) * l;
                for (int q = 0; q < l; q++) acc += p[q];
            }
            db[o] += (float)acc;
        }
}
