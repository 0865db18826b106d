/* Checkpoints as safetensors files (checkpoint.h). */
#include "checkpoint.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "cpu.h"
#include "errnames.h"
#include "safetensors.h"

/* A trainable parameter: one the optimizer has state for (the first nparams floats). */
static int trains(const taas_checkpoint_bufs *b, const taas_param_entry *e) {
    return e->home == TAAS_T_PARAM && e->offset < b->nparams;
}

/* The model's tensors, then each trainable tensor's optimizer parts: the table to write or
 * read. Keys of the optimizer rows are malloc'd into *keys (one block). NULL when out of
 * memory. */
static taas_st_tensor *table_of(const taas_checkpoint_bufs *b, const taas_optim_config *opt, size_t *n,
                                char **keys) {
    const char *parts[3];
    int nparts = taas_optim_state_names(opt, parts);
    size_t nparam = 0, keylen = 0;
    for (size_t i = 0; i < b->ntable; i++)
        if (trains(b, &b->table[i])) {
            nparam++;
            keylen += strlen(b->table[i].key) + strlen(TAAS_ST_OPTIMIZER_PREFIX) + 20;
        }
    size_t rows = b->ntable + nparam * (size_t)nparts;
    taas_st_tensor *t = taas_param_table_tensors(b->table, b->ntable, b->params, b->stats, b->counters);
    taas_st_tensor *all = t ? realloc(t, (rows ? rows : 1) * sizeof *t) : NULL;
    char *kb = malloc(keylen * (size_t)nparts + 1);
    if (!all || !kb) {
        free(all ? all : t);
        free(kb);
        return NULL;
    }
    size_t r = b->ntable;
    char *at = kb;
    for (int p = 0; p < nparts; p++)
        for (size_t i = 0; i < b->ntable; i++) {
            const taas_param_entry *e = &b->table[i];
            if (!trains(b, e)) continue;
            taas_st_tensor *o = &all[r++];
            *o = all[i];  /* the parameter's dtype and shape */
            int w = sprintf(at, "%s%s.%s", TAAS_ST_OPTIMIZER_PREFIX, e->key, parts[p]);
            o->key = at;
            at += w + 1;
            o->data = b->state ? (void *)(b->state + (size_t)p * b->nparams + e->offset) : NULL;
        }
    *n = rows;
    *keys = kb;
    return all;
}

int taas_checkpoint_write(const char *path, const taas_checkpoint_bufs *b, const taas_optim_config *opt,
                          const json_t *meta, taas_error *err) {
    size_t n;
    char *keys = NULL;
    taas_st_tensor *t = table_of(b, opt, &n, &keys);
    char *text = json_dumps(meta, JSON_COMPACT | JSON_REAL_PRECISION(17));
    int rc;
    if (!t || !text) {
        rc = taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the checkpoint");
    } else {
        const taas_st_meta m[] = {{"format", "pt"}, {TAAS_ST_CHECKPOINT_KEY, text}};
        rc = taas_safetensors_write(path, t, n, m, 2, err);
    }
    free(text);
    free(t);
    free(keys);
    return rc;
}

json_t *taas_checkpoint_meta(const char *path, taas_error *err) {
    json_t *md;
    if (taas_safetensors_metadata(path, &md, err)) return NULL;
    const char *text = json_string_value(json_object_get(md, TAAS_ST_CHECKPOINT_KEY));
    json_error_t je;
    json_t *meta = text ? json_loads(text, JSON_REJECT_DUPLICATES, &je) : NULL;
    json_decref(md);
    if (!text) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s holds weights but is not a checkpoint", path);
        taas_error_hint(err, "resume= takes a checkpoint a fit wrote (its job folder's checkpoint-*.safetensors); "
                             "to start from weights, load() them into the model and fit it");
        return NULL;
    }
    if (!json_is_object(meta) || json_integer_value(json_object_get(meta, "version")) != 1) {
        json_decref(meta);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: its checkpoint record is damaged or of another version",
                       path);
        taas_error_hint(err, "give a checkpoint written by this version of taas");
        return NULL;
    }
    return meta;
}

int taas_checkpoint_read(const char *path, const taas_checkpoint_bufs *b, const taas_optim_config *opt,
                         json_t **meta, taas_error *err) {
    *meta = NULL;
    json_t *m = taas_checkpoint_meta(path, err);
    if (!m) return -1;
    size_t n;
    char *keys = NULL;
    taas_st_tensor *t = table_of(b, opt, &n, &keys);
    int rc = t ? taas_safetensors_read(path, t, n, err)
               : taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the checkpoint");
    free(t);
    free(keys);
    if (rc) {
        json_decref(m);
        return -1;
    }
    *meta = m;
    return 0;
}

/* ---- the record's check ---- */

/* The fields of a version 1 record (docs/jobspec.md), in the order they are checked. */
static const char *const FIELDS[] = {"version", "epochs", "epoch", "steps_per_epoch", "step", "steps", "world",
                                     "kernels", "seed", "units", "batch_size", "optimizer", "lr", "momentum",
                                     "beta1", "scheduler", "epoch_loss_sum", "epoch_samples", "epoch_checksum",
                                     "history", "checksums", "accumulate"};

typedef struct rec_check {
    const char *name;   /* the file, as the user named it */
    taas_error *err;
} rec_check;

/* A field (field: its name, history[2].epoch for one inside) that is not what it must be. */
static int refuse(const rec_check *c, const char *field, const json_t *v, const char *want) {
    char shown[48] = "missing";
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (text) snprintf(shown, sizeof shown, "%s", text);
    if (text && strlen(text) >= sizeof shown) memcpy(shown + sizeof shown - 4, "...", 4);  /* a long one, cut */
    free(text);
    taas_error_set(c->err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the checkpoint record's \"%s\" is %s; it must be %s",
                   c->name, field, shown, want);
    taas_error_hint(c->err, "the record was changed or damaged: resume from another checkpoint of the fit (its job "
                            "folder keeps the last), or start the fit again");
    return -1;
}

/* One of the numbers that make the batches or the update differs from the fit's. */
static int differs(const rec_check *c, const char *what, long long was, long long now) {
    taas_error_set(c->err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the checkpoint was made with %s %lld; this fit has %lld",
                   c->name, what, was, now);
    taas_error_hint(c->err, "resume with the fit's arguments and #pragma taas line of the run that wrote the "
                            "checkpoint");
    return -1;
}

static int rec_int(const rec_check *c, const json_t *o, const char *field, const char *key, long long lo,
                   long long hi, long long *out) {
    const json_t *v = json_object_get(o, key);
    char want[96];
    if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi) {
        *out = (long long)json_integer_value(v);
        return 0;
    }
    snprintf(want, sizeof want, "a whole number from %lld to %lld", lo, hi);
    return refuse(c, field, v, want);
}

/* A finite number from lo, below hi when below (else up to hi). */
static int rec_num(const rec_check *c, const json_t *o, const char *field, const char *key, double lo, double hi,
                   int below, double *out) {
    const json_t *v = json_object_get(o, key);
    double x = json_number_value(v);
    if (json_is_number(v) && isfinite(x) && x >= lo && (below ? x < hi : x <= hi)) {
        *out = x;
        return 0;
    }
    char want[96];
    if (isinf(lo) && isinf(hi)) snprintf(want, sizeof want, "a finite number");
    else if (isinf(hi)) snprintf(want, sizeof want, "a number >= %g", lo);
    else snprintf(want, sizeof want, "a number from %g to %g%s", lo, hi, below ? " (excluded)" : "");
    return refuse(c, field, v, want);
}

/* An epoch's checksum as the fit writes it: 0x and 16 hex digits; 0 when no sample was summed. */
static int rec_sum(const rec_check *c, const json_t *o, const char *field, const char *key, double samples) {
    const json_t *v = json_object_get(o, key);
    const char *s = json_string_value(v);
    int ok = s && strlen(s) == 18 && s[0] == '0' && s[1] == 'x' && strspn(s + 2, "0123456789abcdef") == 16;
    if (!ok) return refuse(c, field, v, "\"0x\" and 16 hex digits (the epoch's checksum)");
    if (samples == 0 && strcmp(s + 2, "0000000000000000") != 0)
        return refuse(c, field, v, "0x0000000000000000: no sample of the epoch was trained yet");
    return 0;
}

/* Samples of a whole number, at most max. */
static int rec_samples(const rec_check *c, const json_t *o, const char *field, const char *key, double max,
                       double *out) {
    if (rec_num(c, o, field, key, 0, max, 0, out)) return -1;
    if (*out == floor(*out)) return 0;
    return refuse(c, field, json_object_get(o, key), "a whole number of samples");
}

/* The epochs done: one line each, as the fit's History has them. */
static int rec_history(const rec_check *c, const json_t *m, long long epoch, long long spe) {
    const json_t *h = json_object_get(m, "history");
    char want[64], field[64];
    snprintf(want, sizeof want, "a list of the %lld epoch%s done", epoch, epoch == 1 ? "" : "s");
    if (!json_is_array(h) || (long long)json_array_size(h) != epoch) return refuse(c, "history", h, want);
    static const char *const KEYS[] = {"epoch", "train_loss", "val_loss", "val_accuracy", "time_s", "samples_per_s",
                                       "steps"};
    size_t i;
    const json_t *e;
    json_array_foreach(h, i, e) {
        snprintf(field, sizeof field, "history[%zu]", i);
        if (!json_is_object(e)) return refuse(c, field, e, "an epoch's line (an object)");
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)e, k, v) {
            size_t j = 0;
            while (j < sizeof KEYS / sizeof *KEYS && strcmp(KEYS[j], k)) j++;
            snprintf(field, sizeof field, "history[%zu].%.20s", i, k);
            if (j == sizeof KEYS / sizeof *KEYS) return refuse(c, field, v, "left out: an epoch's line has no such field");
        }
        long long n;
        double x;
        snprintf(field, sizeof field, "history[%zu].epoch", i);
        if (rec_int(c, e, field, "epoch", (long long)i + 1, (long long)i + 1, &n)) return -1;
        snprintf(field, sizeof field, "history[%zu].steps", i);
        if (rec_int(c, e, field, "steps", 0, spe, &n)) return -1;
        /* a loss may be below 0 (NLLLoss of outputs that are no log-probabilities); nan is left out */
        static const char *const NUMS[] = {"train_loss", "val_loss", "val_accuracy", "time_s", "samples_per_s"};
        for (size_t j = 0; j < sizeof NUMS / sizeof *NUMS; j++) {
            const json_t *x1 = json_object_get(e, NUMS[j]);
            if (!x1 || ((j == 1 || j == 2) && json_is_null(x1))) continue;  /* without validation */
            snprintf(field, sizeof field, "history[%zu].%s", i, NUMS[j]);
            if (rec_num(c, e, field, NUMS[j], j < 2 ? -INFINITY : 0, j == 2 ? 1 : INFINITY, 0, &x)) return -1;
        }
    }
    return 0;
}

/* The checksums of the epochs done: their samples and the sum of their words. */
static int rec_checksums(const rec_check *c, const json_t *m, long long epoch, double per_epoch) {
    const json_t *l = json_object_get(m, "checksums");
    char want[64], field[64];
    snprintf(want, sizeof want, "a list of the %lld epoch%s done", epoch, epoch == 1 ? "" : "s");
    if (!json_is_array(l) || (long long)json_array_size(l) != epoch) return refuse(c, "checksums", l, want);
    size_t i;
    const json_t *e;
    json_array_foreach(l, i, e) {
        snprintf(field, sizeof field, "checksums[%zu]", i);
        if (!json_is_object(e) || json_object_size(e) != 3)
            return refuse(c, field, e, "an epoch's {\"epoch\", \"samples\", \"checksum\"}");
        long long n;
        double samples;
        snprintf(field, sizeof field, "checksums[%zu].epoch", i);
        if (rec_int(c, e, field, "epoch", (long long)i + 1, (long long)i + 1, &n)) return -1;
        snprintf(field, sizeof field, "checksums[%zu].samples", i);
        if (rec_samples(c, e, field, "samples", per_epoch, &samples)) return -1;
        snprintf(field, sizeof field, "checksums[%zu].checksum", i);
        if (rec_sum(c, e, field, "checksum", samples)) return -1;
    }
    return 0;
}

int taas_checkpoint_check(const json_t *m, const taas_checkpoint_fit *fit, const char *name, taas_error *err) {
    const rec_check cc = {name, err}, *c = &cc;
    if (!json_is_object(m)) return refuse(c, "record", m, "an object");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        size_t i = 0;
        while (i < sizeof FIELDS / sizeof *FIELDS && strcmp(FIELDS[i], k)) i++;
        char field[40];
        snprintf(field, sizeof field, "%.32s", k);
        if (i == sizeof FIELDS / sizeof *FIELDS) return refuse(c, field, v, "left out: a checkpoint has no such field");
    }
    long long version = 0, epochs = 0, epoch = 0, spe = 0, step = 0, steps = 0, world = 0, seed = 0, units = 0, batch = 0;
    if (rec_int(c, m, "version", "version", 1, 1, &version) ||
        rec_int(c, m, "epochs", "epochs", 1, TAAS_MAX_EPOCHS, &epochs) ||
        rec_int(c, m, "epoch", "epoch", 0, epochs - 1, &epoch) ||
        rec_int(c, m, "steps_per_epoch", "steps_per_epoch", 1, INT64_MAX / TAAS_MAX_EPOCHS, &spe) ||
        rec_int(c, m, "step", "step", 0, spe - 1, &step) ||
        rec_int(c, m, "steps", "steps", 0, epoch * spe + step, &steps) ||
        rec_int(c, m, "world", "world", 1, 65536, &world) ||
        rec_int(c, m, "seed", "seed", 0, INT64_MAX, &seed) ||
        rec_int(c, m, "units", "units", 0, INT64_MAX, &units) ||
        rec_int(c, m, "batch_size", "batch_size", 1, INT32_MAX, &batch))
        return -1;
    /* gradient accumulation: absent before it was, 1; checkpoints fall between optimizer steps */
    long long acc = 1;
    if (json_object_get(m, "accumulate") && rec_int(c, m, "accumulate", "accumulate", 1, 1 << 20, &acc)) return -1;
    if (step % acc)
        return refuse(c, "step", json_object_get(m, "step"), "a multiple of accumulate: a checkpoint falls between "
                                                            "optimizer steps");
    const json_t *kv = json_object_get(m, "kernels");
    if (taas_cpu_parse(json_string_value(kv)) < 0)
        return refuse(c, "kernels", kv, "the kernel set the fit ran: \"avx512\", \"avx2\" or \"generic\"");
    const json_t *ov = json_object_get(m, "optimizer");
    const char *opt = json_string_value(ov);
    static const char *const OPTIMS[] = {"SGD", "Adam", "AdamW", "Adadelta", "RMSprop"};
    size_t o = 0;
    while (opt && o < sizeof OPTIMS / sizeof *OPTIMS && strcmp(OPTIMS[o], opt)) o++;
    if (!opt || o == sizeof OPTIMS / sizeof *OPTIMS)
        return refuse(c, "optimizer", ov, "the optimizer's name: SGD, Adam, AdamW, Adadelta or RMSprop");
    double lr = 0, momentum = 0, beta1 = 0, loss_sum = 0, samples = 0;
    /* the learning rate and momentum at the step: a scheduler's, or the optimizer's */
    if (rec_num(c, m, "lr", "lr", 0, INFINITY, 0, &lr) || rec_num(c, m, "momentum", "momentum", 0, INFINITY, 0, &momentum) ||
        rec_num(c, m, "beta1", "beta1", 0, 1, 1, &beta1))
        return -1;
    const json_t *sc = json_object_get(m, "scheduler");
    if (!json_is_null(sc)) {
        long long last;
        double x;
        if (!json_is_object(sc) || json_object_size(sc) != 3)
            return refuse(c, "scheduler", sc, "null or the scheduler's {\"last_epoch\", \"lr\", \"momentum\"}");
        /* an epoch's scheduler counts epochs, OneCycleLR steps */
        if (rec_int(c, sc, "scheduler.last_epoch", "last_epoch", 0, epoch > steps ? epoch : steps, &last) ||
            rec_num(c, sc, "scheduler.lr", "lr", 0, INFINITY, 0, &x) ||
            rec_num(c, sc, "scheduler.momentum", "momentum", 0, INFINITY, 0, &x))
            return -1;
    }
    /* an epoch's samples: at most a batch per rank and step */
    double per_epoch = (double)spe * (double)world * (double)batch;
    if (rec_num(c, m, "epoch_loss_sum", "epoch_loss_sum", -INFINITY, INFINITY, 0, &loss_sum) ||
        rec_samples(c, m, "epoch_samples", "epoch_samples", (double)step * (double)world * (double)batch, &samples) ||
        rec_sum(c, m, "epoch_checksum", "epoch_checksum", samples) || rec_history(c, m, epoch, spe) ||
        rec_checksums(c, m, epoch, per_epoch))
        return -1;
    if (samples == 0 && loss_sum != 0) return refuse(c, "epoch_loss_sum", json_object_get(m, "epoch_loss_sum"),
                                                     "0: no sample of the epoch was trained yet");
    /* the fit that resumes it: the same batches, in the same order, with the same update */
    if (fit->world >= 0 && world != fit->world) return differs(c, "ranks (--gpus)", world, fit->world);
    if (fit->seed >= 0 && seed != fit->seed) return differs(c, "seed", seed, fit->seed);
    if (fit->accumulate > 0 && acc != fit->accumulate) return differs(c, "accumulate", acc, fit->accumulate);
    if (fit->batch_size >= 0 && batch != fit->batch_size) return differs(c, "batch_size", batch, fit->batch_size);
    if (fit->steps_per_epoch >= 0 && spe != fit->steps_per_epoch)
        return differs(c, "steps per epoch", spe, fit->steps_per_epoch);
    if (fit->optimizer && strcmp(opt, fit->optimizer) != 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the checkpoint's optimizer is %s; this fit's is %s", name,
                       opt, fit->optimizer);
        taas_error_hint(err, "resume with optimizer=%s(...) as the run that wrote the checkpoint had", opt);
        return -1;
    }
    if (fit->scheduler >= 0 && fit->scheduler != !json_is_null(sc)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the checkpoint was made %s a scheduler; this fit has %s",
                       name, fit->scheduler ? "without" : "with", fit->scheduler ? "one" : "none");
        taas_error_hint(err, "resume with the scheduler of the run that wrote the checkpoint");
        return -1;
    }
    if (fit->epochs >= 0 && epoch >= fit->epochs) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the checkpoint is at epoch %lld (%lld done); this fit has "
                       "%lld epoch%s, so nothing is left to train", name, epoch + 1, epoch, fit->epochs,
                       fit->epochs == 1 ? "" : "s");
        taas_error_hint(err, "give fit() more epochs than the checkpoint has done (epochs=%lld trains the rest of the "
                             "run that wrote it)", epochs);
        return -1;
    }
    return 0;
}
