/* The loader's side of the data plane (docs/design.md §3 "Flow control"). A loader worker is
 * worker j of the M workers of one registered DataLoader ("stream" s). It connects a DEALER
 * to every rank's ROUTER and sends each batch it makes to the rank that trains it (item k
 * goes to rank k % W), but only against credit that rank granted this connection: memory
 * stays bounded on both sides and no loader floods a slow rank. Batches go zero-copy
 * (zmq_msg_init_data): the sender owns a batch from the moment it is handed over and frees
 * it when ZeroMQ is done with its bytes.
 *
 * Wire (multipart messages, DEALER -> ROUTER, identities chosen by ZeroMQ):
 *   loader -> rank  ["H", hello]   hello: {"stream": s, "worker": j, "pid": P} (JSON), sent
 *                                  once per connection, first
 *   rank -> loader  ["C", n]       n: uint32 little-endian, credit for n more batches
 *   loader -> rank  ["B", batch]   batch: the taas_batch buffer (pipeline.h's layout,
 *                                  carrying epoch and k); one credit spent
 *   loader -> rank  ["E", end]     end: {"stream": s, "worker": j} — no more batches
 *   rank -> loader  ["A"]          the end arrived, and so did every batch sent before it
 *                                  on this connection (ZeroMQ keeps a connection's order)
 * Frame 0 is one byte: the message kind. The hello goes once the connection is up (the
 * DEALERs are ZMQ_IMMEDIATE: nothing is queued for a rank that is not connected). */
#ifndef TAAS_STREAM_SEND_H
#define TAAS_STREAM_SEND_H

#include <stdint.h>

#include "error.h"
#include "pipeline.h"
#include "zsock.h"

typedef struct taas_stream_send taas_stream_send;

typedef struct taas_stream_send_cfg {
    void *zctx;                        /* the process's ZeroMQ context (borrowed) */
    const taas_zsec *sec;              /* the job's security for zctx (NULL: plain) */
    uint32_t stream, worker;           /* s and j */
    uint32_t world;                    /* W ranks */
    const char *const *ranks;          /* W endpoints of the ranks' data ROUTERs */
} taas_stream_send_cfg;

/* Connects to every rank; the hello goes to each as soon as its connection is up (looked at
 * in every call below). NULL with err on a bad endpoint or no memory. */
taas_stream_send *taas_stream_send_new(const taas_stream_send_cfg *cfg, taas_error *err);
/* Closes the sockets without waiting for unsent batches (linger 0: call taas_stream_send_end
 * first to be sure they arrived) and frees s. */
void taas_stream_send_free(taas_stream_send *s);

/* Sends batch b (its epoch and k in its header) to rank k % W once that rank has credit
 * for this connection; takes b in every case (freed with taas_batch_free, on ZeroMQ's I/O
 * thread once it is written; a release hook lets a caller recycle buffers). Waits at most
 * timeout_s for credit (< 0: no limit), reading every rank's credit meanwhile, returning
 * early when *stop becomes non-zero (stop may be NULL; a signal handler may set it, or
 * another thread with an atomic store). 0 sent; 1 stopped; -1 with a TaasTimeoutError
 * naming the rank (and whether it is reachable), or a TaasIOError from ZeroMQ. One thread
 * at a time. */
int taas_stream_send_batch(taas_stream_send *s, taas_batch *b, double timeout_s, volatile int *stop,
                           taas_error *err);
/* Tells every rank that this worker has made all its batches, and waits until every rank has
 * acknowledged it: then every batch sent has arrived, and taas_stream_send_free (linger 0)
 * loses nothing. Waits at most timeout_s (< 0: no limit), returning early when *stop becomes
 * non-zero. 0 done; 1 stopped; -1 with a TaasTimeoutError naming a rank that did not answer,
 * or a TaasIOError. No batch may be sent after it. */
int taas_stream_send_end(taas_stream_send *s, double timeout_s, volatile int *stop, taas_error *err);

typedef struct taas_stream_send_stats {
    uint64_t batches, bytes;           /* sent */
    double credit_wait_s;              /* time spent waiting for credit (and, in end, for
                                          the acknowledgements) */
} taas_stream_send_stats;
void taas_stream_send_stats_get(const taas_stream_send *s, taas_stream_send_stats *out);

#endif
