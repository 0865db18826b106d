/* What leaves the language: the JSON spec the workers receive, and the mime bundle a
 * cell shows. The spec is stable for workers: every parameter present, float
 * parameters as JSON reals, (int, int) pairs and float tuples as arrays. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "modelview.h"
#include "modules.h"
#include "result.h"
#include "rows.h"

static json_t *real_of(const taas_value *v) {
    double x = taas_value_number(v);
    return isfinite(x) ? json_real(x) : json_null(); /* JSON has no inf or nan */
}

static json_t *spec_at(const taas_value *v, int level, taas_walk *w);

/* A parameter's value as the workers read it. */
static json_t *param_spec(const taas_param *p, const taas_value *v, int level, taas_walk *w) {
    if (v->type == TAAS_V_NONE) return json_null();
    switch (p->type) {
    case TAAS_P_FLOAT:
        if (taas_value_is_number(v)) return real_of(v);
        break;
    case TAAS_P_FLOAT_SEQ:
    case TAAS_P_FLOAT_PAIR: {
        json_t *a = json_array();
        if (taas_value_is_number(v)) {
            json_array_append_new(a, real_of(v));
        } else {
            for (size_t i = 0; i < v->u.seq.n; i++) json_array_append_new(a, real_of(v->u.seq.items[i]));
        }
        return a;
    }
    case TAAS_P_INT_PAIR:
        if ((p->flags & TAAS_PF_SPEC_PAIR) && v->type == TAAS_V_INT) {
            json_t *a = json_array();
            json_array_append_new(a, json_integer(v->u.i));
            json_array_append_new(a, json_integer(v->u.i));
            return a;
        }
        break;
    default:
        break;
    }
    return spec_at(v, level, w);
}

/* level: how deep v is. Objects are bounded when made (taas_object_check_size); the bound
 * here keeps a plain container passed in directly from taking the stack. */
static json_t *spec_at(const taas_value *v, int level, taas_walk *w) {
    if (taas_walk_step(w, 1)) return NULL;  /* the spec is lost: its callers see NULL */
    if (!v || level > TAAS_VALUE_MAX_DEPTH) return json_null();
    switch (v->type) {
    case TAAS_V_NONE: return json_null();
    case TAAS_V_BOOL: return json_boolean(v->u.b);
    case TAAS_V_INT: return json_integer((json_int_t)v->u.i);
    case TAAS_V_FLOAT: return real_of(v);
    case TAAS_V_STR: return json_stringn(v->u.str.s, v->u.str.len);
    case TAAS_V_TUPLE:
    case TAAS_V_LIST: {
        json_t *a = json_array();
        for (size_t i = 0; i < v->u.seq.n; i++) json_array_append_new(a, spec_at(v->u.seq.items[i], level + 1, w));
        return a;
    }
    case TAAS_V_OBJECT: {
        const taas_builtin *b = v->u.obj.def;
        json_t *o = json_object();
        json_object_set_new(o, "type", json_string(b->name));
        for (size_t i = 0; i < v->u.obj.nargs && b->params[i].name; i++)
            if (!(b->params[i].flags & TAAS_PF_IGNORED))
                json_object_set_new(o, b->params[i].name, param_spec(&b->params[i], v->u.obj.args[i], level + 1, w));
        /* a frozen (or unfrozen) module: the nearest enclosing-or-own flag rules its parameters */
        if (v->u.obj.requires_grad) json_object_set_new(o, "requires_grad", json_boolean(v->u.obj.requires_grad > 0));
        return o;
    }
    case TAAS_V_BUILTIN: {
        json_t *o = json_object();
        json_object_set_new(o, "builtin", json_string(v->u.fn->name));
        return o;
    }
    case TAAS_V_RESULT: return json_deep_copy(v->u.res.data);
    }
    return json_null();
}

json_t *taas_value_spec_walk(const taas_value *v, taas_walk *w) {
    size_t mark = taas_json_mark();
    json_t *s = spec_at(v, 1, w);
    if (s && !w->failed && !taas_json_lost(mark)) return s;
    json_decref(s);
    if (!w->failed) taas_walk_oom(w);
    return NULL;
}

json_t *taas_value_spec(const taas_value *v) {
    taas_error err;
    taas_walk w;
    taas_walk_begin(&w, "writing a spec", &err);
    return taas_value_spec_walk(v, &w);
}

/* ---- mime bundle ----------------------------------------------------------------- */

static json_t *bundle_of(const taas_value *v) {
    if (v && v->type == TAAS_V_RESULT) return taas_result_mimebundle(v);
    const taas_row *row = v && v->type == TAAS_V_OBJECT ? taas_row_of(v->u.obj.def) : NULL;
    if (taas_value_is_model(v) && (row->children || row->modules)) {  /* Sequential, ResNet, a block, GPT-2 */
        taas_error e;
        return taas_model_summary(v, NULL, 0, &e);  /* without a given sample: NULL only without memory */
    }
    char *text = taas_value_repr(v);
    json_t *b = text ? json_pack("{s:s}", "text/plain", text) : NULL;
    free(text);
    return b;
}

json_t *taas_value_mimebundle(const taas_value *v) {
    size_t mark = taas_json_mark();
    json_t *b = bundle_of(v);
    if (b && json_is_string(json_object_get(b, "text/plain")) && !taas_json_lost(mark)) return b;
    json_decref(b);
    return NULL;
}
