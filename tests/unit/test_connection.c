/* kernel/protocol/connection: the connection file, and every way it can be wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connection.h"

static const char GOOD[] =
    "{\"shell_port\": 53794, \"iopub_port\": 53795, \"stdin_port\": 53796, "
    "\"control_port\": 53797, \"hb_port\": 53798, \"ip\": \"127.0.0.1\", "
    "\"key\": \"a0436f6c-1916-498b-8eb9-e81ab9368e84\", \"transport\": \"tcp\", "
    "\"signature_scheme\": \"hmac-sha256\", \"kernel_name\": \"taas\"}";

/* Writes text to a temporary file; returns its path (static buffer). */
static const char *temp_file(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/taas-test-conn-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_load_good_file(void **state) {
    (void)state;
    const char *path = temp_file(GOOD);
    taas_error err;
    taas_error_clear(&err);
    taas_connection *c = taas_connection_load(path, &err);
    unlink(path);
    assert_non_null(c);
    assert_string_equal(c->transport, "tcp");
    assert_string_equal(c->ip, "127.0.0.1");
    assert_int_equal(c->shell_port, 53794);
    assert_int_equal(c->iopub_port, 53795);
    assert_int_equal(c->stdin_port, 53796);
    assert_int_equal(c->control_port, 53797);
    assert_int_equal(c->hb_port, 53798);
    assert_string_equal(c->key, "a0436f6c-1916-498b-8eb9-e81ab9368e84");
    assert_int_equal(c->key_len, 36);
    assert_string_equal(c->signature_scheme, "hmac-sha256");
    char ep[64];
    assert_int_equal(taas_connection_endpoint(c, c->hb_port, ep, sizeof ep), 0);
    assert_string_equal(ep, "tcp://127.0.0.1:53798");
    assert_int_equal(taas_connection_endpoint(c, c->hb_port, ep, 10), -1);
    taas_connection_free(c);
}

/* transport, ip, key and signature_scheme may be left out, as jupyter_client allows. */
static void test_defaults_and_endpoints(void **state) {
    (void)state;
    const char *text = "{\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, "
                       "\"control_port\": 4, \"hb_port\": 65535}";
    taas_error err;
    taas_connection *c = taas_connection_parse(text, strlen(text), "t.json", &err);
    assert_non_null(c);
    assert_string_equal(c->transport, "tcp");
    assert_string_equal(c->ip, "127.0.0.1");
    assert_string_equal(c->key, "");
    assert_int_equal(c->key_len, 0);
    assert_string_equal(c->signature_scheme, "hmac-sha256");
    taas_connection_free(c);

    char ep[128];
    text = "{\"transport\": \"ipc\", \"ip\": \"/tmp/kernel-1\", \"shell_port\": 1, "
           "\"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4, \"hb_port\": 5}";
    c = taas_connection_parse(text, strlen(text), "t.json", &err);
    assert_non_null(c);
    taas_connection_endpoint(c, c->iopub_port, ep, sizeof ep);
    assert_string_equal(ep, "ipc:///tmp/kernel-1-2");
    taas_connection_free(c);

    text = "{\"ip\": \"::1\", \"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, "
           "\"control_port\": 4, \"hb_port\": 5}";
    c = taas_connection_parse(text, strlen(text), "t.json", &err);
    assert_non_null(c);
    taas_connection_endpoint(c, c->shell_port, ep, sizeof ep);
    assert_string_equal(ep, "tcp://[::1]:1");
    taas_connection_free(c);
}

static void expect_error(const char *text, const char *msg1, const char *msg2, const char *hint) {
    taas_error err;
    taas_error_clear(&err);
    taas_connection *c = taas_connection_parse(text, strlen(text), "/run/k.json", &err);
    assert_null(c);
    assert_string_equal(err.ename, "TaasConnectionError");
    if (!strstr(err.message, msg1)) fail_msg("'%s' does not say '%s'", err.message, msg1);
    if (msg2 && !strstr(err.message, msg2)) fail_msg("'%s' does not say '%s'", err.message, msg2);
    assert_non_null(strstr(err.message, "/run/k.json"));   /* names the file */
    if (!strstr(err.hint, hint)) fail_msg("hint '%s' does not say '%s'", err.hint, hint);
}

#define PORTS "\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4"

static void test_every_error(void **state) {
    (void)state;
    expect_error("{\"shell_port\": 1,", "is not valid JSON", "line 1", "JSON object");
    expect_error("", "is not valid JSON", NULL, "JSON object");
    expect_error("[1, 2]", "holds an array, not a JSON object", NULL, "JSON object");
    expect_error("{" PORTS "}", "has no \"hb_port\"", NULL, "\"hb_port\"");
    expect_error("{" PORTS ", \"hb_port\": \"5\"}", "\"hb_port\"",
                 "is a string; it must be a port number", "JSON integer from 1 to 65535");
    expect_error("{" PORTS ", \"hb_port\": 5.5}", "is a number with a fraction", NULL,
                 "JSON integer");
    expect_error("{" PORTS ", \"hb_port\": 0}", "\"hb_port\"", "is 0, which is not a port number",
                 "1 to 65535");
    expect_error("{" PORTS ", \"hb_port\": 70000}", "is 70000, which is not a port number",
                 NULL, "1 to 65535");
    expect_error("{" PORTS ", \"hb_port\": 2}", "\"iopub_port\" and \"hb_port\"", "are both 2",
                 "port of its own");
    expect_error("{" PORTS ", \"hb_port\": 5, \"transport\": \"udp\"}",
                 "transport \"udp\"", "is not supported", "\"tcp\"");
    expect_error("{" PORTS ", \"hb_port\": 5, \"ip\": \"\"}", "\"ip\"", "is empty",
                 "127.0.0.1");
    expect_error("{" PORTS ", \"hb_port\": 5, \"ip\": 127}", "\"ip\"",
                 "is an integer; it must be a string", "JSON object");
    expect_error("{" PORTS ", \"hb_port\": 5, \"key\": null}", "\"key\"",
                 "is null; it must be a string", "JSON object");
    expect_error("{" PORTS ", \"hb_port\": 5, \"key\": \"k\", \"signature_scheme\": "
                 "\"hmac-md5\"}",
                 "signature_scheme \"hmac-md5\"",
                 "not supported: taas-kernel signs and verifies messages with hmac-sha256 only",
                 "\"signature_scheme\": \"hmac-sha256\"");
    expect_error("{" PORTS ", \"hb_port\": 5, \"signature_scheme\": \"\"}",
                 "signature_scheme \"\"", "not supported", "hmac-sha256");
}

static void test_unreadable_files(void **state) {
    (void)state;
    taas_error err;
    taas_error_clear(&err);
    assert_null(taas_connection_load("/nonexistent/kernel-1.json", &err));
    assert_string_equal(err.ename, "TaasConnectionError");
    assert_string_equal(err.message,
                        "cannot read connection file '/nonexistent/kernel-1.json': No such file "
                        "or directory");
    assert_non_null(strstr(err.hint, "-f"));
    /* a directory is not a connection file */
    taas_error_clear(&err);
    assert_null(taas_connection_load("/tmp", &err));
    assert_string_equal(err.message, "cannot read connection file '/tmp': Is a directory");
    /* garbled */
    const char *path = temp_file("\x01\x02garbage\xff");
    taas_error_clear(&err);
    assert_null(taas_connection_load(path, &err));
    unlink(path);
    assert_non_null(strstr(err.message, "is not valid JSON"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_good_file),
        cmocka_unit_test(test_defaults_and_endpoints),
        cmocka_unit_test(test_every_error),
        cmocka_unit_test(test_unreadable_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
