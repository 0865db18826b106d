/* A Sequential built from its JSON spec (docs/language.md): shapes inferred layer by layer
 * before anything runs, all parameters in ONE contiguous float buffer (gradients in a
 * second of the same layout), BatchNorm running stats apart, and a parameter table that
 * names every tensor by its PyTorch state_dict key. */
#ifndef TAAS_MODEL_H
#define TAAS_MODEL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "layers.h"

typedef enum taas_layer_kind {
    TAAS_L_LINEAR, TAAS_L_CONV2D, TAAS_L_MAXPOOL2D, TAAS_L_AVGPOOL2D, TAAS_L_RELU,
    TAAS_L_LEAKY_RELU, TAAS_L_TANH, TAAS_L_SIGMOID, TAAS_L_GELU, TAAS_L_DROPOUT,
    TAAS_L_DROPOUT2D, TAAS_L_BATCHNORM1D, TAAS_L_BATCHNORM2D, TAAS_L_FLATTEN,
    TAAS_L_LOG_SOFTMAX, TAAS_L_SOFTMAX,
} taas_layer_kind;

/* An activation's shape without the batch dimension: rank 1 (F) or rank 3 (C, H, W). */
typedef struct taas_act_shape {
    int rank;
    int d[3];
} taas_act_shape;

typedef struct taas_model_layer {
    taas_layer_kind kind;
    char name[32];                  /* the spec's type, "LazyLinear" included */
    taas_act_shape in, out;
    size_t w_off, b_off;            /* in the parameter buffer; b_off SIZE_MAX when no bias */
    size_t rm_off, rv_off;          /* BatchNorm running stats in the stats buffer */
    int counter;                    /* BatchNorm: index into num_batches_tracked */
    int has_w, has_b;
    int oc, kh, kw, sh, sw, ph, pw; /* Conv2d / pools */
    int lin_in, lin_out;            /* Linear */
    float p, slope, eps, momentum;  /* Dropout, LeakyReLU, BatchNorm */
} taas_model_layer;

typedef enum taas_tensor_home { TAAS_T_PARAM, TAAS_T_STAT, TAAS_T_COUNTER } taas_tensor_home;

/* One row of the state_dict: key, shape, dtype ("F32" or "I64") and where it lives:
 * a float offset into params (TAAS_T_PARAM) or stats (TAAS_T_STAT), or an index into the
 * int64 counters (TAAS_T_COUNTER). */
typedef struct taas_param_entry {
    char key[48];
    int ndim;
    int64_t shape[4];
    const char *dtype;
    taas_tensor_home home;
    size_t offset;
    size_t numel;
} taas_param_entry;

typedef struct taas_model {
    taas_model_layer *layers;
    int nlayers;
    taas_act_shape in_shape;
    float *params, *grads;          /* nparams floats each */
    size_t nparams;
    float *stats;                   /* running_mean / running_var */
    size_t nstats;
    int64_t *counters;              /* num_batches_tracked */
    int ncounters;
    taas_param_entry *table;
    size_t ntable;
    uint64_t seed;
    int nthreads;
    /* Per-batch-size work memory, allocated once per batch size. */
    int batch;
    float **acts;                   /* nlayers + 1 activations; acts[0] holds the input */
    float **aux;                    /* per layer: dropout mask, BN mean|invstd */
    int32_t **argmax;               /* per layer: MaxPool2d */
    float *scratch;                 /* Conv2d, shared */
    float *dbuf[2];                 /* ping-pong gradients w.r.t. activations */
    int last_train;
} taas_model;

/* Builds the model for inputs (N, c, h, w), or (N, c) when h == 0 and w == 0, and
 * initialises it from `seed` as PyTorch would (same distributions, layer order). */
taas_model *taas_model_new(const json_t *sequential_spec, int c, int h, int w, uint64_t seed,
                           taas_error *err);
void taas_model_free(taas_model *m);

/* Features of one output sample (the logits' width for a classifier). */
size_t taas_model_out_numel(const taas_model *m);
const taas_param_entry *taas_model_find(const taas_model *m, const char *key);

/* x: (n, input shape). Train mode uses batch statistics and dropout masks drawn from
 * (seed, step); eval mode the running stats and no dropout. *out points into the model
 * and stays valid until the next forward. */
int taas_model_forward(taas_model *m, const float *x, int n, int train, uint64_t step,
                       const float **out, taas_error *err);
/* Gradients ACCUMULATE into m->grads from dout (n, out) for the last forward. */
int taas_model_backward(taas_model *m, const float *dout, taas_error *err);
void taas_model_zero_grad(taas_model *m);
/* OpenMP threads for the convolutions (default 1); drops the work memory when it changes. */
void taas_model_set_threads(taas_model *m, int nthreads);

#endif
