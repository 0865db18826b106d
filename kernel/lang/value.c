/* Values of the cell language: construction, reference counting, Python's truth and
 * equality, and Python's float repr. Text forms (repr, spec, mime) are in repr.c and
 * spec.c. */
#include "value.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtins.h"
#include "rows.h"
#include "utf8.h"

/* Out of memory in a value constructor leaves nothing sensible to do (as in taas_buf). */
static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) abort();
    return p;
}

static taas_value *alloc(taas_vtype t) {
    taas_value *v = xcalloc(1, sizeof *v);
    v->refs = 1;
    v->type = t;
    return v;
}

taas_value *taas_none(void) {
    return alloc(TAAS_V_NONE);
}

taas_value *taas_bool(int b) {
    taas_value *v = alloc(TAAS_V_BOOL);
    v->u.b = b ? 1 : 0;
    return v;
}

taas_value *taas_int(int64_t i) {
    taas_value *v = alloc(TAAS_V_INT);
    v->u.i = i;
    return v;
}

taas_value *taas_float(double f) {
    taas_value *v = alloc(TAAS_V_FLOAT);
    v->u.f = f;
    return v;
}

taas_value *taas_str(const char *s, size_t len) {
    taas_value *v = alloc(TAAS_V_STR);
    size_t n = 0;
    v->u.str.s = taas_utf8_sanitize(s ? s : "", s ? len : 0, &n);
    if (!v->u.str.s) abort();
    v->u.str.len = n;
    return v;
}

taas_value *taas_str0(const char *s) {
    return taas_str(s, s ? strlen(s) : 0);
}

static taas_value *seq_new(taas_vtype t, size_t n) {
    taas_value *v = alloc(t);
    v->u.seq.items = xcalloc(n, sizeof *v->u.seq.items);
    v->u.seq.n = n;
    return v;
}

taas_value *taas_tuple_new(size_t n) {
    return seq_new(TAAS_V_TUPLE, n);
}

taas_value *taas_list_new(size_t n) {
    return seq_new(TAAS_V_LIST, n);
}

taas_value *taas_builtin_value(const struct taas_builtin *fn) {
    taas_value *v = alloc(TAAS_V_BUILTIN);
    v->u.fn = fn;
    return v;
}

taas_value *taas_object_new(const struct taas_builtin *def, taas_value **args, size_t nargs) {
    taas_value *v = alloc(TAAS_V_OBJECT);
    v->u.obj.def = def;
    v->u.obj.args = xcalloc(nargs, sizeof *v->u.obj.args);
    if (nargs) memcpy(v->u.obj.args, args, nargs * sizeof *args);
    v->u.obj.nargs = nargs;
    return v;
}

taas_value *taas_result_new(const char *kind, json_t *data) {
    taas_value *v = alloc(TAAS_V_RESULT);
    v->u.res.kind = kind;
    v->u.res.data = data;
    return v;
}

taas_value *taas_ref(taas_value *v) {
    if (v) v->refs++;
    return v;
}

void taas_weights_drop(char *path, int owned) {
    if (path && owned) {
        unlink(path);
        char *slash = strrchr(path, '/');
        if (slash && slash != path) {
            *slash = '\0';
            rmdir(path);
        }
    }
    free(path);
}

void taas_unref(taas_value *v) {
    if (!v || --v->refs > 0) return;
    switch (v->type) {
    case TAAS_V_STR:
        free(v->u.str.s);
        break;
    case TAAS_V_TUPLE:
    case TAAS_V_LIST:
        for (size_t i = 0; i < v->u.seq.n; i++) taas_unref(v->u.seq.items[i]);
        free(v->u.seq.items);
        break;
    case TAAS_V_OBJECT:
        for (size_t i = 0; i < v->u.obj.nargs; i++) taas_unref(v->u.obj.args[i]);
        free(v->u.obj.args);
        taas_weights_drop(v->u.obj.weights, v->u.obj.weights_owned);
        break;
    case TAAS_V_RESULT:
        json_decref(v->u.res.data);
        break;
    default:
        break;
    }
    free(v);
}

int taas_value_is_number(const taas_value *v) {
    return v && (v->type == TAAS_V_INT || v->type == TAAS_V_FLOAT);
}

double taas_value_number(const taas_value *v) {
    if (!v) return 0;
    if (v->type == TAAS_V_INT) return (double)v->u.i;
    if (v->type == TAAS_V_FLOAT) return v->u.f;
    if (v->type == TAAS_V_BOOL) return v->u.b;
    return 0;
}

int taas_value_kind(const taas_value *v) {
    return v && v->type == TAAS_V_OBJECT ? (int)v->u.obj.def->kind : -1;
}

int taas_value_is(const taas_value *v, const char *builtin_name) {
    return v && v->type == TAAS_V_OBJECT && strcmp(v->u.obj.def->name, builtin_name) == 0;
}

int taas_value_truthy(const taas_value *v) {
    if (!v) return 0;
    switch (v->type) {
    case TAAS_V_NONE: return 0;
    case TAAS_V_BOOL: return v->u.b;
    case TAAS_V_INT: return v->u.i != 0;
    case TAAS_V_FLOAT: return v->u.f != 0.0;
    case TAAS_V_STR: return v->u.str.len != 0;
    case TAAS_V_TUPLE:
    case TAAS_V_LIST: return v->u.seq.n != 0;
    case TAAS_V_OBJECT: {
        /* as in Python, an object with a length is false when empty (Sequential()) */
        const taas_row *r = taas_row_of(v->u.obj.def);
        int64_t n;
        if (r && r->size && r->size(v, &n)) return n != 0;
        return 1;
    }
    case TAAS_V_BUILTIN:
    case TAAS_V_RESULT: return 1;
    }
    return 1;
}

static int is_numeric(const taas_value *v) {
    return v->type == TAAS_V_BOOL || v->type == TAAS_V_INT || v->type == TAAS_V_FLOAT;
}

int taas_value_equal(const taas_value *a, const taas_value *b) {
    if (a == b) return 1;
    if (!a || !b) return 0;
    if (is_numeric(a) && is_numeric(b)) {
        if (a->type != TAAS_V_FLOAT && b->type != TAAS_V_FLOAT)
            return (a->type == TAAS_V_INT ? a->u.i : a->u.b) ==
                   (b->type == TAAS_V_INT ? b->u.i : b->u.b);
        return taas_value_number(a) == taas_value_number(b);
    }
    if (a->type != b->type) return 0;
    switch (a->type) {
    case TAAS_V_NONE: return 1;
    case TAAS_V_STR:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case TAAS_V_TUPLE:
    case TAAS_V_LIST:
        if (a->u.seq.n != b->u.seq.n) return 0;
        for (size_t i = 0; i < a->u.seq.n; i++)
            if (!taas_value_equal(a->u.seq.items[i], b->u.seq.items[i])) return 0;
        return 1;
    case TAAS_V_OBJECT:
        if (a->u.obj.def != b->u.obj.def || a->u.obj.nargs != b->u.obj.nargs) return 0;
        for (size_t i = 0; i < a->u.obj.nargs; i++)
            if (!taas_value_equal(a->u.obj.args[i], b->u.obj.args[i])) return 0;
        return 1;
    case TAAS_V_BUILTIN: return a->u.fn == b->u.fn;
    case TAAS_V_RESULT: return a->u.res.kind == b->u.res.kind && json_equal(a->u.res.data, b->u.res.data);
    default: return 0;
    }
}

taas_value *taas_object_arg(const taas_value *obj, const char *param) {
    if (!obj || obj->type != TAAS_V_OBJECT || !param) return NULL;
    int i = taas_param_index(obj->u.obj.def, param);
    if (i < 0 || (size_t)i >= obj->u.obj.nargs) return NULL;
    return obj->u.obj.args[i];
}

const char *taas_value_type_name(const taas_value *v) {
    if (!v) return "NoneType";
    switch (v->type) {
    case TAAS_V_NONE: return "NoneType";
    case TAAS_V_BOOL: return "bool";
    case TAAS_V_INT: return "int";
    case TAAS_V_FLOAT: return "float";
    case TAAS_V_STR: return "str";
    case TAAS_V_TUPLE: return "tuple";
    case TAAS_V_LIST: return "list";
    case TAAS_V_OBJECT: return v->u.obj.def->name;
    case TAAS_V_BUILTIN: return "builtin";
    case TAAS_V_RESULT: return v->u.res.kind;
    }
    return "object";
}

/* ---- Python's float repr ---------------------------------------------------------- */

/* Shortest decimal digits d1d2...dn and decimal point position decpt such that
 * 0.d1d2...dn * 10^decpt reads back as x (x > 0, finite). Among the shortest strings
 * the correctly rounded one is preferred, as Python's dtoa does; its neighbours one
 * unit away are tried too, for the uneven gaps at powers of two. */
static void shortest_digits(double x, char *digits, size_t cap, int *decpt) {
    char buf[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        char *e = strchr(buf, 'e');
        int exp10 = atoi(e + 1);
        uint64_t m = 0;
        for (const char *c = buf; c < e; c++)
            if (*c >= '0' && *c <= '9') m = m * 10 + (uint64_t)(*c - '0');
        uint64_t lo = 1;
        for (int k = 1; k < p; k++) lo *= 10;
        uint64_t cand[3] = {m, m + 1, m - 1};
        for (int c = 0; c < 3; c++) {
            uint64_t mm = cand[c];
            if (mm < lo || mm >= lo * 10) continue; /* a carry changes the length */
            char t[64];
            snprintf(t, sizeof t, "%" PRIu64 "e%d", mm, exp10 - (p - 1));
            if (strtod(t, NULL) != x) continue;
            snprintf(t, sizeof t, "%" PRIu64, mm);
            size_t n = strlen(t);
            while (n > 1 && t[n - 1] == '0') t[--n] = '\0';
            snprintf(digits, cap, "%s", t);
            *decpt = exp10 + 1;
            return;
        }
    }
    /* 17 significant digits always round-trip; not reached */
    snprintf(buf, sizeof buf, "%.16e", x);
    digits[0] = buf[0];
    snprintf(digits + 1, cap - 1, "%.16s", buf + 2);
    *decpt = atoi(strchr(buf, 'e') + 1) + 1;
}

void taas_float_repr(double f, char *out, size_t n) {
    if (n == 0) return;
    if (isnan(f)) { snprintf(out, n, "nan"); return; }
    if (isinf(f)) { snprintf(out, n, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { snprintf(out, n, signbit(f) ? "-0.0" : "0.0"); return; }
    char digits[32];
    int decpt;
    shortest_digits(fabs(f), digits, sizeof digits, &decpt);
    int nd = (int)strlen(digits);
    char buf[64];
    size_t k = 0;
    if (f < 0) buf[k++] = '-';
    if (decpt <= -4 || decpt > 16) {
        /* Python's 'r' format: exponent when the point is far away; e-05, e+16 */
        buf[k++] = digits[0];
        if (nd > 1) {
            buf[k++] = '.';
            memcpy(buf + k, digits + 1, (size_t)nd - 1);
            k += (size_t)nd - 1;
        }
        int e = decpt - 1;
        k += (size_t)snprintf(buf + k, sizeof buf - k, "e%c%02d", e < 0 ? '-' : '+', abs(e));
    } else if (decpt <= 0) {
        buf[k++] = '0';
        buf[k++] = '.';
        for (int i = 0; i < -decpt; i++) buf[k++] = '0';
        memcpy(buf + k, digits, (size_t)nd);
        k += (size_t)nd;
    } else if (decpt >= nd) {
        memcpy(buf + k, digits, (size_t)nd);
        k += (size_t)nd;
        for (int i = 0; i < decpt - nd; i++) buf[k++] = '0';
        buf[k++] = '.';
        buf[k++] = '0';
    } else {
        memcpy(buf + k, digits, (size_t)decpt);
        k += (size_t)decpt;
        buf[k++] = '.';
        memcpy(buf + k, digits + decpt, (size_t)(nd - decpt));
        k += (size_t)(nd - decpt);
    }
    buf[k] = '\0';
    snprintf(out, n, "%s", buf);
}
