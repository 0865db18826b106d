/* Helpers of the fetch tests: temporary folders, files, and real servers (nginx, the fault
 * server, the S3 server from tests/lib) started as child processes that die with the test
 * (PR_SET_PDEATHSIG) and are stopped by it, within bounded time. */
#ifndef TEST_FETCH_UTIL_H
#define TEST_FETCH_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fetch.h"
#include "utf8.h"

#define TU_UNUSED __attribute__((unused))

typedef struct tu_server {
    pid_t pid;
    int port;
    char dir[256];  /* the server's state folder (logs, portfile) */
} tu_server;

TU_UNUSED static const char *tu_source_dir(void) {
    const char *s = getenv("TAAS_SOURCE_DIR");
    if (s && *s) return s;
    /* __FILE__ is tests/unit/test_fetch_util.h under the source root */
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s", __FILE__);
    char *p = strstr(buf, "/tests/unit/");
    if (p) *p = '\0';
    return buf;
}

TU_UNUSED static int tu_rm_one(const char *path, const struct stat *st, int flag,
                               struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

TU_UNUSED static void tu_rmtree(const char *dir) {
    if (dir && *dir) nftw(dir, tu_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdtemp under /tmp; dst gets the path. */
TU_UNUSED static int tu_tmpdir(char *dst, size_t cap, const char *tag) {
    snprintf(dst, cap, "/tmp/taas-%s-XXXXXX", tag);
    return mkdtemp(dst) ? 0 : -1;
}

TU_UNUSED static int tu_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = fwrite(data, 1, len, f);
    return fclose(f) == 0 && n == len ? 0 : -1;
}

/* Deterministic bytes: byte i of object `seed`. */
TU_UNUSED static unsigned char tu_byte(uint64_t seed, uint64_t i) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 29;
    z *= 0x94D049BB133111EBull;
    return (unsigned char)(z >> 56);
}

TU_UNUSED static unsigned char *tu_pattern(uint64_t seed, size_t len) {
    unsigned char *p = malloc(len ? len : 1);
    for (size_t i = 0; p && i < len; i++) p[i] = tu_byte(seed, i);
    return p;
}

TU_UNUSED static int tu_connectable(int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    int ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

/* A loopback port nothing listens on (bound, then closed). */
TU_UNUSED static int tu_dead_port(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t n = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &n);
    close(s);
    return ntohs(a.sin_port);
}

TU_UNUSED static void tu_print_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) fprintf(stderr, "  | %s", line);
    fclose(f);
}

/* Starts argv (its output to dir/server.log) and waits until it has written its port to
 * portfile and accepts connections; -1 (with the log printed) when it does not within
 * timeout_s. */
TU_UNUSED static int tu_server_start(tu_server *s, char *const argv[], const char *portfile,
                                     double timeout_s) {
    char log[300];
    snprintf(log, sizeof log, "%s/server.log", s->dir);
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul >= 0) dup2(nul, 0);
        execvp(argv[0], argv);
        _exit(127);
    }
    s->pid = pid;
    s->port = 0;
    double deadline = taas_now() + timeout_s;
    while (taas_now() < deadline) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "server %s exited before it was ready:\n", argv[0]);
            tu_print_file(log);
            s->pid = 0;
            return -1;
        }
        if (!s->port) {
            FILE *f = fopen(portfile, "r");
            if (f) {
                if (fscanf(f, "%d", &s->port) != 1) s->port = 0;
                fclose(f);
            }
        }
        if (s->port && tu_connectable(s->port)) return 0;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "server %s was not ready after %.0f s:\n", argv[0], timeout_s);
    tu_print_file(log);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
    return -1;
}

/* SIGTERM, then SIGKILL after 5 s; always reaps. */
TU_UNUSED static void tu_server_stop(tu_server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    double deadline = taas_now() + 5;
    int st;
    while (waitpid(s->pid, &st, WNOHANG) == 0) {
        if (taas_now() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    s->pid = 0;
}

/* tests/lib/faultserver.py serving root; extra: more arguments (NULL-terminated) or NULL. */
TU_UNUSED static int tu_faultserver(tu_server *s, const char *root, const char *const *extra) {
    char script[4200], portfile[300];
    snprintf(script, sizeof script, "%s/tests/lib/faultserver.py", tu_source_dir());
    snprintf(portfile, sizeof portfile, "%s/port", s->dir);
    char *argv[32] = {"/usr/bin/python3", script, "--root", (char *)root, "--portfile", portfile,
                      "--stall", "5"};
    int n = 8;
    for (int i = 0; extra && extra[i] && n < 30; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return tu_server_start(s, argv, portfile, 20);
}

TU_UNUSED static int tu_nginx_start(tu_server *s, const char *root, int tls) {
    char script[4200], portfile[300], state[300];
    snprintf(script, sizeof script, "%s/tests/lib/nginx.py", tu_source_dir());
    snprintf(portfile, sizeof portfile, "%s/port", s->dir);
    snprintf(state, sizeof state, "%s/nginx", s->dir);
    char *argv[] = {"/usr/bin/python3", script, "--root", (char *)root, "--state", state,
                    "--portfile", portfile, tls ? "--tls" : NULL, NULL};
    return tu_server_start(s, argv, portfile, 20);
}

/* nginx serving root over HTTP; its access log is s->dir/nginx/access.log. */
TU_UNUSED static int tu_nginx(tu_server *s, const char *root) {
    return tu_nginx_start(s, root, 0);
}

/* The same over HTTPS, with a self-signed certificate. */
TU_UNUSED static int tu_nginx_tls(tu_server *s, const char *root) {
    return tu_nginx_start(s, root, 1);
}

/* The S3 server; installs its npm package on first use (hence the long timeout). */
TU_UNUSED static int tu_s3server(tu_server *s, const char *bucket) {
    char script[4200], portfile[300], data[300];
    snprintf(script, sizeof script, "%s/tests/lib/s3server/s3server.sh", tu_source_dir());
    snprintf(portfile, sizeof portfile, "%s/port", s->dir);
    snprintf(data, sizeof data, "%s/data", s->dir);
    char *argv[] = {"/bin/bash", script, "--dir", data, "--portfile", portfile,
                    "--bucket", (char *)bucket, NULL};
    return tu_server_start(s, argv, portfile, 240);
}

/* The AWS environment of a fetcher made next: the S3 test server on port, key and secret. */
TU_UNUSED static void tu_s3_env(int port, const char *key, const char *secret) {
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", key, 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    setenv("AWS_REGION", "us-east-1", 1);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_ENDPOINT_URL_S3");
}

/* ---- plain libcurl requests for setting up and inspecting servers ---- */

typedef struct tu_body {
    char *data;
    size_t len;
} tu_body;

TU_UNUSED static size_t tu_collect(char *p, size_t size, size_t n, void *user) {
    tu_body *b = user;
    char *q = realloc(b->data, b->len + size * n + 1);
    if (!q) return 0;
    memcpy(q + b->len, p, size * n);
    b->data = q;
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* GET url; the body (malloc'd, NUL-terminated) or NULL. */
TU_UNUSED static char *tu_http_get(const char *url) {
    CURL *h = curl_easy_init();
    tu_body b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    long status = 0;
    if (curl_easy_perform(h) != CURLE_OK ||
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status != 200) {
        free(b.data);
        b.data = NULL;
    }
    curl_easy_cleanup(h);
    return b.data;
}

/* A signed S3 request (PUT with a body, or with body NULL an empty one); the status. */
TU_UNUSED static long tu_s3_put(const char *url, const char *userpwd, const void *body,
                                size_t len) {
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    tu_body sink = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? (const char *)body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
    curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) fprintf(stderr, "PUT %s: %ld %s\n", url, status, sink.data ? sink.data : "");
    free(sink.data);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return status;
}

/* ---- shared by the tests of fetching over HTTP and S3 ---- */

/* rc is -1 and e is a TaasIOError whose message contains msg and whose hint contains hint. */
TU_UNUSED static void tu_expect_io_error(const taas_error *e, int rc, const char *msg,
                                         const char *hint) {
    if (rc != -1) fail_msg("succeeded; wanted '%s'", msg);
    if (strcmp(e->ename, "TaasIOError") || !strstr(e->message, msg) || !strstr(e->hint, hint))
        fail_msg("gave %s: %s\nhint: %s\nwanted '%s', hint '%s'", e->ename, e->message, e->hint,
                 msg, hint);
    assert_true(taas_utf8_valid(e->message, strlen(e->message)));
}

/* A fetcher without a cache, with short timeouts and backoff, for the HTTP tests. */
TU_UNUSED static taas_fetcher *tu_http_fetcher(taas_error *e, int connections, size_t range_min,
                                              int retries) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = "";
    o.connections = connections;
    o.range_min = range_min;
    o.retries = retries;
    o.backoff_s = 0.01;
    o.connect_timeout_s = 5;
    o.low_speed_timeout_s = 1;
    taas_fetcher *f = taas_fetcher_new(&o, e);
    if (!f) fail_msg("taas_fetcher_new: %s", e->message);
    return f;
}

/* Fetches url, which must succeed and hold the len bytes of want. */
TU_UNUSED static void tu_fetch_equal(taas_fetcher *f, const char *url, taas_error *e,
                                     const unsigned char *want, size_t len) {
    taas_blob b;
    if (taas_fetch(f, url, &b, e)) fail_msg("%s", e->message);
    assert_int_equal(b.len, len);
    assert_memory_equal(b.data, want, len);
    taas_blob_free(&b);
}

TU_UNUSED static void tu_url_of(char *dst, size_t cap, const tu_server *s, const char *path) {
    snprintf(dst, cap, "http://127.0.0.1:%d%s", s->port, path);
}

/* The fault server's counters. */
TU_UNUSED static json_t *tu_stats(const tu_server *s) {
    char url[128];
    tu_url_of(url, sizeof url, s, "/_stats");
    char *body = tu_http_get(url);
    assert_non_null(body);
    json_t *j = json_loads(body, 0, NULL);
    free(body);
    assert_non_null(j);
    return j;
}

/* How many requests the fault server saw for uri. */
TU_UNUSED static long tu_per_uri(const tu_server *s, const char *uri) {
    json_t *j = tu_stats(s);
    json_t *v = json_object_get(json_object_get(j, "per_uri"), uri);
    long n = v ? (long)json_integer_value(v) : 0;
    json_decref(j);
    return n;
}

/* s->dir is root/name, made. */
TU_UNUSED static void tu_server_dir(tu_server *s, const char *root, const char *name) {
    snprintf(s->dir, sizeof s->dir, "%s/%s", root, name);
    mkdir(s->dir, 0755);
}

/* Makes the folder root/data (its path in data) with small.bin (pattern 7, small bytes) and
 * big.bin (pattern 8, big bytes); *small_data and *big_data get the patterns. */
TU_UNUSED static void tu_small_big(const char *root, char *data, size_t cap, size_t small,
                                   unsigned char **small_data, size_t big,
                                   unsigned char **big_data) {
    char p[300];
    snprintf(data, cap, "%s/data", root);
    mkdir(data, 0755);
    *small_data = tu_pattern(7, small);
    *big_data = tu_pattern(8, big);
    snprintf(p, sizeof p, "%s/small.bin", data);
    tu_write(p, *small_data, small);
    snprintf(p, sizeof p, "%s/big.bin", data);
    tu_write(p, *big_data, big);
}

/* The end of a group whose servers are stopped: root removed, the patterns freed, libcurl
 * cleaned up. */
TU_UNUSED static int tu_cleanup(const char *root, unsigned char *small_data,
                                unsigned char *big_data) {
    tu_rmtree(root);
    free(small_data);
    free(big_data);
    curl_global_cleanup();
    return 0;
}

#endif
