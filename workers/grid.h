/* show()'s picture: an 8-bit canvas the samples are copied onto, labels drawn with a
 * built-in 5x8 font, and its PNG encoding (libpng). */
#ifndef TAAS_GRID_H
#define TAAS_GRID_H

#include <stddef.h>

#include "error.h"

#define TAAS_GLYPH_W 5
#define TAAS_GLYPH_H 8
#define TAAS_GLYPH_ADVANCE 6   /* a glyph and one column of space */

/* 1 where glyph ch (printable ASCII; anything else draws '?') has ink at column x, row y. */
int taas_glyph_pixel(unsigned char ch, int x, int y);

typedef struct taas_grid {
    int w, h, c;          /* c: 1 (grey) or 3 (RGB) */
    unsigned char *px;    /* h * w * c bytes, rows top to bottom */
} taas_grid;

/* A w x h canvas filled with the grey level bg. -1 (TaasMemoryError) when too large. */
int taas_grid_init(taas_grid *g, int w, int h, int c, unsigned char bg, taas_error *err);
void taas_grid_free(taas_grid *g);

/* Copies an 8-bit HWC image (ic 1 or 3) with its top-left corner at (x, y): each pixel
 * repeated up x up times when up > 1, or each down x down block averaged when down > 1.
 * A grey image on an RGB canvas is spread over the three channels. Clipped to the canvas. */
void taas_grid_blit(taas_grid *g, int x, int y, const unsigned char *img, int ih, int iw,
                    int ic, int up, int down);

/* Width in pixels of text as taas_grid_text draws it. */
int taas_text_width(const char *text);
/* Draws text with its top-left corner at (x, y) in the grey level ink. */
void taas_grid_text(taas_grid *g, int x, int y, const char *text, unsigned char ink);

/* The canvas as a PNG file in memory (*out malloc'd, caller frees). */
int taas_grid_png(const taas_grid *g, unsigned char **out, size_t *len, taas_error *err);

#endif
