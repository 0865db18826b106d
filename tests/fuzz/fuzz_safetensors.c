/* Weights files in the safetensors format (workers/train/safetensors.h), as load() in the
 * kernel and a resumed fit read them: the header's metadata, a checkpoint's fit state
 * (checkpoint.h), and the check of the file against a model's table and the read of its
 * tensors — once against a fixed table (the seeds' small model: its files get past the
 * checks into the data) and once against the same keys with any sizes. */
#include <stdlib.h>

#include "checkpoint.h"
#include "fuzz_util.h"
#include "safetensors.h"

/* tests/data/safetensors/small.safetensors's model */
static const struct {
    const char *key;
    taas_st_dtype dtype;
    int ndim;
    int64_t shape[4];
} TABLE[] = {
    {"0.weight", TAAS_ST_F32, 2, {3, 4}},
    {"0.bias", TAAS_ST_F32, 1, {3}},
    {"1.weight", TAAS_ST_F32, 1, {3}},
    {"1.bias", TAAS_ST_F32, 1, {3}},
    {"1.running_mean", TAAS_ST_F32, 1, {3}},
    {"1.running_var", TAAS_ST_F32, 1, {3}},
    {"1.num_batches_tracked", TAAS_ST_I64, 0, {0}},
    {"10.weight", TAAS_ST_F32, 4, {2, 3, 1, 1}},
};
#define NT (sizeof TABLE / sizeof TABLE[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("w.safetensors", data, size);
    taas_error err;
    taas_error_clear(&err);
    json_t *meta = NULL;
    if (taas_safetensors_metadata(path, &meta, &err) == 0) json_decref(meta);
    taas_error_clear(&err);
    json_t *fit = taas_checkpoint_meta(path, &err);
    fz_say("checkpoint: %s", fit ? "yes" : err.message);
    json_decref(fit);

    taas_st_tensor t[NT], any[NT];
    for (size_t i = 0; i < NT; i++) {
        int64_t n = 1;
        t[i] = (taas_st_tensor){.key = TABLE[i].key, .dtype = TABLE[i].dtype, .ndim = TABLE[i].ndim};
        for (int d = 0; d < TABLE[i].ndim; d++) n *= t[i].shape[d] = TABLE[i].shape[d];
        /* exactly the tensor's bytes, so that ASan sees a write past them */
        t[i].data = calloc((size_t)n, TABLE[i].dtype == TAAS_ST_I64 ? 8 : 4);
        any[i] = t[i];
        any[i].data = NULL;
        for (int d = 0; d < TABLE[i].ndim; d++) any[i].shape[d] = -1;
    }
    taas_error_clear(&err);
    int rc = taas_safetensors_read(path, t, NT, &err);
    fz_say("read: %s", rc ? err.message : "ok");
    taas_error_clear(&err);
    rc = taas_safetensors_read(path, any, NT, &err);
    fz_say("read, any sizes: %s", rc ? err.message : "ok");
    for (size_t i = 0; i < NT; i++) free(t[i].data);
    return 0;
}
