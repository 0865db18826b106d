/* kernel/protocol/heartbeat: echoes on its own thread, refuses a taken endpoint, stops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <zmq.h>

#include "heartbeat.h"

static void test_echo_and_stop(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    taas_error err;
    taas_error_clear(&err);
    taas_heartbeat *hb = taas_heartbeat_new(ctx, "inproc://test-hb", &err);
    assert_non_null(hb);
    void *req = zmq_socket(ctx, ZMQ_REQ);
    int zero = 0, timeout = 2000;
    zmq_setsockopt(req, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(req, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    assert_int_equal(zmq_connect(req, "inproc://test-hb"), 0);
    char buf[32];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zmq_send(req, "ping", 4, 0), 4);
        assert_int_equal(zmq_recv(req, buf, sizeof buf, 0), 4);
        assert_memory_equal(buf, "ping", 4);
    }
    /* every part of a multipart request comes back */
    zmq_send(req, "a", 1, ZMQ_SNDMORE);
    zmq_send(req, "bc", 2, 0);
    assert_int_equal(zmq_recv(req, buf, sizeof buf, 0), 1);
    int more;
    size_t sz = sizeof more;
    zmq_getsockopt(req, ZMQ_RCVMORE, &more, &sz);
    assert_true(more);
    assert_int_equal(zmq_recv(req, buf, sizeof buf, 0), 2);
    assert_memory_equal(buf, "bc", 2);

    /* a second heartbeat cannot take the same endpoint */
    taas_error_clear(&err);
    assert_null(taas_heartbeat_new(ctx, "inproc://test-hb", &err));
    assert_string_equal(err.ename, "TaasConnectionError");
    assert_non_null(strstr(err.message, "cannot bind the heartbeat socket on inproc://test-hb"));
    assert_non_null(strstr(err.hint, "another process"));

    /* free joins the thread and closes its sockets: the context can then terminate */
    taas_heartbeat_free(hb);
    zmq_close(req);
    assert_int_equal(zmq_ctx_term(ctx), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_and_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
