/* The data plane (workers/stream_recv.h, stream_wire.h, dataloader's taas_batch_view):
 * what a rank decodes from the loader workers. Every frame that could be a batch goes
 * through taas_batch_view and taas_stream_wire_adopt (in place, and from an odd address,
 * which is copied); then the whole sequence is sent to a real receiver (ROUTER, its receive
 * thread, the reorder table and credit) over inproc:// from one loader connection, and the
 * rank takes its first items. A batch handed over is read whole, so that ASan sees arrays
 * that are not inside the message.
 *
 * Input: a flags byte (1: the connection first says a valid hello as worker 0 of stream 0),
 * then messages separated by 0x1f, each its frames separated by 0x1e (frame 0 is the kind:
 * "H", "B", "E"). The receiver is rank 0 of 2, with streams of 2 and 1 workers. */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "fuzz_zmq.h"
#include "stream_recv.h"
#include "stream_wire.h"

#define MAX_MSGS 16
#define MAX_FRAMES 4

static void read_batch(const taas_batch *b) {
    size_t floats = (size_t)b->n * b->c * b->h * b->w;
    if ((uintptr_t)b->images % 8 || (uintptr_t)b->labels % 8 || (uintptr_t)b->indices % 8) abort();
    fz_touch(b->images, floats * sizeof(float));
    fz_touch(b->labels, (size_t)b->n * sizeof(int64_t));
    fz_touch(b->indices, (size_t)b->n * sizeof(uint64_t));
}

static void free_odd(void *data, void *hint) {
    (void)data;
    free(hint);
}

/* One frame as a batch: viewed in an aligned copy, and adopted from a message. */
static void as_batch(const uint8_t *p, size_t len) {
    taas_error err;
    void *buf = aligned_alloc(64, (len + 63) / 64 * 64 + 64);
    if (!buf) abort();
    if (len) memcpy(buf, p, len);
    taas_batch v;
    taas_error_clear(&err);
    if (taas_batch_view(buf, len, &v, &err) == 0) {
        if (v.buf != buf || v.buf_len != len) abort();
        read_batch(&v);
    }
    free(buf);

    for (int odd = 0; odd < 2; odd++) {
        zmq_msg_t m;
        if (odd) {
            /* a message whose bytes are not 8-byte aligned */
            uint8_t *raw = malloc(len + 1);
            if (!raw) abort();
            if (len) memcpy(raw + 1, p, len);
            if (zmq_msg_init_data(&m, raw + 1, len, free_odd, raw)) abort();
        } else {
            if (zmq_msg_init_size(&m, len)) abort();
            if (len) memcpy(zmq_msg_data(&m), p, len);
        }
        taas_error_clear(&err);
        taas_batch *b = taas_stream_wire_adopt(&m, &err);
        if (b) {
            read_batch(b);
            taas_batch_free(b);
        }
        zmq_msg_close(&m);
    }
}

static void send_frames(void *s, const uint8_t *const *part, const size_t *len, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (zmq_send(s, part[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0) < 0) abort();
}

static void send_str(void *s, const char *kind, const char *body) {
    const uint8_t *part[2] = {(const uint8_t *)kind, (const uint8_t *)body};
    size_t len[2] = {strlen(kind), strlen(body)};
    send_frames(s, part, len, 2);
}

/* Waits until the receiver acknowledges the end (it has then handled every message before
 * it), or until nothing comes for 30 ms: a connection that never said a good hello gets no
 * answer. */
static void wait_ack(void *s) {
    for (;;) {
        zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 30) <= 0) return;
        int frames = 0, ack = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, s, 0) < 0) abort();
            ack = frames++ == 0 && zmq_msg_size(&m) == 1 && *(const char *)zmq_msg_data(&m) == TAAS_STREAM_ACK;
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        if (ack && frames == 1) return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned long serial;
    if (size < 1) return 0;
    const uint8_t *msgs[MAX_MSGS];
    size_t lens[MAX_MSGS];
    size_t n = fz_split(data + 1, size - 1, 0x1f, msgs, lens, MAX_MSGS);
    const uint8_t *part[MAX_MSGS][MAX_FRAMES];
    size_t plen[MAX_MSGS][MAX_FRAMES], nf[MAX_MSGS];
    for (size_t i = 0; i < n; i++) {
        nf[i] = fz_split(msgs[i], lens[i], 0x1e, part[i], plen[i], MAX_FRAMES);
        if (nf[i] >= 2) as_batch(part[i][1], plen[i][1]);
    }

    char bind[64];
    snprintf(bind, sizeof bind, "inproc://fuzz-stream-%lu", serial++);
    const uint32_t workers[2] = {2, 1};
    taas_stream_recv_cfg cfg = {.zctx = zctx, .bind = bind, .rank = 0, .world = 2, .nstreams = 2,
                                .workers = workers, .credit = 4};
    taas_error err;
    taas_error_clear(&err);
    taas_stream_recv *r = taas_stream_recv_new(&cfg, &err);
    if (!r) abort();
    void *d = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    if (!d || zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero) || zmq_connect(d, taas_stream_recv_endpoint(r)))
        abort();
    if (data[0] & 1) send_str(d, "H", "{\"stream\": 0, \"worker\": 0, \"pid\": 1}");
    for (size_t i = 0; i < n; i++) send_frames(d, part[i], plen[i], nf[i]);
    send_str(d, "E", "{\"stream\": 0, \"worker\": 0}");
    wait_ack(d);

    /* the rank's first items of each stream, without waiting */
    for (uint32_t s = 0; s < 2; s++)
        for (uint64_t k = 0; k <= 2; k += 2) {
            taas_batch *b = NULL;
            taas_error_clear(&err);
            int rc = taas_stream_recv_take(r, s, 0, k, 0, NULL, &b, &err);
            fz_say("take stream %u item %llu: %s", s, (unsigned long long)k, rc ? err.message : "a batch");
            if (rc == 0) {
                if (!b || b->k != k || b->epoch != 0) abort();
                read_batch(b);
                taas_batch_free(b);
            }
        }
    taas_stream_recv_stats st;
    taas_stream_recv_stats_get(r, &st);
    zmq_close(d);
    taas_stream_recv_free(r);
    return 0;
}
