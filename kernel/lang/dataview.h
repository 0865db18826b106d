/* Private to kernel/lang: datasets and DataLoaders as the notebook shows them. What a
 * value cannot say by itself (an NpyDataset's size, a sample's shape after the transform,
 * the class names, where the data is) comes from `taas-worker probe`, run synchronously
 * with a timeout: it reads headers and indexes only, so it is short, and a cell that shows
 * a dataset needs the answer before it can go on. Answers are cached per spec (the JSON
 * string) for the session, and asked again when a local file the spec names changes. */
#ifndef TAAS_DATAVIEW_H
#define TAAS_DATAVIEW_H

#include <jansson.h>
#include <stdint.h>

#include "buf.h"
#include "builtins.h"
#include "error.h"
#include "interp.h"
#include "value.h"

/* Seconds a probe may take; TAAS_PROBE_TIMEOUT overrides. */
#define TAAS_PROBE_TIMEOUT_S 30.0
/* Seconds show() may take; TAAS_SHOW_TIMEOUT overrides. */
#define TAAS_SHOW_TIMEOUT_S 120.0

typedef struct taas_probe_cache taas_probe_cache;
taas_probe_cache *taas_probe_cache_new(void);
void taas_probe_cache_free(taas_probe_cache *c);

/* The dataset a dataset or DataLoader value shows (borrowed), NULL for anything else. */
const taas_value *taas_data_dataset_of(const taas_value *v);

/* The probe's answer about a dataset value (borrowed from the cache): {"size", "shape",
 * "classes", "source", ...}. Errors are the worker's (ename, message, hint as it wrote
 * them), or a timeout, an interrupt, a worker that cannot be found; they have no position. */
int taas_data_probe(taas_interp *in, const taas_value *dataset, const json_t **info, taas_error *err);

/* len() of a dataset (samples) or DataLoader (batches per epoch): the size the value knows
 * by itself where it is exact, else the probe's. */
int taas_data_len(taas_interp *in, const taas_value *v, int64_t *n, taas_error *err);

/* The mime bundle a cell shows for v: for datasets and DataLoaders with a session (in may
 * be NULL), text/plain and a text/html table from the probe; for anything else
 * taas_value_mimebundle. NULL with err when the probe fails. */
json_t *taas_data_mimebundle(taas_interp *in, const taas_value *v, taas_error *err);

/* table_data.c: the repr of a dataset or DataLoader with the probe's facts (probe may be
 * NULL: the repr without them). */
void taas_data_repr(const taas_value *v, const json_t *probe, taas_buf *out);

/* action_show.c: the show() action and its argument check. */
int taas_show_action(taas_call_ctx *cx, taas_value **args, taas_value **out);
struct taas_row;
int taas_show_check(const struct taas_row *r, taas_value **args, const taas_srcpos *where, taas_error *err);

/* A statement that waits on a file descriptor rather than a clock alone (show() waits on
 * its worker's output). The kernel polls fd while the cell waits and resumes the cell when
 * it is readable or the deadline passes. */
typedef struct taas_waiter taas_waiter;
struct taas_waiter {
    int fd;
    /* fd is readable (or at its end), or the deadline passed (expired = 1): 1 to wait
     * more, 0 when done (outputs written through io), -1 with err. */
    int (*poll)(taas_waiter *w, const taas_io *io, int expired, taas_error *err);
    /* Stops what it waits on (kills the child) and frees w. */
    void (*free)(taas_waiter *w);
    /* The stop button, when stopping takes a while (a job's ranks finish their step and send
     * their weights): begins it and returns at once; poll then goes on until the stop is
     * complete (0 or -1), and the cell ends with KeyboardInterrupt. NULL: free stops. */
    void (*stop)(taas_waiter *w, const taas_io *io);
    /* Set by poll when it returns 0, or NULL: the statement's value now that the wait is
     * over (fit's History), bound to the assignment's target or shown as the cell's result.
     * The interpreter takes the reference. */
    taas_value *result;
    /* Set by poll when it returns 1, or 0: when to be polled again at the latest (a job's
     * heartbeats and display updates); 0 keeps the action's deadline. */
    double deadline;
};

/* interp.c: the running statement waits on w (the interpreter takes it); the action also
 * sets cx->wait_until, the deadline. */
void taas_interp_wait_on(taas_interp *in, taas_waiter *w);
taas_probe_cache *taas_interp_probe_cache(taas_interp *in);
/* The running cell's #pragma taas, or NULL (a cell without one, or no cell running). */
struct taas_pragma;
const struct taas_pragma *taas_interp_pragma(const taas_interp *in);
/* The fd that becomes readable when the kernel is asked to stop (its signal pipe); -1. */
int taas_interp_interrupt_fd(const taas_interp *in);

#endif
