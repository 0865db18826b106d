/* A model as a tree of modules: children, attributes, items, replacing a part,
 * requires_grad_ and the parameter counts (modules.h). Walks here follow objects as trees;
 * an object is bounded when made (TAAS_VALUE_MAX_DEPTH levels, TAAS_VALUE_MAX_NODES values
 * counted as a tree), so they stay bounded, and a store that would make a cycle is refused. */
#include "modules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"

int taas_value_is_model(const taas_value *v) {
    return taas_value_kind(v) == TAAS_K_LAYER;
}

void taas_children_add(taas_children *c, const char *name, taas_value *v, int derived) {
    if (!v) {
        c->failed = 1;
        return;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        taas_child *item = realloc(c->item, cap * sizeof *item);
        if (!item) {
            c->failed = 1;
            taas_unref(v);
            return;
        }
        c->item = item;
        c->cap = cap;
    }
    taas_child *k = &c->item[c->n++];
    snprintf(k->name, sizeof k->name, "%s", name);
    k->v = v;
    k->derived = derived;
}

void taas_children_free(taas_children *c) {
    for (size_t i = 0; i < c->n; i++) taas_unref(c->item[i].v);
    free(c->item);
    memset(c, 0, sizeof *c);
}

int taas_module_children(const taas_value *v, taas_children *out) {
    memset(out, 0, sizeof *out);
    const taas_row *r = v && v->type == TAAS_V_OBJECT ? taas_row_of(v->u.obj.def) : NULL;
    if (!r || !r->children) return 0;
    r->children(v, out);
    if (!out->failed) return 0;
    taas_children_free(out);
    return -1;
}

/* PyTorch's _addindent: lines after the first move right by n spaces. */
static void add_indented(taas_buf *out, const char *s, int n) {
    for (const char *p = s; *p; p++) {
        taas_buf_putc(out, *p);
        if (*p == '\n') taas_buf_printf(out, "%*s", n, "");
    }
}

void taas_module_repr(const taas_value *v, taas_buf *out) {
    taas_children c;
    taas_buf_printf(out, "%s(", v->u.obj.def->name);
    if (taas_module_children(v, &c)) {
        taas_buf_puts(out, "...)");  /* out of memory: the repr says less */
        return;
    }
    for (size_t i = 0; i < c.n; i++) {
        char *r = taas_value_repr(c.item[i].v);
        taas_buf_printf(out, "\n  (%s): ", c.item[i].name);
        add_indented(out, r ? r : "...", 2);
        free(r);
    }
    if (c.n) taas_buf_putc(out, '\n');
    taas_buf_putc(out, ')');
    taas_children_free(&c);
}

/* frozen: the nearest enclosing flag says False. */
static int count_at(const taas_value *v, int frozen, int64_t *total, int64_t *trainable) {
    if (v->u.obj.requires_grad) frozen = v->u.obj.requires_grad < 0;
    const taas_row *r = taas_row_of(v->u.obj.def);
    if (r && r->children) {
        taas_children c;
        if (taas_module_children(v, &c)) return 0;
        int known = 1;
        for (size_t i = 0; i < c.n && known; i++)
            if (c.item[i].v->type == TAAS_V_OBJECT) known = count_at(c.item[i].v, frozen, total, trainable);
        taas_children_free(&c);
        return known;
    }
    int64_t n = 0;
    if (r && r->nparams && !r->nparams(v, &n)) return 0;
    *total += n;
    if (!frozen) *trainable += n;
    return 1;
}

int taas_module_count(const taas_value *v, int64_t *total, int64_t *trainable) {
    *total = *trainable = 0;
    if (!v || v->type != TAAS_V_OBJECT) return 1;
    return count_at(v, 0, total, trainable);
}

/* ---- reading a part ---------------------------------------------------------------- */

int taas_value_attr_each(const taas_value *obj, void (*f)(const char *name, void *ctx), void *ctx) {
    taas_children c;
    if (!obj || obj->type != TAAS_V_OBJECT) return 0;
    if (taas_module_children(obj, &c)) return -1;
    for (size_t i = 0; i < c.n; i++) f(c.item[i].name, ctx);
    const taas_builtin *b = obj->u.obj.def;
    for (size_t i = 0; b->params[i].name; i++) {
        const taas_param *p = &b->params[i];
        int dup = 0;
        for (size_t k = 0; k < c.n; k++) dup |= !strcmp(c.item[k].name, p->name);
        if (!dup && !(p->flags & (TAAS_PF_IGNORED | TAAS_PF_VARARGS | TAAS_PF_VARKW))) f(p->name, ctx);
    }
    taas_children_free(&c);
    if (taas_value_is_model(obj)) f("requires_grad_", ctx);
    return 0;
}

static void list_name(const char *name, void *ctx) {
    taas_buf *b = ctx;
    taas_buf_printf(b, "%s%s%s", b->len ? ", " : "", name, strcmp(name, "requires_grad_") ? "" : "()");
}

static int no_attr(const taas_value *obj, const char *name, taas_error *err) {
    taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "'%s' object has no attribute '%s'", taas_value_type_name(obj), name);
    if (obj->type != TAAS_V_OBJECT) {
        taas_error_hint(err, "attributes are those of models and their layers (net.fc, net.layer1, fc.in_features)");
        return -1;
    }
    if (taas_value_is(obj, "Sequential")) {
        taas_error_hint(err, "a Sequential's layers are read and assigned by index: net[0], net[-1] = Linear(16, 3)");
        return -1;
    }
    taas_buf names = TAAS_BUF_INIT;
    taas_value_attr_each(obj, list_name, &names);
    if (names.len) taas_error_hint(err, "%s has: %s", obj->u.obj.def->name, names.data);
    else taas_error_hint(err, "%s has no attributes", obj->u.obj.def->name);
    taas_buf_free(&names);
    return -1;
}

int taas_value_attr(const taas_value *obj, const char *name, taas_value **out, int *derived, taas_error *err) {
    *out = NULL;
    if (derived) *derived = 0;
    taas_children c;
    if (obj->type != TAAS_V_OBJECT) return no_attr(obj, name, err);
    if (taas_module_children(obj, &c)) return taas_value_oom(err, TAAS_NOPOS, "reading an attribute");
    for (size_t i = 0; i < c.n; i++)
        if (!strcmp(c.item[i].name, name)) {
            *out = taas_ref(c.item[i].v);
            if (derived) *derived = c.item[i].derived;
            taas_children_free(&c);
            return 0;
        }
    int i = taas_param_index(obj->u.obj.def, name);
    if (i >= 0 && (size_t)i < obj->u.obj.nargs &&
        !(obj->u.obj.def->params[i].flags & (TAAS_PF_IGNORED | TAAS_PF_VARKW))) {
        *out = taas_ref(obj->u.obj.args[i]);
        taas_children_free(&c);
        return 0;
    }
    if (!strcmp(name, "requires_grad_") && taas_value_is_model(obj)) {
        taas_children_free(&c);
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "requires_grad_ is a method: call it");
        taas_error_hint(err, "net.requires_grad_(False) freezes the model's parameters, net.requires_grad_(True) "
                             "unfreezes them");
        return -1;
    }
    taas_children_free(&c);
    return no_attr(obj, name, err);
}

/* The slot of obj[index] in the sequence seq (n items): its position, or -1 with err. */
static int item_at(const taas_value *obj, size_t n, const taas_value *index, size_t *at, taas_error *err) {
    if (index->type != TAAS_V_INT && index->type != TAAS_V_BOOL) {
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "%s indices must be integers, not %s",
                       taas_value_type_name(obj), taas_value_type_name(index));
        taas_error_hint(err, "index with an int: net[0] is the first layer, net[-1] the last");
        return -1;
    }
    int64_t i = index->type == TAAS_V_BOOL ? index->u.b : index->u.i, k = i < 0 ? i + (int64_t)n : i;
    if (k < 0 || k >= (int64_t)n) {
        int seq = taas_value_is(obj, "Sequential");
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "index %lld is out of range: the %s has %zu %s%s",
                       (long long)i, taas_value_type_name(obj), n, seq ? "layer" : "item", n == 1 ? "" : "s");
        if (n) taas_error_hint(err, "give an index from 0 to %zu, or from -%zu to -1 to count from the end", n - 1, n);
        else taas_error_hint(err, "it is empty");
        return -1;
    }
    *at = (size_t)k;
    return 0;
}

/* The sequence obj[index] reads: a Sequential's layers, a tuple's or a list's items. */
static taas_value *indexable(const taas_value *obj, taas_error *err) {
    if (taas_value_is(obj, "Sequential")) return obj->u.obj.args[0];
    if (obj->type == TAAS_V_TUPLE || obj->type == TAAS_V_LIST) return (taas_value *)obj;
    taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "'%s' object is not subscriptable", taas_value_type_name(obj));
    taas_error_hint(err, taas_value_is_model(obj) ? "only a Sequential is indexed (net[0], net[-1]); read a "
                                                     "model's parts by name: net.fc, net.layer1"
                                                   : "index a Sequential, a tuple or a list: x[0], x[-1]");
    return NULL;
}

int taas_value_item(const taas_value *obj, const taas_value *index, taas_value **out, char key[24], taas_error *err) {
    *out = NULL;
    const taas_value *seq = indexable(obj, err);
    size_t at;
    if (!seq || item_at(obj, seq->u.seq.n, index, &at, err)) return -1;
    if (key) snprintf(key, 24, "%zu", at);
    *out = taas_ref(seq->u.seq.items[at]);
    return 0;
}

/* ---- changing a part --------------------------------------------------------------- */

/* 1 when target is v or one of the values v holds. */
static int holds(const taas_value *v, const taas_value *target) {
    if (v == target) return 1;
    if (v->type == TAAS_V_OBJECT) {
        for (size_t i = 0; i < v->u.obj.nargs; i++)
            if (holds(v->u.obj.args[i], target)) return 1;
    } else if (v->type == TAAS_V_TUPLE || v->type == TAAS_V_LIST) {
        for (size_t i = 0; i < v->u.seq.n; i++)
            if (holds(v->u.seq.items[i], target)) return 1;
    }
    return 0;
}

/* v may go into obj as a child: a module (None where torch allows a None child). */
static int child_ok(const taas_value *obj, const char *what, taas_value *v, int none_ok, taas_error *err) {
    if (!(taas_value_is_model(v) || (none_ok && v->type == TAAS_V_NONE))) {
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "cannot assign '%s' as %s of a %s: a module is expected",
                       taas_value_type_name(v), what, obj->u.obj.def->name);
        taas_error_hint(err, "assign a layer or a model, e.g. net.fc = Linear(512, 10)%s",
                        none_ok ? " (or None)" : "");
        return -1;
    }
    if (v->type == TAAS_V_OBJECT && holds(v, obj)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "cannot assign a %s that holds this %s as %s of it: the "
                       "model would hold itself", v->u.obj.def->name, obj->u.obj.def->name, what);
        taas_error_hint(err, "assign a new layer or a part of another model");
        return -1;
    }
    return 0;
}

/* Puts v in *slot (v referenced, the old value dropped) and measures obj again. */
static void put(taas_value *obj, taas_value **slot, taas_value *v) {
    taas_value *old = *slot;
    *slot = taas_ref(v);
    taas_unref(old);
    taas_object_remeasure(obj);
}

int taas_module_set_attr(taas_value *obj, const char *name, taas_value *v, char key[24], taas_error *err) {
    taas_children c;
    if (!taas_value_is_model(obj)) {
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "cannot assign to an attribute of a '%s'",
                       taas_value_type_name(obj));
        taas_error_hint(err, "only the parts of a model are assigned: net.fc = Linear(512, 10)");
        return -1;
    }
    if (taas_module_children(obj, &c)) return taas_value_oom(err, TAAS_NOPOS, "assigning an attribute");
    int found = -1;
    for (size_t i = 0; i < c.n; i++)
        if (!strcmp(c.item[i].name, name)) found = (int)i;
    int derived = found >= 0 && c.item[found].derived;
    int i = taas_param_index(obj->u.obj.def, name);
    const taas_param *p = i >= 0 ? &obj->u.obj.def->params[i] : NULL;
    int stored = p && p->type == TAAS_P_LAYER && !(p->flags & TAAS_PF_VARARGS);
    if (derived || (!stored && (found >= 0 || p))) {
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "%s.%s cannot be assigned: %s", obj->u.obj.def->name, name,
                       derived ? "a block's children are made from its arguments (read-only)"
                               : "it is an argument the model was built with (read-only)");
        taas_error_hint(err, derived ? "replace the whole block: net.layer1[0] = BasicBlock(64, 64)"
                                     : "build a new one with the argument you want");
        taas_children_free(&c);
        return -1;
    }
    if (!stored) {
        taas_children_free(&c);
        return no_attr(obj, name, err);
    }
    taas_children_free(&c);
    char what[64];
    snprintf(what, sizeof what, "'%s'", name);
    if (child_ok(obj, what, v, (p->flags & TAAS_PF_NONE_OK) != 0, err)) return -1;
    snprintf(key, 24, "%.23s", name);
    put(obj, &obj->u.obj.args[i], v);
    return 0;
}

int taas_module_set_item(taas_value *obj, const taas_value *index, taas_value *v, char key[24], taas_error *err) {
    if (!taas_value_is(obj, "Sequential")) {
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "'%s' object does not support item assignment",
                       taas_value_type_name(obj));
        taas_error_hint(err, taas_value_is_model(obj) ? "assign a model's parts by name (net.fc = ...); a "
                                                          "Sequential's by index (net[-1] = ...)"
                                                        : "tuples and lists cannot be changed: build a new one");
        return -1;
    }
    taas_value *layers = obj->u.obj.args[0];
    size_t at;
    if (item_at(obj, layers->u.seq.n, index, &at, err)) return -1;
    char what[48];
    snprintf(what, sizeof what, "layer %zu", at);
    if (child_ok(obj, what, v, 0, err)) return -1;
    if (layers->refs > 1) {  /* the tuple is shared (by the values of the call that made it): a copy of its own */
        taas_value *copy = taas_tuple_new(layers->u.seq.n);
        if (!copy) return taas_value_oom(err, TAAS_NOPOS, "assigning a layer");
        for (size_t k = 0; k < layers->u.seq.n; k++) copy->u.seq.items[k] = taas_ref(layers->u.seq.items[k]);
        taas_unref(layers);
        obj->u.obj.args[0] = layers = copy;
    }
    snprintf(key, 24, "%zu", at);
    put(obj, &layers->u.seq.items[at], v);
    return 0;
}

static void set_flag(taas_value *v, int flag) {
    v->u.obj.requires_grad = flag;
    taas_children c;
    if (taas_module_children(v, &c)) return;  /* out of memory: the module's own flag rules its children */
    for (size_t i = 0; i < c.n; i++)
        if (!c.item[i].derived && c.item[i].v->type == TAAS_V_OBJECT) set_flag(c.item[i].v, flag);
    taas_children_free(&c);
}

void taas_module_requires_grad(taas_value *obj, int flag) {
    set_flag(obj, flag ? 1 : -1);
}
