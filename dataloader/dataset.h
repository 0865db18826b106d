/* Datasets: random access to (image, label) samples, opened from a dataset's JSON spec (the
 * spec the kernel builds with taas_value_spec: {"type": "FashionMNIST", "root": ...,
 * "train": true, ...}). Formats: MNIST/FashionMNIST IDX (gzip or not), CIFAR-10 binary
 * (.tar.gz or the .bin files), NpyDataset (.npy), WebDataset tar shards (.png, .jpg, .npy
 * images; .cls/.txt labels), ImageFolder (one folder per class of JPEG/PNG files). Thread-safe reads after open. */
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
    double box[4];      /* an image decoded for a crop hint: the hint's box within data, in
                           its pixels (x0, y0, x1, y1), fractions allowed; else unused */
} taas_image;
void taas_image_free(taas_image *img);  /* frees data, zeroes the struct */

typedef struct taas_dataset taas_dataset;

typedef struct taas_dataset_info {
    char type[32];           /* "FashionMNIST" */
    size_t size;             /* samples */
    int h, w, c;             /* shape of a decoded sample (0 when it varies: WebDataset) */
    int num_classes;         /* 0 when unknown */
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

/* Decoding only what the transforms keep: when the chain starts with a crop that is then
 * resized (RandomResizedCrop), the decoder asks, once it knows the image's full size, for
 * the box (top, left, height, width) the crop will cut and the size (oh, ow) it becomes;
 * box returns 0 when the whole image is needed. A JPEG is then decoded at the smallest
 * libjpeg-turbo scale (1/2, 1/4, 1/8) whose box still covers (oh, ow), and only the box's
 * rows and columns (the box itself, at that scale, comes back). */
typedef struct taas_crop_hint {
    int (*box)(void *ctx, int h, int w, int box[4], int *oh, int *ow);
    void *ctx;
} taas_crop_hint;

/* As taas_dataset_get, with hint (NULL: none). *boxed is 1 when img is the hint's box
 * (decoded at a reduced scale), 0 when it is the whole image. */
int taas_dataset_get_hinted(taas_dataset *d, size_t index, const taas_crop_hint *hint, taas_image *img,
                            int64_t *label, int *boxed, taas_error *err);

#endif
