// The optimizers on the GPU (cu_optim.h): optim.c's loops as kernels, one thread an element.
#include <math.h>

#include "cu_kern.cuh"
#include "cu_optim.h"

struct sgd_args {
    float lr, wd, mom, damp1;
    int use_mom, nesterov, first;
};

__global__ static void sgd(float *params, const float *grads, float *buf, size_t n, sgd_args a) {
    TAAS_CU_LOOP(i, n) {
        float d = grads[i];
        if (a.wd != 0.0f) d += a.wd * params[i];
        if (a.use_mom) {
            // torch starts the buffer as a copy of the first gradient: no dampening then
            float b = a.first ? d : buf[i] * a.mom + a.damp1 * d;
            buf[i] = b;
            d = a.nesterov ? d + a.mom * b : b;
        }
        params[i] -= a.lr * d;
    }
}

struct adam_args {
    float b1, b2, eps, omb1, omb2, wd, shrink, bc2_sqrt, step_size;
    int decoupled, ams;
};

__global__ static void adam(float *params, const float *grads, float *m, float *v, float *vmax, size_t n,
                            adam_args a) {
    TAAS_CU_LOOP(i, n) {
        float p = params[i], g = grads[i];
        if (a.decoupled) p *= a.shrink;
        else if (a.wd != 0.0f) g += a.wd * p;
        m[i] = m[i] * a.b1 + a.omb1 * g;
        v[i] = v[i] * a.b2 + a.omb2 * g * g;
        float s = v[i];
        if (a.ams) {
            vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
            s = vmax[i];
        }
        float denom = sqrtf(s) / a.bc2_sqrt + a.eps;
        params[i] = p - a.step_size * (m[i] / denom);
    }
}

struct adadelta_args {
    float lr, wd, rho, omrho, eps;
};

__global__ static void adadelta(float *params, const float *grads, float *sq, float *acc, size_t n,
                                adadelta_args a) {
    TAAS_CU_LOOP(i, n) {
        float g = grads[i];
        if (a.wd != 0.0f) g += a.wd * params[i];
        sq[i] = sq[i] * a.rho + a.omrho * g * g;
        float std = sqrtf(sq[i] + a.eps);
        float delta = sqrtf(acc[i] + a.eps) / std * g;
        acc[i] = acc[i] * a.rho + a.omrho * delta * delta;
        params[i] -= a.lr * delta;
    }
}

struct rmsprop_args {
    float lr, wd, alpha, omalpha, eps, mom;
    int use_mom, centered;
};

__global__ static void rmsprop(float *params, const float *grads, float *sq, float *buf, float *gavg, size_t n,
                               rmsprop_args a) {
    TAAS_CU_LOOP(i, n) {
        float g = grads[i];
        if (a.wd != 0.0f) g += a.wd * params[i];
        sq[i] = sq[i] * a.alpha + a.omalpha * g * g;
        float avg;
        if (a.centered) {
            gavg[i] = gavg[i] * a.alpha + a.omalpha * g;
            avg = sqrtf(sq[i] - gavg[i] * gavg[i]) + a.eps;
        } else {
            avg = sqrtf(sq[i]) + a.eps;
        }
        if (a.use_mom) {
            buf[i] = buf[i] * a.mom + g / avg;
            params[i] -= a.lr * buf[i];
        } else {
            params[i] -= a.lr * (g / avg);
        }
    }
}

__global__ static void scale(float *x, size_t n, float w) {
    TAAS_CU_LOOP(i, n) x[i] *= w;
}

/* one step over n parameters whose state parts lie `part` floats apart (n for a whole buffer,
 * more for a span of one: optim.c's step_part) */
static int step_part(taas_cu *cu, const taas_optim_config *cfg, float *params, const float *grads, float *state,
                     size_t n, size_t part, long step, taas_error *err) {
    if (n == 0) return 0;
    unsigned blocks = taas_cu_blocks(n);
    cudaStream_t s = cu->stream;
    switch (cfg->kind) {
    case TAAS_OPTIM_SGD: {
        sgd_args a = {(float)cfg->lr, (float)cfg->weight_decay, (float)cfg->momentum, (float)(1.0 - cfg->dampening),
                      cfg->momentum != 0.0, cfg->nesterov, step <= 1};
        sgd<<<blocks, TAAS_CU_THREADS, 0, s>>>(params, grads, state, n, a);
        break;
    }
    case TAAS_OPTIM_ADAM:
    case TAAS_OPTIM_ADAMW: {
        int decoupled = cfg->kind == TAAS_OPTIM_ADAMW;
        double bc1 = 1.0 - pow(cfg->beta1, (double)step);
        adam_args a = {(float)cfg->beta1, (float)cfg->beta2, (float)cfg->eps, (float)(1.0 - cfg->beta1),
                       (float)(1.0 - cfg->beta2), decoupled ? 0.0f : (float)cfg->weight_decay,
                       (float)(1.0 - cfg->lr * cfg->weight_decay), (float)sqrt(1.0 - pow(cfg->beta2, (double)step)),
                       (float)(cfg->lr / bc1), decoupled, cfg->amsgrad};
        adam<<<blocks, TAAS_CU_THREADS, 0, s>>>(params, grads, state, state + part, cfg->amsgrad ? state + 2 * part : NULL,
                                                n, a);
        break;
    }
    case TAAS_OPTIM_ADADELTA: {
        adadelta_args a = {(float)cfg->lr, (float)cfg->weight_decay, (float)cfg->rho, (float)(1.0 - cfg->rho),
                           (float)cfg->eps};
        adadelta<<<blocks, TAAS_CU_THREADS, 0, s>>>(params, grads, state, state + part, n, a);
        break;
    }
    case TAAS_OPTIM_RMSPROP: {
        int use_mom = cfg->momentum > 0.0;
        rmsprop_args a = {(float)cfg->lr, (float)cfg->weight_decay, (float)cfg->alpha, (float)(1.0 - cfg->alpha),
                          (float)cfg->eps, (float)cfg->momentum, use_mom, cfg->centered};
        float *buf = use_mom ? state + part : NULL, *gavg = cfg->centered ? state + (use_mom ? 2 : 1) * part : NULL;
        rmsprop<<<blocks, TAAS_CU_THREADS, 0, s>>>(params, grads, state, buf, gavg, n, a);
        break;
    }
    }
    return TAAS_CU_LAUNCHED("the optimizer step", err);
}

extern "C" int taas_cu_optim_step(taas_cu *cu, const taas_optim_config *cfg, float *params, const float *grads,
                                  float *state, size_t n, long step, taas_error *err) {
    return step_part(cu, cfg, params, grads, state, n, n, step, err);
}

extern "C" int taas_cu_optim_step_spans(taas_cu *cu, const taas_optim_config *cfg, float *params, const float *grads,
                                        float *state, size_t n, long step, const taas_optim_span *spans,
                                        size_t nspans, taas_error *err) {
    for (size_t k = 0; k < nspans; k++) {
        taas_optim_config c = *cfg;
        c.weight_decay = spans[k].weight_decay;
        size_t o = spans[k].off;
        if (step_part(cu, &c, params + o, grads + o, state ? state + o : NULL, spans[k].len, n, step, err)) return -1;
    }
    return 0;
}

// ---- clip_grad_norm on the device: no host round trip inside a step ----

enum { NORM_BLOCK = 1 << 16 };

// a block of threads per NORM_BLOCK gradients: their squares' sum in double, a fixed tree
__global__ static void block_squares(double *part, const float *g, size_t n) {
    __shared__ double sh[TAAS_CU_THREADS];
    size_t at = (size_t)blockIdx.x * NORM_BLOCK, end = at + NORM_BLOCK < n ? at + NORM_BLOCK : n;
    double s = 0.0;
    for (size_t i = at + threadIdx.x; i < end; i += blockDim.x) s += (double)g[i] * g[i];
    s = taas_cu_block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

// one thread: the blocks' sums in order, the norm, and the factor torch applies
__global__ static void clip_coef(float *coef, double *norm, const double *part, size_t nb, double max_norm) {
    double t = 0.0;
    for (size_t b = 0; b < nb; b++) t += part[b];
    double nrm = sqrt(t), c = max_norm / (nrm + 1e-6);
    *norm = nrm;
    *coef = c < 1.0 ? (float)c : 1.0f;
}

__global__ static void scale_by(float *x, size_t n, const float *w) {
    float c = *w;
    if (c == 1.0f) return;
    TAAS_CU_LOOP(i, n) x[i] *= c;
}

extern "C" size_t taas_cu_clip_scratch_bytes(size_t n) {
    return ((n + NORM_BLOCK - 1) / NORM_BLOCK + 2) * sizeof(double);
}

extern "C" int taas_cu_clip_grad_norm(taas_cu *cu, float *grads, size_t n, double max_norm, void *scratch,
                                      taas_error *err) {
    if (n == 0) return 0;
    size_t nb = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    double *part = (double *)scratch, *norm = part + nb;
    float *coef = (float *)(norm + 1);
    block_squares<<<(unsigned)nb, TAAS_CU_THREADS, 0, cu->stream>>>(part, grads, n);
    clip_coef<<<1, 1, 0, cu->stream>>>(coef, norm, part, nb, max_norm);
    scale_by<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(grads, n, coef);
    return TAAS_CU_LAUNCHED("clipping the gradients' norm", err);
}

extern "C" int taas_cu_scale(taas_cu *cu, float *x, size_t n, float w, taas_error *err) {
    if (n == 0) return 0;
    scale<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(x, n, w);
    return TAAS_CU_LAUNCHED("weighting the gradients", err);
}
