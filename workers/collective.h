/* Sums across the ranks of a job (docs/design.md §3 "Collectives"): a step's gradients, its
 * sample count, loss and stop flag, the validation sums and the sample checksums. A local
 * fit is one rank, whose collective sums nothing; offloaded ranks sum with Open MPI
 * (collective_mpi.c). Every rank calls the same sums in the same order. */
#ifndef TAAS_COLLECTIVE_H
#define TAAS_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct taas_collective taas_collective;
struct taas_collective {
    int rank, world;
    /* buf holds this rank's values; afterwards, every rank's buf holds the sums */
    int (*sum_f32)(taas_collective *c, float *buf, size_t n, taas_error *err);
    int (*sum_f64)(taas_collective *c, double *buf, size_t n, taas_error *err);
    int (*sum_u64)(taas_collective *c, uint64_t *buf, size_t n, taas_error *err);  /* modulo 2^64 */
    /* rank 0's n bytes in buf to every rank (a GPU engine's NCCL id) */
    int (*bcast)(taas_collective *c, void *buf, size_t n, taas_error *err);
};

/* Rank 0 of 1: the sums are the values. */
taas_collective taas_collective_solo(void);

/* collective_mpi.c: MPI_Init, then this process's rank of MPI_COMM_WORLD. -1 with err when
 * MPI cannot start (not launched by mpirun, or Open MPI's runtime failed). */
int taas_collective_mpi_init(int *argc, char ***argv, taas_collective *out, taas_error *err);
void taas_collective_mpi_finalize(void);
/* Ends every rank of the job at once (MPI_Abort): after an error on one rank the others
 * would wait forever in their next sum. */
void taas_collective_mpi_abort(int status);

#endif
