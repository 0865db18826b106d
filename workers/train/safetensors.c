/* safetensors reading and writing; see safetensors.h. */
#include "safetensors.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "errnames.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code copies it as is"
#endif

/* The reference implementation refuses headers above 100 MB. */
#define MAX_HEADER ((uint64_t)100000000)

const char *taas_st_dtype_name(taas_st_dtype d) {
    return d == TAAS_ST_I64 ? "I64" : "F32";
}

static size_t dtype_size(taas_st_dtype d) {
    return d == TAAS_ST_I64 ? 8 : 4;
}

static void shape_str(taas_buf *b, const int64_t *shape, int ndim) {
    taas_buf_putc(b, '[');
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) taas_buf_printf(b, "%s?", i ? ", " : "");  /* any size */
        else taas_buf_printf(b, "%s%lld", i ? ", " : "", (long long)shape[i]);
    taas_buf_putc(b, ']');
}

/* Element count, or -1 on a negative dimension or overflow. */
static int64_t numel(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return -1;
    }
    return n;
}

/* ---- writing ---- */

static int cmp_tensor_key(const void *a, const void *b) {
    const taas_st_tensor *x = *(const taas_st_tensor *const *)a;
    const taas_st_tensor *y = *(const taas_st_tensor *const *)b;
    return strcmp(x->key, y->key);
}

static int check_write_table(const char *path, const taas_st_tensor *t, size_t n,
                             taas_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (!t[i].key || !*t[i].key || strcmp(t[i].key, "__metadata__") == 0) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "%s: tensor %zu has the key '%s', which cannot be saved", path, i,
                           t[i].key ? t[i].key : "(null)");
            taas_error_hint(err, "give every tensor a non-empty key other than '__metadata__'");
            return -1;
        }
        if (t[i].dtype != TAAS_ST_F32 && t[i].dtype != TAAS_ST_I64) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: tensor '%s' has unknown dtype %d",
                           path, t[i].key, (int)t[i].dtype);
            taas_error_hint(err, "use TAAS_ST_F32 or TAAS_ST_I64");
            return -1;
        }
        int64_t ne = t[i].ndim >= 0 && t[i].ndim <= TAAS_ST_MAX_DIMS
                         ? numel(t[i].shape, t[i].ndim) : -1;
        if (ne < 0) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "%s: tensor '%s' has an invalid shape (%d dimensions)", path,
                           t[i].key, t[i].ndim);
            taas_error_hint(err, "dimensions must be >= 0, at most %d of them", TAAS_ST_MAX_DIMS);
            return -1;
        }
        if (ne > 0 && !t[i].data) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: tensor '%s' has no data", path,
                           t[i].key);
            taas_error_hint(err, "point the table entry at the tensor's buffer");
            return -1;
        }
    }
    return 0;
}

/* Compact JSON in the reference implementation's layout:
 * {"__metadata__":{...},"key":{"dtype":"F32","shape":[..],"data_offsets":[b,e]},...} */
static char *build_header(const taas_st_tensor *const *sorted, size_t n,
                          const taas_st_meta *meta, size_t nmeta, uint64_t *data_len) {
    json_t *root = json_object();
    if (nmeta > 0) {
        json_t *m = json_object();
        for (size_t i = 0; i < nmeta; i++)
            json_object_set_new(m, meta[i].key, json_string(meta[i].value));
        json_object_set_new(root, "__metadata__", m);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const taas_st_tensor *t = sorted[i];
        uint64_t nb = (uint64_t)numel(t->shape, t->ndim) * dtype_size(t->dtype);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *info = json_object();
        json_object_set_new(info, "dtype", json_string(taas_st_dtype_name(t->dtype)));
        json_object_set_new(info, "shape", shape);
        json_object_set_new(info, "data_offsets",
                            json_pack("[II]", (json_int_t)off, (json_int_t)(off + nb)));
        json_object_set_new(root, t->key, info);
        off += nb;
    }
    *data_len = off;
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    return s;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int taas_safetensors_write(const char *path, const taas_st_tensor *tensors, size_t n,
                           const taas_st_meta *meta, size_t nmeta, taas_error *err) {
    if (check_write_table(path, tensors, n, err) < 0) return -1;
    for (size_t i = 0; i < nmeta; i++) {
        if (!meta[i].key || !meta[i].value) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: metadata entry %zu has no %s",
                           path, i, meta[i].key ? "value" : "key");
            taas_error_hint(err, "metadata is a table of string keys and string values");
            return -1;
        }
    }
    const taas_st_tensor **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) sorted[i] = &tensors[i];
    qsort(sorted, n, sizeof *sorted, cmp_tensor_key);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the key '%s' appears twice", path,
                           sorted[i]->key);
            taas_error_hint(err, "every tensor needs its own key");
            free(sorted);
            return -1;
        }
    }
    uint64_t data_len = 0;
    char *hdr = build_header(sorted, n, meta, nmeta, &data_len);
    if (!hdr) {
        free(sorted);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "%s: cannot encode the header (a key or metadata is not valid UTF-8)",
                       path);
        taas_error_hint(err, "use UTF-8 text for keys and metadata");
        return -1;
    }
    size_t hlen = strlen(hdr);
    size_t padded = (hlen + 7) / 8 * 8;
    /* a file this process holds open (an unlinked private file) has no folder to rename in:
     * it is written in place */
    int held = !strncmp(path, TAAS_ST_HELD, strlen(TAAS_ST_HELD));
    char *tmp = NULL;
    if (!held && asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) tmp = NULL;
    int fd = held ? open(path, O_WRONLY | O_TRUNC | O_CLOEXEC) : tmp ? mkstemp(tmp) : -1;
    int rc = -1;
    if (fd < 0) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot create %s: %s", path, strerror(errno));
        taas_error_hint(err, "check that the directory exists and is writable");
        goto out;
    }
    unsigned char sz[8];
    for (int i = 0; i < 8; i++) sz[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int bad = write_all(fd, sz, 8) < 0 || write_all(fd, hdr, hlen) < 0;
    for (size_t i = hlen; !bad && i < padded; i++) bad = write_all(fd, " ", 1) < 0;
    for (size_t i = 0; !bad && i < n; i++) {
        size_t nb = (size_t)numel(sorted[i]->shape, sorted[i]->ndim) * dtype_size(sorted[i]->dtype);
        if (nb) bad = write_all(fd, sorted[i]->data, nb) < 0;
    }
    if (!bad && !held) bad = fchmod(fd, 0644) < 0 || fsync(fd) < 0;
    int saved = errno;
    if (close(fd) < 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (!bad && !held && rename(tmp, path) < 0) {
        bad = 1;
        saved = errno;
    }
    if (bad) {
        if (!held) unlink(tmp);
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot write %s: %s", path, strerror(saved));
        taas_error_hint(err, "check the free disk space and the permissions of the directory");
        goto out;
    }
    rc = 0;
out:
    free(tmp);
    free(hdr);
    free(sorted);
    return rc;
}

/* ---- reading ---- */

typedef struct entry {
    const char *key;
    const char *dtype;
    int ndim;
    int64_t shape[TAAS_ST_MAX_DIMS];
    uint64_t begin, end;
} entry;

static int read_exact(int fd, void *p, size_t n, uint64_t off) {
    char *c = p;
    while (n > 0) {
        ssize_t r = pread(fd, c, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int bad_header(taas_error *err, const char *path, const char *key, const char *what) {
    if (key)
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: tensor '%s' in the header %s", path,
                       key, what);
    else
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: the header %s", path, what);
    taas_error_hint(err, "the file is damaged or was not written by a safetensors writer; "
                          "save the model again");
    return -1;
}

/* Parses one tensor's header entry into e, checking its fields and its byte count. */
static int parse_entry(const char *path, const char *key, json_t *v, entry *e,
                       taas_error *err) {
    e->key = key;
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape");
    json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(off))
        return bad_header(err, path, key, "lacks \"dtype\", \"shape\" or \"data_offsets\"");
    e->dtype = json_string_value(dt);
    static const char *const known[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16",
                                        "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"};
    static const int sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    int esize = 0;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(e->dtype, known[i]) == 0) esize = sizes[i];
    if (!esize) return bad_header(err, path, key, "has an unknown dtype");
    if (json_array_size(sh) > TAAS_ST_MAX_DIMS)
        return bad_header(err, path, key, "has too many dimensions");
    e->ndim = (int)json_array_size(sh);
    for (int i = 0; i < e->ndim; i++) {
        json_t *d = json_array_get(sh, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return bad_header(err, path, key, "has a shape that is not a list of sizes >= 0");
        e->shape[i] = json_integer_value(d);
    }
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(en) ||
        json_integer_value(b) < 0 || json_integer_value(en) < json_integer_value(b))
        return bad_header(err, path, key, "has data_offsets that are not [begin, end] with "
                                          "0 <= begin <= end");
    e->begin = (uint64_t)json_integer_value(b);
    e->end = (uint64_t)json_integer_value(en);
    int64_t ne = numel(e->shape, e->ndim);
    if (ne < 0 || (uint64_t)ne > UINT64_MAX / (uint64_t)esize ||
        (uint64_t)ne * (uint64_t)esize != e->end - e->begin)
        return bad_header(err, path, key, "has data_offsets whose length does not match its "
                                          "dtype and shape");
    return 0;
}

static int cmp_entry_begin(const void *a, const void *b) {
    const entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Offsets must lie inside the data section and not share bytes. */
static int check_offsets(const char *path, entry *es, size_t n, uint64_t data_len,
                         taas_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (es[i].end > data_len) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                           "%s: tensor '%s' has data_offsets [%llu, %llu] but the data section "
                           "holds only %llu bytes (the file is truncated or its header wrong)",
                           path, es[i].key, (unsigned long long)es[i].begin,
                           (unsigned long long)es[i].end, (unsigned long long)data_len);
            taas_error_hint(err, "the file is incomplete or damaged; save the model again");
            return -1;
        }
    }
    entry *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "%s: out of memory", path);
    memcpy(sorted, es, n * sizeof *es);
    qsort(sorted, n, sizeof *sorted, cmp_entry_begin);
    for (size_t i = 1; i < n; i++) {
        if (sorted[i].begin < sorted[i - 1].end) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                           "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", path,
                           sorted[i - 1].key, (unsigned long long)sorted[i - 1].begin,
                           (unsigned long long)sorted[i - 1].end, sorted[i].key,
                           (unsigned long long)sorted[i].begin,
                           (unsigned long long)sorted[i].end);
            taas_error_hint(err, "the file is damaged or was not written by a safetensors "
                                 "writer; save the model again");
            free(sorted);
            return -1;
        }
    }
    free(sorted);
    return 0;
}

static const entry *find_entry(const entry *es, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(es[i].key, key) == 0) return &es[i];
    return NULL;
}

/* The file's entry of tensor t: under its key, else under its alias. */
static const entry *find_tensor(const entry *es, size_t n, const taas_st_tensor *t) {
    const entry *e = find_entry(es, n, t->key);
    return e || !t->alias ? e : find_entry(es, n, t->alias);
}

/* A key of Hugging Face's GPT-2 checkpoints that holds no parameter: the causal mask
 * (h.N.attn.bias, 1 x 1 x P x P) and the mask's fill value (h.N.attn.masked_bias) that older
 * transformers saved as buffers; GPT2Model's or GPT2LMHeadModel's (transformer.h.N...). */
static int gpt2_buffer(const char *key) {
    const char *h = !strncmp(key, "transformer.", 12) ? key + 12 : key;
    if (strncmp(h, "h.", 2) || !isdigit((unsigned char)h[2])) return 0;
    const char *dot = strchr(h + 2, '.');
    return dot && (!strcmp(dot, ".attn.bias") || !strcmp(dot, ".attn.masked_bias"));
}

/* A checkpoint's optimizer state, which a reader of the model's tensors passes over, and a
 * GPT-2 checkpoint's buffers, when the model is a GPT-2 (its tensors have aliases). */
static int skipped(const char *key, int checkpoint, const taas_st_tensor *t, size_t n) {
    if (n && t[0].alias && gpt2_buffer(key)) return 1;
    if (!checkpoint || strncmp(key, TAAS_ST_OPTIMIZER_PREFIX, strlen(TAAS_ST_OPTIMIZER_PREFIX)) != 0) return 0;
    for (size_t j = 0; j < n; j++)
        if (strcmp(t[j].key, key) == 0) return 0;  /* asked for by name: a checkpoint's reader */
    return 1;
}

/* A message lists this many keys of a kind and counts the rest: a hostile file may have
 * hundreds of thousands. */
#define KEYS_LISTED 8

static void list_key(taas_buf *b, size_t *count, const char *key) {
    if (*count < KEYS_LISTED) taas_buf_printf(b, "%s'%s'", *count ? ", " : "", key);
    ++*count;
}

static void list_end(taas_buf *b, size_t count) {
    if (count > KEYS_LISTED) taas_buf_printf(b, " and %zu more", count - KEYS_LISTED);
}

/* Missing and extra keys, the first few of each listed, in one message. allow_missing: the
 * table's keys the file lacks are no error (present[i] = 0 says which); ignore_unexpected: the
 * file's keys the table lacks are none either (appended to unexpected when it is not NULL). */
static int check_keys(const char *path, const entry *es, size_t nes, int checkpoint,
                      const taas_st_tensor *t, size_t n, const taas_st_read_opts *o,
                      taas_error *err) {
    taas_buf missing = TAAS_BUF_INIT, extra = TAAS_BUF_INIT;
    size_t nmiss = 0, nextra = 0;
    for (size_t i = 0; i < n; i++) {
        int here = find_tensor(es, nes, &t[i]) != NULL;
        if (o->present) o->present[i] = (unsigned char)here;
        if (!here && !o->allow_missing && !t[i].tied) list_key(&missing, &nmiss, t[i].key);
    }
    for (size_t i = 0; i < nes; i++) {
        int found = 0;
        for (size_t j = 0; j < n && !found; j++)
            found = strcmp(t[j].key, es[i].key) == 0 || (t[j].alias && strcmp(t[j].alias, es[i].key) == 0);
        if (found || skipped(es[i].key, checkpoint, t, n)) continue;
        if (!o->ignore_unexpected) list_key(&extra, &nextra, es[i].key);
        else if (o->unexpected && json_array_append_new(o->unexpected, json_string(es[i].key)))
            nextra = SIZE_MAX;  /* out of memory: no partial list */
    }
    if (nextra == SIZE_MAX) {
        taas_buf_free(&missing);
        taas_buf_free(&extra);
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "%s: out of memory", path);
    }
    list_end(&missing, nmiss);
    list_end(&extra, nextra);
    if (nmiss || nextra) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s does not fit the model:%s%s%s%s%s", path,
                       nmiss ? " missing keys " : "", nmiss ? missing.data : "",
                       nmiss && nextra ? ";" : "", nextra ? " unexpected keys " : "",
                       nextra ? extra.data : "");
        taas_error_hint(err, "the model definition differs from the one that saved the file; "
                             "build the same layers in the same order, then load again, or "
                             "load(path, into=net, strict=False) to take the keys both have");
    }
    taas_buf_free(&missing);
    taas_buf_free(&extra);
    return nmiss || nextra ? -1 : 0;
}

static int check_fit(const char *path, const entry *e, const taas_st_tensor *t,
                     taas_error *err) {
    if (strcmp(e->dtype, taas_st_dtype_name(t->dtype)) != 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "%s: %s has dtype %s, the model expects %s", path, t->key, e->dtype,
                       taas_st_dtype_name(t->dtype));
        taas_error_hint(err, "the file was saved from a model with other tensor types; "
                             "convert it to %s or save it again from this model",
                       taas_st_dtype_name(t->dtype));
        return -1;
    }
    int same = e->ndim == t->ndim;
    for (int i = 0; same && i < e->ndim; i++) same = t->shape[i] < 0 || e->shape[i] == t->shape[i];
    if (!same) {
        taas_buf a = TAAS_BUF_INIT, b = TAAS_BUF_INIT;
        shape_str(&a, e->shape, e->ndim);
        shape_str(&b, t->shape, t->ndim);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "%s: %s has shape %s, the model expects %s", path, t->key, a.data, b.data);
        taas_error_hint(err, "the model definition differs from the one that saved the file; "
                             "make the layer sizes match, then load again");
        taas_buf_free(&a);
        taas_buf_free(&b);
        return -1;
    }
    return 0;
}

static int not_safetensors(taas_error *err, const char *path, const char *why) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s is not a safetensors file: %s", path, why);
    taas_error_hint(err, "give the path of a .safetensors file written by save() or by the "
                         "safetensors library");
    return -1;
}

/* Reads and parses the header; on success *root owns the JSON and *data_start/len
 * describe the data section. */
static int load_header(const char *path, int fd, json_t **root, uint64_t *data_start,
                       uint64_t *data_len, taas_error *err) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot read %s: %s", path,
                              strerror(errno));
    uint64_t fsize = (uint64_t)st.st_size;
    unsigned char sz[8];
    if (fsize < 8 || read_exact(fd, sz, 8, 0) < 0)
        return not_safetensors(err, path, "it is shorter than the 8-byte header size");
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)sz[i] << (8 * i);
    if (hlen < 2 || hlen > MAX_HEADER) {
        return not_safetensors(err, path, "its first 8 bytes do not give a plausible header "
                                          "size");
    }
    if (hlen > fsize - 8) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "%s is truncated: the header should be %llu bytes but the file has only "
                       "%llu after the size",
                       path, (unsigned long long)hlen, (unsigned long long)(fsize - 8));
        taas_error_hint(err, "the file is incomplete (an interrupted copy or save?); "
                             "copy or save it again");
        return -1;
    }
    char *h = malloc(hlen);
    if (!h) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "%s: out of memory", path);
    if (read_exact(fd, h, hlen, 8) < 0) {
        free(h);
        return taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot read %s: %s", path,
                              strerror(errno));
    }
    if (h[0] != '{') {
        free(h);
        return not_safetensors(err, path, "the header does not start with '{'");
    }
    json_error_t je;
    *root = json_loadb(h, hlen, JSON_REJECT_DUPLICATES, &je);
    free(h);
    if (!*root || !json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                       "%s: the header is not valid JSON (byte %d: %s)", path, je.position,
                       je.text);
        taas_error_hint(err, "the file is damaged or not a safetensors file; save the model "
                             "again");
        return -1;
    }
    *data_start = 8 + hlen;
    *data_len = fsize - 8 - hlen;
    return 0;
}

static int check_metadata(const char *path, json_t *m, taas_error *err) {
    const char *k;
    json_t *v;
    if (!json_is_object(m)) return bad_header(err, path, NULL, "has a __metadata__ that is not "
                                                               "an object");
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return bad_header(err, path, NULL, "has a __metadata__ value that is not a string");
    }
    return 0;
}

/* path opened for reading when it is a regular file: a FIFO or a device (which would block
 * or never end) and a folder are refused without waiting. The fd, or -1 with err. */
static int open_regular(const char *path, taas_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot open %s: %s", path, strerror(errno));
        taas_error_hint(err, "check the path; weights are written by save(model, \"%s\")", path);
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "%s is not a regular file (a %s)", path,
                       S_ISDIR(st.st_mode) ? "folder" : S_ISFIFO(st.st_mode) ? "FIFO" : "device or socket");
        taas_error_hint(err, "give the path of a .safetensors file");
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int taas_safetensors_read_opts(const char *path, const taas_st_tensor *tensors, size_t n,
                               const taas_st_read_opts *opts, taas_error *err) {
    taas_st_read_opts o = *opts;
    int fd = open_regular(path, err);
    if (fd < 0) return -1;
    json_t *root = NULL;
    entry *es = NULL;
    int rc = -1;
    uint64_t data_start = 0, data_len = 0;
    if (load_header(path, fd, &root, &data_start, &data_len, err) < 0) goto out;
    es = malloc((json_object_size(root) + 1) * sizeof *es);
    if (!es) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "%s: out of memory", path);
        goto out;
    }
    size_t nes = 0;
    int checkpoint = 0;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) {
            if (check_metadata(path, v, err) < 0) goto out;
            checkpoint = json_object_get(v, TAAS_ST_CHECKPOINT_KEY) != NULL;
            /* a partial file (load(strict=False) into a model without weights): its tensors
             * go over the model's initialisation, the rest keep it */
            if (json_object_get(v, TAAS_ST_PARTIAL_KEY)) o.allow_missing = 1;
            continue;
        }
        if (parse_entry(path, k, v, &es[nes], err) < 0) goto out;
        nes++;
    }
    if (check_offsets(path, es, nes, data_len, err) < 0) goto out;
    if (check_keys(path, es, nes, checkpoint, tensors, n, &o, err) < 0) goto out;
    for (size_t i = 0; i < n; i++) {
        const entry *e = find_tensor(es, nes, &tensors[i]);
        if (e && check_fit(path, e, &tensors[i], err) < 0) goto out;
    }
    for (size_t r = 0; r < 2 * n; r++) {  /* the tied tensors first: the others' values win */
        size_t i = r % n;
        if ((r < n) != (tensors[i].tied != 0)) continue;
        const entry *e = find_tensor(es, nes, &tensors[i]);
        errno = 0;
        if (e && tensors[i].data && e->end > e->begin &&
            read_exact(fd, tensors[i].data, e->end - e->begin, data_start + e->begin) < 0) {
            taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot read %s (tensor '%s'): %s", path,
                           e->key, errno ? strerror(errno) : "unexpected end of file");
            taas_error_hint(err, "the file changed while it was read; load it again");
            goto out;
        }
    }
    rc = 0;
out:
    free(es);
    json_decref(root);
    close(fd);
    return rc;
}

int taas_safetensors_read(const char *path, const taas_st_tensor *tensors, size_t n,
                          taas_error *err) {
    const taas_st_read_opts strict = {0, 0, NULL, NULL};
    return taas_safetensors_read_opts(path, tensors, n, &strict, err);
}

/* The file's header alone (the JSON object, a new reference), or NULL with err. */
static json_t *header_only(const char *path, taas_error *err) {
    int fd = open_regular(path, err);
    if (fd < 0) return NULL;
    json_t *root = NULL;
    uint64_t data_start = 0, data_len = 0;
    int rc = load_header(path, fd, &root, &data_start, &data_len, err);
    close(fd);
    return rc < 0 ? NULL : root;
}

int taas_safetensors_shapes(const char *path, taas_st_tensor *tensors, size_t n, taas_error *err) {
    json_t *root = header_only(path, err);
    int rc = root ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *v = json_object_get(root, tensors[i].key);
        if (!v && tensors[i].alias) v = json_object_get(root, tensors[i].alias);
        entry e;
        if (!v || strcmp(tensors[i].key, "__metadata__") == 0) continue;
        rc = parse_entry(path, tensors[i].key, v, &e, err);
        if (rc == 0) {
            tensors[i].ndim = e.ndim;
            memcpy(tensors[i].shape, e.shape, sizeof e.shape);
        }
    }
    json_decref(root);
    return rc;
}

int taas_safetensors_metadata(const char *path, json_t **meta, taas_error *err) {
    *meta = NULL;
    json_t *root = header_only(path, err);
    if (!root) return -1;
    json_t *m = json_object_get(root, "__metadata__");
    if (m && check_metadata(path, m, err) < 0) {
        json_decref(root);
        return -1;
    }
    *meta = m ? json_incref(m) : json_object();
    json_decref(root);
    return 0;
}
