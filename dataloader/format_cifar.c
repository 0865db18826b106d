/* CIFAR-10, binary version: records of 1 label byte and 3072 pixel bytes (three 32x32
 * planes, R then G then B), from the folder cifar-10-batches-bin or from
 * cifar-10-binary.tar.gz, which is unpacked in memory. Samples come out HWC like PIL's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"

#define SIDE 32
#define PLANE (SIDE * SIDE)
#define RECORD (1 + 3 * PLANE)
#define N_CLASSES 10
#define MAX_BATCHES 5
#define DIR_NAME "cifar-10-batches-bin"
#define TGZ_NAME "cifar-10-binary.tar.gz"

/* torchvision's names, used when batches.meta.txt is absent */
static const char *const CLASSES[N_CLASSES] = {"airplane", "automobile", "bird", "cat", "deer",
                                               "dog", "frog", "horse", "ship", "truck"};

static const char *HINT = "root must be a folder or URL prefix holding " TGZ_NAME " or the folder " DIR_NAME
                          " (data_batch_1.bin ... data_batch_5.bin, test_batch.bin), from "
                          "https://www.cs.toronto.edu/~kriz/cifar.html (the binary version)";

typedef struct seg {
    taas_blob blob;       /* a .bin file as fetched */
    unsigned char *own;   /* or a copy out of the archive */
    const unsigned char *p;
    size_t n;             /* records */
} seg;

typedef struct cifar_ds {
    seg segs[MAX_BATCHES];
    int nsegs;
    size_t n;
    char *names[N_CLASSES]; /* from batches.meta.txt, or NULL */
    const char *classes[N_CLASSES];
} cifar_ds;

static void cifar_free(void *impl) {
    cifar_ds *ds = impl;
    if (!ds) return;
    for (int i = 0; i < ds->nsegs; i++) {
        if (ds->segs[i].blob.data) taas_blob_free(&ds->segs[i].blob);
        free(ds->segs[i].own);
    }
    for (int i = 0; i < N_CLASSES; i++) free(ds->names[i]);
    free(ds);
}

static int cifar_get(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    cifar_ds *ds = impl;
    int s = 0;
    while (index >= ds->segs[s].n) index -= ds->segs[s++].n;
    const unsigned char *r = ds->segs[s].p + index * RECORD;
    unsigned char *px = malloc(3 * PLANE);
    if (!px) return taas_fmt_oom(err, "an image");
    for (int i = 0; i < PLANE; i++) {
        px[3 * i] = r[1 + i];
        px[3 * i + 1] = r[1 + PLANE + i];
        px[3 * i + 2] = r[1 + 2 * PLANE + i];
    }
    img->data = px;
    img->h = img->w = SIDE;
    img->c = 3;
    img->type = TAAS_PIX_U8;
    *label = r[0];
    return 0;
}

static const taas_format_ops CIFAR_OPS = {cifar_get, cifar_free, NULL};

/* Checks one batch's bytes and adds it as the next segment. */
static int add_batch(cifar_ds *ds, const char *where, const unsigned char *p, size_t len, taas_error *err) {
    if (len == 0 || len % RECORD != 0) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "CIFAR10: %s is truncated or not a CIFAR-10 batch: %zu bytes is not a whole number of "
                       "%d-byte records",
                       where, len, RECORD);
        taas_error_hint(err, "use the binary version (cifar-10-binary.tar.gz), not the Python or MATLAB one; "
                             "fetch it again if it was cut short");
        return -1;
    }
    size_t n = len / RECORD;
    for (size_t i = 0; i < n; i++) {
        if (p[i * RECORD] >= N_CLASSES) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "CIFAR10: %s: record %zu has label %u, outside the 10 classes",
                           where, i, p[i * RECORD]);
            taas_error_hint(err, "use the CIFAR-10 binary version; CIFAR-100's files have two label bytes");
            return -1;
        }
    }
    seg *s = &ds->segs[ds->nsegs++];
    s->p = p;
    s->n = n;
    ds->n += n;
    return 0;
}

/* batches.meta.txt: one class name a line; ignored unless it names all ten. */
static void read_meta(cifar_ds *ds, const unsigned char *p, size_t n) {
    char *names[N_CLASSES] = {0};
    int k = 0;
    size_t i = 0;
    while (i < n && k < N_CLASSES) {
        size_t j = i;
        while (j < n && p[j] != '\n') j++;
        size_t a = i, b = j;
        while (a < b && (p[a] == ' ' || p[a] == '\t' || p[a] == '\r')) a++;
        while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t' || p[b - 1] == '\r')) b--;
        if (b > a && b - a < 64) {
            names[k] = strndup((const char *)p + a, b - a);
            if (!names[k]) break;
            k++;
        }
        i = j + 1;
    }
    if (k == N_CLASSES) {
        for (k = 0; k < N_CLASSES; k++) ds->names[k] = names[k];
    } else {
        for (int m = 0; m < k; m++) free(names[m]);
    }
}

static int batch_names(int train, char names[MAX_BATCHES][32]) {
    if (!train) {
        snprintf(names[0], 32, "test_batch.bin");
        return 1;
    }
    for (int i = 0; i < MAX_BATCHES; i++) snprintf(names[i], 32, "data_batch_%d.bin", i + 1);
    return MAX_BATCHES;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The .bin files of a folder (or URL prefix); *missing = 1 when its first file could not be
 * fetched, so that the caller may try the archive. */
static int from_folder(cifar_ds *ds, taas_fetcher *f, const char *dir, int train, int *missing, taas_error *err) {
    char names[MAX_BATCHES][32];
    int nb = batch_names(train, names);
    *missing = 0;
    for (int i = 0; i < nb; i++) {
        char *url = taas_fmt_join(dir, names[i]);
        if (!url) return taas_fmt_oom(err, "a file name");
        seg *s = &ds->segs[ds->nsegs];
        memset(s, 0, sizeof *s);
        if (taas_fetch(f, url, &s->blob, err) != 0) {
            free(url);
            *missing = i == 0 && taas_fmt_not_found(err);
            if (!*missing) taas_fmt_prefix(err, "CIFAR10");
            return -1;
        }
        int rc = add_batch(ds, url, s->blob.data, s->blob.len, err);
        free(url);
        if (rc != 0) {
            taas_blob_free(&s->blob);
            return -1;
        }
    }
    char *meta = taas_fmt_join(dir, "batches.meta.txt");
    if (!meta) return taas_fmt_oom(err, "a file name");
    taas_blob b = {0};
    taas_error ignored;
    taas_error_clear(&ignored);
    if (taas_fetch(f, meta, &b, &ignored) == 0) { /* optional: torchvision's names otherwise */
        read_meta(ds, b.data, b.len);
        taas_blob_free(&b);
    }
    free(meta);
    return 0;
}

/* *missing = 1 when the archive could not be fetched. */
/* cifar-10-binary.tar.gz inflates to 184 MB (six files of 10,000 samples of 3,073 bytes, and
 * tar's headers): a stream that gives more than twice that is not the archive. */
#define CIFAR_TAR_MAX ((size_t)400 << 20)

static int from_archive(cifar_ds *ds, taas_fetcher *f, const char *url, int train, int *missing, taas_error *err) {
    taas_blob gz = {0};
    *missing = 0;
    if (taas_fetch(f, url, &gz, err) != 0) {
        *missing = taas_fmt_not_found(err);
        if (!*missing) taas_fmt_prefix(err, "CIFAR10");
        return -1;
    }
    unsigned char *tar = NULL;
    size_t tar_len = 0;
    int rc = taas_is_gzip(gz.data, gz.len) ? taas_gunzip(gz.data, gz.len, url, CIFAR_TAR_MAX, &tar, &tar_len, err)
                                           : 0;
    if (rc == 0 && !tar) {
        /* already unpacked by whoever stored it: a plain tar */
        tar = malloc(gz.len ? gz.len : 1);
        if (tar) memcpy(tar, gz.data, gz.len);
        tar_len = gz.len;
        if (!tar) rc = taas_fmt_oom(err, "the archive");
    }
    taas_blob_free(&gz);
    if (rc != 0 || !tar) return -1; /* tar is NULL only with rc set (taas_fmt_oom's -1, in another file) */

    char names[MAX_BATCHES][32];
    int nb = batch_names(train, names);
    const unsigned char *found[MAX_BATCHES] = {0};
    size_t found_len[MAX_BATCHES] = {0};
    taas_tar_iter it;
    taas_tar_iter_init(&it, tar, tar_len, url);
    taas_tar_member m;
    int r;
    while ((r = taas_tar_next(&it, &m, err)) == 1) {
        const char *base = taas_fmt_basename(m.name);
        for (int i = 0; i < nb; i++)
            if (strcmp(base, names[i]) == 0) {
                found[i] = tar + m.offset;
                found_len[i] = (size_t)m.size;
            }
        if (strcmp(base, "batches.meta.txt") == 0) read_meta(ds, tar + m.offset, (size_t)m.size);
    }
    taas_tar_iter_free(&it);
    rc = r < 0 ? -1 : 0;
    for (int i = 0; rc == 0 && i < nb; i++) {
        if (!found[i]) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "CIFAR10: %s has no %s", url, names[i]);
            taas_error_hint(err, "%s", HINT);
            rc = -1;
            break;
        }
        seg *s = &ds->segs[ds->nsegs];
        memset(s, 0, sizeof *s);
        s->own = malloc(found_len[i] ? found_len[i] : 1);
        if (!s->own) {
            rc = taas_fmt_oom(err, "a CIFAR-10 batch");
            break;
        }
        memcpy(s->own, found[i], found_len[i]);
        char where[1200];
        snprintf(where, sizeof where, "%s member %s", url, names[i]);
        if (add_batch(ds, where, s->own, found_len[i], err) != 0) {
            free(s->own);
            s->own = NULL;
            rc = -1;
        }
    }
    free(tar);
    return rc;
}

int taas_format_cifar_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err) {
    const char *root = taas_fmt_spec_str(spec, "root");
    if (!root || !root[0]) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "CIFAR10 needs root: the folder or URL prefix of its files");
        taas_error_hint(err, "%s", HINT);
        return -1;
    }
    const json_t *tr = json_object_get(spec, "train");
    int train = tr ? json_is_true(tr) : 1;
    cifar_ds *ds = calloc(1, sizeof *ds);
    if (!ds) return taas_fmt_oom(err, "a dataset");
    int rc;
    if (ends_with(root, ".tar.gz") || ends_with(root, ".tgz") || ends_with(root, ".tar")) {
        int missing;
        rc = from_archive(ds, f, root, train, &missing, err);
    } else {
        char *dir = strcmp(taas_fmt_basename(root), DIR_NAME) == 0 ? strdup(root) : taas_fmt_join(root, DIR_NAME);
        char *tgz = taas_fmt_join(root, TGZ_NAME);
        int missing = 0;
        if (!dir || !tgz) {
            rc = taas_fmt_oom(err, "a file name");
        } else {
            rc = from_folder(ds, f, dir, train, &missing, err);
            if (rc != 0 && missing) {
                taas_error folder_err = *err;
                taas_error_clear(err);
                rc = from_archive(ds, f, tgz, train, &missing, err);
                if (rc != 0 && missing) {
                    /* neither is there: say both where we looked */
                    taas_error e2 = *err;
                    taas_error_set(err, folder_err.ename, TAAS_NOPOS, "CIFAR10: found neither %s/ nor %s in %s (%s; %s)",
                                   DIR_NAME, TGZ_NAME, root, folder_err.message, e2.message);
                    taas_error_hint(err, "%s", HINT);
                }
            }
        }
        free(dir);
        free(tgz);
    }
    if (rc != 0) {
        cifar_free(ds);
        return -1;
    }
    for (int i = 0; i < N_CLASSES; i++) ds->classes[i] = ds->names[0] ? ds->names[i] : CLASSES[i];
    d->info.size = ds->n;
    d->info.h = d->info.w = SIDE;
    d->info.c = 3;
    d->info.num_classes = N_CLASSES;
    d->info.classes = ds->classes;
    snprintf(d->info.source, sizeof d->info.source, "%s", root);
    d->ops = &CIFAR_OPS;
    d->impl = ds;
    return 0;
}
