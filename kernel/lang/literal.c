/* Defaults are written in the table as cell source ("(0.9, 0.999)", "'zeros'", "None").
 * This reads that small literal subset without the parser: numbers, strings,
 * True/False/None, and tuples/lists of those. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "rows.h"

typedef struct {
    const char *s;
} reader;

static void skip_ws(reader *r) {
    while (*r->s == ' ') r->s++;
}

static taas_value *read_value(reader *r, int depth);

static taas_value *read_number(reader *r) {
    const char *start = r->s;
    const char *p = start;
    if (*p == '-') p++;
    if (*p < '0' || *p > '9') return NULL;
    int is_float = 0;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
        is_float = 1;
        p++;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        is_float = 1;
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    char *end;
    errno = 0;
    taas_value *v;
    if (is_float) {
        v = taas_float(strtod(start, &end));
    } else {
        long long i = strtoll(start, &end, 10);
        if (errno) return NULL;
        v = taas_int(i);
    }
    r->s = p;
    return v;
}

static taas_value *read_string(reader *r) {
    char q = *r->s++;
    taas_buf b = TAAS_BUF_INIT;
    while (*r->s && *r->s != q) {
        char c = *r->s++;
        if (c == '\\') {
            char e = *r->s++;
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == '\\' || e == '\'' || e == '"') c = e;
            else {
                taas_buf_free(&b);
                return NULL;
            }
        }
        taas_buf_putc(&b, c);
    }
    if (*r->s != q || b.failed) {
        taas_buf_free(&b);
        return NULL;
    }
    r->s++;
    taas_value *v = taas_str(b.data ? b.data : "", b.len);
    taas_buf_free(&b);
    return v;
}

static int word(reader *r, const char *w) {
    size_t n = strlen(w);
    if (strncmp(r->s, w, n) != 0) return 0;
    char c = r->s[n];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
        return 0;
    r->s += n;
    return 1;
}

/* After '(' or '['. A parenthesised single value without a comma is that value. */
static taas_value *read_seq(reader *r, char close, int depth) {
    taas_value *items[16];
    size_t n = 0;
    int comma = 0;
    skip_ws(r);
    while (*r->s != close) {
        if (n == sizeof items / sizeof *items) goto fail;
        taas_value *v = read_value(r, depth + 1);
        if (!v) goto fail;
        items[n++] = v;
        skip_ws(r);
        if (*r->s == ',') {
            comma = 1;
            r->s++;
            skip_ws(r);
        } else if (*r->s != close) {
            goto fail;
        }
    }
    r->s++;
    if (close == ')' && n == 1 && !comma) return items[0];
    taas_value *seq = close == ')' ? taas_tuple_new(n) : taas_list_new(n);
    if (!seq) goto fail;
    for (size_t i = 0; i < n; i++) seq->u.seq.items[i] = items[i];
    return seq;
fail:
    for (size_t i = 0; i < n; i++) taas_unref(items[i]);
    return NULL;
}

static taas_value *read_value(reader *r, int depth) {
    if (depth > 8) return NULL;
    skip_ws(r);
    char c = *r->s;
    if (c == '\'' || c == '"') return read_string(r);
    if (c == '(') {
        r->s++;
        return read_seq(r, ')', depth);
    }
    if (c == '[') {
        r->s++;
        return read_seq(r, ']', depth);
    }
    if (word(r, "None")) return taas_none();
    if (word(r, "True")) return taas_bool(1);
    if (word(r, "False")) return taas_bool(0);
    return read_number(r);
}

taas_value *taas_literal_parse(const char *src) {
    if (!src) return NULL;
    reader r = {src};
    taas_value *v = read_value(&r, 0);
    if (!v) return NULL;
    skip_ws(&r);
    if (*r.s) {
        taas_unref(v);
        return NULL;
    }
    return v;
}

taas_value *taas_param_normalize(const taas_param *p, taas_value *v) {
    if (!v || !(p->flags & TAAS_PF_PAIR)) return v;
    if (v->type == TAAS_V_LIST) { /* torch's _pair makes any sequence a tuple */
        taas_value *t = taas_tuple_new(v->u.seq.n);
        for (size_t i = 0; t && i < v->u.seq.n; i++) t->u.seq.items[i] = taas_ref(v->u.seq.items[i]);
        taas_unref(v);
        return t;
    }
    if (v->type != TAAS_V_INT) return v;
    taas_value *t = taas_tuple_new(2);
    if (t && (!(t->u.seq.items[0] = taas_int(v->u.i)) || !(t->u.seq.items[1] = taas_int(v->u.i)))) {
        taas_unref(t);
        t = NULL;
    }
    taas_unref(v);
    return t;
}

taas_value *taas_param_default(const taas_param *p) {
    if (!p->dflt) return NULL;
    return taas_param_normalize(p, taas_literal_parse(p->dflt));
}
