/* The layers of layers.h on the GPU: the same forward and backward functions, shapes and
 * conventions (NCHW float32; parameter gradients ACCUMULATE, input gradients are WRITTEN,
 * NULL skips one), on device pointers, queued on cu's stream. Each returns 0, or -1 with err
 * when a launch or a cuBLAS call is refused; errors while a kernel runs show at the next
 * taas_cu_sync. Implemented by cu_conv.cu, cu_linear.cu, cu_pool.cu, cu_act.cu, cu_norm.cu,
 * cu_softmax.cu, cu_seq.cu and cu_attention.cu. Matrix products are cuBLAS's (taas_cu_gemm:
 * FP32 unless cu->math says TF32 or BF16). */
#ifndef TAAS_CU_LAYERS_H
#define TAAS_CU_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "cu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "layers.h"  /* taas_conv2d_shape, taas_pool2d_shape */

/* ---- Linear: x (N, IN), w (OUT, IN), b (OUT) or NULL -> y (N, OUT) ---- */
int taas_cu_linear_forward(taas_cu *cu, float *y, const float *x, const float *w, const float *b, int n, int in,
                           int out, taas_error *err);
int taas_cu_linear_backward(taas_cu *cu, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int n, int in, int out, taas_error *err);

/* ---- Conv2d (dilation 1) through im2col and sgemm ----
 * The batch goes through in chunks of as many samples as the scratch (`room` floats) holds
 * the column matrix (C/groups*KH*KW rows, a column per output position of each sample; one
 * group's at a time) and the transposed output gradient of; with groups each group is its
 * own product. taas_cu_conv2d_scratch_floats gives the room for s->n
 * samples within a 256 MiB budget (at least one sample's, which a smaller room refuses).
 * With cu->dnn (TAAS_CUDA_CUDNN=1), a shape cuDNN has an algorithm for runs through cuDNN
 * instead, the whole batch at once, and the scratch it is given holds cuDNN's workspace.
 * With relu, y = max(conv + b, 0) (the ReLU after the convolution, fused), and backward
 * takes that y and the gradient of the ReLU's output. */
size_t taas_cu_conv2d_scratch_floats(taas_cu *cu, const taas_conv2d_shape *s);
int taas_cu_conv2d_forward(taas_cu *cu, float *y, const float *x, const float *w, const float *b,
                           const taas_conv2d_shape *s, int relu, float *scratch, size_t room, taas_error *err);
int taas_cu_conv2d_backward(taas_cu *cu, float *dx, float *dw, float *db, const float *dy, const float *y,
                            const float *x, const float *w, const taas_conv2d_shape *s, int relu, float *scratch,
                            size_t room, taas_error *err);

/* ---- MaxPool2d / AvgPool2d (ceil_mode False; count_include_pad True) ----
 * argmax holds the index in the H*W plane; NaN wins, then the first maximum, as PyTorch.
 * Backward gathers per input element (no atomics). */
int taas_cu_maxpool2d_forward(taas_cu *cu, float *y, int32_t *argmax, const float *x, const taas_pool2d_shape *s,
                              taas_error *err);
int taas_cu_maxpool2d_backward(taas_cu *cu, float *dx, const float *dy, const int32_t *argmax,
                               const taas_pool2d_shape *s, taas_error *err);
int taas_cu_avgpool2d_forward(taas_cu *cu, float *y, const float *x, const taas_pool2d_shape *s, taas_error *err);
int taas_cu_avgpool2d_backward(taas_cu *cu, float *dx, const float *dy, const taas_pool2d_shape *s,
                               taas_error *err);

/* ---- AdaptiveAvgPool2d: x (N,C,H,W) -> y (N,C,OH,OW), the CPU's bins (pool_bins.h) ----
 * A thread per output; backward a thread per input element gathering from its bins. */
int taas_cu_adaptive_avgpool2d_forward(taas_cu *cu, float *y, const float *x, int n, int c, int h, int w, int oh,
                                       int ow, taas_error *err);
int taas_cu_adaptive_avgpool2d_backward(taas_cu *cu, float *dx, const float *dy, int n, int c, int h, int w, int oh,
                                        int ow, taas_error *err);

/* ---- A residual connection's sum y = a + b over n floats (y may alias a or b), and y += x:
 * a gradient that reaches a tensor from a second consumer ---- */
int taas_cu_add(taas_cu *cu, float *y, const float *a, const float *b, size_t n, taas_error *err);
int taas_cu_accumulate(taas_cu *cu, float *y, const float *x, size_t n, taas_error *err);

/* ---- Element-wise activations over n floats; y may alias x in forward ---- */
typedef enum taas_cu_act {
    TAAS_CU_RELU, TAAS_CU_LEAKY_RELU, TAAS_CU_TANH, TAAS_CU_SIGMOID, TAAS_CU_GELU, TAAS_CU_GELU_TANH,
} taas_cu_act;
int taas_cu_act_forward(taas_cu *cu, taas_cu_act kind, float *y, const float *x, size_t n, float slope,
                        taas_error *err);
/* Tanh and Sigmoid read the output y, the others the input x. */
int taas_cu_act_backward(taas_cu *cu, taas_cu_act kind, float *dx, const float *dy, const float *x, const float *y,
                         size_t n, float slope, taas_error *err);

/* ---- Dropout, Dropout2d (train mode): the CPU's masks, from taas_ctr_uniform(seed, offset + i) ---- */
int taas_cu_dropout_forward(taas_cu *cu, float *y, float *mask, const float *x, size_t n, float p, uint64_t seed,
                            uint64_t offset, taas_error *err);
int taas_cu_dropout2d_forward(taas_cu *cu, float *y, float *mask, const float *x, int n, int c, int hw, float p,
                              uint64_t seed, uint64_t offset, taas_error *err);
int taas_cu_dropout_backward(taas_cu *cu, float *dx, const float *dy, const float *mask, size_t n, taas_error *err);
int taas_cu_dropout2d_backward(taas_cu *cu, float *dx, const float *dy, const float *mask, int n, int c, int hw,
                               taas_error *err);
/* y = x, n floats (Dropout in eval mode). */
int taas_cu_copy(taas_cu *cu, float *y, const float *x, size_t n, taas_error *err);

/* ---- BatchNorm over (N, C, HW), HW = 1 for BatchNorm1d; statistics summed in double ----
 * Train mode fails as PyTorch (and the CPU) with one value per channel. */
int taas_cu_batchnorm_forward_train(taas_cu *cu, float *y, float *mean, float *invstd, float *running_mean,
                                    float *running_var, const float *x, const float *gamma, const float *beta,
                                    int n, int c, int hw, float momentum, float eps, taas_error *err);
int taas_cu_batchnorm_forward_eval(taas_cu *cu, float *y, const float *x, const float *gamma, const float *beta,
                                   const float *running_mean, const float *running_var, int n, int c, int hw,
                                   float eps, taas_error *err);
int taas_cu_batchnorm_backward(taas_cu *cu, float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *invstd, const float *gamma, int n,
                               int c, int hw, taas_error *err);
int taas_cu_batchnorm_backward_eval(taas_cu *cu, float *dx, float *dgamma, float *dbeta, const float *dy,
                                    const float *x, const float *gamma, const float *running_mean,
                                    const float *running_var, int n, int c, int hw, float eps, taas_error *err);

/* ---- Softmax (logspace 0) / LogSoftmax (logspace 1) over dim 1 of (N, C, D) ---- */
int taas_cu_softmax_forward(taas_cu *cu, float *y, const float *x, int n, int c, int d, int logspace,
                            taas_error *err);
/* Reads the output y. */
int taas_cu_softmax_backward(taas_cu *cu, float *dx, const float *dy, const float *y, int n, int c, int d,
                             int logspace, taas_error *err);

/* ---- Conv1D (Hugging Face's): x (R, IN), w (IN, OUT), b (OUT) or NULL -> y (R, OUT) ---- */
int taas_cu_conv1d_forward(taas_cu *cu, float *y, const float *x, const float *w, const float *b, size_t rows, int in,
                           int out, taas_error *err);
int taas_cu_conv1d_backward(taas_cu *cu, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, size_t rows, int in, int out, taas_error *err);

/* ---- The sequence layers (cu_seq.cu: Embedding, GPT-2's positions, LayerNorm; cu_attention.cu:
 * the fused causal attention), as layers.h's. An id outside [0, V) reads zeros (the rank
 * refuses such a batch before it uploads it). The attention takes
 * taas_cu_attention_scratch_floats of scratch (N*heads*T; with the "gemm" kernels, and where
 * the heads' (T x T) squares fit, two squares of a sample's heads more). ---- */
int taas_cu_embedding_forward(taas_cu *cu, float *y, const float *ids, const float *w, size_t rows, int v, int c,
                              taas_error *err);
/* dw accumulates each id's rows in row order (the CPU's bits); scratch of
 * taas_cu_embedding_scratch_floats(rows) floats (room of them). */
size_t taas_cu_embedding_scratch_floats(size_t rows);
int taas_cu_embedding_backward(taas_cu *cu, float *dw, const float *dy, const float *ids, size_t rows, int v, int c,
                               void *scratch, size_t room, taas_error *err);
int taas_cu_pos_embedding_forward(taas_cu *cu, float *y, const float *x, const float *w, int n, int t, int c,
                                  taas_error *err);
int taas_cu_pos_embedding_backward(taas_cu *cu, float *dx, float *dw, const float *dy, int n, int t, int c,
                                   taas_error *err);
int taas_cu_layernorm_forward(taas_cu *cu, float *y, float *mean, float *rstd, const float *x, const float *g,
                              const float *b, size_t rows, int c, float eps, taas_error *err);
int taas_cu_layernorm_backward(taas_cu *cu, float *dx, float *dg, float *db, const float *dy, const float *x,
                               const float *mean, const float *rstd, const float *g, size_t rows, int c,
                               taas_error *err);
size_t taas_cu_attention_scratch_floats(const taas_cu *cu, const taas_attention_shape *s);
int taas_cu_attention_forward(taas_cu *cu, float *y, float *lse, const float *qkv, const taas_attention_shape *s,
                              float *scratch, size_t room, uint64_t seed, uint64_t offset, taas_error *err);
int taas_cu_attention_backward(taas_cu *cu, float *dqkv, const float *dy, const float *qkv, const float *y,
                               const float *lse, const taas_attention_shape *s, float *scratch, size_t room,
                               uint64_t seed, uint64_t offset, taas_error *err);

/* out[ch] += the sum of x (N, C, HW) over N and HW: a bias's gradient. */
int taas_cu_channel_sum(taas_cu *cu, float *out, const float *x, int n, int c, int hw, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
