/* What the two sides of the data plane share (stream_send.h describes the wire): the message
 * kinds, how a socket is set up, and moving the small frames. Private to taas_stream. */
#ifndef TAAS_STREAM_WIRE_H
#define TAAS_STREAM_WIRE_H

#include <stddef.h>
#include <zmq.h>

#include "error.h"
#include "pipeline.h"

/* Frame 0 of a message (after the ROUTER's routing id): one byte. */
enum {
    TAAS_STREAM_HELLO = 'H',   /* loader -> rank: {"stream", "worker", "pid"} */
    TAAS_STREAM_CREDIT = 'C',  /* rank -> loader: uint32 LE, more batches it may send */
    TAAS_STREAM_BATCH = 'B',   /* loader -> rank: a taas_batch buffer */
    TAAS_STREAM_END = 'E',     /* loader -> rank: {"stream", "worker"}, no more batches */
    TAAS_STREAM_ACK = 'A'      /* rank -> loader: the end and every batch before it arrived */
};

/* A zero-copy message passes from the sending thread to ZeroMQ's I/O thread, which frees it,
 * through libzmq's own atomics; ThreadSanitizer cannot see those (libzmq is not built with
 * it), so the hand-over is told to it. */
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#define TAAS_STREAM_HANDOVER(p) __tsan_release(p)
#define TAAS_STREAM_TAKEOVER(p) __tsan_acquire(p)
#else
#define TAAS_STREAM_HANDOVER(p) ((void)(p))
#define TAAS_STREAM_TAKEOVER(p) ((void)(p))
#endif

/* How often a wait looks at a caller's stop flag, which nothing can signal. */
#define TAAS_STREAM_SLICE_S 0.02

/* One whole message without waiting: 1 with its first frames in f (*n of them, at most max;
 * later frames are read and dropped, counted in *extra); 0 when none is waiting; -1 on a
 * ZeroMQ error (errno). The caller closes f[0..*n). */
int taas_stream_wire_recv(void *sock, zmq_msg_t *f, int max, int *n, int *extra);
void taas_stream_wire_close(zmq_msg_t *f, int n);

/* The batch in m, in place: moves m's content into a taas_batch whose release hook closes
 * it (the caller still closes m). A small message that ZeroMQ left at an address that is not
 * 8-byte aligned is copied. NULL with a TaasValueError (or TaasMemoryError). */
taas_batch *taas_stream_wire_adopt(zmq_msg_t *m, taas_error *err);

/* Sends [id,] kind[, payload] without waiting (id NULL: none; payload NULL: none); -1 with
 * errno. */
int taas_stream_wire_send(void *sock, const void *id, size_t id_len, char kind, const void *payload, size_t len);

/* Whether the caller's stop flag (NULL: none) is up. An atomic load: the flag may be raised
 * by another thread (with an atomic store) as well as by a signal handler. */
static inline int taas_stream_stopped(volatile int *stop) {
    return stop && __atomic_load_n(stop, __ATOMIC_RELAXED);
}

/* How long to wait now, in seconds, for a deadline on taas_now's clock (INFINITY: none), in
 * slices when the caller has a stop flag to look at: >= 0, or INFINITY for forever. */
double taas_stream_wire_wait_s(double deadline, int has_stop);

#endif
