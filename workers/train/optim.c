/* PyTorch 1.13's optimizer update rules on flat buffers. Each element's update is
 * independent, so the loops vectorise (simd.h) and split across OpenMP threads when the
 * buffer is big enough to pay for it. Scalars derived from hyper-parameters are computed in double as Python does,
 * then applied in float as torch's float kernels do. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

#include "errnames.h"
#include "simd.h"

void taas_optim_config_default(taas_optim_config *cfg, taas_optim_kind kind) {
    *cfg = (taas_optim_config){.kind = kind, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    switch (kind) {
    case TAAS_OPTIM_SGD: cfg->lr = 0.01; break;
    case TAAS_OPTIM_ADAM: break;
    case TAAS_OPTIM_ADAMW: cfg->weight_decay = 1e-2; break;
    case TAAS_OPTIM_ADADELTA: cfg->lr = 1.0; cfg->rho = 0.9; cfg->eps = 1e-6; break;
    case TAAS_OPTIM_RMSPROP: cfg->lr = 1e-2; cfg->alpha = 0.99; break;
    }
}

const char *taas_optim_name(taas_optim_kind kind) {
    switch (kind) {
    case TAAS_OPTIM_SGD: return "SGD";
    case TAAS_OPTIM_ADAM: return "Adam";
    case TAAS_OPTIM_ADAMW: return "AdamW";
    case TAAS_OPTIM_ADADELTA: return "Adadelta";
    case TAAS_OPTIM_RMSPROP: return "RMSprop";
    }
    return "?";
}

static int bad(taas_error *err, const taas_optim_config *cfg, const char *what, double v,
               const char *hint) {
    taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0}, "%s: invalid %s %g",
                   taas_optim_name(cfg->kind), what, v);
    taas_error_hint(err, "%s", hint);
    return -1;
}

int taas_optim_config_check(const taas_optim_config *cfg, taas_error *err) {
    taas_optim_kind k = cfg->kind;
    if (!(cfg->lr >= 0.0)) return bad(err, cfg, "learning rate", cfg->lr, "lr must be >= 0, e.g. lr=0.01");
    if (!(cfg->weight_decay >= 0.0))
        return bad(err, cfg, "weight_decay", cfg->weight_decay, "weight_decay must be >= 0 (0 turns it off)");
    if ((k == TAAS_OPTIM_SGD || k == TAAS_OPTIM_RMSPROP) && !(cfg->momentum >= 0.0))
        return bad(err, cfg, "momentum", cfg->momentum, "momentum must be >= 0, e.g. momentum=0.9");
    if (k == TAAS_OPTIM_SGD && cfg->nesterov && (cfg->momentum <= 0.0 || cfg->dampening != 0.0)) {
        taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0},
                       "SGD: nesterov=True needs momentum > 0 and dampening = 0 (got momentum=%g, "
                       "dampening=%g)", cfg->momentum, cfg->dampening);
        taas_error_hint(err, "set momentum (e.g. 0.9) and leave dampening at 0, or drop nesterov");
        return -1;
    }
    if (k != TAAS_OPTIM_SGD && !(cfg->eps >= 0.0))
        return bad(err, cfg, "epsilon value", cfg->eps, "eps must be >= 0, e.g. eps=1e-8");
    if (k == TAAS_OPTIM_ADAM || k == TAAS_OPTIM_ADAMW) {
        if (!(cfg->beta1 >= 0.0 && cfg->beta1 < 1.0))
            return bad(err, cfg, "beta parameter at index 0", cfg->beta1, "betas must be in [0, 1), e.g. betas=(0.9, 0.999)");
        if (!(cfg->beta2 >= 0.0 && cfg->beta2 < 1.0))
            return bad(err, cfg, "beta parameter at index 1", cfg->beta2, "betas must be in [0, 1), e.g. betas=(0.9, 0.999)");
    }
    if (k == TAAS_OPTIM_ADADELTA && !(cfg->rho >= 0.0 && cfg->rho <= 1.0))
        return bad(err, cfg, "rho value", cfg->rho, "rho must be in [0, 1], e.g. rho=0.9");
    if (k == TAAS_OPTIM_RMSPROP && !(cfg->alpha >= 0.0))
        return bad(err, cfg, "alpha value", cfg->alpha, "alpha must be >= 0, e.g. alpha=0.99");
    return 0;
}

TAAS_VEC void taas_sgd_step(const taas_optim_config *cfg, float *params, const float *grads, float *state,
                   size_t n, long step) {
    const float lr = (float)cfg->lr, wd = (float)cfg->weight_decay, mom = (float)cfg->momentum;
    const float damp1 = (float)(1.0 - cfg->dampening);
    const int use_mom = cfg->momentum != 0.0, nesterov = cfg->nesterov, first = step <= 1;
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float d = grads[i];
        if (wd != 0.0f) d += wd * params[i];
        if (use_mom) {
            /* torch starts the buffer as a copy of the first gradient: no dampening then */
            float b = first ? d : state[i] * mom + damp1 * d;
            state[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        params[i] -= lr * d;
    }
}

/* The steps below on n parameters whose state parts lie `part` floats apart (n for a whole
 * buffer, more for a span of one). */
TAAS_VEC static void adam(const taas_optim_config *cfg, float *params, const float *grads, float *state, size_t n,
                          size_t part, long step) {
    const int decoupled = cfg->kind == TAAS_OPTIM_ADAMW, ams = cfg->amsgrad;
    const float b1 = (float)cfg->beta1, b2 = (float)cfg->beta2, eps = (float)cfg->eps;
    const float omb1 = (float)(1.0 - cfg->beta1), omb2 = (float)(1.0 - cfg->beta2);
    const float wd = decoupled ? 0.0f : (float)cfg->weight_decay;
    const float shrink = (float)(1.0 - cfg->lr * cfg->weight_decay);
    const double bc1 = 1.0 - pow(cfg->beta1, (double)step);
    const float bc2_sqrt = (float)sqrt(1.0 - pow(cfg->beta2, (double)step));
    const float step_size = (float)(cfg->lr / bc1);
    float *m = state, *v = state + part, *vmax = state + 2 * part;
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float p = params[i], g = grads[i];
        if (decoupled) p *= shrink;
        else if (wd != 0.0f) g += wd * p;
        m[i] = m[i] * b1 + omb1 * g;
        v[i] = v[i] * b2 + omb2 * g * g;
        float s = v[i];
        if (ams) {
            vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
            s = vmax[i];
        }
        float denom = sqrtf(s) / bc2_sqrt + eps;
        params[i] = p - step_size * (m[i] / denom);
    }
}

void taas_adam_step(const taas_optim_config *cfg, float *params, const float *grads, float *state, size_t n,
                    long step) {
    adam(cfg, params, grads, state, n, n, step);
}

TAAS_VEC static void adadelta(const taas_optim_config *cfg, float *params, const float *grads, float *state, size_t n,
                              size_t part) {
    const float lr = (float)cfg->lr, wd = (float)cfg->weight_decay, rho = (float)cfg->rho;
    const float omrho = (float)(1.0 - cfg->rho), eps = (float)cfg->eps;
    float *sq = state, *acc = state + part;
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        if (wd != 0.0f) g += wd * params[i];
        sq[i] = sq[i] * rho + omrho * g * g;
        float std = sqrtf(sq[i] + eps);
        float delta = sqrtf(acc[i] + eps) / std * g;
        acc[i] = acc[i] * rho + omrho * delta * delta;
        params[i] -= lr * delta;
    }
}

void taas_adadelta_step(const taas_optim_config *cfg, float *params, const float *grads, float *state, size_t n) {
    adadelta(cfg, params, grads, state, n, n);
}

TAAS_VEC static void rmsprop(const taas_optim_config *cfg, float *params, const float *grads, float *state, size_t n,
                             size_t part) {
    const float lr = (float)cfg->lr, wd = (float)cfg->weight_decay, alpha = (float)cfg->alpha;
    const float omalpha = (float)(1.0 - cfg->alpha), eps = (float)cfg->eps, mom = (float)cfg->momentum;
    const int use_mom = cfg->momentum > 0.0, centered = cfg->centered;
    float *sq = state, *buf = state + part, *gavg = state + (use_mom ? 2 : 1) * part;
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        if (wd != 0.0f) g += wd * params[i];
        sq[i] = sq[i] * alpha + omalpha * g * g;
        float avg;
        if (centered) {
            gavg[i] = gavg[i] * alpha + omalpha * g;
            avg = sqrtf(sq[i] - gavg[i] * gavg[i]) + eps;
        } else {
            avg = sqrtf(sq[i]) + eps;
        }
        if (use_mom) {
            buf[i] = buf[i] * mom + g / avg;
            params[i] -= lr * buf[i];
        } else {
            params[i] -= lr * (g / avg);
        }
    }
}

void taas_rmsprop_step(const taas_optim_config *cfg, float *params, const float *grads, float *state, size_t n) {
    rmsprop(cfg, params, grads, state, n, n);
}

/* One step over n parameters with state parts `part` apart (SGD's one part needs none). */
static void step_part(const taas_optim_config *cfg, float *params, const float *grads, float *state, size_t n,
                      size_t part, long step) {
    switch (cfg->kind) {
    case TAAS_OPTIM_SGD: taas_sgd_step(cfg, params, grads, state, n, step); break;
    case TAAS_OPTIM_ADAM:
    case TAAS_OPTIM_ADAMW: adam(cfg, params, grads, state, n, part, step); break;
    case TAAS_OPTIM_ADADELTA: adadelta(cfg, params, grads, state, n, part); break;
    case TAAS_OPTIM_RMSPROP: rmsprop(cfg, params, grads, state, n, part); break;
    }
}

void taas_optim_step(const taas_optim_config *cfg, float *params, const float *grads, float *state,
                     size_t n, long step) {
    step_part(cfg, params, grads, state, n, n, step);
}

void taas_optim_step_spans(const taas_optim_config *cfg, float *params, const float *grads, float *state,
                           size_t n, long step, const taas_optim_span *spans, size_t nspans) {
    for (size_t k = 0; k < nspans; k++) {
        taas_optim_config c = *cfg;
        c.weight_decay = spans[k].weight_decay;
        size_t o = spans[k].off;
        step_part(&c, params + o, grads + o, state ? state + o : NULL, spans[k].len, n, step);
    }
}

/* the sum of squares of a block, in LANES double lanes added in a fixed order */
enum { LANES = 8, NORM_BLOCK = 1 << 16 };
TAAS_VEC static double block_squares(const float *g, size_t n) {
    double a[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) a[l] += (double)g[i + l] * g[i + l];
    for (; i < n; i++) a[i % LANES] += (double)g[i] * g[i];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

double taas_clip_grad_norm(float *grads, size_t n, double max_norm) {
    size_t nb = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    double *part = malloc((nb ? nb : 1) * sizeof *part), total = 0;
    if (part) {
#pragma omp parallel for if (n >= TAAS_PAR_MIN) schedule(static)
        for (size_t b = 0; b < nb; b++) {
            size_t at = b * NORM_BLOCK;
            part[b] = block_squares(grads + at, n - at < NORM_BLOCK ? n - at : NORM_BLOCK);
        }
        for (size_t b = 0; b < nb; b++) total += part[b];
        free(part);
    } else {  /* no memory for the blocks' sums: one thread, the same blocks */
        for (size_t b = 0; b < nb; b++) total += block_squares(grads + b * NORM_BLOCK, n - b * NORM_BLOCK < NORM_BLOCK ? n - b * NORM_BLOCK : NORM_BLOCK);
    }
    double norm = sqrt(total), coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        float c = (float)coef;
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++) grads[i] *= c;
    }
    return norm;
}
