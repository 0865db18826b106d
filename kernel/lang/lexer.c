#include "lexer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "errnames.h"
#include "utf8.h"
#include "value.h"

/* Python refuses deeper bracket nesting too; it also bounds the parser's recursion. */
#define MAX_BRACKETS 200

typedef struct lexer {
    const char *src;
    size_t i;  /* byte offset */
    int line, col;
    taas_tokens *out;
    taas_error *err;
    struct { char c; taas_srcpos pos; } open[MAX_BRACKETS];
    int depth;
    int line_has_tokens;
    int cont_pending;  /* a backslash continued the line and nothing followed yet */
} lexer;

static const char *const GENERIC_HINT =
    "a taas cell holds statements `name = expr` or `expr`, one per line "
    "(see docs/cell-language.md)";

static char peek(const lexer *lx, size_t k) {
    for (size_t j = 0; j < k; j++)
        if (!lx->src[lx->i + j]) return '\0';
    return lx->src[lx->i + k];
}

static char cur(const lexer *lx) { return lx->src[lx->i]; }

static void adv(lexer *lx) {
    char c = cur(lx);
    if (!c) return;
    if (c == '\n') {
        lx->line++;
        lx->col = 1;
        lx->i++;
        return;
    }
    lx->i += taas_utf8_seqlen(lx->src + lx->i);
    lx->col++;
}

static taas_srcpos here(const lexer *lx) {
    taas_srcpos p = {lx->line, lx->col};
    return p;
}

static int fail(lexer *lx, taas_srcpos pos, int width, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(lexer *lx, taas_srcpos pos, int width, const char *hint, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    taas_error_vset(lx->err, TAAS_ERR_SYNTAX, pos, fmt, ap);
    va_end(ap);
    lx->err->width = width > 0 ? width : 1;
    if (hint) taas_error_hint(lx->err, "%s", hint);
    return -1;
}

static taas_token *push(lexer *lx, taas_tok kind, taas_srcpos pos, size_t off) {
    taas_tokens *t = lx->out;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        taas_token *v = realloc(t->v, cap * sizeof *v);
        if (!v) {
            taas_value_oom(lx->err, pos, "reading the cell");
            return NULL;
        }
        t->v = v;
        t->cap = cap;
    }
    taas_token *k = &t->v[t->n++];
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->pos = pos;
    k->end = here(lx);
    k->off = off;
    k->len = lx->i - off;
    if (kind != TAAS_T_NEWLINE && kind != TAAS_T_EOF) lx->line_has_tokens = 1;
    lx->cont_pending = 0;
    return k;
}

/* The code point at s (for messages about a stray character). */
static unsigned decode_cp(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = taas_utf8_seqlen(s);
    if (n == 1) return p[0];
    unsigned cp = p[0] & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; k++) cp = (cp << 6) | (p[k] & 0x3F);
    return cp;
}

static void put_cp(taas_buf *b, unsigned cp) {
    static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    char s[4];
    int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (int k = n - 1; k > 0; k--, cp >>= 6) s[k] = (char)(0x80 | (cp & 0x3F));
    s[0] = (char)(n == 1 ? cp : (lead[n] | cp));
    taas_buf_add(b, s, (size_t)n);
}

static int is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

static int digit_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return 99;
}

/* ---- keywords ---------------------------------------------------------------------- */

#define BUILD_HINT "build models from builtins: Sequential(Linear(784, 10), ReLU())"
#define LOOP_HINT "fit(...) runs the training loop; write each statement on its own line"

/* Python's keywords, grouped by what taas has instead. */
static const struct { const char *words, *why, *hint; } PY_KEYWORDS[] = {
    {" def lambda ", ": there are no functions to define", BUILD_HINT},
    {" class ", ": there are no classes to define", BUILD_HINT},
    {" if elif else ", ": there are no conditions", NULL},
    {" for ", ": there are no loops or comprehensions", LOOP_HINT},
    {" while break continue ", ": there are no loops", LOOP_HINT},
    {" and or not is in ", ": there are no boolean operators or comparisons", NULL},
    {" del ", ": variables stay for the kernel's session", "assign the name again to replace its value"},
    {" return yield global nonlocal pass raise try except finally with as assert async await ", "", NULL},
};

static int keyword_error(lexer *lx, const char *word, size_t n, taas_srcpos pos) {
    if ((n == 6 && !memcmp(word, "import", 6)) || (n == 4 && !memcmp(word, "from", 4)))
        return fail(lx, pos, (int)n, "remove the import; write nn.Conv2d(...) or Conv2d(...) directly",
                    "import is not needed in taas: builtins such as nn.Conv2d are always available");
    char key[16];
    if (n > 10) return 0;
    snprintf(key, sizeof key, " %.*s ", (int)n, word);
    for (size_t k = 0; k < sizeof PY_KEYWORDS / sizeof PY_KEYWORDS[0]; k++)
        if (strstr(PY_KEYWORDS[k].words, key))
            return fail(lx, pos, (int)n, PY_KEYWORDS[k].hint ? PY_KEYWORDS[k].hint : GENERIC_HINT,
                        "'%.*s' is not part of the taas cell language (this is not Python)%s", (int)n, word,
                        PY_KEYWORDS[k].why);
    return 0;
}

/* ---- numbers ----------------------------------------------------------------------- */

/* Digits of `base` with single '_' between them (Python's rule); appends them to b. */
static int scan_digits(lexer *lx, int base, taas_buf *b, int after_prefix, int *count) {
    *count = 0;
    for (;;) {
        char c = cur(lx);
        if (c == '_') {
            if ((*count == 0 && !after_prefix) || digit_value(peek(lx, 1)) >= base)
                return fail(lx, here(lx), 1, "an underscore may only separate two digits: 1_000",
                            "invalid number: misplaced '_'");
            adv(lx);
            continue;
        }
        if (digit_value(c) >= base) return 0;
        taas_buf_putc(b, c);
        adv(lx);
        (*count)++;
    }
}

static int lex_number(lexer *lx) {
    taas_srcpos pos = here(lx);
    size_t off = lx->i;
    taas_buf b = TAAS_BUF_INIT;
    int base = 10, is_float = 0, n = 0, rc = -1;
    char p = peek(lx, 1);
    static const char *const base_names[] = {[2] = "binary", [8] = "octal", [16] = "hexadecimal"};
    if (cur(lx) == '0' && strchr("xXoObB", p) && p) {
        base = (p == 'x' || p == 'X') ? 16 : (p == 'o' || p == 'O') ? 8 : 2;
        adv(lx);
        adv(lx);
        if (scan_digits(lx, base, &b, 1, &n)) goto out;
        if (n == 0 || is_ident(cur(lx))) {
            int w = (int)taas_utf8_count(lx->src + off, lx->i - off) + 1;
            if (n > 0 && cur(lx) >= '0' && cur(lx) <= '9')
                fail(lx, pos, w, "check the digits of the literal", "invalid digit '%c' in %s literal",
                     cur(lx), base_names[base]);
            else
                fail(lx, pos, w, "check the digits of the literal", "invalid %s literal", base_names[base]);
            goto out;
        }
    } else {
        if (scan_digits(lx, 10, &b, 0, &n)) goto out;
        if (cur(lx) == '.') {
            is_float = 1;
            taas_buf_putc(&b, '.');
            adv(lx);
            if (digit_value(cur(lx)) < 10 && scan_digits(lx, 10, &b, 0, &n)) goto out;
        }
        if (cur(lx) == 'e' || cur(lx) == 'E') {
            char s = peek(lx, 1);
            int k = (s == '+' || s == '-') ? 2 : 1;
            if (digit_value(peek(lx, (size_t)k)) < 10) {
                is_float = 1;
                taas_buf_putc(&b, 'e');
                adv(lx);
                if (k == 2) { taas_buf_putc(&b, s); adv(lx); }
                if (scan_digits(lx, 10, &b, 0, &n)) goto out;
            }
        }
        if (cur(lx) == 'j' || cur(lx) == 'J') {
            adv(lx);
            fail(lx, pos, (int)taas_utf8_count(lx->src + off, lx->i - off),
                 "taas numbers are int or float", "complex numbers are not supported in taas");
            goto out;
        }
        if (is_ident(cur(lx))) {
            fail(lx, pos, (int)taas_utf8_count(lx->src + off, lx->i - off) + 1,
                 "a number cannot run into a name: put an operator or ',' between them",
                 "invalid decimal literal");
            goto out;
        }
        if (!is_float && b.len > 1 && b.data[0] == '0' && strspn(b.data, "0") != b.len) {
            fail(lx, pos, (int)(lx->i - off), "use an 0o prefix for octal integers: 0o17",
                 "leading zeros in decimal integer literals are not permitted");
            goto out;
        }
    }
    if (b.failed) {
        taas_value_oom(lx->err, pos, "reading the cell");
        goto out;
    }
    int width = (int)(lx->i - off);
    if (is_float) {
        taas_token *t = push(lx, TAAS_T_FLOAT, pos, off);
        if (!t) goto out;
        t->f = strtod(b.data, NULL);
    } else {
        uint64_t v = 0;
        for (size_t k = 0; k < b.len; k++) {
            uint64_t d = (uint64_t)digit_value(b.data[k]);
            if (v > ((uint64_t)INT64_MAX - d) / (uint64_t)base) {
                fail(lx, pos, width, "the largest is 9223372036854775807; write a float such as 1e20 for larger numbers",
                     "integer literal is too large: taas integers are 64-bit");
                goto out;
            }
            v = v * (uint64_t)base + d;
        }
        taas_token *t = push(lx, TAAS_T_INT, pos, off);
        if (!t) goto out;
        t->i = (int64_t)v;
    }
    rc = 0;
out:
    taas_buf_free(&b);
    return rc;
}

/* ---- strings ----------------------------------------------------------------------- */

static int hex_escape(lexer *lx, taas_srcpos epos, int ndigits, char kind, unsigned *cp) {
    *cp = 0;
    for (int k = 0; k < ndigits; k++) {
        int d = digit_value(cur(lx));
        if (d >= 16)
            return fail(lx, epos, lx->col - epos.col + 1,
                        "write exactly the hex digits the escape needs: \\xHH, \\uHHHH or \\UHHHHHHHH",
                        "truncated \\%c escape: it needs %d hex digits", kind, ndigits);
        *cp = *cp * 16 + (unsigned)d;
        adv(lx);
    }
    return 0;
}

/* After the backslash of an escape in a non-raw string. */
static int escape(lexer *lx, taas_buf *b, taas_srcpos epos) {
    char c = cur(lx);
    unsigned cp;
    const char *simple = strchr("\\'\"abfnrtv", c);
    static const char simple_val[] = {'\\', '\'', '"', '\a', '\b', '\f', '\n', '\r', '\t', '\v'};
    if (!c) return 0;  /* the string loop reports the missing quote */
    if (c == '\n') { adv(lx); return 0; }
    if (simple) {
        taas_buf_putc(b, simple_val[simple - "\\'\"abfnrtv"]);
        adv(lx);
        return 0;
    }
    if (c >= '0' && c <= '7') {
        cp = 0;
        for (int k = 0; k < 3 && cur(lx) >= '0' && cur(lx) <= '7'; k++) {
            cp = cp * 8 + (unsigned)(cur(lx) - '0');
            adv(lx);
        }
    } else if (c == 'x' || c == 'u' || c == 'U') {
        adv(lx);
        if (hex_escape(lx, epos, c == 'x' ? 2 : c == 'u' ? 4 : 8, c, &cp)) return -1;
        if (cp > 0x10FFFF)
            return fail(lx, epos, lx->col - epos.col, "the largest code point is \\U0010FFFF",
                        "illegal Unicode character in \\U escape");
        if (cp >= 0xD800 && cp <= 0xDFFF)
            return fail(lx, epos, lx->col - epos.col,
                        "write the character itself, or \\U0001F600 for a character above U+FFFF",
                        "\\u%04X is a surrogate, not a character", cp);
    } else if (c == 'N') {
        adv(lx);
        return fail(lx, epos, 2, "write the character itself, or use \\uXXXX",
                    "\\N{...} escapes are not supported in taas");
    } else {
        taas_buf_putc(b, '\\');  /* Python keeps an unknown escape as written */
        return 0;
    }
    if (cp == 0)
        return fail(lx, epos, lx->col - epos.col, "taas strings are text; remove the escape",
                    "a string cannot hold the NUL character");
    put_cp(b, cp);
    return 0;
}

static int lex_string(lexer *lx, taas_srcpos pos, size_t off, int raw) {
    char q = cur(lx);
    int triple = peek(lx, 1) == q && peek(lx, 2) == q;
    taas_buf b = TAAS_BUF_INIT;
    for (int k = 0; k < (triple ? 3 : 1); k++) adv(lx);
    int width = (int)taas_utf8_count(lx->src + off, lx->i - off);
    for (;;) {
        char c = cur(lx);
        if (!c || (c == '\n' && !triple)) {
            if (triple) lx->out->incomplete = 1;
            fail(lx, pos, width, triple ? "close it with the same three quotes" : "close the string on the same line, or use a triple-quoted string (\"\"\"...\"\"\") for several lines",
                 "unterminated %sstring literal (detected at line %d)", triple ? "triple-quoted " : "",
                 lx->line);
            goto bad;
        }
        if (c == q && (!triple || (peek(lx, 1) == q && peek(lx, 2) == q))) {
            for (int k = 0; k < (triple ? 3 : 1); k++) adv(lx);
            break;
        }
        if (c == '\\') {
            taas_srcpos epos = here(lx);
            adv(lx);
            if (raw) {
                taas_buf_putc(&b, '\\');
                if (cur(lx)) {
                    taas_buf_add(&b, lx->src + lx->i, taas_utf8_seqlen(lx->src + lx->i));
                    adv(lx);
                }
            } else if (escape(lx, &b, epos)) {
                goto bad;
            }
            continue;
        }
        taas_buf_add(&b, lx->src + lx->i, taas_utf8_seqlen(lx->src + lx->i));
        adv(lx);
    }
    taas_token *t = push(lx, TAAS_T_STRING, pos, off);
    if (!t) goto bad;
    size_t n = b.len;
    char *s = taas_buf_take(&b);
    if (!taas_utf8_valid(s, n)) {
        char *clean = taas_utf8_sanitize(s, n, &n);
        free(s);
        s = clean;
    }
    t->s = s;
    t->slen = n;
    return s ? 0 : taas_value_oom(lx->err, pos, "reading the cell");
bad:
    taas_buf_free(&b);
    return -1;
}

/* ---- names ------------------------------------------------------------------------- */

static int lex_name(lexer *lx) {
    taas_srcpos pos = here(lx);
    size_t off = lx->i;
    while (is_ident(cur(lx))) adv(lx);
    const char *w = lx->src + off;
    size_t n = lx->i - off;
    if ((cur(lx) == '\'' || cur(lx) == '"') && n <= 2) {
        char p[3] = {0};
        for (size_t k = 0; k < n; k++) p[k] = (char)(w[k] | 0x20);
        int valid = !strcmp(p, "r") || !strcmp(p, "u") || !strcmp(p, "f") || !strcmp(p, "b") ||
                    !strcmp(p, "br") || !strcmp(p, "rb") || !strcmp(p, "fr") || !strcmp(p, "rf");
        if (valid && strchr(p, 'f'))
            return fail(lx, pos, (int)n + 1, "pass the pieces to print separately: print(\"epoch\", n)",
                        "f-strings are not supported in taas");
        if (valid && strchr(p, 'b'))
            return fail(lx, pos, (int)n + 1, "use a plain string: \"...\"",
                        "bytes literals are not supported in taas");
        if (valid) return lex_string(lx, pos, off, strchr(p, 'r') != NULL);
    }
    if (keyword_error(lx, w, n, pos)) return -1;
    taas_tok kind = TAAS_T_NAME;
    if (n == 4 && !memcmp(w, "True", 4)) kind = TAAS_T_TRUE;
    else if (n == 5 && !memcmp(w, "False", 5)) kind = TAAS_T_FALSE;
    else if (n == 4 && !memcmp(w, "None", 4)) kind = TAAS_T_NONE;
    taas_token *t = push(lx, kind, pos, off);
    if (!t) return -1;
    t->s = strndup(w, n);
    t->slen = n;
    return t->s ? 0 : taas_value_oom(lx->err, pos, "reading the cell");
}

/* ---- operators and stray characters ------------------------------------------------ */

static int bracket(lexer *lx, char c, taas_srcpos pos, size_t off) {
    if (c == '(' || c == '[') {
        if (lx->depth == MAX_BRACKETS)
            return fail(lx, pos, 1, "split the expression into several assignments",
                        "too many nested brackets (more than %d)", MAX_BRACKETS);
        lx->open[lx->depth].c = c;
        lx->open[lx->depth].pos = pos;
        lx->depth++;
        adv(lx);
        return push(lx, c == '(' ? TAAS_T_LPAR : TAAS_T_LSQB, pos, off) ? 0 : -1;
    }
    char want = c == ')' ? '(' : '[';
    if (lx->depth == 0)
        return fail(lx, pos, 1, "remove it, or add the bracket it should close", "unmatched '%c'", c);
    char have = lx->open[lx->depth - 1].c;
    if (have != want) {
        taas_srcpos op = lx->open[lx->depth - 1].pos;
        return fail(lx, pos, 1, "close the innermost bracket first",
                    "closing bracket '%c' does not match opening bracket '%c' on line %d, column %d", c,
                    have, op.line, op.col);
    }
    lx->depth--;
    adv(lx);
    return push(lx, c == ')' ? TAAS_T_RPAR : TAAS_T_RSQB, pos, off) ? 0 : -1;
}

static int stray(lexer *lx, taas_srcpos pos) {
    char c = cur(lx), n = peek(lx, 1);
    char two[3] = {c, n, 0};
    if (strchr("+-*/%@&|^", c) && c && n == '=')
        return fail(lx, pos, 2, "write it out: x = x + 1",
                    "augmented assignment ('%s') is not part of the taas cell language", two);
    if ((c == '*' || c == '/' || c == '<' || c == '>') && n == c && peek(lx, 2) == '=')
        return fail(lx, pos, 3, "write it out: x = x * 2",
                    "augmented assignment ('%c%c=') is not part of the taas cell language", c, c);
    if ((c == '=' || c == '!' || c == '<' || c == '>') && n == '=')
        return fail(lx, pos, 2, "taas cells define data, models and training; there are no conditions",
                    "comparisons ('%s') are not part of the taas cell language", two);
    if ((c == '<' || c == '>') && n == c)
        return fail(lx, pos, 2, GENERIC_HINT, "bitwise operators ('%s') are not part of the taas cell language", two);
    if (c == '<' || c == '>')
        return fail(lx, pos, 1, "taas cells define data, models and training; there are no conditions",
                    "comparisons ('%c') are not part of the taas cell language", c);
    if (c == '-' && n == '>')
        return fail(lx, pos, 2, GENERIC_HINT, "annotations ('->') are not part of the taas cell language");
    if (c == ':' && n == '=')
        return fail(lx, pos, 2, "assign on a line of its own: name = expr",
                    "assignment expressions (':=') are not part of the taas cell language");
    if (c == ':')
        return fail(lx, pos, 1, GENERIC_HINT,
                    "':' is not part of the taas cell language (this is not Python): there are no "
                    "blocks, slices, dicts, lambdas or annotations");
    if (c == '{' || c == '}')
        return fail(lx, pos, 1, "pass options as keyword arguments: DataLoader(data, batch_size=64)",
                    "dict and set literals ('%c') are not part of the taas cell language", c);
    if (c == ';')
        return fail(lx, pos, 1, "put the next statement on a line of its own",
                    "';' is not part of the taas cell language: write one statement per line");
    if (c == '@')
        return fail(lx, pos, 1, GENERIC_HINT,
                    "'@' (decorators, matrix multiplication) is not part of the taas cell language");
    if (c == '&' || c == '|' || c == '^' || c == '~')
        return fail(lx, pos, 1, GENERIC_HINT, "bitwise operators ('%c') are not part of the taas cell language", c);
    if (c == '!')
        return fail(lx, pos, 1, "run shell commands in a terminal",
                    "shell commands ('!') are not part of the taas cell language");
    if (c == '?')
        return fail(lx, pos, 1, "use help(name) to read about a builtin",
                    "'?' is not part of the taas cell language");
    if ((unsigned char)c >= 0x80) {
        size_t n8 = taas_utf8_seqlen(lx->src + lx->i);
        if (n8 == 1)
            return fail(lx, pos, 1, "save the cell as UTF-8 text", "invalid UTF-8 byte 0x%02X in the cell",
                        (unsigned)(unsigned char)c);
        return fail(lx, pos, 1, "names use ASCII letters, digits and '_'; other characters belong in strings",
                    "character '%.*s' (U+%04X) is not allowed outside strings and comments", (int)n8,
                    lx->src + lx->i, decode_cp(lx->src + lx->i));
    }
    if ((unsigned char)c < 0x20 || c == 0x7F)
        return fail(lx, pos, 1, "remove the control character", "invalid non-printable character U+%04X",
                    (unsigned)(unsigned char)c);
    return fail(lx, pos, 1, GENERIC_HINT, "character '%c' is not part of the taas cell language", c);
}

static int lex_operator(lexer *lx) {
    taas_srcpos pos = here(lx);
    size_t off = lx->i;
    char c = cur(lx), n = peek(lx, 1);
    taas_tok kind;
    int len = 1;
    if (c == '(' || c == ')' || c == '[' || c == ']') return bracket(lx, c, pos, off);
    if (n == '=' && strchr("+-*/%", c)) return stray(lx, pos);
    if ((c == '*' || c == '/') && n == c && peek(lx, 2) == '=') return stray(lx, pos);
    switch (c) {
    case '+': kind = TAAS_T_PLUS; break;
    case '-':
        if (n == '>') return stray(lx, pos);
        kind = TAAS_T_MINUS;
        break;
    case '*': kind = n == '*' ? TAAS_T_DSTAR : TAAS_T_STAR; len = n == '*' ? 2 : 1; break;
    case '/': kind = n == '/' ? TAAS_T_DSLASH : TAAS_T_SLASH; len = n == '/' ? 2 : 1; break;
    case '%': kind = TAAS_T_PERCENT; break;
    case '=':
        if (n == '=') return stray(lx, pos);
        kind = TAAS_T_ASSIGN;
        break;
    case ',': kind = TAAS_T_COMMA; break;
    case '.': kind = TAAS_T_DOT; break;
    default: return stray(lx, pos);
    }
    for (int k = 0; k < len; k++) adv(lx);
    return push(lx, kind, pos, off) ? 0 : -1;
}

/* ---- the loop ---------------------------------------------------------------------- */

static int end_of_cell(lexer *lx) {
    if (lx->depth > 0) {
        lx->out->incomplete = 1;
        char c = lx->open[lx->depth - 1].c;
        return fail(lx, lx->open[lx->depth - 1].pos, 1, "close it, or remove it",
                    "'%c' was never closed", c);
    }
    if (lx->cont_pending) {
        lx->out->incomplete = 1;
        return fail(lx, here(lx), 1, "continue the statement on the next line, or remove the '\\'",
                    "the cell ends after a line continuation character ('\\')");
    }
    if (lx->line_has_tokens && !push(lx, TAAS_T_NEWLINE, here(lx), lx->i)) return -1;
    return push(lx, TAAS_T_EOF, here(lx), lx->i) ? 0 : -1;
}

int taas_lex(const char *src, taas_tokens *out, taas_error *err) {
    lexer lx;
    memset(&lx, 0, sizeof lx);
    lx.src = src ? src : "";
    lx.line = 1;
    lx.col = 1;
    lx.out = out;
    lx.err = err;
    out->incomplete = 0;
    if (!strncmp(lx.src, "\xEF\xBB\xBF", 3)) lx.i = 3;  /* a byte order mark is not a column */
    for (;;) {
        char c = cur(&lx);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f') { adv(&lx); continue; }
        if (!c) return end_of_cell(&lx);
        int rc = 0;
        if (c == '#') {
            while (cur(&lx) && cur(&lx) != '\n') adv(&lx);
        } else if (c == '\\') {
            taas_srcpos pos = here(&lx);
            adv(&lx);
            while (cur(&lx) == '\r') adv(&lx);
            if (cur(&lx) == '\n') {
                adv(&lx);
                lx.cont_pending = 1;
            } else if (!cur(&lx)) {
                lx.cont_pending = 1;
            } else {
                rc = fail(&lx, pos, 1, "a '\\' continues a line only as its last character",
                          "unexpected character after line continuation character");
            }
        } else if (c == '\n') {
            taas_srcpos pos = here(&lx);
            size_t off = lx.i;
            adv(&lx);
            if (lx.depth == 0 && lx.line_has_tokens) {
                taas_token *t = push(&lx, TAAS_T_NEWLINE, pos, off);
                if (!t) return -1;
                lx.line_has_tokens = 0;
            }
        } else if (is_ident_start(c)) {
            rc = lex_name(&lx);
        } else if ((c >= '0' && c <= '9') || (c == '.' && peek(&lx, 1) >= '0' && peek(&lx, 1) <= '9')) {
            rc = lex_number(&lx);
        } else if (c == '\'' || c == '"') {
            rc = lex_string(&lx, here(&lx), lx.i, 0);
        } else {
            rc = lex_operator(&lx);
        }
        if (rc) return -1;
    }
}

void taas_tokens_free(taas_tokens *t) {
    if (!t) return;
    for (size_t k = 0; k < t->n; k++) free(t->v[k].s);
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

const char *taas_tok_describe(taas_tok k) {
    static const char *const names[] = {
        [TAAS_T_EOF] = "the end of the cell", [TAAS_T_NEWLINE] = "the end of the line",
        [TAAS_T_NAME] = "a name", [TAAS_T_INT] = "an integer", [TAAS_T_FLOAT] = "a float",
        [TAAS_T_STRING] = "a string", [TAAS_T_TRUE] = "True", [TAAS_T_FALSE] = "False",
        [TAAS_T_NONE] = "None", [TAAS_T_PLUS] = "'+'", [TAAS_T_MINUS] = "'-'", [TAAS_T_STAR] = "'*'",
        [TAAS_T_SLASH] = "'/'", [TAAS_T_DSLASH] = "'//'", [TAAS_T_PERCENT] = "'%'", [TAAS_T_DSTAR] = "'**'",
        [TAAS_T_ASSIGN] = "'='", [TAAS_T_COMMA] = "','", [TAAS_T_DOT] = "'.'", [TAAS_T_LPAR] = "'('",
        [TAAS_T_RPAR] = "')'", [TAAS_T_LSQB] = "'['", [TAAS_T_RSQB] = "']'",
    };
    return (size_t)k < sizeof names / sizeof *names && names[k] ? names[k] : "a token";
}
