/* The connection file Jupyter writes before it starts the kernel (kernel/protocol/
 * connection.h): JSON with the transport, address, ports and signing key. */
#include "connection.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    taas_error err;
    taas_error_clear(&err);
    taas_connection *c = taas_connection_parse((const char *)data, size, "kernel-fuzz.json", &err);
    if (!c) return 0;
    char ep[512];
    const int ports[] = {c->shell_port, c->iopub_port, c->stdin_port, c->control_port, c->hb_port};
    for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++) taas_connection_endpoint(c, ports[i], ep, sizeof ep);
    taas_connection_free(c);
    return 0;
}
