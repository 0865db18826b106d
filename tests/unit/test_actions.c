/* The actions: print, help, display, clear_output, sleep, len, register, unregister,
 * called through taas_builtin_call with a recording taas_io, and register/sleep through
 * the interpreter as a cell runs them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtins_testutil.h"
#include "clock.h"
#include "interp.h"

/* What the actions wrote, one line per event: "stdout:text", "display:<id>:<update>",
 * "clear:<wait>", "page", "exit"; the last display bundle and page payload are kept. */
typedef struct {
    taas_buf log;
    json_t *last_display;
    json_t *last_page;
    int events;
} recorder;

static void rec_stream(void *ctx, const char *name, const char *text) {
    recorder *r = ctx;
    taas_buf_printf(&r->log, "%s:%s|", name, text);
    r->events++;
}

static void rec_display(void *ctx, json_t *data, json_t *md, const char *id, int update) {
    recorder *r = ctx;
    taas_buf_printf(&r->log, "display:%s:%d|", id ? id : "-", update);
    assert_true(json_is_object(md));
    json_decref(md);
    json_decref(r->last_display);
    r->last_display = data;
    r->events++;
}

static void rec_clear(void *ctx, int wait) {
    recorder *r = ctx;
    taas_buf_printf(&r->log, "clear:%d|", wait);
    r->events++;
}

static void rec_exit(void *ctx) {
    recorder *r = ctx;
    taas_buf_puts(&r->log, "exit|");
    r->events++;
}

static void rec_page(void *ctx, json_t *data) {
    recorder *r = ctx;
    taas_buf_puts(&r->log, "page|");
    json_decref(r->last_page);
    r->last_page = data;
    r->events++;
}

typedef struct {
    recorder rec;
    taas_io io;
    taas_call_ctx cx;
    taas_error err;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    f->io = (taas_io){&f->rec, rec_stream, rec_display, rec_clear, rec_page, rec_exit};
    f->cx.io = &f->io;
    f->cx.err = &f->err;
    f->cx.wait_until = -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    taas_buf_free(&f->rec.log);
    json_decref(f->rec.last_display);
    json_decref(f->rec.last_page);
    free(f);
    return 0;
}

/* Runs an action; returns its value (NULL on error) and clears the log first. */
static taas_value *act(fixture *f, const char *name, const char *const *args, taas_value *const *objs) {
    taas_buf_free(&f->rec.log);
    f->rec.events = 0;
    taas_error_clear(&f->err);
    f->cx.wait_until = -1;
    return tu_call_ctx(&f->cx, name, args, objs);
}
#define ACT(f, name, ...) act((f), (name), (const char *const[]){__VA_ARGS__, NULL}, NULL)
#define ACTO(f, name, objs, ...) act((f), (name), (const char *const[]){__VA_ARGS__, NULL}, (objs))
#define ACT0(f, name) act((f), (name), NULL, NULL)

static const char *logged(fixture *f) {
    return f->rec.log.data ? f->rec.log.data : "";
}

static void expect_none(taas_value *v) {
    assert_non_null(v);
    assert_int_equal(v->type, TAAS_V_NONE);
    taas_unref(v);
}

static void test_print(void **state) {
    fixture *f = *state;
    expect_none(ACT(f, "print", "1", "'a'", "(1,)", "2.5", "None"));
    assert_string_equal(logged(f), "stdout:1 a (1,) 2.5 None\n|");
    expect_none(ACT(f, "print", "'x'", "'y'", "sep=', '", "end='!'"));
    assert_string_equal(logged(f), "stdout:x, y!|");
    expect_none(ACT(f, "print", "'oops'", "file='stderr'"));
    assert_string_equal(logged(f), "stderr:oops\n|");
    expect_none(ACT(f, "print", "1", "2", "sep=None", "end=None"));
    assert_string_equal(logged(f), "stdout:1 2\n|");
    expect_none(ACT0(f, "taas.print"));
    assert_string_equal(logged(f), "stdout:\n|");
    expect_none(ACT(f, "print", "end=''"));
    assert_int_equal(f->rec.events, 0); /* nothing to write, no empty stream message */
    /* objects print as their repr */
    taas_value *o[1] = {TU0(&f->err, "ReLU")};
    expect_none(ACTO(f, "print", o, "$0"));
    assert_string_equal(logged(f), "stdout:ReLU()\n|");
    taas_unref(o[0]);
    /* no output channel is an internal error, not a crash */
    f->cx.io = NULL;
    assert_null(ACT(f, "print", "1"));
    assert_string_equal(f->err.ename, "TaasInternalError");
    f->cx.io = &f->io;
}

/* exit and quit ask the kernel to end the session; each is called by its name alone */
static void test_exit_and_quit(void **state) {
    fixture *f = *state;
    expect_none(ACT0(f, "exit"));
    assert_string_equal(logged(f), "exit|");
    expect_none(ACT0(f, "quit"));
    assert_string_equal(logged(f), "exit|");
    assert_true(taas_builtin_find("exit")->bare);
    assert_true(taas_builtin_find("quit")->bare);
    assert_false(taas_builtin_find("help")->bare);
}

static void test_help(void **state) {
    fixture *f = *state;
    expect_none(ACT(f, "help", "'nn.Conv2d'"));
    assert_string_equal(logged(f), "page|");
    const char *text = json_string_value(json_object_get(f->rec.last_page, "text/plain"));
    assert_non_null(text);
    assert_non_null(strstr(text, "Conv2d(in_channels, out_channels, kernel_size"));
    assert_non_null(strstr(text, "Parameters:"));
    assert_int_equal(json_object_size(f->rec.last_page), 1);
    /* a builtin itself, and a value it made */
    taas_value *o[2] = {taas_builtin_value(taas_builtin_find("DataLoader")), TU(&f->err, "Dropout", "0.1")};
    expect_none(ACTO(f, "help", o, "$0"));
    assert_non_null(strstr(json_string_value(json_object_get(f->rec.last_page, "text/plain")),
                           "DataLoader(dataset, batch_size=1"));
    expect_none(ACTO(f, "help", o, "obj=$1"));
    assert_non_null(strstr(json_string_value(json_object_get(f->rec.last_page, "text/plain")), "Dropout(p=0.5"));
    taas_unref(o[0]);
    taas_unref(o[1]);
    /* the overview */
    expect_none(ACT0(f, "help"));
    text = json_string_value(json_object_get(f->rec.last_page, "text/plain"));
    assert_non_null(strstr(text, "help(name) shows one in full"));
    assert_non_null(strstr(text, "\n  Conv2d "));
    assert_non_null(strstr(text, "\n  unregister "));
    /* errors */
    assert_null(ACT(f, "help", "'Conv3d'"));
    assert_string_equal(f->err.ename, "TaasNameError");
    assert_string_equal(f->err.message, "help(): no builtin is named 'Conv3d'");
    assert_string_equal(f->err.hint, "did you mean 'Conv2d'? help() lists every builtin");
    assert_int_equal(f->rec.events, 0);
    assert_null(ACT(f, "help", "'zzzzzz'"));
    assert_string_equal(f->err.hint, "help() lists every builtin");
    assert_null(ACT(f, "help", "42"));
    assert_string_equal(f->err.ename, "TaasTypeError");
    assert_string_equal(f->err.message, "help() has nothing to say about an int value");
    assert_non_null(strstr(f->err.hint, "help('Conv2d')"));
}

static void test_display(void **state) {
    fixture *f = *state;
    taas_value *o[3];
    o[0] = TU0(&f->err, "ReLU");
    o[1] = TUO(&f->err, "Sequential", o, "$0");
    o[2] = taas_str0("status");
    expect_none(ACTO(f, "display", o, "$1"));
    assert_string_equal(logged(f), "display:-:0|");
    /* a model displays its summary (tests/unit/test_modelview.c) */
    assert_non_null(strstr(json_string_value(json_object_get(f->rec.last_display, "text/plain")),
                           "Sequential: 1 layer, input not known yet\n"));
    assert_non_null(json_object_get(f->rec.last_display, "text/html"));
    expect_none(ACTO(f, "display", o, "$2", "$0", "display_id='a'"));
    assert_string_equal(logged(f), "display:a:0|display:a:0|");
    assert_string_equal(json_string_value(json_object_get(f->rec.last_display, "text/plain")), "ReLU()");
    expect_none(ACTO(f, "display", o, "$2", "display_id='a'", "update=True"));
    assert_string_equal(logged(f), "display:a:1|");
    assert_string_equal(json_string_value(json_object_get(f->rec.last_display, "text/plain")), "'status'");
    expect_none(ACT0(f, "display"));
    assert_int_equal(f->rec.events, 0);
    assert_null(ACTO(f, "display", o, "$0", "update=True"));
    assert_string_equal(f->err.ename, "TaasValueError");
    assert_string_equal(f->err.message, "display() update=True needs a display_id");
    assert_int_equal(f->err.pos.col, 2);
    assert_non_null(strstr(f->err.hint, "display_id='status'"));
    assert_int_equal(f->rec.events, 0);
    for (int i = 0; i < 3; i++) taas_unref(o[i]);
}

static void test_clear_output(void **state) {
    fixture *f = *state;
    expect_none(ACT0(f, "clear_output"));
    assert_string_equal(logged(f), "clear:0|");
    expect_none(ACT(f, "clear_output", "wait=True"));
    assert_string_equal(logged(f), "clear:1|");
    assert_null(ACT(f, "clear_output", "1"));
    assert_string_equal(f->err.message, "clear_output() argument 'wait' must be bool, not int");
}

static void test_sleep(void **state) {
    fixture *f = *state;
    assert_int_equal(taas_builtin_find("sleep")->waits, 1);
    double before = taas_now();
    expect_none(ACT(f, "sleep", "2.5"));
    double after = taas_now();
    assert_true(f->cx.wait_until >= before + 2.5 && f->cx.wait_until <= after + 2.5);
    assert_int_equal(f->rec.events, 0); /* it only sets the deadline */
    expect_none(ACT(f, "sleep", "0"));
    assert_true(f->cx.wait_until >= before && f->cx.wait_until <= taas_now());
    assert_null(ACT(f, "sleep", "-1"));
    assert_string_equal(f->err.message, "sleep() argument 'seconds' must be between 0 and 86400, got -1");
    assert_true(f->cx.wait_until < 0);
    assert_null(ACT(f, "sleep", "'1'"));
    assert_string_equal(f->err.message, "sleep() argument 'seconds' must be float, not str");
    assert_null(ACT0(f, "sleep"));
    assert_string_equal(f->err.message, "sleep() missing 1 required argument: 'seconds'");
}

static int64_t len_of(fixture *f, taas_value *v) {
    taas_value *o[1] = {v};
    taas_value *n = ACTO(f, "len", o, "$0");
    taas_unref(v);
    if (!n) print_error("len: %s\n", f->err.message);
    assert_non_null(n);
    assert_int_equal(n->type, TAAS_V_INT);
    int64_t x = n->u.i;
    taas_unref(n);
    return x;
}

static void test_len(void **state) {
    fixture *f = *state;
    taas_error *e = &f->err;
    assert_int_equal(len_of(f, taas_str0("h\xC3\xA9llo \xF0\x9F\x98\x80")), 7); /* code points */
    assert_int_equal(len_of(f, taas_str0("")), 0);
    assert_int_equal(len_of(f, taas_literal_parse("(1, 2, 3)")), 3);
    assert_int_equal(len_of(f, taas_literal_parse("[]")), 0);
    taas_value *o[4];
    o[0] = TU0(e, "ReLU");
    o[1] = TU0(e, "ToTensor");
    assert_int_equal(len_of(f, TUO(e, "Sequential", o, "$0", "$0", "$0")), 3);
    assert_int_equal(len_of(f, TUO(e, "Compose", o, "[$1, $1]")), 2);
    /* datasets whose files say their size: test_probe_kernel, with a worker */
    assert_int_equal(len_of(f, TU(e, "WebDataset", "'s.tar'", "length=1000")), 1000);
    o[2] = TU(e, "WebDataset", "'s.tar'", "length=60000");
    assert_int_equal(len_of(f, TUO(e, "DataLoader", o, "$2", "64")), 938);                       /* ceil */
    assert_int_equal(len_of(f, TUO(e, "DataLoader", o, "$2", "64", "drop_last=True")), 937);     /* floor */
    assert_int_equal(len_of(f, TUO(e, "DataLoader", o, "$2", "60000")), 1);
    assert_int_equal(len_of(f, TUO(e, "DataLoader", o, "$2")), 60000);
    /* unknown sizes and objects without a length */
    o[3] = TU(e, "NpyDataset", "'x.npy'", "'y.npy'");
    assert_null(ACTO(f, "len", o, "$3"));
    assert_string_equal(f->err.ename, "TaasTypeError");
    assert_string_equal(f->err.message, "len() of this NpyDataset is not known before its data is read");
    assert_non_null(strstr(f->err.hint, "read by the loaders"));
    taas_value *dl = TUO(e, "DataLoader", o, "$3");
    taas_value *d[1] = {dl};
    assert_null(ACTO(f, "len", d, "$0"));
    assert_string_equal(f->err.message, "len() of this DataLoader is not known before its data is read");
    taas_unref(dl);
    assert_null(ACTO(f, "len", o, "$0"));
    assert_string_equal(f->err.message, "object of type 'ReLU' has no len()");
    assert_non_null(strstr(f->err.hint, "len() works on str, tuple, list"));
    assert_null(ACT(f, "len", "5"));
    assert_string_equal(f->err.message, "object of type 'int' has no len()");
    assert_null(ACT(f, "len", "None"));
    assert_string_equal(f->err.message, "object of type 'NoneType' has no len()");
    for (int i = 0; i < 4; i++) taas_unref(o[i]);
}

static void test_register_without_session(void **state) {
    fixture *f = *state;
    taas_value *o[2];
    o[0] = TU0(&f->err, "FashionMNIST");
    o[1] = TUO(&f->err, "DataLoader", o, "$0");
    assert_null(ACTO(f, "register", o, "$0"));
    assert_string_equal(f->err.ename, "TaasTypeError");
    assert_string_equal(f->err.message, "register() argument 'loader' must be a DataLoader, not FashionMNIST");
    assert_null(ACTO(f, "unregister", o, "42"));
    assert_string_equal(f->err.message, "unregister() argument 'loader' must be a DataLoader, not int");
    assert_null(ACTO(f, "register", o, "$1"));
    assert_string_equal(f->err.ename, "TaasInternalError");
    taas_unref(o[0]);
    taas_unref(o[1]);
}

/* ---- through the interpreter ------------------------------------------------------ */

static taas_run_state run(taas_interp *in, fixture *f, const char *code, taas_error *err) {
    json_t *result = NULL;
    taas_error_clear(err);
    taas_buf_free(&f->rec.log);
    taas_run_state st = taas_interp_run(in, code, &f->io, &result, err);
    json_decref(result);
    return st;
}

static void test_register_in_a_session(void **state) {
    fixture *f = *state;
    taas_error err;
    taas_interp *in = taas_interp_new();
    assert_non_null(in);
    assert_int_equal(run(in, f, "train = DataLoader(FashionMNIST(), batch_size=64, shuffle=True)\n"
                                "register(train)\n", &err),
                     TAAS_RUN_DONE);
    assert_int_equal(taas_interp_loader_count(in), 1);
    assert_string_equal(taas_value_type_name(taas_interp_loader_at(in, 0)), "DataLoader");
    assert_int_equal(run(in, f, "taas.register(train)\n", &err), TAAS_RUN_DONE); /* twice: once */
    assert_int_equal(taas_interp_loader_count(in), 1);
    assert_int_equal(run(in, f, "register(FashionMNIST())\n", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "TaasTypeError");
    assert_string_equal(err.message, "register() argument 'loader' must be a DataLoader, not FashionMNIST");
    assert_int_equal(err.pos.line, 1);
    assert_int_equal(err.pos.col, 10);
    assert_int_equal(run(in, f, "unregister(train)\nprint(len(train))\n", &err), TAAS_RUN_DONE);
    assert_int_equal(taas_interp_loader_count(in), 0);
    assert_string_equal(logged(f), "stdout:938\n|");
    assert_int_equal(run(in, f, "unregister(train)\n", &err), TAAS_RUN_ERROR);
    assert_string_equal(err.ename, "TaasValueError");
    assert_string_equal(err.message, "loader 'train' is not registered");
    assert_int_equal(err.pos.line, 1); /* placed at the call */
    /* sleep suspends the cell: the interpreter waits, not the action */
    double before = taas_now();
    assert_int_equal(run(in, f, "sleep(30)\n", &err), TAAS_RUN_WAIT);
    assert_true(taas_interp_deadline(in) >= before + 30);
    taas_interp_interrupt(in);
    json_t *result = NULL;
    assert_int_equal(taas_interp_resume(in, &result, &err), TAAS_RUN_ERROR);
    json_decref(result);
    assert_string_equal(err.ename, "KeyboardInterrupt");
    taas_interp_free(in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_print, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exit_and_quit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_display, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clear_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_len, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_without_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_in_a_session, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
