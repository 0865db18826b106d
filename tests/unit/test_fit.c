/* fit(), evaluate(), save() and load() in cells, without a training worker: the checks the
 * kernel makes itself (a Sequential, weights present, shapes for the loader's samples, a
 * weights file against the model's state_dict) and their messages, save/load moving a
 * weights file by name, and the History and Evaluation values. Training itself:
 * tests/protocol/test_fit.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interp.h"
#include "result.h"
#include "safetensors.h"

static void noop_stream(void *ctx, const char *name, const char *text) {
    (void)ctx;
    (void)name;
    (void)text;
}

static void noop_display(void *ctx, json_t *data, json_t *md, const char *id, int update) {
    (void)ctx;
    (void)id;
    (void)update;
    json_decref(data);
    json_decref(md);
}

static void noop_clear(void *ctx, int wait) {
    (void)ctx;
    (void)wait;
}

static void noop_page(void *ctx, json_t *data) {
    (void)ctx;
    json_decref(data);
}

static const taas_io IO = {.stream = noop_stream, .display = noop_display, .clear_output = noop_clear, .page = noop_page};

typedef struct {
    taas_interp *in;
    char dir[64];
    char old_cwd[4096];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/taas-test-fit-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_non_null(getcwd(f->old_cwd, sizeof f->old_cwd));
    assert_int_equal(chdir(f->dir), 0);
    f->in = taas_interp_new();
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    taas_interp_free(f->in);
    const char *names[] = {"good.safetensors", "copy.safetensors", "short.bin", "huge.bin", "cut.bin", "notjson.bin",
                           "nobias.safetensors", "rows.safetensors"};
    char p[128];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", f->dir, names[i]);
        unlink(p);
    }
    assert_int_equal(chdir(f->old_cwd), 0);
    rmdir(f->dir);
    free(f);
    return 0;
}

static taas_run_state run(fixture *f, const char *code, taas_error *err) {
    json_t *result = NULL;
    memset(err, 0, sizeof *err);
    taas_run_state st = taas_interp_run(f->in, code, &IO, &result, err);
    json_decref(result);
    return st;
}

static void write_file(const char *name, const void *data, size_t n) {
    FILE *fp = fopen(name, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

/* NET's state_dict (1.weight [2, 4], 1.bias [2]) as taas writes it; `bias` 0 leaves the
 * bias out, `rows` changes the weight's first size. */
static void write_weights(const char *name, int rows, int bias) {
    static float w[8 * 4], b[2];
    taas_st_tensor t[] = {{.key = "1.weight", .dtype = TAAS_ST_F32, .ndim = 2, .shape = {rows, 4}, .data = w},
                          {.key = "1.bias", .dtype = TAAS_ST_F32, .ndim = 1, .shape = {2}, .data = b}};
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_safetensors_write(name, t, bias ? 2 : 1, NULL, 0, &err), 0);
}

#define NET "net = Sequential(Flatten(), Linear(4, 2), LogSoftmax(dim=1))\n"

static void test_untrained(void **state) {
    fixture *f = *state;
    taas_error err;
    assert_int_equal(run(f, NET "save(net, 'copy.safetensors')", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "TaasValueError");
    assert_string_equal(err.message, "net has no trained weights yet: fit it first, or load weights");
    assert_non_null(strstr(err.hint, "load('net.safetensors', into=net)"));
    assert_int_equal(err.pos.line, 2);
    assert_int_equal(access("copy.safetensors", F_OK), -1);

    assert_int_equal(run(f, "evaluate(net, DataLoader(FashionMNIST(), batch_size=4))", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.message, "net has no trained weights yet: fit it first, or load weights");
}

static void test_not_a_model(void **state) {
    fixture *f = *state;
    taas_error err;
    assert_int_equal(run(f, "fit(3, DataLoader(FashionMNIST(), batch_size=4), loss=NLLLoss(), "
                            "optimizer=SGD(lr=0.1))", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "TaasTypeError");
    assert_string_equal(err.message, "fit() argument 'model' must be a model (Sequential, ResNet, BasicBlock, "
                                     "Bottleneck or a layer), not int");
    assert_int_equal(run(f, "load('good.safetensors', into=Adam())", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.message, "load() argument 'into' must be a model (Sequential, ResNet, BasicBlock, "
                                     "Bottleneck or a layer), not Adam");
}

static void test_fit_is_a_statement(void **state) {
    fixture *f = *state;
    taas_error err;
    assert_int_equal(run(f, NET "print(fit(net, DataLoader(FashionMNIST(), batch_size=4), loss=NLLLoss(), "
                                "optimizer=SGD(lr=0.1)))", &err), TAAS_RUN_ERROR);
    assert_non_null(strstr(err.message, "fit() waits, so it must be a whole statement"));
}

static void test_load_then_save(void **state) {
    fixture *f = *state;
    taas_error err;
    write_weights("good.safetensors", 2, 1);
    assert_int_equal(run(f, NET "load('good.safetensors', into=net)\nsave(net, 'copy.safetensors')", &err),
                     TAAS_RUN_DONE);
    FILE *a = fopen("good.safetensors", "rb"), *b = fopen("copy.safetensors", "rb");
    assert_non_null(a);
    assert_non_null(b);
    char x[256], y[256];
    size_t na = fread(x, 1, sizeof x, a), nb = fread(y, 1, sizeof y, b);
    fclose(a);
    fclose(b);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
}

static void expect_bad(fixture *f, const char *name, const char *ename, const char *msg, const char *hint) {
    taas_error err;
    char code[256];
    snprintf(code, sizeof code, NET "load('%s', into=net)", name);
    assert_int_equal(run(f, code, &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, ename);
    if (!strstr(err.message, msg)) fail_msg("'%s' lacks '%s'", err.message, msg);
    if (!strstr(err.hint, hint)) fail_msg("hint '%s' lacks '%s'", err.hint, hint);
    assert_int_equal(err.pos.line, 2);
}

static void test_load_bad_files(void **state) {
    fixture *f = *state;
    const char *not_st = "the path of a .safetensors file";
    write_file("short.bin", "\x05\x00\x00", 3);
    expect_bad(f, "short.bin", "TaasDataError", "short.bin is not a safetensors file: it is shorter than the 8-byte "
               "header size", not_st);
    write_file("huge.bin", "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
    expect_bad(f, "huge.bin", "TaasDataError", "huge.bin is not a safetensors file: its first 8 bytes do not give a "
               "plausible header size", not_st);
    write_file("cut.bin", "\x40\x00\x00\x00\x00\x00\x00\x00{\"a\"", 12);
    expect_bad(f, "cut.bin", "TaasDataError", "cut.bin is truncated: the header should be 64 bytes", "save it again");
    write_file("notjson.bin", "\x05\x00\x00\x00\x00\x00\x00\x00hello", 13);
    expect_bad(f, "notjson.bin", "TaasDataError", "notjson.bin is not a safetensors file: the header does not start "
               "with '{'", not_st);
    expect_bad(f, "missing.safetensors", "TaasIOError", "cannot open missing.safetensors", "check the path");
}

/* The file's tensors against the model's state_dict, before the file is attached. */
static void test_load_checks_the_tensors(void **state) {
    fixture *f = *state;
    write_weights("nobias.safetensors", 2, 0);
    expect_bad(f, "nobias.safetensors", "TaasValueError", "nobias.safetensors does not fit the model: missing keys "
               "'1.bias'", "model definition differs");
    write_weights("rows.safetensors", 3, 1);
    expect_bad(f, "rows.safetensors", "TaasValueError", "rows.safetensors: 1.weight has shape [3, 4], the model "
               "expects [2, 4]", "model definition differs");
    /* a model that was never fitted: nothing attached, so nothing to save */
    taas_error err;
    assert_int_equal(run(f, "save(net, 'copy.safetensors')", &err), TAAS_RUN_ERROR);
    assert_non_null(strstr(err.message, "no trained weights yet"));
    /* a LazyLinear's in_features is not known before data flows: any size fits */
    assert_int_equal(run(f, "lazy = Sequential(Flatten(), LazyLinear(2))\nload('rows.safetensors', into=lazy)", &err),
                     TAAS_RUN_ERROR);
    assert_non_null(strstr(err.message, "1.weight has shape [3, 4], the model expects [2, ?]"));
    write_weights("good.safetensors", 2, 1);
    assert_int_equal(run(f, "load('good.safetensors', into=lazy)", &err), TAAS_RUN_DONE);
}

/* The text/plain of code's result (the cell must succeed). */
static void expect_result(fixture *f, const char *code, const char *want) {
    json_t *result = NULL;
    taas_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(taas_interp_run(f->in, code, &IO, &result, &err), TAAS_RUN_DONE);
    const char *got = json_string_value(json_object_get(result, "text/plain"));
    if (!got || strcmp(got, want)) fail_msg("'%s' gave '%s', not '%s'", code, got ? got : "(none)", want);
    json_decref(result);
}

/* load() returns torch's _IncompatibleKeys; strict=False without weights makes them partial,
 * which save() refuses; a model's weights file gone is named as such by save(). */
static void test_load_not_strict(void **state) {
    fixture *f = *state;
    char tmp[128], file[512];
    snprintf(tmp, sizeof tmp, "%s/tmp", f->dir);
    assert_int_equal(mkdir(tmp, 0700), 0);
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", tmp, 1);
    write_weights("good.safetensors", 2, 1);
    write_weights("nobias.safetensors", 2, 0);
    expect_result(f, NET "load('good.safetensors', into=net)", "<All keys matched successfully>");
    expect_result(f, "load('good.safetensors', into=net, strict=False)", "<All keys matched successfully>");
    expect_result(f, "part = Sequential(Flatten(), Linear(4, 2), LogSoftmax(dim=1))\n"
                     "load('nobias.safetensors', into=part, strict=False)",
                  "_IncompatibleKeys(missing_keys=['1.bias'], unexpected_keys=[])");
    expect_result(f, "lin = Sequential(Flatten(), Linear(4, 2, bias=False))\nload('good.safetensors', into=lin, strict=False)",
                  "_IncompatibleKeys(missing_keys=[], unexpected_keys=['1.bias'])");
    json_t *shown = NULL;
    taas_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(taas_interp_run(f->in, "part", &IO, &shown, &err), TAAS_RUN_DONE);
    assert_non_null(strstr(json_string_value(json_object_get(shown, "text/plain")), "\nweights: partial"));
    json_decref(shown);
    assert_int_equal(run(f, "save(part, 'copy.safetensors')", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "part has partial weights"));
    assert_int_equal(access("copy.safetensors", F_OK), -1);
    /* into a model with weights: the file's tensors, the model's own for the rest, whole */
    assert_int_equal(run(f, "load('nobias.safetensors', into=net, strict=False)\nsave(net, 'copy.safetensors')", &err),
                     TAAS_RUN_DONE);
    assert_int_equal(run(f, "load('copy.safetensors', into=part)\nlin = None\nnet = None", &err), TAAS_RUN_DONE);
    /* part's own copy removed behind the kernel's back */
    DIR *d = opendir(tmp);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "taas-job-", 9)) {
            snprintf(file, sizeof file, "%s/%s/weights.safetensors", tmp, e->d_name);
            found += unlink(file) == 0;
        }
    closedir(d);
    assert_int_equal(found, 1);  /* part's; net's and lin's went with them */
    assert_int_equal(run(f, "save(part, 'copy.safetensors')", &err), TAAS_RUN_ERROR);
    assert_non_null(strstr(err.message, "save() cannot read the trained weights"));
    assert_int_equal(run(f, "part = None", &err), TAAS_RUN_DONE);
    if (saved) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
    free(saved);
    d = opendir(tmp);
    while ((e = readdir(d))) {
        snprintf(file, sizeof file, "%s/%s", tmp, e->d_name);
        if (e->d_name[0] != '.') rmdir(file);
    }
    closedir(d);
    assert_int_equal(rmdir(tmp), 0);
}

/* History and Evaluation, as fit() and evaluate() return them from the worker's done line. */
static void test_result_values(void **state) {
    (void)state;
    json_t *done = json_loads("{\"event\":\"done\",\"history\":[{\"event\":\"epoch\",\"epoch\":1,"
                              "\"train_loss\":0.61234,\"val_loss\":0.5,\"val_accuracy\":0.8213,\"time_s\":9.84,"
                              "\"samples_per_s\":6120.4},{\"event\":\"epoch\",\"epoch\":2,\"train_loss\":0.4,"
                              "\"val_loss\":null,\"val_accuracy\":null,\"time_s\":10,\"samples_per_s\":1234567}]}",
                              0, NULL);
    taas_value *h = taas_result_of_fit(done);
    assert_non_null(h);
    assert_string_equal(taas_value_type_name(h), "History");
    char *r = taas_value_repr(h);
    assert_string_equal(r, "History (2 epochs)\n"
                           "epoch  train loss  val loss  val accuracy    time  samples/s\n"
                           "    1      0.6123    0.5000        0.8213   9.8 s      6,120\n"
                           "    2      0.4000         -             -  10.0 s  1,234,567");
    free(r);
    json_t *b = taas_value_mimebundle(h);
    const char *html = json_string_value(json_object_get(b, "text/html"));
    assert_non_null(strstr(html, "<caption style=\"text-align:left\">History (2 epochs)</caption>"));
    assert_non_null(strstr(html, "<th>val accuracy</th>"));
    assert_non_null(strstr(html, "<td>0.8213</td>"));
    json_decref(b);
    taas_unref(h);
    json_decref(done);

    done = json_loads("{\"event\":\"done\",\"loss\":0.45123,\"accuracy\":0.8391,\"samples\":10000}", 0, NULL);
    taas_value *e = taas_result_of_evaluate(done);
    r = taas_value_repr(e);
    assert_string_equal(r, "Evaluation(loss=0.4512, accuracy=0.8391, samples=10000)");
    free(r);
    b = taas_value_mimebundle(e);
    assert_non_null(strstr(json_string_value(json_object_get(b, "text/html")), ">Evaluation</caption>"));
    json_decref(b);
    taas_unref(e);
    json_decref(done);
    /* a done line without what the value needs (another version of the worker) */
    done = json_loads("{\"event\":\"done\",\"history\":[{\"epoch\":1}]}", 0, NULL);
    assert_null(taas_result_of_fit(done));
    json_decref(done);
}

/* Unknown and ill-typed arguments: the builtin table's checks, before anything starts. */
static void test_bad_arguments(void **state) {
    fixture *f = *state;
    static const struct { const char *code, *ename, *msg; } cases[] = {
        {"fit(net, train, epochs='x', loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasTypeError",
         "fit() argument 'epochs' must be int, not str"},
        {"fit(net, train, epochs=0, loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasValueError",
         "fit() argument 'epochs' must be between 1 and 1000000, got 0"},
        {"fit(net, train, los=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasTypeError",
         "fit() got an unexpected keyword argument 'los'"},
        {"fit(net, train, loss=SGD(lr=0.1), optimizer=NLLLoss())", "TaasTypeError",
         "fit() argument 'loss' must be a loss, not SGD"},
        {"fit(net, train, loss=NLLLoss())", "TaasTypeError", "fit() missing 1 required argument: 'optimizer'"},
        {"fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), scheduler=ReLU())", "TaasTypeError",
         "fit() argument 'scheduler' must be a scheduler or None, not ReLU"},
        {"fit(net, FashionMNIST(), loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasTypeError",
         "fit() argument 'loader' must be a DataLoader, not FashionMNIST"},
        {"fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), seed=-1)", "TaasValueError",
         "fit() argument 'seed' must be >= 0, got -1"},
        {"evaluate(net, train, units=0)", "TaasValueError", "evaluate() argument 'units' must be >= 1, got 0"},
        {"load(net, 'x')", "TaasTypeError", "load() takes 1 positional argument but 2 were given"},
        {"save('x', net)", "TaasTypeError", "save() argument 'model' must be a model (Sequential, ResNet, BasicBlock, Bottleneck or a layer), not str"},
    };
    taas_error err;
    assert_int_equal(run(f, NET "train = DataLoader(FashionMNIST(), batch_size=64)", &err), TAAS_RUN_DONE);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(run(f, cases[i].code, &err), TAAS_RUN_ERROR);
        if (strcmp(err.ename, cases[i].ename) || !strstr(err.message, cases[i].msg))
            fail_msg("%s: %s: %s", cases[i].code, err.ename, err.message);
        assert_non_null(strstr(err.hint, "Signature: "));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_untrained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_not_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fit_is_a_statement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_then_save, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_checks_the_tensors, setup, teardown),
        cmocka_unit_test(test_result_values),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
