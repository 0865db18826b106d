/* The control plane of an offloaded job (workers/jobctl.h): messages as taas_ctl_recv takes
 * them off a real ROUTER (the kernel's side: [identity] body [blob]) or DEALER (a worker's
 * side), over inproc://, and what the kernel makes of a rank's progress messages (start,
 * step, epoch): the training display, rendered (kernel/job/trainview.h).
 *
 * Input: a flags byte (1: the kernel sends to a worker, else a worker to the kernel), the
 * worker's routing identity, then messages separated by 0x1f, each its frames separated
 * by 0x1e; the identity ends at the first 0x1f. */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "fuzz_io.h"
#include "fuzz_zmq.h"
#include "jobctl.h"
#include "trainview.h"

#define MAX_MSGS 16
#define MAX_FRAMES 8

static void *sock(int type, const char *id, size_t id_len) {
    void *s = zmq_socket(zctx, type);
    int zero = 0, timeout = 2000; /* a lost message fails the run instead of hanging it */
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout) ||
        (id && zmq_setsockopt(s, ZMQ_ROUTING_ID, id, id_len)))
        abort();
    return s;
}

static void send_frames(void *s, const uint8_t *msg, size_t len, const char *peer) {
    const uint8_t *part[MAX_FRAMES];
    size_t plen[MAX_FRAMES];
    size_t n = fz_split(msg, len, 0x1e, part, plen, MAX_FRAMES);
    if (peer && zmq_send(s, peer, strlen(peer), ZMQ_SNDMORE) < 0) abort();
    for (size_t i = 0; i < n; i++)
        if (zmq_send(s, part[i], plen[i], i + 1 < n ? ZMQ_SNDMORE : 0) < 0) abort();
}

/* What the kernel does with a rank's message (kernel/job/job.c's on_msg). */
static void kernel_reads(taas_trainview *v, const taas_ctl_msg *m) {
    const char *t = taas_ctl_type(m);
    if (!strcmp(t, "start")) taas_trainview_start(v, m->body);
    else if (!strcmp(t, "step")) taas_trainview_step(v, m->body);
    else if (!strcmp(t, "epoch")) taas_trainview_epoch(v, m->body);
    else if (!strcmp(t, "log")) taas_trainview_status(v, json_string_value(json_object_get(m->body, "text")));
    taas_trainview_show(v, &IO, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned long serial;
    if (size < 1) return 0;
    int to_worker = data[0] & 1;
    const uint8_t *msgs[MAX_MSGS + 1];
    size_t lens[MAX_MSGS + 1];
    size_t n = fz_split(data + 1, size - 1, 0x1f, msgs, lens, MAX_MSGS + 1);
    /* a routing id is 1 to 255 bytes and may not start with a zero byte */
    char id[256] = "rank.0";
    size_t id_len = strlen(id);
    if (lens[0] >= 1 && lens[0] <= 255 && msgs[0][0] != 0) {
        memcpy(id, msgs[0], lens[0]);
        id_len = lens[0];
    }
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "inproc://fuzz-ctl-%lu", serial++);
    void *router = sock(ZMQ_ROUTER, NULL, 0), *dealer = sock(ZMQ_DEALER, id, id_len);
    if (zmq_bind(router, endpoint) || zmq_connect(dealer, endpoint)) abort();

    taas_ctl_msg m;
    taas_error err;
    if (to_worker) {
        /* the ROUTER learns the worker's identity from a first message, as from its hello */
        if (zmq_send(dealer, "{\"t\":\"hello\"}", 13, 0) < 0) abort();
        taas_error_clear(&err);
        char peer[sizeof m.peer] = "";
        if (taas_ctl_recv(router, 1, 0, &m, &err) == 0) { /* else its identity is too long */
            memcpy(peer, m.peer, sizeof peer);
            taas_ctl_msg_clear(&m);
        }
        if (peer[0] && strlen(peer) == id_len) { /* an identity with a NUL cannot be addressed by name */
            for (size_t i = 1; i < n; i++) {
                send_frames(router, msgs[i], lens[i], peer);
                taas_error_clear(&err);
                int rc = taas_ctl_recv(dealer, 0, 0, &m, &err);
                fz_say("worker got: %s", rc ? err.message : taas_ctl_type(&m));
                if (rc == 0) taas_ctl_msg_clear(&m);
            }
        }
    } else {
        taas_trainview *v = taas_trainview_new("fuzz");
        if (!v) abort();
        for (size_t i = 1; i < n; i++) {
            send_frames(dealer, msgs[i], lens[i], NULL);
            taas_error_clear(&err);
            int rc = taas_ctl_recv(router, 1, 0, &m, &err);
            fz_say("kernel got: %s", rc ? err.message : taas_ctl_type(&m));
            if (rc == 1) abort(); /* every message sent is received, whole or dropped */
            if (rc == 0) {
                if (!json_is_object(m.body) || (m.blob_len && !m.blob)) abort();
                kernel_reads(v, &m);
                taas_ctl_msg_clear(&m);
            }
        }
        taas_trainview_end(v, "done", "/tmp/weights.safetensors");
        taas_trainview_show(v, &IO, 1);
        taas_trainview_free(v);
    }
    zmq_close(dealer);
    zmq_close(router);
    return 0;
}
