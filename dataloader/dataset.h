/* Datasets: random access to (image, label) samples, opened from a dataset's JSON spec (the
 * spec the kernel builds with taas_value_spec: {"type": "FashionMNIST", "root": ...,
 * "train": true, ...}). Formats: MNIST/FashionMNIST IDX (gzip or not), CIFAR-10 binary
 * (.tar.gz or the .bin files), NpyDataset (.npy), WebDataset tar shards (.png, .jpg, .npy
 * images; .cls/.txt labels), ImageFolder (one folder per class of JPEG/PNG files), TextFile
 * (plain text as bytes, in windows). Thread-safe reads after open. */
#ifndef TAAS_DATASET_H
#define TAAS_DATASET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "fetch.h"

/* A decoded sample before transforms: H x W x C, interleaved (HWC) like a PIL image,
 * uint8 (0..255) or float32 values. */
typedef enum { TAAS_PIX_U8, TAAS_PIX_F32 } taas_pixel_type;
typedef struct taas_image {
    int h, w, c;
    taas_pixel_type type;
    void *data;         /* h * w * c elements, owned by whoever filled the image */
    /* an image decoded for a crop hint (boxed): the hint's box within data, in its pixels
     * (x0, y0, x1, y1), fractions allowed; the whole image's size; the libjpeg-turbo scale
     * (1/denom) data was decoded at. Else unused. */
    double box[4];
    int full_h, full_w, denom;
} taas_image;
void taas_image_free(taas_image *img);  /* frees data, zeroes the struct */

typedef struct taas_dataset taas_dataset;

typedef struct taas_dataset_info {
    char type[32];           /* "FashionMNIST" */
    size_t size;             /* samples */
    int h, w, c;             /* shape of a decoded sample (0 when it varies: WebDataset) */
    int num_classes;         /* 0 when unknown; a token dataset's vocabulary */
    int tokens;              /* a token dataset (TextFile): a sample is T + 1 token ids, (T + 1, 1, 1)
                              * as floats; a language model reads the first T and predicts the last T */
    const char *const *classes; /* class names when the format has them (NULL otherwise) */
    char source[1024];       /* root folder, URL prefix or first shard, for displays */
} taas_dataset_info;

/* Opens the dataset the spec describes, reading headers/indexes through f (which must
 * outlive the dataset). Errors name the file or URL and what is wrong (wrong IDX magic,
 * image/label count mismatch, truncated gzip, unsupported .npy dtype, tar member without a
 * label, ...). */
taas_dataset *taas_dataset_open(const json_t *spec, taas_fetcher *f, taas_error *err);
void taas_dataset_free(taas_dataset *d);
const taas_dataset_info *taas_dataset_info_get(const taas_dataset *d);

/* Sample index (0 <= index < size): decoded image (caller frees with taas_image_free) and
 * label. Errors name the sample index and the source (e.g. "sample 17 (shard-0001.tar
 * member 000017.png): corrupt PNG: ..."). */
int taas_dataset_get(taas_dataset *d, size_t index, taas_image *img, int64_t *label,
                     taas_error *err);

/* Decoding only what the transforms keep: the decoder asks, once it knows the image's full
 * size, what the chain will make of it (want returns 0 when it needs the whole image):
 * - box: the source region (x0, y0, x1, y1) in the image's pixels, fractions allowed, that
 *   becomes oh x ow pixels;
 * - support: 0 when the region is cut out before it is resized (RandomResizedCrop: nothing
 *   outside it is read); else the resize filter's support in output pixels (Pillow's: 1
 *   bilinear, 2 bicubic), as when the whole image is resized and the region cut from the
 *   result (Resize + CenterCrop): the pixels the filter reads around the region are decoded
 *   too.
 * A JPEG is then decoded at the smallest libjpeg-turbo scale (1/2, 1/4, 1/8) at which the
 * region still has oh x ow pixels, and only the region's rows and columns (the region
 * itself, at that scale, comes back in the image's box). */
typedef struct taas_crop_want {
    double box[4];
    int oh, ow;
    double support;
} taas_crop_want;
typedef struct taas_crop_hint {
    int (*want)(void *ctx, int h, int w, taas_crop_want *out);
    void *ctx;
} taas_crop_hint;

/* As taas_dataset_get, with hint (NULL: none). *boxed is 1 when img is the hint's box
 * (decoded at a reduced scale), 0 when it is the whole image. */
int taas_dataset_get_hinted(taas_dataset *d, size_t index, const taas_crop_hint *hint, taas_image *img,
                            int64_t *label, int *boxed, taas_error *err);

#endif
