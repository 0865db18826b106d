/* show(data, n=16, seed=None): a PNG grid of samples with their labels. The cell waits, as
 * sleep() does, but on `taas-worker show`: the kernel polls the worker's stdout and resumes
 * the cell when it is readable; the stop button kills the worker (its whole process group)
 * and ends the cell with KeyboardInterrupt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"
#include "dataview.h"
#include "errnames.h"
#include "rows.h"
#include "utf8.h"
#include "worker.h"

/* A grid of 256 cells of at most 160 px is well under this. */
#define MAX_PNG ((size_t)64 << 20)

typedef struct show_wait {
    taas_waiter base;
    taas_child *child;
    char name[64];       /* the dataset's type, for messages */
    double timeout;
} show_wait;

static char *base64(const unsigned char *p, size_t n) {
    size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *out = malloc(len);
    if (out) sodium_bin2base64(out, len, p, n, sodium_base64_VARIANT_ORIGINAL);
    return out;
}

static void show_free(taas_waiter *w) {
    show_wait *s = (show_wait *)w;
    taas_child_free(s->child);
    free(s);
}

/* The worker is done: its PNG and the text fallback from its sidecar line. */
static int show_output(show_wait *s, const taas_io *io, taas_error *err) {
    if (taas_child_finish(s->child, err)) return -1;
    const taas_buf *png = taas_child_output(s->child);
    static const unsigned char SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    char *line = taas_child_last_line(s->child);
    json_t *side = line ? json_loads(line, 0, NULL) : NULL;
    const char *text = json_string_value(json_object_get(side, "text"));
    if (png->len < sizeof SIG || memcmp(png->data, SIG, sizeof SIG) != 0 || !text) {
        char q[200];
        taas_utf8_clip(q, sizeof q, line ? line : "", line ? strlen(line) : 0, 120);
        taas_error_set(err, TAAS_ERR_WORKER, (taas_srcpos){0, 0},
                       "taas-worker show ended without a PNG and its description (it wrote %zu bytes; "
                       "stderr: %s)", png->len, q);
        taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
        json_decref(side);
        free(line);
        return -1;
    }
    char *b64 = base64((const unsigned char *)png->data, png->len);
    if (!b64) {
        json_decref(side);
        free(line);
        return taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0}, "out of memory for show()'s picture");
    }
    json_t *data = json_object();
    json_object_set_new(data, "image/png", json_string(b64));
    json_object_set_new(data, "text/plain", json_string(text));
    free(b64);
    json_decref(side);
    free(line);
    if (io && io->display) io->display(io->ctx, data, json_object(), NULL, 0);
    else json_decref(data);
    return 0;
}

static int show_poll(taas_waiter *w, const taas_io *io, int expired, taas_error *err) {
    show_wait *s = (show_wait *)w;
    int r = taas_child_pump(s->child, MAX_PNG, err);
    if (r < 0) return -1;
    if (r == 1) return show_output(s, io, err);
    s->base.fd = taas_child_fd(s->child);
    if (!expired) return 1;
    taas_error_set(err, TAAS_ERR_TIMEOUT, (taas_srcpos){0, 0},
                   "show() of %s took longer than %g s: taas-worker show was stopped", s->name, s->timeout);
    taas_error_hint(err, "the dataset's storage may be slow or unreachable: check the path or URL; for slow "
                         "storage raise TAAS_SHOW_TIMEOUT (seconds) in the kernel's environment");
    return -1;
}

int taas_show_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (taas_data_dataset_of(a[0])) return 0;
    taas_error_set(err, TAAS_ERR_TYPE, w[0], "show() needs a dataset or a DataLoader, not %s",
                   taas_value_type_name(a[0]));
    taas_sig_hint(err, &r->b, "e.g. show(FashionMNIST(train=False), n=16)");
    return -1;
}

int taas_show_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (!cx->interp) {
        taas_error_set(cx->err, TAAS_ERR_INTERNAL, cx->pos, "show() needs the session, which is not there");
        taas_error_hint(cx->err, "this is a bug in taas; please report it");
        return -1;
    }
    const taas_value *ds = taas_data_dataset_of(a[0]);
    taas_walk w;
    taas_walk_begin(&w, "writing the dataset's spec", cx->err);
    json_t *spec = taas_value_spec_walk(ds, &w);
    if (!spec) {
        cx->err->pos = cx->pos;
        return -1;
    }
    char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(spec);
    char n[32], seed[32];
    snprintf(n, sizeof n, "%lld", (long long)a[1]->u.i);
    const char *args[] = {"--spec", "-", "--n", n, NULL, NULL, NULL};
    if (a[2]->type == TAAS_V_INT) {
        snprintf(seed, sizeof seed, "%lld", (long long)a[2]->u.i);
        args[4] = "--seed";
        args[5] = seed;
    }
    show_wait *s = calloc(1, sizeof *s);
    if (!text || !s) {
        free(text);
        free(s);
        return taas_error_set(cx->err, TAAS_ERR_MEMORY, cx->pos, "out of memory in show()");
    }
    s->child = taas_child_start("show", args, text, strlen(text), cx->err);
    free(text);
    if (!s->child) {
        free(s);
        cx->err->pos = cx->pos;
        return -1;
    }
    snprintf(s->name, sizeof s->name, "%s", ds->u.obj.def->name);
    s->timeout = taas_worker_timeout("TAAS_SHOW_TIMEOUT", TAAS_SHOW_TIMEOUT_S);
    s->base.fd = taas_child_fd(s->child);
    s->base.poll = show_poll;
    s->base.free = show_free;
    taas_interp_wait_on(cx->interp, &s->base);
    cx->wait_until = taas_now() + s->timeout;
    *out = taas_none();
    return 0;
}
