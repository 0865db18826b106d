/* Resampling. Two families, because torchvision resizes a PIL image and a tensor differently:
 * - uint8 HWC images before ToTensor: Pillow 9's Image.resize (libImaging/Resample.c): a
 *   separable convolution whose support grows with the downscale factor (so it always
 *   antialiases), coefficients normalised and rounded to 22-bit fixed point, horizontal pass
 *   then vertical, each rounded to uint8; nearest is its affine scale (Geometry.c).
 * - float images and tensors: torch.nn.functional.interpolate(align_corners=False) on CPU:
 *   nearest (floor(dst * in/out)), bilinear and bicubic (A = -0.75, clamped taps), and with
 *   antialias=True the same PIL-style convolution in float (bicubic with a = -0.5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transform_ops.h"

#define PIL_PRECISION_BITS (32 - 8 - 2)

typedef double (*filter_fn)(double);

static double filter_bilinear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_bicubic_pil(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* A line's taps: out[i] = sum_j in[bounds[2i] + j] * k[i * ksize + j], j < bounds[2i+1]. */
typedef struct taps {
    int ksize;
    int *bounds;
    double *k;
} taps;

/* NULLs them: a failed taps_pil frees, and its caller frees again at the end. */
static void taps_free(taps *t) {
    free(t->bounds);
    free(t->k);
    t->bounds = NULL;
    t->k = NULL;
}

/* Pillow's precompute_coeffs: the source span [in0, in1) of a line of in pixels onto out. */
static int taps_pil(int in, double in0, double in1, int out, filter_fn f, double fsupport, taps *t) {
    double scale = (in1 - in0) / out, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = fsupport * filterscale;
    t->ksize = (int)ceil(support) * 2 + 1;
    t->k = calloc((size_t)out * t->ksize, sizeof *t->k);
    t->bounds = malloc((size_t)out * 2 * sizeof *t->bounds);
    if (!t->k || !t->bounds) {
        taps_free(t);
        return -1;
    }
    for (int xx = 0; xx < out; xx++) {
        double center = in0 + (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax;
        if (xmin < 0) xmin = 0;
        xmax = (int)(center + support + 0.5);
        if (xmax > in) xmax = in;
        xmax -= xmin;
        double *k = t->k + (size_t)xx * t->ksize;
        for (int x = 0; x < xmax; x++) {
            double w = f((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (int x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        t->bounds[2 * xx] = xmin;
        t->bounds[2 * xx + 1] = xmax;
    }
    return 0;
}

static int32_t *taps_fixed(const taps *t, int out) {
    size_t n = (size_t)out * t->ksize;
    int32_t *kk = malloc(n * sizeof *kk);
    if (!kk) return NULL;
    for (size_t i = 0; i < n; i++) {
        double v = t->k[i] * (1 << PIL_PRECISION_BITS);
        kk[i] = (int32_t)(t->k[i] < 0 ? -0.5 + v : 0.5 + v);
    }
    return kk;
}

/* A pass's taps in Pillow's fixed point (and as pairs for the AVX2 RGB pass, when that
 * runs), and the vertical pass's row of sums. */
typedef struct taas_taps_ctx {
    const taps *t;
    const int32_t *kk, *kp;
    int32_t *acc;
} taas_taps_ctx;

static uint8_t clip8(int v) {
    v >>= PIL_PRECISION_BITS; /* arithmetic shift: floor, as Pillow's table lookup */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The horizontal RGB pass with AVX2: a pixel's three channels and the next pixel's in one
 * vector, so that two taps take one multiply. Its coefficients, per output pixel, are pairs
 * of taps as 8 lanes: k[j] three times, k[j + 1] three times, two zeros (k beyond the taps:
 * 0). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TX_RGB_AVX2 1

static int32_t *taps_rgb_pairs(const taps *t, const int32_t *kk, int out) {
    int pairs = (t->ksize + 1) / 2;
    int32_t *kp = aligned_alloc(32, (size_t)out * pairs * 8 * sizeof *kp);
    if (!kp) return NULL;
    for (int xx = 0; xx < out; xx++) {
        int n = t->bounds[2 * xx + 1];
        for (int q = 0; q < pairs; q++)
            for (int lane = 0; lane < 8; lane++) {
                int j = 2 * q + (lane >= 3);
                kp[((size_t)xx * pairs + q) * 8 + lane] = lane < 6 && j < n ? kk[(size_t)xx * t->ksize + j] : 0;
            }
    }
    return kp;
}

/* Output pixel xx's sums of one RGB row: lanes 0-2 of the result, before rounding. */
__attribute__((target("avx2"))) static inline __m128i rgb_sums(const uint8_t *row, const taps *t, const int32_t *kp,
                                                               int pairs, int xx) {
    const __m256i fold = _mm256_setr_epi32(3, 4, 5, 3, 4, 5, 3, 4);
    int lo = t->bounds[2 * xx], n = t->bounds[2 * xx + 1];
    const uint8_t *p = row + (size_t)lo * 3;
    const __m256i *k = (const __m256i *)(kp + (size_t)xx * pairs * 8);
    __m256i acc = _mm256_setzero_si256();
    for (int q = 0; q < (n + 1) / 2; q++, p += 6) {
        __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(px, _mm256_load_si256(k + q)));
    }
    acc = _mm256_add_epi32(acc, _mm256_permutevar8x32_epi32(acc, fold)); /* lanes 0-2: both taps of a pair */
    const __m128i half = _mm_set1_epi32(1 << (PIL_PRECISION_BITS - 1));
    return _mm_srai_epi32(_mm_add_epi32(_mm256_castsi256_si128(acc), half), PIL_PRECISION_BITS);
}

/* Output pixels [x0, x1) of one RGB row, four at a time: their sums packed to bytes with
 * clip8's saturation (below 0 is 0, above 255 is 255) and stored as 12 bytes. Each load
 * takes 8 bytes (two pixels and two bytes more), up to 5 bytes past the row's last pixel: the
 * caller keeps the pixels whose reads would leave the buffer out of it. */
__attribute__((target("avx2"))) static void horiz_rgb_avx2(const uint8_t *row, uint8_t *o, const taps *t,
                                                           const int32_t *kp, int x0, int x1) {
    int pairs = (t->ksize + 1) / 2, xx = x0;
    const __m128i squeeze = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    for (; xx + 4 <= x1; xx += 4) {
        __m128i a = rgb_sums(row, t, kp, pairs, xx), b = rgb_sums(row, t, kp, pairs, xx + 1);
        __m128i c = rgb_sums(row, t, kp, pairs, xx + 2), d = rgb_sums(row, t, kp, pairs, xx + 3);
        __m128i v = _mm_packus_epi16(_mm_packus_epi32(a, b), _mm_packus_epi32(c, d));
        v = _mm_shuffle_epi8(v, squeeze);
        _mm_storel_epi64((__m128i *)(o + 3 * (size_t)xx), v);
        uint32_t w = (uint32_t)_mm_extract_epi32(v, 2);
        memcpy(o + 3 * (size_t)xx + 8, &w, 4);
    }
    for (; xx < x1; xx++) {
        __m128i v = rgb_sums(row, t, kp, pairs, xx);
        v = _mm_packus_epi16(_mm_packus_epi32(v, v), v);
        uint32_t w = (uint32_t)_mm_cvtsi128_si32(v);
        o[3 * xx] = (uint8_t)w;
        o[3 * xx + 1] = (uint8_t)(w >> 8);
        o[3 * xx + 2] = (uint8_t)(w >> 16);
    }
}
#endif

/* One 8-bit pass along x (horiz) or y of an HWC image with c channels. Integer sums are
 * exact in any order and with any instructions, so the loops are arranged for speed and
 * compiled for the CPU's vector width (TX_VEC): the horizontal pass keeps a pixel's
 * channels together, the vertical one adds whole rows. */
TX_VEC static void pil_pass(const uint8_t *in, int ih, int iw, int c, uint8_t *out, int oh, int ow,
                            const taas_taps_ctx *x, int horiz) {
    const taps *t = x->t;
    const int32_t *kk = x->kk;
    if (horiz) {
        for (int yy = 0; yy < oh; yy++) {
            const uint8_t *row = in + (size_t)yy * iw * c;
            uint8_t *o = out + (size_t)yy * ow * c;
#ifdef TX_RGB_AVX2
            if (c == 3 && x->kp) {
                /* the pixels whose reads would pass the buffer's end (on its last rows) go below */
                size_t room = (size_t)(oh - yy) * iw * 3;
                int end = ow;
                while (end > 0 &&
                       (size_t)(t->bounds[2 * (end - 1)] + 2 * ((t->bounds[2 * (end - 1) + 1] + 1) / 2 - 1)) * 3 + 8 > room)
                    end--;
                horiz_rgb_avx2(row, o, t, x->kp, 0, end);
                if (end == ow) continue;
                for (int xx = end; xx < ow; xx++) {
                    int lo = t->bounds[2 * xx], n = t->bounds[2 * xx + 1];
                    const int32_t *k = kk + (size_t)xx * t->ksize;
                    for (int ch = 0; ch < 3; ch++) {
                        int ss = 1 << (PIL_PRECISION_BITS - 1);
                        for (int j = 0; j < n; j++) ss += row[(size_t)(lo + j) * 3 + ch] * k[j];
                        o[(size_t)xx * 3 + ch] = clip8(ss);
                    }
                }
                continue;
            }
#endif
            for (int xx = 0; xx < ow; xx++) {
                int lo = t->bounds[2 * xx], n = t->bounds[2 * xx + 1];
                const int32_t *k = kk + (size_t)xx * t->ksize;
                const uint8_t *p = row + (size_t)lo * c;
                for (int ch = 0; ch < c; ch++) {
                    int ss = 1 << (PIL_PRECISION_BITS - 1);
                    for (int j = 0; j < n; j++) ss += p[(size_t)j * c + ch] * k[j];
                    o[(size_t)xx * c + ch] = clip8(ss);
                }
            }
        }
    } else {
        size_t len = (size_t)ow * c;
        int32_t *acc = x->acc;
        for (int yy = 0; yy < oh; yy++) {
            int lo = t->bounds[2 * yy], n = t->bounds[2 * yy + 1];
            const int32_t *k = kk + (size_t)yy * t->ksize;
            for (size_t i = 0; i < len; i++) acc[i] = 1 << (PIL_PRECISION_BITS - 1);
            for (int j = 0; j < n; j++) {
                const uint8_t *p = in + (size_t)(lo + j) * len;
                int32_t kj = k[j];
                for (size_t i = 0; i < len; i++) acc[i] += p[i] * kj;
            }
            uint8_t *o = out + (size_t)yy * len;
            for (size_t i = 0; i < len; i++) o[i] = clip8(acc[i]);
        }
    }
    (void)ih;
}

/* Pillow's ImagingScaleAffine: source column floor(x0 + (x + 0.5) * in/out), with the
 * position accumulated by repeated addition as Pillow does. */
static void pil_nearest_index(int in, int out, int *idx) {
    double a = (double)in / out, pos = a * 0.5;
    for (int x = 0; x < out; x++) {
        int v = pos < 0.0 ? -1 : (int)pos;
        idx[x] = v >= in ? in - 1 : v;
        pos += a;
    }
}

int tx_resize_pil(tx_img *im, int oh, int ow, tx_interp mode) {
    const double whole[4] = {0, 0, im->w, im->h};
    return tx_resize_pil_box(im, whole, oh, ow, mode);
}

int tx_resize_pil_box(tx_img *im, const double box[4], int oh, int ow, tx_interp mode) {
    int ih = im->h, iw = im->w, c = im->c;
    tx_img out;
    int whole = box[0] == 0 && box[1] == 0 && box[2] == iw && box[3] == ih;
    if (mode == TX_NEAREST && !whole) {
        /* nearest of a sub-pixel box: the pixel under each output centre */
        int *rows = malloc((size_t)oh * sizeof *rows), *cols = malloc((size_t)ow * sizeof *cols);
        int rc = -1;
        if (rows && cols) {
            for (int y = 0; y < oh; y++) {
                int v = (int)(box[1] + (y + 0.5) * (box[3] - box[1]) / oh);
                rows[y] = v < 0 ? 0 : v >= ih ? ih - 1 : v;
            }
            for (int x = 0; x < ow; x++) {
                int v = (int)(box[0] + (x + 0.5) * (box[2] - box[0]) / ow);
                cols[x] = v < 0 ? 0 : v >= iw ? iw - 1 : v;
            }
            rc = tx_remap(im, rows, oh, cols, ow, NULL, NULL);
        }
        free(rows);
        free(cols);
        return rc;
    }
    if (mode == TX_NEAREST) {
        int *rows = malloc((size_t)oh * sizeof *rows), *cols = malloc((size_t)ow * sizeof *cols);
        int rc = -1;
        if (rows && cols) {
            pil_nearest_index(ih, oh, rows);
            pil_nearest_index(iw, ow, cols);
            rc = tx_remap(im, rows, oh, cols, ow, NULL, NULL);
        }
        free(rows);
        free(cols);
        return rc;
    }
    filter_fn f = mode == TX_BICUBIC ? filter_bicubic_pil : filter_bilinear;
    double support = mode == TX_BICUBIC ? 2.0 : 1.0;
    int need_h = ow != iw || !whole, need_v = oh != ih || !whole;
    if (tx_alloc(&out, c, oh, ow, 0, 1, NULL) < 0) return -1;
    taps th = {0}, tv = {0};
    int32_t *kh = NULL, *kv = NULL;
    uint8_t *tmp = NULL;
    int rc = -1;
    if (taps_pil(iw, box[0], box[2], ow, f, support, &th) < 0 || taps_pil(ih, box[1], box[3], oh, f, support, &tv) < 0)
        goto done;
    kh = taps_fixed(&th, ow);
    kv = taps_fixed(&tv, oh);
    if (!kh || !kv) goto done;
    const uint8_t *src = im->data;
    if (need_h) {
        /* only the rows the vertical pass reads, as Pillow does; the values are the same */
        int first = tv.bounds[0];
        int last = tv.bounds[2 * (oh - 1)] + tv.bounds[2 * (oh - 1) + 1];
        if (!need_v) {
            first = 0;
            last = ih;
        }
        tmp = malloc((size_t)(last - first) * ow * c);
        if (!tmp) goto done;
        taas_taps_ctx xh = {&th, kh, NULL, NULL};
#ifdef TX_RGB_AVX2
        int32_t *kp = c == 3 && __builtin_cpu_supports("avx2") ? taps_rgb_pairs(&th, kh, ow) : NULL;
        xh.kp = kp; /* NULL (out of memory too): the plain loop */
#endif
        pil_pass(src + (size_t)first * iw * c, last - first, iw, c, tmp, last - first, ow, &xh, 1);
#ifdef TX_RGB_AVX2
        free(kp);
#endif
        for (int i = 0; i < oh; i++) tv.bounds[2 * i] -= first;
        src = tmp;
        if (!need_v) {
            memcpy(out.data, tmp, (size_t)oh * ow * c);
            rc = 0;
            goto done;
        }
    }
    if (need_v) {
        taas_taps_ctx xv = {&tv, kv, NULL, malloc((size_t)ow * c * sizeof(int32_t))};
        if (!xv.acc) goto done;
        pil_pass(src, 0, ow, c, out.data, oh, ow, &xv, 0);
        free(xv.acc);
    } else {
        memcpy(out.data, src, (size_t)oh * ow * c);
    }
    rc = 0;
done:
    taps_free(&th);
    taps_free(&tv);
    free(kh);
    free(kv);
    free(tmp);
    if (rc == 0)
        tx_replace(im, &out);
    else
        free(out.data);
    return rc;
}

/* ---- torch ------------------------------------------------------------------------ */

/* A float plane: element (y, x) at base[y * rs + x * ps]. */
typedef struct plane {
    const float *base;
    size_t rs, ps;
} plane;

static float px(const plane *p, int y, int x) {
    return p->base[(size_t)y * p->rs + (size_t)x * p->ps];
}

/* torch's area_pixel_compute_source_index for align_corners=False, in float. */
static float src_index(float scale, int dst, int cubic) {
    float s = scale * ((float)dst + 0.5f) - 0.5f;
    return (!cubic && s < 0.0f) ? 0.0f : s;
}

static void linear_taps(int in, int out, int *i0, int *i1, float *w0, float *w1) {
    float scale = (float)in / (float)out;
    for (int d = 0; d < out; d++) {
        float s = src_index(scale, d, 0);
        int a = (int)s;
        i0[d] = a;
        i1[d] = a + (a < in - 1 ? 1 : 0);
        w1[d] = s - (float)a;
        w0[d] = 1.0f - w1[d];
    }
}

static float cubic1(float x, float a) {
    return ((a + 2) * x - (a + 3)) * x * x + 1;
}

static float cubic2(float x, float a) {
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

static void cubic_taps(int in, int out, int *idx, float *w) {
    float scale = (float)in / (float)out;
    const float a = -0.75f;
    for (int d = 0; d < out; d++) {
        float s = src_index(scale, d, 1);
        float fl = floorf(s);
        int base = (int)fl;
        float t = s - fl;
        w[4 * d + 0] = cubic2(t + 1.0f, a);
        w[4 * d + 1] = cubic1(t, a);
        float t2 = 1.0f - t;
        w[4 * d + 2] = cubic1(t2, a);
        w[4 * d + 3] = cubic2(t2 + 1.0f, a);
        for (int j = 0; j < 4; j++) {
            int v = base - 1 + j;
            idx[4 * d + j] = v < 0 ? 0 : v > in - 1 ? in - 1 : v;
        }
    }
}

static void nearest_taps(int in, int out, int *idx) {
    float scale = (float)in / (float)out;
    for (int d = 0; d < out; d++) {
        int v;
        if (out == in) v = d;
        else if (out == 2 * in) v = d >> 1;
        else v = (int)floorf((float)d * scale);
        idx[d] = v < in - 1 ? v : in - 1;
    }
}

/* torch's _compute_indices_weights_aa: normalised float taps; bounds as in taps_pil. */
static int taps_aa(int in, int out, tx_interp mode, taps *t, float **wf) {
    double fsupport = mode == TX_BICUBIC ? 2.0 : 1.0;
    filter_fn f = mode == TX_BICUBIC ? filter_bicubic_pil : filter_bilinear;
    float scale = (float)in / (float)out;
    float support = scale >= 1.0f ? (float)fsupport * scale : (float)fsupport;
    float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
    t->ksize = (int)ceilf(support) * 2 + 1;
    t->k = NULL;
    t->bounds = malloc((size_t)out * 2 * sizeof *t->bounds);
    *wf = calloc((size_t)out * t->ksize, sizeof **wf);
    if (!t->bounds || !*wf) {
        free(t->bounds); /* and NULLed: the caller frees both again */
        free(*wf);
        t->bounds = NULL;
        *wf = NULL;
        return -1;
    }
    for (int i = 0; i < out; i++) {
        float center = scale * ((float)i + 0.5f);
        int xmin = (int)(center - support + 0.5f);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5f);
        if (xmax > in) xmax = in;
        int n = xmax - xmin;
        float *w = *wf + (size_t)i * t->ksize, total = 0.0f;
        for (int j = 0; j < n; j++) {
            w[j] = (float)f(((float)(j + xmin) - center + 0.5f) * invscale);
            total += w[j];
        }
        for (int j = 0; j < n && total != 0.0f; j++) w[j] /= total;
        t->bounds[2 * i] = xmin;
        t->bounds[2 * i + 1] = n;
    }
    return 0;
}

/* Antialiased resampling of one plane: horizontal pass into tmp (ih x ow), then vertical. */
static void aa_plane(const plane *in, int ih, int iw, float *out, size_t ors, size_t ops, int oh,
                     int ow, const taps *th, const float *wh, const taps *tv, const float *wv,
                     float *tmp) {
    (void)iw;
    for (int y = 0; y < ih; y++) {
        for (int x = 0; x < ow; x++) {
            int lo = th->bounds[2 * x], n = th->bounds[2 * x + 1];
            const float *w = wh + (size_t)x * th->ksize;
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += px(in, y, lo + j) * w[j];
            tmp[(size_t)y * ow + x] = s;
        }
    }
    for (int y = 0; y < oh; y++) {
        int lo = tv->bounds[2 * y], n = tv->bounds[2 * y + 1];
        const float *w = wv + (size_t)y * tv->ksize;
        for (int x = 0; x < ow; x++) {
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += tmp[(size_t)(lo + j) * ow + x] * w[j];
            out[(size_t)y * ors + (size_t)x * ops] = s;
        }
    }
}

int tx_resize_torch(tx_img *im, int oh, int ow, tx_interp mode, int antialias, float *dst) {
    int ih = im->h, iw = im->w, c = im->c;
    tx_img out;
    if (tx_alloc(&out, c, oh, ow, im->tensor, 0, dst) < 0) return -1;
    size_t nmax = (size_t)(oh > ow ? oh : ow);
    int *ia = malloc(4 * nmax * sizeof *ia), *ib = malloc(4 * nmax * sizeof *ib);
    float *wa = malloc(4 * nmax * sizeof *wa), *wb = malloc(4 * nmax * sizeof *wb);
    float *wa2 = malloc(nmax * sizeof *wa2), *wb2 = malloc(nmax * sizeof *wb2);
    int *ia2 = malloc(nmax * sizeof *ia2), *ib2 = malloc(nmax * sizeof *ib2);
    taps th = {0}, tv = {0};
    float *wh = NULL, *wv = NULL, *tmp = NULL;
    int rc = -1;
    if (!ia || !ib || !wa || !wb || !wa2 || !wb2 || !ia2 || !ib2) goto done;
    if (antialias) {
        if (taps_aa(iw, ow, mode, &th, &wh) < 0 || taps_aa(ih, oh, mode, &tv, &wv) < 0) goto done;
        tmp = malloc((size_t)ih * ow * sizeof *tmp);
        if (!tmp) goto done;
    } else if (mode == TX_BILINEAR) {
        linear_taps(ih, oh, ia, ia2, wa, wa2); /* rows */
        linear_taps(iw, ow, ib, ib2, wb, wb2); /* columns */
    } else if (mode == TX_BICUBIC) {
        cubic_taps(ih, oh, ia, wa);
        cubic_taps(iw, ow, ib, wb);
    } else {
        nearest_taps(ih, oh, ia);
        nearest_taps(iw, ow, ib);
    }
    for (int ch = 0; ch < c; ch++) {
        plane in;
        float *o;
        size_t ors, ops;
        if (im->tensor) {
            in = (plane){(const float *)im->data + (size_t)ch * ih * iw, (size_t)iw, 1};
            o = (float *)out.data + (size_t)ch * oh * ow;
            ors = (size_t)ow;
            ops = 1;
        } else {
            in = (plane){(const float *)im->data + ch, (size_t)iw * c, (size_t)c};
            o = (float *)out.data + ch;
            ors = (size_t)ow * c;
            ops = (size_t)c;
        }
        if (antialias) {
            aa_plane(&in, ih, iw, o, ors, ops, oh, ow, &th, wh, &tv, wv, tmp);
            continue;
        }
        for (int y = 0; y < oh; y++) {
            for (int x = 0; x < ow; x++) {
                float v;
                if (mode == TX_BILINEAR) {
                    float t0 = wb[x] * px(&in, ia[y], ib[x]) + wb2[x] * px(&in, ia[y], ib2[x]);
                    float t1 = wb[x] * px(&in, ia2[y], ib[x]) + wb2[x] * px(&in, ia2[y], ib2[x]);
                    v = wa[y] * t0 + wa2[y] * t1;
                } else if (mode == TX_BICUBIC) {
                    v = 0.0f;
                    for (int j = 0; j < 4; j++) {
                        float r = 0.0f;
                        for (int i = 0; i < 4; i++) r += wb[4 * x + i] * px(&in, ia[4 * y + j], ib[4 * x + i]);
                        v += wa[4 * y + j] * r;
                    }
                } else {
                    v = px(&in, ia[y], ib[x]);
                }
                o[(size_t)y * ors + (size_t)x * ops] = v;
            }
        }
    }
    rc = 0;
done:
    free(ia);
    free(ib);
    free(wa);
    free(wb);
    free(wa2);
    free(wb2);
    free(ia2);
    free(ib2);
    free(th.bounds);
    free(tv.bounds);
    free(wh);
    free(wv);
    free(tmp);
    if (rc == 0)
        tx_replace(im, &out);
    else if (out.owned)
        free(out.data);
    return rc;
}
