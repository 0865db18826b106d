/* Values: construction, Python's reprs (floats, strings, containers), truth, equality,
 * the PyTorch reprs of every builtin, the specs the workers get, and mime bundles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtins_testutil.h"
#include "deep_testutil.h"
#include "utf8.h"
#include "value.h"

static void check_repr(taas_value *v, const char *want) {
    assert_non_null(v);
    char *r = taas_value_repr(v);
    if (strcmp(r, want) != 0) print_error("repr\n got: %s\nwant: %s\n", r, want);
    assert_string_equal(r, want);
    free(r);
    taas_unref(v);
}

/* ---- floats: expected strings printed by CPython's repr() ---------------------------- */

static const struct {
    double x;
    const char *repr;
} FLOATS[] = {
    {0x1.0000000000000p+0, "1.0"},
    {0x1.4f8b588e368f1p-17, "1e-05"},
    {0x1.999999999999ap-4, "0.1"},
    {0x1.1c37937e08000p+53, "1e+16"},
    {0x1.c6bf526340000p+49, "1000000000000000.0"},
    {0x1.a36e2eb1c432dp-14, "0.0001"},
    {0x1.edd2f1a9fbe77p+6, "123.456"},
    {0x1.5555555555555p-2, "0.3333333333333333"},
    {0x1.5555555555555p-1, "0.6666666666666666"},
    {0x0.0000000000001p-1022, "5e-324"},
    {0x1.fffffffffffffp+1023, "1.7976931348623157e+308"},
    {0x1.24dd2f1a9fbe7p-2, "0.286"},
    {0x1.0f0cf064dd592p+73, "1e+22"},
    {0x1.b69b4ba630f35p+56, "1.2345678901234568e+17"},
    {0x1.0000000000000p+53, "9007199254740992.0"},
    {0x1.3333333333333p-2, "0.3"},
    {0x1.0c6f7a0b5ed8dp-22, "2.5e-07"},
    {0x1.9000000000000p+6, "100.0"},
    {0x1.249ad2594c37dp+332, "1e+100"},
    {-0x1.8000000000000p+0, "-1.5"},
    {0x1.0000000000000p-1022, "2.2250738585072014e-308"},
    {0x0.0000000000003p-1022, "1.5e-323"},
    {0x1.0000000000000p+60, "1.152921504606847e+18"},
    {0x1.0000000000000p-30, "9.313225746154785e-10"},
    {0x1.52d02c7e14af6p+76, "1e+23"},
    {0x1.c7e83209e90b2p+72, "8.41e+21"},
    {0x0.05c0ab9347ed7p-1022, "5e-310"},
    {0x1.3333333333334p-2, "0.30000000000000004"},
    {0x1.a36e2eb1c432cp-14, "9.999999999999999e-05"},
    {0x1.1666666666666p+2, "4.35"},
    {0x1.0000000000000p+63, "9.223372036854776e+18"},
    {0x1.0624dd2f1a9fcp-10, "0.001"},
    {0x1.5798ee2308c3ap-27, "1e-08"},
    {0x1.0c6f7a0b5ed8dp-20, "1e-06"},
    {0x1.3880000000000p+13, "10000.0"},
    {0x1.9000000000000p+4, "25.0"},
    {0x1.ff7ced916872bp-1, "0.999"},
    {-0x1.4f8b588e368f1p-17, "-1e-05"},
    {0x1.bc258ce8c1862p-999, "3.238327648331624e-301"},
    {0x1.9dc9e46fb621bp-1000, "1.5084917392450192e-301"},
    {0x1.2395dd9b4b66bp-333, "6.509344730398538e-101"},
    {0x1.03950260af38bp-336, "7.243628666754277e-102"},
    {0x1.94e6a7941bdb1p-68, "5.358820043066892e-21"},
    {0x1.144e861635e37p-68, "3.6568891691258554e-21"},
    {0x1.37611d8010afbp-21, "5.799892477470681e-07"},
    {0x1.5488cb8f44100p-18, "5.074357331894203e-06"},
    {0x1.eb768d599dae7p-9, "0.0037495658441984883"},
    {0x1.633e175e05550p-5, "0.04336456836623859"},
    {0x1.1e20b87b382e0p-4, "0.06985542357461894"},
    {0x1.738f7d1a22dd8p-4, "0.09071301334386506"},
    {0x1.a884e99463892p+8, "424.51918914251394"},
    {0x1.9d6d126bd7425p+9, "826.852124672038"},
    {0x1.272ab86dfc5efp+30, "1238019611.496456"},
    {0x1.0a1f201c23ea1p+31, "2232389646.070145"},
    {0x1.bdd170345a4eap+55, "6.274332224055893e+16"},
    {0x1.50b1a04e8fa3dp+56, "9.477089424570056e+16"},
    {0x1.0f5a3d98856a2p+132, "5.771029486174987e+39"},
    {0x1.750959be548eap+131, "3.9668047465078016e+39"},
    {0x1.468092acafcc8p+664, "9.7625510559292e+199"},
    {0x1.f289718fc24e9p+659, "4.658268061775628e+198"},
    {0x1.4829898bcfaf7p+996, "8.584684590486795e+299"},
    {0x1.bad4686be9cc7p+994, "2.8960928633167628e+299"},
    {0x0.0000000000010p-1022, "8e-323"},
    {0x1.0000000000000p-973, "1.252605225005608e-293"},
    {0x1.0000000000000p-876, "1.9848322066592191e-264"},
    {0x1.0000000000000p-779, "3.1450921726548502e-235"},
    {0x1.0000000000000p-682, "4.983597475548784e-206"},
    {0x1.0000000000000p-585, "7.896825413969131e-177"},
    {0x1.0000000000000p-488, "1.2513019344894381e-147"},
    {0x1.0000000000000p-391, "1.982767060402851e-118"},
    {0x1.0000000000000p-294, "3.141819817790545e-89"},
    {0x1.0000000000000p-197, "4.9784122222889134e-60"},
    {0x1.0000000000000p-100, "7.888609052210118e-31"},
    {0x1.0000000000000p-3, "0.125"},
    {0x1.0000000000000p+94, "1.9807040628566084e+28"},
    {0x1.0000000000000p+191, "3.1385508676933404e+57"},
    {0x1.0000000000000p+288, "4.9732323640978664e+86"},
    {0x1.0000000000000p+385, "7.880401239278896e+115"},
    {0x1.0000000000000p+482, "1.248699420126397e+145"},
    {0x1.0000000000000p+579, "1.9786432117848363e+174"},
    {0x1.0000000000000p+676, "3.135285318820699e+203"},
    {0x1.0000000000000p+773, "4.968057895362269e+232"},
    {0x1.0000000000000p+870, "7.872201966280717e+261"},
    {0x1.0000000000000p+967, "1.2474001934592e+291"},
};

static void test_float_repr(void **state) {
    (void)state;
    char buf[64];
    for (size_t i = 0; i < sizeof FLOATS / sizeof *FLOATS; i++) {
        taas_float_repr(FLOATS[i].x, buf, sizeof buf);
        if (strcmp(buf, FLOATS[i].repr) != 0) print_error("%a: got %s want %s\n", FLOATS[i].x, buf, FLOATS[i].repr);
        assert_string_equal(buf, FLOATS[i].repr);
    }
    taas_float_repr(INFINITY, buf, sizeof buf);
    assert_string_equal(buf, "inf");
    taas_float_repr(-INFINITY, buf, sizeof buf);
    assert_string_equal(buf, "-inf");
    taas_float_repr(NAN, buf, sizeof buf);
    assert_string_equal(buf, "nan");
    taas_float_repr(-0.0, buf, sizeof buf);
    assert_string_equal(buf, "-0.0");
    taas_float_repr(0.0, buf, sizeof buf);
    assert_string_equal(buf, "0.0");
    taas_float_repr(1e-05, buf, 4); /* truncated, still terminated */
    assert_string_equal(buf, "1e-");
}

static void test_scalar_reprs(void **state) {
    (void)state;
    check_repr(taas_none(), "None");
    check_repr(taas_bool(1), "True");
    check_repr(taas_bool(0), "False");
    check_repr(taas_int(1), "1");
    check_repr(taas_int(-9216), "-9216");
    check_repr(taas_int(INT64_MIN), "-9223372036854775808");
    check_repr(taas_float(1.0), "1.0");
    check_repr(taas_float(1e16), "1e+16");
    check_repr(taas_str0("a"), "'a'");
    check_repr(taas_str0("it's"), "\"it's\"");
    check_repr(taas_str0("it's \"x\""), "'it\\'s \"x\"'");
    check_repr(taas_str0("say \"hi\""), "'say \"hi\"'");
    check_repr(taas_str0("a\\b"), "'a\\\\b'");
    check_repr(taas_str0("l1\nl2\tx\r"), "'l1\\nl2\\tx\\r'");
    check_repr(taas_str0("\x01\x1f\x7f"), "'\\x01\\x1f\\x7f'");
    check_repr(taas_str0("caf\xC3\xA9 \xF0\x9F\x98\x80"), "'caf\xC3\xA9 \xF0\x9F\x98\x80'");
    check_repr(taas_str0("\xC2\x85\xC2\xA0"), "'\\x85\\xa0'");            /* C1 control, no-break space */
    check_repr(taas_str0("\xE2\x80\xA8\xEF\xBB\xBF"), "'\\u2028\\ufeff'"); /* line separator, BOM */
    check_repr(taas_str0("\xF3\xB0\x80\x80"), "'\\U000f0000'");          /* private use plane */
    check_repr(taas_str0(""), "''");
    /* invalid UTF-8 never reaches a value */
    check_repr(taas_str("a\xFF", 2), "'a\xEF\xBF\xBD'");
}

static void test_containers(void **state) {
    (void)state;
    check_repr(taas_tuple_new(0), "()");
    taas_value *t = taas_tuple_new(1);
    t->u.seq.items[0] = taas_int(1);
    check_repr(t, "(1,)");
    t = taas_tuple_new(2);
    t->u.seq.items[0] = taas_int(3);
    t->u.seq.items[1] = taas_int(3);
    check_repr(t, "(3, 3)");
    check_repr(taas_list_new(0), "[]");
    taas_value *l = taas_list_new(3);
    l->u.seq.items[0] = taas_int(1);
    l->u.seq.items[1] = taas_str0("x");
    l->u.seq.items[2] = taas_tuple_new(0);
    check_repr(l, "[1, 'x', ()]");
    check_repr(taas_builtin_value(taas_builtin_find("Conv2d")), "<class 'nn.Conv2d'>");
    check_repr(taas_builtin_value(taas_builtin_find("print")), "<built-in function print>");
    /* str() of a string is itself; of anything else its repr */
    taas_value *s = taas_str0("it's");
    char *x = taas_value_str(s);
    assert_string_equal(x, "it's");
    free(x);
    taas_unref(s);
    l = taas_list_new(1);
    l->u.seq.items[0] = taas_str0("a");
    x = taas_value_str(l);
    assert_string_equal(x, "['a']");
    free(x);
    taas_unref(l);
}

static void test_truth_equality_types(void **state) {
    (void)state;
    taas_error err;
    taas_value *vals[] = {taas_none(), taas_bool(0), taas_int(0), taas_float(0.0), taas_str0(""),
                          taas_tuple_new(0), taas_list_new(0), TU0(&err, "Sequential")};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        assert_false(taas_value_truthy(vals[i]));
        taas_unref(vals[i]);
    }
    taas_value *yes[] = {taas_bool(1), taas_int(-1), taas_float(0.5), taas_str0("0"),
                         TU0(&err, "ReLU"), taas_builtin_value(taas_builtin_find("len"))};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        assert_true(taas_value_truthy(yes[i]));
        taas_unref(yes[i]);
    }
    taas_value *i1 = taas_int(1), *f1 = taas_float(1.0), *b1 = taas_bool(1), *s1 = taas_str0("1");
    assert_true(taas_value_equal(i1, f1));
    assert_true(taas_value_equal(i1, b1));
    assert_false(taas_value_equal(i1, s1));
    taas_value *t = taas_tuple_new(1), *l = taas_list_new(1);
    t->u.seq.items[0] = taas_ref(i1);
    l->u.seq.items[0] = taas_ref(i1);
    assert_false(taas_value_equal(t, l)); /* (1,) != [1] */
    assert_string_equal(taas_value_type_name(i1), "int");
    assert_string_equal(taas_value_type_name(f1), "float");
    assert_string_equal(taas_value_type_name(b1), "bool");
    assert_string_equal(taas_value_type_name(s1), "str");
    assert_string_equal(taas_value_type_name(t), "tuple");
    assert_string_equal(taas_value_type_name(l), "list");
    taas_value *none = taas_none();
    assert_string_equal(taas_value_type_name(none), "NoneType");
    taas_value *a = TU(&err, "Conv2d", "1", "32", "3"), *b = TU(&err, "Conv2d", "1", "32", "(3, 3)");
    taas_value *c = TU(&err, "Conv2d", "1", "32", "5");
    assert_true(taas_value_equal(a, b)); /* kernel_size 3 is stored as (3, 3) */
    assert_false(taas_value_equal(a, c));
    assert_string_equal(taas_value_type_name(a), "Conv2d");
    taas_value *fn = taas_builtin_value(taas_builtin_find("Conv2d"));
    assert_string_equal(taas_value_type_name(fn), "builtin");
    /* object arguments by parameter name, defaults filled in */
    assert_int_equal(taas_object_arg(a, "out_channels")->u.i, 32);
    assert_int_equal(taas_object_arg(a, "groups")->u.i, 1);
    assert_string_equal(taas_object_arg(a, "padding_mode")->u.str.s, "zeros");
    assert_null(taas_object_arg(a, "nonsense"));
    assert_null(taas_object_arg(i1, "x"));
    taas_value *ref = taas_ref(a);
    assert_int_equal(a->refs, 2);
    taas_unref(ref);
    taas_value *all[] = {i1, f1, b1, s1, t, l, none, a, b, c, fn};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) taas_unref(all[i]);
    taas_unref(NULL);
}

/* ---- every builtin's repr, as PyTorch 1.13 / torchvision 0.14 print it --------------- */

static const struct {
    const char *name;
    const char *args[10];
    const char *want;
} REPRS[] = {
    {"Conv2d", {"1", "32", "3", "1"}, "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))"},
    {"Conv2d", {"1", "32", "3", "1", "padding=1"}, "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"},
    {"Conv2d", {"1", "32", "(3, 5)", "stride=2", "padding=(1, 2)", "dilation=2", "groups=1", "bias=False", "padding_mode='reflect'"},
     "Conv2d(1, 32, kernel_size=(3, 5), stride=(2, 2), padding=(1, 2), dilation=(2, 2), bias=False, padding_mode=reflect)"},
    {"Conv2d", {"2", "4", "3", "groups=2"}, "Conv2d(2, 4, kernel_size=(3, 3), stride=(1, 1), groups=2)"},
    {"Conv2d", {"1", "32", "3", "padding='same'"}, "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=same)"},
    {"Conv2d", {"1", "32", "[3, 3]"}, "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))"},
    {"nn.LazyConv2d", {"32", "3"}, "LazyConv2d(0, 32, kernel_size=(3, 3), stride=(1, 1))"},
    {"Linear", {"9216", "128"}, "Linear(in_features=9216, out_features=128, bias=True)"},
    {"torch.nn.LazyLinear", {"10"}, "LazyLinear(in_features=0, out_features=10, bias=True)"},
    {"MaxPool2d", {"2"}, "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"},
    {"MaxPool2d", {"(2, 3)", "stride=1", "padding=1", "dilation=1", "ceil_mode=True"},
     "MaxPool2d(kernel_size=(2, 3), stride=1, padding=1, dilation=1, ceil_mode=True)"},
    {"AvgPool2d", {"2"}, "AvgPool2d(kernel_size=2, stride=2, padding=0)"},
    {"AvgPool2d", {"2", "divisor_override=2"}, "AvgPool2d(kernel_size=2, stride=2, padding=0)"},
    {"ReLU", {NULL}, "ReLU()"},
    {"ReLU", {"inplace=True"}, "ReLU(inplace=True)"},
    {"LeakyReLU", {NULL}, "LeakyReLU(negative_slope=0.01)"},
    {"LeakyReLU", {"0.2", "True"}, "LeakyReLU(negative_slope=0.2, inplace=True)"},
    {"Tanh", {NULL}, "Tanh()"},
    {"Sigmoid", {NULL}, "Sigmoid()"},
    {"GELU", {NULL}, "GELU(approximate='none')"},
    {"GELU", {"'tanh'"}, "GELU(approximate='tanh')"},
    {"Dropout", {"0.25"}, "Dropout(p=0.25, inplace=False)"},
    {"Dropout2d", {NULL}, "Dropout2d(p=0.5, inplace=False)"},
    {"BatchNorm1d", {"128"}, "BatchNorm1d(128, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"},
    {"BatchNorm2d", {"64", "momentum=None", "affine=False"},
     "BatchNorm2d(64, eps=1e-05, momentum=None, affine=False, track_running_stats=True)"},
    {"Flatten", {NULL}, "Flatten(start_dim=1, end_dim=-1)"},
    {"LogSoftmax", {"dim=1"}, "LogSoftmax(dim=1)"},
    {"LogSoftmax", {NULL}, "LogSoftmax(dim=None)"},
    {"Softmax", {"dim=-1"}, "Softmax(dim=-1)"},
    {"Softmax", {NULL}, "Softmax(dim=None)"},
    {"Sequential", {NULL}, "Sequential()"},
    {"NLLLoss", {NULL}, "NLLLoss()"},
    {"CrossEntropyLoss", {NULL}, "CrossEntropyLoss()"},
    {"MSELoss", {NULL}, "MSELoss()"},
    /* taas's forms: a loss adds what differs from PyTorch's defaults */
    {"CrossEntropyLoss", {"label_smoothing=0.1"}, "CrossEntropyLoss(label_smoothing=0.1)"},
    {"NLLLoss", {"reduction='sum'", "ignore_index=-1"}, "NLLLoss(ignore_index=-1, reduction='sum')"},
    {"ToTensor", {NULL}, "ToTensor()"},
    {"Normalize", {"(0.2860,)", "(0.3530,)"}, "Normalize(mean=(0.286,), std=(0.353,))"},
    {"Normalize", {"(0.1, 0.2, 0.3)", "(1, 2, 3)", "inplace=True"}, "Normalize(mean=(0.1, 0.2, 0.3), std=(1, 2, 3))"},
    {"Normalize", {"0.5", "0.25"}, "Normalize(mean=0.5, std=0.25)"},
    {"RandomCrop", {"32", "padding=4"}, "RandomCrop(size=(32, 32), padding=4)"},
    {"RandomCrop", {"(28, 28)"}, "RandomCrop(size=(28, 28), padding=None)"},
    {"RandomHorizontalFlip", {NULL}, "RandomHorizontalFlip(p=0.5)"},
    {"Resize", {"32"}, "Resize(size=32, interpolation=bilinear, max_size=None, antialias=None)"},
    {"Resize", {"(32, 32)"}, "Resize(size=(32, 32), interpolation=bilinear, max_size=None, antialias=None)"},
    {"CenterCrop", {"28"}, "CenterCrop(size=(28, 28))"},
    {"CenterCrop", {"(28, 20)"}, "CenterCrop(size=(28, 20))"},
    {"Compose", {"[]"}, "Compose(\n)"},
    /* optimizers and schedulers: a call with every setting */
    {"Adadelta", {"lr=1.0"}, "Adadelta(lr=1.0, rho=0.9, eps=1e-06, weight_decay=0)"},
    {"SGD", {"lr=0.01", "momentum=0.9"}, "SGD(lr=0.01, momentum=0.9, dampening=0, weight_decay=0, nesterov=False)"},
    {"Adam", {NULL}, "Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0, amsgrad=False)"},
    {"AdamW", {"lr=3e-4"}, "AdamW(lr=0.0003, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01, amsgrad=False)"},
    {"RMSprop", {NULL}, "RMSprop(lr=0.01, alpha=0.99, eps=1e-08, weight_decay=0, momentum=0, centered=False)"},
    {"StepLR", {"step_size=1", "gamma=0.7"}, "StepLR(step_size=1, gamma=0.7)"},
    {"MultiStepLR", {"[30, 80]"}, "MultiStepLR(milestones=[30, 80], gamma=0.1)"},
    {"ExponentialLR", {"0.9"}, "ExponentialLR(gamma=0.9)"},
    {"CosineAnnealingLR", {"T_max=10"}, "CosineAnnealingLR(T_max=10, eta_min=0)"},
    {"OneCycleLR", {"0.1", "total_steps=1000"},
     "OneCycleLR(max_lr=0.1, total_steps=1000, epochs=None, steps_per_epoch=None, pct_start=0.3, "
     "anneal_strategy='cos', cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0, "
     "final_div_factor=10000.0, three_phase=False)"},
};

static void test_builtin_reprs(void **state) {
    (void)state;
    taas_error err;
    for (size_t i = 0; i < sizeof REPRS / sizeof *REPRS; i++) {
        taas_value *v = tu_call(&err, REPRS[i].name, REPRS[i].args, NULL);
        if (!v) print_error("%s: %s: %s\n", REPRS[i].name, err.ename, err.message);
        check_repr(v, REPRS[i].want);
    }
}

static void test_sequential_repr(void **state) {
    (void)state;
    taas_error err;
    taas_value *o[4];
    o[0] = TU(&err, "Conv2d", "1", "32", "3", "1");
    o[1] = TU0(&err, "ReLU");
    check_repr(TUO(&err, "Sequential", o, "$0", "$1"),
               "Sequential(\n"
               "  (0): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))\n"
               "  (1): ReLU()\n"
               ")");
    /* nested, as torch's _addindent does it */
    o[2] = TU(&err, "Linear", "2", "3");
    o[3] = TUO(&err, "Sequential", o, "$1", "$2");
    check_repr(TUO(&err, "Sequential", o, "$2", "$3"),
               "Sequential(\n"
               "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
               "  (1): Sequential(\n"
               "    (0): ReLU()\n"
               "    (1): Linear(in_features=2, out_features=3, bias=True)\n"
               "  )\n"
               ")");
    for (int i = 0; i < 4; i++) taas_unref(o[i]);
}

static void test_transform_and_dataset_reprs(void **state) {
    (void)state;
    taas_error err;
    taas_value *o[6];
    o[0] = TU0(&err, "ToTensor");
    o[1] = TU(&err, "Normalize", "(0.2860,)", "(0.3530,)");
    o[2] = TUO(&err, "Compose", o, "[$0, $1]");
    check_repr(taas_ref(o[2]), "Compose(\n    ToTensor()\n    Normalize(mean=(0.286,), std=(0.353,))\n)");
    /* torchvision does not indent a nested Compose's inner lines */
    check_repr(TUO(&err, "Compose", o, "[$2, $0]"),
               "Compose(\n    Compose(\n    ToTensor()\n    Normalize(mean=(0.286,), std=(0.353,))\n)\n    ToTensor()\n)");
    /* without the files' headers the size is unknown (a root may hold a subset) */
    o[3] = TUO(&err, "FashionMNIST", o, "transform=$2");
    check_repr(taas_ref(o[3]),
               "Dataset FashionMNIST\n"
               "    Number of datapoints: unknown until the loaders read it\n"
               "    Root location: /usr/share/datasets/fashion-mnist\n"
               "    Split: Train\n"
               "    StandardTransform\n"
               "Transform: Compose(\n"
               "               ToTensor()\n"
               "               Normalize(mean=(0.286,), std=(0.353,))\n"
               "           )");
    check_repr(TU(&err, "FashionMNIST", "train=False"),
               "Dataset FashionMNIST\n"
               "    Number of datapoints: unknown until the loaders read it\n"
               "    Root location: /usr/share/datasets/fashion-mnist\n"
               "    Split: Test");
    check_repr(TUO(&err, "datasets.MNIST", o, "'/data/mnist'", "transform=$0"),
               "Dataset MNIST\n"
               "    Number of datapoints: unknown until the loaders read it\n"
               "    Root location: /data/mnist\n"
               "    Split: Train\n"
               "    StandardTransform\n"
               "Transform: ToTensor()");
    check_repr(TU(&err, "CIFAR10", "root='c'", "train=False"),
               "Dataset CIFAR10\n    Number of datapoints: unknown until the loaders read it\n    Root location: c\n    Split: Test");
    check_repr(TU(&err, "NpyDataset", "'x.npy'", "'y.npy'"),
               "Dataset NpyDataset\n"
               "    Number of datapoints: unknown until the loaders read it\n"
               "    Images: 'x.npy'\n"
               "    Labels: 'y.npy'");
    check_repr(TU(&err, "WebDataset", "['a.tar', 'b.tar']", "length=100"),
               "Dataset WebDataset\n"
               "    Number of datapoints: 100\n"
               "    Shards: ['a.tar', 'b.tar']\n"
               "    Keys: image jpg;jpeg;png, label cls");
    o[4] = TUO(&err, "DataLoader", o, "$3", "batch_size=64", "shuffle=True");
    check_repr(taas_ref(o[4]),
               "DataLoader(batch_size=64, shuffle=True, num_workers=0, drop_last=False, prefetch_factor=None)\n"
               "    Dataset FashionMNIST\n"
               "        Number of datapoints: unknown until the loaders read it\n"
               "        Root location: /usr/share/datasets/fashion-mnist\n"
               "        Split: Train\n"
               "        StandardTransform\n"
               "    Transform: Compose(\n"
               "                   ToTensor()\n"
               "                   Normalize(mean=(0.286,), std=(0.353,))\n"
               "               )");
    o[5] = TU(&err, "NpyDataset", "'x.npy'", "'y.npy'");
    check_repr(TUO(&err, "DataLoader", o, "$5", "num_workers=2", "prefetch_factor=4"),
               "DataLoader(batch_size=1, shuffle=False, num_workers=2, drop_last=False, prefetch_factor=4)\n"
               "    Dataset NpyDataset\n"
               "        Number of datapoints: unknown until the loaders read it\n"
               "        Images: 'x.npy'\n"
               "        Labels: 'y.npy'");
    for (int i = 0; i < 6; i++) taas_unref(o[i]);
}

/* ---- specs and mime bundles ------------------------------------------------------ */

static void assert_json(json_t *got, const char *want_text) {
    json_error_t je;
    json_t *want = json_loads(want_text, 0, &je);
    if (!want) print_error("bad expected JSON: %s\n", je.text);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS);
        print_error("spec\n got: %s\nwant: %s\n", g, want_text);
        free(g);
    }
    assert_true(json_equal(got, want));
    json_decref(want);
    json_decref(got);
}

static void test_spec(void **state) {
    (void)state;
    taas_error err;
    taas_value *o[4];
    o[0] = TU(&err, "Conv2d", "1", "32", "3", "1");
    o[1] = TU(&err, "MaxPool2d", "2");
    o[2] = TU(&err, "BatchNorm1d", "128", "momentum=None");
    o[3] = TUO(&err, "Sequential", o, "$0", "$1", "$2");
    assert_json(taas_value_spec(o[3]),
                "{\"type\": \"Sequential\", \"layers\": ["
                "{\"type\": \"Conv2d\", \"in_channels\": 1, \"out_channels\": 32, \"kernel_size\": [3, 3],"
                " \"stride\": [1, 1], \"padding\": [0, 0], \"dilation\": [1, 1], \"groups\": 1, \"bias\": true,"
                " \"padding_mode\": \"zeros\"},"
                "{\"type\": \"MaxPool2d\", \"kernel_size\": [2, 2], \"stride\": [2, 2], \"padding\": [0, 0],"
                " \"dilation\": [1, 1], \"return_indices\": false, \"ceil_mode\": false},"
                "{\"type\": \"BatchNorm1d\", \"num_features\": 128, \"eps\": 1e-05, \"momentum\": null,"
                " \"affine\": true, \"track_running_stats\": true}]}");
    for (int i = 0; i < 4; i++) taas_unref(o[i]);
    /* float parameters are reals even when written as ints; float tuples are arrays */
    taas_value *v = TU(&err, "SGD", "lr=1", "momentum=0");
    assert_json(taas_value_spec(v), "{\"type\": \"SGD\", \"lr\": 1.0, \"momentum\": 0.0, \"dampening\": 0.0,"
                                    " \"weight_decay\": 0.0, \"nesterov\": false}");
    taas_unref(v);
    v = TU(&err, "Normalize", "0.5", "(1, 2)");
    assert_json(taas_value_spec(v), "{\"type\": \"Normalize\", \"mean\": [0.5], \"std\": [1.0, 2.0], \"inplace\": false}");
    taas_unref(v);
    v = TU(&err, "Resize", "32");
    assert_json(taas_value_spec(v), "{\"type\": \"Resize\", \"size\": 32, \"interpolation\": \"bilinear\","
                                    " \"max_size\": null, \"antialias\": null}");
    taas_unref(v);
    /* plain values */
    v = taas_list_new(3);
    v->u.seq.items[0] = taas_int(1);
    v->u.seq.items[1] = taas_float(INFINITY); /* JSON has no inf */
    v->u.seq.items[2] = taas_str0("s");
    assert_json(taas_value_spec(v), "[1, null, \"s\"]");
    taas_unref(v);
}

static void test_mimebundle(void **state) {
    (void)state;
    taas_error err;
    taas_value *o[14];
    /* the model of docs/design.md §1 */
    o[0] = TU(&err, "Conv2d", "1", "32", "3", "1");
    o[1] = TU0(&err, "ReLU");
    o[2] = TU(&err, "Conv2d", "32", "64", "3", "1");
    o[3] = TU(&err, "MaxPool2d", "2");
    o[4] = TU(&err, "Dropout", "0.25");
    o[5] = TU0(&err, "Flatten");
    o[6] = TU(&err, "Linear", "9216", "128");
    o[7] = TU(&err, "BatchNorm1d", "128");
    o[8] = TU(&err, "Dropout", "0.5");
    o[9] = TU(&err, "Linear", "128", "10");
    o[10] = TU(&err, "LogSoftmax", "dim=1");
    o[11] = TUO(&err, "Sequential", o, "$0", "$1", "$2", "$1", "$3", "$4", "$5", "$6", "$7", "$1", "$8", "$9", "$10");
    /* a model shows its summary (kernel/lang/modelview.c; tests/unit/test_modelview.c has more) */
    json_t *b = taas_value_mimebundle(o[11]);
    const char *text = json_string_value(json_object_get(b, "text/plain"));
    assert_non_null(strstr(text, "Sequential: 13 layers, input not known yet\n"));
    const char *html = json_string_value(json_object_get(b, "text/html"));
    assert_non_null(html);
#define LEFT "<td style=\"text-align:left\">"
    assert_non_null(strstr(html, "<tr><td>0</td>" LEFT "<code>Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))</code></td>"
                                 LEFT "?</td><td>320</td></tr>"));
    assert_non_null(strstr(html, "<td>12</td>" LEFT "<code>LogSoftmax(dim=1)</code></td>" LEFT "(N, 10)</td><td>-</td>"));
#undef LEFT
    assert_non_null(strstr(html, "<td>1,179,776</td>"));   /* Linear(9216, 128) */
    assert_non_null(strstr(html, "<td>256</td>"));         /* BatchNorm1d(128) */
    assert_non_null(strstr(html, "parameters: 1,200,138 (4.58 MiB as float32)"));
    json_decref(b);
    /* a Sequential in a Sequential is nothing the trainer runs: its repr */
    o[12] = TU(&err, "LazyLinear", "10");
    o[13] = TUO(&err, "Sequential", o, "$5", "$12", "$11");
    b = taas_value_mimebundle(o[13]);
    char *repr = taas_value_repr(o[13]);
    assert_string_equal(json_string_value(json_object_get(b, "text/plain")), repr);
    free(repr);
    json_decref(b);
    /* other values: text/plain only, HTML-escaped where HTML is given */
    b = taas_value_mimebundle(o[6]);
    assert_string_equal(json_string_value(json_object_get(b, "text/plain")),
                        "Linear(in_features=9216, out_features=128, bias=True)");
    assert_null(json_object_get(b, "text/html"));
    json_decref(b);
    for (int i = 0; i < 14; i++) taas_unref(o[i]);
    taas_value *s = taas_str0("<b>&");
    b = taas_value_mimebundle(s);
    assert_string_equal(json_string_value(json_object_get(b, "text/plain")), "'<b>&'");
    json_decref(b);
    taas_unref(s);
}

/* [[...[x]...]]: n lists around x (taken). */
static taas_value *nested(taas_value *x, size_t n, int tuple) {
    for (size_t i = 0; i < n; i++) {
        taas_value *v = tuple ? taas_tuple_new(1) : taas_list_new(1);
        v->u.seq.items[0] = x;
        x = v;
    }
    return x;
}

static void test_deep_values(void **state) {
    (void)state;
    /* v = [v] 200,000 times: repr, equality, spec and free once each took the stack */
    taas_value *v = nested(taas_int(1), 200000, 0), *w = nested(taas_int(1), 200000, 0);
    char want[512], *p = want;
    for (int i = 0; i < TAAS_VALUE_MAX_DEPTH; i++) *p++ = '[';
    p += sprintf(p, "[...]");
    for (int i = 0; i < TAAS_VALUE_MAX_DEPTH; i++) *p++ = ']';
    *p = '\0';
    char *r = taas_value_repr(v);
    assert_string_equal(r, want);   /* as Python shows a list that holds itself */
    free(r);
    r = taas_value_str(v);
    assert_string_equal(r, want);
    free(r);
    assert_true(taas_value_equal(v, w));
    taas_value *x = nested(taas_int(2), 200000, 0);
    assert_false(taas_value_equal(v, x));  /* they differ at the very bottom */
    taas_unref(x);
    json_t *spec = taas_value_spec(v);     /* a plain container: null past the bound */
    assert_true(json_is_array(spec));
    json_decref(spec);
    taas_unref(w);
    taas_unref(v);
    /* tuples and objects show their own ellipsis */
    v = nested(taas_int(1), 150, 1);
    r = taas_value_repr(v);
    assert_non_null(strstr(r, "(((...),),),"));
    free(r);
    taas_unref(v);
    taas_error err;
    taas_value *o[2];
    o[0] = TU0(&err, "ReLU");
    for (int i = 0; i < 98; i++) {  /* a Sequential and its tuple of layers: two levels a time */
        o[1] = TUO(&err, "Sequential", o, "$0");
        if (!o[1]) break;
        taas_unref(o[0]);
        o[0] = o[1];
    }
    /* objects are bounded when made: the 50th Sequential would make 102 levels */
    assert_null(o[1]);
    assert_string_equal(err.ename, "TaasValueError");
    assert_string_equal(err.message, "Sequential() nests too deeply: more than 100 levels of values");
    assert_true(err.hint[0] != '\0');
    assert_true(o[0]->u.obj.depth <= TAAS_VALUE_MAX_DEPTH);
    r = taas_value_repr(o[0]);
    assert_non_null(strstr(r, "Sequential(\n  (0): Sequential("));
    free(r);
    spec = taas_value_spec(o[0]);
    assert_string_equal(json_string_value(json_object_get(spec, "type")), "Sequential");
    json_decref(spec);
    taas_unref(o[0]);
}

static void test_repr_is_capped(void **state) {
    (void)state;
    /* L = [s] * 1000000 with s of 2 MB: the repr stops at 1 MiB with a note */
    size_t n = 3 * 700000;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i += 3) memcpy(big + i, "\xe2\x82\xac", 3);  /* €: a cut must not split it */
    taas_value *s = taas_str(big, n);
    free(big);
    taas_value *l = taas_list_new(1000000);
    for (size_t i = 0; i < l->u.seq.n; i++) l->u.seq.items[i] = taas_ref(s);
    char *r = taas_value_repr(l);
    size_t len = strlen(r);
    assert_true(len >= TAAS_REPR_MAX_BYTES && len < TAAS_REPR_MAX_BYTES + 100);
    assert_true(tu_ends_with(r, TU_REPR_CUT_NOTE));
    assert_true(taas_utf8_valid(r, len));
    assert_int_equal(strncmp(r, "['\xe2\x82\xac\xe2\x82\xac", 8), 0);
    free(r);
    r = taas_value_str(s);  /* str of the string itself: its text, cut alike */
    len = strlen(r);
    assert_true(len <= TAAS_REPR_MAX_BYTES + 100 && tu_ends_with(r, "... (str cut at 1 MiB; the value is bigger)"));
    assert_true(taas_utf8_valid(r, len));
    free(r);
    /* a buffer already full (print's next value) gets nothing more, not a second note */
    taas_buf b = TAAS_BUF_INIT;
    taas_str_to(l, &b);
    size_t first = b.len;
    taas_str_to(l, &b);
    assert_int_equal(b.len, first);
    taas_buf_free(&b);
    taas_unref(l);
    taas_unref(s);
    /* v1 = [v0, v0], ..., v40: 2^40 items as a tree, 41 values in memory */
    taas_value *v = taas_list_new(1);
    v->u.seq.items[0] = taas_int(7);
    for (int i = 0; i < 40; i++) {
        taas_value *d = taas_list_new(2);
        d->u.seq.items[0] = v;
        d->u.seq.items[1] = taas_ref(v);
        v = d;
    }
    r = taas_value_repr(v);
    assert_true(strlen(r) < TAAS_REPR_MAX_BYTES + 100 && tu_ends_with(r, TU_REPR_CUT_NOTE));
    free(r);
    json_t *mb = taas_value_mimebundle(v);  /* what a cell's result shows */
    const char *text = json_string_value(json_object_get(mb, "text/plain"));
    assert_non_null(text);
    assert_true(tu_ends_with(text, TU_REPR_CUT_NOTE));
    json_decref(mb);
    /* a Sequential that holds another twice, and so on: refused before it gets too large */
    taas_error err;
    taas_value *o[2];
    o[0] = TU0(&err, "ReLU");
    int levels = 0;
    for (; levels < 40; levels++) {
        o[1] = TUO(&err, "Sequential", o, "$0", "$0");
        if (!o[1]) break;
        taas_unref(o[0]);
        o[0] = o[1];
    }
    assert_true(levels > 10 && levels < 40);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "Sequential() is too large: it holds more than"));
    taas_unref(o[0]);
    taas_unref(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_repr),
        cmocka_unit_test(test_scalar_reprs),
        cmocka_unit_test(test_containers),
        cmocka_unit_test(test_truth_equality_types),
        cmocka_unit_test(test_builtin_reprs),
        cmocka_unit_test(test_sequential_repr),
        cmocka_unit_test(test_transform_and_dataset_reprs),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_mimebundle),
        cmocka_unit_test(test_deep_values),
        cmocka_unit_test(test_repr_is_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
