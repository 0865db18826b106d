/* transformers.GPT2LMHeadModel.from_pretrained(): a GPT-2 from a folder as Hugging Face
 * saves one (config.json and model.safetensors), or from Hugging Face's local cache by the
 * hub's name. Nothing is downloaded: a model not at hand is an error that says where it was
 * looked for and how to put it there. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errnames.h"
#include "fit.h"
#include "modelview.h"
#include "rows.h"
#include "utf8.h"

/* config.json's keys that change nothing of a GPT2LMHeadModel's training: the hub's
 * bookkeeping, the labels and heads of other tasks, generation's settings. */
static const char *const PASSIVE[] = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "_name_or_path", "_num_labels",
    "id2label", "label2id", "task_specific_params", "pad_token_id", "output_attentions", "output_hidden_states",
    "return_dict", "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
    "summary_use_proj", "n_ctx", NULL,
};

static int passive(const char *key) {
    for (size_t i = 0; PASSIVE[i]; i++)
        if (!strcmp(PASSIVE[i], key)) return 1;
    return 0;
}

static taas_value *value_of(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_INTEGER: return taas_int((int64_t)json_integer_value(j));
    case JSON_REAL: return taas_float(json_real_value(j));
    case JSON_TRUE: return taas_bool(1);
    case JSON_FALSE: return taas_bool(0);
    case JSON_NULL: return taas_none();
    case JSON_STRING: return taas_str(json_string_value(j), json_string_length(j));
    default: return NULL;
    }
}

int taas_gpt2_config_from_json(const char *text, size_t n, const char *where, taas_value **out, taas_error *err) {
    json_error_t je;
    json_t *c = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    const char *type = json_string_value(json_object_get(c, "model_type"));
    if (!json_is_object(c) || (type && strcmp(type, "gpt2"))) {
        if (json_is_object(c))
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s is the config of a %s model, not of GPT-2", where, type);
        else
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s is not a JSON object: %s (line %d)", where,
                           c ? "another kind of value" : je.text, je.line);
        taas_error_hint(err, "give the folder of a GPT-2 saved by Hugging Face (save_pretrained): config.json with "
                             "\"model_type\": \"gpt2\", and model.safetensors");
        json_decref(c);
        return -1;
    }
    const taas_builtin *cfg = taas_builtin_find("transformers.GPT2Config");
    taas_karg a[24];
    size_t k = 0;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(c, key, v) {
        if (passive(key)) continue;
        if (taas_param_index(cfg, key) < 0 || k == sizeof a / sizeof *a) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s has \"%s\", which taas's GPT2Config does not take",
                           where, key);
            taas_error_hint(err, "taas trains GPT-2 as Hugging Face's GPT2Config describes it; remove the key if it "
                                 "changes nothing for training");
            rc = -1;
            break;
        }
        taas_value *x = value_of(v);
        if (!x) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: \"%s\" is not a number, a string, a bool or null",
                           where, key);
            taas_error_hint(err, "GPT2Config's keys are numbers, strings and booleans");
            rc = -1;
            break;
        }
        a[k++] = (taas_karg){key, x};
    }
    if (rc) {
        for (size_t i = 0; i < k; i++) taas_unref(a[i].v);
        json_decref(c);
        return -1;
    }
    /* the keywords' own checks: types, ranges, the keys taas refuses by name */
    taas_value *config = taas_construct("GPT2Config", a, k, err);
    json_decref(c);
    if (!config) {  /* the row's words, said of the file */
        char msg[sizeof err->message];
        memcpy(msg, err->message, sizeof msg);
        int w = snprintf(err->message, sizeof err->message, "%s: %s", where, msg);
        if (w < 0 || (size_t)w >= sizeof err->message) memcpy(err->message, msg, sizeof msg);
        return -1;
    }
    *out = config;
    return 0;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Hugging Face's cache: $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub or
 * ~/.cache/huggingface/hub, as huggingface_hub looks. */
static void hub_cache(char *out, size_t n) {
    const char *c = getenv("HF_HUB_CACHE"), *h = getenv("HF_HOME"), *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (c && *c) snprintf(out, n, "%s", c);
    else if (h && *h) snprintf(out, n, "%s/hub", h);
    else if (x && *x) snprintf(out, n, "%s/huggingface/hub", x);
    else snprintf(out, n, "%s/.cache/huggingface/hub", home && *home ? home : "/root");
}

/* The folder of name: itself when it is one, else the snapshot refs/main names in the cache's
 * models--<org>--<name>. 0, or -1 with err saying where it looked. */
static int model_folder(taas_call_ctx *cx, const char *name, char *dir, size_t n) {
    if (is_dir(name)) {
        snprintf(dir, n, "%s", name);
        return 0;
    }
    char cache[PATH_MAX / 4], repo[PATH_MAX / 4], ref[PATH_MAX], rev[96] = "";
    hub_cache(cache, sizeof cache);
    size_t r = (size_t)snprintf(repo, sizeof repo, "models");
    for (const char *p = name; *p && r + 3 < sizeof repo; p++) {  /* org/name: models--org--name */
        if (*p == '/' || p == name) repo[r++] = '-', repo[r++] = '-';
        if (*p != '/') repo[r++] = *p;
    }
    repo[r] = '\0';
    int w = snprintf(ref, sizeof ref, "%s/%s/refs/main", cache, repo);
    FILE *f = w < 0 || (size_t)w >= sizeof ref || strstr(name, "..") || name[0] == '/' ? NULL : fopen(ref, "r");
    if (f) {
        if (!fgets(rev, sizeof rev, f)) rev[0] = '\0';
        fclose(f);
        rev[strcspn(rev, "\r\n")] = '\0';
    }
    int ok = rev[0] && !strchr(rev, '/') && strcmp(rev, ".") && strcmp(rev, "..");
    if (ok) {
        w = snprintf(dir, n, "%s/%s/snapshots/%s", cache, repo, rev);
        if (w > 0 && (size_t)w < n && is_dir(dir)) return 0;
    }
    char q[300];
    taas_utf8_clip(q, sizeof q, name, strlen(name), 120);
    taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "no GPT-2 '%s' at hand: it is not a folder, and Hugging Face's cache "
                   "(%s) has no snapshot of it; taas downloads nothing", q, cache);
    taas_error_hint(cx->err, "give the folder that save_pretrained() wrote (config.json, model.safetensors), or fill "
                             "the cache where there is internet (huggingface-cli download %s) and copy it here", q);
    return -1;
}

/* transformers.GPT2LMHeadModel.from_pretrained(pretrained_model_name_or_path) */
int taas_from_pretrained_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (model_folder(cx, a[0]->u.str.s, dir, sizeof dir)) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = NULL;
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (f) {
        text = malloc(1 << 20);  /* a config is a few KiB */
        n = text ? fread(text, 1, 1 << 20, f) : 0;
        fclose(f);
    }
    if (!text || n == 0 || n == 1 << 20) {
        int e = errno;
        free(text);
        taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "cannot read %s: %s", path,
                       !f ? strerror(e) : n == 1 << 20 ? "larger than 1 MiB" : "empty or unreadable");
        taas_error_hint(cx->err, "the folder needs the config.json that save_pretrained() writes");
        return -1;
    }
    taas_value *config = NULL;
    int rc = taas_gpt2_config_from_json(text, n, path, &config, cx->err);
    free(text);
    if (rc) {
        cx->err->pos = cx->pos;
        return -1;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat st;
    if (stat(path, &st) != 0) {
        taas_unref(config);
        taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "cannot read %s: %s", path, strerror(errno));
        taas_error_hint(cx->err, "the folder needs model.safetensors (taas reads no pytorch_model.bin: convert it "
                                 "with safetensors' save_file)");
        return -1;
    }
    taas_value *model = taas_construct("GPT2LMHeadModel", (taas_karg[]){{NULL, config}}, 1, cx->err);
    if (!model) return -1;
    /* HF's file as it is (GPT2Model's keys, the attention's mask buffers): load() checks it */
    if (taas_model_check_weights(model, path, cx->err) || taas_weights_copy_in(cx, model, path)) {
        cx->err->pos = cx->pos;
        taas_unref(model);
        return -1;
    }
    *out = model;
    return 0;
}
