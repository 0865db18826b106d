/* A Hugging Face config.json as GPT2LMHeadModel.from_pretrained reads it
 * (kernel/lang/action_pretrained.c): any text gives a GPT2Config whose sizes passed the
 * row's checks (n_embd a multiple of n_head, every size in range), or an error with a
 * message; never both, never neither. */
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    taas_value *config = NULL;
    taas_error e;
    taas_error_clear(&e);
    int rc = taas_gpt2_config_from_json((const char *)data, size, "config.json", &config, &e);
    if (rc == 0) {
        if (!config || taas_value_kind(config) != TAAS_K_CONFIG) abort();
        const taas_value *embd = taas_object_arg(config, "n_embd"), *head = taas_object_arg(config, "n_head");
        if (embd->type != TAAS_V_INT || head->type != TAAS_V_INT || head->u.i < 1 || embd->u.i % head->u.i) abort();
        taas_unref(config);
    } else if (config || !e.message[0]) {
        abort();
    }
    return 0;
}
