#include "complete.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "buf.h"
#include "builtins.h"
#include "lexer.h"
#include "modules.h"
#include "value.h"

#define MAX_NAME 256
/* File names offered at most when completing a path (a folder may hold many more). */
#define MAX_PATHS 500

static int ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Where the cursor is: in code (0), a comment (1), or a single-line string literal (2, and
 * *body: where its text starts), where file paths are completed. */
static int in_text(const char *code, size_t cursor, size_t *body) {
    size_t i = 0;
    while (i < cursor && code[i]) {
        char c = code[i];
        if (c == '#') {
            size_t j = i;
            while (code[j] && code[j] != '\n') j++;
            if (cursor <= j) return 1;
            i = j;
            continue;
        }
        if (c == '\'' || c == '"') {
            int triple = code[i + 1] == c && code[i + 2] == c;
            size_t j = i + (triple ? 3 : 1);
            int closed = 0;
            while (code[j]) {
                if (code[j] == '\\' && code[j + 1]) {
                    j += 2;
                    continue;
                }
                if (!triple && code[j] == '\n') break;
                if (code[j] == c && (!triple || (code[j + 1] == c && code[j + 2] == c))) {
                    j += triple ? 3 : 1;
                    closed = 1;
                    break;
                }
                j++;
            }
            if (cursor > i && (cursor < j || (!closed && cursor == j))) {
                *body = i + (triple ? 3 : 1);
                return triple ? 1 : 2;
            }
            i = j;
            continue;
        }
        i++;
    }
    return 0;
}

/* A dotted name as a user may type it: "", "nn", "nn.", "nn.Co"; not "1.5" or ".x". */
static int dotted_ok(const char *s, size_t n) {
    if (n == 0) return 1;
    if (n >= MAX_NAME || !ident_char(s[0]) || (s[0] >= '0' && s[0] <= '9')) return 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] == '.' && s[i - 1] == '.') return 0;
        if (s[i] != '.' && s[i - 1] == '.' && s[i] >= '0' && s[i] <= '9') return 0;
    }
    return 1;
}

static size_t name_start(const char *code, size_t cursor) {
    size_t i = cursor;
    while (i > 0 && (ident_char(code[i - 1]) || code[i - 1] == '.')) i--;
    return i;
}

/* What a builtin is called in a cell, when name (variable or builtin) names one. */
static const taas_builtin *builtin_named(const taas_scope *s, const char *name) {
    taas_value *v = taas_scope_get(s, name);
    if (v) return v->type == TAAS_V_BUILTIN ? v->u.fn : NULL;
    return taas_builtin_find(name);
}

/* The innermost call open at the end of code[0..upto): its callee, the keywords it has
 * already, and whether the text ends where an argument starts ("f(" or "f(1, "). */
typedef struct open_call {
    char callee[MAX_NAME];
    int at_arg_start;
    char used[32][64];
    int nused;
} open_call;

static int find_open_call(const char *code, size_t upto, open_call *oc) {
    memset(oc, 0, sizeof *oc);
    char *head = strndup(code, upto);
    if (!head) return 0;
    taas_tokens toks = TAAS_TOKENS_INIT;
    taas_error err;
    taas_lex(head, &toks, &err);  /* an unfinished cell is the normal case here */
    size_t n = toks.n;
    while (n > 0 && (toks.v[n - 1].kind == TAAS_T_EOF || toks.v[n - 1].kind == TAAS_T_NEWLINE)) n--;
    size_t stack[256];
    int depth = 0, found = 0;
    for (size_t i = 0; i < n; i++) {
        taas_tok k = toks.v[i].kind;
        if ((k == TAAS_T_LPAR || k == TAAS_T_LSQB) && depth < 256) stack[depth++] = i;
        else if ((k == TAAS_T_RPAR || k == TAAS_T_RSQB) && depth > 0) depth--;
    }
    if (depth > 0 && toks.v[stack[depth - 1]].kind == TAAS_T_LPAR) {
        size_t lp = stack[depth - 1], first = lp;
        if (lp > 0 && toks.v[lp - 1].kind == TAAS_T_NAME) {
            first = lp - 1;
            while (first >= 2 && toks.v[first - 1].kind == TAAS_T_DOT && toks.v[first - 2].kind == TAAS_T_NAME)
                first -= 2;
        }
        if (first < lp && toks.v[first].kind == TAAS_T_NAME) {
            taas_buf b = TAAS_BUF_INIT;
            for (size_t i = first; i < lp; i++) taas_buf_puts(&b, toks.v[i].kind == TAAS_T_DOT ? "." : toks.v[i].s);
            if (b.len < sizeof oc->callee) {
                memcpy(oc->callee, b.data, b.len + 1);
                found = 1;
            }
            taas_buf_free(&b);
        }
        taas_tok last = toks.v[n - 1].kind;
        oc->at_arg_start = n - 1 == lp || last == TAAS_T_COMMA;
        int d = 0;
        for (size_t i = lp + 1; i < n; i++) {
            taas_tok k = toks.v[i].kind;
            if (k == TAAS_T_LPAR || k == TAAS_T_LSQB) d++;
            else if (k == TAAS_T_RPAR || k == TAAS_T_RSQB) d--;
            else if (d == 0 && k == TAAS_T_NAME && i + 1 < n && toks.v[i + 1].kind == TAAS_T_ASSIGN &&
                     oc->nused < 32 && strlen(toks.v[i].s) < 64)
                strcpy(oc->used[oc->nused++], toks.v[i].s);
        }
    }
    taas_tokens_free(&toks);
    free(head);
    return found;
}

/* ---- completion -------------------------------------------------------------------- */

static int has_str(const json_t *arr, const char *s) {
    size_t i;
    json_t *x;
    json_array_foreach(arr, i, x) if (!strcmp(json_string_value(x), s)) return 1;
    return 0;
}

static void add(json_t *arr, const char *s) {
    if (!has_str(arr, s)) json_array_append_new(arr, json_string(s));
}

static int cmp_ci(const void *a, const void *b) {
    const char *x = json_string_value(*(json_t *const *)a), *y = json_string_value(*(json_t *const *)b);
    int c = strcasecmp(x, y);
    return c ? c : strcmp(x, y);
}

/* spelling matches typed: completes it up to the end of the next segment
 * ("tor" -> "torch", "nn.Co" -> "nn.Conv2d"). */
static void add_spelling(json_t *pool, const char *spelling, const char *typed, size_t tn) {
    if (strncmp(spelling, typed, tn)) return;
    const char *cut = strchr(spelling + tn, '.');
    if (!cut) {
        add(pool, spelling);
        return;
    }
    char seg[MAX_NAME];
    size_t n = (size_t)(cut - spelling);
    if (n >= sizeof seg) return;
    memcpy(seg, spelling, n);
    seg[n] = '\0';
    add(pool, seg);
}

/* Every way a cell may spell b: Conv2d, nn.Conv2d, torch.nn.Conv2d, ... (whatever
 * taas_builtin_find accepts, so the table stays the one source). */
static void builtin_spellings(const taas_builtin *b, json_t *pool, const char *typed, size_t tn) {
    static const char *const roots[] = {"", "torch.", "torchvision."};
    char buf[MAX_NAME * 2];
    add_spelling(pool, b->name, typed, tn);
    for (const char *m = b->module; m && *m;) {
        for (size_t r = 0; r < sizeof roots / sizeof *roots; r++) {
            snprintf(buf, sizeof buf, "%s%s.%s", roots[r], m, b->name);
            if (taas_builtin_find(buf) == b) add_spelling(pool, buf, typed, tn);
        }
        m = strchr(m, '.');
        if (m) m++;
    }
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Inside a string: the entries of the folder the typed path names (relative to the kernel's
 * working directory, ~ for home) that start with its last part; folders end with '/'. Only
 * that last part is replaced (*start). Hidden entries only when the part starts with '.'; a
 * URL is left alone. */
static void complete_path(const char *typed, size_t n, json_t *out, size_t *start, size_t body) {
    char path[4096], dir[4096];
    if (n >= sizeof path || memchr(typed, '\\', n)) return;
    memcpy(path, typed, n);
    path[n] = '\0';
    if (strstr(path, "://")) return;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dn = slash ? (size_t)(slash - path) + 1 : 0;
    if (dn && path[0] == '~' && (dn == 2 || path[1] == '/') && getenv("HOME"))
        snprintf(dir, sizeof dir, "%s%.*s", getenv("HOME"), (int)dn - 1, path + 1);
    else if (dn)
        snprintf(dir, sizeof dir, "%.*s", (int)dn, path);
    else
        snprintf(dir, sizeof dir, "./");
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[MAX_PATHS];
    size_t k = 0, bn = strlen(base);
    struct dirent *e;
    while ((e = readdir(d)) && k < MAX_PATHS) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || strncmp(e->d_name, base, bn)) continue;
        if (e->d_name[0] == '.' && base[0] != '.') continue;
        char full[8192];
        struct stat st;
        snprintf(full, sizeof full, "%s%s", dir, e->d_name);
        int is_dir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
        size_t len = strlen(e->d_name);
        if (!(names[k] = malloc(len + 2))) break;
        memcpy(names[k], e->d_name, len);
        strcpy(names[k] + len, is_dir ? "/" : "");
        k++;
    }
    closedir(d);
    qsort(names, k, sizeof *names, cmp_str);
    for (size_t i = 0; i < k; i++) {
        add(out, names[i]);
        free(names[i]);
    }
    *start = body + (size_t)(base - path);
}

typedef struct attr_match {
    json_t *out;
    const char *typed;  /* "net.layer1.co" */
    size_t stem;        /* bytes of "net.layer1." */
} attr_match;

static void offer_attr(const char *name, void *ctx) {
    attr_match *m = ctx;
    const char *part = m->typed + m->stem;
    if (strncmp(name, part, strlen(part))) return;
    char full[MAX_NAME * 2];
    snprintf(full, sizeof full, "%.*s%s", (int)m->stem, m->typed, name);
    add(m->out, full);
}

/* What the dotted name t reads up to its byte `upto` when its first segment is a variable
 * (net.layer1.0 ...): a new reference, or NULL when a segment is no attribute. *var: 1
 * when the first segment is a variable. */
static taas_value *read_attrs(const taas_scope *s, const char *t, size_t upto, int *var) {
    char seg[MAX_NAME];
    const char *dot = strchr(t, '.'), *end = t + upto;
    snprintf(seg, sizeof seg, "%.*s", (int)((dot && dot < end ? dot : end) - t), t);
    taas_value *v = taas_scope_get(s, seg);
    *var = v != NULL;
    taas_ref(v);
    while (v && dot && dot < end) {
        const char *next = strchr(dot + 1, '.');
        if (!next || next > end) next = end;
        snprintf(seg, sizeof seg, "%.*s", (int)(next - dot - 1), dot + 1);
        taas_value *child = NULL;
        taas_error err;
        taas_value_attr(v, seg, &child, NULL, &err);  /* none: NULL */
        taas_unref(v);
        v = child;
        dot = next < end ? next : NULL;
    }
    return v;
}

/* "net.f" when net is a variable: the attributes of what the dotted name before the last
 * dot reads (net.fc, net.layer1 ...). 1 when t starts with a variable (then builtins do
 * not apply), 0 when not. */
static int complete_attr(const taas_scope *s, const char *t, json_t *out) {
    const char *last = strrchr(t, '.');
    int var;
    taas_value *v = read_attrs(s, t, (size_t)(last - t), &var);
    attr_match m = {out, t, (size_t)(last - t) + 1};
    if (v) taas_value_attr_each(v, offer_attr, &m);
    taas_unref(v);
    return var;
}

json_t *taas_complete(const taas_scope *s, const char *code, size_t cursor, size_t *start, size_t *end) {
    json_t *out = json_array();
    if (!code) code = "";
    size_t len = strlen(code);
    if (cursor > len) cursor = len;
    while (cursor > 0 && ((unsigned char)code[cursor] & 0xC0) == 0x80) cursor--;  /* not mid-character */
    *start = *end = cursor;
    size_t body = 0;
    int where = out ? in_text(code, cursor, &body) : 1;
    if (where == 2) complete_path(code + body, cursor - body, out, start, body);
    if (where) return out;
    size_t a = name_start(code, cursor);
    const char *typed = code + a;
    size_t tn = cursor - a;
    if (!dotted_ok(typed, tn)) return out;
    *start = a;
    char t[MAX_NAME];
    memcpy(t, typed, tn);
    t[tn] = '\0';
    int dotted = strchr(t, '.') != NULL;

    open_call oc;
    const taas_builtin *callee = NULL;
    if (!dotted && find_open_call(code, a, &oc) && oc.at_arg_start) callee = builtin_named(s, oc.callee);
    for (size_t i = 0; callee && callee->params && callee->params[i].name; i++) {
        const taas_param *p = &callee->params[i];
        int used = 0;
        for (int u = 0; u < oc.nused; u++) used |= !strcmp(oc.used[u], p->name);
        if ((p->flags & (TAAS_PF_VARARGS | TAAS_PF_VARKW)) || used || strncmp(p->name, t, tn)) continue;
        char kw[MAX_NAME];
        snprintf(kw, sizeof kw, "%s=", p->name);
        add(out, kw);
    }
    if (!dotted) {
        for (size_t i = 0; i < taas_scope_count(s); i++)
            if (!strncmp(taas_scope_name_at(s, i), t, tn)) add(out, taas_scope_name_at(s, i));
        static const char *const consts[] = {"True", "False", "None"};
        for (size_t i = 0; i < 3; i++)
            if (!strncmp(consts[i], t, tn)) add(out, consts[i]);
    }
    if (dotted && complete_attr(s, t, out)) return out;
    json_t *pool = json_array();
    size_t nb;
    const taas_builtin *const *all = taas_builtins_all(&nb);
    for (size_t i = 0; pool && i < nb; i++) builtin_spellings(all[i], pool, t, tn);
    add_spelling(pool, "sys.stdout", t, tn);
    add_spelling(pool, "sys.stderr", t, tn);
    size_t np = json_array_size(pool);
    json_t **items = calloc(np ? np : 1, sizeof *items);
    if (items) {
        for (size_t i = 0; i < np; i++) items[i] = json_array_get(pool, i);
        qsort(items, np, sizeof *items, cmp_ci);
        for (size_t i = 0; i < np; i++) add(out, json_string_value(items[i]));
        free(items);
    }
    json_decref(pool);
    return out;
}

/* ---- inspection -------------------------------------------------------------------- */

static json_t *text_bundle(char *text) {
    json_t *b = text ? json_pack("{s:s}", "text/plain", text) : NULL;
    free(text);
    return b;
}

/* A variable's value, or a part of one (net.fc): its repr, type and builtin's help. */
static json_t *describe_value(const char *name, const taas_value *v, int detail) {
    taas_buf b = TAAS_BUF_INIT;
    char *repr = taas_value_repr(v);
    taas_buf_printf(&b, "%s = %s\ntype: %s", name, repr ? repr : "?", taas_value_type_name(v));
    free(repr);
    const taas_builtin *def = v->type == TAAS_V_OBJECT ? v->u.obj.def : v->type == TAAS_V_BUILTIN ? v->u.fn : NULL;
    if (def) {
        char *help = taas_builtin_help_text(def, detail);
        if (help) taas_buf_printf(&b, "\n\n%s", help);
        free(help);
    }
    return text_bundle(taas_buf_take(&b));
}

static json_t *describe(const taas_scope *s, const char *name, int detail) {
    int var;
    taas_value *v = taas_scope_get(s, name);
    if (v) return describe_value(name, v, detail);
    if ((v = read_attrs(s, name, strlen(name), &var))) {
        json_t *b = describe_value(name, v, detail);
        taas_unref(v);
        return b;
    }
    if (var) return NULL;  /* a variable's attribute it does not have */
    if (!strcmp(name, "sys.stdout") || !strcmp(name, "sys.stderr"))
        return text_bundle(strdup(!strcmp(name, "sys.stdout")
                                      ? "sys.stdout = 'stdout'\nprint(..., file=sys.stdout) writes to the cell's standard output"
                                      : "sys.stderr = 'stderr'\nprint(..., file=sys.stderr) writes to the cell's standard error"));
    const taas_builtin *b = taas_builtin_find(name);
    return b ? text_bundle(taas_builtin_help_text(b, detail)) : NULL;
}

json_t *taas_inspect(const taas_scope *s, const char *code, size_t cursor, int detail) {
    if (!code) return NULL;
    size_t len = strlen(code);
    if (cursor > len) cursor = len;
    size_t body;
    if (in_text(code, cursor, &body)) return NULL;
    size_t a = name_start(code, cursor), b = cursor;
    while (ident_char(code[b]) || code[b] == '.') b++;
    while (b > a && code[b - 1] == '.') b--;
    json_t *found = NULL;
    if (b > a && dotted_ok(code + a, b - a)) {
        char name[MAX_NAME];
        memcpy(name, code + a, b - a);
        name[b - a] = '\0';
        found = describe(s, name, detail);
    }
    open_call oc;
    if (!found && find_open_call(code, a, &oc)) found = describe(s, oc.callee, detail);
    return found;
}
