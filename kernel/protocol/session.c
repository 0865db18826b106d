#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <zmq.h>

#include "errnames.h"
#include "log.h"
#include "utf8.h"

#define ENAME TAAS_ERR_PROTOCOL

struct taas_session {
    taas_signer *signer;
    taas_digests *seen;   /* signatures received, to refuse replays */
    char id[37];
    char *username;
};

void taas_uuid4(char *out) {
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            /* no kernel entropy interface: ids need only be unique, not secret */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            unsigned long long x = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20) ^
                                   ((unsigned long long)(size_t)out << 7);
            for (size_t i = got; i < sizeof b; i++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                b[i] = (unsigned char)(x >> 56);
            }
            break;
        }
        got += (size_t)r;
    }
    b[6] = (unsigned char)((b[6] & 0x0F) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3F) | 0x80);
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

void taas_iso8601_now(char *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%06ldZ", ts.tv_nsec / 1000);
}

taas_session *taas_session_new(const void *key, size_t key_len, taas_error *err) {
    taas_session *s = calloc(1, sizeof *s);
    if (!s) {
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "out of memory");
        return NULL;
    }
    s->signer = taas_signer_new(key, key_len, err);
    if (!s->signer) {
        free(s);
        return NULL;
    }
    s->seen = taas_digests_new(TAAS_DIGESTS_MAX);
    taas_uuid4(s->id);
    const char *user = getenv("USER");
    if (!user || !*user) user = "taas";
    s->username = taas_utf8_sanitize(user, strlen(user), NULL);
    if (!s->username || !s->seen) {
        taas_session_free(s);
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "out of memory");
        return NULL;
    }
    return s;
}

void taas_session_free(taas_session *s) {
    if (!s) return;
    taas_signer_free(s->signer);
    taas_digests_free(s->seen);
    free(s->username);
    free(s);
}

taas_signer *taas_session_signer(taas_session *s) {
    return s->signer;
}

taas_digests *taas_session_digests(taas_session *s) {
    return s->seen;
}

const char *taas_session_id(const taas_session *s) {
    return s->id;
}

void taas_frames_free(taas_frames *f) {
    if (!f->f) return;
    for (size_t i = 0; i < f->n; i++) free(f->f[i].data);
    free(f->f);
    f->f = NULL;
    f->n = 0;
}

static int dump(const json_t *v, taas_blob *out) {
    char *text = json_dumps(v, JSON_COMPACT);
    if (!text) return -1;
    out->data = text;
    out->len = strlen(text);
    return 0;
}

int taas_session_serialize(taas_session *s, const taas_blob *ids, size_t n_ids,
                           const char *msg_type, const json_t *parent_header,
                           const json_t *metadata, const json_t *content, taas_frames *out,
                           char *msg_id_out, taas_error *err) {
    out->f = NULL;
    out->n = 0;
    if (!content) {
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "no content for a %s message", msg_type);
        return -1;
    }
    char msg_id[37], date[32];
    taas_uuid4(msg_id);
    taas_iso8601_now(date);
    json_t *header = json_pack("{s:s, s:s, s:o, s:s, s:o, s:s}", "msg_id", msg_id, "session",
                               s->id, "username", taas_json_string(s->username), "date", date,
                               "msg_type", taas_json_string(msg_type), "version",
                               TAAS_PROTOCOL_VERSION);
    json_t *empty = json_object();
    size_t n = n_ids + 6;
    taas_blob *f = calloc(n, sizeof *f);
    int rc = (header && empty && f) ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n_ids; i++) {
        f[i].data = malloc(ids[i].len ? ids[i].len : 1);
        if (!f[i].data) {
            rc = -1;
            break;
        }
        if (ids[i].len) memcpy(f[i].data, ids[i].data, ids[i].len);
        f[i].len = ids[i].len;
    }
    if (rc == 0) {
        f[n_ids].data = strdup(TAAS_WIRE_DELIM);
        f[n_ids].len = strlen(TAAS_WIRE_DELIM);
        if (!f[n_ids].data || dump(header, &f[n_ids + 2]) ||
            dump(parent_header ? parent_header : empty, &f[n_ids + 3]) ||
            dump(metadata ? metadata : empty, &f[n_ids + 4]) || dump(content, &f[n_ids + 5]))
            rc = -1;
    }
    if (rc == 0) {
        const void *parts[4];
        size_t lens[4];
        for (int i = 0; i < 4; i++) {
            parts[i] = f[n_ids + 2 + i].data;
            lens[i] = f[n_ids + 2 + i].len;
        }
        char sig[TAAS_HMAC_HEX_LEN + 1];
        if (taas_signer_sign(s->signer, parts, lens, 4, sig) || !(f[n_ids + 1].data = strdup(sig)))
            rc = -1;
        else
            f[n_ids + 1].len = strlen(sig);
    }
    json_decref(header);
    json_decref(empty);
    if (rc) {
        taas_frames tmp = {f, f ? n : 0};
        taas_frames_free(&tmp);
        taas_error_set(err, ENAME, (taas_srcpos){0, 0}, "cannot encode a %s message", msg_type);
        return -1;
    }
    if (msg_id_out) memcpy(msg_id_out, msg_id, sizeof msg_id);
    out->f = f;
    out->n = n;
    return 0;
}

int taas_session_send(taas_session *s, void *socket, const taas_blob *ids, size_t n_ids,
                      const char *msg_type, const json_t *parent_header, json_t *metadata,
                      json_t *content) {
    taas_frames fr;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_session_serialize(s, ids, n_ids, msg_type, parent_header, metadata, content,
                                    &fr, NULL, &err);
    json_decref(metadata);
    json_decref(content);
    if (rc) {
        taas_log("dropping an outgoing message: %s", err.message);
        return -1;
    }
    for (size_t i = 0; i < fr.n && rc == 0; i++) {
        int r;
        do {
            r = zmq_send(socket, fr.f[i].data, fr.f[i].len, i + 1 < fr.n ? ZMQ_SNDMORE : 0);
        } while (r < 0 && errno == EINTR);
        if (r < 0) {
            taas_log("sending a %s message failed: %s", msg_type, zmq_strerror(errno));
            rc = -1;
        }
    }
    taas_frames_free(&fr);
    return rc;
}
