/* Transforms with torchvision's semantics, built from a transform spec (Compose or a single
 * transform, or JSON null for none). Before ToTensor they act on the HWC image as torchvision
 * acts on a PIL image; ToTensor makes a CHW float tensor (uint8 scaled to 0..1); after it
 * they act on the tensor. Random transforms draw from an RNG seeded by (seed, epoch, sample
 * index) only, so a sample comes out the same whichever thread or loader makes it. */
#ifndef TAAS_TRANSFORM_H
#define TAAS_TRANSFORM_H

#include <jansson.h>
#include <stdint.h>

#include "dataset.h"
#include "error.h"

typedef struct taas_transform taas_transform;

taas_transform *taas_transform_new(const json_t *spec, taas_error *err);
void taas_transform_free(taas_transform *t);

/* The CHW shape a (h, w, c) input comes out with; -1 with an error when the chain cannot
 * take it (e.g. Normalize with 3 means on 1 channel, CenterCrop larger than the image
 * without padding). */
int taas_transform_out_shape(const taas_transform *t, int h, int w, int c, int *oc, int *oh,
                             int *ow, taas_error *err);

/* Applies the chain to img (consumed: freed or reused) and writes the float32 CHW result
 * into out (oc * oh * ow floats, from taas_transform_out_shape). A chain that does not
 * produce a tensor ends with an implicit ToTensor (documented). */
int taas_transform_apply(const taas_transform *t, taas_image *img, uint64_t seed,
                         uint64_t epoch, uint64_t index, float *out, taas_error *err);

/* Decoding only what the chain keeps (dataset.h's taas_crop_hint): when the chain starts
 * with RandomResizedCrop, or with Resize (bilinear or bicubic) alone or followed by
 * CenterCrop, taas_transform_hint_for fills *h for one sample and returns 1; the region it
 * asks for is the one taas_transform_apply would cut or read for (seed, epoch, index) (the
 * same RandomResizedCrop draw; the window of the resized image that CenterCrop keeps). h must
 * outlive the dataset call it is given to. Returns 0 (no hint) for other chains. */
typedef struct taas_transform_hint {
    taas_crop_hint hint;
    const taas_transform *t;
    uint64_t seed, epoch, index;
} taas_transform_hint;
int taas_transform_hint_for(const taas_transform *t, uint64_t seed, uint64_t epoch, uint64_t index,
                            taas_transform_hint *h);

/* taas_transform_apply for an image that the dataset decoded for that hint (boxed = 1): the
 * region (img->box) is resized to what the steps it stands for make (RandomResizedCrop's
 * size; Resize's, or CenterCrop's after it, planned on the whole image's img->full_h x
 * full_w), and the rest of the chain runs as usual. Its output shape is
 * taas_transform_out_shape's of the whole image. */
int taas_transform_apply_boxed(const taas_transform *t, taas_image *img, int boxed, uint64_t seed,
                               uint64_t epoch, uint64_t index, float *out, taas_error *err);

#endif
