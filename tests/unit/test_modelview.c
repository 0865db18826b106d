/* kernel/lang/modelview.c's summary of a model: the layers with output shapes and parameters,
 * the totals and memory; unknown shapes before the model has seen an input; summary()'s
 * input_size, with a batch size or without, and one that does not fit. */
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

typedef struct {
    json_t *shown;  /* the last display */
} capture;

static void no_stream(void *ctx, const char *name, const char *text) {
    (void)ctx, (void)name, (void)text;
}
static void keep_display(void *ctx, json_t *data, json_t *md, const char *id, int update) {
    capture *c = ctx;
    (void)id, (void)update;
    json_decref(c->shown);
    c->shown = data;
    json_decref(md);
}
static void no_clear(void *ctx, int wait) {
    (void)ctx, (void)wait;
}
static void no_page(void *ctx, json_t *data) {
    (void)ctx;
    json_decref(data);
}

static taas_interp *in;
static capture cap;
static const taas_io IO = {.ctx = &cap, .stream = no_stream, .display = keep_display, .clear_output = no_clear, .page = no_page};

#define NET "net = Sequential(Conv2d(1, 32, 3, 1), ReLU(), Conv2d(32, 64, 3, 1), ReLU(), MaxPool2d(2), " \
            "Dropout(0.25), Flatten(), Linear(9216, 128), BatchNorm1d(128), ReLU(), Dropout(0.5), " \
            "Linear(128, 10), LogSoftmax(dim=1))\n"

static int setup(void **state) {
    (void)state;
    in = taas_interp_new();
    memset(&cap, 0, sizeof cap);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    taas_interp_free(in);
    json_decref(cap.shown);
    return 0;
}

/* The text/plain of the cell's result, or of its last display (malloc'd). */
static char *run(const char *code, taas_error *err, int want_result) {
    json_t *r = NULL;
    taas_run_state s = taas_interp_run(in, code, &IO, &r, err);
    if (s != TAAS_RUN_DONE) return NULL;
    const json_t *b = want_result ? r : cap.shown;
    char *t = b ? strdup(json_string_value(json_object_get(b, "text/plain"))) : NULL;
    if (want_result && b) {
        const char *h = json_string_value(json_object_get(b, "text/html"));
        assert_non_null(strstr(h, "<table class=\"taas-model\">\n<caption style=\"text-align:left\">Sequential: "));
        /* Notebook right-aligns output tables' cells: the layers are set to read from the left */
        assert_non_null(strstr(h, "<td style=\"text-align:left\"><code>"));
    }
    json_decref(r);
    return t;
}

static void test_before_any_input(void **state) {
    (void)state;
    taas_error err;
    char *t = run(NET "net", &err, 1);
    assert_non_null(t);
    assert_non_null(strstr(t, "Sequential: 13 layers, input not known yet\n"));
    assert_non_null(strstr(t, "\n  2  Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1))"));
    /* the shapes the specs alone give: after a Linear */
    assert_non_null(strstr(t, "(N, 128)"));
    assert_non_null(strstr(t, "\n 12  LogSoftmax(dim=1) "));
    /* torch: sum(p.numel() for p in net.parameters()) */
    assert_non_null(strstr(t, "parameters: 1,200,138 (4.58 MiB as float32), and 256 BatchNorm statistics"));
    assert_non_null(strstr(t, "summary(model, input_size=(C, H, W))"));
    free(t);
}

static void test_summary_with_input_size(void **state) {
    (void)state;
    taas_error err;
    char *t = run(NET "summary(net, input_size=(64, 1, 28, 28))", &err, 0);
    assert_non_null(t);
    assert_non_null(strstr(t, "input (64, 1, 28, 28)"));
    assert_non_null(strstr(t, "(64, 32, 26, 26)"));
    assert_non_null(strstr(t, "(64, 64, 12, 12)"));
    assert_non_null(strstr(t, "(64, 9216)"));
    /* 64 x (784 + 2 x 21632 + 2 x 36864 + 2 x 9216 + 9216 + 4 x 128 + 2 x 10) floats */
    assert_non_null(strstr(t, "activations: 35.63 MiB for the batch forward"));
    free(t);
    t = run("summary(net, (1, 28, 28))", &err, 0);
    assert_non_null(strstr(t, "input (N, 1, 28, 28)"));
    assert_non_null(strstr(t, "activations: 0.56 MiB a sample forward"));
    free(t);
    t = run("summary(Sequential(Flatten(), LazyLinear(10)), (784,))", &err, 0);
    assert_non_null(strstr(t, "LazyLinear"));
    assert_non_null(strstr(t, "7,850"));  /* the Lazy layer's size, known from the input */
    free(t);
}

static void test_summary_errors(void **state) {
    (void)state;
    taas_error err;
    assert_null(run(NET "summary(net, (1, 32, 32))", &err, 0));
    assert_string_equal(err.ename, "TaasValueError");
    assert_string_equal(err.message, "summary() with input_size=(1, 32, 32): layer 7: Linear(in_features=9216) "
                                     "gets 12544 features from layer 6 (Flatten)");
    assert_null(run("summary(net, (1, 2, 3, 4, 5))", &err, 0));
    assert_non_null(strstr(err.message, "summary() input_size has 5 sizes; it takes 1 to 4"));
    assert_null(run("summary(3)", &err, 0));
    assert_string_equal(err.ename, "TaasTypeError");
    assert_null(run("summary(net, (0, 28, 28))", &err, 0));
    assert_string_equal(err.ename, "TaasValueError");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_before_any_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary_with_input_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
