/* A model's plan: the layers of a Sequential spec with their shapes, inferred layer by
 * layer from the input shape, and the state_dict table (key, shape, dtype, where each
 * tensor lives in the parameter and statistics buffers). No memory for numbers is taken,
 * so the kernel links this (with shape.c) to find shape errors before a job starts and
 * to check a weights file against a model; taas_model_new builds on it. */
#ifndef TAAS_MODEL_PLAN_H
#define TAAS_MODEL_PLAN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

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

/* Layers that a runner computes as one, decided once by the plan (taas_model_plan_build) for
 * the CPU and the CUDA runners alike: a Conv2d followed by a ReLU applies the ReLU to its own
 * output (y = max(conv + b, 0); backward masks dy by y's sign), and the ReLU then runs
 * nothing, its output being its input's buffer. */
typedef enum taas_layer_fusion {
    TAAS_FUSE_NONE,
    TAAS_FUSE_RELU,    /* a Conv2d that computes the ReLU after it */
    TAAS_FUSED,        /* that ReLU */
} taas_layer_fusion;

typedef struct taas_model_layer {
    taas_layer_kind kind;
    taas_layer_fusion fusion;
    int in_place;                   /* its output is its input's buffer, nothing to run either way:
                                     * Flatten, a fused ReLU, Dropout with p = 0 */
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

/* The loss rule beside the layers': NLLLoss after a final LogSoftmax over features is
 * cross-entropy on the LogSoftmax's input, which a runner may compute in one (the CUDA engine
 * does, and skips the layer in training; the CPU engine runs both as PyTorch does, as its
 * step-by-step tests against PyTorch compare). */
static inline int taas_layers_fold_into_nll(const taas_model_layer *layers, int n) {
    return n > 0 && layers[n - 1].kind == TAAS_L_LOG_SOFTMAX && layers[n - 1].in.rank == 1;
}

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

typedef struct taas_model_plan {
    taas_model_layer *layers;
    int nlayers;
    taas_act_shape in_shape;        /* rank 0: planned without an input shape */
    taas_param_entry *table;        /* state_dict order */
    size_t ntable;
    size_t nparams, nstats;         /* floats in the parameter and statistics buffers */
    int ncounters;                  /* int64 num_batches_tracked entries */
} taas_model_plan;

/* Plans the Sequential for inputs (N, c, h, w), or (N, c) when h == 0 and w == 0. Errors
 * (TaasValueError) name the layer index, the layer, the shape it expects and the one it
 * gets, and where that comes from; the hint gives the line to write.
 * With c == 0 the input shape is unknown: each layer's tensors get the shapes its spec
 * gives, and a dimension that only the input could tell (a Lazy layer's in_features or
 * in_channels) is 0 in the table. 0, or -1 with err (the plan is then empty). */
int taas_model_plan_build(taas_model_plan *p, const json_t *sequential_spec, int c, int h, int w,
                          taas_error *err);
void taas_model_plan_free(taas_model_plan *p);
/* The model's parameters, gradients and statistics fit this machine's memory: 0, or -1
 * with a TaasMemoryError naming what they need, what there is and the largest tensor. */
int taas_model_plan_check_memory(const taas_model_plan *p, taas_error *err);

/* The table as safetensors tensors (malloc'd, n rows; NULL when out of memory), each
 * pointing into the buffers (params, stats, counters), or with data NULL when the buffers
 * are NULL: a table to check a file against. A size the plan does not know (0) accepts
 * any. */
struct taas_st_tensor *taas_param_table_tensors(const taas_param_entry *table, size_t n, float *params,
                                                float *stats, int64_t *counters);

/* The table row with this key, or NULL. */
const taas_param_entry *taas_model_plan_find(const taas_model_plan *p, const char *key);

#endif
