/* The interpreter: a cell is parsed whole, its header directives checked, then its
 * statements run in order until one waits (the kernel resumes it later) or the cell ends. */
#include "interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "buf.h"
#include "complete.h"
#include "dataview.h"
#include "errnames.h"
#include "eval.h"
#include "lexer.h"
#include "parser.h"
#include "pragma.h"
#include "scope.h"
#include "utf8.h"
#include "value.h"

struct taas_interp {
    taas_scope *scope;
    /* the cell in progress, between a WAIT and its resume */
    int active;
    char *code;
    taas_program prog;
    const taas_io *io;
    size_t next;          /* next statement to run */
    double deadline;      /* < 0: not waiting */
    int interrupted;      /* 1: the stop button was pressed; 2: its waiter is stopping */
    taas_value *pending;  /* value of the waiting statement, until the wait is over */
    taas_waiter *waiter;  /* what the waiting statement waits on besides the clock */
    taas_pragma pragma;   /* the cell's #pragma taas, when present */
    taas_probe_cache *probes;
    int intr_fd;          /* readable when the kernel is asked to stop; -1 */
};

static void null_stream(void *ctx, const char *name, const char *text) { (void)ctx; (void)name; (void)text; }
static void null_display(void *ctx, json_t *data, json_t *md, const char *id, int update) {
    (void)ctx; (void)id; (void)update;
    json_decref(data);
    json_decref(md);
}
static void null_clear(void *ctx, int wait) { (void)ctx; (void)wait; }
static void null_page(void *ctx, json_t *data) { (void)ctx; json_decref(data); }
static const taas_io NULL_IO = {.stream = null_stream, .display = null_display, .clear_output = null_clear, .page = null_page};

const taas_io *taas_interp_quiet_io(void) {
    return &NULL_IO;
}

taas_interp *taas_interp_new(void) {
    taas_interp *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->scope = taas_scope_new();
    in->probes = taas_probe_cache_new();
    if (!in->scope || !in->probes) {
        taas_scope_free(in->scope);
        taas_probe_cache_free(in->probes);
        free(in);
        return NULL;
    }
    in->deadline = -1.0;
    in->intr_fd = -1;
    taas_json_init();  /* a JSON document that lost a part to a failed allocation is known */
    return in;
}

static void drop_waiter(taas_interp *in) {
    if (in->waiter) {
        taas_unref(in->waiter->result);
        in->waiter->result = NULL;
        in->waiter->free(in->waiter);  /* kills a worker still running */
    }
    in->waiter = NULL;
}

static void end_cell(taas_interp *in) {
    drop_waiter(in);
    taas_program_free(&in->prog);
    free(in->code);
    in->code = NULL;
    taas_unref(in->pending);
    in->pending = NULL;
    in->active = 0;
    in->next = 0;
    in->deadline = -1.0;
    in->interrupted = 0;
    in->io = NULL;
    memset(&in->pragma, 0, sizeof in->pragma);
}

void taas_interp_free(taas_interp *in) {
    if (!in) return;
    end_cell(in);
    taas_scope_free(in->scope);
    taas_probe_cache_free(in->probes);
    free(in);
}

static taas_run_state fail(taas_interp *in, taas_error *err) {
    taas_error_attach_source(err, in->code);
    end_cell(in);
    return TAAS_RUN_ERROR;
}

/* A failure of statement s that the evaluator did not place (a probe, a worker). */
static void place_stmt(taas_interp *in, const taas_stmt *s, taas_error *err) {
    if (err->pos.line != 0) return;
    err->pos = s->pos;
    err->width = taas_span_width(in->code, s->pos, s->value->end);
}

static taas_eval_env env_of(taas_interp *in) {
    taas_eval_env env = {in->scope, in->code, in->io, in};
    return env;
}

/* Runs statements from in->next until the cell ends, fails or waits. */
static taas_run_state step(taas_interp *in, json_t **result, taas_error *err) {
    taas_eval_env env = env_of(in);
    while (in->next < in->prog.n) {
        const taas_stmt *s = &in->prog.stmts[in->next++];
        int last = in->next == in->prog.n;
        taas_value *v;
        double wait;
        if (taas_eval_stmt(&env, s, &v, &wait, err)) return fail(in, err);
        if (wait >= 0) {
            in->pending = v;  /* bound or shown when the wait is over */
            v = NULL;
        } else if (last && s->kind == TAAS_S_EXPR && v->type != TAAS_V_NONE) {
            if (!(*result = taas_data_mimebundle(in, v, err))) {
                taas_unref(v);  /* a dataset whose probe failed: the cell's error */
                place_stmt(in, s, err);
                return fail(in, err);
            }
        }
        taas_unref(v);
        if (wait >= 0) {
            in->deadline = wait;
            return TAAS_RUN_WAIT;
        }
    }
    end_cell(in);
    return TAAS_RUN_DONE;
}

/* ---- pragma cells ------------------------------------------------------------------ */

static int is_fit_call(const taas_expr *e, int top, void *ctx) {
    (void)top;
    (void)ctx;
    if (e->kind != TAAS_E_CALL || e->u.call.callee->kind != TAAS_E_NAME) return 0;
    const char *name = e->u.call.callee->u.str.s;
    const char *dot = strrchr(name, '.');
    return !strcmp(dot ? dot + 1 : name, "fit");
}

static int line_width(const char *code, int line) {
    taas_srcpos a = {line, 1}, b = {line + 1, 1};
    return taas_span_width(code, a, b);
}

/* A pragma cell runs as any cell, but its fit() is an offloaded job (action_job.c):
 * here it is only checked that there is one. */
static int check_pragma_cell(taas_interp *in, const taas_pragma *pr, taas_error *err) {
    taas_srcpos at = {pr->line, 1};
    int has_fit = 0;
    for (size_t k = 0; k < in->prog.n && !has_fit; k++)
        has_fit = taas_expr_walk(in->prog.stmts[k].value, is_fit_call, NULL);
    if (has_fit) return 0;
    taas_error_set(err, TAAS_ERR_PRAGMA, at, "a #pragma taas cell trains a model: it needs a fit(...) call");
    err->width = line_width(in->code, pr->line);
    taas_error_hint(err, "add fit(model, loader, epochs=...) below the #pragma line, or remove the "
                         "#pragma line to run the cell in the notebook");
    return -1;
}

const taas_pragma *taas_interp_pragma(const taas_interp *in) {
    return in && in->active && in->pragma.present ? &in->pragma : NULL;
}

/* ---- running cells ----------------------------------------------------------------- */

taas_run_state taas_interp_run(taas_interp *in, const char *code, const taas_io *io, json_t **result,
                               taas_error *err) {
    *result = NULL;
    taas_error_clear(err);
    end_cell(in);  /* the kernel runs one cell at a time; a cell left waiting is dropped */
    if (!code) code = "";
    size_t n = strlen(code);
    in->code = taas_utf8_valid(code, n) ? strdup(code) : taas_utf8_sanitize(code, n, NULL);
    if (!in->code) {
        taas_value_oom(err, TAAS_NOPOS, "reading the cell");
        return TAAS_RUN_ERROR;
    }
    /* a lone CR ends a line, as in Python (old Mac files); CR LF is one line end */
    char *w = in->code;
    for (const char *r = in->code; *r; r++) {
        if (*r != '\r') {
            *w++ = *r;
            continue;
        }
        *w++ = '\n';
        if (r[1] == '\n') r++;
    }
    *w = '\0';
    in->io = io ? io : &NULL_IO;
    if (taas_pragma_parse(in->code, &in->pragma, err)) return fail(in, err);
    if (taas_parse(in->code, &in->prog, err)) return fail(in, err);
    taas_eval_env env = env_of(in);
    if (taas_eval_check_waits(&env, &in->prog, err)) return fail(in, err);
    if (in->pragma.present && check_pragma_cell(in, &in->pragma, err)) return fail(in, err);
    in->active = 1;
    return step(in, result, err);
}

/* The wait is over: the statement's value is what the wait ended with (fit's History) or
 * else what the action returned; an assignment binds it now, and the cell's last
 * expression shows it. Takes v (may be NULL). */
static int end_wait(taas_interp *in, const taas_stmt *s, taas_value *v, json_t **result, taas_error *err) {
    if (v) {
        taas_unref(in->pending);
        in->pending = v;
    }
    v = in->pending;
    in->pending = NULL;
    int rc = 0;
    if (v && s->kind == TAAS_S_ASSIGN && taas_scope_set(in->scope, s->target, v)) {
        rc = taas_value_oom(err, s->pos, "assigning a variable");
    } else if (v && s->kind == TAAS_S_EXPR && in->next == in->prog.n && v->type != TAAS_V_NONE &&
               !(*result = taas_data_mimebundle(in, v, err))) {
        place_stmt(in, s, err);
        rc = -1;
    }
    taas_unref(v);
    return rc;
}

taas_run_state taas_interp_resume(taas_interp *in, json_t **result, taas_error *err) {
    *result = NULL;
    taas_error_clear(err);
    if (!in->active) return TAAS_RUN_DONE;
    const taas_stmt *s = &in->prog.stmts[in->next - 1];
    if (in->interrupted && in->waiter && in->waiter->stop) {
        /* the loop stays free while it stops: poll until the stop is complete */
        if (in->interrupted == 1) {
            in->interrupted = 2;
            in->waiter->stop(in->waiter, in->io);
        }
        taas_error e;
        taas_error_clear(&e);
        if (in->waiter->poll(in->waiter, in->io, taas_now() >= in->deadline, &e) == 1) {
            if (in->waiter->deadline > 0) in->deadline = in->waiter->deadline;
            return TAAS_RUN_WAIT;
        }
        drop_waiter(in);
    }
    if (in->interrupted) {
        taas_error_set(err, TAAS_ERR_INTERRUPT, s->pos, "interrupted");
        err->width = taas_span_width(in->code, s->pos, s->value->end);
        if (in->next < in->prog.n)
            taas_error_hint(err, "the statements after line %d did not run; variables assigned before it "
                                 "keep their values", s->pos.line);
        return fail(in, err);
    }
    taas_value *v = NULL;
    if (in->waiter) {
        int r = in->waiter->poll(in->waiter, in->io, taas_now() >= in->deadline, err);
        if (r == 1) {
            if (in->waiter->deadline > 0) in->deadline = in->waiter->deadline;
            return TAAS_RUN_WAIT;
        }
        v = in->waiter->result;
        in->waiter->result = NULL;
        drop_waiter(in);
        if (r < 0) {
            taas_unref(v);
            place_stmt(in, s, err);
            return fail(in, err);
        }
    } else if (taas_now() < in->deadline) {
        return TAAS_RUN_WAIT;
    }
    in->deadline = -1.0;
    if (end_wait(in, s, v, result, err)) return fail(in, err);
    return step(in, result, err);
}

double taas_interp_deadline(const taas_interp *in) {
    return in->active ? in->deadline : -1.0;
}

int taas_interp_wait_fd(const taas_interp *in) {
    return in->active && in->deadline >= 0 && in->waiter ? in->waiter->fd : -1;
}

void taas_interp_set_interrupt_fd(taas_interp *in, int fd) {
    in->intr_fd = fd;
    taas_walk_set_interrupt_fd(fd);  /* the walks over values of a running cell watch it too */
}

void taas_interp_set_interrupt_check(taas_interp *in, int (*check)(void *ctx), void *ctx) {
    (void)in;
    taas_walk_set_interrupt_check(check, ctx);
}

int taas_interp_interrupt_fd(const taas_interp *in) {
    return in ? in->intr_fd : -1;
}

void taas_interp_wait_on(taas_interp *in, taas_waiter *w) {
    drop_waiter(in);
    in->waiter = w;
}

taas_probe_cache *taas_interp_probe_cache(taas_interp *in) {
    return in ? in->probes : NULL;
}

void taas_interp_interrupt(taas_interp *in) {
    if (in->active && in->deadline >= 0 && !in->interrupted) in->interrupted = 1;
}

/* ---- the front end's questions ----------------------------------------------------- */

const char *taas_interp_is_complete(taas_interp *in, const char *code) {
    (void)in;
    taas_tokens toks = TAAS_TOKENS_INIT;
    taas_error err;
    taas_error_clear(&err);
    const char *verdict;
    if (taas_lex(code ? code : "", &toks, &err)) {
        verdict = toks.incomplete ? "incomplete" : "invalid";
    } else {
        taas_program prog;
        verdict = taas_parse_tokens(code, &toks, &prog, &err) ? "invalid" : "complete";
        taas_program_free(&prog);
    }
    taas_tokens_free(&toks);
    return verdict;
}

json_t *taas_interp_complete(taas_interp *in, const char *code, size_t cursor_byte, size_t *start, size_t *end) {
    return taas_complete(in->scope, code, cursor_byte, start, end);
}

json_t *taas_interp_inspect(taas_interp *in, const char *code, size_t cursor_byte, int detail_level) {
    return taas_inspect(in->scope, code, cursor_byte, detail_level);
}

/* ---- session state for actions ----------------------------------------------------- */

int taas_interp_register_loader(taas_interp *in, struct taas_value *loader, taas_error *err) {
    return taas_scope_register(in->scope, loader, err);
}

int taas_interp_unregister_loader(taas_interp *in, struct taas_value *loader, taas_error *err) {
    return taas_scope_unregister(in->scope, loader, err);
}

size_t taas_interp_loader_count(const taas_interp *in) {
    return taas_scope_loader_count(in->scope);
}

struct taas_value *taas_interp_loader_at(const taas_interp *in, size_t i) {
    return taas_scope_loader_at(in->scope, i);
}

const char *taas_interp_name_of(const taas_interp *in, const struct taas_value *v) {
    return taas_scope_name_of(in->scope, v);
}
