/* What the optimizer tests of the CPU core (test_optim.c) and of the CUDA path
 * (test_cuda_train.c) share: a config from torch.optim's options in the fixture, and the
 * least-squares problem the fixture's 20 steps minimise. */
#ifndef TAAS_OPTIM_TESTUTIL_H
#define TAAS_OPTIM_TESTUTIL_H

#include <jansson.h>
#include <string.h>

#include "optim.h"

static inline double tu_num(json_t *o, const char *key, double dflt) {
    json_t *v = json_object_get(o, key);
    return v ? json_number_value(v) : dflt;
}

/* torch.optim options -> config, starting from the same defaults torch has. */
static inline taas_optim_config tu_optim_config(const char *name, json_t *opts) {
    taas_optim_config c;
    taas_optim_kind k = !strcmp(name, "sgd") ? TAAS_OPTIM_SGD : !strcmp(name, "adam") ? TAAS_OPTIM_ADAM
                      : !strcmp(name, "adamw") ? TAAS_OPTIM_ADAMW : !strcmp(name, "adadelta") ? TAAS_OPTIM_ADADELTA
                      : TAAS_OPTIM_RMSPROP;
    taas_optim_config_default(&c, k);
    c.lr = tu_num(opts, "lr", c.lr);
    c.weight_decay = tu_num(opts, "weight_decay", c.weight_decay);
    c.momentum = tu_num(opts, "momentum", c.momentum);
    c.dampening = tu_num(opts, "dampening", c.dampening);
    c.nesterov = json_is_true(json_object_get(opts, "nesterov"));
    c.amsgrad = json_is_true(json_object_get(opts, "amsgrad"));
    c.centered = json_is_true(json_object_get(opts, "centered"));
    json_t *betas = json_object_get(opts, "betas");
    if (betas) {
        c.beta1 = json_number_value(json_array_get(betas, 0));
        c.beta2 = json_number_value(json_array_get(betas, 1));
    }
    c.eps = tu_num(opts, "eps", c.eps);
    c.rho = tu_num(opts, "rho", c.rho);
    c.alpha = tu_num(opts, "alpha", c.alpha);
    return c;
}

/* loss = mean((X w + b - y)^2) and its gradient w.r.t. p = [w..., b], on the host. */
static inline float tu_lsq(const float *X, const float *y, const float *p, float *g, int n, int d) {
    double loss = 0;
    for (int j = 0; j <= d; j++) g[j] = 0.0f;
    for (int i = 0; i < n; i++) {
        float pred = p[d];
        for (int j = 0; j < d; j++) pred += X[i * d + j] * p[j];
        float r = pred - y[i], dr = 2.0f * r / (float)n;
        loss += (double)r * r;
        for (int j = 0; j < d; j++) g[j] += dr * X[i * d + j];
        g[d] += dr;
    }
    return (float)(loss / n);
}

#endif
