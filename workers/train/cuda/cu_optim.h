/* The optimizers of optim.h on the GPU: one kernel per step over the whole contiguous
 * parameter buffer, its gradients and the state (optim.h's layout), with optim.c's update
 * rules operation for operation: the scalars worked out on the host in double as there, the
 * element-wise arithmetic in float without contraction into FMAs (the plugin is built with
 * --fmad=false, as the CPU's strict C11 build contracts none), so a step gives the CPU's bits. */
#ifndef TAAS_CU_OPTIM_H
#define TAAS_CU_OPTIM_H

#include <stddef.h>

#include "cu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "optim.h"

/* One step of cfg's optimizer (checked by taas_optim_config_check); state holds
 * taas_optim_state_floats(cfg, n) floats, zeroed before the first step; step counts from 1. */
int taas_cu_optim_step(taas_cu *cu, const taas_optim_config *cfg, float *params, const float *grads, float *state,
                       size_t n, long step, taas_error *err);
/* taas_optim_step_spans on the GPU: span by span, each with its weight decay. */
int taas_cu_optim_step_spans(taas_cu *cu, const taas_optim_config *cfg, float *params, const float *grads, float *state,
                             size_t n, long step, const taas_optim_span *spans, size_t nspans, taas_error *err);
/* taas_clip_grad_norm on the GPU, without a round trip to the host: the squares summed in
 * double by fixed blocks, the factor worked out and applied on the device. scratch: a device
 * buffer of taas_cu_clip_scratch_bytes(n) bytes. */
size_t taas_cu_clip_scratch_bytes(size_t n);
int taas_cu_clip_grad_norm(taas_cu *cu, float *grads, size_t n, double max_norm, void *scratch, taas_error *err);
/* x *= w over n floats. */
int taas_cu_scale(taas_cu *cu, float *x, size_t n, float w, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
