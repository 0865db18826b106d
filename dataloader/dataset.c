/* Datasets: opening by the spec's "type", and the calls every format shares. */
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"
#include "utf8.h"

typedef int (*open_fn)(taas_dataset *, const json_t *, taas_fetcher *, taas_error *);

static const struct {
    const char *type;
    open_fn open;
} FORMATS[] = {
    {"MNIST", taas_format_idx_open},
    {"FashionMNIST", taas_format_idx_open},
    {"CIFAR10", taas_format_cifar_open},
    {"NpyDataset", taas_format_npy_open},
    {"WebDataset", taas_format_webdataset_open},
    {"ImageFolder", taas_format_imagefolder_open},
    {"TextFile", taas_format_text_open},
    {"TokenShards", taas_format_tokens_open},
};
#define N_FORMATS (sizeof FORMATS / sizeof FORMATS[0])

taas_dataset *taas_dataset_open(const json_t *spec, taas_fetcher *f, taas_error *err) {
    taas_error_clear(err);
    if (!json_is_object(spec)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a dataset spec must be a JSON object, not %s",
                       spec ? (json_is_array(spec) ? "an array" : "a scalar") : "nothing");
        taas_error_hint(err, "build it with taas_value_spec from a dataset value such as FashionMNIST()");
        return NULL;
    }
    const char *type = taas_fmt_spec_str(spec, "type");
    if (!type) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the dataset spec has no \"type\"");
        taas_error_hint(err, "a dataset spec names its dataset: {\"type\": \"FashionMNIST\", ...}");
        return NULL;
    }
    size_t i = 0;
    while (i < N_FORMATS && strcmp(FORMATS[i].type, type) != 0) i++;
    if (i == N_FORMATS) {
        char q[64];
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "unknown dataset type '%s'",
                       taas_utf8_clip(q, sizeof q, type, strlen(type), 40));
        taas_error_hint(err, "the loaders read MNIST, FashionMNIST, CIFAR10, NpyDataset, WebDataset, ImageFolder, "
                             "TextFile and TokenShards");
        return NULL;
    }
    const json_t *tt = json_object_get(spec, "target_transform");
    if (tt && !json_is_null(tt)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: target_transform is not supported by the loaders",
                       type);
        taas_error_hint(err, "leave target_transform=None: labels reach the model as the dataset stores them");
        return NULL;
    }
    taas_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        taas_fmt_oom(err, "a dataset");
        return NULL;
    }
    snprintf(d->info.type, sizeof d->info.type, "%s", type);
    if (FORMATS[i].open(d, spec, f, err) != 0) {
        free(d);
        return NULL;
    }
    return d;
}

void taas_dataset_free(taas_dataset *d) {
    if (!d) return;
    if (d->ops && d->ops->free) d->ops->free(d->impl);
    free(d);
}

const taas_dataset_info *taas_dataset_info_get(const taas_dataset *d) {
    return &d->info;
}

int taas_dataset_get(taas_dataset *d, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    int boxed;
    return taas_dataset_get_hinted(d, index, NULL, img, label, &boxed, err);
}

int taas_dataset_get_hinted(taas_dataset *d, size_t index, const taas_crop_hint *hint, taas_image *img,
                            int64_t *label, int *boxed, taas_error *err) {
    memset(img, 0, sizeof *img);
    *label = 0;
    *boxed = 0;
    if (index >= d->info.size) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "sample %zu is out of range: %s has %zu samples (%s)", index,
                       d->info.type, d->info.size, d->info.source);
        taas_error_hint(err, "sample indices go from 0 to len(dataset) - 1");
        return -1;
    }
    int rc = hint && d->ops->get_hinted ? d->ops->get_hinted(d->impl, index, hint, img, label, boxed, err)
                                        : d->ops->get(d->impl, index, img, label, err);
    if (rc != 0) {
        taas_image_free(img);
        char head[32];
        int n = snprintf(head, sizeof head, "sample %zu", index);
        if (strncmp(err->message, head, (size_t)n) != 0) taas_fmt_prefix(err, "sample %zu (%s)", index, d->info.source);
        return -1;
    }
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------- */

void taas_fmt_prefix(taas_error *err, const char *fmt, ...) {
    char pre[512], old[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof old);
    size_t cap = sizeof err->message, k = strlen(pre), ol = strnlen(old, sizeof old - 1);
    memcpy(err->message, pre, k);
    memcpy(err->message + k, ": ", 2);
    k += 2;
    if (ol > cap - 1 - k) ol = cap - 1 - k;
    memcpy(err->message + k, old, ol);
    k += ol;
    err->message[k] = '\0';
    /* a cut may leave half a UTF-8 sequence at the end */
    while (k > 0 && !taas_utf8_valid(err->message, k)) err->message[--k] = '\0';
}

char *taas_fmt_join(const char *root, const char *name) {
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/') rl--;
    size_t nl = strlen(name);
    char *s = malloc(rl + nl + 2);
    if (!s) return NULL;
    memcpy(s, root, rl);
    size_t k = rl;
    if (rl == 0 || root[rl - 1] != '/') s[k++] = '/';
    memcpy(s + k, name, nl + 1);
    return s;
}

const char *taas_fmt_basename(const char *s) {
    const char *q = strchr(s, '?'); /* an URL's query is not part of the name */
    size_t n = q ? (size_t)(q - s) : strlen(s);
    while (n > 1 && s[n - 1] == '/') n--;
    const char *b = s;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '/') b = s + i + 1;
    return b;
}

/* One pattern's names: a local glob (with * ? or [), else the brace expansion. */
static char **expand_one(const char *pattern, taas_error *err) {
    if (!strstr(pattern, "://") && strpbrk(pattern, "*?[")) {
        glob_t g;
        int rc = glob(pattern, GLOB_BRACE, NULL, &g);
        if (rc == GLOB_NOMATCH) {
            taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "%s matches no file", pattern);
            taas_error_hint(err, "check the pattern and the folder it names");
            return NULL;
        }
        char **v = rc == 0 ? calloc(g.gl_pathc + 1, sizeof *v) : NULL;
        for (size_t i = 0; v && i < g.gl_pathc; i++)
            if (!(v[i] = strdup(g.gl_pathv[i]))) {
                taas_strv_free(v);
                v = NULL;
            }
        globfree(&g);
        if (!v) taas_fmt_oom(err, "the shard list");
        return v;
    }
    return taas_brace_expand(pattern, err);
}

int taas_fmt_urls(const json_t *urls, const char *type, const char *ext, char ***out, size_t *nout, taas_error *err) {
    size_t n = json_is_array(urls) ? json_array_size(urls) : 1;
    if (!json_is_string(urls) && !json_is_array(urls)) n = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *u = json_is_array(urls) ? json_array_get(urls, i) : urls;
        if (!json_is_string(u)) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: urls[%zu] is not a string", type, i);
            taas_error_hint(err, "urls is a path or URL, a brace pattern such as 'train-{0000..0099}.%s', a local "
                                 "glob, or a list of them", ext);
            return -1;
        }
        char **v = expand_one(json_string_value(u), err);
        if (!v) return -1;
        size_t k = 0;
        while (v[k]) k++;
        char **grown = realloc(*out, (*nout + k + 1) * sizeof *grown);
        if (!grown) {
            taas_strv_free(v);
            taas_fmt_oom(err, "the shard list");
            return -1; /* said here: the analyzer cannot see taas_fmt_oom's -1 in another file */
        }
        *out = grown;
        for (size_t j = 0; j < k; j++) {
            (*out)[(*nout)++] = v[j];
            v[j] = NULL;
        }
        (*out)[*nout] = NULL;
        taas_strv_free(v);
    }
    if (*nout == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: urls names no shard", type);
        taas_error_hint(err, "give the shards' paths or URLs, e.g. urls='data/train-{0000..0099}.%s'", ext);
        return -1;
    }
    if (*nout > UINT32_MAX) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: urls names %zu shards; at most %u", type, *nout,
                       UINT32_MAX);
        taas_error_hint(err, "pack the samples into fewer, larger shards");
        return -1;
    }
    return 0;
}

const char *taas_fmt_spec_str(const json_t *spec, const char *key) {
    const json_t *v = json_object_get(spec, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int taas_fmt_not_found(const taas_error *err) {
    static const char *const MARKS[] = {": 404", ": 410", ": 403", "No such file or directory", "Not a directory"};
    for (size_t i = 0; i < sizeof MARKS / sizeof MARKS[0]; i++)
        if (strstr(err->message, MARKS[i])) return 1;
    return 0;
}

int taas_fmt_oom(taas_error *err, const char *what) {
    taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory while allocating %s", what);
    taas_error_hint(err, "free memory on the loader's machine, or use a smaller dataset");
    return -1;
}
