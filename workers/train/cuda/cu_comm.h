/* The ranks' GPUs summing with NCCL (docs/design.md §3, as llm.c bootstraps it): rank 0 makes
 * NCCL's unique id, the job's MPI collective broadcasts it, every rank joins the
 * communicator on its own GPU. A world of one makes none. Sums and broadcasts are queued on
 * the compute stream, in order with the kernels around them. */
#ifndef TAAS_CU_COMM_H
#define TAAS_CU_COMM_H

#include <nccl.h>
#include <stddef.h>

#include "cu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "collective.h"

typedef struct taas_cu_comm {
    ncclComm_t comm;       /* NULL for a world of one */
    int rank, world;
} taas_cu_comm;

/* Every rank of c calls it at the same point (it waits for all of them). */
int taas_cu_comm_init(taas_cu_comm *cm, taas_collective *c, taas_cu *cu, taas_error *err);
void taas_cu_comm_free(taas_cu_comm *cm);
/* buf (n floats, device) becomes the sum over the ranks of their buf. */
int taas_cu_comm_sum(taas_cu_comm *cm, taas_cu *cu, float *buf, size_t n, taas_error *err);
/* buf (n floats, device) becomes rank 0's. */
int taas_cu_comm_bcast(taas_cu_comm *cm, taas_cu *cu, float *buf, size_t n, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
