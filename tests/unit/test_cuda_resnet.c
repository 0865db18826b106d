/* The graph core on a GPU (cuda/cu_model.c over model_plan.c's graph and model_memory.c's
 * plan) against the same torchvision fixtures as the CPU's test_resnet.c: one training step
 * of a CIFAR Sequential of BasicBlocks, grouped convolutions, resnet18 and resnet50, train and
 * eval mode (logits, every gradient), and a frozen backbone. Exits 77 (skipped) where there
 * is no GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cu_model.h"
#include "fixture_testutil.h"
#include "loss.h"
#include "resnet_testutil.h"
#include "test_cuda_util.h"

TU_CUDA_GROUP

#define TOL_OUT 1e-4
#define TOL_GRAD 1e-3

/* One step of the fixture's model on the GPU; with `head_only` the spec's root is frozen and
 * its last module trains, and only that module's gradients are compared. */
static void one_step(const char *file, int train, int head_only) {
    json_t *ref = tu_fixture_load(file);
    assert_non_null(ref);
    const json_t *in = json_object_get(ref, "input"), *ys = json_object_get(ref, "y");
    const json_t *r = json_object_get(ref, train ? "train" : "eval");
    int c = (int)json_integer_value(json_array_get(in, 0)), h = (int)json_integer_value(json_array_get(in, 1));
    int w = (int)json_integer_value(json_array_get(in, 2)), n = (int)json_integer_value(json_object_get(ref, "n"));
    json_t *spec = head_only ? rt_frozen_spec(ref) : json_deep_copy(json_object_get(ref, "spec"));
    const char *head = NULL;
    taas_model *m = taas_model_new(spec, c, h, w, 1, &E);
    if (!m) fail_msg("%s", E.message);
    assert_int_equal(rt_fill(m, json_object_get(ref, "keys")), 0);
    if (head_only) head = m->layers[m->nlayers - 1].path;
    size_t nx = (size_t)n * (size_t)(c * h * w);
    float *x = malloc(nx * sizeof *x);
    int64_t *y = malloc((size_t)n * sizeof *y);
    rt_input(x, nx, (uint64_t)json_integer_value(json_object_get(ref, "input_index")));
    for (int i = 0; i < n; i++) y[i] = json_integer_value(json_array_get(ys, (size_t)i));
    taas_cu_model dm;
    TU_OK(taas_cu_model_init(&dm, m, &CU, &E), &E);
    float *dx = tu_dev(x, nx, 0);
    const float *dout_dev;
    TU_OK(taas_cu_model_forward(&dm, dx, n, train, 0, m->nlayers, &dout_dev, &E), &E);
    int k = (int)taas_model_out_numel(m);
    float *logits = tu_host(&CU, dout_dev, (size_t)(n * k));
    const json_t *want = json_object_get(r, "logits");
    double lerr = RT_TIMES * json_number_value(json_object_get(r, "logits_err"));
    for (int i = 0; i < n * k; i++) {
        double v = json_number_value(json_array_get(want, (size_t)i));
        if (fabs(logits[i] - v) > lerr + TOL_OUT * fmax(1.0, fabs(v))) fail_msg("logit %d: %.8g, torch %.8g", i, logits[i], v);
    }
    float loss, *probs = malloc((size_t)(n * k) * sizeof *probs), *dl = malloc((size_t)(n * k) * sizeof *dl);
    TU_OK(taas_cross_entropy_forward(&loss, probs, logits, y, n, k, 0.0f, -100, &E), &E);
    taas_cross_entropy_backward(dl, probs, y, n, k, 0.0f, -100, 1.0f);
    float *ddl = tu_dev(dl, (size_t)(n * k), 0);
    TU_OK(taas_cu_model_zero_grad(&dm, &E), &E);
    TU_OK(taas_cu_model_backward(&dm, ddl, &E), &E);
    float *grads = tu_host(&CU, dm.grads, m->ntrain);
    int bad = 0;
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        if (t->home != TAAS_T_PARAM || t->offset >= m->ntrain) continue;
        if (head && strncmp(t->key, head, strlen(head)) != 0) fail_msg("%s trains in a frozen backbone", t->key);
        const json_t *g = json_object_get(json_object_get(r, "grads"), t->key);
        assert_non_null(g);
        bad |= rt_check(grads + t->offset, t->numel, g, TOL_GRAD, t->key);
    }
    assert_int_equal(bad, 0);
    if (head) assert_true(m->ntrain < m->nparams);
    taas_cu_model_release(&dm);
    cudaFree(dx);
    cudaFree(ddl);
    free(grads), free(logits), free(probs), free(dl), free(x), free(y);
    taas_model_free(m);
    json_decref(spec);
    json_decref(ref);
}

static void test_cifar_train(void **s) { (void)s; one_step("resnet/cifar.json", 1, 0); }
static void test_cifar_eval(void **s) { (void)s; one_step("resnet/cifar.json", 0, 0); }
static void test_grouped_train(void **s) { (void)s; one_step("resnet/grouped.json", 1, 0); }
static void test_grouped_eval(void **s) { (void)s; one_step("resnet/grouped.json", 0, 0); }
static void test_resnet18_train(void **s) { (void)s; one_step("resnet/resnet18.json", 1, 0); }
static void test_resnet18_eval(void **s) { (void)s; one_step("resnet/resnet18.json", 0, 0); }
static void test_resnet50_train(void **s) { (void)s; one_step("resnet/resnet50.json", 1, 0); }
static void test_resnet50_eval(void **s) { (void)s; one_step("resnet/resnet50.json", 0, 0); }
/* the head's gradients of a frozen backbone are the whole model's */
static void test_frozen_backbone(void **s) { (void)s; one_step("resnet/cifar.json", 1, 1); }

int main(void) {
    tu_cuda_require(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cifar_train),    cmocka_unit_test(test_cifar_eval),
        cmocka_unit_test(test_grouped_train),  cmocka_unit_test(test_grouped_eval),
        cmocka_unit_test(test_resnet18_train), cmocka_unit_test(test_resnet18_eval),
        cmocka_unit_test(test_resnet50_train), cmocka_unit_test(test_resnet50_eval),
        cmocka_unit_test(test_frozen_backbone),
    };
    return cmocka_run_group_tests(tests, tu_cuda_setup, tu_cuda_teardown);
}
