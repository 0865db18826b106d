/* JPEG decoding through the data loader's own path (dataloader/decode_jpeg.c over libjpeg),
 * as a WebDataset member reaches it, then again with a crop hint (the scaled decode of
 * only a region, as RandomResizedCrop and Resize + CenterCrop ask for), its region, output
 * size and filter support taken from the input's last bytes. A decoded image is read whole, so that ASan sees a buffer smaller
 * than the shape it claims. */
#include <stdlib.h>

#include "formats.h"
#include "fuzz_util.h"

typedef struct pick {
    const uint8_t *tail; /* 4 bytes: the box's place and size as fractions, and the output's */
} pick;

static int box_of(void *ctx, int h, int w, taas_crop_want *out) {
    const pick *p = ctx;
    double bh = 1 + (double)(h - 1) * p->tail[0] / 255, bw = 1 + (double)(w - 1) * p->tail[1] / 255;
    double top = (h - bh) * p->tail[2] / 255, left = (w - bw) * p->tail[3] / 255;
    *out = (taas_crop_want){{left, top, left + bw, top + bh}, 1 + p->tail[0] % 64, 1 + p->tail[1] % 64,
                            /* a crop (0), or a resize's filter reading around the region */
                            (double)(p->tail[2] % 3)};
    return 1;
}

static void check(const taas_image *img) {
    if (img->h <= 0 || img->w <= 0 || (img->c != 1 && img->c != 3) || img->type != TAAS_PIX_U8 || !img->data) abort();
    fz_touch(img->data, (size_t)img->h * img->w * img->c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    taas_image img;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_decode_jpeg(data, size, &img, &err);
    fz_say("decode: %s", rc ? err.message : "ok");
    if (rc != 0) return 0;
    check(&img);
    taas_image_free(&img);
    if (size < 4) return 0;
    pick p = {data + size - 4};
    taas_crop_hint hint = {box_of, &p};
    int boxed;
    rc = taas_decode_jpeg_hinted(data, size, &hint, &img, &boxed, &err);
    fz_say("boxed decode: %s", rc ? err.message : "ok");
    if (rc != 0) return 0;
    check(&img);
    if (boxed && !(img.box[0] >= 0 && img.box[1] >= 0 && img.box[2] <= img.w && img.box[3] <= img.h)) abort();
    taas_image_free(&img);
    return 0;
}
