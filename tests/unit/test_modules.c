/* kernel/lang/modules.c and the language around it (issue 28 §2 and §5): torchvision's
 * ResNets and their parts as PyTorch prints and counts them (tests/data/models/modules_ref.json,
 * from tests/gen_modules_ref.py), their specs, attribute and item access, replacing a part
 * (in place: aliases see it, as in PyTorch), requires_grad_, and every error on the way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval.h"
#include "fixture_testutil.h"
#include "modelview.h"
#include "modules.h"
#include "parser.h"
#include "safetensors.h"

static taas_scope *scope;

static int setup(void **state) {
    (void)state;
    scope = taas_scope_new();
    return scope ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    taas_scope_free(scope);
    return 0;
}

/* Runs every statement of src; the last one's value (new reference), or NULL with err. */
static taas_value *run(const char *src, taas_error *err) {
    taas_program p;
    taas_error_clear(err);
    if (taas_parse(src, &p, err)) return NULL;
    taas_eval_env env = {scope, src, taas_interp_quiet_io(), NULL};
    taas_value *last = NULL;
    double wait;
    for (size_t i = 0; i < p.n; i++) {
        taas_unref(last);
        last = NULL;
        if (taas_eval_stmt(&env, &p.stmts[i], &last, &wait, err)) break;
    }
    taas_program_free(&p);
    return last;
}

static taas_value *ok(const char *src) {
    taas_error err;
    taas_value *v = run(src, &err);
    if (!v) fail_msg("%s failed: %s: %s (%s)", src, err.ename, err.message, err.hint);
    return v;
}

static char *repr_of(const char *src) {
    taas_value *v = ok(src);
    char *r = taas_value_repr(v);
    taas_unref(v);
    return r;
}

static const taas_error *fails(const char *src, const char *ename, const char *msg, const char *hint) {
    static taas_error err;
    taas_value *v = run(src, &err);
    if (v) fail_msg("%s should fail with %s", src, msg);
    if (strcmp(err.ename, ename)) fail_msg("%s: ename %s, wanted %s (%s)", src, err.ename, ename, err.message);
    if (!strstr(err.message, msg)) fail_msg("%s: message \"%s\", wanted \"%s\"", src, err.message, msg);
    if (hint && !strstr(err.hint, hint)) fail_msg("%s: hint \"%s\", wanted \"%s\"", src, err.hint, hint);
    if (!err.hint[0]) fail_msg("%s: no hint", src);
    if (err.pos.line < 1) fail_msg("%s: the error has no position", src);
    return &err;
}

/* Every cell of the fixture: the repr PyTorch prints and its parameter counts. */
static void test_as_pytorch_prints_and_counts(void **state) {
    (void)state;
    json_t *ref = tu_fixture_load("models/modules_ref.json");
    assert_non_null(ref);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(ref, "cells"), i, c) {
        const char *cell = json_string_value(json_object_get(c, "cell"));
        taas_value *v = ok(cell);
        char *r = taas_value_repr(v);
        if (strcmp(r, json_string_value(json_object_get(c, "repr"))))
            fail_msg("%s\n--- taas:\n%s\n--- torch:\n%s", cell, r, json_string_value(json_object_get(c, "repr")));
        free(r);
        if (json_object_get(c, "total")) {
            int64_t total, trainable;
            assert_true(taas_module_count(v, &total, &trainable));
            if (total != json_integer_value(json_object_get(c, "total")) ||
                trainable != json_integer_value(json_object_get(c, "trainable")))
                fail_msg("%s: %lld of %lld train, torch: %lld of %lld", cell, (long long)trainable, (long long)total,
                         (long long)json_integer_value(json_object_get(c, "trainable")),
                         (long long)json_integer_value(json_object_get(c, "total")));
        }
        taas_unref(v);
        taas_scope_free(scope);
        scope = taas_scope_new();
    }
    json_decref(ref);
}

static char *spec_of(const char *src) {
    taas_value *v = ok(src);
    json_t *s = taas_value_spec(v);
    char *t = json_dumps(s, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(s);
    taas_unref(v);
    return t;
}

static void spec_is(const char *src, const char *want) {
    char *t = spec_of(src);
    if (strcmp(t, want)) fail_msg("%s: spec\n%s\nwanted\n%s", src, t, want);
    free(t);
}

#define DOWN "{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Conv2d\",\"in_channels\":64,\"out_channels\":128," \
             "\"kernel_size\":[1,1],\"stride\":[2,2],\"padding\":[0,0],\"dilation\":[1,1],\"groups\":1,\"bias\":false," \
             "\"padding_mode\":\"zeros\"},{\"type\":\"BatchNorm2d\",\"num_features\":128,\"eps\":1.0000000000000001e-5," \
             "\"momentum\":0.10000000000000001,\"affine\":true,\"track_running_stats\":true}]}"

/* The contract with the workers (workers/train/model_plan.c reads these). */
static void test_specs(void **state) {
    (void)state;
    spec_is("AdaptiveAvgPool2d(1)", "{\"type\":\"AdaptiveAvgPool2d\",\"output_size\":[1,1]}");
    spec_is("AdaptiveAvgPool2d((7, 5))", "{\"type\":\"AdaptiveAvgPool2d\",\"output_size\":[7,5]}");
    spec_is("Identity(54, unused_argument1=0.1)", "{\"type\":\"Identity\"}");
    spec_is("BasicBlock(64, 64)", "{\"type\":\"BasicBlock\",\"inplanes\":64,\"planes\":64,\"stride\":1,\"downsample\":null,"
                                  "\"groups\":1,\"base_width\":64,\"dilation\":1,\"norm_layer\":null}");
    spec_is("BasicBlock(64, 128, 2, Sequential(Conv2d(64, 128, 1, stride=2, bias=False), BatchNorm2d(128)), "
            "norm_layer=nn.BatchNorm2d)",
            "{\"type\":\"BasicBlock\",\"inplanes\":64,\"planes\":128,\"stride\":2,\"downsample\":" DOWN
            ",\"groups\":1,\"base_width\":64,\"dilation\":1,\"norm_layer\":null}");
    spec_is("Bottleneck(64, 64, groups=32, base_width=4)",
            "{\"type\":\"Bottleneck\",\"inplanes\":64,\"planes\":64,\"stride\":1,\"downsample\":null,\"groups\":32,"
            "\"base_width\":4,\"dilation\":1,\"norm_layer\":null}");
    /* a ResNet: its children by name, in torchvision's order, and zero_init_residual */
    taas_value *net = ok("resnet18(zero_init_residual=True)");
    json_t *s = taas_value_spec(net);
    taas_unref(net);
    const char *key;
    json_t *v;
    const char *order[] = {"type", "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4",
                           "avgpool", "fc", "zero_init_residual"};
    size_t k = 0;
    json_object_foreach(s, key, v) assert_string_equal(key, order[k++]);
    assert_int_equal(k, 12);
    assert_string_equal(json_string_value(json_object_get(s, "type")), "ResNet");
    assert_true(json_is_true(json_object_get(s, "zero_init_residual")));
    json_t *b = json_array_get(json_object_get(json_object_get(s, "layer2"), "layers"), 0);
    assert_string_equal(json_string_value(json_object_get(b, "type")), "BasicBlock");
    assert_int_equal(json_integer_value(json_object_get(b, "stride")), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(b, "downsample"), "type")), "Sequential");
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(json_object_get(s, "layer2"), "layers"), 1),
                                             "downsample")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "fc"), "out_features")), 1000);
    json_decref(s);
    /* requires_grad: on the module and every module it stores; the new head has none */
    spec_is("n = Sequential(Linear(2, 2), Sequential(ReLU()))\nn.requires_grad_(False)\nn[0] = Linear(2, 3)\nn",
            "{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Linear\",\"in_features\":2,\"out_features\":3,\"bias\":true,"
            "\"requires_grad\":true},"
            "{\"type\":\"Sequential\",\"layers\":[{\"type\":\"ReLU\",\"inplace\":false,\"requires_grad\":false}],"
            "\"requires_grad\":false}],\"requires_grad\":false}");
    spec_is("n = Sequential(Linear(2, 2))\nn.requires_grad_(False)\nn[0].requires_grad_()\nn",
            "{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Linear\",\"in_features\":2,\"out_features\":2,\"bias\":true,"
            "\"requires_grad\":true}],\"requires_grad\":false}");
    spec_is("requires_grad_(BasicBlock(8, 8), requires_grad=False)",
            "{\"type\":\"BasicBlock\",\"inplanes\":8,\"planes\":8,\"stride\":1,\"downsample\":null,\"groups\":1,"
            "\"base_width\":64,\"dilation\":1,\"norm_layer\":null,\"requires_grad\":false}");
}

/* PyTorch's semantics: the model changes in place, and every name that holds it sees it. */
static void test_in_place_and_aliases(void **state) {
    (void)state;
    taas_value *v = ok("a = Sequential(Linear(2, 2), ReLU())\nb = a\nkept = a.layers\nhead = a[0]\n"
                       "a[0] = Linear(2, 3)\nb[0]");
    char *r = taas_value_repr(v);
    assert_string_equal(r, "Linear(in_features=2, out_features=3, bias=True)");
    free(r);
    taas_unref(v);
    /* what was read out before stays as it was: the layers' tuple, the old head */
    r = repr_of("kept, head");
    assert_string_equal(r, "((Linear(in_features=2, out_features=2, bias=True), ReLU()), "
                           "Linear(in_features=2, out_features=2, bias=True))");
    free(r);
    /* a part shared by two models changes in both, as one torch module would */
    r = repr_of("blk = Sequential(Linear(1, 1))\nx = Sequential(blk)\ny = Sequential(blk, ReLU())\nblk[0] = Tanh()\nx, y");
    assert_string_equal(r, "(Sequential(\n  (0): Sequential(\n    (0): Tanh()\n  )\n), Sequential(\n  (0): Sequential(\n"
                           "    (0): Tanh()\n  )\n  (1): ReLU()\n))");
    free(r);
    /* requires_grad_ returns the model itself */
    r = repr_of("m = Linear(1, 1)\nm2 = m.requires_grad_(False)\nm2.requires_grad_(True)\nm");
    assert_string_equal(r, "Linear(in_features=1, out_features=1, bias=True)");
    free(r);
    v = ok("m");
    assert_int_equal(v->u.obj.requires_grad, 1);
    taas_unref(v);
    /* the measures of the models on the path follow the change */
    v = ok("deep = Sequential(Sequential(ReLU()))\ndeep[0][0] = Sequential(Sequential(Sequential(ReLU())))\ndeep");
    taas_value *fresh = ok("Sequential(Sequential(Sequential(Sequential(Sequential(ReLU())))))");
    assert_int_equal(v->u.obj.depth, fresh->u.obj.depth);
    assert_int_equal(v->u.obj.nodes, fresh->u.obj.nodes);
    taas_unref(fresh);
    taas_unref(v);
    r = repr_of("net = resnet18()\nnet.layer1[0].downsample = Sequential(Identity())\nnet.layer1[0].downsample = None\n"
                "net.layer1[0]");
    assert_null(strstr(r, "downsample"));
    free(r);
}

static void test_errors(void **state) {
    (void)state;
    taas_unref(ok("net = resnet18()\nseq = Sequential(Linear(4, 2), ReLU())\nt = (1, 2)"));
    const taas_error *e = fails("net.head", "TaasTypeError", "'ResNet' object has no attribute 'head'",
                                "ResNet has: conv1, bn1, relu, maxpool, layer1, layer2, layer3, layer4, avgpool, fc, "
                                "zero_init_residual, requires_grad_()");
    assert_int_equal(e->pos.col, 1);
    fails("net.layer1[0].conv3", "TaasTypeError", "'BasicBlock' object has no attribute 'conv3'",
          "BasicBlock has: conv1, bn1, relu, conv2, bn2, inplanes, planes, stride, downsample");
    fails("seq.fc = Linear(2, 2)", "TaasTypeError", "'Sequential' object has no attribute 'fc'",
          "a Sequential's layers are read and assigned by index");
    fails("seq[2]", "TaasValueError", "index 2 is out of range: the Sequential has 2 layers", "from 0 to 1, or from -2 to -1");
    fails("seq[-3] = ReLU()", "TaasValueError", "index -3 is out of range", NULL);
    fails("seq['a']", "TaasTypeError", "Sequential indices must be integers, not str", NULL);
    fails("net[0]", "TaasTypeError", "'ResNet' object is not subscriptable", "net.fc, net.layer1");
    fails("t[5]", "TaasValueError", "index 5 is out of range: the tuple has 2 items", NULL);
    fails("t[0] = 1", "TaasTypeError", "'tuple' object does not support item assignment", NULL);
    fails("seq[0] = 3", "TaasTypeError", "cannot assign 'int' as layer 0 of a Sequential: a module is expected", NULL);
    fails("net.fc = 'head'", "TaasTypeError", "cannot assign 'str' as 'fc' of a ResNet", NULL);
    fails("net.fc = None", "TaasTypeError", "cannot assign 'NoneType' as 'fc' of a ResNet", NULL);
    fails("seq[0] = seq", "TaasValueError", "the model would hold itself", NULL);
    fails("net.layer1[0] = net", "TaasValueError", "the model would hold itself", NULL);
    fails("net.layer1[0].conv1 = Conv2d(64, 64, 3)", "TaasTypeError",
          "BasicBlock.conv1 cannot be assigned: a block's children are made from its arguments", "replace the whole block");
    fails("net.fc.in_features = 3", "TaasTypeError", "Linear.in_features cannot be assigned", NULL);
    fails("net.zero_init_residual = True", "TaasTypeError", "ResNet.zero_init_residual cannot be assigned", NULL);
    fails("net.layer1[0].conv1.requires_grad_(False)", "TaasValueError",
          "this Conv2d is made from its block's arguments: requires_grad_() on it would change a copy",
          "net.layer1[0].requires_grad_(False)");
    fails("b = net.layer1\nb[0].bn2.requires_grad_()", "TaasValueError", "this BatchNorm2d is made from", NULL);
    /* a copy read out is a module of its own, which can go into another model */
    char *r0 = repr_of("c = net.layer1[0].conv1\nother = Sequential(c)\nother[0].requires_grad_(False)\nc.requires_grad_()");
    assert_string_equal(r0, "Conv2d(64, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)");
    free(r0);
    fails("net.requires_grad_", "TaasTypeError", "requires_grad_ is a method: call it", NULL);
    fails("t.requires_grad_(False)", "TaasTypeError", "'tuple' object has no attribute 'requires_grad_'", NULL);
    fails("net.requires_grad_(0)", "TaasTypeError", "requires_grad_() argument 'requires_grad' must be bool", NULL);
    fails("nn.Linear = 3", "TaasNameError", "name 'nn' is not defined", "a builtin cannot be assigned");
    fails("nope.fc = Linear(1, 1)", "TaasNameError", "name 'nope' is not defined", NULL);
    fails("seq[0] = sleep(0)", "TaasSyntaxError", "sleep() waits", NULL);
    /* what torchvision refuses, and what taas does not do */
    fails("resnet18(weights='IMAGENET1K_V1')", "TaasValueError", "pretrained weights are not downloaded",
          "scripts/pth_to_safetensors.py");
    fails("resnet18(groups=2)", "TaasValueError", "BasicBlock only supports groups=1 and base_width=64", NULL);
    fails("BasicBlock(64, 64, base_width=32)", "TaasValueError", "BasicBlock only supports groups=1 and base_width=64", NULL);
    fails("BasicBlock(64, 64, dilation=2)", "TaasValueError", "Dilation > 1 not supported in BasicBlock", NULL);
    fails("Bottleneck(64, 64, norm_layer=BatchNorm1d)", "TaasValueError", "norm_layer must be None or BatchNorm2d", NULL);
    fails("AdaptiveAvgPool2d((None, 7))", "TaasValueError", "output_size with None (keep that side of the input) is not "
                                                              "supported", "AdaptiveAvgPool2d((1, 1))");
    fails("AdaptiveAvgPool2d(0)", "TaasValueError", "output_size", NULL);
    fails("fit(3, None, loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasTypeError",
          "fit() argument 'model' must be a model (Sequential, ResNet, BasicBlock, Bottleneck or a layer), not int", NULL);
    /* a failed store changes nothing */
    char *r = repr_of("seq");
    assert_string_equal(r, "Sequential(\n  (0): Linear(in_features=4, out_features=2, bias=True)\n  (1): ReLU()\n)");
    free(r);
}

/* The names the module prefixes give. */
static void test_names(void **state) {
    (void)state;
    const char *same[] = {"resnet18()", "models.resnet18()", "torchvision.models.resnet18()"};
    char *first = repr_of(same[0]);
    for (size_t i = 1; i < 3; i++) {
        char *r = repr_of(same[i]);
        assert_string_equal(r, first);
        free(r);
    }
    free(first);
    taas_value *v = ok("torchvision.models.resnet.BasicBlock(8, 8), models.resnet.Bottleneck(8, 2), nn.Identity(), "
                       "torch.nn.AdaptiveAvgPool2d(2)");
    assert_int_equal(v->u.seq.n, 4);
    taas_unref(v);
    fails("nn.resnet18()", "TaasNameError", "name 'nn.resnet18' is not defined", NULL);
}

/* A replaced part of a model with weights: its tensors leave the weights, which become
 * partial (the new part is initialised when it trains); the rest stays byte for byte. */
static void test_replacing_a_part_of_loaded_weights(void **state) {
    (void)state;
    char dir[] = "/tmp/taas-test-modules-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    float w0[12], b0[3], w2[6], b2[2];
    for (int i = 0; i < 12; i++) w0[i] = (float)i;
    for (int i = 0; i < 3; i++) b0[i] = (float)-i;
    for (int i = 0; i < 6; i++) w2[i] = 0.5f * (float)i;
    b2[0] = b2[1] = 7;
    taas_st_tensor t[] = {{"0.weight", TAAS_ST_F32, 2, {3, 4}, w0}, {"0.bias", TAAS_ST_F32, 1, {3}, b0},
                          {"2.weight", TAAS_ST_F32, 2, {2, 3}, w2}, {"2.bias", TAAS_ST_F32, 1, {2}, b2}};
    taas_error err;
    assert_int_equal(taas_safetensors_write(path, t, 4, NULL, 0, &err), 0);
    char cell[256];
    /* a part without tensors for one without: the weights stay as they are, whole */
    snprintf(cell, sizeof cell, "net = Sequential(Linear(4, 3), ReLU(), Linear(3, 2))\nalias = net\n"
                                "load('%s', into=net)\nnet[1] = Tanh()\nnet", path);
    taas_value *net = ok(cell);
    assert_int_equal(taas_weights_partial(net->u.obj.weights, &err), 0);
    char *before = strdup(net->u.obj.weights);
    taas_unref(net);
    /* the same module put back: nothing changes, as in PyTorch */
    net = ok("net[0] = net[0]\nnet");
    assert_string_equal(net->u.obj.weights, before);
    assert_int_equal(taas_weights_partial(net->u.obj.weights, &err), 0);
    taas_unref(net);
    /* a part with tensors where there were none: partial, though no tensor left */
    net = ok("net[1] = BatchNorm1d(3)\nnet");
    assert_string_not_equal(net->u.obj.weights, before);
    assert_int_equal(access(before, F_OK), -1);  /* the model's own copy before went */
    free(before);
    assert_int_equal(taas_weights_partial(net->u.obj.weights, &err), 1);
    taas_unref(net);
    net = ok("net[-1] = Linear(3, 5)\nnet[1] = Tanh()\nalias");
    assert_non_null(net->u.obj.weights);
    assert_int_equal(taas_weights_partial(net->u.obj.weights, &err), 1);
    float r0[12] = {0}, rb[3] = {0};
    taas_st_tensor want[] = {{"0.weight", TAAS_ST_F32, 2, {3, 4}, r0}, {"0.bias", TAAS_ST_F32, 1, {3}, rb}};
    /* exactly the first layer's tensors, as they were */
    assert_int_equal(taas_safetensors_read(net->u.obj.weights, want, 2, &err), 0);
    assert_memory_equal(r0, w0, sizeof w0);
    assert_memory_equal(rb, b0, sizeof b0);
    taas_unref(net);
    /* and the summary says so */
    net = ok("net");
    json_t *b = taas_value_mimebundle(net);
    assert_non_null(strstr(json_string_value(json_object_get(b, "text/plain")), "weights: partial"));
    json_decref(b);
    taas_unref(net);
    unlink(path);
    taas_scope_free(scope);  /* the model's own copies go with it */
    scope = taas_scope_new();
    assert_int_equal(rmdir(dir), 0);
}

/* The display: a tree is torchinfo's table of modules by depth, with the counts of what
 * trains; with an input, the shapes and the planned peak of a step; a Sequential with a
 * frozen part says what trains. */
static void test_display_counts(void **state) {
    (void)state;
    taas_value *v = ok("net = resnet18()\nnet.requires_grad_(False)\nnet.fc = Linear(512, 10)\nnet");
    json_t *b = taas_value_mimebundle(v);
    const char *t = json_string_value(json_object_get(b, "text/plain"));
    assert_non_null(strstr(t, "ResNet: input not known yet\nLayer (type:depth-idx)"));
    assert_non_null(strstr(t, "\n├─Conv2d: 1-1    "));
    assert_non_null(strstr(t, "\n│    └─BasicBlock: 2-1    "));
    assert_non_null(strstr(t, "\n│    │    │    └─Conv2d: 4-1    "));  /* layer2.0.downsample.0 */
    assert_non_null(strstr(t, "\n├─Linear: 1-10 "));
    assert_non_null(strstr(t, "(N, 10)                        5,130\n"));
    assert_null(strstr(t, "add"));  /* the residual sums are no modules */
    assert_non_null(strstr(t, "\nTotal params: 11,181,642\nTrainable params: 5,130\nNon-trainable params: 11,176,512\n"));
    json_decref(b);
    b = taas_model_summary(v, (const int32_t[]){3, 64, 64}, 8, &(taas_error){0});
    assert_non_null(b);
    t = json_string_value(json_object_get(b, "text/plain"));
    assert_non_null(strstr(t, "ResNet: input (8, 3, 64, 64)\n"));
    const char *row = strstr(t, "├─Sequential: 1-8 "), *eol = row ? strchr(row, '\n') : NULL;
    const char *shape = row ? strstr(row, "(8, 512, 2, 2)") : NULL;
    assert_true(row && eol && shape && shape < eol);  /* layer4's output for a batch of 8 at 64x64 */
    assert_non_null(strstr(t, "a training step: "));
    assert_non_null(strstr(json_string_value(json_object_get(b, "text/html")), "<th style=\"text-align:left\">Layer (type:depth-idx)</th>"));
    json_decref(b);
    taas_unref(v);
    v = ok("s = Sequential(Flatten(), Linear(784, 32), ReLU(), Linear(32, 10))\ns[1].requires_grad_(False)\ns");
    b = taas_value_mimebundle(v);
    t = json_string_value(json_object_get(b, "text/plain"));
    assert_non_null(strstr(t, "Sequential: 4 layers"));
    assert_non_null(strstr(t, "Total params: 25,450\nTrainable params: 330\nNon-trainable params: 25,120\n"));
    json_decref(b);
    taas_unref(v);
    v = ok("s2 = Sequential(Flatten(), Linear(784, 32))\ns2");  /* nothing frozen: the table as before */
    b = taas_value_mimebundle(v);
    assert_null(strstr(json_string_value(json_object_get(b, "text/plain")), "Trainable params"));
    json_decref(b);
    taas_unref(v);
}

/* GPT-2 as Hugging Face's transformers builds it (issue 29): its config's repr and checks,
 * the model's parameter count (GPT-2 small's 124,439,808, lm_head tied), its summary as
 * torchinfo shows Hugging Face's modules, Embedding and LayerNorm, and the refusals. */
static void test_gpt2(void **state) {
    (void)state;
    char *r = repr_of("cfg = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=256, n_positions=128)\ncfg");
    assert_string_equal(r, "GPT2Config(vocab_size=256, n_positions=128, n_embd=64, n_layer=2, n_head=4)");
    free(r);
    taas_value *v = ok("net = transformers.GPT2LMHeadModel(cfg)\nnet");
    json_t *b = taas_model_summary(v, (const int32_t[]){64, 0, 0}, 8, &(taas_error){0});
    assert_non_null(b);
    const char *t = json_string_value(json_object_get(b, "text/plain"));
    assert_non_null(strstr(t, "GPT2LMHeadModel: input (8, 64)\n"));
    assert_non_null(strstr(t, "\n├─GPT2Model: 1-1 "));
    assert_non_null(strstr(t, "\n│    └─ModuleList: 2-4 "));
    assert_non_null(strstr(t, "\n│    │    └─GPT2Block: 3-2 "));
    assert_non_null(strstr(t, "\n│    │    │    └─GPT2Attention: 4-2 "));
    assert_non_null(strstr(t, "\n│    │    │    │    └─Conv1D: 5-1                 (8, 64, 192)                  12,480\n"));
    assert_non_null(strstr(t, "\n│    │    │    └─GPT2MLP: 4-4 "));
    assert_null(strstr(t, "CausalSelfAttention"));  /* inside GPT2Attention's forward, no module */
    assert_non_null(strstr(t, "\n├─Linear: 1-2                                     (8, 64, 256)"));
    assert_non_null(strstr(t, "\nTotal params: 124,672\n"));  /* 256*64 + 128*64 + 2 * 49,920 + 128 */
    assert_non_null(strstr(t, "a training step: "));
    json_decref(b);
    taas_unref(v);
    v = ok("small = transformers.GPT2LMHeadModel(transformers.GPT2Config())\nsmall");
    b = taas_value_mimebundle(v);
    t = json_string_value(json_object_get(b, "text/plain"));
    if (!strstr(t, "Total params: 124,439,808\n")) fail_msg("%s", t);
    assert_non_null(strstr(t, "(N, 1024, 50257)"));  /* before any data: a full context */
    json_decref(b);
    taas_unref(v);
    r = repr_of("Sequential(Embedding(256, 32), LayerNorm(32), GELU(approximate='tanh'), Linear(32, 256))");
    assert_string_equal(r, "Sequential(\n  (0): Embedding(256, 32)\n  (1): LayerNorm((32,), eps=1e-05, elementwise_affine=True)\n"
                           "  (2): GELU(approximate='tanh')\n  (3): Linear(in_features=32, out_features=256, bias=True)\n)");
    free(r);
    fails("transformers.GPT2Config(n_embd=10, n_head=4)", "TaasValueError", "n_embd (10) must be a multiple of n_head (4)", NULL);
    fails("transformers.GPT2Config(rotary_dim=64)", "TaasTypeError", "rotary_dim", NULL);
    fails("transformers.GPT2Config(activation_function='relu')", "TaasValueError", "activation_function", NULL);
    fails("transformers.GPT2LMHeadModel(5)", "TaasTypeError", "must be a model configuration", NULL);
    fails("Embedding(10, 4, padding_idx=0)", "TaasValueError", "padding_idx is not supported", NULL);
    fails("LayerNorm([4, 8])", "TaasValueError", "normalized_shape must be one size", NULL);
    fails("LayerNorm(8, elementwise_affine=False)", "TaasValueError", "elementwise_affine=False", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gpt2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_as_pytorch_prints_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_specs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_place_and_aliases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replacing_a_part_of_loaded_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_display_counts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
