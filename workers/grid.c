#include "grid.h"
#include "errnames.h"

#include <png.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A canvas larger than this is a mistake upstream (n is at most 256 cells of 160 px). */
#define MAX_PIXELS ((size_t)64 << 20)

int taas_grid_init(taas_grid *g, int w, int h, int c, unsigned char bg, taas_error *err) {
    memset(g, 0, sizeof *g);
    if (w <= 0 || h <= 0 || (c != 1 && c != 3) || (size_t)w * (size_t)h > MAX_PIXELS) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "cannot make a %d x %d picture with %d channels", w, h, c);
        taas_error_hint(err, "show fewer samples (n=...)");
        return -1;
    }
    size_t n = (size_t)w * (size_t)h * (size_t)c;
    g->px = malloc(n);
    if (!g->px) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a %d x %d picture", w, h);
        taas_error_hint(err, "show fewer samples (n=...)");
        return -1;
    }
    memset(g->px, bg, n);
    g->w = w;
    g->h = h;
    g->c = c;
    return 0;
}

void taas_grid_free(taas_grid *g) {
    if (!g) return;
    free(g->px);
    memset(g, 0, sizeof *g);
}

static void put(taas_grid *g, int x, int y, const unsigned char *v, int vc) {
    if (x < 0 || y < 0 || x >= g->w || y >= g->h) return;
    unsigned char *p = g->px + ((size_t)y * (size_t)g->w + (size_t)x) * (size_t)g->c;
    if (g->c == 1) {
        p[0] = v[0];
    } else {
        for (int k = 0; k < 3; k++) p[k] = v[vc == 1 ? 0 : k];
    }
}

void taas_grid_blit(taas_grid *g, int x, int y, const unsigned char *img, int ih, int iw, int ic, int up,
                    int down) {
    if (up < 1) up = 1;
    if (down < 1) down = 1;
    if (down > 1) {
        int oh = ih / down, ow = iw / down;
        for (int r = 0; r < oh; r++) {
            for (int col = 0; col < ow; col++) {
                unsigned char v[3];
                for (int k = 0; k < ic && k < 3; k++) {
                    unsigned sum = 0;
                    for (int dy = 0; dy < down; dy++)
                        for (int dx = 0; dx < down; dx++) {
                            size_t at = (size_t)(r * down + dy) * (size_t)iw + (size_t)(col * down + dx);
                            sum += img[at * (size_t)ic + (size_t)k];
                        }
                    unsigned cnt = (unsigned)(down * down);
                    v[k] = (unsigned char)((sum + cnt / 2) / cnt);
                }
                put(g, x + col, y + r, v, ic);
            }
        }
        return;
    }
    for (int r = 0; r < ih; r++) {
        for (int col = 0; col < iw; col++) {
            const unsigned char *v = img + ((size_t)r * (size_t)iw + (size_t)col) * (size_t)ic;
            for (int dy = 0; dy < up; dy++)
                for (int dx = 0; dx < up; dx++) put(g, x + col * up + dx, y + r * up + dy, v, ic);
        }
    }
}

int taas_text_width(const char *text) {
    size_t n = strlen(text);
    return n ? (int)n * TAAS_GLYPH_ADVANCE - 1 : 0;
}

void taas_grid_text(taas_grid *g, int x, int y, const char *text, unsigned char ink) {
    unsigned char v[1] = {ink};
    for (size_t i = 0; text[i]; i++) {
        int gx = x + (int)i * TAAS_GLYPH_ADVANCE;
        for (int cx = 0; cx < TAAS_GLYPH_W; cx++)
            for (int cy = 0; cy < TAAS_GLYPH_H; cy++)
                if (taas_glyph_pixel((unsigned char)text[i], cx, cy)) put(g, gx + cx, y + cy, v, 1);
    }
}

/* ---- PNG --------------------------------------------------------------------------- */

typedef struct membuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} membuf;

static void write_fn(png_structp png, png_bytep data, png_size_t len) {
    membuf *m = png_get_io_ptr(png);
    if (m->oom) return;
    if (m->n + len > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->n + len) cap *= 2;
        unsigned char *p = realloc(m->p, cap);
        if (!p) {
            m->oom = 1;
            return;
        }
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->n, data, len);
    m->n += len;
}

static void flush_fn(png_structp png) { (void)png; }

typedef struct png_fail {
    char why[256];
} png_fail;

static void error_fn(png_structp png, png_const_charp msg) {
    png_fail *f = png_get_error_ptr(png);
    if (f) strncpy(f->why, msg ? msg : "unknown", sizeof f->why - 1);
    png_longjmp(png, 1);
}

static void warn_fn(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

int taas_grid_png(const taas_grid *g, unsigned char **out, size_t *len, taas_error *err) {
    *out = NULL;
    *len = 0;
    png_fail fail;
    memset(&fail, 0, sizeof fail);
    membuf m;
    memset(&m, 0, sizeof m);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &fail, error_fn, warn_fn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory while encoding the PNG");
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(m.p);
        taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "libpng could not encode the picture: %s", fail.why);
        taas_error_hint(err, "this is a bug in taas-worker; please report it");
        return -1;
    }
    png_set_write_fn(png, &m, write_fn, flush_fn);
    png_set_IHDR(png, info, (png_uint_32)g->w, (png_uint_32)g->h, 8,
                 g->c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int r = 0; r < g->h; r++) png_write_row(png, g->px + (size_t)r * (size_t)g->w * (size_t)g->c);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    if (m.oom) {
        free(m.p);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory while encoding the PNG");
        return -1;
    }
    *out = m.p;
    *len = m.n;
    return 0;
}
