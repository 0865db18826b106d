/* TokenShards: llm.c's token shards (a 1024-byte header of 256 little-endian int32: magic
 * 20240520, version 1, the token count; then the tokens as little-endian uint16), or, with
 * raw, bare uint16 files without a header (nanoGPT's train.bin). Each shard is cut into
 * windows of block_size + 1 tokens at a stride of block_size (a window never spans two
 * shards), as TextFile cuts a text; the windows of all shards in order are the samples. At
 * open only each shard's size and header are read; a window is one range read. */
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"

#define MAGIC 20240520u
#define HEADER 1024

typedef struct shard {
    uint64_t first, windows;  /* its windows' indices: [first, first + windows) */
} shard;

typedef struct tok_ds {
    taas_fetcher *f;
    char **urls;
    size_t n;
    shard *s;
    int block, raw;
} tok_ds;

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int taas_token_shard_header(const unsigned char *h, size_t len, uint64_t file_bytes, const char *url,
                            uint64_t *tokens, taas_error *err) {
    if (len < HEADER || file_bytes < HEADER) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s has %llu bytes, fewer than a token shard's 1024-byte header",
                       url, (unsigned long long)(file_bytes < len ? file_bytes : len));
        taas_error_hint(err, "write the shard with llm.c's write_datafile, or give raw=True for bare uint16 tokens");
        return -1;
    }
    if (le32(h) != MAGIC) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: the magic number at offset 0 is %u, not llm.c's %u", url,
                       le32(h), MAGIC);
        taas_error_hint(err, "a token shard starts with llm.c's header; for nanoGPT's headerless train.bin give raw=True");
        return -1;
    }
    if (le32(h + 4) != 1) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: the version at offset 4 is %u; taas reads version 1 "
                       "(uint16 tokens)", url, le32(h + 4));
        taas_error_hint(err, "write the shard with GPT-2's tokenizer as llm.c's version 1");
        return -1;
    }
    uint64_t count = le32(h + 8);
    if (count * 2 > file_bytes - HEADER) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: the header's token count at offset 8 is %llu (%llu bytes), "
                       "but the file holds %llu bytes of tokens", url, (unsigned long long)count,
                       (unsigned long long)count * 2, (unsigned long long)(file_bytes - HEADER));
        taas_error_hint(err, "the shard was cut short: write or fetch it again");
        return -1;
    }
    *tokens = count;
    return 0;
}

static int tok_get(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    tok_ds *ds = impl;
    size_t lo = 0, hi = ds->n;  /* the shard whose windows hold index */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (ds->s[mid].first <= index) lo = mid;
        else hi = mid;
    }
    while (lo < ds->n && (ds->s[lo].windows == 0 || index >= ds->s[lo].first + ds->s[lo].windows)) lo++;
    if (lo == ds->n) {
        taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "TokenShards: no shard holds window %zu", index);
        taas_error_hint(err, "this is a bug in taas; please report it");
        return -1;
    }
    size_t w = (size_t)ds->block + 1;
    uint64_t start = (index - ds->s[lo].first) * (uint64_t)ds->block, off = (ds->raw ? 0 : HEADER) + start * 2;
    unsigned char *raw = malloc(w * 2);
    float *v = malloc(w * sizeof *v);
    if (!raw || !v) {
        free(raw), free(v);
        return taas_fmt_oom(err, "a window of tokens");
    }
    if (taas_fetch_range(ds->f, ds->urls[lo], off, w * 2, raw, err) != 0) {
        free(raw), free(v);
        return -1;
    }
    for (size_t i = 0; i < w; i++) v[i] = (float)(raw[2 * i] | raw[2 * i + 1] << 8);
    free(raw);
    img->h = img->w = 1;
    img->c = (int)w;
    img->type = TAAS_PIX_F32;
    img->data = v;
    *label = 0;
    return 0;
}

static void tok_free(void *impl) {
    tok_ds *ds = impl;
    if (!ds) return;
    for (size_t i = 0; i < ds->n; i++) free(ds->urls[i]);
    free(ds->urls);
    free(ds->s);
    free(ds);
}

static const taas_format_ops TOK_OPS = {tok_get, tok_free, NULL};

int taas_format_tokens_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err) {
    const json_t *bv = json_object_get(spec, "block_size");
    if (!json_is_integer(bv) || json_integer_value(bv) < 1 || json_integer_value(bv) > (1 << 20)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "TokenShards needs a block_size in 1..1048576");
        taas_error_hint(err, "TokenShards('data/fineweb_train_{000001..000009}.bin', block_size=1024)");
        return -1;
    }
    tok_ds *ds = calloc(1, sizeof *ds);
    if (!ds) return taas_fmt_oom(err, "TokenShards");
    ds->f = f;
    ds->block = (int)json_integer_value(bv);
    ds->raw = json_is_true(json_object_get(spec, "raw"));
    if (taas_fmt_urls(json_object_get(spec, "urls"), "TokenShards", "bin", &ds->urls, &ds->n, err) ||
        !(ds->s = calloc(ds->n, sizeof *ds->s))) {
        if (ds->urls && !ds->s && !err->message[0]) taas_fmt_oom(err, "the shard list");
        tok_free(ds);
        return -1;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < ds->n; i++) {
        taas_object_info oi;
        uint64_t tokens;
        if (taas_fetch_info(f, ds->urls[i], &oi, err) != 0) {
            tok_free(ds);
            return -1;
        }
        if (ds->raw) {
            if (oi.size % 2) {
                taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s has %llu bytes, not a whole number of uint16 tokens",
                               ds->urls[i], (unsigned long long)oi.size);
                taas_error_hint(err, "raw=True reads bare uint16 tokens; a file with llm.c's header needs raw=False");
                tok_free(ds);
                return -1;
            }
            tokens = oi.size / 2;
        } else {
            unsigned char h[HEADER];
            size_t n = oi.size < HEADER ? (size_t)oi.size : HEADER;
            if ((n && taas_fetch_range(f, ds->urls[i], 0, n, h, err) != 0) ||
                taas_token_shard_header(h, n, oi.size, ds->urls[i], &tokens, err)) {
                tok_free(ds);
                return -1;
            }
        }
        ds->s[i].first = total;
        ds->s[i].windows = tokens > (uint64_t)ds->block ? (tokens - 1) / (uint64_t)ds->block : 0;
        total += ds->s[i].windows;
    }
    if (total == 0) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "TokenShards: no shard of %s holds a window of block_size + 1 "
                       "= %d tokens", ds->urls[0], ds->block + 1);
        taas_error_hint(err, "use a smaller block_size, or longer shards");
        tok_free(ds);
        return -1;
    }
    d->info.size = (size_t)total;
    d->info.h = d->info.w = 1;
    d->info.c = ds->block + 1;
    d->info.tokens = 1;  /* the vocabulary is the model's: a token beyond it is the rank's error */
    snprintf(d->info.source, sizeof d->info.source, "%s%s", ds->urls[0], ds->n > 1 ? " ..." : "");
    d->ops = &TOK_OPS;
    d->impl = ds;
    return 0;
}
