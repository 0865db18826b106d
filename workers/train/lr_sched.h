/* Learning-rate schedulers: the lr PyTorch 1.13's get_last_lr() returns after each
 * scheduler.step(), including its recursive (chainable) forms, whose numbers differ slightly
 * from the closed forms (CosineAnnealingLR most visibly).
 *
 * Use: taas_sched_init() once (lr is then the lr before any step, what the optimizer starts
 * with), taas_sched_step() after each optimizer step (per epoch for StepLR, MultiStepLR,
 * ExponentialLR and CosineAnnealingLR as usually used, per batch for OneCycleLR, and per
 * whichever the fit says for the warmup recipes: LinearLR, then another in SequentialLR).
 *
 * SequentialLR: torch's own construction order (its schedulers' initial steps undone, the
 * first's taken again) and step (the scheduler whose milestone is reached starts with
 * step(0), its closed form at 0; the others step chainably from the optimizer's lr, which
 * they share). OneCycleLR and SequentialLR cannot be inside one (OneCycleLR rewrites the
 * initial lr that SequentialLR resets to).
 *
 * OneCycleLR: anneal_strategy 'cos', three_phase False, div_factor and final_div_factor
 * as given (defaults 25 and 1e4); with cycle_momentum, `momentum` follows max_momentum ->
 * base_momentum -> max_momentum (SGD's momentum or Adam's beta1, whichever the optimizer
 * has). Not supported: 'linear' annealing, three_phase, per-group lrs, epochs+steps_per_epoch
 * (pass total_steps = epochs * steps_per_epoch). */
/* (Named lr_sched.h: a sched.h here would shadow the system <sched.h> that cblas.h
 * includes, since this directory is on the include path.) */
#ifndef TAAS_LR_SCHED_H
#define TAAS_LR_SCHED_H

#include "error.h"

#define TAAS_SCHED_MAX_MILESTONES 64

typedef enum taas_sched_kind {
    TAAS_SCHED_STEP,
    TAAS_SCHED_MULTISTEP,
    TAAS_SCHED_EXPONENTIAL,
    TAAS_SCHED_COSINE,
    TAAS_SCHED_ONECYCLE,
    TAAS_SCHED_LINEAR,
} taas_sched_kind;

/* SequentialLR's schedulers, at most */
#define TAAS_SCHED_MAX_PARTS 8

typedef struct taas_sched_config {
    taas_sched_kind kind;
    double base_lr;          /* the optimizer's lr (unused by OneCycleLR) */
    double gamma;            /* StepLR (default 0.1), MultiStepLR (0.1), ExponentialLR */
    long step_size;          /* StepLR */
    long milestones[TAAS_SCHED_MAX_MILESTONES];  /* MultiStepLR; a repeated one multiplies twice */
    int n_milestones;
    long t_max;              /* CosineAnnealingLR */
    double eta_min;          /* CosineAnnealingLR (default 0) */
    double max_lr;           /* OneCycleLR */
    long total_steps;        /* OneCycleLR */
    double pct_start;        /* OneCycleLR (default 0.3) */
    double div_factor;       /* OneCycleLR (default 25) */
    double final_div_factor; /* OneCycleLR (default 1e4) */
    int cycle_momentum;      /* OneCycleLR (default 1) */
    double base_momentum;    /* OneCycleLR (default 0.85) */
    double max_momentum;     /* OneCycleLR (default 0.95) */
    double start_factor;     /* LinearLR (default 1/3) */
    double end_factor;       /* LinearLR (default 1) */
    long total_iters;        /* LinearLR (default 5) */
} taas_sched_config;

typedef struct taas_sched {
    taas_sched_config part[TAAS_SCHED_MAX_PARTS];  /* the scheduler, or SequentialLR's */
    long milestones[TAAS_SCHED_MAX_PARTS - 1];     /* SequentialLR's, increasing */
    int nparts;        /* 1, or SequentialLR's count */
    long last_epoch;   /* how many steps were taken */
    double lr;         /* get_last_lr()[0] */
    double momentum;   /* OneCycleLR with cycle_momentum: the momentum (or beta1) to use now */
} taas_sched;

/* PyTorch's defaults for that scheduler; the required arguments (step_size, milestones,
 * gamma for ExponentialLR, t_max, max_lr, total_steps) are left 0 for the caller. */
void taas_sched_config_default(taas_sched_config *cfg, taas_sched_kind kind);
/* Checks the config (a TaasValueError naming the argument otherwise) and sets the lr the
 * optimizer starts with. */
int taas_sched_init(taas_sched *s, const taas_sched_config *cfg, taas_error *err);
/* SequentialLR(schedulers=parts[0..n), milestones): n - 1 increasing milestones >= 1, the
 * parts neither OneCycleLR nor with another base_lr. */
int taas_sched_init_sequential(taas_sched *s, const taas_sched_config *parts, int n, const long *milestones,
                               taas_error *err);
/* OneCycleLR with cycle_momentum: the optimizer's momentum (or beta1) follows s->momentum. */
int taas_sched_cycles_momentum(const taas_sched *s);
/* One scheduler.step(). OneCycleLR stepped more than total_steps times is a TaasValueError,
 * as in torch. */
int taas_sched_step(taas_sched *s, taas_error *err);

#endif
