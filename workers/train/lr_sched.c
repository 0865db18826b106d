/* The schedulers' lr as torch 1.13 computes it: chainable rules applied to the previous lr
 * (StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR), OneCycleLR's closed
 * form, and SequentialLR's hand-over between them, all in double as Python does. */
#include "lr_sched.h"
#include "errnames.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void taas_sched_config_default(taas_sched_config *cfg, taas_sched_kind kind) {
    *cfg = (taas_sched_config){.kind = kind, .gamma = 0.1, .pct_start = 0.3, .div_factor = 25.0,
                               .final_div_factor = 1e4, .cycle_momentum = 1,
                               .base_momentum = 0.85, .max_momentum = 0.95};
    if (kind == TAAS_SCHED_EXPONENTIAL) cfg->gamma = 0.0;
    cfg->start_factor = 1.0 / 3;
    cfg->end_factor = 1.0;
    cfg->total_iters = 5;
}

static int bad(taas_error *err, const char *sched, const char *arg, const char *got,
               const char *hint) {
    taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0}, "%s: %s %s", sched, arg, got);
    taas_error_hint(err, "%s", hint);
    return -1;
}

static int check(const taas_sched_config *c, taas_error *err) {
    char got[64];
    switch (c->kind) {
    case TAAS_SCHED_STEP:
        snprintf(got, sizeof got, "must be >= 1 (got %ld)", c->step_size);
        if (c->step_size < 1) return bad(err, "StepLR", "step_size", got, "step_size is the number of epochs between decays, e.g. step_size=10");
        break;
    case TAAS_SCHED_MULTISTEP:
        snprintf(got, sizeof got, "count must be 1..%d (got %d)", TAAS_SCHED_MAX_MILESTONES, c->n_milestones);
        if (c->n_milestones < 1 || c->n_milestones > TAAS_SCHED_MAX_MILESTONES)
            return bad(err, "MultiStepLR", "milestones", got, "give the epochs at which to decay, e.g. milestones=[30, 80]");
        for (int i = 0; i < c->n_milestones; i++) {
            snprintf(got, sizeof got, "must be >= 1 (milestone %d is %ld)", i, c->milestones[i]);
            if (c->milestones[i] < 1) return bad(err, "MultiStepLR", "milestones", got, "milestones are epoch numbers counted from 1");
        }
        break;
    case TAAS_SCHED_EXPONENTIAL:
        snprintf(got, sizeof got, "must be > 0 (got %g)", c->gamma);
        if (!(c->gamma > 0.0)) return bad(err, "ExponentialLR", "gamma", got, "gamma multiplies the lr each epoch, e.g. gamma=0.95");
        break;
    case TAAS_SCHED_COSINE:
        snprintf(got, sizeof got, "must be >= 1 (got %ld)", c->t_max);
        if (c->t_max < 1) return bad(err, "CosineAnnealingLR", "T_max", got, "T_max is the number of steps of half a cosine period, e.g. the number of epochs");
        break;
    case TAAS_SCHED_ONECYCLE:
        snprintf(got, sizeof got, "must be >= 1 (got %ld)", c->total_steps);
        if (c->total_steps < 1) return bad(err, "OneCycleLR", "total_steps", got, "pass epochs * batches per epoch");
        snprintf(got, sizeof got, "must be in [0, 1] (got %g)", c->pct_start);
        if (!(c->pct_start >= 0.0 && c->pct_start <= 1.0)) return bad(err, "OneCycleLR", "pct_start", got, "pct_start is the fraction of steps spent raising the lr, e.g. 0.3");
        snprintf(got, sizeof got, "must be > 0 (got %g)", c->max_lr);
        if (!(c->max_lr > 0.0)) return bad(err, "OneCycleLR", "max_lr", got, "max_lr is the peak learning rate, e.g. max_lr=0.1");
        snprintf(got, sizeof got, "must be > 0 (got %g and %g)", c->div_factor, c->final_div_factor);
        if (!(c->div_factor > 0.0 && c->final_div_factor > 0.0)) return bad(err, "OneCycleLR", "div_factor and final_div_factor", got, "the defaults are 25 and 1e4");
        break;
    case TAAS_SCHED_LINEAR:
        /* torch 1.13 takes 0, then divides by it at the first step */
        snprintf(got, sizeof got, "must be in (0, 1] (got %g)", c->start_factor);
        if (!(c->start_factor > 0.0 && c->start_factor <= 1.0)) return bad(err, "LinearLR", "start_factor", got, "warm up from a small positive factor, e.g. start_factor=0.01");
        snprintf(got, sizeof got, "must be in [0, 1] (got %g)", c->end_factor);
        if (!(c->end_factor >= 0.0 && c->end_factor <= 1.0)) return bad(err, "LinearLR", "end_factor", got, "end_factor=1.0 ends at the optimizer's lr");
        snprintf(got, sizeof got, "must be >= 1 (got %ld)", c->total_iters);
        if (c->total_iters < 1) return bad(err, "LinearLR", "total_iters", got, "total_iters is the number of steps the change takes, e.g. the warmup's");
        break;
    }
    return 0;
}

static double anneal_cos(double start, double end, double pct) {
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1.0);
}

/* OneCycleLR.get_lr() at step t, two phases: up to max_lr, then down to min_lr. */
static void onecycle_at(taas_sched *s, const taas_sched_config *c, long t) {
    double initial = c->max_lr / c->div_factor, min_lr = initial / c->final_div_factor;
    double end1 = c->pct_start * (double)c->total_steps - 1.0, end2 = (double)c->total_steps - 1.0;
    double pct;
    if ((double)t <= end1) {
        pct = (double)t / end1;  /* t = 0, end1 = 0 gives nan, as in torch */
        s->lr = anneal_cos(initial, c->max_lr, pct);
        s->momentum = anneal_cos(c->max_momentum, c->base_momentum, pct);
    } else {
        pct = ((double)t - end1) / (end2 - end1);
        s->lr = anneal_cos(c->max_lr, min_lr, pct);
        s->momentum = anneal_cos(c->base_momentum, c->max_momentum, pct);
    }
    if (!c->cycle_momentum) s->momentum = 0.0;
}

/* The scheduler's first get_lr() (its initial step), on the optimizer's lr base_lr. */
static void first_lr(taas_sched *s, const taas_sched_config *c) {
    s->lr = c->base_lr;
    s->momentum = 0.0;
    if (c->kind == TAAS_SCHED_ONECYCLE) onecycle_at(s, c, 0);
    if (c->kind == TAAS_SCHED_LINEAR) s->lr = c->base_lr * c->start_factor;
}

/* step(0), SequentialLR's start of a later scheduler: its _get_closed_form_lr() at 0. */
static void closed_form_at_0(taas_sched *s, const taas_sched_config *c) {
    if (c->kind == TAAS_SCHED_COSINE)
        s->lr = c->eta_min + (c->base_lr - c->eta_min) * (1.0 + cos(M_PI * 0.0 / (double)c->t_max)) / 2.0;
    else if (c->kind == TAAS_SCHED_LINEAR)
        s->lr = c->base_lr * (c->start_factor + (c->end_factor - c->start_factor) * 0.0 / (double)c->total_iters);
    else
        first_lr(s, c);
}

int taas_sched_init(taas_sched *s, const taas_sched_config *cfg, taas_error *err) {
    return taas_sched_init_sequential(s, cfg, 1, NULL, err);
}

int taas_sched_init_sequential(taas_sched *s, const taas_sched_config *parts, int n, const long *milestones,
                               taas_error *err) {
    char got[96];
    snprintf(got, sizeof got, "count must be 1..%d (got %d)", TAAS_SCHED_MAX_PARTS, n);
    if (n < 1 || n > TAAS_SCHED_MAX_PARTS) return bad(err, "SequentialLR", "schedulers", got, "give a warmup and a decay, e.g. schedulers=[LinearLR(...), CosineAnnealingLR(...)]");
    for (int i = 0; i < n; i++) {
        if (check(&parts[i], err) != 0) return -1;
        snprintf(got, sizeof got, "cannot hold OneCycleLR (scheduler %d)", i);
        if (n > 1 && parts[i].kind == TAAS_SCHED_ONECYCLE) return bad(err, "SequentialLR", "schedulers", got, "OneCycleLR is a whole schedule of its own: give it to fit() alone");
        snprintf(got, sizeof got, "must all start from one lr (scheduler %d: %g, not %g)", i, parts[i].base_lr, parts[0].base_lr);
        if (parts[i].base_lr != parts[0].base_lr) return bad(err, "SequentialLR", "schedulers", got, "they share the optimizer's lr");
        if (i == 0) continue;
        snprintf(got, sizeof got, "must increase from 1 (milestone %d is %ld)", i - 1, milestones[i - 1]);
        if (milestones[i - 1] < (i > 1 ? milestones[i - 2] + 1 : 1)) return bad(err, "SequentialLR", "milestones", got, "give the step at which each next scheduler takes over, e.g. milestones=[100]");
    }
    memset(s, 0, sizeof *s);
    for (int i = 0; i < n; i++) s->part[i] = parts[i];
    for (int i = 0; i + 1 < n; i++) s->milestones[i] = milestones[i];
    s->nparts = n;
    first_lr(s, &parts[0]);
    return 0;
}

int taas_sched_cycles_momentum(const taas_sched *s) {
    return s->nparts == 1 && s->part[0].kind == TAAS_SCHED_ONECYCLE && s->part[0].cycle_momentum;
}

static long py_mod(long a, long m) {
    long r = a % m;
    return r < 0 ? r + m : r;
}

/* One chainable step of scheduler c to its epoch e >= 1, from the optimizer's lr s->lr. */
static int part_step(taas_sched *s, const taas_sched_config *c, long e, taas_error *err) {
    switch (c->kind) {
    case TAAS_SCHED_STEP:
        if (e % c->step_size == 0) s->lr *= c->gamma;
        break;
    case TAAS_SCHED_MULTISTEP: {
        int count = 0;
        for (int i = 0; i < c->n_milestones; i++) count += c->milestones[i] == e;
        if (count) s->lr *= pow(c->gamma, count);
        break;
    }
    case TAAS_SCHED_EXPONENTIAL: s->lr *= c->gamma; break;
    case TAAS_SCHED_COSINE: {
        double tm = (double)c->t_max, base = c->base_lr, eta = c->eta_min;
        if (py_mod(e - 1 - c->t_max, 2 * c->t_max) == 0)
            s->lr = s->lr + (base - eta) * (1.0 - cos(M_PI / tm)) / 2.0;
        else
            s->lr = (1.0 + cos(M_PI * (double)e / tm)) / (1.0 + cos(M_PI * (double)(e - 1) / tm)) *
                        (s->lr - eta) + eta;
        break;
    }
    case TAAS_SCHED_LINEAR:
        if (e <= c->total_iters)
            s->lr *= 1.0 + (c->end_factor - c->start_factor) /
                               ((double)c->total_iters * c->start_factor + (double)(e - 1) * (c->end_factor - c->start_factor));
        break;
    case TAAS_SCHED_ONECYCLE:
        if (e > c->total_steps) {
            s->last_epoch--;
            taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0},
                           "OneCycleLR: tried to step %ld times; total_steps is %ld", e, c->total_steps);
            taas_error_hint(err, "total_steps must cover every batch of every epoch: pass "
                                 "epochs * batches per epoch");
            return -1;
        }
        onecycle_at(s, c, e);
        break;
    }
    return 0;
}

int taas_sched_step(taas_sched *s, taas_error *err) {
    long e = ++s->last_epoch;
    int i = 0;  /* bisect_right(milestones, e) */
    while (i + 1 < s->nparts && s->milestones[i] <= e) i++;
    long from = i ? s->milestones[i - 1] : 0;
    if (i > 0 && e == from) {
        closed_form_at_0(s, &s->part[i]);
        return 0;
    }
    return part_step(s, &s->part[i], e - from, err);
}
