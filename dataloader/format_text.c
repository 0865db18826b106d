/* TextFile: plain text as bytes (a vocabulary of 256), cut into windows for a character-level
 * language model. Window i starts at byte i * block_size and holds block_size + 1 bytes: the
 * model reads the first block_size and predicts the last block_size (dataset.h's `tokens`).
 * split='train' keeps the first (1 - val_fraction) of the bytes, 'val' the rest, as nanoGPT
 * cuts its text. The file is read whole, through the fetcher: a path, or an HTTP(S) or S3 URL. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"

typedef struct text_ds {
    taas_blob blob;
    size_t begin;        /* the split's first byte */
    int block;
} text_ds;

static int text_get(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    text_ds *ds = impl;
    const unsigned char *src = ds->blob.data + ds->begin + index * (size_t)ds->block;
    float *v = malloc(((size_t)ds->block + 1) * sizeof *v);
    if (!v) return taas_fmt_oom(err, "a window of text");
    for (int i = 0; i <= ds->block; i++) v[i] = (float)src[i];
    /* (T + 1, 1, 1) after ToTensor: a vector of T + 1 token ids */
    img->h = img->w = 1;
    img->c = ds->block + 1;
    img->type = TAAS_PIX_F32;
    img->data = v;
    *label = 0;  /* the targets are the window's last block_size bytes */
    return 0;
}

static void text_free(void *impl) {
    text_ds *ds = impl;
    if (!ds) return;
    taas_blob_free(&ds->blob);
    free(ds);
}

static const taas_format_ops TEXT_OPS = {text_get, text_free, NULL};

int taas_format_text_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err) {
    const char *path = taas_fmt_spec_str(spec, "path"), *split = taas_fmt_spec_str(spec, "split");
    const json_t *bv = json_object_get(spec, "block_size"), *fv = json_object_get(spec, "val_fraction");
    double frac = json_is_number(fv) ? json_number_value(fv) : 0.1;
    if (!path || !json_is_integer(bv) || json_integer_value(bv) < 1 || json_integer_value(bv) > (1 << 20) ||
        !(frac > 0 && frac < 1) || (split && strcmp(split, "train") && strcmp(split, "val"))) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "TextFile needs a path, a block_size in 1..1048576, a "
                       "val_fraction between 0 and 1 and a split of None, 'train' or 'val'");
        taas_error_hint(err, "TextFile('/usr/share/games/fortunes/fortunes', block_size=128, split='train')");
        return -1;
    }
    text_ds *ds = calloc(1, sizeof *ds);
    if (!ds) return taas_fmt_oom(err, "a TextFile");
    ds->block = (int)json_integer_value(bv);
    if (taas_fetch(f, path, &ds->blob, err) != 0) {
        free(ds);
        return -1;
    }
    size_t len = ds->blob.len, cut = (size_t)floor((double)len * (1.0 - frac));
    size_t begin = split && !strcmp(split, "val") ? cut : 0, end = split && !strcmp(split, "train") ? cut : len;
    if (end - begin < (size_t)ds->block + 1) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s%s%s has %zu bytes, fewer than one window of block_size + 1 "
                       "= %d", path, split ? "'s " : "", split ? split : "", end - begin, ds->block + 1);
        taas_error_hint(err, "use a smaller block_size, or a longer text");
        text_free(ds);
        return -1;
    }
    ds->begin = begin;
    d->info.size = (end - begin - 1) / (size_t)ds->block;
    d->info.h = d->info.w = 1;
    d->info.c = ds->block + 1;
    d->info.num_classes = 256;
    d->info.tokens = 1;
    snprintf(d->info.source, sizeof d->info.source, "%s", path);
    d->ops = &TEXT_OPS;
    d->impl = ds;
    return 0;
}
