/* JPEG through libjpeg-turbo, from memory. libjpeg's default error handler prints and
 * calls exit(): ours records the reason and longjmps back, so a corrupt image is an error
 * for that sample. Decoding settings are libjpeg's defaults, which are PIL's (islow DCT,
 * fancy upsampling), so pixels match what torchvision reads. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "bounds.h"
#include "errnames.h"
#include "formats.h"

/* libjpeg's own working memory: a progressive image keeps all its coefficients (2 bytes a
 * pixel and component), which a 145-byte header can ask for; a baseline image needs a few
 * rows whatever its size. Past this the image is refused ("backing store not supported"). */
#define MAX_LIBJPEG_MEMORY (512L << 20)

typedef struct jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char why[JMSG_LENGTH_MAX];
} jerr;

static void on_error(j_common_ptr cinfo) {
    jerr *e = (jerr *)cinfo->err;
    e->mgr.format_message(cinfo, e->why);
    longjmp(e->jump, 1);
}

/* Warnings are ignored, except the end of data in the middle of the image: PIL refuses a
 * truncated JPEG too, and grey rows would otherwise train silently. */
static void on_message(j_common_ptr cinfo, int level) {
    jerr *e = (jerr *)cinfo->err;
    if (level < 0 && e->mgr.msg_code == JWRN_JPEG_EOF) {
        e->mgr.format_message(cinfo, e->why);
        snprintf(e->why + strlen(e->why), sizeof e->why - strlen(e->why), " (truncated JPEG)");
        longjmp(e->jump, 1);
    }
}

static int corrupt(taas_error *err, const char *why) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "corrupt JPEG: %s", why);
    taas_error_hint(err, "the image is damaged or is not a JPEG: check it with an image viewer, or rewrite it");
    return -1;
}

int taas_decode_jpeg(const unsigned char *p, size_t n, taas_image *img, taas_error *err) {
    memset(img, 0, sizeof *img);
    if (n < 3 || p[0] != 0xFF || p[1] != 0xD8) return corrupt(err, "it does not start with a JPEG SOI marker");
    struct jpeg_decompress_struct cinfo;
    jerr e;
    memset(&cinfo, 0, sizeof cinfo); /* so that a failing create leaves nothing to destroy */
    memset(&e, 0, sizeof e);
    unsigned char *volatile px = NULL;
    unsigned char *volatile row = NULL;
    cinfo.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = on_error;
    e.mgr.emit_message = on_message;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&cinfo);
        free(px);
        free(row);
        return corrupt(err, e.why[0] ? e.why : "libjpeg gave up");
    }
    jpeg_create_decompress(&cinfo);
    cinfo.mem->max_memory_to_use = MAX_LIBJPEG_MEMORY;
    jpeg_mem_src(&cinfo, p, (unsigned long)n);
    jpeg_read_header(&cinfo, TRUE);
    /* before jpeg_start_decompress, which allocates for the size the header declares
     * (found by tests/fuzz/fuzz_jpeg: tests/fuzz/regressions/jpeg/) */
    if ((size_t)cinfo.image_width * cinfo.image_height > TAAS_MAX_PIXELS) {
        snprintf(e.why, sizeof e.why, "the image is too large (%ux%u)", (unsigned)cinfo.image_width,
                 (unsigned)cinfo.image_height);
        longjmp(e.jump, 1);
    }
    int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    if (cmyk) cinfo.out_color_space = JCS_CMYK;
    else if (cinfo.jpeg_color_space != JCS_GRAYSCALE) cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    size_t w = cinfo.output_width, h = cinfo.output_height, inc = (size_t)cinfo.output_components;
    if (w * h > TAAS_MAX_PIXELS) {
        snprintf(e.why, sizeof e.why, "the image is too large (%zux%zu)", w, h);
        longjmp(e.jump, 1);
    }
    size_t outc = cmyk ? 3 : inc;
    px = malloc(w * h * outc);
    if (cmyk) row = malloc(w * 4);
    if (!px || (cmyk && !row)) {
        jpeg_destroy_decompress(&cinfo);
        free(px);
        free(row);
        return taas_fmt_oom(err, "a JPEG image");
    }
    while (cinfo.output_scanline < h) {
        size_t y = cinfo.output_scanline;
        JSAMPROW dst = cmyk ? row : px + y * w * outc;
        if (jpeg_read_scanlines(&cinfo, &dst, 1) != 1) {
            snprintf(e.why, sizeof e.why, "no data for row %zu", y);
            longjmp(e.jump, 1);
        }
        if (cmyk) {
            /* Adobe writes CMYK inverted: the stored values are already 255 - ink */
            unsigned char *o = px + y * w * 3;
            for (size_t x = 0; x < w; x++) {
                unsigned k = row[4 * x + 3];
                o[3 * x] = (unsigned char)((row[4 * x] * k + 127) / 255);
                o[3 * x + 1] = (unsigned char)((row[4 * x + 1] * k + 127) / 255);
                o[3 * x + 2] = (unsigned char)((row[4 * x + 2] * k + 127) / 255);
            }
        }
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    free(row);
    img->data = px;
    img->h = (int)h;
    img->w = (int)w;
    img->c = (int)outc;
    img->type = TAAS_PIX_U8;
    return 0;
}
