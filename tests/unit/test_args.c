/* taas_builtin_call: Python's binding rules and every error path, each checked for its
 * ename, message, the argument it points at (column = argument index + 1; 100 = the
 * call) and a hint with the signature; range and cross-argument checks; the literal
 * reader for table defaults. */
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

#define CALL_POS 100

static void expect_error(taas_value *v, const taas_error *err, const char *ename, const char *message, int col) {
    if (v) {
        char *r = taas_value_repr(v);
        print_error("expected %s, got a value: %s\n", message, r);
        free(r);
        taas_unref(v);
        fail();
    }
    if (strcmp(err->message, message) != 0) print_error("got:  %s\nwant: %s\n", err->message, message);
    assert_string_equal(err->ename, ename);
    assert_string_equal(err->message, message);
    assert_int_equal(err->pos.line, 1);
    assert_int_equal(err->pos.col, col);
    assert_true(err->width >= 1);
    assert_true(err->hint[0] != '\0'); /* every error says what to do */
}

static void expect_hint(const taas_error *err, const char *part) {
    if (!strstr(err->hint, part)) print_error("hint '%s' lacks '%s'\n", err->hint, part);
    assert_non_null(strstr(err->hint, part));
}

#define CONV_SIG \
    "Signature: Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, " \
    "bias=True, padding_mode='zeros')"

static void test_positional_and_keyword_binding(void **state) {
    (void)state;
    taas_error err;
    /* positionals, keywords, defaults: all three spellings give the same layer */
    taas_value *a = TU(&err, "Conv2d", "1", "32", "3");
    taas_value *b = TU(&err, "Conv2d", "in_channels=1", "out_channels=32", "kernel_size=3");
    taas_value *c = TU(&err, "Conv2d", "1", "kernel_size=3", "out_channels=32", "stride=1");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_true(taas_value_equal(a, b));
    assert_true(taas_value_equal(a, c));
    taas_unref(a);
    taas_unref(b);
    taas_unref(c);
    /* *args collects positionals; what follows it is keyword only */
    taas_value *o[2] = {TU0(&err, "ReLU"), TU0(&err, "Tanh")};
    taas_value *s = TUO(&err, "Sequential", o, "$0", "$1", "$0");
    assert_int_equal(taas_object_arg(s, "layers")->u.seq.n, 3);
    taas_unref(s);
    taas_unref(o[0]);
    taas_unref(o[1]);
}

static void test_too_many_positionals(void **state) {
    (void)state;
    taas_error err;
    taas_value *v = TU(&err, "Conv2d", "1", "32", "3", "1", "0", "1", "1", "True", "'zeros'", "9");
    expect_error(v, &err, "TaasTypeError", "Conv2d() takes from 3 to 9 positional arguments but 10 were given", 10);
    assert_string_equal(err.hint, CONV_SIG);
    expect_error(TU(&err, "Tanh", "1"), &err, "TaasTypeError", "Tanh() takes 0 positional arguments but 1 was given", 1);
    expect_error(TU(&err, "len", "1", "2"), &err, "TaasTypeError", "len() takes 1 positional argument but 2 were given", 2);
    expect_error(TU(&err, "ReLU", "True", "2"), &err, "TaasTypeError",
                 "ReLU() takes from 0 to 1 positional arguments but 2 were given", 2);
    /* DataLoader's settings after shuffle are keyword only (PyTorch has sampler there) */
    taas_value *o[1] = {TU(&err, "FashionMNIST", "train=False")};
    v = TUO(&err, "DataLoader", o, "$0", "64", "True", "4");
    expect_error(v, &err, "TaasTypeError", "DataLoader() takes from 1 to 3 positional arguments but 4 were given", 4);
    expect_hint(&err, "*, num_workers=0");
    taas_unref(o[0]);
}

static void test_missing_required(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "Conv2d", "1", "32"), &err, "TaasTypeError",
                 "Conv2d() missing 1 required argument: 'kernel_size'", CALL_POS);
    assert_string_equal(err.hint, CONV_SIG);
    expect_error(TU0(&err, "Conv2d"), &err, "TaasTypeError",
                 "Conv2d() missing 3 required arguments: 'in_channels', 'out_channels' and 'kernel_size'", CALL_POS);
    expect_error(TU(&err, "Linear", "out_features=3"), &err, "TaasTypeError",
                 "Linear() missing 1 required argument: 'in_features'", CALL_POS);
    expect_error(TU0(&err, "StepLR"), &err, "TaasTypeError", "StepLR() missing 1 required argument: 'step_size'",
                 CALL_POS);
}

static void test_unknown_keyword(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "Conv2d", "1", "32", "kernal_size=3"), &err, "TaasTypeError",
                 "Conv2d() got an unexpected keyword argument 'kernal_size'", 3);
    assert_string_equal(err.hint, "did you mean 'kernel_size'? " CONV_SIG);
    expect_error(TU(&err, "Dropout", "prob=0.1"), &err, "TaasTypeError",
                 "Dropout() got an unexpected keyword argument 'prob'", 1);
    assert_string_equal(err.hint, "Signature: Dropout(p=0.5, inplace=False)");
    expect_error(TU(&err, "DataLoader", "batchsize=4"), &err, "TaasTypeError",
                 "DataLoader() got an unexpected keyword argument 'batchsize'", 1);
    expect_hint(&err, "did you mean 'batch_size'?");
    /* *args cannot be named */
    expect_error(TU(&err, "print", "values=1"), &err, "TaasTypeError",
                 "print() got an unexpected keyword argument 'values'", 1);
    /* PyTorch arguments taas leaves out are unknown, not ignored */
    expect_error(TU(&err, "Linear", "1", "2", "device='cuda'"), &err, "TaasTypeError",
                 "Linear() got an unexpected keyword argument 'device'", 3);
}

static void test_given_twice_and_order(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "Conv2d", "1", "32", "3", "in_channels=3"), &err, "TaasTypeError",
                 "Conv2d() got multiple values for argument 'in_channels'", 4);
    expect_hint(&err, "'in_channels' is already given as the 1st positional argument.");
    expect_hint(&err, CONV_SIG);
    expect_error(TU(&err, "Linear", "p=1", "p=2"), &err, "TaasTypeError",
                 "Linear() got an unexpected keyword argument 'p'", 1);
    expect_error(TU(&err, "Linear", "1", "bias=True", "bias=False"), &err, "TaasTypeError",
                 "Linear() got multiple values for argument 'bias'", 3);
    expect_error(TU(&err, "Linear", "in_features=1", "2"), &err, "TaasSyntaxError",
                 "positional argument follows keyword argument", 2);
}

static void test_wrong_types(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "Conv2d", "1", "32", "'3'"), &err, "TaasTypeError",
                 "Conv2d() argument 'kernel_size' must be int or (int, int), not str", 3);
    assert_string_equal(err.hint, CONV_SIG);
    expect_error(TU(&err, "Conv2d", "1", "32", "(3, 3, 3)"), &err, "TaasTypeError",
                 "Conv2d() argument 'kernel_size' must be int or (int, int), not tuple", 3);
    expect_error(TU(&err, "Conv2d", "1.0", "32", "3"), &err, "TaasTypeError",
                 "Conv2d() argument 'in_channels' must be int, not float", 1);
    expect_error(TU(&err, "Linear", "True", "2"), &err, "TaasTypeError",
                 "Linear() argument 'in_features' must be int, not bool", 1);
    expect_error(TU(&err, "Linear", "1", "2", "1"), &err, "TaasTypeError",
                 "Linear() argument 'bias' must be bool, not int", 3);
    expect_error(TU(&err, "Dropout", "None"), &err, "TaasTypeError",
                 "Dropout() argument 'p' must be float, not NoneType", 1);
    expect_error(TU(&err, "BatchNorm1d", "4", "momentum='x'"), &err, "TaasTypeError",
                 "BatchNorm1d() argument 'momentum' must be float or None, not str", 2);
    expect_error(TU(&err, "Adam", "betas=0.9"), &err, "TaasTypeError",
                 "Adam() argument 'betas' must be (float, float), not float", 1);
    expect_error(TU(&err, "Normalize", "()", "(1,)"), &err, "TaasTypeError",
                 "Normalize() argument 'mean' must be float or tuple of floats, not tuple", 1);
    expect_error(TU(&err, "MultiStepLR", "[1, 2.5]"), &err, "TaasTypeError",
                 "MultiStepLR() argument 'milestones' must be list of ints, not list", 1);
    expect_error(TU(&err, "Conv2d", "1", "32", "3", "padding=1.5"), &err, "TaasTypeError",
                 "Conv2d() argument 'padding' must be int, (int, int), 'valid' or 'same', not float", 4);
    expect_error(TU(&err, "RandomCrop", "32", "padding=(1, 2, 3)"), &err, "TaasTypeError",
                 "RandomCrop() argument 'padding' must be int, (int, int) or (int, int, int, int) or None, not tuple", 2);
    expect_error(TU(&err, "WebDataset", "[]"), &err, "TaasTypeError",
                 "WebDataset() argument 'urls' must be str or list of str, not list", 1);
    /* object kinds */
    taas_value *o[4] = {TU0(&err, "ReLU"), TU0(&err, "ToTensor"), taas_builtin_value(taas_builtin_find("ReLU")),
                        TU(&err, "FashionMNIST", "train=False")};
    expect_error(TUO(&err, "Sequential", o, "$0", "3"), &err, "TaasTypeError",
                 "Sequential() argument 2 must be a layer (nn.Module), not int", 2);
    expect_error(TUO(&err, "Sequential", o, "$0", "$1"), &err, "TaasTypeError",
                 "Sequential() argument 2 must be a layer (nn.Module), not ToTensor", 2);
    expect_error(TUO(&err, "Sequential", o, "$2"), &err, "TaasTypeError",
                 "Sequential() argument 1 must be a layer (nn.Module), not builtin", 1);
    assert_string_equal(err.hint, "call it: write ReLU() instead of ReLU. Signature: Sequential(*layers)");
    expect_error(TUO(&err, "Compose", o, "[$1, $0]"), &err, "TaasTypeError",
                 "Compose() argument 'transforms' must be a list of transforms, not list", 1);
    expect_error(TUO(&err, "FashionMNIST", o, "transform=$0"), &err, "TaasTypeError",
                 "FashionMNIST() argument 'transform' must be a transform or None, not ReLU", 1);
    expect_error(TUO(&err, "DataLoader", o, "$1"), &err, "TaasTypeError",
                 "DataLoader() argument 'dataset' must be a dataset, not ToTensor", 1);
    expect_error(TUO(&err, "register", o, "$3"), &err, "TaasTypeError",
                 "register() argument 'loader' must be a DataLoader, not FashionMNIST", 1);
    expect_error(TUO(&err, "SequentialLR", o, "[$0]", "[]"), &err, "TaasTypeError",
                 "SequentialLR() argument 'schedulers' must be a list of schedulers, not list", 1);
    for (int i = 0; i < 4; i++) taas_unref(o[i]);
    /* SequentialLR's own checks */
    taas_value *s[3] = {TU(&err, "LinearLR", "start_factor=0.1"), TU(&err, "CosineAnnealingLR", "10"),
                        TU(&err, "OneCycleLR", "0.1")};
    expect_error(TUO(&err, "SequentialLR", s, "[$0, $1]", "[]"), &err, "TaasValueError",
                 "SequentialLR() takes 1 to 8 schedulers and one milestone fewer, got 2 and 0", 2);
    expect_error(TUO(&err, "SequentialLR", s, "[$0, $2]", "[5]"), &err, "TaasValueError",
                 "SequentialLR() cannot hold OneCycleLR (scheduler 1)", 1);
    expect_error(TUO(&err, "SequentialLR", s, "[$0, $1, $1]", "[5, 5]"), &err, "TaasValueError",
                 "SequentialLR() milestones must increase, got 5 after 5", 2);
    expect_error(TUO(&err, "SequentialLR", s, "[$0, $1]", "[0]"), &err, "TaasValueError",
                 "SequentialLR() argument 'milestones' must be >= 1, got [0]", 2);
    taas_value *ok = TUO(&err, "SequentialLR", s, "[$0, $1]", "[5]");
    assert_non_null(ok);
    taas_unref(ok);
    for (int i = 0; i < 3; i++) taas_unref(s[i]);
    expect_error(TU(&err, "LinearLR", "0"), &err, "TaasValueError", "LinearLR() start_factor must be > 0, got 0", 1);
}

static void test_ranges(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "Conv2d", "0", "32", "3"), &err, "TaasValueError",
                 "Conv2d() argument 'in_channels' must be >= 1, got 0", 1);
    assert_string_equal(err.hint, CONV_SIG);
    expect_error(TU(&err, "Conv2d", "1", "32", "(3, 0)"), &err, "TaasValueError",
                 "Conv2d() argument 'kernel_size' must be >= 1, got (3, 0)", 3);
    expect_error(TU(&err, "Conv2d", "1", "32", "3", "padding=-1"), &err, "TaasValueError",
                 "Conv2d() argument 'padding' must be >= 0, got -1", 4);
    expect_error(TU(&err, "Linear", "9216", "0"), &err, "TaasValueError",
                 "Linear() argument 'out_features' must be >= 1, got 0", 2);
    expect_error(TU(&err, "Dropout", "1.5"), &err, "TaasValueError",
                 "Dropout() argument 'p' must be between 0 and 1, got 1.5", 1);
    /* infinite numbers are never a default in disguise (issue 16, defect 12) */
    expect_error(TU(&err, "SGD", "lr=1e400"), &err, "TaasValueError",
                 "SGD() argument 'lr' must be a finite number, got inf", 1);
    expect_hint(&err, "infinite");
    expect_error(TU(&err, "StepLR", "step_size=1", "gamma=1e400"), &err, "TaasValueError",
                 "StepLR() argument 'gamma' must be a finite number, got inf", 2);
    expect_error(TU(&err, "Adam", "lr=-1e999"), &err, "TaasValueError",
                 "Adam() argument 'lr' must be a finite number, got -inf", 1);
    expect_error(TU(&err, "Normalize", "(0.5, 1e400)", "(0.5, 0.5)"), &err, "TaasValueError",
                 "Normalize() argument 'mean' must be a finite number, got (0.5, inf)", 1);
    expect_error(TU(&err, "Dropout2d", "p=-0.1"), &err, "TaasValueError",
                 "Dropout2d() argument 'p' must be between 0 and 1, got -0.1", 1);
    expect_error(TU(&err, "BatchNorm2d", "0"), &err, "TaasValueError",
                 "BatchNorm2d() argument 'num_features' must be >= 1, got 0", 1);
    expect_error(TU(&err, "BatchNorm1d", "8", "momentum=2"), &err, "TaasValueError",
                 "BatchNorm1d() argument 'momentum' must be between 0 and 1, got 2", 2);
    expect_error(TU(&err, "SGD", "lr=-0.1"), &err, "TaasValueError", "SGD() argument 'lr' must be >= 0, got -0.1", 1);
    expect_error(TU(&err, "SGD", "momentum=-1"), &err, "TaasValueError",
                 "SGD() argument 'momentum' must be >= 0, got -1", 1);
    expect_error(TU(&err, "Adam", "betas=(0.9, -0.5)"), &err, "TaasValueError",
                 "Adam() argument 'betas' must be between 0 and 1, got (0.9, -0.5)", 1);
    expect_error(TU(&err, "CrossEntropyLoss", "label_smoothing=1.5"), &err, "TaasValueError",
                 "CrossEntropyLoss() argument 'label_smoothing' must be between 0 and 1, got 1.5", 1);
    expect_error(TU(&err, "StepLR", "0"), &err, "TaasValueError", "StepLR() argument 'step_size' must be >= 1, got 0", 1);
    expect_error(TU(&err, "DataLoader", "batch_size=0"), &err, "TaasTypeError",
                 "DataLoader() missing 1 required argument: 'dataset'", CALL_POS);
    expect_error(TU(&err, "RandomHorizontalFlip", "2"), &err, "TaasValueError",
                 "RandomHorizontalFlip() argument 'p' must be between 0 and 1, got 2", 1);
    expect_error(TU(&err, "sleep", "86401"), &err, "TaasValueError",
                 "sleep() argument 'seconds' must be between 0 and 86400, got 86401", 1);
    /* NaN is no number an argument takes */
    taas_value *o[1] = {taas_float(NAN)};
    expect_error(TUO(&err, "Dropout", o, "$0"), &err, "TaasValueError",
                 "Dropout() argument 'p' must be a finite number, got nan", 1);
    taas_unref(o[0]);
    /* the bounds themselves are inside */
    taas_value *v = TU(&err, "Dropout", "1");
    assert_non_null(v);
    taas_unref(v);
    v = TU(&err, "Dropout", "0.0");
    assert_non_null(v);
    taas_unref(v);
}

static void test_choices(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "Conv2d", "1", "32", "3", "padding_mode='zero'"), &err, "TaasValueError",
                 "Conv2d() argument 'padding_mode' must be 'zeros', 'reflect', 'replicate' or 'circular', got 'zero'", 4);
    assert_string_equal(err.hint, "did you mean 'zeros'? " CONV_SIG);
    expect_error(TU(&err, "Conv2d", "1", "32", "3", "padding='full'"), &err, "TaasValueError",
                 "Conv2d() argument 'padding' must be 'valid' or 'same', got 'full'", 4);
    expect_error(TU(&err, "NLLLoss", "reduction='average'"), &err, "TaasValueError",
                 "NLLLoss() argument 'reduction' must be 'mean', 'sum' or 'none', got 'average'", 1);
    expect_error(TU(&err, "Resize", "32", "interpolation='linear'"), &err, "TaasValueError",
                 "Resize() argument 'interpolation' must be 'nearest', 'bilinear' or 'bicubic', got 'linear'", 2);
    expect_hint(&err, "did you mean 'bilinear'?");
    /* RandomResizedCrop and ColorJitter: torchvision's checks, at the argument */
    expect_error(TU(&err, "RandomResizedCrop", "224", "scale=(1.0, 0.5)"), &err, "TaasValueError",
                 "RandomResizedCrop() scale should be of kind (min, max) with 0 < min <= max, got (1, 0.5)", 2);
    expect_error(TU(&err, "ColorJitter", "hue=0.6"), &err, "TaasValueError",
                 "ColorJitter() hue values should be between (-0.5, 0.5)", 1);
    expect_error(TU(&err, "ColorJitter", "brightness=-0.2"), &err, "TaasValueError",
                 "ColorJitter() if brightness is a single number, it must be non negative", 1);
    expect_error(TU(&err, "ColorJitter", "contrast=(0.5,)"), &err, "TaasTypeError",
                 "ColorJitter() contrast should be a single number or a list/tuple with length 2", 1);
    expect_error(TU(&err, "print", "1", "file='stdin'"), &err, "TaasValueError",
                 "print() argument 'file' must be 'stdout' or 'stderr', got 'stdin'", 2);
    expect_error(TU(&err, "GELU", "'exact'"), &err, "TaasValueError",
                 "GELU() argument 'approximate' must be 'none' or 'tanh', got 'exact'", 1);
    expect_error(TU(&err, "OneCycleLR", "0.1", "anneal_strategy='cosine'"), &err, "TaasValueError",
                 "OneCycleLR() argument 'anneal_strategy' must be 'cos' or 'linear', got 'cosine'", 2);
    expect_error(TU(&err, "RandomCrop", "32", "padding_mode='wrap'"), &err, "TaasValueError",
                 "RandomCrop() argument 'padding_mode' must be 'constant', 'edge', 'reflect' or 'symmetric', got 'wrap'", 2);
}

static void test_cross_argument_checks(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "Conv2d", "3", "32", "3", "groups=2"), &err, "TaasValueError",
                 "Conv2d() in_channels (3) must be divisible by groups (2)", 4);
    expect_error(TU(&err, "Conv2d", "4", "6", "3", "groups=4"), &err, "TaasValueError",
                 "Conv2d() out_channels (6) must be divisible by groups (4)", 4);
    expect_error(TU(&err, "LazyConv2d", "6", "3", "groups=4"), &err, "TaasValueError",
                 "LazyConv2d() out_channels (6) must be divisible by groups (4)", 3);
    expect_error(TU(&err, "Conv2d", "1", "32", "3", "2", "'same'"), &err, "TaasValueError",
                 "Conv2d() padding='same' is not supported for strided convolutions", 5);
    expect_hint(&err, "stride=1");
    expect_error(TU(&err, "MaxPool2d", "2", "padding=2"), &err, "TaasValueError",
                 "MaxPool2d() padding should be at most half of the kernel size, but got padding=2, kernel_size=2", 2);
    expect_error(TU(&err, "AvgPool2d", "(3, 2)", "padding=(1, 2)"), &err, "TaasValueError",
                 "AvgPool2d() padding should be at most half of the kernel size, but got padding=2, kernel_size=2", 2);
    expect_error(TU(&err, "MaxPool2d", "2", "return_indices=True"), &err, "TaasValueError",
                 "MaxPool2d() return_indices=True is not supported", 2);
    expect_error(TU(&err, "Normalize", "(0.5, 0.5)", "(0.5, 0.5, 0.5)"), &err, "TaasValueError",
                 "Normalize() mean has 2 values but std has 3", 2);
    expect_error(TU(&err, "Normalize", "(0.5,)", "(0,)"), &err, "TaasValueError",
                 "Normalize() std has a zero, which would divide by zero", 2);
    expect_error(TU(&err, "Resize", "(32, 32)", "max_size=64"), &err, "TaasValueError",
                 "Resize() max_size is only allowed when size is an int (the smaller edge)", 2);
    expect_error(TU(&err, "Resize", "32", "max_size=32"), &err, "TaasValueError",
                 "Resize() max_size = 32 must be strictly greater than the requested size for the smaller edge size = 32", 2);
    expect_error(TU(&err, "SGD", "nesterov=True"), &err, "TaasValueError",
                 "SGD() nesterov=True requires a momentum and zero dampening", 1);
    expect_error(TU(&err, "AdamW", "betas=(0.9, 1.0)"), &err, "TaasValueError", "AdamW() betas[1] must be below 1, got 1.0", 1);
    expect_error(TU(&err, "OneCycleLR", "0.1", "div_factor=0"), &err, "TaasValueError", "OneCycleLR() div_factor must be > 0", 2);
    expect_error(TU(&err, "OneCycleLR", "0.1", "base_momentum=0.99"), &err, "TaasValueError",
                 "OneCycleLR() base_momentum must not exceed max_momentum", 2);
    taas_value *o[1] = {TU(&err, "FashionMNIST", "train=False")};
    expect_error(TUO(&err, "DataLoader", o, "$0", "prefetch_factor=2"), &err, "TaasValueError",
                 "DataLoader() prefetch_factor can only be given with num_workers > 0", 2);
    taas_unref(o[0]);
}

static void test_datasets_never_download(void **state) {
    (void)state;
    taas_error err;
    expect_error(TU(&err, "FashionMNIST", "download=True"), &err, "TaasValueError",
                 "FashionMNIST() download=True: taas never downloads data", 1);
    expect_hint(&err, "apt-get install dataset-fashion-mnist");
    expect_error(TU(&err, "MNIST", "'/data'", "download=True"), &err, "TaasValueError",
                 "MNIST() download=True: taas never downloads data", 2);
    expect_error(TU0(&err, "MNIST"), &err, "TaasValueError", "MNIST() needs root: no Debian package ships MNIST", CALL_POS);
    expect_hint(&err, "root='...'");
    expect_error(TU(&err, "CIFAR10", "train=False"), &err, "TaasValueError",
                 "CIFAR10() needs root: no Debian package ships CIFAR10", CALL_POS);
    taas_value *to_tensor[] = {TU0(&err, "ToTensor")};
    expect_error(TUO(&err, "FashionMNIST", to_tensor, "target_transform=$0"), &err, "TaasValueError",
                 "FashionMNIST() target_transform is not supported: taas transforms act on images, "
                 "labels are used as they are", 1);
    expect_hint(&err, "target_transform=None");
    taas_unref(to_tensor[0]);
    /* FashionMNIST without root reads Debian's dataset-fashion-mnist */
    taas_value *v = TU0(&err, "FashionMNIST");
    assert_string_equal(taas_object_arg(v, "root")->u.str.s, "/usr/share/datasets/fashion-mnist");
    taas_unref(v);
}

static void test_optimizer_and_scheduler_without_their_first_argument(void **state) {
    (void)state;
    taas_error err;
    taas_value *o[3];
    o[0] = TU(&err, "Linear", "2", "3");
    o[1] = TUO(&err, "Sequential", o, "$0");
    o[2] = TU(&err, "SGD", "lr=0.1");
    expect_error(TUO(&err, "Adadelta", o, "$1", "lr=1.0"), &err, "TaasTypeError",
                 "Adadelta() takes no model or parameters: fit() hands the model's parameters to the optimizer", 1);
    expect_hint(&err, "fit(net, train, optimizer=Adadelta(lr=...))");
    expect_hint(&err, "Signature: Adadelta(lr=1.0, rho=0.9, eps=1e-06, weight_decay=0)");
    expect_error(TUO(&err, "optim.SGD", o, "$0"), &err, "TaasTypeError",
                 "SGD() takes no model or parameters: fit() hands the model's parameters to the optimizer", 1);
    expect_error(TUO(&err, "StepLR", o, "$2", "step_size=1"), &err, "TaasTypeError",
                 "StepLR() takes no optimizer: fit() hands its optimizer to the scheduler", 1);
    expect_hint(&err, "scheduler=StepLR(...)");
    for (int i = 0; i < 3; i++) taas_unref(o[i]);
}

static void test_literal_reader(void **state) {
    (void)state;
    const struct {
        const char *src, *repr;
    } ok[] = {
        {"1", "1"}, {"-100", "-100"}, {"0.9", "0.9"}, {"1e-05", "1e-05"}, {"1E+3", "1000.0"}, {"0.0", "0.0"},
        {"25.0", "25.0"}, {"'zeros'", "'zeros'"}, {"\"a'b\"", "\"a'b\""}, {"'\\n'", "'\\n'"}, {"None", "None"},
        {"True", "True"}, {"False", "False"}, {"(0.9, 0.999)", "(0.9, 0.999)"}, {"(1,)", "(1,)"}, {"(1)", "1"},
        {"()", "()"}, {"[]", "[]"}, {"[1, [2, 'x'], (None,)]", "[1, [2, 'x'], (None,)]"}, {" ( 1 , 2 , ) ", "(1, 2)"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        taas_value *v = taas_literal_parse(ok[i].src);
        if (!v) print_error("cannot read %s\n", ok[i].src);
        assert_non_null(v);
        char *r = taas_value_repr(v);
        assert_string_equal(r, ok[i].repr);
        free(r);
        taas_unref(v);
    }
    const char *bad[] = {"", "x", "1 2", "(1", "[1,", "'open", "'\\q'", "1e", "-", "Nonesuch", "((((((((((1))))))))))",
                         "99999999999999999999", NULL};
    for (size_t i = 0; bad[i]; i++) assert_null(taas_literal_parse(bad[i]));
    assert_null(taas_literal_parse(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_positional_and_keyword_binding),
        cmocka_unit_test(test_too_many_positionals),
        cmocka_unit_test(test_missing_required),
        cmocka_unit_test(test_unknown_keyword),
        cmocka_unit_test(test_given_twice_and_order),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_choices),
        cmocka_unit_test(test_cross_argument_checks),
        cmocka_unit_test(test_datasets_never_download),
        cmocka_unit_test(test_optimizer_and_scheduler_without_their_first_argument),
        cmocka_unit_test(test_literal_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
