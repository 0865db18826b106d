/* Weights files in the safetensors format (https://github.com/huggingface/safetensors):
 * 8-byte little-endian header size N, N bytes of JSON header (padded with spaces to a
 * multiple of 8), then the raw little-endian tensor data.
 *
 * The caller describes its tensors (the model's state_dict) as a table; write saves them,
 * read checks the file against the table and fills the caller's buffers. */
#ifndef TAAS_SAFETENSORS_H
#define TAAS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TAAS_ST_MAX_DIMS 8

typedef enum taas_st_dtype {
    TAAS_ST_F32, /* "F32": float */
    TAAS_ST_I64, /* "I64": int64_t (BatchNorm's num_batches_tracked) */
} taas_st_dtype;

typedef struct taas_st_tensor {
    const char *key;                    /* state_dict key, e.g. "0.weight" */
    taas_st_dtype dtype;
    int ndim;                           /* 0 = scalar (shape []) */
    int64_t shape[TAAS_ST_MAX_DIMS];
    void *data;                         /* write: read from here; read: filled */
    const char *alias;                  /* another name a file may give it (the key of Hugging Face's
                                         * GPT2Model for GPT2LMHeadModel's transformer.*), or NULL */
    int tied;                           /* another tensor's memory under a second key (GPT-2's
                                         * lm_head.weight): a file may lack it, and where it has
                                         * both, the other's values win, as Hugging Face ties
                                         * them after loading */
} taas_st_tensor;

/* One "__metadata__" entry (string to string, as the format requires). */
typedef struct taas_st_meta {
    const char *key;
    const char *value;
} taas_st_meta;

/* "F32" / "I64". */
const char *taas_st_dtype_name(taas_st_dtype d);

/* Writes the n tensors (header keys sorted, data in the same order) and, when nmeta > 0,
 * a "__metadata__" object, to a temporary file beside path that is renamed over path,
 * so a crash never leaves a half-written file. A path under TAAS_ST_HELD is a file the
 * process holds open, already unlinked (a worker's private file, which goes with the
 * process however it ends): it is written in place. Returns 0, or -1 with err filled. */
#define TAAS_ST_HELD "/proc/self/fd/"
int taas_safetensors_write(const char *path, const taas_st_tensor *tensors, size_t n,
                           const taas_st_meta *meta, size_t nmeta, taas_error *err);

/* A checkpoint (checkpoint.h) is a weights file whose __metadata__ has this key; its
 * optimizer's state is in tensors named under this prefix, which a reader that does not ask
 * for them by name passes over: a checkpoint loads wherever weights do. */
#define TAAS_ST_CHECKPOINT_KEY "taas.checkpoint"
#define TAAS_ST_OPTIMIZER_PREFIX "optimizer."

/* Reads path into the buffers of the n expected tensors. The file must hold exactly these
 * keys with these dtypes and shapes; everything is checked before any buffer is written,
 * so on error (-1, err filled, naming the file and the key) the buffers are untouched.
 * A tensor whose data is NULL is checked but not read (all NULL: a check of the file
 * against a model's table), and a negative size in its shape accepts any size. */
int taas_safetensors_read(const char *path, const taas_st_tensor *tensors, size_t n,
                          taas_error *err);

/* A file whose __metadata__ has this key holds only some of the model's tensors (load() with
 * strict=False into a model without weights): the reader fills those it has and leaves the
 * others' buffers as they are (the model's initialisation). Unexpected keys stay an error. */
#define TAAS_ST_PARTIAL_KEY "taas.partial"

/* taas_safetensors_read with PyTorch's strict=False: allow_missing, the table's keys the file
 * lacks are no error (their buffers untouched; present, n entries when not NULL, says which
 * were in the file); ignore_unexpected, the file's keys the table lacks are none either
 * (unexpected, a JSON array when not NULL, gets their names, in the header's order). The
 * tensors in both must still match in dtype and shape. */
struct json_t;
typedef struct taas_st_read_opts {
    int allow_missing, ignore_unexpected;
    unsigned char *present;
    struct json_t *unexpected;
} taas_st_read_opts;
int taas_safetensors_read_opts(const char *path, const taas_st_tensor *tensors, size_t n,
                               const taas_st_read_opts *opts, taas_error *err);

/* Sets the ndim and shape of each of the n tensors whose key the file has to the file's (a
 * table's unknown sizes, a Lazy layer's, made the file's); the others stay. 0, or -1 with err. */
int taas_safetensors_shapes(const char *path, taas_st_tensor *tensors, size_t n, taas_error *err);

/* The file's "__metadata__" object (a new reference; empty when it has none), after the
 * header's checks. 0, or -1 with err. */
int taas_safetensors_metadata(const char *path, struct json_t **meta, taas_error *err);

#endif
