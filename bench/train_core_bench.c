/* The training core on in-memory data, for bench/train_bench.py: no worker, no data
 * pipeline, the same set-up as the PyTorch side of the benchmark.
 *
 *   taas-train-bench --model FILE --input C,H,W --mode train|infer|layer|lm [--batch N] [--steps S]
 *                    [--warmup W] [--threads T] [--seed S] [--no-direct]
 *
 * FILE holds a model spec (as in a job spec's "model": a Sequential, a ResNet, ...). The inputs are uniform in
 * [-1, 1), the labels i mod (output width); one batch, reused every step.
 *   train: per step zero_grad, forward in train mode, NLLLoss, backward, Adadelta(lr=1.0)
 *   infer: forward in eval mode (running statistics, no dropout)
 *   lm:    a language model (its first op an Embedding; --input T,0,0): token ids j*7919+13 mod
 *          the vocabulary, targets the next ones; per step zero_grad, forward in train mode,
 *          CrossEntropyLoss over the (N*T, V) logits, backward, AdamW(lr=6e-4, betas=(0.9, 0.95),
 *          weight_decay=0.1), as bench/gpt_bench.py's PyTorch side; adds "tokens_per_s"
 *   attention: the fused causal attention alone (layers.h) on --input T,HEADS,D (no --model):
 *          forward and backward on N sequences of uniform q, k, v and output gradient
 *   layer: the model's first Conv2d alone (with its ReLU when the plan fuses one): forward,
 *          then backward with all three products (input, weight and bias gradients) on a
 *          fixed output gradient; the layer's own speed, without the rest of the step. The
 *          line adds "gflop_per_sample" (its multiply-adds x 2, all three products) and
 *          "gflops". * --no-direct runs every convolution through im2col + sgemm (conv_direct.h's kernels off).
 * W untimed steps, then S timed ones. Prints one JSON line:
 *   {"mode": ..., "batch": N, "steps": S, "threads": T, "seconds": t, "samples_per_s": r,
 *    "blas_core": "...", "direct": true|false, "rss_before_kb": ..., "rss_peak_kb": ...,
 *    "arena_bytes": the step's planned memory (model_memory.h)} */
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "conv_direct.h"
#include "init.h"
#include "loss.h"
#include "model.h"
#include "optim.h"

static int usage(void) {
    fprintf(stderr, "usage: taas-train-bench --model FILE --input C,H,W --mode train|infer|layer|lm|attention [--batch N] "
                    "[--steps S] [--warmup W] [--threads T] [--seed S] [--no-direct]\n");
    return 2;
}

static int fail(const taas_error *e) {
    fprintf(stderr, "taas-train-bench: %s: %s\n", e->ename, e->message);
    return 1;
}

/* A field of /proc/self/status in kB (VmRSS: now, VmHWM: the peak), or -1. */
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) v = atol(line + strlen(field));
    if (f) fclose(f);
    return v;
}

/* One step; returns -1 with e filled. */
static int run_step(taas_model *m, const float *x, const int64_t *y, int n, int train, float *dlogp,
                    const taas_optim_config *opt, float *state, long step, taas_error *e) {
    const float *out;
    if (!train) return taas_model_forward(m, x, n, 0, 0, &out, e);
    int k = (int)taas_model_out_numel(m);
    float loss;
    taas_model_zero_grad(m);
    if (taas_model_forward(m, x, n, 1, (uint64_t)step, &out, e) ||
        taas_nll_loss_forward(&loss, out, y, n, k, -100, e))
        return -1;
    taas_nll_loss_backward(dlogp, y, n, k, -100, 1.0f);
    if (taas_model_backward(m, dlogp, e)) return -1;
    taas_optim_step(opt, m->params, m->grads, state, m->ntrain, step);
    return 0;
}

/* --mode lm: one step of a language model on (n, t) tokens; -1 with e filled. */
static int lm_step(taas_model *m, const float *ids, const int64_t *y, int n, float *probs, float *dlogits,
                   const taas_optim_config *opt, float *state, long step, taas_error *e) {
    const float *out;
    int v = m->layers[0].lin_in;
    int rows = n * m->in_shape.d[0];
    float loss;
    taas_model_zero_grad(m);
    if (taas_model_forward(m, ids, n, 1, (uint64_t)step, &out, e) ||
        taas_cross_entropy_forward(&loss, probs, out, y, rows, v, 0.0f, -100, e))
        return -1;
    taas_cross_entropy_backward(dlogits, probs, y, rows, v, 0.0f, -100, 1.0f);
    if (taas_model_backward(m, dlogits, e)) return -1;
    taas_optim_step(opt, m->params, m->grads, state, m->ntrain, step);
    return 0;
}

/* --mode attention */
static int bench_attention(int n, int t, int heads, int d, int warmup, int steps, int threads) {
    taas_attention_shape s = {n, t, heads * d, heads, 0.0f};
    size_t cnt = (size_t)n * t * heads * d;
    float *qkv = malloc(3 * cnt * sizeof(float)), *dqkv = malloc(3 * cnt * sizeof(float)), *y = malloc(cnt * sizeof(float));
    float *dy = malloc(cnt * sizeof(float)), *lse = malloc((size_t)n * heads * t * sizeof(float));
    float *scratch = malloc(taas_attention_scratch_floats(&s, threads) * sizeof(float));
    if (!qkv || !dqkv || !y || !dy || !lse || !scratch) {
        fprintf(stderr, "taas-train-bench: out of memory\n");
        free(qkv), free(dqkv), free(y), free(dy), free(lse), free(scratch);
        return 1;
    }
    taas_init_rng rng = {7, 0};
    taas_init_uniform(qkv, 3 * cnt, 1.0f, &rng);
    taas_init_uniform(dy, cnt, 1.0f, &rng);
    double t0 = 0;
    for (int st = 0; st < warmup + steps; st++) {
        if (st == warmup) t0 = omp_get_wtime();
        taas_attention_forward(y, lse, qkv, &s, scratch, threads, 1, 0);
        taas_attention_backward(dqkv, dy, qkv, y, lse, &s, scratch, threads, 1, 0);
    }
    double secs = omp_get_wtime() - t0;
    printf("{\"mode\": \"attention\", \"batch\": %d, \"t\": %d, \"heads\": %d, \"d\": %d, \"steps\": %d, "
           "\"threads\": %d, \"seconds\": %.6f, \"ms_per_step\": %.3f, \"tokens_per_s\": %.1f}\n",
           n, t, heads, d, steps, threads, secs, 1e3 * secs / steps, (double)steps * n * t / secs);
    free(qkv), free(dqkv), free(y), free(dy), free(lse), free(scratch);
    return 0;
}

/* --mode layer */
static int bench_layer(const taas_model *m, int n, int warmup, int steps, int threads, uint64_t seed, int direct) {
    const taas_model_layer *L = NULL;
    for (int i = 0; i < m->nlayers && !L; i++)
        if (m->layers[i].kind == TAAS_L_CONV2D) L = &m->layers[i];
    if (!L) {
        fprintf(stderr, "taas-train-bench: --mode layer needs a Conv2d in the model\n");
        return 2;
    }
    taas_conv2d_shape s = taas_layer_conv_shape(L, n);
    int relu = L->fusion == TAAS_FUSE_RELU, oh = taas_conv2d_out_h(&s), ow = taas_conv2d_out_w(&s);
    size_t in = (size_t)n * s.c * s.h * s.w, out = (size_t)n * s.oc * oh * ow, k = (size_t)s.c * s.kh * s.kw;
    float *x = malloc(sizeof(float) * in), *dx = malloc(sizeof(float) * in), *y = malloc(sizeof(float) * out);
    float *dy = malloc(sizeof(float) * out), *dw = malloc(sizeof(float) * s.oc * k), *db = malloc(sizeof(float) * s.oc);
    /* 64-byte aligned, as the model's (model_run.c): the kernels' slices keep it */
    float *scratch = aligned_alloc(64, (sizeof(float) * taas_conv2d_scratch_floats(&s, threads) + 63) / 64 * 64);
    int rc = 0;
    if (!x || !dx || !y || !dy || !dw || !db || !scratch) {
        fprintf(stderr, "taas-train-bench: out of memory\n");
        rc = 1;
        goto done;
    }
    taas_init_rng rng = {seed + 1, 0};
    taas_init_uniform(x, in, 1.0f, &rng);
    taas_init_uniform(dy, out, 1.0f, &rng);
    const float *w = m->params + L->w_off, *b = L->has_b ? m->params + L->b_off : NULL;
    double t0 = 0;
    for (int st = 0; st < warmup + steps; st++) {
        if (st == warmup) t0 = omp_get_wtime();
        memset(dw, 0, sizeof(float) * s.oc * k), memset(db, 0, sizeof(float) * s.oc);
        if (relu) {
            taas_conv2d_relu_forward(y, x, w, b, &s, scratch, threads);
            taas_conv2d_relu_backward(dx, dw, db, dy, y, x, w, &s, scratch, threads);
        } else {
            taas_conv2d_forward(y, x, w, b, &s, scratch, threads);
            taas_conv2d_backward(dx, dw, db, dy, x, w, &s, scratch, threads);
        }
    }
    double secs = omp_get_wtime() - t0, gflop = 3.0 * 2.0 * (double)s.oc * (double)k * oh * ow / 1e9;
    printf("{\"mode\": \"layer\", \"batch\": %d, \"steps\": %d, \"threads\": %d, \"seconds\": %.6f, "
           "\"samples_per_s\": %.3f, \"gflop_per_sample\": %.6f, \"gflops\": %.1f, \"blas_core\": \"%s\", "
           "\"direct\": %s}\n",
           n, steps, threads, secs, (double)steps * n / secs, gflop, gflop * steps * n / secs, taas_blas_core(),
           direct ? "true" : "false");
done:
    free(x), free(dx), free(y), free(dy), free(dw), free(db), free(scratch);
    return rc;
}

int main(int argc, char **argv) {
    const char *model = NULL, *mode = NULL;
    int c = 0, h = 0, w = 0, batch = 64, steps = 50, warmup = 5, threads = 2;
    long long seed = 1;
    int direct = 1;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(k, "--no-direct")) {
            direct = 0, i--;
            continue;
        }
        if (i + 1 >= argc) return usage();
        if (!strcmp(k, "--model")) model = v;
        else if (!strcmp(k, "--mode")) mode = v;
        else if (!strcmp(k, "--input")) {
            if (sscanf(v, "%d,%d,%d", &c, &h, &w) != 3) return usage();
        } else if (!strcmp(k, "--batch")) batch = atoi(v);
        else if (!strcmp(k, "--steps")) steps = atoi(v);
        else if (!strcmp(k, "--warmup")) warmup = atoi(v);
        else if (!strcmp(k, "--threads")) threads = atoi(v);
        else if (!strcmp(k, "--seed")) seed = atoll(v);
        else return usage();
    }
    if (mode && !strcmp(mode, "attention")) {
        if (c < 1 || h < 1 || w < 1 || batch < 1 || steps < 1 || warmup < 0 || threads < 1) return usage();
        omp_set_num_threads(threads);
        return bench_attention(batch, c, h, w, warmup, steps, threads);
    }
    if (!model || !mode || c < 1 || batch < 1 || steps < 1 || warmup < 0 || threads < 1 ||
        (strcmp(mode, "train") && strcmp(mode, "infer") && strcmp(mode, "layer") && strcmp(mode, "lm")))
        return usage();
    int train = !strcmp(mode, "train"), lm = !strcmp(mode, "lm");
    taas_conv_direct_enable(direct);
    json_error_t je;
    json_t *spec = json_load_file(model, 0, &je);
    if (!spec) {
        fprintf(stderr, "taas-train-bench: %s: %s\n", model, je.text);
        return 1;
    }
    taas_error e;
    taas_error_clear(&e);
    taas_model *m = taas_model_new(spec, c, h, w, (uint64_t)seed, &e);
    json_decref(spec);
    if (!m) return fail(&e);
    taas_model_set_threads(m, threads);
    if (!strcmp(mode, "layer")) {
        int rc = bench_layer(m, batch, warmup, steps, threads, (uint64_t)seed, direct);
        taas_model_free(m);
        return rc;
    }
    if (lm && (m->layers[0].kind != TAAS_L_EMBEDDING || h || w)) {
        fprintf(stderr, "taas-train-bench: --mode lm needs a model that starts with an Embedding, and --input T,0,0\n");
        taas_model_free(m);
        return 2;
    }
    size_t in = (size_t)c * (h ? h : 1) * (w ? w : 1), k = taas_model_out_numel(m);
    size_t ny = lm ? in * batch : (size_t)batch;
    float *x = malloc(sizeof(float) * in * batch), *dlogp = malloc(sizeof(float) * k * batch);
    float *probs = lm ? malloc(sizeof(float) * k * batch) : NULL;
    int64_t *y = malloc(sizeof(int64_t) * ny);
    taas_optim_config opt;
    taas_optim_config_default(&opt, lm ? TAAS_OPTIM_ADAMW : TAAS_OPTIM_ADADELTA);
    if (lm) opt.lr = 6e-4, opt.beta2 = 0.95, opt.weight_decay = 0.1;
    float *state = calloc(taas_optim_state_floats(&opt, m->nparams) + 1, sizeof(float));
    int rc = 0;
    if (!x || !dlogp || !y || !state || (lm && !probs)) {
        fprintf(stderr, "taas-train-bench: out of memory\n");
        rc = 1;
        goto done;
    }
    if (lm) {
        int v = m->layers[0].lin_in;
        for (size_t j = 0; j < in * batch; j++) x[j] = (float)((j * 7919 + 13) % (size_t)v);
        for (size_t j = 0; j < ny; j++) y[j] = (int64_t)(((j + 1) * 7919 + 13) % (size_t)v);
    } else {
        taas_init_rng rng = {(uint64_t)seed + 1, 0};
        taas_init_uniform(x, in * batch, 1.0f, &rng);
        for (int i = 0; i < batch; i++) y[i] = i % (int64_t)k;
    }
    long rss0 = status_kb("VmRSS:");
    double t0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) t0 = omp_get_wtime();
        if (lm ? lm_step(m, x, y, batch, probs, dlogp, &opt, state, s + 1, &e)
               : run_step(m, x, y, batch, train, dlogp, &opt, state, s + 1, &e)) {
            rc = fail(&e);
            goto done;
        }
    }
    double secs = omp_get_wtime() - t0;
    printf("{\"mode\": \"%s\", \"batch\": %d, \"steps\": %d, \"threads\": %d, \"seconds\": %.6f, "
           "\"samples_per_s\": %.3f, \"blas_core\": \"%s\", \"direct\": %s, \"rss_before_kb\": %ld, "
           "\"rss_peak_kb\": %ld, \"arena_bytes\": %zu, \"tokens_per_s\": %.1f}\n",
           mode, batch, steps, threads, secs, (double)steps * batch / secs, taas_blas_core(), direct ? "true" : "false",
           rss0, status_kb("VmHWM:"), m->mem.bytes, lm ? (double)steps * batch * (double)c / secs : 0.0);
done:
    free(x), free(dlogp), free(y), free(state), free(probs);
    taas_model_free(m);
    return rc;
}
