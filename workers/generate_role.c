/* taas-worker generate: text (tokens) from a model of tokens, for generate() in a notebook
 * (kernel/lang/action_generate.c), by nanoGPT's sampling loop (workers/train/sample.h) on a
 * model planned for block_size tokens. Prints {"tokens": [...]} (the new ones). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "role.h"
#include "sample.h"
#include "train_job.h"

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
    json_t *out = NULL;
    if (!t) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "generate needs a model of tokens (an Embedding first, an "
                       "(N, T, V) output), such as GPT2LMHeadModel");
        taas_error_hint(err, "generate(net, prompt) with net = transformers.GPT2LMHeadModel(...)");
        goto done;
    }
    if (!seq) {
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
    if (taas_sample_tokens(m, seq, &len, max_new, temperature, (int)top_k, (uint64_t)seed, err)) goto done;
    out = json_object();
    json_t *ids = json_array();
    for (size_t i = n0; i < len; i++) json_array_append_new(ids, json_integer(seq[i]));
    json_object_set_new(out, "tokens", ids);
done:
    free(seq);
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
