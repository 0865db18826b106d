/* The graph core (model_plan.c, model_memory.c, model_run.c) against torchvision 1.13's
 * ResNets (tests/data/resnet/, made by tests/gen_resnet_ref.py): one training step of
 * resnet18 at 32x32, resnet50 at 64x64, a CIFAR-style Sequential of BasicBlocks and grouped
 * convolutions (a ResNeXt Bottleneck, a depthwise Conv2d), in train
 * mode and in eval mode: the state_dict's keys and shapes, the logits, the loss, every
 * gradient, every tensor after an SGD step with momentum and weight decay, and the running
 * statistics the step updates. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "fixture_testutil.h"
#include "loss.h"
#include "model.h"
#include "optim.h"
#include "resnet_testutil.h"

/* Beyond RT_TIMES torch's own float32 error (resnet_testutil.h): the logits and loss to 1e-4,
 * gradients and updated tensors to 1e-3 of their scale. */
#define TOL_OUT 1e-4
#define TOL_GRAD 1e-3

static void one_step(const char *file, int train) {
    json_t *ref = tu_fixture_load(file);
    assert_non_null(ref);
    const json_t *in = json_object_get(ref, "input"), *ys = json_object_get(ref, "y");
    const json_t *r = json_object_get(ref, train ? "train" : "eval");
    int c = (int)json_integer_value(json_array_get(in, 0)), h = (int)json_integer_value(json_array_get(in, 1));
    int w = (int)json_integer_value(json_array_get(in, 2)), n = (int)json_integer_value(json_object_get(ref, "n"));
    taas_error e;
    taas_error_clear(&e);
    taas_model *m = taas_model_new(json_object_get(ref, "spec"), c, h, w, 1, &e);
    if (!m) fprintf(stderr, "%s\n", e.message);
    assert_non_null(m);
    taas_model_set_threads(m, 2);
    assert_int_equal(rt_fill(m, json_object_get(ref, "keys")), 0);
    size_t nx = (size_t)n * (size_t)(c * h * w);
    float *x = malloc(nx * sizeof *x);
    int64_t *y = malloc((size_t)n * sizeof *y);
    rt_input(x, nx, (uint64_t)json_integer_value(json_object_get(ref, "input_index")));
    for (int i = 0; i < n; i++) y[i] = json_integer_value(json_array_get(ys, (size_t)i));
    int k = (int)taas_model_out_numel(m);
    float *probs = malloc((size_t)(n * k) * sizeof *probs), *dlogits = malloc((size_t)(n * k) * sizeof *dlogits);
    const float *out;
    float loss;
    taas_model_zero_grad(m);
    assert_int_equal(taas_model_forward(m, x, n, train, 0, &out, &e), 0);
    const json_t *logits = json_object_get(r, "logits");
    double lerr = RT_TIMES * json_number_value(json_object_get(r, "logits_err"));
    assert_int_equal(json_array_size(logits), (size_t)(n * k));
    for (int i = 0; i < n * k; i++) {
        double want = json_number_value(json_array_get(logits, (size_t)i));
        if (fabs(out[i] - want) > lerr + TOL_OUT * fmax(1.0, fabs(want)))
            fail_msg("logit %d: %.8g, torch %.8g", i, out[i], want);
    }
    assert_int_equal(taas_cross_entropy_forward(&loss, probs, out, y, n, k, 0.0f, -100, &e), 0);
    double want = json_number_value(json_object_get(r, "loss"));
    if (fabs(loss - want) > RT_TIMES * json_number_value(json_object_get(r, "loss_err")) + TOL_OUT * fmax(1.0, want))
        fail_msg("loss %.8g, torch %.8g", loss, want);
    taas_cross_entropy_backward(dlogits, probs, y, n, k, 0.0f, -100, 1.0f);
    assert_int_equal(taas_model_backward(m, dlogits, &e), 0);
    int bad = 0;
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        if (t->home != TAAS_T_PARAM) continue;
        const json_t *g = json_object_get(json_object_get(r, "grads"), t->key);
        assert_non_null(g);
        bad |= rt_check(m->grads + t->offset, t->numel, g, TOL_GRAD, t->key);
    }
    taas_optim_config cfg;
    taas_optim_config_default(&cfg, TAAS_OPTIM_SGD);
    cfg.lr = 0.1;
    cfg.momentum = 0.9;
    cfg.weight_decay = 1e-4;
    float *state = calloc(taas_optim_state_floats(&cfg, m->ntrain), sizeof *state);
    taas_optim_step(&cfg, m->params, m->grads, state, m->ntrain, 1);
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        if (t->home == TAAS_T_COUNTER) continue;
        const json_t *a = json_object_get(json_object_get(r, "after"), t->key);
        assert_non_null(a);
        bad |= rt_check((t->home == TAAS_T_PARAM ? m->params : m->stats) + t->offset, t->numel, a, TOL_GRAD, t->key);
    }
    assert_int_equal(bad, 0);
    free(state), free(probs), free(dlogits), free(x), free(y);
    taas_model_free(m);
    json_decref(ref);
}

static void test_cifar_train(void **s) { (void)s; one_step("resnet/cifar.json", 1); }
static void test_cifar_eval(void **s) { (void)s; one_step("resnet/cifar.json", 0); }
static void test_grouped_train(void **s) { (void)s; one_step("resnet/grouped.json", 1); }
static void test_grouped_eval(void **s) { (void)s; one_step("resnet/grouped.json", 0); }
static void test_resnet18_train(void **s) { (void)s; one_step("resnet/resnet18.json", 1); }
static void test_resnet18_eval(void **s) { (void)s; one_step("resnet/resnet18.json", 0); }
static void test_resnet50_train(void **s) { (void)s; one_step("resnet/resnet50.json", 1); }
static void test_resnet50_eval(void **s) { (void)s; one_step("resnet/resnet50.json", 0); }

/* Fine-tuning: the backbone frozen (requires_grad False on the root, True again on the head).
 * The head's gradients are the unfrozen model's, bit for bit; the frozen parameters come
 * after the trainable ones and have no gradients; nothing upstream of the head is computed
 * in backward, so the step needs less memory; BatchNorm still updates its running stats in
 * train mode, as PyTorch's does. */
static void test_frozen_backbone(void **s) {
    (void)s;
    json_t *ref = tu_fixture_load("resnet/cifar.json");
    assert_non_null(ref);
    json_t *spec = rt_frozen_spec(ref);
    taas_error e;
    taas_model *full = taas_model_new(json_object_get(ref, "spec"), 3, 16, 16, 1, &e);
    taas_model *ft = taas_model_new(spec, 3, 16, 16, 1, &e);
    assert_non_null(full);
    assert_non_null(ft);
    assert_int_equal(ft->nparams, full->nparams);
    assert_int_equal(ft->ntrain, 32 * 10 + 10);
    const taas_param_entry *fw = taas_model_find(ft, "7.weight"), *cw = taas_model_find(ft, "0.weight");
    assert_true(fw->offset < ft->ntrain && cw->offset >= ft->ntrain);
    assert_int_equal(rt_fill(full, json_object_get(ref, "keys")), 0);
    assert_int_equal(rt_fill(ft, json_object_get(ref, "keys")), 0);
    int n = 8, k = 10;
    float *x = malloc((size_t)n * 3 * 16 * 16 * sizeof *x), probs[80], dl[80], loss;
    int64_t y[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    rt_input(x, (size_t)n * 3 * 16 * 16, 7);
    const float *out;
    taas_model *ms[2] = {full, ft};
    for (int i = 0; i < 2; i++) {
        taas_model_zero_grad(ms[i]);
        assert_int_equal(taas_model_forward(ms[i], x, n, 1, 0, &out, &e), 0);
        assert_int_equal(taas_cross_entropy_forward(&loss, probs, out, y, n, k, 0.0f, -100, &e), 0);
        taas_cross_entropy_backward(dl, probs, y, n, k, 0.0f, -100, 1.0f);
        assert_int_equal(taas_model_backward(ms[i], dl, &e), 0);
    }
    const taas_param_entry *fullw = taas_model_find(full, "7.weight");
    assert_memory_equal(ft->grads + fw->offset, full->grads + fullw->offset, 320 * sizeof(float));
    const taas_param_entry *rm = taas_model_find(ft, "1.running_mean");
    assert_memory_equal(ft->stats + rm->offset, full->stats + taas_model_find(full, "1.running_mean")->offset,
                        16 * sizeof(float));
    assert_true(ft->mem.bytes < full->mem.bytes);
    free(x);
    taas_model_free(full);
    taas_model_free(ft);
    json_decref(spec);
    json_decref(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cifar_train),    cmocka_unit_test(test_cifar_eval),
        cmocka_unit_test(test_grouped_train),  cmocka_unit_test(test_grouped_eval),
        cmocka_unit_test(test_resnet18_train), cmocka_unit_test(test_resnet18_eval),
        cmocka_unit_test(test_resnet50_train), cmocka_unit_test(test_resnet50_eval),
        cmocka_unit_test(test_frozen_backbone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
