/* For the harnesses that talk over inproc:// sockets: one ZeroMQ context for the process,
 * zctx, made by the LLVMFuzzerInitialize defined here. Header-only, as fuzz_util.h. */
#ifndef TAAS_FUZZ_ZMQ_H
#define TAAS_FUZZ_ZMQ_H

#include <stdlib.h>
#include <zmq.h>

#include "fuzz_util.h"

static void *zctx;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (!(zctx = zmq_ctx_new())) abort();
    return 0;
}

#endif
