/* Rows of losses, optimizers and learning-rate schedulers. Optimizers and schedulers
 * have no params/optimizer argument: fit() supplies it (docs/design.md §1). PyTorch prints
 * neither usefully, so taas prints them as a call with every setting; a loss prints as
 * PyTorch prints it ("NLLLoss()") plus whatever differs from the defaults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "errnames.h"
#include "rows.h"

#define END {0}

/* ---- losses ---------------------------------------------------------------------- */

#define IGNORE_INDEX                                                                      \
    {"ignore_index", TAAS_P_INT, "-100", TAAS_PF_KWONLY | TAAS_PF_SHOW_SET, TAAS_NO_RANGE, \
     "samples with this target do not count"}
#define REDUCTION                                                                         \
    {"reduction", TAAS_P_STR, "'mean'", TAAS_PF_KWONLY | TAAS_PF_SHOW_SET | TAAS_PX(TAAS_PX_REDUCTION), \
     TAAS_NO_RANGE, "how the per-sample losses combine"}

static const taas_param NLL_P[] = {IGNORE_INDEX, REDUCTION, END};

static const taas_param CROSS_ENTROPY_P[] = {
    IGNORE_INDEX,
    REDUCTION,
    {"label_smoothing", TAAS_P_FLOAT, "0.0", TAAS_PF_KWONLY | TAAS_PF_SHOW_SET, TAAS_BETWEEN(0, 1),
     "mixes the one-hot target with the uniform distribution by this much"},
    END,
};

static const taas_param MSE_P[] = {REDUCTION, END};

/* ---- optimizers ------------------------------------------------------------------ */

#define LR(d) {"lr", TAAS_P_FLOAT, d, 0, TAAS_AT_LEAST(0), "learning rate"}
#define WEIGHT_DECAY(d) {"weight_decay", TAAS_P_FLOAT, d, 0, TAAS_AT_LEAST(0), "L2 penalty"}
#define EPS(d) {"eps", TAAS_P_FLOAT, d, 0, TAAS_AT_LEAST(0), "added to the denominator for numerical stability"}

static const taas_param SGD_P[] = {
    LR("0.001"),
    {"momentum", TAAS_P_FLOAT, "0", 0, TAAS_AT_LEAST(0), "momentum factor"},
    {"dampening", TAAS_P_FLOAT, "0", 0, TAAS_AT_LEAST(0), "dampening for momentum"},
    WEIGHT_DECAY("0"),
    {"nesterov", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "Nesterov momentum (needs momentum > 0 and dampening 0)"},
    END,
};

static int sgd_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (a[4]->u.b && (taas_value_number(a[1]) <= 0 || taas_value_number(a[2]) != 0)) {
        taas_error_set(err, TAAS_ERR_VALUE, w[4], "SGD() nesterov=True requires a momentum and zero dampening");
        taas_sig_hint(err, &r->b, "give momentum=0.9 (for example) and leave dampening=0");
        return -1;
    }
    return 0;
}

#define ADAM_P(wd)                                                                               \
    {LR("0.001"),                                                                                \
     {"betas", TAAS_P_FLOAT_PAIR, "(0.9, 0.999)", 0, TAAS_BETWEEN(0, 1),                         \
      "decay rates of the running averages of the gradient and its square, each below 1"},       \
     EPS("1e-08"), WEIGHT_DECAY(wd),                                                             \
     {"amsgrad", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "use the AMSGrad variant"},             \
     {"param_groups", TAAS_P_STR, "None", TAAS_PF_NONE_OK | TAAS_PF_KWONLY | TAAS_PF_SHOW_SET |  \
      TAAS_PX(TAAS_PX_PARAM_GROUPS), TAAS_NO_RANGE,                                              \
      "None: one group, every parameter decayed (torch's model.parameters()); 'nanogpt': "       \
      "weight_decay on the matrix products' weights only, none on biases, norms and embeddings"}, END}

static const taas_param ADAM_PARAMS[] = ADAM_P("0");
static const taas_param ADAMW_PARAMS[] = ADAM_P("0.01");

static int adam_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    for (size_t i = 0; i < 2; i++) {
        double b = taas_value_number(a[1]->u.seq.items[i]);
        if (b >= 1) {
            char num[64];
            taas_float_repr(b, num, sizeof num);
            taas_error_set(err, TAAS_ERR_VALUE, w[1], "%s() betas[%zu] must be below 1, got %s", r->b.name, i, num);
            taas_sig_hint(err, &r->b, "the defaults are betas=(0.9, 0.999)");
            return -1;
        }
    }
    return 0;
}

static const taas_param ADADELTA_P[] = {
    LR("1.0"),
    {"rho", TAAS_P_FLOAT, "0.9", 0, TAAS_BETWEEN(0, 1), "decay rate of the running averages"},
    EPS("1e-06"),
    WEIGHT_DECAY("0"),
    END,
};

static const taas_param RMSPROP_P[] = {
    LR("0.01"),
    {"alpha", TAAS_P_FLOAT, "0.99", 0, TAAS_AT_LEAST(0), "smoothing constant of the squared-gradient average"},
    EPS("1e-08"),
    WEIGHT_DECAY("0"),
    {"momentum", TAAS_P_FLOAT, "0", 0, TAAS_AT_LEAST(0), "momentum factor"},
    {"centered", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "normalise by an estimate of the gradient's variance"},
    END,
};

/* ---- schedulers ------------------------------------------------------------------ */

#define GAMMA(d) {"gamma", TAAS_P_FLOAT, d, 0, TAAS_AT_LEAST(0), "factor the learning rate is multiplied by"}

static const taas_param STEP_P[] = {
    {"step_size", TAAS_P_INT, NULL, 0, TAAS_AT_LEAST(1), "epochs between two decays"},
    GAMMA("0.1"),
    END,
};

static const taas_param MULTISTEP_P[] = {
    {"milestones", TAAS_P_INT_SEQ, NULL, 0, TAAS_AT_LEAST(0), "epochs at which to decay"},
    GAMMA("0.1"),
    END,
};

static const taas_param EXPONENTIAL_P[] = {GAMMA(NULL), END};

static const taas_param COSINE_P[] = {
    {"T_max", TAAS_P_INT, NULL, 0, TAAS_AT_LEAST(1), "epochs of one half cosine"},
    {"eta_min", TAAS_P_FLOAT, "0", 0, TAAS_AT_LEAST(0), "the lowest learning rate"},
    END,
};

static const taas_param ONECYCLE_P[] = {
    {"max_lr", TAAS_P_FLOAT, NULL, 0, TAAS_AT_LEAST(0), "the peak learning rate"},
    {"total_steps", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(1), "steps in the cycle; None = epochs * steps_per_epoch"},
    {"epochs", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_BETWEEN(1, TAAS_MAX_EPOCHS), "None = fit()'s epochs"},
    {"steps_per_epoch", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(1), "None = the training loader's batches per epoch"},
    {"pct_start", TAAS_P_FLOAT, "0.3", 0, TAAS_BETWEEN(0, 1), "share of the cycle spent increasing the learning rate"},
    {"anneal_strategy", TAAS_P_STR, "'cos'", TAAS_PX(TAAS_PX_ANNEAL), TAAS_NO_RANGE, "shape of the annealing"},
    {"cycle_momentum", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "cycle the momentum inversely to the learning rate"},
    {"base_momentum", TAAS_P_FLOAT, "0.85", 0, TAAS_AT_LEAST(0), "lowest momentum of the cycle"},
    {"max_momentum", TAAS_P_FLOAT, "0.95", 0, TAAS_AT_LEAST(0), "highest momentum of the cycle"},
    {"div_factor", TAAS_P_FLOAT, "25.0", 0, TAAS_AT_LEAST(0), "initial lr = max_lr / div_factor (> 0)"},
    {"final_div_factor", TAAS_P_FLOAT, "10000.0", 0, TAAS_AT_LEAST(0), "final lr = initial lr / final_div_factor (> 0)"},
    {"three_phase", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "a third phase that anneals below the initial lr"},
    END,
};

static const taas_param LINEAR_P[] = {
    {"start_factor", TAAS_P_FLOAT, "0.3333333333333333", 0, TAAS_BETWEEN(0, 1),
     "factor of the lr at the first step (> 0)"},
    {"end_factor", TAAS_P_FLOAT, "1.0", 0, TAAS_BETWEEN(0, 1), "factor of the lr after total_iters steps"},
    {"total_iters", TAAS_P_INT, "5", 0, TAAS_AT_LEAST(1), "steps the change takes"},
    END,
};

static const taas_param SEQUENTIAL_P[] = {
    {"schedulers", TAAS_P_SCHEDULER_LIST, NULL, 0, TAAS_NO_RANGE, "the schedulers, in the order they take over"},
    {"milestones", TAAS_P_INT_SEQ, NULL, 0, TAAS_AT_LEAST(1), "the steps at which the next one takes over"},
    END,
};

static int linear_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (taas_value_number(a[0]) > 0) return 0;
    taas_error_set(err, TAAS_ERR_VALUE, w[0], "LinearLR() start_factor must be > 0, got 0");
    taas_error_hint(err, "warm up from a small factor, e.g. start_factor=0.01");
    taas_sig_hint(err, &r->b, NULL);
    return -1;
}

/* The schedulers hand over to one another: one milestone fewer than them, increasing; and
 * no schedule that is whole by itself inside (OneCycleLR, another SequentialLR). */
static int sequential_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    const taas_value *s = a[0], *m = a[1];
    size_t n = s->u.seq.n;
    if (n < 1 || n > 8 || m->u.seq.n + 1 != n) {
        taas_error_set(err, TAAS_ERR_VALUE, n < 1 || n > 8 ? w[0] : w[1],
                       "SequentialLR() takes 1 to 8 schedulers and one milestone fewer, got %zu and %zu", n, m->u.seq.n);
        taas_error_hint(err, "SequentialLR(schedulers=[LinearLR(start_factor=0.01, total_iters=100), "
                             "CosineAnnealingLR(T_max=900)], milestones=[100])");
        taas_sig_hint(err, &r->b, NULL);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = s->u.seq.items[i]->u.obj.def->name;
        if (!strcmp(name, "OneCycleLR") || !strcmp(name, "SequentialLR")) {
            taas_error_set(err, TAAS_ERR_VALUE, w[0], "SequentialLR() cannot hold %s (scheduler %zu)", name, i);
            taas_error_hint(err, "%s is a whole schedule: give it to fit() alone", name);
            taas_sig_hint(err, &r->b, NULL);
            return -1;
        }
    }
    for (size_t i = 1; i < m->u.seq.n; i++)
        if (m->u.seq.items[i]->u.i <= m->u.seq.items[i - 1]->u.i) {
            taas_error_set(err, TAAS_ERR_VALUE, w[1], "SequentialLR() milestones must increase, got %lld after %lld",
                           (long long)m->u.seq.items[i]->u.i, (long long)m->u.seq.items[i - 1]->u.i);
            taas_error_hint(err, "give the step at which each next scheduler takes over, in order");
            taas_sig_hint(err, &r->b, NULL);
            return -1;
        }
    return 0;
}

static int onecycle_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    for (int i = 9; i <= 10; i++)
        if (taas_value_number(a[i]) <= 0) {
            taas_error_set(err, TAAS_ERR_VALUE, w[i], "OneCycleLR() %s must be > 0", r->b.params[i].name);
            taas_sig_hint(err, &r->b, NULL);
            return -1;
        }
    if (taas_value_number(a[7]) > taas_value_number(a[8])) {
        taas_error_set(err, TAAS_ERR_VALUE, w[7], "OneCycleLR() base_momentum must not exceed max_momentum");
        taas_sig_hint(err, &r->b, NULL);
        return -1;
    }
    return 0;
}

#define LOSS(name_, params_, doc_) .b = {.name = name_, .module = "nn", .kind = TAAS_K_LOSS, .params = params_, .doc = doc_}
#define OPTIM(name_, params_, doc_) .b = {.name = name_, .module = "optim", .kind = TAAS_K_OPTIMIZER, .params = params_, .doc = doc_}
#define SCHED(name_, params_, doc_) .b = {.name = name_, .module = "optim.lr_scheduler", .kind = TAAS_K_SCHEDULER, .params = params_, .doc = doc_}

const taas_row taas_rows_optim[] = {
    {LOSS("NLLLoss", NLL_P,
          "The negative log likelihood of the target class, for a model that ends in "
          "LogSoftmax.")},
    {LOSS("CrossEntropyLoss", CROSS_ENTROPY_P,
          "Cross entropy between the model's raw scores (logits) and the target class; "
          "LogSoftmax and NLLLoss in one.")},
    {LOSS("MSELoss", MSE_P, "The mean squared error between the output and the target.")},
    {OPTIM("SGD", SGD_P,
           "Stochastic gradient descent, with optional momentum, dampening, weight decay and "
           "Nesterov momentum. Without the params argument: fit() gives it the model's "
           "parameters."),
     .check = sgd_check},
    {OPTIM("Adam", ADAM_PARAMS,
           "Adam (Kingma and Ba), with weight decay added to the gradient; without the params "
           "argument."),
     .check = adam_check},
    {OPTIM("AdamW", ADAMW_PARAMS,
           "Adam with decoupled weight decay (Loshchilov and Hutter); without the params "
           "argument."),
     .check = adam_check},
    {OPTIM("Adadelta", ADADELTA_P,
           "Adadelta (Zeiler): per-parameter step sizes from running averages of squared "
           "gradients and updates; without the params argument."), },
    {OPTIM("RMSprop", RMSPROP_P,
           "RMSprop (Hinton): divides the gradient by a running average of its magnitude; "
           "without the params argument.")},
    {SCHED("StepLR", STEP_P,
           "Multiplies the learning rate by gamma every step_size epochs. Without the "
           "optimizer argument: fit() attaches it to its optimizer and steps it after each "
           "epoch (or each optimizer step: fit(..., scheduler_interval='step')).")},
    {SCHED("MultiStepLR", MULTISTEP_P,
           "Multiplies the learning rate by gamma at each milestone epoch; stepped after each "
           "epoch.")},
    {SCHED("ExponentialLR", EXPONENTIAL_P,
           "Multiplies the learning rate by gamma after every epoch.")},
    {SCHED("CosineAnnealingLR", COSINE_P,
           "Anneals the learning rate from its initial value to eta_min along a half cosine "
           "of T_max epochs; stepped after each epoch.")},
    {SCHED("OneCycleLR", ONECYCLE_P,
           "The 1cycle policy (Smith): the learning rate rises to max_lr and falls far below "
           "it over one cycle, stepped after every batch. Give total_steps, or leave it to "
           "fit(), which knows the epochs and the batches per epoch."),
     .check = onecycle_check},
    {SCHED("LinearLR", LINEAR_P,
           "Multiplies the learning rate by a factor that goes linearly from start_factor to "
           "end_factor over total_iters steps: a warmup, usually per optimizer step "
           "(fit(..., scheduler_interval='step')) and first in SequentialLR."),
     .check = linear_check},
    {SCHED("SequentialLR", SEQUENTIAL_P,
           "Runs its schedulers one after the other, the next taking over at each milestone "
           "(restarting from the optimizer's lr): warmup then cosine decay is "
           "SequentialLR(schedulers=[LinearLR(...), CosineAnnealingLR(...)], milestones=[warmup])."),
     .check = sequential_check},
};
const size_t taas_rows_optim_n = sizeof taas_rows_optim / sizeof *taas_rows_optim;
