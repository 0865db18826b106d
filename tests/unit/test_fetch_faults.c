/* dataloader/fetch's failures over HTTP, each checked for its message and hint, against
 * real servers that the test starts: tests/lib/faultserver.py (404, 403, 401, 500 then 200,
 * 500 for good, a failing part of a parallel fetch, resets, cut bodies, stalls, no answer, a
 * server that ignores Range, an object that changes during the download, redirect loops),
 * nginx over HTTPS with a certificate nobody trusts, and a port nothing listens on. What is
 * retried is counted in the fetcher's stats and at the server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "test_fetch_util.h"
#include "utf8.h"

#define SMALL 10000
#define BIG (3 << 20)

static char ROOT[128];
static tu_server FAULT, NGINX, TLS;
static unsigned char *SMALL_DATA, *BIG_DATA;
static taas_error E;

static int setup(void **state) {
    (void)state;
    unsetenv("TAAS_FETCH_RETRIES");
    unsetenv("TAAS_FETCH_CONNECTIONS");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (tu_tmpdir(ROOT, sizeof ROOT, "fetch-faults")) return -1;
    char data[200];
    tu_small_big(ROOT, data, sizeof data, SMALL, &SMALL_DATA, BIG, &BIG_DATA);
    tu_server_dir(&FAULT, ROOT, "fault");
    tu_server_dir(&NGINX, ROOT, "nginx");
    tu_server_dir(&TLS, ROOT, "tls");
    if (tu_faultserver(&FAULT, data, NULL) || tu_nginx(&NGINX, data) || tu_nginx_tls(&TLS, data))
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_server_stop(&FAULT);
    tu_server_stop(&NGINX);
    tu_server_stop(&TLS);
    return tu_cleanup(ROOT, SMALL_DATA, BIG_DATA);
}

static void test_404_not_retried(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 3);
    char url[200], msg[300];
    tu_url_of(url, sizeof url, &FAULT, "/x.gz");
    snprintf(msg, sizeof msg, "GET %s: 404 Not Found", url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "check the URL: the server has no file at this path");
    assert_null(b.data);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.retries, 0);
    /* nginx's own error page says the same */
    tu_url_of(url, sizeof url, &NGINX, "/x.gz");
    snprintf(msg, sizeof msg, "GET %s: 404 Not Found", url);
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "check the URL");
    taas_fetcher_free(f);
}

static void test_403_not_retried(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 3);
    char url[200], msg[300];
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=403&fault=403");
    snprintf(msg, sizeof msg, "GET %s: 403 Forbidden", url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "refuses access");
    assert_int_equal(tu_per_uri(&FAULT, "/small.bin?t=403&fault=403"), 1);
    taas_fetcher_free(f);
}

static void test_500_then_success(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 4);
    char url[200];
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=500ok&fault=500,503");
    tu_fetch_equal(f, url, &E, SMALL_DATA, SMALL);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 2);
    assert_int_equal(st.requests, 3);
    assert_int_equal(tu_per_uri(&FAULT, "/small.bin?t=500ok&fault=500,503"), 3);
    taas_fetcher_free(f);
}

static void test_500_gives_up(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 2);
    char url[200], msg[300];
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=500&fault=500,500,500,500");
    snprintf(msg, sizeof msg, "GET %s: 500 Internal Server Error (after 3 attempts)", url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "raise TAAS_FETCH_RETRIES (now 2)");
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 2);
    taas_fetcher_free(f);
}

/* The second request (a part of the parallel fetch) fails once; that part alone is retried. */
static void test_part_retried(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 256 << 10, 2);
    char url[200];
    tu_url_of(url, sizeof url, &FAULT, "/big.bin?t=part&fault=ok,503");
    tu_fetch_equal(f, url, &E, BIG_DATA, BIG);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.requests, 6);
    taas_fetcher_free(f);
}

static void test_connection_refused(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 1);
    int port = tu_dead_port();
    char url[200], msg[300], hint[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/train.gz", port);
    snprintf(msg, sizeof msg, "GET %s: connection refused by 127.0.0.1:%d (after 2 attempts)", url,
             port);
    snprintf(hint, sizeof hint, "nothing is listening at 127.0.0.1:%d", port);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, hint);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 1);
    taas_fetcher_free(f);
}

static void test_reset_and_cut_retried(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 2);
    char url[200];
    const char *paths[] = {"/small.bin?t=reset&fault=reset", "/small.bin?t=cut&fault=cut",
                           "/small.bin?t=both&fault=cut,reset"};
    for (int i = 0; i < 3; i++) {
        tu_url_of(url, sizeof url, &FAULT, paths[i]);
        taas_blob b;
        if (taas_fetch(f, url, &b, &E)) fail_msg("%s: %s", paths[i], E.message);
        assert_int_equal(b.len, SMALL);
        assert_memory_equal(b.data, SMALL_DATA, SMALL);
        taas_blob_free(&b);
    }
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 4);
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=cut3&fault=cut,cut,cut");
    char msg[300];
    snprintf(msg, sizeof msg, "GET %s: the connection broke", url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "closed or reset the connection");
    assert_non_null(strstr(E.message, "(after 3 attempts)"));
    taas_fetcher_free(f);
}

static void test_stall_times_out(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 1);
    char url[200];
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=stall&fault=stall");
    taas_blob b;
    if (taas_fetch(f, url, &b, &E)) fail_msg("%s", E.message);
    assert_memory_equal(b.data, SMALL_DATA, SMALL);
    taas_blob_free(&b);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 1);
    /* no answer at all, twice: the error names the timeout and the setting to raise */
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=hang&fault=hang,hang");
    char msg[300];
    snprintf(msg, sizeof msg, "GET %s: timed out:", url);
    double t0 = taas_now();
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "raise TAAS_FETCH_LOW_SPEED_TIMEOUT (now 1 s)");
    assert_non_null(strstr(E.message, "(after 2 attempts)"));
    assert_true(taas_now() - t0 < 5);
    taas_fetcher_free(f);
}

static void test_server_ignoring_range(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 256 << 10, 0);
    char url[200], msg[300];
    tu_url_of(url, sizeof url, &FAULT, "/big.bin?t=norange&fault=norange,norange");
    /* a whole object is fine: the first answer is all of it */
    taas_blob b;
    assert_int_equal(taas_fetch(f, url, &b, &E), 0);
    assert_int_equal(b.len, BIG);
    assert_memory_equal(b.data, BIG_DATA, BIG);
    taas_blob_free(&b);
    unsigned char buf[100];
    snprintf(msg, sizeof msg,
             "GET %s: the server sent more than the 100 bytes asked for (HTTP 200: it ignored "
             "the Range header)",
             url);
    tu_expect_io_error(&E, taas_fetch_range(f, url, 1000, sizeof buf, buf, &E), msg,
                 "supports range requests");
    taas_fetcher_free(f);
}

static void test_401(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 3);
    char url[200], msg[300];
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=401&fault=401");
    snprintf(msg, sizeof msg, "GET %s: 401 Unauthorized", url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "the server wants credentials");
    assert_int_equal(tu_per_uri(&FAULT, "/small.bin?t=401&fault=401"), 1);
    taas_fetcher_free(f);
}

/* The first request sees one ETag, a later part another: the parts would not fit together. */
static void test_changed_during_download(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 256 << 10, 2);
    char url[200], msg[300];
    tu_url_of(url, sizeof url, &FAULT, "/big.bin?t=chg&fault=ok,newetag");
    snprintf(msg, sizeof msg, "GET %s: the object changed while it was being read", url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "run again once it is stable");
    assert_null(b.data);
    taas_fetcher_free(f);
}

static void test_redirect_loop(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 0);
    char url[200], msg[300];
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=loop&fault=loop,loop,loop,loop,loop,loop,loop");
    snprintf(msg, sizeof msg, "GET %s: too many redirects", url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "use the final URL");
    /* a redirect may not leave http(s) */
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=ftp&fault=redirect:ftp://127.0.0.1/x");
    snprintf(msg, sizeof msg, "GET %s: Protocol \"ftp\" not supported", url);
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "only http:// and https:// can be fetched");
    taas_fetcher_free(f);
}

static void test_tls_untrusted(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 2);
    char url[200], msg[300];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/small.bin", TLS.port);
    snprintf(msg, sizeof msg, "GET %s: TLS failed: SSL certificate problem: self-signed certificate",
             url);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, url, &b, &E), msg, "the server's certificate is not trusted here");
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 0);
    taas_fetcher_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_404_not_retried),
        cmocka_unit_test(test_403_not_retried),
        cmocka_unit_test(test_401),
        cmocka_unit_test(test_500_then_success),
        cmocka_unit_test(test_500_gives_up),
        cmocka_unit_test(test_part_retried),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_reset_and_cut_retried),
        cmocka_unit_test(test_stall_times_out),
        cmocka_unit_test(test_server_ignoring_range),
        cmocka_unit_test(test_changed_during_download),
        cmocka_unit_test(test_redirect_loop),
        cmocka_unit_test(test_tls_untrusted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
