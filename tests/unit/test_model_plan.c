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
    /* a leaf layer is a model of its own, as an nn.Module is */
    assert_int_equal(plan(&p, "{\"type\":\"Linear\"}", 1, 0, 0, &e), -1);
    assert_string_equal(e.message, "the model: Linear has no valid in_features/out_features in its spec");
    assert_int_equal(plan(&p, "[1]", 1, 0, 0, &e), -1);
    assert_string_equal(e.message, "the model spec is not a module");
    assert_int_equal(plan(&p, SEQ(""), 1, 0, 0, &e), -1);
    assert_string_equal(e.message, "the Sequential has no layers");
    assert_int_equal(plan(&p, SEQ("{\"type\":\"LSTM\"}"), 0, 0, 0, &e), -1);
    assert_string_equal(e.message, "layer 0: LSTM is not a layer the trainer supports");
    assert_int_equal(plan(&p, SEQ(LIN(4, 2)), 0, 5, 5, &e), -1);
    assert_non_null(strstr(e.message, "invalid input shape"));
}

#define BLOCK(in, planes, stride, ds) "{\"type\":\"BasicBlock\",\"inplanes\":" #in ",\"planes\":" #planes \
    ",\"stride\":" #stride ",\"downsample\":" ds "}"
#define DOWN(in, out) SEQ("{\"type\":\"Conv2d\",\"in_channels\":" #in ",\"out_channels\":" #out \
    ",\"kernel_size\":1,\"stride\":2,\"bias\":false},{\"type\":\"BatchNorm2d\",\"num_features\":" #out "}")
#define CIFAR SEQ(CONV(3, 16) ",{\"type\":\"ReLU\"}," BLOCK(16, 16, 1, "null") "," BLOCK(16, 32, 2, DOWN(16, 32)) \
    ",{\"type\":\"AdaptiveAvgPool2d\",\"output_size\":[1,1]},{\"type\":\"Flatten\"}," LIN(32, 10))

/* Blocks lower to ops with torchvision's state_dict names; the residual sums read two tensors,
 * a block's input feeding its first convolution and its sum (or its downsample). */
static void test_blocks_lower_to_a_graph(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    assert_int_equal(plan(&p, CIFAR, 3, 16, 16, &e), 0);
    int64_t w[4] = {32, 16, 1, 1}, c3[4] = {16, 16, 3, 3}, b[1] = {32};
    assert_entry(&p, "2.conv1.weight", 4, c3, "F32");
    assert_entry(&p, "3.downsample.0.weight", 4, w, "F32");
    assert_entry(&p, "3.downsample.1.running_var", 1, b, "F32");
    assert_entry(&p, "3.bn2.num_batches_tracked", 0, b, "I64");
    assert_null(taas_model_plan_find(&p, "2.conv1.bias"));  /* bias=False, as torchvision's */
    int adds = 0;
    for (int i = 0; i < p.nlayers; i++) {
        const taas_model_layer *L = &p.layers[i];
        if (L->kind != TAAS_L_ADD) continue;
        adds++;
        assert_int_equal(L->nsrc, 2);
        /* the block's last BatchNorm's output, and the identity (or the downsample's) */
        assert_true(L->src[0] <= i && L->src[1] <= i && L->src[0] != L->src[1]);
        assert_string_equal(p.layers[L->src[0] - 1].path, adds == 1 ? "2.bn2" : "3.bn2");
        assert_true(L->overwrite);                     /* out += identity */
    }
    assert_int_equal(adds, 2);
    /* the output: (N, 10), after the pool's (N, 32, 1, 1) */
    assert_int_equal(p.layers[p.nlayers - 1].out.d[0], 10);
    assert_int_equal(p.layers[p.nlayers - 3].out.d[1], 1);
    assert_int_equal(p.ntrain, p.nparams);
    taas_model_plan_free(&p);
    /* without the input shape, the table is whole all the same */
    assert_int_equal(plan(&p, CIFAR, 0, 0, 0, &e), 0);
    assert_entry(&p, "3.downsample.0.weight", 4, w, "F32");
    taas_model_plan_free(&p);
}

static void test_block_errors_name_the_path(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    /* a stride without a downsample: the sum's shapes differ */
    assert_int_equal(plan(&p, SEQ(BLOCK(16, 32, 2, "null")), 16, 8, 8, &e), -1);
    assert_string_equal(e.message, "layer 0.add: the residual sum adds (N, 32, 4, 4) from layer 0.bn2 (BatchNorm2d) "
                                   "to (N, 16, 8, 8) from the input");
    assert_non_null(strstr(e.hint, "downsample"));
    /* a layer inside a block names its path */
    assert_int_equal(plan(&p, SEQ(BLOCK(16, 16, 1, "null")), 8, 8, 8, &e), -1);
    assert_string_equal(e.message, "layer 0.conv1: Conv2d(in_channels=16) gets 8 channels (N, 8, 8, 8) from the input");
    assert_int_equal(plan(&p, "{\"type\":\"BasicBlock\",\"inplanes\":16,\"planes\":16,\"groups\":2}", 16, 8, 8,
                          &e), -1);
    assert_non_null(strstr(e.message, "the model: BasicBlock has invalid arguments"));
    /* a padding the kernel allows (an int) whose padded side no int holds: refused, no overflow;
     * a number no int holds in a spec: invalid */
    assert_int_equal(plan(&p, SEQ("{\"type\":\"Conv2d\",\"in_channels\":3,\"out_channels\":4,\"kernel_size\":3,"
                                  "\"padding\":2000000000}"), 3, 8, 8, &e), -1);
    assert_non_null(strstr(e.message, "layer 0: Conv2d: the input 8x8 with padding 2000000000x2000000000 is larger"));
    assert_int_equal(plan(&p, SEQ("{\"type\":\"MaxPool2d\",\"kernel_size\":3,\"padding\":2000000000}"), 3, 8, 8, &e), -1);
    assert_int_equal(plan(&p, SEQ("{\"type\":\"Conv2d\",\"in_channels\":3,\"out_channels\":4,\"kernel_size\":3,"
                                  "\"padding\":10000000000000001}"), 3, 8, 8, &e), -1);
    assert_string_equal(e.message, "layer 0: Conv2d has an invalid padding in its spec");
    assert_int_equal(plan(&p, "{\"type\":\"Bottleneck\",\"inplanes\":16,\"planes\":2000000000,\"groups\":64}", 16, 8,
                          8, &e), -1);
    assert_non_null(strstr(e.message, "the model: Bottleneck's width"));
    /* nesting is bounded */
    char deep[4096] = "";
    for (int i = 0; i < 40; i++) strcat(deep, "{\"type\":\"Sequential\",\"layers\":[");
    strcat(deep, "{\"type\":\"ReLU\"}");
    for (int i = 0; i < 40; i++) strcat(deep, "]}");
    assert_int_equal(plan(&p, deep, 1, 0, 0, &e), -1);
    assert_non_null(strstr(e.message, "nests modules more than 32 deep"));
}

/* requires_grad: the nearest module that says it decides; trainable parameters come first. */
static void test_frozen_parameters_come_last(void **state) {
    (void)state;
    taas_model_plan p;
    taas_error e;
    assert_int_equal(plan(&p, "{\"type\":\"Sequential\",\"requires_grad\":false,\"layers\":[" LIN(4, 3) ","
                              "{\"type\":\"Linear\",\"in_features\":3,\"out_features\":2,\"requires_grad\":true}]}",
                          4, 0, 0, &e), 0);
    assert_int_equal(p.nparams, 4 * 3 + 3 + 3 * 2 + 2);
    assert_int_equal(p.ntrain, 3 * 2 + 2);
    assert_int_equal(taas_model_plan_find(&p, "1.weight")->offset, 0);
    assert_int_equal(taas_model_plan_find(&p, "1.bias")->offset, 6);
    assert_int_equal(taas_model_plan_find(&p, "0.weight")->offset, 8);
    assert_int_equal(taas_model_plan_find(&p, "0.bias")->offset, 20);
    assert_true(p.layers[0].frozen && !p.layers[1].frozen);
    assert_int_equal(p.layers[1].w_off, 0);
    assert_int_equal(p.layers[0].b_off, 20);
    taas_model_plan_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_net_with_its_input),
        cmocka_unit_test(test_shape_error_names_the_layer),
        cmocka_unit_test(test_without_the_input_shape),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_fusion_is_decided_by_the_plan),
        cmocka_unit_test(test_blocks_lower_to_a_graph),
        cmocka_unit_test(test_block_errors_name_the_path),
        cmocka_unit_test(test_frozen_parameters_come_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
