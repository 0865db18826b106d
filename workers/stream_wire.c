/* The data plane's shared pieces: socket set-up, the small frames, a received batch in place. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errnames.h"
#include "stream_wire.h"

/* A received batch: the message whose bytes it points into, freed with it. */
typedef struct received {
    taas_batch b;            /* first: taas_batch_free's free(b) frees the whole */
    zmq_msg_t msg;
} received;
_Static_assert(offsetof(received, b) == 0, "taas_batch_free frees a received batch through its first member");

static void release_msg(void *ctx) {
    zmq_msg_close(ctx);
}

taas_batch *taas_stream_wire_adopt(zmq_msg_t *m, taas_error *err) {
    size_t len = zmq_msg_size(m);
    if ((uintptr_t)zmq_msg_data(m) % 8 != 0) {
        /* a small message ZeroMQ left at an odd place in its receive buffer: large ones get
         * their own allocation, so only these few kilobytes are copied */
        void *copy = aligned_alloc(64, (len + 63) / 64 * 64 + 64);
        taas_batch *b = copy ? malloc(sizeof *b) : NULL;
        if (b) memcpy(copy, zmq_msg_data(m), len);
        if (!b || taas_batch_view(copy, len, b, err)) {
            if (!b) taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a batch of %zu bytes", len);
            free(copy);
            free(b);
            return NULL;
        }
        return b;
    }
    received *h = malloc(sizeof *h);
    if (!h) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory receiving a batch");
        return NULL;
    }
    zmq_msg_init(&h->msg);
    zmq_msg_move(&h->msg, m);
    if (taas_batch_view(zmq_msg_data(&h->msg), len, &h->b, err)) {
        zmq_msg_close(&h->msg);
        free(h);
        return NULL;
    }
    h->b.release = release_msg;
    h->b.release_ctx = &h->msg;
    return &h->b;
}

void taas_stream_wire_close(zmq_msg_t *f, int n) {
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}

int taas_stream_wire_recv(void *sock, zmq_msg_t *f, int max, int *n, int *extra) {
    *n = *extra = 0;
    for (;;) {
        zmq_msg_t scratch, *m = *n < max ? &f[*n] : &scratch;
        zmq_msg_init(m);
        /* the first frame decides whether a message waits; the others of a message that has
         * begun to arrive are all there (ZeroMQ delivers messages whole) */
        if (zmq_msg_recv(m, sock, ZMQ_DONTWAIT) < 0) {
            int e = errno, none = *n == 0 && !*extra;
            zmq_msg_close(m);
            taas_stream_wire_close(f, *n);
            *n = 0;
            errno = e;
            return e == EAGAIN && none ? 0 : -1;
        }
        int more = zmq_msg_more(m);
        if (m == &scratch) {
            zmq_msg_close(m);
            (*extra)++;
        } else {
            (*n)++;
        }
        if (!more) return 1;
    }
}

int taas_stream_wire_send(void *sock, const void *id, size_t id_len, char kind, const void *payload, size_t len) {
    if (id && zmq_send(sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return -1;
    if (zmq_send(sock, &kind, 1, (payload ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) return -1;
    if (payload && zmq_send(sock, payload, len, ZMQ_DONTWAIT) < 0) return -1;
    return 0;
}

double taas_stream_wire_wait_s(double deadline, int has_stop) {
    double left = deadline - taas_now();
    if (left < 0) left = 0;
    if (has_stop && left > TAAS_STREAM_SLICE_S) left = TAAS_STREAM_SLICE_S;
    return left;
}
