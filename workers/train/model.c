/* Building a model on its plan (model_plan.c): one buffer for the parameters, one for their
 * gradients, the running statistics, and PyTorch-ordered initialisation. Running it is
 * model_run.c. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "init.h"

static int init_params(taas_model *m, taas_error *e) {
    taas_init_rng rng = {m->seed, 0};
    for (int i = 0; i < m->nlayers; i++) {
        taas_model_layer *L = &m->layers[i];
        float *b = L->has_b ? m->params + L->b_off : NULL;
        if (L->tie >= 0) continue;  /* its weight is another op's, drawn there */
        if (L->init_std > 0) {      /* GPT-2's: normal(0, std), biases 0; an Embedding's normal(0, 1) */
            taas_init_normal(m->params + L->w_off, (size_t)L->lin_in * (size_t)L->lin_out, L->init_std, &rng);
            if (b) memset(b, 0, (size_t)L->lin_out * sizeof *b);
        } else if (L->kind == TAAS_L_LAYERNORM) {
            taas_init_batchnorm(m->params + L->w_off, b, NULL, NULL, L->lin_in);
        } else if (L->kind == TAAS_L_LINEAR) {
            if (taas_init_linear(m->params + L->w_off, b, L->lin_in, L->lin_out, &rng, e)) return -1;
        } else if (L->kind == TAAS_L_CONV2D && L->init_fan_out) {
            size_t nw = (size_t)L->oc * (size_t)(L->in.d[0] / L->groups) * (size_t)L->kh * (size_t)L->kw;
            taas_init_kaiming_normal_fan_out(m->params + L->w_off, nw, L->oc * L->kh * L->kw, &rng);
            if (b) memset(b, 0, (size_t)L->oc * sizeof *b);
        } else if (L->kind == TAAS_L_CONV2D) {
            if (taas_init_conv2d(m->params + L->w_off, b, L->in.d[0] / L->groups, L->oc, L->kh, L->kw, &rng, e))
                return -1;
        } else if (L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D) {
            taas_init_batchnorm(m->params + L->w_off, b, m->stats + L->rm_off, m->stats + L->rv_off,
                                L->in.d[0]);
            if (L->init_zero) memset(m->params + L->w_off, 0, (size_t)L->in.d[0] * sizeof(float));
        }
    }
    return 0;
}

int taas_model_decay_spans(const taas_model *m, double wd, taas_optim_span **out, size_t *n) {
    *n = 0;
    *out = malloc((m->ntable ? m->ntable : 1) * sizeof **out);
    if (!*out) return -1;
    for (int i = 0; i < m->nlayers; i++) {
        const taas_model_layer *L = &m->layers[i];
        int table = L->kind == TAAS_L_EMBEDDING || L->kind == TAAS_L_POS_EMBEDDING;
        for (int r = L->row; r < L->row + L->nrows; r++) {
            const taas_param_entry *t = &m->table[r];
            if (t->home != TAAS_T_PARAM || t->tied || t->offset >= m->ntrain) continue;
            double d = t->ndim >= 2 && !table ? wd : 0.0;
            taas_optim_span *last = *n ? &(*out)[*n - 1] : NULL;
            if (last && last->weight_decay == d && last->off + last->len == t->offset) last->len += t->numel;
            else (*out)[(*n)++] = (taas_optim_span){t->offset, t->numel, d};
        }
    }
    return 0;
}

taas_model *taas_model_new(const json_t *spec, int c, int h, int w, uint64_t seed, taas_error *err) {
    if (c < 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "invalid input shape (N, %d, %d, %d) for the model", c, h, w);
        taas_error_hint(err, "give (C, H, W) with positive sizes, or (F, 0, 0) for flat inputs");
        return NULL;
    }
    taas_model_plan plan;
    if (taas_model_plan_build(&plan, spec, c, h, w, err)) return NULL;
    if (taas_model_plan_check_memory(&plan, err)) {  /* before anything is allocated */
        taas_model_plan_free(&plan);
        return NULL;
    }
    taas_model *m = calloc(1, sizeof *m);
    if (!m) {
        taas_model_plan_free(&plan);
        goto oom;
    }
    /* the model takes the plan's arrays */
    m->layers = plan.layers;
    m->nlayers = plan.nlayers;
    m->in_shape = plan.in_shape;
    m->table = plan.table;
    m->ntable = plan.ntable;
    m->nparams = plan.nparams;
    m->ntrain = plan.ntrain;
    m->nstats = plan.nstats;
    m->ncounters = plan.ncounters;
    m->seed = seed;
    m->nthreads = 1;
    m->params = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->grads = calloc(m->ntrain ? m->ntrain : 1, sizeof(float));
    m->stats = calloc(m->nstats ? m->nstats : 1, sizeof(float));
    m->counters = calloc(m->ncounters ? (size_t)m->ncounters : 1, sizeof(int64_t));
    if (!m->params || !m->grads || !m->stats || !m->counters) goto oom;
    if (init_params(m, err)) goto fail;
    return m;
oom:
    taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory building the model");
    taas_error_hint(err, "use a smaller model");
fail:
    taas_model_free(m);
    return NULL;
}

size_t taas_model_out_numel(const taas_model *m) {
    const taas_act_shape *s = &m->layers[m->nlayers - 1].out;
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->d[i];
    return n;
}

const taas_param_entry *taas_model_find(const taas_model *m, const char *key) {
    taas_model_plan view = {.table = m->table, .ntable = m->ntable};
    return taas_model_plan_find(&view, key);
}
