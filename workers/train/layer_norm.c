/* BatchNorm1d (N, C) and BatchNorm2d (N, C, H, W), as one (N, C, HW) routine. Statistics
 * are accumulated in double so large batches do not lose precision. */
#include <math.h>
#include "errnames.h"
#include "layers.h"

int taas_batchnorm_forward_train(float *y, float *mean, float *invstd, float *running_mean,
                                 float *running_var, const float *x, const float *gamma,
                                 const float *beta, int n, int c, int hw, float momentum,
                                 float eps, taas_error *e) {
    size_t m = (size_t)n * hw;
    if (m < 2) {
        taas_srcpos nowhere = {0, 0};
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "BatchNorm: expected more than 1 value per channel when training, got "
                       "input of %d x %d x %d", n, c, hw);
        taas_error_hint(e, "use a batch size of at least 2 (drop_last=True avoids a final "
                           "batch of 1), or put the model in eval mode");
        return -1;
    }
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double s = 0, ss = 0;
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) s += p[k];
        }
        double mu = s / (double)m;
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) ss += (p[k] - mu) * (p[k] - mu);
        }
        double var = ss / (double)m;
        float is = (float)(1.0 / sqrt(var + eps));
        mean[ch] = (float)mu;
        invstd[ch] = is;
        if (running_mean)
            running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + momentum * mu);
        if (running_var)
            running_var[ch] = (float)((1.0 - momentum) * running_var[ch] +
                                      momentum * ss / (double)(m - 1));
        float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            float *q = y + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) q[k] = (p[k] - (float)mu) * is * g + b;
        }
    }
    return 0;
}

void taas_batchnorm_forward_eval(float *y, const float *x, const float *gamma, const float *beta,
                                 const float *running_mean, const float *running_var, int n,
                                 int c, int hw, float eps) {
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        float is = 1.0f / sqrtf(running_var[ch] + eps), mu = running_mean[ch];
        float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            float *q = y + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) q[k] = (p[k] - mu) * is * g + b;
        }
    }
}

void taas_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                             const float *x, const float *mean, const float *invstd,
                             const float *gamma, int n, int c, int hw) {
    double m = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double sdy = 0, sdyx = 0;
        float mu = mean[ch], is = invstd[ch];
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            const float *g = dy + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) {
                sdy += g[k];
                sdyx += g[k] * (p[k] - mu) * is;
            }
        }
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
        if (!dx) continue;
        /* dx = gamma*invstd/m * (m*dy - sum dy - xhat * sum(dy*xhat)) */
        float scale = (gamma ? gamma[ch] : 1.0f) * is;
        float mdy = (float)(sdy / m), mdyx = (float)(sdyx / m);
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            const float *g = dy + ((size_t)i * c + ch) * hw;
            float *q = dx + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) q[k] = scale * (g[k] - mdy - (p[k] - mu) * is * mdyx);
        }
    }
}

void taas_batchnorm_backward_eval(float *dx, float *dgamma, float *dbeta, const float *dy,
                                  const float *x, const float *gamma, const float *running_mean,
                                  const float *running_var, int n, int c, int hw, float eps) {
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        float is = 1.0f / sqrtf(running_var[ch] + eps), mu = running_mean[ch];
        float scale = (gamma ? gamma[ch] : 1.0f) * is;
        double sdy = 0, sdyx = 0;
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            const float *g = dy + ((size_t)i * c + ch) * hw;
            float *q = dx ? dx + ((size_t)i * c + ch) * hw : NULL;
            for (int k = 0; k < hw; k++) {
                sdy += g[k];
                sdyx += g[k] * (p[k] - mu) * is;
                if (q) q[k] = g[k] * scale;
            }
        }
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
    }
}
