/* The evaluator: expressions to values, statements to bindings. Names resolve to session
 * variables first, then builtins (with or without module prefixes); sys.stdout and
 * sys.stderr are the strings "stdout" and "stderr". Arithmetic follows Python on 64-bit
 * ints and doubles. */
#ifndef TAAS_EVAL_H
#define TAAS_EVAL_H

#include "ast.h"
#include "builtins.h"
#include "error.h"
#include "scope.h"
#include "value.h"

struct taas_interp;

typedef struct taas_eval_env {
    taas_scope *scope;
    const char *src;             /* the cell, for caret widths */
    const taas_io *io;           /* what actions write to */
    struct taas_interp *interp;  /* handed to actions */
} taas_eval_env;

/* New reference in *out, or -1 with the error at the offending part of e. */
int taas_eval_expr(const taas_eval_env *env, const taas_expr *e, taas_value **out, taas_error *err);

/* Runs one statement: an assignment binds its name. *value gets a new reference to the
 * statement's value; *wait_until the deadline a waiting action set (< 0 when none). An
 * assignment whose action waits is not bound here: the interpreter binds it when the wait
 * is over, so an interrupted `h = fit(...)` leaves h as it was. */
int taas_eval_stmt(const taas_eval_env *env, const taas_stmt *s, taas_value **value,
                   double *wait_until, taas_error *err);

/* Before a cell runs: a call of a builtin that waits (sleep) anywhere but as a whole
 * statement or a whole right side is a TaasSyntaxError. */
int taas_eval_check_waits(const taas_eval_env *env, const taas_program *p, taas_error *err);

/* Python's arithmetic on values. Errors (TaasTypeError, TaasValueError) have no position;
 * the caller places them. */
int taas_eval_binop(taas_op op, const taas_value *a, const taas_value *b, taas_value **out, taas_error *err);
int taas_eval_unary(taas_op op, const taas_value *a, taas_value **out, taas_error *err);

#endif
