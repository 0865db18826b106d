/* A model on a GPU (cu_model.h): model_run.c's forward and backward with cu_layers.h's
 * kernels. */
#include "cu_model.h"

#include <stdlib.h>
#include <string.h>

#include "cu_layers.h"
#include "errnames.h"

static size_t numel(const taas_act_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->d[i];
    return n;
}

/* (C, HW) of a layer's input: BatchNorm, Softmax and Dropout2d see (N, C, HW). */
static int chans(const taas_model_layer *L) { return L->in.d[0]; }
static int plane(const taas_model_layer *L) { return L->in.rank == 3 ? L->in.d[1] * L->in.d[2] : 1; }

int taas_cu_model_init(taas_cu_model *dm, taas_model *m, taas_cu *cu, taas_error *err) {
    memset(dm, 0, sizeof *dm);
    dm->m = m;
    dm->cu = cu;
    size_t np = m->nparams * sizeof(float), ns = m->nstats * sizeof(float);
    if (taas_cu_alloc((void **)&dm->params, np, "the parameters", err) ||
        taas_cu_alloc((void **)&dm->grads, np, "the gradients", err) ||
        taas_cu_alloc((void **)&dm->stats, ns, "the BatchNorm statistics", err) ||
        taas_cu_upload(cu, dm->params, m->params, np, "uploading the parameters", err) ||
        taas_cu_upload(cu, dm->stats, m->stats, ns, "uploading the BatchNorm statistics", err) ||
        taas_cu_model_zero_grad(dm, err)) {
        taas_cu_model_release(dm);
        return -1;
    }
    return 0;
}

static void free_work(taas_cu_model *dm) {
    if (dm->work) cudaFree(dm->work);
    free(dm->own);
    free(dm->acts);
    free(dm->aux);
    free(dm->argmax);
    dm->work = NULL;
    dm->own = dm->acts = dm->aux = NULL;
    dm->argmax = NULL;
    dm->scratch = dm->dbuf[0] = dm->dbuf[1] = NULL;
    dm->room = 0;
    dm->cap = 0;
}

void taas_cu_model_release(taas_cu_model *dm) {
    if (dm->cu && dm->cu->stream) cudaStreamSynchronize(dm->cu->stream);  /* nothing queued may still use it */
    free_work(dm);
    if (dm->params) cudaFree(dm->params);
    if (dm->grads) cudaFree(dm->grads);
    if (dm->stats) cudaFree(dm->stats);
    dm->params = dm->grads = dm->stats = NULL;
}

int taas_cu_model_zero_grad(taas_cu_model *dm, taas_error *err) {
    return taas_cu_check(cudaMemsetAsync(dm->grads, 0, dm->m->nparams * sizeof(float), dm->cu->stream),
                         "zeroing the gradients", err);
}

/* Byte offsets in the work allocation, 256-byte aligned. */
static size_t take(size_t *end, size_t bytes) {
    size_t at = *end;
    *end += (bytes + 255) / 256 * 256;
    return at;
}

/* Work memory for n samples, laid out in one allocation; the old one goes (after the GPU is
 * done with it) when n is larger than what it holds. */
static int reserve(taas_cu_model *dm, int n, taas_error *err) {
    if (n <= dm->cap) return 0;
    if (taas_cu_sync(dm->cu, "finishing the GPU's work before growing its memory", err)) return -1;
    free_work(dm);
    const taas_model *m = dm->m;
    int nl = m->nlayers;
    size_t nn = (size_t)n, maxact = numel(&m->in_shape) * nn, scratch = 1, end = 0;
    size_t *o_act = calloc((size_t)nl + 1, sizeof *o_act), *o_aux = calloc((size_t)nl, sizeof *o_aux);
    size_t *o_arg = calloc((size_t)nl, sizeof *o_arg);
    dm->own = calloc((size_t)nl + 1, sizeof *dm->own);
    dm->acts = calloc((size_t)nl + 1, sizeof *dm->acts);
    dm->aux = calloc((size_t)nl, sizeof *dm->aux);
    dm->argmax = calloc((size_t)nl, sizeof *dm->argmax);
    if (!o_act || !o_aux || !o_arg || !dm->own || !dm->acts || !dm->aux || !dm->argmax) {
        free(o_act), free(o_aux), free(o_arg);
        free_work(dm);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the model's layout");
        return -1;  /* said apart: the analyzer cannot see that taas_error_set returns it */
    }
    /* SIZE_MAX: no buffer of that kind for the layer */
    for (int i = 0; i <= nl; i++) o_act[i] = SIZE_MAX;
    for (int i = 0; i < nl; i++) o_aux[i] = o_arg[i] = SIZE_MAX;
    for (int i = 0; i < nl; i++) {
        const taas_model_layer *L = &m->layers[i];
        size_t out = numel(&L->out) * nn;
        if (out > maxact) maxact = out;
        if (!m->layers[i].in_place) o_act[i + 1] = take(&end, out * sizeof(float));
        if (L->kind == TAAS_L_DROPOUT) o_aux[i] = take(&end, out * sizeof(float));
        if (L->kind == TAAS_L_DROPOUT2D) o_aux[i] = take(&end, nn * (size_t)chans(L) * sizeof(float));
        if (L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D)
            o_aux[i] = take(&end, 2 * (size_t)chans(L) * sizeof(float));
        if (L->kind == TAAS_L_MAXPOOL2D) o_arg[i] = take(&end, out * sizeof(int32_t));
        if (L->kind == TAAS_L_CONV2D) {
            taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
            size_t s = taas_cu_conv2d_scratch_floats(&cs);
            if (s > scratch) scratch = s;
        }
    }
    size_t o_scratch = take(&end, scratch * sizeof(float));
    size_t o_d0 = take(&end, maxact * sizeof(float)), o_d1 = take(&end, maxact * sizeof(float));
    int rc = taas_cu_alloc(&dm->work, end, "a batch's activations", err);
    if (rc == 0) {
        char *base = dm->work;
        for (int i = 0; i <= nl; i++) dm->own[i] = o_act[i] == SIZE_MAX ? NULL : (float *)(base + o_act[i]);
        for (int i = 0; i < nl; i++) {
            dm->aux[i] = o_aux[i] == SIZE_MAX ? NULL : (float *)(base + o_aux[i]);
            dm->argmax[i] = o_arg[i] == SIZE_MAX ? NULL : (int32_t *)(base + o_arg[i]);
        }
        dm->scratch = (float *)(base + o_scratch);
        dm->room = scratch;
        dm->dbuf[0] = (float *)(base + o_d0);
        dm->dbuf[1] = (float *)(base + o_d1);
        dm->cap = n;
    } else {
        free_work(dm);
        taas_error_hint(err, "a batch of %d needs %.0f MiB on the GPU: use a smaller batch_size", n,
                        (double)end / (1 << 20));
    }
    free(o_act), free(o_aux), free(o_arg);
    return rc;
}

static int forward_layer(taas_cu_model *dm, int i, int n, int train, uint64_t step, taas_error *err) {
    taas_model *m = dm->m;
    taas_cu *cu = dm->cu;
    const taas_model_layer *L = &m->layers[i];
    const float *x = dm->acts[i], *p = dm->params;
    float *y = dm->acts[i + 1];
    const float *b = L->has_b ? p + L->b_off : NULL;
    size_t cnt = numel(&L->in) * (size_t)n;
    /* Dropout counters: a disjoint 2^32 range per (step, layer), as model_run.c */
    uint64_t off = (step * (uint64_t)m->nlayers + (uint64_t)i) << 32;
    if (L->in_place) return 0;  /* its output is its input already (model_plan.h) */
    switch (L->kind) {
    case TAAS_L_LINEAR: return taas_cu_linear_forward(cu, y, x, p + L->w_off, b, n, L->lin_in, L->lin_out, err);
    case TAAS_L_CONV2D: {
        taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
        int relu = L->fusion == TAAS_FUSE_RELU;
        return taas_cu_conv2d_forward(cu, y, x, p + L->w_off, b, &cs, relu, dm->scratch, dm->room, err);
    }
    case TAAS_L_MAXPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_maxpool2d_forward(cu, y, dm->argmax[i], x, &ps, err);
    }
    case TAAS_L_AVGPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_avgpool2d_forward(cu, y, x, &ps, err);
    }
    case TAAS_L_RELU: return taas_cu_act_forward(cu, TAAS_CU_RELU, y, x, cnt, 0, err);
    case TAAS_L_LEAKY_RELU: return taas_cu_act_forward(cu, TAAS_CU_LEAKY_RELU, y, x, cnt, L->slope, err);
    case TAAS_L_TANH: return taas_cu_act_forward(cu, TAAS_CU_TANH, y, x, cnt, 0, err);
    case TAAS_L_SIGMOID: return taas_cu_act_forward(cu, TAAS_CU_SIGMOID, y, x, cnt, 0, err);
    case TAAS_L_GELU: return taas_cu_act_forward(cu, TAAS_CU_GELU, y, x, cnt, 0, err);
    case TAAS_L_DROPOUT:
        return train ? taas_cu_dropout_forward(cu, y, dm->aux[i], x, cnt, L->p, m->seed, off, err)
                     : taas_cu_copy(cu, y, x, cnt, err);
    case TAAS_L_DROPOUT2D:
        return train ? taas_cu_dropout2d_forward(cu, y, dm->aux[i], x, n, chans(L), plane(L), L->p, m->seed, off, err)
                     : taas_cu_copy(cu, y, x, cnt, err);
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D: {
        int c = chans(L), hw = plane(L);
        float *rm = dm->stats + L->rm_off, *rv = dm->stats + L->rv_off;
        if (!train) return taas_cu_batchnorm_forward_eval(cu, y, x, p + L->w_off, b, rm, rv, n, c, hw, L->eps, err);
        if (taas_cu_batchnorm_forward_train(cu, y, dm->aux[i], dm->aux[i] + c, rm, rv, x, p + L->w_off, b, n, c, hw,
                                            L->momentum, L->eps, err)) {
            if (!err->hint[0]) taas_error_hint(err, "train with batches of at least 2 samples (drop_last=True)");
            taas_error_prefix(err, "layer %d (%s): ", i, L->name);
            return -1;
        }
        m->counters[L->counter]++;
        return 0;
    }
    case TAAS_L_FLATTEN: return 0;  /* skipped above */
    case TAAS_L_LOG_SOFTMAX:
    case TAAS_L_SOFTMAX:
        return taas_cu_softmax_forward(cu, y, x, n, chans(L), plane(L), L->kind == TAAS_L_LOG_SOFTMAX, err);
    }
    return 0;
}

int taas_cu_model_forward(taas_cu_model *dm, const float *x, int n, int train, uint64_t step, int nrun,
                          const float **out, taas_error *err) {
    taas_model *m = dm->m;
    if (n < 1 || nrun < 0 || nrun > m->nlayers) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "model forward with a batch of %d samples through %d layers", n,
                       nrun);
        taas_error_hint(err, "give a batch of at least one sample");
        return -1;
    }
    if (reserve(dm, n, err)) return -1;
    dm->acts[0] = (float *)x;
    for (int i = 0; i < m->nlayers; i++) dm->acts[i + 1] = dm->own[i + 1] ? dm->own[i + 1] : dm->acts[i];
    dm->n = n;
    dm->nrun = nrun;
    dm->last_train = train;
    for (int i = 0; i < nrun; i++)
        if (forward_layer(dm, i, n, train, step, err)) return -1;
    *out = dm->acts[nrun];
    return 0;
}

static int backward_layer(taas_cu_model *dm, int i, float *dx, const float *dy, taas_error *err) {
    const taas_model *m = dm->m;
    taas_cu *cu = dm->cu;
    const taas_model_layer *L = &m->layers[i];
    int n = dm->n;
    const float *x = dm->acts[i], *y = dm->acts[i + 1], *p = dm->params;
    float *g = dm->grads, *db = L->has_b ? g + L->b_off : NULL;
    size_t cnt = numel(&L->in) * (size_t)n;
    switch (L->kind) {
    case TAAS_L_LINEAR:  /* the first layer's input gradient is never needed */
        return taas_cu_linear_backward(cu, i ? dx : NULL, g + L->w_off, db, dy, x, p + L->w_off, n, L->lin_in,
                                       L->lin_out, err);
    case TAAS_L_CONV2D: {
        taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
        int relu = L->fusion == TAAS_FUSE_RELU;
        return taas_cu_conv2d_backward(cu, i ? dx : NULL, g + L->w_off, db, dy, y, x, p + L->w_off, &cs, relu,
                                       dm->scratch, dm->room, err);
    }
    case TAAS_L_MAXPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_maxpool2d_backward(cu, dx, dy, dm->argmax[i], &ps, err);
    }
    case TAAS_L_AVGPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_avgpool2d_backward(cu, dx, dy, &ps, err);
    }
    case TAAS_L_RELU: return taas_cu_act_backward(cu, TAAS_CU_RELU, dx, dy, x, y, cnt, 0, err);
    case TAAS_L_LEAKY_RELU: return taas_cu_act_backward(cu, TAAS_CU_LEAKY_RELU, dx, dy, x, y, cnt, L->slope, err);
    case TAAS_L_TANH: return taas_cu_act_backward(cu, TAAS_CU_TANH, dx, dy, x, y, cnt, 0, err);
    case TAAS_L_SIGMOID: return taas_cu_act_backward(cu, TAAS_CU_SIGMOID, dx, dy, x, y, cnt, 0, err);
    case TAAS_L_GELU: return taas_cu_act_backward(cu, TAAS_CU_GELU, dx, dy, x, y, cnt, 0, err);
    case TAAS_L_DROPOUT:
        return dm->last_train ? taas_cu_dropout_backward(cu, dx, dy, dm->aux[i], cnt, err)
                              : taas_cu_copy(cu, dx, dy, cnt, err);
    case TAAS_L_DROPOUT2D:
        return dm->last_train ? taas_cu_dropout2d_backward(cu, dx, dy, dm->aux[i], n, chans(L), plane(L), err)
                              : taas_cu_copy(cu, dx, dy, cnt, err);
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D: {
        int c = chans(L), hw = plane(L);
        if (dm->last_train)
            return taas_cu_batchnorm_backward(cu, dx, g + L->w_off, db, dy, x, dm->aux[i], dm->aux[i] + c,
                                              p + L->w_off, n, c, hw, err);
        return taas_cu_batchnorm_backward_eval(cu, dx, g + L->w_off, db, dy, x, p + L->w_off,
                                               dm->stats + L->rm_off, dm->stats + L->rv_off, n, c, hw, L->eps, err);
    }
    case TAAS_L_FLATTEN: return 0;  /* skipped by the caller */
    case TAAS_L_LOG_SOFTMAX:
    case TAAS_L_SOFTMAX:
        return taas_cu_softmax_backward(cu, dx, dy, y, n, chans(L), plane(L), L->kind == TAAS_L_LOG_SOFTMAX, err);
    }
    return 0;
}

int taas_cu_model_backward(taas_cu_model *dm, const float *dout, taas_error *err) {
    if (!dm->n) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "model backward before any forward");
        taas_error_hint(err, "run taas_cu_model_forward on the batch first");
        return -1;
    }
    const float *dy = dout;
    int cur = 0;
    for (int i = dm->nrun - 1; i >= 0; i--) {
        /* the gradient passes through in place: Flatten, or the ReLU its Conv2d masks for */
        if (dm->m->layers[i].in_place) continue;
        if (backward_layer(dm, i, dm->dbuf[cur], dy, err)) return -1;
        dy = dm->dbuf[cur];
        cur = 1 - cur;
    }
    return 0;
}

int taas_cu_model_download(taas_cu_model *dm, taas_error *err) {
    taas_model *m = dm->m;
    return taas_cu_download(dm->cu, m->params, dm->params, m->nparams * sizeof(float), "copying the weights back",
                            err) ||
                   taas_cu_download(dm->cu, m->stats, dm->stats, m->nstats * sizeof(float),
                                    "copying the BatchNorm statistics back", err)
               ? -1
               : 0;
}
