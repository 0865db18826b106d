/* JPEG decoding through the data loader's own path (dataloader/decode_jpeg.c over libjpeg),
 * as a WebDataset member reaches it. A decoded image is read whole, so that ASan sees a
 * buffer smaller than the shape it claims. */
#include <stdlib.h>

#include "formats.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    taas_image img;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_decode_jpeg(data, size, &img, &err);
    fz_say("decode: %s", rc ? err.message : "ok");
    if (rc != 0) return 0;
    if (img.h <= 0 || img.w <= 0 || (img.c != 1 && img.c != 3) || img.type != TAAS_PIX_U8 || !img.data) abort();
    fz_touch(img.data, (size_t)img.h * img.w * img.c);
    taas_image_free(&img);
    return 0;
}
