#include "scope.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "builtins.h"
#include "errnames.h"

typedef struct var {
    char *name;
    taas_value *v;
} var;

typedef struct loader {
    taas_value *v;
    char *name;  /* the variable it was bound to when registered, or NULL */
} loader;

struct taas_scope {
    var *vars;         /* definition order */
    size_t n, cap;
    size_t *slots;     /* open addressing: index + 1 into vars, 0 = empty */
    size_t nslots;     /* a power of two, at least twice n */
    loader *loaders;
    size_t nloaders, loaders_cap;
};

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;  /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

taas_scope *taas_scope_new(void) {
    return calloc(1, sizeof(taas_scope));
}

void taas_scope_free(taas_scope *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->vars[i].name);
        taas_unref(s->vars[i].v);
    }
    for (size_t i = 0; i < s->nloaders; i++) {
        taas_unref(s->loaders[i].v);
        free(s->loaders[i].name);
    }
    free(s->vars);
    free(s->slots);
    free(s->loaders);
    free(s);
}

/* The slot holding name, or the empty slot where it would go. */
static size_t *find_slot(const taas_scope *s, const char *name) {
    size_t mask = s->nslots - 1;
    for (size_t i = hash(name) & mask;; i = (i + 1) & mask) {
        size_t *slot = &s->slots[i];
        if (!*slot || !strcmp(s->vars[*slot - 1].name, name)) return slot;
    }
}

static int rehash(taas_scope *s, size_t nslots) {
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return -1;
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
    for (size_t i = 0; i < s->n; i++) *find_slot(s, s->vars[i].name) = i + 1;
    return 0;
}

taas_value *taas_scope_get(const taas_scope *s, const char *name) {
    if (!s->nslots) return NULL;
    size_t *slot = find_slot(s, name);
    return *slot ? s->vars[*slot - 1].v : NULL;
}

int taas_scope_set(taas_scope *s, const char *name, taas_value *v) {
    if (s->nslots) {
        size_t *slot = find_slot(s, name);
        if (*slot) {
            var *x = &s->vars[*slot - 1];
            taas_value *old = x->v;
            x->v = taas_ref(v);
            taas_unref(old);
            return 0;
        }
    }
    if ((s->n + 1) * 2 > s->nslots && rehash(s, s->nslots ? s->nslots * 2 : 16)) return -1;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        var *vars = realloc(s->vars, cap * sizeof *vars);
        if (!vars) return -1;
        s->vars = vars;
        s->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return -1;
    s->vars[s->n].name = copy;
    s->vars[s->n].v = taas_ref(v);
    s->n++;
    *find_slot(s, name) = s->n;
    return 0;
}

size_t taas_scope_count(const taas_scope *s) { return s->n; }
const char *taas_scope_name_at(const taas_scope *s, size_t i) { return i < s->n ? s->vars[i].name : NULL; }
taas_value *taas_scope_value_at(const taas_scope *s, size_t i) { return i < s->n ? s->vars[i].v : NULL; }

const char *taas_scope_name_of(const taas_scope *s, const taas_value *v) {
    if (!v) return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (s->vars[i].v == v) return s->vars[i].name;
    return NULL;
}

const char **taas_scope_names(const taas_scope *s, const char *const *more) {
    size_t nm = 0;
    while (more && more[nm]) nm++;
    const char **names = calloc(s->n + nm + 1, sizeof *names);
    if (!names) return NULL;
    for (size_t i = 0; i < s->n; i++) names[i] = s->vars[i].name;
    for (size_t i = 0; i < nm; i++) names[s->n + i] = more[i];
    return names;
}

/* ---- registered loaders ------------------------------------------------------------ */

static int is_loader(const taas_value *v) {
    return v && v->type == TAAS_V_OBJECT && v->u.obj.def && v->u.obj.def->kind == TAAS_K_LOADER;
}

static int not_a_loader(const taas_value *v, const char *fn, taas_error *err) {
    taas_srcpos nowhere = {0, 0};
    taas_error_set(err, TAAS_ERR_TYPE, nowhere, "%s() takes a DataLoader, not '%s'", fn,
                   taas_value_type_name(v));
    taas_error_hint(err, "wrap the dataset in a loader first: %s(DataLoader(data, batch_size=64))", fn);
    return -1;
}

/* The entry for loader: the same value, or one registered under the variable that now
 * holds loader but that the variable no longer holds (the cell was run again). */
static long find_loader(const taas_scope *s, const taas_value *v) {
    for (size_t i = 0; i < s->nloaders; i++)
        if (s->loaders[i].v == v) return (long)i;
    const char *name = taas_scope_name_of(s, v);
    if (!name) return -1;
    for (size_t i = 0; i < s->nloaders; i++) {
        const loader *l = &s->loaders[i];
        if (l->name && !strcmp(l->name, name) && taas_scope_get(s, name) != l->v) return (long)i;
    }
    return -1;
}

int taas_scope_register(taas_scope *s, taas_value *v, taas_error *err) {
    if (!is_loader(v)) return not_a_loader(v, "register", err);
    long i = find_loader(s, v);
    const char *name = taas_scope_name_of(s, v);
    char *copy = name ? strdup(name) : NULL;
    if (name && !copy) goto oom;
    if (i >= 0) {
        loader *l = &s->loaders[i];
        if (l->v != v) {
            taas_unref(l->v);
            l->v = taas_ref(v);
        }
        if (copy) {
            free(l->name);
            l->name = copy;
        }
        return 0;
    }
    if (s->nloaders == s->loaders_cap) {
        size_t cap = s->loaders_cap ? s->loaders_cap * 2 : 4;
        loader *ls = realloc(s->loaders, cap * sizeof *ls);
        if (!ls) goto oom;
        s->loaders = ls;
        s->loaders_cap = cap;
    }
    s->loaders[s->nloaders].v = taas_ref(v);
    s->loaders[s->nloaders].name = copy;
    s->nloaders++;
    return 0;
oom:
    free(copy);
    taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0}, "out of memory while registering a loader");
    return -1;
}

int taas_scope_unregister(taas_scope *s, taas_value *v, taas_error *err) {
    if (!is_loader(v)) return not_a_loader(v, "unregister", err);
    long i = find_loader(s, v);
    if (i < 0) {
        const char *name = taas_scope_name_of(s, v);
        if (name)
            taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0}, "loader '%s' is not registered", name);
        else
            taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0}, "this DataLoader is not registered");
        taas_buf b = TAAS_BUF_INIT;
        for (size_t k = 0; k < s->nloaders; k++) {
            const char *ln = taas_scope_loader_name(s, k);
            if (ln) taas_buf_printf(&b, "%s'%s'", b.len ? ", " : "", ln);
            else taas_buf_printf(&b, "%san unnamed DataLoader", b.len ? ", " : "");
        }
        if (b.len) taas_error_hint(err, "registered loaders: %s", b.data);
        else taas_error_hint(err, "no loader is registered; register(loader) adds one");
        taas_buf_free(&b);
        return -1;
    }
    taas_unref(s->loaders[i].v);
    free(s->loaders[i].name);
    memmove(&s->loaders[i], &s->loaders[i + 1], (s->nloaders - (size_t)i - 1) * sizeof *s->loaders);
    s->nloaders--;
    return 0;
}

size_t taas_scope_loader_count(const taas_scope *s) { return s->nloaders; }

taas_value *taas_scope_loader_at(const taas_scope *s, size_t i) {
    return i < s->nloaders ? s->loaders[i].v : NULL;
}

const char *taas_scope_loader_name(const taas_scope *s, size_t i) {
    if (i >= s->nloaders) return NULL;
    const char *now = taas_scope_name_of(s, s->loaders[i].v);
    return now ? now : s->loaders[i].name;
}
