/* A model on a GPU (cu_model.h): model_run.c's forward and backward with cu_layers.h's
 * kernels, over the same graph and the same memory plan. */
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
    size_t np = m->nparams * sizeof(float), ns = m->nstats * sizeof(float), ng = m->ntrain * sizeof(float);
    if (taas_cu_alloc((void **)&dm->params, np, "the parameters", err) ||
        taas_cu_alloc((void **)&dm->grads, ng ? ng : sizeof(float), "the gradients", err) ||
        taas_cu_alloc((void **)&dm->stats, ns, "the BatchNorm statistics", err) ||
        taas_cu_upload(cu, dm->params, m->params, np, "uploading the parameters", err) ||
        taas_cu_upload(cu, dm->stats, m->stats, ns, "uploading the BatchNorm statistics", err) ||
        taas_cu_alloc((void **)&dm->step_dev, sizeof(uint64_t), "the step's counter", err) ||
        taas_cu_check(cudaMallocHost((void **)&dm->step_host, sizeof(uint64_t)), "allocating pinned memory", err) ||
        taas_cu_check(cudaEventCreateWithFlags(&dm->step_copied, cudaEventDisableTiming), "creating a CUDA event",
                      err) ||
        taas_cu_model_zero_grad(dm, err)) {
        taas_cu_model_release(dm);
        return -1;
    }
    return 0;
}

static void free_work(taas_cu_model *dm) {
    if (dm->work) cudaFree(dm->work);
    free(dm->act);
    free(dm->grad);
    free(dm->aux);
    free(dm->tmp);
    taas_model_memory_free(&dm->mem);
    dm->work = NULL;
    dm->act = dm->grad = dm->tmp = NULL;
    dm->aux = NULL;
    dm->scratch = NULL;
    dm->room = 0;
    dm->cap = 0;
}

void taas_cu_model_release(taas_cu_model *dm) {
    if (dm->cu && dm->cu->stream) cudaStreamSynchronize(dm->cu->stream);  /* nothing queued may still use it */
    free_work(dm);
    if (dm->params) cudaFree(dm->params);
    if (dm->grads) cudaFree(dm->grads);
    if (dm->stats) cudaFree(dm->stats);
    if (dm->step_dev) cudaFree(dm->step_dev);
    if (dm->step_host) cudaFreeHost(dm->step_host);
    if (dm->step_copied) cudaEventDestroy(dm->step_copied);
    dm->params = dm->grads = dm->stats = NULL;
    dm->step_dev = dm->step_host = NULL;
    dm->step_copied = NULL;
}

int taas_cu_model_zero_grad(taas_cu_model *dm, taas_error *err) {
    return taas_cu_check(cudaMemsetAsync(dm->grads, 0, dm->m->ntrain * sizeof(float), dm->cu->stream),
                         "zeroing the gradients", err);
}

static void *at(char *base, size_t off) { return off == TAAS_MEM_NONE ? NULL : base + off; }

/* The step's memory for n samples through ops [0, nrun): planned again when either changes
 * (training may stop before a LogSoftmax that evaluation runs), the device allocation grown
 * (after the GPU is done with the old one) when the plan needs more. A plan that fits keeps
 * the allocation: the stream runs the next step after the last one's kernels. */
static int reserve(taas_cu_model *dm, int n, int nrun, taas_error *err) {
    if (dm->act && dm->mem.n == n && dm->mem.nrun == nrun) return 0;
    const taas_model *m = dm->m;
    size_t scratch = 1, nt = (size_t)m->nlayers + 1;
    for (int i = 0; i < nrun; i++) {
        const taas_model_layer *L = &m->layers[i];
        size_t s = 0;
        if (L->kind == TAAS_L_CONV2D) {
            taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
            s = taas_cu_conv2d_scratch_floats(dm->cu, &cs);
        } else if (L->kind == TAAS_L_EMBEDDING) {
            s = taas_cu_embedding_scratch_floats(numel(&L->in) * (size_t)n);
        } else if (L->kind == TAAS_L_ATTENTION) {
            taas_attention_shape as = taas_layer_attention_shape(L, n, 0);
            s = taas_cu_attention_scratch_floats(dm->cu, &as);
        }
        if (s > scratch) scratch = s;
    }
    taas_model_memory mem;
    if (taas_model_memory_plan(&mem, m->layers, m->nlayers, m->in_shape, n, nrun, scratch * sizeof(float), 1, err))
        return -1;
    if (mem.bytes > dm->cap) {
        if (taas_cu_sync(dm->cu, "finishing the GPU's work before growing its memory", err)) {
            taas_model_memory_free(&mem);
            return -1;
        }
        free_work(dm);
        if (taas_cu_alloc(&dm->work, mem.bytes, "a batch's activations", err)) {
            taas_error_hint(err, "a batch of %d needs %.0f MiB on the GPU: use a smaller batch_size", n,
                            (double)mem.bytes / (1 << 20));
            taas_model_memory_free(&mem);
            return -1;
        }
        dm->cap = mem.bytes;
    }
    taas_model_memory_free(&dm->mem);
    dm->mem = mem;
    if (!dm->act) {
        dm->act = calloc(nt, sizeof *dm->act);
        dm->grad = calloc(nt, sizeof *dm->grad);
        dm->aux = calloc((size_t)m->nlayers, sizeof *dm->aux);
        dm->tmp = calloc((size_t)m->nlayers, sizeof *dm->tmp);
        if (!dm->act || !dm->grad || !dm->aux || !dm->tmp) {
            free_work(dm);
            taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the model's layout");
            return -1;
        }
    }
    char *base = dm->work;
    for (size_t t = 0; t < nt; t++) {
        dm->act[t] = at(base, mem.act[t]);
        dm->grad[t] = at(base, mem.grad[t]);
    }
    for (int i = 0; i < m->nlayers; i++) {
        dm->aux[i] = at(base, mem.aux[i]);
        dm->tmp[i] = at(base, mem.tmp[i]);
    }
    dm->scratch = at(base, mem.scratch);
    dm->room = scratch;
    return 0;
}

/* step into step_dev for a training forward: written on the host once the last copy from
 * step_host is done, copied on the stream (while a CUDA Graph is being captured, the copy is
 * recorded, not run: the engine writes step_host before each replay, taas_cu_model_replayed) */
static int put_step(taas_cu_model *dm, uint64_t step, taas_error *err) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaStream_t st = dm->cu->stream;
    if (taas_cu_check(cudaStreamIsCapturing(st, &cs), "a training step", err)) return -1;
    int live = cs == cudaStreamCaptureStatusNone;
    if (live && taas_cu_check(cudaEventSynchronize(dm->step_copied), "a training step", err)) return -1;
    *dm->step_host = step;
    return taas_cu_check(cudaMemcpyAsync(dm->step_dev, dm->step_host, sizeof(uint64_t), cudaMemcpyHostToDevice, st),
                         "copying the step's counter", err) ||
                   (live && taas_cu_check(cudaEventRecord(dm->step_copied, st), "a training step", err))
               ? -1
               : 0;
}

/* The dropout kernels read the step's part of their counters from step_dev (cu_device.h) */
static void steps_on(taas_cu_model *dm, int train) {
    dm->cu->step = train ? dm->step_dev : NULL;
    dm->cu->step_stride = (uint64_t)dm->m->nlayers << 32;
}

static int forward_layer(taas_cu_model *dm, int i, int n, int train, uint64_t step, taas_error *err) {
    taas_model *m = dm->m;
    taas_cu *cu = dm->cu;
    const taas_model_layer *L = &m->layers[i];
    const float *x = dm->act[L->src[0]], *p = dm->params;
    float *y = dm->act[i + 1];
    const float *b = L->has_b ? p + L->b_off : NULL;
    size_t cnt = numel(&L->in) * (size_t)n;
    /* Dropout counters: a disjoint 2^32 range per (step, layer), as model_run.c: the layer's
     * part here, the step's (step * nlayers << 32) read on the device (cu->step) */
    (void)step;
    uint64_t off = (uint64_t)i << 32;
    if (L->in_place) return 0;  /* its output is its input already (model_plan.h) */
    switch (L->kind) {
    case TAAS_L_LINEAR:
        return taas_cu_linear_forward(cu, y, x, p + L->w_off, b, (int)(cnt / (size_t)L->lin_in), L->lin_in, L->lin_out,
                                      err);
    case TAAS_L_CONV1D:
        return taas_cu_conv1d_forward(cu, y, x, p + L->w_off, b, cnt / (size_t)L->lin_in, L->lin_in, L->lin_out, err);
    case TAAS_L_EMBEDDING: return taas_cu_embedding_forward(cu, y, x, p + L->w_off, cnt, L->lin_in, L->lin_out, err);
    case TAAS_L_POS_EMBEDDING:
        return taas_cu_pos_embedding_forward(cu, y, x, p + L->w_off, n, L->in.d[0], L->in.d[1], err);
    case TAAS_L_LAYERNORM: {
        size_t rows = cnt / (size_t)L->lin_in;
        float *st = dm->aux[i];
        return taas_cu_layernorm_forward(cu, y, st, st + rows, x, p + L->w_off, b, rows, L->lin_in, L->eps, err);
    }
    case TAAS_L_ATTENTION: {
        taas_attention_shape as = taas_layer_attention_shape(L, n, train);
        return taas_cu_attention_forward(cu, y, dm->aux[i], x, &as, dm->scratch, dm->room, m->seed, off, err);
    }
    case TAAS_L_CONV2D: {
        taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
        int relu = L->fusion == TAAS_FUSE_RELU;
        return taas_cu_conv2d_forward(cu, y, x, p + L->w_off, b, &cs, relu, dm->scratch, dm->room, err);
    }
    case TAAS_L_MAXPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_maxpool2d_forward(cu, y, dm->aux[i], x, &ps, err);
    }
    case TAAS_L_AVGPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_avgpool2d_forward(cu, y, x, &ps, err);
    }
    case TAAS_L_RELU: return taas_cu_act_forward(cu, TAAS_CU_RELU, y, x, cnt, 0, err);
    case TAAS_L_LEAKY_RELU: return taas_cu_act_forward(cu, TAAS_CU_LEAKY_RELU, y, x, cnt, L->slope, err);
    case TAAS_L_TANH: return taas_cu_act_forward(cu, TAAS_CU_TANH, y, x, cnt, 0, err);
    case TAAS_L_SIGMOID: return taas_cu_act_forward(cu, TAAS_CU_SIGMOID, y, x, cnt, 0, err);
    case TAAS_L_GELU: return taas_cu_act_forward(cu, L->gelu_tanh ? TAAS_CU_GELU_TANH : TAAS_CU_GELU, y, x, cnt, 0, err);
    case TAAS_L_DROPOUT:
        return train ? taas_cu_dropout_forward(cu, y, dm->aux[i], x, cnt, L->p, m->seed, off, err)
                     : taas_cu_copy(cu, y, x, cnt, err);
    case TAAS_L_DROPOUT2D:
        return train ? taas_cu_dropout2d_forward(cu, y, dm->aux[i], x, n, chans(L), plane(L), L->p, m->seed, off, err)
                     : taas_cu_copy(cu, y, x, cnt, err);
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D: {
        int c = chans(L), hw = plane(L);
        float *rm = dm->stats + L->rm_off, *rv = dm->stats + L->rv_off, *st = dm->aux[i];
        if (!train) return taas_cu_batchnorm_forward_eval(cu, y, x, p + L->w_off, b, rm, rv, n, c, hw, L->eps, err);
        if (taas_cu_batchnorm_forward_train(cu, y, st, st + c, rm, rv, x, p + L->w_off, b, n, c, hw,
                                            L->momentum, L->eps, err)) {
            if (!err->hint[0]) taas_error_hint(err, "train with batches of at least 2 samples (drop_last=True)");
            taas_error_prefix(err, "%s%s (%s): ", L->path[0] >= '0' && L->path[0] <= '9' ? "layer " : "", L->path,
                              L->name);
            return -1;
        }
        m->counters[L->counter]++;
        return 0;
    }
    case TAAS_L_FLATTEN:
    case TAAS_L_IDENTITY: return 0;  /* skipped above */
    case TAAS_L_LOG_SOFTMAX:
    case TAAS_L_SOFTMAX:
        return taas_cu_softmax_forward(cu, y, x, n, chans(L), plane(L), L->kind == TAAS_L_LOG_SOFTMAX, err);
    case TAAS_L_ADAPTIVE_AVGPOOL2D:
        return taas_cu_adaptive_avgpool2d_forward(cu, y, x, n, chans(L), L->in.d[1], L->in.d[2], L->out.d[1],
                                                  L->out.d[2], err);
    case TAAS_L_ADD: return taas_cu_add(cu, y, x, dm->act[L->src[1]], cnt, err);
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
    if (reserve(dm, n, nrun, err)) return -1;
    for (int t = 0; t <= nrun; t++)  /* the input and what shares its memory are the caller's */
        if (dm->mem.act[t] == TAAS_MEM_NONE) dm->act[t] = (float *)x;
    dm->n = n;
    dm->nrun = nrun;
    dm->last_train = train;
    dm->last_step = step;
    if (train && put_step(dm, step, err)) return -1;
    steps_on(dm, train);
    int rc = 0;
    for (int i = 0; i < nrun && !rc; i++) rc = forward_layer(dm, i, n, train, step, err);
    dm->cu->step = NULL;
    *out = dm->act[nrun];
    return rc;
}

void taas_cu_model_replayed(taas_cu_model *dm, int n, uint64_t step, int nrun) {
    taas_model *m = dm->m;
    *dm->step_host = step;
    dm->n = n;
    dm->nrun = nrun;
    dm->last_train = 1;
    dm->last_step = step;
    for (int i = 0; i < nrun; i++)
        if (!m->layers[i].in_place && (m->layers[i].kind == TAAS_L_BATCHNORM1D || m->layers[i].kind == TAAS_L_BATCHNORM2D))
            m->counters[m->layers[i].counter]++;
}

/* dxo: the input gradient, or NULL where Linear and Conv2d may skip it; dx: where the others
 * write theirs. */
static int backward_layer(taas_cu_model *dm, int i, float *dxo, float *dx, const float *dy, taas_error *err) {
    const taas_model *m = dm->m;
    taas_cu *cu = dm->cu;
    const taas_model_layer *L = &m->layers[i];
    int n = dm->n;
    const float *x = dm->act[L->src[0]], *y = dm->act[i + 1], *p = dm->params;
    /* a frozen op's parameters have no gradients (model_plan.h's ntrain) */
    float *dw = L->frozen || !L->has_w ? NULL : dm->grads + L->w_off;
    float *db = L->frozen || !L->has_b ? NULL : dm->grads + L->b_off;
    size_t cnt = numel(&L->in) * (size_t)n;
    switch (L->kind) {
    case TAAS_L_LINEAR:
        return taas_cu_linear_backward(cu, dxo, dw, db, dy, x, p + L->w_off, (int)(cnt / (size_t)L->lin_in), L->lin_in,
                                       L->lin_out, err);
    case TAAS_L_CONV1D:
        return taas_cu_conv1d_backward(cu, dxo, dw, db, dy, x, p + L->w_off, cnt / (size_t)L->lin_in, L->lin_in,
                                       L->lin_out, err);
    case TAAS_L_EMBEDDING:
        return dw ? taas_cu_embedding_backward(cu, dw, dy, x, cnt, L->lin_in, L->lin_out, dm->scratch, dm->room, err)
                  : 0;
    case TAAS_L_POS_EMBEDDING: return taas_cu_pos_embedding_backward(cu, dxo, dw, dy, n, L->in.d[0], L->in.d[1], err);
    case TAAS_L_LAYERNORM: {
        size_t rows = cnt / (size_t)L->lin_in;
        const float *st = dm->aux[i];
        return taas_cu_layernorm_backward(cu, dxo, dw, db, dy, x, st, st + rows, p + L->w_off, rows, L->lin_in, err);
    }
    case TAAS_L_ATTENTION: {
        taas_attention_shape as = taas_layer_attention_shape(L, n, dm->last_train);
        uint64_t off = (uint64_t)i << 32;  /* and the step's part, on the device (forward_layer) */
        return taas_cu_attention_backward(cu, dx, dy, x, y, dm->aux[i], &as, dm->scratch, dm->room, m->seed, off, err);
    }
    case TAAS_L_CONV2D: {
        taas_conv2d_shape cs = taas_layer_conv_shape(L, n);
        int relu = L->fusion == TAAS_FUSE_RELU;
        return taas_cu_conv2d_backward(cu, dxo, dw, db, dy, y, x, p + L->w_off, &cs, relu,
                                       dm->scratch, dm->room, err);
    }
    case TAAS_L_MAXPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_maxpool2d_backward(cu, dx, dy, dm->aux[i], &ps, err);
    }
    case TAAS_L_AVGPOOL2D: {
        taas_pool2d_shape ps = taas_layer_pool_shape(L, n);
        return taas_cu_avgpool2d_backward(cu, dx, dy, &ps, err);
    }
    case TAAS_L_RELU:  /* y > 0 where x > 0; x may be written over */
        return taas_cu_act_backward(cu, TAAS_CU_RELU, dx, dy, y, y, cnt, 0, err);
    case TAAS_L_LEAKY_RELU: return taas_cu_act_backward(cu, TAAS_CU_LEAKY_RELU, dx, dy, x, y, cnt, L->slope, err);
    case TAAS_L_TANH: return taas_cu_act_backward(cu, TAAS_CU_TANH, dx, dy, x, y, cnt, 0, err);
    case TAAS_L_SIGMOID: return taas_cu_act_backward(cu, TAAS_CU_SIGMOID, dx, dy, x, y, cnt, 0, err);
    case TAAS_L_GELU:
        return taas_cu_act_backward(cu, L->gelu_tanh ? TAAS_CU_GELU_TANH : TAAS_CU_GELU, dx, dy, x, y, cnt, 0, err);
    case TAAS_L_DROPOUT:
        return dm->last_train ? taas_cu_dropout_backward(cu, dx, dy, dm->aux[i], cnt, err)
                              : taas_cu_copy(cu, dx, dy, cnt, err);
    case TAAS_L_DROPOUT2D:
        return dm->last_train ? taas_cu_dropout2d_backward(cu, dx, dy, dm->aux[i], n, chans(L), plane(L), err)
                              : taas_cu_copy(cu, dx, dy, cnt, err);
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D: {
        int c = chans(L), hw = plane(L);
        const float *st = dm->aux[i];
        if (dm->last_train)
            return taas_cu_batchnorm_backward(cu, dx, dw, db, dy, x, st, st + c,
                                              p + L->w_off, n, c, hw, err);
        return taas_cu_batchnorm_backward_eval(cu, dx, dw, db, dy, x, p + L->w_off,
                                               dm->stats + L->rm_off, dm->stats + L->rv_off, n, c, hw, L->eps, err);
    }
    case TAAS_L_FLATTEN:
    case TAAS_L_IDENTITY:
    case TAAS_L_ADD: return 0;  /* by the caller */
    case TAAS_L_LOG_SOFTMAX:
    case TAAS_L_SOFTMAX:
        return taas_cu_softmax_backward(cu, dx, dy, y, n, chans(L), plane(L), L->kind == TAAS_L_LOG_SOFTMAX, err);
    case TAAS_L_ADAPTIVE_AVGPOOL2D:
        return taas_cu_adaptive_avgpool2d_backward(cu, dx, dy, n, chans(L), L->in.d[1], L->in.d[2], L->out.d[1],
                                                   L->out.d[2], err);
    }
    return 0;
}

/* Where op i's input gradient goes (model_run.c's input_grad). */
static float *input_grad(const taas_cu_model *dm, int i) {
    float *g = dm->grad[dm->m->layers[i].src[0]];
    return g && dm->mem.acc[2 * i] ? dm->tmp[i] : g ? g : dm->tmp[i];
}

static int backward_layers(taas_cu_model *dm, taas_error *err);

int taas_cu_model_backward(taas_cu_model *dm, const float *dout, taas_error *err) {
    if (!dm->n) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "model backward before any forward");
        taas_error_hint(err, "run taas_cu_model_forward on the batch first");
        return -1;
    }
    const taas_model *m = dm->m;
    taas_act_shape os = taas_plan_tensor_shape(m->layers, m->in_shape, dm->nrun);
    size_t n = (size_t)dm->n, on = n;  /* on: the output gradient's floats; counts below are per sample times n */
    for (int k = 0; k < os.rank; k++) on *= (size_t)os.d[k];
    if (dm->grad[dm->nrun] && taas_cu_copy(dm->cu, dm->grad[dm->nrun], dout, on, err)) return -1;
    steps_on(dm, dm->last_train);
    int rc = backward_layers(dm, err);
    dm->cu->step = NULL;
    return rc;
}

static int backward_layers(taas_cu_model *dm, taas_error *err) {
    const taas_model *m = dm->m;
    size_t n = (size_t)dm->n;
    for (int i = dm->nrun - 1; i >= 0; i--) {
        const taas_model_layer *L = &m->layers[i];
        /* the gradient passes through in place: Flatten, Identity, the ReLU its Conv2d masks for */
        if (L->in_place || !dm->grad[i + 1]) continue;
        if (L->kind == TAAS_L_ADD) {
            size_t cnt = numel(&L->out) * n;
            for (int s = 0; s < 2; s++) {
                float *g = dm->grad[L->src[s]];
                if (!g || (s == 0 && L->overwrite)) continue;  /* written over: dy is already its gradient */
                if (dm->mem.acc[2 * i + s] ? taas_cu_accumulate(dm->cu, g, dm->grad[i + 1], cnt, err)
                                           : taas_cu_copy(dm->cu, g, dm->grad[i + 1], cnt, err))
                    return -1;
            }
            continue;
        }
        float *gin = dm->grad[L->src[0]];
        if (!gin && (L->frozen || (!L->has_w && !L->has_b))) continue;  /* no gradient wanted from it */
        float *dx = input_grad(dm, i);
        if (backward_layer(dm, i, gin ? dx : NULL, dx, dm->grad[i + 1], err)) return -1;
        if (gin && dm->mem.acc[2 * i] && taas_cu_accumulate(dm->cu, gin, dx, numel(&L->in) * n, err)) return -1;
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
