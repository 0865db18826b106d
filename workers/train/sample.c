/* nanoGPT's sampling loop on the training core (sample.h). */
#include "sample.h"

#include <math.h>
#include <stdlib.h>

#include "ctr_rng.h"
#include "errnames.h"

/* The next token from logits (v of them): softmax(logits / temperature) over the top_k
 * largest (0: all), drawn with u in [0, 1); p: room for v doubles. */
static int64_t draw(const float *logits, int v, double temperature, int top_k, float u, double *p) {
    double cut = -INFINITY;
    if (top_k > 0 && top_k < v) {  /* the k-th largest: torch.topk's threshold */
        for (int i = 0; i < v; i++) p[i] = logits[i];
        for (int k = 0; k < top_k; k++) {
            int best = -1;
            for (int i = 0; i < v; i++)
                if (p[i] > -INFINITY && (best < 0 || p[i] > p[best])) best = i;
            cut = p[best];
            p[best] = -INFINITY;
        }
    }
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < v; i++)
        if (logits[i] >= cut && logits[i] / temperature > mx) mx = logits[i] / temperature;
    for (int i = 0; i < v; i++) sum += p[i] = logits[i] >= cut ? exp(logits[i] / temperature - mx) : 0.0;
    double r = (double)u * sum, acc = 0;
    int last = 0;
    for (int i = 0; i < v; i++) {
        if (p[i] == 0.0) continue;
        acc += p[i];
        last = i;
        if (r < acc) return i;
    }
    return last;
}

long long taas_sample_budget(int t, size_t nparams, long long want) {
    double per_token = (double)t * (double)nparams;
    long long n = per_token * (double)want > 1e12 ? (long long)(1e12 / per_token) : want;
    return n < 20 ? 0 : n;
}

int taas_sample_tokens(taas_model *m, int64_t *seq, size_t *len, long long max_new, double temperature, int top_k,
                       uint64_t seed, taas_error *err) {
    int t = taas_model_tokens(m), v = t ? m->layers[m->nlayers - 1].out.d[1] : 0;
    if (!t || *len < 1)
        return taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "sampling needs a model of tokens and a context of at "
                              "least one token");
    float *x = calloc((size_t)t, sizeof *x);
    double *p = malloc((size_t)v * sizeof *p);
    int rc = 0;
    if (!x || !p) rc = taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for sampling");
    for (long long k = 0; rc == 0 && k < max_new; k++) {
        size_t ctx = *len < (size_t)t ? *len : (size_t)t, from = *len - ctx;
        for (size_t i = 0; i < (size_t)t; i++) x[i] = i < ctx ? (float)seq[from + i] : 0.0f;
        const float *logits;
        rc = taas_model_forward(m, x, 1, 0, 0, &logits, err);
        if (rc == 0)
            seq[(*len)++] = draw(logits + (ctx - 1) * (size_t)v, v, temperature, top_k,
                                 taas_ctr_uniform(seed, (uint64_t)k), p);
    }
    free(x), free(p);
    return rc;
}
