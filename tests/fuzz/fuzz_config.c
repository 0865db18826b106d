/* The configuration file ($TAAS_CONFIG): its JSON root (taas_cfile_load), the machine
 * configurations read from it (taas_config_list, taas_config_find) and its "cluster"
 * section (taas_cluster_load) — each reads the file anew, as a cell does. */
#include <stdlib.h>

#include "cluster.h"
#include "config_file.h"
#include "fuzz_util.h"
#include "pragma.h"

static const char *path;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    path = fz_path("config.json");
    setenv("TAAS_CONFIG", path, 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_write("config.json", data, size);
    taas_error err;
    taas_error_clear(&err);
    json_t *root = NULL;
    if (taas_cfile_load(path, &root, &err) == 0) json_decref(root);

    taas_machine_config *list = NULL;
    size_t n = 0;
    taas_error_clear(&err);
    int rc = taas_config_list(&list, &n, &err);
    fz_say("configurations: %s", rc ? err.message : "listed");
    if (rc == 0) {
        /* every configuration the list names can be found by its name */
        for (size_t i = 0; i < n && i < 64; i++) {
            taas_machine_config c;
            taas_error_clear(&err);
            if (taas_config_find(list[i].name, &c, &err) != 0) abort();
        }
        free(list);
    }
    taas_machine_config c;
    taas_error_clear(&err);
    taas_config_find("g4.4", &c, &err);

    taas_cluster cl;
    taas_error_clear(&err);
    rc = taas_cluster_load(&cl, &err);
    fz_say("cluster: %s", rc ? err.message : cl.backend);
    if (rc == 0) taas_cluster_free(&cl);
    return 0;
}
