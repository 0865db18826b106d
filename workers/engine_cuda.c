/* The CUDA engine's door: libtaas_cuda.so (workers/train/cuda/) is loaded when a rank is to
 * train on a GPU, so that taas-worker itself needs no CUDA library to start on a machine
 * without one. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

static const taas_srcpos NOPOS = {0, 0};

typedef int (*devices_fn)(void);
typedef taas_engine *(*engine_fn)(taas_model *m, const taas_job_loss *loss, const taas_optim_config *opt,
                                  int device, taas_collective *c, taas_error *err);

/* The plugin: $TAAS_CUDA_PLUGIN, else libtaas_cuda.so beside this executable, else the
 * library path's. NULL when there is none (a build without CUDA). */
static void *plugin(void) {
    static void *h;
    static int tried;
    if (tried) return h;
    tried = 1;
    const char *env = getenv("TAAS_CUDA_PLUGIN");
    if (env && *env) return h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    char self[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/libtaas_cuda.so", self);
            if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
            snprintf(path, sizeof path, "%s/../lib/libtaas_cuda.so", self);
            if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
        }
    }
    return h = dlopen("libtaas_cuda.so", RTLD_NOW | RTLD_LOCAL);
}

int taas_engine_cuda_devices(void) {
    void *h = plugin();
    devices_fn f = h ? (devices_fn)dlsym(h, "taas_cuda_devices") : NULL;
    return f ? f() : 0;
}

taas_engine *taas_engine_cuda(taas_model *m, const taas_job_loss *loss, const taas_optim_config *opt, int device,
                              taas_collective *c, taas_error *err) {
    void *h = plugin();
    engine_fn f = h ? (engine_fn)dlsym(h, "taas_cuda_engine_new") : NULL;
    if (!f) {
        taas_model_free(m);
        taas_error_set(err, "TaasDeviceError", NOPOS, "this taas-worker cannot train on a GPU: %s",
                       h ? "libtaas_cuda.so lacks taas_cuda_engine_new" : "libtaas_cuda.so is not installed");
        taas_error_hint(err, "build taas with CUDA (cmake -DTAAS_CUDA=ON, nvcc from /usr/local/cuda) and install "
                             "libtaas_cuda.so beside taas-worker");
        return NULL;
    }
    return f(m, loss, opt, device, c, err);
}
