/* A training job (docs/design.md §3, §4): a fit, run by W trainer ranks while every registered
 * DataLoader the fit uses runs on M loader workers that stream batches to the ranks. A fit
 * in a `#pragma taas` cell is such a job on the configured backend (backend.h); a fit
 * without one is a job of one rank and no loader workers on this machine. The kernel is the
 * coordinator: it plans the job, launches the workers through the backend, serves the
 * control plane (workers/jobctl.h), shows progress in one display updated in place, replaces
 * a loader that dies, and ends everything on cancel. It never blocks: the job is a state of
 * the kernel's event loop, polled through one file descriptor and a deadline. */
#ifndef TAAS_JOB_H
#define TAAS_JOB_H

#include <jansson.h>

#include "error.h"
#include "interp.h"
#include "pragma.h"

/* A DataLoader of the fit that is registered: it runs on loader workers. */
typedef struct taas_job_stream {
    const char *role;       /* "train" or "validate": which of the spec's loaders */
    const char *name;       /* the variable that holds it, for messages (may be NULL) */
    const json_t *facts;    /* {"size", "shape", "num_classes"} from its dataset's probe, or NULL */
} taas_job_stream;

typedef struct taas_job_cfg {
    const taas_pragma *pragma;  /* NULL: a fit without a pragma (one rank, here, no plan line) */
    json_t *spec;           /* the fit job spec (docs/jobspec.md), borrowed; "offload" is added */
    const taas_job_stream *streams;
    int nstreams;
    const char *dir;        /* the job folder, which exists */
    const char *weights;    /* where the trained weights go (in dir) */
    const char *model;      /* the model's variable, for the summary (may be NULL) */
    const struct taas_backend *backend;  /* NULL: the configuration file's (tests give their own) */
    double start_timeout;   /* seconds for every rank to be ready once launched; 0: 60 */
    int evaluate;           /* an evaluate spec: no display, rank 0's done carries the result only */
    int max_restarts;       /* times the ranks resume from the last checkpoint when one dies */
    /* a spec with "resume": where its checkpoint ("weights") stands, for the loader workers */
    long long resume_epoch, resume_step;
} taas_job_cfg;

typedef struct taas_job taas_job;

/* The stop button: rank 0 gets this long to send the weights of its last completed step. */
#define TAAS_JOB_STOP_GRACE_S 1.0
/* The budget's stop: the ranks finish the step in progress, however long it takes them. */
#define TAAS_JOB_BUDGET_GRACE_S 60.0

/* Plans the job and, for a pragma's, says so (stdout), checks it against the backend,
 * binds the control plane and launches the workers. NULL with err, nothing left running,
 * when any of it fails. */
taas_job *taas_job_start(const taas_job_cfg *cfg, const taas_io *io, taas_error *err);

/* Readable when the job has something to handle; the deadline (taas_now) by which
 * taas_job_poll wants to be called anyway. */
int taas_job_fd(const taas_job *j);
double taas_job_deadline(const taas_job *j);

/* Handles what is ready. 1 while it runs; 0 when it has finished (the weights are written;
 * taas_job_done gives rank 0's done message); -1 with err when it failed (a rank's error,
 * a worker that died, naming its role, rank, host and exit status or signal); after
 * taas_job_stop, 3 or 2 once stopped (below). */
int taas_job_poll(taas_job *j, const taas_io *io, taas_error *err);
const json_t *taas_job_done(const taas_job *j);

/* The stop button without blocking: cancel to every worker; taas_job_poll then waits up to
 * grace_s for rank 0's done (the weights of the last completed step), kills every process
 * of the job, shows the display stopped, and returns 3 (the weights came) or 2 (not). */
void taas_job_stop(taas_job *j, double grace_s);
/* The same, waiting here (the kernel's end, a detached job's coordinator): 1 when the done
 * (and the weights) came. */
int taas_job_cancel(taas_job *j, double grace_s, const taas_io *io);
/* Kills whatever still runs and frees. */
void taas_job_free(taas_job *j);

/* This machine's GPUs, as `taas-worker gpus` finds them through the CUDA plugin: a new
 * array of {"index", "name", "memory_bytes"} (empty without a plugin, driver or GPU), or -1
 * with err when the worker cannot be run. */
int taas_gpu_list(json_t **gpus, taas_error *err);

#endif
