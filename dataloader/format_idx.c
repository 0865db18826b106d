/* MNIST and FashionMNIST: the four IDX files (gzipped or not) in a folder or under a URL
 * prefix, read whole at open and kept in memory (47 MB for the training images), as
 * torchvision does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define N_CLASSES 10

/* torchvision's class names */
static const char *const MNIST_CLASSES[] = {"0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
                                            "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"};
static const char *const FASHION_CLASSES[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

/* The bytes of one file, from the fetcher or inflated. */
typedef struct idx_file {
    taas_blob blob;
    unsigned char *inflated;
    const unsigned char *p;
    size_t n;
    char *url;
} idx_file;

static void idx_file_free(idx_file *x) {
    if (x->blob.data) taas_blob_free(&x->blob);
    free(x->inflated);
    free(x->url);
    memset(x, 0, sizeof *x);
}

typedef struct idx_ds {
    idx_file images;
    const unsigned char *pixels; /* n * h * w */
    unsigned char *labels;       /* n */
    size_t n;
    int h, w;
} idx_ds;

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *hint_files(const char *type) {
    return strcmp(type, "FashionMNIST") == 0
               ? "root must be a folder or URL prefix holding train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                 "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each gzipped as .gz or not), or "
                 "torchvision's <root>/FashionMNIST/raw; apt-get install dataset-fashion-mnist and root=None "
                 "give the test and training sets"
               : "root must be a folder or URL prefix holding train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                 "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each gzipped as .gz or not), or "
                 "torchvision's <root>/MNIST/raw";
}

/* The most a gzipped IDX file may inflate to: what its header declares (unsigned bytes, 1 to
 * 3 dimensions of at most 2^32 each, the header itself); a header that is no such IDX header
 * gets its 16 bytes, enough for the checks to say what is wrong. */
static size_t idx_declared(const unsigned char *head, size_t got) {
    if (got < 8 || head[0] || head[1] || head[2] != 0x08 || head[3] < 1 || head[3] > 3) return 16;
    size_t dims = head[3], header = 4 + 4 * dims, total = 1;
    if (got < header) return 16;
    for (size_t d = 0; d < dims; d++) {
        size_t k = be32(head + 4 + 4 * d);
        if (k && total > (SIZE_MAX - header) / k) return 16;  /* no machine holds it: the checks say so */
        total *= k;
    }
    return header + total;
}

/* Fetches name from root (.gz first, then plain, then torchvision's <root>/<type>/raw) and
 * inflates it when it is gzip, no further than its header declares. */
static int load(taas_fetcher *f, const char *type, const char *root, const char *name, const char *what,
                idx_file *out, taas_error *err) {
    memset(out, 0, sizeof *out);
    char rel[4][160];
    snprintf(rel[0], sizeof rel[0], "%s.gz", name);
    snprintf(rel[1], sizeof rel[1], "%s", name);
    snprintf(rel[2], sizeof rel[2], "%s/raw/%s", type, name);
    snprintf(rel[3], sizeof rel[3], "%s/raw/%s.gz", type, name);
    taas_error first;
    taas_error_clear(&first);
    for (int i = 0; i < 4; i++) {
        char *url = taas_fmt_join(root, rel[i]);
        if (!url) return taas_fmt_oom(err, "a file name");
        taas_error e;
        taas_error_clear(&e);
        memset(&out->blob, 0, sizeof out->blob);
        if (taas_fetch(f, url, &out->blob, &e) == 0) {
            out->url = url;
            break;
        }
        if (i == 0) first = e;
        free(url);
        if (!taas_fmt_not_found(&e)) { /* there but unreadable: no point looking further */
            first = e;
            break;
        }
    }
    if (!out->url) {
        *err = first;
        taas_fmt_prefix(err, "%s: cannot read the %s (%s[.gz])", type, what, name);
        if (taas_fmt_not_found(&first)) taas_error_hint(err, "%s", hint_files(type));
        return -1;
    }
    out->p = out->blob.data;
    out->n = out->blob.len;
    if (taas_is_gzip(out->p, out->n)) {
        unsigned char head[16];
        size_t max = idx_declared(head, taas_gunzip_head(out->p, out->n, head, sizeof head));
        if (taas_gunzip(out->p, out->n, out->url, max, &out->inflated, &out->n, err) != 0) {
            taas_fmt_prefix(err, "%s", type);
            idx_file_free(out);
            return -1;
        }
        taas_blob_free(&out->blob);
        memset(&out->blob, 0, sizeof out->blob);
        out->p = out->inflated;
    }
    return 0;
}

static int bad_magic(const char *type, const idx_file *x, uint32_t magic, uint32_t want, taas_error *err) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                   "%s: %s: wrong IDX magic 0x%08x, expected 0x%08x (%s)", type, x->url, magic, want,
                   want == IDX_IMAGES_MAGIC ? "IDX images: unsigned bytes in 3 dimensions"
                                            : "IDX labels: unsigned bytes in 1 dimension");
    if (magic == (want == IDX_IMAGES_MAGIC ? IDX_LABELS_MAGIC : IDX_IMAGES_MAGIC))
        taas_error_hint(err, "this is an IDX %s file: the images and labels files seem swapped",
                        want == IDX_IMAGES_MAGIC ? "labels" : "images");
    else
        taas_error_hint(err, "the file is not an MNIST IDX file, or it is damaged: %s", hint_files(type));
    return -1;
}

static int bad_length(const char *type, const idx_file *x, const char *what, size_t want, size_t got,
                      taas_error *err) {
    if (got < want)
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "%s: %s is truncated: its header promises %s of %zu bytes, but only %zu bytes follow", type,
                       x->url, what, want, got);
    else
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "%s: %s is longer than its header says: %s of %zu bytes, then %zu bytes more", type, x->url,
                       what, want, got - want);
    taas_error_hint(err, "the file is damaged or was cut short: fetch it again");
    return -1;
}

static int check_images(const char *type, idx_ds *ds, taas_error *err) {
    const idx_file *x = &ds->images;
    /* the magic first: a wrong file is more likely than a cut one */
    if (x->n >= 4 && be32(x->p) != IDX_IMAGES_MAGIC) return bad_magic(type, x, be32(x->p), IDX_IMAGES_MAGIC, err);
    if (x->n < 16) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: %s is truncated: %zu bytes, too short for an IDX header",
                       type, x->url, x->n);
        taas_error_hint(err, "the file is damaged or was cut short: fetch it again");
        return -1;
    }
    uint32_t n = be32(x->p + 4), h = be32(x->p + 8), w = be32(x->p + 12);
    if (h == 0 || w == 0 || h > 65536 || w > 65536 || n == 0) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: %s: its header gives %u images of %ux%u pixels", type,
                       x->url, n, h, w);
        taas_error_hint(err, "an IDX images file holds N > 0 images of H x W pixels (28 x 28 for MNIST)");
        return -1;
    }
    size_t want = (size_t)n * h * w;
    char what[96];
    snprintf(what, sizeof what, "%u images of %ux%u pixels", n, h, w);
    if (x->n - 16 != want) return bad_length(type, x, what, want, x->n - 16, err);
    ds->pixels = x->p + 16;
    ds->n = n;
    ds->h = (int)h;
    ds->w = (int)w;
    return 0;
}

static int check_labels(const char *type, idx_ds *ds, const idx_file *x, taas_error *err) {
    /* the magic first: a wrong file is more likely than a cut one */
    if (x->n >= 4 && be32(x->p) != IDX_LABELS_MAGIC) return bad_magic(type, x, be32(x->p), IDX_LABELS_MAGIC, err);
    if (x->n < 8) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: %s is truncated: %zu bytes, too short for an IDX header",
                       type, x->url, x->n);
        taas_error_hint(err, "the file is damaged or was cut short: fetch it again");
        return -1;
    }
    uint32_t n = be32(x->p + 4);
    char what[64];
    snprintf(what, sizeof what, "%u labels", n);
    if (x->n - 8 != n) return bad_length(type, x, what, n, x->n - 8, err);
    if (n != ds->n) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "%s: image/label count mismatch: %s has %zu images but %s has %u labels", type,
                       ds->images.url, ds->n, x->url, n);
        taas_error_hint(err, "the two files must belong to the same split (train- or t10k-): check root's files");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (x->p[8 + i] >= N_CLASSES) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: %s: label %u of sample %u is outside the %d classes 0..%d",
                           type, x->url, x->p[8 + i], i, N_CLASSES, N_CLASSES - 1);
            taas_error_hint(err, "the labels file is damaged or is not an MNIST labels file");
            return -1;
        }
    }
    ds->labels = malloc(n);
    if (!ds->labels) return taas_fmt_oom(err, "the labels");
    memcpy(ds->labels, x->p + 8, n);
    return 0;
}

static int idx_get(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    idx_ds *ds = impl;
    size_t px = (size_t)ds->h * ds->w;
    img->data = malloc(px);
    if (!img->data) return taas_fmt_oom(err, "an image");
    memcpy(img->data, ds->pixels + index * px, px);
    img->h = ds->h;
    img->w = ds->w;
    img->c = 1;
    img->type = TAAS_PIX_U8;
    *label = ds->labels[index];
    return 0;
}

static void idx_free(void *impl) {
    idx_ds *ds = impl;
    if (!ds) return;
    idx_file_free(&ds->images);
    free(ds->labels);
    free(ds);
}

static const taas_format_ops IDX_OPS = {idx_get, idx_free, NULL};

int taas_format_idx_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err) {
    const char *type = d->info.type;
    const char *root = taas_fmt_spec_str(spec, "root");
    if (!root || !root[0]) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s needs root: the folder or URL prefix of its IDX files",
                       type);
        taas_error_hint(err, "%s", hint_files(type));
        return -1;
    }
    const json_t *tr = json_object_get(spec, "train");
    int train = tr ? json_is_true(tr) : 1;
    const char *pre = train ? "train" : "t10k";
    char img_name[64], lab_name[64];
    snprintf(img_name, sizeof img_name, "%s-images-idx3-ubyte", pre);
    snprintf(lab_name, sizeof lab_name, "%s-labels-idx1-ubyte", pre);

    idx_ds *ds = calloc(1, sizeof *ds);
    if (!ds) return taas_fmt_oom(err, "a dataset");
    idx_file labels;
    memset(&labels, 0, sizeof labels);
    if (load(f, type, root, img_name, train ? "training images" : "test images", &ds->images, err) != 0 ||
        check_images(type, ds, err) != 0 ||
        load(f, type, root, lab_name, train ? "training labels" : "test labels", &labels, err) != 0 ||
        check_labels(type, ds, &labels, err) != 0) {
        idx_file_free(&labels);
        idx_free(ds);
        return -1;
    }
    idx_file_free(&labels);
    d->info.size = ds->n;
    d->info.h = ds->h;
    d->info.w = ds->w;
    d->info.c = 1;
    d->info.num_classes = N_CLASSES;
    d->info.classes = strcmp(type, "FashionMNIST") == 0 ? FASHION_CLASSES : MNIST_CLASSES;
    snprintf(d->info.source, sizeof d->info.source, "%s", root);
    d->ops = &IDX_OPS;
    d->impl = ds;
    return 0;
}
