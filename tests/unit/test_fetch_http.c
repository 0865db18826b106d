/* dataloader/fetch over HTTP against real servers that the test starts: nginx (connection
 * reuse across threads and fetches, read from its access log) and tests/lib/faultserver.py
 * (the most requests in flight at once, to see parallel ranges; the benchmarks' slow
 * storage). Whole objects, ranges, info, redirects. Failures are in test_fetch_faults.c.
 * libcurl is never mocked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "test_fetch_util.h"
#include "utf8.h"

#define SMALL 10000
#define BIG (3 << 20)

static char ROOT[128];
static tu_server FAULT, SLOW, NGINX;
static unsigned char *SMALL_DATA, *BIG_DATA;
static taas_error E;

static void reset_counters(const tu_server *s) {
    char url[128];
    tu_url_of(url, sizeof url, s, "/_reset");
    free(tu_http_get(url));
}

static int setup(void **state) {
    (void)state;
    unsetenv("TAAS_FETCH_RETRIES");
    unsetenv("TAAS_FETCH_CONNECTIONS");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (tu_tmpdir(ROOT, sizeof ROOT, "fetch-http")) return -1;
    /* the data in ROOT/data; the servers' own folders beside it, not in it */
    char data[200], p[300];
    tu_small_big(ROOT, data, sizeof data, SMALL, &SMALL_DATA, BIG, &BIG_DATA);
    snprintf(p, sizeof p, "%s/empty.bin", data);
    tu_write(p, "", 0);
    tu_server_dir(&FAULT, ROOT, "fault");
    tu_server_dir(&SLOW, ROOT, "slow");
    tu_server_dir(&NGINX, ROOT, "nginx");
    /* slow storage: every request waits 50 ms and a connection carries 20 MB/s */
    static const char *const slow[] = {"--latency", "0.05", "--rate", "20e6", NULL};
    if (tu_faultserver(&FAULT, data, NULL) || tu_faultserver(&SLOW, data, slow) ||
        tu_nginx(&NGINX, data))
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_server_stop(&FAULT);
    tu_server_stop(&SLOW);
    tu_server_stop(&NGINX);
    return tu_cleanup(ROOT, SMALL_DATA, BIG_DATA);
}

/* ---- whole objects, ranges, info ---- */

static void test_small_object_one_request(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 0);
    char url[200];
    tu_url_of(url, sizeof url, &FAULT, "/small.bin?t=one");
    tu_fetch_equal(f, url, &E, SMALL_DATA, SMALL);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.bytes, SMALL);
    assert_int_equal(tu_per_uri(&FAULT, "/small.bin?t=one"), 1);
    taas_fetcher_free(f);
}

static void test_empty_object(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 0);
    char url[200];
    taas_blob b;
    const tu_server *servers[] = {&FAULT, &NGINX};
    for (int i = 0; i < 2; i++) {
        tu_url_of(url, sizeof url, servers[i], "/empty.bin");
        if (taas_fetch(f, url, &b, &E)) fail_msg("%s: %s", url, E.message);
        assert_int_equal(b.len, 0);
        taas_blob_free(&b);
        taas_object_info info;
        assert_int_equal(taas_fetch_info(f, url, &info, &E), 0);
        assert_int_equal(info.size, 0);
    }
    taas_fetcher_free(f);
}

/* 3 MiB in parts of 768 KiB on 4 connections: the slow server sees 4 requests at once. */
static void test_parallel_ranges(void **state) {
    (void)state;
    reset_counters(&SLOW);
    taas_fetcher *f = tu_http_fetcher(&E, 4, 256 << 10, 0);
    char url[200];
    tu_url_of(url, sizeof url, &SLOW, "/big.bin");
    taas_blob b;
    double t0 = taas_now();
    if (taas_fetch(f, url, &b, &E)) fail_msg("%s", E.message);
    double took = taas_now() - t0;
    assert_int_equal(b.len, BIG);
    assert_memory_equal(b.data, BIG_DATA, BIG);
    taas_blob_free(&b);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    /* the first 256 KiB (which tells the size), then 2816 KiB in parts of 768 KiB */
    assert_int_equal(st.requests, 5);
    assert_int_equal(st.bytes, BIG);
    json_t *j = tu_stats(&SLOW);
    assert_int_equal(json_integer_value(json_object_get(j, "max_inflight")), 4);
    json_t *log = json_object_get(j, "log");
    assert_int_equal(json_array_size(log), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(log, 0), "range")),
                        "bytes=0-262143");
    json_decref(j);
    /* for the log: one connection would take 50 ms + 3 MiB / 20 MB/s = 207 ms at least */
    print_message("3 MiB on 4 connections from 50 ms, 20 MB/s storage: %.0f ms\n", took * 1000);
    taas_fetcher_free(f);
}

static void test_one_connection_no_ranges(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 1, 256 << 10, 0);
    char url[200];
    tu_url_of(url, sizeof url, &FAULT, "/big.bin?t=single");
    taas_blob b;
    assert_int_equal(taas_fetch(f, url, &b, &E), 0);
    assert_int_equal(b.len, BIG);
    assert_memory_equal(b.data, BIG_DATA, BIG);
    taas_blob_free(&b);
    json_t *j = tu_stats(&FAULT);
    json_t *log = json_object_get(j, "log");
    json_t *last = json_array_get(log, json_array_size(log) - 1);
    assert_string_equal(json_string_value(json_object_get(last, "uri")), "/big.bin?t=single");
    assert_string_equal(json_string_value(json_object_get(last, "range")), "");
    json_decref(j);
    assert_int_equal(tu_per_uri(&FAULT, "/big.bin?t=single"), 1);
    taas_fetcher_free(f);
}

static void test_ranges(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 64 << 10, 0);
    char url[200];
    tu_url_of(url, sizeof url, &NGINX, "/big.bin");
    unsigned char *buf = malloc(1 << 20);
    /* one request */
    assert_int_equal(taas_fetch_range(f, url, 12345, 1000, buf, &E), 0);
    assert_memory_equal(buf, BIG_DATA + 12345, 1000);
    /* in parallel parts */
    assert_int_equal(taas_fetch_range(f, url, 100001, 1 << 20, buf, &E), 0);
    assert_memory_equal(buf, BIG_DATA + 100001, 1 << 20);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.requests, 5);
    /* the tail of the object */
    assert_int_equal(taas_fetch_range(f, url, BIG - 10, 10, buf, &E), 0);
    assert_memory_equal(buf, BIG_DATA + BIG - 10, 10);
    char msg[400];
    snprintf(msg, sizeof msg, "short read from %s: asked for bytes %d to %d, the object has %d bytes",
             url, BIG - 10, BIG + 10, BIG);
    tu_expect_io_error(&E, taas_fetch_range(f, url, BIG - 10, 20, buf, &E), msg, "truncated");
    snprintf(msg, sizeof msg, "GET %s: 416 Requested Range Not Satisfiable: the range asked for is "
             "beyond the end of the object (%d bytes)", url, BIG);
    tu_expect_io_error(&E, taas_fetch_range(f, url, BIG + 5, 20, buf, &E), msg, "shorter than expected");
    free(buf);
    taas_fetcher_free(f);
}

static void test_info(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 0);
    char url[200], url2[200];
    tu_url_of(url, sizeof url, &NGINX, "/big.bin");
    tu_url_of(url2, sizeof url2, &FAULT, "/big.bin");
    taas_object_info a, b;
    assert_int_equal(taas_fetch_info(f, url, &a, &E), 0);
    assert_int_equal(a.size, BIG);
    assert_true(a.etag[0] == '"');
    assert_int_equal(taas_fetch_info(f, url2, &b, &E), 0);
    assert_int_equal(b.size, BIG);
    assert_true(b.etag[0] == '"');
    tu_url_of(url, sizeof url, &NGINX, "/missing.bin");
    char msg[300];
    snprintf(msg, sizeof msg, "HEAD %s: 404 Not Found", url);
    tu_expect_io_error(&E, taas_fetch_info(f, url, &a, &E), msg, "check the URL");
    taas_fetcher_free(f);
}

/* ---- connection reuse across threads ---- */

typedef struct worker_arg {
    taas_fetcher *f;
    const char *url;
    int ok;
} worker_arg;

static void *worker(void *p) {
    worker_arg *a = p;
    taas_error err;
    a->ok = 1;
    for (int i = 0; i < 20; i++) {
        taas_blob b;
        if (taas_fetch(a->f, a->url, &b, &err) || b.len != SMALL ||
            memcmp(b.data, SMALL_DATA, SMALL)) {
            fprintf(stderr, "worker: %s\n", err.message);
            a->ok = 0;
        }
        taas_blob_free(&b);
    }
    return NULL;
}

/* Counts the access log's requests for uri and the distinct connections they came on. */
static void nginx_log_once(const char *uri, int *requests, int *connections) {
    char path[400];
    snprintf(path, sizeof path, "%s/nginx/access.log", NGINX.dir);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    long conns[512];
    int nc = 0;
    *requests = 0;
    char line[1024];
    while (fgets(line, sizeof line, fp)) {
        long conn, nreq;
        int status;
        char method[16], u[512];
        if (sscanf(line, "%ld %ld %d %15s %511s", &conn, &nreq, &status, method, u) != 5) continue;
        if (strcmp(u, uri)) continue;
        (*requests)++;
        int seen = 0;
        for (int i = 0; i < nc; i++) seen |= conns[i] == conn;
        if (!seen && nc < 512) conns[nc++] = conn;
    }
    fclose(fp);
    *connections = nc;
}

/* nginx logs a request after answering it: wait (a little) for the lines to arrive. */
static void nginx_log(const char *uri, int want, int *requests, int *connections) {
    double deadline = taas_now() + 3;
    do {
        nginx_log_once(uri, requests, connections);
        if (*requests >= want) return;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    } while (taas_now() < deadline);
}

static void test_connection_reuse_across_threads(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 0);
    char url[200];
    tu_url_of(url, sizeof url, &NGINX, "/small.bin");
    enum { THREADS = 8 };
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg){f, url, 0};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_true(args[i].ok);
    }
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.requests, THREADS * 20);
    taas_fetcher_free(f);
    int requests, connections;
    nginx_log("/small.bin", THREADS * 20, &requests, &connections);
    assert_int_equal(requests, THREADS * 20);
    /* 160 requests on at most one connection per thread */
    if (connections > THREADS) fail_msg("%d requests came on %d connections", requests, connections);
}

/* A fetcher's connections outlive a fetch: the second object comes on the first's. */
static void test_connection_reuse_sequential(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 0);
    char url[200];
    tu_url_of(url, sizeof url, &NGINX, "/small.bin?seq");
    for (int i = 0; i < 5; i++) {
        taas_blob b;
        assert_int_equal(taas_fetch(f, url, &b, &E), 0);
        taas_blob_free(&b);
    }
    taas_object_info info;
    assert_int_equal(taas_fetch_info(f, url, &info, &E), 0);
    taas_fetcher_free(f);
    int requests, connections;
    nginx_log("/small.bin?seq", 6, &requests, &connections);
    assert_int_equal(requests, 6);
    assert_int_equal(connections, 1);
}

static void test_redirect_followed(void **state) {
    (void)state;
    taas_fetcher *f = tu_http_fetcher(&E, 4, 1 << 20, 0);
    char url[200];
    tu_url_of(url, sizeof url, &FAULT, "/old/place.bin?fault=redirect:/small.bin");
    tu_fetch_equal(f, url, &E, SMALL_DATA, SMALL);
    taas_fetcher_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_object_one_request),
        cmocka_unit_test(test_empty_object),
        cmocka_unit_test(test_parallel_ranges),
        cmocka_unit_test(test_one_connection_no_ranges),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_connection_reuse_across_threads),
        cmocka_unit_test(test_connection_reuse_sequential),
        cmocka_unit_test(test_redirect_followed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
