/* The ranks' sums over Open MPI: MPI_Allreduce on MPI_COMM_WORLD, in chunks that fit its int
 * counts. Allreduce of a fixed size on a fixed set of ranks repeats its order of additions,
 * so a seed gives the same weights run after run. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>

#include "collective.h"
#include "errnames.h"

static int mpi_fail(int rc, taas_error *err) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, text, &len);
    taas_error_set(err, TAAS_ERR_COLLECTIVE, TAAS_NOPOS, "a sum over the ranks (MPI) failed: %s", text);
    taas_error_hint(err, "another rank may have died; the kernel names it");
    return -1;
}

static int sum(void *buf, size_t n, size_t size, MPI_Datatype t, taas_error *err) {
    char *p = buf;
    while (n > 0) {
        int chunk = n > INT_MAX / 2 ? INT_MAX / 2 : (int)n;
        int rc = MPI_Allreduce(MPI_IN_PLACE, p, chunk, t, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, err);
        p += (size_t)chunk * size;
        n -= (size_t)chunk;
    }
    return 0;
}

static int sum_f32(taas_collective *c, float *buf, size_t n, taas_error *err) {
    (void)c;
    return sum(buf, n, sizeof *buf, MPI_FLOAT, err);
}

static int sum_f64(taas_collective *c, double *buf, size_t n, taas_error *err) {
    (void)c;
    return sum(buf, n, sizeof *buf, MPI_DOUBLE, err);
}

static int sum_u64(taas_collective *c, uint64_t *buf, size_t n, taas_error *err) {
    (void)c;
    return sum(buf, n, sizeof *buf, MPI_UINT64_T, err);
}

static int bcast(taas_collective *c, void *buf, size_t n, taas_error *err) {
    (void)c;
    char *p = buf;
    while (n > 0) {
        int chunk = n > INT_MAX ? INT_MAX : (int)n;
        int rc = MPI_Bcast(p, chunk, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, err);
        p += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

int taas_collective_mpi_init(int *argc, char ***argv, taas_collective *out, taas_error *err) {
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) {
        taas_error_set(err, TAAS_ERR_COLLECTIVE, TAAS_NOPOS, "MPI_Init failed (error %d)", rc);
        taas_error_hint(err, "taas-worker trainer runs under mpirun, as the kernel starts it");
        return -1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &out->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &out->world);
    out->sum_f32 = sum_f32;
    out->sum_f64 = sum_f64;
    out->sum_u64 = sum_u64;
    out->bcast = bcast;
    return 0;
}

void taas_collective_mpi_finalize(void) {
    MPI_Finalize();
}

void taas_collective_mpi_abort(int status) {
    MPI_Abort(MPI_COMM_WORLD, status);
}
