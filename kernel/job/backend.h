/* Where a job's processes run: a backend places the trainer ranks and the loader workers on
 * machines through an engine that exists (Open MPI's mpirun, Slurm, ssh) and tells the job
 * when they end. Each backend is one file that fills in this table, as Redis's
 * ConnectionType or curl's TLS backends do; the job (job.c) never asks which one it has.
 *
 *   plan    checks the job against what the backend has (GPUs, hosts, partitions), says where
 *           things go (a line on io), and sets the job's addresses: the control plane's bind
 *           and endpoint, the ranks' data plane bind, whether the planes need CURVE
 *   launch  starts the ranks, and each loader worker (again for a replacement)
 *   watch   reads the processes' output and notices their ends: taas_job_line,
 *           taas_job_ranks_ended, taas_job_loader_ended (job_priv.h)
 *   cancel  ends every process of the job, wherever it runs, and waits until they have
 *   reset   after cancel, readies the launches to run again (a job that resumes)
 *
 * A worker is started with the control endpoint and, when the planes are encrypted, the
 * job's keys in its environment (never on a command line); it asks the kernel for the rest
 * (the spec, the weights) over the control plane, so no filesystem is shared. */
#ifndef TAAS_BACKEND_H
#define TAAS_BACKEND_H

#include "error.h"
#include "interp.h"

typedef struct taas_job taas_job;
typedef struct job_loader job_loader;

typedef struct taas_backend {
    const char *name;
    int (*plan)(taas_job *j, const taas_io *io, taas_error *err);
    int (*launch_ranks)(taas_job *j, taas_error *err);
    int (*launch_loader)(taas_job *j, job_loader *l, taas_error *err);
    void (*watch)(taas_job *j);
    void (*cancel)(taas_job *j);
    void (*free)(taas_job *j);  /* after cancel: its state */
    /* after cancel: forgets the processes but keeps what plan found, so that the launches
     * can run again (a job resuming from its checkpoint); NULL: the backend cannot */
    void (*reset)(taas_job *j);
    int queued;                 /* its ranks start when a scheduler says (taas_job_launched) */
} taas_backend;

extern const taas_backend taas_backend_local;
extern const taas_backend taas_backend_ssh;
extern const taas_backend taas_backend_slurm;

#endif
