/* A step's memory for a batch of n, planned once per batch size (ggml-alloc's idea): every
 * buffer a forward and its backward need, each with the interval of the step in which it is
 * alive, packed into ONE arena so that buffers whose lives do not overlap share bytes.
 *
 * What lives how long, on the step's clock (op i's forward at i, the loss at nrun, op i's
 * backward at 2 nrun - i):
 *   - a tensor's value from the op that writes it to its last reader: a forward, or the
 *     backward of an op that needs it (a Conv2d's or Linear's input, a ReLU's or Softmax's
 *     output, an attention's both, ...); the step's output stays to the end;
 *   - its gradient from the first consumer's backward that writes it to the backward of the
 *     op that wrote the tensor;
 *   - a Dropout mask, BatchNorm's and LayerNorm's mean and invstd, a MaxPool's argmax, an
 *     attention's log-sum-exp a row from its op's forward
 *     to its backward; an op's input gradient that must be added to another's for just its
 *     backward; the convolutions' scratch all along.
 * Ops that run nothing (Flatten, Identity, a fused ReLU) and ops that write over their input
 * (model_plan.h's overwrite) share their input's value and gradient.
 *
 * Nothing here computes or allocates numbers: the CPU runner (model_run.c) and the CUDA one
 * (cuda/cu_model.c) each allocate the arena once and take pointers at these offsets, and the
 * kernel's summary reports the peak without a worker. */
#ifndef TAAS_MODEL_MEMORY_H
#define TAAS_MODEL_MEMORY_H

#include <stddef.h>

#include "error.h"
#include "model_plan.h"

#define TAAS_MEM_NONE ((size_t)-1)
#define TAAS_MEM_ALIGN 256

typedef struct taas_model_memory {
    int n, nrun;           /* planned for n samples through ops [0, nrun) */
    size_t bytes;          /* the arena: the step's peak */
    size_t *act;           /* per tensor (nlayers + 1): its value's offset; NONE: the caller's input */
    size_t *grad;          /* per tensor: its gradient's offset; NONE: no gradient is needed */
    size_t *aux;           /* per op: its mask, statistics or argmax; NONE: none */
    size_t *tmp;           /* per op: where its input gradient goes first (then added, or dropped); NONE */
    unsigned char *acc;    /* per op and source (2 i + s): that input gradient ADDS to what another
                            * consumer of the tensor wrote */
    size_t scratch;        /* the convolutions' scratch, scratch_bytes long */
    size_t act_bytes;      /* the sum of the values' sizes, the arena packed or not: for the summary */
} taas_model_memory;

/* Plans ops [0, nrun) of layers for n samples of shape `in`. dout, the gradient of tensor
 * nrun, is copied into its gradient's memory when backward starts. With input_outside the
 * input (tensor 0, and what shares its memory) is the caller's and gets no bytes. 0, or -1
 * with err (TaasMemoryError) and mm empty. */
int taas_model_memory_plan(taas_model_memory *mm, const taas_model_layer *layers, int nlayers, taas_act_shape in,
                           int n, int nrun, size_t scratch_bytes, int input_outside, taas_error *err);
void taas_model_memory_free(taas_model_memory *mm);

#endif
