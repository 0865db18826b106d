#include "wire.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "errnames.h"
#include "utf8.h"

#define ENAME TAAS_ERR_PROTOCOL

static const char *const FRAME_NAMES[4] = {"header", "parent_header", "metadata", "content"};

json_t *taas_json_stringn(const char *s, size_t n) {
    if (!s) return json_string("");
    if (taas_utf8_valid(s, n) && !memchr(s, '\0', n)) return json_stringn(s, n);
    size_t len = 0;
    char *clean = taas_utf8_sanitize(s, n, &len);
    if (!clean) return NULL;
    json_t *j = json_stringn(clean, len);
    free(clean);
    return j;
}

json_t *taas_json_string(const char *s) {
    return taas_json_stringn(s, s ? strlen(s) : 0);
}

const char *taas_json_get_str(const json_t *obj, const char *key, const char *dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

int taas_json_get_bool(const json_t *obj, const char *key, int dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static void blobs_free(taas_blob *b, size_t n) {
    if (!b) return;
    for (size_t i = 0; i < n; i++) free(b[i].data);
    free(b);
}

void taas_msg_free(taas_msg *m) {
    if (!m) return;
    blobs_free(m->ids, m->n_ids);
    blobs_free(m->buffers, m->n_buffers);
    free(m->undecodable);
    json_decref(m->header);
    json_decref(m->parent_header);
    json_decref(m->metadata);
    json_decref(m->content);
    free(m);
}

static taas_blob *blobs_copy(const taas_frame *f, size_t n) {
    taas_blob *b = calloc(n ? n : 1, sizeof *b);
    if (!b) return NULL;
    for (size_t i = 0; i < n; i++) {
        b[i].data = malloc(f[i].len ? f[i].len : 1);
        if (!b[i].data) {
            blobs_free(b, i);
            return NULL;
        }
        if (f[i].len) memcpy(b[i].data, f[i].data, f[i].len);
        b[i].len = f[i].len;
    }
    return b;
}

/* JSON_ALLOW_NUL lets "\u0000" in a string through the parser (a client may send one in
 * code); here every such string is rewritten so that no C string is cut short later. */
static void scrub_nuls(json_t *v) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (memchr(s, '\0', n)) {
            char *clean = taas_utf8_sanitize(s, n, &n);
            if (clean) json_string_setn(v, clean, n);
            free(clean);
        }
    } else if (json_is_object(v)) {
        const char *key;
        json_t *item;
        json_object_foreach(v, key, item) scrub_nuls(item);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) scrub_nuls(item);
    }
}

/* A growing byte buffer for relax(). */
typedef struct rbuf {
    char *p;
    size_t n, cap;
    int oom;
} rbuf;

static void rb_put(rbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (!b->p || b->n + n > b->cap) { /* !b->p means cap 0: said for the analyzer, which loses that */
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static int hex4(const char *s, size_t left, unsigned *out) {
    if (left < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 1;
}

/* A number token outside strings: as sent, unless jansson would refuse it. */
static void relax_number(rbuf *b, const char *s, size_t n, int integer) {
    char small[64], *tok = n < sizeof small ? small : malloc(n + 1);
    if (!tok) {
        b->oom = 1;
        return;
    }
    memcpy(tok, s, n);
    tok[n] = '\0';
    errno = 0;
    if (integer) (void)strtoll(tok, NULL, 10);
    int beyond = integer ? errno == ERANGE : 0;
    double v = strtod(tok, NULL);
    if (tok != small) free(tok);
    if (isinf(v)) {
        v = v > 0 ? DBL_MAX : -DBL_MAX;
        beyond = 1;
    }
    if (!beyond) {
        rb_put(b, s, n);
        return;
    }
    char out[40];
    int len = snprintf(out, sizeof out, "%.17g", v);
    rb_put(b, out, (size_t)len);
    if (!strpbrk(out, ".eE")) rb_put(b, ".0", 2);   /* stays a real, never an integer */
}

/* Valid JSON that jansson refuses, rewritten so that it parses: an integer beyond 64 bits
 * becomes a real (10^30 -> 1e+30), a number beyond a double the largest double, and a
 * "\u0000" (jansson takes none in an object key) or a lone surrogate escape "\ufffd", as
 * every NUL and invalid byte becomes anyway. NULL when nothing needed rewriting. */
static char *relax(const char *s, size_t n, size_t *out_len) {
    rbuf b = {0};
    int changed = 0, in_str = 0;
    size_t i = 0;
    while (i < n && !b.oom) {
        char c = s[i];
        if (in_str && c == '\\' && i + 1 < n) {
            unsigned u, lo;
            size_t esc = 2;
            if (s[i + 1] == 'u' && hex4(s + i + 2, n - i - 2, &u)) {
                esc = 6;
                int bad = u == 0 || (u >= 0xDC00 && u <= 0xDFFF);
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (i + 7 < n && s[i + 6] == '\\' && s[i + 7] == 'u' &&
                        hex4(s + i + 8, n - i - 8, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
                        esc = 12;   /* a pair, which jansson takes */
                    else
                        bad = 1;
                }
                if (bad) {
                    rb_put(&b, "\\ufffd", 6);
                    changed = 1;
                    i += 6;
                    continue;
                }
            }
            if (esc > n - i) esc = n - i;
            rb_put(&b, s + i, esc);
            i += esc;
        } else if (in_str || c == '"') {
            if (c == '"') in_str = !in_str;
            rb_put(&b, s + i++, 1);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i + (c == '-');
            int integer = 1;
            while (j < n && s[j] >= '0' && s[j] <= '9') j++;
            if (j < n && s[j] == '.') {
                integer = 0;
                for (j++; j < n && s[j] >= '0' && s[j] <= '9'; j++) {}
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                integer = 0;
                j++;
                if (j < n && (s[j] == '+' || s[j] == '-')) j++;
                while (j < n && s[j] >= '0' && s[j] <= '9') j++;
            }
            size_t before = b.n;
            relax_number(&b, s + i, j - i, integer);
            if (b.n - before != j - i || memcmp(b.p + before, s + i, j - i) != 0) changed = 1;
            i = j;
        } else {
            rb_put(&b, s + i++, 1);
        }
    }
    if (b.oom || !changed) {
        free(b.p);
        return NULL;
    }
    *out_len = b.n;
    return b.p;
}

/* One JSON frame: sanitized for UTF-8 (after the signature check, which covers the
 * bytes as sent), parsed, and required to be an object. */
static json_t *parse_frame(const taas_frame *f, const char *name, taas_error *err) {
    const char *text = f->data;
    size_t len = f->len;
    char *clean = NULL;
    if (!taas_utf8_valid(text, len)) {
        clean = taas_utf8_sanitize(text, len, &len);
        if (!clean) {
            taas_error_set(err, ENAME, TAAS_NOPOS, "out of memory parsing the %s frame", name);
            return NULL;
        }
        text = clean;
    }
    json_error_t jerr;
    json_t *v = json_loadb(text, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    if (!v) {
        /* jansson is stricter than JSON: a second try with what it refuses rewritten */
        size_t rlen;
        char *relaxed = relax(text, len, &rlen);
        if (relaxed) v = json_loadb(relaxed, rlen, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
        free(relaxed);
    }
    free(clean);
    if (!v) {
        char *why = taas_utf8_sanitize(jerr.text, strlen(jerr.text), NULL);
        taas_error_set(err, ENAME, TAAS_NOPOS, "the %s frame is not valid JSON: %s (column %d)", name,
                       why ? why : "?", jerr.column);
        free(why);
        taas_error_hint(err, "each of header, parent_header, metadata and content must be a "
                             "UTF-8 JSON object");
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        taas_error_set(err, ENAME, TAAS_NOPOS, "the %s frame is JSON but not an object", name);
        taas_error_hint(err, "send {} for an empty %s", name);
        return NULL;
    }
    scrub_nuls(v);
    return v;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

static int oom(taas_msg *m, taas_error *err) {
    taas_msg_free(m);
    taas_error_set(err, ENAME, TAAS_NOPOS, "out of memory receiving a message");
    return -1;
}

/* frames[0..n) of a message that had n_all frames and total bytes (recv lets go of the
 * frames past TAAS_WIRE_MAX_FRAMES before parsing). */
static int parse(const taas_frame *fr, size_t n, size_t n_all, size_t total,
                 taas_signer *signer, taas_digests *seen, taas_msg **out, taas_error *err) {
    *out = NULL;
    static const size_t dlen = sizeof TAAS_WIRE_DELIM - 1;
    size_t d = 0;
    while (d < n && !(fr[d].len == dlen && memcmp(fr[d].data, TAAS_WIRE_DELIM, dlen) == 0)) d++;
    if (d == n) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "message of %zu frames has no \"%s\" delimiter", n_all,
                       TAAS_WIRE_DELIM);
        taas_error_hint(err, "frames must be: identities, \"%s\", signature, header, "
                             "parent_header, metadata, content, buffers", TAAS_WIRE_DELIM);
        return -1;
    }
    if (n - d - 1 < 5) {
        taas_error_set(err, ENAME, TAAS_NOPOS,
                       "message has %zu frames after the \"%s\" delimiter; 5 are required "
                       "(signature, header, parent_header, metadata, content)",
                       n - d - 1, TAAS_WIRE_DELIM);
        taas_error_hint(err, "the message was truncated or built by hand; send all five");
        return -1;
    }

    const taas_frame *sig = &fr[d + 1], *json = &fr[d + 2];
    if (taas_signer_enabled(signer)) {
        const void *parts[4];
        size_t lens[4];
        for (int i = 0; i < 4; i++) {
            parts[i] = json[i].data;
            lens[i] = json[i].len;
        }
        if (sig->len == 0) {
            taas_error_set(err, ENAME, TAAS_NOPOS, "unsigned message (empty signature frame)");
            taas_error_hint(err, "sign messages with HMAC-SHA256 and the key from the "
                                 "connection file");
            return -1;
        }
        if (!taas_signer_verify(signer, parts, lens, 4, sig->data, sig->len)) {
            taas_error_set(err, ENAME, TAAS_NOPOS, "message signature does not match");
            taas_error_hint(err, "sign messages with HMAC-SHA256 and the key from the "
                                 "connection file");
            return -1;
        }
        /* after the check, so that only signatures made with the key fill the history */
        int fresh = seen ? taas_digests_add(seen, sig->data, sig->len) : 1;
        if (fresh < 0) return oom(NULL, err);
        if (!fresh) {
            taas_error_set(err, ENAME, TAAS_NOPOS, "replayed message: its signature was seen before");
            taas_error_hint(err, "a client sends each message once (a fresh msg_id and date "
                                 "make a fresh signature); a copy sent again is never acted on");
            return -1;
        }
    }

    taas_msg *m = calloc(1, sizeof *m);
    if (!m) return oom(NULL, err);
    /* the header alone says whom to answer; a header too large to be one is not parsed */
    if (json[0].len > TAAS_WIRE_MAX_BYTES) {
        taas_msg_free(m);
        taas_error_set(err, ENAME, TAAS_NOPOS, "the header frame alone is %zu bytes", json[0].len);
        taas_error_hint(err, "the header needs msg_id, msg_type, session, username, date "
                             "and version, and nothing large");
        return -1;
    }
    m->header = parse_frame(&json[0], FRAME_NAMES[0], err);
    if (!m->header) {
        taas_msg_free(m);
        return -1;
    }
    m->msg_type = taas_json_get_str(m->header, "msg_type", NULL);
    if (!m->msg_type || !m->msg_type[0]) {
        taas_msg_free(m);
        taas_error_set(err, ENAME, TAAS_NOPOS, "message header has no msg_type");
        taas_error_hint(err, "the header needs msg_id, msg_type, session, username, date "
                             "and version");
        return -1;
    }
    m->n_ids = d;
    m->ids = blobs_copy(fr, d);
    if (!m->ids) return oom(m, err);

    /* From here the message is signed and answerable: what cannot be used is said in an
     * error reply, so that the client does not wait for one forever. */
    json_t **dst[3] = {&m->parent_header, &m->metadata, &m->content};
    /* counted as the client sent it: from the delimiter on (ROUTER adds the identities) */
    size_t bytes = total, frames = n_all - d;
    for (size_t i = 0; i < d; i++) bytes -= fr[i].len;
    if (bytes > TAAS_WIRE_MAX_BYTES) {
        m->undecodable = format("the request is %zu bytes; the kernel takes at most 64 MiB "
                                "(%zu bytes)", bytes, TAAS_WIRE_MAX_BYTES);
    } else if (n_all > TAAS_WIRE_MAX_FRAMES) {
        m->undecodable = format("the request has %zu frames; the kernel takes at most %d",
                                frames, TAAS_WIRE_MAX_FRAMES);
    } else {
        for (int i = 0; i < 3 && !m->undecodable; i++) {
            taas_error ferr;
            taas_error_clear(&ferr);
            *dst[i] = parse_frame(&json[1 + i], FRAME_NAMES[1 + i], &ferr);
            if (!*dst[i]) m->undecodable = format("%s", ferr.message);
        }
    }
    if (m->undecodable) {
        for (int i = 0; i < 3; i++)
            if (!*dst[i]) *dst[i] = json_object();
    } else {
        m->n_buffers = n - d - 6;
    }
    m->buffers = blobs_copy(fr + d + 6, m->n_buffers);
    if (!m->buffers || !m->parent_header || !m->metadata || !m->content) return oom(m, err);
    *out = m;
    return 0;
}

int taas_wire_parse(const taas_frame *fr, size_t n, taas_signer *signer, taas_digests *seen,
                    taas_msg **out, taas_error *err) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += fr[i].len;
    return parse(fr, n < TAAS_WIRE_MAX_FRAMES ? n : TAAS_WIRE_MAX_FRAMES, n, total, signer,
                 seen, out, err);
}

static void close_parts(zmq_msg_t *parts, size_t n) {
    for (size_t i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    free(parts);
}

int taas_wire_recv(void *socket, taas_signer *signer, taas_digests *seen, taas_msg **out,
                   taas_error *err) {
    *out = NULL;
    zmq_msg_t *parts = NULL;
    size_t n = 0, cap = 0, total = 0, frames = 0;
    int lost = 0;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        int rc;
        do {
            /* the first part may not be there yet; once it is, ZeroMQ holds the rest */
            rc = zmq_msg_recv(&m, socket, frames == 0 ? ZMQ_DONTWAIT : 0);
        } while (rc < 0 && errno == EINTR && frames > 0);
        if (rc < 0) {
            int e = errno;
            zmq_msg_close(&m);
            close_parts(parts, n);
            if (frames == 0 && (e == EAGAIN || e == EINTR)) return 1;
            taas_error_set(err, ENAME, TAAS_NOPOS, "receiving a message failed: %s", zmq_strerror(e));
            return -1;
        }
        frames++;
        total += zmq_msg_size(&m);
        int more = zmq_msg_more(&m);
        /* every part is read, so the socket stays in step; past the frame limit they are let
         * go at once, and parse() learns only how many there were */
        if (!lost && n < TAAS_WIRE_MAX_FRAMES && n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            zmq_msg_t *np = realloc(parts, ncap * sizeof *np);
            if (np) {
                parts = np;
                cap = ncap;
            } else {
                lost = 1;
            }
        }
        if (!lost && n < TAAS_WIRE_MAX_FRAMES) {
            zmq_msg_init(&parts[n]);
            zmq_msg_move(&parts[n++], &m);   /* zmq_msg_t must not be copied by assignment */
        }
        zmq_msg_close(&m);
        if (!more) break;
    }
    taas_frame *fr = lost ? NULL : calloc(n ? n : 1, sizeof *fr);
    if (!fr) {
        close_parts(parts, n);
        taas_error_set(err, ENAME, TAAS_NOPOS, "out of memory receiving a message of %zu frames",
                       frames);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        fr[i].data = zmq_msg_data(&parts[i]);
        fr[i].len = zmq_msg_size(&parts[i]);
    }
    int rc = parse(fr, n, frames, total, signer, seen, out, err);
    free(fr);
    close_parts(parts, n);
    return rc;
}
