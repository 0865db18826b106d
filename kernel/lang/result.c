/* History and Evaluation values: built from a worker's "done" line, shown as tables. */
#include "result.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char HISTORY[] = "History", EVALUATION[] = "Evaluation";

static const char *const COLUMNS[] = {"epoch", "train loss", "val loss", "val accuracy", "time", "samples/s"};
#define NCOL (sizeof COLUMNS / sizeof *COLUMNS)

/* One cell of an epoch row as text: "-" for a missing number (no validation loader). */
static void cell(const json_t *e, size_t col, char *out, size_t n) {
    static const char *const keys[] = {"epoch", "train_loss", "val_loss", "val_accuracy", "time_s", "samples_per_s"};
    const json_t *v = json_object_get(e, keys[col]);
    if (!json_is_number(v)) {
        snprintf(out, n, "-");
        return;
    }
    double x = json_number_value(v);
    if (col == 0) {
        snprintf(out, n, "%lld", (long long)x);
    } else if (col == 4) {
        snprintf(out, n, "%.1f s", x);
    } else if (col == 5) {
        taas_buf b = TAAS_BUF_INIT;
        taas_buf_thousands(&b, (long long)llround(x));
        snprintf(out, n, "%s", b.data);
        taas_buf_free(&b);
    } else {
        snprintf(out, n, "%.4f", x);
    }
}

static int is_epoch(const json_t *e) {
    return json_is_object(e) && json_is_integer(json_object_get(e, "epoch")) &&
           json_is_number(json_object_get(e, "train_loss"));
}

taas_value *taas_result_of_fit(const json_t *done) {
    const json_t *h = json_object_get(done, "history");
    if (!json_is_array(h)) return NULL;
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
    return taas_result_new(HISTORY, rows);
}

taas_value *taas_result_of_evaluate(const json_t *done) {
    const json_t *samples = json_object_get(done, "samples");
    if (!json_is_integer(samples)) return NULL;
    json_t *o = json_object();
    json_object_set_new(o, "loss", json_deep_copy(json_object_get(done, "loss")));
    json_object_set_new(o, "accuracy", json_deep_copy(json_object_get(done, "accuracy")));
    json_object_set_new(o, "samples", json_deep_copy(samples));
    return taas_result_new(EVALUATION, o);
}

static void number(taas_buf *out, const json_t *v) {
    if (json_is_number(v)) taas_buf_printf(out, "%.4f", json_number_value(v));
    else taas_buf_puts(out, "nan");  /* no samples: the worker sends null */
}

static void history_text(const json_t *rows, taas_buf *out) {
    size_t width[NCOL], n = json_array_size(rows);
    char c[64];
    for (size_t k = 0; k < NCOL; k++) width[k] = strlen(COLUMNS[k]);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < NCOL; k++) {
            cell(json_array_get(rows, i), k, c, sizeof c);
            if (strlen(c) > width[k]) width[k] = strlen(c);
        }
    taas_buf_printf(out, "History (%zu epoch%s)\n", n, n == 1 ? "" : "s");
    for (size_t k = 0; k < NCOL; k++) taas_buf_printf(out, "%s%*s", k ? "  " : "", (int)width[k], COLUMNS[k]);
    for (size_t i = 0; i < n; i++) {
        taas_buf_putc(out, '\n');
        for (size_t k = 0; k < NCOL; k++) {
            cell(json_array_get(rows, i), k, c, sizeof c);
            taas_buf_printf(out, "%s%*s", k ? "  " : "", (int)width[k], c);
        }
    }
}

static void history_html(const json_t *rows, taas_buf *out) {
    char c[64];
    taas_buf_puts(out, "<table class=\"taas-history\">\n<thead><tr>");
    for (size_t k = 0; k < NCOL; k++) taas_buf_printf(out, "<th>%s</th>", COLUMNS[k]);
    taas_buf_puts(out, "</tr></thead>\n<tbody>\n");
    size_t i;
    const json_t *e;
    json_array_foreach(rows, i, e) {
        taas_buf_puts(out, "<tr>");
        for (size_t k = 0; k < NCOL; k++) {
            cell(e, k, c, sizeof c);
            taas_buf_printf(out, "<td>%s</td>", c);
        }
        taas_buf_puts(out, "</tr>\n");
    }
    taas_buf_puts(out, "</tbody>\n</table>");
}

void taas_result_repr(const taas_value *v, taas_buf *out) {
    const json_t *d = v->u.res.data;
    if (v->u.res.kind == HISTORY) {
        history_text(d, out);
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
    if (v->u.res.kind == HISTORY) {
        history_html(d, &h);
    } else {
        taas_buf_puts(&h, "<table class=\"taas-evaluation\">\n<thead><tr><th>loss</th><th>accuracy</th>"
                          "<th>samples</th></tr></thead>\n<tbody><tr><td>");
        number(&h, json_object_get(d, "loss"));
        taas_buf_puts(&h, "</td><td>");
        number(&h, json_object_get(d, "accuracy"));
        taas_buf_puts(&h, "</td><td>");
        taas_buf_thousands(&h, (long long)json_integer_value(json_object_get(d, "samples")));
        taas_buf_puts(&h, "</td></tr></tbody>\n</table>");
    }
    json_t *b = json_object();
    json_object_set_new(b, "text/plain", json_string(t.data ? t.data : ""));
    json_object_set_new(b, "text/html", json_string(h.data ? h.data : ""));
    taas_buf_free(&t);
    taas_buf_free(&h);
    return b;
}
