/* What a training cell shows (issue 7): one display, updated in place at most five times a
 * second — a progress bar over the job's steps with the current epoch, step, loss and speed,
 * the table of the finished epochs, a chart of the losses and the validation accuracy that
 * grows each epoch, and at the end a summary (time, samples/s, best validation accuracy,
 * where the weights went). text/plain and text/html, so it reads the same in Notebook,
 * JupyterLab, a console and nbconvert's HTML export, which keeps the last state.
 *
 * The HTML has stable classes for tests and styling: div.taas-training[data-state] holding
 * progress.taas-progress, table.taas-epochs, img.taas-chart (an SVG as a data: URI, with
 * path.taas-train-loss, path.taas-val-loss, path.taas-val-accuracy) and div.taas-summary.
 *
 * A local fit and an offloaded job both feed it the worker's progress messages ("start",
 * "step", "epoch": docs/jobspec.md). */
#ifndef TAAS_TRAINVIEW_H
#define TAAS_TRAINVIEW_H

#include <jansson.h>

#include "buf.h"
#include "interp.h"

typedef struct taas_trainview taas_trainview;

/* display_id names the display (update_display_data replaces it). NULL when out of memory. */
taas_trainview *taas_trainview_new(const char *display_id);
void taas_trainview_free(taas_trainview *v);

/* The worker's messages, as JSON objects (an "event" or "t" key is ignored). */
void taas_trainview_start(taas_trainview *v, const json_t *start);
void taas_trainview_step(taas_trainview *v, const json_t *step);
void taas_trainview_epoch(taas_trainview *v, const json_t *epoch);
/* Steps of the whole fit that rank 0 counted done (a checkpoint's, its last "done"): the
 * step lines come at most ~5 a second, so the last one may be behind; the bar and the
 * summary never say fewer. */
void taas_trainview_steps(taas_trainview *v, long long steps);
/* An offloaded job's own state after the numbers ("ranks 2/2  loaders 2/2  waiting for data 1%"). */
void taas_trainview_status(taas_trainview *v, const char *text);
/* The end: state "done", "stopped" or "failed", and where the weights went (may be NULL). */
void taas_trainview_end(taas_trainview *v, const char *state, const char *weights);

/* Shows the current state: display_data the first time, update_display_data after. Unless
 * now, at most every 0.2 s: a call that comes too soon is kept for taas_trainview_due. */
void taas_trainview_show(taas_trainview *v, const taas_io *io, int now);
/* When a kept update is due (taas_now), or 0 when none is. */
double taas_trainview_due(const taas_trainview *v);

/* The table of epoch rows (History's), as aligned text and as HTML (with a caption unless
 * NULL); result.c shows a History with them. */
void taas_epoch_table_text(const json_t *rows, taas_buf *out);
void taas_epoch_table_html(const json_t *rows, const char *caption, taas_buf *out);

#endif
