/* A model built from its JSON spec (docs/language.md), lowered to a graph of ops
 * (model_plan.h) with every shape inferred before anything runs: all parameters in ONE
 * contiguous float buffer (gradients in a second of the same layout), BatchNorm running
 * stats apart, a parameter table that names every tensor by its PyTorch state_dict key, and
 * a step's memory planned once per batch size (model_memory.h). */
#ifndef TAAS_MODEL_H
#define TAAS_MODEL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "errnames.h"
#include "error.h"
#include "layers.h"
#include "model_memory.h"
#include "model_plan.h"
#include "optim.h"

typedef struct taas_model {
    taas_model_layer *layers;
    int nlayers;
    taas_act_shape in_shape;
    float *params, *grads;          /* nparams and ntrain floats */
    size_t nparams, ntrain;         /* the trainable parameters are params' first ntrain floats */
    float *stats;                   /* running_mean / running_var */
    size_t nstats;
    int64_t *counters;              /* num_batches_tracked */
    int ncounters;
    taas_param_entry *table;
    size_t ntable;
    uint64_t seed;
    int nthreads;
    /* A step's memory, planned (model_memory.h) and allocated once per batch size. */
    int batch;
    taas_model_memory mem;
    char *arena;
    float **act, **grad;            /* per tensor: its value and its gradient (NULL: none) */
    void **aux;                     /* per op: Dropout's mask, BatchNorm's mean | invstd, MaxPool's argmax */
    float **tmp;                    /* per op: its input gradient before it is added */
    float *scratch;                 /* Conv2d, shared */
    int last_train;
    uint64_t last_step;             /* the last forward's step: an attention's backward redraws its dropout */
} taas_model;

/* A layer's shapes for n samples, as the CPU's and the CUDA's layer functions take them. */
static inline taas_conv2d_shape taas_layer_conv_shape(const taas_model_layer *L, int n) {
    return (taas_conv2d_shape){n, L->in.d[0], L->in.d[1], L->in.d[2], L->oc, L->kh, L->kw, L->sh, L->sw, L->ph, L->pw,
                               L->groups};
}

static inline taas_pool2d_shape taas_layer_pool_shape(const taas_model_layer *L, int n) {
    return (taas_pool2d_shape){n, L->in.d[0], L->in.d[1], L->in.d[2], L->kh, L->kw, L->sh, L->sw, L->ph, L->pw};
}

/* An attention op's shape for n samples; its dropout only in training. */
static inline taas_attention_shape taas_layer_attention_shape(const taas_model_layer *L, int n, int train) {
    return (taas_attention_shape){n, L->in.d[0], L->out.d[1], L->heads, train ? L->p : 0.0f};
}

/* A model of tokens (an Embedding first, an (N, T, V) output): T, or 0 for another. On a
 * token dataset (dataset.h) a sample is a window of T + 1 ids: the model reads the first T,
 * and the last T are their targets, each the next token, as nanoGPT and llm.c cut them. */
static inline int taas_model_tokens(const taas_model *m) {
    return m->nlayers && m->layers[0].kind == TAAS_L_EMBEDDING && m->in_shape.rank == 1 &&
                   m->layers[m->nlayers - 1].out.rank == 2
               ? m->in_shape.d[0] : 0;
}

/* n windows of `width` ids (floats) -> x (n, T) and targets y (n, T), for a token model of
 * vocabulary v (its output's last size). 0, or -1 with a TaasValueError naming the sample
 * and place: a window that is not T + 1 wide (a dataset of another kind), an id that is no
 * whole number in [0, v) (a token beyond the model's vocabulary). */
static inline int taas_model_split_windows(const taas_model *m, const float *win, size_t width, int n, float *x,
                                           int64_t *y, taas_error *e) {
    int t = taas_model_tokens(m), v = m->layers[m->nlayers - 1].out.d[1];
    if (width != (size_t)t + 1) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "the model reads %d token ids and predicts each next one, but a "
                       "sample holds %zu values, not the %d of a window", t, width, t + 1);
        taas_error_hint(e, "train it on a token dataset with block_size=%d: TextFile(path, block_size=%d)", t, t);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const float *w = win + (size_t)i * width;
        for (int k = 0; k <= t; k++)
            if (!(w[k] >= 0.0f && w[k] < (float)v) || w[k] != (float)(int64_t)w[k]) {
                taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "sample %d of the batch has token %g at position %d, "
                               "outside the model's vocabulary [0, %d)", i, (double)w[k], k, v);
                taas_error_hint(e, "give the model a vocab_size that holds every token of the data");
                return -1;
            }
        memcpy(x + (size_t)i * t, w, (size_t)t * sizeof *x);
        for (int k = 0; k < t; k++) y[(size_t)i * t + k] = (int64_t)w[k + 1];
    }
    return 0;
}

/* Builds the model for inputs (N, c, h, w), or (N, c) when h == 0 and w == 0, and
 * initialises it from `seed` as PyTorch would (same distributions, layer order; a ResNet's
 * as torchvision's). */
taas_model *taas_model_new(const json_t *spec, int c, int h, int w, uint64_t seed,
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
/* Gradients ACCUMULATE into m->grads (the trainable parameters') from dout (n, out) for the
 * last forward; nothing upstream of only frozen ops is computed. */
int taas_model_backward(taas_model *m, const float *dout, taas_error *err);
void taas_model_zero_grad(taas_model *m);
/* The trainable parameters as spans for taas_optim_step_spans: weight decay `wd` on the
 * weights of the matrix products (Linear, Conv1D, Conv2d), none on biases, normalisation
 * weights and embeddings (nanoGPT's two AdamW groups, the embeddings with the no-decay
 * group as minGPT has them). Adjacent spans with the same decay are one. *out is malloc'd;
 * -1 when out of memory. */
int taas_model_decay_spans(const taas_model *m, double wd, taas_optim_span **out, size_t *n);

/* OpenMP threads of every layer (default 1): forward and backward set them as the calling
 * thread's omp_set_num_threads, so an optimizer step after them uses as many. Drops the
 * work memory when it changes. */
void taas_model_set_threads(taas_model *m, int nthreads);

#endif
