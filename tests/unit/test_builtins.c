/* The builtin table: its rows are complete and consistent (every default reads, has its
 * own type and range, and every constructor builds), lookup with and without module
 * prefixes, "did you mean", signatures, help text and the generated Markdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_testutil.h"
#include "builtins_testutil.h"

/* Required arguments that make each builtin; a new row without an entry fails. */
static const struct {
    const char *name;
    const char *args[11];  /* NULL-terminated */
} SAMPLES[] = {
    {"MNIST", {"'/data/mnist'"}}, {"CIFAR10", {"'/data/cifar'"}}, {"NpyDataset", {"'x.npy'", "'y.npy'"}},
    {"WebDataset", {"'a.tar'"}}, {"ImageFolder", {"'/data/train'"}}, {"Normalize", {"0.5", "0.5"}}, {"RandomCrop", {"28"}}, {"Resize", {"32"}},
    {"CenterCrop", {"28"}}, {"RandomResizedCrop", {"224"}}, {"Compose", {"[]"}}, {"DataLoader", {"$0"}}, {"Linear", {"4", "2"}},
    {"LazyLinear", {"2"}}, {"Conv2d", {"1", "8", "3"}}, {"LazyConv2d", {"8", "3"}}, {"MaxPool2d", {"2"}},
    {"AvgPool2d", {"2"}}, {"BatchNorm1d", {"8"}}, {"BatchNorm2d", {"8"}}, {"StepLR", {"1"}},
    {"MultiStepLR", {"[1, 2]"}}, {"ExponentialLR", {"0.9"}}, {"CosineAnnealingLR", {"10"}},
    {"OneCycleLR", {"0.1"}}, {"LinearLR", {NULL}}, {"SequentialLR", {"[$4]", "[]"}}, {"AdaptiveAvgPool2d", {"1"}}, {"BasicBlock", {"64", "64"}},
    {"Bottleneck", {"256", "64"}}, {"Embedding", {"16", "8"}}, {"TextFile", {"'t.txt'", "8"}}, {"TokenShards", {"'t.bin'", "8"}}, {"LayerNorm", {"8"}}, {"GPT2LMHeadModel", {"$3"}}, {"ResNet", {"$2", "$2", "$2", "$2", "$2", "$2", "$2", "$2", "$2", "$2"}},
    {"requires_grad_", {"$2"}}, {"len", {"'abc'"}}, {"sleep", {"0"}}, {"register", {"$1"}}, {"unregister", {"$1"}},
};

static const char *const *sample_args(const char *name) {
    static const char *const none[] = {NULL};
    for (size_t i = 0; i < sizeof SAMPLES / sizeof *SAMPLES; i++)
        if (strcmp(SAMPLES[i].name, name) == 0) return SAMPLES[i].args;
    return none;
}

static void test_rows_are_complete(void **state) {
    (void)state;
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    /* the builtins of the foundation issue, all there */
    const char *required[] = {"MNIST", "FashionMNIST", "CIFAR10", "NpyDataset", "WebDataset", "ToTensor", "Normalize",
                              "RandomCrop", "RandomHorizontalFlip", "Resize", "CenterCrop", "Compose", "DataLoader",
                              "Linear", "LazyLinear", "Conv2d", "LazyConv2d", "MaxPool2d", "AvgPool2d", "ReLU",
                              "LeakyReLU", "Tanh", "Sigmoid", "GELU", "Dropout", "Dropout2d", "BatchNorm1d",
                              "BatchNorm2d", "Flatten", "LogSoftmax", "Softmax", "Sequential", "NLLLoss",
                              "CrossEntropyLoss", "MSELoss", "SGD", "Adam", "AdamW", "Adadelta", "RMSprop", "StepLR",
                              "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "OneCycleLR", "print", "help",
                              "display", "clear_output", "sleep", "len", "register", "unregister", NULL};
    size_t nreq = 0;
    for (; required[nreq]; nreq++) assert_non_null(taas_builtin_find(required[nreq]));
    assert_true(n >= nreq);
    for (size_t i = 0; i < n; i++) {
        const taas_builtin *b = all[i];
        assert_non_null(b->name);
        assert_non_null(b->module);
        assert_non_null(b->params);
        assert_true(b->doc && strlen(b->doc) > 20);
        assert_ptr_equal(taas_row_of(b), (const taas_row *)b);
        assert_ptr_equal(taas_builtin_find(b->name), b);
        /* an action acts; a constructor either makes its object or builds one (resnet18) */
        if (b->kind == TAAS_K_ACTION) assert_non_null(b->action);
        for (size_t j = i + 1; j < n; j++) assert_string_not_equal(b->name, all[j]->name);
        for (size_t k = 0; b->params[k].name; k++) {
            const taas_param *p = &b->params[k];
            assert_true(p->doc && p->doc[0]);
            assert_int_equal(taas_param_index(b, p->name), (int)k);
            if (p->dflt) {
                taas_value *d = taas_param_default(p);
                if (!d) print_error("%s.%s: default %s does not read\n", b->name, p->name, p->dflt);
                assert_non_null(d);
                taas_unref(d);
            }
        }
    }
    assert_null(taas_row_of(NULL));
    taas_builtin foreign = {"Foreign", "taas", TAAS_K_LAYER, NULL, "not in the table", NULL, 0, 0, 0};
    assert_null(taas_row_of(&foreign));
}

/* Every constructor builds from its required arguments, and giving each default
 * explicitly (so that it passes the same type and range checks as user input) builds
 * the same value. */
static void test_every_constructor_builds_and_defaults_check(void **state) {
    (void)state;
    taas_error err;
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    taas_value *objs[5];
    objs[0] = TU(&err, "FashionMNIST", "train=False");
    objs[1] = TUO(&err, "DataLoader", objs, "$0");
    objs[2] = TU0(&err, "ReLU");
    objs[3] = TU0(&err, "GPT2Config");
    objs[4] = TU(&err, "StepLR", "1");
    assert_non_null(objs[1]);
    for (size_t i = 0; i < n; i++) {
        const taas_builtin *b = all[i];
        if (b->kind == TAAS_K_ACTION) continue;
        const char *const *req = sample_args(b->name);
        taas_value *plain = tu_call(&err, b->name, req, objs);
        if (!plain) print_error("%s: %s: %s\n", b->name, err.ename, err.message);
        assert_non_null(plain);
        assert_int_equal(taas_value_kind(plain), (int)b->kind);
        const char *args[TU_MAX_ARGS + 1];
        char texts[TU_MAX_ARGS][160];
        size_t k = 0;
        for (; req[k]; k++) args[k] = req[k];
        size_t nreq = k;
        for (size_t j = 0; b->params[j].name && k < TU_MAX_ARGS; j++) {
            const taas_param *p = &b->params[j];
            if (!p->dflt || j < nreq) continue;
            snprintf(texts[k], sizeof texts[k], "%s=%s", p->name, p->dflt);
            args[k] = texts[k];
            k++;
        }
        args[k] = NULL;
        taas_value *explicit = tu_call(&err, b->name, args, objs);
        if (!explicit) print_error("%s with explicit defaults: %s: %s\n", b->name, err.ename, err.message);
        assert_non_null(explicit);
        assert_true(taas_value_equal(plain, explicit));
        taas_unref(plain);
        taas_unref(explicit);
    }
    taas_unref(objs[0]);
    taas_unref(objs[1]);
    taas_unref(objs[2]);
    taas_unref(objs[3]);
    taas_unref(objs[4]);
}

static void test_find_with_prefixes(void **state) {
    (void)state;
    const struct {
        const char *dotted, *name;
    } ok[] = {
        {"Conv2d", "Conv2d"}, {"nn.Conv2d", "Conv2d"}, {"torch.nn.Conv2d", "Conv2d"}, {"optim.Adam", "Adam"},
        {"torch.optim.Adam", "Adam"}, {"optim.lr_scheduler.StepLR", "StepLR"},
        {"torch.optim.lr_scheduler.StepLR", "StepLR"}, {"lr_scheduler.OneCycleLR", "OneCycleLR"},
        {"datasets.MNIST", "MNIST"}, {"torchvision.datasets.FashionMNIST", "FashionMNIST"},
        {"transforms.ToTensor", "ToTensor"}, {"torchvision.transforms.Compose", "Compose"},
        {"torch.utils.data.DataLoader", "DataLoader"}, {"DataLoader", "DataLoader"}, {"taas.print", "print"},
        {"print", "print"}, {"taas.register", "register"}, {"nn.CrossEntropyLoss", "CrossEntropyLoss"},
        {"transformers.GPT2LMHeadModel", "GPT2LMHeadModel"}, {"transformers.GPT2Config", "GPT2Config"},
        {"transformers.GPT2LMHeadModel.from_pretrained", "from_pretrained"},
        {"GPT2LMHeadModel.from_pretrained", "from_pretrained"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        const taas_builtin *b = taas_builtin_find(ok[i].dotted);
        if (!b) print_error("%s not found\n", ok[i].dotted);
        assert_non_null(b);
        assert_string_equal(b->name, ok[i].name);
    }
    const char *missing[] = {"nn.Adam", "optim.Conv2d", "Conv3d", "foo.Conv2d", "torch.Conv2d", "nn.",
                             "", "conv2d", "taas.Conv2d", "nn.nn.Conv2d", "nn.from_pretrained",
                             "transformers.from_pretrained", "GPT2LMHeadModel.GPT2Config", NULL};
    for (size_t i = 0; missing[i]; i++) assert_null(taas_builtin_find(missing[i]));
    assert_null(taas_builtin_find(NULL));
}

static void test_suggest(void **state) {
    (void)state;
    char out[64];
    const char *const keywords[] = {"True", "False", "None", NULL};
    const char *const vars[] = {"net", "train_loader", NULL};
    const struct {
        const char *name;
        const char *const *extra;
        const char *want;
    } cases[] = {
        {"Conv3d", NULL, "Conv2d"}, {"conv2d", NULL, "Conv2d"}, {"Sequental", NULL, "Sequential"},
        {"Adadelt", NULL, "Adadelta"}, {"prnt", NULL, "print"}, {"nn.Conv3d", NULL, "nn.Conv2d"},
        {"torch.optim.Adamw", NULL, "torch.optim.AdamW"}, {"Flase", keywords, "False"},
        {"nett", vars, "net"}, {"train_loder", vars, "train_loader"}, {"Dataloader", NULL, "DataLoader"},
        {"BatchNorm", NULL, "BatchNorm1d"}, {"Conv", NULL, "Conv2d"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        out[0] = '\0';
        int got = taas_builtin_suggest(cases[i].name, cases[i].extra, out, sizeof out);
        if (!got || strcmp(out, cases[i].want) != 0) print_error("%s -> '%s'\n", cases[i].name, out);
        assert_true(got);
        assert_string_equal(out, cases[i].want);
    }
    assert_false(taas_builtin_suggest("xyzzy", NULL, out, sizeof out));
    assert_false(taas_builtin_suggest("q", vars, out, sizeof out));
    assert_false(taas_builtin_suggest(NULL, NULL, out, sizeof out));
    /* a small buffer is cut, never overrun */
    char tiny[4];
    assert_true(taas_builtin_suggest("Sequental", NULL, tiny, sizeof tiny));
    assert_string_equal(tiny, "Seq");
}

static void test_signatures(void **state) {
    (void)state;
    const struct {
        const char *name, *sig;
    } cases[] = {
        {"Conv2d", "Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, "
                   "bias=True, padding_mode='zeros')"},
        {"Tanh", "Tanh()"},
        {"Sequential", "Sequential(*layers)"},
        {"print", "print(*values, sep=' ', end='\\n', file='stdout')"},
        {"DataLoader", "DataLoader(dataset, batch_size=1, shuffle=False, *, num_workers=0, drop_last=False, "
                       "prefetch_factor=None)"},
        {"CrossEntropyLoss", "CrossEntropyLoss(*, ignore_index=-100, reduction='mean', label_smoothing=0.0)"},
        {"Adadelta", "Adadelta(lr=1.0, rho=0.9, eps=1e-06, weight_decay=0)"},
        {"SGD", "SGD(lr=0.001, momentum=0, dampening=0, weight_decay=0, nesterov=False)"},
        {"StepLR", "StepLR(step_size, gamma=0.1)"},
        {"FashionMNIST", "FashionMNIST(root=None, train=True, transform=None, target_transform=None, download=False)"},
        {"RandomCrop", "RandomCrop(size, padding=None, pad_if_needed=False, fill=0, padding_mode='constant')"},
        {"Normalize", "Normalize(mean, std, inplace=False)"},
        {"display", "display(*objs, display_id=None, update=False)"},
        {"help", "help(obj=None)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *s = taas_builtin_signature(taas_builtin_find(cases[i].name));
        assert_string_equal(s, cases[i].sig);
        free(s);
    }
}

static void test_help_text(void **state) {
    (void)state;
    const taas_builtin *b = taas_builtin_find("Conv2d");
    char *brief = taas_builtin_help_text(b, 0);
    char *full = taas_builtin_help_text(b, 1);
    assert_non_null(strstr(brief, "Conv2d(in_channels, out_channels, kernel_size, stride=1"));
    assert_non_null(strstr(brief, "nn.Conv2d, a layer."));
    assert_non_null(strstr(brief, "A 2-D convolution"));
    assert_null(strstr(brief, "Parameters:"));
    assert_non_null(strstr(full, "Parameters:\n  in_channels: int, 1 to 2147483647; required\n      channels of the input image\n"));
    assert_non_null(strstr(full, "  padding_mode: 'zeros', 'reflect', 'replicate' or 'circular'; default 'zeros'\n"));
    assert_non_null(strstr(full, "  padding: int, (int, int), 'valid' or 'same', >= 0; default 0\n"));
    free(brief);
    free(full);
    full = taas_builtin_help_text(taas_builtin_find("DataLoader"), 1);
    assert_non_null(strstr(full, "torch.utils.data.DataLoader, a data loader."));
    assert_non_null(strstr(full, "  num_workers: int, 0 to 256; default 0; keyword only\n"));
    free(full);
    full = taas_builtin_help_text(taas_builtin_find("Sequential"), 1);
    assert_non_null(strstr(full, "  *layers: a layer (nn.Module), any number\n"));
    free(full);
    full = taas_builtin_help_text(taas_builtin_find("Adam"), 1);
    assert_non_null(strstr(full, "optim.Adam, an optimizer."));
    free(full);
    /* no line of the doc is longer than 78 columns */
    full = taas_builtin_help_text(taas_builtin_find("Sequential"), 1);
    for (char *line = strtok(full, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "Sequential(", 11) != 0) assert_true(strlen(line) <= 78);
    free(full);
}

static void test_overview_and_markdown(void **state) {
    (void)state;
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    char *ov = taas_help_overview();
    char *md = taas_builtins_markdown();
    char *md2 = taas_builtins_markdown();
    assert_string_equal(md, md2); /* deterministic */
    for (size_t i = 0; i < n; i++) {
        char want[256];
        snprintf(want, sizeof want, "\n  %s ", all[i]->name);
        if (!strstr(ov, want)) print_error("overview lacks %s\n", all[i]->name);
        assert_non_null(strstr(ov, want));
        snprintf(want, sizeof want, "\n### %s\n\n`%s.%s` · ", all[i]->name, all[i]->module, all[i]->name);
        if (!strstr(md, want)) print_error("markdown lacks %s\n", all[i]->name);
        assert_non_null(strstr(md, want));
        char *sig = taas_builtin_signature(all[i]);
        snprintf(want, sizeof want, "```python\n%s\n```", sig);
        assert_non_null(strstr(md, want));
        free(sig);
        assert_non_null(strstr(md, all[i]->doc));
    }
    const char *sections[] = {"## Datasets", "## Transforms", "## Data loading", "## Layers", "## Losses",
                              "## Optimizers", "## Learning-rate schedulers", "## Actions", NULL};
    for (size_t i = 0; sections[i]; i++) assert_non_null(strstr(md, sections[i]));
    assert_non_null(strstr(md, "| `kernel_size` | int or (int, int) | required | 1 to 2147483647 | size of the convolving kernel |"));
    assert_non_null(strstr(md, "| `p` | float | `0.5` | 0 to 1 | probability of an element to be zeroed |"));
    assert_non_null(strstr(md, "| `num_workers` | int | `0`, keyword only | 0 to 256 |"));
    assert_non_null(strstr(md, "| `*layers` | a layer (nn.Module) | (any number) |"));
    assert_non_null(strstr(md, "`taas.sleep` · action · waits"));
    assert_non_null(strstr(md, "- [Learning-rate schedulers](#learning-rate-schedulers): `StepLR`"));
    assert_non_null(strstr(ov, "\nLayers\n"));
    free(ov);
    free(md);
    free(md2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_are_complete),
        cmocka_unit_test(test_every_constructor_builds_and_defaults_check),
        cmocka_unit_test(test_find_with_prefixes),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_signatures),
        cmocka_unit_test(test_help_text),
        cmocka_unit_test(test_overview_and_markdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
