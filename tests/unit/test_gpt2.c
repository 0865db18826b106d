/* GPT-2 on the graph core against PyTorch (tests/data/gpt2/, made by tests/gen_gpt2_ref.py
 * from a reference GPT2LMHeadModel written under Hugging Face's names and layout): the
 * state_dict's keys and shapes, one training step's logits, loss and every gradient; the
 * fused causal attention against scaled_dot_product_attention's math at T = 1, 7, 64, 256;
 * its dropout against a plain double-precision attention with the same mask; GPT-2 small's
 * plan (124,439,808 parameters, lm_head tied); and the refusals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "ctr_rng.h"
#include "fixture_testutil.h"
#include "loss.h"
#include "gpt2_testutil.h"
#include "model.h"
#include "optim.h"
#include "resnet_testutil.h"
#include "safetensors.h"
#include "sample.h"
#include "simd.h"

/* Beyond RT_TIMES torch's own float32 error: the logits and loss to 1e-4, gradients to 1e-3
 * of their scale, as the ResNets'. */
#define TOL_OUT 1e-4
#define TOL_GRAD 1e-3

static json_t *gpt2_spec(const json_t *config) {
    return json_pack("{s:s, s:O}", "type", "GPT2LMHeadModel", "config", config);
}

static void test_step(void **state) {
    (void)state;
    json_t *ref = tu_fixture_load("gpt2/step.json");
    assert_non_null(ref);
    int n = (int)json_integer_value(json_object_get(ref, "n")), t = (int)json_integer_value(json_object_get(ref, "t"));
    int v = (int)json_integer_value(json_object_get(json_object_get(ref, "config"), "vocab_size"));
    json_t *spec = gpt2_spec(json_object_get(ref, "config"));
    taas_error e;
    taas_error_clear(&e);
    taas_model *m = taas_model_new(spec, t, 0, 0, 1, &e);
    if (!m) fprintf(stderr, "%s\n", e.message);
    assert_non_null(m);
    taas_model_set_threads(m, 2);
    assert_int_equal(rt_fill(m, json_object_get(ref, "keys")), 0);
    size_t rows = (size_t)n * (size_t)t;
    float *ids = malloc(rows * sizeof *ids), *probs = malloc(rows * (size_t)v * sizeof *probs);
    float *dlogits = malloc(rows * (size_t)v * sizeof *dlogits);
    int64_t *y = malloc(rows * sizeof *y);
    gt_batch(ref, ids, y, rows);
    assert_int_equal(taas_model_out_numel(m), (size_t)t * (size_t)v);
    const float *out;
    float loss;
    taas_model_zero_grad(m);
    assert_int_equal(taas_model_forward(m, ids, n, 1, 0, &out, &e), 0);
    int bad = rt_check(out, rows * (size_t)v, json_object_get(ref, "logits"), TOL_OUT, "logits");
    /* nanoGPT's F.cross_entropy(logits.view(-1, V), y.view(-1)) */
    assert_int_equal(taas_cross_entropy_forward(&loss, probs, out, y, (int)rows, v, 0.0f, -100, &e), 0);
    double want = json_number_value(json_object_get(ref, "loss"));
    if (fabs(loss - want) > RT_TIMES * json_number_value(json_object_get(ref, "loss_err")) + TOL_OUT * fmax(1.0, want))
        fail_msg("loss %.8g, torch %.8g", loss, want);
    taas_cross_entropy_backward(dlogits, probs, y, (int)rows, v, 0.0f, -100, 1.0f);
    assert_int_equal(taas_model_backward(m, dlogits, &e), 0);
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *p = &m->table[i];
        if (p->tied) {  /* lm_head.weight's gradient is transformer.wte.weight's, as torch's one Parameter */
            assert_string_equal(p->key, "lm_head.weight");
            assert_int_equal(p->offset, taas_model_find(m, "transformer.wte.weight")->offset);
            continue;
        }
        const json_t *g = json_object_get(json_object_get(ref, "grads"), p->key);
        assert_non_null(g);
        bad |= rt_check(m->grads + p->offset, p->numel, g, TOL_GRAD, p->key);
    }
    /* clip_grad_norm_(1.0), then AdamW with the two groups */
    double norm = taas_clip_grad_norm(m->grads, m->ntrain, json_number_value(json_object_get(ref, "max_norm")));
    double want_norm = json_number_value(json_object_get(ref, "grad_norm"));
    if (fabs(norm - want_norm) > RT_TIMES * json_number_value(json_object_get(ref, "grad_norm_err")) + TOL_OUT * want_norm)
        fail_msg("the gradients' norm %.8g, torch %.8g", norm, want_norm);
    taas_optim_config cfg;
    taas_optim_config_default(&cfg, TAAS_OPTIM_ADAMW);
    cfg.lr = json_number_value(json_object_get(ref, "lr"));
    cfg.beta2 = 0.95;
    cfg.eps = 1e-8;
    taas_optim_span *spans;
    size_t nspans;
    assert_int_equal(taas_model_decay_spans(m, json_number_value(json_object_get(ref, "weight_decay")), &spans, &nspans), 0);
    float *st = calloc(taas_optim_state_floats(&cfg, m->ntrain), sizeof *st);
    float *before = malloc(m->nparams * sizeof *before);
    memcpy(before, m->params, m->nparams * sizeof *before);
    taas_optim_step_spans(&cfg, m->params, m->grads, st, m->ntrain, 1, spans, nspans);
    for (size_t j = 0; j < m->nparams; j++) before[j] = m->params[j] - before[j];  /* the update */
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *p = &m->table[i];
        if (p->tied) continue;
        const json_t *a = json_object_get(json_object_get(ref, "update"), p->key);
        assert_non_null(a);
        bad |= rt_check(before + p->offset, p->numel, a, TOL_GRAD, p->key);
    }
    assert_int_equal(bad, 0);
    free(spans), free(st), free(before);
    free(ids), free(probs), free(dlogits), free(y);
    taas_model_free(m);
    json_decref(spec);
    json_decref(ref);
}

static void cpu_attention(float *y, float *dqkv, const float *qkv, const float *dy, const taas_attention_shape *s) {
    float *scratch = malloc(taas_attention_scratch_floats(s, 2) * sizeof *scratch);
    float *lse = malloc((size_t)s->n * s->heads * s->t * sizeof *lse);
    taas_attention_forward(y, lse, qkv, s, scratch, 2, 1, 0);
    taas_attention_backward(dqkv, dy, qkv, y, lse, s, scratch, 2, 1, 0);
    free(scratch), free(lse);
}

static void test_attention(void **state) {
    (void)state;
    assert_int_equal(gt_attention_fixture(cpu_attention, TOL_OUT, TOL_GRAD), 0);
}

/* Attention dropout against a plain double-precision attention with the same mask: element
 * (unit u, row, key) is dropped where taas_ctr_uniform(seed, offset + (u T + row) T + key) < p
 * (layer_attention.c), the kept ones scaled by 1 / (1 - p). Forward and backward, with T
 * across two blocks. */
static void test_attention_dropout(void **state) {
    (void)state;
    enum { N = 2, H = 2, T = 70, D = 5, C = H * D };
    const float p = 0.3f;
    const uint64_t seed = 11, offset = 5ull << 32;
    static float qkv[N * T * 3 * C], y[N * T * C], dy[N * T * C], dqkv[N * T * 3 * C], lse[N * H * T];
    static double ry[N * T * C], rdq[N * T * 3 * C], P[T][T], Pd[T][T], dP[T][T];
    gt_fill(qkv, sizeof qkv / sizeof qkv[0], 7);
    gt_fill(dy, sizeof dy / sizeof dy[0], 8);
    taas_attention_shape s = {N, T, C, H, p};
    float *scratch = malloc(taas_attention_scratch_floats(&s, 2) * sizeof *scratch);
    taas_attention_forward(y, lse, qkv, &s, scratch, 2, seed, offset);
    taas_attention_backward(dqkv, dy, qkv, y, lse, &s, scratch, 2, seed, offset);
    memset(rdq, 0, sizeof rdq);
    double scale = 1.0 / sqrt((double)D);
    for (int i = 0; i < N; i++)
        for (int h = 0; h < H; h++) {
            int u = i * H + h;
#define Q(r, x) qkv[((size_t)i * T + (r)) * 3 * C + (size_t)h * D + (x)]
#define K(r, x) qkv[((size_t)i * T + (r)) * 3 * C + C + (size_t)h * D + (x)]
#define V(r, x) qkv[((size_t)i * T + (r)) * 3 * C + 2 * C + (size_t)h * D + (x)]
#define G(r, x) dy[((size_t)i * T + (r)) * C + (size_t)h * D + (x)]
            for (int r = 0; r < T; r++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= r; j++) {
                    double sc = 0;
                    for (int x = 0; x < D; x++) sc += (double)Q(r, x) * K(j, x);
                    P[r][j] = sc * scale;
                    mx = fmax(mx, P[r][j]);
                }
                for (int j = 0; j <= r; j++) sum += P[r][j] = exp(P[r][j] - mx);
                for (int j = 0; j <= r; j++) {
                    P[r][j] /= sum;
                    uint64_t ctr = offset + ((uint64_t)u * T + (uint64_t)r) * T + (uint64_t)j;
                    Pd[r][j] = taas_ctr_uniform(seed, ctr) < p ? 0.0 : P[r][j] / (1.0 - p);
                }
                for (int x = 0; x < D; x++) {
                    double o = 0;
                    for (int j = 0; j <= r; j++) o += Pd[r][j] * V(j, x);
                    ry[((size_t)i * T + r) * C + (size_t)h * D + x] = o;
                }
            }
            for (int r = 0; r < T; r++) {
                double dsum = 0;
                for (int j = 0; j <= r; j++) {
                    double g = 0;
                    for (int x = 0; x < D; x++) g += (double)G(r, x) * V(j, x);
                    dP[r][j] = Pd[r][j] > 0 ? g / (1.0 - p) : 0.0;  /* through the mask */
                    dsum += dP[r][j] * P[r][j];
                }
                for (int j = 0; j <= r; j++) {
                    double ds = P[r][j] * (dP[r][j] - dsum) * scale;
                    for (int x = 0; x < D; x++) {
                        rdq[((size_t)i * T + r) * 3 * C + (size_t)h * D + x] += ds * K(j, x);
                        rdq[((size_t)i * T + j) * 3 * C + C + (size_t)h * D + x] += ds * Q(r, x);
                        rdq[((size_t)i * T + j) * 3 * C + 2 * C + (size_t)h * D + x] += Pd[r][j] * G(r, x);
                    }
                }
            }
#undef Q
#undef K
#undef V
#undef G
        }
    for (size_t j = 0; j < sizeof y / sizeof y[0]; j++)
        if (fabs(y[j] - ry[j]) > 1e-5 * (1 + fabs(ry[j]))) fail_msg("y[%zu] %.8g, reference %.8g", j, y[j], ry[j]);
    for (size_t j = 0; j < sizeof dqkv / sizeof dqkv[0]; j++)
        if (fabs(dqkv[j] - rdq[j]) > 1e-5 * (1 + fabs(rdq[j])))
            fail_msg("dqkv[%zu] %.8g, reference %.8g", j, dqkv[j], rdq[j]);
    free(scratch);
}

/* GPT-2 small as Hugging Face builds it: the parameter count with lm_head tied, the keys. */
static void test_gpt2_small_plan(void **state) {
    (void)state;
    json_t *spec = json_loads("{\"type\":\"GPT2LMHeadModel\",\"config\":{}}", 0, NULL);
    taas_model_plan p;
    taas_error e;
    if (taas_model_plan_build(&p, spec, 1024, 0, 0, &e)) fail_msg("%s", e.message);
    size_t count = 0;
    for (size_t i = 0; i < p.ntable; i++)
        if (!p.table[i].tied) count += p.table[i].numel;
    assert_int_equal(count, 124439808);
    assert_int_equal(p.nparams, 124439808);
    assert_int_equal(p.ntable, 2 + 12 * 12 + 2 + 1);
    const taas_param_entry *t = taas_model_plan_find(&p, "transformer.h.11.mlp.c_proj.weight");
    assert_non_null(t);
    assert_int_equal(t->shape[0], 3072);  /* Conv1D: (in, out) */
    assert_int_equal(t->shape[1], 768);
    t = taas_model_plan_find(&p, "lm_head.weight");
    assert_non_null(t);
    assert_true(t->tied);
    assert_int_equal(t->offset, taas_model_plan_find(&p, "transformer.wte.weight")->offset);
    assert_int_equal(t->shape[0], 50257);
    assert_string_equal(p.table[p.ntable - 1].key, "lm_head.weight");
    assert_int_equal(p.layers[p.nlayers - 1].out.rank, 2);
    assert_int_equal(p.layers[p.nlayers - 1].out.d[1], 50257);
    taas_model_plan_free(&p);
    json_decref(spec);
}

/* A GPT2LMHeadModel of this config (JSON members) for T tokens, or the test fails. */
static taas_model *gpt2_model(const char *config, int t, uint64_t seed) {
    char text[256];
    snprintf(text, sizeof text, "{\"type\":\"GPT2LMHeadModel\",\"config\":{%s}}", config);
    json_t *spec = json_loads(text, 0, NULL);
    taas_error e;
    taas_model *m = taas_model_new(spec, t, 0, 0, seed, &e);
    json_decref(spec);
    if (!m) fail_msg("%s", e.message);
    return m;
}

#define TINY "\"vocab_size\":10,\"n_positions\":8,\"n_embd\":8,\"n_layer\":1,\"n_head\":2"

/* A token outside the vocabulary is the step's error, naming where it is. */
/* nanoGPT's sampling (sample.c): a seed gives the same tokens, another seed others, top_k=1
 * the same greedy ones whatever the seed; a context longer than the window keeps its last T;
 * the fit's sample stays within its budget of multiply-adds. */
static void test_sample(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = gpt2_model(TINY, 4, 1);
    int64_t a[32] = {3}, b[32] = {3}, c[32] = {3}, g[32] = {3}, h[32] = {3};
    size_t la = 1, lb = 1, lc = 1, lg = 1, lh = 1;
    assert_int_equal(taas_sample_tokens(m, a, &la, 20, 1.0, 0, 7, &e), 0);
    assert_int_equal(taas_sample_tokens(m, b, &lb, 20, 1.0, 0, 7, &e), 0);
    assert_int_equal(taas_sample_tokens(m, c, &lc, 20, 1.0, 0, 8, &e), 0);
    assert_int_equal(taas_sample_tokens(m, g, &lg, 20, 1.0, 1, 7, &e), 0);
    assert_int_equal(taas_sample_tokens(m, h, &lh, 20, 1.0, 1, 8, &e), 0);
    assert_int_equal(la, 21);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    assert_memory_equal(g, h, sizeof g);
    for (size_t i = 0; i < la; i++) assert_true(a[i] >= 0 && a[i] < 10);
    assert_int_equal(taas_sample_budget(64, 800000, 200), 200);       /* a character model: all */
    assert_int_equal(taas_sample_budget(512, 50000000, 200), 39);     /* cut */
    assert_int_equal(taas_sample_budget(1024, 124439808, 200), 0);    /* GPT-2 small: none */
    taas_model_free(m);
}

static void test_token_out_of_vocab(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = gpt2_model(TINY, 4, 1);
    float ids[8] = {1, 2, 3, 4, 5, 6, 10, 0};
    const float *out;
    assert_int_equal(taas_model_forward(m, ids, 2, 1, 0, &out, &e), -1);
    assert_string_equal(e.message, "transformer.wte (Embedding): Embedding: token 6 of the batch is 10, outside the "
                                   "vocabulary [0, 10)");
    assert_true(e.hint[0] != '\0');
    ids[6] = 9;
    assert_int_equal(taas_model_forward(m, ids, 2, 1, 0, &out, &e), 0);
    taas_model_free(m);
}

/* GPT-2's initialisation: weights normal(0, 0.02), c_proj's 0.02 / sqrt(2 n_layer), biases 0,
 * LayerNorm 1 and 0; the same seed gives the same weights. */
static void test_init(void **state) {
    (void)state;
    const char *cfg = "\"vocab_size\":512,\"n_positions\":64,\"n_embd\":64,\"n_layer\":8,\"n_head\":4";
    taas_model *m = gpt2_model(cfg, 16, 3), *m2 = gpt2_model(cfg, 16, 3);
    assert_memory_equal(m->params, m2->params, m->nparams * sizeof(float));
    static const struct { const char *key; double std; } want[] = {
        {"transformer.wte.weight", 0.02}, {"transformer.wpe.weight", 0.02}, {"transformer.h.3.attn.c_attn.weight", 0.02},
        {"transformer.h.3.attn.c_proj.weight", 0.005}, {"transformer.h.3.mlp.c_proj.weight", 0.005},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const taas_param_entry *t = taas_model_find(m, want[k].key);
        double s = 0, q = 0;
        for (size_t j = 0; j < t->numel; j++) s += m->params[t->offset + j], q += (double)m->params[t->offset + j] * m->params[t->offset + j];
        double mean = s / (double)t->numel, sd = sqrt(q / (double)t->numel - mean * mean);
        if (fabs(sd - want[k].std) > 0.05 * want[k].std || fabs(mean) > 0.1 * want[k].std)
            fail_msg("%s: mean %g std %g, want 0 and %g", want[k].key, mean, sd, want[k].std);
    }
    const taas_param_entry *b = taas_model_find(m, "transformer.h.0.mlp.c_fc.bias");
    const taas_param_entry *g = taas_model_find(m, "transformer.ln_f.weight");
    for (size_t j = 0; j < b->numel; j++) assert_true(m->params[b->offset + j] == 0.0f);
    for (size_t j = 0; j < g->numel; j++) assert_true(m->params[g->offset + j] == 1.0f);
    taas_model_free(m);
    taas_model_free(m2);
}

/* A new file at path (a mkstemp template), and m's state_dict table pointing into it. */
static taas_st_tensor *temp_file_and_table(char *path, const taas_model *m) {
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    return taas_param_table_tensors(m->table, m->ntable, m->params, m->stats, m->counters);
}

/* Weights across Hugging Face's files: taas saves lm_head.weight beside transformer.wte.weight
 * (both keys of torch's state_dict, for load_state_dict(strict=True)); a file without it (as
 * Hugging Face saves tied weights) loads strictly; where a file has both, wte's values win,
 * as Hugging Face ties them after loading. */
static void test_tied_weights_files(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = gpt2_model(TINY, 4, 1), *m2 = gpt2_model(TINY, 4, 2);
    char path[] = "/tmp/taas-gpt2-XXXXXX";
    taas_st_tensor *t = temp_file_and_table(path, m);
    assert_int_equal(taas_safetensors_write(path, t, m->ntable, NULL, 0, &e), 0);
    taas_st_tensor *t2 = taas_param_table_tensors(m2->table, m2->ntable, m2->params, m2->stats, m2->counters);
    assert_int_equal(taas_safetensors_read(path, t2, m2->ntable, &e), 0);
    assert_memory_equal(m->params, m2->params, m->nparams * sizeof(float));
    /* without lm_head.weight */
    assert_string_equal(t[m->ntable - 1].key, "lm_head.weight");
    assert_int_equal(taas_safetensors_write(path, t, m->ntable - 1, NULL, 0, &e), 0);
    memset(m2->params, 0, m2->nparams * sizeof(float));
    assert_int_equal(taas_safetensors_read(path, t2, m2->ntable, &e), 0);
    assert_memory_equal(m->params, m2->params, m->nparams * sizeof(float));
    /* both, lm_head's differing: wte's win */
    size_t nw = t[m->ntable - 1].shape[0] * t[m->ntable - 1].shape[1];
    float *other = calloc(nw, sizeof *other);
    t[m->ntable - 1].data = other;
    t[m->ntable - 1].tied = 0;
    assert_int_equal(taas_safetensors_write(path, t, m->ntable, NULL, 0, &e), 0);
    assert_int_equal(taas_safetensors_read(path, t2, m2->ntable, &e), 0);
    assert_memory_equal(m->params, m2->params, m->nparams * sizeof(float));
    unlink(path);
    free(other), free(t), free(t2);
    taas_model_free(m);
    taas_model_free(m2);
}

/* simd.h's exp and tanh, which GELU(approximate='tanh') and the attention use: within 3 float
 * ulp of exp's double value over [-87, 88], and tanh within 3e-7 of tanh absolutely. */
static void test_fast_exp_and_tanh(void **state) {
    (void)state;
    double worst = 0, worst_t = 0;
    for (int i = -870000; i <= 880000; i++) {
        float x = (float)i * 1e-4f;
        double want = exp((double)x), rel = fabs((double)taas_expf(x) - want) / want;
        worst = fmax(worst, rel);
        if (fabsf(x) < 20) worst_t = fmax(worst_t, fabs((double)taas_tanhf(x) - tanh((double)x)));
    }
    if (worst > 3 * 1.1920929e-7 || worst_t > 3e-7) fail_msg("exp's relative error %g, tanh's absolute %g", worst, worst_t);
    assert_true(taas_expf(0.0f) == 1.0f);
    assert_true(taas_expf(-1000.0f) < 1e-37f && taas_expf(-1000.0f) >= 0.0f);  /* clamped at -87 */
    assert_true(taas_tanhf(30.0f) == 1.0f && taas_tanhf(-30.0f) == -1.0f);
}

/* The model.safetensors that Hugging Face publishes for gpt2 is GPT2Model's: keys without
 * "transformer.", no lm_head.weight, and each block's causal mask (h.N.attn.bias) and its fill
 * (h.N.attn.masked_bias) as buffers. It loads strictly into GPT2LMHeadModel, as
 * from_pretrained takes it; a key that is neither stays an error. */
static void test_hf_gpt2model_checkpoint(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = gpt2_model(TINY, 4, 1), *m2 = gpt2_model(TINY, 4, 2);
    char path[] = "/tmp/taas-gpt2-hf-XXXXXX";
    taas_st_tensor *t = temp_file_and_table(path, m);
    size_t n = 0;
    taas_st_tensor out[64];
    static float mask[8 * 8], fill = -1e4f;
    for (size_t i = 0; i < m->ntable; i++) {
        if (t[i].tied) continue;
        assert_non_null(t[i].alias);
        out[n] = t[i];
        out[n].key = t[i].alias;  /* "wte.weight", "h.0.attn.c_attn.weight", ... */
        out[n++].alias = NULL;
    }
    out[n++] = (taas_st_tensor){.key = "h.0.attn.bias", .dtype = TAAS_ST_F32, .ndim = 4, .shape = {1, 1, 8, 8}, .data = mask};
    out[n++] = (taas_st_tensor){.key = "h.0.attn.masked_bias", .dtype = TAAS_ST_F32, .ndim = 0, .data = &fill};
    assert_int_equal(taas_safetensors_write(path, out, n, NULL, 0, &e), 0);
    taas_st_tensor *t2 = taas_param_table_tensors(m2->table, m2->ntable, m2->params, m2->stats, m2->counters);
    if (taas_safetensors_read(path, t2, m2->ntable, &e)) fail_msg("%s", e.message);
    assert_memory_equal(m->params, m2->params, m->nparams * sizeof(float));
    /* an unexpected key is still refused */
    out[n++] = (taas_st_tensor){.key = "h.0.attn.extra", .dtype = TAAS_ST_F32, .ndim = 0, .data = &fill};
    assert_int_equal(taas_safetensors_write(path, out, n, NULL, 0, &e), 0);
    assert_int_equal(taas_safetensors_read(path, t2, m2->ntable, &e), -1);
    assert_non_null(strstr(e.message, "unexpected keys 'h.0.attn.extra'"));
    unlink(path);
    free(t), free(t2);
    taas_model_free(m);
    taas_model_free(m2);
}

/* call, which fills e, returns 0, or the test fails with e's message */
#define OK(call)                                                                   \
    do {                                                                           \
        if ((call) != 0) fail_msg("%s: %s (%s)", #call, e.message, e.hint);         \
    } while (0)

/* Two epochs of a character model on Debian's fortunes, as TextFile cuts it, from the
 * fixture's weights in the fixture's batch order, with AdamW's nanoGPT groups and
 * clip_grad_norm(1.0): the validation loss within 2 % of PyTorch's (tests/gen_gpt2_ref.py). */
static void test_two_epochs_on_fortunes(void **state) {
    (void)state;
    json_t *ref = tu_fixture_load("gpt2/fortunes.json");
    assert_non_null(ref);
    FILE *fp = fopen("/usr/share/games/fortunes/fortunes", "rb");
    if (!fp) fail_msg("Debian's fortunes (/usr/share/games/fortunes/fortunes) is not installed: scripts/deps.sh");
    static unsigned char data[1 << 20];
    size_t len = fread(data, 1, sizeof data, fp), sum = 0;
    fclose(fp);
    for (size_t i = 0; i < len; i++) sum += data[i];
    if (len != (size_t)json_integer_value(json_object_get(ref, "bytes")) ||
        sum != (size_t)json_integer_value(json_object_get(ref, "byte_sum")))
        fail_msg("the fortunes file differs from the fixture's: regenerate it with tests/gen_gpt2_ref.py");
    int block = (int)json_integer_value(json_object_get(ref, "block")), batch = (int)json_integer_value(json_object_get(ref, "batch"));
    size_t cut = (size_t)((double)len * 0.9), ntrain = (cut - 1) / (size_t)block, nval = (len - cut - 1) / (size_t)block;
    json_t *spec = gpt2_spec(json_object_get(ref, "config"));
    taas_error e;
    taas_model *m = taas_model_new(spec, block, 0, 0, 1, &e);
    json_decref(spec);
    assert_non_null(m);
    taas_model_set_threads(m, 2);
    json_t *order = json_array();  /* the formula's tensors in the table's order, Hugging Face's */
    for (size_t i = 0; i < m->ntable; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < m->table[i].ndim; d++) json_array_append_new(shape, json_integer(m->table[i].shape[d]));
        json_array_append_new(order, json_pack("[s, o]", m->table[i].key, shape));
    }
    assert_int_equal(rt_fill(m, order), 0);
    json_decref(order);
    size_t rows = (size_t)batch * (size_t)block;
    float *win = malloc(nval * (size_t)(block + 1) * sizeof *win), *x = malloc(nval * (size_t)block * sizeof *x);
    int64_t *y = malloc(nval * (size_t)block * sizeof *y);
    float *probs = malloc(nval * (size_t)block * 256 * sizeof *probs), *dl = malloc(rows * 256 * sizeof *dl);
    taas_optim_config cfg;
    taas_optim_config_default(&cfg, TAAS_OPTIM_ADAMW);
    cfg.lr = 3e-3, cfg.beta2 = 0.95, cfg.eps = 1e-8, cfg.weight_decay = 0.1;
    taas_optim_span *spans;
    size_t nspans;
    assert_int_equal(taas_model_decay_spans(m, 0.1, &spans, &nspans), 0);
    float *st = calloc(taas_optim_state_floats(&cfg, m->ntrain), sizeof *st);
    size_t steps = (ntrain + (size_t)batch - 1) / (size_t)batch;
    long k = 0;
    for (int epoch = 0; epoch < 2; epoch++)
        for (size_t q = 0; q < steps; q++) {
            size_t s = epoch == 0 ? q : steps - 1 - q, first = s * (size_t)batch;
            int n = (int)(first + (size_t)batch <= ntrain ? (size_t)batch : ntrain - first);
            for (int i = 0; i < n; i++)
                for (int j = 0; j <= block; j++) win[(size_t)i * (block + 1) + j] = data[(first + (size_t)i) * block + (size_t)j];
            const float *out;
            float loss;
            OK(taas_model_split_windows(m, win, (size_t)block + 1, n, x, y, &e));
            taas_model_zero_grad(m);
            OK(taas_model_forward(m, x, n, 1, (uint64_t)k, &out, &e));
            OK(taas_cross_entropy_forward(&loss, probs, out, y, n * block, 256, 0.0f, -100, &e));
            taas_cross_entropy_backward(dl, probs, y, n * block, 256, 0.0f, -100, 1.0f);
            OK(taas_model_backward(m, dl, &e));
            taas_clip_grad_norm(m->grads, m->ntrain, 1.0);
            taas_optim_step_spans(&cfg, m->params, m->grads, st, m->ntrain, ++k, spans, nspans);
        }
    for (size_t i = 0; i < nval; i++)
        for (int j = 0; j <= block; j++) win[i * (block + 1) + j] = data[cut + i * (size_t)block + (size_t)j];
    const float *out;
    float val;
    OK(taas_model_split_windows(m, win, (size_t)block + 1, (int)nval, x, y, &e));
    OK(taas_model_forward(m, x, (int)nval, 0, 0, &out, &e));
    OK(taas_cross_entropy_forward(&val, probs, out, y, (int)nval * block, 256, 0.0f, -100, &e));
    double want = json_number_value(json_object_get(ref, "val_loss"));
    fprintf(stderr, "validation loss after two epochs: %.6f, PyTorch's %.6f\n", val, want);
    if (fabs(val - want) > 0.02 * want) fail_msg("validation loss after two epochs %.6f, PyTorch's %.6f", val, want);
    free(win), free(x), free(y), free(probs), free(dl), free(st), free(spans);
    taas_model_free(m);
    json_decref(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step), cmocka_unit_test(test_attention), cmocka_unit_test(test_attention_dropout),
        cmocka_unit_test(test_gpt2_small_plan), cmocka_unit_test(test_token_out_of_vocab), cmocka_unit_test(test_init),
        cmocka_unit_test(test_tied_weights_files), cmocka_unit_test(test_fast_exp_and_tanh), cmocka_unit_test(test_sample),
        cmocka_unit_test(test_hf_gpt2model_checkpoint), cmocka_unit_test(test_two_epochs_on_fortunes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
