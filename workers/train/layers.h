/* Layer forward/backward on raw float32 buffers, in the manner of llm.c.
 * Tensors are contiguous NCHW, (N, F), or (N, T, C) for sequences; shapes are given in the
 * comments. Conventions, as PyTorch's autograd:
 *   - parameter gradients ACCUMULATE (+=) like .grad, so zero them before a step;
 *   - the input gradient is WRITTEN (=);
 *   - the caller owns every buffer, including scratch (sized by the *_scratch_floats helpers).
 * Flatten has no function: on contiguous NCHW memory (N, C, H, W) already is (N, C*H*W). */
#ifndef TAAS_LAYERS_H
#define TAAS_LAYERS_H
#include <stddef.h>
#include <stdint.h>
#include "error.h"

/* ---- Linear: x (N, IN), w (OUT, IN), b (OUT) or NULL -> y (N, OUT) ----
 * sgemm split across omp_get_max_threads() threads (blas.h). */
void taas_linear_forward(float *y, const float *x, const float *w, const float *b,
                         int n, int in, int out);
/* dx (N, IN) written (may be NULL to skip); dw (OUT, IN) and db (OUT, or NULL) accumulate. */
void taas_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, int n, int in, int out);

/* db (OUT) += the column sums of dy (R, OUT), in double down the rows in order. */
void taas_bias_grad(float *db, const float *dy, size_t rows, int out);

/* ---- Conv1D, Hugging Face's (GPT-2's projections): x (R, IN), w (IN, OUT) -> y (R, OUT) ---- */
void taas_conv1d_forward(float *y, const float *x, const float *w, const float *b, size_t rows, int in, int out);
void taas_conv1d_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                          size_t rows, int in, int out);

/* ---- Embedding: ids (R) token ids held as floats, w (V, C) -> y (R, C) ----
 * An id that is not an integer in [0, V) is a TaasValueError naming its place in the batch. */
int taas_embedding_forward(float *y, const float *ids, const float *w, size_t rows, int v, int c, taas_error *e);
/* dw (V, C) accumulates; ids have no gradient. */
void taas_embedding_backward(float *dw, const float *dy, const float *ids, size_t rows, int c);
/* GPT-2's positions: y (N, T, C) = x + w[t] for w (P, C), P >= T; dx written (may be dy),
 * dw accumulates. */
void taas_pos_embedding_forward(float *y, const float *x, const float *w, int n, int t, int c);
void taas_pos_embedding_backward(float *dx, float *dw, const float *dy, int n, int t, int c);

/* ---- LayerNorm over the last axis: x (R, C), g and b (C); mean and rstd (R) saved ---- */
void taas_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *g, const float *b,
                            size_t rows, int c, float eps);
/* dx written (NULL to skip), dg and db accumulate (NULL to skip). */
void taas_layernorm_backward(float *dx, float *dg, float *db, const float *dy, const float *x, const float *mean,
                             const float *rstd, const float *g, size_t rows, int c);

/* ---- Causal self-attention, fused: qkv (N, T, 3C) as GPT-2's c_attn writes it (q, k, v side
 * by side, head h at columns [h D, (h+1) D) of each, D = C / heads) -> y (N, T, C), the heads
 * side by side; softmax(q k^T / sqrt D) over keys <= the query's position, with dropout p on
 * those probabilities. lse (N, heads, T) keeps each row's log-sum-exp for the backward. */
typedef struct taas_attention_shape {
    int n, t, c, heads;
    float p;
} taas_attention_shape;
int taas_attention_check(const taas_attention_shape *s, taas_error *e);
size_t taas_attention_scratch_floats(const taas_attention_shape *s, int nthreads);
void taas_attention_forward(float *y, float *lse, const float *qkv, const taas_attention_shape *s, float *scratch,
                            int nthreads, uint64_t seed, uint64_t offset);
/* dqkv (N, T, 3C) written. */
void taas_attention_backward(float *dqkv, const float *dy, const float *qkv, const float *y, const float *lse,
                             const taas_attention_shape *s, float *scratch, int nthreads, uint64_t seed,
                             uint64_t offset);

/* ---- Conv2d (dilation 1) ----
 * With G groups the channels split into G blocks: output channels [g*OC/G, (g+1)*OC/G) see
 * only input channels [g*C/G, (g+1)*C/G), through weight rows of C/G channels each. */
typedef struct taas_conv2d_shape {
    int n, c, h, w;        /* input (N, C, H, W) */
    int oc, kh, kw;        /* weight (OC, C/groups, KH, KW), bias (OC) */
    int sh, sw, ph, pw;    /* stride and zero padding */
    int groups;            /* 0 means 1: an initializer without it is an ungrouped convolution */
} taas_conv2d_shape;
/* groups, 1 for 0 */
static inline int taas_conv2d_groups(const taas_conv2d_shape *s) { return s->groups > 0 ? s->groups : 1; }
int taas_conv2d_out_h(const taas_conv2d_shape *s);
int taas_conv2d_out_w(const taas_conv2d_shape *s);
/* Checks the shape (positive sizes, kernel fits the padded input, groups divide C and OC);
 * -1 with e filled. */
int taas_conv2d_check(const taas_conv2d_shape *s, taas_error *e);
/* Scratch floats forward/backward need when run with `nthreads` OpenMP threads; allocated
 * 64-byte aligned (aligned_alloc) it keeps the vector kernels on cache lines. */
size_t taas_conv2d_scratch_floats(const taas_conv2d_shape *s, int nthreads);
/* On by default: products of several samples on small planes. Tests turn it off so that
 * small shapes take the one-sample paths (the direct kernels, where those run). */
void taas_conv2d_sample_products(int on);
/* On by default: Winograd for a 3x3 stride-1 convolution's forward and both gradients where
 * conv_winograd.h says it applies. Tests turn it off to compare. */
void taas_conv2d_winograd(int on);
/* x (N,C,H,W), w (OC,C/groups,KH,KW), b (OC) or NULL -> y (N,OC,OH,OW). OpenMP over the
 * batch, each thread a slice of it with single-threaded sgemm (blas.h), one product per
 * group; a sample at a time, or on small planes (under 256 outputs a channel, no groups)
 * several samples' columns in one product. */
void taas_conv2d_forward(float *y, const float *x, const float *w, const float *b,
                         const taas_conv2d_shape *s, float *scratch, int nthreads);
/* dx (N,C,H,W) written (NULL to skip); dw, db (NULL to skip) accumulate, summed per thread
 * and then in thread order: the same nthreads gives the same bits. */
void taas_conv2d_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, const taas_conv2d_shape *s, float *scratch,
                          int nthreads);
/* Conv2d followed by ReLU, fused: y = max(conv(x) + b, 0), each sample's output rectified
 * while it is in cache. The backward takes dy, the gradient of the ReLU's output, and that
 * output y (dy counts where y > 0), so the pair costs no pass of its own over memory. */
void taas_conv2d_relu_forward(float *y, const float *x, const float *w, const float *b,
                              const taas_conv2d_shape *s, float *scratch, int nthreads);
void taas_conv2d_relu_backward(float *dx, float *dw, float *db, const float *dy, const float *y,
                               const float *x, const float *w, const taas_conv2d_shape *s,
                               float *scratch, int nthreads);

/* ---- MaxPool2d / AvgPool2d (ceil_mode False; AvgPool count_include_pad True) ---- */
typedef struct taas_pool2d_shape {
    int n, c, h, w;        /* input (N, C, H, W) */
    int kh, kw, sh, sw, ph, pw;
} taas_pool2d_shape;
int taas_pool2d_out_h(const taas_pool2d_shape *s);
int taas_pool2d_out_w(const taas_pool2d_shape *s);
/* As PyTorch: padding at most half the kernel, output at least 1x1; -1 with e filled. */
int taas_pool2d_check(const taas_pool2d_shape *s, taas_error *e);
/* x (N,C,H,W) -> y (N,C,OH,OW); argmax (N,C,OH,OW) holds the index within the H*W plane. */
void taas_maxpool2d_forward(float *y, int32_t *argmax, const float *x, const taas_pool2d_shape *s);
void taas_maxpool2d_backward(float *dx, const float *dy, const int32_t *argmax,
                             const taas_pool2d_shape *s);
void taas_avgpool2d_forward(float *y, const float *x, const taas_pool2d_shape *s);
void taas_avgpool2d_backward(float *dx, const float *dy, const taas_pool2d_shape *s);

/* ---- AdaptiveAvgPool2d: x (N,C,H,W) -> y (N,C,OH,OW), PyTorch's bins: output row i averages
 * rows [floor(i*H/OH), ceil((i+1)*H/OH)), columns likewise (bins overlap where OH does not
 * divide H, and repeat rows where OH > H). The backward gathers: each input element adds up
 * the gradients of its bins in output order, dx written. ---- */
/* Input and output planes non-empty (the bins divide by OH and H); -1 with e filled. */
int taas_adaptive_avgpool2d_check(int h, int w, int oh, int ow, taas_error *e);
void taas_adaptive_avgpool2d_forward(float *y, const float *x, int n, int c, int h, int w, int oh, int ow);
void taas_adaptive_avgpool2d_backward(float *dx, const float *dy, int n, int c, int h, int w, int oh, int ow);

/* ---- A residual connection's sum: y = a + b over n floats (y may alias a or b) ---- */
void taas_add_forward(float *y, const float *a, const float *b, size_t n);
/* y += x over n floats: a gradient that reaches a tensor from a second consumer */
void taas_accumulate(float *y, const float *x, size_t n);

/* ---- Element-wise activations over n floats; y may alias x in forward ---- */
void taas_relu_forward(float *y, const float *x, size_t n);
void taas_relu_backward(float *dx, const float *dy, const float *x, size_t n);
void taas_leaky_relu_forward(float *y, const float *x, size_t n, float slope);
void taas_leaky_relu_backward(float *dx, const float *dy, const float *x, size_t n, float slope);
void taas_tanh_forward(float *y, const float *x, size_t n);
void taas_tanh_backward(float *dx, const float *dy, const float *y, size_t n);   /* uses y */
void taas_sigmoid_forward(float *y, const float *x, size_t n);
void taas_sigmoid_backward(float *dx, const float *dy, const float *y, size_t n); /* uses y */
/* GELU, exact form x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (PyTorch's approximate='none'). */
void taas_gelu_forward(float *y, const float *x, size_t n);
void taas_gelu_backward(float *dx, const float *dy, const float *x, size_t n);
/* GELU(approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's. */
void taas_gelu_tanh_forward(float *y, const float *x, size_t n);
void taas_gelu_tanh_backward(float *dx, const float *dy, const float *x, size_t n);

/* ---- Dropout (train mode; in eval mode it is the identity) ----
 * The mask holds 0 or 1/(1-p) and comes from a counter-based RNG: element (or channel) i
 * draws taas_ctr_uniform(seed, offset + i), so a step is reproducible from (seed, offset).
 * p must be in [0, 1]; p == 1 zeroes everything, as PyTorch. */
int taas_dropout_check(float p, taas_error *e);
/* x, y, mask: n floats. */
void taas_dropout_forward(float *y, float *mask, const float *x, size_t n, float p,
                          uint64_t seed, uint64_t offset);
/* Dropout2d zeroes whole channels: x (N, C, HW), mask (N*C). */
void taas_dropout2d_forward(float *y, float *mask, const float *x, int n, int c, int hw,
                            float p, uint64_t seed, uint64_t offset);
void taas_dropout_backward(float *dx, const float *dy, const float *mask, size_t n);
void taas_dropout2d_backward(float *dx, const float *dy, const float *mask, int n, int c, int hw);

/* ---- BatchNorm1d (N, C) is hw == 1; BatchNorm2d (N, C, H, W) has hw = H*W ----
 * gamma, beta, running_mean, running_var: (C). mean and invstd: (C), saved for backward.
 * Train mode normalizes with the biased batch variance and updates the running stats
 * with momentum and the UNBIASED variance; fails (like PyTorch) when N*HW < 2. */
int taas_batchnorm_forward_train(float *y, float *mean, float *invstd, float *running_mean,
                                 float *running_var, const float *x, const float *gamma,
                                 const float *beta, int n, int c, int hw, float momentum,
                                 float eps, taas_error *e);
void taas_batchnorm_forward_eval(float *y, const float *x, const float *gamma, const float *beta,
                                 const float *running_mean, const float *running_var, int n,
                                 int c, int hw, float eps);
/* Train-mode backward: dx written, dgamma and dbeta accumulate. */
void taas_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                             const float *x, const float *mean, const float *invstd,
                             const float *gamma, int n, int c, int hw);
/* Eval-mode backward (running stats are constants). */
void taas_batchnorm_backward_eval(float *dx, float *dgamma, float *dbeta, const float *dy,
                                  const float *x, const float *gamma, const float *running_mean,
                                  const float *running_var, int n, int c, int hw, float eps);

/* ---- Softmax / LogSoftmax over dim 1 of (N, C, D) (D = H*W, or 1 for (N, C)) ---- */
void taas_softmax_forward(float *y, const float *x, int n, int c, int d);
void taas_softmax_backward(float *dx, const float *dy, const float *y, int n, int c, int d);
void taas_log_softmax_forward(float *y, const float *x, int n, int c, int d);
void taas_log_softmax_backward(float *dx, const float *dy, const float *y, int n, int c, int d);

#endif
