/* A model on a GPU (model.h's taas_model, model_run.c's arithmetic): its parameters, their
 * gradients and the BatchNorm running statistics each in ONE device allocation, uploaded
 * from the host model once; the step's memory, planned as the CPU's (model_memory.h), in one
 * more, grown to the largest plan seen. The host model keeps the plan (layers, shapes, the
 * state_dict table) and the num_batches_tracked counters, which forward counts on the host;
 * taas_cu_model_download brings the numbers back into it for saving.
 *
 * Forward and backward queue their layers on cu's stream and return at once: nothing here
 * waits for the GPU. As on the CPU, a ReLU right after a Conv2d is computed by the
 * convolution (its output is the convolution's buffer) and Flatten costs nothing. */
#ifndef TAAS_CU_MODEL_H
#define TAAS_CU_MODEL_H

#include <stdint.h>

#include "cu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "model.h"

typedef struct taas_cu_model {
    taas_model *m;                  /* borrowed */
    taas_cu *cu;                    /* borrowed */
    float *params, *grads, *stats;  /* device: m->nparams, m->ntrain, m->nstats floats */
    void *work;                     /* device: the step's memory (model_memory.h), cap bytes */
    size_t cap;
    taas_model_memory mem;          /* planned for the last forward's samples and ops */
    float **act, **grad;            /* per tensor: its value and gradient; the input is the caller's */
    void **aux;                     /* per op: Dropout's mask, BatchNorm's mean | invstd, MaxPool's argmax */
    float **tmp;                    /* per op: its input gradient before it is added */
    float *scratch;                 /* Conv2d's, shared: room floats */
    size_t room;
    int n, nrun, last_train;        /* the last forward: samples, ops run, mode */
    uint64_t last_step;             /* and its step: an attention's backward redraws its dropout */
    /* The last training forward's step, on the device for the dropout counters (cu_device.h),
     * copied there from pinned memory by the forward: a CUDA Graph that replays the forward
     * replays the copy, so the step written into step_host before a replay is the one its
     * masks are drawn for. step_copied: that copy is done (step_host may be written again). */
    uint64_t *step_dev, *step_host;
    cudaEvent_t step_copied;
} taas_cu_model;

/* Uploads m's parameters and statistics to cu's device. 0, or -1 with err (nothing held). */
int taas_cu_model_init(taas_cu_model *dm, taas_model *m, taas_cu *cu, taas_error *err);
/* Frees the device memory (after the stream's work is done); m stays the caller's. */
void taas_cu_model_release(taas_cu_model *dm);

/* Zeroes the gradients (optimizer.zero_grad()). */
int taas_cu_model_zero_grad(taas_cu_model *dm, taas_error *err);
/* Ops [0, nrun) on x, n samples of the input shape in device memory that must stay
 * untouched until the backward has run; train: batch statistics and dropout masks from
 * (m->seed, step), as model_run.c. *out: tensor nrun (op nrun - 1's output), in the model's memory
 * until the next forward. */
int taas_cu_model_forward(taas_cu_model *dm, const float *x, int n, int train, uint64_t step, int nrun,
                          const float **out, taas_error *err);
/* What a training forward of n samples through ops [0, nrun) does on the host, for a replayed
 * CUDA Graph of one (cu_engine.c): step into step_host for the replay's copy, the BatchNorm
 * counters, the last forward's record. The GPU must be done with the last replay. */
void taas_cu_model_replayed(taas_cu_model *dm, int n, uint64_t step, int nrun);
/* Gradients ACCUMULATE into dm->grads from dout, the gradient of the last forward's output
 * (device memory). */
int taas_cu_model_backward(taas_cu_model *dm, const float *dout, taas_error *err);
/* The parameters and running statistics into m->params and m->stats (waits for the GPU). */
int taas_cu_model_download(taas_cu_model *dm, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
