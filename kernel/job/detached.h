/* Jobs that outlive the kernel (#pragma taas --detach; docs/offload.md "Detached jobs").
 * Such a job is a folder in this user's jobs folder ($TAAS_JOBS_DIR, else
 * $XDG_STATE_HOME/taas/jobs, else ~/.local/state/taas/jobs; mode 0700), named by the job's
 * id, and a coordinator of its own: `taas-kernel --run-job DIR`, in a session of its own,
 * which runs the job exactly as a kernel would (job.h) and writes what a cell would show
 * into the folder:
 *
 *   job.json      what to run (written once by the kernel that started it)
 *   lock          held (flock) by the coordinator while it runs
 *   state.json    where it stands and how it ended (atomic replacements)
 *   journal.jsonl its output: stream text and new displays, one JSON object a line
 *   view.json     the newest content of each display it updates in place
 *   weights.safetensors, checkpoint-*.safetensors   as in any job folder
 *
 * A kernel follows the folder to show the job in a cell (attach) and never writes to it
 * after the start; cancel is SIGTERM to the coordinator, which stops the job as the stop
 * button does. The coordinator is the process that holds the lock, as /proc proves it (a
 * pidfd), never a pid read from a file. The folder is the user's: whatever its files say, a
 * kernel reads each whole with a size cap, and one that is damaged is a job whose state is
 * "damaged" (with "damage" saying why), never an error of the others. */
#ifndef TAAS_DETACHED_H
#define TAAS_DETACHED_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"
#include "interp.h"
#include "job.h"

/* The jobs folder, made (0700) when it is not there. 0, or -1 with err. */
int taas_jobs_dir(char *out, size_t n, taas_error *err);

/* A new job folder in the jobs folder: its path and id (the folder's name). */
int taas_detached_folder(char *dir, size_t n, taas_error *err);

/* Starts cfg's job (cfg->dir: a taas_detached_folder; cfg->pragma NULL is refused) under a
 * coordinator of its own; header is the cell's #pragma taas line, which the coordinator
 * reads again. Returns at once: the job's start is the coordinator's. 0, or -1 with err
 * (nothing left running). */
int taas_detached_start(const taas_job_cfg *cfg, const char *header, taas_error *err);

/* taas-kernel --run-job DIR: the coordinator. Its exit status: 0 when the job ran to its end
 * (done, failed or cancelled: state.json says which), 1 when the folder cannot be used. */
int taas_detached_run(const char *dir);

/* The folder of the job called id (a whole id, or the start of exactly one). 0, or -1 with
 * err naming the jobs there are. */
int taas_detached_find(const char *id, char *dir, size_t n, taas_error *err);

/* state.json of the job in dir, with "state": "lost" when it says running but no
 * coordinator holds the lock (it was killed, or its machine restarted), and "damaged" (with
 * "damage": why) when it cannot be read, is larger than a state can be, is not JSON or has
 * a state no coordinator writes. NULL when there is none yet (a folder being made). */
json_t *taas_detached_state(const char *dir);

/* Where a job stands by its state: its epoch (1-based) and the steps of it done, the later of
 * its last step line and its newest checkpoint; 0, 0 when nothing says. */
void taas_detached_reached(const json_t *state, long long *epoch, long long *step);

/* The error of a job that ended without a History (failed, cancelled, lost, damaged), as its
 * state proves it: what it reached, how it ended, where it can go on from. into: the model
 * given (into=) or NULL; kept: it got the weights of the last step. Always -1, err set
 * (TAAS_NOPOS). */
int taas_detached_ended_error(const json_t *state, const char *id, const char *dir, const char *into, int kept,
                              taas_error *err);

/* Every job of the jobs folder, the newest first: an array of state objects (with "id"
 * and "dir"). NULL with err. */
json_t *taas_detached_list(taas_error *err);

/* Asks the coordinator to stop the job: SIGTERM through a pidfd of the lock's holder, when
 * that is the process state.json names. 0, or -1 with err, nothing signalled, when it has
 * already ended (the state says how), is damaged, or its lock's holder is not the pid its
 * state names (or is on another machine). */
int taas_detached_cancel(const char *dir, taas_error *err);

/* Showing a job in a cell: everything it has said since its start (the journal, then each
 * display's newest content), then what comes, until it ends. */
typedef struct taas_follow taas_follow;
taas_follow *taas_follow_open(const char *dir, taas_error *err);
/* Readable when the folder changed. */
int taas_follow_fd(const taas_follow *f);
/* Shows what is new through io. 1 while the job runs; 0 when it has ended (*state: its
 * state.json, the caller's reference). */
int taas_follow_poll(taas_follow *f, const taas_io *io, json_t **state);
void taas_follow_free(taas_follow *f);

#endif
