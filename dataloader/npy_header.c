/* NumPy's .npy format (versions 1, 2 and 3): the header dict, the dtypes taas reads, and
 * conversion of the little-endian elements to float32 or int64. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"
#include "utf8.h"

#define SUPPORTED "u1, u2, u4, u8, i1, i2, i4, i8, f4, f8 (little-endian or single-byte: '<' or '|')"

static int bad_header(const char *name, const char *what, taas_error *err) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: not a valid .npy file: %s", name, what);
    taas_error_hint(err, "write the array with numpy.save(path, array)");
    return -1;
}

typedef struct cursor {
    const char *p, *end;
} cursor;

static void ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(cursor *c, char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A Python string literal in ' or " quotes (no escapes in what numpy writes). */
static int string_lit(cursor *c, char *out, size_t cap) {
    ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return -1;
    char q = *c->p++;
    const char *s = c->p;
    while (c->p < c->end && *c->p != q) c->p++;
    if (c->p >= c->end) return -1;
    size_t n = (size_t)(c->p - s);
    c->p++;
    if (n >= cap) n = cap - 1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

static int word(cursor *c, const char *w) {
    ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

static int shape_tuple(cursor *c, taas_npy *h) {
    if (!eat(c, '(')) return -1;
    h->ndim = 0;
    for (;;) {
        if (eat(c, ')')) return 0;
        ws(c);
        uint64_t v = 0;
        int digits = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > ((uint64_t)1 << 48)) return -1;
            v = v * 10 + (uint64_t)(*c->p++ - '0');
            digits++;
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2's long suffix */
        if (!digits || h->ndim == 8) return -1;
        h->shape[h->ndim++] = v;
        if (!eat(c, ',')) return eat(c, ')') ? 0 : -1;
    }
}

static int dtype_of(const char *descr, const char *name, taas_npy *h, taas_error *err) {
    snprintf(h->descr, sizeof h->descr, "%s", descr);
    char q[48];
    taas_utf8_clip(q, sizeof q, descr, strlen(descr), 24);
    size_t n = strlen(descr);
    if (n == 3 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '>')) {
        char kind = descr[1];
        int size = descr[2] - '0';
        int known = (kind == 'u' || kind == 'i') ? (size == 1 || size == 2 || size == 4 || size == 8)
                    : kind == 'f'              ? (size == 4 || size == 8)
                                               : 0;
        if (known && descr[0] == '>' && size > 1) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: big-endian dtype '%s' is not supported (supported: %s)",
                           name, q, SUPPORTED);
            taas_error_hint(err, "save a little-endian copy: numpy.save(path, array.astype(array.dtype.newbyteorder('<')))");
            return -1;
        }
        if (known) {
            h->kind = kind;
            h->itemsize = size;
            return 0;
        }
    }
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: unsupported dtype '%s' (supported: %s)", name, q, SUPPORTED);
    taas_error_hint(err, "convert the array before saving it, e.g. numpy.save(path, array.astype('float32'))");
    return -1;
}

int taas_npy_parse(const unsigned char *p, size_t n, const char *name, taas_npy *h, size_t *need,
                   taas_error *err) {
    memset(h, 0, sizeof *h);
    if (n < 10 && need) {
        *need = 12;
        return 1;
    }
    if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return bad_header(name, "it does not start with the magic \\x93NUMPY", err);
    int major = p[6];
    size_t hlen, start;
    if (major == 1) {
        hlen = (size_t)p[8] | (size_t)p[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (n < 12) {
            if (need) {
                *need = 12;
                return 1;
            }
            return bad_header(name, "the file ends inside the header", err);
        }
        hlen = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
        start = 12;
    } else {
        char what[80];
        snprintf(what, sizeof what, "format version %d.%d (taas reads 1.0, 2.0 and 3.0)", major, p[7]);
        return bad_header(name, what, err);
    }
    if (hlen > ((size_t)1 << 24)) return bad_header(name, "the header length is implausible", err);
    if (n < start + hlen) {
        if (need) {
            *need = start + hlen;
            return 1;
        }
        return bad_header(name, "the file ends inside the header", err);
    }
    cursor c = {(const char *)p + start, (const char *)p + start + hlen};
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
    char descr[64] = "";
    if (!eat(&c, '{')) return bad_header(name, "the header is not a Python dict", err);
    while (!eat(&c, '}')) {
        char key[32];
        if (string_lit(&c, key, sizeof key) != 0 || !eat(&c, ':'))
            return bad_header(name, "the header dict is malformed", err);
        if (strcmp(key, "descr") == 0) {
            ws(&c);
            if (c.p < c.end && *c.p == '[') {
                taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                               "%s: unsupported dtype: a structured array (supported: %s)", name, SUPPORTED);
                taas_error_hint(err, "save a plain numeric array, one file for images and one for labels");
                return -1;
            }
            if (string_lit(&c, descr, sizeof descr) != 0) return bad_header(name, "descr is not a string", err);
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (word(&c, "True")) fortran = 1;
            else if (!word(&c, "False")) return bad_header(name, "fortran_order is neither True nor False", err);
            have_order = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (shape_tuple(&c, h) != 0) return bad_header(name, "shape is not a tuple of integers", err);
            have_shape = 1;
        } else {
            return bad_header(name, "the header has a key other than descr, fortran_order and shape", err);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return bad_header(name, "the header dict is malformed", err);
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return bad_header(name, "the header lacks descr, fortran_order or shape", err);
    if (dtype_of(descr, name, h, err) != 0) return -1;
    if (fortran && h->ndim > 1) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "%s: the array is in Fortran (column-major) order; taas reads C order only", name);
        taas_error_hint(err, "save a C-ordered copy: numpy.save(path, numpy.ascontiguousarray(array))");
        return -1;
    }
    uint64_t count = 1;
    for (int i = 0; i < h->ndim; i++) {
        if (h->shape[i] && count > (UINT64_MAX >> 4) / h->shape[i])
            return bad_header(name, "the shape is too large", err);
        count *= h->shape[i];
    }
    h->count = count;
    h->data_off = start + hlen;
    return 0;
}

/* Little-endian loads through memcpy: the elements need not be aligned. */
#define LOADER(T, fn) \
    static inline T fn(const unsigned char *src, size_t i) { \
        T v; \
        memcpy(&v, src + i * sizeof(T), sizeof(T)); \
        return v; \
    }
LOADER(uint16_t, ld_u16)
LOADER(int16_t, ld_i16)
LOADER(uint32_t, ld_u32)
LOADER(int32_t, ld_i32)
LOADER(uint64_t, ld_u64)
LOADER(int64_t, ld_i64)
LOADER(double, ld_f64)

void taas_npy_to_f32(const taas_npy *h, const unsigned char *src, size_t count, float *dst) {
    switch (h->kind << 8 | h->itemsize) {
    case 'u' << 8 | 1: for (size_t i = 0; i < count; i++) dst[i] = (float)src[i]; break;
    case 'i' << 8 | 1: for (size_t i = 0; i < count; i++) dst[i] = (float)(int8_t)src[i]; break;
    case 'u' << 8 | 2: for (size_t i = 0; i < count; i++) dst[i] = (float)ld_u16(src, i); break;
    case 'i' << 8 | 2: for (size_t i = 0; i < count; i++) dst[i] = (float)ld_i16(src, i); break;
    case 'u' << 8 | 4: for (size_t i = 0; i < count; i++) dst[i] = (float)ld_u32(src, i); break;
    case 'i' << 8 | 4: for (size_t i = 0; i < count; i++) dst[i] = (float)ld_i32(src, i); break;
    case 'u' << 8 | 8: for (size_t i = 0; i < count; i++) dst[i] = (float)ld_u64(src, i); break;
    case 'i' << 8 | 8: for (size_t i = 0; i < count; i++) dst[i] = (float)ld_i64(src, i); break;
    case 'f' << 8 | 4: memcpy(dst, src, count * sizeof(float)); break;
    case 'f' << 8 | 8: for (size_t i = 0; i < count; i++) dst[i] = (float)ld_f64(src, i); break;
    default: memset(dst, 0, count * sizeof *dst); break; /* taas_npy_parse admits no other dtype */
    }
}

/* Integer dtypes only: labels of another kind are refused before this. */
long long taas_npy_to_i64(const taas_npy *h, const unsigned char *src, size_t count, int64_t *dst) {
    if (h->kind == 'u' && h->itemsize == 8)
        for (size_t i = 0; i < count; i++)
            if (ld_u64(src, i) > (uint64_t)INT64_MAX) return (long long)i;
    switch (h->kind << 8 | h->itemsize) {
    case 'u' << 8 | 1: for (size_t i = 0; i < count; i++) dst[i] = src[i]; break;
    case 'i' << 8 | 1: for (size_t i = 0; i < count; i++) dst[i] = (int8_t)src[i]; break;
    case 'u' << 8 | 2: for (size_t i = 0; i < count; i++) dst[i] = ld_u16(src, i); break;
    case 'i' << 8 | 2: for (size_t i = 0; i < count; i++) dst[i] = ld_i16(src, i); break;
    case 'u' << 8 | 4: for (size_t i = 0; i < count; i++) dst[i] = ld_u32(src, i); break;
    case 'i' << 8 | 4: for (size_t i = 0; i < count; i++) dst[i] = ld_i32(src, i); break;
    case 'u' << 8 | 8: for (size_t i = 0; i < count; i++) dst[i] = (int64_t)ld_u64(src, i); break;
    case 'i' << 8 | 8: memcpy(dst, src, count * sizeof(int64_t)); break;
    default: memset(dst, 0, count * sizeof *dst); break;
    }
    return -1;
}

int taas_npy_decode_image(const unsigned char *p, size_t n, const char *name, taas_image *img, taas_error *err) {
    taas_npy h;
    if (taas_npy_parse(p, n, name, &h, NULL, err) != 0) return -1;
    if (h.ndim != 2 && h.ndim != 3) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: an image array must be (H, W) or (H, W, C), not %d-dimensional",
                       name, h.ndim);
        taas_error_hint(err, "save one image per .npy member, height first");
        return -1;
    }
    if (h.shape[0] == 0 || h.shape[1] == 0 || (h.ndim == 3 && h.shape[2] == 0) || h.shape[0] > 65536 ||
        h.shape[1] > 65536 || (h.ndim == 3 && h.shape[2] > 4096)) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: an image array must not be empty or huge", name);
        taas_error_hint(err, "save one image per .npy member, height first");
        return -1;
    }
    size_t bytes = (size_t)h.count * (size_t)h.itemsize;
    if (n - h.data_off < bytes) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: truncated .npy: %zu bytes of data, the header promises %zu",
                       name, n - h.data_off, bytes);
        taas_error_hint(err, "the file was cut short: write it again");
        return -1;
    }
    img->h = (int)h.shape[0];
    img->w = (int)h.shape[1];
    img->c = h.ndim == 3 ? (int)h.shape[2] : 1;
    if (h.kind == 'u' && h.itemsize == 1) {
        img->type = TAAS_PIX_U8;
        img->data = malloc(bytes);
        if (!img->data) return taas_fmt_oom(err, "an image");
        memcpy(img->data, p + h.data_off, bytes);
    } else {
        img->type = TAAS_PIX_F32;
        img->data = malloc((size_t)h.count * sizeof(float));
        if (!img->data) return taas_fmt_oom(err, "an image");
        taas_npy_to_f32(&h, p + h.data_off, h.count, img->data);
    }
    return 0;
}
