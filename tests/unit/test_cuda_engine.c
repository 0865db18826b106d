/* The CUDA engine (workers/train/cuda/cu_engine.c), as the fit loop drives it: the model
 * fixture of test_model.c (tests/data/model/ref.json: logits, loss, gradients, eval logits,
 * 20 steps of SGD with momentum and of Adam, within 1e-4), the weights it saves, every layer
 * kind trained against the CPU core step by step, batches taken ahead while a step computes
 * (the same bits as without), evaluation, and the errors a user can reach, in the CPU's words.
 * Exits 77 (skipped) where there is no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "cmocka_testutil.h"
#include "cu_engine.h"
#include "fixture_testutil.h"
#include "init.h"
#include "loss.h"
#include "optim.h"
#include "safetensors.h"
#include "test_cuda_util.h"

TU_FIXTURE_GROUP(REF, "model/ref.json")

static taas_collective SOLO = {0, 1, NULL, NULL, NULL, NULL};  /* one rank: the engine sums nothing */
static taas_error E;

static void assert_close(const float *got, const json_t *want, size_t n, double tol, const char *what) {
    assert_int_equal(json_array_size(want), n);
    for (size_t i = 0; i < n; i++) {
        double w = json_number_value(json_array_get(want, i));
        if (!(fabs(got[i] - w) <= tol * fmax(1.0, fabs(w)))) fail_msg("%s[%zu]: got %.8g, torch %.8g", what, i, got[i], w);
    }
}

static taas_model *model(const json_t *spec, int c, int h, int w) {
    taas_error_clear(&E);
    taas_model *m = taas_model_new(spec, c, h, w, 1234, &E);
    if (!m) fail_msg("%s", E.message);
    return m;
}

static taas_model *ref_model(void) {
    const json_t *in = json_object_get(REF, "input");
    taas_model *m = model(json_object_get(REF, "spec"), (int)json_integer_value(json_array_get(in, 0)),
                          (int)json_integer_value(json_array_get(in, 1)), (int)json_integer_value(json_array_get(in, 2)));
    const json_t *sd = json_object_get(REF, "init");  /* torch's weights, through the table */
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        const json_t *v = json_object_get(sd, t->key);
        assert_non_null(v);
        if (t->home == TAAS_T_COUNTER) {
            m->counters[t->offset] = (int64_t)json_number_value(json_array_get(v, 0));
            continue;
        }
        float *dst = (t->home == TAAS_T_PARAM ? m->params : m->stats) + t->offset;
        for (size_t k = 0; k < t->numel; k++) dst[k] = (float)json_number_value(json_array_get(v, k));
    }
    return m;
}

typedef struct data {
    float *x;
    int64_t *y;
    uint32_t n, c, h, w;
} data;

static data ref_data(void) {
    data d = {0};
    const json_t *in = json_object_get(REF, "input");
    d.n = (uint32_t)json_integer_value(json_object_get(REF, "n"));
    d.c = (uint32_t)json_integer_value(json_array_get(in, 0));
    d.h = (uint32_t)json_integer_value(json_array_get(in, 1));
    d.w = (uint32_t)json_integer_value(json_array_get(in, 2));
    d.x = tu_floats(REF, "x", NULL);
    d.y = malloc(d.n * sizeof *d.y);
    for (uint32_t i = 0; i < d.n; i++) d.y[i] = json_integer_value(json_array_get(json_object_get(REF, "y"), i));
    return d;
}

static taas_batch batch_of(const data *d, uint64_t k) {
    taas_batch b = {0};
    b.epoch = 0, b.k = k, b.n = d->n, b.c = d->c, b.h = d->h, b.w = d->w;
    b.images = d->x;
    b.labels = d->y;
    return b;
}

static taas_engine *engine_ignoring(taas_model *m, taas_train_loss_kind kind, float smoothing, int64_t ignore_index,
                                    const taas_optim_config *opt) {
    taas_train_loss loss = {.kind = kind, .label_smoothing = smoothing, .ignore_index = ignore_index};
    taas_error_clear(&E);
    taas_engine *e = taas_cuda_engine_new(m, &loss, opt, 0, TAAS_PRECISION_FP32, &SOLO, &E);
    if (!e) fail_msg("%s (%s)", E.message, E.hint);
    return e;
}

static taas_engine *engine(taas_model *m, taas_train_loss_kind kind, float smoothing, const taas_optim_config *opt) {
    return engine_ignoring(m, kind, smoothing, -100, opt);
}

static taas_optim_config optim(taas_optim_kind kind, double lr) {
    taas_optim_config c;
    taas_optim_config_default(&c, kind);
    c.lr = lr;
    if (kind == TAAS_OPTIM_SGD) c.momentum = 0.9;
    return c;
}

static float *grads_of(taas_engine *e) {
    taas_cu_model *dm = taas_cu_engine_model(e);
    return tu_host(dm->cu, dm->grads, dm->m->ntrain);
}

static void test_forward_backward_match_torch(void **state) {
    (void)state;
    data d = ref_data();
    taas_optim_config opt = optim(TAAS_OPTIM_SGD, 0.05);
    /* train-mode logits: the whole forward on the device model */
    taas_model *m = ref_model();
    taas_engine *e = engine(m, TAAS_JOB_NLL, 0, &opt);
    assert_non_null(strstr(e->name, "cuda:0, "));
    taas_cu_model *dm = taas_cu_engine_model(e);
    float *x = tu_dev(d.x, (size_t)d.n * d.c * d.h * d.w, 0);
    const float *out;
    TU_OK(taas_cu_model_forward(dm, x, (int)d.n, 1, 0, m->nlayers, &out, &E), &E);
    float *logits = tu_host(dm->cu, out, (size_t)d.n * 5);
    assert_close(logits, json_object_get(REF, "logits"), (size_t)d.n * 5, 1e-4, "logits");
    free(logits);
    e->ops->free(e);
    taas_model_free(m);
    /* a step as the loop computes it (LogSoftmax and NLLLoss fused), then eval-mode logits on
     * the running statistics it updated */
    m = ref_model();
    e = engine(m, TAAS_JOB_NLL, 0, &opt);
    dm = taas_cu_engine_model(e);
    taas_batch b = batch_of(&d, 0);
    float loss;
    int64_t tracked = m->counters[0];
    TU_OK(e->ops->compute(e, &b, NULL, NULL, 0, &loss, &E), &E);
    assert_true(fabs(loss - json_number_value(json_object_get(REF, "loss"))) < 1e-4);
    float *g = grads_of(e);
    const json_t *grads = json_object_get(REF, "grads");
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        if (t->home == TAAS_T_PARAM) assert_close(g + t->offset, json_object_get(grads, t->key), t->numel, 1e-4, t->key);
    }
    assert_int_equal(m->counters[0], tracked + 1);  /* num_batches_tracked, counted on the host */
    TU_OK(taas_cu_model_forward(dm, x, (int)d.n, 0, 1, m->nlayers, &out, &E), &E);
    logits = tu_host(dm->cu, out, (size_t)d.n * 5);
    assert_close(logits, json_object_get(REF, "eval_logits"), (size_t)d.n * 5, 1e-4, "eval logits");
    free(logits), free(g);
    cudaFree(x);
    e->ops->free(e);
    taas_model_free(m);
    free(d.x), free(d.y);
}

/* 20 steps as the loop takes them; the saved file holds torch's final state_dict. */
static void run_steps(taas_optim_kind kind, double lr, const char *name) {
    data d = ref_data();
    taas_optim_config opt = optim(kind, lr);
    taas_model *m = ref_model();
    taas_engine *e = engine(m, TAAS_JOB_NLL, 0, &opt);
    taas_batch b = batch_of(&d, 0);
    float losses[20];
    for (int s = 0; s < 20; s++) {
        TU_OK(e->ops->compute(e, &b, NULL, NULL, (uint64_t)s, &losses[s], &E), &E);
        TU_OK(e->ops->update(e, 1.0f, &SOLO, &opt, s + 1, &E), &E);
    }
    const json_t *r = json_object_get(REF, name);
    assert_close(losses, json_object_get(r, "losses"), 20, 1e-4, name);
    char path[] = "/tmp/taas-cuda-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    TU_OK(e->ops->save(e, path, &E), &E);
    e->ops->free(e);
    /* read back into a fresh model's buffers */
    taas_model *back = model(json_object_get(REF, "spec"), 1, 8, 8);
    taas_st_tensor *t = taas_param_table_tensors(back->table, back->ntable, back->params, back->stats, back->counters);
    TU_OK(taas_safetensors_read(path, t, back->ntable, &E), &E);
    free(t);
    unlink(path);
    const json_t *fin = json_object_get(r, "final");
    for (size_t i = 0; i < back->ntable; i++) {
        const taas_param_entry *te = &back->table[i];
        const json_t *v = json_object_get(fin, te->key);
        if (te->home == TAAS_T_COUNTER)
            assert_int_equal(back->counters[te->offset], (int64_t)json_number_value(json_array_get(v, 0)));
        else
            assert_close((te->home == TAAS_T_PARAM ? back->params : back->stats) + te->offset, v, te->numel, 1e-4, te->key);
    }
    taas_model_free(back);
    taas_model_free(m);
    free(d.x), free(d.y);
}

static void test_sgd_momentum_steps(void **state) {
    (void)state;
    run_steps(TAAS_OPTIM_SGD, 0.05, "sgd");
}

static void test_adam_steps(void **state) {
    (void)state;
    run_steps(TAAS_OPTIM_ADAM, 0.01, "adam");
}

/* ---- every layer kind against the CPU core ---- */

#define EVERY_LAYER "{\"type\":\"Sequential\",\"layers\":[" \
    "{\"type\":\"LazyConv2d\",\"out_channels\":3,\"kernel_size\":3,\"padding\":\"same\"}," \
    "{\"type\":\"BatchNorm2d\",\"num_features\":3,\"eps\":1e-5,\"momentum\":0.1},{\"type\":\"Tanh\"}," \
    "{\"type\":\"AvgPool2d\",\"kernel_size\":2,\"stride\":null},{\"type\":\"Dropout2d\",\"p\":0.3}," \
    "{\"type\":\"Conv2d\",\"in_channels\":3,\"out_channels\":4,\"kernel_size\":2,\"stride\":1},{\"type\":\"ReLU\"}," \
    "{\"type\":\"MaxPool2d\",\"kernel_size\":2,\"stride\":1},{\"type\":\"GELU\",\"approximate\":\"none\"}," \
    "{\"type\":\"Sigmoid\"},{\"type\":\"Flatten\"},{\"type\":\"Dropout\",\"p\":0.2}," \
    "{\"type\":\"LazyLinear\",\"out_features\":6},{\"type\":\"LeakyReLU\",\"negative_slope\":0.1}," \
    "{\"type\":\"Linear\",\"in_features\":6,\"out_features\":4}]}"

#define SECTION1 "{\"type\":\"Sequential\",\"layers\":[" \
    "{\"type\":\"Conv2d\",\"in_channels\":1,\"out_channels\":8,\"kernel_size\":3},{\"type\":\"ReLU\"}," \
    "{\"type\":\"Conv2d\",\"in_channels\":8,\"out_channels\":16,\"kernel_size\":3},{\"type\":\"ReLU\"}," \
    "{\"type\":\"MaxPool2d\",\"kernel_size\":2},{\"type\":\"Dropout\",\"p\":0.25},{\"type\":\"Flatten\"}," \
    "{\"type\":\"Linear\",\"in_features\":1024,\"out_features\":32},{\"type\":\"BatchNorm1d\",\"num_features\":32}," \
    "{\"type\":\"ReLU\"},{\"type\":\"Dropout\",\"p\":0.5},{\"type\":\"Linear\",\"in_features\":32,\"out_features\":10}," \
    "{\"type\":\"LogSoftmax\",\"dim\":1}]}"

static taas_model *from_text(const char *spec, int c, int h, int w) {
    json_error_t je;
    json_t *j = json_loads(spec, 0, &je);
    assert_non_null(j);
    taas_model *m = model(j, c, h, w);
    json_decref(j);
    return m;
}

static data random_data(uint32_t n, uint32_t c, uint32_t h, uint32_t w, int classes, uint64_t seed) {
    data d = {NULL, NULL, n, c, h, w};
    size_t cnt = (size_t)n * c * h * w;
    d.x = malloc(cnt * sizeof *d.x);
    d.y = malloc(n * sizeof *d.y);
    taas_init_rng rng = {seed, 0};
    taas_init_uniform(d.x, cnt, 1.0f, &rng);
    for (uint32_t i = 0; i < n; i++) d.y[i] = (int64_t)((i * 7 + seed) % (uint64_t)classes);
    return d;
}

/* The CPU core's step (engine_cpu.c's compute and update for one rank), on m. */
static float cpu_step(taas_model *m, const data *d, taas_train_loss_kind kind, float smoothing, int64_t ignore,
                      const taas_optim_config *opt, float *state, uint64_t step) {
    int k = (int)taas_model_out_numel(m), n = (int)d->n;
    float *dout = malloc((size_t)n * k * sizeof *dout), *probs = malloc((size_t)n * k * sizeof *probs), loss;
    const float *out;
    taas_model_zero_grad(m);
    TU_OK(taas_model_forward(m, d->x, n, 1, step, &out, &E), &E);
    if (kind == TAAS_JOB_NLL) {
        TU_OK(taas_nll_loss_forward(&loss, out, d->y, n, k, ignore, &E), &E);
        taas_nll_loss_backward(dout, d->y, n, k, ignore, 1.0f);
    } else {
        TU_OK(taas_cross_entropy_forward(&loss, probs, out, d->y, n, k, smoothing, ignore, &E), &E);
        taas_cross_entropy_backward(dout, probs, d->y, n, k, smoothing, ignore, 1.0f);
    }
    TU_OK(taas_model_backward(m, dout, &E), &E);
    taas_optim_step(opt, m->params, m->grads, state, m->ntrain, (long)step + 1);
    free(dout), free(probs);
    return loss;
}

/* Four steps on the GPU and on the CPU from the same weights and batch: the losses and the
 * weights after them agree within the layers' tolerance. With ignore in [0, classes), the
 * batch's samples of that class count in neither. */
static void against_cpu(const char *spec, int c, int h, int w, int classes, taas_train_loss_kind kind, float smoothing,
                        int64_t ignore, taas_optim_config opt) {
    taas_model *cpu = from_text(spec, c, h, w), *gpu = from_text(spec, c, h, w);
    assert_int_equal((int)taas_model_out_numel(cpu), classes);
    data d = random_data(12, (uint32_t)c, (uint32_t)h, (uint32_t)w, classes, 5);
    float *state = calloc(taas_optim_state_floats(&opt, cpu->nparams) + 1, sizeof *state);
    taas_engine *e = engine_ignoring(gpu, kind, smoothing, ignore, &opt);
    taas_batch b = batch_of(&d, 0);
    for (uint64_t s = 0; s < 4; s++) {
        float want = cpu_step(cpu, &d, kind, smoothing, ignore, &opt, state, s), got;
        TU_OK(e->ops->compute(e, &b, NULL, NULL, s, &got, &E), &E);
        TU_OK(e->ops->update(e, 1.0f, &SOLO, &opt, (long)s + 1, &E), &E);
        if (!(fabs(got - want) <= 1e-4 * fmax(1.0, fabs(want)))) fail_msg("step %d: loss %.8g, CPU %.8g", (int)s, got, want);
    }
    taas_cu_model *dm = taas_cu_engine_model(e);
    TU_OK(taas_cu_model_download(dm, &E), &E);
    for (size_t i = 0; i < cpu->nparams; i++)
        if (!(fabs(gpu->params[i] - cpu->params[i]) <= 1e-4 * fmax(1.0, fabs(cpu->params[i]))))
            fail_msg("parameter %zu after 4 steps: %.8g, CPU %.8g", i, gpu->params[i], cpu->params[i]);
    for (size_t i = 0; i < cpu->nstats; i++)
        if (!(fabs(gpu->stats[i] - cpu->stats[i]) <= 1e-4 * fmax(1.0, fabs(cpu->stats[i]))))
            fail_msg("running statistic %zu: %.8g, CPU %.8g", i, gpu->stats[i], cpu->stats[i]);
    assert_memory_equal(gpu->counters, cpu->counters, (size_t)cpu->ncounters * sizeof *cpu->counters);
    e->ops->free(e);
    taas_model_free(cpu), taas_model_free(gpu);
    free(state), free(d.x), free(d.y);
}

/* Gradient accumulation (engine.h's extras): a step of two batches of 4 and 2 windows, the
 * second added to the first's gradients, each scaled by its share of a batch of 4, and the
 * update weighted by 4/6 — three steps against the CPU core doing the same by hand. */
static void test_accumulated_against_cpu(void **state) {
    (void)state;
    const char *spec = "{\"type\":\"GPT2LMHeadModel\",\"config\":{\"vocab_size\":40,\"n_positions\":16,"
                       "\"n_embd\":16,\"n_layer\":1,\"n_head\":2}}";
    enum { N = 6, T = 12, B = 4 };
    taas_model *cpu = from_text(spec, T, 0, 0), *gpu = from_text(spec, T, 0, 0);
    float win[N * (T + 1)], x[N * T];
    int64_t y[N * T], none[N] = {0};
    for (int j = 0; j < N * (T + 1); j++) win[j] = (float)((j * 104729 + 7) % 40);
    TU_OK(taas_model_split_windows(cpu, win, T + 1, N, x, y, &E), &E);
    taas_batch b[2] = {{0}, {0}};
    int n[2] = {B, N - B};
    for (int h = 0; h < 2; h++) {
        b[h].n = (uint32_t)n[h], b[h].c = T + 1, b[h].h = b[h].w = 1;
        b[h].images = win + (size_t)h * B * (T + 1), b[h].labels = none;
    }
    taas_optim_config opt = optim(TAAS_OPTIM_ADAMW, 1e-3);
    float *st = calloc(taas_optim_state_floats(&opt, cpu->nparams) + 1, sizeof *st);
    float *dout = malloc((size_t)N * T * 40 * sizeof *dout), *probs = malloc((size_t)N * T * 40 * sizeof *probs);
    taas_engine *e = engine(gpu, TAAS_JOB_CROSS_ENTROPY, 0.0f, &opt);
    for (uint64_t s = 0; s < 3; s++) {
        taas_model_zero_grad(cpu);
        for (int h = 0; h < 2; h++) {
            const float *out;
            float want, got;
            size_t at = (size_t)h * B * T;
            TU_OK(taas_model_forward(cpu, x + at, n[h], 1, 2 * s + (uint64_t)h, &out, &E), &E);
            TU_OK(taas_cross_entropy_forward(&want, probs, out, y + at, n[h] * T, 40, 0.0f, -100, &E), &E);
            taas_cross_entropy_backward(dout, probs, y + at, n[h] * T, 40, 0.0f, -100, (float)n[h] / B);
            TU_OK(taas_model_backward(cpu, dout, &E), &E);
            e->x.keep_grads = h > 0;
            e->x.grad_scale = (float)n[h] / B;
            TU_OK(e->ops->compute(e, &b[h], NULL, NULL, 2 * s + (uint64_t)h, &got, &E), &E);
            if (!(fabs(got - want) <= 1e-4 * fmax(1.0, fabs(want))))
                fail_msg("step %d batch %d: loss %.8g, CPU %.8g", (int)s, h, got, want);
        }
        for (size_t i = 0; i < cpu->ntrain; i++) cpu->grads[i] *= (float)B / N;
        taas_optim_step(&opt, cpu->params, cpu->grads, st, cpu->ntrain, (long)s + 1);
        TU_OK(e->ops->update(e, (float)B / N, &SOLO, &opt, (long)s + 1, &E), &E);
    }
    TU_OK(taas_cu_model_download(taas_cu_engine_model(e), &E), &E);
    for (size_t i = 0; i < cpu->nparams; i++)
        if (!(fabs(gpu->params[i] - cpu->params[i]) <= 1e-4 * fmax(1.0, fabs(cpu->params[i]))))
            fail_msg("parameter %zu after 3 accumulated steps: %.8g, CPU %.8g", i, gpu->params[i], cpu->params[i]);
    e->ops->free(e);
    taas_model_free(cpu), taas_model_free(gpu);
    free(st), free(dout), free(probs);
}

/* fit(precision='bf16'): the matrix products in BF16 (cuBLAS's FAST_16BF), the rest FP32;
 * the engine says so in its name, and four SGD steps of the section 1 model stay within 5e-2
 * of the CPU core's loss. */
static void test_bf16_steps(void **state) {
    (void)state;
    taas_model *cpu = from_text(SECTION1, 1, 20, 20), *gpu = from_text(SECTION1, 1, 20, 20);
    taas_optim_config opt = optim(TAAS_OPTIM_SGD, 0.05);
    taas_train_loss loss = {.kind = TAAS_JOB_NLL, .ignore_index = -100};
    taas_error_clear(&E);
    taas_engine *e = taas_cuda_engine_new(gpu, &loss, &opt, 0, TAAS_PRECISION_BF16, &SOLO, &E);
    if (!e) fail_msg("%s (%s)", E.message, E.hint);
    assert_non_null(strstr(e->name, ", BF16"));
    data d = random_data(8, 1, 20, 20, 10, 3);
    taas_batch b = batch_of(&d, 0);
    float *state_cpu = calloc(taas_optim_state_floats(&opt, cpu->nparams) + 1, sizeof(float));
    float *dout = malloc(8 * 10 * sizeof *dout);
    for (uint64_t s = 0; s < 4; s++) {
        const float *out;
        float want, got;
        taas_model_zero_grad(cpu);
        TU_OK(taas_model_forward(cpu, d.x, 8, 1, s, &out, &E), &E);
        TU_OK(taas_nll_loss_forward(&want, out, d.y, 8, 10, -100, &E), &E);
        taas_nll_loss_backward(dout, d.y, 8, 10, -100, 1.0f);
        TU_OK(taas_model_backward(cpu, dout, &E), &E);
        taas_optim_step(&opt, cpu->params, cpu->grads, state_cpu, cpu->ntrain, (long)s + 1);
        TU_OK(e->ops->compute(e, &b, NULL, NULL, s, &got, &E), &E);
        TU_OK(e->ops->update(e, 1.0f, &SOLO, &opt, (long)s + 1, &E), &E);
        if (!(fabs(got - want) <= 5e-2 * fmax(1.0, fabs(want)))) fail_msg("step %d: BF16 loss %.6g, CPU %.6g", (int)s, got, want);
    }
    e->ops->free(e);
    taas_model_free(cpu), taas_model_free(gpu);
    free(state_cpu), free(dout), free(d.x), free(d.y);
}

/* A token model (a small GPT2LMHeadModel, every dropout on) on windows of T + 1 ids: the GPU
 * cuts them as the CPU does (model.h), and four steps of AdamW with nanoGPT's parameter
 * groups and clip_grad_norm agree with the CPU core's. */
/* next hands the engine the coming batch ahead of its step (engine.h) */
typedef struct ahead {
    const taas_batch *give;   /* what next hands the engine */
    int calls;
} ahead;

static int next_batch(void *ctx, const taas_batch **out, taas_error *err) {
    (void)err;
    ahead *a = ctx;
    a->calls++;
    *out = a->give;
    return 0;
}

static void test_gpt2_windows_against_cpu(void **state) {
    (void)state;
    const char *spec = "{\"type\":\"GPT2LMHeadModel\",\"config\":{\"vocab_size\":40,\"n_positions\":16,"
                       "\"n_embd\":16,\"n_layer\":2,\"n_head\":2}}";
    enum { N = 6, T = 12 };
    taas_model *cpu = from_text(spec, T, 0, 0), *gpu = from_text(spec, T, 0, 0);
    float win[N * (T + 1)], x[N * T];
    int64_t y[N * T], none[N] = {0};
    for (int j = 0; j < N * (T + 1); j++) win[j] = (float)((j * 7919 + 13) % 40);
    taas_batch b = {0};
    b.n = N, b.c = T + 1, b.h = b.w = 1, b.images = win, b.labels = none;
    TU_OK(taas_model_split_windows(cpu, win, T + 1, N, x, y, &E), &E);
    taas_optim_config opt = optim(TAAS_OPTIM_ADAMW, 1e-3);
    float *st = calloc(taas_optim_state_floats(&opt, cpu->nparams) + 1, sizeof *st);
    float *dout = malloc((size_t)N * T * 40 * sizeof *dout), *probs = malloc((size_t)N * T * 40 * sizeof *probs);
    opt.weight_decay = 0.1;
    taas_engine *e = engine(gpu, TAAS_JOB_CROSS_ENTROPY, 0.0f, &opt);
    taas_optim_span *spans;
    size_t nspans;
    assert_int_equal(taas_model_decay_spans(cpu, 0.1, &spans, &nspans), 0);
    e->x.clip = 0.5;
    e->x.spans = spans;
    e->x.nspans = nspans;
    for (uint64_t s = 0; s < 4; s++) {
        const float *out;
        float want, got;
        taas_model_zero_grad(cpu);
        TU_OK(taas_model_forward(cpu, x, N, 1, s, &out, &E), &E);
        TU_OK(taas_cross_entropy_forward(&want, probs, out, y, N * T, 40, 0.0f, -100, &E), &E);
        taas_cross_entropy_backward(dout, probs, y, N * T, 40, 0.0f, -100, 1.0f);
        TU_OK(taas_model_backward(cpu, dout, &E), &E);
        taas_clip_grad_norm(cpu->grads, cpu->ntrain, 0.5);
        taas_optim_step_spans(&opt, cpu->params, cpu->grads, st, cpu->ntrain, (long)s + 1, spans, nspans);
        TU_OK(e->ops->compute(e, &b, NULL, NULL, s, &got, &E), &E);
        TU_OK(e->ops->update(e, 1.0f, &SOLO, &opt, (long)s + 1, &E), &E);
        if (!(fabs(got - want) <= 1e-4 * fmax(1.0, fabs(want)))) fail_msg("step %d: loss %.8g, CPU %.8g", (int)s, got, want);
    }
    TU_OK(taas_cu_model_download(taas_cu_engine_model(e), &E), &E);
    for (size_t i = 0; i < cpu->nparams; i++)
        if (!(fabs(gpu->params[i] - cpu->params[i]) <= 1e-4 * fmax(1.0, fabs(cpu->params[i]))))
            fail_msg("parameter %zu after 4 steps: %.8g, CPU %.8g", i, gpu->params[i], cpu->params[i]);
    /* a token beyond the vocabulary in the batch handed over ahead: this step's loss stands,
     * the error is that batch's own step's, in the CPU's words (the same batch, at the same
     * address, with new contents: put again, not the copy of its last step) */
    float good[N * (T + 1)];
    memcpy(good, win, sizeof good);
    taas_batch b2 = b;
    b2.images = good;
    win[5] = 40;
    ahead a = {&b, 0};
    float loss = NAN;
    TU_OK(e->ops->compute(e, &b2, next_batch, &a, 4, &loss, &E), &E);
    assert_int_equal(a.calls, 1);
    assert_true(isfinite(loss));
    assert_int_equal(e->ops->compute(e, &b, NULL, NULL, 5, &(float){0}, &E), -1);
    assert_non_null(strstr(E.message, "outside the model's vocabulary [0, 40)"));
    e->ops->free(e);
    taas_model_free(cpu), taas_model_free(gpu);
    free(st), free(dout), free(probs), free(spans);
}

static void test_every_layer_against_cpu(void **state) {
    (void)state;
    against_cpu(EVERY_LAYER, 2, 10, 10, 4, TAAS_JOB_CROSS_ENTROPY, 0.1f, -100, optim(TAAS_OPTIM_SGD, 0.05));
    against_cpu(EVERY_LAYER, 2, 10, 10, 4, TAAS_JOB_CROSS_ENTROPY, 0.0f, -100, optim(TAAS_OPTIM_ADADELTA, 1.0));
    /* 3 of the 12 samples ignored: the mean and the gradient over the other 9 */
    against_cpu(EVERY_LAYER, 2, 10, 10, 4, TAAS_JOB_CROSS_ENTROPY, 0.1f, 2, optim(TAAS_OPTIM_SGD, 0.05));
}

static void test_section1_against_cpu(void **state) {
    (void)state;
    against_cpu(SECTION1, 1, 20, 20, 10, TAAS_JOB_NLL, 0, -100, optim(TAAS_OPTIM_ADADELTA, 1.0));
    against_cpu(SECTION1, 1, 20, 20, 10, TAAS_JOB_CROSS_ENTROPY, 0.2f, -100, optim(TAAS_OPTIM_SGD, 0.05));
    /* NLLLoss after LogSoftmax, fused into cross-entropy on the GPU, with 2 samples ignored */
    against_cpu(SECTION1, 1, 20, 20, 10, TAAS_JOB_NLL, 0, 5, optim(TAAS_OPTIM_SGD, 0.05));
}

/* ---- batches taken ahead ---- */

/* Three steps over batches b[0..2]: with next handing over the coming batch (its copy
 * overlaps the step), or a decoy it must not train on, or nothing. */
static float *three_steps(int mode, float losses[3], size_t *np) {
    taas_model *m = from_text(SECTION1, 1, 20, 20);
    taas_optim_config opt = optim(TAAS_OPTIM_SGD, 0.05);
    taas_engine *e = engine(m, TAAS_JOB_NLL, 0, &opt);
    data d[3] = {random_data(16, 1, 20, 20, 10, 1), random_data(16, 1, 20, 20, 10, 2), random_data(9, 1, 20, 20, 10, 3)};
    data z = random_data(16, 1, 20, 20, 10, 4);
    taas_batch b[3] = {batch_of(&d[0], 0), batch_of(&d[1], 1), batch_of(&d[2], 2)}, decoy = batch_of(&z, 1);
    for (int s = 0; s < 3; s++) {
        ahead a = {NULL, 0};
        if (mode == 1 && s < 2) a.give = &b[s + 1];
        if (mode == 2 && s < 2) a.give = &decoy;  /* same item and size as b[1], other numbers */
        TU_OK(e->ops->compute(e, &b[s], next_batch, &a, (uint64_t)s, &losses[s], &E), &E);
        assert_int_equal(a.calls, 1);
        TU_OK(e->ops->update(e, 1.0f, &SOLO, &opt, s + 1, &E), &E);
    }
    taas_cu_model *dm = taas_cu_engine_model(e);
    float *params = tu_host(dm->cu, dm->params, m->nparams);
    *np = m->nparams;
    e->ops->free(e);
    taas_model_free(m);
    for (int i = 0; i < 3; i++) free(d[i].x), free(d[i].y);
    free(z.x), free(z.y);
    return params;
}

static void test_batches_taken_ahead(void **state) {
    (void)state;
    float l0[3], l1[3], l2[3];
    size_t n0, n1, n2;
    float *p0 = three_steps(0, l0, &n0), *p1 = three_steps(1, l1, &n1), *p2 = three_steps(2, l2, &n2);
    assert_true(n0 == n1 && n0 == n2);
    assert_memory_equal(l1, l0, sizeof l0);
    assert_memory_equal(p1, p0, n0 * sizeof(float));
    assert_memory_equal(l2, l0, sizeof l0);
    assert_memory_equal(p2, p0, n0 * sizeof(float));
    free(p0), free(p1), free(p2);
}

/* ---- CUDA Graphs ---- */

/* Steps of the §1 network (Dropout, whose masks change every step, and BatchNorm, whose
 * counters the host keeps) with CUDA Graphs on or off: two batches of 16 alternating, each
 * handed over ahead, then a short one of 9 (steps - 1 of them, then it), the gradients of
 * `accumulate` steps summed before each update. Returns the weights after; the losses, the
 * BatchNorm counter and the replays through *losses, *counter, *replays. */
static float *graph_steps(int on, int steps, int accumulate, float *losses, size_t *np, int64_t *counter,
                          long *replays) {
    setenv("TAAS_CUDA_GRAPHS", on ? "1" : "0", 1);
    taas_model *m = from_text(SECTION1, 1, 20, 20);
    taas_optim_config opt = optim(TAAS_OPTIM_SGD, 0.05);
    taas_engine *e = engine(m, TAAS_JOB_NLL, 0, &opt);
    unsetenv("TAAS_CUDA_GRAPHS");
    data d[3] = {random_data(16, 1, 20, 20, 10, 1), random_data(16, 1, 20, 20, 10, 2), random_data(9, 1, 20, 20, 10, 3)};
    taas_batch b[3] = {batch_of(&d[0], 0), batch_of(&d[1], 1), batch_of(&d[2], 2)};
    int last = steps - 1;
    for (int s = 0; s < steps; s++) {
        ahead a = {s < last - 1 ? &b[(s + 1) % 2] : s == last - 1 ? &b[2] : NULL, 0};
        e->x.keep_grads = s % accumulate != 0;
        TU_OK(e->ops->compute(e, s < last ? &b[s % 2] : &b[2], next_batch, &a, (uint64_t)s, &losses[s], &E), &E);
        if (s % accumulate == accumulate - 1 || s == last)
            TU_OK(e->ops->update(e, 1.0f, &SOLO, &opt, s / accumulate + 1, &E), &E);
    }
    taas_cu_model *dm = taas_cu_engine_model(e);
    float *params = tu_host(dm->cu, dm->params, m->nparams);
    *np = m->nparams;
    assert_int_equal(m->ncounters, 1);
    *counter = m->counters[0];
    *replays = taas_cu_engine_replays(e);
    e->ops->free(e);
    taas_model_free(m);
    for (int i = 0; i < 3; i++) free(d[i].x), free(d[i].y);
    return params;
}

/* A replayed step is the step run kernel by kernel: the same losses and weights to the bit
 * (each replay's own dropout masks, drawn from its step), the same BatchNorm counter; and
 * steps did replay (each slot's first step runs eagerly, its second is captured). With
 * gradients accumulated over 3 steps, a slot keeps a graph for the steps that zero them and
 * one for those that keep them, so that these replay too. */
static void test_graphs_replay_the_steps(void **state) {
    (void)state;
    static const struct {
        int steps, accumulate, replays;
    } runs[] = {{9, 1, 4}, {13, 3, 4}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        float off[13], on[13];
        size_t n0, n1;
        int64_t c0, c1;
        long r0, r1;
        int steps = runs[k].steps, acc = runs[k].accumulate;
        float *p0 = graph_steps(0, steps, acc, off, &n0, &c0, &r0), *p1 = graph_steps(1, steps, acc, on, &n1, &c1, &r1);
        assert_int_equal(n0, n1);
        assert_memory_equal(on, off, (size_t)steps * sizeof *off);
        assert_memory_equal(p1, p0, n0 * sizeof(float));
        assert_int_equal(c0, steps);
        assert_int_equal(c1, steps);
        assert_int_equal(r0, 0);
        if (r1 < runs[k].replays) fail_msg("accumulating %d: %ld replays, want %d or more", acc, r1, runs[k].replays);
        free(p0), free(p1);
    }
}

/* what a failed graph test leaves set must not change the tests after it */
static int unset_graphs(void **state) {
    (void)state;
    unsetenv("TAAS_CUDA_GRAPHS");
    return 0;
}

/* ---- evaluation and errors ---- */

/* eval against the CPU's loss and argmax, ignoring the samples whose label is ignore (none
 * with -100): the means over the others, counted per sample as engine_cpu.c's. */
static void eval_against_cpu(const data *d, int64_t ignore) {
    taas_optim_config opt = optim(TAAS_OPTIM_SGD, 0.05);
    taas_model *cpu = ref_model(), *gpu = ref_model();
    taas_engine *e = engine_ignoring(gpu, TAAS_JOB_NLL, 0, ignore, &opt);
    taas_batch b = batch_of(d, 0);
    double loss_sum, right;
    TU_OK(e->ops->eval(e, &b, &loss_sum, &right, &E), &E);
    const float *out;
    float v;
    int k = (int)taas_model_out_numel(cpu), hits = 0, counted = 0;
    TU_OK(taas_model_forward(cpu, d->x, (int)d->n, 0, 0, &out, &E), &E);
    TU_OK(taas_nll_loss_forward(&v, out, d->y, (int)d->n, k, ignore, &E), &E);
    for (uint32_t i = 0; i < d->n; i++) {
        if (d->y[i] == ignore) continue;
        int best = 0;
        for (int q = 1; q < k; q++)
            if (out[(size_t)i * k + q] > out[(size_t)i * k + best]) best = q;
        hits += best == d->y[i];
        counted++;
    }
    double want = (double)hits * d->n / counted;
    assert_true(fabs(loss_sum - (double)v * d->n) <= 1e-4 * fmax(1.0, fabs((double)v * d->n)));
    assert_true(fabs(right - want) <= 1e-9 * fmax(1.0, want));
    e->ops->free(e);
    taas_model_free(cpu), taas_model_free(gpu);
}

static void test_eval_matches_cpu(void **state) {
    (void)state;
    data d = ref_data();
    assert_true(d.n >= 4);
    eval_against_cpu(&d, -100);
    /* ignored labels may be out of range */
    d.y[1] = d.y[3] = -1;
    eval_against_cpu(&d, -1);
    free(d.x), free(d.y);
}

/* Every sample ignored: torch's nan loss and zero gradient, and nan means in eval. */
static void test_all_ignored(void **state) {
    (void)state;
    data d = ref_data();
    for (uint32_t i = 0; i < d.n; i++) d.y[i] = 7;
    taas_optim_config opt = optim(TAAS_OPTIM_SGD, 0.05);
    taas_model *m = ref_model();
    taas_engine *e = engine_ignoring(m, TAAS_JOB_NLL, 0, 7, &opt);
    taas_batch b = batch_of(&d, 0);
    float loss = 0;
    TU_OK(e->ops->compute(e, &b, NULL, NULL, 0, &loss, &E), &E);
    assert_true(isnan(loss));
    float *g = grads_of(e);
    for (size_t i = 0; i < m->ntrain; i++)
        if (g[i] != 0.0f) fail_msg("gradient %zu is %g with every sample ignored", i, (double)g[i]);
    free(g);
    double loss_sum, right;
    TU_OK(e->ops->eval(e, &b, &loss_sum, &right, &E), &E);
    assert_true(isnan(loss_sum) && isnan(right));
    e->ops->free(e);
    taas_model_free(m);
    free(d.x), free(d.y);
}

/* A label out of range and a BatchNorm batch of one: the CPU's messages and hints. */
static void test_errors_in_the_cpus_words(void **state) {
    (void)state;
    data d = ref_data();
    taas_optim_config opt = optim(TAAS_OPTIM_SGD, 0.05);
    taas_model *cpu = ref_model(), *gpu = ref_model();
    taas_engine *e = engine(gpu, TAAS_JOB_NLL, 0, &opt);
    int k = (int)taas_model_out_numel(cpu);
    d.y[2] = k + 2;
    taas_batch b = batch_of(&d, 0);
    float loss, *zeros = calloc((size_t)d.n * k, sizeof *zeros);
    taas_error want;
    taas_error_clear(&want);
    taas_error_clear(&E);
    assert_int_equal(taas_nll_loss_forward(&loss, zeros, d.y, (int)d.n, k, -100, &want), -1);
    assert_int_equal(e->ops->compute(e, &b, NULL, NULL, 0, &loss, &E), -1);
    assert_string_equal(E.message, want.message);
    assert_string_equal(E.hint, want.hint);
    d.y[2] = 0;
    b.n = 1;  /* BatchNorm1d cannot train on one value per channel */
    const float *out;
    taas_error_clear(&want);
    taas_error_clear(&E);
    assert_int_equal(taas_model_forward(cpu, d.x, 1, 1, 0, &out, &want), -1);
    assert_int_equal(e->ops->compute(e, &b, NULL, NULL, 0, &loss, &E), -1);
    assert_string_equal(E.message, want.message);
    assert_string_equal(E.hint, want.hint);
    b.n = d.n;
    b.h = 4;  /* not the model's input */
    taas_error_clear(&E);
    assert_int_equal(e->ops->compute(e, &b, NULL, NULL, 0, &loss, &E), -1);
    assert_non_null(strstr(E.message, "a batch of 1x4x8 samples"));
    free(zeros);
    e->ops->free(e);
    taas_model_free(cpu), taas_model_free(gpu);
    free(d.x), free(d.y);
}

int main(void) {
    tu_cuda_require(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_backward_match_torch),
        cmocka_unit_test(test_sgd_momentum_steps),
        cmocka_unit_test(test_adam_steps),
        cmocka_unit_test(test_every_layer_against_cpu),
        cmocka_unit_test(test_gpt2_windows_against_cpu),
        cmocka_unit_test(test_accumulated_against_cpu),
        cmocka_unit_test(test_bf16_steps),
        cmocka_unit_test(test_section1_against_cpu),
        cmocka_unit_test(test_batches_taken_ahead),
        cmocka_unit_test_teardown(test_graphs_replay_the_steps, unset_graphs),
        cmocka_unit_test(test_eval_matches_cpu),
        cmocka_unit_test(test_all_ignored),
        cmocka_unit_test(test_errors_in_the_cpus_words),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
