/* Running a model: work memory per batch size, forward and backward layer by layer.
 * Two layers cost no pass of their own (the fusion rules, decided by the plan: model_plan.h):
 * Flatten (its output is its input's memory) and a ReLU right after a Conv2d, which the
 * convolution applies to each sample while it is in cache (taas_conv2d_relu_*). */
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
    for (int i = 0; m->acts && i <= m->nlayers; i++)
        if (i == 0 || m->acts[i] != m->acts[i - 1]) free(m->acts[i]);
    for (int i = 0; m->aux && i < m->nlayers; i++) free(m->aux[i]);
    for (int i = 0; m->argmax && i < m->nlayers; i++) free(m->argmax[i]);
    free(m->acts);
    free(m->aux);
    free(m->argmax);
    free(m->scratch);
    free(m->dbuf[0]);
    free(m->dbuf[1]);
    m->acts = m->aux = NULL;
    m->argmax = NULL;
    m->scratch = m->dbuf[0] = m->dbuf[1] = NULL;
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
    memset(m->grads, 0, m->nparams * sizeof(float));
}

void taas_model_set_threads(taas_model *m, int nthreads) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads != m->nthreads) free_work(m);  /* conv scratch is sized per thread */
    m->nthreads = nthreads;
}

/* Activations are allocated once per batch size, not per step. */
static int alloc_work(taas_model *m, int n, taas_error *e) {
    if (m->batch == n) return 0;
    free_work(m);
    size_t nn = (size_t)n, maxact = numel(&m->in_shape) * nn, scratch = 1;
    m->acts = calloc((size_t)m->nlayers + 1, sizeof *m->acts);
    m->aux = calloc((size_t)m->nlayers, sizeof *m->aux);
    m->argmax = calloc((size_t)m->nlayers, sizeof *m->argmax);
    if (!m->acts || !m->aux || !m->argmax) goto oom;
    if (!(m->acts[0] = malloc(maxact * sizeof(float)))) goto oom;
    for (int i = 0; i < m->nlayers; i++) {
        const taas_model_layer *L = &m->layers[i];
        size_t out = numel(&L->out) * nn;
        if (out > maxact) maxact = out;
        if (m->layers[i].in_place) m->acts[i + 1] = m->acts[i];
        else if (!(m->acts[i + 1] = malloc(out * sizeof(float)))) goto oom;
        if (L->kind == TAAS_L_DROPOUT && !(m->aux[i] = malloc(out * sizeof(float)))) goto oom;
        if (L->kind == TAAS_L_DROPOUT2D && !(m->aux[i] = malloc(nn * (size_t)L->in.d[0] * sizeof(float))))
            goto oom;
        if ((L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D) &&
            !(m->aux[i] = malloc(2 * (size_t)L->in.d[0] * sizeof(float))))
            goto oom;
        if (L->kind == TAAS_L_MAXPOOL2D && !(m->argmax[i] = malloc(out * sizeof(int32_t)))) goto oom;
        if (L->kind == TAAS_L_CONV2D) {
            taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
            size_t s = taas_conv2d_scratch_floats(&cs, m->nthreads);
            if (s > scratch) scratch = s;
        }
    }
    /* 64-byte aligned: the convolution kernels' vectors then fall on cache lines */
    m->scratch = aligned_alloc(64, (scratch * sizeof(float) + 63) / 64 * 64);
    m->dbuf[0] = malloc(maxact * sizeof(float));
    m->dbuf[1] = malloc(maxact * sizeof(float));
    if (!m->scratch || !m->dbuf[0] || !m->dbuf[1]) goto oom;
    m->batch = n;
    return 0;
oom:
    free_work(m);
    taas_error_set(e, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the activations of a batch of %d", n);
    taas_error_hint(e, "use a smaller batch_size");
    return -1;
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
    memcpy(m->acts[0], x, numel(&m->in_shape) * (size_t)n * sizeof(float));
    m->last_train = train;
    for (int i = 0; i < m->nlayers; i++) {
        const taas_model_layer *L = &m->layers[i];
        if (L->in_place) continue;  /* its output is its input already (model_plan.h) */
        const float *xi = m->acts[i];
        float *y = m->acts[i + 1];
        float *p = m->params;
        const float *b = L->has_b ? p + L->b_off : NULL;
        size_t cnt = numel(&L->in) * (size_t)n;
        /* Dropout counters: a disjoint 2^32 range per (step, layer). */
        uint64_t off = (step * (uint64_t)m->nlayers + (uint64_t)i) << 32;
        switch (L->kind) {
        case TAAS_L_LINEAR: taas_linear_forward(y, xi, p + L->w_off, b, n, L->lin_in, L->lin_out); break;
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
            taas_maxpool2d_forward(y, m->argmax[i], xi, &ps);
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
        case TAAS_L_GELU: taas_gelu_forward(y, xi, cnt); break;
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
            if (train) {
                if (taas_batchnorm_forward_train(y, m->aux[i], m->aux[i] + c, rm, rv, xi, p + L->w_off, b, n, c,
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
        case TAAS_L_FLATTEN: break; /* skipped above */
        case TAAS_L_LOG_SOFTMAX:
        case TAAS_L_SOFTMAX: {
            int c = L->in.d[0], d = L->in.rank == 3 ? L->in.d[1] * L->in.d[2] : 1;
            if (L->kind == TAAS_L_SOFTMAX) taas_softmax_forward(y, xi, n, c, d);
            else taas_log_softmax_forward(y, xi, n, c, d);
            break;
        }
        }
    }
    *out = m->acts[m->nlayers];
    return 0;
}

int taas_model_backward(taas_model *m, const float *dout, taas_error *e) {
    if (!m->batch) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "model backward before any forward");
        taas_error_hint(e, "run taas_model_forward on the batch first");
        return -1;
    }
    int n = m->batch, cur = 0;
    omp_set_num_threads(m->nthreads);
    const float *dy = dout;  /* read in place: no layer writes its output gradient */
    for (int i = m->nlayers - 1; i >= 0; i--) {
        const taas_model_layer *L = &m->layers[i];
        /* the gradient passes through in place: Flatten, or the ReLU its Conv2d masks for */
        if (m->layers[i].in_place) continue;
        const float *xi = m->acts[i], *y = m->acts[i + 1], *p = m->params;
        /* The first layer's input gradient is never needed; the layers that can skip it do. */
        float *dx = m->dbuf[cur], *g = m->grads;
        float *db = L->has_b ? g + L->b_off : NULL;
        size_t cnt = numel(&L->in) * (size_t)n;
        switch (L->kind) {
        case TAAS_L_LINEAR:
            taas_linear_backward(i ? dx : NULL, g + L->w_off, db, dy, xi, p + L->w_off, n, L->lin_in, L->lin_out);
            break;
        case TAAS_L_CONV2D: {
            taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
            if (L->fusion == TAAS_FUSE_RELU)
                taas_conv2d_relu_backward(i ? dx : NULL, g + L->w_off, db, dy, y, xi, p + L->w_off, &cs,
                                          m->scratch, m->nthreads);
            else
                taas_conv2d_backward(i ? dx : NULL, g + L->w_off, db, dy, xi, p + L->w_off, &cs, m->scratch,
                                     m->nthreads);
            break;
        }
        case TAAS_L_MAXPOOL2D: {
            taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
            taas_maxpool2d_backward(dx, dy, m->argmax[i], &ps);
            break;
        }
        case TAAS_L_AVGPOOL2D: {
            taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
            taas_avgpool2d_backward(dx, dy, &ps);
            break;
        }
        case TAAS_L_RELU: taas_relu_backward(dx, dy, xi, cnt); break;
        case TAAS_L_LEAKY_RELU: taas_leaky_relu_backward(dx, dy, xi, cnt, L->slope); break;
        case TAAS_L_TANH: taas_tanh_backward(dx, dy, y, cnt); break;
        case TAAS_L_SIGMOID: taas_sigmoid_backward(dx, dy, y, cnt); break;
        case TAAS_L_GELU: taas_gelu_backward(dx, dy, xi, cnt); break;
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
            if (m->last_train)
                taas_batchnorm_backward(dx, g + L->w_off, db, dy, xi, m->aux[i], m->aux[i] + c, p + L->w_off, n, c,
                                        hw);
            else
                taas_batchnorm_backward_eval(dx, g + L->w_off, db, dy, xi, p + L->w_off, m->stats + L->rm_off,
                                             m->stats + L->rv_off, n, c, hw, L->eps);
            break;
        }
        case TAAS_L_FLATTEN: break; /* skipped above */
        case TAAS_L_LOG_SOFTMAX:
        case TAAS_L_SOFTMAX: {
            int c = L->in.d[0], d = L->in.rank == 3 ? L->in.d[1] * L->in.d[2] : 1;
            if (L->kind == TAAS_L_SOFTMAX) taas_softmax_backward(dx, dy, y, n, c, d);
            else taas_log_softmax_backward(dx, dy, y, n, c, d);
            break;
        }
        }
        dy = dx;
        cur = 1 - cur;
    }
    return 0;
}
