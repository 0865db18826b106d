/* NpyDataset: images (N, H, W) or (N, H, W, C) and N integer labels from two .npy files.
 * Labels are read whole. Images up to TAAS_NPY_MEMORY_LIMIT bytes (1 GiB) are read whole
 * too; bigger arrays stay where they are and each sample is one range read through the
 * fetcher. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"

#define NPY_IN_MEMORY ((uint64_t)1 << 30)
#define LIMIT_ENV "TAAS_NPY_MEMORY_LIMIT"
#define NPY_HEAD_GUESS 4096

typedef struct npy_ds {
    taas_fetcher *f;
    char *url;
    taas_npy h;
    taas_blob blob;              /* the whole images file, when in memory */
    size_t sample_elems, sample_bytes;
    int64_t *labels;
    int hh, w, c;
} npy_ds;

static const char *HINT = "NpyDataset(images, labels): images.npy holds (N, H, W) or (N, H, W, C) numbers, "
                          "labels.npy holds N integers: numpy.save('images.npy', x); numpy.save('labels.npy', y)";

static int npy_get(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    npy_ds *ds = impl;
    const unsigned char *src;
    unsigned char *tmp = NULL;
    if (ds->blob.data) {
        src = ds->blob.data + ds->h.data_off + index * ds->sample_bytes;
    } else {
        tmp = malloc(ds->sample_bytes);
        if (!tmp) return taas_fmt_oom(err, "a sample buffer");
        if (taas_fetch_range(ds->f, ds->url, ds->h.data_off + (uint64_t)index * ds->sample_bytes, ds->sample_bytes,
                             tmp, err) != 0) {
            free(tmp);
            return -1;
        }
        src = tmp;
    }
    img->h = ds->hh;
    img->w = ds->w;
    img->c = ds->c;
    if (ds->h.kind == 'u' && ds->h.itemsize == 1) {
        img->type = TAAS_PIX_U8;
        if (tmp) {
            img->data = tmp;
            tmp = NULL;
        } else {
            img->data = malloc(ds->sample_bytes);
            if (img->data) memcpy(img->data, src, ds->sample_bytes);
        }
    } else {
        img->type = TAAS_PIX_F32;
        img->data = malloc(ds->sample_elems * sizeof(float));
        if (img->data) taas_npy_to_f32(&ds->h, src, ds->sample_elems, img->data);
    }
    free(tmp);
    if (!img->data) return taas_fmt_oom(err, "an image");
    *label = ds->labels[index];
    return 0;
}

static void npy_free(void *impl) {
    npy_ds *ds = impl;
    if (!ds) return;
    if (ds->blob.data) taas_blob_free(&ds->blob);
    free(ds->labels);
    free(ds->url);
    free(ds);
}

static const taas_format_ops NPY_OPS = {npy_get, npy_free, NULL};

static int truncated(const char *url, uint64_t have, uint64_t want, taas_error *err) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                   "%s is truncated: its header promises %llu bytes of data, but the file has %llu", url,
                   (unsigned long long)want, (unsigned long long)have);
    taas_error_hint(err, "the file was cut short: write or fetch it again");
    return -1;
}

/* The labels: an integer array (N,) or (N, 1), read whole. */
static int read_labels(npy_ds *ds, taas_fetcher *f, const char *url, uint64_t *n, taas_error *err) {
    taas_blob b = {0};
    if (taas_fetch(f, url, &b, err) != 0) return -1;
    taas_npy h;
    int rc = -1;
    if (taas_npy_parse(b.data, b.len, url, &h, NULL, err) != 0) goto done;
    if (h.kind == 'f') {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: labels must be integers, not dtype '%s'", url, h.descr);
        taas_error_hint(err, "save integer class indices: numpy.save(path, labels.astype('int64'))");
        goto done;
    }
    if (!(h.ndim == 1 || (h.ndim == 2 && h.shape[1] == 1))) {
        char shape[96] = "(";
        for (int i = 0; i < h.ndim; i++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", i ? ", " : "",
                     (unsigned long long)h.shape[i]);
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s)", h.ndim == 1 ? "," : "");
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: labels must have shape (N,), not %s", url, shape);
        taas_error_hint(err, "%s", HINT);
        goto done;
    }
    uint64_t bytes = h.count * (uint64_t)h.itemsize;
    if (b.len - h.data_off < bytes) {
        truncated(url, b.len - h.data_off, bytes, err);
        goto done;
    }
    ds->labels = malloc((h.count ? h.count : 1) * sizeof(int64_t));
    if (!ds->labels) {
        taas_fmt_oom(err, "the labels");
        goto done;
    }
    long long beyond = taas_npy_to_i64(&h, b.data + h.data_off, h.count, ds->labels);
    if (beyond >= 0) {
        const unsigned char *p = (const unsigned char *)b.data + h.data_off + 8 * (size_t)beyond;
        uint64_t v = 0;
        for (int k = 7; k >= 0; k--) v = v << 8 | p[k];  /* little-endian: the parser refuses big */
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: label %llu of sample %lld is beyond any class index", url,
                       (unsigned long long)v, beyond);
        taas_error_hint(err, "labels are class indices 0..C-1: numpy.save(path, labels.astype('int64'))");
        goto done;
    }
    *n = h.count;
    rc = 0;
done:
    taas_blob_free(&b);
    return rc;
}

/* TAAS_NPY_MEMORY_LIMIT: bytes, with an optional K, M or G (binary) suffix. */
static int memory_limit(uint64_t *out, taas_error *err) {
    const char *v = getenv(LIMIT_ENV);
    *out = NPY_IN_MEMORY;
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (errno || end == v || *end || v[0] == '-' || (shift && n > (UINT64_MAX >> shift))) {
        char q[48];
        snprintf(q, sizeof q, "%.40s", v);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s='%s' is not a size in bytes", LIMIT_ENV, q);
        taas_error_hint(err, "give a whole number of bytes with an optional K, M or G suffix, e.g. %s=512M", LIMIT_ENV);
        return -1;
    }
    *out = (uint64_t)n << shift;
    return 0;
}

/* The images' header, and the whole file when it is small enough to keep. */
static int read_images(npy_ds *ds, taas_fetcher *f, taas_error *err) {
    taas_object_info oi;
    uint64_t limit;
    if (memory_limit(&limit, err) != 0) return -1;
    if (taas_fetch_info(f, ds->url, &oi, err) != 0) return -1;
    if (oi.size <= limit) {
        if (taas_fetch(f, ds->url, &ds->blob, err) != 0) return -1;
        if (taas_npy_parse(ds->blob.data, ds->blob.len, ds->url, &ds->h, NULL, err) != 0) return -1;
        oi.size = ds->blob.len;
    } else {
        unsigned char *head = malloc(NPY_HEAD_GUESS);
        if (!head) return taas_fmt_oom(err, "a header buffer");
        size_t need = 0, got = oi.size < NPY_HEAD_GUESS ? (size_t)oi.size : NPY_HEAD_GUESS;
        int rc = taas_fetch_range(f, ds->url, 0, got, head, err);
        if (rc == 0) rc = taas_npy_parse(head, got, ds->url, &ds->h, &need, err);
        /* need > got whenever rc is 1; said here so that realloc is never asked for 0 bytes */
        if (rc == 1 && need > got && need <= oi.size) {
            unsigned char *bigger = realloc(head, need);
            if (!bigger) {
                free(head);
                return taas_fmt_oom(err, "a header buffer");
            }
            head = bigger;
            rc = taas_fetch_range(f, ds->url, 0, need, head, err);
            if (rc == 0) rc = taas_npy_parse(head, need, ds->url, &ds->h, NULL, err);
        } else if (rc == 1) {
            rc = taas_npy_parse(head, got, ds->url, &ds->h, NULL, err); /* says where it ends */
        }
        free(head);
        if (rc != 0) return -1;
    }
    taas_npy *h = &ds->h;
    if (h->ndim != 3 && h->ndim != 4) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "%s: images must have shape (N, H, W) or (N, H, W, C), not %d dimensions", ds->url, h->ndim);
        taas_error_hint(err, "%s", HINT);
        return -1;
    }
    for (int i = 1; i < h->ndim; i++) {
        if (h->shape[i] == 0 || h->shape[i] > 65536) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: image dimension %d is %llu; it must be 1..65536", ds->url,
                           i, (unsigned long long)h->shape[i]);
            taas_error_hint(err, "%s", HINT);
            return -1;
        }
    }
    ds->hh = (int)h->shape[1];
    ds->w = (int)h->shape[2];
    ds->c = h->ndim == 4 ? (int)h->shape[3] : 1;
    ds->sample_elems = (size_t)ds->hh * ds->w * ds->c;
    ds->sample_bytes = ds->sample_elems * (size_t)h->itemsize;
    uint64_t bytes = h->count * (uint64_t)h->itemsize;
    if (oi.size < h->data_off || oi.size - h->data_off < bytes) return truncated(ds->url, oi.size - h->data_off, bytes, err);
    return 0;
}

int taas_format_npy_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err) {
    const char *images = taas_fmt_spec_str(spec, "images"), *labels = taas_fmt_spec_str(spec, "labels");
    if (!images || !labels || !images[0] || !labels[0]) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "NpyDataset needs images and labels: the paths of two .npy files");
        taas_error_hint(err, "%s", HINT);
        return -1;
    }
    npy_ds *ds = calloc(1, sizeof *ds);
    if (!ds) return taas_fmt_oom(err, "a dataset");
    ds->f = f;
    ds->url = strdup(images);
    uint64_t nlab = 0;
    if (!ds->url) {
        taas_fmt_oom(err, "a file name");
        goto fail;
    }
    if (read_images(ds, f, err) != 0) {
        taas_fmt_prefix(err, "NpyDataset images");
        goto fail;
    }
    if (read_labels(ds, f, labels, &nlab, err) != 0) {
        taas_fmt_prefix(err, "NpyDataset labels");
        goto fail;
    }
    if (ds->h.shape[0] != nlab) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "NpyDataset: %s has %llu images but %s has %llu labels", images,
                       (unsigned long long)ds->h.shape[0], labels, (unsigned long long)nlab);
        taas_error_hint(err, "images[i] goes with labels[i]: both arrays need the same first dimension");
        goto fail;
    }
    if (nlab == 0) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "NpyDataset: %s holds no samples (its first dimension is 0)", images);
        taas_error_hint(err, "%s", HINT);
        goto fail;
    }
    d->info.size = (size_t)nlab;
    d->info.h = ds->hh;
    d->info.w = ds->w;
    d->info.c = ds->c;
    snprintf(d->info.source, sizeof d->info.source, "%s", images);
    d->ops = &NPY_OPS;
    d->impl = ds;
    return 0;
fail:
    npy_free(ds);
    return -1;
}
