/* workers/train/model.c against PyTorch 1.13 (tests/data/model/ref.json, made by
 * tests/gen_model_ref.py): a Sequential's logits, loss and gradients, 20 optimizer steps,
 * and the shape errors reported before anything runs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "init.h"
#include "loss.h"
#include "model.h"
#include "optim.h"
#include "fixture_testutil.h"
#include "cpu_testutil.h"

TU_FIXTURE_GROUP(REF, "model/ref.json")

static void read_floats(float *dst, const json_t *a, size_t n) {
    assert_int_equal(json_array_size(a), n);
    for (size_t i = 0; i < n; i++) dst[i] = (float)json_number_value(json_array_get(a, i));
}

static void assert_close(const float *got, const json_t *want, size_t n, double tol, const char *what) {
    assert_int_equal(json_array_size(want), n);
    for (size_t i = 0; i < n; i++) {
        double w = json_number_value(json_array_get(want, i));
        if (fabs(got[i] - w) > tol * fmax(1.0, fabs(w))) {
            fprintf(stderr, "%s[%zu]: got %.8g, torch %.8g\n", what, i, got[i], w);
            fail();
        }
    }
}

static taas_model *ref_model(void) {
    const json_t *in = json_object_get(REF, "input");
    taas_error e;
    taas_error_clear(&e);
    taas_model *m = taas_model_new(json_object_get(REF, "spec"), (int)json_integer_value(json_array_get(in, 0)),
                                   (int)json_integer_value(json_array_get(in, 1)),
                                   (int)json_integer_value(json_array_get(in, 2)), 1234, &e);
    if (!m) fprintf(stderr, "%s\n", e.message);
    assert_non_null(m);
    return m;
}

/* Loads torch's state_dict into the model through the parameter table. */
static void load_state(taas_model *m, const json_t *sd) {
    assert_int_equal(m->ntable, json_object_size(sd));
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        const json_t *v = json_object_get(sd, t->key);
        assert_non_null(v);
        if (t->home == TAAS_T_COUNTER) m->counters[t->offset] = (int64_t)json_number_value(json_array_get(v, 0));
        else read_floats((t->home == TAAS_T_PARAM ? m->params : m->stats) + t->offset, v, t->numel);
    }
}

static void check_state(const taas_model *m, const json_t *sd, const char *what) {
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        char label[128];
        snprintf(label, sizeof label, "%s %s", what, t->key);
        const json_t *v = json_object_get(sd, t->key);
        if (t->home == TAAS_T_COUNTER) {
            assert_int_equal(m->counters[t->offset], (int64_t)json_number_value(json_array_get(v, 0)));
        } else {
            assert_close((t->home == TAAS_T_PARAM ? m->params : m->stats) + t->offset, v, t->numel, 1e-4, label);
        }
    }
}

static void test_table_matches_state_dict(void **state) {
    (void)state;
    taas_model *m = ref_model();
    const json_t *shapes = json_object_get(REF, "shapes");
    const char *keys[] = {"0.weight", "0.bias", "4.weight", "5.weight", "5.bias", "5.running_mean",
                          "5.running_var", "5.num_batches_tracked", "8.weight", "8.bias"};
    assert_int_equal(m->ntable, 10);
    size_t next = 0;
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        assert_string_equal(t->key, keys[i]);  /* state_dict order */
        const json_t *s = json_object_get(shapes, t->key);
        assert_int_equal(t->ndim, json_array_size(s));
        for (int k = 0; k < t->ndim; k++) assert_int_equal(t->shape[k], json_integer_value(json_array_get(s, (size_t)k)));
        assert_string_equal(t->dtype, t->home == TAAS_T_COUNTER ? "I64" : "F32");
        if (t->home == TAAS_T_PARAM) {  /* one contiguous buffer, parameters() order */
            assert_int_equal(t->offset, next);
            next += t->numel;
        }
    }
    assert_int_equal(next, m->nparams);
    assert_ptr_equal(taas_model_find(m, "5.running_var"), &m->table[6]);
    assert_null(taas_model_find(m, "4.bias"));
    assert_null(taas_model_find(m, "9.weight"));
    /* Initialised as torch: BatchNorm weight 1, bias 0, running_var 1; Linear within its bound. */
    assert_true(m->params[m->table[3].offset] == 1.0f && m->params[m->table[4].offset] == 0.0f);
    assert_true(m->stats[m->table[6].offset] == 1.0f);
    for (size_t i = 0; i < m->table[2].numel; i++) assert_true(fabsf(m->params[m->table[2].offset + i]) <= 0.125f);
    taas_model_free(m);
}

static float ref_loss(taas_model *m, const float *x, const int64_t *y, int n, int k, uint64_t step, float *dlogp) {
    const float *out;
    float loss;
    taas_error e;
    assert_int_equal(taas_model_forward(m, x, n, 1, step, &out, &e), 0);
    assert_int_equal(taas_nll_loss_forward(&loss, out, y, n, k, -100, &e), 0);
    taas_nll_loss_backward(dlogp, y, n, k, -100, 1.0f);
    return loss;
}

static void batch(float **x, int64_t **y, int *n) {
    *n = (int)json_integer_value(json_object_get(REF, "n"));
    const json_t *xa = json_object_get(REF, "x"), *ya = json_object_get(REF, "y");
    *x = malloc(json_array_size(xa) * sizeof(float));
    *y = malloc((size_t)*n * sizeof(int64_t));
    read_floats(*x, xa, json_array_size(xa));
    for (int i = 0; i < *n; i++) (*y)[i] = json_integer_value(json_array_get(ya, (size_t)i));
}

static void test_forward_backward_match_torch(void **state) {
    (void)state;
    taas_model *m = ref_model();
    load_state(m, json_object_get(REF, "init"));
    float *x, dlogp[64];
    int64_t *y;
    int n, k = (int)taas_model_out_numel(m);
    batch(&x, &y, &n);
    assert_int_equal(k, 5);
    taas_error e;
    taas_model_zero_grad(m);
    float loss = ref_loss(m, x, y, n, k, 0, dlogp);
    assert_close(m->act[m->nlayers], json_object_get(REF, "logits"), (size_t)(n * k), 1e-4, "logits");
    assert_true(fabs(loss - json_number_value(json_object_get(REF, "loss"))) < 1e-4);
    assert_int_equal(taas_model_backward(m, dlogp, &e), 0);
    const json_t *grads = json_object_get(REF, "grads");
    for (size_t i = 0; i < m->ntable; i++) {
        const taas_param_entry *t = &m->table[i];
        if (t->home == TAAS_T_PARAM) assert_close(m->grads + t->offset, json_object_get(grads, t->key), t->numel, 1e-4, t->key);
    }
    /* Eval mode uses the running stats the train step just updated. */
    const float *out;
    assert_int_equal(taas_model_forward(m, x, n, 0, 1, &out, &e), 0);
    assert_close(out, json_object_get(REF, "eval_logits"), (size_t)(n * k), 1e-4, "eval logits");
    free(x);
    free(y);
    taas_model_free(m);
}

static void run_steps(taas_optim_kind kind, double lr, const char *name) {
    taas_model *m = ref_model();
    load_state(m, json_object_get(REF, "init"));
    taas_optim_config cfg;
    taas_optim_config_default(&cfg, kind);
    cfg.lr = lr;
    if (kind == TAAS_OPTIM_SGD) cfg.momentum = 0.9;
    float *st = calloc(taas_optim_state_floats(&cfg, m->nparams) + 1, sizeof(float));
    float *x, dlogp[64];
    int64_t *y;
    int n, k = (int)taas_model_out_numel(m);
    batch(&x, &y, &n);
    const json_t *r = json_object_get(REF, name);
    float losses[20];
    taas_error e;
    for (int s = 0; s < 20; s++) {
        taas_model_zero_grad(m);
        losses[s] = ref_loss(m, x, y, n, k, (uint64_t)s, dlogp);
        assert_int_equal(taas_model_backward(m, dlogp, &e), 0);
        taas_optim_step(&cfg, m->params, m->grads, st, m->ntrain, s + 1);
    }
    assert_close(losses, json_object_get(r, "losses"), 20, 1e-4, name);
    check_state(m, json_object_get(r, "final"), name);
    free(st);
    free(x);
    free(y);
    taas_model_free(m);
}

static void test_sgd_momentum_steps(void **state) {
    (void)state;
    run_steps(TAAS_OPTIM_SGD, 0.05, "sgd");
}

static void test_adam_steps(void **state) {
    (void)state;
    run_steps(TAAS_OPTIM_ADAM, 0.01, "adam");
}

static taas_model *build(const char *spec, int c, int h, int w, taas_error *e) {
    json_error_t je;
    json_t *j = json_loads(spec, 0, &je);
    assert_non_null(j);
    taas_error_clear(e);
    taas_model *m = taas_model_new(j, c, h, w, 1, e);
    json_decref(j);
    return m;
}

#define MNIST_HEAD "{\"type\":\"Sequential\",\"layers\":[" \
    "{\"type\":\"Conv2d\",\"in_channels\":1,\"out_channels\":32,\"kernel_size\":3}," \
    "{\"type\":\"ReLU\"},{\"type\":\"Conv2d\",\"in_channels\":32,\"out_channels\":64,\"kernel_size\":[3,3]}," \
    "{\"type\":\"ReLU\"},{\"type\":\"MaxPool2d\",\"kernel_size\":2,\"stride\":null},{\"type\":\"Dropout\",\"p\":0.25}," \
    "{\"type\":\"Flatten\"},"

static void test_linear_in_features_mismatch(void **state) {
    (void)state;
    taas_error e;
    assert_null(build(MNIST_HEAD "{\"type\":\"Linear\",\"in_features\":9000,\"out_features\":128}]}", 1, 28, 28, &e));
    assert_string_equal(e.message, "layer 7: Linear(in_features=9000) gets 9216 features from layer 6 (Flatten)");
    assert_string_equal(e.hint, "write Linear(9216, 128), or LazyLinear(128) to infer it");
    /* The same net with the right size or LazyLinear builds, with the parameter count of torch. */
    taas_model *m = build(MNIST_HEAD "{\"type\":\"LazyLinear\",\"out_features\":128}]}", 1, 28, 28, &e);
    assert_non_null(m);
    assert_int_equal(m->nparams, 320 + 18496 + 9216 * 128 + 128);
    taas_model_free(m);
}

static void test_conv_bigger_than_input(void **state) {
    (void)state;
    taas_error e;
    assert_null(build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Conv2d\",\"in_channels\":1,"
                      "\"out_channels\":4,\"kernel_size\":5}]}", 1, 3, 3, &e));
    assert_string_equal(e.message, "layer 0: Conv2d(kernel_size=(5, 5), padding=(0, 0)) is bigger than its 3x3 "
                                   "input (N, 1, 3, 3) from the input");
    assert_non_null(strstr(e.hint, "smaller kernel_size"));
}

static void test_channel_mismatch(void **state) {
    (void)state;
    taas_error e;
    assert_null(build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Conv2d\",\"in_channels\":1,"
                      "\"out_channels\":8,\"kernel_size\":3},{\"type\":\"Conv2d\",\"in_channels\":3,"
                      "\"out_channels\":8,\"kernel_size\":3}]}", 1, 8, 8, &e));
    assert_string_equal(e.message, "layer 1: Conv2d(in_channels=3) gets 8 channels (N, 8, 6, 6) from layer 0 (Conv2d)");
    assert_string_equal(e.hint, "write Conv2d(8, 8, ...), or LazyConv2d(8, ...) to infer it");
    assert_null(build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Flatten\"},{\"type\":\"BatchNorm1d\","
                      "\"num_features\":10}]}", 2, 3, 3, &e));
    assert_string_equal(e.message, "layer 1: BatchNorm1d(num_features=10) gets 18 features (N, 18) from layer 0 (Flatten)");
}

static void test_wrong_rank_and_unsupported(void **state) {
    (void)state;
    taas_error e;
    assert_null(build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Linear\",\"in_features\":4,"
                      "\"out_features\":2}]}", 1, 2, 2, &e));
    assert_string_equal(e.message, "layer 0: Linear needs an (N, features) input but gets (N, 1, 2, 2) from the input");
    assert_string_equal(e.hint, "put Flatten() before it");
    assert_null(build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"ReLU\"},{\"type\":\"LSTM\"}]}", 4, 0, 0, &e));
    assert_string_equal(e.message, "layer 1: LSTM is not a layer the trainer supports");
    assert_true(e.hint[0] != '\0');
    assert_null(build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Conv2d\",\"in_channels\":1,"
                      "\"out_channels\":2,\"kernel_size\":3,\"groups\":2}]}", 1, 8, 8, &e));
    assert_string_equal(e.message, "layer 0: Conv2d: groups=2 must be at least 1 and divide in_channels 1 and out_channels 2");
    assert_null(build("{\"type\":\"Compose\",\"transforms\":[]}", 1, 8, 8, &e));
    assert_string_equal(e.message, "the model: Compose is not a layer the trainer supports");
}

#define SEQ(layers) "{\"type\":\"Sequential\",\"layers\":[" layers "]}"
#define CONV1 "{\"type\":\"Conv2d\",\"in_channels\":1,\"out_channels\":2,\"kernel_size\":3"
#define EMB "{\"type\":\"Embedding\",\"num_embeddings\":16,\"embedding_dim\":8"
#define GPT2(cfg) "{\"type\":\"GPT2LMHeadModel\",\"config\":{\"vocab_size\":16,\"n_positions\":8,\"n_layer\":1," cfg "}}"

/* Every other refusal: message prefix and a hint, for specs and inputs. */
static void test_more_spec_errors(void **state) {
    (void)state;
    static const struct { const char *spec; int c, h, w; const char *msg; } cases[] = {
        {SEQ(CONV1 ",\"dilation\":2}"), 1, 8, 8, "layer 0: Conv2d has dilation != 1"},
        {SEQ(CONV1 ",\"padding_mode\":\"reflect\"}"), 1, 8, 8, "layer 0: Conv2d has a padding_mode other than 'zeros'"},
        {SEQ(CONV1 ",\"padding\":\"same\",\"stride\":2}"), 1, 8, 8, "layer 0: Conv2d has padding='same' with an even kernel or a stride"},
        {SEQ(CONV1 "}"), 0, 8, 8, "invalid input shape (N, 0, 8, 8)"},
        {SEQ(CONV1 "}"), 4, 0, 0, "layer 0: Conv2d needs an (N, C, H, W) input but gets (N, 4) from the input"},
        {SEQ("{\"type\":\"Conv2d\",\"out_channels\":2,\"kernel_size\":3}"), 1, 8, 8,
         "layer 0: Conv2d has no valid in_channels/out_channels"},
        {SEQ("{\"type\":\"Linear\",\"in_features\":4}"), 4, 0, 0, "layer 0: Linear has no valid in_features/out_features"},
        {SEQ("{\"type\":\"MaxPool2d\",\"kernel_size\":2,\"ceil_mode\":true}"), 1, 8, 8, "layer 0: MaxPool2d has ceil_mode=True"},
        {SEQ("{\"type\":\"MaxPool2d\",\"kernel_size\":2,\"padding\":2}"), 1, 8, 8, "layer 0: MaxPool2d on (N, 1, 8, 8) from the input: "},
        {SEQ("{\"type\":\"AvgPool2d\",\"kernel_size\":2,\"count_include_pad\":false}"), 1, 8, 8,
         "layer 0: AvgPool2d has count_include_pad=False or a divisor_override"},
        {SEQ("{\"type\":\"GELU\",\"approximate\":\"erf\"}"), 4, 0, 0, "layer 0: GELU has an approximate other than"},
        {SEQ(EMB ",\"padding_idx\":0}"), 4, 0, 0, "layer 0: Embedding has padding_idx"},
        {SEQ(EMB ",\"sparse\":true}"), 4, 0, 0, "layer 0: Embedding has scale_grad_by_freq=True or sparse=True"},
        {SEQ(EMB "}"), 1, 8, 8, "layer 0: Embedding needs (N, T) token ids but gets (N, 1, 8, 8)"},
        {SEQ(EMB "},{\"type\":\"LayerNorm\",\"normalized_shape\":[6]}"), 4, 0, 0,
         "layer 1: LayerNorm(normalized_shape=6) gets (N, 4, 8) from layer 0 (Embedding)"},
        {SEQ(EMB "},{\"type\":\"LayerNorm\",\"normalized_shape\":[4,8]}"), 4, 0, 0,
         "layer 1: LayerNorm has a normalized_shape other than one positive size"},
        {SEQ(EMB "},{\"type\":\"LayerNorm\",\"normalized_shape\":8,\"elementwise_affine\":false}"), 4, 0, 0,
         "layer 1: LayerNorm has elementwise_affine=False"},
        {SEQ(EMB "},{\"type\":\"Softmax\",\"dim\":-1}"), 4, 0, 0, "layer 1: Softmax on (N, 4, 8) from layer 0 (Embedding)"},
        {SEQ(EMB "},{\"type\":\"Linear\",\"in_features\":6,\"out_features\":2}"), 4, 0, 0,
         "layer 1: Linear(in_features=6) gets 8 features from layer 0 (Embedding)"},
        {GPT2("\"n_embd\":10,\"n_head\":4"), 8, 0, 0, "the model: GPT2Config(n_embd) is not a multiple of n_head"},
        {GPT2("\"n_positions\":4"), 8, 0, 0, "the model: GPT2LMHeadModel takes (N, T) token ids with T at most n_positions = 4"},
        {GPT2("\"rotary\":true"), 8, 0, 0, "the model: GPT2Config(rotary) is a key the trainer does not support"},
        {GPT2("\"activation_function\":\"relu\""), 8, 0, 0, "the model: GPT2Config(activation_function) is not"},
        {GPT2("\"tie_word_embeddings\":false"), 8, 0, 0, "the model: GPT2Config(tie_word_embeddings / add_cross_attention)"},
        {SEQ("{\"type\":\"BatchNorm2d\",\"num_features\":1,\"affine\":false}"), 1, 8, 8, "layer 0: BatchNorm2d has affine=False"},
        {SEQ("{\"type\":\"BatchNorm2d\",\"num_features\":4}"), 4, 0, 0, "layer 0: BatchNorm2d needs an (N, C, H, W) input but gets (N, 4)"},
        {SEQ("{\"type\":\"BatchNorm2d\",\"num_features\":4}"), 3, 2, 2, "layer 0: BatchNorm2d(num_features=4) gets 3 channels (N, 3, 2, 2)"},
        {SEQ("{\"type\":\"Flatten\",\"start_dim\":0}"), 1, 8, 8, "layer 0: Flatten flattens other dimensions"},
        {SEQ("{\"type\":\"Dropout2d\",\"p\":0.5}"), 4, 0, 0, "layer 0: Dropout2d needs an (N, C, H, W) input"},
        {SEQ("{\"type\":\"Dropout\",\"p\":1.5}"), 4, 0, 0, "layer 0: Dropout: "},
        {SEQ("{\"type\":\"LogSoftmax\",\"dim\":0}"), 4, 0, 0, "layer 0: LogSoftmax over dim=0 of (N, 4) from the input"},
        {SEQ(""), 4, 0, 0, "the Sequential has no layers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        taas_error e;
        assert_null(build(cases[i].spec, cases[i].c, cases[i].h, cases[i].w, &e));
        if (strncmp(e.message, cases[i].msg, strlen(cases[i].msg)) != 0) {
            fprintf(stderr, "case %zu: got '%s', want '%s...'\n", i, e.message, cases[i].msg);
            fail();
        }
        assert_string_equal(e.ename, "TaasValueError");
        if (!e.hint[0]) fprintf(stderr, "case %zu: no hint\n", i);
        assert_true(e.hint[0] != '\0');
    }
}

/* Errors that only a batch can show. */
static void test_run_errors(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = build(SEQ("{\"type\":\"BatchNorm1d\",\"num_features\":3}"), 3, 0, 0, &e);
    assert_non_null(m);
    float x[3] = {1, 2, 3}, d[3] = {0};
    const float *out;
    taas_error_clear(&e);
    assert_int_equal(taas_model_backward(m, d, &e), -1);
    assert_string_equal(e.message, "model backward before any forward");
    assert_int_equal(taas_model_forward(m, x, 0, 1, 0, &out, &e), -1);
    assert_string_equal(e.message, "model forward with a batch of 0 samples");
    assert_int_equal(taas_model_forward(m, x, 1, 1, 0, &out, &e), -1);
    assert_non_null(strstr(e.message, "layer 0 (BatchNorm1d): "));
    assert_true(e.hint[0] != '\0');
    assert_int_equal(taas_model_forward(m, x, 1, 0, 0, &out, &e), 0);  /* eval mode is fine */
    taas_model_free(m);
}

/* Dropout masks are a function of (seed, step): the same step repeats, another differs. */
static void test_dropout_reproducible(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Dropout\",\"p\":0.5}]}", 64, 0, 0, &e);
    assert_non_null(m);
    float x[128], a[128], b[128];
    const float *out;
    for (int i = 0; i < 128; i++) x[i] = 1.0f;
    assert_int_equal(taas_model_forward(m, x, 2, 1, 3, &out, &e), 0);
    memcpy(a, out, sizeof a);
    assert_int_equal(taas_model_forward(m, x, 2, 1, 3, &out, &e), 0);
    assert_memory_equal(a, out, sizeof a);
    assert_int_equal(taas_model_forward(m, x, 2, 1, 4, &out, &e), 0);
    memcpy(b, out, sizeof b);
    assert_memory_not_equal(a, b, sizeof a);
    assert_int_equal(taas_model_forward(m, x, 2, 0, 4, &out, &e), 0);
    assert_memory_equal(x, out, sizeof x);
    taas_model_free(m);
}

/* Dropout with p = 0 is the identity in train mode too (as PyTorch's): the output and the
 * input gradient are the input and the output gradient, bit for bit, and nothing is drawn. */
static void test_dropout_zero_is_identity(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = build("{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Linear\",\"in_features\":8,"
                          "\"out_features\":8},{\"type\":\"Dropout\",\"p\":0}]}",
                          8, 0, 0, &e);
    assert_non_null(m);
    float x[16], dy[16];
    const float *out;
    for (int i = 0; i < 16; i++) x[i] = (float)i - 7.5f, dy[i] = 0.25f * (float)i - 1.0f;
    assert_int_equal(taas_model_forward(m, x, 2, 0, 1, &out, &e), 0);
    float eval[16];
    memcpy(eval, out, sizeof eval);
    assert_int_equal(taas_model_forward(m, x, 2, 1, 1, &out, &e), 0);
    assert_memory_equal(eval, out, sizeof eval);
    assert_int_equal(taas_model_backward(m, dy, &e), 0);
    /* the Linear's bias gradient is the sum of what reached it: dy, untouched */
    const float *db = m->grads + m->layers[0].b_off;
    for (int j = 0; j < 8; j++) assert_float_equal(db[j], dy[j] + dy[8 + j], 0.0f);
    taas_model_free(m);
}

/* The layers the torch fixture leaves out, wired together in train mode (dropout masks fixed
 * by the step): every parameter gradient against central differences of sum(out * r). */
static double weighted_sum(taas_model *m, const float *x, const float *r, int n) {
    const float *out;
    taas_error e;
    assert_int_equal(taas_model_forward(m, x, n, 1, 5, &out, &e), 0);
    double s = 0;
    for (size_t i = 0; i < taas_model_out_numel(m) * (size_t)n; i++) s += (double)out[i] * r[i];
    return s;
}

static void test_other_layers_gradcheck(void **state) {
    (void)state;
    taas_error e;
    taas_model *m = build("{\"type\":\"Sequential\",\"layers\":["
        "{\"type\":\"LazyConv2d\",\"out_channels\":3,\"kernel_size\":3,\"padding\":\"same\"},"
        "{\"type\":\"BatchNorm2d\",\"num_features\":3,\"eps\":1e-5,\"momentum\":0.1},{\"type\":\"Tanh\"},"
        "{\"type\":\"AvgPool2d\",\"kernel_size\":2,\"stride\":null},{\"type\":\"Dropout2d\",\"p\":0.3},"
        "{\"type\":\"GELU\",\"approximate\":\"none\"},{\"type\":\"Sigmoid\"},{\"type\":\"Flatten\"},"
        "{\"type\":\"Dropout\",\"p\":0.2},{\"type\":\"LazyLinear\",\"out_features\":6},"
        "{\"type\":\"LeakyReLU\",\"negative_slope\":0.1},{\"type\":\"Linear\",\"in_features\":6,\"out_features\":4},"
        "{\"type\":\"Softmax\",\"dim\":1}]}", 2, 6, 6, &e);
    assert_non_null(m);
    assert_int_equal(m->layers[3].out.d[1], 3);
    assert_int_equal(taas_model_out_numel(m), 4);
    taas_model_set_threads(m, 2);
    enum { N = 4 };
    float x[N * 2 * 36], r[N * 4];
    taas_init_rng rng = {99, 0};
    taas_init_uniform(x, N * 2 * 36, 2.0f, &rng);
    taas_init_uniform(r, N * 4, 1.0f, &rng);
    taas_model_zero_grad(m);
    weighted_sum(m, x, r, N);
    assert_int_equal(taas_model_backward(m, r, &e), 0);
    int checked = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        float keep = m->params[i], h = 3e-3f;
        m->params[i] = keep + h;
        double up = weighted_sum(m, x, r, N);
        m->params[i] = keep - h;
        double down = weighted_sum(m, x, r, N);
        m->params[i] = keep;
        double num = (up - down) / (2.0 * h), ana = m->grads[i];
        if (fabs(num - ana) > 2e-3 + 2e-2 * fabs(ana)) {
            fprintf(stderr, "param %zu: analytic %.6g, numeric %.6g\n", i, ana, num);
            fail();
        }
        checked++;
    }
    assert_int_equal(checked, 57 + 6 + 27 * 6 + 6 + 6 * 4 + 4);
    assert_true(m->counters[0] > 0);
    taas_model_free(m);
}

/* The docs/design.md §1 network in small, trained twice from the same seed with two threads:
 * the same bits every time (per-thread partial sums are added in thread order). */
static void train_small(int nthreads, float *params_out, size_t *nparams) {
    taas_error e;
    taas_model *m = build("{\"type\":\"Sequential\",\"layers\":["
        "{\"type\":\"Conv2d\",\"in_channels\":1,\"out_channels\":8,\"kernel_size\":3},{\"type\":\"ReLU\"},"
        "{\"type\":\"Conv2d\",\"in_channels\":8,\"out_channels\":16,\"kernel_size\":3},{\"type\":\"ReLU\"},"
        "{\"type\":\"MaxPool2d\",\"kernel_size\":2},{\"type\":\"Dropout\",\"p\":0.25},{\"type\":\"Flatten\"},"
        "{\"type\":\"Linear\",\"in_features\":1024,\"out_features\":32},{\"type\":\"BatchNorm1d\",\"num_features\":32},"
        "{\"type\":\"ReLU\"},{\"type\":\"Dropout\",\"p\":0.5},{\"type\":\"Linear\",\"in_features\":32,\"out_features\":10},"
        "{\"type\":\"LogSoftmax\",\"dim\":1}]}", 1, 20, 20, &e);
    assert_non_null(m);
    taas_model_set_threads(m, nthreads);
    enum { N = 24 };
    float *x = malloc(sizeof(float) * N * 400), dlogp[N * 10];
    int64_t y[N];
    taas_init_rng rng = {7, 0};
    taas_init_uniform(x, N * 400, 1.0f, &rng);
    for (int i = 0; i < N; i++) y[i] = i % 10;
    taas_optim_config cfg;
    taas_optim_config_default(&cfg, TAAS_OPTIM_ADADELTA);
    float *st = calloc(taas_optim_state_floats(&cfg, m->nparams), sizeof(float));
    for (int s = 0; s < 4; s++) {
        taas_model_zero_grad(m);
        ref_loss(m, x, y, N, 10, (uint64_t)s, dlogp);
        assert_int_equal(taas_model_backward(m, dlogp, &e), 0);
        taas_optim_step(&cfg, m->params, m->grads, st, m->ntrain, s + 1);
    }
    memcpy(params_out, m->params, m->nparams * sizeof(float));
    *nparams = m->nparams;
    free(x), free(st);
    taas_model_free(m);
}

static void test_training_repeats_bit_for_bit(void **state) {
    (void)state;
    enum { MAXP = 40000 };
    float *a = malloc(sizeof(float) * MAXP), *b = malloc(sizeof(float) * MAXP);
    size_t na, nb;
    train_small(2, a, &na);
    assert_true(na <= MAXP);
    train_small(2, b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof(float));
    free(a), free(b);
}

int main(void) {
    tu_kernel_set();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_state_dict),
        cmocka_unit_test(test_forward_backward_match_torch),
        cmocka_unit_test(test_sgd_momentum_steps),
        cmocka_unit_test(test_adam_steps),
        cmocka_unit_test(test_linear_in_features_mismatch),
        cmocka_unit_test(test_conv_bigger_than_input),
        cmocka_unit_test(test_channel_mismatch),
        cmocka_unit_test(test_wrong_rank_and_unsupported),
        cmocka_unit_test(test_dropout_reproducible),
        cmocka_unit_test(test_dropout_zero_is_identity),
        cmocka_unit_test(test_more_spec_errors),
        cmocka_unit_test(test_run_errors),
        cmocka_unit_test(test_other_layers_gradcheck),
        cmocka_unit_test(test_training_repeats_bit_for_bit),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
