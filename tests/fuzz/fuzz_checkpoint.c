/* A checkpoint's record (workers/train/checkpoint.h): the JSON a resumed fit trusts for its
 * position, rates, sums and history. The input is the record's text: taas_checkpoint_check
 * runs on it against a fixed fit (Adam with a scheduler, 2 ranks, seed 11, 2 epochs of 50
 * steps of 100 samples a rank) and against one the caller knows nothing of, as the kernel
 * checks it; then the record goes into a checkpoint file of a fixed model and is read back
 * through taas_checkpoint_meta and checked again. A record the check passes must hold what
 * the fit loop reads from it: a field out of its range there aborts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fuzz_util.h"
#include "safetensors.h"

static const taas_checkpoint_fit FIT = {"Adam", 1, 2, 11, 2, 100, 50};
static const taas_checkpoint_fit UNKNOWN = {NULL, -1, -1, -1, -1, -1, -1};

static void must(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "fuzz_checkpoint: a record the check passed has %s\n", what);
    abort();
}

static long long integer(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    must(json_is_integer(v), k);
    return (long long)json_integer_value(v);
}

static double number(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    must(json_is_number(v) && isfinite(json_number_value(v)), k);
    return json_number_value(v);
}

/* What fit_loop.c's resume() and taas_fit_run take from a record the check passed. */
static void holds_what_resume_reads(const json_t *m, const taas_checkpoint_fit *fit) {
    long long epoch = integer(m, "epoch"), step = integer(m, "step"), steps = integer(m, "steps");
    long long spe = integer(m, "steps_per_epoch"), world = integer(m, "world"), batch = integer(m, "batch_size");
    must(epoch >= 0 && epoch < integer(m, "epochs"), "an epoch beyond its epochs");
    must(step >= 0 && step < spe, "a step beyond its epoch");
    must(steps >= 0 && steps <= epoch * spe + step, "more steps than its position");
    if (fit->epochs >= 0) must(epoch < fit->epochs, "an epoch beyond the fit's");
    if (fit->steps_per_epoch >= 0) must(spe == fit->steps_per_epoch, "another steps per epoch");
    must(number(m, "lr") >= 0 && number(m, "momentum") >= 0, "a negative lr or momentum");
    must(number(m, "beta1") >= 0 && number(m, "beta1") < 1, "a beta1 outside [0, 1)");
    double samples = number(m, "epoch_samples");
    number(m, "epoch_loss_sum");
    must(samples >= 0 && samples <= (double)step * (double)world * (double)batch, "more samples than steps");
    const char *sum = json_string_value(json_object_get(m, "epoch_checksum"));
    must(sum && strlen(sum) == 18 && !strncmp(sum, "0x", 2), "a checksum that is no 0x and 16 digits");
    must(json_array_size(json_object_get(m, "history")) == (size_t)epoch, "a history of another length");
    must(json_array_size(json_object_get(m, "checksums")) == (size_t)epoch, "checksums of another length");
    const json_t *sc = json_object_get(m, "scheduler");
    if (fit->scheduler >= 0) must(fit->scheduler == json_is_object(sc), "another scheduler");
    if (json_is_object(sc)) {
        must(integer(sc, "last_epoch") >= 0, "a negative last_epoch");
        number(sc, "lr");
        number(sc, "momentum");
    }
}

static void check(const json_t *m, const char *how) {
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_checkpoint_check(m, &FIT, "c.safetensors", &err);
    fz_say("%s, the fit: %s", how, rc ? err.message : "ok");
    if (rc == 0) holds_what_resume_reads(m, &FIT);
    taas_error_clear(&err);
    rc = taas_checkpoint_check(m, &UNKNOWN, "c.safetensors", &err);
    fz_say("%s, a fit unknown: %s", how, rc ? err.message : "ok");
    if (rc == 0) holds_what_resume_reads(m, &UNKNOWN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *m = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (m) check(m, "the record");
    json_decref(m);
    /* the record as a checkpoint file holds it: a string of metadata (up to a NUL) */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    float w[12] = {0};
    int64_t count = 1;
    const taas_st_tensor t[] = {{"0.weight", TAAS_ST_F32, 2, {3, 4}, w}, {"0.bias", TAAS_ST_F32, 1, {3}, w},
                                {"1.num_batches_tracked", TAAS_ST_I64, 0, {0}, &count}};
    const taas_st_meta meta[] = {{"format", "pt"}, {TAAS_ST_CHECKPOINT_KEY, text}};
    const char *path = fz_path("c.safetensors");
    taas_error err;
    taas_error_clear(&err);
    if (taas_safetensors_write(path, t, sizeof t / sizeof *t, meta, 2, &err) == 0) {
        json_t *back = taas_checkpoint_meta(path, &err);
        fz_say("from the file: %s", back ? "a record" : err.message);
        if (back) check(back, "from the file");
        json_decref(back);
    }
    free(text);
    return 0;
}
