/* fit(), evaluate(), save() and load() in cells, without a worker: the checks the kernel
 * makes itself (a Sequential, weights present, a safetensors header) and their messages,
 * and save/load moving a weights file by name. Training itself: tests/protocol/test_fit.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interp.h"

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

static const taas_io IO = {NULL, noop_stream, noop_display, noop_clear, noop_page};

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
    const char *names[] = {"good.safetensors", "copy.safetensors", "short.bin", "huge.bin", "cut.bin", "notjson.bin"};
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

/* An 8-byte little-endian length and a JSON header, then the tensor bytes. */
static void write_safetensors(const char *name) {
    const char hdr[] = "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    unsigned char buf[128];
    uint64_t n = sizeof hdr - 1;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, hdr, n);
    memset(buf + 8 + n, 0, 4);
    write_file(name, buf, 8 + n + 4);
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

static void test_not_a_sequential(void **state) {
    fixture *f = *state;
    taas_error err;
    assert_int_equal(run(f, "fit(Linear(3, 4), DataLoader(FashionMNIST(), batch_size=4), loss=NLLLoss(), "
                            "optimizer=SGD(lr=0.1))", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "TaasTypeError");
    assert_string_equal(err.message, "fit() trains and evaluates a Sequential, not Linear");
    assert_non_null(strstr(err.hint, "Sequential("));
    assert_int_equal(run(f, "load('good.safetensors', into=ReLU())", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.message, "load() trains and evaluates a Sequential, not ReLU");
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
    write_safetensors("good.safetensors");
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

static void expect_bad(fixture *f, const char *name, const char *why) {
    taas_error err;
    char code[256], want[256];
    snprintf(code, sizeof code, NET "load('%s', into=net)", name);
    assert_int_equal(run(f, code, &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "TaasValueError");
    snprintf(want, sizeof want, "%s is not a safetensors file: %s", name, why);
    assert_string_equal(err.message, want);
    assert_non_null(strstr(err.hint, "save(net, 'name.safetensors')"));
    assert_int_equal(err.pos.line, 2);
}

static void test_load_bad_files(void **state) {
    fixture *f = *state;
    write_file("short.bin", "\x05\x00\x00", 3);
    expect_bad(f, "short.bin", "it is shorter than the 8-byte header length");
    write_file("huge.bin", "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
    expect_bad(f, "huge.bin", "its header length is not a plausible size (2 bytes to 100 MB)");
    write_file("cut.bin", "\x40\x00\x00\x00\x00\x00\x00\x00{\"a\"", 12);
    expect_bad(f, "cut.bin", "it ends inside its header");
    write_file("notjson.bin", "\x05\x00\x00\x00\x00\x00\x00\x00hello", 13);
    expect_bad(f, "notjson.bin", "its header is not a JSON object");

    taas_error err;
    assert_int_equal(run(f, NET "load('missing.safetensors', into=net)", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "FileNotFoundError");
    assert_non_null(strstr(err.message, "cannot open missing.safetensors"));
    assert_non_null(strstr(err.hint, "working directory"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_untrained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_sequential, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fit_is_a_statement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_then_save, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_bad_files, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
