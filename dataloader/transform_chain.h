/* Inside the transforms: a chain is a flat list of steps (Compose flattened), parsed from the
 * spec by transform_spec.c and run by transform.c. Not a public interface. */
#ifndef TAAS_TRANSFORM_CHAIN_H
#define TAAS_TRANSFORM_CHAIN_H

#include <jansson.h>

#include "error.h"
#include "rng.h"
#include "transform.h"
#include "transform_ops.h"

/* Steps in a chain; each random step has its own RNG stream (TAAS_RNG_TRANSFORM + i). */
#define TX_MAX_STEPS 64

typedef enum {
    ST_TO_TENSOR,
    ST_NORMALIZE,
    ST_RANDOM_CROP,
    ST_FLIP,
    ST_RESIZE,
    ST_CENTER_CROP,
    ST_RANDOM_RESIZED_CROP,
    ST_COLOR_JITTER,
} tx_kind;

typedef struct tx_step {
    tx_kind kind;
    int on_tensor;          /* the step runs after ToTensor */
    /* Normalize: torch converts mean and std to the tensor's dtype first */
    int nmean, nstd;
    float *mean, *std;
    /* ToTensor: 256-entry tables per channel (nlut of them), fused with the Normalize that
     * follows it when there is one (fused = 1: that step is skipped) */
    int fused, nlut;
    float *lut;
    /* RandomCrop, CenterCrop: (h, w); Resize: (h, w) or, size_n == 1, the smaller edge */
    int size_h, size_w, size_n;
    int has_padding, pad[4];    /* left, top, right, bottom */
    int pad_if_needed;
    tx_padmode mode;
    int nfill, fill_seq;        /* fill_seq: given as a tuple */
    double *fill;
    /* RandomHorizontalFlip */
    double p;
    /* Resize */
    int max_size;               /* 0 = None */
    tx_interp interp;
    int antialias;              /* -1 = None */
    /* RandomResizedCrop (with size_h, size_w, interp, antialias) */
    double scale[2], ratio[2];
    /* ColorJitter: brightness, contrast, saturation, hue as (min, max); jit_on[k] = 0 when
     * torchvision makes that one None (no draw, no change) */
    double jit[4][2];
    int jit_on[4];
} tx_step;

struct taas_transform {
    tx_step *steps;
    int n;
    float to_tensor_lut[256];   /* the implicit ToTensor: v / 255 */
};

/* Step i as the user knows it in messages: "Normalize (transform 2 of 3)". */
const char *tx_step_name(const tx_step *s);
void tx_step_where(const taas_transform *t, int i, char *out, size_t n);

/* RandomResizedCrop's box for an h x w image, as torchvision 0.14's get_params: ten tries
 * of an area in scale and a log-uniform aspect in ratio, else the central crop clamped to
 * ratio. box = top, left, height, width. */
void tx_rrc_box(taas_rng *r, int h, int w, const double scale[2], const double ratio[2], int box[4]);

/* Parses spec into t (zeroed by the caller). */
int tx_parse(taas_transform *t, const json_t *spec, taas_error *err);
void tx_steps_free(taas_transform *t);

#endif
