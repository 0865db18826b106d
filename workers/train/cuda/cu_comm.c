/* NCCL among the ranks' GPUs (cu_comm.h). */
#include "cu_comm.h"
#include "errnames.h"

#include <string.h>

static int nccl_check(ncclResult_t rc, taas_cu_comm *cm, const char *what, taas_error *err) {
    if (rc == ncclSuccess) return 0;  /* a blocking communicator never answers ncclInProgress */
    const char *detail = cm && cm->comm ? ncclGetLastError(cm->comm) : ncclGetLastError(NULL);
    taas_error_set(err, TAAS_ERR_COLLECTIVE, TAAS_NOPOS, "%s failed in NCCL: %s%s%s", what, ncclGetErrorString(rc),
                   detail && *detail ? ": " : "", detail ? detail : "");
    if (rc == ncclSystemError || rc == ncclRemoteError)
        taas_error_hint(err, "another rank may have died, or the GPUs cannot reach each other; NCCL_DEBUG=WARN in "
                             "the ranks' environment says more");
    else
        taas_error_hint(err, "NCCL_DEBUG=WARN in the ranks' environment says more");
    return -1;
}

int taas_cu_comm_init(taas_cu_comm *cm, taas_collective *c, taas_cu *cu, taas_error *err) {
    memset(cm, 0, sizeof *cm);
    cm->rank = c->rank;
    cm->world = c->world;
    if (c->world <= 1) return 0;
    /* rank 0's id and whether it could make one: every rank takes part in the broadcast
     * either way, so that none is left waiting in it */
    struct {
        int ok;
        ncclUniqueId id;
    } msg;
    memset(&msg, 0, sizeof msg);
    taas_error mine;
    taas_error_clear(&mine);
    if (c->rank == 0) msg.ok = nccl_check(ncclGetUniqueId(&msg.id), NULL, "making NCCL's id", &mine) == 0;
    if (c->bcast(c, &msg, sizeof msg, err)) return -1;
    if (!msg.ok) {
        if (c->rank == 0) *err = mine;
        else taas_error_set(err, TAAS_ERR_COLLECTIVE, TAAS_NOPOS, "rank 0 could not make NCCL's id");
        return -1;
    }
    if (taas_cu_check(cudaSetDevice(cu->device), "selecting the GPU", err)) return -1;
    if (nccl_check(ncclCommInitRank(&cm->comm, c->world, msg.id, c->rank), NULL, "joining the ranks' GPUs", err)) {
        cm->comm = NULL;
        return -1;
    }
    return 0;
}

void taas_cu_comm_free(taas_cu_comm *cm) {
    if (cm->comm) ncclCommDestroy(cm->comm);
    cm->comm = NULL;
}

int taas_cu_comm_sum(taas_cu_comm *cm, taas_cu *cu, float *buf, size_t n, taas_error *err) {
    if (!cm->comm || n == 0) return 0;
    return nccl_check(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, cm->comm, cu->stream), cm,
                      "summing the gradients over the ranks", err);
}

int taas_cu_comm_bcast(taas_cu_comm *cm, taas_cu *cu, float *buf, size_t n, taas_error *err) {
    if (!cm->comm || n == 0) return 0;
    return nccl_check(ncclBroadcast(buf, buf, n, ncclFloat, 0, cm->comm, cu->stream), cm,
                      "sharing rank 0's BatchNorm statistics", err);
}
