/* The fetch cache (dataloader/fetch_cache.c) against a real HTTP server
 * (tests/lib/faultserver.py): a miss stores, a hit costs one HEAD and no body, a changed
 * ETag refetches, least recently used objects are evicted at the size limit, a damaged entry
 * is refetched, TAAS_CACHE_DIR is honoured. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "test_fetch_util.h"

#define OBJ 10000

static char ROOT[128], DATA[200];
static tu_server S;
static taas_error E;

static void put_object(const char *name, uint64_t seed, size_t len) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", DATA, name);
    unsigned char *d = tu_pattern(seed, len);
    assert_int_equal(tu_write(p, d, len), 0);
    free(d);
}

static taas_fetcher *fetcher(const char *cache, uint64_t limit, size_t range_min) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = cache;
    o.cache_limit = limit;
    o.range_min = range_min;
    o.retries = 0;
    taas_fetcher *f = taas_fetcher_new(&o, &E);
    if (!f) fail_msg("taas_fetcher_new: %s", E.message);
    return f;
}

static void cache_dir(char *dst, size_t cap, const char *name) {
    snprintf(dst, cap, "%s/%s", ROOT, name);
}

/* Fetches name and checks it holds pattern seed; returns the stats change. */
static taas_fetch_stats get(taas_fetcher *f, const char *name, uint64_t seed, size_t len) {
    char url[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", S.port, name);
    taas_fetch_stats a, b;
    taas_fetch_stats_get(f, &a);
    taas_blob blob;
    if (taas_fetch(f, url, &blob, &E)) fail_msg("%s: %s", url, E.message);
    unsigned char *want = tu_pattern(seed, len);
    assert_int_equal(blob.len, len);
    assert_memory_equal(blob.data, want, len);
    free(want);
    taas_blob_free(&blob);
    taas_fetch_stats_get(f, &b);
    return (taas_fetch_stats){b.requests - a.requests, b.retries - a.retries, b.bytes - a.bytes,
                              b.cache_hits - a.cache_hits};
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".obj")) n++;
    closedir(d);
    return n;
}

/* The methods the server saw for uri, as a string like "GET HEAD". */
static void methods(const char *uri, char *out, size_t cap) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/_stats", S.port);
    char *body = tu_http_get(url);
    json_t *j = json_loads(body, 0, NULL);
    free(body);
    out[0] = '\0';
    json_t *e;
    size_t i;
    json_array_foreach(json_object_get(j, "log"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "uri")), uri)) continue;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s", n ? " " : "",
                 json_string_value(json_object_get(e, "method")));
    }
    json_decref(j);
}

static int setup(void **state) {
    (void)state;
    unsetenv("TAAS_CACHE_DIR");
    unsetenv("TAAS_CACHE_LIMIT");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (tu_tmpdir(ROOT, sizeof ROOT, "fetch-cache")) return -1;
    snprintf(DATA, sizeof DATA, "%s/data", ROOT);
    snprintf(S.dir, sizeof S.dir, "%s/server", ROOT);
    mkdir(DATA, 0755);
    mkdir(S.dir, 0755);
    return tu_faultserver(&S, DATA, NULL);
}

static int teardown(void **state) {
    (void)state;
    tu_server_stop(&S);
    tu_rmtree(ROOT);
    curl_global_cleanup();
    return 0;
}

static void test_miss_then_hit(void **state) {
    (void)state;
    char cache[300];
    cache_dir(cache, sizeof cache, "c1");
    put_object("a.bin", 1, OBJ);
    taas_fetcher *f = fetcher(cache, 1 << 20, 1 << 20);
    taas_fetch_stats d = get(f, "a.bin", 1, OBJ);
    assert_int_equal(d.requests, 1); /* no HEAD on a miss: the GET's ETag is stored */
    assert_int_equal(d.cache_hits, 0);
    assert_int_equal(count_entries(cache), 1);
    d = get(f, "a.bin", 1, OBJ);
    assert_int_equal(d.requests, 1);
    assert_int_equal(d.cache_hits, 1);
    assert_int_equal(d.bytes, 0);
    char m[200];
    methods("/a.bin", m, sizeof m);
    assert_string_equal(m, "GET HEAD");
    taas_fetcher_free(f);
    /* another fetcher (another loader process) finds it too */
    f = fetcher(cache, 1 << 20, 1 << 20);
    d = get(f, "a.bin", 1, OBJ);
    assert_int_equal(d.cache_hits, 1);
    taas_fetcher_free(f);
}

static void test_etag_change_refetches(void **state) {
    (void)state;
    char cache[300];
    cache_dir(cache, sizeof cache, "c2");
    put_object("b.bin", 2, OBJ);
    taas_fetcher *f = fetcher(cache, 1 << 20, 1 << 20);
    get(f, "b.bin", 2, OBJ);
    /* the object is rewritten: new content, new mtime, so a new ETag */
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    put_object("b.bin", 3, OBJ + 5);
    taas_fetch_stats d = get(f, "b.bin", 3, OBJ + 5);
    assert_int_equal(d.cache_hits, 0);
    assert_int_equal(d.requests, 2); /* HEAD (stale), GET */
    assert_int_equal(count_entries(cache), 1); /* the new version replaced the old */
    d = get(f, "b.bin", 3, OBJ + 5);
    assert_int_equal(d.cache_hits, 1);
    taas_fetcher_free(f);
}

/* Room for two objects: the least recently used one goes when a third arrives. */
static void test_lru_eviction(void **state) {
    (void)state;
    char cache[300];
    cache_dir(cache, sizeof cache, "c3");
    put_object("e1.bin", 11, OBJ);
    put_object("e2.bin", 12, OBJ);
    put_object("e3.bin", 13, OBJ);
    put_object("e4.bin", 14, OBJ);
    taas_fetcher *f = fetcher(cache, 2 * OBJ + 400, 1 << 20);
    get(f, "e1.bin", 11, OBJ);
    get(f, "e2.bin", 12, OBJ);
    assert_int_equal(count_entries(cache), 2);
    get(f, "e3.bin", 13, OBJ); /* e1 goes */
    assert_int_equal(count_entries(cache), 2);
    taas_fetch_stats d = get(f, "e2.bin", 12, OBJ); /* hit: e2 is now the most recent */
    assert_int_equal(d.cache_hits, 1);
    get(f, "e4.bin", 14, OBJ); /* e3 goes, not e2 */
    assert_int_equal(count_entries(cache), 2);
    d = get(f, "e2.bin", 12, OBJ);
    assert_int_equal(d.cache_hits, 1);
    d = get(f, "e4.bin", 14, OBJ);
    assert_int_equal(d.cache_hits, 1);
    d = get(f, "e1.bin", 11, OBJ);
    assert_int_equal(d.cache_hits, 0);
    d = get(f, "e3.bin", 13, OBJ);
    assert_int_equal(d.cache_hits, 0);
    /* an object bigger than the whole limit is not stored */
    put_object("huge.bin", 15, 3 * OBJ);
    get(f, "huge.bin", 15, 3 * OBJ);
    d = get(f, "huge.bin", 15, 3 * OBJ);
    assert_int_equal(d.cache_hits, 0);
    taas_fetcher_free(f);
}

static void test_damaged_entry_refetched(void **state) {
    (void)state;
    char cache[300];
    cache_dir(cache, sizeof cache, "c4");
    put_object("d.bin", 4, OBJ);
    taas_fetcher *f = fetcher(cache, 1 << 20, 1 << 20);
    get(f, "d.bin", 4, OBJ);
    DIR *dir = opendir(cache);
    struct dirent *de;
    char path[600] = "";
    while ((de = readdir(dir)))
        if (strstr(de->d_name, ".obj")) snprintf(path, sizeof path, "%s/%s", cache, de->d_name);
    closedir(dir);
    assert_int_equal(truncate(path, 500), 0);
    taas_fetch_stats d = get(f, "d.bin", 4, OBJ);
    assert_int_equal(d.cache_hits, 0);
    d = get(f, "d.bin", 4, OBJ);
    assert_int_equal(d.cache_hits, 1);
    taas_fetcher_free(f);
}

/* A large object comes in parallel ranges and is cached whole. */
static void test_parallel_object_cached(void **state) {
    (void)state;
    char cache[300];
    cache_dir(cache, sizeof cache, "c5");
    put_object("big.bin", 5, 1 << 20);
    taas_fetcher *f = fetcher(cache, 8 << 20, 128 << 10);
    taas_fetch_stats d = get(f, "big.bin", 5, 1 << 20);
    assert_int_equal(d.requests, 5);
    d = get(f, "big.bin", 5, 1 << 20);
    assert_int_equal(d.cache_hits, 1);
    assert_int_equal(d.requests, 1);
    taas_fetcher_free(f);
}

static void test_env_dir_and_off(void **state) {
    (void)state;
    char cache[300];
    cache_dir(cache, sizeof cache, "from-env/nested");
    put_object("env.bin", 6, OBJ);
    setenv("TAAS_CACHE_DIR", cache, 1);
    taas_fetcher *f = fetcher(NULL, 1 << 20, 1 << 20);
    get(f, "env.bin", 6, OBJ);
    assert_int_equal(count_entries(cache), 1);
    assert_int_equal(get(f, "env.bin", 6, OBJ).cache_hits, 1);
    taas_fetcher_free(f);
    /* empty: no cache at all, so no HEAD either */
    setenv("TAAS_CACHE_DIR", "", 1);
    f = fetcher(NULL, 1 << 20, 1 << 20);
    taas_fetch_stats d = get(f, "env.bin", 6, OBJ);
    assert_int_equal(d.cache_hits, 0);
    assert_int_equal(d.requests, 1);
    taas_fetcher_free(f);
    unsetenv("TAAS_CACHE_DIR");
    /* a limit of 0 stores nothing */
    cache_dir(cache, sizeof cache, "c6");
    f = fetcher(cache, 0, 1 << 20);
    get(f, "env.bin", 6, OBJ);
    assert_int_equal(count_entries(cache), 0);
    taas_fetcher_free(f);
}

/* A hit is validated: when the server is gone, the fetch fails rather than serve a copy
 * that may be stale. */
static void test_hit_needs_server(void **state) {
    (void)state;
    char cache[300];
    cache_dir(cache, sizeof cache, "c7");
    put_object("v.bin", 7, OBJ);
    taas_fetcher *f = fetcher(cache, 1 << 20, 1 << 20);
    get(f, "v.bin", 7, OBJ);
    char url[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v.bin", S.port);
    /* the object is deleted on the server: the copy is not served */
    char p[400];
    snprintf(p, sizeof p, "%s/v.bin", DATA);
    unlink(p);
    taas_blob b;
    assert_int_equal(taas_fetch(f, url, &b, &E), -1);
    char msg[400];
    snprintf(msg, sizeof msg, "HEAD %s: 404 Not Found", url);
    assert_string_equal(E.message, msg);
    taas_fetcher_free(f);
}

/* After a fetch stored or validated an object, its range reads come from the cached copy;
 * a fetcher that has not seen the object, or a copy gone from the folder, asks the server. */
static void test_range_reads_from_cache(void **state) {
    (void)state;
    char cache[300], url[300];
    cache_dir(cache, sizeof cache, "c8");
    put_object("r.bin", 8, 50000);
    unsigned char *want = tu_pattern(8, 50000);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/r.bin", S.port);
    unsigned char buf[1000];
    taas_fetch_stats a, b;

    taas_fetcher *f = fetcher(cache, 1 << 20, 1 << 20);
    get(f, "r.bin", 8, 50000);
    taas_fetch_stats_get(f, &a);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(taas_fetch_range(f, url, 1000 + 7000 * i, sizeof buf, buf, &E), 0);
        assert_memory_equal(buf, want + 1000 + 7000 * i, sizeof buf);
    }
    taas_fetch_stats_get(f, &b);
    assert_int_equal(b.requests, a.requests);
    assert_int_equal(b.cache_hits, a.cache_hits + 3);
    /* beyond the end: the server says so */
    assert_int_equal(taas_fetch_range(f, url, 49500, sizeof buf, buf, &E), -1);
    assert_non_null(strstr(E.message, "short read"));
    taas_fetcher_free(f);

    /* a new fetcher has validated nothing yet: the range read goes to the server */
    f = fetcher(cache, 1 << 20, 1 << 20);
    assert_int_equal(taas_fetch_range(f, url, 5, sizeof buf, buf, &E), 0);
    assert_memory_equal(buf, want + 5, sizeof buf);
    taas_fetch_stats_get(f, &b);
    assert_int_equal(b.requests, 1);
    assert_int_equal(b.cache_hits, 0);
    /* until it fetches the object (a validated hit) */
    get(f, "r.bin", 8, 50000);
    assert_int_equal(taas_fetch_range(f, url, 5, sizeof buf, buf, &E), 0);
    taas_fetch_stats_get(f, &b);
    assert_int_equal(b.requests, 2);
    assert_int_equal(b.cache_hits, 2);
    /* the copy is removed (evicted by another loader): the server answers again */
    DIR *dir = opendir(cache);
    struct dirent *de;
    while ((de = readdir(dir)))
        if (strstr(de->d_name, ".obj")) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", cache, de->d_name);
            unlink(p);
        }
    closedir(dir);
    assert_int_equal(taas_fetch_range(f, url, 30000, sizeof buf, buf, &E), 0);
    assert_memory_equal(buf, want + 30000, sizeof buf);
    taas_fetch_stats_get(f, &b);
    assert_int_equal(b.requests, 3);
    taas_fetcher_free(f);
    free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_miss_then_hit),
        cmocka_unit_test(test_etag_change_refetches),
        cmocka_unit_test(test_lru_eviction),
        cmocka_unit_test(test_damaged_entry_refetched),
        cmocka_unit_test(test_parallel_object_cached),
        cmocka_unit_test(test_env_dir_and_off),
        cmocka_unit_test(test_hit_needs_server),
        cmocka_unit_test(test_range_reads_from_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
