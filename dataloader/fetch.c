/* The fetcher: options, the choice of source by URL, local files, counters. HTTP and S3 are
 * in fetch_http.c, fetch_ranges.c and fetch_s3.c; the cache in fetch_cache.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errnames.h"
#include "fetch_priv.h"
#include "utf8.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

/* ---- options ---- */

static int parse_count(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* "8388608", "8M", "8MiB", "10G", "512k": binary multiples. */
static int parse_bytes(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (*s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    uint64_t mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = (uint64_t)1 << 10; end++; break;
    case 'M': mul = (uint64_t)1 << 20; end++; break;
    case 'G': mul = (uint64_t)1 << 30; end++; break;
    case 'T': mul = (uint64_t)1 << 40; end++; break;
    default: break;
    }
    if (mul > 1 && *end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    while (*end && isspace((unsigned char)*end)) end++;
    if (*end || (v && mul > UINT64_MAX / v)) return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

typedef struct env_opt {
    const char *name;
    const char *allowed;  /* for the message */
} env_opt;

static const env_opt ENV_OPTS[] = {
    {"TAAS_FETCH_CONNECTIONS", "a whole number from 1 to 64"},
    {"TAAS_FETCH_RANGE_MIN", "a size in bytes such as 8388608, 8M or 64MiB"},
    {"TAAS_FETCH_RETRIES", "a whole number from 0 to 100"},
    {"TAAS_FETCH_BACKOFF", "seconds from 0 to 60, such as 0.2"},
    {"TAAS_FETCH_CONNECT_TIMEOUT", "seconds from 0.001 to 3600, such as 10"},
    {"TAAS_FETCH_LOW_SPEED_TIMEOUT", "seconds from 1 to 86400, such as 30"},
    {"TAAS_CACHE_LIMIT", "a size in bytes such as 10G or 500MiB (0: store nothing)"},
};

/* Applies environment variable i to o; -1 when its value does not parse. */
static int env_apply(int i, const char *v, taas_fetch_opts *o) {
    long n;
    double d;
    uint64_t b;
    switch (i) {
    case 0: if (parse_count(v, 1, FETCH_MAX_CONNECTIONS, &n)) return -1; o->connections = (int)n; return 0;
    case 1: if (parse_bytes(v, &b) || b == 0 || b > SIZE_MAX) return -1; o->range_min = (size_t)b; return 0;
    case 2: if (parse_count(v, 0, 100, &n)) return -1; o->retries = (int)n; return 0;
    case 3: if (parse_seconds(v, 0, 60, &d)) return -1; o->backoff_s = d; return 0;
    case 4: if (parse_seconds(v, 0.001, 3600, &d)) return -1; o->connect_timeout_s = d; return 0;
    case 5: if (parse_seconds(v, 1, 86400, &d)) return -1; o->low_speed_timeout_s = d; return 0;
    case 6: if (parse_bytes(v, &b)) return -1; o->cache_limit = b; return 0;
    default: return -1;
    }
}

void taas_fetch_opts_default(taas_fetch_opts *o) {
    memset(o, 0, sizeof *o);
    o->connections = 4;
    o->range_min = (size_t)(8 * MIB);
    o->retries = 4;
    o->backoff_s = 0.2;
    o->connect_timeout_s = 10;
    o->low_speed_timeout_s = 30;
    o->cache_dir = NULL;
    o->cache_limit = 10 * GIB;
    /* A malformed value is left out here and reported by taas_fetcher_new. */
    for (int i = 0; i < (int)(sizeof ENV_OPTS / sizeof ENV_OPTS[0]); i++) {
        const char *v = getenv(ENV_OPTS[i].name);
        if (v && *v) (void)env_apply(i, v, o);
    }
}

static int check_env(taas_error *err) {
    for (int i = 0; i < (int)(sizeof ENV_OPTS / sizeof ENV_OPTS[0]); i++) {
        const char *v = getenv(ENV_OPTS[i].name);
        taas_fetch_opts scratch;
        if (!v || !*v || env_apply(i, v, &scratch) == 0) continue;
        char q[160];
        taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0},
                       "environment variable %s='%s' is not valid", ENV_OPTS[i].name,
                       taas_utf8_clip(q, sizeof q, v, strlen(v), 40));
        taas_error_hint(err, "set %s to %s, or unset it for the default", ENV_OPTS[i].name,
                        ENV_OPTS[i].allowed);
        return -1;
    }
    return 0;
}

static int check_opts(const taas_fetch_opts *o, taas_error *err) {
    const char *what = NULL;
    char val[64] = "";
    if (o->connections < 1 || o->connections > FETCH_MAX_CONNECTIONS) {
        what = "connections (1 to 64)";
        snprintf(val, sizeof val, "%d", o->connections);
    } else if (o->range_min == 0) {
        what = "range_min (at least 1 byte)";
        snprintf(val, sizeof val, "0");
    } else if (o->retries < 0 || o->retries > 100) {
        what = "retries (0 to 100)";
        snprintf(val, sizeof val, "%d", o->retries);
    } else if (!(o->backoff_s >= 0 && o->backoff_s <= 60)) {
        what = "backoff_s (0 to 60 seconds)";
        snprintf(val, sizeof val, "%g", o->backoff_s);
    } else if (!(o->connect_timeout_s >= 0.001 && o->connect_timeout_s <= 3600)) {
        what = "connect_timeout_s (0.001 to 3600 seconds)";
        snprintf(val, sizeof val, "%g", o->connect_timeout_s);
    } else if (!(o->low_speed_timeout_s >= 1 && o->low_speed_timeout_s <= 86400)) {
        what = "low_speed_timeout_s (1 to 86400 seconds)";
        snprintf(val, sizeof val, "%g", o->low_speed_timeout_s);
    }
    if (!what) return 0;
    taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0},
                   "fetch option %s is out of range: %s", what, val);
    taas_error_hint(err, "start from taas_fetch_opts_default() and change only what you need");
    return -1;
}

/* ---- the fetcher ---- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user) {
    taas_fetcher *f = user;
    pthread_mutex_lock(&f->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user) {
    taas_fetcher *f = user;
    pthread_mutex_unlock(&f->share_locks[data]);
}

static char *env_dup(const char *name) {
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

static char *default_cache_dir(void) {
    const char *v = getenv("TAAS_CACHE_DIR");
    if (v) return *v ? strdup(v) : NULL;
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    size_t n = strlen(home) + sizeof "/.cache/taas";
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/.cache/taas", home);
    return p;
}

taas_fetcher *taas_fetcher_new(const taas_fetch_opts *o, taas_error *err) {
    taas_fetch_opts def;
    if (!o) {
        taas_fetch_opts_default(&def);
        o = &def;
    }
    if (check_env(err) || check_opts(o, err)) return NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "libcurl failed to start");
        taas_error_hint(err, "check the libcurl installation (libcurl4)");
        return NULL;
    }
    taas_fetcher *f = calloc(1, sizeof *f);
    if (!f) {
        curl_global_cleanup();
        taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0}, "out of memory");
        return NULL;
    }
    f->o = *o;
    f->o.cache_dir = NULL;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&f->share_locks[i], NULL);
    pthread_mutex_init(&f->pool_lock, NULL);
    pthread_mutex_init(&f->cache_lock, NULL);
    pthread_mutex_init(&f->marks_lock, NULL);
    atomic_init(&f->cache_warned, 0);
    atomic_init(&f->requests, 0);
    atomic_init(&f->retries, 0);
    atomic_init(&f->bytes, 0);
    atomic_init(&f->cache_hits, 0);
    atomic_init(&f->rng, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)f);

    f->share = curl_share_init();
    if (!f->share ||
        curl_share_setopt(f->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
        curl_share_setopt(f->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
        curl_share_setopt(f->share, CURLSHOPT_USERDATA, f) != CURLSHE_OK ||
        curl_share_setopt(f->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
        curl_share_setopt(f->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
        curl_share_setopt(f->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
        taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0},
                       "libcurl cannot share connections between threads");
        taas_error_hint(err, "taas needs libcurl 7.57 or newer (Debian 12 has 7.88)");
        taas_fetcher_free(f);
        return NULL;
    }
    f->aws_key = env_dup("AWS_ACCESS_KEY_ID");
    f->aws_secret = env_dup("AWS_SECRET_ACCESS_KEY");
    f->aws_token = env_dup("AWS_SESSION_TOKEN");
    f->aws_region = env_dup("AWS_REGION");
    if (!f->aws_region) f->aws_region = env_dup("AWS_DEFAULT_REGION");
    f->aws_endpoint = env_dup("AWS_ENDPOINT_URL_S3");
    if (!f->aws_endpoint) f->aws_endpoint = env_dup("AWS_ENDPOINT_URL");

    f->cache_dir = o->cache_dir ? (*o->cache_dir ? strdup(o->cache_dir) : NULL)
                                : default_cache_dir();
    if (f->cache_dir && fetch_cache_open(f, err)) {
        taas_fetcher_free(f);
        return NULL;
    }
    return f;
}

void taas_fetcher_free(taas_fetcher *f) {
    if (!f) return;
    /* Easy handles first: the share refuses to go while handles still use it. */
    for (int i = 0; i < f->npool; i++) curl_easy_cleanup(f->pool[i]);
    free(f->pool);
    if (f->share) curl_share_cleanup(f->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&f->share_locks[i]);
    pthread_mutex_destroy(&f->pool_lock);
    pthread_mutex_destroy(&f->cache_lock);
    fetch_cache_close(f);
    pthread_mutex_destroy(&f->marks_lock);
    free(f->aws_key);
    free(f->aws_secret);
    free(f->aws_token);
    free(f->aws_region);
    free(f->aws_endpoint);
    free(f->cache_dir);
    free(f);
    curl_global_cleanup();
}

void taas_blob_free(taas_blob *b) {
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

void taas_fetch_stats_get(taas_fetcher *f, taas_fetch_stats *out) {
    out->requests = atomic_load(&f->requests);
    out->retries = atomic_load(&f->retries);
    out->bytes = atomic_load(&f->bytes);
    out->cache_hits = atomic_load(&f->cache_hits);
}

/* ---- shared helpers ---- */

const char *fetch_quote(char *dst, size_t cap, const char *url) {
    return taas_utf8_clip(dst, cap, url, strlen(url), 300);
}

double fetch_backoff(taas_fetcher *f, int retry) {
    uint64_t z = atomic_fetch_add(&f->rng, 0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (double)(z >> 11) / (double)(1ull << 53);
    double d = f->o.backoff_s * (double)(1ull << (retry < 20 ? retry : 20));
    if (d > 30) d = 30;
    return d * (0.5 + 0.5 * u);
}

void fetch_sleep(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* ---- choosing the source ---- */

enum { SRC_LOCAL, SRC_HTTP, SRC_S3 };

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int bad_url(const char *url, const char *why, const char *hint, taas_error *err) {
    char q[400];
    taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "%s: %s", fetch_quote(q, sizeof q, url),
                   why);
    taas_error_hint(err, "%s", hint);
    return -1;
}

/* Which source url names; for a local one, *path gets the file's path (malloc'd). */
static int classify_url(const char *url, char **path, taas_error *err) {
    *path = NULL;
    if (!url || !*url) {
        taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "empty path or URL");
        taas_error_hint(err, "name a file, a file://, http(s):// or s3://bucket/key URL");
        return -1;
    }
    if (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8)) return SRC_HTTP;
    if (!strncasecmp(url, "s3://", 5)) return SRC_S3;
    if (!strncasecmp(url, "file://", 7)) {
        const char *p = url + 7;
        if (!strncasecmp(p, "localhost/", 10)) p += 9;
        if (*p != '/')
            return bad_url(url, "a file:// URL must name an absolute path on this machine",
                           "write file:///absolute/path (three slashes) or just the path", err);
        char *out = malloc(strlen(p) + 1), *o = out;
        if (!out) return bad_url(url, "out of memory", "", err);
        for (; *p; p++) {
            if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
                *o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
                p += 2;
            } else if (*p == '?' || *p == '#') {
                break;
            } else {
                *o++ = *p;
            }
        }
        *o = '\0';
        if (strlen(out) != (size_t)(o - out)) {
            free(out);
            return bad_url(url, "the path contains a NUL byte (%00)", "remove the %00", err);
        }
        *path = out;
        return SRC_LOCAL;
    }
    const char *colon = strstr(url, "://");
    if (colon) {
        int scheme = 1;
        for (const char *c = url; c < colon; c++)
            if (!isalnum((unsigned char)*c) && *c != '+' && *c != '-' && *c != '.') scheme = 0;
        if (scheme && colon > url) {
            char why[96];
            snprintf(why, sizeof why, "unsupported URL scheme '%.*s'",
                     (int)(colon - url < 20 ? colon - url : 20), url);
            return bad_url(url, why,
                           "use a local path, file://, http://, https:// or s3://bucket/key",
                           err);
        }
    }
    *path = strdup(url);
    if (!*path) return bad_url(url, "out of memory", "", err);
    return SRC_LOCAL;
}

static int local_error(const char *url, const char *what, int e, taas_error *err) {
    char q[400], cwd[PATH_MAX];
    taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "cannot %s %s: %s", what,
                   fetch_quote(q, sizeof q, url), strerror(e));
    if (e == ENOENT || e == ENOTDIR) {
        if (url[0] != '/' && strncasecmp(url, "file:", 5) && getcwd(cwd, sizeof cwd))
            taas_error_hint(err, "check the path: relative paths start from the working "
                                 "directory %s", cwd);
        else
            taas_error_hint(err, "check the path: no such file exists on this machine");
    } else if (e == EACCES || e == EPERM) {
        taas_error_hint(err, "this user may not read the file: check its permissions");
    } else if (e == EISDIR) {
        taas_error_hint(err, "name a file inside the folder, not the folder itself");
    } else {
        taas_error_hint(err, "check that the file is readable");
    }
    return -1;
}

/* Returns the descriptor with *st filled, or -1 (said outright, not through local_error's
 * value: the analyzer does not follow it, and the callers read *st when this is >= 0). */
static int local_open(const char *url, const char *path, struct stat *st, taas_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        local_error(url, "open", errno, err);
        return -1;
    }
    if (fstat(fd, st) < 0) {
        int e = errno;
        close(fd);
        local_error(url, "stat", e, err);
        return -1;
    }
    if (S_ISDIR(st->st_mode)) {
        close(fd);
        local_error(url, "read", EISDIR, err);
        return -1;
    }
    return fd;
}

static int short_read(const char *url, uint64_t off, uint64_t len, uint64_t have,
                      taas_error *err) {
    char q[400];
    taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0},
                   "short read from %s: asked for bytes %llu to %llu, the object has %llu bytes",
                   fetch_quote(q, sizeof q, url), (unsigned long long)off,
                   (unsigned long long)(off + len), (unsigned long long)have);
    taas_error_hint(err, "the file is shorter than expected: it may be truncated or still being "
                         "written");
    return -1;
}

static int pread_full(taas_fetcher *f, int fd, const char *url, unsigned char *dst, uint64_t off,
                      size_t len, uint64_t size, taas_error *err) {
    size_t done = 0;
    while (done < len) {
        size_t want = len - done > ((size_t)1 << 30) ? (size_t)1 << 30 : len - done;
        ssize_t n = pread(fd, dst + done, want, (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return local_error(url, "read", errno, err);
        if (n == 0) return short_read(url, off, len, off + done > size ? off + done : size, err);
        done += (size_t)n;
    }
    atomic_fetch_add(&f->bytes, len);
    return 0;
}

static int local_fetch(taas_fetcher *f, const char *url, const char *path, taas_blob *out,
                       taas_error *err) {
    struct stat st;
    int fd = local_open(url, path, &st, err);
    if (fd < 0) return -1;
    atomic_fetch_add(&f->requests, 1);
    if ((uint64_t)st.st_size > SIZE_MAX / 2) {
        close(fd);
        return short_read(url, 0, SIZE_MAX, (uint64_t)st.st_size, err);
    }
    size_t n = (size_t)st.st_size;
    out->data = malloc(n ? n : 1);
    if (!out->data) {
        close(fd);
        char q[400];
        taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0},
                       "out of memory reading %s (%zu bytes)", fetch_quote(q, sizeof q, url), n);
        taas_error_hint(err, "use fewer decode threads or smaller files");
        return -1;
    }
    int rc = pread_full(f, fd, url, out->data, 0, n, n, err);
    close(fd);
    if (rc) {
        taas_blob_free(out);
        return -1;
    }
    out->len = n;
    return 0;
}

/* ---- the interface ---- */

int taas_fetch(taas_fetcher *f, const char *url, taas_blob *out, taas_error *err) {
    taas_error_clear(err); /* the parts below test it to keep the first reason */
    out->data = NULL;
    out->len = 0;
    char *path;
    int src = classify_url(url, &path, err);
    if (src < 0) return -1;
    if (src == SRC_LOCAL) {
        int rc = local_fetch(f, url, path, out, err);
        free(path);
        return rc;
    }
    fetch_target t;
    if (fetch_target_init(f, &t, url, err)) return -1;
    int rc = -1;
    char cached[128];
    uint64_t cached_size = 0;
    if (f->cache_dir && f->o.cache_limit > 0 &&
        fetch_cache_peek(f, t.cache_key, cached, sizeof cached, &cached_size)) {
        /* One HEAD says whether the copy is still the object. */
        taas_object_info info;
        if (fetch_http_info(f, &t, &info, err)) goto done;
        if (info.etag[0] && !strcmp(info.etag, cached) && info.size == cached_size) {
            int c = fetch_cache_read(f, t.cache_key, cached, cached_size, out, err);
            if (c < 0) goto done;
            if (c == 0) {
                atomic_fetch_add(&f->cache_hits, 1);
                fetch_cache_mark(f, t.cache_key, cached, cached_size);
                rc = 0;
                goto done;
            }
        } else {
            fetch_cache_remove(f, t.cache_key);
        }
    }
    char got[128] = "";
    if (fetch_http_whole(f, &t, out, got, sizeof got, err)) goto done;
    if (f->cache_dir && f->o.cache_limit > 0 && got[0]) {
        if (fetch_cache_store(f, t.cache_key, got, out->data, out->len))
            fetch_cache_mark(f, t.cache_key, got, out->len);
    }
    rc = 0;
done:
    fetch_target_free(&t);
    return rc;
}

int taas_fetch_info(taas_fetcher *f, const char *url, taas_object_info *out, taas_error *err) {
    taas_error_clear(err);
    memset(out, 0, sizeof *out);
    char *path;
    int src = classify_url(url, &path, err);
    if (src < 0) return -1;
    if (src == SRC_LOCAL) {
        struct stat st;
        int fd = local_open(url, path, &st, err);
        free(path);
        if (fd < 0) return -1;
        close(fd);
        atomic_fetch_add(&f->requests, 1);
        out->size = (uint64_t)st.st_size;
        /* As nginx makes one: modification time and size. */
        snprintf(out->etag, sizeof out->etag, "\"%llx.%09ld-%llx\"",
                 (unsigned long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec,
                 (unsigned long long)st.st_size);
        return 0;
    }
    fetch_target t;
    if (fetch_target_init(f, &t, url, err)) return -1;
    int rc = fetch_http_info(f, &t, out, err);
    fetch_target_free(&t);
    return rc;
}

int taas_fetch_range(taas_fetcher *f, const char *url, uint64_t off, size_t len, void *dst,
                     taas_error *err) {
    taas_error_clear(err);
    char *path;
    int src = classify_url(url, &path, err);
    if (src < 0) return -1;
    if (off > UINT64_MAX - len) {
        free(path);
        return short_read(url, off, len, 0, err);
    }
    if (src == SRC_LOCAL) {
        struct stat st;
        int fd = local_open(url, path, &st, err);
        free(path);
        if (fd < 0) return -1;
        atomic_fetch_add(&f->requests, 1);
        int rc = 0;
        if (off + len > (uint64_t)st.st_size)
            rc = short_read(url, off, len, (uint64_t)st.st_size, err);
        else
            rc = pread_full(f, fd, url, dst, off, len, (uint64_t)st.st_size, err);
        close(fd);
        return rc;
    }
    if (len == 0) return 0;
    fetch_target t;
    if (fetch_target_init(f, &t, url, err)) return -1;
    int rc;
    if (f->cache_dir && fetch_cache_range(f, t.cache_key, off, len, dst) == 0) {
        atomic_fetch_add(&f->cache_hits, 1);
        rc = 0;
    } else {
        rc = fetch_http_range(f, &t, off, len, dst, err);
    }
    fetch_target_free(&t);
    return rc;
}
