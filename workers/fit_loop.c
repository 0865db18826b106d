/* The fit job's training loop for one rank of W (fit_loop.h). */
#include "fit_loop.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>

#include "bounds.h"
#include "checkpoint.h"
#include "cpu.h"
#include "clock.h"
#include "engine.h"
#include "errnames.h"
#include "role.h"
#include "sample.h"
#include "train_job.h"
#include "utf8.h"

/* By time: the first checkpoint after this much training, the next after at least as much
 * and 99 times what the last one took (≤ 1 % of the time). */
#define CKPT_MIN_S 10.0
#define CKPT_SHARE 99.0

struct taas_fit {
    taas_fit_cfg cfg;
    int tokens;              /* a token model's T (model.h): the display counts tokens, and perplexity */
    taas_optim_span *spans;  /* the optimizer's parameter groups (param_groups), or NULL */
    const json_t *job;
    taas_collective *coll;
    long long epochs, units, seed;
    taas_fetcher *fetcher;
    taas_train_loader train, val;
    int has_val;
    taas_fit_source src_train, src_val;
    taas_engine *engine;        /* the model, on the CPU or a GPU */
    taas_train_loss loss;
    taas_optim_config opt;
    taas_sched sched;
    int has_sched;
    int sched_per_step;         /* stepped after each optimizer step, else after each epoch */
    double last_lr;             /* the lr of the last optimizer step */
    int text_sample;            /* rank 0 of a model of a TextFile: a sample of text after each epoch */
    long long accum;            /* batches an optimizer step (fit(accumulate=)) */
    double window_n;            /* the samples of this optimizer step's batches so far, all ranks' */
    size_t nparams;
    uint64_t *idx;              /* room for a batch's sample indices */
    /* the next step's batch, taken while this one computes (engine.h: compute's next) */
    taas_batch *ahead;
    uint64_t ahead_epoch, ahead_k, next_k;
    int ahead_stopped;
    long long steps;            /* optimizer steps done */
    /* checkpoints: every so many steps (0: by time, ≤ 1 % of it; -1: after each epoch) */
    long long ckpt_every;
    int ckpt_due;               /* every rank: rank 0 asked for one with the last step */
    double ckpt_last, ckpt_cost;/* rank 0: when the last ended, and what it took */
    double ckpt_s;              /* rank 0: all checkpoints' time (this run's), and how many */
    long long ckpt_n;
    /* where training starts: epoch, step within it, and that epoch's sums so far (resume) */
    long long epoch0, step0;
    double loss0, samples0;
    uint64_t checksum0;
    json_t *history, *checksums;
    int interrupted;
    double wait_s, step_s;      /* time this rank waited for batches, and spent in steps */
    double first_wait_s;        /* of which the wait for its first batch (the start) */
    double wait_all, step_all, first_wait_all;  /* the same, summed over the ranks */
};

/* Decode threads inherit the signal mask when they are made: with the stop signals blocked
 * there, a signal reaches the loop's thread and never interrupts a decode thread's read. */
static void block_stop_signals(int block) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL);
}

/* An in-process pipeline as a source: it makes exactly the items the loop asks for, in order. */
static int pipeline_take(void *ctx, uint64_t epoch, uint64_t k, taas_batch **out, taas_error *err) {
    taas_train_loader *l = ctx;
    taas_batch *b = NULL;
    int rc = taas_pipeline_next(l->pipeline, &b, err);
    if (rc < 0) return -1;
    if (rc == 1 || b->k != k || (b->epoch != epoch && l->world > 1)) {
        taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "the pipeline gave item %llu of epoch %llu where item %llu "
                       "of epoch %llu was due", rc == 1 ? 0ULL : (unsigned long long)b->k,
                       rc == 1 ? 0ULL : (unsigned long long)b->epoch, (unsigned long long)k, (unsigned long long)epoch);
        taas_error_hint(err, "this is a bug in taas; please report it");
        taas_batch_free(b);
        return -1;
    }
    *out = b;
    return 0;
}

static json_int_t meta_int(const json_t *m, const char *k) {
    return json_integer_value(json_object_get(m, k));
}

/* What a rank needs to go on exactly from epoch e, step s of it (docs/jobspec.md). */
static json_t *checkpoint_meta(const taas_fit *f, long long e, long long s, double loss_sum, double samples,
                               uint64_t checksum) {
    char hex[24];
    snprintf(hex, sizeof hex, "0x%016llx", (unsigned long long)checksum);
    json_t *m = json_object();
    json_object_set_new(m, "version", json_integer(1));
    json_object_set_new(m, "epoch", json_integer(e));
    json_object_set_new(m, "step", json_integer(s));
    json_object_set_new(m, "steps", json_integer(f->steps));
    json_object_set_new(m, "accumulate", json_integer(f->accum));
    json_object_set_new(m, "world", json_integer(f->coll->world));
    json_object_set_new(m, "kernels", json_string(taas_cpu_set_name(taas_cpu_kernels())));
    json_object_set_new(m, "seed", json_integer(f->seed));
    json_object_set_new(m, "epochs", json_integer(f->epochs));
    json_object_set_new(m, "units", json_integer(f->units));
    json_object_set_new(m, "batch_size", json_integer(taas_sampler_batch(f->train.sampler)));
    json_object_set_new(m, "steps_per_epoch", json_integer((json_int_t)f->train.steps));
    json_object_set_new(m, "optimizer", json_string(taas_optim_name(f->opt.kind)));
    json_object_set_new(m, "lr", json_real(f->opt.lr));
    json_object_set_new(m, "momentum", json_real(f->opt.momentum));
    json_object_set_new(m, "beta1", json_real(f->opt.beta1));
    json_object_set_new(m, "scheduler", f->has_sched ? json_pack("{s:I, s:f, s:f}", "last_epoch",
                                                                 (json_int_t)f->sched.last_epoch, "lr", f->sched.lr,
                                                                 "momentum", f->sched.momentum)
                                                     : json_null());
    json_object_set_new(m, "epoch_loss_sum", json_real(loss_sum));
    json_object_set_new(m, "epoch_samples", json_real(samples));
    json_object_set_new(m, "epoch_checksum", json_string(hex));
    json_object_set_new(m, "history", json_deep_copy(f->history));
    json_object_set_new(m, "checksums", json_deep_copy(f->checksums));
    return m;
}

/* The weights, statistics and optimizer state from the checkpoint ("weights"), and where
 * the fit was: its step, epoch, sums, history, checksums and scheduler. Its record is
 * checked against this fit before any tensor is read (a checkpoint of another optimizer is
 * named as such, not as tensors that do not fit). */
static int resume(taas_fit *f, taas_error *err) {
    const char *path = json_string_value(json_object_get(f->job, "weights"));
    if (!path) return taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec resumes but names no checkpoint");
    const taas_checkpoint_fit fit = {taas_optim_name(f->opt.kind), f->has_sched, f->coll->world, f->seed, f->epochs,
                                     taas_sampler_batch(f->train.sampler), (long long)f->train.steps, f->accum};
    json_t *m = taas_checkpoint_meta(path, err);
    int rc = !m || taas_checkpoint_check(m, &fit, path, err) ? -1 : 0;
    json_decref(m);
    m = NULL;
    if (rc || f->engine->ops->restore(f->engine, path, &m, err)) return -1;
    /* checked above: the fields are there, of their types and within their ranges */
    const json_t *sc = json_object_get(m, "scheduler");
    f->epoch0 = meta_int(m, "epoch");
    f->step0 = meta_int(m, "step");
    f->steps = meta_int(m, "steps");
    f->loss0 = json_number_value(json_object_get(m, "epoch_loss_sum"));
    f->samples0 = json_number_value(json_object_get(m, "epoch_samples"));
    f->checksum0 = strtoull(json_string_value(json_object_get(m, "epoch_checksum")), NULL, 16);
    json_array_extend(f->history, json_object_get(m, "history"));
    json_array_extend(f->checksums, json_object_get(m, "checksums"));
    f->opt.lr = json_number_value(json_object_get(m, "lr"));
    f->opt.momentum = json_number_value(json_object_get(m, "momentum"));
    f->opt.beta1 = json_number_value(json_object_get(m, "beta1"));
    if (f->has_sched) {
        f->sched.last_epoch = (long)meta_int(sc, "last_epoch");
        f->sched.lr = json_number_value(json_object_get(sc, "lr"));
        f->sched.momentum = json_number_value(json_object_get(sc, "momentum"));
    }
    json_decref(m);
    if (!f->train.rank_pipeline) return 0;
    /* this rank's own pipeline starts where the fit is */
    block_stop_signals(1);
    rc = taas_train_loader_seek(&f->train, json_object_get(f->job, "train"), (uint64_t)f->seed, (uint64_t)f->epoch0,
                              (uint64_t)f->step0, (uint64_t)f->epochs, err);
    block_stop_signals(0);
    return rc;
}

static void emit(taas_fit *f, json_t *line) {
    if (f->coll->rank == 0 && f->cfg.emit) f->cfg.emit(f->cfg.emit_ctx, line);
    else json_decref(line);
}

/* The optimizer's lr (and momentum) as the scheduler has them now. */
static void sched_apply(taas_fit *f) {
    f->opt.lr = f->sched.lr;
    if (taas_sched_cycles_momentum(&f->sched)) {
        if (f->opt.kind == TAAS_OPTIM_ADAM || f->opt.kind == TAAS_OPTIM_ADAMW) f->opt.beta1 = f->sched.momentum;
        else f->opt.momentum = f->sched.momentum;
    }
}

/* The scheduler, stepped after each optimizer step ("scheduler_interval": "step"; OneCycleLR's
 * default) or after each epoch ("epoch"; the others'). OneCycleLR's total_steps None covers the
 * fit's scheduler steps: max_steps when the fit counts them. */
static int sched_setup(taas_fit *f, taas_error *err) {
    const json_t *spec = json_object_get(f->job, "scheduler");
    const char *iv = json_string_value(json_object_get(f->job, "scheduler_interval"));
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (iv && strcmp(iv, "step") && strcmp(iv, "epoch")) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's scheduler_interval is '%s'", iv);
        taas_error_hint(err, "give 'step', 'epoch' or null");
        return -1;
    }
    f->sched_per_step = iv ? !strcmp(iv, "step") : type && !strcmp(type, "OneCycleLR");
    long long max_steps = 0;
    if (taas_train_int(f->job, "the job spec", "max_steps", 0, 0, INT64_MAX, &max_steps, err)) return -1;
    long epochs = (long)f->epochs, per_epoch = f->sched_per_step ? (long)((f->train.steps + f->accum - 1) / f->accum) : 1;
    if (f->sched_per_step && max_steps > 0) epochs = 1, per_epoch = (long)max_steps;
    if (taas_train_sched_parse(spec, f->opt.lr, epochs, per_epoch, &f->sched, &f->has_sched, err)) return -1;
    if (f->has_sched) sched_apply(f);
    return 0;
}

static int setup(taas_fit *f, taas_error *err) {
    const json_t *job = f->job;
    const json_t *v = json_object_get(job, "version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's \"version\" must be 1");
        taas_error_hint(err, "this worker runs version 1 job specs (docs/jobspec.md); the kernel and worker may be of different builds");
        return -1;
    }
    const char *kind = json_string_value(json_object_get(job, "job"));
    if (!kind || strcmp(kind, "fit") != 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "taas-worker train runs \"job\": \"fit\", not %s%s%s",
                       kind ? "\"" : "", kind ? kind : "a spec without one", kind ? "\"" : "");
        taas_error_hint(err, "run evaluate jobs with taas-worker evaluate");
        return -1;
    }
    if (taas_train_kernels(job, err)) return -1;
    if (taas_train_int(job, "the job spec", "epochs", 1, 1, TAAS_MAX_EPOCHS, &f->epochs, err) ||
        taas_train_int(job, "the job spec", "units", 0, 0, INT64_MAX, &f->units, err) ||
        taas_train_int(job, "the job spec", "seed", 0, 0, INT64_MAX, &f->seed, err) ||
        taas_train_int(job, "the job spec", "accumulate", 1, 1, 1 << 20, &f->accum, err) ||
        taas_train_loss_parse(json_object_get(job, "loss"), &f->loss, err) ||
        taas_train_optim_parse(json_object_get(job, "optimizer"), &f->opt, err))
        return -1;
    const json_t *ce = json_object_get(job, "checkpoint_every");
    if (json_is_string(ce) && !strcmp(json_string_value(ce), "epoch")) f->ckpt_every = -1;
    else if (ce && !json_is_null(ce) &&
             taas_train_int(job, "the job spec", "checkpoint_every", 0, 1, INT64_MAX, &f->ckpt_every, err))
        return -1;
    const json_t *tr = json_object_get(job, "train");
    if (!tr || json_is_null(tr)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the fit job has no \"train\" DataLoader");
        taas_error_hint(err, "give fit() a training loader: fit(model, DataLoader(train_set, batch_size=64), ...)");
        return -1;
    }
    if (!(f->fetcher = taas_cli_fetcher(err))) return -1;
    taas_train_rank tr_rank = {(uint32_t)f->coll->rank, (uint32_t)f->coll->world, !f->cfg.streamed_train,
                             f->cfg.train_facts};
    if (taas_train_loader_open(tr, "train", f->fetcher, (uint64_t)f->seed, (uint64_t)f->units, (uint64_t)f->epochs,
                             &tr_rank, &f->train, err))
        return -1;
    f->src_train = (taas_fit_source){pipeline_take, &f->train};
    const json_t *va = json_object_get(job, "validate");
    if (va && !json_is_null(va)) {
        taas_train_rank va_rank = {(uint32_t)f->coll->rank, (uint32_t)f->coll->world, !f->cfg.streamed_val,
                                 f->cfg.val_facts};
        if (taas_train_loader_open(va, "validate", f->fetcher, (uint64_t)f->seed, 0, 1, &va_rank, &f->val, err))
            return -1;
        f->has_val = 1;
        f->src_val = (taas_fit_source){pipeline_take, &f->val};
    }
    taas_model *m = taas_train_model(job, &f->train, err);
    if (!m) return -1;
    if (sched_setup(f, err)) {
        taas_model_free(m);
        return -1;
    }
    f->nparams = m->nparams;
    f->tokens = taas_model_tokens(m);
    const char *dtype = json_string_value(json_object_get(json_object_get(tr, "dataset"), "type"));
    f->text_sample = f->tokens && f->coll->rank == 0 && dtype && !strcmp(dtype, "TextFile");
    /* the update's extras (engine.h): clip_grad_norm, and the optimizer's parameter groups */
    const json_t *clip = json_object_get(job, "clip_grad_norm"), *opt = json_object_get(job, "optimizer");
    const char *groups = json_string_value(json_object_get(opt, "param_groups"));
    size_t nspans = 0;
    if ((clip && !json_is_null(clip) && !(json_is_number(clip) && json_number_value(clip) > 0)) ||
        (groups && strcmp(groups, "nanogpt"))) {
        taas_model_free(m);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's clip_grad_norm must be a positive number or "
                       "null, and the optimizer's param_groups null or \"nanogpt\"");
        taas_error_hint(err, "fit(..., clip_grad_norm=1.0, optimizer=AdamW(param_groups='nanogpt'))");
        return -1;
    }
    if (groups && taas_model_decay_spans(m, f->opt.weight_decay, &f->spans, &nspans)) {
        taas_model_free(m);
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the optimizer's parameter groups");
    }
    const char *precision = json_string_value(json_object_get(job, "precision"));
    int bf16 = precision && !strcmp(precision, "bf16");
    if (precision && !bf16 && strcmp(precision, "fp32")) {
        taas_model_free(m);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's precision is '%s'", precision);
        taas_error_hint(err, "give 'fp32' or 'bf16'");
        return -1;
    }
    f->engine = f->cfg.device >= 0 ? taas_engine_cuda(m, &f->loss, &f->opt, f->cfg.device,
                                                      bf16 ? TAAS_PRECISION_BF16 : TAAS_PRECISION_FP32, f->coll, err)
                                   : taas_engine_cpu(m, &f->loss, &f->opt, err);
    if (!f->engine) return -1;
    if (bf16 && f->cfg.device < 0) {  /* a notebook runs where there is no GPU too: said, not refused */
        json_t *j = json_object();
        json_object_set_new(j, "event", json_string("log"));
        json_object_set_new(j, "text", json_string("precision='bf16' is for GPUs: this rank computes in FP32 on the CPU"));
        emit(f, j);
    }
    f->engine->x.clip = json_is_number(clip) ? json_number_value(clip) : 0.0;
    f->engine->x.spans = f->spans;
    f->engine->x.nspans = nspans;
    uint32_t b = taas_sampler_batch(f->train.sampler);
    if (f->has_val && taas_sampler_batch(f->val.sampler) > b) b = taas_sampler_batch(f->val.sampler);
    f->idx = calloc(b, sizeof *f->idx);
    f->history = json_array();
    f->checksums = json_array();
    if (!f->idx || !f->history || !f->checksums)
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the fit job");
    if (json_is_true(json_object_get(job, "resume")) && resume(f, err)) return -1;
    return 0;
}

taas_fit *taas_fit_new(const taas_fit_cfg *cfg, taas_error *err) {
    if (sodium_init() < 0) {  /* the checksums' BLAKE2b */
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "libsodium cannot start");
        taas_error_hint(err, "the system's random source may be missing (/dev/urandom)");
        return NULL;
    }
    taas_fit *f = calloc(1, sizeof *f);
    if (!f) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the fit job");
        return NULL;
    }
    f->cfg = *cfg;
    f->job = cfg->job;
    f->coll = cfg->coll;
    block_stop_signals(1);
    int rc = setup(f, err);
    block_stop_signals(0);
    if (rc) {
        taas_fit_free(f);
        return NULL;
    }
    return f;
}

void taas_fit_free(taas_fit *f) {
    if (!f) return;
    taas_train_loader_close(&f->train);
    if (f->has_val) taas_train_loader_close(&f->val);
    if (f->engine) f->engine->ops->free(f->engine);
    taas_batch_free(f->ahead);
    taas_train_loss_free(&f->loss);
    taas_fetcher_free(f->fetcher);
    free(f->idx);
    free(f->spans);
    json_decref(f->history);
    json_decref(f->checksums);
    free(f);
}

void taas_fit_set_source(taas_fit *f, const char *which, taas_fit_source src) {
    if (!strcmp(which, "train")) f->src_train = src;
    else f->src_val = src;
}

static int sched_step(taas_fit *f, taas_error *err) {
    if (taas_sched_step(&f->sched, err)) return -1;
    sched_apply(f);
    return 0;
}

/* One sample's word of the epoch's checksum: BLAKE2b of its index, label and pixels. The
 * checksum adds them up, so it says which samples were trained on and what they held, in
 * whatever order and on whichever rank: a batch forged or damaged on its way changes it. */
static uint64_t sample_word(const taas_batch *b, uint32_t i) {
    size_t px = (size_t)b->c * b->h * b->w;
    uint64_t idx = b->indices[i];
    int64_t label = b->labels[i];
    unsigned char out[crypto_generichash_BYTES_MIN];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof out);
    crypto_generichash_update(&st, (const unsigned char *)&idx, sizeof idx);
    crypto_generichash_update(&st, (const unsigned char *)&label, sizeof label);
    crypto_generichash_update(&st, (const unsigned char *)(b->images + (size_t)i * px), px * sizeof(float));
    crypto_generichash_final(&st, out, sizeof out);
    uint64_t w;
    memcpy(&w, out, sizeof w);
    return w;
}

/* A batch whose samples are not the shape the model was built for (a WebDataset whose images
 * differ in size): an error that says which batch, rather than arithmetic on the wrong shape. */
static int check_shape(const taas_train_loader *l, const taas_batch *b, const char *what, taas_error *err) {
    if (!b || ((int)b->c == l->c && (int)b->h == l->h && (int)b->w == l->w)) return 0;
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a batch of the %s loader (item %llu of epoch %llu) has samples of "
                   "%ux%ux%u, but the model takes %dx%dx%d (the first sample's shape)", what,
                   (unsigned long long)b->k, (unsigned long long)b->epoch + 1, b->c, b->h, b->w, l->c, l->h, l->w);
    taas_error_hint(err, "give every sample one shape: add Resize((h, w)) or CenterCrop(size) to the dataset's "
                         "transform");
    return -1;
}

/* The engine asks for the next step's batch while this one computes (a GPU copies it to the
 * device meanwhile): the item the loop set in next_k, when the step exists and this rank's
 * item has samples. */
static int take_ahead(void *ctx, const taas_batch **out, taas_error *err) {
    taas_fit *f = ctx;
    *out = NULL;
    if (f->next_k == UINT64_MAX) return 0;
    int rc = f->src_train.take(f->src_train.ctx, f->ahead_epoch, f->next_k, &f->ahead, err);
    if (rc < 0) return -1;
    if (rc == 1) f->ahead_stopped = 1;
    f->ahead_k = f->next_k;
    f->next_k = UINT64_MAX;
    taas_error e;
    /* one of another shape is not the engine's to copy: the next step reports it */
    *out = f->ahead && check_shape(&f->train, f->ahead, "train", &e) == 0 ? f->ahead : NULL;
    return 0;
}

/* Rank 0 asks for a checkpoint with a step's sums, so that every rank takes it after the
 * same step: every ckpt_every steps, or by time. */
static int checkpoint_wanted(const taas_fit *f) {
    if (f->coll->rank != 0 || f->ckpt_every < 0) return 0;
    if (f->ckpt_every > 0) return (f->steps + 1) % f->ckpt_every == 0;
    double wait = CKPT_SHARE * f->ckpt_cost;
    return taas_now() - f->ckpt_last >= (wait > CKPT_MIN_S ? wait : CKPT_MIN_S);
}

/* A checkpoint at epoch e, step s of it. Every rank adds its share of the epoch's checksum;
 * rank 0 writes and hands it on. One that fails is said and training goes on. */
static int take_checkpoint(taas_fit *f, long long e, long long s, double loss_sum, double samples, uint64_t checksum,
                           taas_error *err) {
    f->ckpt_due = 0;
    uint64_t sum = checksum;
    if (f->coll->sum_u64(f->coll, &sum, 1, err)) return -1;
    if (f->coll->rank != 0 || !f->cfg.checkpointed || !f->cfg.checkpoint_path) return 0;
    double t = taas_now();
    json_t *meta = checkpoint_meta(f, e, s, loss_sum, samples, sum);
    json_t *info = json_pack("{s:I, s:I, s:I}", "epoch", (json_int_t)e, "step", (json_int_t)s, "steps",
                             (json_int_t)f->steps);
    taas_error e2;
    taas_error_clear(&e2);
    if (!meta || !info || f->engine->ops->checkpoint(f->engine, f->cfg.checkpoint_path, meta, &e2) ||
        f->cfg.checkpointed(f->cfg.emit_ctx, f->cfg.checkpoint_path, info, &e2)) {
        json_t *j = json_object();
        json_object_set_new(j, "event", json_string("log"));
        json_object_set_new(j, "text", json_sprintf("no checkpoint at step %lld: %s", f->steps,
                                                    taas_error_is_set(&e2) ? e2.message : "out of memory"));
        emit(f, j);
    }
    json_decref(meta);
    json_decref(info);
    f->ckpt_last = taas_now();
    f->ckpt_cost = f->ckpt_last - t;
    f->ckpt_s += f->ckpt_cost;
    f->ckpt_n++;
    return 0;
}

/* One batch: this rank's item (or none), the sums of all ranks, and after the last batch of
 * an optimizer step (micro of accum; last), the update. *stopped when a rank asked to stop
 * (the weights stay those of the last completed step); *loss the mean loss of the batch over
 * every rank's samples; *total its samples. */
static int step(taas_fit *f, long long epoch, uint64_t k, size_t n, long long micro, int last, int *stopped,
                double *loss, double *total, uint64_t *checksum, taas_error *err) {
    taas_batch *b = NULL;
    double t = taas_now();
    int stopped_waiting = f->ahead_stopped;
    if (f->ahead && f->ahead_epoch == (uint64_t)epoch && f->ahead_k == k) {
        b = f->ahead;  /* taken while the last step computed */
        f->ahead = NULL;
    } else if (n > 0 && !stopped_waiting) {
        int rc = f->src_train.take(f->src_train.ctx, (uint64_t)epoch, k, &b, err);
        if (rc < 0) return -1;
        stopped_waiting = rc == 1;  /* the sums below tell every rank */
    }
    taas_batch_free(f->ahead);
    f->ahead = NULL;
    f->ahead_stopped = 0;
    double t_batch = taas_now();
    f->wait_s += t_batch - t;
    if (f->steps == 0) f->first_wait_s = t_batch - t;
    double sums[4] = {0, 0, (f->cfg.stop && *f->cfg.stop) || stopped_waiting, checkpoint_wanted(f)};
    float loss1 = 0;
    f->ahead_epoch = (uint64_t)epoch;
    if (check_shape(&f->train, b, "train", err)) {
        taas_batch_free(b);
        return -1;
    }
    uint64_t words = 0;  /* of the batch as it came, before the engine touches it */
    for (uint32_t i = 0; b && i < b->n; i++) words += sample_word(b, i);
    /* accumulated: each batch's mean gradient weighted by its samples over the batch size, so
     * that the update's weight makes it the mean over the step's samples, a short batch too */
    uint32_t bs = taas_sampler_batch(f->train.sampler);
    f->engine->x.keep_grads = micro > 0;
    f->engine->x.grad_scale = f->accum > 1 ? (float)((double)n / bs) : 1.0f;
    /* dropout's masks: a batch's own, by its index among the fit's batches */
    int rc = f->engine->ops->compute(f->engine, b, take_ahead, f, (uint64_t)(f->steps * f->accum + micro), &loss1,
                                     err);
    if (rc == 0) {
        sums[0] = b ? b->n : 0;
        sums[1] = (double)loss1 * sums[0];
        *checksum += words;
        rc = f->coll->sum_f64(f->coll, sums, 4, err);
    }
    taas_batch_free(b);
    if (rc) return -1;
    f->ckpt_due = sums[3] > 0;
    if (sums[2] > 0) {
        *stopped = 1;
        return 0;
    }
    *total = sums[0];
    *loss = sums[0] > 0 ? sums[1] / sums[0] : 0;
    if (!isfinite(*loss)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the loss is %s at epoch %lld step %llu",
                       isnan(*loss) ? "nan" : "inf", epoch + 1, (unsigned long long)(k / (uint64_t)f->coll->world + 1));
        taas_error_hint(err, "lower the learning rate (lr=%g now), or check the data and the model's last layer",
                        f->opt.lr);
        return -1;
    }
    f->window_n = (micro ? f->window_n : 0) + sums[0];
    if (!last) {
        f->step_s += taas_now() - t_batch;
        return 0;
    }
    /* each rank's gradient is its batch's mean: weighted by its share of the step's samples */
    f->steps++;
    f->last_lr = f->opt.lr;
    float w = f->accum > 1 ? (float)(bs / f->window_n) : (float)((double)n / sums[0]);
    if (f->engine->ops->update(f->engine, w, f->coll, &f->opt, (long)f->steps, err)) return -1;
    f->step_s += taas_now() - t_batch;
    if (f->has_sched && f->sched_per_step) return sched_step(f, err);
    return 0;
}

/* Validation on this rank's share of the validate loader, summed over the ranks. */
static int validate(taas_fit *f, long long epoch, double *loss, double *acc, taas_error *err) {
    double sums[3] = {0, 0, 0};  /* loss x samples, right, samples */
    taas_train_loader *l = &f->val;
    /* every rank takes rank 0's BatchNorm running statistics, as DDP's broadcast_buffers does
     * before each forward: the ranks' validation then measures the model that is saved */
    if (f->engine->ops->share_stats(f->engine, f->coll, err)) return -1;
    if (!f->cfg.streamed_val && epoch > 0) {
        block_stop_signals(1);
        int rc = taas_train_loader_restart(l, json_object_get(f->job, "validate"), (uint64_t)f->seed, 1, err);
        block_stop_signals(0);
        if (rc) return -1;
    }
    uint64_t e = f->cfg.streamed_val ? (uint64_t)epoch : 0, W = (uint64_t)f->coll->world;
    for (uint64_t s = 0; s < l->steps; s++) {
        uint64_t k = s * W + (uint64_t)f->coll->rank;
        if (taas_sampler_item(l->sampler, e, k, f->idx) == 0) continue;
        taas_batch *b = NULL;
        int rc = f->src_val.take(f->src_val.ctx, e, k, &b, err);
        if (rc) return rc < 0 ? -1 : 0;
        double loss_sum, right;
        if (check_shape(&f->val, b, "validate", err) || f->engine->ops->eval(f->engine, b, &loss_sum, &right, err)) {
            taas_batch_free(b);
            return -1;
        }
        sums[0] += loss_sum;
        sums[1] += right;
        sums[2] += b->n;
        taas_batch_free(b);
    }
    if (f->coll->sum_f64(f->coll, sums, 3, err)) return -1;
    *loss = sums[2] > 0 ? sums[0] / sums[2] : NAN;
    *acc = sums[2] > 0 ? sums[1] / sums[2] : NAN;
    return 0;
}

/* Text from the model as it is after epoch e, nanoGPT's sample at each evaluation: up to 200
 * bytes after a newline at temperature 0.8 among the 200 likeliest, seeded by (seed, epoch),
 * on the host, within taas_sample_budget (seconds on a few cores; none for GPT-2 small at
 * block 1024). NULL when there is none: a log line says why, and training goes on. */
static char *text_sample(taas_fit *f, long long e) {
    enum { NEW = 200 };
    long long n = taas_sample_budget(f->tokens, f->nparams, NEW);
    int64_t seq[1 + NEW] = {'\n'};
    size_t len = 1;
    taas_error err;
    taas_error_clear(&err);
    taas_model *m = n < 20 ? NULL : f->engine->ops->host_model(f->engine, &err);
    if (n < 20) snprintf(err.message, sizeof err.message, "the model is too large to sample on the host each epoch "
                         "(generate() samples it)");
    if (m && taas_sample_tokens(m, seq, &len, n, 0.8, 200, (uint64_t)f->seed * 1000003u + (uint64_t)e, &err) == 0) {
        char bytes[NEW];
        for (size_t i = 1; i < len; i++) bytes[i - 1] = (char)(seq[i] < 256 ? seq[i] : '?');
        return taas_utf8_sanitize(bytes, len - 1, NULL);
    }
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("log"));
    json_object_set_new(j, "text", json_sprintf("no text sample after epoch %lld: %s", e + 1, err.message));
    emit(f, j);
    f->text_sample = n >= 20;  /* said once when it is the model's size */
    return NULL;
}

/* The end of epoch e (0-based): validation, the epoch line, the checksum, the scheduler.
 * samples: the epoch's; trained: of which this run's, in secs. */
static int end_epoch(taas_fit *f, long long e, uint64_t steps, double loss_sum, double samples, double trained,
                     double secs, uint64_t checksum, taas_error *err) {
    double vl = 0, va = 0;
    if (f->has_val && validate(f, e, &vl, &va, err)) return -1;
    uint64_t sum = checksum;
    if (f->coll->sum_u64(f->coll, &sum, 1, err)) return -1;
    char hex[24];
    snprintf(hex, sizeof hex, "0x%016llx", (unsigned long long)sum);
    json_array_append_new(f->checksums, json_pack("{s:I, s:I, s:s}", "epoch", (json_int_t)(e + 1), "samples",
                                                  (json_int_t)samples, "checksum", hex));
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("epoch"));
    json_object_set_new(j, "epoch", json_integer(e + 1));
    json_object_set_new(j, "train_loss", json_real(samples > 0 ? loss_sum / samples : NAN));
    json_object_set_new(j, "val_loss", f->has_val ? json_real(vl) : json_null());
    json_object_set_new(j, "val_accuracy", f->has_val ? json_real(va) : json_null());
    json_object_set_new(j, "time_s", json_real(secs));
    /* this run's samples in this run's time: a resumed epoch's first part was trained before */
    json_object_set_new(j, "samples_per_s", json_real(secs > 0 ? trained / secs : 0));
    if (f->tokens) {  /* a language model's figures: per token */
        json_object_set_new(j, "tokens_per_s", json_real(secs > 0 ? trained * f->tokens / secs : 0));
        if (f->has_val) json_object_set_new(j, "val_perplexity", json_real(exp(vl)));
    }
    json_object_set_new(j, "steps", json_integer((json_int_t)steps));  /* fewer than an epoch's when units cut it */
    json_object_set_new(j, "lr", json_real(f->last_lr));  /* of its last step, as the scheduler set it */
    char *text = f->text_sample ? text_sample(f, e) : NULL;
    if (text) json_object_set_new(j, "sample", json_string(text));
    free(text);
    json_array_append(f->history, j);
    emit(f, j);
    if (f->has_sched && !f->sched_per_step) return sched_step(f, err);
    return 0;
}

/* Steps of the whole job: every epoch's, but for the units limit, which cuts in (epoch, k)
 * order; a step exists when rank 0's item has samples. */
static long long total_steps(taas_fit *f) {
    uint64_t W = (uint64_t)f->coll->world, steps = f->train.steps;
    long long n = 0;
    for (long long e = 0; e < f->epochs && !taas_sampler_done(f->train.sampler, (uint64_t)e); e++) {
        if (taas_sampler_item(f->train.sampler, (uint64_t)e, (steps - 1) * W, f->idx)) {
            n += (long long)steps;  /* the last step is there: all of them are */
            continue;
        }
        uint64_t lo = 0, hi = steps - 1;  /* the first step without samples */
        while (lo < hi) {
            uint64_t mid = (lo + hi) / 2;
            if (taas_sampler_item(f->train.sampler, (uint64_t)e, mid * W, f->idx)) lo = mid + 1;
            else hi = mid;
        }
        n += (long long)lo;
    }
    return n;
}

/* Every rank's time waiting for batches and in steps, added up (rank 0 reports them). */
static int sum_times(taas_fit *f, taas_error *err) {
    double t[3] = {f->wait_s, f->step_s, f->first_wait_s};
    if (f->coll->sum_f64(f->coll, t, 3, err)) return -1;
    f->wait_all = t[0];
    f->step_all = t[1];
    f->first_wait_all = t[2];
    return 0;
}

int taas_fit_run(taas_fit *f, long long *step_at, taas_error *err) {
    uint64_t W = (uint64_t)f->coll->world, r = (uint64_t)f->coll->rank;
    uint64_t total = (uint64_t)f->epochs * f->train.per_epoch;
    if (f->units && (uint64_t)f->units < total) total = (uint64_t)f->units;
    json_t *start = json_object();
    json_object_set_new(start, "event", json_string("start"));
    json_object_set_new(start, "epochs", json_integer(f->epochs));
    json_object_set_new(start, "steps_per_epoch", json_integer((json_int_t)f->train.steps));
    json_object_set_new(start, "samples", json_integer((json_int_t)total));
    /* validated each epoch: the kernel's estimate of the job's length counts them */
    json_object_set_new(start, "val_samples", json_integer(f->has_val ? (json_int_t)f->val.per_epoch : 0));
    json_object_set_new(start, "params", json_integer((json_int_t)f->nparams));
    json_object_set_new(start, "engine", json_string(f->engine->name));
    json_object_set_new(start, "ranks", json_integer((json_int_t)W));
    json_object_set_new(start, "total_steps", json_integer((json_int_t)total_steps(f)));  /* batches */
    json_object_set_new(start, "accumulate", json_integer(f->accum));
    if (f->steps > 0) {  /* resumed: where it stands */
        json_object_set_new(start, "resumed", json_pack("{s:I, s:I, s:I}", "epoch", (json_int_t)f->epoch0 + 1, "step",
                                                        (json_int_t)f->step0, "steps", (json_int_t)f->steps));
        json_object_set_new(start, "history", json_deep_copy(f->history));
    }
    emit(f, start);
    *step_at = f->steps;
    f->ckpt_last = taas_now();
    for (long long e = f->epoch0; e < f->epochs && !taas_sampler_done(f->train.sampler, (uint64_t)e); e++) {
        int first = e == f->epoch0;
        /* samples: the epoch's, for its loss and checksum; trained: this run's, for its rate */
        double loss_sum = first ? f->loss0 : 0, samples = first ? f->samples0 : 0, trained = 0, t0 = taas_now(),
               last_line = 0, wait0 = f->wait_s;
        uint64_t checksum = first && r == 0 ? f->checksum0 : 0, s;
        for (s = first ? (uint64_t)f->step0 : 0; s < f->train.steps; s++) {
            /* a step exists when rank 0's item has samples: items fill in k order */
            if (taas_sampler_item(f->train.sampler, (uint64_t)e, s * W, f->idx) == 0) break;
            /* checkpoints fall between optimizer steps, at the start of one's batches */
            long long micro = (long long)s % f->accum;
            if (f->ckpt_due && micro == 0 && take_checkpoint(f, e, (long long)s, loss_sum, samples, checksum, err))
                return -1;
            size_t n = taas_sampler_item(f->train.sampler, (uint64_t)e, s * W + r, f->idx);
            int stopped = 0;
            double loss = 0, n_all = 0;
            *step_at = f->steps + 1;
            /* the item an engine may take ahead: the next step's, when it exists and has samples here */
            f->next_k = UINT64_MAX;
            if (s + 1 < f->train.steps && taas_sampler_item(f->train.sampler, (uint64_t)e, (s + 1) * W, f->idx) &&
                taas_sampler_item(f->train.sampler, (uint64_t)e, (s + 1) * W + r, f->idx))
                f->next_k = (s + 1) * W + r;
            int last = micro == f->accum - 1 || s + 1 == f->train.steps ||
                       !taas_sampler_item(f->train.sampler, (uint64_t)e, (s + 1) * W, f->idx);
            if (step(f, e, s * W + r, n, micro, last, &stopped, &loss, &n_all, &checksum, err)) return -1;
            if (stopped) {
                f->interrupted = 1;  /* an epoch cut short gets no epoch line: its loss covers part of it */
                return sum_times(f, err);
            }
            loss_sum += loss * n_all;
            samples += n_all;
            trained += n_all;
            double now = taas_now();
            if (now - last_line >= 0.2) {  /* at most ~5 step lines a second */
                last_line = now;
                json_t *j = json_object();
                json_object_set_new(j, "event", json_string("step"));
                json_object_set_new(j, "epoch", json_integer(e + 1));
                json_object_set_new(j, "step", json_integer((json_int_t)s + 1));
                json_object_set_new(j, "steps", json_integer((json_int_t)f->train.steps));
                json_object_set_new(j, "loss", json_real(loss));
                json_object_set_new(j, "samples_per_s", json_real(now > t0 ? trained / (now - t0) : 0));
                if (f->tokens)
                    json_object_set_new(j, "tokens_per_s", json_real(now > t0 ? trained * f->tokens / (now - t0) : 0));
                json_object_set_new(j, "wait", json_real(now > t0 ? (f->wait_s - wait0) / (now - t0) : 0));
                /* this rank's wait since its first batch, and its steps, so far: the kernel
                 * sizes a loader pool by the wait over a window of steps */
                json_object_set_new(j, "wait_s", json_real(f->wait_s - f->first_wait_s));
                json_object_set_new(j, "steps_done", json_integer(f->steps));
                emit(f, j);
            }
        }
        *step_at = f->steps;
        if (end_epoch(f, e, s, loss_sum, samples, trained, taas_now() - t0, checksum, err)) return -1;
        /* the next epoch's start, when there is one; a checkpoint due at the last step waits
         * for the epoch's end, so that it holds the epoch's validation and history line */
        int more = e + 1 < f->epochs && !taas_sampler_done(f->train.sampler, (uint64_t)e + 1);
        if (more && (f->ckpt_due || f->ckpt_every < 0) && take_checkpoint(f, e + 1, 0, 0, 0, 0, err)) return -1;
        f->ckpt_due = 0;
    }
    return sum_times(f, err);
}

json_t *taas_fit_done(const taas_fit *f) {
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("done"));
    json_object_set_new(j, "steps", json_integer(f->steps));
    json_object_set_new(j, "history", json_deep_copy(f->history));
    json_object_set_new(j, "checksums", json_deep_copy(f->checksums));
    json_object_set_new(j, "interrupted", json_boolean(f->interrupted));
    /* every rank's: the time waiting for batches (of which for the first), and in steps */
    json_object_set_new(j, "wait_s", json_real(f->wait_all));
    json_object_set_new(j, "first_wait_s", json_real(f->first_wait_all));
    json_object_set_new(j, "step_s", json_real(f->step_all));
    /* rank 0's checkpoints of this run (the others wait for it meanwhile) */
    json_object_set_new(j, "checkpoints", json_integer(f->ckpt_n));
    json_object_set_new(j, "checkpoint_s", json_real(f->ckpt_s));
    return j;
}

int taas_fit_save(const taas_fit *f, const char *path, taas_error *err) {
    return f->engine->ops->save(f->engine, path, err);
}
