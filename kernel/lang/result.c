/* History and Evaluation values, built from a worker's "done" line, and the Jobs list,
 * built from the detached jobs' states: each shown as a table. */
#include "result.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "detached.h"
#include "rows.h"
#include "trainview.h"
#include "utf8.h"

static const char HISTORY[] = "History", EVALUATION[] = "Evaluation", JOBS[] = "Jobs",
                  KEYS[] = "_IncompatibleKeys";

static int is_epoch(const json_t *e) {
    return json_is_object(e) && json_is_integer(json_object_get(e, "epoch")) &&
           json_is_number(json_object_get(e, "train_loss"));
}

/* A result whose data lost a part to a failed allocation is none (NULL: out of memory). */
static taas_value *result_whole(const char *kind, json_t *data, size_t mark) {
    if (taas_json_lost(mark)) {
        json_decref(data);
        return NULL;
    }
    return taas_result_new(kind, data);
}

taas_value *taas_result_of_fit(const json_t *done) {
    const json_t *h = json_object_get(done, "history");
    if (!json_is_array(h)) return NULL;
    size_t mark = taas_json_mark();
    json_t *rows = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(h, i, e) {
        if (!is_epoch(e)) {
            json_decref(rows);
            return NULL;
        }
        json_t *r = json_deep_copy(e);
        json_object_del(r, "event");
        json_array_append_new(rows, r);
    }
    return result_whole(HISTORY, rows, mark);
}

taas_value *taas_result_of_evaluate(const json_t *done) {
    const json_t *samples = json_object_get(done, "samples");
    if (!json_is_integer(samples)) return NULL;
    size_t mark = taas_json_mark();
    json_t *o = json_object();
    json_object_set_new(o, "loss", json_deep_copy(json_object_get(done, "loss")));
    json_object_set_new(o, "accuracy", json_deep_copy(json_object_get(done, "accuracy")));
    json_object_set_new(o, "samples", json_deep_copy(samples));
    return result_whole(EVALUATION, o, mark);
}

taas_value *taas_result_of_jobs(const json_t *states) {
    size_t mark = taas_json_mark();
    return result_whole(JOBS, json_deep_copy(states), mark);
}

/* A job's columns: id, state, progress, model, started (UTC), plan. */
enum { JOB_COLS = 6 };
static const char *const JOB_HEAD[JOB_COLS] = {"id", "state", "progress", "model", "started", "plan"};

/* A cell's text from a state's string: whatever the folder says, valid UTF-8 cut at a
 * character, "-" for none. */
static void cell(char out[256], const json_t *s, const char *key, size_t max) {
    const json_t *v = json_object_get(s, key);
    if (json_is_string(v)) taas_utf8_clip(out, 256, json_string_value(v), json_string_length(v), max);
    else snprintf(out, 256, "-");
}

static void job_cells(const json_t *s, char cells[JOB_COLS][256]) {
    cell(cells[0], s, "id", 64);
    cell(cells[1], s, "state", 16);
    long long epoch, step, epochs = (long long)json_integer_value(json_object_get(s, "epochs")),
                           steps = (long long)json_integer_value(json_object_get(s, "steps"));
    taas_detached_reached(s, &epoch, &step);
    if (json_is_string(json_object_get(s, "damage"))) cell(cells[2], s, "damage", 160);
    else if (epochs > 0) snprintf(cells[2], 256, "epoch %lld/%lld, step %lld/%lld", epoch, epochs, step, steps);
    else snprintf(cells[2], 256, "-");
    cell(cells[3], s, "model", 40);
    time_t t = (time_t)json_integer_value(json_object_get(s, "created"));
    struct tm tm;
    if (t > 0 && gmtime_r(&t, &tm)) strftime(cells[4], 256, "%Y-%m-%d %H:%M:%S", &tm);
    else snprintf(cells[4], 256, "-");
    cell(cells[5], s, "plan", 80);
}

static void jobs_text(const json_t *d, taas_buf *out) {
    size_t n = json_array_size(d);
    taas_buf_printf(out, "Jobs (%zu)", n);
    if (!n) taas_buf_puts(out, ": none yet; a fit in a `#pragma taas --gpus N --detach` cell makes one");
    int width[JOB_COLS];
    for (int c = 0; c < JOB_COLS; c++) width[c] = (int)strlen(JOB_HEAD[c]);
    char cells[JOB_COLS][256];
    for (size_t i = 0; i < n; i++) {
        job_cells(json_array_get(d, i), cells);
        for (int c = 0; c < JOB_COLS - 1; c++)
            if ((int)strlen(cells[c]) > width[c]) width[c] = (int)strlen(cells[c]);
    }
    for (size_t i = 0; n && i <= n; i++) {
        if (i) job_cells(json_array_get(d, i - 1), cells);
        taas_buf_putc(out, '\n');
        for (int c = 0; c < JOB_COLS; c++) {
            const char *v = i ? cells[c] : JOB_HEAD[c];
            if (c < JOB_COLS - 1) taas_buf_printf(out, "%-*s  ", width[c], v);
            else taas_buf_puts(out, v);
        }
    }
}

static void jobs_html(const json_t *d, taas_buf *h) {
    size_t n = json_array_size(d);
    taas_buf_printf(h, "<table class=\"taas-jobs\">\n<caption style=\"text-align:left\">Jobs (%zu)</caption>\n"
                       "<thead><tr>", n);
    for (int c = 0; c < JOB_COLS; c++) taas_buf_printf(h, "<th>%s</th>", JOB_HEAD[c]);
    taas_buf_puts(h, "</tr></thead>\n<tbody>\n");
    char cells[JOB_COLS][256];
    for (size_t i = 0; i < n; i++) {
        job_cells(json_array_get(d, i), cells);
        taas_buf_puts(h, "<tr>");
        for (int c = 0; c < JOB_COLS; c++) {
            taas_buf_puts(h, "<td>");
            taas_buf_html(h, cells[c]);
            taas_buf_puts(h, "</td>");
        }
        taas_buf_puts(h, "</tr>\n");
    }
    taas_buf_puts(h, "</tbody>\n</table>");
}

static void number(taas_buf *out, const json_t *v) {
    if (json_is_number(v)) taas_buf_printf(out, "%.4f", json_number_value(v));
    else taas_buf_puts(out, "nan");  /* no samples: the worker sends null */
}

taas_value *taas_result_of_load(json_t *data) {
    return taas_result_new(KEYS, data);
}

/* ['0.weight', '0.bias'], as Python writes a list of str */
static void key_list(const json_t *keys, taas_buf *out) {
    size_t i;
    const json_t *k;
    taas_buf_putc(out, '[');
    json_array_foreach(keys, i, k) {
        taas_value *s = taas_str0(json_string_value(k));
        if (i) taas_buf_puts(out, ", ");
        if (s) taas_repr_to(s, out);
        else out->failed = 1;
        taas_unref(s);
    }
    taas_buf_putc(out, ']');
}

/* as torch prints what load_state_dict returns */
static void keys_text(const json_t *d, taas_buf *out) {
    const json_t *m = json_object_get(d, "missing_keys"), *u = json_object_get(d, "unexpected_keys");
    if (!json_array_size(m) && !json_array_size(u)) {
        taas_buf_puts(out, "<All keys matched successfully>");
        return;
    }
    taas_buf_puts(out, "_IncompatibleKeys(missing_keys=");
    key_list(m, out);
    taas_buf_puts(out, ", unexpected_keys=");
    key_list(u, out);
    taas_buf_putc(out, ')');
}

void taas_result_repr(const taas_value *v, taas_buf *out) {
    const json_t *d = v->u.res.data;
    if (v->u.res.kind == KEYS) {
        keys_text(d, out);
        return;
    }
    if (v->u.res.kind == JOBS) {
        jobs_text(d, out);
        return;
    }
    if (v->u.res.kind == HISTORY) {
        size_t n = json_array_size(d);
        taas_buf_printf(out, "History (%zu epoch%s)\n", n, n == 1 ? "" : "s");
        taas_epoch_table_text(d, out);
        return;
    }
    taas_buf_puts(out, "Evaluation(loss=");
    number(out, json_object_get(d, "loss"));
    taas_buf_puts(out, ", accuracy=");
    number(out, json_object_get(d, "accuracy"));
    taas_buf_printf(out, ", samples=%lld)", (long long)json_integer_value(json_object_get(d, "samples")));
}

json_t *taas_result_mimebundle(const taas_value *v) {
    taas_buf t = TAAS_BUF_INIT, h = TAAS_BUF_INIT;
    taas_result_repr(v, &t);
    const json_t *d = v->u.res.data;
    if (v->u.res.kind == KEYS) {
        taas_buf_puts(&h, "<pre>");
        taas_buf_html(&h, t.data ? t.data : "");
        taas_buf_puts(&h, "</pre>");
    } else if (v->u.res.kind == JOBS) {
        jobs_html(d, &h);
    } else if (v->u.res.kind == HISTORY) {
        char caption[64];
        size_t n = json_array_size(d);
        snprintf(caption, sizeof caption, "History (%zu epoch%s)", n, n == 1 ? "" : "s");
        taas_epoch_table_html(d, caption, &h);
    } else {
        taas_buf_puts(&h, "<table class=\"taas-evaluation\">\n<caption style=\"text-align:left\">Evaluation</caption>\n"
                          "<thead><tr><th>loss</th><th>accuracy</th>"
                          "<th>samples</th></tr></thead>\n<tbody><tr><td>");
        number(&h, json_object_get(d, "loss"));
        taas_buf_puts(&h, "</td><td>");
        number(&h, json_object_get(d, "accuracy"));
        taas_buf_puts(&h, "</td><td>");
        taas_buf_thousands(&h, (long long)json_integer_value(json_object_get(d, "samples")));
        taas_buf_puts(&h, "</td></tr></tbody>\n</table>");
    }
    json_t *b = t.failed || h.failed ? NULL  /* out of memory */
              : json_pack("{s:s, s:s}", "text/plain", t.data ? t.data : "", "text/html", h.data ? h.data : "");
    taas_buf_free(&t);
    taas_buf_free(&h);
    return b;
}
