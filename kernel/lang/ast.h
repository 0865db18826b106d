/* The syntax tree of a cell: a list of statements `name = expr` or `expr`. Every node keeps
 * where it is in the cell (line/column for carets, bytes for completion). */
#ifndef TAAS_AST_H
#define TAAS_AST_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error.h"

typedef enum taas_ekind {
    TAAS_E_INT,
    TAAS_E_FLOAT,
    TAAS_E_STR,
    TAAS_E_TRUE,
    TAAS_E_FALSE,
    TAAS_E_NONE,
    TAAS_E_NAME,   /* a name or a dotted name: "x", "nn.Conv2d", "sys.stderr" */
    TAAS_E_TUPLE,
    TAAS_E_LIST,
    TAAS_E_CALL,
    TAAS_E_BINOP,
    TAAS_E_UNARY,
    TAAS_E_ATTR,   /* x.name after a call or a subscript: f(x).fc, net[0].conv1 (a dotted
                      name is one NAME; the evaluator reads its attributes) */
    TAAS_E_INDEX,  /* x[i] */
} taas_ekind;

typedef enum taas_op {
    TAAS_OP_ADD,
    TAAS_OP_SUB,
    TAAS_OP_MUL,
    TAAS_OP_DIV,
    TAAS_OP_FLOORDIV,
    TAAS_OP_MOD,
    TAAS_OP_POW,
    TAAS_OP_NEG,   /* unary - */
    TAAS_OP_POS,   /* unary + */
} taas_op;

typedef struct taas_expr taas_expr;

typedef struct taas_callarg {
    char *keyword;      /* NULL for a positional argument */
    taas_srcpos pos;    /* start of the argument (its keyword when there is one) */
    taas_expr *value;
} taas_callarg;

struct taas_expr {
    taas_ekind kind;
    taas_srcpos pos, end;  /* first code point; just past the last one */
    size_t off, len;       /* bytes in the cell */
    int depth;             /* height of the subtree, bounded by the parser */
    union {
        int64_t i;
        double f;
        struct { char *s; size_t len; } str;   /* STR: value; NAME: the dotted name */
        struct { taas_expr **items; size_t n; } seq;
        struct { taas_expr *callee; taas_callarg *args; size_t nargs; } call;
        struct { taas_op op; taas_srcpos oppos; taas_expr *lhs, *rhs; } bin;
        struct { taas_op op; taas_expr *operand; } un;
        struct { taas_expr *obj; char *name; } attr;        /* ATTR */
        struct { taas_expr *obj; taas_expr *index; } index; /* INDEX */
    } u;
};

/* STORE: `net.fc = ...`, `net[-1] = ...`: a part of a model is replaced (eval.c). */
typedef enum taas_skind { TAAS_S_EXPR, TAAS_S_ASSIGN, TAAS_S_STORE } taas_skind;

typedef struct taas_stmt {
    taas_skind kind;
    char *target;           /* ASSIGN: the name */
    taas_expr *place;       /* STORE: what is assigned to (a dotted NAME, ATTR or INDEX) */
    taas_srcpos target_pos;
    taas_expr *value;
    taas_srcpos pos;        /* start of the statement */
} taas_stmt;

typedef struct taas_program {
    taas_stmt *stmts;
    size_t n;
} taas_program;

/* A zeroed node of the given kind (NULL when out of memory). */
taas_expr *taas_expr_new(taas_ekind kind);
void taas_expr_free(taas_expr *e);
void taas_program_free(taas_program *p);

/* Code points from a to b when both are on one line, else to the end of a's line: the
 * width of a caret under a span of the cell src. */
int taas_span_width(const char *src, taas_srcpos a, taas_srcpos b);

/* "+", "//", "-" (unary), ... */
const char *taas_op_text(taas_op op);

/* A compact S-expression of the tree, for tests and debugging:
 * (+ 1 (* 2 3)), (call nn.Conv2d 1 (= stride 2)), (tuple 1), (neg x), "str". */
void taas_expr_dump(const taas_expr *e, taas_buf *out);
/* One statement per line: "(= x 1)" or the expression. malloc'd. */
char *taas_program_dump(const taas_program *p);

/* Calls f on every node of the tree, parents first; stops at and returns f's first
 * nonzero result. `top` is 1 for the statement's own expression. */
typedef int (*taas_expr_visit)(const taas_expr *e, int top, void *ctx);
int taas_expr_walk(const taas_expr *e, taas_expr_visit f, void *ctx);

#endif
