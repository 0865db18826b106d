/* The CUDA engine (engine.h's ops on one GPU): the plugin's taas_cuda_engine_new. A step:
 * the batch's copy (cu_stage.h: already on its way when the loop took it ahead), zero_grad,
 * forward, the loss and backward queued on the stream; then the loop's next batch is taken
 * and its copy queued while they run; then the wait for the loss. update weights and sums
 * the gradients over the ranks with NCCL (a world of one neither scales nor sums) and runs
 * one optimizer kernel over the parameter buffer.
 *
 * With TAAS_CUDA_STATS=1 in the environment the engine measures, and prints to stderr when
 * it is freed, one line {"event": "cuda_stats", "steps", "gpu_busy_s", "data_wait_s"}: the
 * GPU's time in the steps' kernels, and the time the rank waited for the next batch after
 * the GPU had finished the step (a GPU idle for want of data; bench/gpu_bench.py reads it). */
#ifndef TAAS_CU_ENGINE_H
#define TAAS_CU_ENGINE_H

#include "cu_model.h"
#include "cuda_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For the tests: the engine's model on the device (its gradients after compute). */
taas_cu_model *taas_cu_engine_model(taas_engine *e);
/* The training steps that replayed a captured CUDA Graph so far (docs/cuda.md), for tests. */
long taas_cu_engine_replays(taas_engine *e);

#ifdef __cplusplus
}
#endif

#endif
