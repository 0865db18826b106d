/* Losses with PyTorch's default mean reduction: forward gives the scalar loss, backward the
 * gradient w.r.t. the input, scaled by dloss (1 for a plain loss.backward()) and 1/N.
 * Shapes in the comments; all buffers are contiguous row-major float32. Not supported:
 * class weights, reductions other than mean, probability targets.
 *
 * ignore_index (torch's, -100 by default): a sample whose target equals it counts nowhere:
 * no loss, a zero gradient row, and N above is the number of the other samples (M). Its
 * target is not range-checked. With every sample ignored the loss is nan and the gradient
 * zero, as torch 1.13 gives. */
#ifndef TAAS_LOSS_H
#define TAAS_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* NLLLoss: logp (N, C) log-probabilities, target (N) class indices in [0, C) or ignore_index.
 * loss = -1/M sum_i logp[i, target[i]] over the M counted samples. A target out of range is
 * a TaasValueError naming the sample and the class count. */
int taas_nll_loss_forward(float *loss, const float *logp, const int64_t *target, int n, int c,
                          int64_t ignore_index, taas_error *err);
/* dlogp (N, C) is overwritten: -dloss/M at each counted target, 0 elsewhere. target must have
 * passed the forward's check. */
void taas_nll_loss_backward(float *dlogp, const int64_t *target, int n, int c, int64_t ignore_index,
                            float dloss);

/* CrossEntropyLoss on logits (N, C) with label_smoothing s in [0, 1], as PyTorch:
 * loss_i = (1 - s) * -logp[i, t_i] + s/C * sum_c -logp[i, c], logp = log_softmax(logits),
 * averaged over the M counted samples (the smoothing term too, as torch 1.13).
 * probs (N, C) receives softmax(logits), which the backward needs. */
int taas_cross_entropy_forward(float *loss, float *probs, const float *logits, const int64_t *target,
                               int n, int c, float label_smoothing, int64_t ignore_index, taas_error *err);
/* dlogits (N, C) = dloss/M * (probs - (1 - s) * onehot(target) - s/C), 0 in ignored rows. */
void taas_cross_entropy_backward(float *dlogits, const float *probs, const int64_t *target, int n,
                                 int c, float label_smoothing, int64_t ignore_index, float dloss);

/* M: the samples whose target is not ignore_index (inline: the CUDA plugin, which links no
 * CPU loss, counts its batches' too). */
static inline int taas_loss_counted(const int64_t *target, int n, int64_t ignore_index) {
    int m = 0;
    for (int i = 0; i < n; i++) m += target[i] != ignore_index;
    return m;
}

/* MSELoss: x, y (count) -> mean((x - y)^2); dx = dloss * 2 (x - y) / count. */
float taas_mse_loss_forward(const float *x, const float *y, size_t count);
void taas_mse_loss_backward(float *dx, const float *x, const float *y, size_t count, float dloss);

#endif
