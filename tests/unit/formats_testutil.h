/* Fixtures for the dataset-format tests, written at test time into a temporary folder with
 * the real libraries (zlib, libpng, libjpeg) and small writers for IDX, .npy and tar.
 * Header-only (static functions) so that each test_formats*.c program includes it. */
#ifndef TAAS_FORMATS_TESTUTIL_H
#define TAAS_FORMATS_TESTUTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <jpeglib.h>
#include <png.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "buf.h"
#include "dataset.h"
#include "fetch.h"

/* ---- files --------------------------------------------------------------------------- */

static char FX_DIR[256];

static inline void fx_mkdtemp(void) {
    const char *t = getenv("TMPDIR");
    snprintf(FX_DIR, sizeof FX_DIR, "%s/taas-formats-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(FX_DIR)) {
        perror("mkdtemp");
        abort();
    }
}

static inline int fx_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void fx_rmtree(void) {
    if (FX_DIR[0]) nftw(FX_DIR, fx_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    FX_DIR[0] = '\0';
}

/* FX_DIR/rel, in a static ring of buffers so that a few can be used at once. */
static inline const char *fx_path(const char *rel) {
    static char ring[8][512];
    static int k;
    char *p = ring[k++ % 8];
    snprintf(p, 512, "%s/%s", FX_DIR, rel);
    return p;
}

static inline void fx_write(const char *rel, const void *data, size_t n) {
    const char *p = fx_path(rel);
    /* make the parent folders */
    char dir[512];
    snprintf(dir, sizeof dir, "%s", p);
    for (char *s = dir + strlen(FX_DIR) + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(dir, 0755);
            *s = '/';
        }
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(p);
        abort();
    }
}

static inline void fx_buf_write(const char *rel, taas_buf *b) {
    fx_write(rel, b->data, b->len);
}

/* ---- gzip ---------------------------------------------------------------------------- */

static inline void fx_gzip(const void *src, size_t n, taas_buf *out) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *dst = malloc(cap);
    z.next_in = (unsigned char *)src;
    z.avail_in = (uInt)n;
    z.next_out = dst;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
    taas_buf_add(out, (const char *)dst, z.total_out);
    deflateEnd(&z);
    free(dst);
}

/* ---- IDX ----------------------------------------------------------------------------- */

static inline void fx_be32(taas_buf *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    taas_buf_add(b, (const char *)x, 4);
}

/* Pixel (i, y, x) of the synthetic IDX images. */
static inline unsigned char fx_idx_px(size_t i, int y, int x) {
    return (unsigned char)((i * 31 + (size_t)y * 7 + (size_t)x * 3) & 0xff);
}

static inline void fx_idx_images(taas_buf *b, uint32_t n, uint32_t h, uint32_t w) {
    fx_be32(b, 0x803);
    fx_be32(b, n);
    fx_be32(b, h);
    fx_be32(b, w);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++) taas_buf_putc(b, (char)fx_idx_px(i, (int)y, (int)x));
}

static inline void fx_idx_labels(taas_buf *b, uint32_t n) {
    fx_be32(b, 0x801);
    fx_be32(b, n);
    for (uint32_t i = 0; i < n; i++) taas_buf_putc(b, (char)((i * 7) % 10));
}

/* ---- .npy ---------------------------------------------------------------------------- */

/* A .npy file of the given version (1, 2 or 3) with header text fields as given. */
static inline void fx_npy(taas_buf *b, int version, const char *descr, const char *fortran, const char *shape,
                   const void *data, size_t nbytes) {
    char dict[256];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape);
    size_t pre = version == 1 ? 10 : 12, hl = strlen(dict) + 1;
    size_t total = (pre + hl + 63) / 64 * 64;
    size_t pad = total - pre - hl;
    taas_buf_add(b, "\x93NUMPY", 6);
    taas_buf_putc(b, (char)version);
    taas_buf_putc(b, 0);
    size_t len = hl + pad;
    taas_buf_putc(b, (char)(len & 0xff));
    taas_buf_putc(b, (char)(len >> 8));
    if (version != 1) {
        taas_buf_putc(b, (char)(len >> 16));
        taas_buf_putc(b, (char)(len >> 24));
    }
    taas_buf_puts(b, dict);
    for (size_t i = 0; i < pad; i++) taas_buf_putc(b, ' ');
    taas_buf_putc(b, '\n');
    if (nbytes) taas_buf_add(b, data, nbytes);
}

/* ---- tar ----------------------------------------------------------------------------- */

enum { FX_USTAR, FX_GNU, FX_V7 };

static inline void fx_octal(char *f, size_t n, uint64_t v) {
    char tmp[32];   /* the field is n - 1 digits and a NUL; a wider value is cut, as tar would */
    snprintf(tmp, sizeof tmp, "%0*llo", (int)n - 1, (unsigned long long)v);
    memcpy(f, tmp, n - 1);
    f[n - 1] = '\0';
}

/* One header block; name must fit in 100 bytes (or in prefix + name for ustar). */
static inline void fx_tar_header(taas_buf *b, const char *name, const char *prefix, uint64_t size, char type, int flavour,
                          int base256) {
    unsigned char h[512];
    memset(h, 0, sizeof h);
    memcpy(h, name, strnlen(name, 100));
    fx_octal((char *)h + 100, 8, 0644);
    fx_octal((char *)h + 108, 8, 1000);
    fx_octal((char *)h + 116, 8, 1000);
    if (base256) {
        h[124] = 0x80;
        for (int i = 0; i < 8; i++) h[135 - i] = (unsigned char)(size >> (8 * i));
    } else {
        fx_octal((char *)h + 124, 12, size);
    }
    fx_octal((char *)h + 136, 12, 1700000000);
    h[156] = (unsigned char)type;
    if (flavour == FX_USTAR) {
        memcpy(h + 257, "ustar\0" "00", 8);
        if (prefix) memcpy(h + 345, prefix, strnlen(prefix, 155));
    } else if (flavour == FX_GNU) {
        memcpy(h + 257, "ustar  \0", 8);
    }
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    taas_buf_add(b, (const char *)h, 512);
}

static inline void fx_tar_pad(taas_buf *b, size_t n) {
    static const char zeros[512];
    if (n % 512) taas_buf_add(b, zeros, 512 - n % 512);
}

static inline void fx_tar_data(taas_buf *b, const void *data, size_t n) {
    if (n) taas_buf_add(b, data, n);
    fx_tar_pad(b, n);
}

/* A regular member, ustar. */
static inline void fx_tar_add(taas_buf *b, const char *name, const void *data, size_t n) {
    fx_tar_header(b, name, NULL, n, '0', FX_USTAR, 0);
    fx_tar_data(b, data, n);
}

static inline void fx_tar_add_str(taas_buf *b, const char *name, const char *text) {
    fx_tar_add(b, name, text, strlen(text));
}

/* A member with a long name, as pax ('x' record) or GNU ('L' entry) writes it. */
static inline void fx_tar_add_long(taas_buf *b, const char *name, const void *data, size_t n, int pax) {
    if (pax) {
        char rec[1200];
        size_t body = strlen(" path=\n") + strlen(name), len = body + 1;
        while (snprintf(NULL, 0, "%zu", len) + body != len) len++;
        snprintf(rec, sizeof rec, "%zu path=%s\n", len, name);
        fx_tar_header(b, "PaxHeaders/x", NULL, strlen(rec), 'x', FX_USTAR, 0);
        fx_tar_data(b, rec, strlen(rec));
        fx_tar_header(b, "truncated-name", NULL, n, '0', FX_USTAR, 0);
    } else {
        fx_tar_header(b, "././@LongLink", NULL, strlen(name) + 1, 'L', FX_GNU, 0);
        fx_tar_data(b, name, strlen(name) + 1);
        fx_tar_header(b, "truncated-name", NULL, n, '0', FX_GNU, 0);
    }
    fx_tar_data(b, data, n);
}

static inline void fx_tar_end(taas_buf *b) {
    static const char zeros[1024];
    taas_buf_add(b, zeros, 1024);
}

/* ---- PNG and JPEG writers ---------------------------------------------------------------- */

static inline void fx_png_write_fn(png_structp png, png_bytep data, png_size_t n) {
    taas_buf_add(png_get_io_ptr(png), (const char *)data, n);
}

static inline void fx_png_flush(png_structp png) {
    (void)png;
}

/* color: PNG_COLOR_TYPE_*; depth 8 or 16 (1..8 for grey/palette); rows given as packed
 * bytes (big-endian for 16-bit, as PNG stores them). */
static inline void fx_png(taas_buf *out, int w, int h, int color, int depth, const unsigned char *pixels, size_t rowbytes,
                   const png_color *palette, int npal, const unsigned char *trns, int ntrns, int interlace) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) abort();
    png_set_write_fn(png, out, fx_png_write_fn, fx_png_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (palette) png_set_PLTE(png, info, palette, npal);
    if (trns) png_set_tRNS(png, info, trns, ntrns, NULL);
    png_write_info(png, info);
    png_bytep *rows = malloc((size_t)h * sizeof *rows);
    for (int y = 0; y < h; y++) rows[y] = (png_bytep)pixels + (size_t)y * rowbytes;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
}

/* 8-bit image with c channels (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA). */
static inline void fx_png8(taas_buf *out, int w, int h, int c, const unsigned char *px) {
    static const int types[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                PNG_COLOR_TYPE_RGBA};
    fx_png(out, w, h, types[c], 8, px, (size_t)w * c, NULL, 0, NULL, 0, 0);
}

/* c channels (1 grey, 3 RGB); progressive: libjpeg's simple progression (several scans)
 * instead of one baseline scan. */
static inline void fx_jpeg_scans(taas_buf *out, int w, int h, int c, const unsigned char *px, int quality,
                                 int progressive) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    unsigned char *mem = NULL;
    unsigned long len = 0;
    jpeg_mem_dest(&ci, &mem, &len);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = c;
    ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    if (progressive) jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)px + (size_t)ci.next_scanline * w * c;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    taas_buf_add(out, (const char *)mem, len);
    free(mem);
}

static inline void fx_jpeg(taas_buf *out, int w, int h, int c, const unsigned char *px, int quality) {
    fx_jpeg_scans(out, w, h, c, px, quality, 0);
}

/* A smooth test picture (JPEG keeps it within a few levels where it does not wrap, which
 * it does not below 24x24 pixels): value of channel ch at (y, x). */
static inline unsigned char fx_pic(int y, int x, int ch, int seed) {
    return (unsigned char)((20 + y * 3 + x * 2 + ch * 30 + seed * 5) & 0xff);
}

static inline unsigned char *fx_pic_make(int w, int h, int c, int seed) {
    unsigned char *p = malloc((size_t)w * h * c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) p[((size_t)y * w + x) * c + ch] = fx_pic(y, x, ch, seed);
    return p;
}

/* ---- datasets ------------------------------------------------------------------------ */

static inline taas_fetcher *fx_fetcher(void) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = ""; /* the tests read their own files: nothing to cache */
    o.retries = 0;
    taas_error e;
    taas_error_clear(&e);
    taas_fetcher *f = taas_fetcher_new(&o, &e);
    if (!f) {
        fprintf(stderr, "taas_fetcher_new: %s: %s\n", e.ename, e.message);
        abort();
    }
    return f;
}

/* Opens the dataset a JSON text describes; NULL with err filled when it fails. */
static inline taas_dataset *fx_open(taas_fetcher *f, const char *json, taas_error *err) {
    json_error_t je;
    json_t *spec = json_loads(json, 0, &je);
    if (!spec) {
        fprintf(stderr, "bad test JSON %s: %s\n", json, je.text);
        abort();
    }
    taas_error_clear(err);
    taas_dataset *d = taas_dataset_open(spec, f, err);
    json_decref(spec);
    return d;
}

/* ---- programs that open specs with one fetcher --------------------------------------- */

/* A test program that defines FX_SPEC_TESTS before including this header gets its fetcher F
 * and its error E, the group's fx_setup and fx_teardown (a fresh FX_DIR and F, then both
 * gone), and open_ok and open_bad. With FX_OPEN_BAD_HINT_UTF8 defined as well, open_bad also
 * checks that the hint is valid UTF-8. */
#ifdef FX_SPEC_TESTS

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "utf8.h"

static taas_fetcher *F;
static taas_error E;

static int fx_setup(void **state) {
    (void)state;
    fx_mkdtemp();
    F = fx_fetcher();
    return 0;
}

static int fx_teardown(void **state) {
    (void)state;
    taas_fetcher_free(F);
    fx_rmtree();
    return 0;
}

static inline taas_dataset *open_ok(const char *json) {
    taas_dataset *d = fx_open(F, json, &E);
    if (!d) fail_msg("spec %s\nfailed: %s: %s (hint: %s)", json, E.ename, E.message, E.hint);
    return d;
}

/* The spec fails to open with ename, and the message contains each of the NULL-terminated
 * strings that follow; the hint says what to do. */
static inline void open_bad(const char *json, const char *ename, ...) {
    taas_dataset *d = fx_open(F, json, &E);
    if (d) {
        taas_dataset_free(d);
        fail_msg("spec %s\nwas accepted", json);
    }
    if (strcmp(E.ename, ename) != 0) fail_msg("spec %s\ngave %s: %s, wanted %s", json, E.ename, E.message, ename);
    va_list ap;
    va_start(ap, ename);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        if (!strstr(E.message, s)) fail_msg("spec %s\ngave: %s\nwhich lacks '%s'", json, E.message, s);
    va_end(ap);
    if (!E.hint[0]) fail_msg("spec %s\ngave no hint with: %s", json, E.message);
    assert_true(taas_utf8_valid(E.message, strlen(E.message)));
#ifdef FX_OPEN_BAD_HINT_UTF8
    assert_true(taas_utf8_valid(E.hint, strlen(E.hint)));
#endif
}

#endif /* FX_SPEC_TESTS */

#endif
