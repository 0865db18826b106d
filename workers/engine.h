/* Where a fit's numbers live and are computed (docs/design.md §5): the CPU training core
 * (engine_cpu.c), or an NVIDIA GPU through the CUDA plugin (engine_cuda.c loads
 * libtaas_cuda.so, built from workers/train/cuda/). The fit loop (fit_loop.c) drives either
 * the same way: a step is compute (forward, loss, backward), then update (the gradients
 * weighted, summed over the ranks, and the optimizer step). */
#ifndef TAAS_ENGINE_H
#define TAAS_ENGINE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "collective.h"
#include "error.h"
#include "model.h"
#include "optim.h"
#include "pipeline.h"
#include "train_job.h"

typedef struct taas_engine taas_engine;

/* A fit's arithmetic (fit(precision=)): FP32, or the matrix products (Linear, Conv1D,
 * Conv2d) in BF16 on a GPU's tensor cores, summing in FP32, every value and the master
 * weights FP32 in memory. The CPU engine computes in FP32 either way. */
typedef enum taas_precision { TAAS_PRECISION_FP32, TAAS_PRECISION_BF16 } taas_precision;

/* What a step does besides the model's own arithmetic, set by the fit loop on the engine it
 * holds (a wrapping engine passes them on). Zeroed, they ask for nothing. */
typedef struct taas_engine_extras {
    double clip;                   /* update: clip the summed gradients' global norm to it (0: none) */
    const taas_optim_span *spans;  /* update: step span by span with each one's weight decay (the
                                      optimizer's parameter groups; NULL: one span, its decay) */
    size_t nspans;
    int keep_grads;                /* compute: add to the gradients there rather than zero them first
                                      (a later micro-batch of an accumulated step) */
    float grad_scale;              /* compute: the loss's gradient times this (0 = 1, the batch's mean) */
} taas_engine_extras;

/* The next step's batch, for an engine that copies it to its device while this step computes:
 * 0 and *out (NULL when there is none, or the wait was stopped), or -1 with err. It may wait
 * for the batch to arrive. The batch stays the loop's. */
typedef int (*taas_engine_next_fn)(void *ctx, const taas_batch **out, taas_error *err);

typedef struct taas_engine_ops {
    /* Zeroes the gradients; for b (NULL: this rank's item is empty) runs the forward in train
     * mode (dropout masks from `step`), the loss and, when it is finite, the backward. A GPU
     * engine calls next once b's work is queued and copies that batch meanwhile; the CPU
     * engine does not (the loop then takes the next batch itself). *loss: b's mean loss (0
     * without b). */
    int (*compute)(taas_engine *e, const taas_batch *b, taas_engine_next_fn next, void *next_ctx, uint64_t step,
                   float *loss, taas_error *err);
    /* Multiplies the gradients by w (1 for one rank's plain step; else this rank's share of the
     * step's samples, over its micro-batches' grad_scale), sums them over the ranks (c; a GPU
     * engine uses its own NCCL communicator), and takes the optimizer step (opt as the
     * scheduler has set it; step counts from 1). */
    int (*update)(taas_engine *e, float w, taas_collective *c, const taas_optim_config *opt, long step,
                  taas_error *err);
    /* Eval mode: b's loss summed over its samples, and how many samples' highest output is
     * their label. */
    int (*eval)(taas_engine *e, const taas_batch *b, double *loss_sum, double *right, taas_error *err);
    /* Every rank takes rank 0's BatchNorm running statistics (before validation). */
    int (*share_stats)(taas_engine *e, taas_collective *c, taas_error *err);
    /* Writes the weights: safetensors with PyTorch's state_dict names. */
    int (*save)(taas_engine *e, const char *path, taas_error *err);
    /* Writes a checkpoint (checkpoint.h): the weights, BatchNorm statistics and the
     * optimizer's state, with meta (the fit's state, borrowed). */
    int (*checkpoint)(taas_engine *e, const char *path, const json_t *meta, taas_error *err);
    /* Takes the weights, statistics and optimizer state of the checkpoint at path (all or
     * nothing); *meta: its fit state (a new reference). */
    int (*restore)(taas_engine *e, const char *path, json_t **meta, taas_error *err);
    /* The model with its weights and statistics as they are now, on the host (a GPU engine
     * copies them back first), borrowed: a forward in eval mode on it (the fit's text sample)
     * leaves training as it was. NULL with err. */
    taas_model *(*host_model)(taas_engine *e, taas_error *err);
    void (*free)(taas_engine *e);
} taas_engine_ops;

struct taas_engine {
    const taas_engine_ops *ops;
    char name[128];          /* "CPU, 2 threads"; "cuda:0, NVIDIA H100 80GB HBM3" */
    size_t nparams;
    taas_engine_extras x;
};

/* The CPU training core on model m (taken: the engine frees it) with the loss (borrowed) and
 * the optimizer's state for opt. */
taas_engine *taas_engine_cpu(taas_model *m, taas_train_loss *loss, const taas_optim_config *opt, taas_error *err);

/* engine_cuda.c: GPUs this process can use (0 without the CUDA plugin, a driver or a GPU). */
int taas_engine_cuda_devices(void);
/* The model on GPU `device` (m: the host model with its initial weights, taken), the loss
 * kind of `loss`, the matrix products in `precision`; c: the ranks, whose GPUs' NCCL
 * communicator it sets up. NULL with err. */
taas_engine *taas_engine_cuda(taas_model *m, const taas_train_loss *loss, const taas_optim_config *opt, int device,
                              taas_precision precision, taas_collective *c, taas_error *err);

#endif
