/* Rows of the data side: datasets, transforms and DataLoader. Datasets and transforms
 * print as torchvision prints them; DataLoader has a form of its own (PyTorch prints
 * only an address), described in its doc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "dataview.h"
#include "errnames.h"
#include "rows.h"

#define END {0}

/* Where Debian's dataset-fashion-mnist package installs the idx files. */
#define FASHION_MNIST_ROOT "/usr/share/datasets/fashion-mnist"

/* ---- datasets -------------------------------------------------------------------- */

static const taas_param VISION_P[] = {
    {"root", TAAS_P_STR, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "folder holding the dataset's files; None = the Debian package's folder (FashionMNIST only)"},
    {"train", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "the training split (True) or the test split (False)"},
    {"transform", TAAS_P_TRANSFORM, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "applied to each image"},
    {"target_transform", TAAS_P_TRANSFORM, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "must stay None: labels are used as they are"},
    {"download", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "must stay False: taas never downloads"},
    END,
};

static int vision_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    int fashion = strcmp(r->b.name, "FashionMNIST") == 0;
    if (a[4]->u.b) {
        taas_error_set(err, TAAS_ERR_VALUE, w[4], "%s() download=True: taas never downloads data", r->b.name);
        taas_sig_hint(err, &r->b, fashion ? "install it with apt-get install dataset-fashion-mnist and leave root=None, "
                                   "or copy the files to a folder and give root='...'"
                                 : "copy the dataset's files to a folder the loaders can read and give root='...'");
        return -1;
    }
    if (a[3]->type != TAAS_V_NONE) {
        /* the loaders apply transforms to images; a label goes into the batch as it is */
        taas_error_set(err, TAAS_ERR_VALUE, w[3], "%s() target_transform is not supported: "
                       "taas transforms act on images, labels are used as they are", r->b.name);
        taas_sig_hint(err, &r->b, "leave target_transform=None");
        return -1;
    }
    if (a[0]->type == TAAS_V_NONE) {
        if (fashion) {
            taas_unref(a[0]);
            a[0] = taas_str0(FASHION_MNIST_ROOT);
            return a[0] ? 0 : taas_value_oom(err, w[0], "binding the arguments");
        }
        taas_error_set(err, TAAS_ERR_VALUE, w[0], "%s() needs root: no Debian package ships %s", r->b.name,
                       r->b.name);
        taas_sig_hint(err, &r->b, "copy the dataset's files to a folder the loaders can read and give root='...'");
        return -1;
    }
    return 0;
}

/* torchvision's _format_transform_repr: the first line after head, the rest under it. */
static void transform_lines(taas_buf *out, const char *head, const taas_value *t) {
    char *s = taas_value_repr(t);
    taas_buf_puts(out, head);
    size_t hl = strlen(head);
    for (const char *p = s; *p; p++) {
        taas_buf_putc(out, *p);
        if (*p == '\n') taas_buf_printf(out, "%*s", (int)hl, "");
    }
    free(s);
}

/* What the probe adds under a dataset's own lines: the sample shape after the transform,
 * the classes and where the data is. */
static void probe_lines(const json_t *probe, taas_buf *out) {
    const json_t *shape = json_object_get(probe, "shape");
    if (json_array_size(shape) == 3) {
        taas_buf_printf(out, "\n    Sample shape: (%lld, %lld, %lld)",
                        (long long)json_integer_value(json_array_get(shape, 0)),
                        (long long)json_integer_value(json_array_get(shape, 1)),
                        (long long)json_integer_value(json_array_get(shape, 2)));
        if (json_is_true(json_object_get(probe, "shape_varies"))) taas_buf_puts(out, " for sample 0; samples vary");
    }
    const json_t *names = json_object_get(probe, "classes");
    json_int_t nc = json_integer_value(json_object_get(probe, "num_classes"));
    if (json_array_size(names) > 0) {
        size_t n = json_array_size(names), shown = n > 20 ? 10 : n;
        taas_buf_printf(out, "\n    Classes: %zu (", n);
        for (size_t i = 0; i < shown; i++)
            taas_buf_printf(out, "%s%s", i ? ", " : "", json_string_value(json_array_get(names, i)));
        taas_buf_puts(out, shown < n ? ", ...)" : ")");
    } else if (nc > 0) {
        taas_buf_printf(out, "\n    Classes: %lld", (long long)nc);
    }
    const char *src = json_string_value(json_object_get(probe, "source"));
    if (src && src[0]) taas_buf_printf(out, "\n    Source: %s", src);
}

/* torchvision's VisionDataset.__repr__, including its quirk: the StandardTransform block
 * is one body "line", so only its first line is indented. The probe's size wins over the
 * row's, and its facts follow the dataset's own lines. */
static void dataset_repr_with(const taas_value *v, taas_buf *out, const char *const *lines, size_t n,
                              const json_t *probe) {
    taas_buf_printf(out, "Dataset %s", v->u.obj.def->name);
    const taas_row *r = taas_row_of(v->u.obj.def);
    int64_t size;
    const json_t *probed = json_object_get(probe, "size");
    if (json_is_integer(probed))
        taas_buf_printf(out, "\n    Number of datapoints: %lld", (long long)json_integer_value(probed));
    else if (r && r->size && r->size(v, &size))
        taas_buf_printf(out, "\n    Number of datapoints: %lld", (long long)size);
    else
        taas_buf_puts(out, "\n    Number of datapoints: unknown until the loaders read it");
    for (size_t i = 0; i < n; i++) taas_buf_printf(out, "\n    %s", lines[i]);
    if (probe) probe_lines(probe, out);
    /* target_transform is always None (vision_check) */
    const taas_value *t = taas_object_arg(v, "transform");
    if (t && t->type != TAAS_V_NONE) {
        taas_buf_puts(out, "\n    StandardTransform\n");
        transform_lines(out, "Transform: ", t);
    }
}

static void vision_repr_with(const taas_value *v, taas_buf *out, const json_t *probe) {
    char root[1200], split[32];
    snprintf(root, sizeof root, "Root location: %s", taas_object_arg(v, "root")->u.str.s);
    snprintf(split, sizeof split, "Split: %s", taas_object_arg(v, "train")->u.b ? "Train" : "Test");
    const char *lines[] = {root, split};
    dataset_repr_with(v, out, lines, 2, probe);
}

static void vision_repr(const taas_value *v, taas_buf *out) { vision_repr_with(v, out, NULL); }

static const taas_param NPY_P[] = {
    {"images", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "path of a .npy array of images: (N, H, W) or (N, H, W, C), uint8 or float32"},
    {"labels", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "path of a .npy array of N integer labels"},
    {"transform", TAAS_P_TRANSFORM, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "applied to each image"},
    END,
};

/* A dataset has a length, but an NpyDataset's or an ImageFolder's is in its files, which
 * only the loaders read. */
static int loaders_size(const taas_value *v, int64_t *n) {
    (void)v;
    (void)n;
    return 0;
}

static void npy_repr_with(const taas_value *v, taas_buf *out, const json_t *probe) {
    char *img = taas_value_repr(taas_object_arg(v, "images"));
    char *lab = taas_value_repr(taas_object_arg(v, "labels"));
    taas_buf a = TAAS_BUF_INIT, b = TAAS_BUF_INIT;
    taas_buf_printf(&a, "Images: %s", img);
    taas_buf_printf(&b, "Labels: %s", lab);
    const char *lines[] = {a.data, b.data};
    dataset_repr_with(v, out, lines, 2, probe);
    taas_buf_free(&a);
    taas_buf_free(&b);
    free(img);
    free(lab);
}

static void npy_repr(const taas_value *v, taas_buf *out) { npy_repr_with(v, out, NULL); }

static const taas_param WEB_P[] = {
    {"urls", TAAS_P_ANY, NULL, TAAS_PX(TAAS_PX_URLS), TAAS_NO_RANGE, "shard paths or URLs (file, http(s)://, s3://); a brace range such as 'train-{000000..000099}.tar' names many"},
    {"transform", TAAS_P_TRANSFORM, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "applied to each image"},
    {"image_key", TAAS_P_STR, "'jpg;jpeg;png'", 0, TAAS_NO_RANGE, "file extensions of the image in a sample, first match wins"},
    {"label_key", TAAS_P_STR, "'cls'", 0, TAAS_NO_RANGE, "file extension of the integer label in a sample"},
    {"length", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(1), "number of samples, when known; gives len() and batches per epoch"},
    END,
};

static int web_size(const taas_value *v, int64_t *n) {
    const taas_value *l = taas_object_arg(v, "length");
    if (l->type != TAAS_V_INT) return 0;
    *n = l->u.i;
    return 1;
}

static void web_repr_with(const taas_value *v, taas_buf *out, const json_t *probe) {
    char *urls = taas_value_repr(taas_object_arg(v, "urls"));
    taas_buf a = TAAS_BUF_INIT, b = TAAS_BUF_INIT;
    taas_buf_printf(&a, "Shards: %s", urls);
    taas_buf_printf(&b, "Keys: image %s, label %s", taas_object_arg(v, "image_key")->u.str.s,
                    taas_object_arg(v, "label_key")->u.str.s);
    const char *lines[] = {a.data, b.data};
    dataset_repr_with(v, out, lines, 2, probe);
    taas_buf_free(&a);
    taas_buf_free(&b);
    free(urls);
}

static void web_repr(const taas_value *v, taas_buf *out) { web_repr_with(v, out, NULL); }

static const taas_param FOLDER_P[] = {
    {"root", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "folder with one folder per class, read on each loader's host, or s3://bucket/prefix/ (listed with ListObjectsV2); http(s):// is refused"},
    {"transform", TAAS_P_TRANSFORM, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "applied to each image"},
    {"target_transform", TAAS_P_TRANSFORM, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "must stay None: labels are used as they are"},
    END,
};

static int folder_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (a[2]->type != TAAS_V_NONE) {
        taas_error_set(err, TAAS_ERR_VALUE, w[2], "%s() target_transform is not supported: "
                       "taas transforms act on images, labels are used as they are", r->b.name);
        taas_sig_hint(err, &r->b, "leave target_transform=None");
        return -1;
    }
    return 0;
}

static void folder_repr_with(const taas_value *v, taas_buf *out, const json_t *probe) {
    char root[1200];
    snprintf(root, sizeof root, "Root location: %s", taas_object_arg(v, "root")->u.str.s);
    /* torchvision's class_to_idx, from the loaders' listing: the first 10 of many */
    taas_buf map = TAAS_BUF_INIT;
    const json_t *names = json_object_get(probe, "classes");
    size_t n = json_array_size(names), shown = n > 20 ? 10 : n;
    taas_buf_puts(&map, "class_to_idx: {");
    for (size_t i = 0; i < shown; i++)
        taas_buf_printf(&map, "%s'%s': %zu", i ? ", " : "", json_string_value(json_array_get(names, i)), i);
    taas_buf_puts(&map, shown < n ? ", ...}" : "}");
    const char *lines[] = {root, map.data};
    dataset_repr_with(v, out, lines, n && !map.failed ? 2 : 1, probe);
    taas_buf_free(&map);
}

static void folder_repr(const taas_value *v, taas_buf *out) { folder_repr_with(v, out, NULL); }

static const taas_param TEXT_P[] = {
    {"path", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "the text: a path on the loader's host, or an HTTP(S) or s3:// URL"},
    {"block_size", TAAS_P_INT, NULL, 0, TAAS_BETWEEN(1, 1 << 20), "tokens (bytes) the model reads a sample; a window holds one more"},
    {"split", TAAS_P_STR, "None", TAAS_PF_NONE_OK | TAAS_PX(TAAS_PX_SPLIT), TAAS_NO_RANGE,
     "None: the whole text; 'train': its first 1 - val_fraction; 'val': the rest"},
    {"val_fraction", TAAS_P_FLOAT, "0.1", 0, TAAS_BETWEEN(0, 1), "the share of the text at its end that is 'val'"},
    END,
};

static int text_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    double f = taas_value_number(a[3]);
    if (f <= 0.0 || f >= 1.0) {
        taas_error_set(err, TAAS_ERR_VALUE, w[3], "%s() val_fraction must be between 0 and 1, not %g", r->b.name, f);
        taas_sig_hint(err, &r->b, "val_fraction=0.1 keeps the last tenth of the text for validation");
        return -1;
    }
    return 0;
}

static void text_repr_with(const taas_value *v, taas_buf *out, const json_t *probe) {
    taas_buf a = TAAS_BUF_INIT, b = TAAS_BUF_INIT, c = TAAS_BUF_INIT;
    const taas_value *split = taas_object_arg(v, "split");
    int64_t block = taas_object_arg(v, "block_size")->u.i;
    double frac = taas_value_number(taas_object_arg(v, "val_fraction"));
    taas_buf_printf(&a, "Path: %s", taas_object_arg(v, "path")->u.str.s);
    taas_buf_printf(&b, "Block size: %lld (windows of %lld bytes, a vocabulary of 256)", (long long)block,
                    (long long)block + 1);
    if (split->type == TAAS_V_NONE) taas_buf_puts(&c, "Split: the whole text");
    else if (!strcmp(split->u.str.s, "train")) taas_buf_printf(&c, "Split: train (the first %g %%)", 100 * (1 - frac));
    else taas_buf_printf(&c, "Split: val (the last %g %%)", 100 * frac);
    const char *lines[] = {a.data, b.data, c.data};
    dataset_repr_with(v, out, lines, 3, probe);
    taas_buf_free(&a);
    taas_buf_free(&b);
    taas_buf_free(&c);
}

static void text_repr(const taas_value *v, taas_buf *out) { text_repr_with(v, out, NULL); }

static const taas_param TOKENS_P[] = {
    {"urls", TAAS_P_ANY, NULL, TAAS_PX(TAAS_PX_URLS), TAAS_NO_RANGE,
     "shard paths or URLs (file, http(s)://, s3://): a brace range such as 'train_{000001..000009}.bin', a local glob, or a list"},
    {"block_size", TAAS_P_INT, NULL, 0, TAAS_BETWEEN(1, 1 << 20), "tokens the model reads a sample; a window holds one more"},
    {"raw", TAAS_P_BOOL, "False", TAAS_PF_SHOW_SET, TAAS_NO_RANGE,
     "bare little-endian uint16 tokens without llm.c's header (nanoGPT's train.bin)"},
    END,
};

static void tokens_repr_with(const taas_value *v, taas_buf *out, const json_t *probe) {
    char *urls = taas_value_repr(taas_object_arg(v, "urls"));
    taas_buf a = TAAS_BUF_INIT, b = TAAS_BUF_INIT;
    int64_t block = taas_object_arg(v, "block_size")->u.i;
    taas_buf_printf(&a, "Shards: %s (%s)", urls, taas_object_arg(v, "raw")->u.b ? "bare uint16" : "llm.c's format");
    taas_buf_printf(&b, "Block size: %lld (windows of %lld tokens)", (long long)block, (long long)block + 1);
    const char *lines[] = {a.data, b.data};
    dataset_repr_with(v, out, lines, 2, probe);
    taas_buf_free(&a);
    taas_buf_free(&b);
    free(urls);
}

static void tokens_repr(const taas_value *v, taas_buf *out) { tokens_repr_with(v, out, NULL); }

/* ---- transforms ------------------------------------------------------------------ */

static const taas_param NO_P[] = {END};

static const taas_param NORMALIZE_P[] = {
    {"mean", TAAS_P_FLOAT_SEQ, NULL, 0, TAAS_NO_RANGE, "per-channel mean subtracted"},
    {"std", TAAS_P_FLOAT_SEQ, NULL, 0, TAAS_NO_RANGE, "per-channel standard deviation divided by; no zeros"},
    {"inplace", TAAS_P_BOOL, "False", TAAS_PF_HIDE, TAAS_NO_RANGE, "torchvision's in-place flag; results are the same either way"},
    END,
};

static size_t seq_len(const taas_value *v) {
    return (v->type == TAAS_V_TUPLE || v->type == TAAS_V_LIST) ? v->u.seq.n : 1;
}

static int normalize_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    size_t nm = seq_len(a[0]), ns = seq_len(a[1]);
    if (nm != ns && nm != 1 && ns != 1) {
        taas_error_set(err, TAAS_ERR_VALUE, w[1], "Normalize() mean has %zu values but std has %zu", nm, ns);
        taas_sig_hint(err, &r->b, "give one value per channel in both, e.g. Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))");
        return -1;
    }
    for (size_t i = 0; i < ns; i++) {
        const taas_value *x = a[1]->type == TAAS_V_TUPLE || a[1]->type == TAAS_V_LIST ? a[1]->u.seq.items[i] : a[1];
        if (taas_value_number(x) == 0) {
            taas_error_set(err, TAAS_ERR_VALUE, w[1], "Normalize() std has a zero, which would divide by zero");
            taas_sig_hint(err, &r->b, "give each channel's standard deviation (> 0)");
            return -1;
        }
    }
    return 0;
}

static const taas_param RANDOM_CROP_P[] = {
    {"size", TAAS_P_INT_PAIR, NULL, TAAS_PF_PAIR, TAAS_BETWEEN(1, TAAS_MAX_SIDE), "output size (h, w); an int means a square"},
    {"padding", TAAS_P_ANY, "None", TAAS_PF_NONE_OK | TAAS_PX(TAAS_PX_CROP_PADDING), TAAS_AT_LEAST(0), "padding added to the borders first: all, (left/right, top/bottom) or (left, top, right, bottom)"},
    {"pad_if_needed", TAAS_P_BOOL, "False", TAAS_PF_HIDE, TAAS_NO_RANGE, "pad an image smaller than size"},
    {"fill", TAAS_P_ANY, "0", TAAS_PF_HIDE | TAAS_PX(TAAS_PX_FILL), TAAS_NO_RANGE, "pixel value of constant padding, or one per channel"},
    {"padding_mode", TAAS_P_STR, "'constant'", TAAS_PF_HIDE | TAAS_PX(TAAS_PX_CROP_PADMODE), TAAS_NO_RANGE, "how the border is padded"},
    END,
};

static const taas_param FLIP_P[] = {
    {"p", TAAS_P_FLOAT, "0.5", 0, TAAS_BETWEEN(0, 1), "probability of flipping an image"},
    END,
};

static const taas_param RESIZE_P[] = {
    {"size", TAAS_P_INT_PAIR, NULL, 0, TAAS_BETWEEN(1, TAAS_MAX_SIDE), "(h, w), or an int: the smaller edge, keeping the aspect ratio"},
    {"interpolation", TAAS_P_STR, "'bilinear'", TAAS_PF_BARE | TAAS_PX(TAAS_PX_INTERP), TAAS_NO_RANGE, "resampling filter"},
    {"max_size", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_BETWEEN(1, TAAS_MAX_SIDE), "cap on the longer edge (only with an int size)"},
    {"antialias", TAAS_P_BOOL, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "antialias when downsampling (None: as torchvision 0.14, off for tensors)"},
    END,
};

static int resize_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (a[2]->type == TAAS_V_NONE) return 0;
    if (a[0]->type != TAAS_V_INT) {
        taas_error_set(err, TAAS_ERR_VALUE, w[2],
                       "Resize() max_size is only allowed when size is an int (the smaller edge)");
        taas_sig_hint(err, &r->b, "give size as an int, or leave max_size=None");
        return -1;
    }
    if (a[2]->u.i <= a[0]->u.i) {
        taas_error_set(err, TAAS_ERR_VALUE, w[2],
                       "Resize() max_size = %lld must be strictly greater than the requested size "
                       "for the smaller edge size = %lld", (long long)a[2]->u.i, (long long)a[0]->u.i);
        taas_sig_hint(err, &r->b, NULL);
        return -1;
    }
    return 0;
}

static const taas_param RRC_P[] = {
    {"size", TAAS_P_INT_PAIR, NULL, TAAS_PF_PAIR, TAAS_BETWEEN(1, TAAS_MAX_SIDE), "output size (h, w); an int means a square"},
    {"scale", TAAS_P_FLOAT_PAIR, "(0.08, 1.0)", 0, TAAS_NO_RANGE, "(min, max) of the crop's area, as a fraction of the image's"},
    {"ratio", TAAS_P_FLOAT_PAIR, "(0.75, 1.3333333333333333)", 0, TAAS_NO_RANGE, "(min, max) of the crop's aspect ratio w / h, drawn log-uniformly"},
    {"interpolation", TAAS_P_STR, "'bilinear'", TAAS_PF_BARE | TAAS_PX(TAAS_PX_INTERP), TAAS_NO_RANGE, "resampling filter"},
    {"antialias", TAAS_P_BOOL, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "antialias when downsampling (None: as torchvision 0.14, off for tensors)"},
    END,
};

static int rrc_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    for (int k = 1; k <= 2; k++) {
        double lo = taas_value_number(a[k]->u.seq.items[0]), hi = taas_value_number(a[k]->u.seq.items[1]);
        if (!(lo <= hi) || !(lo > 0)) {
            taas_error_set(err, TAAS_ERR_VALUE, w[k], "RandomResizedCrop() %s should be of kind (min, max) with "
                           "0 < min <= max, got (%g, %g)", r->b.params[k].name, lo, hi);
            taas_sig_hint(err, &r->b, "torchvision only warns here and then fails drawing: give e.g. "
                                      "scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)");
            return -1;
        }
    }
    return 0;
}

static const taas_param JITTER_P[] = {
    {"brightness", TAAS_P_FLOAT_SEQ, "0", 0, TAAS_NO_RANGE, "factor drawn from [max(0, 1 - b), 1 + b], or from (min, max)"},
    {"contrast", TAAS_P_FLOAT_SEQ, "0", 0, TAAS_NO_RANGE, "factor drawn from [max(0, 1 - c), 1 + c], or from (min, max)"},
    {"saturation", TAAS_P_FLOAT_SEQ, "0", 0, TAAS_NO_RANGE, "factor drawn from [max(0, 1 - s), 1 + s], or from (min, max)"},
    {"hue", TAAS_P_FLOAT_SEQ, "0", 0, TAAS_NO_RANGE, "shift drawn from [-h, h] (h <= 0.5), or from (min, max) within [-0.5, 0.5]"},
    END,
};

/* torchvision's ColorJitter._check_input */
static int jitter_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    for (int k = 0; k < 4; k++) {
        const char *name = r->b.params[k].name;
        double lo_b = k < 3 ? 0 : -0.5, hi_b = k < 3 ? 1e308 : 0.5, lo, hi;
        if (a[k]->type == TAAS_V_TUPLE || a[k]->type == TAAS_V_LIST) {
            if (a[k]->u.seq.n != 2) {
                taas_error_set(err, TAAS_ERR_TYPE, w[k], "ColorJitter() %s should be a single number or a "
                               "list/tuple with length 2", name);
                taas_sig_hint(err, &r->b, NULL);
                return -1;
            }
            lo = taas_value_number(a[k]->u.seq.items[0]);
            hi = taas_value_number(a[k]->u.seq.items[1]);
        } else {
            double v = taas_value_number(a[k]);
            if (v < 0) {
                taas_error_set(err, TAAS_ERR_VALUE, w[k], "ColorJitter() if %s is a single number, it must be "
                               "non negative", name);
                taas_sig_hint(err, &r->b, NULL);
                return -1;
            }
            lo = (k < 3 ? 1 : 0) - v;
            hi = (k < 3 ? 1 : 0) + v;
            if (k < 3 && lo < 0) lo = 0;
        }
        if (!(lo_b <= lo && lo <= hi && hi <= hi_b)) {
            taas_error_set(err, TAAS_ERR_VALUE, w[k], "ColorJitter() %s values should be between (%g, %s)", name,
                           lo_b, k < 3 ? "inf" : "0.5");
            taas_sig_hint(err, &r->b, NULL);
            return -1;
        }
    }
    return 0;
}

static const taas_param CENTER_CROP_P[] = {
    {"size", TAAS_P_INT_PAIR, NULL, TAAS_PF_PAIR, TAAS_BETWEEN(1, TAAS_MAX_SIDE), "output size (h, w); an int means a square"},
    END,
};

static const taas_param COMPOSE_P[] = {
    {"transforms", TAAS_P_TRANSFORM_LIST, NULL, 0, TAAS_NO_RANGE, "the transforms, applied in order"},
    END,
};

static void compose_repr(const taas_value *v, taas_buf *out) {
    const taas_value *ts = v->u.obj.args[0];
    taas_buf_puts(out, "Compose(");
    for (size_t i = 0; i < ts->u.seq.n; i++) {
        taas_buf_puts(out, "\n    ");
        taas_repr_to(ts->u.seq.items[i], out);
    }
    taas_buf_puts(out, "\n)");
}

static int compose_size(const taas_value *v, int64_t *n) {
    *n = (int64_t)v->u.obj.args[0]->u.seq.n;
    return 1;
}

/* ---- DataLoader ------------------------------------------------------------------ */

static const taas_param LOADER_P[] = {
    {"dataset", TAAS_P_DATASET, NULL, TAAS_PF_HIDE, TAAS_NO_RANGE, "the dataset to draw samples from"},
    {"batch_size", TAAS_P_INT, "1", 0, TAAS_BETWEEN(1, TAAS_MAX_BATCH_SIZE), "samples per batch (per rank, as in DistributedDataParallel)"},
    {"shuffle", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "draw a new permutation every epoch (seeded, so runs repeat)"},
    {"num_workers", TAAS_P_INT, "0", TAAS_PF_KWONLY, TAAS_BETWEEN(0, TAAS_MAX_LOADER_THREADS), "threads that prepare batches when the loader is not registered"},
    {"drop_last", TAAS_P_BOOL, "False", TAAS_PF_KWONLY, TAAS_NO_RANGE, "drop the last batch when it is smaller than batch_size"},
    {"prefetch_factor", TAAS_P_INT, "None", TAAS_PF_KWONLY | TAAS_PF_NONE_OK, TAAS_BETWEEN(1, TAAS_MAX_PREFETCH), "batches prepared ahead per worker (needs num_workers > 0); None = 2"},
    END,
};

static int loader_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (a[5]->type != TAAS_V_NONE && a[3]->u.i == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, w[5],
                       "DataLoader() prefetch_factor can only be given with num_workers > 0");
        taas_sig_hint(err, &r->b, "set num_workers=2 (for example), or leave prefetch_factor=None");
        return -1;
    }
    return 0;
}

/* Batches per epoch of a DataLoader over size samples. */
static int64_t batches_of(const taas_value *v, int64_t size) {
    int64_t bs = taas_object_arg(v, "batch_size")->u.i;
    return taas_object_arg(v, "drop_last")->u.b ? size / bs : (size + bs - 1) / bs;
}

static int loader_size(const taas_value *v, int64_t *n) {
    const taas_value *ds = taas_object_arg(v, "dataset");
    const taas_row *r = taas_row_of(ds->u.obj.def);
    int64_t size;
    if (!r || !r->size || !r->size(ds, &size)) return 0;
    *n = batches_of(v, size);
    return 1;
}

static void dataset_repr_probed(const taas_value *ds, taas_buf *out, const json_t *probe) {
    const char *name = ds->u.obj.def->name;
    if (!strcmp(name, "NpyDataset"))
        npy_repr_with(ds, out, probe);
    else if (!strcmp(name, "WebDataset"))
        web_repr_with(ds, out, probe);
    else if (!strcmp(name, "ImageFolder"))
        folder_repr_with(ds, out, probe);
    else if (!strcmp(name, "TextFile"))
        text_repr_with(ds, out, probe);
    else if (!strcmp(name, "TokenShards"))
        tokens_repr_with(ds, out, probe);
    else
        vision_repr_with(ds, out, probe);
}

static void loader_repr_with(const taas_value *v, taas_buf *out, const json_t *probe) {
    taas_buf_puts(out, "DataLoader(");
    taas_repr_params(v, out);
    taas_buf_puts(out, ")\n    ");
    taas_buf ds = TAAS_BUF_INIT;
    dataset_repr_probed(taas_object_arg(v, "dataset"), &ds, probe);
    for (const char *p = ds.data; p && *p; p++) {
        taas_buf_putc(out, *p);
        if (*p == '\n') taas_buf_puts(out, "    ");
    }
    taas_buf_free(&ds);
    int64_t n;
    const json_t *size = json_object_get(probe, "size");
    if (json_is_integer(size))
        taas_buf_printf(out, "\n    Batches per epoch: %lld", (long long)batches_of(v, json_integer_value(size)));
    else if (loader_size(v, &n))
        taas_buf_printf(out, "\n    Batches per epoch: %lld", (long long)n);
}

static void loader_repr(const taas_value *v, taas_buf *out) { loader_repr_with(v, out, NULL); }

void taas_data_repr(const taas_value *v, const json_t *probe, taas_buf *out) {
    int kind = taas_value_kind(v);
    if (kind == TAAS_K_LOADER)
        loader_repr_with(v, out, probe);
    else if (kind == TAAS_K_DATASET)
        dataset_repr_probed(v, out, probe);
    else
        taas_repr_to(v, out);
}

#define DATASET(name_, params_, doc_) .b = {.name = name_, .module = "datasets", .kind = TAAS_K_DATASET, .params = params_, .doc = doc_}
#define TRANSFORM(name_, params_, doc_) .b = {.name = name_, .module = "transforms", .kind = TAAS_K_TRANSFORM, .params = params_, .doc = doc_}

const taas_row taas_rows_data[] = {
    {DATASET("MNIST", VISION_P,
             "The MNIST handwritten digits: 28x28 grey images in 10 classes, 60000 for training "
             "and 10000 for testing. No Debian package ships it, so root is required."),
     .check = vision_check, .repr = vision_repr},
    {DATASET("FashionMNIST", VISION_P,
             "Zalando's Fashion-MNIST: 28x28 grey images of clothing in 10 classes, 60000 for "
             "training and 10000 for testing. root=None reads the files that Debian's "
             "dataset-fashion-mnist package installs in " FASHION_MNIST_ROOT "."),
     .check = vision_check, .repr = vision_repr},
    {DATASET("CIFAR10", VISION_P,
             "CIFAR-10: 32x32 colour images in 10 classes, 50000 for training and 10000 for "
             "testing. No Debian package ships it, so root is required."),
     .check = vision_check, .repr = vision_repr},
    {DATASET("NpyDataset", NPY_P,
             "taas-specific: images and labels from two NumPy .npy files, sample i being "
             "(images[i], labels[i]). Its size is known once the loaders read the files."),
     .repr = npy_repr, .size = loaders_size},
    {DATASET("WebDataset", WEB_P,
             "taas-specific: samples from WebDataset tar shards, each sample a group of files "
             "sharing a basename (an image and a .cls label). Give length to make len() and "
             "the batches per epoch known before training."),
     .repr = web_repr, .size = web_size},
    {DATASET("ImageFolder", FOLDER_P,
             "Images in one folder per class, as torchvision's ImageFolder: the class folders "
             "sorted, each walked recursively; .jpg, .jpeg and .png files in any case are "
             "decoded to RGB, another image extension torchvision accepts is an error naming "
             "the file. The classes and their indices (class_to_idx) show once the loaders "
             "list root."),
     .check = folder_check, .repr = folder_repr, .size = loaders_size},
    {DATASET("TextFile", TEXT_P,
             "Plain text as bytes, for a character-level language model (a vocabulary of 256): "
             "sample i is the window of block_size + 1 bytes starting at byte i * block_size; "
             "a model of tokens (GPT2LMHeadModel, or a Sequential that starts with an Embedding) "
             "reads its first block_size bytes and predicts each next one. Shuffled, checked "
             "and resumed per window, as images are. The loaders read the file whole."),
     .check = text_check, .repr = text_repr, .size = loaders_size},
    {DATASET("TokenShards", TOKENS_P,
             "Token shards as llm.c writes them (a 1024-byte header: magic 20240520, version 1, the token count; "
             "then the tokens as uint16), or bare uint16 files with raw=True (nanoGPT's train.bin): each shard "
             "cut into windows of block_size + 1 tokens at a stride of block_size, for a model of tokens as "
             "TextFile's windows are. The loaders read a shard's header at the start and one range a window; a "
             "token beyond the model's vocabulary is the job's error when its batch reaches a rank."),
     .repr = tokens_repr, .size = loaders_size},
    {TRANSFORM("ToTensor", NO_P,
               "Turns an image of shape (H, W, C) with values 0..255 into a float tensor of "
               "shape (C, H, W) with values 0..1.")},
    {TRANSFORM("Normalize", NORMALIZE_P,
               "(x - mean) / std per channel, on a tensor; mean and std take one value per "
               "channel, e.g. Normalize((0.2860,), (0.3530,)) for Fashion-MNIST."),
     .check = normalize_check},
    {TRANSFORM("RandomCrop", RANDOM_CROP_P,
               "Crops a random (h, w) window, after optional padding; the randomness is seeded "
               "per sample, so every run draws the same crops.")},
    {TRANSFORM("RandomHorizontalFlip", FLIP_P,
               "Flips an image left to right with probability p, seeded per sample.")},
    {TRANSFORM("Resize", RESIZE_P,
               "Resizes an image to size; an int size scales the smaller edge to it and keeps "
               "the aspect ratio."),
     .check = resize_check},
    {TRANSFORM("CenterCrop", CENTER_CROP_P, "Crops the central (h, w) window of an image.")},
    {TRANSFORM("RandomResizedCrop", RRC_P,
               "Crops a random part of an image (its area a fraction in scale of the image's, "
               "its aspect ratio in ratio) and resizes it to size: ImageNet training's crop. "
               "The draws are seeded per sample."),
     .check = rrc_check},
    {TRANSFORM("ColorJitter", JITTER_P,
               "Changes brightness, contrast, saturation and hue by factors drawn per sample, in "
               "a random order, as torchvision does on PIL images; it takes images, so it comes "
               "before ToTensor()."),
     .check = jitter_check},
    {TRANSFORM("Compose", COMPOSE_P,
               "Chains transforms: Compose([ToTensor(), Normalize((0.5,), (0.5,))]) applies "
               "them in order."),
     .repr = compose_repr, .size = compose_size},
    {.b = {.name = "DataLoader", .module = "torch.utils.data", .kind = TAAS_K_LOADER, .params = LOADER_P, .doc =
           "Batches a dataset. register(loader) runs it on CPU workers for offloaded training; "
           "otherwise each rank prepares its own batches. PyTorch prints a DataLoader as an "
           "address; taas prints its settings, then its dataset, then the batches per epoch "
           "when the dataset's size is known."},
     .check = loader_check, .repr = loader_repr, .size = loader_size},
};
const size_t taas_rows_data_n = sizeof taas_rows_data / sizeof *taas_rows_data;
