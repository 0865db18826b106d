/* save() and load(): a model's weights are a safetensors file the kernel only names. save
 * copies it; load checks the file's header against the model's state_dict table (every key,
 * dtype and shape; modelview.c) and attaches a private copy, or with strict=False a merged
 * file of the keys both have (modelview.c), as torch's load_state_dict(strict=False). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"

#include "errnames.h"
#include "fit.h"
#include "interp.h"
#include "modelview.h"
#include "modules.h"
#include "result.h"
#include "utf8.h"

int taas_fit_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (taas_value_is_model(a[0])) return 0;
    taas_error_set(err, TAAS_ERR_TYPE, w[0], "%s() takes " TAAS_MODEL_WORDS ", not %s", r->b.name,
                   taas_value_type_name(a[0]));
    taas_sig_hint(err, &r->b, "build a model: net = Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1)), or net = resnet18()");
    return -1;
}

int taas_need_weights(taas_call_ctx *cx, const taas_value *model) {
    if (model->u.obj.weights) return 0;
    const char *name = cx->interp ? taas_interp_name_of(cx->interp, model) : NULL;
    taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "%s has no trained weights yet: fit it first, or load weights",
                   name ? name : "the model");
    taas_error_hint(cx->err, "fit(net, loader, loss=NLLLoss(), optimizer=SGD(lr=0.1)) trains it; "
                             "load('net.safetensors', into=net) attaches saved weights");
    return -1;
}

int taas_load_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    taas_value *b[1] = {a[1]};
    return taas_fit_check(r, b, w + 1, err);
}

int taas_save_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (taas_need_weights(cx, a[0])) return -1;
    const char *src = a[0]->u.obj.weights, *dst = a[1]->u.str.s;
    taas_error unread;  /* a file that cannot be read: the copy below says why */
    taas_error_clear(&unread);
    if (taas_weights_partial(src, &unread) == 1) {
        const char *name = cx->interp ? taas_interp_name_of(cx->interp, a[0]) : NULL;
        taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos,
                       "%s has partial weights (load(strict=False) gave it only some tensors, the rest "
                       "are initialised when it trains): there is no whole state_dict to save yet",
                       name ? name : "the model");
        taas_error_hint(cx->err, "fit it first (the missing tensors get their initialisation and training), "
                                 "then save");
        return -1;
    }
    char q[300];
    taas_utf8_clip(q, sizeof q, dst, strlen(dst), 200);
    struct stat st;
    if (stat(dst, &st) == 0 && !S_ISREG(st.st_mode)) {  /* a FIFO would hold the kernel; a folder is no file */
        taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "save() writes a file, and %s is %s", q,
                       S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file");
        taas_error_hint(cx->err, "give the path of a file, e.g. 'net.safetensors'");
        return -1;
    }
    if (taas_copy_file_atomic(src, dst) != 0) {
        int e = errno;
        if (access(src, R_OK) != 0) {
            taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "save() cannot read the trained weights: %s", strerror(errno));
            taas_error_hint(cx->err, "they were removed from the temporary folder: fit again");
            return -1;
        }
        taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "save() cannot write %s: %s", q, strerror(e));
        taas_error_hint(cx->err, e == ENOSPC || e == EDQUOT ? "the disk is full: free some space and save again"
                                 : "check that the folder exists and is writable; %s is as it was", q);
        return -1;
    }
    *out = taas_none();
    return 0;
}

int taas_weights_copy_in(taas_call_ctx *cx, taas_value *model, const char *path) {
    char dir[PATH_MAX / 2], copy[PATH_MAX];
    if (taas_job_folder(cx, dir, sizeof dir)) return -1;
    snprintf(copy, sizeof copy, "%s/weights.safetensors", dir);
    if (taas_copy_file_atomic(path, copy) != 0) {
        char q[300];
        taas_error_set(cx->err, TAAS_ERR_IO, cx->pos, "cannot copy %s: %s",
                       taas_utf8_clip(q, sizeof q, path, strlen(path), 200), strerror(errno));
        taas_error_hint(cx->err, "the temporary folder ($TMPDIR or /tmp) must be writable with free space");
        rmdir(dir);
        return -1;
    }
    if (taas_weights_attach(model, copy, 1)) {
        unlink(copy);
        rmdir(dir);
        return taas_value_oom(cx->err, cx->pos, "loading the weights");
    }
    return 0;
}

/* What load() returns, as torch's load_state_dict: the keys the file lacks and those it has
 * that the model lacks (new references taken). NULL: out of memory, with err. */
static int load_result(taas_call_ctx *cx, json_t *missing, json_t *unexpected, taas_value **out) {
    json_t *d = missing && unexpected ? json_pack("{s:o, s:o}", "missing_keys", missing, "unexpected_keys", unexpected)
                                      : NULL;
    if (!d) {
        json_decref(missing);
        json_decref(unexpected);
    }
    *out = d ? taas_result_of_load(d) : NULL;
    return *out ? 0 : taas_value_oom(cx->err, cx->pos, "listing the keys load() matched");
}

/* strict=False: the merged file is written in a folder of the model's own, then attached. */
static int load_some(taas_call_ctx *cx, taas_value *model, const char *path, json_t *missing, json_t *unexpected) {
    char dir[PATH_MAX / 2], file[PATH_MAX];
    if (taas_job_folder(cx, dir, sizeof dir)) return -1;
    snprintf(file, sizeof file, "%s/weights.safetensors", dir);
    if (taas_model_load_some(model, path, file, missing, unexpected, cx->err)) {
        cx->err->pos = cx->pos;
        rmdir(dir);
        return -1;
    }
    if (taas_weights_attach(model, file, 1)) {
        unlink(file);
        rmdir(dir);
        return taas_value_oom(cx->err, cx->pos, "loading the weights");
    }
    return 0;
}

int taas_load_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    const char *path = a[0]->u.str.s;
    json_t *missing = json_array(), *unexpected = json_array();
    int rc;
    if (a[2]->u.b) {
        rc = taas_model_check_weights(a[1], path, cx->err);
        if (rc) cx->err->pos = cx->pos;
        /* a copy of the model's own: the user's file may change or go, and save() may write it */
        else rc = taas_weights_copy_in(cx, a[1], path);
    } else {
        rc = !missing || !unexpected ? taas_value_oom(cx->err, cx->pos, "loading the weights")
                                     : load_some(cx, a[1], path, missing, unexpected);
    }
    if (rc) {
        json_decref(missing);
        json_decref(unexpected);
        return -1;
    }
    return load_result(cx, missing, unexpected, out);
}
