/* The job spec's loss, optimizer and scheduler parts, and the progress lines. The parts are
 * what taas_value_spec writes: {"type": "SGD", "lr": 0.1, ...}, one key per argument. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cpu.h"
#include "errnames.h"
#include "role.h"
#include "train_job.h"

int taas_train_emit(json_t *j) {
    int rc = taas_cli_print_json(stdout, j);
    fflush(stdout);
    json_decref(j);
    return rc;
}

int taas_train_kernels(const json_t *job, taas_error *err) {
    const json_t *k = json_object_get(job, "kernels");
    if (!k || json_is_null(k)) return 0;
    int set = taas_cpu_parse(json_string_value(k));
    if (set < 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's \"kernels\" must be \"avx512\", \"avx2\" or "
                       "\"generic\"");
        taas_error_hint(err, "the kernel and worker may be of different builds");
        return -1;
    }
    if (taas_cpu_use((taas_cpu_set)set, err)) return -1;
    taas_blas_follow();
    return 0;
}

json_t *taas_train_read(const char *path, taas_error *err) {
    json_error_t je;
    json_t *j = !strcmp(path, "-") ? json_loadf(stdin, 0, &je) : json_load_file(path, 0, &je);
    if (!j) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "cannot read the job spec %s: %s (line %d)",
                       !strcmp(path, "-") ? "from stdin" : path, je.text, je.line);
        taas_error_hint(err, "give the JSON job spec the kernel writes (docs/jobspec.md)");
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec %s is not a JSON object",
                       !strcmp(path, "-") ? "from stdin" : path);
        taas_error_hint(err, "give the JSON job spec the kernel writes (docs/jobspec.md)");
        return NULL;
    }
    return j;
}

void taas_train_report(const taas_error *err, long long step) {
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("error"));
    json_object_set_new(j, "ename", taas_cli_text(err->ename[0] ? err->ename : TAAS_ERR_INTERNAL));
    json_object_set_new(j, "message", taas_cli_text(err->message));
    json_object_set_new(j, "hint", taas_cli_text(err->hint));
    json_object_set_new(j, "step", step < 0 ? json_null() : json_integer(step));
    taas_train_emit(j);
}

int taas_train_int(const json_t *o, const char *ctx, const char *key, long long dflt, long long min,
                 long long max, long long *out, taas_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: \"%s\" must be an integer from %lld to %lld",
                       ctx, key, min, max);
        taas_error_hint(err, "fix \"%s\" in the job spec (see docs/jobspec.md)", key);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* A number argument; absent or null keeps *out. */
static int num(const json_t *o, const char *ctx, const char *key, double *out, taas_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v))) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: \"%s\" must be a finite number", ctx, key);
        taas_error_hint(err, "give %s(%s=...) a number", ctx, key);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

static void flag(const json_t *o, const char *key, int *out) {
    const json_t *v = json_object_get(o, key);
    if (json_is_boolean(v)) *out = json_is_true(v);
}

static const char *type_of(const json_t *spec, const char *what, taas_error *err) {
    const char *t = json_string_value(json_object_get(spec, "type"));
    if (!json_is_object(spec) || !t) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's \"%s\" is not an object with a \"type\"", what);
        taas_error_hint(err, "give fit() a %s, e.g. %s", what,
                        !strcmp(what, "loss") ? "loss=NLLLoss()" : "optimizer=SGD(lr=0.1)");
        return NULL;
    }
    return t;
}

int taas_train_loss_parse(const json_t *spec, taas_train_loss *out, taas_error *err) {
    memset(out, 0, sizeof *out);
    const char *t = type_of(spec, "loss", err);
    if (!t) return -1;
    if (!strcmp(t, "NLLLoss")) out->kind = TAAS_JOB_NLL;
    else if (!strcmp(t, "CrossEntropyLoss")) out->kind = TAAS_JOB_CROSS_ENTROPY;
    else {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s cannot train on class labels", t);
        taas_error_hint(err, "the datasets give class indices: use NLLLoss() after LogSoftmax, or "
                             "CrossEntropyLoss() on raw scores");
        return -1;
    }
    const char *red = json_string_value(json_object_get(spec, "reduction"));
    if (red && strcmp(red, "mean") != 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s(reduction='%s') is not supported", t, red);
        taas_error_hint(err, "leave reduction at its default, 'mean'");
        return -1;
    }
    const json_t *ii = json_object_get(spec, "ignore_index");
    out->ignore_index = -100;
    if (ii && !json_is_null(ii)) {
        if (!json_is_integer(ii)) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: \"ignore_index\" must be an integer", t);
            taas_error_hint(err, "give %s(ignore_index=...) a class index, or leave it at -100", t);
            return -1;
        }
        out->ignore_index = json_integer_value(ii);
    }
    double s = 0;
    if (num(spec, t, "label_smoothing", &s, err)) return -1;
    out->label_smoothing = (float)s;
    return 0;
}

void taas_train_loss_free(taas_train_loss *l) {
    free(l->probs);
    l->probs = NULL;
    l->probs_cap = 0;
}

int taas_train_loss_run(taas_train_loss *l, const float *out, const int64_t *labels, int n, int c, float dloss,
                        float *dout, float *loss, taas_error *err) {
    if (l->kind == TAAS_JOB_NLL) {
        if (taas_nll_loss_forward(loss, out, labels, n, c, l->ignore_index, err)) return -1;
        if (dout) taas_nll_loss_backward(dout, labels, n, c, l->ignore_index, dloss);
        return 0;
    }
    size_t need = (size_t)n * (size_t)c;
    if (need > l->probs_cap) {
        float *p = realloc(l->probs, need * sizeof *p);
        if (!p) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the loss");
        l->probs = p;
        l->probs_cap = need;
    }
    if (taas_cross_entropy_forward(loss, l->probs, out, labels, n, c, l->label_smoothing, l->ignore_index, err))
        return -1;
    if (dout) taas_cross_entropy_backward(dout, l->probs, labels, n, c, l->label_smoothing, l->ignore_index, dloss);
    return 0;
}

static const struct { const char *name; taas_optim_kind kind; } OPTIMS[] = {
    {"SGD", TAAS_OPTIM_SGD}, {"Adam", TAAS_OPTIM_ADAM}, {"AdamW", TAAS_OPTIM_ADAMW},
    {"Adadelta", TAAS_OPTIM_ADADELTA}, {"RMSprop", TAAS_OPTIM_RMSPROP},
};

int taas_train_optim_parse(const json_t *spec, taas_optim_config *cfg, taas_error *err) {
    const char *t = type_of(spec, "optimizer", err);
    if (!t) return -1;
    size_t i = 0;
    while (i < sizeof OPTIMS / sizeof OPTIMS[0] && strcmp(OPTIMS[i].name, t) != 0) i++;
    if (i == sizeof OPTIMS / sizeof OPTIMS[0]) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "unknown optimizer '%s' in the job spec", t);
        taas_error_hint(err, "use SGD, Adam, AdamW, Adadelta or RMSprop");
        return -1;
    }
    taas_optim_config_default(cfg, OPTIMS[i].kind);
    if (num(spec, t, "lr", &cfg->lr, err) || num(spec, t, "weight_decay", &cfg->weight_decay, err) ||
        num(spec, t, "momentum", &cfg->momentum, err) || num(spec, t, "dampening", &cfg->dampening, err) ||
        num(spec, t, "eps", &cfg->eps, err) || num(spec, t, "rho", &cfg->rho, err) ||
        num(spec, t, "alpha", &cfg->alpha, err))
        return -1;
    flag(spec, "nesterov", &cfg->nesterov);
    flag(spec, "amsgrad", &cfg->amsgrad);
    flag(spec, "centered", &cfg->centered);
    const json_t *b = json_object_get(spec, "betas");
    if (b && !json_is_null(b)) {
        if (!json_is_array(b) || json_array_size(b) != 2 || !json_is_number(json_array_get(b, 0)) ||
            !json_is_number(json_array_get(b, 1))) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: \"betas\" must be a pair of numbers", t);
            taas_error_hint(err, "give betas=(0.9, 0.999)");
            return -1;
        }
        cfg->beta1 = json_number_value(json_array_get(b, 0));
        cfg->beta2 = json_number_value(json_array_get(b, 1));
    }
    return taas_optim_config_check(cfg, err);
}

static const struct { const char *name; taas_sched_kind kind; } SCHEDS[] = {
    {"StepLR", TAAS_SCHED_STEP}, {"MultiStepLR", TAAS_SCHED_MULTISTEP},
    {"ExponentialLR", TAAS_SCHED_EXPONENTIAL}, {"CosineAnnealingLR", TAAS_SCHED_COSINE},
    {"OneCycleLR", TAAS_SCHED_ONECYCLE}, {"LinearLR", TAAS_SCHED_LINEAR},
};

static int onecycle(const json_t *spec, long epochs, long steps_per_epoch, taas_sched_config *cfg,
                    taas_error *err) {
    const char *t = "OneCycleLR";
    const char *anneal = json_string_value(json_object_get(spec, "anneal_strategy"));
    int three = 0;
    flag(spec, "three_phase", &three);
    if ((anneal && strcmp(anneal, "cos") != 0) || three) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "OneCycleLR: %s is not supported",
                       three ? "three_phase=True" : "anneal_strategy='linear'");
        taas_error_hint(err, "use anneal_strategy='cos' and three_phase=False (the defaults)");
        return -1;
    }
    long long total, ep, spe;
    if (taas_train_int(spec, t, "total_steps", 0, 1, 1LL << 40, &total, err) ||
        taas_train_int(spec, t, "epochs", epochs, 1, 1LL << 30, &ep, err) ||
        taas_train_int(spec, t, "steps_per_epoch", steps_per_epoch, 1, 1LL << 30, &spe, err))
        return -1;
    cfg->total_steps = total ? (long)total : (long)(ep * spe);
    cfg->cycle_momentum = 1;
    flag(spec, "cycle_momentum", &cfg->cycle_momentum);
    return num(spec, t, "max_lr", &cfg->max_lr, err) || num(spec, t, "pct_start", &cfg->pct_start, err) ||
                   num(spec, t, "div_factor", &cfg->div_factor, err) ||
                   num(spec, t, "final_div_factor", &cfg->final_div_factor, err) ||
                   num(spec, t, "base_momentum", &cfg->base_momentum, err) ||
                   num(spec, t, "max_momentum", &cfg->max_momentum, err)
               ? -1
               : 0;
}

/* One scheduler of the spec (not SequentialLR). */
static int sched_one(const json_t *spec, double base_lr, long epochs, long steps_per_epoch, taas_sched_config *cfg,
                     taas_error *err) {
    const char *t = type_of(spec, "scheduler", err);
    if (!t) return -1;
    size_t i = 0;
    while (i < sizeof SCHEDS / sizeof SCHEDS[0] && strcmp(SCHEDS[i].name, t) != 0) i++;
    if (i == sizeof SCHEDS / sizeof SCHEDS[0]) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "unknown scheduler '%s' in the job spec", t);
        taas_error_hint(err, "use StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR or OneCycleLR, "
                             "or several of them in SequentialLR");
        return -1;
    }
    taas_sched_config_default(cfg, SCHEDS[i].kind);
    cfg->base_lr = base_lr;
    long long v;
    if (num(spec, t, "gamma", &cfg->gamma, err) || num(spec, t, "eta_min", &cfg->eta_min, err)) return -1;
    if (taas_train_int(spec, t, "step_size", 0, 0, 1LL << 40, &v, err)) return -1;
    cfg->step_size = (long)v;
    if (taas_train_int(spec, t, "T_max", 0, 0, 1LL << 40, &v, err)) return -1;
    cfg->t_max = (long)v;
    const json_t *ms = json_object_get(spec, "milestones");
    if (json_is_array(ms)) {
        if (json_array_size(ms) > TAAS_SCHED_MAX_MILESTONES) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "MultiStepLR: %zu milestones, at most %d are supported",
                           json_array_size(ms), TAAS_SCHED_MAX_MILESTONES);
            taas_error_hint(err, "give fewer milestones");
            return -1;
        }
        for (size_t k = 0; k < json_array_size(ms); k++)
            cfg->milestones[cfg->n_milestones++] = (long)json_integer_value(json_array_get(ms, k));
    }
    if (taas_train_int(spec, t, "total_iters", 5, 0, 1LL << 40, &v, err) ||
        num(spec, t, "start_factor", &cfg->start_factor, err) || num(spec, t, "end_factor", &cfg->end_factor, err))
        return -1;
    cfg->total_iters = (long)v;
    return cfg->kind == TAAS_SCHED_ONECYCLE ? onecycle(spec, epochs, steps_per_epoch, cfg, err) : 0;
}

int taas_train_sched_parse(const json_t *spec, double base_lr, long epochs, long steps_per_epoch, taas_sched *s,
                           int *has, taas_error *err) {
    *has = 0;
    if (!spec || json_is_null(spec)) return 0;
    const char *t = type_of(spec, "scheduler", err);
    if (!t) return -1;
    taas_sched_config parts[TAAS_SCHED_MAX_PARTS];
    long milestones[TAAS_SCHED_MAX_PARTS];
    int n = 1;
    if (strcmp(t, "SequentialLR") != 0) {
        if (sched_one(spec, base_lr, epochs, steps_per_epoch, &parts[0], err)) return -1;
    } else {
        const json_t *ss = json_object_get(spec, "schedulers"), *ms = json_object_get(spec, "milestones");
        size_t k = json_array_size(ss);
        if (k < 1 || k > TAAS_SCHED_MAX_PARTS || json_array_size(ms) + 1 != k) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "SequentialLR: %zu schedulers and %zu milestones; it takes "
                           "1 to %d schedulers and one milestone fewer", k, json_array_size(ms), TAAS_SCHED_MAX_PARTS);
            taas_error_hint(err, "SequentialLR(schedulers=[LinearLR(...), CosineAnnealingLR(...)], milestones=[100])");
            return -1;
        }
        n = (int)k;
        for (size_t j = 0; j < k; j++) {
            const json_t *m = json_array_get(ms, j);
            if (j + 1 < k) milestones[j] = json_is_integer(m) ? (long)json_integer_value(m) : -1;
            if (sched_one(json_array_get(ss, j), base_lr, epochs, steps_per_epoch, &parts[j], err)) return -1;
        }
    }
    if (taas_sched_init_sequential(s, parts, n, milestones, err)) return -1;
    *has = 1;
    return 0;
}

int taas_train_spec_args(int argc, char **argv, const char *role, const char *help, const char **spec_path) {
    const char *h = NULL;
    const taas_opt opts[] = {{"spec", 1, spec_path}, {"help", 0, &h}, {NULL, 0, NULL}};
    taas_error err;
    taas_error_clear(&err);
    *spec_path = NULL;
    if (taas_cli_parse(argc, argv, opts, &err)) {
        taas_train_report(&err, -1);
        return -1;
    }
    if (h) {
        puts(help);
        return 1;
    }
    if (*spec_path) return 0;
    taas_error_set(&err, TAAS_ERR_USAGE, TAAS_NOPOS, "%s: --spec is required", role);
    taas_error_hint(&err, "give --spec FILE, or --spec - to read the spec from stdin");
    taas_train_report(&err, -1);
    return -1;
}
