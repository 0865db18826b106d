/* workers/train/model_plan.c: a model's shapes and state_dict table without its numbers,
 * as the kernel uses it — with the input shape (errors name the layer) and without it
 * (the table from the specs alone, a Lazy layer's inferred size 0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "model_plan.h"

#define SEQ(layers) "{\"type\":\"Sequential\",\"layers\":[" layers "]}"
#define CONV(i, o) "{\"type\":\"Conv2d\",\"in_channels\":" #i ",\"out_channels\":" #o ",\"kernel_size\":3}"
#define LIN(i, o) "{\"type\":\"Linear\",\"in_features\":" #i ",\"out_features\":" #o "}"
#define BN1(n) "{\"type\":\"BatchNorm1d\",\"num_features\":" #n "}"
#define DESIGN_NET SEQ(CONV(1, 32) ",{\"type\":\"ReLU\"}," CONV(32, 64) ",{\"type\":\"ReLU\"}," \
    "{\"type\":\"MaxPool2d\",\"kernel_size\":2},{\"type\":\"Dropout\",\"p\":0.25},{\"type\":\"Flatten\"}," \
    LIN(9216, 128) "," BN1(128) ",{\"type\":\"ReLU\"},{\"type\":\"Dropout\",\"p\":0.5}," LIN(128, 10) \
    ",{\"type\":\"LogSoftmax\",\"dim\":1}")

static int plan(taas_model_plan *p, const char *spec, int c, int h, int w, taas_error *e) {
    json_t *j = json_loads(spec, 0, NULL);
    assert_non_null(j);
    taas_error_clear(e);
    int rc = taas_model_plan_build(p, j, c, h, w, e);
    json_decref(j);
    return rc;
}

static void assert_entry(const taas_model_plan *p, const char *key, int ndim, const int64_t *shape, const char *dtype) {
    const taas_param_entry *t = taas_model_plan_find(p, key);
    if (!t) fail_msg("no %s in the plan", key);
    assert_int_equal(t->ndim, ndim);
    for (int k = 0; k < ndim; k++) assert_int_equal(t->shape[k], shape[k]);
    assert_string_equal(t->dtype, dtype);
}

static void test_design_net_with_its_input(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    assert_int_equal(plan(&p, DESIGN_NET, 1, 28, 28, &e), 0);
    assert_int_equal(p.nlayers, 13);
    /* the state_dict of torch.nn.Sequential, in its order */
    const char *keys[] = {"0.weight", "0.bias", "2.weight", "2.bias", "7.weight", "7.bias", "8.weight", "8.bias",
                          "8.running_mean", "8.running_var", "8.num_batches_tracked", "11.weight", "11.bias"};
    assert_int_equal(p.ntable, sizeof keys / sizeof *keys);
    for (size_t i = 0; i < p.ntable; i++) assert_string_equal(p.table[i].key, keys[i]);
    assert_entry(&p, "2.weight", 4, (int64_t[]){64, 32, 3, 3}, "F32");
    assert_entry(&p, "8.num_batches_tracked", 0, NULL, "I64");
    assert_int_equal(p.nparams, 320 + 18496 + 9216 * 128 + 128 + 2 * 128 + 1290);
    assert_int_equal(p.layers[4].out.rank, 3);
    assert_int_equal(p.layers[4].out.d[1], 12);
    assert_int_equal(p.layers[6].out.d[0], 9216);
    taas_model_plan_free(&p);
}

static void test_shape_error_names_the_layer(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    const char *bad = SEQ(CONV(1, 32) ",{\"type\":\"Flatten\"}," LIN(9000, 10));
    assert_int_equal(plan(&p, bad, 1, 28, 28, &e), -1);
    assert_string_equal(e.message, "layer 2: Linear(in_features=9000) gets 21632 features from layer 1 (Flatten)");
    assert_string_equal(e.hint, "write Linear(21632, 10), or LazyLinear(10) to infer it");
    assert_null(p.layers);
    assert_int_equal(p.ntable, 0);
}

static void test_without_the_input_shape(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    /* every tensor's shape from the specs alone */
    assert_int_equal(plan(&p, DESIGN_NET, 0, 0, 0, &e), 0);
    assert_int_equal(p.ntable, 13);
    assert_entry(&p, "0.weight", 4, (int64_t[]){32, 1, 3, 3}, "F32");
    assert_entry(&p, "7.weight", 2, (int64_t[]){128, 9216}, "F32");
    assert_entry(&p, "8.running_var", 1, (int64_t[]){128}, "F32");
    taas_model_plan_free(&p);
    /* a Lazy layer's inferred size is unknown: 0 */
    assert_int_equal(plan(&p, SEQ("{\"type\":\"Flatten\"},{\"type\":\"LazyLinear\",\"out_features\":10}"), 0, 0, 0, &e), 0);
    assert_entry(&p, "1.weight", 2, (int64_t[]){10, 0}, "F32");
    assert_entry(&p, "1.bias", 1, (int64_t[]){10}, "F32");
    taas_model_plan_free(&p);
    assert_int_equal(plan(&p, SEQ("{\"type\":\"LazyConv2d\",\"out_channels\":8,\"kernel_size\":[5,3],\"bias\":false}"),
                          0, 0, 0, &e), 0);
    assert_entry(&p, "0.weight", 4, (int64_t[]){8, 0, 5, 3}, "F32");
    assert_null(taas_model_plan_find(&p, "0.bias"));
    taas_model_plan_free(&p);
    /* after a Linear the shape is known again, so a mismatch there is still found */
    assert_int_equal(plan(&p, SEQ(CONV(1, 4) ",{\"type\":\"Flatten\"}," LIN(100, 64) "," BN1(32)), 0, 0, 0, &e), -1);
    assert_string_equal(e.message, "layer 3: BatchNorm1d(num_features=32) gets 64 features (N, 64) from layer 2 (Linear)");
}

/* The fusion rules, decided here for both runners: each Conv2d+ReLU pair, Flatten in place,
 * the ReLU after BatchNorm1d left alone; a final LogSoftmax over features folds into NLLLoss. */
static void test_fusion_is_decided_by_the_plan(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    assert_int_equal(plan(&p, DESIGN_NET, 1, 28, 28, &e), 0);
    static const taas_layer_fusion want[] = {TAAS_FUSE_RELU, TAAS_FUSED, TAAS_FUSE_RELU, TAAS_FUSED, TAAS_FUSE_NONE,
                                             TAAS_FUSE_NONE, TAAS_FUSE_NONE, TAAS_FUSE_NONE, TAAS_FUSE_NONE,
                                             TAAS_FUSE_NONE, TAAS_FUSE_NONE, TAAS_FUSE_NONE, TAAS_FUSE_NONE};
    assert_int_equal(p.nlayers, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < p.nlayers; i++) {
        assert_int_equal(p.layers[i].fusion, want[i]);
        assert_int_equal(p.layers[i].in_place, i == 1 || i == 3 || i == 6);
    }
    assert_true(taas_layers_fold_into_nll(p.layers, p.nlayers));
    assert_false(taas_layers_fold_into_nll(p.layers, p.nlayers - 1));
    taas_model_plan_free(&p);
    /* Dropout with p = 0 is the identity: in place, nothing to run; p > 0 is not */
    assert_int_equal(plan(&p, SEQ("{\"type\":\"Dropout\",\"p\":0},{\"type\":\"Dropout2d\",\"p\":0},"
                                  "{\"type\":\"Dropout\",\"p\":0.1}"), 1, 4, 4, &e), 0);
    assert_true(p.layers[0].in_place && p.layers[1].in_place);
    assert_false(p.layers[2].in_place);
    taas_model_plan_free(&p);
    /* a LogSoftmax over channels (dim 1 of (N, C, H, W)) is not a classifier's */
    assert_int_equal(plan(&p, SEQ(CONV(1, 2) ",{\"type\":\"LogSoftmax\",\"dim\":1}"), 1, 5, 5, &e), 0);
    assert_false(taas_layers_fold_into_nll(p.layers, p.nlayers));
    assert_int_equal(p.layers[0].fusion, TAAS_FUSE_NONE);
    taas_model_plan_free(&p);
}

static void test_bad_specs(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    assert_int_equal(plan(&p, "{\"type\":\"Linear\"}", 1, 0, 0, &e), -1);
    assert_non_null(strstr(e.message, "not a Sequential"));
    assert_int_equal(plan(&p, SEQ(""), 1, 0, 0, &e), -1);
    assert_string_equal(e.message, "the Sequential has no layers");
    assert_int_equal(plan(&p, SEQ("{\"type\":\"LSTM\"}"), 0, 0, 0, &e), -1);
    assert_string_equal(e.message, "layer 0: LSTM is not a layer the trainer supports");
    assert_int_equal(plan(&p, SEQ(LIN(4, 2)), 0, 5, 5, &e), -1);
    assert_non_null(strstr(e.message, "invalid input shape"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_net_with_its_input),
        cmocka_unit_test(test_shape_error_names_the_layer),
        cmocka_unit_test(test_without_the_input_shape),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_fusion_is_decided_by_the_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
