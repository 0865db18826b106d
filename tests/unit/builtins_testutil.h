/* Helpers for the builtin-table tests: call a builtin by name with arguments written as
 * "literal" or "keyword=literal" (literals as in the table's defaults), "$N" standing for
 * objs[N]. Each argument gets column = its index + 1 on line 1, so an error's position
 * tells which argument it points at. */
#ifndef TAAS_BUILTINS_TESTUTIL_H
#define TAAS_BUILTINS_TESTUTIL_H

#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "rows.h"

#define TU_MAX_ARGS 16

static inline taas_value *tu_literal(const char *text, taas_value *const *objs) {
    if (text[0] == '$') {
        if (!objs) abort(); /* "$N" in a test that gives no objects */
        return taas_ref(objs[atoi(text + 1)]);
    }
    if ((text[0] == '[' || text[0] == '(') && strchr(text, '$')) {
        /* "[$0, $1]": a list (or tuple) of objects */
        if (!objs) abort();
        size_t n = 0;
        for (const char *p = text; *p; p++) n += *p == '$';
        taas_value *v = text[0] == '[' ? taas_list_new(n) : taas_tuple_new(n);
        const char *p = text;
        for (size_t i = 0; i < n; i++) {
            p = strchr(p, '$') + 1;
            v->u.seq.items[i] = taas_ref(objs[atoi(p)]);
        }
        return v;
    }
    return taas_literal_parse(text);
}

/* Calls builtin `name`; args is NULL-terminated. Returns the value, or NULL with err set. */
static inline taas_value *tu_call_ctx(taas_call_ctx *cx, const char *name, const char *const *args,
                                      taas_value *const *objs) {
    const taas_builtin *b = taas_builtin_find(name);
    if (!b) return NULL;
    taas_arg a[TU_MAX_ARGS];
    char kw[TU_MAX_ARGS][64];
    size_t n = 0;
    for (; args && args[n] && n < TU_MAX_ARGS; n++) {
        const char *s = args[n];
        const char *eq = strchr(s, '=');
        /* a keyword is an identifier before '='; "'a=b'" is a string literal */
        int is_kw = eq && s[0] != '\'' && s[0] != '"' && s[0] != '(' && s[0] != '[';
        if (is_kw) {
            size_t l = (size_t)(eq - s);
            memcpy(kw[n], s, l);
            kw[n][l] = '\0';
            a[n].keyword = kw[n];
            a[n].value = tu_literal(eq + 1, objs);
        } else {
            a[n].keyword = NULL;
            a[n].value = tu_literal(s, objs);
        }
        if (!a[n].value) abort(); /* a bad literal in a test */
        a[n].pos.line = 1;
        a[n].pos.col = (int)n + 1;
    }
    cx->pos.line = 1;
    cx->pos.col = 100;
    taas_value *out = NULL;
    int rc = taas_builtin_call(b, a, n, cx, &out);
    for (size_t i = 0; i < n; i++) taas_unref(a[i].value);
    return rc ? NULL : out;
}

static inline taas_value *tu_call(taas_error *err, const char *name, const char *const *args,
                                  taas_value *const *objs) {
    taas_call_ctx cx;
    memset(&cx, 0, sizeof cx);
    cx.err = err;
    cx.wait_until = -1;
    taas_error_clear(err);
    return tu_call_ctx(&cx, name, args, objs);
}

/* TU(err, "Conv2d", "1", "32", "3") */
#define TU(err, name, ...) tu_call((err), (name), (const char *const[]){__VA_ARGS__, NULL}, NULL)
#define TU0(err, name) tu_call((err), (name), NULL, NULL)
/* TUO(err, "Sequential", objs, "$0", "$1") */
#define TUO(err, name, objs, ...) tu_call((err), (name), (const char *const[]){__VA_ARGS__, NULL}, (objs))

#endif
