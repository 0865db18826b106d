/* PyTorch default initialisation (torch.nn.Linear/Conv2d reset_parameters). */
#include <math.h>
#include "init.h"
#include "errnames.h"

void taas_init_uniform(float *w, size_t n, float bound, taas_init_rng *rng) {
    for (size_t i = 0; i < n; i++)
        w[i] = (2.0f * taas_ctr_uniform(rng->seed, rng->offset + i) - 1.0f) * bound;
    rng->offset += n;
}

static int fan_in_error(int fan_in, const char *what, taas_error *e) {
    taas_srcpos nowhere = {0, 0};
    taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                   "%s: cannot initialise a layer with fan_in %d (no inputs)", what, fan_in);
    taas_error_hint(e, "in_channels/in_features and the kernel size must be at least 1");
    return -1;
}

int taas_init_kaiming_uniform(float *w, size_t n, int fan_in, double a, taas_init_rng *rng,
                              taas_error *e) {
    if (fan_in <= 0) return fan_in_error(fan_in, "kaiming_uniform", e);
    double gain = sqrt(2.0 / (1.0 + a * a));
    taas_init_uniform(w, n, (float)(gain * sqrt(3.0 / fan_in)), rng);
    return 0;
}

int taas_init_linear(float *w, float *b, int in, int out, taas_init_rng *rng, taas_error *e) {
    if (in <= 0) return fan_in_error(in, "Linear", e);
    if (taas_init_kaiming_uniform(w, (size_t)in * out, in, sqrt(5.0), rng, e) != 0) return -1;
    if (b) taas_init_uniform(b, (size_t)out, (float)(1.0 / sqrt((double)in)), rng);
    return 0;
}

int taas_init_conv2d(float *w, float *b, int c, int oc, int kh, int kw, taas_init_rng *rng,
                     taas_error *e) {
    int fan_in = c * kh * kw;
    if (c <= 0 || kh <= 0 || kw <= 0) return fan_in_error(fan_in, "Conv2d", e);
    if (taas_init_kaiming_uniform(w, (size_t)oc * fan_in, fan_in, sqrt(5.0), rng, e) != 0)
        return -1;
    if (b) taas_init_uniform(b, (size_t)oc, (float)(1.0 / sqrt((double)fan_in)), rng);
    return 0;
}

void taas_init_kaiming_normal_fan_out(float *w, size_t n, int fan_out, taas_init_rng *rng) {
    /* std = gain / sqrt(fan_out), gain sqrt(2) for ReLU */
    taas_init_normal(w, n, sqrt(2.0 / (fan_out > 0 ? fan_out : 1)), rng);
}

void taas_init_normal(float *w, size_t n, double std, taas_init_rng *rng) {
    /* Box-Muller on two draws a value */
    for (size_t i = 0; i < n; i++) {
        double u1 = taas_ctr_uniform(rng->seed, rng->offset + 2 * i), u2 = taas_ctr_uniform(rng->seed, rng->offset + 2 * i + 1);
        w[i] = (float)(std * sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
    }
    rng->offset += 2 * n;
}

void taas_init_batchnorm(float *gamma, float *beta, float *running_mean, float *running_var,
                         int c) {
    for (int i = 0; i < c; i++) {
        if (gamma) gamma[i] = 1.0f;
        if (beta) beta[i] = 0.0f;
        if (running_mean) running_mean[i] = 0.0f;
        if (running_var) running_var[i] = 1.0f;
    }
}
