/* taas_builtin_call: binds a call's arguments to a row's parameters by Python's rules,
 * checks each against its type and range, runs the row's own checks, then builds the
 * object or runs the action. Every error names the argument, points at it, and gives
 * the signature. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "errnames.h"
#include "modules.h"
#include "rows.h"
#include "suggest.h"

static const char *const CH_CONV_PADDING[] = {"valid", "same", NULL};
static const char *const CH_CONV_PADMODE[] = {"zeros", "reflect", "replicate", "circular", NULL};
static const char *const CH_CROP_PADMODE[] = {"constant", "edge", "reflect", "symmetric", NULL};
static const char *const CH_REDUCTION[] = {"mean", "sum", "none", NULL};
static const char *const CH_ANNEAL[] = {"cos", "linear", NULL};
static const char *const CH_INTERP[] = {"nearest", "bilinear", "bicubic", NULL};
static const char *const CH_GELU[] = {"none", "tanh", NULL};
static const char *const CH_STREAM[] = {"stdout", "stderr", NULL};
static const char *const CH_EVERY[] = {"epoch", NULL};
static const char *const CH_GPT2_ACT[] = {"gelu_new", "gelu_pytorch_tanh", "gelu", NULL};
static const char *const CH_SPLIT[] = {"train", "val", NULL};
static const char *const CH_PARAM_GROUPS[] = {"nanogpt", NULL};
static const char *const CH_INTERVAL[] = {"epoch", "step", NULL};
static const char *const CH_PRECISION[] = {"fp32", "bf16", NULL};

/* The refinements: what they accept in words (NULL: the choices say it) and the strings
 * allowed. Indexed by taas_subtype. */
static const struct {
    const char *text;
    const char *const *choices;
} SUBTYPES[TAAS_PX_COUNT] = {
    [TAAS_PX_CONV_PADDING] = {"int, (int, int), 'valid' or 'same'", CH_CONV_PADDING},
    [TAAS_PX_CONV_PADMODE] = {NULL, CH_CONV_PADMODE},
    [TAAS_PX_CROP_PADDING] = {"int, (int, int) or (int, int, int, int)", NULL},
    [TAAS_PX_CROP_PADMODE] = {NULL, CH_CROP_PADMODE},
    [TAAS_PX_FILL] = {"number or tuple of numbers", NULL},
    [TAAS_PX_REDUCTION] = {NULL, CH_REDUCTION},
    [TAAS_PX_ANNEAL] = {NULL, CH_ANNEAL},
    [TAAS_PX_INTERP] = {NULL, CH_INTERP},
    [TAAS_PX_GELU] = {NULL, CH_GELU},
    [TAAS_PX_STREAM] = {NULL, CH_STREAM},
    [TAAS_PX_URLS] = {"str or list of str", NULL},
    [TAAS_PX_EVERY] = {"int or 'epoch'", CH_EVERY},
    [TAAS_PX_OUTPUT_SIZE] = {"int or (int, int)", NULL},
    [TAAS_PX_MODEL] = {TAAS_MODEL_WORDS, NULL},
    [TAAS_PX_GPT2_ACT] = {NULL, CH_GPT2_ACT},
    [TAAS_PX_SPLIT] = {NULL, CH_SPLIT},
    [TAAS_PX_PARAM_GROUPS] = {NULL, CH_PARAM_GROUPS},
    [TAAS_PX_INTERVAL] = {NULL, CH_INTERVAL},
    [TAAS_PX_PRECISION] = {NULL, CH_PRECISION},
};

static const char *const BASE_TEXT[] = {
    [TAAS_P_ANY] = "any value",
    [TAAS_P_BOOL] = "bool",
    [TAAS_P_INT] = "int",
    [TAAS_P_FLOAT] = "float",
    [TAAS_P_STR] = "str",
    [TAAS_P_INT_PAIR] = "int or (int, int)",
    [TAAS_P_FLOAT_SEQ] = "float or tuple of floats",
    [TAAS_P_FLOAT_PAIR] = "(float, float)",
    [TAAS_P_INT_SEQ] = "list of ints",
    [TAAS_P_LAYER] = "a layer (nn.Module)",
    [TAAS_P_LOSS] = "a loss",
    [TAAS_P_OPTIMIZER] = "an optimizer",
    [TAAS_P_SCHEDULER] = "a scheduler",
    [TAAS_P_DATASET] = "a dataset",
    [TAAS_P_TRANSFORM] = "a transform",
    [TAAS_P_LOADER] = "a DataLoader",
    [TAAS_P_CONFIG] = "a model configuration",
    [TAAS_P_TRANSFORM_LIST] = "a list of transforms",
    [TAAS_P_SCHEDULER_LIST] = "a list of schedulers",
};

const char *const *taas_param_choices(const taas_param *p) {
    taas_subtype st = TAAS_PX_OF(p->flags);
    return st < TAAS_PX_COUNT ? SUBTYPES[st].choices : NULL;
}

static void choices_text(const char *const *ch, taas_buf *out) {
    for (size_t i = 0; ch[i]; i++) {
        if (i) taas_buf_puts(out, ch[i + 1] ? ", " : " or ");
        taas_buf_printf(out, "'%s'", ch[i]);
    }
}

void taas_param_type_text(const taas_param *p, taas_buf *out) {
    taas_subtype st = TAAS_PX_OF(p->flags);
    if (st != TAAS_PX_NONE && st < TAAS_PX_COUNT && SUBTYPES[st].text)
        taas_buf_puts(out, SUBTYPES[st].text);
    else if (st != TAAS_PX_NONE && st < TAAS_PX_COUNT && SUBTYPES[st].choices)
        choices_text(SUBTYPES[st].choices, out);
    else
        taas_buf_puts(out, BASE_TEXT[p->type]);
    if ((p->flags & TAAS_PF_NONE_OK) && !(p->type == TAAS_P_ANY && st == TAAS_PX_NONE))
        taas_buf_puts(out, " or None");
}

static int is_seq(const taas_value *v) {
    return v->type == TAAS_V_TUPLE || v->type == TAAS_V_LIST;
}

/* Every item of a tuple/list has type t (and there are n of them when n > 0). */
static int seq_of(const taas_value *v, taas_vtype t, size_t n) {
    if (!is_seq(v) || (n && v->u.seq.n != n)) return 0;
    for (size_t i = 0; i < v->u.seq.n; i++) {
        const taas_value *x = v->u.seq.items[i];
        if (!(x->type == t || (t == TAAS_V_FLOAT && x->type == TAAS_V_INT))) return 0;
    }
    return 1;
}

static int kind_is(const taas_value *v, taas_kind k) {
    return taas_value_kind(v) == (int)k;
}

/* The builtin kind a parameter type wants, for "you forgot the parentheses". */
static int wanted_kind(taas_ptype t) {
    switch (t) {
    case TAAS_P_LAYER: return TAAS_K_LAYER;
    case TAAS_P_LOSS: return TAAS_K_LOSS;
    case TAAS_P_OPTIMIZER: return TAAS_K_OPTIMIZER;
    case TAAS_P_SCHEDULER:
    case TAAS_P_SCHEDULER_LIST: return TAAS_K_SCHEDULER;
    case TAAS_P_DATASET: return TAAS_K_DATASET;
    case TAAS_P_TRANSFORM:
    case TAAS_P_TRANSFORM_LIST: return TAAS_K_TRANSFORM;
    case TAAS_P_LOADER: return TAAS_K_LOADER;
    case TAAS_P_CONFIG: return TAAS_K_CONFIG;
    default: return -1;
    }
}

static int type_ok(const taas_param *p, taas_ptype type, const taas_value *v) {
    if (v->type == TAAS_V_NONE && (p->flags & TAAS_PF_NONE_OK)) return 1;
    switch (TAAS_PX_OF(p->flags)) {
    case TAAS_PX_CONV_PADDING:
        return v->type == TAAS_V_INT || v->type == TAAS_V_STR || seq_of(v, TAAS_V_INT, 2);
    case TAAS_PX_CROP_PADDING:
        return v->type == TAAS_V_INT || seq_of(v, TAAS_V_INT, 2) || seq_of(v, TAAS_V_INT, 4);
    case TAAS_PX_FILL:
        return taas_value_is_number(v) || (seq_of(v, TAAS_V_FLOAT, 0) && v->u.seq.n > 0);
    case TAAS_PX_URLS:
        return v->type == TAAS_V_STR || (seq_of(v, TAAS_V_STR, 0) && v->u.seq.n > 0);
    case TAAS_PX_EVERY:
        return v->type == TAAS_V_INT || v->type == TAAS_V_STR;
    case TAAS_PX_OUTPUT_SIZE:  /* torch's None items pass here, for the row to name them */
        if (v->type == TAAS_V_INT) return 1;
        if (!is_seq(v) || v->u.seq.n != 2) return 0;
        for (size_t i = 0; i < 2; i++)
            if (v->u.seq.items[i]->type != TAAS_V_INT && v->u.seq.items[i]->type != TAAS_V_NONE) return 0;
        return 1;
    default:
        break;
    }
    switch (type) {
    case TAAS_P_ANY: return 1;
    case TAAS_P_BOOL: return v->type == TAAS_V_BOOL;
    case TAAS_P_INT: return v->type == TAAS_V_INT;
    case TAAS_P_FLOAT: return taas_value_is_number(v);
    case TAAS_P_STR: return v->type == TAAS_V_STR;
    case TAAS_P_INT_PAIR: return v->type == TAAS_V_INT || seq_of(v, TAAS_V_INT, 2);
    case TAAS_P_FLOAT_SEQ:
        return taas_value_is_number(v) || (seq_of(v, TAAS_V_FLOAT, 0) && v->u.seq.n > 0);
    case TAAS_P_FLOAT_PAIR: return seq_of(v, TAAS_V_FLOAT, 2);
    case TAAS_P_INT_SEQ: return seq_of(v, TAAS_V_INT, 0);
    case TAAS_P_LAYER: return kind_is(v, TAAS_K_LAYER);
    case TAAS_P_LOSS: return kind_is(v, TAAS_K_LOSS);
    case TAAS_P_OPTIMIZER: return kind_is(v, TAAS_K_OPTIMIZER);
    case TAAS_P_SCHEDULER: return kind_is(v, TAAS_K_SCHEDULER);
    case TAAS_P_DATASET: return kind_is(v, TAAS_K_DATASET);
    case TAAS_P_TRANSFORM: return kind_is(v, TAAS_K_TRANSFORM);
    case TAAS_P_LOADER: return kind_is(v, TAAS_K_LOADER);
    case TAAS_P_CONFIG: return kind_is(v, TAAS_K_CONFIG);
    case TAAS_P_TRANSFORM_LIST:
    case TAAS_P_SCHEDULER_LIST:
        if (!is_seq(v)) return 0;
        for (size_t i = 0; i < v->u.seq.n; i++)
            if (!kind_is(v->u.seq.items[i], (taas_kind)wanted_kind(type))) return 0;
        return 1;
    }
    return 0;
}

/* "argument 'kernel_size'" or, for *args, "argument 3". */
static void arg_label(const taas_param *p, size_t position, char *out, size_t n) {
    if (p->flags & TAAS_PF_VARARGS)
        snprintf(out, n, "argument %zu", position);
    else
        snprintf(out, n, "argument '%s'", p->name);
}

static int type_error(const taas_builtin *b, const taas_param *p, size_t position,
                      const taas_value *v, taas_srcpos pos, taas_error *err) {
    taas_buf t = TAAS_BUF_INIT;
    taas_param_type_text(p, &t);
    char label[96];
    arg_label(p, position, label, sizeof label);
    taas_error_set(err, TAAS_ERR_TYPE, pos, "%s() %s must be %s, not %s", b->name, label,
                   t.data, taas_value_type_name(v));
    taas_buf_free(&t);
    int k = wanted_kind(p->type);
    char lead[160] = "";
    if (v->type == TAAS_V_BUILTIN && k >= 0 && (int)v->u.fn->kind == k)
        snprintf(lead, sizeof lead, "call it: write %s() instead of %s", v->u.fn->name, v->u.fn->name);
    taas_sig_hint(err, b, lead[0] ? lead : NULL);
    return -1;
}

/* A number of a value (itself or its items, at any depth) outside what the parameter
 * allows: not finite (1e400 is inf and inf - inf nan, which no argument means: the worker
 * would read them as "the default"), or, with a range, outside it. */
typedef struct number_check {
    const taas_param *p;  /* NULL: finiteness only */
} number_check;

static int bad_number(const taas_value *v, void *ctx) {
    const taas_param *p = ((number_check *)ctx)->p;
    if (!p) return v->type == TAAS_V_FLOAT && !isfinite(v->u.f);
    if (v->type != TAAS_V_INT && v->type != TAAS_V_FLOAT) return 0;
    double x = taas_value_number(v);
    return !(x >= p->min && x <= p->max); /* NaN fails both */
}

/* 0: every number fits; 1: one does not; -1: the walk failed (err: the value is too large
 * or too widely shared, or the kernel was asked to stop). Each shared value is looked at
 * once: v1 = [v0, v0] up to v40 is 41 values, not 2^40. */
static int numbers_bad(const taas_builtin *b, const char *label, const taas_param *range,
                       const taas_value *v, taas_srcpos pos, taas_error *err) {
    if (range && range->min > range->max) return 0;
    if (v->type != TAAS_V_TUPLE && v->type != TAAS_V_LIST) return bad_number(v, &(number_check){range});
    char what[160];
    snprintf(what, sizeof what, "checking %s() %s", b->name, label);
    taas_walk w;
    taas_walk_begin(&w, what, err);
    int rc = taas_walk_values(v, bad_number, &(number_check){range}, &w);
    if (rc < 0) err->pos = pos;
    return rc;
}

static int check_arg(const taas_builtin *b, const taas_param *p, size_t position,
                     const taas_value *v, taas_srcpos pos, taas_error *err) {
    if (!type_ok(p, p->type, v)) return type_error(b, p, position, v, pos, err);
    char label[96];
    arg_label(p, position, label, sizeof label);
    int bad = numbers_bad(b, label, NULL, v, pos, err);
    if (bad < 0) return -1;
    if (bad) {
        char *got = taas_value_repr(v);
        taas_error_set(err, TAAS_ERR_VALUE, pos, "%s() %s must be a finite number, got %s", b->name, label, got);
        free(got);
        taas_sig_hint(err, b, "a literal beyond about 1.8e308 is infinite (inf), as in Python; give a finite value");
        return -1;
    }
    const char *const *ch = taas_param_choices(p);
    if (ch && v->type == TAAS_V_STR) {
        size_t n = 0;
        while (ch[n]) n++;
        for (size_t i = 0; i < n; i++)
            if (strcmp(ch[i], v->u.str.s) == 0) return 0;
        taas_buf t = TAAS_BUF_INIT;
        choices_text(ch, &t);
        char *got = taas_value_repr(v);
        taas_error_set(err, TAAS_ERR_VALUE, pos, "%s() %s must be %s, got %s", b->name, label,
                       t.data, got);
        free(got);
        taas_buf_free(&t);
        int c = taas_suggest(v->u.str.s, v->u.str.len, ch, n);
        char lead[96];
        if (c >= 0) snprintf(lead, sizeof lead, "did you mean '%s'?", ch[c]);
        taas_sig_hint(err, b, c >= 0 ? lead : NULL);
        return -1;
    }
    if ((bad = numbers_bad(b, label, p, v, pos, err))) {
        if (bad < 0) return -1;
        char lo[64], hi[64], bound[160];
        taas_fmt_number(p->min, lo, sizeof lo);
        taas_fmt_number(p->max, hi, sizeof hi);
        /* a size's upper bound (2^31 - 1, 2^24) is no news to someone who wrote 0 */
        taas_param floor_only = *p;
        floor_only.max = INFINITY;
        if (isinf(p->max) || (p->max >= 1 << 24 && numbers_bad(b, label, &floor_only, v, pos, err) == 1))
            snprintf(bound, sizeof bound, ">= %s", lo);
        else if (isinf(p->min))
            snprintf(bound, sizeof bound, "<= %s", hi);
        else
            snprintf(bound, sizeof bound, "between %s and %s", lo, hi);
        char *got = taas_value_repr(v);
        taas_error_set(err, TAAS_ERR_VALUE, pos, "%s() %s must be %s, got %s", b->name, label,
                       bound, got);
        free(got);
        taas_sig_hint(err, b, NULL);
        return -1;
    }
    return 0;
}

static const char *ordinal_suffix(size_t n) {
    if (n % 100 >= 11 && n % 100 <= 13) return "th";
    return n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
}

/* The optimizer and scheduler rows have no params/optimizer argument: fit() supplies it
 * (docs/design.md §1). Catch the PyTorch habit of passing it anyway. */
static int misplaced_first(const taas_builtin *b, const taas_arg *args, size_t nargs,
                           taas_error *err) {
    if (nargs == 0 || args[0].keyword) return 0;
    const taas_value *v = args[0].value;
    if (b->kind == TAAS_K_OPTIMIZER && kind_is(v, TAAS_K_LAYER)) {
        taas_error_set(err, TAAS_ERR_TYPE, args[0].pos,
                       "%s() takes no model or parameters: fit() hands the model's parameters "
                       "to the optimizer", b->name);
        char lead[160];
        snprintf(lead, sizeof lead, "leave the model out: fit(net, train, optimizer=%s(lr=...))",
                 b->name);
        taas_sig_hint(err, b, lead);
        return -1;
    }
    if (b->kind == TAAS_K_SCHEDULER && kind_is(v, TAAS_K_OPTIMIZER)) {
        taas_error_set(err, TAAS_ERR_TYPE, args[0].pos,
                       "%s() takes no optimizer: fit() hands its optimizer to the scheduler",
                       b->name);
        char lead[160];
        snprintf(lead, sizeof lead,
                 "leave the optimizer out: fit(net, train, optimizer=..., scheduler=%s(...))",
                 b->name);
        taas_sig_hint(err, b, lead);
        return -1;
    }
    return 0;
}

static int too_many(const taas_builtin *b, size_t max, size_t min, size_t given,
                    taas_srcpos pos, taas_error *err) {
    if (min == max)
        taas_error_set(err, TAAS_ERR_TYPE, pos,
                       "%s() takes %zu positional argument%s but %zu %s given", b->name, max,
                       max == 1 ? "" : "s", given, given == 1 ? "was" : "were");
    else
        taas_error_set(err, TAAS_ERR_TYPE, pos,
                       "%s() takes from %zu to %zu positional arguments but %zu were given",
                       b->name, min, max, given);
    taas_sig_hint(err, b, NULL);
    return -1;
}

static int missing(const taas_builtin *b, taas_value **slots, size_t np, taas_srcpos pos,
                   taas_error *err) {
    size_t n = 0;
    for (size_t i = 0; i < np; i++)
        if (!slots[i] && !b->params[i].dflt && !(b->params[i].flags & (TAAS_PF_VARARGS | TAAS_PF_VARKW))) n++;
    if (n == 0) return 0;
    taas_buf names = TAAS_BUF_INIT;
    size_t k = 0;
    for (size_t i = 0; i < np; i++) {
        if (slots[i] || b->params[i].dflt || (b->params[i].flags & (TAAS_PF_VARARGS | TAAS_PF_VARKW))) continue;
        if (k) taas_buf_puts(&names, k + 1 == n ? " and " : ", ");
        taas_buf_printf(&names, "'%s'", b->params[i].name);
        k++;
    }
    taas_error_set(err, TAAS_ERR_TYPE, pos, "%s() missing %zu required argument%s: %s",
                   b->name, n, n == 1 ? "" : "s", names.data);
    taas_buf_free(&names);
    taas_sig_hint(err, b, NULL);
    return -1;
}

static int unknown_keyword(const taas_builtin *b, const taas_arg *a, taas_error *err) {
    taas_error_set(err, TAAS_ERR_TYPE, a->pos, "%s() got an unexpected keyword argument '%s'",
                   b->name, a->keyword);
    size_t np = taas_param_count(b);
    const char **names = calloc(np + 1, sizeof *names);
    int c = -1;
    if (names) {
        for (size_t i = 0; i < np; i++)
            if (!(b->params[i].flags & TAAS_PF_VARARGS)) names[i] = b->params[i].name;
        c = taas_suggest(a->keyword, strlen(a->keyword), names, np);
    }
    char lead[128];
    if (c >= 0) snprintf(lead, sizeof lead, "did you mean '%s'?", names[c]);
    free(names);
    taas_sig_hint(err, b, c >= 0 ? lead : NULL);
    return -1;
}

int taas_builtin_call(const taas_builtin *b, const taas_arg *args, size_t nargs,
                      taas_call_ctx *cx, taas_value **out) {
    if (!cx || !cx->err || !b || !out) return -1;
    taas_error *err = cx->err;
    *out = NULL;
    if (misplaced_first(b, args, nargs, err)) return -1;

    size_t np = taas_param_count(b);
    taas_value **slots = calloc(np + 1, sizeof *slots);
    taas_srcpos *where = calloc(np + 1, sizeof *where);
    taas_value **rest = calloc(nargs + 1, sizeof *rest); /* *args, borrowed */
    taas_srcpos *rest_pos = calloc(nargs + 1, sizeof *rest_pos);
    int rc = -1, seen_kw = 0;
    if (!slots || !where || !rest || !rest_pos) {
        taas_value_oom(err, cx->pos, "binding the arguments");
        goto done;
    }
    int va = -1, vk = -1;
    for (size_t i = 0; i < np; i++)
        if (b->params[i].flags & TAAS_PF_VARKW) vk = (int)i;
    size_t npos = 0, nreq = 0; /* positional parameters; how many of them are required */
    for (size_t i = 0; i < np; i++) {
        if (b->params[i].flags & TAAS_PF_VARARGS) {
            va = (int)i;
            break;
        }
        if (b->params[i].flags & TAAS_PF_KWONLY) break;
        npos++;
        if (!b->params[i].dflt) nreq++;
    }
    size_t nrest = 0, ipos = 0, positionals = 0;
    for (size_t k = 0; k < nargs; k++) if (!args[k].keyword) positionals++;

    for (size_t k = 0; k < nargs; k++) {
        const taas_arg *a = &args[k];
        if (!a->keyword) {
            if (seen_kw) {
                taas_error_set(err, TAAS_ERR_SYNTAX, a->pos,
                               "positional argument follows keyword argument");
                taas_sig_hint(err, b, "put the positional arguments first");
                goto done;
            }
            if (ipos < npos) {
                slots[ipos] = taas_ref(a->value);
                where[ipos++] = a->pos;
            } else if (va >= 0) {
                rest_pos[nrest] = a->pos;
                rest[nrest++] = a->value;
            } else {
                too_many(b, npos, nreq, positionals, a->pos, err);
                goto done;
            }
            continue;
        }
        seen_kw = 1;
        int i = taas_param_index(b, a->keyword);
        if ((i < 0 || i == va) && vk >= 0) continue;  /* **kwargs */
        if (i < 0 || i == va || i == vk) {
            unknown_keyword(b, a, err);
            goto done;
        }
        if (slots[i]) {
            taas_error_set(err, TAAS_ERR_TYPE, a->pos,
                           "%s() got multiple values for argument '%s'", b->name, a->keyword);
            char lead[160];
            snprintf(lead, sizeof lead, "'%s' is already given as the %d%s positional argument",
                     a->keyword, i + 1, ordinal_suffix((size_t)i + 1));
            taas_sig_hint(err, b, lead);
            goto done;
        }
        slots[i] = taas_ref(a->value);
        where[i] = a->pos;
    }
    if (missing(b, slots, np, cx->pos, err)) goto done;

    for (size_t i = 0; i < np; i++) {
        const taas_param *p = &b->params[i];
        if ((int)i == vk) {  /* dropped (TAAS_PF_IGNORED): the slot holds None */
            if (!(slots[i] = taas_none())) {
                taas_value_oom(err, cx->pos, "binding the arguments");
                goto done;
            }
            where[i] = cx->pos;
        } else if ((int)i == va) {
            if (!(slots[i] = taas_tuple_new(nrest))) {
                taas_value_oom(err, cx->pos, "binding the arguments");
                goto done;
            }
            where[i] = nrest ? args[0].pos : cx->pos;
            for (size_t j = 0; j < nrest; j++) {
                if (check_arg(b, p, npos + j + 1, rest[j], rest_pos[j], err)) goto done;
                slots[i]->u.seq.items[j] = taas_ref(rest[j]);
            }
        } else if (slots[i]) {
            if (check_arg(b, p, i + 1, slots[i], where[i], err)) goto done;
            if (!(slots[i] = taas_param_normalize(p, slots[i]))) {
                taas_value_oom(err, where[i], "binding the arguments");
                goto done;
            }
        } else {
            slots[i] = taas_param_default(p);
            where[i] = cx->pos;
            if (!slots[i]) {  /* every default of the table reads (test_builtins): no memory */
                taas_value_oom(err, cx->pos, "binding the arguments");
                goto done;
            }
        }
    }
    const taas_row *row = taas_row_of(b);
    if (row && row->check && row->check(row, slots, where, err)) goto done;

    if (b->kind == TAAS_K_ACTION || b->action) {  /* an action, or a function that builds (resnet18) */
        if (!b->action) {
            taas_error_set(err, TAAS_ERR_INTERNAL, cx->pos, "%s() has no action", b->name);
            goto done;
        }
        rc = b->action(cx, slots, out);
    } else {
        if (!(*out = taas_object_new(b, slots, np))) {
            taas_value_oom(err, cx->pos, "making the object");
            goto done;
        }
        free(slots); /* the object owns the arguments now */
        slots = NULL;
        rc = taas_object_check_size(*out, cx->pos, err);  /* keeps every walk over objects bounded */
        if (rc) {
            taas_unref(*out);
            *out = NULL;
        }
    }
done:
    if (slots)
        for (size_t i = 0; i < np; i++) taas_unref(slots[i]);
    free(slots);
    free(where);
    free(rest);
    free(rest_pos);
    return rc;
}

taas_value *taas_construct(const char *name, const taas_karg *a, size_t n, taas_error *err) {
    const taas_builtin *b = taas_builtin_find(name);
    taas_arg args[24];
    taas_value *out = NULL;
    int ok = b && n <= sizeof args / sizeof *args;
    for (size_t i = 0; i < n; i++) {
        ok = ok && a[i].v;
        args[i] = (taas_arg){a[i].kw, a[i].v, TAAS_NOPOS};
    }
    if (ok) {
        taas_call_ctx cx = {NULL, NULL, TAAS_NOPOS, -1.0, err};
        if (taas_builtin_call(b, args, n, &cx, &out)) out = NULL;
    } else if (!taas_error_is_set(err)) {  /* else an argument's own call failed and said why */
        taas_value_oom(err, TAAS_NOPOS, "making a model's part");
    }
    for (size_t i = 0; i < n; i++) taas_unref(a[i].v);
    return out;
}
