/* What a job costs: the user's prices of its machines (the configuration file's
 * price_per_hour), what it has cost so far, how long it will take and what it will cost in
 * all (from the last run of the same cell, then from its own steps), and the budget that
 * stops it (docs/offload.md, "Cost and budget"). We invent no price: without any, the job's
 * size is said in machine-hours. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>

#include "clock.h"
#include "detached.h"
#include "errnames.h"
#include "fdio.h"
#include "job_priv.h"

/* The runs kept for estimates, and the largest file of them read. */
#define KEEP_RUNS 200
#define MAX_RUNS_FILE ((size_t)1 << 20)
/* Validation's forward pass over a sample, against a training step's forward and backward. */
#define EVAL_SHARE (1.0 / 3.0)

static void amount(taas_buf *b, double x) {
    taas_buf_printf(b, x > 0 && x < 0.01 ? "%.4f" : "%.2f", x);
}

/* Machine-hours: a job of a minute is a small part of one, said to a second or so. */
static void hours(taas_buf *b, double x) {
    taas_buf_printf(b, x < 1 ? "%.4f" : "%.2f", x);
}

static int loader_count(const taas_job *j) {
    return j->nstreams * j->pool;
}

/* Money an hour at the present pool; -1 when no machine of the job has a price. */
static double rate(const taas_job *j) {
    int priced = j->price_ranks >= 0 || (j->price_loader >= 0 && loader_count(j) > 0);
    if (!priced) return -1;
    return (j->price_ranks > 0 ? j->price_ranks * j->rank_machines : 0) +
           (j->price_loader > 0 ? j->price_loader * loader_count(j) : 0);
}

/* ---- the runs kept: the same cell's last run --------------------------------------- */

static int runs_path(char *out, size_t n) {
    char dir[PATH_MAX];
    taas_error e;
    if (taas_jobs_dir(dir, sizeof dir, &e)) return -1;
    return (size_t)snprintf(out, n, "%s/estimates.json", dir) < n ? 0 : -1;
}

/* The runs file, or an empty object when there is none or it is not ours to read. */
static json_t *runs_read(void) {
    char path[PATH_MAX];
    if (runs_path(path, sizeof path)) return json_object();
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    json_t *all = NULL;
    size_t len;
    char *text = fd >= 0 ? taas_read_capped(fd, MAX_RUNS_FILE, &len) : NULL;
    if (text) {
        json_error_t je;
        all = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        free(text);
    }
    if (fd >= 0) close(fd);
    if (!json_is_object(all)) {  /* damaged or missing: estimates start again */
        json_decref(all);
        all = json_object();
    }
    return all;
}

/* The cell's identity: its fit's spec (without where its weights are), its ranks and pool. */
static void cell_key(taas_job *j, const taas_pragma *pr) {
    json_t *spec = json_deep_copy(j->spec);
    json_object_del(spec, "weights");
    json_object_del(spec, "resume");
    char *text = json_dumps(spec, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(spec);
    if (!text) return;
    char extra[160];
    snprintf(extra, sizeof extra, "|%d|%d|%d|%s|%s|%lld", j->world, j->pool, j->autosize ? j->cpus : 0,
             pr->has_config ? pr->config.name : "", j->be->name, pr->units);
    crypto_generichash_state h;
    unsigned char d[32];
    crypto_generichash_init(&h, NULL, 0, sizeof d);
    crypto_generichash_update(&h, (const unsigned char *)text, strlen(text));
    crypto_generichash_update(&h, (const unsigned char *)extra, strlen(extra));
    crypto_generichash_final(&h, d, sizeof d);
    free(text);
    sodium_bin2hex(j->est_key, sizeof j->est_key, d, sizeof d);
}

static void last_run(taas_job *j) {
    json_t *all = runs_read();
    const json_t *r = json_object_get(all, j->est_key);
    double step = json_number_value(json_object_get(r, "step_s"));
    double startup = json_number_value(json_object_get(r, "startup_s"));
    double val = json_number_value(json_object_get(r, "val_all_s"));
    long long steps = (long long)json_integer_value(json_object_get(r, "steps"));
    /* the file is the user's to edit or damage: a value out of reason is no estimate */
    if (json_is_object(r) && step > 0 && step < 1e6 && steps > 0 && steps < (1LL << 40) && startup >= 0 &&
        startup < 1e7 && val >= 0 && val < 1e9) {
        j->last_startup = startup;
        j->last_val_s = val;
        j->last_step_s = step;
        j->last_steps = steps;
    }
    json_decref(all);
}

/* The epochs the job validates: those it trains in (--units may end it early). */
static long long epochs_run(const taas_job *j) {
    if (j->steps_per_epoch <= 0 || j->total_steps <= 0) return j->epochs;
    long long e = (j->total_steps + j->steps_per_epoch - 1) / j->steps_per_epoch;
    return e < j->epochs ? e : j->epochs;
}

/* Seconds a step takes now (0: not measured yet): the slower of what the ranks need to
 * compute a step (their time not waiting for data) and what the loaders need to make its W
 * batches, both since the speed's measure began. Neither is fooled by the batches the
 * loaders made before the ranks started, which the ranks take at their own speed for a
 * while; rank 0's speed in the epoch is the fallback while there is no measure. */
static double step_seconds(const taas_job *j) {
    if (j->step_s > 0) return j->step_s;
    if (j->samples_per_s > 0 && j->total_steps > 0 && j->samples_total > 0)
        return ((double)j->samples_total / (double)j->total_steps) / j->samples_per_s;
    return 0;
}

static void measure_speed(taas_job *j, double wait_s) {
    double now = taas_now();
    long long n = j->rank_steps - j->speed_steps;
    if (j->speed_t <= 0 || n < 3 || now <= j->speed_t) return;
    double compute = ((now - j->speed_t) - (wait_s - j->speed_wait)) / (double)n, rate = 0;
    for (int i = 0; i < j->nloaders; i++) {
        const job_loader *l = &j->loaders[i];
        if (l->active && l->speed_up >= 0 && l->up_s > l->speed_up && !strcmp(j->streams[l->stream].role, "train"))
            rate += (double)(l->items - l->speed_items) / (l->up_s - l->speed_up);
    }
    double step = compute > 0 ? compute : 0;
    if (rate > 0 && j->world / rate > step) step = j->world / rate;
    if (step > 0) j->step_s = step;
}

/* The speed is measured anew from the next step line (the pool changed, an epoch began). */
void taas_job_speed_restart(taas_job *j) {
    j->speed_t = 0;
}

static double val_seconds(const taas_job *j) {
    if (j->samples_per_s <= 0 || j->val_samples <= 0) return 0;
    return (double)j->val_samples * EVAL_SHARE / j->samples_per_s;
}

void taas_job_cost_remember(const taas_job *j) {
    /* a step's time from every rank's time in steps and waiting for batches (validation and
     * checkpoints are not in it), else the last speed */
    double step = step_seconds(j);
    const json_t *d = j->done;
    long long steps = (long long)json_integer_value(json_object_get(d, "steps"));
    double in_steps = json_number_value(json_object_get(d, "step_s")) + json_number_value(json_object_get(d, "wait_s"));
    if (steps > 0 && in_steps > 0 && j->world > 0) step = in_steps / j->world / (double)steps;
    char path[PATH_MAX];
    if (!j->offloaded || !j->est_key[0] || step <= 0 || j->first_step_t <= 0 || runs_path(path, sizeof path)) return;
    json_t *all = runs_read();
    json_object_set_new(all, j->est_key,
                        json_pack("{s:f, s:f, s:f, s:I, s:I}", "startup_s", j->first_step_t - j->t0, "step_s", step,
                                  "val_all_s", val_seconds(j) * (double)epochs_run(j), "steps", (json_int_t)j->total_steps, "when",
                                  (json_int_t)time(NULL)));
    while (json_object_size(all) > KEEP_RUNS) {  /* the oldest goes */
        const char *k, *oldest = NULL;
        json_t *v;
        json_int_t t = 0;
        json_object_foreach(all, k, v) {
            json_int_t w = json_integer_value(json_object_get(v, "when"));
            if (!oldest || w < t) {
                oldest = k;
                t = w;
            }
        }
        json_object_del(all, oldest);
    }
    char *text = json_dumps(all, JSON_COMPACT);
    json_decref(all);
    if (text) taas_write_file_atomic(path, text, strlen(text));  /* an estimate lost is no harm */
    free(text);
}

/* ---- the plan ------------------------------------------------------------------------ */

/* The budget as the cell wrote it ("2.50", "1.5h"): a rounding of it (0.000001s as 1 s,
 * 2^53 as 9.0072e+15) would say another budget than the one that stops the job. */
static void budget_value(const taas_job *j, taas_buf *b) {
    taas_buf_puts(b, j->budget_text);
}

/* The cost of a duration at the present rate, or its machine-hours without prices. */
static void cost_of(const taas_job *j, double secs, taas_buf *b) {
    double r = rate(j);
    if (r >= 0) {
        taas_buf_puts(b, "cost ");
        amount(b, r * secs / 3600);
        return;
    }
    taas_buf_printf(b, "%.2f machine-hours", (j->rank_machines + loader_count(j)) * secs / 3600);
}

static void price_words(const taas_job *j, const taas_pragma *pr, const char *loaders_cfg, taas_buf *b) {
    if (rate(j) < 0) {
        taas_buf_puts(b, "no prices (price_per_hour in the configuration file): the size in machine-hours");
        return;
    }
    taas_buf_puts(b, "at your prices: ");
    if (j->price_ranks >= 0) {
        taas_buf_printf(b, "%d \xC3\x97 %s ", j->rank_machines, pr->config.name);
        amount(b, j->price_ranks);
        taas_buf_puts(b, "/h");
    }
    if (j->price_loader >= 0 && loader_count(j) > 0) {
        taas_buf_printf(b, "%s%d%s \xC3\x97 %s ", j->price_ranks >= 0 ? " + " : "", loader_count(j),
                        j->autosize ? " or more" : "", loaders_cfg);
        amount(b, j->price_loader);
        taas_buf_puts(b, "/h");
    }
    if (j->price_ranks < 0) taas_buf_puts(b, " (the ranks' machines have no price)");
    else if (j->price_loader < 0 && loader_count(j) > 0) taas_buf_printf(b, " (%s has no price)", loaders_cfg);
}

int taas_job_cost_plan(taas_job *j, const taas_job_cfg *cfg, taas_buf *line, taas_error *err) {
    const taas_pragma *pr = cfg->pragma;
    j->price_ranks = j->price_loader = -1;
    j->rank_machines = pr->machines;
    if (pr->has_config) j->price_ranks = pr->config.price_per_hour;
    /* the loaders' configuration: the file is read only when the cell or the cluster section
     * reads it already (a cell without either never reads it: docs/pragma.md) */
    const char *loaders = j->cluster.loaders[0] ? j->cluster.loaders : "c1.4";
    taas_machine_config lc;
    if (j->nstreams > 0 && (pr->has_config || j->cluster.path[0])) {
        if (taas_config_find(loaders, &lc, err)) return -1;
        j->price_loader = lc.price_per_hour;
    }
    j->budget_kind = pr->budget_kind;
    j->budget = pr->budget;
    snprintf(j->budget_text, sizeof j->budget_text, "%s", pr->budget_text);
    if (j->budget_kind == TAAS_BUDGET_MONEY && rate(j) < 0) {
        taas_error_set(err, TAAS_ERR_PRAGMA, (taas_srcpos){pr->line, 1}, "--budget %s is an amount of money, but no "
                       "machine of this job has a price", pr->budget_text);
        taas_error_hint(err, "give the ranks' configuration (#!NAME) or the loaders' (%s) a \"price_per_hour\" in the "
                        "configuration file (docs/pragma.md), or give the budget as a time, e.g. --budget 2h", loaders);
        return -1;
    }
    if (j->evaluate) return 0;
    cell_key(j, pr);
    last_run(j);
    taas_buf_puts(line, "cost: ");
    if (j->last_step_s > 0) {
        double est = j->last_startup + (double)j->last_steps * j->last_step_s + j->last_val_s;
        taas_buf_puts(line, "about ");
        taas_buf_duration(line, est, 0);
        taas_buf_puts(line, ", ");
        cost_of(j, est, line);
        taas_buf_puts(line, " (from the last run of this cell); ");
    } else {
        taas_buf_puts(line, "estimated after the first steps (no earlier run of this cell); ");
    }
    price_words(j, pr, loaders, line);
    if (j->budget_kind) {
        taas_buf_puts(line, "; budget ");
        budget_value(j, line);
    }
    taas_buf_puts(line, "\n");
    return 0;
}

/* ---- while it runs ------------------------------------------------------------------- */

void taas_job_cost_start(taas_job *j, const json_t *start) {
    j->total_steps = (long long)json_integer_value(json_object_get(start, "total_steps"));
    j->samples_total = (long long)json_integer_value(json_object_get(start, "samples"));
    j->val_samples = (long long)json_integer_value(json_object_get(start, "val_samples"));
}

/* The job's whole length, from what it has done and how fast it goes now. */
static void estimate(taas_job *j) {
    double step = step_seconds(j);
    if (step <= 0 || j->rank_steps < 0) return;
    double now = taas_now() - j->t0;
    long long left = j->total_steps - j->rank_steps;
    long long vals = epochs_run(j) - (j->epoch > 0 ? j->epoch - 1 : 0);  /* this epoch's validation is still due */
    if (left < 0) left = 0;
    if (vals < 0) vals = 0;
    j->est_total = now + (double)left * step + (double)vals * val_seconds(j);
}

void taas_job_cost_step(taas_job *j, long long steps, double wait_s) {
    if (j->first_step_t <= 0) {
        j->first_step_t = taas_now();
        j->first_steps = steps;
    }
    j->rank_steps = steps;
    if (j->speed_t <= 0) {
        j->speed_t = taas_now();
        j->speed_steps = steps;
        j->speed_wait = wait_s;
        for (int i = 0; i < j->nloaders; i++) j->loaders[i].speed_up = -1;
    }
    measure_speed(j, wait_s);
    estimate(j);
}

int taas_job_cost_tick(taas_job *j) {
    double now = taas_now();
    if (j->launched_t <= 0) return 0;  /* queued: no machine is held yet */
    if (j->cost_t <= 0) j->cost_t = j->launched_t;
    double dt = now - j->cost_t, r = rate(j);
    if (dt > 0) {
        j->cost_t = now;
        j->rank_mh += j->rank_machines * dt / 3600;
        j->loader_mh += loader_count(j) * dt / 3600;
        if (r > 0) j->spent += r * dt / 3600;
    }
    if (!j->budget_kind || j->budget_hit || j->evaluate) return 0;
    /* stopped before the next step would go past it */
    double step = step_seconds(j), elapsed = now - j->launched_t, used, next;
    taas_buf what = TAAS_BUF_INIT;
    if (j->budget_kind == TAAS_BUDGET_TIME) {
        used = elapsed;
        next = elapsed + step;
    } else {
        used = j->spent;
        next = j->spent + (r > 0 ? r * step / 3600 : 0);
    }
    if (next < j->budget) {
        taas_buf_free(&what);
        return 0;
    }
    taas_buf_puts(&what, "the budget (--budget ");
    budget_value(j, &what);
    if (j->budget_kind == TAAS_BUDGET_TIME) {
        taas_buf_puts(&what, ") is used up after ");
        taas_buf_duration(&what, used, 0);
    } else {
        taas_buf_puts(&what, ") is used up: ");
        amount(&what, used);
        taas_buf_puts(&what, " spent");
    }
    if (j->epoch > 0) {
        taas_buf_printf(&what, ", at epoch %lld step %lld", j->epoch, j->step);
        if (j->total_steps > 0)
            taas_buf_printf(&what, " (%.0f%% of the job)", 100.0 * (double)j->rank_steps / (double)j->total_steps);
    }
    snprintf(j->budget_why, sizeof j->budget_why, "%s", what.data);
    taas_buf_free(&what);
    return 1;
}

double taas_job_cost_due(const taas_job *j) {
    if (!j->budget_kind || j->budget_hit || j->evaluate || j->launched_t <= 0) return 1e300;
    double step = step_seconds(j);
    if (j->budget_kind == TAAS_BUDGET_TIME) return j->launched_t + j->budget - step;
    double r = rate(j);
    if (r <= 0) return 1e300;
    return j->cost_t + (j->budget - j->spent) * 3600 / r - step;
}

void taas_job_cost_status(const taas_job *j, taas_buf *t) {
    if (j->est_total <= 0) return;
    taas_buf_puts(t, "  est. ");
    taas_buf_duration(t, j->est_total, 0);
    taas_buf_puts(t, " in all, ");
    double r = rate(j);
    if (r >= 0) {
        taas_buf_puts(t, "cost ");
        amount(t, j->spent + r * fmax(0, j->est_total - (taas_now() - j->t0)) / 3600);
    } else {
        double left = fmax(0, j->est_total - (taas_now() - j->t0));
        taas_buf_printf(t, "%.2f machine-hours", j->rank_mh + j->loader_mh + (j->rank_machines + loader_count(j)) * left / 3600);
    }
    if (j->budget_kind) {
        taas_buf_puts(t, " (budget ");
        budget_value(j, t);
        taas_buf_puts(t, ")");
    }
}

void taas_job_cost_summary(const taas_job *j, taas_buf *t) {
    if (rate(j) >= 0) {
        taas_buf_puts(t, "; cost ");
        amount(t, j->spent);
    }
    taas_buf_puts(t, "; ");
    hours(t, j->rank_mh);
    taas_buf_puts(t, " machine-hours of the ranks' machines, ");
    hours(t, j->loader_mh);
    taas_buf_puts(t, " of loader machines");
}
