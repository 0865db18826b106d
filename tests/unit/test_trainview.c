/* kernel/job/trainview.c, the training display: one display updated in place, the bar, the
 * epochs' table, the chart's axes (the accuracy axis follows the values, so 90-93 % is not a
 * flat line at the top) and the summary's wording. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "trainview.h"

typedef struct {
    json_t *shown;  /* the last display */
    int displays, updates;
} capture;

static void keep_display(void *ctx, json_t *data, json_t *md, const char *id, int update) {
    capture *c = ctx;
    assert_string_equal(id, "job-1");
    if (update) c->updates++;
    else c->displays++;
    json_decref(c->shown);
    c->shown = data;
    json_decref(md);
}

static const char *html(const capture *c) {
    return json_string_value(json_object_get(c->shown, "text/html"));
}
static const char *text(const capture *c) {
    return json_string_value(json_object_get(c->shown, "text/plain"));
}

static void epoch(taas_trainview *v, int e, double train_loss, double val_loss, double acc) {
    json_t *m = json_pack("{s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:i}", "event", "epoch", "epoch", e, "train_loss", train_loss,
                          "val_loss", val_loss, "val_accuracy", acc, "time_s", 10.0, "samples_per_s", 6000.0, "steps", 100);
    taas_trainview_epoch(v, m);
    json_decref(m);
}

/* The chart's SVG, from the data: URI of the display's img.taas-chart (malloc'd). */
static char *chart(const capture *c) {
    static const char IMG[] = "<img class=\"taas-chart\" alt=\"\" src=\"data:image/svg+xml;base64,";
    const char *b64 = strstr(html(c), IMG);
    assert_non_null(b64);
    b64 += strlen(IMG);
    size_t n = (size_t)(strchr(b64, '"') - b64), len = 0;
    char *svg = malloc(n + 1);
    assert_int_equal(sodium_base642bin((unsigned char *)svg, n, b64, n, NULL, &len, NULL,
                                       sodium_base64_VARIANT_ORIGINAL), 0);
    svg[len] = '\0';
    assert_non_null(strstr(svg, "<svg class=\"taas-chart\" xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(svg, "</svg>"));
    return svg;
}

/* A label of the chart's axes: the accuracy axis's at the right. */
static int has_label(const char *svg, const char *label) {
    char want[64];
    snprintf(want, sizeof want, ">%s</text>", label);
    return strstr(svg, want) != NULL;
}

static void test_accuracy_axis_follows_the_values(void **state) {
    (void)state;
    capture c = {0};
    taas_io io = {.ctx = &c, .display = keep_display};
    taas_trainview *v = taas_trainview_new("job-1");
    json_t *start = json_pack("{s:i,s:i,s:i}", "epochs", 3, "steps_per_epoch", 100, "total_steps", 300);
    taas_trainview_start(v, start);
    json_decref(start);
    epoch(v, 1, 0.45, 0.31, 0.901);
    epoch(v, 2, 0.30, 0.27, 0.915);
    epoch(v, 3, 0.25, 0.26, 0.928);
    taas_trainview_end(v, "done", "net");
    taas_trainview_show(v, &io, 1);
    assert_int_equal(c.displays, 1);
    const char *h = html(&c);
    char *svg = chart(&c);
    /* no SVG inline: sanitized (a notebook not trusted), its text would be left in the output */
    assert_null(strstr(h, "<svg"));
    /* 90.1-92.8 %: ticks of 1 % from 89 % to 93 %, not 0-100 % */
    assert_true(has_label(svg, "93%"));
    assert_true(has_label(svg, "89%"));
    assert_false(has_label(svg, "100%"));
    assert_false(has_label(svg, "0%"));
    /* two loss series told apart by colour as well as dash */
    assert_non_null(strstr(svg, "class=\"taas-train-loss\""));
    assert_non_null(strstr(svg, "class=\"taas-val-loss\" d=\"M"));
    assert_non_null(strstr(svg, "stroke=\"#ff7f0e\" stroke-width=\"2\" stroke-dasharray"));
    free(svg);
    assert_non_null(strstr(h, "<progress class=\"taas-progress\" value=\"300\" max=\"300\""));
    assert_non_null(strstr(text(&c), " 100%  epoch 3/3 done  6,000 samples/s"));
    /* the summary's speed is over the epochs' training time, and says so */
    assert_non_null(strstr(text(&c), ": 3 epochs, 300 steps, 6,000 samples/s while training; best val accuracy "
                                     "0.9280 (epoch 3); the trained weights are in net"));
    /* the live display's table has no caption: the History's has */
    assert_null(strstr(h, "<caption"));
    taas_trainview_show(v, &io, 1);
    assert_int_equal(c.updates, 1);
    taas_trainview_free(v);
    json_decref(c.shown);
}

/* The chart of epochs with these val accuracies (a negative one: no validation), with the
 * accuracy axis's labels checked: each of want is one, each of absent is not. */
static void axis(const double *acc, int n, const char *const *want, const char *const *absent) {
    capture c = {0};
    taas_io io = {.ctx = &c, .display = keep_display};
    taas_trainview *v = taas_trainview_new("job-1");
    for (int i = 0; i < n; i++) {
        json_t *m = json_pack("{s:i,s:f,s:f,s:f,s:f}", "epoch", i + 1, "train_loss", 1.0 / (i + 1), "val_loss",
                              1.0 / (i + 2), "time_s", 1.0, "samples_per_s", 100.0);
        json_object_set_new(m, "val_accuracy", acc[i] >= 0 ? json_real(acc[i]) : json_null());
        taas_trainview_epoch(v, m);
        json_decref(m);
    }
    taas_trainview_show(v, &io, 1);
    char *svg = chart(&c);
    for (; want && *want; want++) assert_true(has_label(svg, *want));
    for (; absent && *absent; absent++) assert_false(has_label(svg, *absent));
    if (acc[0] < 0) assert_null(strstr(svg, "taas-val-accuracy"));
    free(svg);
    taas_trainview_free(v);
    json_decref(c.shown);
}

static void test_accuracy_axis_edges(void **state) {
    (void)state;
    /* near 100 %: the axis ends at 100 %, ticks of 0.5 % */
    axis((const double[]){0.998}, 1, (const char *const[]){"100.0%", "99.5%", "98.0%", NULL}, NULL);
    /* 90-93 %: ticks of 2.5 % from 85 % to 95 %, each with its decimal */
    axis((const double[]){0.8997, 0.9332}, 2, (const char *const[]){"95.0%", "92.5%", "87.5%", "85.0%", NULL},
         (const char *const[]){"92%", NULL});
    /* from chance to good: the whole range */
    axis((const double[]){0.10, 0.85}, 2, (const char *const[]){"100%", "50%", "0%", NULL}, NULL);
    /* no validation: no accuracy path, the axis 0-100 % */
    axis((const double[]){-1}, 1, (const char *const[]){"100%", "0%", NULL}, NULL);
}

/* Occurrences of needle in s. */
static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* A worker's numbers, whatever they are, make a display (found by tests/fuzz/fuzz_jobctl,
 * tests/fuzz/regressions/jobctl/): the sums and products of steps saturate, a double is made
 * an integer only within range (1e69 samples/s was shown as -9,223,372,036,854,775,808), and
 * a chart of 10^18 epochs labels a dozen of them rather than looping over them all. */
static void test_hostile_numbers(void **state) {
    (void)state;
    capture c = {0};
    taas_io io = {.ctx = &c, .display = keep_display};
    taas_trainview *v = taas_trainview_new("job-1");
    json_t *m = json_pack("{s:I,s:I}", "epochs", (json_int_t)1000000000000000000, "steps_per_epoch",
                          (json_int_t)INT64_MAX);
    taas_trainview_start(v, m);
    json_decref(m);
    m = json_pack("{s:i,s:I,s:f,s:f}", "epoch", 1, "step", (json_int_t)INT64_MAX, "loss", 1e300, "samples_per_s",
                  1.01e69);
    taas_trainview_step(v, m);
    json_decref(m);
    taas_trainview_show(v, &io, 1);
    assert_non_null(strstr(text(&c), "  9,223,372,036,854,775,807 samples/s"));
    for (int i = 0; i < 2; i++) {
        m = json_pack("{s:f,s:f,s:f,s:f,s:I}", "epoch", 1e30, "train_loss", 1.0, "time_s", 1e300, "samples_per_s",
                      -1e300, "steps", (json_int_t)INT64_MAX);
        taas_trainview_epoch(v, m);
        json_decref(m);
    }
    taas_trainview_end(v, "done", NULL);
    taas_trainview_show(v, &io, 1);
    assert_non_null(strstr(text(&c), "9223372036854775807"));          /* the epoch, as the table shows it */
    assert_non_null(strstr(text(&c), "-9,223,372,036,854,775,808"));   /* its samples/s */
    assert_non_null(strstr(text(&c), "2 epochs, 9,223,372,036,854,775,807 steps"));
    char *svg = chart(&c);
    int labels = count(svg, "text-anchor=\"middle\">") - 1;  /* less the axis's title */
    assert_true(labels >= 2 && labels <= 13);
    assert_true(has_label(svg, "1000000000000000000"));
    free(svg);
    taas_trainview_free(v);
    json_decref(c.shown);
}

/* Issue 27: a stop's summary said 3,159 steps while the last checkpoint was at step 3,500.
 * The step lines come at most ~5 a second; rank 0's own count (its checkpoint's, its "done"
 * line's) is what the summary and the bar say when it is ahead. */
static void test_a_stop_says_the_steps_rank_0_counted(void **state) {
    (void)state;
    capture c = {0};
    taas_io io = {.ctx = &c, .display = keep_display};
    taas_trainview *v = taas_trainview_new("job-1");
    json_t *m = json_pack("{s:i,s:i}", "epochs", 2, "steps_per_epoch", 5000);
    taas_trainview_start(v, m);
    json_decref(m);
    m = json_pack("{s:i,s:i,s:i,s:f}", "epoch", 1, "step", 3159, "steps", 5000, "loss", 0.5);
    taas_trainview_step(v, m);
    json_decref(m);
    taas_trainview_steps(v, 3500);  /* the checkpoint */
    taas_trainview_steps(v, 3400);  /* an older count says nothing more */
    taas_trainview_end(v, "stopped", NULL);
    taas_trainview_show(v, &io, 1);
    assert_non_null(strstr(text(&c), "stopped after "));
    assert_non_null(strstr(text(&c), ": 0 epochs, 3,500 steps"));
    assert_non_null(strstr(html(&c), "value=\"3500\" max=\"10000\""));
    taas_trainview_free(v);
    json_decref(c.shown);
}

/* A model of text's sample: the latest under the table, escaped in HTML; and with gradient
 * accumulation the summary counts batches and optimizer steps apart. */
static void test_text_sample_and_accumulation(void **state) {
    (void)state;
    capture c = {0};
    taas_io io = {.ctx = &c, .display = keep_display};
    taas_trainview *v = taas_trainview_new("job-1");
    json_t *start = json_pack("{s:i,s:i,s:i,s:i}", "epochs", 2, "steps_per_epoch", 5, "total_steps", 10, "accumulate", 2);
    taas_trainview_start(v, start);
    json_decref(start);
    for (int e = 1; e <= 2; e++) {
        json_t *m = json_pack("{s:s,s:i,s:f,s:f,s:f,s:i,s:s}", "event", "epoch", "epoch", e, "train_loss", 2.0,
                              "time_s", 1.0, "samples_per_s", 10.0, "steps", 5, "sample",
                              e == 1 ? "first" : "Q: <why>?\nA: & because");
        taas_trainview_epoch(v, m);
        json_decref(m);
    }
    taas_trainview_steps(v, 6);
    taas_trainview_end(v, "done", "net");
    taas_trainview_show(v, &io, 1);
    assert_non_null(strstr(text(&c), "\nsample after epoch 2:\nQ: <why>?\nA: & because\n"));
    assert_null(strstr(text(&c), "first"));
    assert_non_null(strstr(html(&c), "<div class=\"taas-sample\">sample after epoch 2:<pre>Q: &lt;why&gt;?\nA: &amp; because</pre>"));
    assert_non_null(strstr(text(&c), ": 2 epochs, 10 batches in 6 optimizer steps"));
    json_decref(c.shown);
    taas_trainview_free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy_axis_follows_the_values),
        cmocka_unit_test(test_text_sample_and_accumulation),
        cmocka_unit_test(test_accuracy_axis_edges),
        cmocka_unit_test(test_hostile_numbers),
        cmocka_unit_test(test_a_stop_says_the_steps_rank_0_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
