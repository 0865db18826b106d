/* Running a model: a step's memory per batch size (model_memory.h), forward and backward op
 * by op. Some ops cost no pass of their own (the fusion rules, decided by the plan:
 * model_plan.h): Flatten and Identity (their output is their input's memory) and a ReLU
 * right after a Conv2d, which the convolution applies to each sample while it is in cache
 * (taas_conv2d_relu_*). */
#include "errnames.h"
#include "model.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static size_t numel(const taas_act_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->d[i];
    return n;
}

static void free_work(taas_model *m) {
    free(m->arena);
    free(m->act);
    free(m->grad);
    free(m->aux);
    free(m->tmp);
    taas_model_memory_free(&m->mem);
    m->arena = NULL;
    m->act = m->grad = m->tmp = NULL;
    m->aux = NULL;
    m->scratch = NULL;
    m->batch = 0;
}

void taas_model_free(taas_model *m) {
    if (!m) return;
    free_work(m);
    free(m->layers);
    free(m->table);
    free(m->params);
    free(m->grads);
    free(m->stats);
    free(m->counters);
    free(m);
}

void taas_model_zero_grad(taas_model *m) {
    memset(m->grads, 0, m->ntrain * sizeof(float));
}

void taas_model_set_threads(taas_model *m, int nthreads) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads != m->nthreads) free_work(m);  /* conv scratch is sized per thread */
    m->nthreads = nthreads;
}

/* A layer function's error, prefixed with the op's place: -1. */
static int op_error(taas_error *e, const taas_model_layer *L) {
    taas_error_prefix(e, "%s (%s): ", L->path, L->name);
    return -1;
}

static void *at(char *base, size_t off) { return off == TAAS_MEM_NONE ? NULL : base + off; }

/* A step's memory: planned and allocated once per batch size, not per step. */
static int alloc_work(taas_model *m, int n, taas_error *e) {
    if (m->batch == n) return 0;
    free_work(m);
    size_t scratch = 1, nt = (size_t)m->nlayers + 1;
    for (int i = 0; i < m->nlayers; i++) {
        const taas_model_layer *L = &m->layers[i];
        size_t s = 0;
        if (L->kind == TAAS_L_CONV2D) {
            taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
            s = taas_conv2d_scratch_floats(&cs, m->nthreads);
        } else if (L->kind == TAAS_L_ATTENTION) {
            taas_attention_shape as = taas_layer_attention_shape(L, n, 0);
            s = taas_attention_scratch_floats(&as, m->nthreads);
        }
        if (s > scratch) scratch = s;
    }
    if (taas_model_memory_plan(&m->mem, m->layers, m->nlayers, m->in_shape, n, m->nlayers, scratch * sizeof(float), 0,
                               e))
        return -1;
    /* aligned: the convolution kernels' vectors then fall on cache lines */
    m->arena = aligned_alloc(TAAS_MEM_ALIGN, m->mem.bytes ? m->mem.bytes : TAAS_MEM_ALIGN);
    m->act = calloc(nt, sizeof *m->act);
    m->grad = calloc(nt, sizeof *m->grad);
    m->aux = calloc((size_t)m->nlayers, sizeof *m->aux);
    m->tmp = calloc((size_t)m->nlayers, sizeof *m->tmp);
    if (!m->arena || !m->act || !m->grad || !m->aux || !m->tmp) {
        free_work(m);
        taas_error_set(e, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the activations of a batch of %d", n);
        taas_error_hint(e, "use a smaller batch_size");
        return -1;
    }
    for (size_t t = 0; t < nt; t++) {
        m->act[t] = at(m->arena, m->mem.act[t]);
        m->grad[t] = at(m->arena, m->mem.grad[t]);
    }
    for (int i = 0; i < m->nlayers; i++) {
        m->aux[i] = at(m->arena, m->mem.aux[i]);
        m->tmp[i] = at(m->arena, m->mem.tmp[i]);
    }
    m->scratch = at(m->arena, m->mem.scratch);
    m->batch = n;
    return 0;
}

int taas_model_forward(taas_model *m, const float *x, int n, int train, uint64_t step, const float **out,
                       taas_error *e) {
    if (n < 1) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "model forward with a batch of %d samples", n);
        taas_error_hint(e, "give a batch of at least one sample");
        return -1;
    }
    if (alloc_work(m, n, e)) return -1;
    omp_set_num_threads(m->nthreads);
    memcpy(m->act[0], x, numel(&m->in_shape) * (size_t)n * sizeof(float));
    m->last_train = train;
    m->last_step = step;
    for (int i = 0; i < m->nlayers; i++) {
        const taas_model_layer *L = &m->layers[i];
        if (L->in_place) continue;  /* its output is its input already (model_plan.h) */
        const float *xi = m->act[L->src[0]];
        float *y = m->act[i + 1];
        float *p = m->params;
        const float *b = L->has_b ? p + L->b_off : NULL;
        size_t cnt = numel(&L->in) * (size_t)n;
        /* Dropout counters: a disjoint 2^32 range per (step, layer). */
        uint64_t off = (step * (uint64_t)m->nlayers + (uint64_t)i) << 32;
        switch (L->kind) {
        case TAAS_L_LINEAR:
            taas_linear_forward(y, xi, p + L->w_off, b, (int)(cnt / (size_t)L->lin_in), L->lin_in, L->lin_out);
            break;
        case TAAS_L_CONV1D: taas_conv1d_forward(y, xi, p + L->w_off, b, cnt / (size_t)L->lin_in, L->lin_in, L->lin_out); break;
        case TAAS_L_EMBEDDING:
            if (taas_embedding_forward(y, xi, p + L->w_off, cnt, L->lin_in, L->lin_out, e)) return op_error(e, L);
            break;
        case TAAS_L_POS_EMBEDDING: taas_pos_embedding_forward(y, xi, p + L->w_off, n, L->in.d[0], L->in.d[1]); break;
        case TAAS_L_LAYERNORM: {
            size_t rows = cnt / (size_t)L->lin_in;
            float *st = m->aux[i];
            taas_layernorm_forward(y, st, st + rows, xi, p + L->w_off, b, rows, L->lin_in, L->eps);
            break;
        }
        case TAAS_L_ATTENTION: {
            taas_attention_shape as = taas_layer_attention_shape(L, n, train);
            taas_attention_forward(y, m->aux[i], xi, &as, m->scratch, m->nthreads, m->seed, off);
            break;
        }
        case TAAS_L_CONV2D: {
            taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
            if (L->fusion == TAAS_FUSE_RELU)
                taas_conv2d_relu_forward(y, xi, p + L->w_off, b, &cs, m->scratch, m->nthreads);
            else
                taas_conv2d_forward(y, xi, p + L->w_off, b, &cs, m->scratch, m->nthreads);
            break;
        }
        case TAAS_L_MAXPOOL2D: {
            taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
            taas_maxpool2d_forward(y, m->aux[i], xi, &ps);
            break;
        }
        case TAAS_L_AVGPOOL2D: {
            taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
            taas_avgpool2d_forward(y, xi, &ps);
            break;
        }
        case TAAS_L_RELU:
            taas_relu_forward(y, xi, cnt);
            break;
        case TAAS_L_LEAKY_RELU: taas_leaky_relu_forward(y, xi, cnt, L->slope); break;
        case TAAS_L_TANH: taas_tanh_forward(y, xi, cnt); break;
        case TAAS_L_SIGMOID: taas_sigmoid_forward(y, xi, cnt); break;
        case TAAS_L_GELU:
            if (L->gelu_tanh) taas_gelu_tanh_forward(y, xi, cnt);
            else taas_gelu_forward(y, xi, cnt);
            break;
        case TAAS_L_DROPOUT:
            if (train) taas_dropout_forward(y, m->aux[i], xi, cnt, L->p, m->seed, off);
            else memcpy(y, xi, cnt * sizeof(float));
            break;
        case TAAS_L_DROPOUT2D:
            if (train)
                taas_dropout2d_forward(y, m->aux[i], xi, n, L->in.d[0], L->in.d[1] * L->in.d[2], L->p, m->seed, off);
            else memcpy(y, xi, cnt * sizeof(float));
            break;
        case TAAS_L_BATCHNORM1D:
        case TAAS_L_BATCHNORM2D: {
            int c = L->in.d[0], hw = L->in.rank == 3 ? L->in.d[1] * L->in.d[2] : 1;
            float *rm = m->stats + L->rm_off, *rv = m->stats + L->rv_off;
            float *st = m->aux[i];
            if (train) {
                if (taas_batchnorm_forward_train(y, st, st + c, rm, rv, xi, p + L->w_off, b, n, c,
                                                 hw, L->momentum, L->eps, e)) {
                    char msg[sizeof e->message], hint[sizeof e->hint];
                    memcpy(msg, e->message, sizeof msg);
                    memcpy(hint, e->hint, sizeof hint);
                    taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d (%s): %s", i, L->name, msg);
                    taas_error_hint(e, "%s", hint[0] ? hint : "train with batches of at least 2 samples (drop_last=True)");
                    return -1;
                }
                m->counters[L->counter]++;
            } else {
                taas_batchnorm_forward_eval(y, xi, p + L->w_off, b, rm, rv, n, c, hw, L->eps);
            }
            break;
        }
        case TAAS_L_FLATTEN:
        case TAAS_L_IDENTITY: break; /* skipped above */
        case TAAS_L_LOG_SOFTMAX:
        case TAAS_L_SOFTMAX: {
            int c = L->in.d[0], d = L->in.rank == 3 ? L->in.d[1] * L->in.d[2] : 1;
            if (L->kind == TAAS_L_SOFTMAX) taas_softmax_forward(y, xi, n, c, d);
            else taas_log_softmax_forward(y, xi, n, c, d);
            break;
        }
        case TAAS_L_ADAPTIVE_AVGPOOL2D:
            taas_adaptive_avgpool2d_forward(y, xi, n, L->in.d[0], L->in.d[1], L->in.d[2], L->out.d[1], L->out.d[2]);
            break;
        case TAAS_L_ADD: taas_add_forward(y, xi, m->act[L->src[1]], cnt); break;
        }
    }
    *out = m->act[m->nlayers];
    return 0;
}

/* The gradient an op sends to source s: into the tensor's gradient, or aside (tmp) when it
 * is then added to another consumer's. */
static float *input_grad(taas_model *m, int i, int s) {
    const taas_model_layer *L = &m->layers[i];
    float *g = m->grad[L->src[s]];
    return g && m->mem.acc[2 * i + s] ? m->tmp[i] : g ? g : m->tmp[i];
}

int taas_model_backward(taas_model *m, const float *dout, taas_error *e) {
    if (!m->batch) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "model backward before any forward");
        taas_error_hint(e, "run taas_model_forward on the batch first");
        return -1;
    }
    int n = m->batch;
    omp_set_num_threads(m->nthreads);
    const taas_model_layer *last = &m->layers[m->nlayers - 1];
    if (m->grad[m->nlayers]) memcpy(m->grad[m->nlayers], dout, numel(&last->out) * (size_t)n * sizeof(float));
    for (int i = m->nlayers - 1; i >= 0; i--) {
        const taas_model_layer *L = &m->layers[i];
        /* the gradient passes through in place: Flatten, Identity, the ReLU its Conv2d masks for */
        if (L->in_place) continue;
        const float *dy = m->grad[i + 1];
        float *gin = m->grad[L->src[0]];
        if (!dy) continue;  /* nothing downstream reaches the loss */
        if (L->kind == TAAS_L_ADD) {
            size_t cnt = numel(&L->out) * (size_t)n;
            for (int s = 0; s < 2; s++) {
                float *g = m->grad[L->src[s]];
                if (!g || (s == 0 && L->overwrite)) continue;  /* written over: dy is already its gradient */
                if (m->mem.acc[2 * i + s]) taas_accumulate(g, dy, cnt);
                else memcpy(g, dy, cnt * sizeof(float));
            }
            continue;
        }
        if (!gin && (L->frozen || (!L->has_w && !L->has_b))) continue;  /* no gradient wanted from it */
        const float *xi = m->act[L->src[0]], *y = m->act[i + 1], *p = m->params;
        /* a frozen op's parameters have no gradients (model_plan.h's ntrain) */
        float *dx = input_grad(m, i, 0), *dw = L->frozen || !L->has_w ? NULL : m->grads + L->w_off;
        float *db = L->frozen || !L->has_b ? NULL : m->grads + L->b_off;
        size_t cnt = numel(&L->in) * (size_t)n;
        switch (L->kind) {
        case TAAS_L_LINEAR:  /* skips its input's gradient when nothing needs it */
            taas_linear_backward(gin ? dx : NULL, dw, db, dy, xi, p + L->w_off, (int)(cnt / (size_t)L->lin_in),
                                 L->lin_in, L->lin_out);
            break;
        case TAAS_L_CONV1D:
            taas_conv1d_backward(gin ? dx : NULL, dw, db, dy, xi, p + L->w_off, cnt / (size_t)L->lin_in, L->lin_in,
                                 L->lin_out);
            break;
        case TAAS_L_EMBEDDING:  /* token ids have no gradient */
            if (dw) taas_embedding_backward(dw, dy, xi, cnt, L->lin_out);
            break;
        case TAAS_L_POS_EMBEDDING: taas_pos_embedding_backward(gin ? dx : NULL, dw, dy, n, L->in.d[0], L->in.d[1]); break;
        case TAAS_L_LAYERNORM: {
            size_t rows = cnt / (size_t)L->lin_in;
            const float *st = m->aux[i];
            taas_layernorm_backward(gin ? dx : NULL, dw, db, dy, xi, st, st + rows, p + L->w_off, rows, L->lin_in);
            break;
        }
        case TAAS_L_ATTENTION: {
            taas_attention_shape as = taas_layer_attention_shape(L, n, m->last_train);
            uint64_t off = (m->last_step * (uint64_t)m->nlayers + (uint64_t)i) << 32;
            taas_attention_backward(dx, dy, xi, y, m->aux[i], &as, m->scratch, m->nthreads, m->seed, off);
            break;
        }
        case TAAS_L_CONV2D: {
            taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
            if (L->fusion == TAAS_FUSE_RELU)
                taas_conv2d_relu_backward(gin ? dx : NULL, dw, db, dy, y, xi, p + L->w_off, &cs, m->scratch,
                                          m->nthreads);
            else
                taas_conv2d_backward(gin ? dx : NULL, dw, db, dy, xi, p + L->w_off, &cs, m->scratch, m->nthreads);
            break;
        }
        case TAAS_L_MAXPOOL2D: {
            taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
            taas_maxpool2d_backward(dx, dy, m->aux[i], &ps);
            break;
        }
        case TAAS_L_AVGPOOL2D: {
            taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
            taas_avgpool2d_backward(dx, dy, &ps);
            break;
        }
        case TAAS_L_ADAPTIVE_AVGPOOL2D:
            taas_adaptive_avgpool2d_backward(dx, dy, n, L->in.d[0], L->in.d[1], L->in.d[2], L->out.d[1], L->out.d[2]);
            break;
        case TAAS_L_RELU: taas_relu_backward(dx, dy, y, cnt); break;  /* y > 0 where x > 0; x may be written over */
        case TAAS_L_LEAKY_RELU: taas_leaky_relu_backward(dx, dy, xi, cnt, L->slope); break;
        case TAAS_L_TANH: taas_tanh_backward(dx, dy, y, cnt); break;
        case TAAS_L_SIGMOID: taas_sigmoid_backward(dx, dy, y, cnt); break;
        case TAAS_L_GELU:
            if (L->gelu_tanh) taas_gelu_tanh_backward(dx, dy, xi, cnt);
            else taas_gelu_backward(dx, dy, xi, cnt);
            break;
        case TAAS_L_DROPOUT:
            if (m->last_train) taas_dropout_backward(dx, dy, m->aux[i], cnt);
            else memcpy(dx, dy, cnt * sizeof(float));
            break;
        case TAAS_L_DROPOUT2D:
            if (m->last_train)
                taas_dropout2d_backward(dx, dy, m->aux[i], n, L->in.d[0], L->in.d[1] * L->in.d[2]);
            else memcpy(dx, dy, cnt * sizeof(float));
            break;
        case TAAS_L_BATCHNORM1D:
        case TAAS_L_BATCHNORM2D: {
            int c = L->in.d[0], hw = L->in.rank == 3 ? L->in.d[1] * L->in.d[2] : 1;
            const float *mean = m->aux[i];
            if (m->last_train)
                taas_batchnorm_backward(dx, dw, db, dy, xi, mean, mean + c, p + L->w_off, n, c, hw);
            else
                taas_batchnorm_backward_eval(dx, dw, db, dy, xi, p + L->w_off, m->stats + L->rm_off,
                                             m->stats + L->rv_off, n, c, hw, L->eps);
            break;
        }
        case TAAS_L_LOG_SOFTMAX:
        case TAAS_L_SOFTMAX: {
            int c = L->in.d[0], d = L->in.rank == 3 ? L->in.d[1] * L->in.d[2] : 1;
            if (L->kind == TAAS_L_SOFTMAX) taas_softmax_backward(dx, dy, y, n, c, d);
            else taas_log_softmax_backward(dx, dy, y, n, c, d);
            break;
        }
        case TAAS_L_FLATTEN:
        case TAAS_L_IDENTITY:
        case TAAS_L_ADD: break;  /* handled above */
        }
        if (gin && m->mem.acc[2 * i]) taas_accumulate(gin, dx, cnt);
    }
    return 0;
}
