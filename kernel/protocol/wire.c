#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "utf8.h"

#define ENAME "TaasProtocolError"

static const taas_srcpos NOPOS = {0, 0};
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

/* One JSON frame: sanitized for UTF-8 (after the signature check, which covers the
 * bytes as sent), parsed, and required to be an object. */
static json_t *parse_frame(const taas_frame *f, const char *name, taas_error *err) {
    const char *text = f->data;
    size_t len = f->len;
    char *clean = NULL;
    if (!taas_utf8_valid(text, len)) {
        clean = taas_utf8_sanitize(text, len, &len);
        if (!clean) {
            taas_error_set(err, ENAME, NOPOS, "out of memory parsing the %s frame", name);
            return NULL;
        }
        text = clean;
    }
    json_error_t jerr;
    json_t *v = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
    free(clean);
    if (!v) {
        char *why = taas_utf8_sanitize(jerr.text, strlen(jerr.text), NULL);
        taas_error_set(err, ENAME, NOPOS, "the %s frame is not valid JSON: %s (column %d)", name,
                       why ? why : "?", jerr.column);
        free(why);
        taas_error_hint(err, "each of header, parent_header, metadata and content must be a "
                             "UTF-8 JSON object");
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        taas_error_set(err, ENAME, NOPOS, "the %s frame is JSON but not an object", name);
        taas_error_hint(err, "send {} for an empty %s", name);
        return NULL;
    }
    scrub_nuls(v);
    return v;
}

static int too_large(size_t total, taas_error *err) {
    taas_error_set(err, ENAME, NOPOS,
                   "message of %zu bytes is larger than the limit of %zu bytes (64 MiB)", total,
                   TAAS_WIRE_MAX_BYTES);
    taas_error_hint(err, "send large data as files that a cell reads, not inside messages");
    return -1;
}

int taas_wire_parse(const taas_frame *fr, size_t n, taas_signer *signer, taas_msg **out,
                    taas_error *err) {
    *out = NULL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += fr[i].len;
    if (total > TAAS_WIRE_MAX_BYTES) return too_large(total, err);
    if (n > TAAS_WIRE_MAX_FRAMES) {
        taas_error_set(err, ENAME, NOPOS, "message has %zu frames, more than the limit of %d", n,
                       TAAS_WIRE_MAX_FRAMES);
        taas_error_hint(err, "send fewer binary buffers per message");
        return -1;
    }

    static const size_t dlen = sizeof TAAS_WIRE_DELIM - 1;
    size_t d = 0;
    while (d < n && !(fr[d].len == dlen && memcmp(fr[d].data, TAAS_WIRE_DELIM, dlen) == 0)) d++;
    if (d == n) {
        taas_error_set(err, ENAME, NOPOS, "message of %zu frames has no \"%s\" delimiter", n,
                       TAAS_WIRE_DELIM);
        taas_error_hint(err, "frames must be: identities, \"%s\", signature, header, "
                             "parent_header, metadata, content, buffers", TAAS_WIRE_DELIM);
        return -1;
    }
    if (n - d - 1 < 5) {
        taas_error_set(err, ENAME, NOPOS,
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
            taas_error_set(err, ENAME, NOPOS, "unsigned message (empty signature frame)");
            taas_error_hint(err, "sign messages with HMAC-SHA256 and the key from the "
                                 "connection file");
            return -1;
        }
        if (!taas_signer_verify(signer, parts, lens, 4, sig->data, sig->len)) {
            taas_error_set(err, ENAME, NOPOS, "message signature does not match");
            taas_error_hint(err, "sign messages with HMAC-SHA256 and the key from the "
                                 "connection file");
            return -1;
        }
    }

    taas_msg *m = calloc(1, sizeof *m);
    if (!m) {
        taas_error_set(err, ENAME, NOPOS, "out of memory receiving a message");
        return -1;
    }
    json_t **dst[4] = {&m->header, &m->parent_header, &m->metadata, &m->content};
    for (int i = 0; i < 4; i++) {
        *dst[i] = parse_frame(&json[i], FRAME_NAMES[i], err);
        if (!*dst[i]) {
            taas_msg_free(m);
            return -1;
        }
    }
    m->msg_type = taas_json_get_str(m->header, "msg_type", NULL);
    if (!m->msg_type || !m->msg_type[0]) {
        taas_msg_free(m);
        taas_error_set(err, ENAME, NOPOS, "message header has no msg_type");
        taas_error_hint(err, "the header needs msg_id, msg_type, session, username, date "
                             "and version");
        return -1;
    }
    m->n_ids = d;
    m->n_buffers = n - d - 6;
    m->ids = blobs_copy(fr, d);
    m->buffers = blobs_copy(fr + d + 6, m->n_buffers);
    if (!m->ids || !m->buffers) {
        taas_msg_free(m);
        taas_error_set(err, ENAME, NOPOS, "out of memory receiving a message");
        return -1;
    }
    *out = m;
    return 0;
}

static void close_parts(zmq_msg_t *parts, size_t n) {
    for (size_t i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    free(parts);
}

int taas_wire_recv(void *socket, taas_signer *signer, taas_msg **out, taas_error *err) {
    *out = NULL;
    zmq_msg_t *parts = NULL;
    size_t n = 0, cap = 0, total = 0, frames = 0;
    int discard = 0;
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
            taas_error_set(err, ENAME, NOPOS, "receiving a message failed: %s", zmq_strerror(e));
            return -1;
        }
        frames++;
        total += zmq_msg_size(&m);
        int more = zmq_msg_more(&m);
        /* past a limit, the rest is read and thrown away so the socket stays in step */
        if (total > TAAS_WIRE_MAX_BYTES || frames > TAAS_WIRE_MAX_FRAMES) discard = 1;
        if (!discard && n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            zmq_msg_t *np = realloc(parts, ncap * sizeof *np);
            if (np) {
                parts = np;
                cap = ncap;
            } else {
                discard = 1;
            }
        }
        if (!discard) {
            zmq_msg_init(&parts[n]);
            zmq_msg_move(&parts[n++], &m);   /* zmq_msg_t must not be copied by assignment */
        }
        zmq_msg_close(&m);
        if (!more) break;
    }
    if (discard) {
        close_parts(parts, n);
        if (total > TAAS_WIRE_MAX_BYTES) return too_large(total, err);
        taas_error_set(err, ENAME, NOPOS, "message has %zu frames, more than the limit of %d "
                       "(or memory ran out)", frames, TAAS_WIRE_MAX_FRAMES);
        taas_error_hint(err, "send fewer binary buffers per message");
        return -1;
    }
    taas_frame *fr = calloc(n ? n : 1, sizeof *fr);
    if (!fr) {
        close_parts(parts, n);
        taas_error_set(err, ENAME, NOPOS, "out of memory receiving a message");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        fr[i].data = zmq_msg_data(&parts[i]);
        fr[i].len = zmq_msg_size(&parts[i]);
    }
    int rc = taas_wire_parse(fr, n, signer, out, err);
    free(fr);
    close_parts(parts, n);
    return rc;
}
