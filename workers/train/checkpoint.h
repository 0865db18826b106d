/* A fit's checkpoint: everything a rank needs to go on exactly where the fit was (docs/
 * jobspec.md). One safetensors file: the model's state_dict under PyTorch's names (so it
 * loads wherever weights do), the optimizer's state under "optimizer.<key>.<part>" with
 * torch.optim's part names (exp_avg, square_avg, ...), and the rest of the fit (step, epoch,
 * history, checksums so far, the scheduler) as JSON in the metadata's "taas.checkpoint". */
#ifndef TAAS_CHECKPOINT_H
#define TAAS_CHECKPOINT_H

#include <jansson.h>

#include "error.h"
#include "model_plan.h"
#include "optim.h"

/* The model's tensors as a table gives them (buffers on the host) and the optimizer's state
 * (taas_optim_state_floats(opt, nparams) floats, laid out as optim.h says) for the trainable
 * parameters, the first nparams floats (model_plan.h's ntrain): a frozen one has none. */
typedef struct taas_checkpoint_bufs {
    const taas_param_entry *table;
    size_t ntable, nparams;
    float *params, *stats;
    int64_t *counters;
    float *state;
} taas_checkpoint_bufs;

/* Writes the checkpoint atomically (a temporary file renamed over path). meta: the fit's
 * state, borrowed. 0, or -1 with err. */
int taas_checkpoint_write(const char *path, const taas_checkpoint_bufs *b, const taas_optim_config *opt,
                          const json_t *meta, taas_error *err);
/* Reads path into the buffers (nothing is written to them unless every tensor fits) and
 * *meta (a new reference). A file that is not a checkpoint of this model and optimizer is
 * a TaasValueError that says which. */
int taas_checkpoint_read(const char *path, const taas_checkpoint_bufs *b, const taas_optim_config *opt,
                         json_t **meta, taas_error *err);
/* Only the fit's state of the checkpoint at path (a new reference), after the file's
 * header checks: NULL with err, also when the file is weights but no checkpoint. */
json_t *taas_checkpoint_meta(const char *path, taas_error *err);

/* What a checkpoint's record must agree with: the fit that resumes it. A number the caller
 * does not know is -1 (optimizer NULL, scheduler -1): that field is then checked only for its
 * type and range. */
typedef struct taas_checkpoint_fit {
    const char *optimizer;      /* taas_optim_name of the fit's */
    int scheduler;              /* the fit has one (1) or none (0) */
    long long world, seed, epochs, batch_size, steps_per_epoch;
    long long accumulate;       /* batches an optimizer step; 0: not known */
} taas_checkpoint_fit;

/* Checks every field of a checkpoint's record (docs/jobspec.md) for its type and range and
 * against the fit, and refuses one it does not know: a TaasValueError that names the field
 * and the file (name, as the user gave it). 0, or -1 with err. */
int taas_checkpoint_check(const json_t *meta, const taas_checkpoint_fit *fit, const char *name, taas_error *err);

#endif
