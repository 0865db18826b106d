/* The control plane's messages: JSON bodies (and a blob) over ROUTER/DEALER. */
#include "jobctl.h"
#include "errnames.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

const char *taas_ctl_type(const taas_ctl_msg *m) {
    const char *t = m->body ? json_string_value(json_object_get(m->body, "t")) : NULL;
    return t ? t : "";
}

void taas_ctl_msg_clear(taas_ctl_msg *m) {
    json_decref(m->body);
    free(m->blob);
    memset(m, 0, sizeof *m);
}

json_t *taas_ctl_body(const char *type) {
    json_t *b = json_object();
    json_object_set_new(b, "t", json_string(type));
    return b;
}

static int io_error(taas_error *err, const char *what) {
    taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "the job's control plane: %s failed: %s", what, zmq_strerror(errno));
    taas_error_hint(err, "a worker or the kernel may have gone away; run the cell again");
    return -1;
}

int taas_ctl_send(void *sock, const char *peer, json_t *body, const void *blob, size_t n, int flags,
                  taas_error *err) {
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a control message");
    int more = blob && n ? ZMQ_SNDMORE : 0, rc = 0;
    if (peer && zmq_send(sock, peer, strlen(peer), flags | ZMQ_SNDMORE) < 0) rc = io_error(err, "sending");
    if (!rc && zmq_send(sock, text, strlen(text), flags | more) < 0) rc = io_error(err, "sending");
    if (!rc && more && zmq_send(sock, blob, n, flags) < 0) rc = io_error(err, "sending");
    free(text);
    return rc;
}

/* Receives the rest of a multipart message into nothing. */
static void drain(void *sock) {
    int more = 1;
    size_t len = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        zmq_msg_recv(&f, sock, 0);
        zmq_msg_close(&f);
        len = sizeof more;
    }
}

static int has_more(void *sock) {
    int more = 0;
    size_t len = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more;
}

static int malformed(void *sock, taas_ctl_msg *m, taas_error *err, const char *why) {
    drain(sock);
    taas_ctl_msg_clear(m);
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a control message was dropped: %s", why);
    taas_error_hint(err, "a taas-worker of another version may be connected; install taas-kernel and taas-worker "
                         "together");
    return -1;
}

int taas_ctl_recv(void *sock, int is_router, int flags, taas_ctl_msg *m, taas_error *err) {
    memset(m, 0, sizeof *m);
    zmq_msg_t f;
    zmq_msg_init(&f);
    if (zmq_msg_recv(&f, sock, flags) < 0) {
        zmq_msg_close(&f);
        if (errno == EAGAIN) return 1;
        return io_error(err, "receiving");
    }
    if (is_router) {
        size_t n = zmq_msg_size(&f);
        if (n >= sizeof m->peer || !has_more(sock)) {
            zmq_msg_close(&f);
            return malformed(sock, m, err, "no body after the sender's identity");
        }
        memcpy(m->peer, zmq_msg_data(&f), n);
        m->peer[n] = '\0';
        zmq_msg_close(&f);
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, 0) < 0) {
            zmq_msg_close(&f);
            return io_error(err, "receiving");
        }
    }
    json_error_t je;
    m->body = json_loadb(zmq_msg_data(&f), zmq_msg_size(&f), 0, &je);
    zmq_msg_close(&f);
    if (!json_is_object(m->body) || !json_is_string(json_object_get(m->body, "t")))
        return malformed(sock, m, err, "its body is not a JSON object with a \"t\"");
    if (has_more(sock)) {
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, 0) < 0) {
            zmq_msg_close(&f);
            taas_ctl_msg_clear(m);
            return io_error(err, "receiving");
        }
        m->blob_len = zmq_msg_size(&f);
        m->blob = malloc(m->blob_len ? m->blob_len : 1);
        if (m->blob) memcpy(m->blob, zmq_msg_data(&f), m->blob_len);
        zmq_msg_close(&f);
        if (!m->blob) {
            drain(sock);
            taas_ctl_msg_clear(m);
            return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a control message's data");
        }
        if (has_more(sock)) return malformed(sock, m, err, "it has more than two frames");
    }
    return 0;
}

void *taas_ctl_connect(void *zctx, const taas_zsec *sec, const char *endpoint, const char *identity, taas_error *err) {
    taas_zsock_cfg c = {.type = ZMQ_DEALER, .what = "the job's control", .sec = sec, .linger_ms = 0, .sndhwm = -1,
                        .rcvhwm = -1, .identity = identity};
    return taas_zsock_connect(zctx, &c, endpoint, err);
}
