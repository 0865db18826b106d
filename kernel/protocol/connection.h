/* The connection file Jupyter writes before it starts a kernel (jupyter_client's
 * write_connection_file): transport, ip, the five ports, the signing key and scheme. */
#ifndef TAAS_CONNECTION_H
#define TAAS_CONNECTION_H

#include <stddef.h>

#include "error.h"

typedef struct taas_connection {
    char transport[8];          /* "tcp" (default) or "ipc" */
    char ip[256];               /* "127.0.0.1" (default); for ipc, the socket path prefix */
    int shell_port;
    int iopub_port;
    int stdin_port;
    int control_port;
    int hb_port;
    char *key;                  /* HMAC key bytes, NUL-terminated; "" = messages are not signed */
    size_t key_len;
    char signature_scheme[32];  /* always "hmac-sha256" once loaded */
} taas_connection;

/* Reads and checks the file at path. NULL with a TaasConnectionError naming the file
 * when it cannot be read, is not a JSON object, lacks a port, has a bad value, or asks
 * for a signature scheme other than hmac-sha256. */
taas_connection *taas_connection_load(const char *path, taas_error *err);

/* The same checks on text already in memory; origin names it in messages. */
taas_connection *taas_connection_parse(const char *text, size_t len, const char *origin,
                                       taas_error *err);

void taas_connection_free(taas_connection *c);

/* The ZeroMQ endpoint for one of c's ports: "tcp://127.0.0.1:5555", or for ipc
 * "ipc://<ip>-5555" as jupyter_client names them. -1 when out is too small. */
int taas_connection_endpoint(const taas_connection *c, int port, char *out, size_t n);

#endif
