#include "parser.h"
#include "errnames.h"
#include "value.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct parser {
    const char *src;
    const taas_token *t;
    size_t n, i;
    int nest;  /* recursion depth of the descent: brackets, calls, unary signs, ** */
    taas_error *err;
} parser;

static const char *const STMT_HINT =
    "a taas cell holds statements `name = expr` or `expr`, one per line (see docs/cell-language.md)";

static const taas_token *tok(const parser *p) { return &p->t[p->i < p->n ? p->i : p->n - 1]; }
static const taas_token *ahead(const parser *p, size_t k) {
    return &p->t[p->i + k < p->n ? p->i + k : p->n - 1];
}
static taas_tok kind(const parser *p) { return tok(p)->kind; }
static int at_end(const parser *p) { return kind(p) == TAAS_T_NEWLINE || kind(p) == TAAS_T_EOF; }

static int span(const parser *p, taas_srcpos a, taas_srcpos b) { return taas_span_width(p->src, a, b); }

static int fail(parser *p, taas_srcpos pos, int width, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(parser *p, taas_srcpos pos, int width, const char *hint, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    taas_error_vset(p->err, TAAS_ERR_SYNTAX, pos, fmt, ap);
    va_end(ap);
    p->err->width = width > 0 ? width : 1;
    if (hint) taas_error_hint(p->err, "%s", hint);
    return -1;
}

static int fail_tok(parser *p, const taas_token *t, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_tok(parser *p, const taas_token *t, const char *hint, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    taas_error_vset(p->err, TAAS_ERR_SYNTAX, t->pos, fmt, ap);
    va_end(ap);
    p->err->width = span(p, t->pos, t->end);
    if (hint) taas_error_hint(p->err, "%s", hint);
    return -1;
}

static int oom(parser *p) { return taas_value_oom(p->err, tok(p)->pos, "parsing the cell"); }

static taas_expr *node(parser *p, taas_ekind k, const taas_token *first, const taas_token *last) {
    taas_expr *e = taas_expr_new(k);
    if (!e) {
        oom(p);
        return NULL;
    }
    e->pos = first->pos;
    e->end = last->end;
    e->off = first->off;
    e->len = last->off + last->len - first->off;
    return e;
}

/* Checks the height of a new node; frees it when it is too deep. */
static taas_expr *bounded(parser *p, taas_expr *e) {
    if (e && e->depth > TAAS_MAX_EXPR_DEPTH) {
        fail(p, e->pos, span(p, e->pos, e->end), "split it into several assignments",
             "expression is nested too deeply (more than %d levels)", TAAS_MAX_EXPR_DEPTH);
        taas_expr_free(e);
        return NULL;
    }
    return e;
}

static int max_depth(int a, int b) { return a > b ? a : b; }

/* Every recursion of the descent (brackets, calls, unary signs, the right side of **)
 * counts here on the way down, so no cell can take the stack; the caller undoes it with
 * p->nest-- after the recursive call. */
static int too_deep(parser *p, const taas_token *at) {
    if (++p->nest <= TAAS_MAX_EXPR_DEPTH) return 0;
    p->nest--;
    fail_tok(p, at, "split it into several assignments",
             "expression is nested too deeply (more than %d levels)", TAAS_MAX_EXPR_DEPTH);
    return 1;
}

/* The token before the current one, when it is an operator or bracket worth naming. */
static const char *after_what(const parser *p) {
    if (p->i == 0) return NULL;
    taas_tok k = p->t[p->i - 1].kind;
    if (k >= TAAS_T_PLUS) return taas_tok_describe(k);
    return NULL;
}

static int expected_expr(parser *p) {
    const taas_token *t = tok(p);
    const char *after = after_what(p);
    if (t->kind == TAAS_T_STAR || t->kind == TAAS_T_DSTAR)
        return fail_tok(p, t, "pass the items one by one", "unpacking ('%s') is not part of the taas cell language",
                        t->kind == TAAS_T_STAR ? "*" : "**");
    if (at_end(p))
        return fail_tok(p, t, "complete the expression; to go on on the next line, wrap it in parentheses",
                        "expected an expression%s%s, found %s", after ? " after " : "", after ? after : "",
                        taas_tok_describe(t->kind));
    return fail_tok(p, t, "write a value here: a number, a string, a name, a call, a tuple or a list",
                    "expected an expression%s%s, found %s", after ? " after " : "",
                    after ? after : "", taas_tok_describe(t->kind));
}

static taas_expr *parse_expr(parser *p);
static taas_expr *parse_factor(parser *p);

/* ---- atoms ------------------------------------------------------------------------- */

static taas_expr *parse_name(parser *p) {
    const taas_token *first = tok(p), *last = first;
    size_t len = first->slen;
    p->i++;
    while (kind(p) == TAAS_T_DOT) {
        if (ahead(p, 1)->kind != TAAS_T_NAME) {
            p->i++;
            fail_tok(p, tok(p), "write a dotted name such as nn.Conv2d", "expected a name after '.', found %s",
                     taas_tok_describe(kind(p)));
            return NULL;
        }
        p->i++;
        last = tok(p);
        len += 1 + last->slen;
        p->i++;
    }
    taas_expr *e = node(p, TAAS_E_NAME, first, last);
    if (!e) return NULL;
    char *s = malloc(len + 1);
    if (!s) {
        taas_expr_free(e);
        oom(p);
        return NULL;
    }
    size_t o = 0;
    for (const taas_token *t = first; t <= last; t++) {
        if (t->kind != TAAS_T_NAME) continue;
        if (o) s[o++] = '.';
        memcpy(s + o, t->s, t->slen);
        o += t->slen;
    }
    s[o] = '\0';
    e->u.str.s = s;
    e->u.str.len = o;
    return e;
}

static taas_expr *parse_string(parser *p) {
    const taas_token *first = tok(p), *last = first;
    size_t len = 0;
    while (kind(p) == TAAS_T_STRING) {
        len += tok(p)->slen;
        last = tok(p);
        p->i++;
    }
    taas_expr *e = node(p, TAAS_E_STR, first, last);
    if (!e) return NULL;
    char *s = malloc(len + 1);
    if (!s) {
        taas_expr_free(e);
        oom(p);
        return NULL;
    }
    size_t o = 0;
    for (const taas_token *t = first; t <= last; t++) {
        memcpy(s + o, t->s, t->slen);
        o += t->slen;
    }
    s[o] = '\0';
    e->u.str.s = s;
    e->u.str.len = o;
    return e;
}

static int push_item(parser *p, taas_expr *seq, taas_expr *item) {
    taas_expr **v = realloc(seq->u.seq.items, (seq->u.seq.n + 1) * sizeof *v);
    if (!v) {
        taas_expr_free(item);
        return oom(p);
    }
    seq->u.seq.items = v;
    v[seq->u.seq.n++] = item;
    seq->depth = max_depth(seq->depth, item->depth + 1);
    return 0;
}

static int misplaced_assign(parser *p) {
    return fail_tok(p, tok(p), "keyword arguments go inside calls, f(name=value); an assignment starts a statement",
                    "'=' is not allowed here");
}

/* Items after '(' or '[' up to the closing bracket. */
static taas_expr *parse_bracketed(parser *p, taas_ekind k, taas_tok close) {
    const taas_token *open = tok(p);
    p->i++;
    taas_expr *seq = node(p, k, open, open);
    if (!seq) return NULL;
    int commas = 0;
    while (kind(p) != close) {
        taas_expr *item = parse_expr(p);
        if (!item || push_item(p, seq, item)) goto bad;
        if (kind(p) == TAAS_T_COMMA) {
            commas++;
            p->i++;
            continue;
        }
        if (kind(p) == close) break;
        if (kind(p) == TAAS_T_ASSIGN) {
            misplaced_assign(p);
            goto bad;
        }
        fail_tok(p, tok(p), "separate the items with ','", "invalid syntax: expected ',' or %s, found %s",
                 taas_tok_describe(close), taas_tok_describe(kind(p)));
        goto bad;
    }
    seq->end = tok(p)->end;
    seq->len = tok(p)->off + tok(p)->len - seq->off;
    p->i++;
    if (k == TAAS_E_TUPLE && seq->u.seq.n == 1 && commas == 0) {
        /* (expr) is the expression itself, not a tuple */
        taas_expr *inner = seq->u.seq.items[0];
        seq->u.seq.n = 0;
        taas_expr_free(seq);
        return inner;
    }
    return bounded(p, seq);
bad:
    taas_expr_free(seq);
    return NULL;
}

static taas_expr *parse_atom(parser *p) {
    const taas_token *t = tok(p);
    taas_expr *e = NULL;
    switch (t->kind) {
    case TAAS_T_NAME: return parse_name(p);
    case TAAS_T_STRING: return parse_string(p);
    case TAAS_T_INT:
    case TAAS_T_FLOAT:
    case TAAS_T_TRUE:
    case TAAS_T_FALSE:
    case TAAS_T_NONE:
        e = node(p, t->kind == TAAS_T_INT ? TAAS_E_INT : t->kind == TAAS_T_FLOAT ? TAAS_E_FLOAT
                    : t->kind == TAAS_T_TRUE ? TAAS_E_TRUE : t->kind == TAAS_T_FALSE ? TAAS_E_FALSE
                    : TAAS_E_NONE, t, t);
        if (!e) return NULL;
        if (t->kind == TAAS_T_INT) e->u.i = t->i;
        if (t->kind == TAAS_T_FLOAT) e->u.f = t->f;
        p->i++;
        return e;
    case TAAS_T_LPAR:
    case TAAS_T_LSQB:
        if (too_deep(p, t)) return NULL;
        e = parse_bracketed(p, t->kind == TAAS_T_LPAR ? TAAS_E_TUPLE : TAAS_E_LIST,
                            t->kind == TAAS_T_LPAR ? TAAS_T_RPAR : TAAS_T_RSQB);
        p->nest--;
        return e;
    default:
        expected_expr(p);
        return NULL;
    }
}

/* ---- calls ------------------------------------------------------------------------- */

static int push_arg(parser *p, taas_expr *call, const taas_callarg *a) {
    taas_callarg *v = realloc(call->u.call.args, (call->u.call.nargs + 1) * sizeof *v);
    if (!v) {
        free(a->keyword);
        taas_expr_free(a->value);
        return oom(p);
    }
    call->u.call.args = v;
    v[call->u.call.nargs++] = *a;
    call->depth = max_depth(call->depth, a->value->depth + 1);
    return 0;
}

static int parse_arg(parser *p, taas_expr *call, int *seen_keyword) {
    taas_callarg a = {NULL, tok(p)->pos, NULL};
    if (kind(p) == TAAS_T_NAME && ahead(p, 1)->kind == TAAS_T_ASSIGN) {
        const taas_token *kw = tok(p);
        for (size_t k = 0; k < call->u.call.nargs; k++) {
            const char *prev = call->u.call.args[k].keyword;
            if (prev && !strcmp(prev, kw->s))
                return fail_tok(p, kw, "pass each keyword argument once",
                                "keyword argument repeated: '%s'", kw->s);
        }
        p->i += 2;
        if (kind(p) == TAAS_T_COMMA || kind(p) == TAAS_T_RPAR)
            return fail_tok(p, tok(p), "write a value after '=': stride=2",
                            "expected a value for keyword argument '%s', found %s", kw->s,
                            taas_tok_describe(kind(p)));
        if (!(a.keyword = strdup(kw->s))) return oom(p);
        *seen_keyword = 1;
    }
    a.value = parse_expr(p);
    if (!a.value) {
        free(a.keyword);
        return -1;
    }
    if (!a.keyword && kind(p) == TAAS_T_ASSIGN) {
        int w = span(p, a.value->pos, a.value->end);
        taas_srcpos pos = a.value->pos;
        taas_expr_free(a.value);
        return fail(p, pos, w, "write name=value with a plain name, e.g. stride=2",
                    "a keyword argument needs a plain name before '='");
    }
    if (!a.keyword && *seen_keyword) {
        int w = span(p, a.value->pos, a.value->end);
        taas_srcpos pos = a.value->pos;
        taas_expr_free(a.value);
        return fail(p, pos, w, "put positional arguments before keyword arguments, as in Python",
                    "positional argument follows keyword argument");
    }
    return push_arg(p, call, &a);
}

static taas_expr *parse_call(parser *p, taas_expr *callee) {
    taas_expr *call = taas_expr_new(TAAS_E_CALL);
    if (!call) {
        taas_expr_free(callee);
        oom(p);
        return NULL;
    }
    call->pos = callee->pos;
    call->off = callee->off;
    call->u.call.callee = callee;
    call->depth = callee->depth + 1;
    if (too_deep(p, tok(p))) goto bad;
    p->i++;  /* ( */
    int seen_keyword = 0;
    while (kind(p) != TAAS_T_RPAR) {
        if (kind(p) == TAAS_T_STAR || kind(p) == TAAS_T_DSTAR) {
            fail_tok(p, tok(p), "pass the arguments one by one",
                     "argument unpacking (*args, **kwargs) is not part of the taas cell language");
            goto bad;
        }
        if (parse_arg(p, call, &seen_keyword)) goto bad;
        if (kind(p) == TAAS_T_COMMA) {
            p->i++;
            continue;
        }
        if (kind(p) == TAAS_T_RPAR) break;
        fail_tok(p, tok(p), "separate arguments with ','",
                 "invalid syntax: expected ',' or ')' after an argument, found %s", taas_tok_describe(kind(p)));
        goto bad;
    }
    p->nest--;
    call->end = tok(p)->end;
    call->len = tok(p)->off + tok(p)->len - call->off;
    p->i++;
    return bounded(p, call);
bad:
    taas_expr_free(call);
    return NULL;
}

/* ---- operators --------------------------------------------------------------------- */

/* x.name after a call or a subscript (after a name, parse_name took the dots). */
static taas_expr *parse_attr(parser *p, taas_expr *obj) {
    if (ahead(p, 1)->kind != TAAS_T_NAME) {
        p->i++;
        fail_tok(p, tok(p), "write an attribute name after '.', as in net.fc", "expected a name after '.', found %s",
                 taas_tok_describe(kind(p)));
        taas_expr_free(obj);
        return NULL;
    }
    const taas_token *name = ahead(p, 1);
    taas_expr *e = taas_expr_new(TAAS_E_ATTR);
    char *s = e ? strdup(name->s) : NULL;
    if (!s) {
        free(e);
        taas_expr_free(obj);
        oom(p);
        return NULL;
    }
    p->i += 2;
    e->pos = obj->pos;
    e->off = obj->off;
    e->end = name->end;
    e->len = name->off + name->len - obj->off;
    e->u.attr.obj = obj;
    e->u.attr.name = s;
    e->depth = obj->depth + 1;
    return bounded(p, e);
}

/* x[index]: one expression (there is no ':' in the language, so no slice). */
static taas_expr *parse_index(parser *p, taas_expr *obj) {
    if (too_deep(p, tok(p))) {
        taas_expr_free(obj);
        return NULL;
    }
    p->i++;  /* [ */
    taas_expr *index = kind(p) == TAAS_T_RSQB ? (expected_expr(p), NULL) : parse_expr(p);
    p->nest--;
    if (index && kind(p) != TAAS_T_RSQB) {
        fail_tok(p, tok(p), "index with one int: net[0], net[-1]",
                 "invalid syntax: expected ']' after the index, found %s", taas_tok_describe(kind(p)));
        taas_expr_free(index);
        index = NULL;
    }
    taas_expr *e = index ? taas_expr_new(TAAS_E_INDEX) : NULL;
    if (!e) {
        if (index) oom(p);
        taas_expr_free(index);
        taas_expr_free(obj);
        return NULL;
    }
    e->pos = obj->pos;
    e->off = obj->off;
    e->end = tok(p)->end;
    e->len = tok(p)->off + tok(p)->len - obj->off;
    p->i++;  /* ] */
    e->u.index.obj = obj;
    e->u.index.index = index;
    e->depth = max_depth(obj->depth, index->depth) + 1;
    return bounded(p, e);
}

static taas_expr *parse_primary(parser *p) {
    taas_expr *e = parse_atom(p);
    while (e) {
        if (kind(p) == TAAS_T_LPAR) {
            e = parse_call(p, e);
        } else if (kind(p) == TAAS_T_DOT) {
            e = parse_attr(p, e);
        } else if (kind(p) == TAAS_T_LSQB) {
            e = parse_index(p, e);
        } else {
            break;
        }
    }
    return e;
}

/* first: the expression's first token, which is a '(' when the left operand is
 * parenthesized (so is Python's caret); the last token is the one just parsed. */
static taas_expr *binop(parser *p, taas_op op, const taas_token *optok, const taas_token *first, taas_expr *lhs,
                        taas_expr *rhs) {
    taas_expr *e = node(p, TAAS_E_BINOP, first, &p->t[p->i - 1]);
    if (!e) {
        taas_expr_free(lhs);
        taas_expr_free(rhs);
        return NULL;
    }
    e->u.bin.op = op;
    e->u.bin.oppos = optok->pos;
    e->u.bin.lhs = lhs;
    e->u.bin.rhs = rhs;
    e->depth = max_depth(lhs->depth, rhs->depth) + 1;
    return bounded(p, e);
}

static taas_expr *parse_power(parser *p) {
    const taas_token *first = tok(p);
    taas_expr *base = parse_primary(p);
    if (!base || kind(p) != TAAS_T_DSTAR) return base;
    const taas_token *op = tok(p);
    if (too_deep(p, op)) {
        taas_expr_free(base);
        return NULL;
    }
    p->i++;
    taas_expr *exp = parse_factor(p);  /* right associative, and 2 ** -1 is allowed */
    p->nest--;
    if (!exp) {
        taas_expr_free(base);
        return NULL;
    }
    return binop(p, TAAS_OP_POW, op, first, base, exp);
}

static taas_expr *parse_factor(parser *p) {
    if (kind(p) != TAAS_T_PLUS && kind(p) != TAAS_T_MINUS) return parse_power(p);
    const taas_token *op = tok(p);
    if (too_deep(p, op)) return NULL;
    p->i++;
    taas_expr *operand = parse_factor(p);
    p->nest--;
    if (!operand) return NULL;
    taas_expr *e = node(p, TAAS_E_UNARY, op, &p->t[p->i - 1]);
    if (!e) {
        taas_expr_free(operand);
        return NULL;
    }
    e->u.un.op = op->kind == TAAS_T_MINUS ? TAAS_OP_NEG : TAAS_OP_POS;
    e->u.un.operand = operand;
    e->depth = operand->depth + 1;
    return bounded(p, e);
}

static int term_op(taas_tok k, taas_op *op) {
    switch (k) {
    case TAAS_T_STAR: *op = TAAS_OP_MUL; return 1;
    case TAAS_T_SLASH: *op = TAAS_OP_DIV; return 1;
    case TAAS_T_DSLASH: *op = TAAS_OP_FLOORDIV; return 1;
    case TAAS_T_PERCENT: *op = TAAS_OP_MOD; return 1;
    default: return 0;
    }
}

static taas_expr *parse_term(parser *p) {
    const taas_token *first = tok(p);
    taas_expr *e = parse_factor(p);
    taas_op op;
    while (e && term_op(kind(p), &op)) {
        const taas_token *optok = tok(p);
        p->i++;
        taas_expr *rhs = parse_factor(p);
        if (!rhs) {
            taas_expr_free(e);
            return NULL;
        }
        e = binop(p, op, optok, first, e, rhs);
    }
    return e;
}

static taas_expr *parse_expr(parser *p) {
    const taas_token *first = tok(p);
    taas_expr *e = parse_term(p);
    while (e && (kind(p) == TAAS_T_PLUS || kind(p) == TAAS_T_MINUS)) {
        const taas_token *optok = tok(p);
        p->i++;
        taas_expr *rhs = parse_term(p);
        if (!rhs) {
            taas_expr_free(e);
            return NULL;
        }
        e = binop(p, optok->kind == TAAS_T_PLUS ? TAAS_OP_ADD : TAAS_OP_SUB, optok, first, e, rhs);
    }
    return e;
}

/* expr, or a tuple without parentheses: `1, 2` */
static taas_expr *parse_exprlist(parser *p) {
    const taas_token *start = tok(p);
    taas_expr *first = parse_expr(p);
    if (!first || kind(p) != TAAS_T_COMMA) return first;
    taas_expr *seq = node(p, TAAS_E_TUPLE, start, start);
    if (!seq) {
        taas_expr_free(first);
        return NULL;
    }
    if (push_item(p, seq, first)) goto bad;
    const taas_token *last = tok(p);
    while (kind(p) == TAAS_T_COMMA) {
        last = tok(p);
        p->i++;
        if (at_end(p) || kind(p) == TAAS_T_ASSIGN) break;
        taas_expr *item = parse_expr(p);
        if (!item || push_item(p, seq, item)) goto bad;
        last = &p->t[p->i - 1];
    }
    seq->end = last->end;
    seq->len = last->off + last->len - seq->off;
    return bounded(p, seq);
bad:
    taas_expr_free(seq);
    return NULL;
}

/* ---- statements -------------------------------------------------------------------- */

/* `expr =` where expr cannot be assigned to. */
static int bad_target(parser *p, const taas_expr *e, int chained) {
    int w = span(p, e->pos, e->end);
    if (chained && e->kind == TAAS_E_NAME && !strchr(e->u.str.s, '.'))
        return fail(p, tok(p)->pos, 1, "assign one name per statement: b = 1, then a = b",
                    "chained assignment (a = b = ...) is not part of the taas cell language");
    switch (e->kind) {
    case TAAS_E_NAME:
        return fail(p, e->pos, w, "assign to a plain name: x = ...",
                    "cannot assign to '%s': only plain names can be assigned", e->u.str.s);
    case TAAS_E_TUPLE:
    case TAAS_E_LIST:
        return fail(p, e->pos, w, "assign one name per statement",
                    "unpacking assignment (a, b = ...) is not part of the taas cell language");
    case TAAS_E_CALL:
        return fail(p, e->pos, w, "assign to a plain name: x = ...", "cannot assign to a function call");
    case TAAS_E_ATTR:
    case TAAS_E_INDEX:
        return fail(p, e->pos, w, "assign to a part of a variable: net.fc = ..., net[-1] = ...",
                    "cannot assign to a part of a value that is not a variable");
    case TAAS_E_TRUE:
    case TAAS_E_FALSE:
    case TAAS_E_NONE:
        return fail(p, e->pos, w, "pick another name", "cannot assign to %s",
                    e->kind == TAAS_E_TRUE ? "True" : e->kind == TAAS_E_FALSE ? "False" : "None");
    case TAAS_E_BINOP:
    case TAAS_E_UNARY:
        return fail(p, e->pos, w, "assign to a plain name: x = ...", "cannot assign to an expression");
    default:
        return fail(p, e->pos, w, "assign to a plain name: x = ...", "cannot assign to a literal");
    }
}

/* What a store may assign to: a part of a model reached from a name, by dotted names,
 * attributes and subscripts (net.fc, net[-1], net.layer1[0].conv1). */
static int is_place(const taas_expr *e) {
    if (e->kind == TAAS_E_NAME) return strchr(e->u.str.s, '.') != NULL;
    for (;;) {
        if (e->kind == TAAS_E_ATTR) e = e->u.attr.obj;
        else if (e->kind == TAAS_E_INDEX) e = e->u.index.obj;
        else return e->kind == TAAS_E_NAME;
    }
}

static int parse_stmt(parser *p, taas_stmt *s) {
    const taas_token *t = tok(p);
    memset(s, 0, sizeof *s);
    s->pos = t->pos;
    if (t->kind == TAAS_T_PERCENT)
        return fail_tok(p, t, STMT_HINT, "IPython magics ('%%...') are not part of the taas cell language");
    if (t->kind == TAAS_T_NAME && ahead(p, 1)->kind == TAAS_T_ASSIGN) {
        s->kind = TAAS_S_ASSIGN;
        s->target_pos = t->pos;
        if (!(s->target = strdup(t->s))) return oom(p);
        p->i += 2;
    }
    if (!(s->value = parse_exprlist(p))) return -1;
    if (kind(p) == TAAS_T_ASSIGN && s->kind == TAAS_S_EXPR && is_place(s->value)) {
        s->kind = TAAS_S_STORE;  /* net.fc = ..., net[-1] = ... */
        s->place = s->value;
        s->target_pos = s->place->pos;
        p->i++;
        if (!(s->value = parse_exprlist(p))) return -1;
    }
    if (kind(p) == TAAS_T_ASSIGN) return bad_target(p, s->value, s->kind != TAAS_S_EXPR);
    if (at_end(p)) return 0;
    const taas_token *bad = tok(p);
    if (s->kind == TAAS_S_EXPR && s->value->kind == TAAS_E_NAME && !strcmp(s->value->u.str.s, "print") &&
        bad->pos.line == s->value->pos.line)
        return fail_tok(p, bad, "call it with parentheses: print(...)", "missing parentheses in call to 'print'");
    return fail_tok(p, bad, "perhaps you forgot a comma? Put each statement on a line of its own",
                    "invalid syntax: expected the end of the statement, found %s", taas_tok_describe(bad->kind));
}

int taas_parse_tokens(const char *src, const taas_tokens *toks, taas_program *out, taas_error *err) {
    parser p = {src ? src : "", toks->v, toks->n, 0, 0, err};
    out->stmts = NULL;
    out->n = 0;
    if (toks->n == 0 || toks->v[toks->n - 1].kind != TAAS_T_EOF)
        return fail(&p, (taas_srcpos){0, 0}, 1, NULL, "internal error: the token list does not end the cell");
    size_t cap = 0;
    while (kind(&p) != TAAS_T_EOF) {
        if (kind(&p) == TAAS_T_NEWLINE) {
            p.i++;
            continue;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 8;
            taas_stmt *v = realloc(out->stmts, cap * sizeof *v);
            if (!v) {
                oom(&p);
                goto bad;
            }
            out->stmts = v;
        }
        taas_stmt *s = &out->stmts[out->n++];
        if (parse_stmt(&p, s)) goto bad;
    }
    return 0;
bad:
    taas_program_free(out);
    return -1;
}

int taas_parse(const char *src, taas_program *out, taas_error *err) {
    taas_tokens toks = TAAS_TOKENS_INIT;
    out->stmts = NULL;
    out->n = 0;
    int rc = taas_lex(src, &toks, err);
    if (rc == 0) rc = taas_parse_tokens(src, &toks, out, err);
    taas_tokens_free(&toks);
    return rc;
}
