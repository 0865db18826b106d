/* WebDataset: samples from tar shards. At open every shard is fetched once (a few at a
 * time; the fetcher caches them) and indexed: members are grouped as WebDataset groups
 * them (consecutive members sharing the path up to the first dot of the file name), the
 * image member's place is kept and the label is read. A sample is then one range read of
 * its image member and a decode (PNG, JPEG or .npy, told apart by their first bytes). */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "errnames.h"
#include "formats.h"
#include "utf8.h"

#define MAX_KEYS 16
#define INDEX_THREADS 4
#define MAX_LABEL_BYTES 1024

typedef struct wds_sample {
    uint64_t off, size; /* of the image member in its shard */
    int64_t label;      /* the integer, or the offset of a class name in the labels pool */
    uint32_t shard;
    uint32_t named;     /* 1: label is a class name */
    size_t name;        /* offset of the image member's name in the names pool */
} wds_sample;

typedef struct keys {
    char k[MAX_KEYS][32];
    int n;
} keys;

typedef struct shard_index {
    wds_sample *s;
    size_t n, cap;
    taas_buf names, labels; /* NUL-separated strings */
    taas_error err;
    int failed, done;
} shard_index;

typedef struct wds_ds {
    taas_fetcher *f;
    char **urls;
    size_t nurls;
    keys image, label;
    wds_sample *s;
    size_t n;
    taas_buf names, labels;
    const char **classes;
    size_t nclasses;
} wds_ds;

/* ---- options ----------------------------------------------------------------------- */

/* "jpg;jpeg;png" → keys, lower-cased and without leading dots. */
static int split_keys(const char *spec, const char *param, keys *out, taas_error *err) {
    out->n = 0;
    const char *p = spec;
    while (*p) {
        while (*p == ';' || *p == ',' || *p == ' ' || *p == '.') p++;
        size_t n = strcspn(p, ";, ");
        if (n == 0) break;
        if (n >= sizeof out->k[0] || out->n == MAX_KEYS) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "WebDataset: %s names too many or too long extensions", param);
            taas_error_hint(err, "give up to %d extensions separated by ';', e.g. %s='jpg;jpeg;png'", MAX_KEYS, param);
            return -1;
        }
        for (size_t i = 0; i < n; i++) out->k[out->n][i] = (char)tolower((unsigned char)p[i]);
        out->k[out->n][n] = '\0';
        out->n++;
        p += n;
    }
    if (out->n == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "WebDataset: %s names no extension", param);
        taas_error_hint(err, "give the extensions separated by ';', e.g. image_key='jpg;jpeg;png', label_key='cls'");
        return -1;
    }
    return 0;
}

static int key_rank(const keys *k, const char *ext) {
    for (int i = 0; i < k->n; i++)
        if (strcasecmp(k->k[i], ext) == 0) return i;
    return -1;
}

static void list_keys(const keys *k, char *out, size_t cap) {
    out[0] = '\0';
    for (int i = 0; i < k->n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s.%s", i ? ", " : "", k->k[i]);
}

/* urls: a string (brace-expanded, may list several separated by spaces) or a list of them. */
static int expand_urls(const json_t *urls, wds_ds *ds, taas_error *err) {
    return taas_fmt_urls(urls, "WebDataset", "tar", &ds->urls, &ds->nurls, err);
}

/* ---- indexing one shard ------------------------------------------------------------ */

/* The sample being grouped: members sharing a key. */
typedef struct group {
    char *key;
    char seen[256];           /* extensions met, for messages */
    int img_rank, lab_rank;
    uint64_t img_off, img_size;
    char *img_name;
    const unsigned char *lab;
    size_t lab_len;
    char lab_ext[64];
} group;

static void group_reset(group *g) {
    free(g->key);
    free(g->img_name);
    memset(g, 0, sizeof *g);
    g->img_rank = g->lab_rank = -1;
}

/* An integer label in text: optional spaces, sign and digits, nothing else. */
static int parse_int(const unsigned char *p, size_t n, int64_t *out) {
    size_t i = 0;
    while (i < n && isspace(p[i])) i++;
    while (n > i && isspace(p[n - 1])) n--;
    int neg = 0;
    if (i < n && (p[i] == '-' || p[i] == '+')) neg = p[i++] == '-';
    if (i == n) return -1;
    int64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

typedef struct shard_ctx {
    const wds_ds *ds;
    const char *url;
    uint32_t shard;
    shard_index *out;
} shard_ctx;

static int group_error(shard_ctx *c, const group *g, const char *what, taas_error *err) {
    char il[200], ll[200];
    list_keys(&c->ds->image, il, sizeof il);
    list_keys(&c->ds->label, ll, sizeof ll);
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "WebDataset: %s: sample '%s' %s (its members: %s)", c->url, g->key,
                   what, g->seen[0] ? g->seen : "none");
    taas_error_hint(err,
                    "every sample needs an image (%s) and a label (%s) whose names share the part before the "
                    "first dot; set image_key=... or label_key=... if yours have other extensions",
                    il, ll);
    return -1;
}

static int group_close(shard_ctx *c, group *g, taas_error *err) {
    if (!g->key) return 0;
    if (g->img_rank < 0) return group_error(c, g, "has no image", err);
    if (g->lab_rank < 0) return group_error(c, g, "has no label", err);
    shard_index *o = c->out;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1024;
        wds_sample *s = realloc(o->s, cap * sizeof *s);
        if (!s) return taas_fmt_oom(err, "the shard index");
        o->s = s;
        o->cap = cap;
    }
    wds_sample *s = &o->s[o->n];
    memset(s, 0, sizeof *s);
    s->off = g->img_off;
    s->size = g->img_size;
    s->shard = c->shard;
    s->name = o->names.len;
    taas_buf_add(&o->names, g->img_name, strlen(g->img_name) + 1);
    if (g->lab_len > MAX_LABEL_BYTES) {
        char what[200];
        snprintf(what, sizeof what, "has a label member .%s of %zu bytes, too long for a label", g->lab_ext, g->lab_len);
        return group_error(c, g, what, err);
    }
    if (parse_int(g->lab, g->lab_len, &s->label) != 0) {
        size_t a = 0, b = g->lab_len;
        while (a < b && isspace(g->lab[a])) a++;
        while (b > a && isspace(g->lab[b - 1])) b--;
        char q[96], what[256];
        taas_utf8_clip(q, sizeof q, (const char *)g->lab + a, b - a, 40);
        if (strcmp(g->lab_ext, "cls") == 0 || b == a) {
            snprintf(what, sizeof what, "has a label member .%s that is not an integer: '%s'", g->lab_ext, q);
            return group_error(c, g, what, err);
        }
        /* a class name: numbered in sorted order once all shards are read, as ImageFolder does */
        char *clean = taas_utf8_sanitize((const char *)g->lab + a, b - a, NULL);
        if (!clean) return taas_fmt_oom(err, "a label");
        s->named = 1;
        s->label = (int64_t)o->labels.len;
        taas_buf_add(&o->labels, clean, strlen(clean) + 1);
        free(clean);
    }
    o->n++;
    return 0;
}

static int index_shard(shard_ctx *c, taas_fetcher *f, taas_error *err) {
    taas_blob b = {0};
    if (taas_fetch(f, c->url, &b, err) != 0) {
        taas_fmt_prefix(err, "WebDataset shard %u of %zu", c->shard + 1, c->ds->nurls);
        return -1;
    }
    taas_tar_iter it;
    taas_tar_iter_init(&it, b.data, b.len, c->url);
    taas_tar_member m;
    group g;
    memset(&g, 0, sizeof g);
    group_reset(&g);
    int r, rc = 0;
    while ((r = taas_tar_next(&it, &m, err)) == 1) {
        const char *slash = strrchr(m.name, '/');
        const char *base = slash ? slash + 1 : m.name;
        const char *dot = strchr(base, '.');
        if (!dot || dot == base) continue; /* no key: WebDataset skips these too */
        if (base[0] == '_' && base[1] == '_') continue; /* __key__ and other metadata */
        size_t klen = (size_t)(dot - m.name);
        const char *ext = dot + 1;
        if (!g.key || strlen(g.key) != klen || memcmp(g.key, m.name, klen) != 0) {
            if (group_close(c, &g, err) != 0) {
                rc = -1;
                break;
            }
            group_reset(&g);
            g.key = strndup(m.name, klen);
            if (!g.key) {
                rc = taas_fmt_oom(err, "a sample key");
                break;
            }
        }
        /* ",ext," in seen: a second member with the same extension */
        char probe[80];
        snprintf(probe, sizeof probe, ".%s", ext);
        for (const char *s = g.seen; (s = strstr(s, probe)) != NULL; s++) {
            char after = s[strlen(probe)];
            if ((s == g.seen || s[-1] == ' ') && (after == ',' || after == '\0')) {
                char what[160];
                snprintf(what, sizeof what, "has two members named %s (a tar member is repeated)", m.name);
                rc = group_error(c, &g, what, err);
                break;
            }
        }
        if (rc != 0) break;
        if (strlen(g.seen) + strlen(probe) + 3 < sizeof g.seen)
            snprintf(g.seen + strlen(g.seen), sizeof g.seen - strlen(g.seen), "%s%s", g.seen[0] ? ", " : "", probe);
        int ir = key_rank(&c->ds->image, ext), lr = key_rank(&c->ds->label, ext);
        if (ir >= 0 && (g.img_rank < 0 || ir < g.img_rank)) {
            free(g.img_name);
            g.img_name = strdup(m.name);
            if (!g.img_name) {
                rc = taas_fmt_oom(err, "a member name");
                break;
            }
            g.img_rank = ir;
            g.img_off = m.offset;
            g.img_size = m.size;
        } else if (lr >= 0 && (g.lab_rank < 0 || lr < g.lab_rank)) {
            g.lab_rank = lr;
            g.lab = b.data + m.offset;
            g.lab_len = (size_t)m.size;
            snprintf(g.lab_ext, sizeof g.lab_ext, "%s", ext);
        }
    }
    if (rc == 0 && r < 0) rc = -1;
    if (rc == 0) rc = group_close(c, &g, err);
    group_reset(&g);
    taas_tar_iter_free(&it);
    taas_blob_free(&b);
    return rc;
}

/* ---- indexing all shards, a few at a time ----------------------------------------- */

typedef struct pool_job {
    wds_ds *ds;
    shard_index *idx;
    pthread_mutex_t mu;
    size_t next;
    int stop;
} pool_job;

static void *index_worker(void *arg) {
    pool_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next++;
        int stop = j->stop;
        pthread_mutex_unlock(&j->mu);
        if (stop || i >= j->ds->nurls) return NULL;
        shard_ctx c = {j->ds, j->ds->urls[i], (uint32_t)i, &j->idx[i]};
        taas_error_clear(&j->idx[i].err);
        if (index_shard(&c, j->ds->f, &j->idx[i].err) != 0) {
            pthread_mutex_lock(&j->mu);
            j->idx[i].failed = 1;
            j->stop = 1;
            pthread_mutex_unlock(&j->mu);
        }
    }
}

static int index_all(wds_ds *ds, taas_error *err) {
    shard_index *idx = calloc(ds->nurls, sizeof *idx);
    if (!idx) return taas_fmt_oom(err, "the shard index");
    pool_job j = {ds, idx, PTHREAD_MUTEX_INITIALIZER, 0, 0};
    size_t nt = ds->nurls < INDEX_THREADS ? ds->nurls : INDEX_THREADS;
    pthread_t th[INDEX_THREADS];
    size_t started = 0;
    for (; started + 1 < nt; started++)
        if (pthread_create(&th[started], NULL, index_worker, &j) != 0) break;
    index_worker(&j); /* this thread works too */
    for (size_t t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.mu);

    int rc = 0;
    size_t total = 0;
    for (size_t i = 0; i < ds->nurls; i++) {
        if (idx[i].failed) {
            *err = idx[i].err;
            rc = -1;
            break;
        }
        total += idx[i].n;
    }
    if (rc == 0 && total == 0) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "WebDataset: the %zu shard%s starting with %s hold no samples",
                       ds->nurls, ds->nurls == 1 ? "" : "s", ds->urls[0]);
        taas_error_hint(err, "a shard is a tar file of samples such as 000001.png + 000001.cls: check urls");
        rc = -1;
    }
    if (rc == 0) {
        ds->s = malloc(total * sizeof *ds->s);
        if (!ds->s) {
            taas_fmt_oom(err, "the sample index");
            rc = -1; /* said here: the analyzer cannot see taas_fmt_oom's -1 in another file */
        }
    }
    for (size_t i = 0; i < ds->nurls; i++) {
        if (rc == 0) {
            size_t noff = ds->names.len, loff = ds->labels.len;
            if (idx[i].names.len) taas_buf_add(&ds->names, idx[i].names.data, idx[i].names.len);
            if (idx[i].labels.len) taas_buf_add(&ds->labels, idx[i].labels.data, idx[i].labels.len);
            for (size_t k = 0; k < idx[i].n; k++) {
                wds_sample *s = &ds->s[ds->n++];
                *s = idx[i].s[k];
                s->name += noff;
                if (s->named) s->label += (int64_t)loff;
            }
        }
        free(idx[i].s);
        taas_buf_free(&idx[i].names);
        taas_buf_free(&idx[i].labels);
    }
    free(idx);
    return rc;
}

/* ---- class names ------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Text labels become class indices in sorted order of the names. */
static int number_classes(wds_ds *ds, taas_error *err) {
    size_t named = 0;
    for (size_t i = 0; i < ds->n; i++) named += ds->s[i].named;
    if (named == 0) return 0;
    if (named != ds->n) {
        size_t a = 0, b = 0;
        while (!ds->s[a].named) a++;
        while (ds->s[b].named) b++;
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "WebDataset: the labels mix integers and class names: %s is labelled '%s' but %s is "
                       "labelled %lld",
                       ds->names.data + ds->s[a].name, ds->labels.data + ds->s[a].label, ds->names.data + ds->s[b].name,
                       (long long)ds->s[b].label);
        taas_error_hint(err, "label every sample the same way: all with class indices, or all with class names");
        return -1;
    }
    const char **all = malloc(ds->n * sizeof *all);
    if (!all) return taas_fmt_oom(err, "the class names");
    for (size_t i = 0; i < ds->n; i++) all[i] = ds->labels.data + ds->s[i].label;
    qsort(all, ds->n, sizeof *all, cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < ds->n; i++)
        if (u == 0 || strcmp(all[u - 1], all[i]) != 0) all[u++] = all[i];
    ds->classes = all;
    ds->nclasses = u;
    for (size_t i = 0; i < ds->n; i++) {
        const char *name = ds->labels.data + ds->s[i].label;
        const char **hit = bsearch(&name, all, u, sizeof *all, cmp_str);
        ds->s[i].label = hit - all;
    }
    return 0;
}

/* ---- samples ----------------------------------------------------------------------- */

static int wds_get(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    wds_ds *ds = impl;
    const wds_sample *s = &ds->s[index];
    const char *url = ds->urls[s->shard], *member = ds->names.data + s->name;
    unsigned char *buf = malloc(s->size ? (size_t)s->size : 1);
    if (!buf) return taas_fmt_oom(err, "an image member");
    int rc = taas_fetch_range(ds->f, url, s->off, (size_t)s->size, buf, err);
    if (rc == 0) {
        size_t n = (size_t)s->size;
        if (n >= 8 && memcmp(buf, "\x89PNG", 4) == 0) {
            rc = taas_decode_png(buf, n, img, err);
        } else if (n >= 2 && buf[0] == 0xFF && buf[1] == 0xD8) {
            rc = taas_decode_jpeg(buf, n, img, err);
        } else if (n >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0) {
            rc = taas_npy_decode_image(buf, n, member, img, err);
        } else {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "not a PNG, JPEG or .npy image (%zu bytes)", n);
            taas_error_hint(err, "image_key picks the image member of each sample: PNG, JPEG or .npy files");
            rc = -1;
        }
    }
    free(buf);
    if (rc != 0) {
        taas_fmt_prefix(err, "sample %zu (%s member %s)", index, url, member);
        return -1;
    }
    *label = s->label;
    return 0;
}

static void wds_free(void *impl) {
    wds_ds *ds = impl;
    if (!ds) return;
    if (ds->urls) {
        for (size_t i = 0; i < ds->nurls; i++) free(ds->urls[i]);
        free(ds->urls);
    }
    free(ds->s);
    taas_buf_free(&ds->names);
    taas_buf_free(&ds->labels);
    free(ds->classes);
    free(ds);
}

static const taas_format_ops WDS_OPS = {wds_get, wds_free, NULL};

int taas_format_webdataset_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err) {
    wds_ds *ds = calloc(1, sizeof *ds);
    if (!ds) return taas_fmt_oom(err, "a dataset");
    ds->f = f;
    const char *ik = taas_fmt_spec_str(spec, "image_key"), *lk = taas_fmt_spec_str(spec, "label_key");
    const json_t *length = json_object_get(spec, "length");
    if (split_keys(ik ? ik : "jpg;jpeg;png", "image_key", &ds->image, err) != 0 ||
        split_keys(lk ? lk : "cls", "label_key", &ds->label, err) != 0 ||
        expand_urls(json_object_get(spec, "urls"), ds, err) != 0 || index_all(ds, err) != 0 ||
        number_classes(ds, err) != 0)
        goto fail;
    if (json_is_integer(length) && (json_int_t)ds->n != json_integer_value(length)) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "WebDataset: length=%lld, but the %zu shard%s hold %zu samples",
                       (long long)json_integer_value(length), ds->nurls, ds->nurls == 1 ? "" : "s", ds->n);
        taas_error_hint(err, "set length=%zu, or leave it None to take the count from the shards", ds->n);
        goto fail;
    }
    d->info.size = ds->n;
    d->info.num_classes = (int)ds->nclasses;
    d->info.classes = ds->nclasses ? ds->classes : NULL;
    if (ds->nurls == 1)
        snprintf(d->info.source, sizeof d->info.source, "%s", ds->urls[0]);
    else
        snprintf(d->info.source, sizeof d->info.source, "%s (and %zu more shards)", ds->urls[0], ds->nurls - 1);
    d->ops = &WDS_OPS;
    d->impl = ds;
    return 0;
fail:
    wds_free(ds);
    return -1;
}
