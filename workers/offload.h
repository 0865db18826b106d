/* A worker of a job (taas-worker trainer and loader): joining it, and what it reads from the
 * job spec's "offload" section (docs/jobspec.md). A worker is started with the kernel's
 * control endpoint and, when the job's planes are encrypted, the job's keys in $TAAS_JOB_KEYS
 * (zsock.h); it says hello and the kernel answers with the spec, and a rank with the weights
 * the model starts from. So nothing of the job needs to be on the worker's disk.
 *   "offload": {"id", "world": W, "streams": [{"role": "train"|"validate", "workers": M,
 *               "facts"}, ...], "credit": C,
 *               "bind": a rank's data plane endpoint, or "route" (a TCP port on the address of
 *                       this host that routes to the kernel), ranks only,
 *               "resume": {"epoch", "step"} where a loader starts, loaders only} */
#ifndef TAAS_OFFLOAD_H
#define TAAS_OFFLOAD_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>

#include "ctl_client.h"
#include "error.h"
#include "zsock.h"

#define TAAS_OFFLOAD_MAX_STREAMS 2

/* A worker's membership of its job, from taas_offload_join to taas_offload_leave. */
typedef struct taas_joined {
    taas_ctl_client *ctl;      /* NULL when the connection failed */
    json_t *spec;              /* the job spec the kernel sent */
    int curve;                 /* the planes are encrypted with keys */
    taas_zkeys keys;
    char weights[PATH_MAX];    /* a private file of the starting weights, "" when none */
    int weights_fd;            /* which holds it (taas_offload_private) */
    char weights_from[PATH_MAX]; /* the kernel's name of the weights, which errors give */
} taas_joined;

/* A private file of this worker's, for stem (taas-weights, taas-ckpt, ...): made in $TMPDIR
 * (or /tmp) and unlinked at once, so that it goes with its descriptor however the worker
 * ends (a SIGKILL, an abort of the ranks); the worker reaches it as path, /proc/self/fd/N
 * (safetensors.h writes such a path in place). The descriptor, or -1 with err. */
int taas_offload_private(char *path, size_t n, const char *stem, taas_error *err);

/* Connects to control as identity with hello (stolen; host and pid are added) and waits for
 * the spec. The job's keys (when its planes are encrypted) come from keys_from: NULL, the
 * environment ($TAAS_JOB_KEYS, when set); "-", the first line of stdin — a worker started
 * over ssh — whose end is then the kernel's: the worker exits at once (the kernel keeps the
 * pipe open while the job runs, and ssh closes it when the kernel or its connection dies);
 * "munge", a MUNGE credential in $TAAS_JOB_MUNGE (a job under Slurm: the kernel made it
 * with munge, restricted to its user; only munged on the cluster's hosts can open it, with
 * $TAAS_MUNGE_SOCKET as its socket when set); else a file of this host's that only its
 * owner may read (the kernel wrote it over ssh).
 * -1 with err (j->ctl is there to report it when the connection was made). */
int taas_offload_join(const char *control, const char *identity, json_t *hello, const char *keys_from,
                      taas_joined *j, taas_error *err);
/* Sends what is queued, disconnects, forgets the keys and removes the weights file. */
void taas_offload_leave(taas_joined *j);
/* err names the worker's copy of the weights where the kernel's name is the user's: the
 * kernel's name instead. */
void taas_offload_name_weights(const taas_joined *j, taas_error *err);

typedef struct taas_offload {
    const char *bind;          /* borrowed from the spec (ranks) */
    uint32_t world, credit;
    uint32_t nstreams;
    const char *role[TAAS_OFFLOAD_MAX_STREAMS];     /* "train" or "validate" */
    uint32_t workers[TAAS_OFFLOAD_MAX_STREAMS];     /* M of each stream: the loaders' modulus */
    /* the worker numbers a rank accepts: M, or the most a pool that sizes itself may reach
     * (--cpus auto: each generation of loaders gets its own M) */
    uint32_t slots[TAAS_OFFLOAD_MAX_STREAMS];
    const json_t *facts[TAAS_OFFLOAD_MAX_STREAMS];  /* its dataset's size and shape, or NULL */
    long long resume_epoch, resume_step;            /* loaders: where to start */
} taas_offload;

/* Reads job["offload"]; -1 with err when it is missing or malformed. */
int taas_offload_parse(const json_t *job, taas_offload *out, taas_error *err);
/* The stream of a role ("train", "validate"), or -1 when that loader is not streamed. */
int taas_offload_stream_of(const taas_offload *o, const char *role);
/* The endpoint a rank binds: the spec's, or for "route" tcp://ADDR:* with ADDR this host's
 * address that routes to the control endpoint's host. -1 with err. */
int taas_offload_bind(const taas_offload *o, const char *control, char *out, size_t n, taas_error *err);

/* Tells the kernel about err ({"t": "error", ...}) when c is there, else on stderr. */
void taas_offload_report(taas_ctl_client *c, const taas_error *err, long long step);

#endif
