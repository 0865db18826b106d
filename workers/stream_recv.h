/* A rank's side of the data plane (see stream_send.h for the wire). Rank r of W binds one
 * ROUTER; the workers of every registered DataLoader (stream) connect to it. A receive
 * thread takes batches off the socket into a reorder table and grants credit; the training
 * loop takes the items it needs in its own order. Rank r trains items k = s*W + r of each
 * epoch, and item k of stream s comes from worker k % M_s of that stream.
 *
 * Exactly once: an item that arrives twice (a replacement loader redoing the work of one
 * that died), or after the rank has taken it or asked for a later item of its stream, is
 * dropped and its credit given back. A new hello from (stream, worker) replaces the
 * connection that worker had: the new one gets a full credit window, the old one nothing
 * more; what the old one delivered stays, what it still sends is dropped (stale).
 *
 * Credit: each connection may have at most `credit` batches in flight or waiting here; a
 * credit goes back to the sender when the rank takes (or drops) one of its batches. So a
 * rank holds at most credit x (M_0 + M_1 + ...) batches, plus, for a moment after a
 * replacement, what the replaced connection had delivered. A loader that sends beyond its
 * credit, or a malformed message, is a fault that the stream's takes report.
 *
 * Threads: the receive thread owns the socket; take may be called from any thread, one
 * taker per stream at a time. */
#ifndef TAAS_STREAM_RECV_H
#define TAAS_STREAM_RECV_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "pipeline.h"
#include "zsock.h"

typedef struct taas_stream_recv taas_stream_recv;

typedef struct taas_stream_recv_cfg {
    void *zctx;                /* the process's ZeroMQ context (borrowed) */
    const taas_zsec *sec;      /* the job's security for zctx (NULL: plain, e.g. ipc://) */
    const char *bind;          /* e.g. "tcp://127.0.0.1:*" */
    uint32_t rank, world;      /* r and W */
    uint32_t nstreams;         /* registered loaders that stream to the ranks */
    const uint32_t *workers;   /* M_s for each stream: the worker numbers it accepts */
    int sized;                 /* the pools size themselves (--cpus auto): which worker makes
                                  an item changes with the pool, so a timeout names none */
    uint32_t credit;           /* batches per connection in flight or waiting, >= 1; given
                                  back in chunks of credit/4. A window of a few MB suits
                                  small batches (bench/RESULTS.md, "Data plane") */
} taas_stream_recv_cfg;

/* Binds and starts the receive thread. NULL with err (a bind that fails names the address). */
taas_stream_recv *taas_stream_recv_new(const taas_stream_recv_cfg *cfg, taas_error *err);
/* Stops the thread, frees every batch still held, closes the socket; returns promptly, also
 * while a take waits in another thread (that take returns 1) or loaders are connected.
 * Batches already taken stay valid. */
void taas_stream_recv_free(taas_stream_recv *r);

/* The endpoint the ROUTER is bound to, with the port the system chose ("tcp://127.0.0.1:41234"). */
const char *taas_stream_recv_endpoint(const taas_stream_recv *r);

/* Item k (k % W == r) of epoch e of stream s: waits until it has arrived and hands it over
 * (*out: a batch the caller frees with taas_batch_free; its memory is the received message,
 * not a copy, so buf is 8-byte aligned at least, the arrays 64-byte aligned relative to
 * it). Items must be taken in increasing (epoch, k) order per stream; an item the caller
 * skips (it knows it is empty) is simply never asked for, and if a loader made it anyway it
 * is dropped. The same item may be asked for again after a timeout. Waits at most
 * timeout_s (< 0: no limit), returning early when *stop becomes non-zero (a signal handler
 * may set it, or another thread with an atomic store) or the receiver is being freed.
 * 0 and *out; 1 stopped; -1 with a TaasTimeoutError naming the stream, item and worker it
 * waits for (and whether that worker is connected, or has sent its end), or a
 * TaasValueError: a malformed batch or message from the stream's loaders (every later take
 * of the stream fails the same way), a bad hello (every take fails), or a take out of
 * order or of another rank's item. */
int taas_stream_recv_take(taas_stream_recv *r, uint32_t stream, uint64_t epoch, uint64_t k, double timeout_s,
                          volatile int *stop, taas_batch **out, taas_error *err);

typedef struct taas_stream_recv_stats {
    uint64_t batches, bytes;   /* taken by the caller */
    uint64_t duplicates;       /* dropped: arrived twice, or after they (or a later item of
                                  their stream) were taken */
    uint64_t stale;            /* dropped: from a connection a new hello replaced, or one
                                  that never said hello */
    double wait_s;             /* time the caller waited in take */
    uint32_t held, max_held;   /* batches held now, and the most at once, all streams (a
                                  batch that arrives for a waiting take counts as taken) */
} taas_stream_recv_stats;
void taas_stream_recv_stats_get(taas_stream_recv *r, taas_stream_recv_stats *out);

#endif
