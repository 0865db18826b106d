/* What libtaas_cuda.so exports, and how taas-worker finds it. The plugin defines these
 * symbols (cu_device.c, cu_engine.c); engine_cuda.c loads the library with dlopen, so that
 * taas-worker starts on a machine without CUDA libraries, and looks them up by name. Both
 * sides include this header, so a signature that changes on one side fails to compile. */
#ifndef TAAS_CUDA_PLUGIN_H
#define TAAS_CUDA_PLUGIN_H

#include <stddef.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPUs this process can use: 0 without a driver or a device. */
int taas_cuda_devices(void);
/* GPU `index`'s name (NUL-terminated in cap bytes) and memory; 0, or -1 when it cannot be
 * asked. */
int taas_cuda_device_info(int index, char *name, size_t cap, size_t *memory_bytes);
/* The CUDA engine (engine.h's taas_engine_cuda, which calls this and frees m after the
 * engine). m is borrowed, so that the plugin links none of the CPU core's arithmetic (it
 * would bring OpenBLAS and OpenMP): it must outlive the engine. */
taas_engine *taas_cuda_engine_new(taas_model *m, const taas_train_loss *loss, const taas_optim_config *opt,
                                  int device, taas_precision precision, taas_collective *c, taas_error *err);

typedef int (*taas_cuda_devices_fn)(void);
typedef int (*taas_cuda_device_info_fn)(int index, char *name, size_t cap, size_t *memory_bytes);
typedef taas_engine *(*taas_cuda_engine_new_fn)(taas_model *m, const taas_train_loss *loss,
                                                const taas_optim_config *opt, int device, taas_precision precision,
                                                taas_collective *c, taas_error *err);

/* engine_cuda.c: the plugin's symbol `name`, loading the plugin on first use from
 * $TAAS_CUDA_PLUGIN, else beside the executable (the build tree: build/kernel/), else
 * TAAS_CUDA_PLUGIN_RELDIR from it (an installed tree: ../lib), else the library path. NULL
 * when there is no plugin or no such symbol; *why (when why is not NULL) then says which,
 * with dlopen's message. */
void *taas_cuda_plugin_sym(const char *name, const char **why);

#ifdef __cplusplus
}
#endif

#endif
