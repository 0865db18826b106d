/* Every allocation a cell makes may fail, and each failure ends the cell with an error
 * (TaasMemoryError), never a crash or an abort: this binary is linked with
 * -Wl,--wrap=malloc,... (tests/CMakeLists.txt), and jansson allocates through the kernel's
 * counting hook (taas_json_init), so through it too, so that
 * the Nth allocation of a cell fails, for every N from 1 until the cell needs no failure.
 * After each run the same interpreter runs the next cell correctly; under the ASan build
 * (sanitizer.asan_ubsan) nothing leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_testutil.h"
#include "interp.h"
#include "value.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

/* fail_at: the allocation, counted from 1 once armed, that fails (0: none); count: how many
 * the armed code made; failed: whether the one to fail was reached. */
static size_t fail_at, count;
static int armed, failed;

static int fails(void) {
    if (!armed) return 0;
    count++;
    if (count != fail_at) return 0;
    failed = 1;
    return 1;
}

void *__wrap_malloc(size_t n) { return fails() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fails() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fails() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fails() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fails() ? NULL : __real_strndup(s, n); }

/* The cell's text/plain result ("" for none), or "ename: message" (malloc'd, unarmed). */
static char *run(taas_interp *in, const char *code, taas_run_state *state) {
    json_t *r = NULL;
    taas_error err;
    taas_run_state s = taas_interp_run(in, code, NULL, &r, &err);
    int was = armed;
    armed = 0;
    char *text;
    if (s == TAAS_RUN_ERROR) {
        text = malloc(strlen(err.ename) + strlen(err.message) + 3);
        sprintf(text, "%s: %s", err.ename, err.message);
    } else {
        const char *t = json_string_value(json_object_get(r, "text/plain"));
        text = strdup(t ? t : "");
    }
    json_decref(r);
    armed = was;
    if (state) *state = s;
    return text;
}

static void expect(taas_interp *in, const char *code, const char *want) {
    char *got = run(in, code, NULL);
    if (strcmp(got, want)) fail_msg("%s: got \"%.300s\", wanted \"%s\"", code, got, want);
    free(got);
}

/* Runs setup, then cell with its Nth allocation failing for N = 1, 2, ... until a run
 * reaches no failure; each run ends as the cell does without failures (success, or the
 * error `ename`) or in a TaasMemoryError, and then `check` gives `want`. */
static void every_failure_or(const char *ename, const char *setup, const char *cell, const char *check,
                             const char *want) {
    taas_interp *in = taas_interp_new();
    assert_non_null(in);
    if (setup) {
        taas_run_state s;
        char *r = run(in, setup, &s);
        if (s != TAAS_RUN_DONE) fail_msg("%s: %s", setup, r);
        free(r);
    }
    size_t n = 1;
    for (;; n++) {
        fail_at = n;
        count = 0;
        failed = 0;
        armed = 1;
        taas_run_state s;
        char *r = run(in, cell, &s);
        armed = 0;
        int as_without = ename ? s == TAAS_RUN_ERROR && !strncmp(r, ename, strlen(ename)) && r[strlen(ename)] == ':'
                               : s == TAAS_RUN_DONE;
        if (!as_without && !(failed && s == TAAS_RUN_ERROR && !strncmp(r, "TaasMemoryError: ", 17)))
            fail_msg("%s, allocation %zu of %s failing: %s", cell, n, failed ? "it" : "none", r);
        free(r);
        expect(in, check, want);
        if (!failed) break;
    }
    char line[64];
    snprintf(line, sizeof line, "%s", cell);
    for (char *c = line; *c; c++) *c = *c == '\n' ? ';' : *c;
    print_message("%5zu allocations, each failing once: %s\n", n - 1, line);
    taas_interp_free(in);
}

static void every_failure(const char *setup, const char *cell, const char *check, const char *want) {
    every_failure_or(NULL, setup, cell, check, want);
}

static void test_literals_and_arithmetic(void **state) {
    (void)state;
    every_failure(NULL, "x = 1\ny = 2.5\nz = 'text'\nt = (1, 2.0, 'a', None, True)", "1 + 1", "2");
    every_failure("a = 7", "b = a * 3 + 1 - 2 // 1 % 5 ** 2 / 2.0\n-b", "a", "7");
    every_failure(NULL, "l = [1, [2, (3, 'x')], []]\nl", "1 + 1", "2");
}

static void test_strings_and_sequences(void **state) {
    (void)state;
    every_failure("s = 'ab' * 3", "u = s + 'cd' + s\nv = [s, u] * 4 + [1]\nw = (1,) + (2, 3)\nlen(v)", "s", "'ababab'");
    every_failure("s = 'x' * 1000", "t = [s + '0', s + '1', s + '2']\nlen(t)", "len(s)", "1000");
}

static void test_objects_and_reprs(void **state) {
    (void)state;
    every_failure(NULL, "net = Sequential(Conv2d(1, 8, 3), ReLU(), Flatten(), Linear(8, 2, bias=False))\nnet",
                  "1 + 1", "2");
    every_failure("t = Compose([ToTensor(), Normalize((0.5,), (0.5,))])", "print(t, [1, 'a'], sep='; ')\nrepr_ = t\nt",
                  "1 + 1", "2");
    every_failure(NULL, "o = Adam(lr=0.01, betas=(0.9, 0.99))\ns = StepLR(step_size=2)\no", "1 + 1", "2");
    every_failure("net = Sequential(Linear(4, 3), ReLU(), Linear(3, 2))",
                  "summary(net, input_size=(4,))\ndisplay(net, [1, 2.5])\nhelp(Linear)\nhelp()\nlen(net)", "len(net)", "3");
    every_failure(NULL, "d = DataLoader(WebDataset('s.tar', length=60), batch_size=10)\nlen(d)", "1 + 1", "2");
}

/* Models: their parts read, replaced and frozen (modules.c); resnet18 builds a tree of
 * objects and derives the blocks' children at every repr. */
static void test_models(void **state) {
    (void)state;
    every_failure("net = Sequential(Linear(4, 3), ReLU(), BasicBlock(8, 8))",
                  "net[0] = Linear(4, 5)\nnet.requires_grad_(False)\nc = net[2].conv1\nnet[-1].downsample\nnet",
                  "len(net)", "3");
    every_failure(NULL, "r = resnet18(num_classes=3)\nr.fc = Identity()\nr.layer4[1]", "1 + 1", "2");
    every_failure_or("TaasTypeError", "net = Sequential(ReLU())", "net.fc", "len(net)", "1");
    every_failure_or("TaasValueError", "net = Sequential(ReLU())", "net[0] = net", "len(net)", "1");
}

static void test_errors(void **state) {
    (void)state;
    every_failure_or("TaasNameError", NULL, "Linear(1, 2, bias=Flase)", "1 + 1", "2");
    every_failure_or("TaasTypeError", NULL, "Conv2d(1, 2, kernel_size=3, paddin=1)", "1 + 1", "2");
    every_failure_or("TaasValueError", NULL, "1 / 0", "1 + 1", "2");
    every_failure_or("TaasTypeError", NULL, "len(5)", "1 + 1", "2");
    every_failure_or("TaasValueError", NULL, "Linear(0, 2)", "1 + 1", "2");
    every_failure_or("TaasSyntaxError", NULL, "x = (1,\n", "1 + 1", "2");
    every_failure_or("TaasNameError", "value = 1", "valeu + 1", "value", "1");
    every_failure_or("TaasTypeError", NULL, "'a' + 1", "1 + 1", "2");
    every_failure_or("TaasValueError", NULL, "'x' * 100000000", "1 + 1", "2");
    every_failure_or("TaasTypeError", NULL, "Adam(Linear(1, 2))", "1 + 1", "2");
}

/* Freeing allocates nothing, so it cannot fail: a DAG of 2^40 items as a tree (41 values),
 * a list nested a million deep and one of a thousand lists, each freed with every
 * allocation failing. */
static void test_free_allocates_nothing(void **state) {
    (void)state;
    taas_value *dag = taas_list_new(1), *deep = taas_int(1), *wide = taas_list_new(1000);
    assert_non_null(dag);
    assert_non_null(wide);
    for (size_t i = 0; i < wide->u.seq.n; i++) {
        assert_non_null(wide->u.seq.items[i] = taas_tuple_new(1));
        wide->u.seq.items[i]->u.seq.items[0] = taas_str0("x");
    }
    dag->u.seq.items[0] = taas_int(1);
    for (int i = 0; i < 40; i++) {
        taas_value *d = taas_list_new(2);
        assert_non_null(d);
        d->u.seq.items[0] = dag;
        d->u.seq.items[1] = taas_ref(dag);
        dag = d;
    }
    for (int i = 0; i < 1000000; i++) {
        taas_value *d = taas_list_new(1);
        assert_non_null(d);
        d->u.seq.items[0] = deep;
        deep = d;
    }
    fail_at = 1;
    count = 0;
    failed = 0;
    armed = 1;
    taas_unref(dag);
    taas_unref(deep);
    taas_unref(wide);
    armed = 0;
    assert_int_equal(count, 0);
}

int main(void) {
    setenv("TAAS_CONFIG", "/nonexistent/taas-test-config.json", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literals_and_arithmetic),
        cmocka_unit_test(test_strings_and_sequences),
        cmocka_unit_test(test_objects_and_reprs),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_free_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
