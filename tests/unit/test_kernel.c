/* kernel/protocol/kernel, handlers, execute: the event loop and the dispatch table, driven
 * in-process over ipc sockets by a client that signs its messages like jupyter_client.
 * Covers the protocol errors a request can get back (missing fields, wrong channel,
 * unknown type), busy/idle, silent, stop_on_error, interrupts and shutdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "connection.h"
#include "kernel.h"
#include "session.h"
#include "wire.h"

static const char KEY[] = "test-kernel-key";

typedef struct fixture {
    taas_kernel *k;
    pthread_t thread;
    int rc;
    void *ctx, *shell, *control, *iopub;
    taas_session *s;
    char base[64];
} fixture;

static void *run_kernel(void *arg) {
    fixture *f = arg;
    taas_error err;
    taas_error_clear(&err);
    f->rc = taas_kernel_run(f->k, &err);
    return NULL;
}

static void *client_socket(fixture *f, int type, int port) {
    void *s = zmq_socket(f->ctx, type);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (type == ZMQ_SUB) zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    char ep[128];
    snprintf(ep, sizeof ep, "ipc://%s-%d", f->base, port);
    assert_int_equal(zmq_connect(s, ep), 0);
    return s;
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->base, sizeof f->base, "/tmp/taas-test-kernel-%d", (int)getpid());
    taas_connection c;
    memset(&c, 0, sizeof c);
    snprintf(c.transport, sizeof c.transport, "ipc");
    snprintf(c.ip, sizeof c.ip, "%s", f->base);
    c.shell_port = 1;
    c.iopub_port = 2;
    c.stdin_port = 3;
    c.control_port = 4;
    c.hb_port = 5;
    c.key = (char *)KEY;
    c.key_len = strlen(KEY);
    taas_error err;
    taas_error_clear(&err);
    f->k = taas_kernel_new(&c, &err);
    if (!f->k) fail_msg("%s", err.message);
    f->ctx = zmq_ctx_new();
    f->s = taas_session_new(KEY, strlen(KEY), &err);
    f->shell = client_socket(f, ZMQ_DEALER, 1);
    f->control = client_socket(f, ZMQ_DEALER, 4);
    f->iopub = client_socket(f, ZMQ_SUB, 2);
    usleep(50000);   /* let the subscription reach the PUB socket */
    assert_int_equal(pthread_create(&f->thread, NULL, run_kernel, f), 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    pthread_join(f->thread, NULL);
    taas_kernel_free(f->k);
    zmq_close(f->shell);
    zmq_close(f->control);
    zmq_close(f->iopub);
    zmq_ctx_term(f->ctx);
    taas_session_free(f->s);
    for (int p = 1; p <= 5; p++) {
        char path[96];
        snprintf(path, sizeof path, "%s-%d", f->base, p);
        unlink(path);
    }
    free(f);
    return 0;
}

/* Sends a signed request; returns its msg_id (static buffer per call site is enough). */
static void send_req(fixture *f, void *sock, const char *type, json_t *content, char *id) {
    taas_frames fr;
    taas_error err;
    assert_int_equal(taas_session_serialize(f->s, NULL, 0, type, NULL, NULL, content, &fr, id,
                                            &err), 0);
    json_decref(content);
    for (size_t i = 0; i < fr.n; i++)
        zmq_send(sock, fr.f[i].data, fr.f[i].len, i + 1 < fr.n ? ZMQ_SNDMORE : 0);
    taas_frames_free(&fr);
}

static taas_msg *recv_msg(fixture *f, void *sock, int timeout_ms) {
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) != 1) fail_msg("no message within %d ms", timeout_ms);
    taas_msg *m;
    taas_error err;
    assert_int_equal(taas_wire_recv(sock, taas_session_signer(f->s), NULL, &m, &err), 0);
    return m;
}

static taas_msg *reply_to(fixture *f, void *sock, const char *id) {
    taas_msg *m = recv_msg(f, sock, 5000);
    assert_string_equal(taas_json_get_str(m->parent_header, "msg_id", ""), id);
    return m;
}

/* iopub messages whose parent is id, from busy to idle: [[msg_type, content], ...] */
static json_t *iopub_of(fixture *f, const char *id) {
    json_t *out = json_array();
    for (;;) {
        taas_msg *m = recv_msg(f, f->iopub, 5000);
        if (strcmp(taas_json_get_str(m->parent_header, "msg_id", ""), id) != 0) {
            taas_msg_free(m);
            continue;
        }
        json_array_append_new(out, json_pack("[s, O]", m->msg_type, m->content));
        int idle = strcmp(m->msg_type, "status") == 0 &&
                   strcmp(taas_json_get_str(m->content, "execution_state", ""), "idle") == 0;
        taas_msg_free(m);
        if (idle) return out;
    }
}

static const char *status_of(const taas_msg *m) {
    return taas_json_get_str(m->content, "status", "?");
}

static void expect_error_reply(fixture *f, void *sock, const char *type, json_t *content,
                               const char *reply_type, const char *evalue) {
    char id[37];
    send_req(f, sock, type, content, id);
    taas_msg *r = reply_to(f, sock, id);
    assert_string_equal(r->msg_type, reply_type);
    assert_string_equal(status_of(r), "error");
    assert_string_equal(taas_json_get_str(r->content, "ename", ""), "TaasProtocolError");
    assert_string_equal(taas_json_get_str(r->content, "evalue", ""), evalue);
    assert_true(json_is_array(json_object_get(r->content, "traceback")));
    taas_msg_free(r);
    json_decref(iopub_of(f, id));   /* busy ... idle, so the next test starts clean */
}

static void shutdown_kernel(fixture *f) {
    char id[37];
    send_req(f, f->control, "shutdown_request", json_pack("{s:b}", "restart", 1), id);
    taas_msg *r = reply_to(f, f->control, id);
    assert_string_equal(r->msg_type, "shutdown_reply");
    assert_true(taas_json_get_bool(r->content, "restart", 0));
    taas_msg_free(r);
}

static void test_info_and_busy_idle(void **state) {
    fixture *f = *state;
    void *socks[2] = {f->shell, f->control};
    for (int i = 0; i < 2; i++) {
        char id[37];
        send_req(f, socks[i], "kernel_info_request", json_object(), id);
        taas_msg *r = reply_to(f, socks[i], id);
        assert_string_equal(r->msg_type, "kernel_info_reply");
        assert_string_equal(taas_json_get_str(r->content, "protocol_version", ""), "5.3");
        json_t *li = json_object_get(r->content, "language_info");
        assert_string_equal(taas_json_get_str(li, "name", ""), "taas");
        assert_string_equal(taas_json_get_str(li, "codemirror_mode", ""), "python");
        assert_string_equal(taas_json_get_str(li, "pygments_lexer", ""), "python");
        assert_string_equal(taas_json_get_str(li, "file_extension", ""), ".taas");
        taas_msg_free(r);
        json_t *io = iopub_of(f, id);
        char *s = json_dumps(io, JSON_COMPACT);
        assert_string_equal(s, "[[\"status\",{\"execution_state\":\"busy\"}],"
                               "[\"status\",{\"execution_state\":\"idle\"}]]");
        free(s);
        json_decref(io);
    }
    shutdown_kernel(f);
}

static void test_protocol_errors(void **state) {
    fixture *f = *state;
    expect_error_reply(f, f->shell, "execute_request", json_pack("{s:b}", "silent", 0),
                       "execute_reply", "execute_request: the content has no \"code\" string");
    expect_error_reply(f, f->shell, "is_complete_request", json_object(), "is_complete_reply",
                       "is_complete_request: the content has no \"code\" string");
    expect_error_reply(f, f->shell, "complete_request", json_pack("{s:i}", "code", 3),
                       "complete_reply", "complete_request: the content has no \"code\" string");
    expect_error_reply(f, f->shell, "inspect_request", json_object(), "inspect_reply",
                       "inspect_request: the content has no \"code\" string");
    expect_error_reply(f, f->shell, "history_request",
                       json_pack("{s:s}", "hist_access_type", "everything"), "history_reply",
                       "history_request: hist_access_type must be \"tail\", \"range\" or "
                       "\"search\"");
    expect_error_reply(f, f->control, "execute_request", json_pack("{s:s}", "code", "1"),
                       "execute_reply",
                       "execute_request: it is served on the shell channel, not on control");
    expect_error_reply(f, f->shell, "frobnicate_request", json_object(), "frobnicate_reply",
                       "unknown message type 'frobnicate_request'");

    /* an unsigned message is dropped without a word; the next request is answered */
    zmq_send(f->shell, TAAS_WIRE_DELIM, strlen(TAAS_WIRE_DELIM), ZMQ_SNDMORE);
    zmq_send(f->shell, "", 0, ZMQ_SNDMORE);
    const char *unsigned_frames[4] = {"{\"msg_type\":\"execute_request\",\"msg_id\":\"x\"}",
                                      "{}", "{}", "{\"code\":\"print(1)\"}"};
    for (int i = 0; i < 4; i++)
        zmq_send(f->shell, unsigned_frames[i], strlen(unsigned_frames[i]), i < 3 ? ZMQ_SNDMORE : 0);
    char id[37];
    send_req(f, f->shell, "comm_info_request", json_object(), id);
    taas_msg *r = reply_to(f, f->shell, id);   /* the first reply is this one */
    assert_string_equal(r->msg_type, "comm_info_reply");
    assert_int_equal(json_object_size(json_object_get(r->content, "comms")), 0);
    taas_msg_free(r);
    json_decref(iopub_of(f, id));

    /* comm_open to a target that does not exist is closed on iopub */
    send_req(f, f->shell, "comm_open",
             json_pack("{s:s, s:s, s:{}}", "comm_id", "c-1", "target_name", "nope", "data"), id);
    json_t *io = iopub_of(f, id);
    assert_int_equal(json_array_size(io), 3);
    json_t *close = json_array_get(io, 1);
    assert_string_equal(json_string_value(json_array_get(close, 0)), "comm_close");
    assert_string_equal(taas_json_get_str(json_array_get(close, 1), "comm_id", ""), "c-1");
    json_decref(io);
    shutdown_kernel(f);
}

static void test_execute_silent_and_abort(void **state) {
    fixture *f = *state;
    char id[5][37];
    send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "1 + 2"), id[0]);
    taas_msg *r = reply_to(f, f->shell, id[0]);
    assert_string_equal(status_of(r), "ok");
    assert_int_equal(json_integer_value(json_object_get(r->content, "execution_count")), 1);
    taas_msg_free(r);
    json_t *io = iopub_of(f, id[0]);
    char *s = json_dumps(io, JSON_COMPACT);
    assert_non_null(strstr(s, "[\"execute_input\",{\"code\":\"1 + 2\",\"execution_count\":1}]"));
    assert_non_null(strstr(s, "[\"execute_result\",{\"execution_count\":1,"
                              "\"data\":{\"text/plain\":\"3\"},\"metadata\":{}}]"));
    free(s);
    json_decref(io);

    /* silent: nothing but busy/idle, and the count does not move */
    send_req(f, f->shell, "execute_request",
             json_pack("{s:s, s:b}", "code", "print('x')\n4", "silent", 1), id[0]);
    r = reply_to(f, f->shell, id[0]);
    assert_int_equal(json_integer_value(json_object_get(r->content, "execution_count")), 1);
    taas_msg_free(r);
    io = iopub_of(f, id[0]);
    assert_int_equal(json_array_size(io), 2);
    json_decref(io);

    /* stop_on_error: what was queued behind the failed cell is aborted, other requests
     * in the queue are served; what comes after the reply runs */
    send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "sleep(0.2)\nnope"),
             id[0]);
    send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "5"), id[1]);
    send_req(f, f->shell, "kernel_info_request", json_object(), id[2]);
    send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "6"), id[3]);
    const char *want[4] = {"error", "aborted", "ok", "aborted"};
    for (int i = 0; i < 4; i++) {
        r = reply_to(f, f->shell, id[i]);
        assert_string_equal(status_of(r), want[i]);
        if (i == 0)
            assert_string_equal(taas_json_get_str(r->content, "ename", ""), "TaasNameError");
        taas_msg_free(r);
    }
    send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "7"), id[4]);
    r = reply_to(f, f->shell, id[4]);
    assert_string_equal(status_of(r), "ok");
    assert_int_equal(json_integer_value(json_object_get(r->content, "execution_count")), 3);
    taas_msg_free(r);

    /* history: the stored cells with their outputs */
    send_req(f, f->shell, "history_request",
             json_pack("{s:s, s:i, s:b}", "hist_access_type", "tail", "n", 2, "output", 1),
             id[0]);
    r = reply_to(f, f->shell, id[0]);
    s = json_dumps(json_object_get(r->content, "history"), JSON_COMPACT);
    assert_string_equal(s, "[[1,2,[\"sleep(0.2)\\nnope\",null]],[1,3,[\"7\",\"7\"]]]");
    free(s);
    taas_msg_free(r);
    shutdown_kernel(f);
}

/* A waiting cell does not block control; both interrupts end it with KeyboardInterrupt. */
static void test_interrupts(void **state) {
    fixture *f = *state;
    for (int way = 0; way < 2; way++) {
        char id[37], cid[37];
        send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "sleep(30)"), id);
        usleep(100000);
        double t = taas_now();
        send_req(f, f->control, "kernel_info_request", json_object(), cid);
        taas_msg *r = reply_to(f, f->control, cid);
        assert_true(taas_now() - t < 0.5);
        taas_msg_free(r);
        t = taas_now();
        if (way == 0) {
            send_req(f, f->control, "interrupt_request", json_object(), cid);
        } else {
            raise(SIGINT);   /* interrupt_mode "signal": must not kill the process */
        }
        r = reply_to(f, f->shell, id);
        assert_true(taas_now() - t < 1.0);
        assert_string_equal(status_of(r), "error");
        assert_string_equal(taas_json_get_str(r->content, "ename", ""), "KeyboardInterrupt");
        taas_msg_free(r);
        if (way == 0) {
            r = reply_to(f, f->control, cid);
            assert_string_equal(r->msg_type, "interrupt_reply");
            taas_msg_free(r);
        }
    }
    /* the next cell runs */
    char id[37];
    send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "8"), id);
    taas_msg *r = reply_to(f, f->shell, id);
    assert_string_equal(status_of(r), "ok");
    taas_msg_free(r);
    /* shutdown while a cell waits ends the loop too */
    send_req(f, f->shell, "execute_request", json_pack("{s:s}", "code", "sleep(30)"), id);
    usleep(100000);
    shutdown_kernel(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_info_and_busy_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_execute_silent_and_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
