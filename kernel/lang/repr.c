/* repr() and str() as Python and PyTorch print them. Objects read their form from the
 * table: "Name(params)" by the parameter flags, or the row's own repr hook. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "rows.h"
#include "utf8.h"
#include "result.h"
#include "value.h"

/* One repr at a time per thread; row hooks call back into taas_repr_to and
 * taas_value_repr, so the bounds live here rather than in every signature.
 *   depth: containers and objects open now (past TAAS_VALUE_MAX_DEPTH: [...]);
 *   cut:   the outermost repr left something out: every repr inside it stops at once,
 *          even into a buffer of its own, so v = [v, v] forty times costs 1 MiB, not 2^40. */
static _Thread_local struct {
    int depth;
    int cut;
} rs;

/* Nothing more goes into out: the cap of one repr's text (see TAAS_REPR_MAX_BYTES). */
static int full(const taas_buf *out) {
    if (rs.cut || out->len < TAAS_REPR_MAX_BYTES) return rs.cut;
    rs.cut = 1;
    return 1;
}

/* Decodes one valid UTF-8 sequence (values are always valid UTF-8). */
static unsigned decode(const unsigned char *s, size_t len) {
    if (len == 1) return s[0];
    unsigned cp = s[0] & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < len; i++) cp = (cp << 6) | (s[i] & 0x3F);
    return cp;
}

/* Python escapes what str.isprintable() rejects: controls, separators other than the
 * ASCII space, format characters, private use. This is that set for the code points
 * likely in a cell, without a Unicode database. */
static int printable(unsigned cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return 0;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F))
        return 0;
    if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF) return 0;
    if ((cp >= 0xFFF9 && cp <= 0xFFFB) || (cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000)
        return 0;
    return 1;
}

static void repr_string(const char *s, size_t len, taas_buf *out) {
    int has_single = memchr(s, '\'', len) != NULL, has_double = memchr(s, '"', len) != NULL;
    char q = (has_single && !has_double) ? '"' : '\'';
    taas_buf_putc(out, q);
    size_t i = 0;
    while (i < len) {
        if (full(out)) return;
        size_t l = taas_utf8_seqlen(s + i);
        if (i + l > len) l = len - i;
        unsigned cp = decode((const unsigned char *)s + i, l);
        if (cp == '\\' || cp == (unsigned char)q) {
            taas_buf_putc(out, '\\');
            taas_buf_putc(out, (char)cp);
        } else if (cp == '\n') {
            taas_buf_puts(out, "\\n");
        } else if (cp == '\r') {
            taas_buf_puts(out, "\\r");
        } else if (cp == '\t') {
            taas_buf_puts(out, "\\t");
        } else if (printable(cp)) {
            taas_buf_add(out, s + i, l);
        } else if (cp <= 0xFF) {
            taas_buf_printf(out, "\\x%02x", cp);
        } else if (cp <= 0xFFFF) {
            taas_buf_printf(out, "\\u%04x", cp);
        } else {
            taas_buf_printf(out, "\\U%08x", cp);
        }
        i += l;
    }
    taas_buf_putc(out, q);
}

static void repr_object(const taas_value *v, taas_buf *out) {
    const taas_row *r = taas_row_of(v->u.obj.def);
    if (r && r->repr) {
        r->repr(v, out);
        return;
    }
    taas_buf_puts(out, v->u.obj.def->name);
    taas_buf_putc(out, '(');
    taas_repr_params(v, out);
    taas_buf_putc(out, ')');
}

void taas_repr_params(const taas_value *v, taas_buf *out) {
    const taas_builtin *b = v->u.obj.def;
    int first = 1;
    for (size_t i = 0; i < v->u.obj.nargs && b->params[i].name; i++) {
        const taas_param *p = &b->params[i];
        const taas_value *a = v->u.obj.args[i];
        if (p->flags & TAAS_PF_HIDE) continue;
        if (p->flags & TAAS_PF_SHOW_SET) {
            taas_value *d = taas_param_default(p);
            int same = d && taas_value_equal(a, d);
            taas_unref(d);
            if (same) continue;
        }
        if (!first) taas_buf_puts(out, ", ");
        first = 0;
        if (!(p->flags & TAAS_PF_POS)) taas_buf_printf(out, "%s=", p->name);
        if (p->flags & TAAS_PF_BARE)
            taas_str_to(a, out);
        else
            taas_repr_to(a, out);
    }
}

static void repr_value(const taas_value *v, taas_buf *out) {
    char num[64];
    if (!v) {
        taas_buf_puts(out, "None");
        return;
    }
    switch (v->type) {
    case TAAS_V_NONE: taas_buf_puts(out, "None"); break;
    case TAAS_V_BOOL: taas_buf_puts(out, v->u.b ? "True" : "False"); break;
    case TAAS_V_INT: taas_buf_printf(out, "%lld", (long long)v->u.i); break;
    case TAAS_V_FLOAT:
        taas_float_repr(v->u.f, num, sizeof num);
        taas_buf_puts(out, num);
        break;
    case TAAS_V_STR: repr_string(v->u.str.s, v->u.str.len, out); break;
    case TAAS_V_TUPLE:
    case TAAS_V_LIST: {
        int tuple = v->type == TAAS_V_TUPLE;
        taas_buf_putc(out, tuple ? '(' : '[');
        if (rs.depth > TAAS_VALUE_MAX_DEPTH) {  /* as Python shows a list inside itself */
            taas_buf_puts(out, tuple ? "...)" : "...]");
            break;
        }
        for (size_t i = 0; i < v->u.seq.n; i++) {
            if (full(out)) return;
            if (i) taas_buf_puts(out, ", ");
            taas_repr_to(v->u.seq.items[i], out);
        }
        if (tuple && v->u.seq.n == 1) taas_buf_putc(out, ',');
        taas_buf_putc(out, tuple ? ')' : ']');
        break;
    }
    case TAAS_V_OBJECT:
        if (rs.depth > TAAS_VALUE_MAX_DEPTH)
            taas_buf_printf(out, "%s(...)", v->u.obj.def->name);
        else
            repr_object(v, out);
        break;
    case TAAS_V_BUILTIN:
        if (v->u.fn->kind == TAAS_K_ACTION)
            taas_buf_printf(out, "<built-in function %s>", v->u.fn->name);
        else
            taas_buf_printf(out, "<class '%s.%s'>", v->u.fn->module, v->u.fn->name);
        break;
    case TAAS_V_RESULT: taas_result_repr(v, out); break;
    }
}

/* The one way into a repr or str: bounds its depth and its text (a cell's result, print,
 * display and every row hook come through here). The outermost call ends a text it cut
 * with a note; one that finds its buffer full already (print's next value) adds nothing. */
static void text_to(const taas_value *v, taas_buf *out, int str) {
    int outer = rs.depth == 0;
    if (outer) {
        if (out->len >= TAAS_REPR_MAX_BYTES) return;
        rs.cut = 0;
    }
    if (!full(out)) {
        rs.depth++;
        if (str && v && v->type == TAAS_V_STR) {
            size_t n = v->u.str.len, room = TAAS_REPR_MAX_BYTES - out->len;
            if (n > room) {  /* cut at a code point, so the text stays valid UTF-8 */
                n = room;
                while (n > 0 && ((unsigned char)v->u.str.s[n] & 0xC0) == 0x80) n--;
                rs.cut = 1;
            }
            taas_buf_add(out, v->u.str.s, n);
        } else {
            repr_value(v, out);
        }
        rs.depth--;
    }
    if (outer && rs.cut) {
        taas_buf_printf(out, "... (%s cut at %zu MiB; the value is bigger)",
                        str && v && v->type == TAAS_V_STR ? "str" : "repr", TAAS_REPR_MAX_BYTES >> 20);
        rs.cut = 0;
    }
}

void taas_repr_to(const taas_value *v, taas_buf *out) {
    text_to(v, out, 0);
}

void taas_str_to(const taas_value *v, taas_buf *out) {
    text_to(v, out, 1);
}

char *taas_value_repr(const taas_value *v) {
    taas_buf b = TAAS_BUF_INIT;
    taas_repr_to(v, &b);
    return taas_buf_take(&b);
}

char *taas_value_str(const taas_value *v) {
    taas_buf b = TAAS_BUF_INIT;
    taas_str_to(v, &b);
    return taas_buf_take(&b);
}
