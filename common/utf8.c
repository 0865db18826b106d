#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of a valid sequence at s[0..n), or 0 when it is not valid. */
static size_t valid_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned int cp;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
    if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
    return len;
}

size_t taas_utf8_seqlen(const char *s) {
    size_t n = strnlen(s, 4);
    if (n == 0) return 1;
    size_t l = valid_seq((const unsigned char *)s, n);
    return l ? l : 1;
}

int taas_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = valid_seq(p + i, n - i);
        if (!l) return 0;
        i += l;
    }
    return 1;
}

char *taas_utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    const unsigned char *p = (const unsigned char *)s;
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        size_t l = p[i] ? valid_seq(p + i, n - i) : 0;
        if (l) {
            memcpy(out + o, p + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += 1;
        }
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}

size_t taas_utf8_count(const char *s, size_t nbytes) {
    size_t cps = 0, i = 0;
    while (i < nbytes) {
        size_t l = valid_seq((const unsigned char *)s + i, nbytes - i);
        i += l ? l : 1;
        cps++;
    }
    return cps;
}

size_t taas_utf8_offset(const char *s, size_t cp) {
    size_t n = strlen(s), i = 0;
    while (cp > 0 && i < n) {
        size_t l = valid_seq((const unsigned char *)s + i, n - i);
        i += l ? l : 1;
        cp--;
    }
    return i;
}

const char *taas_utf8_clip(char *dst, size_t cap, const char *s, size_t n, size_t max) {
    size_t k = 0, cps = 0, i = 0;
    while (i < n) {
        size_t len = taas_utf8_seqlen(s + i);
        if (len > n - i) len = 1;
        const char *piece = s + i;
        size_t plen = len;
        if (s[i] == '\0' || !taas_utf8_valid(s + i, len)) {
            piece = "\xEF\xBF\xBD";
            plen = 3;
        }
        if (cps == max || k + plen + 4 > cap) {
            memcpy(dst + k, "\xE2\x80\xA6", 3);
            k += 3;
            break;
        }
        memcpy(dst + k, piece, plen);
        k += plen;
        cps++;
        i += len;
    }
    dst[k] = '\0';
    return dst;
}

const char *taas_utf8_char_name(char *dst, size_t cap, const char *s) {
    unsigned char c = (unsigned char)s[0];
    size_t n = taas_utf8_seqlen(s);
    if (c == ' ') {
        snprintf(dst, cap, "a space");
    } else if (c < 0x20 || c == 0x7f) {
        snprintf(dst, cap, "a control character (U+%04X)", c);
    } else if (c < 0x80) {
        snprintf(dst, cap, "'%c'", c);
    } else if (!taas_utf8_valid(s, n)) {
        snprintf(dst, cap, "the byte 0x%02X (not UTF-8)", c);
    } else {
        unsigned cp = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
        for (size_t i = 1; i < n; i++) cp = (cp << 6) | ((unsigned char)s[i] & 0x3f);
        char one[16];
        taas_utf8_clip(one, sizeof one, s, n, 1);
        if (cp >= 0x80 && cp < 0xa0)
            snprintf(dst, cap, "a control character (U+%04X)", cp);
        else
            snprintf(dst, cap, "'%s' (U+%04X)", one, cp);
    }
    return dst;
}
