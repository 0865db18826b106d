/* Checkpoints as safetensors files (checkpoint.h). */
#include "checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "safetensors.h"

/* The model's tensors, then each parameter tensor's optimizer parts: the table to write or
 * read. Keys of the optimizer rows are malloc'd into *keys (one block). NULL when out of
 * memory. */
static taas_st_tensor *table_of(const taas_checkpoint_bufs *b, const taas_optim_config *opt, size_t *n,
                                char **keys) {
    const char *parts[3];
    int nparts = taas_optim_state_names(opt, parts);
    size_t nparam = 0, keylen = 0;
    for (size_t i = 0; i < b->ntable; i++)
        if (b->table[i].home == TAAS_T_PARAM) {
            nparam++;
            keylen += strlen(b->table[i].key) + strlen(TAAS_ST_OPTIMIZER_PREFIX) + 20;
        }
    size_t rows = b->ntable + nparam * (size_t)nparts;
    taas_st_tensor *t = taas_param_table_tensors(b->table, b->ntable, b->params, b->stats, b->counters);
    taas_st_tensor *all = t ? realloc(t, (rows ? rows : 1) * sizeof *t) : NULL;
    char *kb = malloc(keylen * (size_t)nparts + 1);
    if (!all || !kb) {
        free(all ? all : t);
        free(kb);
        return NULL;
    }
    size_t r = b->ntable;
    char *at = kb;
    for (int p = 0; p < nparts; p++)
        for (size_t i = 0; i < b->ntable; i++) {
            const taas_param_entry *e = &b->table[i];
            if (e->home != TAAS_T_PARAM) continue;
            taas_st_tensor *o = &all[r++];
            *o = all[i];  /* the parameter's dtype and shape */
            int w = sprintf(at, "%s%s.%s", TAAS_ST_OPTIMIZER_PREFIX, e->key, parts[p]);
            o->key = at;
            at += w + 1;
            o->data = b->state ? (void *)(b->state + (size_t)p * b->nparams + e->offset) : NULL;
        }
    *n = rows;
    *keys = kb;
    return all;
}

int taas_checkpoint_write(const char *path, const taas_checkpoint_bufs *b, const taas_optim_config *opt,
                          const json_t *meta, taas_error *err) {
    size_t n;
    char *keys = NULL;
    taas_st_tensor *t = table_of(b, opt, &n, &keys);
    char *text = json_dumps(meta, JSON_COMPACT | JSON_REAL_PRECISION(17));
    int rc;
    if (!t || !text) {
        rc = taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the checkpoint");
    } else {
        const taas_st_meta m[] = {{"format", "pt"}, {TAAS_ST_CHECKPOINT_KEY, text}};
        rc = taas_safetensors_write(path, t, n, m, 2, err);
    }
    free(text);
    free(t);
    free(keys);
    return rc;
}

json_t *taas_checkpoint_meta(const char *path, taas_error *err) {
    json_t *md;
    if (taas_safetensors_metadata(path, &md, err)) return NULL;
    const char *text = json_string_value(json_object_get(md, TAAS_ST_CHECKPOINT_KEY));
    json_error_t je;
    json_t *meta = text ? json_loads(text, JSON_REJECT_DUPLICATES, &je) : NULL;
    json_decref(md);
    if (!text) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s holds weights but is not a checkpoint", path);
        taas_error_hint(err, "resume= takes a checkpoint a fit wrote (its job folder's checkpoint-*.safetensors); "
                             "to start from weights, load() them into the model and fit it");
        return NULL;
    }
    if (!json_is_object(meta) || json_integer_value(json_object_get(meta, "version")) != 1) {
        json_decref(meta);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: its checkpoint record is damaged or of another version",
                       path);
        taas_error_hint(err, "give a checkpoint written by this version of taas");
        return NULL;
    }
    return meta;
}

int taas_checkpoint_read(const char *path, const taas_checkpoint_bufs *b, const taas_optim_config *opt,
                         json_t **meta, taas_error *err) {
    *meta = NULL;
    json_t *m = taas_checkpoint_meta(path, err);
    if (!m) return -1;
    size_t n;
    char *keys = NULL;
    taas_st_tensor *t = table_of(b, opt, &n, &keys);
    int rc = t ? taas_safetensors_read(path, t, n, err)
               : taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the checkpoint");
    free(t);
    free(keys);
    if (rc) {
        json_decref(m);
        return -1;
    }
    *meta = m;
    return 0;
}
