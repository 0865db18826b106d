/* JPEG through libjpeg-turbo, from memory. libjpeg's default error handler prints and
 * calls exit(): ours records the reason and longjmps back, so a corrupt image is an error
 * for that sample. Decoding settings are libjpeg's defaults, which are PIL's (islow DCT,
 * fancy upsampling), so pixels match what torchvision reads. */
#include <math.h>
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

/* The most bytes a cropped scanline starts before the box: jpeg_crop_scanline moves the start
 * back to an iMCU boundary (at most 32 pixels of 4 components at 1/1; one more column is
 * asked for). Beyond it a row is decoded aside and copied. */
#define MAX_LEAD_BYTES (33 * 4)

typedef struct jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char why[JMSG_LENGTH_MAX];
    unsigned char *px, *row; /* decode_box's buffers, freed by the handler's landing */
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

/* The scale and the rows and columns to decode for a hint's region: the largest denominator
 * (8, 4, 2) at which the region still has oh x ow pixels, and the region at that scale,
 * widened to whole pixels and, for a resize that reads around it, by the pixels its filter
 * reaches. 0 when the hint wants the whole image at full scale or no sane region. */
typedef struct jbox {
    int denom;
    int x0, y0, x1, y1; /* in the scaled image, [x0, x1) x [y0, y1) */
    double exact[4];    /* the region itself within those pixels: x0, y0, x1, y1 */
} jbox;

/* Scaled pixels a filter of the given support reads beyond a region edge, when span scaled
 * pixels become out: Pillow's support x max(1, span / out), plus one for its rounding of the
 * taps' bounds. */
static int reach(double support, double span, int out) {
    if (support <= 0) return 0;
    double scale = span / out;
    return (int)ceil(support * (scale > 1 ? scale : 1)) + 1;
}

static int plan_box(const taas_crop_hint *hint, int h, int w, jbox *jb) {
    taas_crop_want cw;
    memset(&cw, 0, sizeof cw);
    if (!hint || !hint->want(hint->ctx, h, w, &cw)) return 0;
    const double *b = cw.box;
    /* written so that a NaN fails */
    if (!(b[0] >= 0 && b[1] >= 0 && b[0] < b[2] && b[1] < b[3] && b[2] <= w && b[3] <= h && cw.oh >= 1 &&
          cw.ow >= 1 && cw.support >= 0 && cw.support <= 16))
        return 0;
    jb->denom = 1;
    for (int d = 8; d >= 2; d /= 2)
        if ((b[3] - b[1]) / d >= cw.oh && (b[2] - b[0]) / d >= cw.ow) {
            jb->denom = d;
            break;
        }
    int d = jb->denom, sh = (h + d - 1) / d, sw = (w + d - 1) / d; /* libjpeg's scaled size */
    double e[4] = {b[0] / d, b[1] / d, b[2] / d, b[3] / d};
    int mx = reach(cw.support, e[2] - e[0], cw.ow), my = reach(cw.support, e[3] - e[1], cw.oh);
    double x0 = floor(e[0]) - mx, y0 = floor(e[1]) - my, x1 = ceil(e[2]) + mx, y1 = ceil(e[3]) + my;
    jb->x0 = x0 < 0 ? 0 : (int)x0;
    jb->y0 = y0 < 0 ? 0 : (int)y0;
    jb->x1 = x1 > sw ? sw : (int)x1;
    jb->y1 = y1 > sh ? sh : (int)y1;
    if (d == 1 && jb->x0 == 0 && jb->y0 == 0 && jb->x1 == sw && jb->y1 == sh) return 0; /* the plain decode */
    jb->exact[0] = e[0] - jb->x0;
    jb->exact[1] = e[1] - jb->y0;
    jb->exact[2] = e[2] - jb->x0;
    jb->exact[3] = e[3] - jb->y0;
    return 1;
}

/* The box's rows and columns of a started decompression: the rows above skipped, the
 * columns narrowed to the box's iMCUs (jpeg_crop_scanline), the rows below skipped too, so
 * that a truncated file is still found (their entropy data is read, not transformed).
 * libjpeg errors longjmp to the caller's handler; -1 is out of memory. */
static int decode_box(struct jpeg_decompress_struct *cinfo, const jbox *jb, taas_image *img, jerr *e) {
    /* a column more on each side: at the edge of a cropped scanline the fancy upsampler
     * repeats the edge's chroma, where a whole decode has the neighbour's; and at least 8
     * columns, since a scanline of one chroma sample is upsampled with other rounding */
    int ow = (int)cinfo->output_width, cx0 = jb->x0 > 0 ? jb->x0 - 1 : 0, cx1 = jb->x1 < ow ? jb->x1 + 1 : jb->x1;
    if (cx1 - cx0 < 8) cx1 = cx0 + 8 < ow ? cx0 + 8 : ow;
    if (cx1 - cx0 < 8) cx0 = cx1 - 8 > 0 ? cx1 - 8 : 0;
    JDIMENSION xoff = (JDIMENSION)cx0, cw = (JDIMENSION)(cx1 - cx0);
    jpeg_crop_scanline(cinfo, &xoff, &cw); /* widens to iMCU boundaries */
    size_t c = (size_t)cinfo->output_components, bw = (size_t)(jb->x1 - jb->x0), bh = (size_t)(jb->y1 - jb->y0);
    /* A scanline is cw pixels, of which the box's bw start `left` pixels in. Rows are decoded
     * in place, straight into px: row y's scanline starts `left` pixels before its place, over
     * the end of the rows above (saved and put back), and runs past its end into the rows
     * below, not yet decoded (px has room for the last row's overrun). The first rows, whose
     * scanline would start before px, go through a row buffer. */
    size_t left = (size_t)(jb->x0 - (int)xoff) * c, over = (size_t)cw * c - left - bw * c;
    unsigned char *px = malloc(bw * bh * c + over), *row = malloc((size_t)cw * c), keep[MAX_LEAD_BYTES];
    if (!px || !row) {
        free(px);
        free(row);
        return -1;
    }
    /* the handler frees nothing of ours: keep them where a longjmp can be caught */
    e->px = px;
    e->row = row;
    if (jb->y0 > 0) jpeg_skip_scanlines(cinfo, (JDIMENSION)jb->y0);
    for (size_t y = 0; y < bh; y++) {
        unsigned char *at = px + y * bw * c;
        JSAMPROW r = y * bw * c < left || left > sizeof keep ? row : at - left; /* not before px */
        if (r != row) memcpy(keep, r, left);
        if (jpeg_read_scanlines(cinfo, &r, 1) != 1) {
            snprintf(e->why, sizeof e->why, "no data for row %zu", (size_t)jb->y0 + y);
            longjmp(e->jump, 1);
        }
        if (r != row)
            memcpy(at - left, keep, left);
        else
            memcpy(at, row + left, bw * c);
    }
    /* skipping to the very end returns at once (libjpeg-turbo reads nothing): skip to the
     * last row and read it, so that the whole file is read */
    if (cinfo->output_scanline + 1 < cinfo->output_height)
        jpeg_skip_scanlines(cinfo, cinfo->output_height - cinfo->output_scanline - 1);
    while (cinfo->output_scanline < cinfo->output_height) {
        JSAMPROW r = row;
        if (jpeg_read_scanlines(cinfo, &r, 1) != 1) {
            snprintf(e->why, sizeof e->why, "no data for row %u", (unsigned)cinfo->output_scanline);
            longjmp(e->jump, 1);
        }
    }
    jpeg_finish_decompress(cinfo);
    free(row);
    e->px = e->row = NULL;
    img->data = px;
    img->h = (int)bh;
    img->w = (int)bw;
    img->c = (int)c;
    img->type = TAAS_PIX_U8;
    memcpy(img->box, jb->exact, sizeof img->box);
    img->full_h = (int)cinfo->image_height;
    img->full_w = (int)cinfo->image_width;
    img->denom = jb->denom;
    return 0;
}

static int corrupt(taas_error *err, const char *why) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "corrupt JPEG: %s", why);
    taas_error_hint(err, "the image is damaged or is not a JPEG: check it with an image viewer, or rewrite it");
    return -1;
}

int taas_decode_jpeg(const unsigned char *p, size_t n, taas_image *img, taas_error *err) {
    int boxed;
    return taas_decode_jpeg_hinted(p, n, NULL, img, &boxed, err);
}

int taas_decode_jpeg_hinted(const unsigned char *p, size_t n, const taas_crop_hint *hint, taas_image *img,
                            int *boxed, taas_error *err) {
    memset(img, 0, sizeof *img);
    *boxed = 0;
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
        free(e.px);
        free(e.row);
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
    jbox jb;
    int use_box = !cmyk && plan_box(hint, (int)cinfo.image_height, (int)cinfo.image_width, &jb);
    if (use_box) {
        cinfo.scale_num = 1;
        cinfo.scale_denom = (unsigned)jb.denom;
    }
    jpeg_start_decompress(&cinfo);
    if (use_box) {
        volatile int rc = decode_box(&cinfo, &jb, img, &e);
        if (rc == 0) *boxed = 1;
        jpeg_destroy_decompress(&cinfo);
        return rc == 0 ? 0 : taas_fmt_oom(err, "a JPEG image");
    }
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
