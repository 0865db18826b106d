/* The CUDA engine (cu_engine.h): engine_cpu.c's steps on a GPU. */
#include "cu_engine.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "cu_comm.h"
#include "cu_loss.h"
#include "cu_optim.h"
#include "cu_stage.h"
#include "errnames.h"
#include "safetensors.h"

/* What a captured step's kernels depend on besides the numbers in device memory: a replay is
 * this step's only when all of it is the same (the buffers too: one reallocated since would
 * leave the graph writing freed memory). */
typedef struct step_key {
    int valid, n, nrun, counted, keep_grads;
    float grad_scale;
    const void *work, *dout, *rows, *rows_host, *x, *y;
} step_key;

/* A stage slot's captured step (CUDA Graphs, docs/cuda.md) and the last step's key there */
typedef struct step_graph {
    cudaGraphExec_t exec;
    step_key key;
} step_graph;

typedef struct cu_engine {
    taas_engine base;
    taas_model *m;              /* borrowed: the plan, the counters, and the weights when saving */
    taas_cu cu;
    taas_cu_model dm;
    taas_cu_stage st;
    taas_cu_comm comm;
    taas_train_loss_kind loss_kind;
    float smoothing;
    int64_t ignore_index;       /* the loss's: rows with this target count nowhere */
    int fused;                  /* NLLLoss after a final LogSoftmax: cross-entropy on its input */
    size_t k;                   /* outputs per row: a sample's, or a token model's vocabulary */
    int tokens;                 /* a token model's T (model.h), rows being tokens; else 0 */
    void *clip_scratch;         /* device: clip_grad_norm's sums */
    float *tx;                  /* host: a token batch's inputs and targets, cut from its windows */
    int64_t *ty;
    size_t tcap;
    float *state;               /* device: the optimizer's, one allocation */
    taas_optim_config opt;      /* its kind and options: the state's layout */
    float *dout;                /* device: the loss's gradient (cap, k) */
    double *rows, *rows_host;   /* each sample's loss: device, pinned host */
    int *right, *right_host;    /* eval: each sample's hit */
    int cap;                    /* samples the four buffers above hold */
    int last_slot;              /* the stage's slot of the last batch computed */
    int counted[2];             /* each slot's rows whose target is not ignore_index */
    cudaEvent_t start, done;    /* around a step's kernels */
    int graphs;                 /* CUDA Graphs on: TAAS_CUDA_GRAPHS=0 turns them off, as a failed capture does */
    step_graph g[2][2];         /* a stage slot's each, by whether gradients are kept (accumulation) */
    long replays;
    /* TAAS_CUDA_STATS */
    int stats;
    long steps;
    double busy_s, wait_s;
    _Atomic long long done_ns;  /* when the GPU finished the step (a host callback writes it) */
} cu_engine;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void CUDART_CB mark_done(void *p) {
    atomic_store(&((cu_engine *)p)->done_ns, now_ns());
}

taas_cu_model *taas_cu_engine_model(taas_engine *e) {
    return &((cu_engine *)e)->dm;
}

/* The batch fits the model and its labels the classes: the CPU's words (loss.c), checked on
 * the host before anything is queued. */
static int check_batch(const cu_engine *e, const taas_batch *b, taas_error *err) {
    if (e->tokens) return 0;  /* taas_model_split_windows checks a token batch as it cuts it */
    const taas_act_shape *s = &e->m->in_shape;
    size_t want = 1, got = (size_t)b->c * b->h * b->w;
    for (int i = 0; i < s->rank; i++) want *= (size_t)s->d[i];
    if (got != want) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a batch of %ux%ux%u samples (%zu values each) for a model "
                       "that takes %zu", b->c, b->h, b->w, got, want);
        taas_error_hint(err, "give every sample the shape the model was planned for (Resize, CenterCrop)");
        return -1;
    }
    const char *what = e->loss_kind == TAAS_JOB_NLL ? "NLLLoss" : "CrossEntropyLoss";
    for (uint32_t i = 0; i < b->n; i++) {
        if (b->labels[i] != e->ignore_index && (b->labels[i] < 0 || (uint64_t)b->labels[i] >= e->k)) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: target %lld of sample %u is out of range for %zu classes",
                           what, (long long)b->labels[i], i, e->k);
            taas_error_hint(err, "class labels must be integers in [0, %zu); check the dataset's labels or the size "
                                 "of the last layer", e->k);
            return -1;
        }
    }
    return 0;
}

static void free_rows(cu_engine *e) {
    if (e->dout) cudaFree(e->dout);
    if (e->rows) cudaFree(e->rows);
    if (e->right) cudaFree(e->right);
    if (e->rows_host) cudaFreeHost(e->rows_host);
    if (e->right_host) cudaFreeHost(e->right_host);
    e->dout = NULL;
    e->rows = e->rows_host = NULL;
    e->right = e->right_host = NULL;
    e->cap = 0;
}

/* Room for n samples' loss gradient, losses and hits (every step before has been waited for). */
static int reserve(cu_engine *e, int n, taas_error *err) {
    if (n <= e->cap) return 0;
    free_rows(e);
    size_t nn = (size_t)n;
    if (taas_cu_alloc((void **)&e->dout, nn * e->k * sizeof(float), "the loss's gradient", err) ||
        taas_cu_alloc((void **)&e->rows, nn * sizeof(double), "the losses", err) ||
        taas_cu_alloc((void **)&e->right, nn * sizeof(int), "the accuracy", err) ||
        taas_cu_check(cudaMallocHost((void **)&e->rows_host, nn * sizeof(double)), "allocating pinned memory", err) ||
        taas_cu_check(cudaMallocHost((void **)&e->right_host, nn * sizeof(int)), "allocating pinned memory", err)) {
        free_rows(e);
        return -1;
    }
    e->cap = n;
    return 0;
}

/* The rows the loss sees: a sample each, or a token model's T a sample. */
static int rows_of(const cu_engine *e, const taas_batch *b) {
    return (int)b->n * (e->tokens ? e->tokens : 1);
}

/* b into slot i: as it is, or a token model's inputs and targets cut from its windows on
 * the host (the cut checks them: model.h). The slot's counted rows are taken from the host's
 * targets now, for the loss's mean and gradient scale. */
static int put(cu_engine *e, int i, const taas_batch *b, taas_error *err) {
    if (!e->tokens) {
        e->counted[i] = taas_loss_counted(b->labels, (int)b->n, e->ignore_index);
        return taas_cu_stage_put(&e->st, i, b, (size_t)b->c * b->h * b->w, err);
    }
    size_t rows = (size_t)rows_of(e, b);
    if (rows > e->tcap) {
        float *x = realloc(e->tx, rows * sizeof *x);
        if (x) e->tx = x;
        int64_t *y = realloc(e->ty, rows * sizeof *y);
        if (y) e->ty = y;
        if (!x || !y) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a batch of tokens");
        e->tcap = rows;
    }
    if (taas_model_split_windows(e->m, b->images, (size_t)b->c * b->h * b->w, (int)b->n, e->tx, e->ty, err)) return -1;
    e->counted[i] = taas_loss_counted(e->ty, (int)rows, e->ignore_index);
    return taas_cu_stage_put_xy(&e->st, i, b, e->tx, rows, e->ty, rows, err);
}

/* b in a slot of the stage: the one it was copied to ahead of time (a training batch the
 * loop announced), or the other. */
static int stage(cu_engine *e, const taas_batch *b, int ahead, taas_error *err) {
    int slot = ahead ? taas_cu_stage_take(&e->st, b) : -1;
    if (slot < 0) {
        slot = 1 - e->last_slot;
        if (put(e, slot, b, err)) return -1;
    }
    if (taas_cu_stage_use(&e->st, slot, err)) return -1;
    e->last_slot = slot;
    return slot;
}

/* Queues the loss of out (n rows, and with d its gradient) for the labels y of a slot with
 * counted rows not ignored: the gradient is the mean's over those (none: zero, as torch's),
 * times the extras' grad_scale (engine.h). */
static int queue_loss(cu_engine *e, const float *out, const int64_t *y, int n, int counted, float *d,
                      taas_error *err) {
    float g = e->base.x.grad_scale != 0 ? e->base.x.grad_scale : 1.0f;
    float scale = counted ? g / (float)counted : 0.0f;
    if (e->fused || e->loss_kind == TAAS_JOB_CROSS_ENTROPY)
        return taas_cu_cross_entropy_rows(&e->cu, e->rows, d, out, y, n, (int)e->k, e->fused ? 0.0f : e->smoothing,
                                          e->ignore_index, scale, err);
    return taas_cu_nll_rows(&e->cu, e->rows, d, out, y, n, (int)e->k, e->ignore_index, scale, err);
}

/* A training step's kernels on slot's batch (n samples, r loss rows, counted of them not
 * ignored): zero_grad unless the gradients are kept, forward, loss, the losses' copy back,
 * backward. A loss that is not finite has its backward run too; the loop stops before an
 * update. */
static int queue_step(cu_engine *e, int slot, int n, int r, int counted, uint64_t step, taas_error *err) {
    const float *out;
    int nrun = e->fused ? e->m->nlayers - 1 : e->m->nlayers;
    return (!e->base.x.keep_grads && taas_cu_model_zero_grad(&e->dm, err)) ||
                   taas_cu_model_forward(&e->dm, e->st.slot[slot].x, n, 1, step, nrun, &out, err) ||
                   queue_loss(e, out, e->st.slot[slot].y, r, counted, e->dout, err) ||
                   taas_cu_check(cudaMemcpyAsync(e->rows_host, e->rows, (size_t)r * sizeof(double),
                                                 cudaMemcpyDeviceToHost, e->cu.stream),
                                 "copying the loss back", err) ||
                   taas_cu_model_backward(&e->dm, e->dout, err)
               ? -1
               : 0;
}

static step_key key_of(const cu_engine *e, int slot, int n, int counted) {
    step_key k;
    memset(&k, 0, sizeof k);  /* the padding too: keys are compared as bytes */
    k.valid = 1, k.n = n, k.nrun = e->fused ? e->m->nlayers - 1 : e->m->nlayers, k.counted = counted;
    k.keep_grads = e->base.x.keep_grads, k.grad_scale = e->base.x.grad_scale;
    k.work = e->dm.work, k.dout = e->dout, k.rows = e->rows, k.rows_host = e->rows_host;
    k.x = e->st.slot[slot].x, k.y = e->st.slot[slot].y;
    return k;
}

static void drop_graph(step_graph *g) {
    if (g->exec) cudaGraphExecDestroy(g->exec);
    g->exec = NULL;
}

/* Captures the step into g and launches it; on any failure, CUDA Graphs go off for this
 * engine and the step is queued as it is without them, the host's BatchNorm counters (which
 * the captured forward counted) put back first. */
static int capture(cu_engine *e, step_graph *g, int slot, int n, int r, int counted, uint64_t step,
                   taas_error *err) {
    taas_model *m = e->m;
    size_t nc = (size_t)m->ncounters;
    int64_t *saved = malloc((nc ? nc : 1) * sizeof *saved);
    if (!saved) return queue_step(e, slot, n, r, counted, step, err);  /* nothing to put them back from */
    memcpy(saved, m->counters, nc * sizeof *saved);
    cudaStream_t st = e->cu.stream;
    cudaGraph_t graph = NULL;
    taas_error why;
    taas_error_clear(&why);
    cudaError_t rc = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    if (rc == cudaSuccess) {
        int queued = queue_step(e, slot, n, r, counted, step, &why);
        cudaError_t end = cudaStreamEndCapture(st, &graph);
        rc = queued ? cudaErrorStreamCaptureInvalidated : end;
        if (rc == cudaSuccess) rc = cudaGraphInstantiate(&g->exec, graph, 0);
        if (graph) cudaGraphDestroy(graph);
        if (rc == cudaSuccess) {
            free(saved);
            return taas_cu_check(cudaGraphLaunch(g->exec, st), "replaying a training step", err);
        }
    }
    g->exec = NULL;
    e->graphs = 0;
    (void)cudaGetLastError();  /* a capture's errors are not the step's */
    fprintf(stderr, "taas: CUDA Graphs off: capturing a training step failed (%s)\n",
            why.message[0] ? why.message : cudaGetErrorString(rc));
    memcpy(m->counters, saved, nc * sizeof *saved);
    free(saved);
    return queue_step(e, slot, n, r, counted, step, err);
}

/* The step on slot: replayed where this slot's last captured step had the same key, captured
 * where its last step had (and the model's memory is planned for this shape), else queued
 * kernel by kernel. */
static int run_step(cu_engine *e, int slot, int n, int r, int counted, uint64_t step, taas_error *err) {
    if (!e->graphs) return queue_step(e, slot, n, r, counted, step, err);
    step_graph *g = &e->g[slot][e->base.x.keep_grads ? 1 : 0];
    step_key k = key_of(e, slot, n, counted);
    int same = !memcmp(&k, &g->key, sizeof k), planned = e->dm.act && e->dm.mem.n == n && e->dm.mem.nrun == k.nrun;
    if (!same) drop_graph(g);
    if (!same || !planned) {
        int rc = queue_step(e, slot, n, r, counted, step, err);
        /* keyed after the step, whose forward may have planned the model's memory */
        if (!same && rc) memset(&g->key, 0, sizeof g->key);
        else if (!same) g->key = key_of(e, slot, n, counted);
        return rc;
    }
    if (!g->exec) return capture(e, g, slot, n, r, counted, step, err);
    taas_cu_model_replayed(&e->dm, n, step, k.nrun);
    e->replays++;
    return taas_cu_check(cudaGraphLaunch(g->exec, e->cu.stream), "replaying a training step", err);
}

long taas_cu_engine_replays(taas_engine *base) { return ((cu_engine *)base)->replays; }

static int compute(taas_engine *base, const taas_batch *b, taas_engine_next_fn next, void *next_ctx, uint64_t step,
                   float *loss, taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    *loss = 0;
    if (b && (check_batch(e, b, err) || reserve(e, rows_of(e, b), err))) return -1;
    if (!b && !base->x.keep_grads && taas_cu_model_zero_grad(&e->dm, err)) return -1;
    int counted = 0;  /* b's rows not ignored, for the mean below */
    if (b) {
        int slot = stage(e, b, 1, err), n = (int)b->n, r = rows_of(e, b);
        if (slot < 0) return -1;
        counted = e->counted[slot];
        if (taas_cu_check(cudaEventRecord(e->start, e->cu.stream), "timing a step", err) ||
            run_step(e, slot, n, r, counted, step, err) || taas_cu_stage_done(&e->st, slot, err))
            return -1;
    }
    if (taas_cu_check(cudaEventRecord(e->done, e->cu.stream), "timing a step", err)) return -1;
    if (e->stats) {
        atomic_store(&e->done_ns, 0);
        if (taas_cu_check(cudaLaunchHostFunc(e->cu.stream, mark_done, e), "timing a step", err)) return -1;
    }
    /* the next step's batch travels while this one computes */
    const taas_batch *nb = NULL;
    if (next && next(next_ctx, &nb, err)) return -1;
    if (e->stats && nb) {
        long long t = now_ns(), d = atomic_load(&e->done_ns);
        if (d > 0 && t > d) e->wait_s += (double)(t - d) * 1e-9;  /* the GPU was done before the batch came */
    }
    /* not put (a token outside the vocabulary, say): its own step puts it again and reports
     * the error, so that it belongs to that step and this one's loss stands */
    if (nb && put(e, 1 - e->last_slot, nb, err)) taas_error_clear(err);
    if (taas_cu_check(cudaEventSynchronize(e->done), "a training step", err)) return -1;
    if (!b) return 0;
    if (e->stats) {
        float ms = 0;
        if (taas_cu_check(cudaEventElapsedTime(&ms, e->start, e->done), "timing a step", err)) return -1;
        e->busy_s += ms * 1e-3;
        e->steps++;
    }
    double sum = 0;
    int r = rows_of(e, b);
    for (int i = 0; i < r; i++) sum += e->rows_host[i];  /* an ignored row's is 0 */
    *loss = counted ? (float)(sum / counted) : NAN;      /* torch's mean of nothing */
    return 0;
}

static int update(taas_engine *base, float w, taas_collective *coll, const taas_optim_config *opt, long step,
                  taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    size_t n = e->m->ntrain;  /* the trainable parameters (model.h) */
    /* one rank's plain step: no weighting (as engine_cpu.c) */
    if ((w != 1.0f && taas_cu_scale(&e->cu, e->dm.grads, n, w, err)) ||
        (coll->world > 1 && taas_cu_comm_sum(&e->comm, &e->cu, e->dm.grads, n, err)))
        return -1;
    if (base->x.clip > 0) {
        if (!e->clip_scratch && taas_cu_alloc(&e->clip_scratch, taas_cu_clip_scratch_bytes(n), "clipping's sums", err))
            return -1;
        if (taas_cu_clip_grad_norm(&e->cu, e->dm.grads, n, base->x.clip, e->clip_scratch, err)) return -1;
    }
    if (base->x.spans)
        return taas_cu_optim_step_spans(&e->cu, opt, e->dm.params, e->dm.grads, e->state, n, step, base->x.spans,
                                        base->x.nspans, err);
    return taas_cu_optim_step(&e->cu, opt, e->dm.params, e->dm.grads, e->state, n, step, err);
}

static int eval(taas_engine *base, const taas_batch *b, double *loss_sum, double *right, taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    int n = (int)b->n, r = rows_of(e, b);
    const float *out;
    if (check_batch(e, b, err) || reserve(e, r, err)) return -1;
    int slot = stage(e, b, 0, err);
    if (slot < 0 || taas_cu_model_forward(&e->dm, e->st.slot[slot].x, n, 0, 0, e->m->nlayers, &out, err)) return -1;
    /* the loss on the model's output, as the CPU computes it (no fusion: eval has no backward) */
    int fused = e->fused;
    e->fused = 0;
    int counted = e->counted[slot];
    int rc = queue_loss(e, out, e->st.slot[slot].y, r, counted, NULL, err);
    e->fused = fused;
    if (rc || taas_cu_argmax_right(&e->cu, e->right, out, e->st.slot[slot].y, r, (int)e->k, e->ignore_index, err) ||
        taas_cu_check(cudaMemcpyAsync(e->rows_host, e->rows, (size_t)r * sizeof(double), cudaMemcpyDeviceToHost,
                                      e->cu.stream),
                      "copying the losses back", err) ||
        taas_cu_check(cudaMemcpyAsync(e->right_host, e->right, (size_t)r * sizeof(int), cudaMemcpyDeviceToHost,
                                      e->cu.stream),
                      "copying the accuracy back", err) ||
        taas_cu_stage_done(&e->st, slot, err) || taas_cu_sync(&e->cu, "an evaluation step", err))
        return -1;
    *loss_sum = 0;
    *right = 0;
    for (int i = 0; i < r; i++) {
        *loss_sum += e->rows_host[i];
        *right += e->right_host[i];
    }
    /* the means over the rows not ignored (a token model's per token), counted per sample as
     * engine_cpu.c's; nan when every row is ignored */
    *loss_sum = counted ? *loss_sum * n / counted : NAN;
    *right = counted ? *right * n / counted : NAN;
    return 0;
}

static int share_stats(taas_engine *base, taas_collective *coll, taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    if (coll->world == 1 || e->m->nstats == 0) return 0;
    return taas_cu_comm_bcast(&e->comm, &e->cu, e->dm.stats, e->m->nstats, err);
}

static int save(taas_engine *base, const char *path, taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    taas_model *m = e->m;
    if (taas_cu_model_download(&e->dm, err)) return -1;
    taas_st_tensor *t = taas_param_table_tensors(m->table, m->ntable, m->params, m->stats, m->counters);
    if (!t) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the weights table");
    const taas_st_meta meta[] = {{"format", "pt"}};
    int rc = taas_safetensors_write(path, t, m->ntable, meta, 1, err);
    free(t);
    return rc;
}

/* The optimizer's state goes through a host copy; the model's through the host model. */
static float *host_state(cu_engine *e, size_t *bytes, taas_error *err) {
    *bytes = taas_optim_state_floats(&e->opt, e->m->ntrain) * sizeof(float);
    float *h = malloc(*bytes ? *bytes : 1);
    if (!h) taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the optimizer's state");
    return h;
}

static int checkpoint(taas_engine *base, const char *path, const json_t *meta, taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    taas_model *m = e->m;
    size_t bytes;
    float *h = host_state(e, &bytes, err);
    if (!h) return -1;
    int rc = taas_cu_model_download(&e->dm, err) ||
             (bytes && taas_cu_download(&e->cu, h, e->state, bytes, "copying the optimizer's state back", err));
    if (!rc) {
        taas_checkpoint_bufs b = {m->table, m->ntable, m->ntrain, m->params, m->stats, m->counters, h};
        rc = taas_checkpoint_write(path, &b, &e->opt, meta, err);
    }
    free(h);
    return rc ? -1 : 0;
}

static int restore(taas_engine *base, const char *path, json_t **meta, taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    taas_model *m = e->m;
    size_t bytes;
    float *h = host_state(e, &bytes, err);
    if (!h) return -1;
    taas_checkpoint_bufs b = {m->table, m->ntable, m->ntrain, m->params, m->stats, m->counters, h};
    int rc = taas_checkpoint_read(path, &b, &e->opt, meta, err) ||
             taas_cu_upload(&e->cu, e->dm.params, m->params, m->nparams * sizeof(float), "uploading the parameters",
                            err) ||
             taas_cu_upload(&e->cu, e->dm.stats, m->stats, m->nstats * sizeof(float),
                            "uploading the BatchNorm statistics", err) ||
             (bytes && taas_cu_upload(&e->cu, e->state, h, bytes, "uploading the optimizer's state", err)) ||
             taas_cu_sync(&e->cu, "restoring the checkpoint", err);
    free(h);
    return rc ? -1 : 0;
}

static void engine_free(taas_engine *base) {
    cu_engine *e = (cu_engine *)base;
    if (!e) return;
    if (e->cu.stream) cudaStreamSynchronize(e->cu.stream);
    if (e->stats && e->steps)
        fprintf(stderr, "{\"event\": \"cuda_stats\", \"device\": %d, \"steps\": %ld, \"gpu_busy_s\": %.6f, "
                        "\"data_wait_s\": %.6f}\n", e->cu.device, e->steps, e->busy_s, e->wait_s);
    for (int i = 0; i < 4; i++) drop_graph(&e->g[i / 2][i % 2]);
    taas_cu_comm_free(&e->comm);
    taas_cu_stage_free(&e->st);
    taas_cu_model_release(&e->dm);
    free_rows(e);
    free(e->tx);
    free(e->ty);
    if (e->clip_scratch) cudaFree(e->clip_scratch);
    if (e->state) cudaFree(e->state);
    if (e->start) cudaEventDestroy(e->start);
    if (e->done) cudaEventDestroy(e->done);
    taas_cu_free(&e->cu);
    free(e);
}

static taas_model *host_model(taas_engine *base, taas_error *err) {
    cu_engine *e = (cu_engine *)base;
    return taas_cu_model_download(&e->dm, err) ? NULL : e->m;
}

static const taas_engine_ops CUDA_OPS = {compute, update, eval, share_stats, save, checkpoint, restore, host_model,
                                         engine_free};

/* The parts that can fail, in order; engine_free undoes whatever was made. */
static int setup(cu_engine *e, const taas_optim_config *opt, int device, taas_collective *c, taas_error *err) {
    taas_model *m = e->m;
    if (taas_cu_init(&e->cu, device, err) || taas_cu_model_init(&e->dm, m, &e->cu, err) ||
        taas_cu_stage_init(&e->st, &e->cu, err))
        return -1;
    size_t ns = taas_optim_state_floats(opt, m->ntrain) * sizeof(float);
    if (taas_cu_alloc((void **)&e->state, ns, "the optimizer's state", err) ||
        taas_cu_check(cudaMemsetAsync(e->state, 0, ns, e->cu.stream), "zeroing the optimizer's state", err) ||
        taas_cu_check(cudaEventCreate(&e->start), "creating an event", err) ||
        taas_cu_check(cudaEventCreate(&e->done), "creating an event", err) ||
        taas_cu_comm_init(&e->comm, c, &e->cu, err))
        return -1;
    return taas_cu_sync(&e->cu, "setting up the GPU", err);
}

__attribute__((visibility("default"))) taas_engine *taas_cuda_engine_new(taas_model *m, const taas_train_loss *loss,
                                                                         const taas_optim_config *opt, int device,
                                                                         taas_precision precision, taas_collective *c,
                                                                         taas_error *err) {
    cu_engine *e = calloc(1, sizeof *e);
    if (!e) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the CUDA engine");
        return NULL;
    }
    e->base.ops = &CUDA_OPS;
    e->base.nparams = m->nparams;
    e->m = m;
    e->loss_kind = loss->kind;
    e->smoothing = loss->label_smoothing;
    e->ignore_index = loss->ignore_index;
    e->opt = *opt;
    const taas_model_layer *last = &m->layers[m->nlayers - 1];
    e->tokens = taas_model_tokens(m);
    e->k = 1;
    for (int i = e->tokens ? 1 : 0; i < last->out.rank; i++) e->k *= (size_t)last->out.d[i];
    e->fused = loss->kind == TAAS_JOB_NLL && taas_layers_fold_into_nll(m->layers, m->nlayers);
    const char *graphs = getenv("TAAS_CUDA_GRAPHS");
    e->stats = taas_cu_env_on("TAAS_CUDA_STATS");
    e->graphs = !(graphs && !strcmp(graphs, "0"));
    atomic_init(&e->done_ns, 0);
    if (setup(e, opt, device, c, err)) {
        engine_free(&e->base);
        return NULL;
    }
    if (precision == TAAS_PRECISION_BF16) taas_cu_set_math(&e->cu, TAAS_CU_BF16);
    snprintf(e->base.name, sizeof e->base.name, "cuda:%d, %s%s%s%s", device, e->cu.name, taas_cu_math_name(&e->cu),
             e->cu.lt ? ", cuBLASLt" : "", e->cu.dnn ? ", cuDNN" : "");
    return &e->base;
}
