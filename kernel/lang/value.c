/* Values of the cell language: construction, reference counting, Python's truth and
 * equality, and Python's float repr. Text forms (repr, spec, mime) are in repr.c and
 * spec.c. */
#include "value.h"

#include <float.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <poll.h>
#include <unistd.h>

#include "bounds.h"
#include "builtins.h"
#include "errnames.h"
#include "rows.h"
#include "utf8.h"

/* NULL when out of memory: every constructor fails alike, and its callers say so (a
 * TaasMemoryError of the cell, taas_value_oom), never abort. */
static taas_value *alloc(taas_vtype t) {
    taas_value *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->refs = 1;
    v->type = t;
    return v;
}

taas_value *taas_none(void) {
    return alloc(TAAS_V_NONE);
}

taas_value *taas_bool(int b) {
    taas_value *v = alloc(TAAS_V_BOOL);
    if (v) v->u.b = b ? 1 : 0;
    return v;
}

taas_value *taas_int(int64_t i) {
    taas_value *v = alloc(TAAS_V_INT);
    if (v) v->u.i = i;
    return v;
}

taas_value *taas_float(double f) {
    taas_value *v = alloc(TAAS_V_FLOAT);
    if (v) v->u.f = f;
    return v;
}

/* Bytes the session's strings and sequences hold: what taas_value_reserve weighs. */
static size_t held;

static size_t budget(void) {
    const char *env = getenv("TAAS_VALUE_MEMORY");  /* bytes: a smaller budget (the tests') */
    char *end;
    unsigned long long e = env && *env ? strtoull(env, &end, 10) : 0;
    if (e > 0 && !*end) return (size_t)e;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t b = pages > 0 && page > 0 ? taas_size_mul((size_t)pages, (size_t)page) / 2 : (size_t)1 << 32;
    struct rlimit as;  /* an address-space limit (ulimit -v) is the memory there is */
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur / 2 < b)
        b = (size_t)(as.rlim_cur / 2);
    return b;
}

int taas_value_reserve(size_t bytes, const char *what, taas_error *err) {
    if (bytes <= budget() && held <= budget() - bytes) return 0;
    taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0}, "%s would take %.1f MiB, and the session's values "
                   "already hold %.1f MiB of the %.1f MiB the kernel keeps for them", what,
                   (double)bytes / (1 << 20), (double)held / (1 << 20), (double)budget() / (1 << 20));
    taas_error_hint(err, "drop values you no longer need (x = None), or build smaller ones; the kernel keeps "
                         "half this machine's memory (or half its address-space limit) for the session's values");
    return -1;
}

int taas_value_oom(taas_error *err, taas_srcpos pos, const char *doing) {
    taas_error_set(err, TAAS_ERR_MEMORY, pos, "out of memory while %s", doing);
    taas_error_hint(err, "the kernel's memory is spent: drop values you no longer need (x = None), build smaller "
                         "ones, or give the kernel more memory; the session goes on");
    return -1;
}

static _Atomic size_t json_failures;  /* atomic: jansson may allocate on other threads of the kernel */

static void *json_malloc_counted(size_t n) {
    void *p = malloc(n);
    if (!p) json_failures++;
    return p;
}

void taas_json_init(void) {
    json_set_alloc_funcs(json_malloc_counted, free);
}

size_t taas_json_mark(void) {
    return json_failures;
}

int taas_json_lost(size_t mark) {
    return json_failures != mark;
}

taas_value *taas_str(const char *s, size_t len) {
    taas_value *v = alloc(TAAS_V_STR);
    size_t n = 0;
    if (!v || !(v->u.str.s = taas_utf8_sanitize(s ? s : "", s ? len : 0, &n))) {
        free(v);
        return NULL;
    }
    v->u.str.len = n;
    held += n + 1;
    return v;
}

taas_value *taas_str0(const char *s) {
    return taas_str(s, s ? strlen(s) : 0);
}

static taas_value *seq_new(taas_vtype t, size_t n) {
    taas_value *v = alloc(t);
    if (!v || !(v->u.seq.items = calloc(n ? n : 1, sizeof *v->u.seq.items))) {
        free(v);
        return NULL;
    }
    v->u.seq.n = n;
    held += n * sizeof *v->u.seq.items;
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
    if (v) v->u.fn = fn;
    return v;
}

/* Adds v, at `level` of a tree (the root is 1), to its height and size. Objects bring
 * what they measured when made; containers are walked, but never past the bounds, so a
 * deep or widely shared list costs at most about TAAS_VALUE_MAX_NODES steps. */
static void measure(const taas_value *v, int level, int *depth, size_t *nodes) {
    if (!v || *nodes > TAAS_VALUE_MAX_NODES || *depth > TAAS_VALUE_MAX_DEPTH) return;
    if (v->type == TAAS_V_OBJECT) {
        if (level - 1 + v->u.obj.depth > *depth) *depth = level - 1 + v->u.obj.depth;
        *nodes += v->u.obj.nodes;
        return;
    }
    (*nodes)++;
    if (level > *depth) *depth = level;
    if (v->type == TAAS_V_TUPLE || v->type == TAAS_V_LIST)
        for (size_t i = 0; i < v->u.seq.n; i++) measure(v->u.seq.items[i], level + 1, depth, nodes);
}

taas_value *taas_object_new(const struct taas_builtin *def, taas_value **args, size_t nargs) {
    taas_value *v = alloc(TAAS_V_OBJECT);
    if (!v || !(v->u.obj.args = calloc(nargs ? nargs : 1, sizeof *v->u.obj.args))) {
        free(v);
        return NULL;  /* the caller still owns args */
    }
    v->u.obj.def = def;
    if (nargs) memcpy(v->u.obj.args, args, nargs * sizeof *args);
    v->u.obj.nargs = nargs;
    taas_object_remeasure(v);
    return v;
}

void taas_object_remeasure(taas_value *v) {
    int depth = 1;
    size_t nodes = 1;
    for (size_t i = 0; i < v->u.obj.nargs; i++) measure(v->u.obj.args[i], 2, &depth, &nodes);
    /* saturated, so that objects made of refused ones cannot overflow the counts */
    v->u.obj.depth = depth > TAAS_VALUE_MAX_DEPTH ? TAAS_VALUE_MAX_DEPTH + 1 : depth;
    v->u.obj.nodes = nodes > TAAS_VALUE_MAX_NODES ? TAAS_VALUE_MAX_NODES + 1 : nodes;
}

int taas_object_check_size(const taas_value *obj, taas_srcpos pos, taas_error *err) {
    if (!obj || obj->type != TAAS_V_OBJECT) return 0;
    const char *name = obj->u.obj.def->name;
    if (obj->u.obj.depth > TAAS_VALUE_MAX_DEPTH) {
        taas_error_set(err, TAAS_ERR_VALUE, pos, "%s() nests too deeply: more than %d levels of values",
                       name, TAAS_VALUE_MAX_DEPTH);
        taas_error_hint(err, "build it from fewer nested objects; a model is one Sequential of layers");
        return -1;
    }
    if (obj->u.obj.nodes > TAAS_VALUE_MAX_NODES) {
        taas_error_set(err, TAAS_ERR_VALUE, pos, "%s() is too large: it holds more than %zu values", name,
                       TAAS_VALUE_MAX_NODES);
        taas_error_hint(err, "an object counts every value of the objects it holds, once for each time it holds them");
        return -1;
    }
    return 0;
}

taas_value *taas_result_new(const char *kind, json_t *data) {
    taas_value *v = alloc(TAAS_V_RESULT);
    if (!v || !data) {  /* json that could not be made: out of memory too */
        free(v);
        json_decref(data);
        return NULL;
    }
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

/* Drops the reference a dying value held; the item dies too when it was the last, and
 * joins the list of the dead (linked through the values: freeing allocates nothing). */
static void release(taas_value **dead, taas_value *v) {
    if (v && --v->refs == 0) {
        v->dead_next = *dead;
        *dead = v;
    }
}

void taas_unref(taas_value *v) {
    if (!v || --v->refs > 0) return;
    /* a worklist, not recursion: v = [v] a million times must not take the stack; each
     * value is freed once, when its last reference goes, so this is linear however shared */
    v->dead_next = NULL;
    taas_value *dead = v;
    while (dead) {
        taas_value *d = dead;
        dead = d->dead_next;
        switch (d->type) {
        case TAAS_V_STR:
            held -= d->u.str.len + 1;
            free(d->u.str.s);
            break;
        case TAAS_V_TUPLE:
        case TAAS_V_LIST:
            held -= d->u.seq.n * sizeof *d->u.seq.items;
            for (size_t i = 0; i < d->u.seq.n; i++) release(&dead, d->u.seq.items[i]);
            free(d->u.seq.items);
            break;
        case TAAS_V_OBJECT:
            for (size_t i = 0; i < d->u.obj.nargs; i++) release(&dead, d->u.obj.args[i]);
            free(d->u.obj.args);
            taas_weights_drop(d->u.obj.weights, d->u.obj.weights_owned);
            break;
        case TAAS_V_RESULT:
            json_decref(d->u.res.data);
            break;
        default:
            break;
        }
        free(d);
    }
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

/* One pair, not looking into items: -1 unequal, 0 equal, 1 equal so far (two sequences of
 * one length, or two objects of one builtin: their items still to compare). */
static int equal_here(const taas_value *a, const taas_value *b) {
    if (a == b) return 0;
    if (!a || !b) return -1;
    if (is_numeric(a) && is_numeric(b)) {
        if (a->type != TAAS_V_FLOAT && b->type != TAAS_V_FLOAT)
            return (a->type == TAAS_V_INT ? a->u.i : a->u.b) == (b->type == TAAS_V_INT ? b->u.i : b->u.b) ? 0 : -1;
        return taas_value_number(a) == taas_value_number(b) ? 0 : -1;
    }
    if (a->type != b->type) return -1;
    switch (a->type) {
    case TAAS_V_NONE: return 0;
    case TAAS_V_STR:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0 ? 0 : -1;
    case TAAS_V_TUPLE:
    case TAAS_V_LIST: return a->u.seq.n == b->u.seq.n ? 1 : -1;
    case TAAS_V_OBJECT: return a->u.obj.def == b->u.obj.def && a->u.obj.nargs == b->u.obj.nargs ? 1 : -1;
    case TAAS_V_BUILTIN: return a->u.fn == b->u.fn ? 0 : -1;
    case TAAS_V_RESULT:
        return a->u.res.kind == b->u.res.kind && json_equal(a->u.res.data, b->u.res.data) ? 0 : -1;
    default: return -1;
    }
}

/* ---- walks ------------------------------------------------------------------------ */

static int intr_fd = -1;

void taas_walk_set_interrupt_fd(int fd) {
    intr_fd = fd;
}

void taas_walk_begin(taas_walk *w, const char *what, taas_error *err) {
    const char *env = getenv("TAAS_WALK_STEPS");  /* a smaller budget: the tests' */
    char *end;
    unsigned long long e = env && *env ? strtoull(env, &end, 10) : 0;
    *w = (taas_walk){what, 0, e > 0 && !*end ? (size_t)e : TAAS_WALK_STEPS, err, 0};
}

static int (*intr_check)(void *ctx);
static void *intr_ctx;

void taas_walk_set_interrupt_check(int (*check)(void *ctx), void *ctx) {
    intr_check = check;
    intr_ctx = ctx;
}

static int interrupted(void) {
    struct pollfd p = {intr_fd, POLLIN, 0};
    if (intr_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) return 1;
    return intr_check && intr_check(intr_ctx);
}

int taas_walk_step(taas_walk *w, size_t n) {
    if (w->failed) return -1;
    size_t before = w->steps;
    w->steps += n;
    if (w->steps > w->budget) {
        taas_error_set(w->err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "%s takes more than %zu steps: the value is too large or too widely shared", w->what,
                       w->budget);
        w->failed = 1;
        taas_error_hint(w->err, "build a smaller value: a list that holds another list twice, and so on, is a tree "
                                "twice as large at every level");
        return -1;
    }
    if (before / TAAS_WALK_POLL != w->steps / TAAS_WALK_POLL && interrupted()) {
        taas_error_set(w->err, TAAS_ERR_INTERRUPT, TAAS_NOPOS, "interrupted while %s", w->what);
        w->failed = 1;
        return -1;
    }
    return 0;
}

int taas_walk_oom(taas_walk *w) {
    w->failed = 1;
    return taas_value_oom(w->err, TAAS_NOPOS, w->what);
}

/* Pairs of values (b NULL for single values): a stack of what is still to do and the set
 * of what was seen (open addressing), both on the heap only once they outgrow the C stack. */
typedef struct vpair {
    const taas_value *a, *b;
} vpair;

typedef struct vwork {
    vpair *todo;
    size_t n, cap;
    vpair *seen;   /* {NULL, NULL}: free slot */
    size_t nseen, seen_cap;
    vpair local_todo[32], local_seen[64];
} vwork;

static void vwork_init(vwork *k) {
    memset(k, 0, sizeof *k);
    k->todo = k->local_todo;
    k->cap = sizeof k->local_todo / sizeof *k->local_todo;
    k->seen = k->local_seen;
    k->seen_cap = sizeof k->local_seen / sizeof *k->local_seen;
}

static void vwork_free(vwork *k) {
    if (k->todo != k->local_todo) free(k->todo);
    if (k->seen != k->local_seen) free(k->seen);
}

static int vwork_push(vwork *k, const taas_value *a, const taas_value *b) {
    if (k->n == k->cap) {
        size_t cap = k->cap * 2;
        vpair *d = malloc(cap * sizeof *d);
        if (!d) return -1;
        memcpy(d, k->todo, k->n * sizeof *d);
        if (k->todo != k->local_todo) free(k->todo);
        k->todo = d;
        k->cap = cap;
    }
    k->todo[k->n++] = (vpair){a, b};
    return 0;
}

static size_t slot_of(const vpair *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p->a * 0x9E3779B97F4A7C15u ^ (uint64_t)(uintptr_t)p->b * 0xC2B2AE3D27D4EB4Fu;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static void seen_put(vpair *set, size_t cap, vpair p) {
    size_t i = slot_of(&p, cap);
    while (set[i].a) i = (i + 1) & (cap - 1);
    set[i] = p;
}

/* 1 when (a, b) was seen before, 0 when it is new (and now seen), -1 out of memory. */
static int vwork_seen(vwork *k, const taas_value *a, const taas_value *b) {
    vpair p = {a, b};
    for (size_t i = slot_of(&p, k->seen_cap); k->seen[i].a; i = (i + 1) & (k->seen_cap - 1))
        if (k->seen[i].a == a && k->seen[i].b == b) return 1;
    if ((k->nseen + 1) * 2 > k->seen_cap) {  /* at most half full */
        size_t cap = k->seen_cap * 2;
        vpair *d = calloc(cap, sizeof *d);
        if (!d) return -1;
        for (size_t i = 0; i < k->seen_cap; i++)
            if (k->seen[i].a) seen_put(d, cap, k->seen[i]);
        if (k->seen != k->local_seen) free(k->seen);
        k->seen = d;
        k->seen_cap = cap;
    }
    seen_put(k->seen, k->seen_cap, p);
    k->nseen++;
    return 0;
}

static size_t items_of(const taas_value *v, taas_value *const **items) {
    if (v && (v->type == TAAS_V_TUPLE || v->type == TAAS_V_LIST)) {
        *items = v->u.seq.items;
        return v->u.seq.n;
    }
    if (v && v->type == TAAS_V_OBJECT) {
        *items = v->u.obj.args;
        return v->u.obj.nargs;
    }
    *items = NULL;
    return 0;
}

int taas_walk_values(const taas_value *v, int (*visit)(const taas_value *v, void *ctx), void *ctx,
                     taas_walk *w) {
    vwork k;
    vwork_init(&k);
    int rc = vwork_push(&k, v, NULL) ? taas_walk_oom(w) : 0;
    while (!rc && k.n) {
        const taas_value *x = k.todo[--k.n].a;
        if (!x) continue;
        int seen = vwork_seen(&k, x, NULL);
        if (seen < 0) rc = taas_walk_oom(w);
        if (seen) continue;
        if ((rc = visit(x, ctx))) break;
        taas_value *const *items;
        size_t n = x->type == TAAS_V_OBJECT ? 0 : items_of(x, &items);  /* objects were checked when made */
        if ((rc = taas_walk_step(w, n + 1))) break;
        /* items that hold none are visited at once: only containers take room in the set */
        for (size_t i = n; i-- > 0 && !rc;) {
            const taas_value *y = items[i];
            if (y && (y->type == TAAS_V_TUPLE || y->type == TAAS_V_LIST))
                rc = vwork_push(&k, y, NULL) ? taas_walk_oom(w) : 0;
            else if (y)
                rc = visit(y, ctx);
        }
    }
    vwork_free(&k);
    return rc;
}

int taas_value_equal_walk(const taas_value *a, const taas_value *b, taas_walk *w) {
    /* every pair must be equal, so a pair met again (a shared value) needs no second look */
    vwork k;
    vwork_init(&k);
    int equal = vwork_push(&k, a, b) ? taas_walk_oom(w) : 1;
    while (equal == 1 && k.n) {
        vpair p = k.todo[--k.n];
        int r = equal_here(p.a, p.b);
        if (r < 0) equal = 0;
        if (r <= 0) continue;
        int seen = vwork_seen(&k, p.a, p.b);
        if (seen < 0) equal = taas_walk_oom(w);
        if (seen) continue;
        taas_value *const *xs, *const *ys;
        size_t n = items_of(p.a, &xs);
        items_of(p.b, &ys);
        if (taas_walk_step(w, n + 1)) equal = -1;
        for (size_t i = n; equal == 1 && i-- > 0;)  /* pushed backwards, so compared in order */
            if (vwork_push(&k, xs[i], ys[i])) equal = taas_walk_oom(w);
    }
    vwork_free(&k);
    return equal;
}

int taas_value_equal(const taas_value *a, const taas_value *b) {
    taas_error err;
    taas_walk w;
    taas_walk_begin(&w, "comparing two values", &err);
    return taas_value_equal_walk(a, b, &w) == 1;
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
