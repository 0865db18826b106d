/* PyTorch's default parameter initialisation from a seeded counter-based RNG.
 * taas_ctr_uniform(seed, i) (ctr_rng.h) is a pure function of (seed, i), so any element can
 * be drawn independently and in parallel; Dropout uses it too.
 * The numbers cannot match torch's generator; the distributions and bounds do. */
#ifndef TAAS_INIT_H
#define TAAS_INIT_H
#include <stddef.h>
#include <stdint.h>
#include "ctr_rng.h"
#include "error.h"

/* A stream: draws counters offset, offset+1, ... */
typedef struct taas_init_rng {
    uint64_t seed;
    uint64_t offset;
} taas_init_rng;

/* n values uniform in [-bound, bound). */
void taas_init_uniform(float *w, size_t n, float bound, taas_init_rng *rng);
/* kaiming_uniform_(w, a): gain = sqrt(2 / (1 + a^2)), bound = gain * sqrt(3 / fan_in). */
int taas_init_kaiming_uniform(float *w, size_t n, int fan_in, double a, taas_init_rng *rng,
                              taas_error *e);
/* nn.Linear(in, out): w (OUT, IN) kaiming a=sqrt(5) (bound 1/sqrt(in)); b (OUT) or NULL
 * uniform in +-1/sqrt(in). Draws the weight first, then the bias, as torch. */
int taas_init_linear(float *w, float *b, int in, int out, taas_init_rng *rng, taas_error *e);
/* nn.Conv2d: w (OC, C, KH, KW), fan_in = C*KH*KW; b (OC) or NULL. */
int taas_init_conv2d(float *w, float *b, int c, int oc, int kh, int kw, taas_init_rng *rng,
                     taas_error *e);
/* kaiming_normal_(w, mode='fan_out', nonlinearity='relu'), torchvision's ResNet convolutions:
 * normal with std sqrt(2 / fan_out), fan_out = OC*KH*KW. */
void taas_init_kaiming_normal_fan_out(float *w, size_t n, int fan_out, taas_init_rng *rng);
/* normal_(w, 0, std): GPT-2's weights, an Embedding's (std 1). */
void taas_init_normal(float *w, size_t n, double std, taas_init_rng *rng);
/* BatchNorm: weight 1, bias 0, running_mean 0, running_var 1 (any may be NULL). */
void taas_init_batchnorm(float *gamma, float *beta, float *running_mean, float *running_var,
                         int c);
#endif
