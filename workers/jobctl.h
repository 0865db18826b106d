/* The control plane of an offloaded job (docs/design.md §3): the kernel binds a ROUTER, every
 * worker of the job (trainer ranks, loader workers) connects a DEALER to it. Messages are
 * multipart: [JSON body] or [JSON body][blob] from a worker; the ROUTER side sees the
 * worker's identity first. The body is an object whose "t" names the message:
 *
 *   worker -> kernel
 *     hello     {"role": "trainer", "rank": r, "host", "pid", "data": endpoint}
 *               {"role": "loader", "stream": s, "worker": j, "host", "pid"}
 *     hb        {} every second (the kernel's heartbeat answers)
 *     log       {"text"}
 *     step      rank 0: {"epoch", "step", "steps", "loss", "samples_per_s", "wait"}
 *     epoch     rank 0: the worker's epoch line (docs/jobspec.md) with "checksum", "samples"
 *     done      rank 0: {"steps", "history", "checksums", "interrupted"} + blob: the weights
 *               (safetensors bytes)
 *     ended     a loader made all its batches
 *     error     {"ename", "message", "hint", "step"}
 *   kernel -> worker
 *     start     loaders: {"ranks": [endpoint of rank 0, ...]}
 *     hb        {} every second
 *     cancel    {} stop after the step in progress (rank 0 still sends done)
 *
 * Identities are readable: "rank.R", "loader.S.J.G" (G: the generation, 0 for the first
 * worker, counting replacements), so the kernel keys its table by them. */
#ifndef TAAS_JOBCTL_H
#define TAAS_JOBCTL_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"
#include "zsock.h"

/* Seconds between heartbeats, and the silence after which a peer counts as gone. */
#define TAAS_CTL_HEARTBEAT_S 1.0
#define TAAS_CTL_SILENCE_S 15.0

typedef struct taas_ctl_msg {
    char peer[64];        /* ROUTER side: the sender's identity ("" on the DEALER side) */
    json_t *body;         /* owned; "t" is a string */
    void *blob;           /* owned (malloc'd) or NULL */
    size_t blob_len;
} taas_ctl_msg;

/* The message's type, "" when the body has none. */
const char *taas_ctl_type(const taas_ctl_msg *m);
void taas_ctl_msg_clear(taas_ctl_msg *m);

/* A body {"t": type} to add fields to. New reference. */
json_t *taas_ctl_body(const char *type);

/* Sends body (stolen) and an optional blob (copied by ZeroMQ when n > 0). On a ROUTER,
 * peer names the destination; on a DEALER it is NULL. flags: 0 or ZMQ_DONTWAIT.
 * 0, or -1 with a TaasIOError. */
int taas_ctl_send(void *sock, const char *peer, json_t *body, const void *blob, size_t n, int flags,
                  taas_error *err);

/* Receives one message (ZMQ_DONTWAIT in flags: 1 when none is waiting). A message that is
 * not [identity,] JSON object [, blob] is dropped with -1 and a TaasValueError; the socket
 * stays usable. *m is cleared first. */
int taas_ctl_recv(void *sock, int is_router, int flags, taas_ctl_msg *m, taas_error *err);

/* A DEALER with this identity, linger 0, connected to endpoint with the job's security (sec
 * NULL: plain). NULL with err. */
void *taas_ctl_connect(void *zctx, const taas_zsec *sec, const char *endpoint, const char *identity, taas_error *err);

#endif
