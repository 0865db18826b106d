/* The losses of a fit on the GPU (PyTorch's mean reduction, the CPU's arithmetic of
 * loss.c): each sample's loss in double, for the host to add up, and the gradient of the
 * mean. CrossEntropyLoss on logits is log-softmax and NLL in one pass per row, so a model
 * that ends in LogSoftmax and trains with NLLLoss runs it too, on the LogSoftmax's input
 * (the same numbers, one pass and one layer's backward less). Targets must be in [0, C) or
 * ignore_index: the caller checks them on the host, where the message can name the sample;
 * a kernel that meets one anyway gives the row a NaN loss and a zero gradient row.
 * A row whose target is ignore_index has loss 0 and a zero gradient row; the host, which
 * has the targets, counts the M other rows, passes scale = 1/M (0 when M is 0: torch's zero
 * gradient) and divides the rows' sum by M. */
#ifndef TAAS_CU_LOSS_H
#define TAAS_CU_LOSS_H

#include <stdint.h>

#include "cu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NLLLoss on log-probabilities logp (N, C): loss[i] = -logp[i, t_i]; d (N, C) or NULL: the
 * mean's gradient, -scale at each counted target and 0 elsewhere. */
int taas_cu_nll_rows(taas_cu *cu, double *loss, float *d, const float *logp, const int64_t *target, int n, int c,
                     int64_t ignore_index, float scale, taas_error *err);
/* CrossEntropyLoss(label_smoothing=s) on logits (N, C): loss[i] = (1-s) * -logp[i, t_i] + s/C *
 * sum_j -logp[i, j]; d (N, C) or NULL: (softmax - (1-s) onehot - s/C) * scale in counted rows. */
int taas_cu_cross_entropy_rows(taas_cu *cu, double *loss, float *d, const float *logits, const int64_t *target,
                               int n, int c, float smoothing, int64_t ignore_index, float scale, taas_error *err);
/* right[i] = 1 when row i's first highest value is at its target (NaN is never highest); 0 for
 * a row whose target is ignore_index. */
int taas_cu_argmax_right(taas_cu *cu, int *right, const float *out, const int64_t *target, int n, int c,
                         int64_t ignore_index, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
