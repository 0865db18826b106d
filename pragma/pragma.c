/* The header directives of a cell (docs/pragma.md): `#!CONFIG` and `#pragma taas ...`.
 * The header is the blank and comment lines before the first statement; the statements
 * belong to the interpreter, but a directive among them is an error, so the body is
 * scanned for comment lines (outside strings) too. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "errnames.h"
#include "pragma.h"
#include "suggest.h"
#include "utf8.h"

#define PRAGMA_ERROR TAAS_ERR_PRAGMA
#define SYNOPSIS "#pragma taas --gpus N [--cpus M|auto[:MAX]] [--units U] [--budget B] [--detach]"
#define FLAGS_HELP "#pragma taas takes --gpus N (1 to 4096, required), --cpus M (1 to 8, default 1) " \
                   "or --cpus auto[:MAX] (a pool that sizes itself), --units U (samples, at least 1; " \
                   "default: no limit), --budget B (an amount such as 25 or a time such as 2h; " \
                   "default: no limit) and --detach (no value)"
#define BUDGET_FORMS "an amount above 0 in the unit of the configuration file's price_per_hour " \
                     "(25, 2.50, 1_000), or a time: a number with s, m, h or d right after it " \
                     "(45s, 90m, 1.5h, 2d)"
#define MAX_BUDGET_MONEY 9007199254740992.0  /* 2^53: every whole amount below it is exact */
#define MAX_BUDGET_SECONDS (365.0 * 86400)

enum { F_GPUS, F_CPUS, F_UNITS, F_BUDGET, F_DETACH, NFLAGS };

/* what a flag's value is */
enum { V_INT, V_SWITCH, V_BUDGET };

static const struct flag_def {
    const char *name;
    const char *stem;   /* what a misspelling most likely still contains */
    int kind;           /* V_INT: a whole number from lo to hi; V_SWITCH: no value; V_BUDGET */
    long long lo, hi;
    const char *range;  /* for the hint of an out-of-range value, or what a switch does */
} FLAGS[NFLAGS] = {
    {"--gpus", "gpu", V_INT, 1, 4096, "--gpus takes 1 to 4096: the GPUs to train on, one rank each"},
    {"--cpus", "cpu", V_INT, 1, 8,
     "--cpus takes 1 to 8: the loader workers for each registered loader; or auto (auto:MAX) "
     "for a pool that sizes itself, within MAX (1 to 8)"},
    {"--units", "unit", V_INT, 1, LLONG_MAX,
     "--units takes a number of samples from 1 to 9223372036854775807, e.g. --units 20_480_000"},
    {"--budget", "budget", V_BUDGET, 0, 0, "--budget takes " BUDGET_FORMS "; at most 365 days"},
    {"--detach", "detach", V_SWITCH, 0, 0,
     "--detach takes no value: the fit keeps running when the kernel stops"},
};

typedef struct line {
    const char *s;  /* first byte */
    size_t n;       /* bytes, without "\n" or "\r\n" */
    int no;         /* 1-based */
} line;

typedef enum { D_COMMENT, D_PRAGMA, D_CONFIG } directive;

/* What the header scan found, for the checks that need the whole header. */
typedef struct scan {
    taas_pragma *out;
    taas_error *err;
    line pragma_line;
    const char *gpus_at;  /* the --gpus value */
    size_t gpus_n;
    line config_line;
    const char *config_hash;  /* the '#' of #!NAME, NULL without one */
    const char *config_name;
    size_t config_n;
} scan;

static int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r';
}

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && is_ws(*p)) p++;
    return p;
}

static const char *word_end(const char *p, const char *end) {
    while (p < end && !is_ws(*p)) p++;
    return p;
}

static int word_is(const char *p, const char *end, const char *w) {
    size_t n = strlen(w);
    return (size_t)(end - p) == n && memcmp(p, w, n) == 0;
}

static line line_at(const char *s, int no) {
    size_t n = strcspn(s, "\n");
    if (n > 0 && s[n - 1] == '\r') n--;
    return (line){s, n, no};
}

/* Splits off the next line; 0 after the last. */
static int next_line(const char **p, int *no, line *l) {
    if (!*p) return 0;
    *l = line_at(*p, ++*no);
    const char *nl = strchr(*p, '\n');
    *p = nl ? nl + 1 : NULL;
    return 1;
}

/* s[0..n) as a pragma message quotes it: at most 40 code points. */
static const char *show(char *dst, size_t cap, const char *s, size_t n) {
    return taas_utf8_clip(dst, cap, s, n, 40);
}

static int fail(taas_error *err, const line *l, const char *at, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A TaasPragmaError underlining at[0..n) of line l. */
static int fail(taas_error *err, const line *l, const char *at, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    taas_srcpos pos = {l->no, (int)taas_utf8_count(l->s, (size_t)(at - l->s)) + 1};
    taas_error_vset(err, PRAGMA_ERROR, pos, fmt, ap);
    va_end(ap);
    size_t w = taas_utf8_count(at, n);
    err->width = w ? (int)w : 1;
    return -1;
}

/* Kind of the comment at t ('#'); *after gets the text after "#pragma" or "#!". A pragma is
 * "#pragma" or "# pragma" as a whole word, so that "# pragma: no cover" stays a comment. */
static directive classify(const char *t, const char *end, const char **after) {
    if (t + 1 < end && t[1] == '!') {
        *after = t + 2;
        return D_CONFIG;
    }
    const char *w = skip_ws(t + 1, end);
    const char *we = word_end(w, end);
    if (word_is(w, we, "pragma")) {
        *after = we;
        return D_PRAGMA;
    }
    return D_COMMENT;
}

/* Checks that "#pragma" at hash is followed by "taas"; *taas_end gets the end of that word. */
static int pragma_name(const line *l, const char *hash, const char *after, const char **taas_end,
                       taas_error *err) {
    const char *end = l->s + l->n;
    const char *w = skip_ws(after, end);
    const char *we = word_end(w, end);
    char shown[192];
    if (w == end || *w == '#') {
        fail(err, l, hash, (size_t)(after - hash), "#pragma without a name: expected #pragma taas");
        taas_error_hint(err, "a taas cell begins with `" SYNOPSIS "`");
        return -1;
    }
    if (!word_is(w, we, "taas")) {
        fail(err, l, w, (size_t)(we - w), "unknown pragma '%s': expected #pragma taas",
             show(shown, sizeof shown, w, (size_t)(we - w)));
        if (we - w == 4 && strncasecmp(w, "taas", 4) == 0)
            taas_error_hint(err, "write taas in lower case: `" SYNOPSIS "`");
        else
            taas_error_hint(err, "write `" SYNOPSIS "`; other pragmas (such as #pragma omp) "
                                 "are not supported");
        return -1;
    }
    *taas_end = we;
    return 0;
}

/* 0 and *v for an integer (digits, optionally grouped by single underscores: 1_000; a '-'
 * makes it negative, for the range's error); -1 when the text is not one, "+1" included: no
 * number of the pragma takes a '+' (one rule for every flag); 1 when it does not fit in a
 * long long. */
static int parse_int(const char *s, size_t n, long long *v) {
    size_t i = 0;
    int neg = 0;
    if (i < n && s[i] == '-') neg = 1, i++;
    size_t first = i;
    if (i == n) return -1;
    unsigned long long acc = 0;
    int over = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (c == '_') {
            if (i == first || s[i - 1] < '0' || s[i - 1] > '9' || i + 1 == n || s[i + 1] < '0' ||
                s[i + 1] > '9')
                return -1;
            continue;
        }
        if (c < '0' || c > '9') return -1;
        if (acc > ((unsigned long long)LLONG_MAX - (unsigned long long)(c - '0')) / 10)
            over = 1;
        else
            acc = acc * 10 + (unsigned long long)(c - '0');
    }
    if (over) return 1;
    *v = neg ? -(long long)acc : (long long)acc;
    return 0;
}

/* Length of a typographic dash (en, em, minus sign) at p, 0 for none: what word processors
 * and some chat tools turn "--" into. */
static size_t fancy_dash(const char *p, const char *end) {
    if (end - p >= 3 && (unsigned char)p[0] == 0xE2 &&
        (((unsigned char)p[1] == 0x80 && ((unsigned char)p[2] == 0x93 || (unsigned char)p[2] == 0x94)) ||
         ((unsigned char)p[1] == 0x88 && (unsigned char)p[2] == 0x92)))
        return 3;
    return 0;
}

static int unknown_flag(const line *l, const char *p, size_t n, int fancy, taas_error *err) {
    const char *end = p + n, *s = p;
    for (;;) {
        size_t d = fancy_dash(s, end);
        if (d) s += d;
        else if (s < end && *s == '-') s++;
        else break;
    }
    const char *names[NFLAGS];
    for (int f = 0; f < NFLAGS; f++) names[f] = FLAGS[f].name + 2;
    int close = taas_suggest(s, (size_t)(end - s), names, NFLAGS);
    const char *guess = close >= 0 ? FLAGS[close].name : NULL;
    /* "-g", "--gpu": a prefix; "--num-gpus": the stem inside */
    for (int f = 0; f < NFLAGS && !guess; f++)
        if (s < end && strncasecmp(s, FLAGS[f].name + 2, (size_t)(end - s)) == 0) guess = FLAGS[f].name;
    for (int f = 0; f < NFLAGS && !guess; f++) {
        size_t k = strlen(FLAGS[f].stem);
        for (const char *q = s; q + k <= end && !guess; q++)
            if (strncasecmp(q, FLAGS[f].stem, k) == 0) guess = FLAGS[f].name;
    }
    char shown[192];
    fail(err, l, p, n, "unknown flag '%s'", show(shown, sizeof shown, p, n));
    char mean[64] = "";
    if (guess) snprintf(mean, sizeof mean, "did you mean %s? ", guess);
    taas_error_hint(err, "%s%s%s", mean,
                    fancy ? "flags begin with two ASCII hyphens (--), not a typographic dash; " : "",
                    FLAGS_HELP);
    return -1;
}

static int is_flag(const char *p, const char *end) {
    return end - p >= 2 && p[0] == '-' && p[1] == '-';
}

/* The start of a hint for a value written with a '+', which no number here takes. */
static const char *sign_note(const char *v, size_t vn) {
    return vn && v[0] == '+' ? "write the number without a sign. " : "";
}

/* ---- --cpus auto[:MAX] ---- */

/* --cpus auto or auto:MAX at v[0..vn): 0 when it is one (out filled), 1 when the value is
 * something else (a number, or a mistake the caller reports), -1 with an error. */
static int cpus_auto(taas_pragma *out, const line *l, const char *v, size_t vn, taas_error *err) {
    if (vn < 4 || memcmp(v, "auto", 4) != 0 || (vn > 4 && v[4] != ':')) return 1;
    out->cpus = 1;
    out->cpus_auto = 1;
    out->cpus_max = 0;
    if (vn == 4) return 0;
    const char *m = v + 5;
    size_t mn = vn - 5;
    char shown[192];
    if (mn == 0) {
        fail(err, l, v, vn, "--cpus auto: has no MAX after the ':'");
        taas_error_hint(err, "write the most loader workers for each registered loader after the "
                             "colon, e.g. --cpus auto:4, or write --cpus auto for the default (8); "
                             "auto:MAX takes 1 to 8");
        return -1;
    }
    long long val;
    int r = parse_int(m, mn, &val);
    if (r < 0) {
        fail(err, l, m, mn, "--cpus auto:MAX needs a whole number, not '%s'",
             show(shown, sizeof shown, m, mn));
        taas_error_hint(err, "%swrite digits, optionally grouped by underscores, e.g. --cpus auto:4; "
                             "auto:MAX takes 1 to 8", sign_note(m, mn));
        return -1;
    }
    if (r > 0 || val < 1 || val > 8) {
        fail(err, l, m, mn, "--cpus %s is out of range", show(shown, sizeof shown, v, vn));
        taas_error_hint(err, "auto:MAX takes 1 to 8: the most loader workers for each registered "
                             "loader that the pool may grow to, e.g. --cpus auto:4");
        return -1;
    }
    out->cpus_max = (int)val;
    return 0;
}

/* For a --cpus value that is not a number: "auto" when it looks like a misspelt auto
 * ("Auto", "automatic", "AUTO:4", "auto4"), written into dst; NULL otherwise. */
static const char *auto_guess(char *dst, size_t cap, const char *v, size_t vn) {
    const char *colon = memchr(v, ':', vn);
    size_t head = colon ? (size_t)(colon - v) : vn;
    static const char *const AUTO[] = {"auto"};
    if (!(head >= 4 && strncasecmp(v, "auto", 4) == 0) && taas_suggest(v, head, AUTO, 1) < 0) return NULL;
    char rest[64] = "";
    size_t i = 4;
    while (i < head && v[i] >= '0' && v[i] <= '9') i++;
    if (colon && vn - head <= 16)
        snprintf(rest, sizeof rest, "%.*s", (int)(vn - head), colon);
    else if (!colon && head > 4 && i == head && head - 4 <= 16 && strncasecmp(v, "auto", 4) == 0)
        snprintf(rest, sizeof rest, ":%.*s", (int)(head - 4), v + 4);  /* "auto4": auto:4 */
    snprintf(dst, cap, "auto%s", rest);
    return dst;
}

/* ---- --budget AMOUNT or DURATION ---- */

/* Bytes of a currency sign at p ($ € £ ¥ ₹), 0 for none. */
static size_t currency_sign(const char *p, const char *end) {
    const unsigned char *u = (const unsigned char *)p;
    if (p < end && *p == '$') return 1;
    if (end - p >= 2 && u[0] == 0xC2 && (u[1] == 0xA3 || u[1] == 0xA5)) return 2;
    if (end - p >= 3 && u[0] == 0xE2 && u[1] == 0x82 && (u[2] == 0xAC || u[2] == 0xB9)) return 3;
    return 0;
}

static int all_letters(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))) return 0;
    return 1;
}

/* The duration unit a word spells out ("hours", "min", "S"): 's', 'm', 'h', 'd'; 0 for none.
 * A lone "M" is no guess: it may as well mean a million. */
static char unit_spelled(const char *s, size_t n) {
    static const struct { const char *word; char unit; } WORDS[] = {
        {"s", 's'},      {"sec", 's'},     {"secs", 's'},    {"second", 's'}, {"seconds", 's'},
        {"min", 'm'},    {"mins", 'm'},    {"minute", 'm'},  {"minutes", 'm'},
        {"h", 'h'},      {"hr", 'h'},      {"hrs", 'h'},     {"hour", 'h'},   {"hours", 'h'},
        {"d", 'd'},      {"day", 'd'},     {"days", 'd'},
    };
    if (n == 1 && *s == 'm') return 'm';
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++)
        if (strlen(WORDS[i].word) == n && strncasecmp(s, WORDS[i].word, n) == 0) return WORDS[i].unit;
    return 0;
}

/* A currency written as a word: three capitals (USD, EUR) or a common name. */
static int currency_word(const char *s, size_t n) {
    static const char *const WORDS[] = {"usd", "eur", "gbp", "chf", "jpy", "cny", "inr", "cad", "aud",
                                        "dollar", "dollars", "euro", "euros", "pound", "pounds",
                                        "cent", "cents", "yen"};
    if (n == 3 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' && s[2] >= 'A' && s[2] <= 'Z')
        return 1;
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++)
        if (strlen(WORDS[i]) == n && strncasecmp(s, WORDS[i], n) == 0) return 1;
    return 0;
}

/* Length of the number at s[0..n) (its digits, '_' and '.'); *ok is 1 when it is a valid
 * decimal: digits optionally grouped by single underscores, optionally a '.' and more such
 * digits (2.50, 1_000.5; not .5, 5., 1__0). */
static size_t decimal_at(const char *s, size_t n, int *ok) {
    size_t k = 0;
    while (k < n && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_' || s[k] == '.')) k++;
    *ok = 0;
    int point = 0;
    size_t digits = 0;  /* in the current part */
    for (size_t i = 0; i < k; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            digits++;
        } else if (c == '_') {
            if (!digits || i + 1 == k || s[i + 1] < '0' || s[i + 1] > '9') return k;
        } else {  /* '.' */
            if (point || !digits || i + 1 == k || s[i + 1] < '0' || s[i + 1] > '9') return k;
            point = 1;
            digits = 0;
        }
    }
    *ok = k > 0;
    return k;
}

/* The value of a valid decimal s[0..n) (its underscores dropped). */
static double decimal_value(const char *s, size_t n) {
    char small[128];
    char *b = n < sizeof small ? small : malloc(n + 1);
    if (!b) return HUGE_VAL;  /* out of memory: a number this long is out of range anyway */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != '_') b[k++] = s[i];
    b[k] = '\0';
    double v = strtod(b, NULL);
    if (b != small) free(b);
    return v;
}

/* 1 when the valid decimal s[0..n) is above the whole number max (digits, no leading 0),
 * compared digit by digit: strtod would take 9007199254740993 for 2^53, and
 * 365.000000000000001 for 365. */
static int decimal_above(const char *s, size_t n, const char *max) {
    size_t mn = strlen(max), k = 0, i = 0;
    char ip[24];
    for (; i < n && s[i] != '.'; i++) {
        if (s[i] == '_' || (s[i] == '0' && k == 0)) continue;
        if (k == mn || k == sizeof ip - 1) return 1;  /* more digits than max */
        ip[k++] = s[i];
    }
    ip[k] = '\0';
    if (k < mn) return 0;
    int c = strcmp(ip, max);
    if (c) return c > 0;
    for (; i < n; i++)  /* max exactly, unless a digit after the point is not 0 */
        if (s[i] >= '1' && s[i] <= '9') return 1;
    return 0;
}

/* The error of a --budget value that is neither an amount nor a duration. */
static int budget_not_a_value(const line *l, const char *v, size_t vn, taas_error *err) {
    char shown[192];
    fail(err, l, v, vn, "--budget needs an amount or a duration, not '%s'", show(shown, sizeof shown, v, vn));
    const char *why = v[0] == '+' ? sign_note(v, vn) : memchr(v, ',', vn) ? "the decimal separator is a point (1.5). " : "";
    taas_error_hint(err, "%s--budget takes %s: digits, optionally grouped by underscores, with an "
                         "optional point and digits after it (0.5, not .5); one unit at most (150m, "
                         "not 2h30m)",
                    why, BUDGET_FORMS);
    return -1;
}

/* A currency in a --budget value (msg says where); bare[0..bare_n) is the number without it,
 * for the hint when it is one. */
static int budget_currency(const line *l, const char *at, size_t n, const char *msg, const char *bare,
                           size_t bare_n, taas_error *err) {
    fail(err, l, at, n, "%s", msg);
    int ok = 0;
    size_t k = bare_n ? decimal_at(bare, bare_n, &ok) : 0;
    char b[40] = "25";
    if (ok && k == bare_n && k < sizeof b) snprintf(b, sizeof b, "%.*s", (int)k, bare);
    taas_error_hint(err, "the amount is in the unit of the configuration file's price_per_hour, "
                         "whatever currency that is; write the bare number: --budget %s", b);
    return -1;
}

/* --budget's value at v[0..vn): 0 with out->budget_kind and out->budget, -1 with an error.
 * The word after a bare number is looked at too, for a unit or a currency written apart
 * ("--budget 2 h", "--budget 5 USD"); it is not consumed. */
static int budget_value(taas_pragma *out, const line *l, const char *v, size_t vn, taas_error *err) {
    const char *end = l->s + l->n, *ve = v + vn;
    char shown[192], msg[512];
    /* a currency sign anywhere: $5, 5$, €2.50 */
    for (const char *c = v; c < ve; c++) {
        size_t cs = currency_sign(c, ve);
        if (!cs) continue;
        const char *bare = c == v ? v + cs : v;
        size_t bare_n = c == v ? vn - cs : (size_t)(c - v);
        snprintf(msg, sizeof msg, "--budget %s has a currency sign", show(shown, sizeof shown, v, vn));
        return budget_currency(l, v, vn, msg, bare, bare_n, err);
    }
    if (v[0] == '-' && vn > 1 && v[1] >= '0' && v[1] <= '9') {
        fail(err, l, v, vn, "--budget %s is a negative budget", show(shown, sizeof shown, v, vn));
        /* the same without its '-', when that is a budget (not for -0) */
        int pos_ok;
        size_t pk = decimal_at(v + 1, vn - 1, &pos_ok);
        int suggest = pos_ok && vn <= 32 && decimal_value(v + 1, pk) > 0;
        taas_error_hint(err, "a budget is above 0: e.g. --budget %s; without --budget there is no limit",
                        suggest ? show(shown, sizeof shown, v + 1, vn - 1) : "25 or --budget 2h");
        return -1;
    }
    int ok;
    size_t k = decimal_at(v, vn, &ok);
    if (!ok) return budget_not_a_value(l, v, vn, err);  /* also +3, .5, 1__0 */
    const char *u = v + k;
    size_t un = vn - k;
    double scale = 0;  /* seconds per unit; 0 for money */
    if (un == 1 && strchr("smhd", *u)) {
        scale = *u == 's' ? 1 : *u == 'm' ? 60 : *u == 'h' ? 3600 : 86400;
    } else if (un > 0) {
        size_t sign = un > 2 && (u[1] == '-' || u[1] == '+');
        if ((*u == 'e' || *u == 'E') && un > 1 + sign && u[1 + sign] >= '0' && u[1 + sign] <= '9') {
            fail(err, l, v, vn, "--budget %s has an exponent", show(shown, sizeof shown, v, vn));
            taas_error_hint(err, "write the number out in digits, e.g. --budget 1000 rather than 1e3 "
                                 "(underscores may group the digits: 1_000_000)");
            return -1;
        }
        if (!all_letters(u, un)) return budget_not_a_value(l, v, vn, err);  /* 1,5 2h30m */
        char unit = unit_spelled(u, un);
        if (!unit && currency_word(u, un)) {
            snprintf(msg, sizeof msg, "--budget %s names a currency", show(shown, sizeof shown, v, vn));
            return budget_currency(l, v, vn, msg, v, k, err);
        }
        char uw[192];
        fail(err, l, u, un, "--budget %s has an unknown unit '%s'", show(shown, sizeof shown, v, vn),
             show(uw, sizeof uw, u, un));
        char mean[128] = "";
        if (unit && k < 64) snprintf(mean, sizeof mean, "did you mean %.*s%c? ", (int)k, v, unit);
        taas_error_hint(err, "%sa time ends in s (seconds), m (minutes), h (hours) or d (days), "
                             "e.g. --budget 2h; a bare number is money, in the unit of the "
                             "configuration file's price_per_hour. No other suffixes (k, M): write "
                             "the number out",
                        mean);
        return -1;
    }
    if (scale == 0) {
        /* a unit or a currency written apart: "--budget 2 h", "--budget 5 USD" */
        const char *w = skip_ws(ve, end);
        const char *we = word_end(w, end);
        size_t wn = (size_t)(we - w);
        if (w < end && *w != '#' && !is_flag(w, we)) {
            char unit = unit_spelled(w, wn);
            if (unit) {
                char uw[192];
                fail(err, l, w, wn, "unexpected '%s' after --budget %s", show(uw, sizeof uw, w, wn),
                     show(shown, sizeof shown, v, vn));
                taas_error_hint(err, "write the unit right after the number: --budget %s%c",
                                vn <= 32 ? show(shown, sizeof shown, v, vn) : "2", unit);
                return -1;
            }
            if (currency_word(w, wn) || (currency_sign(w, we) && currency_sign(w, we) == wn)) {
                char uw[192];
                snprintf(msg, sizeof msg, "unexpected '%s' after --budget %s", show(uw, sizeof uw, w, wn),
                         show(shown, sizeof shown, v, vn));
                return budget_currency(l, w, wn, msg, v, vn, err);
            }
        }
    }
    double x = decimal_value(v, k);
    double val = scale ? x * scale : x;
    if (!(val > 0)) {
        fail(err, l, v, vn, "--budget %s is out of range", show(shown, sizeof shown, v, vn));
        taas_error_hint(err, "a budget is above 0: an amount such as --budget 25 (in the unit of the "
                             "configuration file's price_per_hour) or a time such as --budget 2h; "
                             "without --budget there is no limit");
        return -1;
    }
    /* the most, in the unit written: 365 days */
    const char *most = !scale ? "9007199254740992" : scale == 1 ? "31536000" : scale == 60 ? "525600"
                     : scale == 3600 ? "8760" : "365";
    if ((scale ? val > MAX_BUDGET_SECONDS : val > MAX_BUDGET_MONEY) || decimal_above(v, k, most)) {
        fail(err, l, v, vn, "--budget %s is out of range", show(shown, sizeof shown, v, vn));
        if (scale)
            taas_error_hint(err, "a time takes at most 365 days: 365d, 8760h, 525600m or 31536000s");
        else
            taas_error_hint(err, "an amount takes at most 9007199254740992 (2^53), in the unit of the "
                                 "configuration file's price_per_hour");
        return -1;
    }
    /* kept as written (without its underscores), so that every message shows the budget the
     * cell gave, never a rounding of it */
    size_t tn = 0;
    for (size_t i = 0; i < k; i++) tn += v[i] != '_';
    if (tn + 2 > sizeof out->budget_text) {
        fail(err, l, v, vn, "--budget %s has too many digits: a budget's number is at most %zu characters long "
             "(its underscores not counted)", show(shown, sizeof shown, v, vn), sizeof out->budget_text - 2);
        taas_error_hint(err, "write fewer decimals, e.g. --budget 2.50 or --budget 1.5h");
        return -1;
    }
    tn = 0;
    for (size_t i = 0; i < k; i++)
        if (v[i] != '_') out->budget_text[tn++] = v[i];
    if (scale) out->budget_text[tn++] = *u;
    out->budget_text[tn] = '\0';
    out->budget_kind = scale ? TAAS_BUDGET_TIME : TAAS_BUDGET_MONEY;
    out->budget = val;
    return 0;
}

/* The flags after "#pragma taas"; at = where they begin, head = "#pragma taas" for the
 * missing --gpus error. */
static int parse_flags(scan *sc, const line *l, const char *at, const char *head, size_t head_n) {
    taas_pragma *out = sc->out;
    taas_error *err = sc->err;
    const char *end = l->s + l->n;
    const char *given[NFLAGS] = {NULL};
    char shown[192];
    const char *p = at;
    for (;;) {
        p = skip_ws(p, end);
        if (p == end || *p == '#') break;  /* a trailing comment */
        const char *we = word_end(p, end);
        size_t wn = (size_t)(we - p);
        if (!is_flag(p, we)) {
            if (fancy_dash(p, we)) return unknown_flag(l, p, wn, 1, err);
            if (p[0] == '-' && wn > 1 && ((p[1] | 0x20) >= 'a' && (p[1] | 0x20) <= 'z'))
                return unknown_flag(l, p, wn, 0, err);
            long long ignored;
            fail(err, l, p, wn, "unexpected '%s' in #pragma taas", show(shown, sizeof shown, p, wn));
            if (parse_int(p, wn, &ignored) >= 0)
                taas_error_hint(err, "a number needs its flag in front of it, e.g. --gpus 8; %s",
                                FLAGS_HELP);
            else
                taas_error_hint(err, "each flag takes one value: %s", FLAGS_HELP);
            return -1;
        }
        const char *eq = memchr(p, '=', wn);
        size_t nn = eq ? (size_t)(eq - p) : wn;
        int f = 0;
        while (f < NFLAGS && !word_is(p, p + nn, FLAGS[f].name)) f++;
        if (f == NFLAGS) return unknown_flag(l, p, nn, 0, err);
        if (given[f]) {
            fail(err, l, p, nn, "%s is given twice", FLAGS[f].name);
            taas_error_hint(err, "keep one %s; the first is at column %zu", FLAGS[f].name,
                            taas_utf8_count(l->s, (size_t)(given[f] - l->s)) + 1);
            return -1;
        }
        given[f] = p;
        if (FLAGS[f].kind == V_SWITCH) {
            if (eq) {
                fail(err, l, p, wn, "%s takes no value", FLAGS[f].name);
                taas_error_hint(err, "write %s alone; %s", FLAGS[f].name, FLAGS[f].range);
                return -1;
            }
            out->detach = 1;
            p = we;
            continue;
        }
        const char *v;
        size_t vn;
        if (eq) {
            v = eq + 1;
            vn = (size_t)(we - v);
            if (vn == 0) {
                fail(err, l, p, wn, "%s= has no value", FLAGS[f].name);
                if (f == F_BUDGET)
                    taas_error_hint(err, "write an amount or a time after the '=', e.g. --budget=25 or "
                                         "--budget=2h; %s", FLAGS[f].range);
                else
                    taas_error_hint(err, "write a number after the '=', e.g. %s=8; %s", FLAGS[f].name,
                                    FLAGS[f].range);
                return -1;
            }
        } else {
            v = skip_ws(we, end);
            const char *ve = word_end(v, end);
            if (v == end || *v == '#' || is_flag(v, ve)) {
                fail(err, l, p, nn, "%s has no value", FLAGS[f].name);
                if (f == F_BUDGET)
                    taas_error_hint(err, "write an amount or a time after it, e.g. --budget 25 or "
                                         "--budget 2h; %s", FLAGS[f].range);
                else
                    taas_error_hint(err, "write a number after it, e.g. %s 8; %s", FLAGS[f].name,
                                    FLAGS[f].range);
                return -1;
            }
            vn = (size_t)(ve - v);
            we = ve;
        }
        if (f == F_BUDGET) {
            if (budget_value(out, l, v, vn, err)) return -1;
            p = we;
            continue;
        }
        if (f == F_CPUS) {
            int r = cpus_auto(out, l, v, vn, err);
            if (r < 0) return -1;
            if (r == 0) {
                p = we;
                continue;
            }
        }
        long long val;
        int r = parse_int(v, vn, &val);
        if (r < 0) {
            char guess[96];
            if (f == F_CPUS) {
                fail(err, l, v, vn, "--cpus needs a whole number or auto, not '%s'",
                     show(shown, sizeof shown, v, vn));
                if (auto_guess(guess, sizeof guess, v, vn))
                    taas_error_hint(err, "did you mean %s? auto is written in lower case, alone or as "
                                         "auto:MAX. %s", guess, FLAGS[f].range);
                else
                    taas_error_hint(err, "%swrite digits, optionally grouped by underscores; no fractions "
                                         "or suffixes. %s", sign_note(v, vn), FLAGS[f].range);
                return -1;
            }
            fail(err, l, v, vn, "%s needs a whole number, not '%s'", FLAGS[f].name,
                 show(shown, sizeof shown, v, vn));
            taas_error_hint(err, "%swrite digits, optionally grouped by underscores (20_480_000); "
                                 "no fractions or suffixes. %s", sign_note(v, vn), FLAGS[f].range);
            return -1;
        }
        if (r > 0 || val < FLAGS[f].lo || val > FLAGS[f].hi) {
            fail(err, l, v, vn, "%s %s is out of range", FLAGS[f].name, show(shown, sizeof shown, v, vn));
            taas_error_hint(err, "%s", FLAGS[f].range);
            return -1;
        }
        if (f == F_GPUS) {
            out->gpus = (int)val;
            sc->gpus_at = v;
            sc->gpus_n = vn;
        } else if (f == F_CPUS) {
            out->cpus = (int)val;
            out->cpus_auto = 0;
            out->cpus_max = 0;
        } else {
            out->units = val;
        }
        p = we;
    }
    if (!given[F_GPUS]) {
        fail(err, l, head, head_n, "#pragma taas needs --gpus N");
        taas_error_hint(err, "add the number of GPUs to train on (1 to 4096), e.g. "
                             "`#pragma taas --gpus 8`; %s", FLAGS_HELP);
        return -1;
    }
    return 0;
}

static int pragma_line(scan *sc, const line *l, const char *hash, const char *after) {
    if (sc->out->present) {
        fail(sc->err, l, hash, l->n - (size_t)(hash - l->s), "a second #pragma taas line");
        taas_error_hint(sc->err, "a cell has one #pragma taas line (the first is line %d); "
                                 "put all flags on it", sc->out->line);
        return -1;
    }
    const char *taas_end;
    if (pragma_name(l, hash, after, &taas_end, sc->err)) return -1;
    sc->out->present = 1;
    sc->out->line = l->no;
    sc->out->cpus = 1;
    sc->pragma_line = *l;
    return parse_flags(sc, l, taas_end, hash, (size_t)(taas_end - hash));
}

static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

static int config_line(scan *sc, const line *l, const char *hash, const char *after) {
    taas_error *err = sc->err;
    const char *end = l->s + l->n;
    char shown[192], first[192];
    const char *name = skip_ws(after, end);
    const char *ne = word_end(name, end);
    if (sc->config_hash) {
        fail(err, l, hash, (size_t)(ne - hash), "a second #! machine configuration line");
        taas_error_hint(err, "a cell runs on one configuration; line %d already names #!%s. "
                             "Keep one of the two lines", sc->config_line.no,
                        show(first, sizeof first, sc->config_name, sc->config_n));
        return -1;
    }
    if (name == end || *name == '#') {
        fail(err, l, hash, (size_t)(after - hash), "#! without a machine configuration name");
        taas_error_hint(err, "write the name right after #!, e.g. #!g2.8");
        return -1;
    }
    for (const char *c = name; c < ne; c++) {
        if (!name_char(*c)) {
            fail(err, l, name, (size_t)(ne - name), "'%s' is not a machine configuration name",
                 show(shown, sizeof shown, name, (size_t)(ne - name)));
            taas_error_hint(err, "a name uses letters, digits, '.', '_' and '-', e.g. #!g2.8");
            return -1;
        }
    }
    if ((size_t)(ne - name) >= sizeof sc->out->config.name) {
        fail(err, l, name, (size_t)(ne - name), "machine configuration name '%s' is too long",
             show(shown, sizeof shown, name, (size_t)(ne - name)));
        taas_error_hint(err, "a name has at most %zu characters, e.g. #!g2.8",
                        sizeof sc->out->config.name - 1);
        return -1;
    }
    const char *rest = skip_ws(ne, end);
    if (rest < end && *rest != '#') {
        const char *re = word_end(rest, end);
        fail(err, l, rest, (size_t)(re - rest), "unexpected '%s' after #!%s",
             show(shown, sizeof shown, rest, (size_t)(re - rest)),
             show(first, sizeof first, name, (size_t)(ne - name)));
        taas_error_hint(err, "a #! line names one machine configuration and nothing else, e.g. "
                             "#!g2.8; the flags go on the #pragma taas line");
        return -1;
    }
    sc->config_line = *l;
    sc->config_hash = hash;
    sc->config_name = name;
    sc->config_n = (size_t)(ne - name);
    return 0;
}

/* A directive in a comment line of the body (ls = its first byte) is out of place. */
static int late_directive(const char *ls, int no, int first_code, taas_error *err) {
    line l = line_at(ls, no);
    const char *end = l.s + l.n;
    const char *t = skip_ws(l.s, end);
    const char *after;
    char shown[192];
    switch (classify(t, end, &after)) {
    case D_PRAGMA: {
        const char *taas_end;
        if (pragma_name(&l, t, after, &taas_end, err)) return -1;
        fail(err, &l, t, (size_t)(taas_end - t), "a #pragma taas line must come before any code in the cell");
        taas_error_hint(err, "move it to the top of the cell, above line %d (the first statement); "
                             "only blank and comment lines may precede it", first_code);
        return -1;
    }
    case D_CONFIG: {
        const char *name = skip_ws(after, end);
        const char *ne = word_end(name, end);
        fail(err, &l, t, (size_t)(ne - t), "#!%s must come before any code in the cell",
             show(shown, sizeof shown, name, (size_t)(ne - name)));
        taas_error_hint(err, "move it to the top of the cell, above line %d (the first statement), "
                             "next to the #pragma taas line", first_code);
        return -1;
    }
    default:
        return 0;
    }
}

/* Looks for directives in the comment lines of the statements from line first_code on,
 * skipping string literals (a triple-quoted string may hold a line that starts with '#'). */
static int scan_body(const char *c, int first_code, taas_error *err) {
    char quote = 0;
    int triple = 0, no = first_code;
    while (*c) {
        if (!quote) {
            const char *t = c;
            while (is_ws(*t)) t++;
            if (*t == '#' && late_directive(c, no, first_code, err)) return -1;
        }
        int continued = 0;
        while (*c && *c != '\n') {
            if (quote) {
                if (*c == '\\') {
                    if (c[1] == '\n') {
                        continued = 1;
                        c++;
                        break;
                    }
                    c += c[1] ? 2 : 1;
                } else if (*c == quote && (!triple || (c[1] == quote && c[2] == quote))) {
                    c += triple ? 3 : 1;
                    quote = 0;
                } else {
                    c++;
                }
            } else if (*c == '#') {
                c += strcspn(c, "\n");
            } else if (*c == '\'' || *c == '"') {
                quote = *c;
                triple = c[1] == quote && c[2] == quote;
                c += triple ? 3 : 1;
            } else {
                c++;
            }
        }
        /* an unterminated one-line string: the interpreter's lexer reports it */
        if (quote && !triple && !continued) quote = 0;
        if (*c == '\n') {
            c++;
            no++;
        }
    }
    return 0;
}

/* With a configuration: the GPUs must fill whole machines, and the machines must have GPUs. */
static int apply_config(scan *sc) {
    taas_pragma *out = sc->out;
    taas_error *err = sc->err;
    char name[sizeof out->config.name];
    memcpy(name, sc->config_name, sc->config_n);
    name[sc->config_n] = '\0';
    if (taas_config_find(name, &out->config, err)) {
        /* point at the name that asked for it, keeping the message */
        err->pos.line = sc->config_line.no;
        err->pos.col = (int)taas_utf8_count(sc->config_line.s, (size_t)(sc->config_name - sc->config_line.s)) + 1;
        err->width = (int)sc->config_n;
        return -1;
    }
    int gpm = out->config.gpus_per_machine;
    if (gpm <= 0) {
        taas_buf with = TAAS_BUF_INIT;
        taas_machine_config *all;
        size_t n;
        if (taas_config_list(&all, &n, err) == 0) {
            for (size_t i = 0; i < n; i++)
                if (all[i].gpus_per_machine > 0)
                    taas_buf_printf(&with, "%s#!%s", with.len ? ", " : "", all[i].name);
            free(all);
        }
        fail(err, &sc->config_line, sc->config_name, sc->config_n,
             "#!%s is a machine without GPUs (%d CPUs): it cannot run the training ranks", name,
             out->config.cpus_per_machine);
        taas_error_hint(err, "name a configuration with GPUs (%s) for the ranks; loader machines "
                             "are chosen with --cpus", with.len ? with.data : "none is defined");
        taas_buf_free(&with);
        return -1;
    }
    if (out->gpus > gpm && out->gpus % gpm) {
        int lower = out->gpus / gpm * gpm;
        fail(err, &sc->pragma_line, sc->gpus_at, sc->gpus_n,
             "--gpus %d with %s (%d GPUs per machine): use a multiple of %d or at most %d", out->gpus,
             name, gpm, gpm, gpm);
        taas_error_hint(err, "a run fills whole machines: e.g. --gpus %d (%d machine%s) or --gpus %d "
                             "(%d machines)", lower, lower / gpm, lower == gpm ? "" : "s", lower + gpm,
                        lower / gpm + 1);
        return -1;
    }
    out->has_config = 1;
    out->machines = (out->gpus + gpm - 1) / gpm;
    out->ranks_per_machine = out->gpus < gpm ? out->gpus : gpm;
    return 0;
}

int taas_pragma_parse(const char *cell, taas_pragma *out, taas_error *err) {
    memset(out, 0, sizeof *out);
    taas_error_clear(err);
    scan sc = {0};
    sc.out = out;
    sc.err = err;
    const char *p = cell ? cell : "";
    int no = 0, code = 0;
    line l = {0};
    while (next_line(&p, &no, &l)) {
        const char *end = l.s + l.n;
        const char *t = skip_ws(l.s, end);
        if (t == end) continue;
        if (*t != '#') {
            code = 1;
            break;
        }
        const char *after;
        directive d = classify(t, end, &after);
        if (d == D_PRAGMA && pragma_line(&sc, &l, t, after)) return -1;
        if (d == D_CONFIG && config_line(&sc, &l, t, after)) return -1;
    }
    out->body_line = code ? l.no : no + 1;
    if (code && scan_body(l.s, l.no, err)) return -1;
    if (sc.config_hash && !out->present) {
        char name[192];
        show(name, sizeof name, sc.config_name, sc.config_n);
        fail(err, &sc.config_line, sc.config_hash, (size_t)(sc.config_name + sc.config_n - sc.config_hash),
             "#!%s names a machine configuration for a #pragma taas cell, and this cell has none", name);
        taas_error_hint(err, "add `#pragma taas --gpus N` below it, or remove the #!%s line", name);
        return -1;
    }
    if (!out->present) return 0;
    if (sc.config_hash) return apply_config(&sc);
    out->config.price_per_hour = -1;  /* no configuration, no price */
    out->machines = 1;
    out->ranks_per_machine = out->gpus;
    return 0;
}
