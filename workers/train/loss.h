/* Losses with PyTorch's default mean reduction: forward gives the scalar loss, backward the
 * gradient w.r.t. the input, scaled by dloss (1 for a plain loss.backward()) and 1/N.
 * Shapes in the comments; all buffers are contiguous row-major float32. Not supported:
 * class weights, ignore_index, reductions other than mean, probability targets. */
#ifndef TAAS_LOSS_H
#define TAAS_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* NLLLoss: logp (N, C) log-probabilities, target (N) class indices in [0, C).
 * loss = -mean_i logp[i, target[i]]. A target out of range is a TaasValueError naming the
 * sample and the class count. */
int taas_nll_loss_forward(float *loss, const float *logp, const int64_t *target, int n, int c,
                          taas_error *err);
/* dlogp (N, C) is overwritten: -dloss/N at each target, 0 elsewhere. target must have
 * passed the forward's check. */
void taas_nll_loss_backward(float *dlogp, const int64_t *target, int n, int c, float dloss);

/* CrossEntropyLoss on logits (N, C) with label_smoothing s in [0, 1], as PyTorch:
 * loss_i = (1 - s) * -logp[i, t_i] + s/C * sum_c -logp[i, c], logp = log_softmax(logits).
 * probs (N, C) receives softmax(logits), which the backward needs. */
int taas_cross_entropy_forward(float *loss, float *probs, const float *logits, const int64_t *target,
                               int n, int c, float label_smoothing, taas_error *err);
/* dlogits (N, C) = dloss/N * (probs - (1 - s) * onehot(target) - s/C). */
void taas_cross_entropy_backward(float *dlogits, const float *probs, const int64_t *target, int n,
                                 int c, float label_smoothing, float dloss);

/* MSELoss: x, y (count) -> mean((x - y)^2); dx = dloss * 2 (x - y) / count. */
float taas_mse_loss_forward(const float *x, const float *y, size_t count);
void taas_mse_loss_backward(float *dx, const float *x, const float *y, size_t count, float dloss);

#endif
