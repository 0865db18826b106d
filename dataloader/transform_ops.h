/* Inside the transforms: the image a chain passes from step to step, and the kernels that
 * the steps of transform.c run on it (geometry in transform_geom.c, resampling in
 * transform_resize.c). Not a public interface. */
#ifndef TAAS_TRANSFORM_OPS_H
#define TAAS_TRANSFORM_OPS_H

#include <stddef.h>
#include <stdint.h>

/* Before ToTensor an image is HWC (interleaved, as PIL holds it), uint8 or float32; after
 * it, a tensor is CHW float32. */
typedef struct tx_img {
    int c, h, w;
    int tensor;     /* 1: CHW float32; 0: HWC image */
    int u8;         /* images only: uint8 samples (else float32) */
    void *data;     /* malloc'd, or the caller's output buffer (then not owned) */
    int owned;
} tx_img;

/* A hot loop's function compiled for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and the x86-64
 * baseline, the version picked at load time from the CPU (GCC's function multiversioning,
 * as workers/train/simd.h's TAAS_VEC). Only for integer loops and exact float ones, whose
 * results are the same in every version. Not under ThreadSanitizer: the loader runs the
 * version picker before TSan is set up, and the instrumented picker crashes. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define TX_VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TX_VEC
#endif

size_t tx_elem_size(const tx_img *im);
size_t tx_count(const tx_img *im);
/* Replaces *im by next (frees im's data when it owns it). */
void tx_replace(tx_img *im, tx_img *next);
/* A buffer for an image of the given shape and kind: dst when it is given (a tensor written
 * straight into the caller's output), else malloc'd. -1 when out of memory. */
int tx_alloc(tx_img *im, int c, int h, int w, int tensor, int u8, float *dst);

/* Padding modes, as torchvision names them. */
typedef enum { TX_PAD_CONSTANT, TX_PAD_EDGE, TX_PAD_REFLECT, TX_PAD_SYMMETRIC } tx_padmode;

/* Source coordinate of padded coordinate i (may be < 0 or >= n) in a line of n, or -1 for
 * the constant fill. reflect and symmetric repeat periodically, as numpy.pad does. */
int tx_pad_index(int i, int n, tx_padmode mode);

/* out(y, x) = in(rows[y], cols[x]) for every channel, or fill[channel] where rows[y] or
 * cols[x] is -1. Crops, pads and flips are all such maps. fill has c values (ignored when
 * no -1 occurs); for u8 images they are already whole numbers in 0..255. */
int tx_remap(tx_img *im, const int *rows, int oh, const int *cols, int ow, const double *fill,
             float *dst);

/* ToTensor: HWC image to CHW float. uint8 values go through lut (256 floats per channel, or
 * one table for all when nlut == 1; NULL = v / 255); float values are copied, then
 * normalised when mean is given. Each row is read right to left when mirror is set (a
 * horizontal flip folded in). Into dst, or a new buffer. */
int tx_to_tensor(tx_img *im, const float *lut, int nlut, const float *mean, int nmean,
                 const float *std, int nstd, int mirror, float *dst);
/* Normalize on a CHW tensor: (x - mean) / std per channel, as torch's sub_ then div_; one
 * mean or std value stands for every channel. */
int tx_normalize(tx_img *im, const float *mean, int nmean, const float *std, int nstd, float *dst);

typedef enum { TX_NEAREST, TX_BILINEAR, TX_BICUBIC } tx_interp;

/* Resize a uint8 HWC image as Pillow 9's Image.resize does (separable convolution with
 * fixed-point coefficients; nearest as its affine scale), bit for bit. */
int tx_resize_pil(tx_img *im, int oh, int ow, tx_interp mode);
/* The same for the source box (x0, y0, x1, y1) of im, in pixels, fractions allowed: Pillow's
 * resize(box=...) (nearest: the pixel under each output centre). */
int tx_resize_pil_box(tx_img *im, const double box[4], int oh, int ow, tx_interp mode);
/* Resize a float image or tensor as torch.nn.functional.interpolate(mode, align_corners=
 * False, antialias) on CPU. */
int tx_resize_torch(tx_img *im, int oh, int ow, tx_interp mode, int antialias, float *dst);

/* torchvision's resized_crop: the box (top, left, height, width, inside the image) cut out,
 * then resized to oh x ow as Resize does (PIL's for uint8 images, torch's for the rest). */
int tx_resized_crop(tx_img *im, const int box[4], int oh, int ow, tx_interp mode, int antialias, float *dst);

/* ColorJitter's four adjustments on a uint8 HWC image of 1 (L) or 3 (RGB) channels, in place,
 * as torchvision 0.14 makes them with Pillow 9 (ImageEnhance's blends with PIL's float
 * arithmetic and truncation; ITU-R 601 grey as PIL's convert("L"); hue through PIL's HSV). */
void tx_adjust_brightness(tx_img *im, double factor);
void tx_adjust_contrast(tx_img *im, double factor);
void tx_adjust_saturation(tx_img *im, double factor);
void tx_adjust_hue(tx_img *im, double shift);

#endif
