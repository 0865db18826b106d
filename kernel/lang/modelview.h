/* Private to kernel/lang: a model as the kernel sees it before a job starts. Its plan
 * (workers/train/model_plan.h, linked from taas_plan: no arithmetic) for the samples a
 * loader gives finds shape errors, named by layer, before any worker is launched; a
 * weights file is checked against the plan's state_dict table when it is loaded. */
#ifndef TAAS_MODELVIEW_H
#define TAAS_MODELVIEW_H

#include "builtins.h"
#include "interp.h"
#include "model_plan.h"
#include "value.h"

/* Plans the Sequential for the samples of the DataLoader (their shape after the transform,
 * from the dataset's probe); `what` names the loader in messages ("the training loader").
 * 0 with *plan filled (free it with taas_model_plan_free), or -1 with err. */
int taas_model_plan_for(taas_interp *in, const taas_value *model, const taas_value *loader, const char *what,
                        taas_model_plan *plan, taas_error *err);

/* Checks that path is a safetensors file whose tensors are the model's state_dict: every
 * key, dtype and shape (a Lazy layer's inferred size is not known yet and fits any).
 * 0, or -1 with err naming the file and the key. Reads the header only. */
int taas_model_check_weights(const taas_value *model, const char *path, taas_error *err);
/* load(strict=False): writes to dst the model's tensors taken from path where it has them
 * (same dtype and shape, else an error naming the key), from the model's own weights file
 * (when it has one) for the rest; a tensor in neither is left out and the file is marked
 * partial (TAAS_ST_PARTIAL_KEY: the ranks initialise it from the seed). The model's keys path
 * lacks are appended to missing, path's keys the model lacks to unexpected (both JSON arrays,
 * PyTorch's order: the model's, the file's). 0, or -1 with err. */
int taas_model_load_some(const taas_value *model, const char *path, const char *dst, json_t *missing,
                         json_t *unexpected, taas_error *err);
/* A part of a model was replaced (net.fc = Linear(512, 10)): a copy of the weights file src
 * without the tensors under prefix ("fc.") nor an optimizer's state, marked partial (the
 * new part is initialised when it trains), in a new folder of its own; *dst gets its path
 * (malloc'd), or NULL when src has no tensor under prefix and the new part has none either
 * (!fresh: src stays as it is). 0, or -1 with err. */
int taas_weights_without(const char *src, const char *prefix, int fresh, char **dst, taas_error *err);

/* 1 when the weights file at path is marked partial, 0 when not, -1 with err. */
int taas_weights_partial(const char *path, taas_error *err);

/* The model's summary, as torchinfo prints one: each layer with its output shape and
 * parameters, the totals and the memory. sample: the input sample (C, H, W; H = W = 0 for C
 * features), or NULL for the one the model has seen (fit, evaluate), if any; batch > 0 puts
 * that batch size in the shapes and the memory, else N. A mime bundle (text/plain,
 * text/html), or NULL with err (the layer that does not fit) when a given sample does not,
 * or when out of memory (TaasMemoryError). */
json_t *taas_model_summary(const taas_value *model, const int32_t *sample, int64_t batch, taas_error *err);

#endif
