/* The CUDA engine's door: libtaas_cuda.so (workers/train/cuda/) is loaded when a rank is to
 * train on a GPU, so that taas-worker itself needs no CUDA library to start on a machine
 * without one. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_plugin.h"
#include "engine.h"
#include "errnames.h"

/* Where an installed plugin lies relative to taas-worker: CMake gives the path from the
 * install's bin directory to its lib directory. */
#ifndef TAAS_CUDA_PLUGIN_RELDIR
#define TAAS_CUDA_PLUGIN_RELDIR "../lib"
#endif

static void *g_handle;
static int g_tried;
static char g_why[512];

static void *try_open(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h && !g_why[0]) {
        /* the first failure is the telling one: beside the executable is where a build puts it */
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "%s", e ? e : "dlopen failed");
    }
    return h;
}

/* A plugin that is there but does not load (a CUDA library missing) is said once on stderr:
 * the rank then trains on the CPU, and the user should know why. */
static void *open_present(const char *path) {
    void *h = try_open(path);
    if (!h) fprintf(stderr, "taas-worker: the CUDA plugin %s does not load (%s); training on the CPU\n", path, g_why);
    return h;
}

/* The plugin, loaded once: $TAAS_CUDA_PLUGIN, else beside this executable, else the
 * installed lib directory, else the library path. NULL when there is none. */
static void *plugin(void) {
    if (g_tried) return g_handle;
    g_tried = 1;
    const char *env = getenv("TAAS_CUDA_PLUGIN");
    if (env && *env) return g_handle = open_present(env);
    char self[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/libtaas_cuda.so", self);
            if (access(path, F_OK) == 0) return g_handle = open_present(path);
            snprintf(path, sizeof path, "%s/" TAAS_CUDA_PLUGIN_RELDIR "/libtaas_cuda.so", self);
            if (access(path, F_OK) == 0) return g_handle = open_present(path);
        }
    }
    g_handle = try_open("libtaas_cuda.so");
    if (!g_handle) snprintf(g_why, sizeof g_why, "libtaas_cuda.so is not installed (a build without CUDA)");
    return g_handle;
}

void *taas_cuda_plugin_sym(const char *name, const char **why) {
    void *h = plugin();
    void *f = h ? dlsym(h, name) : NULL;
    if (!f && h) snprintf(g_why, sizeof g_why, "libtaas_cuda.so lacks %s (a plugin of another build?)", name);
    if (why) *why = f ? NULL : g_why;
    return f;
}

int taas_engine_cuda_devices(void) {
    taas_cuda_devices_fn f = (taas_cuda_devices_fn)taas_cuda_plugin_sym("taas_cuda_devices", NULL);
    return f ? f() : 0;
}

/* The plugin's engine borrows the host model (cuda_plugin.h): this door owns it, passes
 * every op through, and frees the model after the engine. */
typedef struct cuda_door {
    taas_engine base;
    taas_engine *inner;
    taas_model *m;
} cuda_door;

static taas_engine *inner(taas_engine *e) {
    return ((cuda_door *)e)->inner;
}

/* The extras are set on the door, the engine its user holds: the plugin's must see them. */
static int door_compute(taas_engine *e, const taas_batch *b, taas_engine_next_fn next, void *next_ctx, uint64_t step,
                        float *loss, taas_error *err) {
    inner(e)->x = e->x;
    return inner(e)->ops->compute(inner(e), b, next, next_ctx, step, loss, err);
}

static int door_update(taas_engine *e, float w, taas_collective *c, const taas_optim_config *opt, long step,
                       taas_error *err) {
    inner(e)->x = e->x;
    return inner(e)->ops->update(inner(e), w, c, opt, step, err);
}

static int door_eval(taas_engine *e, const taas_batch *b, double *loss_sum, double *right, taas_error *err) {
    return inner(e)->ops->eval(inner(e), b, loss_sum, right, err);
}

static int door_share_stats(taas_engine *e, taas_collective *c, taas_error *err) {
    return inner(e)->ops->share_stats(inner(e), c, err);
}

static int door_save(taas_engine *e, const char *path, taas_error *err) {
    return inner(e)->ops->save(inner(e), path, err);
}

static int door_checkpoint(taas_engine *e, const char *path, const json_t *meta, taas_error *err) {
    return inner(e)->ops->checkpoint(inner(e), path, meta, err);
}

static int door_restore(taas_engine *e, const char *path, json_t **meta, taas_error *err) {
    return inner(e)->ops->restore(inner(e), path, meta, err);
}

static taas_model *door_host_model(taas_engine *e, taas_error *err) {
    return inner(e)->ops->host_model(inner(e), err);
}

static void door_free(taas_engine *e) {
    if (!e) return;
    cuda_door *d = (cuda_door *)e;
    d->inner->ops->free(d->inner);
    taas_model_free(d->m);
    free(d);
}

static const taas_engine_ops DOOR_OPS = {door_compute, door_update,  door_eval,       door_share_stats, door_save,
                                         door_checkpoint, door_restore, door_host_model, door_free};

taas_engine *taas_engine_cuda(taas_model *m, const taas_train_loss *loss, const taas_optim_config *opt, int device,
                              taas_precision precision, taas_collective *c, taas_error *err) {
    const char *why;
    taas_cuda_engine_new_fn f = (taas_cuda_engine_new_fn)taas_cuda_plugin_sym("taas_cuda_engine_new", &why);
    cuda_door *d = f ? calloc(1, sizeof *d) : NULL;
    if (!f) {
        taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "this taas-worker cannot train on a GPU: %s", why);
        taas_error_hint(err, "build taas with CUDA (cmake -DTAAS_CUDA=ON, nvcc from /usr/local/cuda) and install "
                             "libtaas_cuda.so beside taas-worker, or set TAAS_CUDA_PLUGIN to its path");
    } else if (!d) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the CUDA engine");
    } else if ((d->inner = f(m, loss, opt, device, precision, c, err))) {
        d->base = *d->inner;  /* its name and size */
        d->base.ops = &DOOR_OPS;
        d->m = m;
        return &d->base;
    }
    free(d);
    taas_model_free(m);
    return NULL;
}
