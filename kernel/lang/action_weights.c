/* save() and load(): a model's weights are a safetensors file the kernel only names. save
 * copies it; load checks the file's header against the model's state_dict table (every key,
 * dtype and shape; modelview.c) and attaches the file. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "interp.h"
#include "modelview.h"
#include "utf8.h"

int taas_fit_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (taas_value_is(a[0], "Sequential")) return 0;
    taas_error_set(err, "TaasTypeError", w[0], "%s() trains and evaluates a Sequential, not %s", r->b.name,
                   taas_value_type_name(a[0]));
    taas_sig_hint(err, &r->b, "put the layers in a Sequential: net = Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))");
    return -1;
}

int taas_need_weights(taas_call_ctx *cx, const taas_value *model) {
    if (model->u.obj.weights) return 0;
    const char *name = cx->interp ? taas_interp_name_of(cx->interp, model) : NULL;
    taas_error_set(cx->err, "TaasValueError", cx->pos, "%s has no trained weights yet: fit it first, or load weights",
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
    char q[300];
    FILE *in = fopen(src, "rb");
    FILE *o = in ? fopen(dst, "wb") : NULL;
    if (!in || !o) {
        taas_error_set(cx->err, "OSError", cx->pos, "save() cannot %s %s: %s", in ? "write" : "read",
                       taas_utf8_clip(q, sizeof q, in ? dst : src, strlen(in ? dst : src), 200), strerror(errno));
        taas_error_hint(cx->err, in ? "check that the folder exists and is writable"
                                    : "the trained weights were removed from the temporary folder: fit again");
        if (in) fclose(in);
        return -1;
    }
    char buf[65536];
    size_t n;
    int bad = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, o) != n) bad = 1;
    if (ferror(in)) bad = 1;
    fclose(in);
    if (fclose(o) != 0) bad = 1;
    if (bad) {
        taas_error_set(cx->err, "OSError", cx->pos, "save() could not write all of %s",
                       taas_utf8_clip(q, sizeof q, dst, strlen(dst), 200));
        taas_error_hint(cx->err, "the disk may be full");
        return -1;
    }
    *out = taas_none();
    return 0;
}

int taas_load_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    const char *path = a[0]->u.str.s;
    if (taas_model_check_weights(a[1], path, cx->err)) {
        cx->err->pos = cx->pos;
        return -1;
    }
    char *abs = realpath(path, NULL);
    if (!abs) {
        taas_error_set(cx->err, "OSError", cx->pos, "load() cannot resolve the path: %s", strerror(errno));
        taas_error_hint(cx->err, "give a path to an existing file");
        return -1;
    }
    taas_weights_replace(a[1], abs);
    *out = taas_none();
    return 0;
}
