/* PNG through libpng, from memory. libpng reports errors by calling an error function that
 * must not return: ours records the reason and longjmps back here, so a corrupt image is an
 * error for that sample, never a crash or an exit. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "errnames.h"
#include "formats.h"

typedef struct png_src {
    const unsigned char *p;
    size_t n, pos;
    char why[200];
    char warning[200]; /* the last warning: libpng often says the detail there */
} png_src;

static void on_error(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    snprintf(s->why, sizeof s->why, "%s", msg);
    png_longjmp(png, 1);
}

/* Warnings alone are harmless (e.g. an unknown ancillary chunk); kept for the error that
 * may follow. */
static void on_warning(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    snprintf(s->warning, sizeof s->warning, "%s", msg);
}

static void on_read(png_structp png, png_bytep out, png_size_t len) {
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->pos) png_error(png, "unexpected end of data (truncated PNG)");
    memcpy(out, s->p + s->pos, len);
    s->pos += len;
}

static int corrupt(taas_error *err, const char *why, const char *warning) {
    if (warning && warning[0])
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "corrupt PNG: %s (%s)", why, warning);
    else
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "corrupt PNG: %s", why);
    taas_error_hint(err, "the image is damaged or is not a PNG: check it with an image viewer, or rewrite it");
    return -1;
}

int taas_decode_png(const unsigned char *p, size_t n, taas_image *img, taas_error *err) {
    memset(img, 0, sizeof *img);
    if (n < 8 || png_sig_cmp(p, 0, 8) != 0) return corrupt(err, "it does not start with the PNG signature", NULL);
    /* volatile: these change between setjmp and a longjmp back to it */
    png_src src = {p, n, 0, "", ""};
    unsigned char *volatile px = NULL;
    png_bytep *volatile rows = NULL;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
    if (!png) return taas_fmt_oom(err, "a PNG decoder");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return taas_fmt_oom(err, "a PNG decoder");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(px);
        free(rows);
        return corrupt(err, src.why[0] ? src.why : "libpng gave up", src.warning);
    }
    png_set_read_fn(png, &src, on_read);
    png_set_user_limits(png, 1u << 16, 1u << 16);
    /* An ancillary chunk may claim 2 GB (fuzz.png found an sPLT that did): libpng reads a
     * chunk it handles into a buffer of the claimed length, and its chunk limit below is
     * only a warning there. The pixels need none of them but tRNS, so libpng skips the
     * others as unknown chunks, reading through them without a buffer. */
    static const png_byte IGNORED[] = "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0"
                                      "sCAL\0sPLT\0sRGB\0tEXt\0tIME\0zTXt";
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, IGNORED, (int)(sizeof IGNORED / 5));
    png_set_chunk_malloc_max(png, (png_alloc_size_t)8 << 20);
    png_set_chunk_cache_max(png, 1000);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (depth == 16) png_set_strip_16(png); /* PIL keeps the high byte too */
    if (interlace != PNG_INTERLACE_NONE) png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int c = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if ((size_t)w * h > TAAS_MAX_PIXELS) png_error(png, "the image is too large");
    if (rowbytes != (size_t)w * (size_t)c) png_error(png, "unexpected row layout");
    px = malloc((size_t)h * rowbytes);
    rows = malloc((size_t)h * sizeof *rows);
    if (!px || !rows) {
        png_destroy_read_struct(&png, &info, NULL);
        free(px);
        free(rows);
        return taas_fmt_oom(err, "a PNG image");
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = px + (size_t)y * rowbytes;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    img->data = px;
    img->h = (int)h;
    img->w = (int)w;
    img->c = c;
    img->type = TAAS_PIX_U8;
    return 0;
}
