/* Internal to the dataset formats (dataset.c, format_*.c, decode_*.c, gunzip.c): the
 * dataset object every format fills, and the readers the formats share (gunzip, tar, .npy,
 * PNG, JPEG). Not a contract with the other dataloader modules: they use dataset.h. */
#ifndef TAAS_FORMATS_H
#define TAAS_FORMATS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "error.h"
#include "fetch.h"

/* ---- the dataset object (dataset.c) ---------------------------------------------- */

typedef struct taas_format_ops {
    /* index < info.size is checked by dataset.c; errors need not name the index, dataset.c
     * prefixes "sample N" when the message does not start with it */
    int (*get)(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err);
    void (*free)(void *impl);
    /* optional: get with a crop hint (dataset.h); *boxed as taas_dataset_get_hinted's */
    int (*get_hinted)(void *impl, size_t index, const taas_crop_hint *hint, taas_image *img, int64_t *label,
                      int *boxed, taas_error *err);
} taas_format_ops;

struct taas_dataset {
    taas_dataset_info info;
    const taas_format_ops *ops;
    void *impl;
};

/* Each format's open: reads what it needs through f, fills d->info (type is set by the
 * caller), d->ops and d->impl. On error leaves nothing allocated in d. */
int taas_format_idx_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err);
int taas_format_cifar_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err);
int taas_format_npy_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err);
int taas_format_webdataset_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err);
int taas_format_imagefolder_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err);
int taas_format_text_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err);
int taas_format_tokens_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err);

/* Shared helpers (dataset.c). */
/* Puts "prefix: " in front of err's message (keeps ename and hint). */
void taas_fmt_prefix(taas_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* root + "/" + name, without doubling a slash; malloc'd. */
char *taas_fmt_join(const char *root, const char *name);
/* The last path component of a path or URL (borrowed pointer into s). */
const char *taas_fmt_basename(const char *s);
/* A string member of the spec, or NULL when absent or not a string. */
const char *taas_fmt_spec_str(const json_t *spec, const char *key);
/* A spec's urls (a string of brace patterns or local globs, or a list of them) as a
 * NULL-terminated list of names appended to *out (*nout of them); ext names the shards'
 * extension in the hints. 0, or -1 with err naming type. */
int taas_fmt_urls(const json_t *urls, const char *type, const char *ext, char ***out, size_t *nout, taas_error *err);
/* The token count of an llm.c token shard from its header (the file's first 1024 bytes, len
 * of them: 256 little-endian int32, magic 20240520, version 1, the count) and the file's
 * size; -1 with a TaasDataError naming url and the offset of what is wrong. */
int taas_token_shard_header(const unsigned char *h, size_t len, uint64_t file_bytes, const char *url,
                            uint64_t *tokens, taas_error *err);
int taas_fmt_oom(taas_error *err, const char *what);
/* 1 when a fetch error says the object is not there (a missing file, HTTP 404/410, or 403,
 * which S3 answers for a missing key without list rights): another candidate name is worth
 * trying. Anything else (refused connections, 5xx after retries) is reported at once. */
int taas_fmt_not_found(const taas_error *err);

/* ---- gzip (gunzip.c) --------------------------------------------------------------- */

/* 1 when p starts with the gzip magic bytes. */
int taas_is_gzip(const unsigned char *p, size_t n);
/* Inflates all gzip members of src into *out (malloc'd, caller frees with free; never
 * NULL on success) and *out_len, at most max_out bytes: a stream that would give more is a
 * TaasDataError before more memory is taken (a gzip bomb). name is the file or URL for
 * messages: "truncated gzip" (the stream ends before its end marker), "corrupt gzip"
 * (zlib's reason). */
int taas_gunzip(const unsigned char *src, size_t n, const char *name, size_t max_out, unsigned char **out,
                size_t *out_len, taas_error *err);
/* The first bytes src inflates to (at most n_head into head, which a format's header
 * fills): how many came, 0 for a stream that is not gzip or is corrupt at once. */
size_t taas_gunzip_head(const unsigned char *src, size_t n, unsigned char *head, size_t n_head);

/* ---- tar (format_tar.c) ------------------------------------------------------------ */

/* Regular-file members of a POSIX (pax), ustar, GNU or v7 tar archive in memory. Long
 * names from pax 'path' records and GNU 'L' entries; base-256 sizes; checksums checked. */
typedef struct taas_tar_iter {
    const unsigned char *data;
    size_t len;
    size_t pos;
    const char *archive; /* for messages */
    char *name;          /* the current member's name, malloc'd, valid until the next call */
    char *long_name;     /* a pending GNU 'L' or pax path for the next header */
    int64_t pax_size;    /* a pending pax size, -1 when none */
} taas_tar_iter;

typedef struct taas_tar_member {
    const char *name;    /* borrowed from the iterator */
    uint64_t offset;     /* of the data in the archive */
    uint64_t size;
} taas_tar_member;

void taas_tar_iter_init(taas_tar_iter *it, const unsigned char *data, size_t len, const char *archive);
/* 1 and the next regular file, 0 at the end of the archive, -1 on a corrupt or truncated
 * archive (the message names the archive and the byte offset). */
int taas_tar_next(taas_tar_iter *it, taas_tar_member *m, taas_error *err);
void taas_tar_iter_free(taas_tar_iter *it);

/* ---- .npy (npy_header.c) ----------------------------------------------------------- */

typedef struct taas_npy {
    char kind;            /* 'u', 'i' or 'f' */
    int itemsize;         /* 1, 2, 4 or 8 */
    char descr[32];       /* as written, for messages */
    int ndim;
    uint64_t shape[8];
    uint64_t count;       /* product of shape */
    size_t data_off;      /* where the array's bytes start */
} taas_npy;

/* Parses the header at the start of p (n bytes, at least the whole header). Unsupported
 * dtypes, big-endian data and fortran_order=True are errors naming the file. When
 * *need is given and n is too short for the header, returns 1 and sets *need to the
 * bytes the header takes. */
int taas_npy_parse(const unsigned char *p, size_t n, const char *name, taas_npy *h, size_t *need,
                   taas_error *err);
/* count elements of h's dtype at src into dst (float32 or int64). */
void taas_npy_to_f32(const taas_npy *h, const unsigned char *src, size_t count, float *dst);
/* The int64 form returns the index of the first uint64 element beyond INT64_MAX (which no
 * int64 holds), or -1 when all fit. */
long long taas_npy_to_i64(const taas_npy *h, const unsigned char *src, size_t count, int64_t *dst);
/* A whole .npy file (a WebDataset member) as an image: (H, W) or (H, W, C). */
int taas_npy_decode_image(const unsigned char *p, size_t n, const char *name, taas_image *img,
                          taas_error *err);

/* ---- image decoders (decode_png.c, decode_jpeg.c) -------------------------------------- */

/* Decodes to 8-bit HWC with the image's own channels: grey 1, grey+alpha 2, RGB 3, RGBA 4
 * (palette expands to RGB or RGBA, 16-bit keeps the high byte as PIL does). A corrupt or
 * truncated image is a TaasDataError "corrupt PNG: <libpng's reason>"; never exits. */
int taas_decode_png(const unsigned char *p, size_t n, taas_image *img, taas_error *err);
/* Grey 1 channel, colour 3 (YCbCr and CMYK converted to RGB). "corrupt JPEG: ..." */
int taas_decode_jpeg(const unsigned char *p, size_t n, taas_image *img, taas_error *err);
/* The same with a crop hint (NULL: the whole image): *boxed as taas_dataset_get_hinted's.
 * CMYK images are decoded whole. */
int taas_decode_jpeg_hinted(const unsigned char *p, size_t n, const taas_crop_hint *hint, taas_image *img,
                            int *boxed, taas_error *err);

#endif
