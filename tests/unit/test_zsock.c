/* common/zsock: the job's keys, and CURVE sockets whose ZAP handler admits the job's own
 * clients only: a client without the keys, or with keys of another job, delivers nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "zsock.h"

static void test_keys_round_trip_and_errors(void **state) {
    (void)state;
    taas_zkeys a, b, back;
    taas_error err;
    assert_int_equal(taas_zkeys_new(&a, &err), 0);
    assert_int_equal(taas_zkeys_new(&b, &err), 0);
    assert_int_equal(strlen(a.server_public), 40);
    assert_string_not_equal(a.server_secret, b.server_secret);  /* fresh for each job */
    assert_string_not_equal(a.server_public, a.client_public);
    char text[TAAS_ZKEYS_TEXT + 2];
    taas_zkeys_text(&a, text);
    assert_int_equal(strlen(text), TAAS_ZKEYS_TEXT);
    strcat(text, "\n");  /* read from a line */
    assert_int_equal(taas_zkeys_parse(text, "the test", &back, &err), 0);
    assert_memory_equal(&a, &back, sizeof a);

    assert_int_equal(taas_zkeys_parse("short", "$TAAS_JOB_KEYS", &back, &err), -1);
    assert_string_equal(err.ename, "TaasSecurityError");
    assert_non_null(strstr(err.message, "$TAAS_JOB_KEYS does not hold a job's keys"));
    assert_non_null(strstr(err.message, "it has 5"));
    assert_true(err.hint[0]);
    text[17] = '~';  /* not a Z85 character */
    assert_int_equal(taas_zkeys_parse(text, "the test", &back, &err), -1);
    assert_int_equal(taas_zkeys_parse(NULL, "nothing", &back, &err), -1);
}

/* Waits (bounded) for a monitor event of one of the kinds in mask; 1 when it came. */
static int wait_event(void *mon, int mask) {
    int timeout = 10000;
    zmq_setsockopt(mon, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    for (int i = 0; i < 100; i++) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, mon, 0) < 0) {
            zmq_msg_close(&m);
            return 0;
        }
        uint16_t ev = 0;
        memcpy(&ev, zmq_msg_data(&m), sizeof ev);
        int more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        if (more) {  /* the endpoint frame */
            zmq_msg_init(&m);
            zmq_msg_recv(&m, mon, 0);
            zmq_msg_close(&m);
        }
        if (ev & mask) return 1;
    }
    return 0;
}

static void test_only_the_jobs_clients_get_through(void **state) {
    (void)state;
    taas_zkeys job, other;
    taas_error err;
    assert_int_equal(taas_zkeys_new(&job, &err), 0);
    assert_int_equal(taas_zkeys_new(&other, &err), 0);
    /* an intruder may know the server's public key */
    memcpy(other.server_public, job.server_public, sizeof job.server_public);
    void *sctx = zmq_ctx_new(), *cctx = zmq_ctx_new(), *xctx = zmq_ctx_new();
    taas_zsec *server = taas_zsec_new(sctx, &job, 1, &err);
    taas_zsec *client = taas_zsec_new(cctx, &job, 0, &err);
    taas_zsec *intruder = taas_zsec_new(xctx, &other, 0, &err);
    assert_non_null(server);
    assert_non_null(client);
    assert_non_null(intruder);

    char ep[256];
    taas_zsock_cfg rc = {.type = ZMQ_ROUTER, .what = "the test's", .sec = server, .sndhwm = -1, .rcvhwm = -1};
    void *router = taas_zsock_bind(sctx, &rc, "tcp://127.0.0.1:*", ep, sizeof ep, &err);
    assert_non_null(router);
    assert_int_equal(strncmp(ep, "tcp://127.0.0.1:", 16), 0);
    assert_int_equal(zmq_socket_monitor(router, "inproc://test-zsock-mon",
                                        ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                            ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL),
                     0);
    void *mon = zmq_socket(sctx, ZMQ_PAIR);
    int zero = 0;
    zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(mon, "inproc://test-zsock-mon"), 0);

    /* a client with another job's keys: the ZAP handler refuses it, nothing is delivered */
    taas_zsock_cfg dc = {.type = ZMQ_DEALER, .what = "the intruder's", .sec = intruder, .sndhwm = -1, .rcvhwm = -1,
                         .identity = "rank.0"};
    void *bad = taas_zsock_connect(xctx, &dc, ep, &err);
    assert_non_null(bad);
    zmq_send(bad, "forged", 6, ZMQ_DONTWAIT);
    assert_true(wait_event(mon, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH));
    assert_true(taas_zsec_refused(server) >= 1);

    /* a plain client: the handshake fails before anything is read */
    dc.sec = NULL;
    void *plain = taas_zsock_connect(xctx, &dc, ep, &err);
    assert_non_null(plain);
    zmq_send(plain, "plain", 5, ZMQ_DONTWAIT);
    assert_true(wait_event(mon, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL));

    /* the job's own client: its message is the first the server has */
    dc.sec = client;
    dc.what = "the worker's";
    void *good = taas_zsock_connect(cctx, &dc, ep, &err);
    assert_non_null(good);
    assert_int_equal(zmq_send(good, "hello", 5, 0), 5);
    int timeout = 10000;
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    char id[64], body[64];
    int n = zmq_recv(router, id, sizeof id, 0);
    assert_int_equal(n, 6);
    assert_memory_equal(id, "rank.0", 6);
    n = zmq_recv(router, body, sizeof body, 0);
    assert_int_equal(n, 5);
    assert_memory_equal(body, "hello", 5);
    /* and the answer reaches it, encrypted both ways */
    zmq_send(router, "rank.0", 6, ZMQ_SNDMORE);
    zmq_send(router, "spec", 4, 0);
    zmq_setsockopt(good, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    assert_int_equal(zmq_recv(good, body, sizeof body, 0), 4);

    /* a socket that listens with a client's keys is refused */
    rc.sec = client;
    assert_null(taas_zsock_bind(cctx, &rc, "tcp://127.0.0.1:*", NULL, 0, &err));
    assert_string_equal(err.ename, "TaasSecurityError");

    zmq_close(good);
    zmq_close(plain);
    zmq_close(bad);
    zmq_close(mon);
    zmq_close(router);
    taas_zsec_free(server);
    taas_zsec_free(client);
    taas_zsec_free(intruder);
    zmq_ctx_term(sctx);
    zmq_ctx_term(cctx);
    zmq_ctx_term(xctx);
}

static void test_bind_errors_name_the_socket(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    taas_error err;
    taas_zsock_cfg c = {.type = ZMQ_ROUTER, .what = "the job's control", .sndhwm = -1, .rcvhwm = -1};
    assert_null(taas_zsock_bind(ctx, &c, "tcp://256.1.1.1:5", NULL, 0, &err));
    assert_string_equal(err.ename, "TaasIOError");
    assert_non_null(strstr(err.message, "cannot bind the job's control socket to tcp://256.1.1.1:5"));
    assert_true(err.hint[0]);
    assert_null(taas_zsock_connect(ctx, &c, "nonsense://x", &err));
    assert_non_null(strstr(err.message, "cannot connect the job's control socket to nonsense://x"));
    zmq_ctx_term(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_round_trip_and_errors),
        cmocka_unit_test(test_only_the_jobs_clients_get_through),
        cmocka_unit_test(test_bind_errors_name_the_socket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
