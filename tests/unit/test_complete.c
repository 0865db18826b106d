/* kernel/lang/complete: completion (names, module prefixes, keyword arguments) and
 * inspection (builtins, variables, the callee of an open call). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interp.h"

static taas_interp *in;

static int setup(void **state) {
    (void)state;
    in = taas_interp_new();
    json_t *r = NULL;
    taas_error err;
    taas_run_state s = taas_interp_run(in, "learning_rate = 0.1\nlayer = Linear(1, 2)\nL = nn.Linear\nnet = Sequential(ReLU())",
                                       NULL, &r, &err);
    assert_int_equal(s, TAAS_RUN_DONE);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    taas_interp_free(in);
    return 0;
}

/* Completes code at the '|' (or at its end); checks the replaced range. */
static json_t *complete(const char *code_with_bar, size_t want_start) {
    char code[512];
    const char *bar = strchr(code_with_bar, '|');
    size_t cursor = bar ? (size_t)(bar - code_with_bar) : strlen(code_with_bar);
    snprintf(code, sizeof code, "%.*s%s", (int)cursor, code_with_bar, bar ? bar + 1 : "");
    size_t start = 99, end = 99;
    json_t *m = taas_interp_complete(in, code, cursor, &start, &end);
    assert_non_null(m);
    assert_true(json_is_array(m));
    if (start != want_start) fail_msg("%s: start %zu, wanted %zu", code_with_bar, start, want_start);
    assert_int_equal(end, cursor);
    return m;
}

static int has(const json_t *m, const char *s) {
    size_t i;
    json_t *x;
    json_array_foreach(m, i, x) if (!strcmp(json_string_value(x), s)) return 1;
    return 0;
}

static const char *at(const json_t *m, size_t i) { return json_string_value(json_array_get(m, i)); }

static void test_builtin_names(void **state) {
    (void)state;
    json_t *m = complete("pri", 0);
    assert_int_equal(json_array_size(m), 1);
    assert_string_equal(at(m, 0), "print");
    json_decref(m);
    m = complete("x = Conv", 4);
    assert_true(has(m, "Conv2d"));
    json_decref(m);
    m = complete("x = nn.Co", 4);
    assert_true(has(m, "nn.Conv2d"));
    assert_false(has(m, "Conv2d"));
    assert_false(has(m, "nn.Compose"));  /* Compose is a transform, not nn */
    json_decref(m);
    m = complete("torch.nn.Li", 0);
    assert_true(has(m, "torch.nn.Linear"));
    json_decref(m);
    m = complete("optim.lr_scheduler.St", 0);
    assert_true(has(m, "optim.lr_scheduler.StepLR"));
    json_decref(m);
}

static void test_module_prefixes(void **state) {
    (void)state;
    json_t *m = complete("tor", 0);
    assert_true(has(m, "torch"));
    assert_true(has(m, "torchvision"));
    json_decref(m);
    m = complete("torch.", 0);
    assert_true(has(m, "torch.nn"));
    assert_true(has(m, "torch.optim"));
    assert_false(has(m, "torch.nn.Linear"));  /* one segment at a time */
    json_decref(m);
    m = complete("sys.", 0);
    assert_int_equal(json_array_size(m), 2);
    assert_true(has(m, "sys.stdout"));
    assert_true(has(m, "sys.stderr"));
    json_decref(m);
}

static void test_variables_and_constants(void **state) {
    (void)state;
    json_t *m = complete("l", 0);
    assert_string_equal(at(m, 0), "learning_rate");  /* variables first, in definition order */
    assert_string_equal(at(m, 1), "layer");
    assert_true(has(m, "len"));
    json_decref(m);
    m = complete("print(Tr", 6);
    assert_string_equal(at(m, 0), "True");
    json_decref(m);
    m = complete("", 0);  /* everything */
    assert_string_equal(at(m, 0), "learning_rate");
    assert_true(has(m, "None"));
    assert_true(has(m, "Linear"));
    assert_true(has(m, "nn"));
    json_decref(m);
}

/* After "var.": the attributes the value has, as PyTorch names them. */
static void test_attributes(void **state) {
    (void)state;
    json_t *r = NULL;
    taas_error err;
    assert_int_equal(taas_interp_run(in, "res = resnet18()", NULL, &r, &err), TAAS_RUN_DONE);
    json_t *m = complete("res.", 0);
    const char *want[] = {"res.conv1", "res.bn1", "res.relu", "res.maxpool", "res.layer1", "res.layer2", "res.layer3",
                          "res.layer4", "res.avgpool", "res.fc", "res.zero_init_residual", "res.requires_grad_"};
    assert_int_equal(json_array_size(m), 12);
    for (size_t i = 0; i < 12; i++) assert_string_equal(at(m, i), want[i]);
    json_decref(m);
    m = complete("x = res.la", 4);
    assert_int_equal(json_array_size(m), 4);
    assert_string_equal(at(m, 0), "res.layer1");
    json_decref(m);
    m = complete("res.fc.in", 0);  /* a child's arguments */
    assert_int_equal(json_array_size(m), 1);
    assert_string_equal(at(m, 0), "res.fc.in_features");
    json_decref(m);
    m = complete("res.nothing.x", 0);  /* nothing there: nothing offered, no builtin either */
    assert_int_equal(json_array_size(m), 0);
    json_decref(m);
    m = complete("learning_rate.", 0);
    assert_int_equal(json_array_size(m), 0);
    json_decref(m);
    m = complete("nn.Li", 0);  /* a module prefix is no variable: the builtins, as before */
    assert_true(has(m, "nn.Linear"));
    json_decref(m);
}

static void test_keyword_arguments(void **state) {
    (void)state;
    json_t *m = complete("Conv2d(1, st", 10);
    assert_int_equal(json_array_size(m), 1);
    assert_string_equal(at(m, 0), "stride=");
    json_decref(m);
    m = complete("Conv2d(1, ", 10);
    assert_string_equal(at(m, 0), "in_channels=");
    assert_true(has(m, "padding_mode="));
    assert_true(has(m, "learning_rate"));  /* a value is fine here too */
    json_decref(m);
    m = complete("Conv2d(1, stride=2, ", 20);
    assert_false(has(m, "stride="));  /* already given */
    assert_true(has(m, "padding="));
    json_decref(m);
    m = complete("nn.Conv2d(\n    1, d", 18);
    assert_true(has(m, "dilation="));
    json_decref(m);
    m = complete("Sequential(Linear(1, ", 21);  /* the innermost open call */
    assert_true(has(m, "bias="));
    json_decref(m);
    m = complete("L(1, b", 5);  /* a variable bound to a builtin */
    assert_true(has(m, "bias="));
    json_decref(m);
    m = complete("Conv2d(1, stride=", 17);  /* a value, not a keyword */
    assert_false(has(m, "stride="));
    assert_false(has(m, "padding="));
    json_decref(m);
    m = complete("Linear(1, 2)(b", 13);  /* not a builtin call */
    assert_false(has(m, "bias="));
    json_decref(m);
}

static void test_nothing_to_complete(void **state) {
    (void)state;
    const char *none[] = {"# Co", "x = 1.", "x = '''\nCo", "x = 'a' # Con"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        size_t s, e;
        json_t *m = taas_interp_complete(in, none[i], strlen(none[i]), &s, &e);
        if (json_array_size(m)) fail_msg("%s should complete to nothing", none[i]);
        json_decref(m);
    }
    json_t *m = complete("x = 'a' + Com", 10);  /* after a closed string */
    assert_true(has(m, "Compose"));
    json_decref(m);
}

/* Inside a string: file names, relative to the working directory (the notebook's folder). */
static void test_paths_in_strings(void **state) {
    (void)state;
    char dir[] = "/tmp/taas-complete-XXXXXX", old[4096];
    assert_non_null(mkdtemp(dir));
    assert_non_null(getcwd(old, sizeof old));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(mkdir("data", 0755), 0);
    fclose(fopen("data/train.npy", "w"));
    fclose(fopen("data/test.npy", "w"));
    fclose(fopen("data/.hidden", "w"));
    fclose(fopen("net.safetensors", "w"));
    json_t *m = complete("load('n", 6);                   /* the part after the quote is replaced */
    assert_int_equal(json_array_size(m), 1);
    assert_string_equal(at(m, 0), "net.safetensors");
    json_decref(m);
    m = complete("x = NpyDataset('da", 16);
    assert_string_equal(at(m, 0), "data/");               /* folders end with a slash */
    json_decref(m);
    m = complete("x = NpyDataset('data/t", 21);            /* only the last part is replaced */
    assert_int_equal(json_array_size(m), 2);
    assert_string_equal(at(m, 0), "test.npy");
    assert_string_equal(at(m, 1), "train.npy");
    json_decref(m);
    m = complete("x = 'data/", 10);
    assert_int_equal(json_array_size(m), 2);               /* no hidden files unless asked */
    json_decref(m);
    m = complete("x = 'data/.", 10);
    assert_true(has(m, ".hidden"));
    json_decref(m);
    m = complete("print(\"Co", 7);                         /* no builtin names inside a string */
    assert_int_equal(json_array_size(m), 0);
    json_decref(m);
    m = complete("x = 'http://host/da", 19);               /* a URL is not a path here */
    assert_int_equal(json_array_size(m), 0);
    json_decref(m);
    unlink("data/train.npy");
    unlink("data/test.npy");
    unlink("data/.hidden");
    rmdir("data");
    unlink("net.safetensors");
    assert_int_equal(chdir(old), 0);
    rmdir(dir);
}

static void test_offsets_are_bytes(void **state) {
    (void)state;
    json_t *m = complete("s = 'é'\npri", 9);
    assert_string_equal(at(m, 0), "print");
    json_decref(m);
    m = complete("Lin|ear(3)", 0);  /* the cursor inside a name: what is before it counts */
    assert_true(has(m, "Linear"));
    json_decref(m);
    size_t s, e;
    m = taas_interp_complete(in, "pri", 999, &s, &e);  /* clamped */
    assert_int_equal(e, 3);
    assert_string_equal(at(m, 0), "print");
    json_decref(m);
}

static const char *inspect_text(const char *code, size_t cursor, int detail, json_t **keep) {
    *keep = taas_interp_inspect(in, code, cursor, detail);
    if (!*keep) return NULL;
    return json_string_value(json_object_get(*keep, "text/plain"));
}

static void test_inspect(void **state) {
    (void)state;
    json_t *b, *b1;
    const char *t = inspect_text("print", 5, 0, &b);
    assert_non_null(t);
    assert_true(!strncmp(t, "print(", 6));
    json_decref(b);
    t = inspect_text("x = Conv2d(1, ", 14, 0, &b);  /* the callee of the open call */
    assert_true(!strncmp(t, "Conv2d(in_channels", 18));
    json_decref(b);
    t = inspect_text("nn.Conv2d(1)", 1, 0, &b);  /* the cursor on the module prefix */
    assert_true(!strncmp(t, "Conv2d(", 7));
    json_decref(b);
    const char *t1 = inspect_text("Conv2d", 0, 1, &b1);
    t = inspect_text("Conv2d", 0, 0, &b);
    assert_true(strlen(t1) > strlen(t));  /* detail 1 adds the parameter table */
    json_decref(b);
    json_decref(b1);
    t = inspect_text("layer", 3, 0, &b);
    assert_true(!strncmp(t, "layer = Linear(in_features=1, out_features=2, bias=True)\ntype: Linear\n\nLinear(", 75));
    json_decref(b);
    t = inspect_text("learning_rate", 13, 0, &b);
    assert_string_equal(t, "learning_rate = 0.1\ntype: float");
    json_decref(b);
    t = inspect_text("print(x, file=sys.stderr)", 20, 0, &b);
    assert_non_null(strstr(t, "sys.stderr = 'stderr'"));
    json_decref(b);
    t = inspect_text("layer.in_features", 10, 0, &b);  /* a part of a variable */
    assert_non_null(t);
    assert_string_equal(t, "layer.in_features = 1\ntype: int");
    json_decref(b);
    assert_null(taas_interp_inspect(in, "layer.nothing", 8, 0));
    assert_null(taas_interp_inspect(in, "zzqq", 2, 0));
    assert_null(taas_interp_inspect(in, "", 0, 0));
    assert_null(taas_interp_inspect(in, "x = 'print'", 8, 0));  /* inside a string */
    assert_null(taas_interp_inspect(in, "1.5", 3, 0));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_builtin_names), T(test_module_prefixes), T(test_variables_and_constants),
        T(test_attributes),
        T(test_keyword_arguments), T(test_nothing_to_complete), T(test_paths_in_strings), T(test_offsets_are_bytes), T(test_inspect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
