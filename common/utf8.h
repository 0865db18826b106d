/* UTF-8 helpers: Jupyter counts cursor positions in code points, and JSON (jansson)
 * refuses invalid UTF-8, so every string that reaches a message passes through here. */
#ifndef TAAS_UTF8_H
#define TAAS_UTF8_H

#include <stddef.h>

/* Length in bytes of the sequence starting at s (1 for an invalid or truncated one). */
size_t taas_utf8_seqlen(const char *s);

/* 1 when s[0..n) is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF). */
int taas_utf8_valid(const char *s, size_t n);

/* malloc'd, NUL-terminated copy of s[0..n) with every invalid byte replaced by U+FFFD
 * and NUL bytes kept out (replaced by U+FFFD too), so the result is always a valid C
 * and JSON string. *out_len (may be NULL) gets its length. */
char *taas_utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* Code points in s[0..nbytes). */
size_t taas_utf8_count(const char *s, size_t nbytes);

/* Byte offset of code point index cp in the NUL-terminated s (clamped to strlen). */
size_t taas_utf8_offset(const char *s, size_t cp);

/* s[0..n) as a message may quote it: valid UTF-8 without NULs (U+FFFD for bad bytes), at
 * most max code points, "…" where cut; written into dst (cap bytes, >= 8), returned. */
const char *taas_utf8_clip(char *dst, size_t cap, const char *s, size_t n, size_t max);

/* The character at s, for "may not contain <it>": "a space", "a control character
 * (U+000A)", "'\"'", "'é' (U+00E9)", or "the byte 0xFF" where s is not valid UTF-8 (an
 * environment variable's). Written into dst (cap bytes), returned. */
const char *taas_utf8_char_name(char *dst, size_t cap, const char *s);

#endif
