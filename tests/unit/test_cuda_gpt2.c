/* GPT-2 on a GPU (cuda/cu_model.c with cu_seq.cu's layers over the same graph) against the
 * same fixtures as the CPU's test_gpt2.c: one training step's logits and every gradient, the
 * fused attention against SDPA's math at T = 1, 7, 64, 256, and attention dropout against
 * the CPU's (the same counters, so the same mask). Exits 77 (skipped) where there is no GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cu_layers.h"
#include "cu_model.h"
#include "fixture_testutil.h"
#include "gpt2_testutil.h"
#include "loss.h"
#include "resnet_testutil.h"
#include "test_cuda_util.h"

TU_CUDA_GROUP

#define TOL_OUT 1e-4
#define TOL_GRAD 1e-3

static void test_step(void **state) {
    (void)state;
    json_t *ref = tu_fixture_load("gpt2/step.json");
    assert_non_null(ref);
    int n = (int)json_integer_value(json_object_get(ref, "n")), t = (int)json_integer_value(json_object_get(ref, "t"));
    int v = (int)json_integer_value(json_object_get(json_object_get(ref, "config"), "vocab_size"));
    json_t *spec = json_pack("{s:s, s:O}", "type", "GPT2LMHeadModel", "config", json_object_get(ref, "config"));
    taas_model *m = taas_model_new(spec, t, 0, 0, 1, &E);
    if (!m) fail_msg("%s", E.message);
    assert_int_equal(rt_fill(m, json_object_get(ref, "keys")), 0);
    size_t rows = (size_t)n * t, k = rows * (size_t)v;
    float *ids = malloc(rows * sizeof *ids);
    int64_t *y = malloc(rows * sizeof *y);
    gt_batch(ref, ids, y, rows);
    taas_cu_model dm;
    TU_OK(taas_cu_model_init(&dm, m, &CU, &E), &E);
    float *dids = tu_dev(ids, rows, 0);
    const float *dout;
    TU_OK(taas_cu_model_forward(&dm, dids, n, 1, 0, m->nlayers, &dout, &E), &E);
    float *logits = tu_host(&CU, dout, k);
    int bad = rt_check(logits, k, json_object_get(ref, "logits"), TOL_OUT, "logits");
    float loss, *probs = malloc(k * sizeof *probs), *dl = malloc(k * sizeof *dl);
    TU_OK(taas_cross_entropy_forward(&loss, probs, logits, y, (int)rows, v, 0.0f, -100, &E), &E);
    taas_cross_entropy_backward(dl, probs, y, (int)rows, v, 0.0f, -100, 1.0f);
    float *ddl = tu_dev(dl, k, 0);
    TU_OK(taas_cu_model_zero_grad(&dm, &E), &E);
    TU_OK(taas_cu_model_backward(&dm, ddl, &E), &E);
    float *grads = tu_host(&CU, dm.grads, m->ntrain);
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *p = &m->table[i];
        if (p->tied) continue;  /* transformer.wte.weight's */
        const json_t *g = json_object_get(json_object_get(ref, "grads"), p->key);
        assert_non_null(g);
        bad |= rt_check(grads + p->offset, p->numel, g, TOL_GRAD, p->key);
    }
    assert_int_equal(bad, 0);
    taas_cu_model_release(&dm);
    cudaFree(dids);
    cudaFree(ddl);
    free(ids), free(y), free(logits), free(probs), free(dl), free(grads);
    taas_model_free(m);
    json_decref(spec);
    json_decref(ref);
}

/* The attention of one shape on the GPU: y and dqkv back on the host. */
static void gpu_attention(float *y, float *dqkv, const float *qkv, const float *dy, const taas_attention_shape *s,
                          uint64_t seed, uint64_t offset) {
    size_t cnt = (size_t)s->n * s->t * s->c, rows = (size_t)s->n * s->heads * s->t;
    float *dqkv_in = tu_dev(qkv, 3 * cnt, 0), *ddy = tu_dev(dy, cnt, 0), *dyo = tu_dev(NULL, cnt, 0);
    float *dlse = tu_dev(NULL, rows, 0), *dd = tu_dev(NULL, 3 * cnt, 0);
    size_t room = taas_cu_attention_scratch_floats(s);
    float *scratch = tu_dev(NULL, room, 0);
    TU_OK(taas_cu_attention_forward(&CU, dyo, dlse, dqkv_in, s, seed, offset, &E), &E);
    TU_OK(taas_cu_attention_backward(&CU, dd, ddy, dqkv_in, dyo, dlse, s, scratch, room, seed, offset, &E), &E);
    float *hy = tu_host(&CU, dyo, cnt), *hd = tu_host(&CU, dd, 3 * cnt);
    memcpy(y, hy, cnt * sizeof *y);
    memcpy(dqkv, hd, 3 * cnt * sizeof *dqkv);
    free(hy), free(hd);
    cudaFree(dqkv_in), cudaFree(ddy), cudaFree(dyo), cudaFree(dlse), cudaFree(dd), cudaFree(scratch);
}

static void gpu_attention_fixture(float *y, float *dqkv, const float *qkv, const float *dy,
                                  const taas_attention_shape *s) {
    gpu_attention(y, dqkv, qkv, dy, s, 1, 0);
}

static void test_attention(void **state) {
    (void)state;
    assert_int_equal(gt_attention_fixture(gpu_attention_fixture, TOL_OUT, TOL_GRAD), 0);
}

/* With dropout the GPU draws the CPU's mask: both sides' outputs and gradients agree. */
static void test_attention_dropout(void **state) {
    (void)state;
    enum { N = 2, H = 2, T = 70, D = 8, C = H * D };
    taas_attention_shape s = {N, T, C, H, 0.3f};
    static float qkv[N * T * 3 * C], dy[N * T * C], y[N * T * C], dq[N * T * 3 * C], cy[N * T * C],
        cdq[N * T * 3 * C], lse[N * H * T];
    gt_fill(qkv, sizeof qkv / sizeof qkv[0], 7);
    gt_fill(dy, sizeof dy / sizeof dy[0], 8);
    float *scratch = malloc(taas_attention_scratch_floats(&s, 1) * sizeof *scratch);
    taas_attention_forward(cy, lse, qkv, &s, scratch, 1, 11, 5ull << 32);
    taas_attention_backward(cdq, dy, qkv, cy, lse, &s, scratch, 1, 11, 5ull << 32);
    gpu_attention(y, dq, qkv, dy, &s, 11, 5ull << 32);
    for (size_t j = 0; j < sizeof y / sizeof y[0]; j++)
        if (fabs(y[j] - cy[j]) > 1e-5 * (1 + fabs(cy[j]))) fail_msg("y[%zu] %.8g, CPU %.8g", j, y[j], cy[j]);
    for (size_t j = 0; j < sizeof dq / sizeof dq[0]; j++)
        if (fabs(dq[j] - cdq[j]) > 1e-5 * (1 + fabs(cdq[j]))) fail_msg("dqkv[%zu] %.8g, CPU %.8g", j, dq[j], cdq[j]);
    free(scratch);
}

int main(void) {
    tu_cuda_require(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_dropout),
    };
    return cmocka_run_group_tests(tests, tu_cuda_setup, tu_cuda_teardown);
}
