// BatchNorm over (N, C, HW) on the GPU, with the CPU's arithmetic (layer_norm.c): one block
// per channel, the statistics summed in double, the element-wise parts in float.
#include <math.h>

#include "cu_kern.cuh"
#include "cu_layers.h"
#include "errnames.h"

#define AT(i, k) ((((size_t)(i)) * c + ch) * hw + (k))

__global__ static void bn_train(float *y, float *mean, float *invstd, float *running_mean, float *running_var,
                                const float *x, const float *gamma, const float *beta, int n, int c, int hw,
                                float momentum, float eps) {
    __shared__ double sh[TAAS_CU_THREADS];
    int ch = blockIdx.x;
    size_t m = (size_t)n * hw;
    double s = 0.0;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) s += x[AT(t / hw, t % hw)];
    double mu = taas_cu_block_sum(s, sh) / (double)m;
    double ss = 0.0;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        double d = x[AT(t / hw, t % hw)] - mu;
        ss += d * d;
    }
    ss = taas_cu_block_sum(ss, sh);
    float is = (float)(1.0 / sqrt(ss / (double)m + eps));
    if (threadIdx.x == 0) {
        mean[ch] = (float)mu;
        invstd[ch] = is;
        if (running_mean) running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + momentum * mu);
        if (running_var)
            running_var[ch] = (float)((1.0 - momentum) * running_var[ch] + momentum * ss / (double)(m - 1));
    }
    float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f, muf = (float)mu;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        size_t at = AT(t / hw, t % hw);
        y[at] = (x[at] - muf) * is * g + b;
    }
}

__global__ static void bn_eval(float *y, const float *x, const float *gamma, const float *beta,
                               const float *running_mean, const float *running_var, size_t total, int c, int hw,
                               float eps) {
    TAAS_CU_LOOP(i, total) {
        int ch = (int)(i / (size_t)hw % (size_t)c);
        float is = 1.0f / sqrtf(running_var[ch] + eps), mu = running_mean[ch];
        float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
        y[i] = (x[i] - mu) * is * g + b;
    }
}

// Train mode: dx = gamma*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)); dgamma, dbeta add up
__global__ static void bn_train_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                                    const float *mean, const float *invstd, const float *gamma, int n, int c,
                                    int hw) {
    __shared__ double sh[TAAS_CU_THREADS];
    int ch = blockIdx.x;
    size_t m = (size_t)n * hw;
    float mu = mean[ch], is = invstd[ch];
    double sdy = 0.0, sdyx = 0.0;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        size_t at = AT(t / hw, t % hw);
        sdy += dy[at];
        sdyx += dy[at] * (x[at] - mu) * is;
    }
    sdy = taas_cu_block_sum(sdy, sh);
    sdyx = taas_cu_block_sum(sdyx, sh);
    if (threadIdx.x == 0) {
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
    }
    if (!dx) return;
    float scale = (gamma ? gamma[ch] : 1.0f) * is;
    float mdy = (float)(sdy / (double)m), mdyx = (float)(sdyx / (double)m);
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        size_t at = AT(t / hw, t % hw);
        dx[at] = scale * (dy[at] - mdy - (x[at] - mu) * is * mdyx);
    }
}

// Eval mode: the running statistics are constants, dx = dy * gamma * invstd
__global__ static void bn_eval_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                                   const float *gamma, const float *running_mean, const float *running_var, int n,
                                   int c, int hw, float eps) {
    __shared__ double sh[TAAS_CU_THREADS];
    int ch = blockIdx.x;
    size_t m = (size_t)n * hw;
    float is = 1.0f / sqrtf(running_var[ch] + eps), mu = running_mean[ch];
    float scale = (gamma ? gamma[ch] : 1.0f) * is;
    double sdy = 0.0, sdyx = 0.0;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        size_t at = AT(t / hw, t % hw);
        sdy += dy[at];
        sdyx += dy[at] * (x[at] - mu) * is;
        if (dx) dx[at] = dy[at] * scale;
    }
    sdy = taas_cu_block_sum(sdy, sh);
    sdyx = taas_cu_block_sum(sdyx, sh);
    if (threadIdx.x == 0) {
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
    }
}

extern "C" int taas_cu_batchnorm_forward_train(taas_cu *cu, float *y, float *mean, float *invstd,
                                               float *running_mean, float *running_var, const float *x,
                                               const float *gamma, const float *beta, int n, int c, int hw,
                                               float momentum, float eps, taas_error *err) {
    if ((size_t)n * hw < 2) {  // the CPU's words (layer_norm.c), as PyTorch refuses it
        taas_srcpos nowhere = {0, 0};
        taas_error_set(err, TAAS_ERR_VALUE, nowhere,
                       "BatchNorm: expected more than 1 value per channel when training, got input of %d x %d x %d",
                       n, c, hw);
        taas_error_hint(err, "use a batch size of at least 2 (drop_last=True avoids a final batch of 1), or put "
                             "the model in eval mode");
        return -1;
    }
    if (c <= 0) return 0;
    bn_train<<<c, TAAS_CU_THREADS, 0, cu->stream>>>(y, mean, invstd, running_mean, running_var, x, gamma, beta, n,
                                                     c, hw, momentum, eps);
    return TAAS_CU_LAUNCHED("BatchNorm's forward", err);
}

extern "C" int taas_cu_batchnorm_forward_eval(taas_cu *cu, float *y, const float *x, const float *gamma,
                                              const float *beta, const float *running_mean, const float *running_var,
                                              int n, int c, int hw, float eps, taas_error *err) {
    size_t total = (size_t)n * c * hw;
    if (total == 0) return 0;
    bn_eval<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(y, x, gamma, beta, running_mean, running_var,
                                                                        total, c, hw, eps);
    return TAAS_CU_LAUNCHED("BatchNorm's forward (eval)", err);
}

extern "C" int taas_cu_batchnorm_backward(taas_cu *cu, float *dx, float *dgamma, float *dbeta, const float *dy,
                                          const float *x, const float *mean, const float *invstd,
                                          const float *gamma, int n, int c, int hw, taas_error *err) {
    if (c <= 0) return 0;
    bn_train_bwd<<<c, TAAS_CU_THREADS, 0, cu->stream>>>(dx, dgamma, dbeta, dy, x, mean, invstd, gamma, n, c, hw);
    return TAAS_CU_LAUNCHED("BatchNorm's backward", err);
}

extern "C" int taas_cu_batchnorm_backward_eval(taas_cu *cu, float *dx, float *dgamma, float *dbeta,
                                               const float *dy, const float *x, const float *gamma,
                                               const float *running_mean, const float *running_var, int n, int c,
                                               int hw, float eps, taas_error *err) {
    if (c <= 0) return 0;
    bn_eval_bwd<<<c, TAAS_CU_THREADS, 0, cu->stream>>>(dx, dgamma, dbeta, dy, x, gamma, running_mean, running_var,
                                                        n, c, hw, eps);
    return TAAS_CU_LAUNCHED("BatchNorm's backward (eval)", err);
}
