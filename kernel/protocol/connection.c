#include "connection.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "utf8.h"

#define ENAME TAAS_ERR_CONNECTION
/* Connection files are a few hundred bytes; anything this large is not one. */
#define MAX_FILE_BYTES (1 << 20)

static const char HINT_FORMAT[] =
    "a connection file is a JSON object written by Jupyter, e.g. {\"transport\": \"tcp\", "
    "\"ip\": \"127.0.0.1\", \"shell_port\": 53794, \"iopub_port\": 53795, \"stdin_port\": "
    "53796, \"control_port\": 53797, \"hb_port\": 53798, \"key\": \"...\", "
    "\"signature_scheme\": \"hmac-sha256\"}";

/* Printable form of a user-supplied string for a message: valid UTF-8, bounded. */
static void quote(char *out, size_t n, const char *s) {
    char *clean = taas_utf8_sanitize(s, strlen(s), NULL);
    snprintf(out, n, "%.80s%s", clean ? clean : "?", (clean && strlen(clean) > 80) ? "..." : "");
    free(clean);
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static int get_port(json_t *root, const char *name, const char *origin, int *out,
                    taas_error *err) {
    json_t *v = json_object_get(root, name);
    if (!v) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "connection file '%s' has no \"%s\"", origin, name);
        taas_error_hint(err, "%s", HINT_FORMAT);
        return -1;
    }
    if (!json_is_integer(v)) {
        taas_error_set(err, ENAME, TAAS_NOPOS,
                       "\"%s\" in connection file '%s' is %s; it must be a port number", name,
                       origin, json_kind(v));
        taas_error_hint(err, "write the port as a JSON integer from 1 to 65535, e.g. \"%s\": 53794",
                        name);
        return -1;
    }
    json_int_t p = json_integer_value(v);
    if (p < 1 || p > 65535) {
        taas_error_set(err, ENAME, TAAS_NOPOS,
                       "\"%s\" in connection file '%s' is %lld, which is not a port number",
                       name, origin, (long long)p);
        taas_error_hint(err, "use a port from 1 to 65535 (taas-kernel does not pick random "
                             "ports: Jupyter chooses them when it writes the file)");
        return -1;
    }
    *out = (int)p;
    return 0;
}

/* Optional string field: absent leaves *out as is; present must be a string. */
static int get_string(json_t *root, const char *name, const char *origin, const char **out,
                      size_t *len, taas_error *err) {
    json_t *v = json_object_get(root, name);
    if (!v) return 0;
    if (!json_is_string(v)) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "\"%s\" in connection file '%s' is %s; it must be a string",
                       name, origin, json_kind(v));
        taas_error_hint(err, "%s", HINT_FORMAT);
        return -1;
    }
    *out = json_string_value(v);
    if (len) *len = json_string_length(v);
    return 0;
}

static int check_fields(json_t *root, const char *origin, taas_connection *c, taas_error *err) {
    const char *transport = "tcp", *ip = "127.0.0.1", *key = "", *scheme = "hmac-sha256";
    size_t key_len = 0;
    char q[128];

    if (get_string(root, "transport", origin, &transport, NULL, err) ||
        get_string(root, "ip", origin, &ip, NULL, err) ||
        get_string(root, "key", origin, &key, &key_len, err) ||
        get_string(root, "signature_scheme", origin, &scheme, NULL, err))
        return -1;

    if (strcmp(transport, "tcp") != 0 && strcmp(transport, "ipc") != 0) {
        quote(q, sizeof q, transport);
        taas_error_set(err, ENAME, TAAS_NOPOS,
                       "transport \"%s\" in connection file '%s' is not supported", q, origin);
        taas_error_hint(err, "use \"transport\": \"tcp\" (the default) or \"ipc\"");
        return -1;
    }
    if (ip[0] == '\0' || strlen(ip) >= sizeof c->ip) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "\"ip\" in connection file '%s' is %s", origin,
                       ip[0] ? "too long" : "empty");
        taas_error_hint(err, "give the address to listen on, e.g. \"ip\": \"127.0.0.1\"");
        return -1;
    }
    /* Jupyter's "hmac-sha256" is the only scheme we verify; accepting another one would
     * mean accepting messages we cannot authenticate. */
    if (strcmp(scheme, "hmac-sha256") != 0) {
        quote(q, sizeof q, scheme);
        taas_error_set(err, ENAME, TAAS_NOPOS,
                       "signature_scheme \"%s\" in connection file '%s' is not supported: "
                       "taas-kernel signs and verifies messages with hmac-sha256 only",
                       q, origin);
        taas_error_hint(err, "set \"signature_scheme\": \"hmac-sha256\" (jupyter_client's "
                             "default), or an empty \"key\" to turn signing off");
        return -1;
    }

    static const char *const names[5] = {"shell_port", "iopub_port", "stdin_port",
                                         "control_port", "hb_port"};
    int *ports[5] = {&c->shell_port, &c->iopub_port, &c->stdin_port, &c->control_port,
                     &c->hb_port};
    for (int i = 0; i < 5; i++)
        if (get_port(root, names[i], origin, ports[i], err)) return -1;
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (*ports[i] == *ports[j]) {
                taas_error_set(err, ENAME, TAAS_NOPOS,
                               "\"%s\" and \"%s\" in connection file '%s' are both %d",
                               names[i], names[j], origin, *ports[i]);
                taas_error_hint(err, "every channel needs a port of its own");
                return -1;
            }

    snprintf(c->transport, sizeof c->transport, "%s", transport);
    snprintf(c->ip, sizeof c->ip, "%s", ip);
    snprintf(c->signature_scheme, sizeof c->signature_scheme, "%s", scheme);
    c->key = malloc(key_len + 1);
    if (!c->key) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "out of memory reading connection file '%s'", origin);
        return -1;
    }
    memcpy(c->key, key, key_len);
    c->key[key_len] = '\0';
    c->key_len = key_len;
    return 0;
}

taas_connection *taas_connection_parse(const char *text, size_t len, const char *origin,
                                       taas_error *err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root) {
        char why[sizeof jerr.text];
        quote(why, sizeof why, jerr.text);
        taas_error_set(err, ENAME, TAAS_NOPOS,
                       "connection file '%s' is not valid JSON: %s (line %d, column %d)", origin,
                       why, jerr.line, jerr.column);
        taas_error_hint(err, "%s", HINT_FORMAT);
        return NULL;
    }
    if (!json_is_object(root)) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "connection file '%s' holds %s, not a JSON object",
                       origin, json_kind(root));
        taas_error_hint(err, "%s", HINT_FORMAT);
        json_decref(root);
        return NULL;
    }
    taas_connection *c = calloc(1, sizeof *c);
    if (!c) {
        json_decref(root);
        taas_error_set(err, ENAME, TAAS_NOPOS, "out of memory reading connection file '%s'", origin);
        return NULL;
    }
    int rc = check_fields(root, origin, c, err);
    json_decref(root);
    if (rc) {
        taas_connection_free(c);
        return NULL;
    }
    return c;
}

taas_connection *taas_connection_load(const char *path, taas_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        taas_error_set(err, ENAME, TAAS_NOPOS, "cannot read connection file '%s': %s", path,
                       strerror(e));
        taas_error_hint(err, "start the kernel through Jupyter (e.g. jupyter console "
                             "--kernel taas), which writes this file and passes it with -f");
        return NULL;
    }
    char *text = malloc(MAX_FILE_BYTES + 1);
    errno = 0;
    size_t n = text ? fread(text, 1, MAX_FILE_BYTES + 1, f) : 0;
    int rerr = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (!text || rerr) {
        free(text);
        taas_error_set(err, ENAME, TAAS_NOPOS, "cannot read connection file '%s': %s", path,
                       text ? strerror(rerr) : "out of memory");
        taas_error_hint(err, "pass the path of the connection file Jupyter wrote (a regular "
                             "file), with -f");
        return NULL;
    }
    if (n > MAX_FILE_BYTES) {
        free(text);
        taas_error_set(err, ENAME, TAAS_NOPOS,
                       "connection file '%s' is larger than 1 MiB, so it is not a connection file",
                       path);
        taas_error_hint(err, "%s", HINT_FORMAT);
        return NULL;
    }
    taas_connection *c = taas_connection_parse(text, n, path, err);
    free(text);
    return c;
}

void taas_connection_free(taas_connection *c) {
    if (!c) return;
    if (c->key) {
        /* the key authenticates every message; do not leave it in freed memory */
        memset(c->key, 0, c->key_len);
        free(c->key);
    }
    free(c);
}

int taas_connection_endpoint(const taas_connection *c, int port, char *out, size_t n) {
    int w;
    if (strcmp(c->transport, "ipc") == 0)
        w = snprintf(out, n, "ipc://%s-%d", c->ip, port);
    else if (strchr(c->ip, ':') && c->ip[0] != '[')
        w = snprintf(out, n, "tcp://[%s]:%d", c->ip, port); /* IPv6 literal */
    else
        w = snprintf(out, n, "tcp://%s:%d", c->ip, port);
    return (w < 0 || (size_t)w >= n) ? -1 : 0;
}
