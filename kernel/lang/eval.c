#include "eval.h"
#include "errnames.h"
#include "fit.h"
#include "modelview.h"
#include "modules.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Sequences made by repetition stay this small: a typo such as [0] * 10**12 must not
 * take the kernel's memory. */
#define MAX_REPEAT_ITEMS (1u << 20)
#define MAX_STR_BYTES ((size_t)1 << 26)

static void place(const taas_eval_env *env, taas_error *err, const taas_expr *e) {
    err->pos = e->pos;
    err->width = taas_span_width(env->src, e->pos, e->end);
}

/* ---- arithmetic -------------------------------------------------------------------- */

static int is_int(const taas_value *v) { return v->type == TAAS_V_INT || v->type == TAAS_V_BOOL; }
static int is_num(const taas_value *v) { return is_int(v) || v->type == TAAS_V_FLOAT; }
static int64_t int_of(const taas_value *v) { return v->type == TAAS_V_BOOL ? v->u.b : v->u.i; }
static double float_of(const taas_value *v) { return v->type == TAAS_V_FLOAT ? v->u.f : (double)int_of(v); }
static int is_seq(const taas_value *v) {
    return v->type == TAAS_V_STR || v->type == TAAS_V_TUPLE || v->type == TAAS_V_LIST;
}

static int div_zero(taas_error *err, const char *what) {
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "division by zero");
    taas_error_hint(err, "the right operand of %s is 0", what);
    return -1;
}

static int overflow(taas_error *err, taas_op op, int64_t a, int64_t b) {
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "integer overflow: %lld %s %lld does not fit in 64 bits",
                   (long long)a, taas_op_text(op), (long long)b);
    taas_error_hint(err, "taas integers are 64-bit; use a float for larger numbers, e.g. 1.0 * x");
    return -1;
}

static int int_pow(int64_t a, int64_t b, int64_t *out) {
    int64_t r = 1;
    while (b > 0) {
        if ((b & 1) && __builtin_mul_overflow(r, a, &r)) return -1;
        b >>= 1;
        if (b && __builtin_mul_overflow(a, a, &a)) return -1;
    }
    *out = r;
    return 0;
}

static int int_binop(taas_op op, int64_t a, int64_t b, taas_value **out, taas_error *err) {
    int64_t r;
    switch (op) {
    case TAAS_OP_ADD:
        if (__builtin_add_overflow(a, b, &r)) return overflow(err, op, a, b);
        break;
    case TAAS_OP_SUB:
        if (__builtin_sub_overflow(a, b, &r)) return overflow(err, op, a, b);
        break;
    case TAAS_OP_MUL:
        if (__builtin_mul_overflow(a, b, &r)) return overflow(err, op, a, b);
        break;
    case TAAS_OP_DIV:
        if (b == 0) return div_zero(err, "/");
        *out = taas_float((double)a / (double)b);
        return 0;
    case TAAS_OP_FLOORDIV:
        if (b == 0) return div_zero(err, "//");
        if (a == INT64_MIN && b == -1) return overflow(err, op, a, b);
        r = a / b;
        if (a % b != 0 && ((a < 0) != (b < 0))) r--;
        break;
    case TAAS_OP_MOD:
        if (b == 0) return div_zero(err, "%");
        if (b == -1) {
            r = 0;
            break;
        }
        r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;  /* the result takes the divisor's sign */
        break;
    case TAAS_OP_POW:
        if (b < 0) {
            if (a == 0) {
                taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "division by zero: 0 cannot be raised to a negative power");
                taas_error_hint(err, "the base of ** is 0 and the exponent is negative");
                return -1;
            }
            *out = taas_float(pow((double)a, (double)b));
            return 0;
        }
        if (int_pow(a, b, &r)) return overflow(err, op, a, b);
        break;
    default:
        return -1;
    }
    *out = taas_int(r);
    return 0;
}

static int float_binop(taas_op op, double a, double b, taas_value **out, taas_error *err) {
    double r;
    switch (op) {
    case TAAS_OP_ADD: r = a + b; break;
    case TAAS_OP_SUB: r = a - b; break;
    case TAAS_OP_MUL: r = a * b; break;
    case TAAS_OP_DIV:
        if (b == 0) return div_zero(err, "/");
        r = a / b;
        break;
    case TAAS_OP_FLOORDIV:
    case TAAS_OP_MOD: {
        if (b == 0) return div_zero(err, op == TAAS_OP_MOD ? "%" : "//");
        /* CPython's float_divmod, so that -7.5 // 2 and -7.5 % 2 agree with Python */
        double mod = fmod(a, b), div = (a - mod) / b, fdiv;
        if (mod) {
            if ((b < 0) != (mod < 0)) {
                mod += b;
                div -= 1.0;
            }
        } else {
            mod = copysign(0.0, b);
        }
        if (div) {
            fdiv = floor(div);
            if (div - fdiv > 0.5) fdiv += 1.0;
        } else {
            fdiv = copysign(0.0, a / b);
        }
        r = op == TAAS_OP_MOD ? mod : fdiv;
        break;
    }
    case TAAS_OP_POW:
        if (b == 0 || a == 1) {
            r = 1.0;
            break;
        }
        if (a == 0 && b < 0) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "division by zero: 0.0 cannot be raised to a negative power");
            taas_error_hint(err, "the base of ** is 0 and the exponent is negative");
            return -1;
        }
        if (a < 0 && isfinite(b) && b != floor(b)) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a negative number cannot be raised to a fractional power");
            taas_error_hint(err, "the result would be a complex number, which taas does not have");
            return -1;
        }
        r = pow(a, b);
        if (isinf(r) && isfinite(a) && isfinite(b)) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "float overflow: the result of ** is too large");
            taas_error_hint(err, "the largest float is about 1.8e308");
            return -1;
        }
        break;
    default:
        return -1;
    }
    *out = taas_float(r);
    return 0;
}

static size_t seq_len(const taas_value *v) { return v->type == TAAS_V_STR ? v->u.str.len : v->u.seq.n; }

/* a + b for two sequences of one type, or a repeated n times (b == NULL); NULL with a
 * TaasMemoryError when the session has no room for it. */
static taas_value *seq_build(const taas_value *a, const taas_value *b, int64_t n, taas_error *err) {
    size_t la = seq_len(a), lb = b ? seq_len(b) : 0, total = b ? la + lb : la * (size_t)n;
    char what[32];
    snprintf(what, sizeof what, "the %s", taas_value_type_name(a));
    if (taas_value_reserve(a->type == TAAS_V_STR ? total + 1 : total * sizeof(taas_value *), what, err)) return NULL;
    if (a->type == TAAS_V_STR) {
        char *s = malloc(total + 1);
        if (!s) {
            taas_value_oom(err, TAAS_NOPOS, "making a str");
            return NULL;
        }
        if (b) {
            memcpy(s, a->u.str.s, la);
            memcpy(s + la, b->u.str.s, lb);
        } else {
            for (int64_t k = 0; k < n; k++) memcpy(s + (size_t)k * la, a->u.str.s, la);
        }
        s[total] = '\0';
        taas_value *v = taas_str(s, total);
        free(s);
        if (!v) taas_value_oom(err, TAAS_NOPOS, "making a str");
        return v;
    }
    taas_value *v = a->type == TAAS_V_TUPLE ? taas_tuple_new(total) : taas_list_new(total);
    if (!v) {
        taas_value_oom(err, TAAS_NOPOS, a->type == TAAS_V_TUPLE ? "making a tuple" : "making a list");
        return NULL;
    }
    for (size_t k = 0; k < total; k++) {
        taas_value *item = b && k >= la ? b->u.seq.items[k - la] : a->u.seq.items[la ? k % la : 0];
        v->u.seq.items[k] = taas_ref(item);
    }
    return v;
}

static int unsupported(taas_op op, const taas_value *a, const taas_value *b, taas_error *err) {
    taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "unsupported operand types for %s: '%s' and '%s'",
                   taas_op_text(op), taas_value_type_name(a), taas_value_type_name(b));
    if (op == TAAS_OP_ADD && (a->type == TAAS_V_STR || b->type == TAAS_V_STR))
        taas_error_hint(err, "+ joins two strings; to show text and a number, pass both to print: print(\"n =\", n)");
    else if (op == TAAS_OP_ADD)
        taas_error_hint(err, "+ adds numbers and joins two strings, two tuples or two lists");
    else if (op == TAAS_OP_MUL)
        taas_error_hint(err, "* multiplies numbers and repeats a string, tuple or list an int number of times");
    else
        taas_error_hint(err, "%s works on numbers (int and float)", taas_op_text(op));
    return -1;
}

static int too_large(const taas_value *seq, taas_error *err) {
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the %s would be too large", taas_value_type_name(seq));
    taas_error_hint(err, "taas keeps strings under 64 MiB and tuples and lists under %u items", MAX_REPEAT_ITEMS);
    return -1;
}

int taas_eval_binop(taas_op op, const taas_value *a, const taas_value *b, taas_value **out, taas_error *err) {
    *out = NULL;
    if (is_int(a) && is_int(b)) return int_binop(op, int_of(a), int_of(b), out, err);
    if (is_num(a) && is_num(b)) return float_binop(op, float_of(a), float_of(b), out, err);
    if (op == TAAS_OP_ADD && is_seq(a) && a->type == b->type) {
        if (seq_len(a) + seq_len(b) > (a->type == TAAS_V_STR ? MAX_STR_BYTES : MAX_REPEAT_ITEMS)) return too_large(a, err);
        *out = seq_build(a, b, 0, err);
        return *out ? 0 : -1;
    }
    if (op == TAAS_OP_MUL && ((is_seq(a) && is_int(b)) || (is_int(a) && is_seq(b)))) {
        const taas_value *s = is_seq(a) ? a : b;
        int64_t n = int_of(is_seq(a) ? b : a);
        if (n < 0) n = 0;
        size_t limit = s->type == TAAS_V_STR ? MAX_STR_BYTES : MAX_REPEAT_ITEMS;
        if (seq_len(s) && (uint64_t)n > limit / seq_len(s)) return too_large(s, err);
        *out = seq_build(s, NULL, seq_len(s) ? n : 0, err);
        return *out ? 0 : -1;
    }
    return unsupported(op, a, b, err);
}

int taas_eval_unary(taas_op op, const taas_value *a, taas_value **out, taas_error *err) {
    *out = NULL;
    if (is_int(a)) {
        int64_t i = int_of(a);
        if (op == TAAS_OP_NEG && i == INT64_MIN) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "integer overflow: -(%lld) does not fit in 64 bits", (long long)i);
            taas_error_hint(err, "taas integers are 64-bit; use a float for larger numbers");
            return -1;
        }
        *out = taas_int(op == TAAS_OP_NEG ? -i : i);
        return 0;
    }
    if (a->type == TAAS_V_FLOAT) {
        *out = taas_float(op == TAAS_OP_NEG ? -a->u.f : a->u.f);
        return 0;
    }
    taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "bad operand type for unary %s: '%s'", taas_op_text(op),
                   taas_value_type_name(a));
    taas_error_hint(err, "unary %s works on numbers (int and float)", taas_op_text(op));
    return -1;
}

/* ---- names ------------------------------------------------------------------------- */

/* 1 when `name` is only a module prefix (nn, torch.nn, optim): some builtin is name.X. */
static const taas_builtin *module_example(const char *name) {
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    char buf[256];
    for (size_t i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "%s.%s", name, all[i]->name);
        if (taas_builtin_find(buf)) return all[i];
    }
    return NULL;
}

static int name_error(const taas_eval_env *env, const taas_expr *e, taas_error *err) {
    const char *name = e->u.str.s;
    taas_error_set(err, TAAS_ERR_NAME, e->pos, "name '%s' is not defined", name);
    err->width = taas_span_width(env->src, e->pos, e->end);
    static const char *const keywords[] = {"True", "False", "None", NULL};
    const char **extra = taas_scope_names(env->scope, keywords);
    char sug[256];
    const char *dot = strrchr(name, '.');
    const taas_builtin *b;
    if (taas_builtin_suggest(name, extra, sug, sizeof sug)) {
        taas_error_hint(err, "did you mean '%s'?", sug);
    } else if (!strncmp(name, "sys.", 4) || !strcmp(name, "sys")) {
        taas_error_hint(err, "sys.stdout and sys.stderr are the only names of sys in taas: print(x, file=sys.stderr)");
    } else if ((b = module_example(name))) {
        taas_error_hint(err, "'%s' is a module prefix, not a value: write %s.%s(...) or %s(...)", name, name,
                        b->name, b->name);
    } else if (dot && (b = taas_builtin_find(dot + 1))) {
        taas_error_hint(err, "did you mean '%s.%s'?", b->module, b->name);
    } else if (dot && taas_builtin_suggest(dot + 1, NULL, sug, sizeof sug) && (b = taas_builtin_find(sug))) {
        taas_error_hint(err, "did you mean '%s.%s'?", b->module, b->name);
    } else {
        taas_error_hint(err, "define it first (%s = ...) or check the spelling; help() lists the builtins",
                        dot ? "name" : name);
    }
    free(extra);
    return -1;
}

/* The first n segments of a dotted name whose first segment is a variable: the variable,
 * then an attribute per segment (net.layer1.conv1). 0 with a new reference in *out, and in
 * *derived (when not NULL) whether the last is a block's derived child (a copy). */
static int read_dotted(const taas_eval_env *env, const taas_expr *e, size_t n, taas_value **out, int *derived,
                       taas_error *err) {
    if (derived) *derived = 0;
    const char *name = e->u.str.s, *seg = name;
    size_t len = strcspn(name, ".");
    char part[256];
    snprintf(part, sizeof part, "%.*s", (int)len, name);
    taas_value *v = taas_scope_get(env->scope, part);
    if (!v) return name_error(env, e, err);
    taas_ref(v);
    for (size_t k = 1; k < n; k++) {
        seg += len + 1;
        len = strcspn(seg, ".");
        snprintf(part, sizeof part, "%.*s", (int)len, seg);
        taas_value *next;
        if (taas_value_attr(v, part, &next, derived, err)) {
            taas_unref(v);
            place(env, err, e);
            return -1;
        }
        taas_unref(v);
        v = next;
    }
    *out = v;
    return 0;
}

static size_t segments(const char *name) {
    size_t n = 1;
    for (const char *p = name; *p; p++) n += *p == '.';
    return n;
}

/* 1 when the dotted name starts with a variable (net.fc), so it reads attributes. */
static int starts_with_variable(const taas_eval_env *env, const char *name) {
    char first[256];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(name, "."), name);
    return strchr(name, '.') && taas_scope_get(env->scope, first);
}

static int resolve(const taas_eval_env *env, const taas_expr *e, taas_value **out, taas_error *err) {
    const char *name = e->u.str.s;
    taas_value *v = taas_scope_get(env->scope, name);
    if (v) {
        *out = taas_ref(v);
        return 0;
    }
    if (starts_with_variable(env, name)) return read_dotted(env, e, segments(name), out, NULL, err);
    if (!strcmp(name, "sys.stdout") || !strcmp(name, "sys.stderr")) {
        *out = taas_str0(name + 4);
        return 0;
    }
    const taas_builtin *b = taas_builtin_find(name);
    if (b) {
        *out = taas_builtin_value(b);
        return 0;
    }
    return name_error(env, e, err);
}

/* ---- calls and expressions --------------------------------------------------------- */

static int eval(const taas_eval_env *env, const taas_expr *e, int top, taas_value **out, double *wait,
                taas_error *err);

static int wait_misplaced(const taas_eval_env *env, const taas_expr *call, const taas_builtin *b, taas_error *err) {
    taas_error_set(err, TAAS_ERR_SYNTAX, call->pos,
                   "%s() waits, so it must be a whole statement or the whole right side of an assignment",
                   b->name);
    err->width = taas_span_width(env->src, call->pos, call->end);
    taas_error_hint(err, "call it on a line of its own, e.g. %s(...)", b->name);
    return -1;
}

/* Widens the caret of an error the builtin table placed at the call or an argument. */
static void place_call_error(const taas_eval_env *env, const taas_expr *call, taas_error *err) {
    if (!taas_error_is_set(err)) {
        taas_error_set(err, TAAS_ERR_INTERNAL, call->pos, "the call failed without saying why");
        taas_error_hint(err, "this is a bug in taas; please report it");
    }
    if (err->pos.line == 0 ||
        (err->pos.line == call->pos.line && err->pos.col == call->pos.col && err->width <= 1)) {
        place(env, err, call);
        return;
    }
    for (size_t k = 0; k < call->u.call.nargs; k++) {
        const taas_callarg *a = &call->u.call.args[k];
        if (err->pos.line == a->pos.line && err->pos.col == a->pos.col && err->width <= 1)
            err->width = taas_span_width(env->src, a->pos, a->value->end);
    }
}

/* e, any expression; when it is x.name, *derived (when not NULL) says whether it read a
 * block's derived child. */
static int eval_attr(const taas_eval_env *env, const taas_expr *e, taas_value **out, int *derived, taas_error *err) {
    if (derived) *derived = 0;
    if (e->kind == TAAS_E_NAME && starts_with_variable(env, e->u.str.s) && !taas_scope_get(env->scope, e->u.str.s))
        return read_dotted(env, e, segments(e->u.str.s), out, derived, err);
    if (e->kind != TAAS_E_ATTR) return eval(env, e, 0, out, NULL, err);
    taas_value *o;
    if (eval(env, e->u.attr.obj, 0, &o, NULL, err)) return -1;
    int rc = taas_value_attr(o, e->u.attr.name, out, derived, err);
    if (rc) place(env, err, e);
    taas_unref(o);
    return rc;
}

/* callee is x.m where m is a builtin's method name (net.requires_grad_): 1 with x in *self
 * and the builtin in *b, 0 when it is not, -1 with err. */
static int method_of(const taas_eval_env *env, const taas_expr *callee, taas_value **self, const taas_builtin **b,
                     taas_error *err) {
    const char *m;
    if (callee->kind == TAAS_E_ATTR) m = callee->u.attr.name;
    else if (callee->kind == TAAS_E_NAME && starts_with_variable(env, callee->u.str.s)) m = strrchr(callee->u.str.s, '.') + 1;
    else return 0;
    const taas_builtin *f = taas_builtin_find(m);
    if (!f || !f->method) return 0;
    int derived = 0, rc = callee->kind == TAAS_E_ATTR ? eval_attr(env, callee->u.attr.obj, self, &derived, err)
                                                      : read_dotted(env, callee, segments(callee->u.str.s) - 1, self,
                                                                    &derived, err);
    if (rc) return -1;
    if (derived) {  /* a method that changes its self would change a copy, and nothing would say so */
        taas_error_set(err, TAAS_ERR_VALUE, callee->pos, "this %s is made from its block's arguments: %s() on it "
                       "would change a copy", taas_value_type_name(*self), m);
        err->width = taas_span_width(env->src, callee->pos, callee->end);
        taas_error_hint(err, "call it on the block: net.layer1[0].%s(False)", m);
        taas_unref(*self);
        return -1;
    }
    if (taas_value_kind(*self) != (int)f->kind && !(f->params[0].type == TAAS_P_LAYER && taas_value_is_model(*self))) {
        taas_error_set(err, TAAS_ERR_TYPE, callee->pos, "'%s' object has no attribute '%s'", taas_value_type_name(*self), m);
        err->width = taas_span_width(env->src, callee->pos, callee->end);
        taas_error_hint(err, "%s() is a method of models: net.%s(False)", m, m);
        taas_unref(*self);
        return -1;
    }
    *b = f;
    return 1;
}

static int eval_call(const taas_eval_env *env, const taas_expr *e, int top, taas_value **out, double *wait,
                     taas_error *err) {
    const taas_expr *callee = e->u.call.callee;
    taas_value *fn = NULL, *self = NULL;
    const taas_builtin *mb = NULL;
    int m = method_of(env, callee, &self, &mb, err);
    if (m < 0) return -1;
    if (m) fn = taas_builtin_value(mb);
    else if (eval(env, callee, 0, &fn, NULL, err)) return -1;
    if (!fn) {
        taas_unref(self);
        return taas_value_oom(err, e->pos, "calling a method");
    }
    if (fn->type != TAAS_V_BUILTIN) {
        taas_error_set(err, TAAS_ERR_TYPE, callee->pos, "'%s' object is not callable", taas_value_type_name(fn));
        err->width = taas_span_width(env->src, callee->pos, callee->end);
        taas_error_hint(err, "only builtins can be called, such as Linear(...) or print(...)");
        taas_unref(fn);
        return -1;
    }
    const taas_builtin *b = fn->u.fn;
    taas_unref(fn);
    if (b->waits && !top) {
        taas_unref(self);
        return wait_misplaced(env, e, b, err);
    }
    size_t n = e->u.call.nargs, first = self ? 1 : 0;  /* a method's self is its first argument */
    taas_arg *args = calloc(n + first ? n + first : 1, sizeof *args);
    if (!args) {
        taas_unref(self);
        return taas_value_oom(err, e->pos, "calling a builtin");
    }
    if (self) args[0] = (taas_arg){NULL, self, callee->pos};
    int rc = 0;
    size_t done = first;
    for (; done < n + first; done++) {
        const taas_callarg *a = &e->u.call.args[done - first];
        args[done].keyword = a->keyword;
        args[done].pos = a->pos;
        if ((rc = eval(env, a->value, 0, &args[done].value, NULL, err))) break;
    }
    n += first;
    if (!rc) {
        taas_call_ctx cx = {env->io, env->interp, e->pos, -1.0, err};
        rc = taas_builtin_call(b, args, n, &cx, out);
        if (rc) place_call_error(env, e, err);
        else if (cx.wait_until >= 0 && wait) *wait = cx.wait_until;
    }
    for (size_t k = 0; k < done; k++) taas_unref(args[k].value);
    free(args);
    return rc;
}

static int eval_here(const taas_eval_env *env, const taas_expr *e, int top, taas_value **out, double *wait,
                     taas_error *err);

/* Every value a cell makes comes through here: a constructor that found no memory (NULL)
 * is the cell's TaasMemoryError, wherever it was called. */
static int eval(const taas_eval_env *env, const taas_expr *e, int top, taas_value **out, double *wait,
                taas_error *err) {
    int rc = eval_here(env, e, top, out, wait, err);
    if (rc == 0 && !*out) rc = taas_value_oom(err, e->pos, "making a value");
    return rc;
}

static int eval_here(const taas_eval_env *env, const taas_expr *e, int top, taas_value **out, double *wait,
                     taas_error *err) {
    *out = NULL;
    switch (e->kind) {
    case TAAS_E_INT: *out = taas_int(e->u.i); return 0;
    case TAAS_E_FLOAT: *out = taas_float(e->u.f); return 0;
    case TAAS_E_STR: *out = taas_str(e->u.str.s, e->u.str.len); return 0;
    case TAAS_E_TRUE: *out = taas_bool(1); return 0;
    case TAAS_E_FALSE: *out = taas_bool(0); return 0;
    case TAAS_E_NONE: *out = taas_none(); return 0;
    case TAAS_E_NAME: return resolve(env, e, out, err);
    case TAAS_E_TUPLE:
    case TAAS_E_LIST: {
        size_t n = e->u.seq.n;
        taas_value *v = e->kind == TAAS_E_TUPLE ? taas_tuple_new(n) : taas_list_new(n);
        if (!v) return 0;  /* eval says out of memory */
        for (size_t k = 0; k < n; k++) {
            if (eval(env, e->u.seq.items[k], 0, &v->u.seq.items[k], NULL, err)) {
                taas_unref(v);  /* the unfilled slots are NULL, which unref skips */
                return -1;
            }
        }
        *out = v;
        return 0;
    }
    case TAAS_E_CALL: return eval_call(env, e, top, out, wait, err);
    case TAAS_E_BINOP: {
        taas_value *a, *b;
        if (eval(env, e->u.bin.lhs, 0, &a, NULL, err)) return -1;
        if (eval(env, e->u.bin.rhs, 0, &b, NULL, err)) {
            taas_unref(a);
            return -1;
        }
        assert(a && b); /* eval sets *out when it returns 0 (the analyzer stops following it deep down) */
        int rc = taas_eval_binop(e->u.bin.op, a, b, out, err);
        if (rc) place(env, err, e);
        taas_unref(a);
        taas_unref(b);
        return rc;
    }
    case TAAS_E_ATTR: return eval_attr(env, e, out, NULL, err);
    case TAAS_E_INDEX: {
        taas_value *o, *i;
        if (eval(env, e->u.index.obj, 0, &o, NULL, err)) return -1;
        if (eval(env, e->u.index.index, 0, &i, NULL, err)) {
            taas_unref(o);
            return -1;
        }
        assert(o && i); /* as above */
        int rc = taas_value_item(o, i, out, NULL, err);
        if (rc) place(env, err, e);
        taas_unref(o);
        taas_unref(i);
        return rc;
    }
    case TAAS_E_UNARY: {
        taas_value *a;
        if (eval(env, e->u.un.operand, 0, &a, NULL, err)) return -1;
        assert(a); /* as above */
        int rc = taas_eval_unary(e->u.un.op, a, out, err);
        if (rc) place(env, err, e);
        taas_unref(a);
        return rc;
    }
    }
    return taas_error_set(err, TAAS_ERR_INTERNAL, e->pos, "unknown expression kind %d", (int)e->kind);
}

int taas_eval_expr(const taas_eval_env *env, const taas_expr *e, taas_value **out, taas_error *err) {
    return eval(env, e, 0, out, NULL, err);
}

/* ---- stores: net.fc = ..., net[-1] = ... ----------------------------------------- */

/* One step of a place after its variable: an attribute or an item. */
typedef struct place_step {
    const char *attr;        /* an attribute (a segment of a dotted name, or an ATTR) */
    size_t attr_len;
    const taas_expr *index;  /* else an item */
    const taas_expr *at;     /* for the caret */
} place_step;

typedef struct place_steps {
    place_step *v;
    size_t n, cap;
    const char *root;        /* the variable */
    size_t root_len;
} place_steps;

static int add_step(place_steps *ps, place_step st) {
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 8;
        place_step *v = realloc(ps->v, cap * sizeof *v);
        if (!v) return -1;
        ps->v = v;
        ps->cap = cap;
    }
    ps->v[ps->n++] = st;
    return 0;
}

/* Flattens a place (parser.c's is_place: a dotted name, then attributes and items). */
static int flatten(const taas_expr *e, place_steps *ps) {
    if (e->kind == TAAS_E_ATTR)
        return flatten(e->u.attr.obj, ps) || add_step(ps, (place_step){e->u.attr.name, strlen(e->u.attr.name), NULL, e});
    if (e->kind == TAAS_E_INDEX)
        return flatten(e->u.index.obj, ps) || add_step(ps, (place_step){NULL, 0, e->u.index.index, e});
    const char *name = e->u.str.s, *dot = strchr(name, '.');  /* TAAS_E_NAME */
    ps->root = name;
    ps->root_len = dot ? (size_t)(dot - name) : strlen(name);
    while (dot) {
        const char *seg = dot + 1;
        dot = strchr(seg, '.');
        if (add_step(ps, (place_step){seg, dot ? (size_t)(dot - seg) : strlen(seg), NULL, e})) return -1;
    }
    return 0;
}

/* One step: the part (a new reference) and its state_dict name; set: v goes there instead. */
static int step_at(const taas_eval_env *env, taas_value *cur, const place_step *st, taas_value *set, taas_value **out,
                   char key[24], taas_error *err) {
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)st->attr_len, st->attr ? st->attr : "");
    int rc;
    if (st->attr) {
        snprintf(key, 24, "%.23s", name);
        rc = set ? taas_module_set_attr(cur, name, set, key, err) : taas_value_attr(cur, name, out, NULL, err);
    } else {
        taas_value *i;
        if (eval(env, st->index, 0, &i, NULL, err)) return -1;
        rc = set ? taas_module_set_item(cur, i, set, key, err) : taas_value_item(cur, i, out, key, err);
        taas_unref(i);
    }
    if (rc) place(env, err, st->at);
    return rc;
}

/* 1 when v may hold tensors (parameters or buffers): all but the leaves whose row counts
 * none (ReLU, pooling, Flatten, Identity, ...). */
static int has_tensors(const taas_value *v) {
    const taas_row *r = v->type == TAAS_V_OBJECT ? taas_row_of(v->u.obj.def) : NULL;
    return r && (r->nparams || r->children);
}

/* Each model on the path that has weights loses the tensors of the part replaced (they
 * become partial: the new part is initialised when it trains, as torch's new layer is). */
static int store_weights(const taas_eval_env *env, taas_value **path, char (*keys)[24], size_t n, const taas_stmt *s,
                         const taas_value *v, char **files, taas_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (!path[i]->u.obj.weights) continue;
        taas_buf prefix = TAAS_BUF_INIT;
        for (size_t k = i; k < n; k++) taas_buf_printf(&prefix, "%s.", keys[k]);
        int rc = prefix.failed ? taas_value_oom(err, s->pos, "assigning a part of a model")
                               : taas_weights_without(path[i]->u.obj.weights, prefix.data, has_tensors(v), &files[i], err);
        taas_buf_free(&prefix);
        if (rc) {
            err->pos = s->target_pos;
            err->width = taas_span_width(env->src, s->place->pos, s->place->end);
            return -1;
        }
    }
    return 0;
}

static int eval_store(const taas_eval_env *env, const taas_stmt *s, taas_value *v, taas_error *err) {
    place_steps ps = {0};
    if (flatten(s->place, &ps)) {
        free(ps.v);
        return taas_value_oom(err, s->pos, "assigning a part of a model");
    }
    char root[256];
    snprintf(root, sizeof root, "%.*s", (int)ps.root_len, ps.root);
    taas_value *cur = taas_scope_get(env->scope, root);
    if (!cur) {
        taas_error_set(err, TAAS_ERR_NAME, s->place->pos, "name '%s' is not defined", root);
        err->width = (int)ps.root_len;
        taas_error_hint(err, taas_builtin_find(s->place->kind == TAAS_E_NAME ? s->place->u.str.s : "")
                                 ? "a builtin cannot be assigned to; assign the parts of a model held by a variable: net.fc = ..."
                                 : "assign the parts of a model held by a variable: net = resnet18(), then net.fc = ...");
        free(ps.v);
        return -1;
    }
    /* the models from the variable down to the one that changes, and each one's key in the next */
    taas_value **path = calloc(ps.n + 1, sizeof *path);
    char (*keys)[24] = calloc(ps.n + 1, sizeof *keys);
    char **files = calloc(ps.n + 1, sizeof *files);
    size_t depth = 0;
    int rc = path && keys && files ? 0 : taas_value_oom(err, s->pos, "assigning a part of a model");
    if (!rc) path[depth++] = taas_ref(cur);
    for (size_t k = 0; !rc && k + 1 < ps.n; k++) {
        taas_value *next;
        if (!(rc = step_at(env, path[depth - 1], &ps.v[k], NULL, &next, keys[depth - 1], err))) path[depth++] = next;
    }
    taas_value *old = NULL;
    char key[24];
    /* the part as it is (to put back if the model grows past its bounds), then the weights */
    if (!rc) rc = step_at(env, path[depth - 1], &ps.v[ps.n - 1], NULL, &old, keys[depth - 1], err);
    if (!rc && !taas_value_is_model(path[depth - 1])) rc = step_at(env, path[depth - 1], &ps.v[ps.n - 1], v, NULL, key, err);
    int same = !rc && old == v;  /* net.fc = net.fc: the same module, as in PyTorch nothing changes */
    if (!rc && !same) rc = store_weights(env, path, keys, depth, s, v, files, err);
    if (!rc) rc = step_at(env, path[depth - 1], &ps.v[ps.n - 1], v, NULL, key, err);
    for (size_t i = depth - 1; !rc && i-- > 0;) taas_object_remeasure(path[i]);
    if (!rc && taas_object_check_size(path[0], s->pos, err)) {
        step_at(env, path[depth - 1], &ps.v[ps.n - 1], old, NULL, key, err);  /* as it was: it fitted */
        for (size_t i = depth - 1; i-- > 0;) taas_object_remeasure(path[i]);
        rc = -1;
    }
    /* a new part trains, as a new torch module does, even in a frozen model: the nearest
     * flag would say otherwise */
    for (size_t i = depth; !rc && !same && v->type == TAAS_V_OBJECT && !v->u.obj.requires_grad && i-- > 0;)
        if (path[i]->u.obj.requires_grad) {
            if (path[i]->u.obj.requires_grad < 0) v->u.obj.requires_grad = 1;
            break;
        }
    for (size_t i = 0; path && i < depth; i++) {
        if (files[i] && !rc) taas_weights_replace(path[i], files[i], 1);
        else if (files[i]) taas_weights_drop(files[i], 1);
        taas_unref(path[i]);
    }
    taas_unref(old);
    free(path);
    free(keys);
    free(files);
    free(ps.v);
    return rc;
}

int taas_eval_stmt(const taas_eval_env *env, const taas_stmt *s, taas_value **value, double *wait_until,
                   taas_error *err) {
    *value = NULL;
    *wait_until = -1.0;
    taas_value *v;
    if (s->kind == TAAS_S_STORE) {  /* the value first, then the place, as Python */
        if (eval(env, s->value, 0, &v, NULL, err)) return -1;
        if (eval_store(env, s, v, err)) {
            taas_unref(v);
            return -1;
        }
        *value = v;
        return 0;
    }
    if (eval(env, s->value, 1, &v, wait_until, err)) return -1;
    if (s->kind == TAAS_S_EXPR && v->type == TAAS_V_BUILTIN && v->u.fn->bare && *wait_until < 0) {
        const taas_builtin *b = v->u.fn;  /* `exit` alone, as a console user types it */
        taas_unref(v);
        taas_call_ctx cx = {env->io, env->interp, s->pos, -1.0, err};
        if (taas_builtin_call(b, NULL, 0, &cx, &v)) return -1;
        if (!v) return taas_value_oom(err, s->pos, "calling a builtin");
    }
    if (s->kind == TAAS_S_ASSIGN && *wait_until < 0 && taas_scope_set(env->scope, s->target, v)) {
        taas_unref(v);
        return taas_value_oom(err, s->pos, "assigning a variable");
    }
    *value = v;
    return 0;
}

typedef struct wait_check {
    const taas_eval_env *env;
    taas_error *err;
} wait_check;

static int check_call(const taas_expr *e, int top, void *ctx) {
    wait_check *wc = ctx;
    if (top || e->kind != TAAS_E_CALL || e->u.call.callee->kind != TAAS_E_NAME) return 0;
    const char *name = e->u.call.callee->u.str.s;
    if (taas_scope_get(wc->env->scope, name)) return 0;  /* a variable: checked when it runs */
    const taas_builtin *b = taas_builtin_find(name);
    if (b && b->waits) return wait_misplaced(wc->env, e, b, wc->err);
    return 0;
}

int taas_eval_check_waits(const taas_eval_env *env, const taas_program *p, taas_error *err) {
    wait_check wc = {env, err};
    for (size_t k = 0; k < p->n; k++) {
        const taas_expr *v = p->stmts[k].value;
        if (p->stmts[k].kind == TAAS_S_STORE && check_call(v, 0, &wc)) return -1;  /* a store never waits */
        if (taas_expr_walk(v, check_call, &wc) || (p->stmts[k].place && taas_expr_walk(p->stmts[k].place, check_call, &wc)))
            return -1;
    }
    return 0;
}
