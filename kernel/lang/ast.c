#include "ast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

taas_expr *taas_expr_new(taas_ekind kind) {
    taas_expr *e = calloc(1, sizeof *e);
    if (e) {
        e->kind = kind;
        e->depth = 1;
    }
    return e;
}

void taas_expr_free(taas_expr *e) {
    if (!e) return;
    switch (e->kind) {
    case TAAS_E_STR:
    case TAAS_E_NAME:
        free(e->u.str.s);
        break;
    case TAAS_E_TUPLE:
    case TAAS_E_LIST:
        for (size_t k = 0; k < e->u.seq.n; k++) taas_expr_free(e->u.seq.items[k]);
        free(e->u.seq.items);
        break;
    case TAAS_E_CALL:
        taas_expr_free(e->u.call.callee);
        for (size_t k = 0; k < e->u.call.nargs; k++) {
            free(e->u.call.args[k].keyword);
            taas_expr_free(e->u.call.args[k].value);
        }
        free(e->u.call.args);
        break;
    case TAAS_E_BINOP:
        taas_expr_free(e->u.bin.lhs);
        taas_expr_free(e->u.bin.rhs);
        break;
    case TAAS_E_UNARY:
        taas_expr_free(e->u.un.operand);
        break;
    case TAAS_E_ATTR:
        taas_expr_free(e->u.attr.obj);
        free(e->u.attr.name);
        break;
    case TAAS_E_INDEX:
        taas_expr_free(e->u.index.obj);
        taas_expr_free(e->u.index.index);
        break;
    default:
        break;
    }
    free(e);
}

void taas_program_free(taas_program *p) {
    if (!p) return;
    for (size_t k = 0; k < p->n; k++) {
        free(p->stmts[k].target);
        taas_expr_free(p->stmts[k].place);
        taas_expr_free(p->stmts[k].value);
    }
    free(p->stmts);
    p->stmts = NULL;
    p->n = 0;
}

int taas_span_width(const char *src, taas_srcpos a, taas_srcpos b) {
    if (b.line == a.line) return b.col > a.col ? b.col - a.col : 1;
    const char *s = src;
    for (int l = 1; s && l < a.line; l++) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s) return 1;
    int w = (int)taas_utf8_count(s, strcspn(s, "\r\n")) - a.col + 1;
    return w > 0 ? w : 1;
}

const char *taas_op_text(taas_op op) {
    switch (op) {
    case TAAS_OP_ADD: return "+";
    case TAAS_OP_SUB: return "-";
    case TAAS_OP_MUL: return "*";
    case TAAS_OP_DIV: return "/";
    case TAAS_OP_FLOORDIV: return "//";
    case TAAS_OP_MOD: return "%";
    case TAAS_OP_POW: return "**";
    case TAAS_OP_NEG: return "-";
    case TAAS_OP_POS: return "+";
    }
    return "?";
}

/* Shortest %g that reads back to the same double, so dumps are stable and readable. */
static void dump_float(double f, taas_buf *out) {
    char s[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, f);
        if (strtod(s, NULL) == f) break;
    }
    taas_buf_puts(out, s);
    if (!strpbrk(s, ".eni")) taas_buf_puts(out, ".0");
}

static void dump_str(const char *s, size_t n, taas_buf *out) {
    taas_buf_putc(out, '"');
    for (size_t k = 0; k < n; k++) {
        char c = s[k];
        if (c == '"' || c == '\\') {
            taas_buf_putc(out, '\\');
            taas_buf_putc(out, c);
        } else if (c == '\n') {
            taas_buf_puts(out, "\\n");
        } else if (c == '\t') {
            taas_buf_puts(out, "\\t");
        } else {
            taas_buf_putc(out, c);
        }
    }
    taas_buf_putc(out, '"');
}

void taas_expr_dump(const taas_expr *e, taas_buf *out) {
    switch (e->kind) {
    case TAAS_E_INT: taas_buf_printf(out, "%lld", (long long)e->u.i); break;
    case TAAS_E_FLOAT: dump_float(e->u.f, out); break;
    case TAAS_E_STR: dump_str(e->u.str.s, e->u.str.len, out); break;
    case TAAS_E_TRUE: taas_buf_puts(out, "True"); break;
    case TAAS_E_FALSE: taas_buf_puts(out, "False"); break;
    case TAAS_E_NONE: taas_buf_puts(out, "None"); break;
    case TAAS_E_NAME: taas_buf_puts(out, e->u.str.s); break;
    case TAAS_E_TUPLE:
    case TAAS_E_LIST:
        taas_buf_puts(out, e->kind == TAAS_E_TUPLE ? "(tuple" : "(list");
        for (size_t k = 0; k < e->u.seq.n; k++) {
            taas_buf_putc(out, ' ');
            taas_expr_dump(e->u.seq.items[k], out);
        }
        taas_buf_putc(out, ')');
        break;
    case TAAS_E_CALL:
        taas_buf_puts(out, "(call ");
        taas_expr_dump(e->u.call.callee, out);
        for (size_t k = 0; k < e->u.call.nargs; k++) {
            const taas_callarg *a = &e->u.call.args[k];
            taas_buf_putc(out, ' ');
            if (a->keyword) taas_buf_printf(out, "(= %s ", a->keyword);
            taas_expr_dump(a->value, out);
            if (a->keyword) taas_buf_putc(out, ')');
        }
        taas_buf_putc(out, ')');
        break;
    case TAAS_E_BINOP:
        taas_buf_printf(out, "(%s ", taas_op_text(e->u.bin.op));
        taas_expr_dump(e->u.bin.lhs, out);
        taas_buf_putc(out, ' ');
        taas_expr_dump(e->u.bin.rhs, out);
        taas_buf_putc(out, ')');
        break;
    case TAAS_E_UNARY:
        taas_buf_puts(out, e->u.un.op == TAAS_OP_NEG ? "(neg " : "(pos ");
        taas_expr_dump(e->u.un.operand, out);
        taas_buf_putc(out, ')');
        break;
    case TAAS_E_ATTR:
        taas_buf_puts(out, "(attr ");
        taas_expr_dump(e->u.attr.obj, out);
        taas_buf_printf(out, " %s)", e->u.attr.name);
        break;
    case TAAS_E_INDEX:
        taas_buf_puts(out, "(index ");
        taas_expr_dump(e->u.index.obj, out);
        taas_buf_putc(out, ' ');
        taas_expr_dump(e->u.index.index, out);
        taas_buf_putc(out, ')');
        break;
    }
}

char *taas_program_dump(const taas_program *p) {
    taas_buf b = TAAS_BUF_INIT;
    for (size_t k = 0; k < p->n; k++) {
        const taas_stmt *s = &p->stmts[k];
        if (s->kind == TAAS_S_ASSIGN) taas_buf_printf(&b, "(= %s ", s->target);
        if (s->kind == TAAS_S_STORE) {
            taas_buf_puts(&b, "(= ");
            taas_expr_dump(s->place, &b);
            taas_buf_putc(&b, ' ');
        }
        taas_expr_dump(s->value, &b);
        if (s->kind != TAAS_S_EXPR) taas_buf_putc(&b, ')');
        taas_buf_putc(&b, '\n');
    }
    return taas_buf_take(&b);
}

static int walk(const taas_expr *e, int top, taas_expr_visit f, void *ctx) {
    int rc = f(e, top, ctx);
    if (rc) return rc;
    switch (e->kind) {
    case TAAS_E_TUPLE:
    case TAAS_E_LIST:
        for (size_t k = 0; k < e->u.seq.n; k++)
            if ((rc = walk(e->u.seq.items[k], 0, f, ctx))) return rc;
        break;
    case TAAS_E_CALL:
        if ((rc = walk(e->u.call.callee, 0, f, ctx))) return rc;
        for (size_t k = 0; k < e->u.call.nargs; k++)
            if ((rc = walk(e->u.call.args[k].value, 0, f, ctx))) return rc;
        break;
    case TAAS_E_BINOP:
        if ((rc = walk(e->u.bin.lhs, 0, f, ctx))) return rc;
        return walk(e->u.bin.rhs, 0, f, ctx);
    case TAAS_E_UNARY:
        return walk(e->u.un.operand, 0, f, ctx);
    case TAAS_E_ATTR:
        return walk(e->u.attr.obj, 0, f, ctx);
    case TAAS_E_INDEX:
        if ((rc = walk(e->u.index.obj, 0, f, ctx))) return rc;
        return walk(e->u.index.index, 0, f, ctx);
    default:
        break;
    }
    return 0;
}

int taas_expr_walk(const taas_expr *e, taas_expr_visit f, void *ctx) {
    return walk(e, 1, f, ctx);
}
