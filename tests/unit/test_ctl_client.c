/* workers/ctl_client: a worker's last word. It sends "leaving" after what it queued and
 * does not return until the kernel's "bye", so the kernel never sees a worker's process end
 * before it has read the worker's result (a race that once failed an evaluate). The test is
 * the kernel: a real ROUTER on ipc:// that holds its bye back as long as it likes. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "ctl_client.h"
#include "jobctl.h"

typedef struct {
    void *zctx, *router;
    char dir[64], endpoint[128];
} kernel_end;

static void kernel_up(kernel_end *k) {
    snprintf(k->dir, sizeof k->dir, "/tmp/taas-ctl-test-XXXXXX");
    assert_non_null(mkdtemp(k->dir));
    snprintf(k->endpoint, sizeof k->endpoint, "ipc://%s/control", k->dir);
    k->zctx = zmq_ctx_new();
    k->router = zmq_socket(k->zctx, ZMQ_ROUTER);
    int timeout = 30000, zero = 0;  /* a bound, never reached when the worker speaks */
    zmq_setsockopt(k->router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(k->router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(k->router, k->endpoint), 0);
}

static void kernel_down(kernel_end *k) {
    zmq_close(k->router);
    zmq_ctx_term(k->zctx);
    char p[160];
    snprintf(p, sizeof p, "%s/control", k->dir);
    unlink(p);
    rmdir(k->dir);
}

/* The next message that is not a heartbeat: its type in t. */
static void next(kernel_end *k, char *t, size_t n) {
    for (int i = 0; i < 1000; i++) {
        taas_ctl_msg m;
        taas_error e;
        assert_int_equal(taas_ctl_recv(k->router, 1, 0, &m, &e), 0);
        snprintf(t, n, "%s", taas_ctl_type(&m));
        taas_ctl_msg_clear(&m);
        if (strcmp(t, "hb") != 0) return;
    }
    fail_msg("only heartbeats came");
}

typedef struct {
    taas_ctl_client *c;
    double timeout;
    int rc;
    volatile int returned;
} leave_arg;

static void *leave(void *p) {
    leave_arg *a = p;
    a->rc = taas_ctl_client_leave(a->c, a->timeout);
    __atomic_store_n(&a->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_leave_waits_for_the_kernels_bye(void **state) {
    (void)state;
    kernel_end k;
    kernel_up(&k);
    taas_error err;
    taas_ctl_client *c = taas_ctl_client_new(k.endpoint, NULL, "rank.0", json_object(), &err);
    assert_non_null(c);
    char t[32];
    next(&k, t, sizeof t);
    assert_string_equal(t, "hello");
    assert_int_equal(taas_ctl_client_send(c, taas_ctl_body("done"), "w", 1, &err), 0);

    leave_arg a = {c, 600, -2, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, leave, &a), 0);
    next(&k, t, sizeof t);
    assert_string_equal(t, "done");  /* the result first */
    next(&k, t, sizeof t);
    assert_string_equal(t, "leaving");
    /* the kernel has not answered: the worker is still there, whatever the machine's speed */
    assert_int_equal(__atomic_load_n(&a.returned, __ATOMIC_ACQUIRE), 0);
    taas_ctl_send(k.router, "rank.0", taas_ctl_body("hb"), NULL, 0, 0, &err);  /* not a bye */
    assert_int_equal(__atomic_load_n(&a.returned, __ATOMIC_ACQUIRE), 0);
    assert_int_equal(taas_ctl_send(k.router, "rank.0", taas_ctl_body("bye"), NULL, 0, 0, &err), 0);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    taas_ctl_client_free(c);
    kernel_down(&k);
}

static void test_leave_is_bounded_when_no_bye_comes(void **state) {
    (void)state;
    kernel_end k;
    kernel_up(&k);
    taas_error err;
    taas_ctl_client *c = taas_ctl_client_new(k.endpoint, NULL, "loader.0.0.0", json_object(), &err);
    assert_non_null(c);
    assert_int_equal(taas_ctl_client_leave(c, 0.2), -1);  /* a kernel that never answers */
    char t[32];
    next(&k, t, sizeof t);
    assert_string_equal(t, "hello");
    next(&k, t, sizeof t);
    assert_string_equal(t, "leaving");
    taas_ctl_client_free(c);
    assert_int_equal(taas_ctl_client_leave(NULL, 1), -1);  /* a worker that never joined */
    kernel_down(&k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leave_waits_for_the_kernels_bye),
        cmocka_unit_test(test_leave_is_bounded_when_no_bye_comes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
