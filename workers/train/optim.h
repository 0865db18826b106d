/* Optimizers over the one contiguous parameter buffer, its gradient buffer and one state
 * buffer (llm.c style), with exactly PyTorch 1.13's update rules (torch/optim/<name>.py,
 * single-tensor path, maximize=False, foreach=False).
 *
 * The state is one allocation of taas_optim_state_floats() floats, zero-filled by the
 * caller before the first step; `step` is the 1-based step count (PyTorch's state['step']
 * after its increment), which also gives SGD's first-step momentum behaviour. Layout of the
 * state, each part n floats:
 *   SGD       [momentum_buffer]            (empty when momentum == 0)
 *   Adam(W)   [exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only)]
 *   Adadelta  [square_avg, acc_delta]
 *   RMSprop   [square_avg, momentum_buffer (momentum > 0), grad_avg (centered)] */
#ifndef TAAS_OPTIM_H
#define TAAS_OPTIM_H

#include <stddef.h>

#include "error.h"

typedef enum taas_optim_kind {
    TAAS_OPTIM_SGD,
    TAAS_OPTIM_ADAM,
    TAAS_OPTIM_ADAMW,
    TAAS_OPTIM_ADADELTA,
    TAAS_OPTIM_RMSPROP,
} taas_optim_kind;

typedef struct taas_optim_config {
    taas_optim_kind kind;
    double lr;
    double weight_decay;   /* L2 added to the gradient; AdamW: decoupled, p *= 1 - lr*wd */
    double momentum;       /* SGD, RMSprop */
    double dampening;      /* SGD */
    int nesterov;          /* SGD */
    double beta1, beta2;   /* Adam, AdamW */
    double eps;            /* Adam, AdamW, Adadelta, RMSprop */
    int amsgrad;           /* Adam, AdamW */
    double rho;            /* Adadelta */
    double alpha;          /* RMSprop */
    int centered;          /* RMSprop */
} taas_optim_config;

/* PyTorch's defaults for that optimizer (SGD has no default lr in torch; 0.01 here, so a
 * caller must set it). */
void taas_optim_config_default(taas_optim_config *cfg, taas_optim_kind kind);
/* The ValueErrors torch raises in the constructor: negative lr, eps, momentum or
 * weight_decay; betas, rho or alpha outside their range; nesterov without momentum or with
 * dampening. */
int taas_optim_config_check(const taas_optim_config *cfg, taas_error *err);
/* "SGD", "Adam", ... as torch.optim names it. */
const char *taas_optim_name(taas_optim_kind kind);

/* Floats of optimizer state for n parameters. Inline: the CUDA plugin, which links no CPU
 * arithmetic, lays its state out the same way. */
static inline size_t taas_optim_state_floats(const taas_optim_config *cfg, size_t n) {
    switch (cfg->kind) {
    case TAAS_OPTIM_SGD: return cfg->momentum != 0.0 ? n : 0;
    case TAAS_OPTIM_ADAM:
    case TAAS_OPTIM_ADAMW: return (cfg->amsgrad ? 3 : 2) * n;
    case TAAS_OPTIM_ADADELTA: return 2 * n;
    case TAAS_OPTIM_RMSPROP: return (1 + (cfg->momentum > 0.0) + (cfg->centered != 0)) * n;
    }
    return 0;
}

/* The state's parts in layout order, by torch.optim's names for them (state['exp_avg']):
 * how many (taas_optim_state_floats / n), each named in names[]. */
static inline int taas_optim_state_names(const taas_optim_config *cfg, const char *names[3]) {
    int k = 0;
    switch (cfg->kind) {
    case TAAS_OPTIM_SGD:
        if (cfg->momentum != 0.0) names[k++] = "momentum_buffer";
        break;
    case TAAS_OPTIM_ADAM:
    case TAAS_OPTIM_ADAMW:
        names[k++] = "exp_avg";
        names[k++] = "exp_avg_sq";
        if (cfg->amsgrad) names[k++] = "max_exp_avg_sq";
        break;
    case TAAS_OPTIM_ADADELTA:
        names[k++] = "square_avg";
        names[k++] = "acc_delta";
        break;
    case TAAS_OPTIM_RMSPROP:
        names[k++] = "square_avg";
        if (cfg->momentum > 0.0) names[k++] = "momentum_buffer";
        if (cfg->centered) names[k++] = "grad_avg";
        break;
    }
    return k;
}

/* A span of the parameter buffer with its own weight decay: torch's parameter groups, which
 * differ only there (nanoGPT's two AdamW groups). */
typedef struct taas_optim_span {
    size_t off, len;
    double weight_decay;
} taas_optim_span;

/* One step over n parameters span by span, each with its weight decay; the state keeps the
 * whole buffer's layout (part k of span s at state + k n + s.off). The same numbers as one
 * step of torch over the groups. */
void taas_optim_step_spans(const taas_optim_config *cfg, float *params, const float *grads, float *state,
                           size_t n, long step, const taas_optim_span *spans, size_t nspans);

/* torch.nn.utils.clip_grad_norm_(max_norm) over n gradients: their global 2-norm (summed in
 * double, in blocks whose order depends on n alone: the same bits for any thread count),
 * returned; when it exceeds max_norm, every gradient times max_norm / (norm + 1e-6). */
double taas_clip_grad_norm(float *grads, size_t n, double max_norm);

/* One step of the configured optimizer; the config must have passed the check. */
void taas_optim_step(const taas_optim_config *cfg, float *params, const float *grads, float *state,
                     size_t n, long step);

void taas_sgd_step(const taas_optim_config *cfg, float *params, const float *grads, float *state,
                   size_t n, long step);
/* Adam, and AdamW when cfg->kind == TAAS_OPTIM_ADAMW. */
void taas_adam_step(const taas_optim_config *cfg, float *params, const float *grads, float *state,
                    size_t n, long step);
void taas_adadelta_step(const taas_optim_config *cfg, float *params, const float *grads,
                        float *state, size_t n);
void taas_rmsprop_step(const taas_optim_config *cfg, float *params, const float *grads,
                       float *state, size_t n);

#endif
