/* A cell as the kernel receives it (valid UTF-8 without NULs, as the wire layer makes every
 * string): the lexer, the parser and the checks, is_complete, completion and inspection at
 * a few cursors, and running the cell in a fresh interpreter — short of anything that
 * reaches outside the process. A cell that names a dataset, a DataLoader or an action that
 * starts a worker or touches files (fit, show, save, load, ...) is parsed and checked but
 * not run: the fuzzer must not write files or start jobs. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "cursor.h"
#include "fuzz_io.h"
#include "fuzz_util.h"
#include "interp.h"
#include "lexer.h"
#include "parser.h"
#include "utf8.h"

/* Actions that stay inside the process (sleep waits, and is interrupted below). */
static const char *const SAFE_ACTIONS[] = {"print", "help", "display", "clear_output", "sleep",
                                           "len", "summary", "register", "unregister", "requires_grad_"};

static int safe_name(const char *name) {
    const taas_builtin *b = taas_builtin_find(name);
    if (!b) return 1;
    if (b->kind == TAAS_K_DATASET || b->kind == TAAS_K_LOADER) return 0; /* probes run taas-worker */
    if (b->kind != TAAS_K_ACTION) return 1;
    for (size_t i = 0; i < sizeof SAFE_ACTIONS / sizeof SAFE_ACTIONS[0]; i++)
        if (!strcmp(b->name, SAFE_ACTIONS[i])) return 1;
    return 0;
}

/* Whether every name in the cell is safe to evaluate. A builtin is only reached through
 * its name (dotted names are NAME DOT NAME tokens), so the tokens tell. A cell that does
 * not lex does not run either. */
static int safe_to_run(const char *code) {
    taas_tokens t = TAAS_TOKENS_INIT;
    taas_error e;
    taas_error_clear(&e);
    int ok = taas_lex(code, &t, &e) == 0;
    for (size_t i = 0; ok && i < t.n; i++)
        if (t.v[i].kind == TAAS_T_NAME && !safe_name(t.v[i].s)) ok = 0;
    taas_tokens_free(&t);
    return ok;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    /* a pragma line's #!CONFIG reads the configuration file: a fixed one; nothing of the
     * user's home is read */
    static const char config[] = "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32}}}";
    setenv("TAAS_CONFIG", fz_write("config.json", config, sizeof config - 1), 1);
    setenv("HOME", fz_tmpdir(), 1);
    /* the session's values get 256 MiB, as the kernel's tests give them: a cell may ask
     * for more only to be refused (half this machine's memory is past the 2 GB a run may
     * take) */
    setenv("TAAS_VALUE_MEMORY", "268435456", 1);
    return 0;
}

static void show_error(taas_error *err, const char *code) {
    taas_error_attach_source(err, code);
    char **tb = taas_error_traceback(err);
    taas_error_traceback_free(tb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t n = strnlen((const char *)data, size);
    char *code = taas_utf8_sanitize((const char *)data, n, NULL);
    if (!code) return 0;

    taas_program prog;
    taas_error err;
    taas_error_clear(&err);
    memset(&prog, 0, sizeof prog);
    if (taas_parse(code, &prog, &err) == 0) {
        free(taas_program_dump(&prog));
        taas_program_free(&prog);
    } else {
        show_error(&err, code);
    }

    taas_interp *in = taas_interp_new();
    if (!in) abort();
    const char *status = taas_interp_is_complete(in, code);
    if (!status) abort();
    fz_say("is_complete: %s", status);

    /* completion and inspection where a front end may put the cursor: code points, as
     * Jupyter counts them */
    size_t cps = taas_utf8_count(code, strlen(code));
    size_t at[] = {0, cps / 3, cps / 2, cps > 0 ? cps - 1 : 0, cps};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        json_t *pos = json_integer((json_int_t)at[i]);
        size_t cursor = taas_cursor_to_byte(code, pos), start = cursor, end = cursor;
        json_decref(pos);
        json_t *matches = taas_interp_complete(in, code, cursor, &start, &end);
        json_decref(matches);
        taas_cursor_from_byte(code, start);
        taas_cursor_from_byte(code, end);
        json_decref(taas_interp_inspect(in, code, cursor, (int)(i & 1)));
    }

    if (safe_to_run(code)) {
        json_t *result = NULL;
        taas_run_state st = taas_interp_run(in, code, &IO, &result, &err);
        /* a waiting statement (sleep) is stopped as the stop button stops it */
        for (int k = 0; st == TAAS_RUN_WAIT && k < 4; k++) {
            json_decref(result);
            result = NULL;
            taas_interp_interrupt(in);
            st = taas_interp_resume(in, &result, &err);
        }
        if (st == TAAS_RUN_ERROR) show_error(&err, code);
        fz_say("run: %s %s", st == TAAS_RUN_ERROR ? err.ename : "done", st == TAAS_RUN_ERROR ? err.message : "");
        json_decref(result);
    } else {
        fz_say("not run: it names a dataset, a loader or an action that leaves the process");
    }
    taas_interp_free(in);
    free(code);
    return 0;
}
