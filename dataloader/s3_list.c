/* The ListObjectsV2 answer parser (s3_list.h). Strict where it matters: tags must nest
 * and match, entities must be known, a Key must be non-empty UTF-8 without NUL, a Size
 * a whole number, IsTruncated true or false. Comments, the XML declaration, attributes
 * and unknown elements are skipped; DOCTYPE and CDATA are refused (S3 sends neither). */
#include "s3_list.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "errnames.h"
#include "formats.h"
#include "utf8.h"

#define MAX_DEPTH 16
#define MAX_NAME 64

typedef struct parser {
    const char *s;
    size_t n, i;
    char stack[MAX_DEPTH][MAX_NAME];
    int depth;
    taas_buf text; /* the current element's decoded text */
    taas_error *err;
} parser;

static int bad(parser *p, const char *why) {
    taas_error_set(p->err, TAAS_ERR_IO, TAAS_NOPOS, "the S3 listing is not a ListObjectsV2 answer: %s at byte %zu",
                   why, p->i);
    taas_error_hint(p->err, "check that AWS_ENDPOINT_URL points at an S3-compatible store");
    return -1;
}

static int starts(const parser *p, const char *lit) {
    size_t k = strlen(lit);
    return p->n - p->i >= k && memcmp(p->s + p->i, lit, k) == 0;
}

/* Moves past the first occurrence of lit; -1 when there is none. */
static int skip_past(parser *p, const char *lit) {
    size_t k = strlen(lit);
    for (; p->n - p->i >= k; p->i++)
        if (memcmp(p->s + p->i, lit, k) == 0) {
            p->i += k;
            return 0;
        }
    return -1;
}

static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == ':';
}

static void put_utf8(taas_buf *b, uint32_t cp) {
    unsigned char u[4];
    size_t k;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (unsigned char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    taas_buf_add(b, (const char *)u, k);
}

/* An entity at p->i (the '&'), decoded into text. */
static int entity(parser *p) {
    static const struct {
        const char *name;
        char c;
    } named[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
        if (starts(p, named[k].name)) {
            taas_buf_add(&p->text, &named[k].c, 1);
            p->i += strlen(named[k].name);
            return 0;
        }
    if (!starts(p, "&#")) return bad(p, "an unknown entity");
    size_t j = p->i + 2;
    int hex = j < p->n && p->s[j] == 'x';
    if (hex) j++;
    uint32_t cp = 0;
    size_t digits = 0;
    for (; j < p->n && p->s[j] != ';'; j++, digits++) {
        char c = p->s[j];
        int v = c >= '0' && c <= '9' ? c - '0'
                : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                              : -1;
        if (v < 0 || digits >= 8) return bad(p, "a malformed character reference");
        cp = cp * (hex ? 16u : 10u) + (uint32_t)v;
    }
    if (j >= p->n || digits == 0) return bad(p, "a malformed character reference");
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return bad(p, "a character reference to no allowed character");
    put_utf8(&p->text, cp);
    p->i = j + 1;
    return 0;
}

static char *text_dup(parser *p) {
    if (!taas_utf8_valid(p->text.data ? p->text.data : "", p->text.len)) return NULL;
    char *s = malloc(p->text.len + 1);
    if (!s) return NULL;
    if (p->text.len) memcpy(s, p->text.data, p->text.len);
    s[p->text.len] = '\0';
    return s;
}

static int is_path(const parser *p, const char *a, const char *b, const char *c) {
    const char *want[3] = {a, b, c};
    int n = c ? 3 : 2;
    if (p->depth != n) return 0;
    for (int k = 0; k < n; k++)
        if (strcmp(p->stack[k], want[k])) return 0;
    return 1;
}

/* 1 when the element on top of the stack is one whose text is read. */
static int text_element(const parser *p) {
    const char *L = "ListBucketResult";
    return is_path(p, L, "Contents", "Key") || is_path(p, L, "Contents", "Size") || is_path(p, L, "IsTruncated", NULL) ||
           is_path(p, L, "NextContinuationToken", NULL) || is_path(p, "Error", "Code", NULL) ||
           is_path(p, "Error", "Message", NULL);
}

/* The element on top of the stack ends: keep its text when it is one we read. */
static int element_end(parser *p, s3_list_page *pg) {
    const char *L = "ListBucketResult";
    char **slot = NULL;
    if (is_path(p, L, "Contents", "Key")) {
        if (p->text.len == 0 || memchr(p->text.data, '\0', p->text.len)) return bad(p, "an empty Key or one with NUL");
        char *k = text_dup(p);
        if (!k) return bad(p, "a Key that is not UTF-8");
        if (taas_strvec_push(&pg->keys, k) != 0) return taas_fmt_oom(p->err, "an S3 listing");
        return 0;
    }
    if (is_path(p, L, "Contents", "Size")) {
        if (p->text.len == 0 || p->text.len > 20) return bad(p, "a Size that is not a whole number");
        for (size_t k = 0; k < p->text.len; k++)
            if (p->text.data[k] < '0' || p->text.data[k] > '9') return bad(p, "a Size that is not a whole number");
        return 0;
    }
    if (is_path(p, L, "IsTruncated", NULL)) {
        if (p->text.len == 4 && !memcmp(p->text.data, "true", 4)) pg->truncated = 1;
        else if (p->text.len == 5 && !memcmp(p->text.data, "false", 5)) pg->truncated = 0;
        else return bad(p, "IsTruncated is neither true nor false");
        return 0;
    }
    if (is_path(p, L, "NextContinuationToken", NULL)) slot = &pg->next_token;
    else if (is_path(p, "Error", "Code", NULL)) slot = &pg->code;
    else if (is_path(p, "Error", "Message", NULL)) slot = &pg->message;
    if (!slot) return 0;
    if (*slot) return bad(p, "an element given twice");
    if (memchr(p->text.data ? p->text.data : "", '\0', p->text.len)) return bad(p, "text with NUL");
    *slot = text_dup(p);
    return *slot ? 0 : bad(p, "text that is not UTF-8");
}

/* A tag at p->i (the '<'). */
static int tag(parser *p, s3_list_page *pg, int *done) {
    if (starts(p, "<!--")) return skip_past(p, "-->") ? bad(p, "an unclosed comment") : 0;
    if (starts(p, "<?")) return skip_past(p, "?>") ? bad(p, "an unclosed declaration") : 0;
    if (starts(p, "<!")) return bad(p, "a DOCTYPE or CDATA section");
    int closing = starts(p, "</");
    p->i += closing ? 2 : 1;
    size_t b = p->i;
    while (p->i < p->n && name_char(p->s[p->i])) p->i++;
    size_t len = p->i - b;
    if (len == 0 || len >= MAX_NAME) return bad(p, "a malformed tag name");
    if (closing) {
        while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
            p->i++;
        if (p->i >= p->n || p->s[p->i] != '>') return bad(p, "a malformed end tag");
        p->i++;
        if (p->depth == 0 || strlen(p->stack[p->depth - 1]) != len || memcmp(p->stack[p->depth - 1], p->s + b, len))
            return bad(p, "an end tag that matches no start tag");
        if (element_end(p, pg) != 0) return -1;
        p->depth--;
        p->text.len = 0;
        if (p->depth == 0) *done = 1;
        return 0;
    }
    /* attributes (xmlns=...): skipped, quotes respected */
    char q = 0;
    for (; p->i < p->n; p->i++) {
        char c = p->s[p->i];
        if (q) {
            if (c == q) q = 0;
        } else if (c == '"' || c == '\'') {
            q = c;
        } else if (c == '>' || c == '<') {
            break;
        }
    }
    if (p->i >= p->n || p->s[p->i] != '>') return bad(p, "an unclosed start tag");
    int empty = p->s[p->i - 1] == '/';
    p->i++;
    if (p->depth == MAX_DEPTH) return bad(p, "elements nested too deep");
    if (text_element(p)) return bad(p, "an element inside Key, Size or another text element");
    memcpy(p->stack[p->depth], p->s + b, len);
    p->stack[p->depth][len] = '\0';
    if (p->depth == 0) {
        if (!strcmp(p->stack[0], "Error")) pg->is_error = 1;
        else if (strcmp(p->stack[0], "ListBucketResult")) return bad(p, "a root element other than ListBucketResult");
    }
    p->depth++;
    p->text.len = 0;
    if (empty) {
        if (element_end(p, pg) != 0) return -1;
        p->depth--;
        if (p->depth == 0) *done = 1;
    }
    return 0;
}

int s3_list_parse(const char *xml, size_t n, s3_list_page *pg, taas_error *err) {
    memset(pg, 0, sizeof *pg);
    parser p = {.s = xml, .n = n, .err = err};
    p.text = (taas_buf)TAAS_BUF_INIT;
    int rc = 0, done = 0;
    while (rc == 0 && p.i < p.n) {
        char c = p.s[p.i];
        if (c == '<') {
            if (done && !starts(&p, "<!--")) {
                rc = bad(&p, "content after the root element");
                break;
            }
            rc = tag(&p, pg, &done);
        } else if (p.depth == 0) {
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p.i++;
            else rc = bad(&p, "text outside the root element");
        } else if (c == '&') {
            rc = entity(&p);
        } else {
            taas_buf_add(&p.text, &c, 1);
            p.i++;
        }
        if (rc == 0 && p.text.failed) rc = taas_fmt_oom(err, "an S3 listing");
    }
    if (rc == 0 && !done) rc = bad(&p, "the answer ends before its root element does");
    taas_buf_free(&p.text);
    return rc;
}

void s3_list_page_free(s3_list_page *pg) {
    taas_strvec_clear(&pg->keys);
    free(pg->next_token);
    free(pg->code);
    free(pg->message);
    memset(pg, 0, sizeof *pg);
}
