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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_bit_for_bit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_are_torch_optims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_checkpoint_loads_as_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
