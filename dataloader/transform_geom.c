/* The pixel-moving kernels of the transforms: every crop, pad and flip is one remap through
 * row and column maps; ToTensor and Normalize are per-element. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "transform_ops.h"

size_t tx_elem_size(const tx_img *im) {
    return (!im->tensor && im->u8) ? 1 : sizeof(float);
}

size_t tx_count(const tx_img *im) {
    return (size_t)im->c * (size_t)im->h * (size_t)im->w;
}

void tx_replace(tx_img *im, tx_img *next) {
    if (im->owned) free(im->data);
    *im = *next;
    memset(next, 0, sizeof *next);
}

int tx_alloc(tx_img *im, int c, int h, int w, int tensor, int u8, float *dst) {
    memset(im, 0, sizeof *im);
    im->c = c;
    im->h = h;
    im->w = w;
    im->tensor = tensor;
    im->u8 = !tensor && u8;
    if (dst && tensor) {
        im->data = dst;
        return 0;
    }
    size_t n = tx_count(im) * tx_elem_size(im);
    im->data = malloc(n ? n : 1);
    im->owned = 1;
    return im->data ? 0 : -1;
}

int tx_pad_index(int i, int n, tx_padmode mode) {
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case TX_PAD_CONSTANT:
        return -1;
    case TX_PAD_EDGE:
        return i < 0 ? 0 : n - 1;
    case TX_PAD_REFLECT: {
        if (n == 1) return 0;
        long period = 2L * (n - 1);
        long j = ((long)i % period + period) % period;
        return (int)(j < n ? j : period - j);
    }
    case TX_PAD_SYMMETRIC: {
        long period = 2L * n;
        long j = ((long)i % period + period) % period;
        return (int)(j < n ? j : period - 1 - j);
    }
    }
    return -1;
}

static int remap_tensor(const tx_img *im, const int *rows, int oh, const int *cols, int ow,
                        const double *fill, tx_img *out) {
    const float *in = im->data;
    float *o = out->data;
    size_t plane = (size_t)im->h * im->w;
    for (int ch = 0; ch < im->c; ch++) {
        const float *src = in + ch * plane;
        float f = fill ? (float)fill[ch] : 0.0f;
        for (int y = 0; y < oh; y++, o += ow) {
            if (rows[y] < 0) {
                for (int x = 0; x < ow; x++) o[x] = f;
                continue;
            }
            const float *row = src + (size_t)rows[y] * im->w;
            for (int x = 0; x < ow; x++) o[x] = cols[x] < 0 ? f : row[cols[x]];
        }
    }
    return 0;
}

static int remap_u8(const tx_img *im, const int *rows, int oh, const int *cols, int ow,
                    const double *fill, tx_img *out) {
    const uint8_t *in = im->data;
    uint8_t *o = out->data;
    int c = im->c;
    uint8_t f[16];
    uint8_t *fv = c <= 16 ? f : malloc((size_t)c);
    if (!fv) return -1;
    for (int ch = 0; ch < c; ch++) fv[ch] = fill ? (uint8_t)fill[ch] : 0;
    for (int y = 0; y < oh; y++) {
        const uint8_t *row = rows[y] < 0 ? NULL : in + (size_t)rows[y] * im->w * c;
        if (row && c == 3) { /* RGB, a flip's or a crop's rows: no call per pixel */
            for (int x = 0; x < ow; x++, o += 3) {
                const uint8_t *p = cols[x] < 0 ? fv : row + (size_t)cols[x] * 3;
                o[0] = p[0];
                o[1] = p[1];
                o[2] = p[2];
            }
            continue;
        }
        for (int x = 0; x < ow; x++, o += c) {
            if (!row || cols[x] < 0)
                memcpy(o, fv, (size_t)c);
            else
                memcpy(o, row + (size_t)cols[x] * c, (size_t)c);
        }
    }
    if (fv != f) free(fv);
    return 0;
}

static int remap_f32_hwc(const tx_img *im, const int *rows, int oh, const int *cols, int ow,
                         const double *fill, tx_img *out) {
    const float *in = im->data;
    float *o = out->data;
    int c = im->c;
    for (int y = 0; y < oh; y++) {
        const float *row = rows[y] < 0 ? NULL : in + (size_t)rows[y] * im->w * c;
        for (int x = 0; x < ow; x++, o += c) {
            for (int ch = 0; ch < c; ch++) {
                if (!row || cols[x] < 0)
                    o[ch] = fill ? (float)fill[ch] : 0.0f;
                else
                    o[ch] = row[(size_t)cols[x] * c + ch];
            }
        }
    }
    return 0;
}

int tx_remap(tx_img *im, const int *rows, int oh, const int *cols, int ow, const double *fill,
             float *dst) {
    tx_img out;
    if (tx_alloc(&out, im->c, oh, ow, im->tensor, im->u8, dst) < 0) return -1;
    int rc;
    if (im->tensor)
        rc = remap_tensor(im, rows, oh, cols, ow, fill, &out);
    else if (im->u8)
        rc = remap_u8(im, rows, oh, cols, ow, fill, &out);
    else
        rc = remap_f32_hwc(im, rows, oh, cols, ow, fill, &out);
    if (rc < 0) {
        if (out.owned) free(out.data);
        return -1;
    }
    tx_replace(im, &out);
    return 0;
}

/* ToTensor of an RGB image through its tables (the channels' 256 floats, lstride apart): one
 * pass that reads each pixel once and writes the three planes; each row read backwards when
 * mirror is set (a horizontal flip). */
TX_VEC static void rgb_to_planes(const uint8_t *in, int h, int w, const float *lut, size_t lstride, int mirror,
                                 float *o) {
    const float *t0 = lut, *t1 = lut + lstride, *t2 = lut + 2 * lstride;
    size_t plane = (size_t)h * w;
    ptrdiff_t step = mirror ? -3 : 3;
    for (int y = 0; y < h; y++) {
        const uint8_t *p = in + ((size_t)y * w + (mirror ? (size_t)w - 1 : 0)) * 3;
        float *o0 = o + (size_t)y * w, *o1 = o0 + plane, *o2 = o1 + plane;
        for (int x = 0; x < w; x++, p += step) {
            o0[x] = t0[p[0]];
            o1[x] = t1[p[1]];
            o2[x] = t2[p[2]];
        }
    }
}

int tx_to_tensor(tx_img *im, const float *lut, int nlut, const float *mean, int nmean,
                 const float *std, int nstd, int mirror, float *dst) {
    tx_img out;
    if (tx_alloc(&out, im->c, im->h, im->w, 1, 0, dst) < 0) return -1;
    int c = im->c, h = im->h, w = im->w;
    size_t plane = (size_t)h * w;
    float *o = out.data;
    if (im->u8 && lut && c == 3) {
        rgb_to_planes(im->data, h, w, lut, nlut == 1 ? 0 : 256, mirror, o);
        tx_replace(im, &out);
        return 0;
    }
    /* pixel x of a row is read at first + x * step */
    ptrdiff_t step = mirror ? -c : c;
    for (int ch = 0; ch < c; ch++) {
        for (int y = 0; y < h; y++) {
            float *op = o + ch * plane + (size_t)y * w;
            size_t first = ((size_t)y * w + (mirror ? (size_t)w - 1 : 0)) * c + ch;
            if (im->u8) {
                const uint8_t *ip = (const uint8_t *)im->data + first;
                if (lut) {
                    const float *t = lut + (nlut == 1 ? 0 : (size_t)ch * 256);
                    for (int x = 0; x < w; x++) op[x] = t[ip[x * step]];
                } else {
                    for (int x = 0; x < w; x++) op[x] = (float)ip[x * step] / 255.0f;
                }
            } else {
                const float *ip = (const float *)im->data + first;
                if (mean) {
                    float m = mean[nmean == 1 ? 0 : ch], sd = std[nstd == 1 ? 0 : ch];
                    for (int x = 0; x < w; x++) op[x] = (ip[x * step] - m) / sd;
                } else {
                    for (int x = 0; x < w; x++) op[x] = ip[x * step];
                }
            }
        }
    }
    tx_replace(im, &out);
    return 0;
}

int tx_normalize(tx_img *im, const float *mean, int nmean, const float *std, int nstd, float *dst) {
    float *o = dst ? dst : im->data;
    const float *in = im->data;
    size_t plane = (size_t)im->h * im->w;
    for (int ch = 0; ch < im->c; ch++) {
        float m = mean[nmean == 1 ? 0 : ch], s = std[nstd == 1 ? 0 : ch];
        for (size_t i = ch * plane; i < (ch + 1) * plane; i++) o[i] = (in[i] - m) / s;
    }
    if (dst && dst != im->data) {
        if (im->owned) free(im->data);
        im->data = dst;
        im->owned = 0;
    }
    return 0;
}

int tx_resized_crop(tx_img *im, const int box[4], int oh, int ow, tx_interp mode, int antialias, float *dst) {
    int same = box[2] == oh && box[3] == ow;
    int *rows = malloc((size_t)box[2] * sizeof *rows), *cols = malloc((size_t)box[3] * sizeof *cols);
    int rc = -1;
    if (rows && cols) {
        for (int y = 0; y < box[2]; y++) rows[y] = box[0] + y;
        for (int x = 0; x < box[3]; x++) cols[x] = box[1] + x;
        rc = tx_remap(im, rows, box[2], cols, box[3], NULL, same ? dst : NULL);
    }
    free(rows);
    free(cols);
    if (rc < 0 || same) return rc;
    if (!im->tensor && im->u8) return tx_resize_pil(im, oh, ow, mode);
    return tx_resize_torch(im, oh, ow, mode, antialias, dst);
}
