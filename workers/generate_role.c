/* taas-worker generate: text (tokens) from a model of tokens, for generate() in a notebook
 * (kernel/lang/action_generate.c), nanoGPT's sampling loop: the context's last block_size
 * tokens in, the next token drawn from the softmax of the last position's logits over
 * temperature, among the top_k when given; the draw k from the counter generator at
 * (seed, k), so a seed gives the same text. The model is planned for block_size tokens once:
 * a shorter context sits at the start of the window, zeros after it, which a causal model's
 * positions up to the context's last never see. Prints {"tokens": [...]} (the new ones). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctr_rng.h"
#include "errnames.h"
#include "role.h"
#include "train_job.h"

/* The next token from logits (v of them): softmax(logits / temperature) over the top_k
 * largest (0: all), drawn with u in [0, 1). */
static int64_t draw(const float *logits, int v, double temperature, int top_k, float u, double *p) {
    double cut = -INFINITY;
    if (top_k > 0 && top_k < v) {  /* the k-th largest: torch.topk's threshold */
        for (int i = 0; i < v; i++) p[i] = logits[i];
        for (int k = 0; k < top_k; k++) {
            int best = -1;
            for (int i = 0; i < v; i++)
                if (p[i] > -INFINITY && (best < 0 || p[i] > p[best])) best = i;
            cut = p[best];
            p[best] = -INFINITY;
        }
    }
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < v; i++)
        if (logits[i] >= cut && logits[i] / temperature > mx) mx = logits[i] / temperature;
    for (int i = 0; i < v; i++) sum += p[i] = logits[i] >= cut ? exp(logits[i] / temperature - mx) : 0.0;
    double r = (double)u * sum, acc = 0;
    int last = 0;
    for (int i = 0; i < v; i++) {
        if (p[i] == 0.0) continue;
        acc += p[i];
        last = i;
        if (r < acc) return i;
    }
    return last;
}

static json_t *generate(const json_t *spec, taas_error *err) {
    long long block, max_new, top_k, seed;
    if (taas_train_int(spec, "the generate spec", "block_size", 0, 1, 1 << 20, &block, err) ||
        taas_train_int(spec, "the generate spec", "max_new_tokens", 200, 0, 1 << 24, &max_new, err) ||
        taas_train_int(spec, "the generate spec", "top_k", 0, 0, 1 << 24, &top_k, err) ||
        taas_train_int(spec, "the generate spec", "seed", 0, 0, INT64_MAX, &seed, err))
        return NULL;
    const json_t *tv = json_object_get(spec, "temperature"), *prompt = json_object_get(spec, "prompt");
    double temperature = json_is_number(tv) ? json_number_value(tv) : 1.0;
    if (!(temperature > 0) || !json_is_array(prompt) || json_array_size(prompt) == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "generate needs a temperature above 0 and a prompt of at least "
                       "one token");
        taas_error_hint(err, "generate(net, 'Once upon a time', temperature=0.8)");
        return NULL;
    }
    taas_train_loader l;
    memset(&l, 0, sizeof l);
    l.c = (int)block;  /* the model reads (block_size) token ids */
    taas_model *m = taas_train_model(spec, &l, err);
    if (!m) return NULL;
    int t = taas_model_tokens(m), v = t ? m->layers[m->nlayers - 1].out.d[1] : 0;
    size_t n0 = json_array_size(prompt), len = n0;
    int64_t *seq = malloc((n0 + (size_t)max_new) * sizeof *seq);
    float *x = calloc((size_t)(t ? t : 1), sizeof *x);
    double *p = malloc((size_t)(v ? v : 1) * sizeof *p);
    json_t *out = NULL;
    if (!t) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "generate needs a model of tokens (an Embedding first, an "
                       "(N, T, V) output), such as GPT2LMHeadModel");
        taas_error_hint(err, "generate(net, prompt) with net = transformers.GPT2LMHeadModel(...)");
        goto done;
    }
    if (!seq || !x || !p) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for %lld new tokens", max_new);
        goto done;
    }
    for (size_t i = 0; i < n0; i++) {
        const json_t *id = json_array_get(prompt, i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= v) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "token %zu of the prompt is outside the model's vocabulary "
                           "[0, %d)", i, v);
            taas_error_hint(err, "give token ids below the model's vocab_size");
            goto done;
        }
        seq[i] = json_integer_value(id);
    }
    for (long long k = 0; k < max_new; k++) {
        size_t ctx = len < (size_t)t ? len : (size_t)t, from = len - ctx;
        for (size_t i = 0; i < (size_t)t; i++) x[i] = i < ctx ? (float)seq[from + i] : 0.0f;
        const float *logits;
        if (taas_model_forward(m, x, 1, 0, 0, &logits, err)) goto done;
        seq[len++] = draw(logits + (ctx - 1) * (size_t)v, v, temperature, (int)top_k,
                          taas_ctr_uniform((uint64_t)seed, (uint64_t)k), p);
    }
    out = json_object();
    json_t *ids = json_array();
    for (size_t i = n0; i < len; i++) json_array_append_new(ids, json_integer(seq[i]));
    json_object_set_new(out, "tokens", ids);
done:
    free(seq), free(x), free(p);
    taas_model_free(m);
    return out;
}

int taas_role_generate(int argc, char **argv) {
    const char *spec_path;
    int rc = taas_train_spec_args(argc, argv, "generate",
                                  "usage: taas-worker generate --spec FILE|-\n\n"
                                  "New tokens from a model of tokens and its weights: the spec has \"model\", \"weights\",\n"
                                  "\"block_size\", \"prompt\" (token ids), \"max_new_tokens\", \"temperature\", \"top_k\"\n"
                                  "(0: all), \"seed\" and \"threads\"; prints {\"tokens\": [...]}.",
                                  &spec_path);
    if (rc) return rc > 0 ? TAAS_EXIT_OK : TAAS_EXIT_USAGE;
    taas_error err;
    taas_error_clear(&err);
    json_t *spec = taas_train_read(spec_path, &err);
    json_t *out = spec ? generate(spec, &err) : NULL;
    json_decref(spec);
    if (!out) {
        taas_train_report(&err, -1);
        return TAAS_EXIT_ERROR;
    }
    return taas_train_emit(out) ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
