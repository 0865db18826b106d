/* GPT-2 on a GPU (cuda/cu_model.c with cu_seq.cu's and cu_attention.cu's layers over the same
 * graph) against the same fixtures as the CPU's test_gpt2.c: one training step's logits and
 * every gradient, the fused attention against SDPA's math at T = 1, 7, 64, 256, and against
 * the CPU's attention at wider heads, longer sequences and with dropout (the same counters,
 * so the same mask); every kernel set: tiled, plain and through the products. LayerNorm and
 * the embedding's backward against the CPU's. Exits 77 (skipped) where there is no GPU. */
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
    size_t room = taas_cu_attention_scratch_floats(&CU, s);
    float *scratch = tu_dev(NULL, room, 0);
    TU_OK(taas_cu_attention_forward(&CU, dyo, dlse, dqkv_in, s, scratch, room, seed, offset, &E), &E);
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

/* The embedding's backward adds an id's rows in the CPU's order: the CPU's bits, onto what
 * the table's gradient held, with ids seen once, many times and never. */
static void test_embedding_backward(void **state) {
    (void)state;
    enum { R = 300, V = 50, C = 70 };
    static float ids[R], dy[R * C], dw[V * C], want[V * C];
    for (int r = 0; r < R; r++) ids[r] = (float)(r % 7 == 3 ? 49 : (r * r) % 37);
    gt_fill(dy, R * C, 41);
    gt_fill(dw, V * C, 42);
    memcpy(want, dw, sizeof want);
    taas_embedding_backward(want, dy, ids, R, C);
    float *dI = tu_dev(ids, R, 0), *dDY = tu_dev(dy, R * C, 0), *dDW = tu_dev(dw, V * C, 0);
    size_t room = taas_cu_embedding_scratch_floats(R);
    float *scratch = tu_dev(NULL, room, 0);
    TU_OK(taas_cu_embedding_backward(&CU, dDW, dDY, dI, R, V, C, scratch, room, &E), &E);
    float *got = tu_host(&CU, dDW, V * C);
    assert_memory_equal(got, want, sizeof want);
    free(got);
    cudaFree(dI), cudaFree(dDY), cudaFree(dDW), cudaFree(scratch);
}

/* LayerNorm on more rows than a block's 32 row phases and a width that is not a multiple of
 * 32, against the CPU's: the output, the input gradient and the accumulated parameter
 * gradients. */
static void test_layernorm_rows(void **state) {
    (void)state;
    enum { R = 301, C = 100 };
    static float x[R * C], dy[R * C], g[C], b[C], y[R * C], mean[R], rstd[R], dx[R * C], dg[C], db[C];
    gt_fill(x, R * C, 31);
    gt_fill(dy, R * C, 32);
    gt_fill(g, C, 33);
    gt_fill(b, C, 34);
    for (int k = 0; k < C; k++) dg[k] = db[k] = 0.5f;  /* gradients accumulate */
    taas_layernorm_forward(y, mean, rstd, x, g, b, R, C, 1e-5f);
    taas_layernorm_backward(dx, dg, db, dy, x, mean, rstd, g, R, C);
    float *dX = tu_dev(x, R * C, 0), *dDY = tu_dev(dy, R * C, 0), *dG = tu_dev(g, C, 0), *dB = tu_dev(b, C, 0);
    float *dY = tu_dev(NULL, R * C, 0), *dM = tu_dev(NULL, R, 0), *dS = tu_dev(NULL, R, 0);
    float *dDX = tu_dev(NULL, R * C, 0), *dDG = tu_dev(NULL, C, 0.5f), *dDB = tu_dev(NULL, C, 0.5f);
    TU_OK(taas_cu_layernorm_forward(&CU, dY, dM, dS, dX, dG, dB, R, C, 1e-5f, &E), &E);
    TU_OK(taas_cu_layernorm_backward(&CU, dDX, dDG, dDB, dDY, dX, dM, dS, dG, R, C, &E), &E);
    const float *want[] = {y, dx, dg, db};
    float *got[] = {tu_host(&CU, dY, R * C), tu_host(&CU, dDX, R * C), tu_host(&CU, dDG, C), tu_host(&CU, dDB, C)};
    const size_t len[] = {R * C, R * C, C, C};
    const char *what[] = {"y", "dx", "dweight", "dbias"};
    for (int a = 0; a < 4; a++) {
        for (size_t j = 0; j < len[a]; j++)
            if (!(fabs(got[a][j] - want[a][j]) <= 1e-4 * (1 + fabs(want[a][j]))))
                fail_msg("LayerNorm %s[%zu] %.8g, CPU %.8g", what[a], j, got[a][j], want[a][j]);
        free(got[a]);
    }
    cudaFree(dX), cudaFree(dDY), cudaFree(dG), cudaFree(dB), cudaFree(dY), cudaFree(dM), cudaFree(dS);
    cudaFree(dDX), cudaFree(dDG), cudaFree(dDB);
}

static const taas_cu_attention SETS[] = {TAAS_CU_ATT_TILED, TAAS_CU_ATT_PLAIN, TAAS_CU_ATT_GEMM};
static const char *const SET_NAMES[] = {"tiled", "plain", "gemm"};

/* Every kernel set on the fixture: tiled (the default), plain, and through the products. */
static void test_attention(void **state) {
    (void)state;
    for (int k = 0; k < 3; k++) {
        CU.attention = SETS[k];
        int bad = gt_attention_fixture(gpu_attention_fixture, TOL_OUT, TOL_GRAD);
        CU.attention = TAAS_CU_ATT_TILED;
        if (bad) fail_msg("the %s kernels differ from the fixture", SET_NAMES[k]);
    }
}

/* The GPU's attention of shape s against the CPU's, with kernel set SETS[set], seed and
 * counter offset: 0, or 1 after printing the first difference. */
static int against_cpu(const taas_attention_shape *s, int set, uint64_t seed, uint64_t offset, double tol) {
    size_t cnt = (size_t)s->n * s->t * s->c;
    float *qkv = malloc(3 * cnt * sizeof *qkv), *dy = malloc(cnt * sizeof *dy), *y = malloc(cnt * sizeof *y);
    float *dq = malloc(3 * cnt * sizeof *dq), *cy = malloc(cnt * sizeof *cy), *cdq = malloc(3 * cnt * sizeof *cdq);
    float *lse = malloc((size_t)s->n * s->heads * s->t * sizeof *lse);
    float *scratch = malloc(taas_attention_scratch_floats(s, 1) * sizeof *scratch);
    if (!qkv || !dy || !y || !dq || !cy || !cdq || !lse || !scratch) abort();
    gt_fill(qkv, 3 * cnt, 7);
    gt_fill(dy, cnt, 8);
    taas_attention_forward(cy, lse, qkv, s, scratch, 1, seed, offset);
    taas_attention_backward(cdq, dy, qkv, cy, lse, s, scratch, 1, seed, offset);
    CU.attention = SETS[set];
    gpu_attention(y, dq, qkv, dy, s, seed, offset);
    CU.attention = TAAS_CU_ATT_TILED;
    int bad = 0;
    for (size_t j = 0; j < cnt && !bad; j++)
        if (!(fabs(y[j] - cy[j]) <= tol * (1 + fabs(cy[j])))) {
            printf("# %s, T %d, C %d, heads %d, p %g: y[%zu] %.8g, CPU %.8g\n", SET_NAMES[set], s->t, s->c,
                   s->heads, s->p, j, y[j], cy[j]);
            bad = 1;
        }
    for (size_t j = 0; j < 3 * cnt && !bad; j++)
        if (!(fabs(dq[j] - cdq[j]) <= 10 * tol * (1 + fabs(cdq[j])))) {
            printf("# %s, T %d, C %d, heads %d, p %g: dqkv[%zu] %.8g, CPU %.8g\n", SET_NAMES[set], s->t,
                   s->c, s->heads, s->p, j, dq[j], cdq[j]);
            bad = 1;
        }
    free(qkv), free(dy), free(y), free(dq), free(cy), free(cdq), free(lse), free(scratch);
    return bad;
}

/* With dropout the GPU draws the CPU's mask: both sides' outputs and gradients agree. */
static void test_attention_dropout(void **state) {
    (void)state;
    taas_attention_shape s = {2, 70, 16, 2, 0.3f};
    for (int k = 0; k < 3; k++) assert_int_equal(against_cpu(&s, k, 11, 5ull << 32, 1e-5), 0);
}

/* The tiled kernels' shapes: heads of 64 (GPT-2's), 40 and 24 (padded to 64 and 32), a
 * sequence of several row blocks and key tiles that ends inside one, dropout; a head of 80,
 * past the tiled kernels, takes the plain ones when tiled ones are asked for. */
static void test_attention_shapes(void **state) {
    (void)state;
    const taas_attention_shape shapes[] = {
        {1, 200, 128, 2, 0.0f}, {2, 130, 80, 2, 0.1f}, {1, 97, 96, 4, 0.0f}, {1, 70, 80, 1, 0.0f}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int k = 0; k < 3; k++) assert_int_equal(against_cpu(&shapes[i], k, 3, 9, 1e-4), 0);
}

/* The gemm set's products in BF16 (fit(precision='bf16')): within BF16's rounding of the
 * CPU's FP32 (inputs to 8 bits, sums in FP32). */
static void test_attention_gemm_bf16(void **state) {
    (void)state;
    taas_attention_shape s = {1, 200, 128, 2, 0.1f};
    taas_cu_set_math(&CU, TAAS_CU_BF16);
    int bad = against_cpu(&s, 2, 3, 9, 5e-3);
    taas_cu_set_math(&CU, TAAS_CU_FP32);
    assert_int_equal(bad, 0);
}

/* TAAS_CUDA_ATTENTION names a kernel set, or the GPU does not start, saying so. */
static void test_attention_variable(void **state) {
    (void)state;
    taas_cu other;
    taas_error e;
    taas_error_clear(&e);
    setenv("TAAS_CUDA_ATTENTION", "flash", 1);
    int rc = taas_cu_init(&other, 0, &e);
    unsetenv("TAAS_CUDA_ATTENTION");
    assert_int_equal(rc, -1);
    assert_string_equal(e.ename, "TaasValueError");
    assert_non_null(strstr(e.message, "TAAS_CUDA_ATTENTION=flash"));
    setenv("TAAS_CUDA_ATTENTION", "gemm", 1);
    rc = taas_cu_init(&other, 0, &e);
    unsetenv("TAAS_CUDA_ATTENTION");
    assert_int_equal(rc, 0);
    assert_int_equal(other.attention, TAAS_CU_ATT_GEMM);
    taas_cu_free(&other);
}

/* Every kernel set repeats to the last bit. */
static void test_attention_repeats(void **state) {
    (void)state;
    taas_attention_shape s = {2, 150, 128, 2, 0.1f};
    size_t cnt = (size_t)s.n * s.t * s.c;
    float *qkv = malloc(3 * cnt * sizeof *qkv), *dy = malloc(cnt * sizeof *dy);
    float *y[2] = {malloc(cnt * sizeof(float)), malloc(cnt * sizeof(float))};
    float *dq[2] = {malloc(3 * cnt * sizeof(float)), malloc(3 * cnt * sizeof(float))};
    if (!qkv || !dy || !y[0] || !y[1] || !dq[0] || !dq[1]) abort();
    gt_fill(qkv, 3 * cnt, 5);
    gt_fill(dy, cnt, 6);
    for (int set = 0; set < 3; set++) {
        CU.attention = SETS[set];
        for (int k = 0; k < 2; k++) gpu_attention(y[k], dq[k], qkv, dy, &s, 21, 0);
        CU.attention = TAAS_CU_ATT_TILED;
        if (memcmp(y[0], y[1], cnt * sizeof(float)) || memcmp(dq[0], dq[1], 3 * cnt * sizeof(float)))
            fail_msg("the %s kernels gave other bits the second time", SET_NAMES[set]);
    }
    free(qkv), free(dy), free(y[0]), free(y[1]), free(dq[0]), free(dq[1]);
}

int main(void) {
    tu_cuda_require(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step),
        cmocka_unit_test(test_embedding_backward),
        cmocka_unit_test(test_layernorm_rows),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_dropout),
        cmocka_unit_test(test_attention_shapes),
        cmocka_unit_test(test_attention_gemm_bf16),
        cmocka_unit_test(test_attention_repeats),
        cmocka_unit_test(test_attention_variable),
    };
    return cmocka_run_group_tests(tests, tu_cuda_setup, tu_cuda_teardown);
}
