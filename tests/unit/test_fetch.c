/* dataloader/fetch.c and brace.c without a server: local files and file:// URLs, options and
 * environment variables, the s3:// URL checks, and brace expansion, each error with its
 * message. HTTP is in test_fetch_http.c, the cache in test_fetch_cache.c, S3 in
 * test_fetch_s3.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmocka_testutil.h"
#include "fetch.h"
#include "fetch_priv.h"
#include "test_fetch_util.h"
#include "utf8.h"

static char DIR_[256];
static taas_error E;

static void expect_error(int rc, const char *ename, const char *msg, const char *hint) {
    if (rc != -1) fail_msg("succeeded; wanted %s '%s'", ename, msg);
    if (strcmp(E.ename, ename) || !strstr(E.message, msg) || !strstr(E.hint, hint))
        fail_msg("gave %s: %s\nhint: %s\nwanted %s '%s', hint '%s'", E.ename, E.message, E.hint,
                 ename, msg, hint);
    assert_true(taas_utf8_valid(E.message, strlen(E.message)));
    assert_true(taas_utf8_valid(E.hint, strlen(E.hint)));
}

static taas_fetcher *new_fetcher(void) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = "";
    taas_fetcher *f = taas_fetcher_new(&o, &E);
    if (!f) fail_msg("taas_fetcher_new: %s (%s)", E.message, E.hint);
    return f;
}

static void path_in(char *dst, size_t cap, const char *name) {
    snprintf(dst, cap, "%s/%s", DIR_, name);
}

static int setup(void **state) {
    (void)state;
    if (tu_tmpdir(DIR_, sizeof DIR_, "fetch")) return -1;
    unsetenv("TAAS_CACHE_DIR");
    static const char *const vars[] = {"TAAS_FETCH_CONNECTIONS", "TAAS_FETCH_RANGE_MIN",
                                       "TAAS_FETCH_RETRIES", "TAAS_FETCH_BACKOFF",
                                       "TAAS_FETCH_CONNECT_TIMEOUT",
                                       "TAAS_FETCH_LOW_SPEED_TIMEOUT", "TAAS_CACHE_LIMIT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rmtree(DIR_);
    return 0;
}

/* ---- local files ---- */

static void test_local_whole_range_info(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "data.bin");
    unsigned char *want = tu_pattern(1, 100000);
    assert_int_equal(tu_write(p, want, 100000), 0);
    taas_fetcher *f = new_fetcher();
    taas_blob b;
    assert_int_equal(taas_fetch(f, p, &b, &E), 0);
    assert_int_equal(b.len, 100000);
    assert_memory_equal(b.data, want, 100000);
    taas_blob_free(&b);
    assert_null(b.data);

    unsigned char part[1000];
    assert_int_equal(taas_fetch_range(f, p, 5000, sizeof part, part, &E), 0);
    assert_memory_equal(part, want + 5000, sizeof part);
    assert_int_equal(taas_fetch_range(f, p, 100000, 0, part, &E), 0);

    taas_object_info info;
    assert_int_equal(taas_fetch_info(f, p, &info, &E), 0);
    assert_int_equal(info.size, 100000);
    assert_true(info.etag[0] != '\0');
    char etag1[128];
    snprintf(etag1, sizeof etag1, "%s", info.etag);
    /* a rewritten file has another validator */
    struct timespec later[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
    assert_int_equal(utimensat(AT_FDCWD, p, later, 0), 0);
    assert_int_equal(taas_fetch_info(f, p, &info, &E), 0);
    assert_string_not_equal(info.etag, etag1);

    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.requests, 5);
    assert_int_equal(st.bytes, 100000 + sizeof part);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.cache_hits, 0);
    taas_fetcher_free(f);
    free(want);
}

static void test_local_empty_file(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "empty.bin");
    assert_int_equal(tu_write(p, "", 0), 0);
    taas_fetcher *f = new_fetcher();
    taas_blob b;
    assert_int_equal(taas_fetch(f, p, &b, &E), 0);
    assert_int_equal(b.len, 0);
    assert_non_null(b.data);
    taas_blob_free(&b);
    taas_fetcher_free(f);
}

static void test_file_urls(void **state) {
    (void)state;
    char p[512], url[600];
    path_in(p, sizeof p, "a b%.bin");
    assert_int_equal(tu_write(p, "hello", 5), 0);
    taas_fetcher *f = new_fetcher();
    taas_blob b;
    snprintf(url, sizeof url, "file://%s/a%%20b%%25.bin", DIR_);
    if (taas_fetch(f, url, &b, &E)) fail_msg("%s: %s", url, E.message);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "hello", 5);
    taas_blob_free(&b);
    snprintf(url, sizeof url, "file://localhost%s/a%%20b%%25.bin", DIR_);
    assert_int_equal(taas_fetch(f, url, &b, &E), 0);
    taas_blob_free(&b);
    expect_error(taas_fetch(f, "file://otherhost/x.bin", &b, &E), "TaasIOError",
                 "file://otherhost/x.bin: a file:// URL must name an absolute path",
                 "three slashes");
    expect_error(taas_fetch(f, "file:///tmp/a%00b", &b, &E), "TaasIOError", "NUL byte",
                 "remove the %00");
    taas_fetcher_free(f);
}

static void test_missing_file(void **state) {
    (void)state;
    char p[512], msg[700];
    path_in(p, sizeof p, "nope.gz");
    taas_fetcher *f = new_fetcher();
    taas_blob b;
    snprintf(msg, sizeof msg, "cannot open %s: No such file or directory", p);
    expect_error(taas_fetch(f, p, &b, &E), "TaasIOError", msg, "check the path");
    assert_null(b.data);
    taas_object_info info;
    expect_error(taas_fetch_info(f, p, &info, &E), "TaasIOError", msg, "check the path");
    char buf[4];
    expect_error(taas_fetch_range(f, p, 0, 4, buf, &E), "TaasIOError", msg, "check the path");
    /* a relative path: the hint says where relative paths start */
    expect_error(taas_fetch(f, "no-such-dir/train.gz", &b, &E), "TaasIOError",
                 "cannot open no-such-dir/train.gz: No such file or directory",
                 "relative paths start from the working directory /");
    taas_fetcher_free(f);
}

static void test_folder_and_short_read(void **state) {
    (void)state;
    taas_fetcher *f = new_fetcher();
    taas_blob b;
    char msg[700], p[512];
    snprintf(msg, sizeof msg, "cannot read %s: Is a directory", DIR_);
    expect_error(taas_fetch(f, DIR_, &b, &E), "TaasIOError", msg, "name a file inside the folder");
    path_in(p, sizeof p, "short.bin");
    assert_int_equal(tu_write(p, "0123456789", 10), 0);
    char buf[16];
    snprintf(msg, sizeof msg, "short read from %s: asked for bytes 4 to 20, the object has 10 bytes",
             p);
    expect_error(taas_fetch_range(f, p, 4, 16, buf, &E), "TaasIOError", msg, "truncated");
    taas_fetcher_free(f);
}

/* Run as an ordinary user: root reads everything, so as root the check runs in a child that
 * has become nobody (65534). */
static int unreadable_check(const char *p) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = "";
    taas_fetcher *f = taas_fetcher_new(&o, &E);
    if (!f) return -1;
    taas_blob b;
    int rc = taas_fetch(f, p, &b, &E);
    taas_fetcher_free(f);
    if (rc != -1 || !strstr(E.message, "Permission denied") ||
        !strstr(E.hint, "this user may not read the file")) {
        fprintf(stderr, "got %s (hint: %s)\n", E.message, E.hint);
        return -1;
    }
    return 0;
}

static void test_unreadable_file(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "secret.bin");
    assert_int_equal(tu_write(p, "x", 1), 0);
    chmod(p, 0);
    if (geteuid() != 0) {
        assert_int_equal(unreadable_check(p), 0);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) || setuid(65534)) _exit(2);
        _exit(unreadable_check(p) ? 1 : 0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_bad_urls(void **state) {
    (void)state;
    taas_fetcher *f = new_fetcher();
    taas_blob b;
    expect_error(taas_fetch(f, "ftp://example.org/x.tar", &b, &E), "TaasIOError",
                 "ftp://example.org/x.tar: unsupported URL scheme 'ftp'",
                 "use a local path, file://, http://, https:// or s3://bucket/key");
    expect_error(taas_fetch(f, "", &b, &E), "TaasIOError", "empty path or URL", "name a file");
    expect_error(taas_fetch(f, "http://exa mple.org/x", &b, &E), "TaasIOError",
                 "GET http://exa mple.org/x: malformed URL", "percent-encode");
    taas_fetcher_free(f);
}

/* ---- options ---- */

static void test_defaults_and_env(void **state) {
    (void)state;
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    assert_int_equal(o.connections, 4);
    assert_int_equal(o.range_min, 8 << 20);
    assert_int_equal(o.retries, 4);
    assert_true(o.backoff_s == 0.2);
    assert_true(o.connect_timeout_s == 10);
    assert_true(o.low_speed_timeout_s == 30);
    assert_null(o.cache_dir);
    assert_true(o.cache_limit == (uint64_t)10 << 30);
    setenv("TAAS_FETCH_CONNECTIONS", "8", 1);
    setenv("TAAS_FETCH_RANGE_MIN", "1MiB", 1);
    setenv("TAAS_CACHE_LIMIT", "500M", 1);
    setenv("TAAS_FETCH_BACKOFF", "0.5", 1);
    taas_fetch_opts_default(&o);
    assert_int_equal(o.connections, 8);
    assert_int_equal(o.range_min, 1 << 20);
    assert_true(o.cache_limit == (uint64_t)500 << 20);
    assert_true(o.backoff_s == 0.5);
    unsetenv("TAAS_FETCH_CONNECTIONS");
    unsetenv("TAAS_FETCH_RANGE_MIN");
    unsetenv("TAAS_CACHE_LIMIT");
    unsetenv("TAAS_FETCH_BACKOFF");
}

static void test_bad_env(void **state) {
    (void)state;
    setenv("TAAS_FETCH_RETRIES", "lots", 1);
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    assert_int_equal(o.retries, 4); /* left at the default here, refused below */
    o.cache_dir = "";
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasValueError",
                 "environment variable TAAS_FETCH_RETRIES='lots' is not valid",
                 "set TAAS_FETCH_RETRIES to a whole number from 0 to 100");
    unsetenv("TAAS_FETCH_RETRIES");
    setenv("TAAS_FETCH_CONNECTIONS", "65", 1);
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasValueError",
                 "TAAS_FETCH_CONNECTIONS='65' is not valid", "from 1 to 64");
    unsetenv("TAAS_FETCH_CONNECTIONS");
    setenv("TAAS_CACHE_LIMIT", "10 bananas", 1);
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasValueError",
                 "TAAS_CACHE_LIMIT='10 bananas' is not valid", "such as 10G");
    unsetenv("TAAS_CACHE_LIMIT");
}

static void test_bad_opts(void **state) {
    (void)state;
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = "";
    o.connections = 0;
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasValueError",
                 "fetch option connections (1 to 64) is out of range: 0", "taas_fetch_opts_default");
    taas_fetch_opts_default(&o);
    o.cache_dir = "";
    o.low_speed_timeout_s = 0.5;
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasValueError",
                 "low_speed_timeout_s (1 to 86400 seconds) is out of range: 0.5", "");
    taas_fetch_opts_default(&o);
    o.cache_dir = "";
    o.retries = -1;
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasValueError",
                 "retries (0 to 100) is out of range: -1", "");
}

static void test_cache_dir_unusable(void **state) {
    (void)state;
    char file[512], cache[600], msg[700];
    path_in(file, sizeof file, "plainfile");
    assert_int_equal(tu_write(file, "x", 1), 0);
    snprintf(cache, sizeof cache, "%s/cache", file);
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = cache;
    snprintf(msg, sizeof msg, "cannot use the cache folder %s: Not a directory", cache);
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasIOError", msg,
                 "set TAAS_CACHE_DIR to a folder this user can write");
    /* the same through the environment */
    setenv("TAAS_CACHE_DIR", cache, 1);
    o.cache_dir = NULL;
    expect_error(taas_fetcher_new(&o, &E) ? 0 : -1, "TaasIOError", msg, "TAAS_CACHE_DIR");
    unsetenv("TAAS_CACHE_DIR");
}

static void test_local_never_cached(void **state) {
    (void)state;
    char cache[512], p[512];
    path_in(cache, sizeof cache, "cache-local");
    path_in(p, sizeof p, "local.bin");
    assert_int_equal(tu_write(p, "abc", 3), 0);
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = cache;
    taas_fetcher *f = taas_fetcher_new(&o, &E);
    assert_non_null(f);
    taas_blob b;
    assert_int_equal(taas_fetch(f, p, &b, &E), 0);
    taas_blob_free(&b);
    assert_int_equal(taas_fetch(f, p, &b, &E), 0);
    taas_blob_free(&b);
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    assert_int_equal(st.cache_hits, 0);
    taas_fetcher_free(f);
    /* the folder was made, and holds nothing */
    struct stat s;
    assert_int_equal(stat(cache, &s), 0);
    assert_true(S_ISDIR(s.st_mode));
    assert_int_equal(rmdir(cache), 0);
}

/* ---- s3:// URLs (no request is made: these fail before) ---- */

static void test_s3_url_errors(void **state) {
    (void)state;
    setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    taas_fetcher *f = new_fetcher();
    taas_blob b;
    expect_error(taas_fetch(f, "s3://", &b, &E), "TaasIOError", "s3://: the s3:// URL names no bucket",
                 "write s3://bucket/key");
    expect_error(taas_fetch(f, "s3://bucket", &b, &E), "TaasIOError",
                 "s3://bucket: the s3:// URL names a bucket but no object key", "s3://bucket/key");
    expect_error(taas_fetch(f, "s3://bucket/", &b, &E), "TaasIOError", "no object key", "");
    expect_error(taas_fetch(f, "s3://my bucket/x", &b, &E), "TaasIOError",
                 "the bucket name may hold only letters", "");
    taas_fetcher_free(f);

    unsetenv("AWS_SECRET_ACCESS_KEY");
    f = new_fetcher();
    expect_error(taas_fetch(f, "s3://data/train.tar", &b, &E), "TaasIOError",
                 "s3://data/train.tar: no AWS credentials: AWS_ACCESS_KEY_ID and "
                 "AWS_SECRET_ACCESS_KEY are not set",
                 "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    taas_object_info info;
    expect_error(taas_fetch_info(f, "s3://data/train.tar", &info, &E), "TaasIOError",
                 "no AWS credentials", "AWS_SESSION_TOKEN");
    taas_fetcher_free(f);

    setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
    setenv("AWS_ENDPOINT_URL", "ftp://127.0.0.1:9000", 1);
    f = new_fetcher();
    expect_error(taas_fetch(f, "s3://data/train.tar", &b, &E), "TaasIOError",
                 "AWS_ENDPOINT_URL 'ftp://127.0.0.1:9000' is not an http:// or https:// URL",
                 "http://127.0.0.1:9000");
    taas_fetcher_free(f);
    unsetenv("AWS_ENDPOINT_URL");
    setenv("AWS_REGION", "us east 1", 1);
    f = new_fetcher();
    expect_error(taas_fetch(f, "s3://data/train.tar", &b, &E), "TaasIOError",
                 "AWS_REGION is not a region name", "us-east-1");
    taas_fetcher_free(f);
    unsetenv("AWS_REGION");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
}

/* Where an s3:// URL goes: virtual-host style on AWS, path style for a dotted bucket and for
 * a custom endpoint; the region in the signature; the token header. */
static void s3_target(const char *url, const char *want_url, const char *want_sigv4,
                      int want_token) {
    taas_fetcher *f = new_fetcher();
    fetch_target t;
    if (fetch_target_init(f, &t, url, &E)) fail_msg("%s: %s", url, E.message);
    assert_true(t.s3);
    assert_string_equal(t.http_url, want_url);
    assert_string_equal(t.cache_key, want_url);
    assert_string_equal(t.sigv4, want_sigv4);
    assert_string_equal(t.userpwd, "AKIDEXAMPLE:wJalrXUtnFEMI");
    int sha = 0, token = 0;
    for (struct curl_slist *h = t.headers; h; h = h->next) {
        sha |= !strncmp(h->data, "x-amz-content-sha256: e3b0c442", 30);
        token |= !strcmp(h->data, "x-amz-security-token: TOKEN");
    }
    assert_true(sha);
    assert_int_equal(token, want_token);
    fetch_target_free(&t);
    taas_fetcher_free(f);
}

static void test_s3_endpoints(void **state) {
    (void)state;
    setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI", 1);
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    unsetenv("AWS_SESSION_TOKEN");
    s3_target("s3://my-data/train/a b+c.tar", "https://my-data.s3.us-east-1.amazonaws.com/train/a%20b%2Bc.tar",
              "aws:amz:us-east-1:s3", 0);
    setenv("AWS_DEFAULT_REGION", "eu-central-1", 1);
    s3_target("s3://my-data/x", "https://my-data.s3.eu-central-1.amazonaws.com/x",
              "aws:amz:eu-central-1:s3", 0);
    setenv("AWS_REGION", "eu-west-3", 1);
    s3_target("s3://my.data/x", "https://s3.eu-west-3.amazonaws.com/my.data/x", "aws:amz:eu-west-3:s3", 0);
    setenv("AWS_SESSION_TOKEN", "TOKEN", 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
    s3_target("s3://my-data/d/\xc3\xa9.npy", "http://127.0.0.1:9000/my-data/d/%C3%A9.npy",
              "aws:amz:eu-west-3:s3", 1);
    setenv("AWS_ENDPOINT_URL_S3", "https://minio.local:9443", 1);
    s3_target("s3://my-data/k", "https://minio.local:9443/my-data/k", "aws:amz:eu-west-3:s3", 1);
    static const char *const vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                                       "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN",
                                       "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* ---- brace expansion ---- */

static void expand(const char *pattern, const char *const *want) {
    char **v = taas_brace_expand(pattern, &E);
    if (!v) fail_msg("'%s': %s", pattern, E.message);
    size_t n = 0;
    while (v[n]) n++;
    size_t m = 0;
    while (want[m]) m++;
    for (size_t i = 0; i < n || i < m; i++)
        if (i >= n || i >= m || strcmp(v[i], want[i]))
            fail_msg("'%s' item %zu: got '%s', wanted '%s'", pattern, i, i < n ? v[i] : "(end)",
                     i < m ? want[i] : "(end)");
    taas_strv_free(v);
}

#define EXPAND(pat, ...) expand(pat, (const char *const[]){__VA_ARGS__, NULL})

static void test_brace_expand(void **state) {
    (void)state;
    EXPAND("train-{000..002}.tar", "train-000.tar", "train-001.tar", "train-002.tar");
    EXPAND("shards-{0000..0099}.tar", "shards-0000.tar", "shards-0001.tar", "shards-0002.tar",
           "shards-0003.tar", "shards-0004.tar", "shards-0005.tar", "shards-0006.tar",
           "shards-0007.tar", "shards-0008.tar", "shards-0009.tar", "shards-0010.tar",
           "shards-0011.tar", "shards-0012.tar", "shards-0013.tar", "shards-0014.tar",
           "shards-0015.tar", "shards-0016.tar", "shards-0017.tar", "shards-0018.tar",
           "shards-0019.tar", "shards-0020.tar", "shards-0021.tar", "shards-0022.tar",
           "shards-0023.tar", "shards-0024.tar", "shards-0025.tar", "shards-0026.tar",
           "shards-0027.tar", "shards-0028.tar", "shards-0029.tar", "shards-0030.tar",
           "shards-0031.tar", "shards-0032.tar", "shards-0033.tar", "shards-0034.tar",
           "shards-0035.tar", "shards-0036.tar", "shards-0037.tar", "shards-0038.tar",
           "shards-0039.tar", "shards-0040.tar", "shards-0041.tar", "shards-0042.tar",
           "shards-0043.tar", "shards-0044.tar", "shards-0045.tar", "shards-0046.tar",
           "shards-0047.tar", "shards-0048.tar", "shards-0049.tar", "shards-0050.tar",
           "shards-0051.tar", "shards-0052.tar", "shards-0053.tar", "shards-0054.tar",
           "shards-0055.tar", "shards-0056.tar", "shards-0057.tar", "shards-0058.tar",
           "shards-0059.tar", "shards-0060.tar", "shards-0061.tar", "shards-0062.tar",
           "shards-0063.tar", "shards-0064.tar", "shards-0065.tar", "shards-0066.tar",
           "shards-0067.tar", "shards-0068.tar", "shards-0069.tar", "shards-0070.tar",
           "shards-0071.tar", "shards-0072.tar", "shards-0073.tar", "shards-0074.tar",
           "shards-0075.tar", "shards-0076.tar", "shards-0077.tar", "shards-0078.tar",
           "shards-0079.tar", "shards-0080.tar", "shards-0081.tar", "shards-0082.tar",
           "shards-0083.tar", "shards-0084.tar", "shards-0085.tar", "shards-0086.tar",
           "shards-0087.tar", "shards-0088.tar", "shards-0089.tar", "shards-0090.tar",
           "shards-0091.tar", "shards-0092.tar", "shards-0093.tar", "shards-0094.tar",
           "shards-0095.tar", "shards-0096.tar", "shards-0097.tar", "shards-0098.tar",
           "shards-0099.tar");
    EXPAND("{a,b}-{1..2}", "a-1", "a-2", "b-1", "b-2");
    EXPAND("a.tar b.tar", "a.tar", "b.tar");
    EXPAND("  a.tar\n\tb.tar  ", "a.tar", "b.tar");
    EXPAND("a.tar::b-{1,2}.tar", "a.tar", "b-1.tar", "b-2.tar");
    EXPAND("http://h:80/s-{0..1}.tar", "http://h:80/s-0.tar", "http://h:80/s-1.tar");
    EXPAND("{9..11}", "9", "10", "11");
    EXPAND("{09..11}", "09", "10", "11");
    EXPAND("{3..1}", "3", "2", "1");
    EXPAND("{0..10..5}", "0", "5", "10");
    EXPAND("{10..0..5}", "10", "5", "0");
    EXPAND("{1..3..-1}", "1", "2", "3");
    EXPAND("{1..3..0}", "1", "2", "3");
    EXPAND("{-1..1}", "-1", "0", "1");
    EXPAND("{-05..05..5}", "-05", "000", "005");
    EXPAND("{0..2}", "0", "1", "2");
    EXPAND("{a..e..2}", "a", "c", "e");
    EXPAND("{C..A}", "C", "B", "A");
    EXPAND("{a,{b,c}}x", "ax", "bx", "cx");
    EXPAND("{a,b{1..2}}", "a", "b1", "b2");
    EXPAND("{abc}", "{abc}");
    EXPAND("{}", "{}");
    EXPAND("x{a}y{1,2}", "x{a}y1", "x{a}y2");
    EXPAND("{1..x}", "{1..x}");
    EXPAND("{a,}", "a", "");
    EXPAND("\\{a,b\\}", "{a,b}");
    EXPAND("{a\\,b,c}", "a,b", "c");
    EXPAND("a\\ b.tar", "a b.tar");
    EXPAND("{x,y} {1..2}", "x", "y", "1", "2");
    EXPAND("{a, b}", "a", " b");
    EXPAND("plain.tar", "plain.tar");
}

static void test_brace_errors(void **state) {
    (void)state;
    char **v = taas_brace_expand("train-{000..002.tar", &E);
    assert_null(v);
    expect_error(-1, "TaasValueError", "unclosed '{' at position 7 in 'train-{000..002.tar'",
                 "braces must pair up, as in shards-{0000..0099}.tar");
    assert_null(taas_brace_expand("a}b.tar", &E));
    expect_error(-1, "TaasValueError", "'}' without an opening '{' at position 2 in 'a}b.tar'",
                 "write \\{ or \\} for a literal brace");
    assert_null(taas_brace_expand("ok.tar {a,{b}.tar", &E));
    expect_error(-1, "TaasValueError", "unclosed '{' at position 8", "");
    assert_null(taas_brace_expand("s-{0..1000000}.tar", &E));
    expect_error(-1, "TaasValueError",
                 "'s-{0..1000000}.tar' expands to more than 1000000 names; at most 1000000 are "
                 "allowed",
                 "check the range bounds");
    assert_null(taas_brace_expand("{0..999}-{0..9999}", &E));
    expect_error(-1, "TaasValueError", "expands to more than 1000000 names", "");
    assert_null(taas_brace_expand("{0..99999999999999999999999}", &E));
    expect_error(-1, "TaasValueError", "expands to more than 1000000 names", "");
    assert_null(taas_brace_expand("", &E));
    expect_error(-1, "TaasValueError", "no names in ''", "shards-{0000..0099}.tar");
    assert_null(taas_brace_expand(" :: ", &E));
    expect_error(-1, "TaasValueError", "no names in ' :: '", "");
    taas_strv_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_whole_range_info),
        cmocka_unit_test(test_local_empty_file),
        cmocka_unit_test(test_file_urls),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_folder_and_short_read),
        cmocka_unit_test(test_unreadable_file),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_defaults_and_env),
        cmocka_unit_test(test_bad_env),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_cache_dir_unusable),
        cmocka_unit_test(test_local_never_cached),
        cmocka_unit_test(test_s3_url_errors),
        cmocka_unit_test(test_s3_endpoints),
        cmocka_unit_test(test_brace_expand),
        cmocka_unit_test(test_brace_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
