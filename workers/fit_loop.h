/* The training loop of a fit job (docs/jobspec.md), for one rank r of W: a local fit
 * (taas-worker train) is rank 0 of 1, an offloaded job's ranks (taas-worker trainer) are
 * its W ranks. docs/design.md §3: step s of an epoch trains item k = s*W + r on rank r; the ranks
 * sum their gradients weighted by their samples, so W ranks with batches of B train as one
 * process with batches of B*W would, and every rank stops, or fails on a nan loss, at the
 * same step. Validation is sharded the same way and its sums added up. Each rank keeps a
 * per-epoch checksum of the sample indices it trained on. */
#ifndef TAAS_FIT_LOOP_H
#define TAAS_FIT_LOOP_H

#include <jansson.h>
#include <stdint.h>

#include "collective.h"
#include "error.h"
#include "pipeline.h"

/* Where a rank's batches come from: item k of epoch e (never an empty one). 0 and *out (the
 * caller frees it), 1 when stopped, -1 with err. */
typedef int (*taas_take_fn)(void *ctx, uint64_t epoch, uint64_t k, taas_batch **out, taas_error *err);
typedef struct taas_fit_source {
    taas_take_fn take;
    void *ctx;
} taas_fit_source;

typedef struct taas_fit_cfg {
    const json_t *job;          /* borrowed for the fit's life */
    taas_collective *coll;
    /* the train / validate loader comes from loader workers: no pipeline in this process,
     * taas_fit_set_source gives its batches */
    int streamed_train, streamed_val;
    /* of a streamed loader: its dataset's size and sample shape (taas_train_rank.facts), or NULL */
    const json_t *train_facts, *val_facts;
    /* progress lines {"event": "start" | "step" | "epoch", ...}; rank 0 only. Stolen. */
    void (*emit)(void *ctx, json_t *line);
    void *emit_ctx;
    /* rank 0: a checkpoint was written at path (a file of its own, the caller's to remove)
     * for position info {"epoch", "step", "steps"}; 0, or -1 with err (the fit goes on) */
    int (*checkpointed)(void *ctx, const char *path, const json_t *info, taas_error *err);
    const char *checkpoint_path;  /* rank 0: where the engine writes a checkpoint */
    volatile int *stop;         /* non-zero: stop after the step in progress (any rank) */
    int device;                 /* the GPU to train on (engine.h), or -1: the CPU */
} taas_fit_cfg;

typedef struct taas_fit taas_fit;

/* Reads the spec, opens the loaders (this rank's share), builds the model (weights from
 * "weights"), the optimizer and scheduler; with "resume": true, "weights" is a checkpoint
 * (checkpoint.h) and the fit goes on from it exactly. NULL with err. */
taas_fit *taas_fit_new(const taas_fit_cfg *cfg, taas_error *err);
void taas_fit_free(taas_fit *f);
/* which: "train" or "validate". */
void taas_fit_set_source(taas_fit *f, const char *which, taas_fit_source src);

/* Trains. 0 when it ran to the end or stopped (taas_fit_done says which); -1 with err, and
 * *step the global step it failed at (0 before the first). */
int taas_fit_run(taas_fit *f, long long *step, taas_error *err);
/* {"event": "done", "steps", "history", "checksums", "interrupted", "wait_s", "first_wait_s",
 * "step_s"} (the times summed over the ranks), "checkpoints" and "checkpoint_s" (rank 0's,
 * this run's). New reference. */
json_t *taas_fit_done(const taas_fit *f);
/* Writes this rank's weights (safetensors with PyTorch's state_dict names). */
int taas_fit_save(const taas_fit *f, const char *path, taas_error *err);

#endif
