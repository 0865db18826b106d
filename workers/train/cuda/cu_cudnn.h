/* Conv2d through cuDNN 9 (TAAS_CUDA_CUDNN=1, docs/cuda.md "Convolutions"): cuDNN is loaded
 * with dlopen when asked for, so that the plugin loads, and trains with its own convolutions,
 * where there is none. Each shape (and arithmetic) is planned once: its descriptors and, from
 * cuDNN's heuristics (no kernel runs, so that planning is allowed while a CUDA Graph is
 * captured), the first deterministic algorithm of each pass that needs at most 256 MiB of
 * workspace and, in FP32, no tensor cores. The passes take that workspace from the caller. */
#ifndef TAAS_CU_CUDNN_H
#define TAAS_CU_CUDNN_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "cu_device.h"
#include "error.h"
#include "layers.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taas_cu_dnn taas_cu_dnn;

/* cuDNN 9 (libcudnn.so.9) on stream st, or NULL with err saying why it did not load. */
taas_cu_dnn *taas_cu_dnn_new(cudaStream_t st, taas_error *err);
void taas_cu_dnn_free(taas_cu_dnn *d);
/* 1 with the workspace bytes the three passes of s in arithmetic math need at most, or 0
 * where cuDNN has no algorithm for them as above (the caller runs its own). */
int taas_cu_dnn_conv_plan(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, size_t *ws_bytes);
/* y (N, OC, OH, OW) = conv(x, w), no bias; dx written, dw accumulated (layers' conventions).
 * s planned (taas_cu_dnn_conv_plan returned 1); ws of at least the planned bytes. 0; 1 where
 * cuDNN refused the planned algorithm as it ran (nothing written; the shape is no longer
 * planned, and the caller runs its own); -1 with err. */
int taas_cu_dnn_conv_forward(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *y,
                             const float *x, const float *w, void *ws, size_t ws_bytes, taas_error *err);
int taas_cu_dnn_conv_backward_data(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *dx,
                                   const float *dy, const float *w, void *ws, size_t ws_bytes, taas_error *err);
int taas_cu_dnn_conv_backward_filter(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *dw,
                                     const float *dy, const float *x, void *ws, size_t ws_bytes, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
