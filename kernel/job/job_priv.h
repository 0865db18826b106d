/* Private to kernel/job: the job's state, shared by job.c (the control plane and the
 * lifecycle), job_launch.c (planning and starting processes) and job_view.c (the display). */
#ifndef TAAS_JOB_PRIV_H
#define TAAS_JOB_PRIV_H

#include <limits.h>
#include <sys/types.h>

#include "job.h"
#include "proc.h"
#include "trainview.h"

/* Replacements of one loader worker before the job gives up on it. */
#define TAAS_JOB_MAX_GENERATIONS 4
/* Seconds for every worker to say hello (mpirun and MPI_Init included). */
#define TAAS_JOB_HELLO_S 60.0

typedef struct job_rank {
    int hello;
    pid_t pid;
    char host[64];
    char data[160];       /* its data plane endpoint */
} job_rank;

typedef struct job_loader {
    int stream, worker;   /* s and j */
    int gen;              /* generation: 0, then one more per replacement */
    taas_proc *proc;
    char peer[64];        /* its control identity, "loader.S.J.G" */
    int hello, started, ended;
} job_loader;

struct taas_job {
    int world, cpus, threads;
    int nstreams;
    taas_job_stream streams[2];
    char names[2][64];
    char dir[PATH_MAX / 2], spec_path[PATH_MAX], weights[PATH_MAX];
    char id[32];
    char worker_path[PATH_MAX], mpirun_path[PATH_MAX];
    char endpoint[128];
    void *zctx, *router;
    int epfd;
    taas_proc *mpirun;
    job_rank *ranks;
    int nhello;           /* ranks that said hello */
    job_loader *loaders;  /* nstreams * cpus, stream-major */
    int nloaders;
    json_t *start_msg;    /* the loaders' start message, once every rank is there */
    /* progress, from rank 0 */
    long long epochs, steps_per_epoch, epoch, step, samples;
    double loss, samples_per_s, wait_share;
    json_t *done;
    int have_weights;
    /* the end */
    int failed;
    taas_error failure;
    int cancelled;
    double t0, hello_deadline, next_beat;
    taas_trainview *view;
    char display_id[64];
    char model[64];       /* the model's variable, for the summary */
};

/* job_launch.c */
int taas_job_plan(taas_job *j, const taas_job_cfg *cfg, const taas_io *io, taas_error *err);
int taas_job_launch_ranks(taas_job *j, taas_error *err);
int taas_job_launch_loader(taas_job *j, job_loader *l, long long epoch, long long step, taas_error *err);
void taas_job_watch(taas_job *j, int fd);

/* job_view.c: the display, updated in place at most five times a second (final: now), and
 * when a kept update is due (0: none). */
void taas_job_view(taas_job *j, const taas_io *io, int final);
double taas_job_view_due(const taas_job *j);
/* The one-line summary at the end, and the per-epoch checksums. */
void taas_job_summary(taas_job *j, const taas_io *io);

#endif
