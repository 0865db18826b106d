/* What the cell shows while a job runs: one display, updated in place (update_display_data)
 * at most five times a second, in text/plain and text/html; a summary line at the end. */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "job_priv.h"

#define VIEW_EVERY_S 0.2

static void duration(taas_buf *b, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600) taas_buf_printf(b, "%ld h %ld min", t / 3600, t / 60 % 60);
    else if (t >= 60) taas_buf_printf(b, "%ld min %ld s", t / 60, t % 60);
    else taas_buf_printf(b, "%.1f s", s);
}

static int loaders_alive(const taas_job *j) {
    int n = 0;
    for (int i = 0; i < j->nloaders; i++) n += j->loaders[i].hello && j->loaders[i].proc && !j->loaders[i].proc->exited;
    return n;
}

static void status_text(const taas_job *j, taas_buf *t) {
    if (j->epoch == 0) {
        taas_buf_printf(t, "starting: ranks %d/%d", j->nhello, j->world);
    } else {
        taas_buf_printf(t, "epoch %lld/%lld  step %lld/%lld  loss %.4f  ", j->epoch, j->epochs, j->step,
                        j->steps_per_epoch, j->loss);
        taas_buf_thousands(t, (long long)(j->samples_per_s + 0.5));
        taas_buf_printf(t, " samples/s  ranks %d/%d", j->nhello, j->world);
    }
    if (j->nloaders) taas_buf_printf(t, "  loaders %d/%d", loaders_alive(j), j->nloaders);
    if (j->epoch > 0) taas_buf_printf(t, "  waiting for data %.0f%%", j->wait_share * 100);
    taas_buf_puts(t, "  ");
    duration(t, taas_now() - j->t0);
}

void taas_job_view(taas_job *j, const taas_io *io, int final) {
    double now = taas_now();
    if (!io || !io->display) return;
    if (!final && now - j->last_view < VIEW_EVERY_S) {
        if (j->next_view <= 0) j->next_view = j->last_view + VIEW_EVERY_S;  /* show the latest then */
        return;
    }
    j->last_view = now;
    j->next_view = 0;
    taas_buf t = TAAS_BUF_INIT, h = TAAS_BUF_INIT;
    status_text(j, &t);
    long long total = j->steps_per_epoch * j->epochs, done = j->steps_per_epoch * (j->epoch > 0 ? j->epoch - 1 : 0) + j->step;
    taas_buf_printf(&h, "<div class=\"taas-job\"><progress value=\"%lld\" max=\"%lld\" style=\"width:40%%\"></progress> "
                        "<code>", done, total > 0 ? total : 1);
    taas_buf_html(&h, t.data);
    taas_buf_puts(&h, "</code></div>");
    json_t *data = json_object();
    json_object_set_new(data, "text/plain", json_string(t.data));
    json_object_set_new(data, "text/html", json_string(h.data));
    taas_buf_free(&t);
    taas_buf_free(&h);
    io->display(io->ctx, data, json_object(), j->display_id, j->view_shown);
    j->view_shown = 1;
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
    duration(&b, secs);
    double wait = json_number_value(json_object_get(d, "wait_s")), busy = json_number_value(json_object_get(d, "step_s"));
    double later = wait - json_number_value(json_object_get(d, "first_wait_s"));
    if (wait + busy > 0)
        taas_buf_printf(&b, "; the ranks waited for data %.1f%% of the time (%.1f%% after the first batch)",
                        100 * wait / (wait + busy), later + busy > 0 ? 100 * later / (later + busy) : 0.0);
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
