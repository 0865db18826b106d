/* What the cell shows while a job runs: the training display (trainview.h) with the job's
 * ranks, loaders and wait for data; at the end a summary line with the sample checksums. */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "job_priv.h"

static int loaders_alive(const taas_job *j) {
    int n = 0;
    for (int i = 0; i < j->nloaders; i++) n += j->loaders[i].active && j->loaders[i].hello && j->loaders[i].alive;
    return n;
}

/* The job's own state after the training numbers. */
static void status_text(const taas_job *j, taas_buf *t) {
    taas_buf_printf(t, "ranks %d/%d", j->nhello, j->world);
    if (j->nloaders) taas_buf_printf(t, "  loaders %d/%d", loaders_alive(j), j->nstreams * j->pool);
    if (j->autosize && j->pool_why[0]) taas_buf_printf(t, " (auto: %s)", j->pool_why);
    else if (j->autosize) taas_buf_puts(t, " (auto)");
    if (j->epoch > 0) taas_buf_printf(t, "  waiting for data %.0f%%", j->wait_share * 100);
    if (j->offloaded) taas_job_cost_status(j, t);
}

void taas_job_view(taas_job *j, const taas_io *io, int final) {
    if (!j->view || j->evaluate) return;  /* evaluate shows its result only */
    if (j->offloaded) {  /* a plain fit shows the training alone */
        taas_buf t = TAAS_BUF_INIT;
        status_text(j, &t);
        taas_trainview_status(j->view, t.data);
        taas_buf_free(&t);
    }
    taas_trainview_show(j->view, io, final);
}

double taas_job_view_due(const taas_job *j) {
    return j->view ? taas_trainview_due(j->view) : 0;
}

void taas_job_summary(taas_job *j, const taas_io *io) {
    const json_t *d = j->done;
    taas_buf b = TAAS_BUF_INIT;
    long long steps = (long long)json_integer_value(json_object_get(d, "steps"));
    size_t epochs = json_array_size(json_object_get(d, "history"));
    double secs = taas_now() - j->t0;
    taas_buf_printf(&b, "done: %zu epoch%s, ", epochs, epochs == 1 ? "" : "s");
    taas_buf_thousands(&b, steps);
    taas_buf_printf(&b, " steps on %d rank%s in ", j->world, j->world == 1 ? "" : "s");
    taas_buf_duration(&b, secs, 1);
    double wait = json_number_value(json_object_get(d, "wait_s")), busy = json_number_value(json_object_get(d, "step_s"));
    double later = wait - json_number_value(json_object_get(d, "first_wait_s"));
    if (wait + busy > 0)
        taas_buf_printf(&b, "; the ranks waited for data %.1f%% of the time (%.1f%% after the first batch)",
                        100 * wait / (wait + busy), later + busy > 0 ? 100 * later / (later + busy) : 0.0);
    long long ckpts = (long long)json_integer_value(json_object_get(d, "checkpoints"));
    if (ckpts > 0)
        taas_buf_printf(&b, "; %lld checkpoint%s, %.2f s (%.1f%% of the time)", ckpts, ckpts == 1 ? "" : "s",
                        json_number_value(json_object_get(d, "checkpoint_s")),
                        secs > 0 ? 100 * json_number_value(json_object_get(d, "checkpoint_s")) / secs : 0.0);
    taas_job_cost_summary(j, &b);
    if (j->autosize) taas_buf_printf(&b, "; loaders at the end %d, %zu change%s of the pool", j->pool,
                                     json_array_size(j->pool_log), json_array_size(j->pool_log) == 1 ? "" : "s");
    if (j->budget_hit) taas_buf_printf(&b, "; stopped: %s", j->budget_why);
    const json_t *sums = json_object_get(d, "checksums");
    size_t i;
    const json_t *c;
    if (json_array_size(sums)) taas_buf_puts(&b, "; samples trained and their checksum:");
    json_array_foreach(sums, i, c) {
        taas_buf_printf(&b, "%s epoch %lld ", i ? "," : "", (long long)json_integer_value(json_object_get(c, "epoch")));
        taas_buf_thousands(&b, (long long)json_integer_value(json_object_get(c, "samples")));
        taas_buf_printf(&b, " %s", json_string_value(json_object_get(c, "checksum")));
    }
    taas_buf_puts(&b, "\n");
    if (io && io->stream) io->stream(io->ctx, "stdout", b.data);
    taas_buf_free(&b);
}
