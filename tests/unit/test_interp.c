/* kernel/lang/interp: cells, results, variables across cells, sleep -> WAIT -> resume,
 * interrupts, syntax errors that run nothing, pragma plans and errors, loaders, is_complete. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmocka_testutil.h"
#include "buf.h"
#include "deep_testutil.h"
#include "interp.h"
#include "value.h"

typedef struct capture {
    taas_buf text;  /* "[stdout]..." per stream call */
    int pages, displays, exits;
} capture;

static void cap_stream(void *ctx, const char *name, const char *text) {
    taas_buf_printf(&((capture *)ctx)->text, "[%s]%s", name, text);
}
static void cap_display(void *ctx, json_t *d, json_t *m, const char *id, int u) {
    (void)id; (void)u;
    ((capture *)ctx)->displays++;
    json_decref(d);
    json_decref(m);
}
static void cap_clear(void *ctx, int w) { (void)ctx; (void)w; }
static void cap_page(void *ctx, json_t *d) {
    ((capture *)ctx)->pages++;
    json_decref(d);
}

static void cap_exit(void *ctx) { ((capture *)ctx)->exits++; }

static taas_interp *in;
static capture cap;
static taas_io io;

static int setup(void **state) {
    (void)state;
    setenv("TAAS_CONFIG", "/nonexistent/taas-test-config.json", 1);  /* built-in configurations only */
    in = taas_interp_new();
    memset(&cap, 0, sizeof cap);
    io = (taas_io){&cap, cap_stream, cap_display, cap_clear, cap_page, cap_exit};
    return in ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    taas_interp_free(in);
    taas_buf_free(&cap.text);
    return 0;
}

static const char *out(void) { return cap.text.data ? cap.text.data : ""; }
static void clear_out(void) { taas_buf_free(&cap.text); }

/* Runs a cell that must finish; returns its text/plain result (malloc'd) or NULL. */
static char *run_done(const char *code) {
    json_t *r = NULL;
    taas_error err;
    taas_run_state s = taas_interp_run(in, code, &io, &r, &err);
    if (s != TAAS_RUN_DONE) fail_msg("%s: state %d: %s: %s", code, s, err.ename, err.message);
    if (!r) return NULL;
    char *text = strdup(json_string_value(json_object_get(r, "text/plain")));
    json_decref(r);
    return text;
}

static taas_error run_error(const char *code, const char *ename, const char *msg) {
    json_t *r = NULL;
    taas_error err;
    taas_run_state s = taas_interp_run(in, code, &io, &r, &err);
    if (s != TAAS_RUN_ERROR) fail_msg("%s should fail with %s", code, msg);
    assert_null(r);
    if (strcmp(err.ename, ename)) fail_msg("%s: %s, wanted %s (%s)", code, err.ename, ename, err.message);
    if (!strstr(err.message, msg)) fail_msg("%s: \"%s\", wanted \"%s\"", code, err.message, msg);
    assert_true(err.hint[0] != '\0' || !strcmp(ename, "KeyboardInterrupt"));
    assert_true(taas_interp_deadline(in) < 0);
    return err;
}

static void sleep_until(double t) {
    while (taas_now() < t) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void test_result_of_the_last_expression(void **state) {
    (void)state;
    char *r = run_done("x = 20\nx + 1");
    assert_string_equal(r, "21");
    free(r);
    assert_null(run_done("y = x * 2"));            /* an assignment shows nothing */
    assert_null(run_done("None"));                 /* neither does None */
    assert_null(run_done("print('hello')"));       /* print returns None */
    assert_string_equal(out(), "[stdout]hello\n");
    assert_null(run_done("# only a comment\n\n"));
    assert_null(run_done(""));
    r = run_done("1\n2");                          /* only the final statement counts */
    assert_string_equal(r, "2");
    free(r);
    r = run_done("y");                             /* variables live across cells */
    assert_string_equal(r, "40");
    free(r);
    r = run_done("Conv2d(1, 32, 3)");
    assert_string_equal(r, "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))");
    free(r);
    assert_null(run_done("help(print)"));
    assert_int_equal(cap.pages, 1);
}

/* exit and quit typed alone are called, as a console user types them (under another name
 * too, as IPython's autocall does); passed to help() they are values */
static void test_exit_typed_alone_is_called(void **state) {
    (void)state;
    assert_null(run_done("exit"));
    assert_int_equal(cap.exits, 1);
    assert_null(run_done("quit\n"));
    assert_null(run_done("quit()"));
    assert_int_equal(cap.exits, 3);
    assert_null(run_done("e = exit"));
    char *r = run_done("e");  /* the last expression is the bound value: the builtin alone */
    assert_int_equal(cap.exits, 4);
    free(r);
    assert_null(run_done("help(exit)"));
    assert_int_equal(cap.exits, 4);
}

static void test_errors_stop_the_cell(void **state) {
    (void)state;
    /* a syntax error anywhere: nothing runs */
    taas_error e = run_error("print('first')\nx = = 1", "TaasSyntaxError", "expected an expression after '='");
    assert_string_equal(out(), "");
    assert_int_equal(e.pos.line, 2);
    assert_string_equal(e.source_line, "x = = 1");
    run_error("x = 1\nprint('never')\nimport torch", "TaasSyntaxError", "import is not needed");
    assert_string_equal(out(), "");
    e = run_error("x", "TaasNameError", "name 'x' is not defined");  /* so x = 1 did not run */
    /* a runtime error: the statements before it ran, the ones after it do not */
    e = run_error("a = 1\nprint('a')\nb = 1 / 0\nprint('b')", "TaasValueError", "division by zero");
    assert_string_equal(out(), "[stdout]a\n");
    assert_int_equal(e.pos.line, 3);
    assert_int_equal(e.pos.col, 5);
    assert_string_equal(e.source_line, "b = 1 / 0");
    char *r = run_done("a");
    assert_string_equal(r, "1");
    free(r);
    run_error("b", "TaasNameError", "name 'b' is not defined");
    /* the traceback reads as the design shows it */
    e = run_error("net = Linear(9000, 128, bias=Flase)", "TaasNameError", "name 'Flase' is not defined");
    char **tb = taas_error_traceback(&e);
    assert_string_equal(tb[0], "Cell line 1, column 30");
    assert_string_equal(tb[1], "    net = Linear(9000, 128, bias=Flase)");
    assert_string_equal(tb[2], "                                 ^^^^^");
    assert_string_equal(tb[4], "hint: did you mean 'False'?");
    taas_error_traceback_free(tb);
}

static void test_invalid_utf8_never_breaks_a_cell(void **state) {
    (void)state;
    assert_null(run_done("print('a\xFF')"));
    assert_string_equal(out(), "[stdout]a\xEF\xBF\xBD\n");
    taas_error e = run_error("x = 1 \xC3", "TaasSyntaxError", "U+FFFD");
    assert_string_equal(e.source_line, "x = 1 \xEF\xBF\xBD");
}

static void test_sleep_waits_and_resumes(void **state) {
    (void)state;
    json_t *r = NULL;
    taas_error err;
    double t0 = taas_now();
    taas_run_state s = taas_interp_run(in, "print('a')\nx = 1\nsleep(0.2)\nprint('b')\nx + 6", &io, &r, &err);
    assert_int_equal(s, TAAS_RUN_WAIT);
    assert_null(r);
    assert_string_equal(out(), "[stdout]a\n");
    double deadline = taas_interp_deadline(in);
    assert_true(deadline >= t0 + 0.2 && deadline < t0 + 2);
    /* too early: still waiting, nothing more ran */
    assert_int_equal(taas_interp_resume(in, &r, &err), TAAS_RUN_WAIT);
    assert_string_equal(out(), "[stdout]a\n");
    sleep_until(deadline);
    assert_int_equal(taas_interp_resume(in, &r, &err), TAAS_RUN_DONE);
    assert_string_equal(out(), "[stdout]a\n[stdout]b\n");
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "text/plain")), "7");
    json_decref(r);
    assert_true(taas_interp_deadline(in) < 0);
    /* resuming an idle interpreter is harmless */
    assert_int_equal(taas_interp_resume(in, &r, &err), TAAS_RUN_DONE);
    assert_null(r);
    /* a wait that ends the cell, and one on the right side of an assignment */
    assert_int_equal(taas_interp_run(in, "z = sleep(0.01)", &io, &r, &err), TAAS_RUN_WAIT);
    sleep_until(taas_interp_deadline(in));
    assert_int_equal(taas_interp_resume(in, &r, &err), TAAS_RUN_DONE);
    assert_null(r);
    char *t = run_done("z");
    assert_null(t);  /* sleep returns None */
}

static void test_interrupt(void **state) {
    (void)state;
    json_t *r = NULL;
    taas_error err;
    taas_interp_interrupt(in);  /* nothing waits: no effect */
    assert_int_equal(taas_interp_run(in, "x = 1\nsleep(30)\ny = 2", &io, &r, &err), TAAS_RUN_WAIT);
    taas_interp_interrupt(in);
    double t0 = taas_now();
    assert_int_equal(taas_interp_resume(in, &r, &err), TAAS_RUN_ERROR);
    assert_true(taas_now() - t0 < 1.0);
    assert_string_equal(err.ename, "KeyboardInterrupt");
    assert_string_equal(err.message, "interrupted");
    assert_int_equal(err.pos.line, 2);
    assert_string_equal(err.source_line, "sleep(30)");
    assert_non_null(strstr(err.hint, "after line 2 did not run"));
    assert_true(taas_interp_deadline(in) < 0);
    char *v = run_done("x");  /* assigned before the interrupt: kept */
    assert_string_equal(v, "1");
    free(v);
    run_error("y", "TaasNameError", "name 'y' is not defined");
    /* an interrupted assignment leaves its name as it was, as Python does */
    assert_int_equal(taas_interp_run(in, "x = sleep(30)", &io, &r, &err), TAAS_RUN_WAIT);
    taas_interp_interrupt(in);
    assert_int_equal(taas_interp_resume(in, &r, &err), TAAS_RUN_ERROR);
    v = run_done("x");
    assert_string_equal(v, "1");
    free(v);
    /* the next cell runs normally */
    assert_null(run_done("print('next')"));
    assert_non_null(strstr(out(), "[stdout]next\n"));
}

static void test_a_new_cell_drops_a_waiting_one(void **state) {
    (void)state;
    json_t *r = NULL;
    taas_error err;
    assert_int_equal(taas_interp_run(in, "sleep(30)\nprint('never')", &io, &r, &err), TAAS_RUN_WAIT);
    assert_null(run_done("print('new')"));
    assert_int_equal(taas_interp_resume(in, &r, &err), TAAS_RUN_DONE);
    assert_string_equal(out(), "[stdout]new\n");
}

static const char *LOADERS =
    "transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])\n"
    "train = DataLoader(FashionMNIST(train=True, transform=transform), batch_size=64, shuffle=True)\n"
    "test = DataLoader(FashionMNIST(train=False, transform=transform), batch_size=1000)\n";

/* What a pragma cell plans and refuses before launching anything (tests/protocol/test_offload.py
 * runs jobs for real). */
static void test_pragma_plan(void **state) {
    (void)state;
    assert_null(run_done(LOADERS));
    assert_null(run_done("net = Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))\nregister(train)"));
    clear_out();
    taas_error e = run_error("#!g2.8\n#pragma taas --gpus 16 --cpus 2 --units 20480000\n"
                             "fit(net, train, epochs=9, loss=NLLLoss(), optimizer=SGD(lr=0.1))\n"
                             "save(net, 'x.safetensors')", "TaasOffloadError",
                             "--gpus 16 with g2.8 (8 GPUs a machine) needs 2 machines, but the local backend runs "
                             "on this machine only");
    assert_string_equal(out(), "[stdout]plan: 2 machines \xC3\x97 8 GPUs (g2.8), 2 loader workers for 'train', "
                               "up to 20,480,000 samples\ncost: estimated after the first steps (no earlier run of "
                               "this cell); no prices (price_per_hour in the configuration file): the size in "
                               "machine-hours\n");
    assert_int_equal(e.pos.line, 2);
    assert_non_null(strstr(e.hint, "--gpus 8"));
    /* a shape error is found before the plan: nothing is printed */
    clear_out();
    run_error("#pragma taas --gpus 2\nfit(Sequential(Flatten(), Linear(700, 10)), train, loss=NLLLoss(), "
              "optimizer=SGD(lr=0.1))", "TaasValueError", "layer 1: Linear(in_features=700) gets 784 features");
    assert_string_equal(out(), "");
}

static void test_pragma_errors(void **state) {
    (void)state;
    taas_error e = run_error("#pragma taas --gpus 2\nx = 1\nprint(x)", "TaasPragmaError",
                             "a #pragma taas cell trains a model: it needs a fit(...) call");
    assert_int_equal(e.pos.line, 1);
    assert_string_equal(e.source_line, "#pragma taas --gpus 2");
    assert_string_equal(out(), "");
    run_error("#pragma taas --gpus 0\nfit(net)", "TaasPragmaError", "--gpus");
    run_error("#pragma taas --gpus 2 --bogus 1\nfit(net)", "TaasPragmaError", "--bogus");
    run_error("print('no')\n#pragma taas --gpus 2\nfit(net)", "TaasPragmaError", "");
    run_error("#pragma taas --gpus 2\nfit(net,", "TaasSyntaxError", "was never closed");
    run_error("#pragma taas --gpus 2\nfit(net)\n[sleep(1)]", "TaasSyntaxError", "sleep() waits");
    assert_string_equal(out(), "");  /* no plan is printed when the cell is wrong */
    run_error("x = fitt", "TaasNameError", "name 'fitt' is not defined");
}

static void test_loaders(void **state) {
    (void)state;
    assert_int_equal(taas_interp_loader_count(in), 0);
    assert_null(run_done(LOADERS));
    assert_null(run_done("register(train)\nregister(train)\ntaas.register(train)"));
    assert_int_equal(taas_interp_loader_count(in), 1);
    assert_string_equal(taas_interp_name_of(in, taas_interp_loader_at(in, 0)), "train");
    /* running the cell again makes a new loader: it replaces the old one in place */
    assert_null(run_done(LOADERS));
    assert_null(run_done("register(test)\nregister(train)"));
    assert_int_equal(taas_interp_loader_count(in), 2);
    assert_string_equal(taas_interp_name_of(in, taas_interp_loader_at(in, 0)), "train");
    assert_string_equal(taas_interp_name_of(in, taas_interp_loader_at(in, 1)), "test");
    assert_null(run_done("unregister(test)"));
    assert_int_equal(taas_interp_loader_count(in), 1);
    taas_error e = run_error("unregister(test)", "TaasValueError", "loader 'test' is not registered");
    assert_string_equal(e.hint, "registered loaders: 'train'");
    assert_int_equal(e.pos.line, 1);
    assert_int_equal(e.width, 16);
    assert_null(run_done("unregister(train)"));
    e = run_error("unregister(DataLoader(FashionMNIST()))", "TaasValueError", "this DataLoader is not registered");
    assert_non_null(strstr(e.hint, "no loader is registered"));
    assert_null(taas_interp_loader_at(in, 0));
    /* the interpreter's own check, for callers other than the register action */
    taas_value *v = taas_int(1);
    assert_int_equal(taas_interp_register_loader(in, v, &e), -1);
    assert_string_equal(e.ename, "TaasTypeError");
    assert_string_equal(e.message, "register() takes a DataLoader, not 'int'");
    assert_int_equal(taas_interp_unregister_loader(in, v, &e), -1);
    assert_string_equal(e.message, "unregister() takes a DataLoader, not 'int'");
    assert_null(taas_interp_name_of(in, v));
    taas_unref(v);
}

static void test_is_complete(void **state) {
    (void)state;
    const char *complete[] = {"x = 1", "", "# just a comment", "print('a')\nprint('b')", "x = [1,\n 2]",
                              "s = '''a\nb'''", "x = 1 + \\\n 2"};
    const char *incomplete[] = {"f(1,", "net = Sequential(\n  Linear(1, 2),", "x = '''abc", "x = 1 + \\",
                                "x = [1, (2"};
    const char *invalid[] = {"x = = 1", "import torch", "x = 'abc", "1 +", "x = 1)", "if x:", "f(a=1, 2)"};
    for (size_t i = 0; i < sizeof complete / sizeof *complete; i++)
        assert_string_equal(taas_interp_is_complete(in, complete[i]), "complete");
    for (size_t i = 0; i < sizeof incomplete / sizeof *incomplete; i++)
        assert_string_equal(taas_interp_is_complete(in, incomplete[i]), "incomplete");
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
        assert_string_equal(taas_interp_is_complete(in, invalid[i]), "invalid");
}

static void test_hostile_cells_deep_code(void **state) {
    (void)state;
    /* 2 ** 2 ** ... with 100,000 ** (600 KB): once SIGSEGV in the parser, and in is_complete */
    char *code = tu_repeated("2", " ** 2", 100000, "");
    taas_error e = run_error(code, "TaasSyntaxError", "expression is nested too deeply (more than 500 levels)");
    assert_int_equal(e.pos.line, 1);
    assert_string_equal(taas_interp_is_complete(in, code), "invalid");
    free(code);
    code = tu_repeated("x = ", "-(-", 199, "1");  /* 398 signs inside the lexer's 200 brackets */
    char *full = tu_repeated(code, ")", 199, "");
    run_error(full, "TaasSyntaxError", "nested too deeply");
    assert_string_equal(taas_interp_is_complete(in, full), "invalid");
    free(code);
    free(full);
    /* the deepest trees the parser builds run, and are freed, without trouble */
    code = tu_repeated("", "- ", 499, "1");
    char *r = run_done(code);
    assert_string_equal(r, "-1");
    free(r);
    free(code);
    code = tu_repeated("1", " ** 1", 499, "");
    r = run_done(code);
    assert_string_equal(r, "1");
    free(r);
    free(code);
    code = tu_repeated("", "[", 199, "1");
    full = tu_repeated(code, "]", 199, "");
    r = run_done(full);  /* shown 100 deep, then [...] */
    assert_non_null(strstr(r, "[[[...]]]"));
    free(r);
    free(code);
    free(full);
}

static void test_hostile_cells_deep_values(void **state) {
    (void)state;
    /* v = [v] 200,000 times: once SIGSEGV in repr; nesting through variables passes the parser */
    char *code = tu_repeated("v = [1]\n", "v = [v]\n", 200000, "v");
    char *r = run_done(code);
    free(code);
    assert_true(strlen(r) == 2 * TAAS_VALUE_MAX_DEPTH + 5);
    assert_non_null(strstr(r, "[[[...]]]"));
    free(r);
    int shown = cap.displays;
    assert_null(run_done("display(v)\nprint(v)\nw = [v, v, 1]"));
    assert_int_equal(cap.displays, shown + 1);
    assert_non_null(strstr(out(), "[[[...]]]"));
    clear_out();
    assert_null(run_done("v = 0\nw = 0"));  /* frees 200,000 lists without recursion */
    /* a Sequential in a Sequential ... : refused when made, at the call */
    code = tu_repeated("m = Sequential(ReLU())\n", "m = Sequential(m)\n", 200, "");
    taas_error e = run_error(code, "TaasValueError", "Sequential() nests too deeply");
    assert_int_equal(e.pos.line, 50);  /* 2 levels a Sequential (it and its layers), and ReLU's 2 */
    assert_int_equal(e.pos.col, 5);
    free(code);
    r = run_done("m");  /* the last one made is whole, and shows */
    assert_non_null(strstr(r, "Sequential(\n  (0): Sequential("));
    free(r);
    assert_null(run_done("m = 0"));
}

static void test_hostile_cells_big_output(void **state) {
    (void)state;
    /* once minutes of repr with the loop blocked, then abort() in buf.c */
    char *r = run_done("s = 'a' * 60000000\nL = [s] * 1000000\nL");
    assert_true(strlen(r) < TAAS_REPR_MAX_BYTES + 100);
    assert_int_equal(strncmp(r, "['aaaa", 6), 0);
    assert_true(tu_ends_with(r, TU_REPR_CUT_NOTE));
    free(r);
    assert_null(run_done("print(L, L)\nprint(s)"));
    /* print(L, L): one note, where the text stops; print(s) ends with a note of its own */
    const char *o = out();
    assert_true(strlen(o) < 3 * TAAS_REPR_MAX_BYTES);
    assert_non_null(strstr(o, TU_REPR_CUT_NOTE));
    assert_null(strstr(strstr(o, TU_REPR_CUT_NOTE) + 1, TU_REPR_CUT_NOTE));
    assert_non_null(strstr(o, "... (str cut at 1 MiB; the value is bigger)\n"));
    clear_out();
    int shown = cap.displays;
    assert_null(run_done("display(L)\nL = 0\ns = 0"));
    assert_int_equal(cap.displays, shown + 1);
    /* 40 doubling lists: 2^40 items as a tree */
    char *code = tu_repeated("v = [0]\n", "v = [v, v]\n", 40, "v");
    r = run_done(code);
    free(code);
    assert_true(strlen(r) < TAAS_REPR_MAX_BYTES + 100 && tu_ends_with(r, TU_REPR_CUT_NOTE));
    free(r);
    /* and objects the same way: refused when too large to write as a spec */
    code = tu_repeated("m = Sequential(ReLU())\n", "m = Sequential(m, m)\n", 40, "");
    run_error(code, "TaasValueError", "Sequential() is too large: it holds more than");
    free(code);
    assert_null(run_done("v = 0\nm = 0"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* Values summing to more memory than the session keeps for them (each one small enough): a
 * TaasMemoryError in that cell, never abort(); the session's variables survive and what the
 * failed cell made is given back (issue 16, defect 4). TAAS_VALUE_MEMORY stands for a
 * machine with 256 MiB to spare. */
static void test_hostile_cells_memory(void **state) {
    (void)state;
    setenv("TAAS_VALUE_MEMORY", "268435456", 1);
    assert_null(run_done("a = 'x' * 4194303"));
    taas_buf code = TAAS_BUF_INIT;
    taas_buf_puts(&code, "L = [");
    for (int i = 0; i < 120; i++) taas_buf_printf(&code, "%sa + '%d'", i ? ", " : "", i % 10);
    taas_buf_puts(&code, "]");
    run_error(code.data, "TaasMemoryError", "the str would take 4.0 MiB, and the session's values already hold");
    taas_buf_free(&code);
    run_error("'y' * 2**40", "TaasValueError", "too large");
    char *r = run_done("len(a)");
    assert_string_equal(r, "4194303");
    free(r);
    run_error("L", "TaasNameError", "'L' is not defined");
    /* 180 MB more fit: the failed cell's 240 MB of strings went */
    assert_null(run_done("b = ['x' * 60000000, 'y' * 60000000, 'z' * 60000000]\nb = 0\na = 0"));
    unsetenv("TAAS_VALUE_MEMORY");
}

/* Line ends as Python reads them: LF, CR LF, and a lone CR (issue 16, defect 15). */
static void test_cr_line_ends(void **state) {
    (void)state;
    char *r = run_done("x = 1\ry = 2\rx + y");
    assert_string_equal(r, "3");
    free(r);
    r = run_done("x = 40\r\ny = 2\r\nx + y\r\n");
    assert_string_equal(r, "42");
    free(r);
    taas_error e = run_error("x = 1\ry = = 2", "TaasSyntaxError", "expected an expression");
    assert_int_equal(e.pos.line, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_result_of_the_last_expression),
        T(test_exit_typed_alone_is_called), T(test_errors_stop_the_cell),
        T(test_invalid_utf8_never_breaks_a_cell), T(test_sleep_waits_and_resumes), T(test_interrupt),
        T(test_a_new_cell_drops_a_waiting_one), T(test_pragma_plan), T(test_pragma_errors),
        T(test_loaders), T(test_is_complete), T(test_hostile_cells_deep_code),
        T(test_hostile_cells_deep_values), T(test_hostile_cells_big_output), T(test_hostile_cells_memory),
        T(test_cr_line_ends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
