/* The training display (trainview.h): state from the worker's messages, rendered as text and
 * as HTML with an SVG chart. */
#include "trainview.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"

#define SHOW_EVERY_S 0.2
#define BAR_CELLS 24

struct taas_trainview {
    char display_id[96];
    int shown;
    double last_show, due;
    double t0, t_end;
    long long epochs, steps_per_epoch, total_steps;
    long long epoch, step;          /* the current epoch (1-based) and its step */
    long long steps_before;         /* steps of the epochs before it */
    long long counted;              /* steps rank 0 counted done (taas_trainview_steps) */
    long long accumulate;           /* batches an optimizer step (the start line's; 1 when absent) */
    long long optimizer_steps;      /* the most taas_trainview_steps said: optimizer steps */
    double loss, samples_per_s, tokens_per_s;  /* tokens: a token model's (0 for another) */
    json_t *rows;                   /* finished epochs */
    char status[256];
    char state[16];                 /* "", "done", "stopped", "failed" */
    char weights[128];
};

taas_trainview *taas_trainview_new(const char *display_id) {
    taas_trainview *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    snprintf(v->display_id, sizeof v->display_id, "%s", display_id);
    v->rows = json_array();
    v->t0 = taas_now();
    return v;
}

void taas_trainview_free(taas_trainview *v) {
    if (!v) return;
    json_decref(v->rows);
    free(v);
}

static long long integer(const json_t *o, const char *k) {
    return (long long)json_integer_value(json_object_get(o, k));
}

/* The numbers come from a worker's messages: whatever they are, the display's arithmetic
 * saturates instead of overflowing, and a double becomes an integer only within range
 * (found by tests/fuzz/fuzz_jobctl). */
static long long sat_add(long long a, long long b) {
    long long r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? LLONG_MAX : LLONG_MIN) : r;
}

static long long sat_mul(long long a, long long b) {
    long long r;
    return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? LLONG_MIN : LLONG_MAX) : r;
}

/* x rounded to the nearest integer, clamped to long long; nan is 0 */
static long long to_ll(double x) {
    if (isnan(x)) return 0;
    x = round(x);
    if (x >= 0x1p63) return LLONG_MAX;
    if (x < -0x1p63) return LLONG_MIN;
    return (long long)x;
}

void taas_trainview_start(taas_trainview *v, const json_t *m) {
    v->epochs = integer(m, "epochs");
    v->steps_per_epoch = integer(m, "steps_per_epoch");
    v->total_steps = integer(m, "total_steps");
    v->accumulate = json_is_integer(json_object_get(m, "accumulate")) ? integer(m, "accumulate") : 1;
    if (v->total_steps <= 0) v->total_steps = sat_mul(v->epochs, v->steps_per_epoch);
    /* a fit resumed from a checkpoint: its epochs so far, whatever was shown before */
    const json_t *hist = json_object_get(m, "history"), *at = json_object_get(m, "resumed");
    if (!json_is_array(hist) || !json_is_object(at)) return;
    json_array_clear(v->rows);
    v->steps_before = 0;
    size_t i;
    const json_t *row;
    json_array_foreach(hist, i, row) {
        json_array_append_new(v->rows, json_deep_copy(row));
        v->steps_before = sat_add(v->steps_before, json_is_integer(json_object_get(row, "steps")) ? integer(row, "steps")
                                                                                              : v->steps_per_epoch);
    }
    v->epoch = integer(at, "epoch");
    v->step = integer(at, "step");
}

void taas_trainview_step(taas_trainview *v, const json_t *m) {
    long long e = integer(m, "epoch");
    if (e != v->epoch && e > 0) v->epoch = e;
    v->step = integer(m, "step");
    if (json_is_integer(json_object_get(m, "steps"))) v->steps_per_epoch = integer(m, "steps");
    v->loss = json_number_value(json_object_get(m, "loss"));
    v->samples_per_s = json_number_value(json_object_get(m, "samples_per_s"));
    v->tokens_per_s = json_number_value(json_object_get(m, "tokens_per_s"));
}

void taas_trainview_epoch(taas_trainview *v, const json_t *m) {
    json_t *row = json_deep_copy(m);
    json_object_del(row, "event");
    json_object_del(row, "t");
    json_array_append_new(v->rows, row);
    long long steps = json_is_integer(json_object_get(m, "steps")) ? integer(m, "steps") : v->steps_per_epoch;
    v->steps_before = sat_add(v->steps_before, steps);
    v->epoch = integer(m, "epoch");
    v->step = 0;
    v->samples_per_s = json_number_value(json_object_get(m, "samples_per_s"));
    v->tokens_per_s = json_number_value(json_object_get(m, "tokens_per_s"));
}

void taas_trainview_steps(taas_trainview *v, long long steps) {
    if (steps > v->optimizer_steps) v->optimizer_steps = steps;
    if (v->accumulate <= 1 && steps > v->counted) v->counted = steps;  /* a step is a batch */
}

void taas_trainview_status(taas_trainview *v, const char *text) {
    snprintf(v->status, sizeof v->status, "%s", text ? text : "");
}

void taas_trainview_end(taas_trainview *v, const char *state, const char *weights) {
    snprintf(v->state, sizeof v->state, "%s", state);
    snprintf(v->weights, sizeof v->weights, "%s", weights ? weights : "");
    v->t_end = taas_now();
    long long done = sat_add(v->steps_before, v->step);
    if (v->counted > done) done = v->counted;
    if (!strcmp(state, "done") && v->total_steps > done) v->total_steps = done;
}

/* ---- the epoch table (History's too) ----------------------------------------------- */

/* The table's columns; a token model's rows (fit_loop.c) add a perplexity and count tokens
 * rather than samples, and a pool that sized itself (--cpus auto) its loaders. */
typedef enum { F_EPOCH, F_NUMBER, F_PPL, F_TIME, F_COUNT } colfmt;
static const struct { const char *name, *key; colfmt fmt; } COLUMNS[] = {
    {"epoch", "epoch", F_EPOCH},          {"train loss", "train_loss", F_NUMBER},
    {"val loss", "val_loss", F_NUMBER},   {"val perplexity", "val_perplexity", F_PPL},
    {"val accuracy", "val_accuracy", F_NUMBER}, {"time", "time_s", F_TIME},
    {"samples/s", "samples_per_s", F_COUNT}, {"tokens/s", "tokens_per_s", F_COUNT},
    {"loaders", "loaders", F_COUNT},
};
#define ALLCOL (sizeof COLUMNS / sizeof *COLUMNS)
enum { C_PPL = 3, C_SAMPLES = 6, C_TOKENS = 7, C_LOADERS = 8 };

static int any_row_has(const json_t *rows, const char *key) {
    size_t i;
    const json_t *e;
    json_array_foreach(rows, i, e) {
        if (json_object_get(e, key)) return 1;
    }
    return 0;
}

/* The columns shown, in order (at most ALLCOL): their count. */
static size_t shown(const json_t *rows, size_t *out) {
    int tokens = any_row_has(rows, "tokens_per_s");
    size_t n = 0;
    for (size_t k = 0; k < ALLCOL; k++) {
        if ((k == C_PPL && !any_row_has(rows, "val_perplexity")) || (k == C_SAMPLES && tokens) ||
            (k == C_TOKENS && !tokens) || (k == C_LOADERS && !any_row_has(rows, "loaders")))
            continue;
        out[n++] = k;
    }
    return n;
}

/* One cell of an epoch row: "-" for a missing number (no validation loader). */
static void cell(const json_t *e, size_t col, char *out, size_t n) {
    const json_t *v = json_object_get(e, COLUMNS[col].key);
    if (json_is_string(v) && col == C_LOADERS) {  /* the pool's sizes in the epoch, "1→3" */
        snprintf(out, n, "%s", json_string_value(v));
        return;
    }
    if (!json_is_number(v)) {
        snprintf(out, n, "-");
        return;
    }
    double x = json_number_value(v);
    switch (COLUMNS[col].fmt) {
    case F_EPOCH: snprintf(out, n, "%lld", x >= 0 ? to_ll(floor(x)) : to_ll(ceil(x))); break;  /* as a cast truncates */
    case F_TIME: snprintf(out, n, "%.1f s", x); break;
    case F_PPL: snprintf(out, n, "%.2f", x); break;
    case F_COUNT: {
        taas_buf b = TAAS_BUF_INIT;
        taas_buf_thousands(&b, to_ll(x));
        snprintf(out, n, "%s", b.data);
        taas_buf_free(&b);
        break;
    }
    case F_NUMBER: snprintf(out, n, "%.4f", x); break;
    }
}

/* Code points, for the columns' widths ("1→3" is three). */
static size_t points(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

void taas_epoch_table_text(const json_t *rows, taas_buf *out) {
    size_t col[ALLCOL], cols = shown(rows, col), width[ALLCOL], n = json_array_size(rows);
    char c[64];
    for (size_t k = 0; k < cols; k++) width[k] = strlen(COLUMNS[col[k]].name);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < cols; k++) {
            cell(json_array_get(rows, i), col[k], c, sizeof c);
            if (points(c) > width[k]) width[k] = points(c);
        }
    for (size_t k = 0; k < cols; k++) taas_buf_printf(out, "%s%*s", k ? "  " : "", (int)width[k], COLUMNS[col[k]].name);
    for (size_t i = 0; i < n; i++) {
        taas_buf_putc(out, '\n');
        for (size_t k = 0; k < cols; k++) {
            cell(json_array_get(rows, i), col[k], c, sizeof c);
            taas_buf_printf(out, "%s%*s", k ? "  " : "", (int)(width[k] + strlen(c) - points(c)), c);
        }
    }
}

void taas_epoch_table_html(const json_t *rows, const char *caption, taas_buf *out) {
    size_t col[ALLCOL], cols = shown(rows, col);
    char c[64];
    taas_buf_puts(out, "<table class=\"taas-epochs\">\n");
    if (caption) {
        taas_buf_puts(out, "<caption style=\"text-align:left\">");
        taas_buf_html(out, caption);
        taas_buf_puts(out, "</caption>\n");
    }
    taas_buf_puts(out, "<thead><tr>");
    for (size_t k = 0; k < cols; k++) taas_buf_printf(out, "<th>%s</th>", COLUMNS[col[k]].name);
    taas_buf_puts(out, "</tr></thead>\n<tbody>\n");
    size_t i;
    const json_t *e;
    json_array_foreach(rows, i, e) {
        taas_buf_puts(out, "<tr>");
        for (size_t k = 0; k < cols; k++) {
            cell(e, col[k], c, sizeof c);
            taas_buf_printf(out, "<td>%s</td>", c);
        }
        taas_buf_puts(out, "</tr>\n");
    }
    taas_buf_puts(out, "</tbody>\n</table>");
}

/* ---- the chart ---------------------------------------------------------------------- */

#define CW 420
#define CH 180
#define CL 46   /* left margin: the loss axis */
#define CR 46   /* right margin: the accuracy axis */
#define CT 22
#define CB 28

/* A polyline of one column of the rows against the epoch, scaled to [lo, hi]. */
static void series(taas_buf *h, const json_t *rows, const char *key, double lo, double hi, long long epochs,
                   const char *cls, const char *colour, const char *dash) {
    taas_buf d = TAAS_BUF_INIT, dots = TAAS_BUF_INIT;
    size_t i;
    const json_t *e;
    int first = 1;
    json_array_foreach(rows, i, e) {
        const json_t *y = json_object_get(e, key);
        if (!json_is_number(y) || !isfinite(json_number_value(y))) continue;
        double ep = (double)integer(e, "epoch");
        double x = CL + (epochs > 1 ? (ep - 1) / (double)(epochs - 1) : 0.5) * (CW - CL - CR);
        double yy = CT + (1 - (fmax(lo, fmin(json_number_value(y), hi)) - lo) / (hi - lo)) * (CH - CT - CB);
        taas_buf_printf(&d, "%s%.1f %.1f", first ? "M" : " L", x, yy);
        taas_buf_printf(&dots, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", x, yy, colour);
        first = 0;
    }
    if (d.data)
        taas_buf_printf(h, "<path class=\"%s\" d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>%s", cls, d.data,
                        colour, dash, dots.data);
    taas_buf_free(&d);
    taas_buf_free(&dots);
}

/* The accuracy axis: four ticks of a round size that hold the values seen, within 0-100 %,
 * so that 90 % to 93 % is not a flat line at the top of a 0-100 % axis. */
static void accuracy_axis(const json_t *rows, double *lo, double *hi) {
    static const double TICK[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25};
    double amin = 2, amax = -1;
    size_t i;
    const json_t *e;
    json_array_foreach(rows, i, e) {
        const json_t *a = json_object_get(e, "val_accuracy");
        if (!json_is_number(a) || !isfinite(json_number_value(a))) continue;
        amin = fmin(amin, json_number_value(a));
        amax = fmax(amax, json_number_value(a));
    }
    *lo = 0;
    *hi = 1;
    if (amax < 0) return;
    for (size_t k = 0; k < sizeof TICK / sizeof *TICK; k++) {
        double t = TICK[k], l = floor(amin / t + 1e-9) * t - t, u;
        if (l < 0) l = 0;
        u = l + 4 * t;
        if (u > 1) {
            u = 1;
            l = 1 - 4 * t;
        }
        if (l >= 0 && amin >= l - 1e-9 && amax <= u + 1e-9) {
            *lo = l;
            *hi = u;
            return;
        }
    }
}

static void chart_svg(const taas_trainview *v, taas_buf *h) {
    double top = 0, alo, ahi;
    size_t i;
    const json_t *e;
    json_array_foreach(v->rows, i, e) {
        double a = json_number_value(json_object_get(e, "train_loss")), b = json_number_value(json_object_get(e, "val_loss"));
        if (isfinite(a) && a > top) top = a;
        if (isfinite(b) && b > top) top = b;
    }
    top = top > 0 ? top * 1.1 : 1;
    accuracy_axis(v->rows, &alo, &ahi);
    double tick = 100 * (ahi - alo) / 4;
    int adigits = fabs(tick - round(tick)) > 1e-6;  /* 0.5 % and 2.5 % ticks need a decimal */
    long long epochs = v->epochs > (long long)json_array_size(v->rows) ? v->epochs : (long long)json_array_size(v->rows);
    taas_buf_printf(h, "<svg class=\"taas-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                       "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"10\">", CW, CH, CW, CH);
    taas_buf_printf(h, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#bbb\"/>", CL, CT,
                    CW - CL - CR, CH - CT - CB);
    for (int t = 0; t <= 4; t++) {  /* the axes: loss on the left, accuracy on the right */
        double y = CT + t / 4.0 * (CH - CT - CB);
        taas_buf_printf(h, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>", CL, y, CW - CR, y);
        taas_buf_printf(h, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>", CL - 4, y + 3, top * (1 - t / 4.0));
        taas_buf_printf(h, "<text x=\"%d\" y=\"%.1f\">%.*f%%</text>", CW - CR + 4, y + 3, adigits,
                        100 * (ahi - t / 4.0 * (ahi - alo)));
    }
    /* at most 12 labels: every stride-th epoch and the last (a loop over the epochs
     * themselves would run as long as a worker says there are epochs) */
    long long stride = epochs > 12 ? epochs / 12 + (epochs % 12 != 0) : 1;
    for (long long ep = stride; epochs >= 1; ep = ep > epochs - stride ? epochs : ep + stride) {
        double x = CL + (epochs > 1 ? (ep - 1) / (double)(epochs - 1) : 0.5) * (CW - CL - CR);
        taas_buf_printf(h, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%lld</text>", x, CH - CB + 12, ep);
        if (ep == epochs) break;
    }
    taas_buf_printf(h, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">epoch</text>", (CW - CL - CR) / 2 + CL, CH - 4);
    series(h, v->rows, "train_loss", 0, top, epochs, "taas-train-loss", "#1f77b4", "");
    series(h, v->rows, "val_loss", 0, top, epochs, "taas-val-loss", "#ff7f0e", " stroke-dasharray=\"4 3\"");
    series(h, v->rows, "val_accuracy", alo, ahi, epochs, "taas-val-accuracy", "#d62728", "");
    taas_buf_printf(h, "<text x=\"%d\" y=\"12\" fill=\"#1f77b4\">— train loss</text>"
                       "<text x=\"%d\" y=\"12\" fill=\"#ff7f0e\">- - val loss</text>"
                       "<text x=\"%d\" y=\"12\" fill=\"#d62728\" text-anchor=\"end\">— val accuracy</text></svg>",
                    CL, CL + 80, CW - CR);
}

/* The chart as an image of its SVG, not inline SVG: a notebook that is not trusted (opened
 * from a file that was run elsewhere, nbconvert's output) has its HTML sanitized, which
 * drops SVG elements but keeps their text, so inline SVG would leave its axis labels run
 * together in the output; the sanitizer drops a data: src, and an img with an empty alt shows
 * nothing. */
static void chart_img(const taas_trainview *v, taas_buf *h) {
    taas_buf svg = TAAS_BUF_INIT;
    chart_svg(v, &svg);
    size_t n = sodium_base64_ENCODED_LEN(svg.len, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(n);
    if (b64) {
        sodium_bin2base64(b64, n, (const unsigned char *)svg.data, svg.len, sodium_base64_VARIANT_ORIGINAL);
        taas_buf_printf(h, "<img class=\"taas-chart\" alt=\"\" src=\"data:image/svg+xml;base64,%s\">", b64);
        free(b64);
    }
    taas_buf_free(&svg);
}

/* ---- the display -------------------------------------------------------------------- */

static long long done_steps(const taas_trainview *v) {
    long long d = sat_add(v->steps_before, v->step);
    if (v->counted > d) d = v->counted;
    return v->total_steps > 0 && d > v->total_steps ? v->total_steps : d;
}

/* "epoch 2/9  step 300/469  loss 0.3412  2,450 samples/s  ranks 2/2  1 min 12 s" (a token
 * model's: tokens/s) */
static void line(const taas_trainview *v, taas_buf *t) {
    if (v->epoch == 0 && v->step == 0 && !v->state[0]) {
        taas_buf_puts(t, "starting");
    } else {
        long long e = v->epoch > 0 ? v->epoch : 1;
        if (v->step) taas_buf_printf(t, "epoch %lld/%lld  step %lld/%lld  loss %.4f", e, v->epochs, v->step,
                                     v->steps_per_epoch, v->loss);
        else taas_buf_printf(t, "epoch %lld/%lld done", e, v->epochs);  /* between epochs */
        taas_buf_puts(t, "  ");
        taas_buf_thousands(t, to_ll(v->tokens_per_s > 0 ? v->tokens_per_s : v->samples_per_s));
        taas_buf_puts(t, v->tokens_per_s > 0 ? " tokens/s" : " samples/s");
    }
    if (v->status[0]) taas_buf_printf(t, "  %s", v->status);
    taas_buf_puts(t, "  ");
    taas_buf_duration(t, (v->t_end > 0 ? v->t_end : taas_now()) - v->t0, 1);
}

static void summary(const taas_trainview *v, taas_buf *t) {
    double secs = v->t_end - v->t0, best = -1, train_s = 0;
    long long best_epoch = 0, samples = 0;
    size_t i;
    const json_t *e;
    int tokens = any_row_has(v->rows, "tokens_per_s");
    json_array_foreach(v->rows, i, e) {
        double a = json_number_value(json_object_get(e, "val_accuracy"));
        if (json_is_number(json_object_get(e, "val_accuracy")) && a > best) {
            best = a;
            best_epoch = integer(e, "epoch");
        }
        samples = sat_add(samples, to_ll(json_number_value(json_object_get(e, tokens ? "tokens_per_s" : "samples_per_s")) *
                                         json_number_value(json_object_get(e, "time_s"))));
        train_s += json_number_value(json_object_get(e, "time_s"));
    }
    taas_buf_printf(t, "%s after ", !strcmp(v->state, "done")      ? "done"
                                    : !strcmp(v->state, "stopped") ? "stopped"
                                    : !strcmp(v->state, "budget")  ? "stopped by its budget"
                                                                   : "failed");
    taas_buf_duration(t, secs, 1);
    taas_buf_printf(t, ": %zu epoch%s, ", json_array_size(v->rows), json_array_size(v->rows) == 1 ? "" : "s");
    taas_buf_thousands(t, done_steps(v));
    if (v->accumulate > 1) {  /* gradient accumulation: the view's steps are batches */
        taas_buf_printf(t, " batch%s in ", done_steps(v) == 1 ? "" : "es");
        taas_buf_thousands(t, v->optimizer_steps);
        taas_buf_printf(t, " optimizer step%s", v->optimizer_steps == 1 ? "" : "s");
    } else {
        taas_buf_printf(t, " step%s", done_steps(v) == 1 ? "" : "s");
    }
    if (samples > 0 && train_s > 0) {  /* while training: validation and the start are not in it */
        taas_buf_puts(t, ", ");
        taas_buf_thousands(t, to_ll(samples / train_s));
        taas_buf_puts(t, tokens ? " tokens/s while training" : " samples/s while training");
    }
    if (best >= 0) taas_buf_printf(t, "; best val accuracy %.4f (epoch %lld)", best, best_epoch);
    if (v->weights[0]) taas_buf_printf(t, "; the trained weights are in %s", v->weights);
}

/* scale * done / total, within 0..scale, without overflow */
static int share(long long done, long long total, int scale) {
    if (done <= 0) return 0;
    if (done >= total) return scale;
    return (int)(done <= LLONG_MAX / scale ? scale * done / total : done / (total / scale));
}

/* A model of text's latest sample (an epoch line's "sample": the worker's, after validation),
 * under the table as nanoGPT prints one at each evaluation. */
static void sample(const taas_trainview *v, taas_buf *text, taas_buf *html) {
    const json_t *row = NULL, *r;
    size_t i;
    json_array_foreach(v->rows, i, r)
        if (json_is_string(json_object_get(r, "sample"))) row = r;
    if (!row) return;
    const char *s = json_string_value(json_object_get(row, "sample"));
    taas_buf_printf(text, "\nsample after epoch %lld:\n%s", integer(row, "epoch"), s);
    taas_buf_printf(html, "<div class=\"taas-sample\">sample after epoch %lld:<pre>", integer(row, "epoch"));
    taas_buf_html(html, s);
    taas_buf_puts(html, "</pre></div>\n");
}

void taas_trainview_show(taas_trainview *v, const taas_io *io, int now) {
    double t = taas_now();
    if (!io || !io->display) return;
    if (!now && v->shown && t - v->last_show < SHOW_EVERY_S) {
        if (v->due <= 0) v->due = v->last_show + SHOW_EVERY_S;  /* the latest state then */
        return;
    }
    v->last_show = t;
    v->due = 0;
    long long done = done_steps(v), total = v->total_steps > 0 ? v->total_steps : 1;
    int pct = share(done, total, 100);
    taas_buf text = TAAS_BUF_INIT, html = TAAS_BUF_INIT, l = TAAS_BUF_INIT;
    line(v, &l);
    int full = share(done, total, BAR_CELLS);
    for (int i = 0; i < BAR_CELLS; i++) taas_buf_puts(&text, i < full ? "\xE2\x96\x88" : "\xE2\x96\x91");
    taas_buf_printf(&text, " %3d%%  %s", pct, l.data);
    taas_buf_printf(&html, "<div class=\"taas-training\" data-state=\"%s\">\n"
                           "<div><progress class=\"taas-progress\" value=\"%lld\" max=\"%lld\" style=\"width:22em\">"
                           "</progress> <b>%d%%</b> <code>", v->state[0] ? v->state : "running", done, total, pct);
    taas_buf_html(&html, l.data);
    taas_buf_puts(&html, "</code></div>\n");
    if (json_array_size(v->rows)) {
        taas_buf_puts(&text, "\n");
        taas_epoch_table_text(v->rows, &text);
        taas_buf_puts(&html, "<div style=\"display:flex;gap:1.5em;align-items:flex-start;flex-wrap:wrap\">");
        taas_epoch_table_html(v->rows, NULL, &html);
        chart_img(v, &html);
        taas_buf_puts(&html, "</div>\n");
    }
    sample(v, &text, &html);
    if (v->state[0]) {
        taas_buf s = TAAS_BUF_INIT;
        summary(v, &s);
        taas_buf_printf(&text, "\n%s", s.data);
        taas_buf_puts(&html, "<div class=\"taas-summary\">");
        taas_buf_html(&html, s.data);
        taas_buf_puts(&html, "</div>\n");
        taas_buf_free(&s);
    }
    taas_buf_puts(&html, "</div>");
    json_t *data = json_object();
    json_object_set_new(data, "text/plain", json_string(text.data));
    json_object_set_new(data, "text/html", json_string(html.data));
    taas_buf_free(&text);
    taas_buf_free(&html);
    taas_buf_free(&l);
    io->display(io->ctx, data, json_object(), v->display_id, v->shown);
    v->shown = 1;
}

double taas_trainview_due(const taas_trainview *v) {
    return v->due;
}
