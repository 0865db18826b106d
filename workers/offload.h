/* What the workers of an offloaded job (taas-worker trainer and loader) read from the job
 * spec's "offload" section, which the kernel adds to a fit job spec (docs/jobspec.md):
 *   {"id", "control": endpoint, "world": W, "streams": [{"role": "train"|"validate",
 *    "workers": M}, ...], "credit": C, "bind": endpoint pattern for the ranks' data plane} */
#ifndef TAAS_OFFLOAD_H
#define TAAS_OFFLOAD_H

#include <jansson.h>
#include <stdint.h>

#include "ctl_client.h"
#include "error.h"

#define TAAS_OFFLOAD_MAX_STREAMS 2

typedef struct taas_offload {
    const char *control;       /* borrowed from the spec */
    const char *bind;
    uint32_t world, credit;
    uint32_t nstreams;
    const char *role[TAAS_OFFLOAD_MAX_STREAMS];     /* "train" or "validate" */
    uint32_t workers[TAAS_OFFLOAD_MAX_STREAMS];     /* M of each stream */
    const json_t *facts[TAAS_OFFLOAD_MAX_STREAMS];  /* its dataset's size and shape, or NULL */
} taas_offload;

/* Reads job["offload"]; -1 with err when it is missing or malformed. */
int taas_offload_parse(const json_t *job, taas_offload *out, taas_error *err);
/* The stream of a role ("train", "validate"), or -1 when that loader is not streamed. */
int taas_offload_stream_of(const taas_offload *o, const char *role);

/* Connects the control client as identity with hello (stolen; host and pid are added). */
taas_ctl_client *taas_offload_connect(const taas_offload *o, const char *identity, json_t *hello, taas_error *err);
/* Tells the kernel about err ({"t": "error", ...}) when c is there, else on stderr. */
void taas_offload_report(taas_ctl_client *c, const taas_error *err, long long step);

#endif
