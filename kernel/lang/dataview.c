/* Datasets and DataLoaders in the notebook: the probe cache, len() and the displays. */
#include "dataview.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errnames.h"
#include "rows.h"
#include "utf8.h"
#include "worker.h"

/* Enough for every dataset of a session; the oldest answer goes first past it. */
#define CACHE_MAX 64

typedef struct probe_entry {
    char *key;        /* the dataset's spec, compact JSON with sorted keys */
    uint64_t stamp;   /* of the local files the spec names, when the answer was given */
    json_t *info;
} probe_entry;

struct taas_probe_cache {
    probe_entry e[CACHE_MAX];
    size_t n;
};

taas_probe_cache *taas_probe_cache_new(void) {
    return calloc(1, sizeof(taas_probe_cache));
}

static void entry_free(probe_entry *e) {
    free(e->key);
    json_decref(e->info);
    memset(e, 0, sizeof *e);
}

void taas_probe_cache_free(taas_probe_cache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) entry_free(&c->e[i]);
    free(c);
}

/* FNV-1a over the identity and modification time of every string in the spec that names
 * a local file or folder: a rewritten .npy file changes it, a URL does not. */
static void mix(uint64_t *h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        *h ^= b[i];
        *h *= 1099511628211ull;
    }
}

static void mix_stat(uint64_t *h, const struct stat *st) {
    mix(h, &st->st_dev, sizeof st->st_dev);
    mix(h, &st->st_ino, sizeof st->st_ino);
    mix(h, &st->st_size, sizeof st->st_size);
    mix(h, &st->st_mtim, sizeof st->st_mtim);
}

/* An ImageFolder's root: an image added to or removed from a class folder changes that
 * folder's time, not the root's. The first STAMP_SUBFOLDERS are looked at, which keeps a
 * display quick on a huge root; deeper folders are not. */
#define STAMP_SUBFOLDERS 4096
static void stamp_subfolders(const char *dir, uint64_t *h) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[PATH_MAX];
    for (int n = 0; n < STAMP_SUBFOLDERS && (e = readdir(d)) != NULL; n++) {
        struct stat st;
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) mix_stat(h, &st);
    }
    closedir(d);
}

static void stamp_walk(const json_t *j, uint64_t *h) {
    if (json_is_object(j)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)j, k, v) stamp_walk(v, h);
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++) stamp_walk(json_array_get(j, i), h);
    } else if (json_is_string(j)) {
        const char *s = json_string_value(j);
        if (!strncmp(s, "file://", 7)) s += 7;
        struct stat st;
        if (!s[0] || strstr(s, "://") || stat(s, &st) != 0) return;
        mix_stat(h, &st);
        if (S_ISDIR(st.st_mode)) stamp_subfolders(s, h);
    }
}

static uint64_t stamp_of(const json_t *spec) {
    uint64_t h = 14695981039346656037ull;
    stamp_walk(spec, &h);
    return h;
}

const taas_value *taas_data_dataset_of(const taas_value *v) {
    int kind = taas_value_kind(v);
    if (kind == TAAS_K_DATASET) return v;
    if (kind == TAAS_K_LOADER) return taas_object_arg(v, "dataset");
    return NULL;
}

/* The worker's answer must have what the displays read. */
static int check_answer(const json_t *info, const char *text, taas_error *err) {
    if (json_is_object(info) && json_is_integer(json_object_get(info, "size")) &&
        json_integer_value(json_object_get(info, "size")) >= 0)
        return 0;
    char q[200];
    taas_utf8_clip(q, sizeof q, text ? text : "", text ? strlen(text) : 0, 150);
    taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "taas-worker probe gave an answer without a size: %s", q);
    taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
    return -1;
}

int taas_data_probe(taas_interp *in, const taas_value *dataset, const json_t **info, taas_error *err) {
    *info = NULL;
    taas_probe_cache *c = taas_interp_probe_cache(in);
    taas_walk w;
    taas_walk_begin(&w, "writing the dataset's spec", err);
    json_t *spec = taas_value_spec_walk(dataset, &w);
    if (!spec) return -1;
    char *key = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    uint64_t stamp = stamp_of(spec);
    json_decref(spec);
    if (!key || !c) {
        free(key);
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory while probing a dataset");
    }
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->e[i].key, key) != 0) continue;
        if (c->e[i].stamp == stamp) {
            free(key);
            *info = c->e[i].info;
            return 0;
        }
        entry_free(&c->e[i]);  /* its files changed: ask again */
        c->e[i] = c->e[--c->n];
        break;
    }
    static const char *const args[] = {"--spec", "-", NULL};
    taas_buf out = TAAS_BUF_INIT;
    double timeout = taas_worker_timeout("TAAS_PROBE_TIMEOUT", TAAS_PROBE_TIMEOUT_S);
    if (taas_worker_run("probe", args, key, strlen(key), timeout, "TAAS_PROBE_TIMEOUT",
                        taas_interp_interrupt_fd(in), &out, err)) {
        taas_buf_free(&out);
        free(key);
        return -1;  /* failures are not cached: fixing the files and running again works */
    }
    json_t *ans = out.data ? json_loads(out.data, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    if (check_answer(ans, out.data, err)) {
        json_decref(ans);
        taas_buf_free(&out);
        free(key);
        return -1;
    }
    taas_buf_free(&out);
    if (c->n == CACHE_MAX) {
        entry_free(&c->e[0]);
        memmove(&c->e[0], &c->e[1], (CACHE_MAX - 1) * sizeof c->e[0]);
        c->n--;
    }
    c->e[c->n].key = key;
    c->e[c->n].stamp = stamp;
    c->e[c->n].info = ans;
    *info = c->e[c->n++].info;
    return 0;
}

int taas_data_len(taas_interp *in, const taas_value *v, int64_t *n, taas_error *err) {
    const taas_row *r = taas_row_of(v->u.obj.def);
    if (r && r->size && r->size(v, n)) return 0;  /* the value knows: a WebDataset's length= */
    const taas_value *ds = taas_data_dataset_of(v);
    const json_t *info;
    if (!ds || taas_data_probe(in, ds, &info, err)) return -1;
    int64_t size = (int64_t)json_integer_value(json_object_get(info, "size"));
    if (ds == v) {
        *n = size;
    } else {
        int64_t bs = taas_object_arg(v, "batch_size")->u.i;
        *n = taas_object_arg(v, "drop_last")->u.b ? size / bs : (size + bs - 1) / bs;
    }
    return 0;
}

/* ---- the displays ------------------------------------------------------------------- */

static void row_open(taas_buf *h, const char *name) {
    taas_buf_printf(h, "<tr><th style=\"text-align:left\">%s</th><td style=\"text-align:left\">", name);
}

static void row_text(taas_buf *h, const char *name, const char *text) {
    row_open(h, name);
    taas_buf_html(h, text);
    taas_buf_puts(h, "</td></tr>\n");
}

static void row_repr(taas_buf *h, const char *name, const taas_value *v) {
    char *s = taas_value_repr(v);
    if (!s) {
        h->failed = 1;  /* no memory: the table says so as a whole */
        return;
    }
    row_open(h, name);
    taas_buf_puts(h, strchr(s, '\n') ? "<pre>" : "<code>");
    taas_buf_html(h, s);
    taas_buf_puts(h, strchr(s, '\n') ? "</pre>" : "</code>");
    taas_buf_puts(h, "</td></tr>\n");
    free(s);
}

static void dataset_rows(taas_buf *h, const taas_value *ds, const json_t *info) {
    row_open(h, "Samples");
    taas_buf_thousands(h, (long long)json_integer_value(json_object_get(info, "size")));
    taas_buf_puts(h, "</td></tr>\n");
    const json_t *shape = json_object_get(info, "shape");
    if (json_array_size(shape) == 3) {
        row_open(h, "Sample shape");
        taas_buf_printf(h, "(%lld, %lld, %lld)", (long long)json_integer_value(json_array_get(shape, 0)),
                        (long long)json_integer_value(json_array_get(shape, 1)),
                        (long long)json_integer_value(json_array_get(shape, 2)));
        if (json_is_true(json_object_get(info, "shape_varies"))) taas_buf_puts(h, " for sample 0; samples vary");
        taas_buf_puts(h, "</td></tr>\n");
    }
    const json_t *names = json_object_get(info, "classes");
    long long nc = (long long)json_integer_value(json_object_get(info, "num_classes"));
    if (json_array_size(names) > 0 || nc > 0) {
        row_open(h, "Classes");
        size_t n = json_array_size(names);
        taas_buf_printf(h, "%lld", n ? (long long)n : nc);
        for (size_t i = 0; i < n && i < 20; i++) {
            taas_buf_puts(h, i ? ", " : ": ");
            taas_buf_html(h, json_string_value(json_array_get(names, i)));
        }
        if (n > 20) taas_buf_puts(h, ", &hellip;");
        taas_buf_puts(h, "</td></tr>\n");
    }
    const char *src = json_string_value(json_object_get(info, "source"));
    if (src && src[0]) {
        row_open(h, "Source");
        taas_buf_puts(h, "<code>");
        taas_buf_html(h, src);
        taas_buf_puts(h, "</code></td></tr>\n");
    }
    const taas_value *train = taas_object_arg(ds, "train");
    if (train && train->type == TAAS_V_BOOL) row_text(h, "Split", train->u.b ? "Train" : "Test");
    const taas_value *t = taas_object_arg(ds, "transform");
    if (t && t->type != TAAS_V_NONE) row_repr(h, "Transform", t);
}

static char *html_of(const taas_value *v, const taas_value *ds, const json_t *info) {
    taas_buf h = TAAS_BUF_INIT;
    taas_buf_puts(&h, "<table class=\"taas-data\">\n<thead><tr><th colspan=\"2\" style=\"text-align:left\">");
    if (v != ds) taas_buf_puts(&h, "DataLoader over ");
    taas_buf_html(&h, ds->u.obj.def->name);
    taas_buf_puts(&h, "</th></tr></thead>\n<tbody>\n");
    dataset_rows(&h, ds, info);
    if (v != ds) {
        int64_t size = (int64_t)json_integer_value(json_object_get(info, "size"));
        int64_t bs = taas_object_arg(v, "batch_size")->u.i;
        int drop = taas_object_arg(v, "drop_last")->u.b;
        row_open(&h, "Batch size");
        taas_buf_thousands(&h, (long long)bs);
        taas_buf_puts(&h, "</td></tr>\n");
        row_text(&h, "Shuffle", taas_object_arg(v, "shuffle")->u.b ? "True" : "False");
        row_text(&h, "Drop last", drop ? "True" : "False");
        row_open(&h, "Batches per epoch");
        taas_buf_thousands(&h, (long long)(drop ? size / bs : (size + bs - 1) / bs));
        taas_buf_puts(&h, "</td></tr>\n");
    }
    taas_buf_puts(&h, "</tbody>\n</table>");
    return taas_buf_take(&h);
}

json_t *taas_data_mimebundle(taas_interp *in, const taas_value *v, taas_error *err) {
    const taas_value *ds = taas_data_dataset_of(v);
    json_t *b = NULL;
    if (!in || !ds) {
        if (!(b = taas_value_mimebundle(v))) taas_value_oom(err, TAAS_NOPOS, "showing the value");
        return b;
    }
    const json_t *info;
    if (taas_data_probe(in, ds, &info, err)) return NULL;
    taas_buf t = TAAS_BUF_INIT;
    taas_data_repr(v, info, &t);
    size_t mark = taas_json_mark();
    char *text = taas_buf_take(&t), *html = html_of(v, ds, info);
    if (text && html) b = json_pack("{s:s, s:s}", "text/plain", text, "text/html", html);
    free(text);
    free(html);
    if (!b || taas_json_lost(mark)) {
        json_decref(b);
        taas_value_oom(err, TAAS_NOPOS, "showing the dataset");
        return NULL;
    }
    return b;
}
