/* Brace expansion of shard lists, as WebDataset does it (the braceexpand package):
 * "{a,b}" alternatives, "{0000..0099}" integer ranges keeping zero padding, "{a..e}" letter
 * ranges, an optional step ("{0..10..2}"), nesting, backslash escapes; a brace without a
 * comma or a range stays as written. Whitespace and "::" outside braces separate patterns. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "fetch.h"
#include "utf8.h"

#define MAX_NAMES 1000000

typedef taas_strvec strv;

typedef struct ctx {
    const char *pattern; /* the whole one, for messages */
    taas_error *err;
} ctx;

static char *dupn(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static int oom(ctx *c) {
    taas_error_set(c->err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0},
                   "out of memory expanding a shard pattern");
    taas_error_hint(c->err, "use fewer shards");
    return -1;
}

static int too_many(ctx *c, unsigned long long n) {
    char q[200];
    taas_error_set(c->err, TAAS_ERR_VALUE, (taas_srcpos){0, 0},
                   "'%s' expands to %s%llu names; at most %d are allowed",
                   taas_utf8_clip(q, sizeof q, c->pattern, strlen(c->pattern), 120),
                   n > MAX_NAMES ? "more than " : "", n > MAX_NAMES ? (unsigned long long)MAX_NAMES : n,
                   MAX_NAMES);
    taas_error_hint(c->err, "check the range bounds, e.g. shards-{0000..0099}.tar");
    return -1;
}

/* out = out × item: every string of out followed by every string of item. */
static int product(ctx *c, strv *out, const strv *item) {
    if ((unsigned long long)out->n * item->n > MAX_NAMES)
        return too_many(c, (unsigned long long)out->n * item->n);
    strv r = {0};
    for (size_t i = 0; i < out->n; i++) {
        size_t a = strlen(out->v[i]);
        for (size_t k = 0; k < item->n; k++) {
            size_t b = strlen(item->v[k]);
            char *s = malloc(a + b + 1);
            if (s) {
                memcpy(s, out->v[i], a);
                memcpy(s + a, item->v[k], b + 1);
            }
            if (taas_strvec_push(&r, s)) {
                taas_strvec_clear(&r);
                return oom(c);
            }
        }
    }
    taas_strvec_clear(out);
    *out = r;
    return 0;
}

static int pattern(ctx *c, const char *s, size_t n, strv *out);

/* "-?digits" exactly; 0 with the value. */
static int parse_int(const char *s, size_t n, long long *v) {
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == n) return -1;
    for (size_t k = i; k < n; k++)
        if (!isdigit((unsigned char)s[k])) return -1;
    char buf[32];
    if (n >= sizeof buf) return -2;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    *v = strtoll(buf, NULL, 10);
    return errno ? -2 : 0;
}

/* "{A..B}" or "{A..B..S}" (A, B integers or single letters): 1 and the names; 0 when expr is
 * not a range; -1 on error. */
static int range(ctx *c, const char *e, size_t n, strv *out) {
    const char *d1 = NULL, *d2 = NULL;
    for (size_t i = 0; i + 1 < n; i++)
        if (e[i] == '.' && e[i + 1] == '.') {
            if (!d1) d1 = e + i;
            else if (!d2) d2 = e + i;
            else return 0;
            i++;
        }
    if (!d1) return 0;
    const char *l = e, *r = d1 + 2, *st = d2 ? d2 + 2 : NULL;
    size_t ln = (size_t)(d1 - e), rn = (size_t)((d2 ? d2 : e + n) - r);
    long long step = 1;
    if (st) {
        const char *sp = st[0] == '-' ? st + 1 : st; /* the sign of a step is ignored */
        long long sv;
        int k = parse_int(sp, (size_t)(e + n - sp), &sv);
        if (k == -1 || sp[0] == '-') return 0;
        if (k == -2) return too_many(c, (unsigned long long)MAX_NAMES + 1);
        step = sv ? sv : 1;
    }
    long long a, b;
    int ka = ln && rn ? parse_int(l, ln, &a) : -1, kb = ln && rn ? parse_int(r, rn, &b) : -1;
    if (ka == 0 && kb == 0) {
        /* braceexpand pads when a bound other than "0" starts with 0 */
        int lz = (l[0] == '0' || (l[0] == '-' && l[1] == '0')) && strncmp(l, "0", ln) &&
                 strncmp(l, "-0", ln);
        int rz = (r[0] == '0' || (r[0] == '-' && r[1] == '0')) && strncmp(r, "0", rn) &&
                 strncmp(r, "-0", rn);
        int padding = lz || rz ? (int)(ln > rn ? ln : rn) : 0;
        unsigned long long span = a <= b ? (unsigned long long)b - (unsigned long long)a
                                         : (unsigned long long)a - (unsigned long long)b;
        unsigned long long count = span / (unsigned long long)step + 1;
        if (count > MAX_NAMES) return too_many(c, count);
        for (unsigned long long i = 0; i < count; i++) {
            unsigned long long d = i * (unsigned long long)step; /* <= span: no overflow */
            long long v = (long long)(a <= b ? (unsigned long long)a + d
                                             : (unsigned long long)a - d);
            char *s = NULL;
            if (asprintf(&s, "%0*lld", padding, v) < 0) s = NULL;
            if (taas_strvec_push(out, s)) return oom(c);
        }
        return 1;
    }
    if (ka == -2 || kb == -2) {
        if ((ka == 0 || ka == -2) && (kb == 0 || kb == -2))
            return too_many(c, (unsigned long long)MAX_NAMES + 1);
        return 0;
    }
    if (ln == 1 && rn == 1 && isalpha((unsigned char)l[0]) && isalpha((unsigned char)r[0]) &&
        isascii(l[0]) && isascii(r[0])) {
        int x = l[0], y = r[0];
        for (int v = x; x <= y ? v <= y : v >= y; v += x <= y ? (int)step : -(int)step) {
            char ch[2] = {(char)v, '\0'};
            if (taas_strvec_push(out, dupn(ch, 1))) return oom(c);
            if (step > 127) break;
        }
        return 1;
    }
    return 0;
}

/* The inside of a brace: a range, or comma-separated patterns; 0 when it is neither. */
static int expression(ctx *c, const char *e, size_t n, strv *out) {
    int r = range(c, e, n, out);
    if (r != 0) return r;
    size_t start = 0;
    int depth = 0, commas = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i] == '\\') {
            i++;
            continue;
        }
        if (e[i] == '{') depth++;
        else if (e[i] == '}') depth--;
        else if (e[i] == ',' && depth == 0) {
            strv part = {0};
            if (pattern(c, e + start, i - start, &part)) return -1;
            for (size_t k = 0; k < part.n; k++) {
                if (out->n >= MAX_NAMES) {
                    taas_strvec_clear(&part);
                    return too_many(c, (unsigned long long)MAX_NAMES + 1);
                }
                if (taas_strvec_push(out, part.v[k])) {
                    part.v[k] = NULL;
                    taas_strvec_clear(&part);
                    return oom(c);
                }
                part.v[k] = NULL;
            }
            taas_strvec_clear(&part);
            start = i + 1;
            commas++;
        }
    }
    if (!commas) return 0;
    strv part = {0};
    if (pattern(c, e + start, n - start, &part)) return -1;
    for (size_t k = 0; k < part.n; k++) {
        if (out->n >= MAX_NAMES || taas_strvec_push(out, part.v[k])) {
            part.v[k] = NULL;
            taas_strvec_clear(&part);
            return out->n >= MAX_NAMES ? too_many(c, (unsigned long long)MAX_NAMES + 1) : oom(c);
        }
        part.v[k] = NULL;
    }
    taas_strvec_clear(&part);
    return 1;
}

static int literal(ctx *c, strv *acc, const char *s, size_t n) {
    strv one = {0};
    if (taas_strvec_push(&one, dupn(s, n))) return oom(c);
    int rc = product(c, acc, &one);
    taas_strvec_clear(&one);
    return rc;
}

static int unbalanced(ctx *c, const char *what, size_t at) {
    char q[200];
    taas_error_set(c->err, TAAS_ERR_VALUE, (taas_srcpos){0, 0}, "%s at position %zu in '%s'",
                   what, at + 1, taas_utf8_clip(q, sizeof q, c->pattern, strlen(c->pattern), 120));
    taas_error_hint(c->err, "braces must pair up, as in shards-{0000..0099}.tar or {train,val}.tar; "
                            "write \\{ or \\} for a literal brace");
    return -1;
}

/* s[0..n) with its braces expanded (escapes still in). */
static int pattern(ctx *c, const char *s, size_t n, strv *out) {
    strv acc = {0};
    if (taas_strvec_push(&acc, dupn("", 0))) return oom(c);
    size_t start = 0, open_at = 0;
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') {
            i++;
            continue;
        }
        if (s[i] == '{') {
            if (depth == 0) {
                if (i > start && literal(c, &acc, s + start, i - start)) goto fail;
                start = i;
                open_at = i;
            }
            depth++;
        } else if (s[i] == '}') {
            if (depth == 0) {
                unbalanced(c, "'}' without an opening '{'", (size_t)(s + i - c->pattern));
                goto fail;
            }
            if (--depth == 0) {
                strv item = {0};
                int r = expression(c, s + start + 1, i - start - 1, &item);
                if (r < 0) {
                    taas_strvec_clear(&item);
                    goto fail;
                }
                if (r == 0) {
                    /* not expandable: the braces stay, what is inside is expanded */
                    strv inner = {0}, lb = {0}, rb = {0};
                    int bad = pattern(c, s + start + 1, i - start - 1, &inner);
                    if (!bad) bad = taas_strvec_push(&lb, dupn("{", 1)) || taas_strvec_push(&rb, dupn("}", 1));
                    if (!bad) bad = product(c, &acc, &lb) || product(c, &acc, &inner) ||
                                    product(c, &acc, &rb);
                    int was_set = taas_error_is_set(c->err);
                    taas_strvec_clear(&inner);
                    taas_strvec_clear(&lb);
                    taas_strvec_clear(&rb);
                    if (bad) {
                        if (!was_set) oom(c);
                        goto fail;
                    }
                } else {
                    int bad = product(c, &acc, &item);
                    taas_strvec_clear(&item);
                    if (bad) goto fail;
                }
                start = i + 1;
            }
        }
    }
    if (depth != 0) {
        unbalanced(c, "unclosed '{'", (size_t)(s + open_at - c->pattern));
        goto fail;
    }
    if (start < n && literal(c, &acc, s + start, n - start)) goto fail;
    *out = acc;
    return 0;
fail:
    taas_strvec_clear(&acc);
    return -1;
}

/* Drops the backslash of every escape: "\{" -> "{". */
static void unescape(char *s) {
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '\\' && p[1]) p++;
        *o++ = *p;
    }
    *o = '\0';
}

char **taas_brace_expand(const char *pat, taas_error *err) {
    ctx c = {pat ? pat : "", err};
    strv all = {0};
    const char *s = c.pattern;
    size_t n = strlen(s), start = 0;
    int depth = 0;
    /* split at whitespace and "::" outside braces */
    for (size_t i = 0; i <= n; i++) {
        int sep = 0;
        if (i < n && s[i] == '\\' && i + 1 < n) {
            i++;
            continue;
        }
        if (i < n && s[i] == '{') depth++;
        if (i < n && s[i] == '}' && depth > 0) depth--;
        if (i == n) sep = 1;
        else if (depth == 0 && isspace((unsigned char)s[i])) sep = 1;
        else if (depth == 0 && s[i] == ':' && s[i + 1] == ':') sep = 2;
        if (!sep) continue;
        if (i > start) {
            strv one = {0};
            if (pattern(&c, s + start, i - start, &one)) goto fail;
            if (all.n + one.n > MAX_NAMES) {
                taas_strvec_clear(&one);
                too_many(&c, (unsigned long long)all.n + one.n);
                goto fail;
            }
            for (size_t k = 0; k < one.n; k++) {
                unescape(one.v[k]);
                if (taas_strvec_push(&all, one.v[k])) {
                    one.v[k] = NULL;
                    taas_strvec_clear(&one);
                    oom(&c);
                    goto fail;
                }
                one.v[k] = NULL;
            }
            taas_strvec_clear(&one);
        }
        if (sep == 2) i++;
        start = i + 1;
    }
    if (all.n == 0) {
        char q[200];
        taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0}, "no names in '%s'",
                       taas_utf8_clip(q, sizeof q, s, n, 120));
        taas_error_hint(err, "give one or more paths or URLs, e.g. shards-{0000..0099}.tar");
        return NULL;
    }
    char **v = realloc(all.v, (all.n + 1) * sizeof *v);
    if (!v) {
        oom(&c);
        goto fail;
    }
    v[all.n] = NULL;
    return v;
fail:
    taas_strvec_clear(&all);
    return NULL;
}

void taas_strv_free(char **v) {
    if (!v) return;
    for (char **p = v; *p; p++) free(*p);
    free(v);
}

void taas_strvec_clear(taas_strvec *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

int taas_strvec_push(taas_strvec *s, char *str) {
    if (!str) return -1;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        char **p = realloc(s->v, cap * sizeof *p);
        if (!p) {
            free(str);
            return -1;
        }
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = str;
    return 0;
}
