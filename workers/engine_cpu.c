/* The CPU engine: the training core's model, loss and optimizer on host buffers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "checkpoint.h"
#include "cpu.h"
#include "engine.h"
#include "errnames.h"

typedef struct cpu_engine {
    taas_engine base;
    taas_model *m;
    taas_train_loss *loss;
    float *state;             /* the optimizer's */
    taas_optim_config opt;    /* its kind and options: the state's layout */
    float *dout;              /* the loss's gradient */
    size_t dout_cap;
    float *x;                 /* a token model's inputs and targets, cut from the windows */
    int64_t *y;
    size_t xy_cap;
} cpu_engine;

/* What the loss compares: a classifier's outputs (n, k) with its labels, or a token model's
 * (n T, V) with the next tokens (model.h: the batch's windows cut into x and y). */
typedef struct rows {
    const float *x;
    const int64_t *y;
    int n, k;
} rows;

static int batch_rows(cpu_engine *c, const taas_batch *b, rows *r, taas_error *err) {
    int t = taas_model_tokens(c->m);
    *r = (rows){b->images, b->labels, (int)b->n, (int)taas_model_out_numel(c->m)};
    if (!t) return 0;
    size_t need = (size_t)b->n * (size_t)t;
    if (need > c->xy_cap) {
        float *x = realloc(c->x, need * sizeof *x);
        if (x) c->x = x;
        int64_t *y = realloc(c->y, need * sizeof *y);
        if (y) c->y = y;
        if (!x || !y) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a batch of tokens");
        c->xy_cap = need;
    }
    if (taas_model_split_windows(c->m, b->images, (size_t)b->c * b->h * b->w, (int)b->n, c->x, c->y, err)) return -1;
    *r = (rows){c->x, c->y, (int)need, c->m->layers[c->m->nlayers - 1].out.d[1]};
    return 0;
}

static int compute(taas_engine *e, const taas_batch *b, taas_engine_next_fn next, void *next_ctx, uint64_t step,
                   float *loss, taas_error *err) {
    (void)next, (void)next_ctx;  /* host memory already: nothing to copy ahead */
    cpu_engine *c = (cpu_engine *)e;
    if (!e->x.keep_grads) taas_model_zero_grad(c->m);
    *loss = 0;
    if (!b) return 0;
    rows r;
    if (batch_rows(c, b, &r, err)) return -1;
    size_t need = (size_t)r.n * (size_t)r.k;
    if (need > c->dout_cap) {
        float *d = realloc(c->dout, need * sizeof *d);
        if (!d) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the loss gradient");
        c->dout = d;
        c->dout_cap = need;
    }
    const float *out;
    if (taas_model_forward(c->m, r.x, (int)b->n, 1, step, &out, err) ||
        taas_train_loss_run(c->loss, out, r.y, r.n, r.k, e->x.grad_scale != 0 ? e->x.grad_scale : 1.0f, c->dout,
                            loss, err))
        return -1;
    if (!isfinite(*loss)) return 0;  /* every rank sees it in the step's sums and stops */
    return taas_model_backward(c->m, c->dout, err);
}

static int update(taas_engine *e, float w, taas_collective *coll, const taas_optim_config *opt, long step,
                  taas_error *err) {
    cpu_engine *c = (cpu_engine *)e;
    float *g = c->m->grads;
    if (w != 1.0f)
        for (size_t i = 0; i < c->m->ntrain; i++) g[i] *= w;
    if (coll->world > 1 && coll->sum_f32(coll, g, c->m->ntrain, err)) return -1;
    if (e->x.clip > 0) taas_clip_grad_norm(g, c->m->ntrain, e->x.clip);
    /* the trainable parameters only (model.h): frozen ones neither change nor have state */
    if (e->x.spans) taas_optim_step_spans(opt, c->m->params, g, c->state, c->m->ntrain, step, e->x.spans, e->x.nspans);
    else taas_optim_step(opt, c->m->params, g, c->state, c->m->ntrain, step);
    return 0;
}

/* A token model's loss and hits are per token, counted per sample (a window's mean), so that
 * the loop's sums over samples give the token means. Rows with the loss's ignore_index count
 * in neither mean (the loss's is over the others already); a batch of only those gives nan,
 * torch's mean of nothing. */
static int eval(taas_engine *e, const taas_batch *b, double *loss_sum, double *right, taas_error *err) {
    cpu_engine *c = (cpu_engine *)e;
    rows r;
    const float *out;
    float v;
    if (batch_rows(c, b, &r, err) || taas_model_forward(c->m, r.x, (int)b->n, 0, 0, &out, err) ||
        taas_train_loss_run(c->loss, out, r.y, r.n, r.k, 1.0f, NULL, &v, err))
        return -1;
    *loss_sum = (double)v * b->n;
    double hits = 0;
    int counted = 0;
    for (int i = 0; i < r.n; i++) {
        if (r.y[i] == c->loss->ignore_index) continue;
        const float *row = out + (size_t)i * r.k;
        int best = 0;
        for (int q = 1; q < r.k; q++)
            if (row[q] > row[best]) best = q;
        hits += best == r.y[i];
        counted++;
    }
    *right = counted ? hits * b->n / counted : NAN;
    return 0;
}

/* Rank 0's statistics for all: the others zero theirs and the ranks add up. */
static int share_stats(taas_engine *e, taas_collective *coll, taas_error *err) {
    cpu_engine *c = (cpu_engine *)e;
    if (coll->world == 1 || c->m->nstats == 0) return 0;
    if (coll->rank != 0) memset(c->m->stats, 0, c->m->nstats * sizeof *c->m->stats);
    return coll->sum_f32(coll, c->m->stats, c->m->nstats, err);
}

static int save(taas_engine *e, const char *path, taas_error *err) {
    return taas_train_save(((cpu_engine *)e)->m, path, err);
}

static taas_checkpoint_bufs bufs(cpu_engine *c) {
    taas_model *m = c->m;
    return (taas_checkpoint_bufs){m->table, m->ntable, m->ntrain, m->params, m->stats, m->counters, c->state};
}

static int checkpoint(taas_engine *e, const char *path, const json_t *meta, taas_error *err) {
    cpu_engine *c = (cpu_engine *)e;
    taas_checkpoint_bufs b = bufs(c);
    return taas_checkpoint_write(path, &b, &c->opt, meta, err);
}

static int restore(taas_engine *e, const char *path, json_t **meta, taas_error *err) {
    cpu_engine *c = (cpu_engine *)e;
    taas_checkpoint_bufs b = bufs(c);
    return taas_checkpoint_read(path, &b, &c->opt, meta, err);
}

static void cpu_free(taas_engine *e) {
    cpu_engine *c = (cpu_engine *)e;
    if (!c) return;
    taas_model_free(c->m);
    free(c->state);
    free(c->dout);
    free(c->x);
    free(c->y);
    free(c);
}

static taas_model *host_model(taas_engine *e, taas_error *err) {
    (void)err;
    return ((cpu_engine *)e)->m;
}

static const taas_engine_ops CPU_OPS = {compute, update, eval, share_stats, save, checkpoint, restore, host_model,
                                        cpu_free};

taas_engine *taas_engine_cpu(taas_model *m, taas_train_loss *loss, const taas_optim_config *opt, taas_error *err) {
    if (taas_cpu_check(err)) {  /* TAAS_CPU names no set, or one this CPU lacks */
        taas_model_free(m);
        return NULL;
    }
    cpu_engine *c = calloc(1, sizeof *c);
    size_t n = taas_optim_state_floats(opt, m->ntrain);
    float *state = calloc(n ? n : 1, sizeof *state);
    if (!c || !state) {
        free(c);
        free(state);
        taas_model_free(m);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the optimizer state");
        return NULL;
    }
    c->base.ops = &CPU_OPS;
    c->base.nparams = m->nparams;
    /* the kernel set and OpenBLAS's core: what a log reader needs to compare two runs */
    snprintf(c->base.name, sizeof c->base.name, "CPU, %d thread%s, %s kernels (OpenBLAS %s)", m->nthreads,
             m->nthreads == 1 ? "" : "s", taas_cpu_set_name(taas_cpu_kernels()), taas_blas_core());
    c->m = m;
    c->loss = loss;
    c->state = state;
    c->opt = *opt;
    return &c->base;
}
