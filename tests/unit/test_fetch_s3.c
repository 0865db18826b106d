/* s3://bucket/key against a real S3-compatible server that the test starts
 * (tests/lib/s3server: s3rver, which checks every request's AWS SigV4 signature). The bucket
 * and the objects are made through the server's API with signed PUTs first. Covers whole
 * objects, parallel ranges, info, keys that need encoding, the cache, a session token, and
 * the errors: no such key or bucket, a wrong secret, an unknown access key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "test_fetch_util.h"
#include "utf8.h"

#define BUCKET "taas-test"
#define SMALL 10000
#define BIG (2 << 20)

static char ROOT[128];
static tu_server S;
static unsigned char *SMALL_DATA, *BIG_DATA;
static taas_error E;

static taas_fetcher *fetcher(const char *cache, size_t range_min) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = cache ? cache : "";
    o.range_min = range_min;
    o.retries = 1;
    o.backoff_s = 0.01;
    taas_fetcher *f = taas_fetcher_new(&o, &E);
    if (!f) fail_msg("taas_fetcher_new: %s", E.message);
    return f;
}

static void use_credentials(const char *key, const char *secret) {
    tu_s3_env(S.port, key, secret);
}

static int put(const char *path, const void *data, size_t len) {
    char url[400];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", S.port, path);
    return tu_s3_put(url, "S3RVER:S3RVER", data, len) == 200 ? 0 : -1;
}

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (tu_tmpdir(ROOT, sizeof ROOT, "fetch-s3")) return -1;
    tu_server_dir(&S, ROOT, "server");
    if (tu_s3server(&S, BUCKET)) return -1;
    SMALL_DATA = tu_pattern(21, SMALL);
    BIG_DATA = tu_pattern(22, BIG);
    /* a second bucket through the API, then the objects */
    if (put("other-bucket", NULL, 0) || put(BUCKET "/small.bin", SMALL_DATA, SMALL) ||
        put(BUCKET "/dir/big.bin", BIG_DATA, BIG) ||
        put(BUCKET "/odd%20name%2B1%3D%C3%A9.bin", "odd", 3) ||
        put("other-bucket/x.bin", "other", 5))
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_server_stop(&S);
    return tu_cleanup(ROOT, SMALL_DATA, BIG_DATA);
}

static void test_get_whole(void **state) {
    (void)state;
    use_credentials("S3RVER", "S3RVER");
    taas_fetcher *f = fetcher(NULL, 1 << 20);
    taas_blob b;
    if (taas_fetch(f, "s3://" BUCKET "/small.bin", &b, &E)) fail_msg("%s (%s)", E.message, E.hint);
    assert_int_equal(b.len, SMALL);
    assert_memory_equal(b.data, SMALL_DATA, SMALL);
    taas_blob_free(&b);
    assert_int_equal(taas_fetch(f, "s3://other-bucket/x.bin", &b, &E), 0);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "other", 5);
    taas_blob_free(&b);
    /* a key with a space, '+', '=' and a non-ASCII letter is encoded and signed right */
    if (taas_fetch(f, "s3://" BUCKET "/odd name+1=\xc3\xa9.bin", &b, &E))
        fail_msg("%s (%s)", E.message, E.hint);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.data, "odd", 3);
    taas_blob_free(&b);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.requests, 3);
    assert_int_equal(st.retries, 0);
    taas_fetcher_free(f);
}

static void test_parallel_ranges_and_info(void **state) {
    (void)state;
    use_credentials("S3RVER", "S3RVER");
    taas_fetcher *f = fetcher(NULL, 256 << 10);
    tu_fetch_equal(f, "s3://" BUCKET "/dir/big.bin", &E, BIG_DATA, BIG);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    /* 256 KiB first, then 1792 KiB in parts of 512 KiB */
    assert_int_equal(st.requests, 5);
    unsigned char buf[3000];
    assert_int_equal(taas_fetch_range(f, "s3://" BUCKET "/dir/big.bin", 777777, sizeof buf, buf, &E),
                     0);
    assert_memory_equal(buf, BIG_DATA + 777777, sizeof buf);
    taas_object_info info;
    assert_int_equal(taas_fetch_info(f, "s3://" BUCKET "/dir/big.bin", &info, &E), 0);
    assert_int_equal(info.size, BIG);
    assert_int_equal(strlen(info.etag), 34); /* "md5" */
    taas_fetcher_free(f);
}

static void test_cached(void **state) {
    (void)state;
    use_credentials("S3RVER", "S3RVER");
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", ROOT);
    taas_fetcher *f = fetcher(cache, 1 << 20);
    taas_blob b;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(taas_fetch(f, "s3://" BUCKET "/small.bin", &b, &E), 0);
        assert_memory_equal(b.data, SMALL_DATA, SMALL);
        taas_blob_free(&b);
    }
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.cache_hits, 1);
    assert_int_equal(st.requests, 2); /* GET, then a signed HEAD */
    taas_fetcher_free(f);
}

static void test_session_token_signed(void **state) {
    (void)state;
    use_credentials("S3RVER", "S3RVER");
    setenv("AWS_SESSION_TOKEN", "FQoGZXIvYXdzEXAMPLETOKEN", 1);
    taas_fetcher *f = fetcher(NULL, 1 << 20);
    unsetenv("AWS_SESSION_TOKEN");
    taas_blob b;
    if (taas_fetch(f, "s3://" BUCKET "/small.bin", &b, &E)) fail_msg("%s", E.message);
    taas_blob_free(&b);
    taas_fetcher_free(f);
}

static void test_no_such_key_or_bucket(void **state) {
    (void)state;
    use_credentials("S3RVER", "S3RVER");
    taas_fetcher *f = fetcher(NULL, 1 << 20);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, "s3://" BUCKET "/nope.bin", &b, &E),
                 "GET s3://" BUCKET "/nope.bin: 404 Not Found (NoSuchKey: The specified key does "
                 "not exist.)",
                 "check the bucket and the key");
    tu_expect_io_error(&E, taas_fetch(f, "s3://no-bucket/x.bin", &b, &E),
                 "GET s3://no-bucket/x.bin: 404 Not Found (NoSuchBucket: The specified bucket does "
                 "not exist",
                 "has no such object");
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.requests, 2);
    taas_fetcher_free(f);
}

static void test_wrong_credentials(void **state) {
    (void)state;
    use_credentials("S3RVER", "not-the-secret");
    taas_fetcher *f = fetcher(NULL, 1 << 20);
    taas_blob b;
    tu_expect_io_error(&E, taas_fetch(f, "s3://" BUCKET "/small.bin", &b, &E),
                 "GET s3://" BUCKET "/small.bin: 403 Forbidden (SignatureDoesNotMatch: The request "
                 "signature we calculated does not match the signature you provided.",
                 "check the credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    assert_non_null(strstr(E.hint, "http://127.0.0.1:"));
    taas_object_info info;
    tu_expect_io_error(&E, taas_fetch_info(f, "s3://" BUCKET "/small.bin", &info, &E),
                 "HEAD s3://" BUCKET "/small.bin: 403 Forbidden", "AWS_SESSION_TOKEN");
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.retries, 0);
    taas_fetcher_free(f);

    use_credentials("AKIDUNKNOWN", "S3RVER");
    f = fetcher(NULL, 1 << 20);
    tu_expect_io_error(&E, taas_fetch(f, "s3://" BUCKET "/small.bin", &b, &E),
                 "GET s3://" BUCKET "/small.bin: 403 Forbidden (InvalidAccessKeyId:",
                 "AWS_ACCESS_KEY_ID");
    taas_fetcher_free(f);
}

static const char *path_in(const char *enc) {
    static char p[300];
    snprintf(p, sizeof p, BUCKET "/%s", enc);
    return p;
}

/* ListObjectsV2 through every page: two keys a page over seven keys, a prefix that needs
 * encoding, a sibling prefix left out, the cap on keys. */
static void test_list_pages(void **state) {
    (void)state;
    use_credentials("S3RVER", "S3RVER");
    const char *keys[] = {"list/a b+c=\xc3\xa9/1", "list/a b+c=\xc3\xa9/2", "list/a b+c=\xc3\xa9/sub/3",
                          "list/a b+c=\xc3\xa9/z&<>'\"", "list/a b+c=\xc3\xa9/~4", "list/a b+c=\xc3\xa9/5/",
                          "list/a b+c=\xc3\xa9/6"};
    const char *enc[] = {"list/a%20b%2Bc%3D%C3%A9/1", "list/a%20b%2Bc%3D%C3%A9/2", "list/a%20b%2Bc%3D%C3%A9/sub/3",
                         "list/a%20b%2Bc%3D%C3%A9/z%26%3C%3E%27%22", "list/a%20b%2Bc%3D%C3%A9/~4",
                         "list/a%20b%2Bc%3D%C3%A9/5/", "list/a%20b%2Bc%3D%C3%A9/6"};
    for (size_t i = 0; i < 7; i++) assert_int_equal(put(path_in(enc[i]), "k", 1), 0);
    assert_int_equal(put(BUCKET "/list/a%20b%2Bc%3D%C3%A9x/other", "k", 1), 0);
    taas_fetcher *f = fetcher(NULL, 1 << 20);
    taas_strvec got = {0};
    taas_fetch_stats before, after;
    taas_fetch_stats_get(f, &before);
    if (taas_fetch_s3_list(f, "s3://" BUCKET "/list/a b+c=\xc3\xa9/", 2, 100, &got, &E) != 0)
        fail_msg("%s (hint: %s)", E.message, E.hint);
    taas_fetch_stats_get(f, &after);
    assert_int_equal(after.requests - before.requests, 4); /* 2 + 2 + 2 + 1 */
    /* the store's order: bytes */
    const char *want[] = {keys[0], keys[1], keys[5], keys[6], keys[2], keys[3], keys[4]};
    assert_int_equal(got.n, 7);
    for (size_t i = 0; i < 7; i++) assert_string_equal(got.v[i], want[i]);
    taas_strvec_clear(&got);
    /* more than the cap */
    tu_expect_io_error(&E, taas_fetch_s3_list(f, "s3://" BUCKET "/list/", 2, 5, &got, &E),
                       "s3://" BUCKET "/list/: more than 5 objects under this prefix", "narrower prefix");
    taas_strvec_clear(&got);
    /* a bucket that is not there */
    tu_expect_io_error(&E, taas_fetch_s3_list(f, "s3://no-such-bucket/x/", 0, 100, &got, &E),
                       "GET s3://no-such-bucket/x/: 404 Not Found (NoSuchBucket", "no bucket 'no-such-bucket'");
    assert_int_equal(got.n, 0);
    taas_fetcher_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_whole),
        cmocka_unit_test(test_parallel_ranges_and_info),
        cmocka_unit_test(test_cached),
        cmocka_unit_test(test_session_token_signed),
        cmocka_unit_test(test_no_such_key_or_bucket),
        cmocka_unit_test(test_wrong_credentials),
        cmocka_unit_test(test_list_pages),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
