/* workers/train/checkpoint.c: a checkpoint holds the model's tensors, the optimizer's state
 * under torch.optim's part names and the fit's record; it comes back bit for bit, loads where
 * weights do, and every file that is not a checkpoint of this model and optimizer is refused
 * with its reason and nothing written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "model.h"
#include "safetensors.h"

#define SPEC "{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Flatten\"}," \
             "{\"type\":\"Linear\",\"in_features\":12,\"out_features\":5}," \
             "{\"type\":\"BatchNorm1d\",\"num_features\":5},{\"type\":\"ReLU\"}," \
             "{\"type\":\"Linear\",\"in_features\":5,\"out_features\":3}]}"

typedef struct fixture {
    taas_model *m;
    taas_optim_config adam;
    float *state;
    size_t nstate;
    char dir[64], path[128];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    json_error_t je;
    json_t *spec = json_loads(SPEC, 0, &je);
    taas_error err;
    f->m = taas_model_new(spec, 12, 0, 0, 7, &err);
    json_decref(spec);
    assert_non_null(f->m);
    taas_optim_config_default(&f->adam, TAAS_OPTIM_ADAM);
    f->adam.amsgrad = 1;
    f->nstate = taas_optim_state_floats(&f->adam, f->m->nparams);
    f->state = malloc(f->nstate * sizeof *f->state);
    for (size_t i = 0; i < f->nstate; i++) f->state[i] = (float)i * 0.25f - 3.0f;
    for (size_t i = 0; i < f->m->nstats; i++) f->m->stats[i] = (float)i + 0.5f;
    for (int i = 0; i < f->m->ncounters; i++) f->m->counters[i] = 41 + i;
    snprintf(f->dir, sizeof f->dir, "/tmp/taas-ckpt-test-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/c.safetensors", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char p[160];
    const char *names[] = {"c.safetensors", "w.safetensors", "x.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", f->dir, names[i]);
        unlink(p);
    }
    rmdir(f->dir);
    taas_model_free(f->m);
    free(f->state);
    free(f);
    return 0;
}

static taas_checkpoint_bufs bufs_of(taas_model *m, float *params, float *stats, int64_t *counters, float *state) {
    return (taas_checkpoint_bufs){m->table, m->ntable, m->nparams, params, stats, counters, state};
}

static void write_it(fixture *f) {
    taas_checkpoint_bufs b = bufs_of(f->m, f->m->params, f->m->stats, f->m->counters, f->state);
    json_t *meta = json_pack("{s:i, s:i, s:i, s:f}", "version", 1, "epoch", 1, "step", 7, "lr", 0.1 + 0.2);
    taas_error err;
    assert_int_equal(taas_checkpoint_write(f->path, &b, &f->adam, meta, &err), 0);
    json_decref(meta);
}

static void test_round_trip_bit_for_bit(void **state) {
    fixture *f = *state;
    write_it(f);
    float *p = calloc(f->m->nparams, sizeof *p), *s = calloc(f->m->nstats, sizeof *s);
    float *o = calloc(f->nstate, sizeof *o);
    int64_t *c = calloc((size_t)f->m->ncounters, sizeof *c);
    taas_checkpoint_bufs b = bufs_of(f->m, p, s, c, o);
    json_t *meta = NULL;
    taas_error err;
    assert_int_equal(taas_checkpoint_read(f->path, &b, &f->adam, &meta, &err), 0);
    assert_memory_equal(p, f->m->params, f->m->nparams * sizeof *p);
    assert_memory_equal(s, f->m->stats, f->m->nstats * sizeof *s);
    assert_memory_equal(c, f->m->counters, (size_t)f->m->ncounters * sizeof *c);
    assert_memory_equal(o, f->state, f->nstate * sizeof *o);
    assert_int_equal(json_integer_value(json_object_get(meta, "step")), 7);
    assert_true(json_real_value(json_object_get(meta, "lr")) == 0.1 + 0.2);  /* 17 digits: the same double */
    json_decref(meta);
    free(p), free(s), free(o), free(c);
}

static void test_names_are_torch_optims(void **state) {
    fixture *f = *state;
    write_it(f);
    /* the state of "1.weight" (Linear 12 -> 5) as exp_avg, exp_avg_sq, max_exp_avg_sq */
    float got[60];
    taas_st_tensor t = {"optimizer.1.weight.max_exp_avg_sq", TAAS_ST_F32, 2, {5, 12}, got};
    taas_error err;
    /* asked for by name, with the model's tensors left out: they are extra, and said so */
    assert_int_equal(taas_safetensors_read(f->path, &t, 1, &err), -1);
    assert_non_null(strstr(err.message, "unexpected keys '1.bias'"));
    assert_null(strstr(err.message, "'optimizer."));  /* the optimizer's keys are passed over */
    json_t *meta = taas_checkpoint_meta(f->path, &err);
    assert_non_null(meta);
    json_decref(meta);
}

static void test_a_checkpoint_loads_as_weights(void **state) {
    fixture *f = *state;
    write_it(f);
    taas_st_tensor *t = taas_param_table_tensors(f->m->table, f->m->ntable, NULL, NULL, NULL);
    taas_error err;
    assert_int_equal(taas_safetensors_read(f->path, t, f->m->ntable, &err), 0);
    free(t);
}

/* A frozen part has no optimizer state: the checkpoint holds state for the trainable
 * parameters only (the buffer's first ntrain floats), and reads back bit for bit. */
static void test_frozen_parameters_have_no_state(void **state) {
    fixture *f = *state;
    json_t *spec = json_loads(SPEC, 0, NULL);
    json_object_set_new(spec, "requires_grad", json_false());
    json_t *layers = json_object_get(spec, "layers");
    json_object_set_new(json_array_get(layers, json_array_size(layers) - 1), "requires_grad", json_true());
    taas_error err;
    taas_model *m = taas_model_new(spec, 12, 0, 0, 7, &err);
    json_decref(spec);
    assert_non_null(m);
    assert_int_equal(m->ntrain, 5 * 3 + 3);
    size_t n = taas_optim_state_floats(&f->adam, m->ntrain);
    float *st = malloc(n * sizeof *st), *back = calloc(n, sizeof *back), *p = calloc(m->nparams, sizeof *p);
    for (size_t i = 0; i < n; i++) st[i] = (float)i + 0.5f;
    taas_checkpoint_bufs b = {m->table, m->ntable, m->ntrain, m->params, m->stats, m->counters, st};
    json_t *meta = json_pack("{s:i}", "version", 1);
    assert_int_equal(taas_checkpoint_write(f->path, &b, &f->adam, meta, &err), 0);
    json_decref(meta);
    /* the file's header: the head's state, none for the frozen layers */
    FILE *fp = fopen(f->path, "rb");
    uint64_t hl = 0;
    assert_non_null(fp);
    assert_int_equal(fread(&hl, 8, 1, fp), 1);
    char *head = calloc(hl + 1, 1);
    assert_int_equal(fread(head, 1, hl, fp), hl);
    fclose(fp);
    json_t *h = json_loads(head, 0, NULL);
    assert_non_null(json_object_get(h, "optimizer.4.weight.exp_avg"));
    assert_non_null(json_object_get(h, "optimizer.4.bias.max_exp_avg_sq"));
    assert_null(json_object_get(h, "optimizer.1.weight.exp_avg"));
    assert_null(json_object_get(h, "optimizer.2.bias.exp_avg"));
    assert_non_null(json_object_get(h, "1.weight"));  /* the frozen weights themselves are there */
    json_decref(h);
    free(head);
    int64_t c[2];
    float s2[10];
    taas_checkpoint_bufs r = {m->table, m->ntable, m->ntrain, p, s2, c, back};
    json_t *meta2 = NULL;
    assert_int_equal(taas_checkpoint_read(f->path, &r, &f->adam, &meta2, &err), 0);
    assert_memory_equal(back, st, n * sizeof *st);
    assert_memory_equal(p, m->params, m->nparams * sizeof *p);
    json_decref(meta2);
    free(st), free(back), free(p);
    taas_model_free(m);
}

static void test_refusals(void **state) {
    fixture *f = *state;
    taas_error err;
    /* plain weights are no checkpoint */
    char w[160];
    snprintf(w, sizeof w, "%s/w.safetensors", f->dir);
    taas_st_tensor *t = taas_param_table_tensors(f->m->table, f->m->ntable, f->m->params, f->m->stats, f->m->counters);
    const taas_st_meta pt[] = {{"format", "pt"}};
    assert_int_equal(taas_safetensors_write(w, t, f->m->ntable, pt, 1, &err), 0);
    assert_null(taas_checkpoint_meta(w, &err));
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "holds weights but is not a checkpoint"));

    /* optimizer.* keys in a file that does not say it is a checkpoint are extra keys */
    char x[160];
    snprintf(x, sizeof x, "%s/x.safetensors", f->dir);
    float z[3] = {0, 0, 0};
    taas_st_tensor *more = realloc(t, (f->m->ntable + 1) * sizeof *t);
    assert_non_null(more);
    t = more;
    t[f->m->ntable] = (taas_st_tensor){"optimizer.4.bias.exp_avg", TAAS_ST_F32, 1, {3}, z};
    assert_int_equal(taas_safetensors_write(x, t, f->m->ntable + 1, pt, 1, &err), 0);
    taas_st_tensor *check = taas_param_table_tensors(f->m->table, f->m->ntable, NULL, NULL, NULL);
    assert_int_equal(taas_safetensors_read(x, check, f->m->ntable, &err), -1);
    assert_non_null(strstr(err.message, "unexpected keys 'optimizer.4.bias.exp_avg'"));
    free(check);
    free(t);

    /* a checkpoint of another optimizer: its parts are missing, nothing is written */
    write_it(f);
    taas_optim_config sgd;
    taas_optim_config_default(&sgd, TAAS_OPTIM_SGD);
    sgd.momentum = 0.9;
    float *o = malloc(f->m->nparams * sizeof *o);
    memset(o, 0x5A, f->m->nparams * sizeof *o);
    float before = o[0];
    taas_checkpoint_bufs b = bufs_of(f->m, f->m->params, f->m->stats, f->m->counters, o);
    json_t *meta = NULL;
    assert_int_equal(taas_checkpoint_read(f->path, &b, &sgd, &meta, &err), -1);
    assert_null(meta);
    assert_non_null(strstr(err.message, "missing keys 'optimizer.1.weight.momentum_buffer'"));
    assert_true(o[0] == before);
    free(o);

    /* a record of another version */
    taas_checkpoint_bufs b2 = bufs_of(f->m, f->m->params, f->m->stats, f->m->counters, f->state);
    json_t *v2 = json_pack("{s:i}", "version", 2);
    assert_int_equal(taas_checkpoint_write(f->path, &b2, &f->adam, v2, &err), 0);
    json_decref(v2);
    assert_null(taas_checkpoint_meta(f->path, &err));
    assert_non_null(strstr(err.message, "damaged or of another version"));
    assert_null(taas_checkpoint_meta("/nonexistent/c.safetensors", &err));
    assert_string_equal(err.ename, "TaasIOError");
}

/* ---- the record's check (taas_checkpoint_check) ---- */

/* A record as a fit at epoch 2, step 3 of 50 writes it, and the fit that resumes it: Adam
 * with a scheduler, 2 ranks, seed 11, 2 epochs of 50 steps of 100 samples a rank. */
#define RECORD "{\"version\":1,\"epoch\":1,\"step\":3,\"steps\":53,\"world\":2,\"kernels\":\"generic\"," \
               "\"seed\":11,\"epochs\":2,\"units\":0,\"batch_size\":100,\"steps_per_epoch\":50," \
               "\"optimizer\":\"Adam\",\"lr\":0.001,\"momentum\":0.0,\"beta1\":0.9," \
               "\"scheduler\":{\"last_epoch\":1,\"lr\":0.001,\"momentum\":0.0},\"epoch_loss_sum\":123.5," \
               "\"epoch_samples\":600,\"epoch_checksum\":\"0x0123456789abcdef\"," \
               "\"history\":[{\"epoch\":1,\"train_loss\":0.5,\"val_loss\":0.4,\"val_accuracy\":0.8," \
               "\"time_s\":1.5,\"samples_per_s\":6000.0,\"steps\":50}]," \
               "\"checksums\":[{\"epoch\":1,\"samples\":10000,\"checksum\":\"0xfedcba9876543210\"}]}"
static const taas_checkpoint_fit FIT = {"Adam", 1, 2, 11, 2, 100, 50};

/* The record with key (of sub, when given) set to value (JSON text; NULL: removed). */
static json_t *record_with(const char *key, const char *sub, const char *value) {
    json_error_t je;
    json_t *m = json_loads(RECORD, 0, &je), *o = m;
    assert_non_null(m);
    if (sub) o = json_object_get(m, key);
    const char *k = sub ? sub : key;
    if (!value) {
        json_object_del(o, k);
    } else {
        json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
        assert_non_null(v);
        json_object_set_new(o, k, v);
    }
    return m;
}

/* The record with the change is refused with a message that holds want, names the file and
 * gives a hint that does not blame the version. */
static void refused(const char *key, const char *sub, const char *value, const taas_checkpoint_fit *fit,
                    const char *want) {
    json_t *m = record_with(key, sub, value);
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_checkpoint_check(m, fit, "/data/c.safetensors", &err);
    json_decref(m);
    if (rc != -1 || !strstr(err.message, want) || strncmp(err.message, "/data/c.safetensors: ", 21) ||
        !err.hint[0] || strstr(err.hint, "version")) {
        print_error("%s%s%s = %s: rc %d, \"%s\" (hint \"%s\"), wanted \"%s\"\n", key, sub ? "." : "", sub ? sub : "",
                    value ? value : "(removed)", rc, err.message, err.hint, want);
        fail();
    }
    assert_string_equal(err.ename, "TaasValueError");
}

static void test_a_record_as_the_fit_writes_it_passes(void **state) {
    (void)state;
    json_error_t je;
    json_t *m = json_loads(RECORD, 0, &je);
    taas_error err;
    assert_int_equal(taas_checkpoint_check(m, &FIT, "c", &err), 0);
    /* a fit the caller knows little of: types and ranges only (the kernel's check) */
    const taas_checkpoint_fit unknown = {NULL, -1, -1, -1, -1, -1, -1};
    assert_int_equal(taas_checkpoint_check(m, &unknown, "c", &err), 0);
    json_decref(m);
    /* the first step of an epoch: nothing summed yet; a fit without validation (nulls) */
    m = record_with("history", NULL, "[{\"epoch\":1,\"train_loss\":-0.5,\"val_loss\":null,\"val_accuracy\":null,"
                                     "\"time_s\":1.5,\"samples_per_s\":6000.0,\"steps\":50}]");
    json_object_set_new(m, "step", json_integer(0));
    json_object_set_new(m, "steps", json_integer(50));
    json_object_set_new(m, "epoch_samples", json_real(0));
    json_object_set_new(m, "epoch_loss_sum", json_real(0));
    json_object_set_new(m, "epoch_checksum", json_string("0x0000000000000000"));
    assert_int_equal(taas_checkpoint_check(m, &FIT, "c", &err), 0);
    json_decref(m);
}

/* Every field, of the wrong type and out of its range (issue 27: "lr": "fast" trained at
 * lr 0, "epoch": 10**18 gave an empty History, a wrong checksum was taken). */
static void test_every_field_is_checked_by_name(void **state) {
    (void)state;
    static const struct {
        const char *key, *sub, *value, *want;
    } CASES[] = {
        {"lr", NULL, "\"fast\"", "record's \"lr\" is \"fast\"; it must be a number >= 0"},
        {"lr", NULL, "-0.1", "\"lr\" is -0.1"},
        {"lr", NULL, NULL, "\"lr\" is missing"},
        {"epoch", NULL, "1000000000000000000", "\"epoch\" is 1000000000000000000; it must be a whole number from 0 to 1"},
        {"epoch", NULL, "-1", "\"epoch\" is -1"},
        {"epoch", NULL, "1.0", "\"epoch\" is 1.0"},
        {"step", NULL, "-1", "\"step\" is -1; it must be a whole number from 0 to 49"},
        {"step", NULL, "50", "\"step\" is 50"},
        {"step", NULL, "9223372036854775807", "\"step\" is 9223372036854775807"},
        {"steps", NULL, "54", "\"steps\" is 54; it must be a whole number from 0 to 53"},
        {"steps", NULL, "-5", "\"steps\" is -5"},
        {"world", NULL, "0", "\"world\" is 0"},
        {"world", NULL, "3", "the checkpoint was made with ranks (--gpus) 3; this fit has 2"},
        {"kernels", NULL, "\"fast\"", "\"kernels\" is \"fast\""},
        {"kernels", NULL, "2", "\"kernels\" is 2"},
        {"seed", NULL, "\"11\"", "\"seed\" is \"11\""},
        {"seed", NULL, "12", "the checkpoint was made with seed 12; this fit has 11"},
        {"epochs", NULL, "0", "\"epochs\" is 0"},
        {"epochs", NULL, "1", "\"epoch\" is 1; it must be a whole number from 0 to 0"},
        {"units", NULL, "-1", "\"units\" is -1"},
        {"batch_size", NULL, "0", "\"batch_size\" is 0"},
        {"batch_size", NULL, "200", "the checkpoint was made with batch_size 200; this fit has 100"},
        {"steps_per_epoch", NULL, "0", "\"steps_per_epoch\" is 0"},
        {"steps_per_epoch", NULL, "60", "the checkpoint was made with steps per epoch 60; this fit has 50"},
        {"optimizer", NULL, "\"SGD\"", "the checkpoint's optimizer is SGD; this fit's is Adam"},
        {"optimizer", NULL, "\"Nesterov\"", "\"optimizer\" is \"Nesterov\""},
        {"momentum", NULL, "\"x\"", "\"momentum\" is \"x\""},
        {"beta1", NULL, "1.0", "\"beta1\" is 1.0; it must be a number from 0 to 1 (excluded)"},
        {"scheduler", NULL, "null", "the checkpoint was made without a scheduler; this fit has one"},
        {"scheduler", NULL, "\"StepLR\"", "\"scheduler\" is \"StepLR\""},
        {"scheduler", "last_epoch", "-1", "\"scheduler.last_epoch\" is -1"},
        {"scheduler", "lr", "\"x\"", "\"scheduler.lr\" is \"x\""},
        {"scheduler", "momentum", "null", "\"scheduler.momentum\" is null"},
        {"epoch_loss_sum", NULL, "\"x\"", "\"epoch_loss_sum\" is \"x\""},
        {"epoch_samples", NULL, "601", "\"epoch_samples\" is 601; it must be a number from 0 to 600"},
        {"epoch_samples", NULL, "1.5", "\"epoch_samples\" is 1.5; it must be a whole number of samples"},
        {"epoch_checksum", NULL, "\"0x12\"", "\"epoch_checksum\" is \"0x12\""},
        {"epoch_checksum", NULL, "\"wrong\"", "\"epoch_checksum\" is \"wrong\""},
        {"epoch_checksum", NULL, "81985529216486895", "\"epoch_checksum\" is 81985529216486895"},
        {"epoch_checksum", NULL, "\"0x0123456789ABCDEF\"", "\"epoch_checksum\" is \"0x0123456789ABCDEF\""},
        {"history", NULL, "\"junk\"", "\"history\" is \"junk\"; it must be a list of the 1 epoch done"},
        {"history", NULL, "[]", "\"history\" is []"},
        {"history", NULL, "[1]", "\"history[0]\" is 1"},
        {"history", NULL, "[{\"epoch\":2,\"steps\":50}]", "\"history[0].epoch\" is 2"},
        {"history", NULL, "[{\"epoch\":1,\"steps\":51}]", "\"history[0].steps\" is 51"},
        {"history", NULL, "[{\"epoch\":1,\"steps\":50,\"train_loss\":\"low\"}]",
         "\"history[0].train_loss\" is \"low\"; it must be a finite number"},
        {"history", NULL, "[{\"epoch\":1,\"steps\":50,\"val_accuracy\":2}]", "\"history[0].val_accuracy\" is 2"},
        {"history", NULL, "[{\"epoch\":1,\"steps\":50,\"time_s\":-1}]", "\"history[0].time_s\" is -1"},
        {"history", NULL, "[{\"epoch\":1,\"steps\":50,\"x\":1}]", "\"history[0].x\" is 1; it must be left out"},
        {"checksums", NULL, "[]", "\"checksums\" is []"},
        {"checksums", NULL, "[{\"epoch\":1,\"samples\":10000,\"checksum\":\"zz\"}]", "\"checksums[0].checksum\" is \"zz\""},
        {"checksums", NULL, "[{\"epoch\":1,\"samples\":0,\"checksum\":\"0xfedcba9876543210\"}]",
         "\"checksums[0].checksum\" is \"0xfedcba9876543210\"; it must be 0x0000000000000000"},
        {"checksums", NULL, "[{\"epoch\":1,\"samples\":10001,\"checksum\":\"0xfedcba9876543210\"}]",
         "\"checksums[0].samples\" is 10001"},
        {"checksums", NULL, "[{\"epoch\":1,\"samples\":1,\"checksum\":\"0x1\",\"x\":1}]", "\"checksums[0]\" is {"},
        {"version", NULL, "2", "\"version\" is 2"},
        {"extra", NULL, "1", "\"extra\" is 1; it must be left out: a checkpoint has no such field"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        refused(CASES[i].key, CASES[i].sub, CASES[i].value, &FIT, CASES[i].want);
    /* no sample summed: the checksum is 0 */
    json_t *m = record_with("epoch_samples", NULL, "0");
    json_object_set_new(m, "epoch_loss_sum", json_real(0));
    taas_error err;
    assert_int_equal(taas_checkpoint_check(m, &FIT, "c", &err), -1);
    assert_non_null(strstr(err.message, "\"epoch_checksum\" is \"0x0123456789abcdef\"; it must be 0x0000000000000000"));
    json_decref(m);
    /* not a record at all */
    m = json_string("x");
    assert_int_equal(taas_checkpoint_check(m, &FIT, "c", &err), -1);
    assert_non_null(strstr(err.message, "c: the checkpoint record's \"record\" is \"x\"; it must be an object"));
    json_decref(m);
}

/* Gradient accumulation: a record without "accumulate" is of 1; its K must be this fit's,
 * and its step a multiple of K (a checkpoint falls between optimizer steps). */
static void test_accumulate(void **state) {
    (void)state;
    taas_checkpoint_fit three = FIT;
    three.accumulate = 3;
    refused("accumulate", NULL, NULL, &three, "the checkpoint was made with accumulate 1; this fit has 3");
    refused("accumulate", NULL, "2", &FIT, "\"step\" is 3; it must be a multiple of accumulate");
    refused("accumulate", NULL, "0", &FIT, "\"accumulate\" is 0");
    refused("accumulate", NULL, "\"3\"", &FIT, "\"accumulate\"");
    json_t *m = record_with("accumulate", NULL, "3");
    taas_error err;
    assert_int_equal(taas_checkpoint_check(m, &three, "c", &err), 0);
    json_decref(m);
}

/* A fit with fewer epochs than the checkpoint has done has nothing to train: refused, where
 * it returned an empty History. */
static void test_a_fit_with_nothing_left_is_refused(void **state) {
    (void)state;
    taas_checkpoint_fit one = FIT;
    one.epochs = 1;
    refused("units", NULL, "0", &one, "the checkpoint is at epoch 2 (1 done); this fit has 1 epoch, so nothing is "
                                      "left to train");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_bit_for_bit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_are_torch_optims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_checkpoint_loads_as_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frozen_parameters_have_no_state, setup, teardown),
        cmocka_unit_test(test_a_record_as_the_fit_writes_it_passes),
        cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_every_field_is_checked_by_name),
        cmocka_unit_test(test_a_fit_with_nothing_left_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
