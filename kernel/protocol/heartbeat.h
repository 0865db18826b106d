/* The heartbeat channel: a REP socket that echoes every message back, on a thread of its
 * own, so that Jupyter sees the kernel alive even while the loop thread is busy. */
#ifndef TAAS_HEARTBEAT_H
#define TAAS_HEARTBEAT_H

#include "error.h"

typedef struct taas_heartbeat taas_heartbeat;

/* Binds a REP socket to endpoint in ZeroMQ context zctx and starts echoing.
 * NULL with a TaasConnectionError when the endpoint cannot be bound. */
taas_heartbeat *taas_heartbeat_new(void *zctx, const char *endpoint, taas_error *err);

/* Stops the thread, waits for it and closes its sockets. */
void taas_heartbeat_free(taas_heartbeat *hb);

#endif
