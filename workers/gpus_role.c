/* taas-worker gpus: the GPUs this machine gives a rank, for the kernel's plan. One JSON line
 * on stdout: {"count": N, "gpus": [{"index", "name", "memory_bytes"}, ...]}; {"count": 0,
 * "gpus": []} without the CUDA plugin, a driver or a GPU. */
#include <stdio.h>

#include "cuda/cuda_plugin.h"
#include "role.h"

int taas_role_gpus(int argc, char **argv) {
    static const taas_opt opts[] = {{NULL, 0, NULL}};
    taas_error err;
    taas_error_clear(&err);
    if (taas_cli_parse(argc, argv, opts, &err)) {
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_USAGE;
    }
    taas_cuda_device_info_fn info = (taas_cuda_device_info_fn)taas_cuda_plugin_sym("taas_cuda_device_info", NULL);
    int n = info ? taas_engine_cuda_devices() : 0;
    json_t *gpus = json_array();
    for (int i = 0; i < n; i++) {
        char name[256] = "";
        size_t mem = 0;
        if (info(i, name, sizeof name, &mem)) continue;  /* a device the driver cannot describe is not offered */
        json_array_append_new(gpus, json_pack("{s:i, s:o, s:I}", "index", i, "name", taas_cli_text(name),
                                              "memory_bytes", (json_int_t)mem));
    }
    json_t *out = json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(gpus), "gpus", gpus);
    int rc = taas_cli_print_json(stdout, out);
    json_decref(out);
    return rc ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
