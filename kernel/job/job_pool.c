/* The loader pool that sizes itself (--cpus auto): windows of rank 0's steps, the share of
 * their time the ranks waited for data in each, and how busy the loaders were, decide the
 * pool's size; job.c's resize_pool carries it out at the step the ranks have reached, which
 * keeps every item trained exactly once (docs/offload.md, "A pool that sizes itself"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "job_priv.h"

/* Below this wait the pool may be larger than it needs; above TAAS_POOL_WAIT_MAX, smaller. */
#define WAIT_LOW 0.005
/* A smaller pool must stay this busy at most, so that a burst does not make the ranks wait. */
#define BUSY_AFTER 0.8
/* A new pool's first steps and seconds, which are not its measure. */
#define SETTLE_STEPS 2
#define SETTLE_S 0.5
/* A growth must make the ranks this much faster to be kept. */
#define GAIN_MIN 1.05

int taas_pool_decide(const taas_pool_window *w, int *why) {
    *why = TAAS_POOL_STAYS;
    int pool = w->pool < 1 ? 1 : w->pool;
    /* the first window after a growth: loaders that did not make the ranks faster are not
     * the bottleneck (the storage, the network or the machine's cores are): back to before */
    if (w->grown_from > 0 && w->grown_from < pool && w->rate < w->rate_before * GAIN_MIN) {
        *why = TAAS_POOL_NO_GAIN;
        return w->grown_from;
    }
    int limit = w->ceiling > 0 && w->ceiling < w->max ? w->ceiling : w->max;
    if (w->wait > TAAS_POOL_WAIT_MAX && pool < limit) {
        /* loaders that make a share 1 - wait of what the ranks take: pool / (1 - wait) of them
         * would make all of it (a wait of 90 % or more says no more than that), at most four
         * times as many at once, since more loaders may not be all the ranks lack (the next
         * window sees whether they were) */
        double wt = w->wait < 0.9 ? w->wait : 0.9;
        int to = (int)ceil(pool / (1.0 - wt) - 1e-9);
        if (to > 4 * pool) to = 4 * pool;
        if (to < pool + 1) to = pool + 1;
        *why = TAAS_POOL_GROWS;
        return to > limit ? limit : to;
    }
    if (w->wait <= WAIT_LOW && pool > 1 && w->busy >= 0 && w->busy < BUSY_AFTER) {
        int to = (int)ceil(pool * w->busy / BUSY_AFTER - 1e-9);
        if (to < w->floor) to = w->floor;
        if (to < 1) to = 1;
        if (to < pool) {
            *why = TAAS_POOL_SHRINKS;
            return to;
        }
    }
    return pool;
}

void taas_job_pool_load(taas_job *j, job_loader *l, const json_t *b) {
    (void)j;
    double up = json_number_value(json_object_get(b, "up_s")), idle = json_number_value(json_object_get(b, "idle_s"));
    long long items = (long long)json_integer_value(json_object_get(b, "items"));
    if (up >= l->up_s && idle >= 0 && idle <= up && items >= l->items) {
        l->up_s = up;
        l->idle_s = idle;
        l->items = items;
        if (l->speed_up < 0) {  /* its first word since the speed's measure began */
            l->speed_up = up;
            l->speed_items = l->items;
        }
    }
}

/* Opens a window now, from rank 0's figures. */
static void open_window(taas_job *j, double wait_s, long long steps) {
    j->win_t = taas_now();
    j->win_wait = wait_s;
    j->win_steps = steps;
    for (int i = 0; i < j->nloaders; i++) {
        j->loaders[i].win_up = j->loaders[i].up_s;
        j->loaders[i].win_idle = j->loaders[i].idle_s;
    }
}

/* The share of their time the active loaders were busy in the window; -1 when none said. */
static double busy_share(const taas_job *j) {
    double up = 0, idle = 0;
    for (int i = 0; i < j->nloaders; i++) {
        const job_loader *l = &j->loaders[i];
        if (!l->active || l->up_s <= l->win_up) continue;
        up += l->up_s - l->win_up;
        idle += l->idle_s - l->win_idle;
    }
    if (up <= 0) return -1;
    double b = 1.0 - idle / up;
    return b < 0 ? 0 : b > 1 ? 1 : b;
}

int taas_job_pool_step(taas_job *j, double wait_s, long long steps, char *why, size_t n) {
    j->rank_wait_s = wait_s;
    j->rank_steps = steps;
    if (!j->autosize || j->failed || j->stopping || j->budget_hit || j->resuming || j->nready < j->world) {
        j->win_steps = -1;
        return j->pool;
    }
    /* a window opens once every loader of the pool runs: a new pool's start is not its measure */
    for (int i = 0; i < j->nloaders; i++)
        if (j->loaders[i].active && (!j->loaders[i].started || !j->loaders[i].alive)) {
            j->win_steps = -1;
            return j->pool;
        }
    if (j->win_steps < 0 || steps < j->win_steps) {
        open_window(j, wait_s, steps);
        return j->pool;
    }
    double dt = taas_now() - j->win_t;
    long long dsteps = steps - j->win_steps;
    if (j->settling && dsteps >= SETTLE_STEPS && dt >= SETTLE_S) {
        j->settling = 0;
        open_window(j, wait_s, steps);
        return j->pool;
    }
    if (j->settling || dsteps < TAAS_POOL_WINDOW_STEPS || dt < TAAS_POOL_WINDOW_S) return j->pool;
    double wait = (wait_s - j->win_wait) / dt;
    wait = wait < 0 ? 0 : wait > 1 ? 1 : wait;
    taas_pool_window w = {.pool = j->pool, .max = j->cpus, .floor = j->pool_floor, .ceiling = j->pool_ceiling,
                          .grown_from = j->grown_from, .rate_before = j->rate_before, .wait = wait,
                          .busy = busy_share(j), .rate = (double)dsteps / dt};
    int why_code, to = taas_pool_decide(&w, &why_code);
    j->grown_from = 0;
    if (why_code == TAAS_POOL_GROWS) {
        if (j->pool + 1 > j->pool_floor) j->pool_floor = j->pool + 1;  /* this size was not enough */
        j->grown_from = j->pool;
        j->rate_before = w.rate;
        snprintf(why, n, "the ranks waited for data %.0f%% of the time over the last %lld steps", wait * 100, dsteps);
    } else if (why_code == TAAS_POOL_NO_GAIN) {
        j->pool_ceiling = to;
        if (j->pool_floor > to) j->pool_floor = to;
        snprintf(why, n, "%d loaders made the ranks no faster than %d (%.1f against %.1f steps/s): the data's "
                 "source or this machine's cores hold them back", j->pool, to, w.rate, j->rate_before);
    } else if (why_code == TAAS_POOL_SHRINKS) {
        snprintf(why, n, "the ranks waited %.1f%% and the loaders were busy %.0f%% of the time over the last %lld "
                 "steps", wait * 100, w.busy * 100, dsteps);
    }
    open_window(j, wait_s, steps);
    if (to != j->pool) {  /* the next window opens when the new pool runs, and settles first */
        j->win_steps = -1;
        j->settling = 1;
    }
    return to;
}

json_t *taas_job_pool_of_epoch(const taas_job *j, long long e) {
    int first = -1, size = 0;
    size_t i;
    const json_t *c;
    /* the size at the epoch's start: the first change's "from", or the last before it */
    json_array_foreach(j->pool_log, i, c) {
        if (json_integer_value(json_object_get(c, "epoch")) >= e) break;
        first = (int)json_integer_value(json_object_get(c, "to"));
    }
    if (first < 0) {
        const json_t *c0 = json_array_get(j->pool_log, 0);
        first = c0 ? (int)json_integer_value(json_object_get(c0, "from")) : j->pool;
    }
    char text[256];
    int len = snprintf(text, sizeof text, "%d", first);
    size = first;
    json_array_foreach(j->pool_log, i, c) {
        if (json_integer_value(json_object_get(c, "epoch")) != e) continue;
        size = (int)json_integer_value(json_object_get(c, "to"));
        if (len > 0 && (size_t)len < sizeof text - 16)
            len += snprintf(text + len, sizeof text - (size_t)len, "\xE2\x86\x92%d", size);
    }
    return size == first && !strstr(text, "\xE2\x86\x92") ? json_integer(first) : json_string(text);
}
