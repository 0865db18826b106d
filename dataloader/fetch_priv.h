/* Inside the fetcher: what fetch.c, fetch_http.c, fetch_ranges.c, fetch_s3.c and
 * fetch_cache.c share. Not part of the dataloader's interface. */
#ifndef TAAS_FETCH_PRIV_H
#define TAAS_FETCH_PRIV_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "fetch.h"

#define FETCH_MAX_CONNECTIONS 64
/* Part of an error body kept for the message (S3 puts its <Code> and <Message> there). */
#define FETCH_ERRBODY_MAX 4096

struct taas_fetcher {
    taas_fetch_opts o;
    char *cache_dir;            /* NULL: no cache */

    /* One connection cache, DNS cache and TLS session cache for every transfer of this
     * fetcher, whichever thread makes it: that is what lets threads reuse connections. */
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

    /* Idle easy handles; a thread takes one per request and gives it back. */
    pthread_mutex_t pool_lock;
    CURL **pool;
    int npool, cappool;

    /* Taken around cache eviction, so the threads of one fetcher do not race each other
     * over the same files (other processes sharing the folder are harmless, see
     * fetch_cache.c). */
    pthread_mutex_t cache_lock;
    atomic_int cache_warned;
    /* Objects this fetcher stored or validated (by a HEAD): their range reads are served
     * from the cache without asking the server again. */
    pthread_mutex_t marks_lock;
    struct fetch_mark **marks;

    /* S3 settings, copied from the environment when the fetcher is made. */
    char *aws_key, *aws_secret, *aws_token, *aws_region, *aws_endpoint;

    atomic_uint_least64_t requests, retries, bytes, cache_hits;
    atomic_uint_least64_t rng;  /* jitter */
};

/* ---- fetch.c ---- */
/* The URL as a message quotes it: valid UTF-8, clipped. */
const char *fetch_quote(char *dst, size_t cap, const char *url);
/* Seconds of the retry-th backoff (0-based), with jitter: in [d/2, d], d = backoff * 2^retry. */
double fetch_backoff(taas_fetcher *f, int retry);
void fetch_sleep(double seconds);

/* ---- fetch_s3.c / fetch_http.c: a request target ---- */
typedef struct fetch_target {
    const char *url;            /* as the user wrote it, for messages */
    char *http_url;             /* what is requested (an s3:// URL resolved to its endpoint) */
    char *cache_key;            /* identifies the object for the cache */
    int s3;
    char sigv4[128];            /* "aws:amz:REGION:s3" */
    char *userpwd;              /* "key:secret" */
    struct curl_slist *headers; /* x-amz-content-sha256, x-amz-security-token */
} fetch_target;

/* http(s):// or s3:// (after the scheme check in fetch.c). */
int fetch_target_init(taas_fetcher *f, fetch_target *t, const char *url, taas_error *err);
void fetch_target_free(fetch_target *t);
int fetch_s3_target(taas_fetcher *f, fetch_target *t, const char *url, taas_error *err);

/* ---- fetch_http.c ---- */
typedef struct fetch_resp {
    long status;
    char reason[64];
    int has_length;
    uint64_t length;            /* Content-Length of the final response */
    int has_range;
    uint64_t range_first, range_last, range_total; /* Content-Range: bytes first-last/total */
    int range_unsatisfied;      /* Content-Range: bytes * /total (a 416) */
    char etag[128];
    char last_modified[64];
    int accept_ranges;
    int header_seen;            /* the final response's status line has arrived */

    /* Body: into dst (exactly dst_cap bytes expected) when dst is set, else a growing buf. */
    unsigned char *dst;
    size_t dst_cap;
    unsigned char *buf;
    size_t len, cap;
    int overflow;               /* more body than dst can take */
    int alloc_failed;
    char errbody[FETCH_ERRBODY_MAX];
    size_t errlen;
    taas_fetcher *f;            /* for the byte counter */
} fetch_resp;

void fetch_resp_reset(fetch_resp *r);  /* keeps dst/dst_cap/buf memory, forgets the rest */
void fetch_resp_free(fetch_resp *r);   /* frees buf */

CURL *fetch_handle_get(taas_fetcher *f, taas_error *err);
void fetch_handle_put(taas_fetcher *f, CURL *h);
/* Sets every option of one request on h: method (NOBODY for HEAD), range ("first-last" or
 * NULL), timeouts, signing, callbacks into r. */
int fetch_handle_setup(taas_fetcher *f, CURL *h, const fetch_target *t, int head,
                       const char *range, fetch_resp *r, char *errbuf, taas_error *err);

/* What to do after an attempt. */
enum { FETCH_DONE, FETCH_RETRY, FETCH_FAIL };
int fetch_classify(CURLcode rc, const fetch_resp *r);
/* Fills err for a failed attempt: "GET url: 404 Not Found", "connection refused", ...;
 * attempts > 1 is said in the message. */
int fetch_fail(taas_fetcher *f, const fetch_target *t, const char *method, CURLcode rc,
               CURL *h, const char *errbuf, const fetch_resp *r, int attempts, taas_error *err);

/* One request with retries. head: HEAD instead of GET. range: "first-last" or NULL. Returns
 * 0 with a 2xx response in r (body as r says), -1 with err. */
int fetch_http_request(taas_fetcher *f, const fetch_target *t, int head, const char *range,
                       fetch_resp *r, taas_error *err);
/* Size and validator of an object (HEAD; a one-byte GET where HEAD is refused). */
int fetch_http_info(taas_fetcher *f, const fetch_target *t, taas_object_info *out,
                    taas_error *err);
/* The validator the cache keys on: the ETag, else Last-Modified ("" if neither). */
void fetch_validator(const fetch_resp *r, char *out, size_t cap);

/* ---- fetch_ranges.c ---- */
/* The whole object. The first request asks for its first range_min bytes, so an object
 * smaller than that takes one request; for a larger one the answer's Content-Range gives the
 * size, and the other parts are fetched in parallel. The validator of what was read goes
 * into validator (cap bytes). */
int fetch_http_whole(taas_fetcher *f, const fetch_target *t, taas_blob *out, char *validator,
                     size_t cap, taas_error *err);
/* Bytes [off, off + len) into dst, in parallel parts when len >= range_min. */
int fetch_http_range(taas_fetcher *f, const fetch_target *t, uint64_t off, size_t len,
                     unsigned char *dst, taas_error *err);

/* ---- fetch_cache.c ---- */
/* 1 and the entry's validator and size when key is cached, 0 when not. */
int fetch_cache_peek(taas_fetcher *f, const char *key, char *validator, size_t cap,
                     uint64_t *size);
/* 0 and the object when the entry is still (key, validator, size); 1 when it is gone or
 * damaged (then it is removed); -1 with err when it cannot be read. */
int fetch_cache_read(taas_fetcher *f, const char *key, const char *validator, uint64_t size,
                     taas_blob *out, taas_error *err);
/* Best effort: a cache that cannot be written is said once on stderr, never an error.
 * 1 when the object was stored. */
int fetch_cache_store(taas_fetcher *f, const char *key, const char *validator,
                       const unsigned char *data, size_t len);
void fetch_cache_remove(taas_fetcher *f, const char *key);
/* Remembers that the cached key is this version of the object (stored or validated now). */
void fetch_cache_mark(taas_fetcher *f, const char *key, const char *validator, uint64_t size);
/* Bytes [off, off + len) of a marked object from its cached copy: 0, or 1 when it is not
 * marked, no longer in the cache, or not that version (then ask the server). */
int fetch_cache_range(taas_fetcher *f, const char *key, uint64_t off, size_t len, void *dst);
void fetch_cache_close(taas_fetcher *f);
/* Makes the folder; -1 with err when it cannot be made. */
int fetch_cache_open(taas_fetcher *f, taas_error *err);

#endif
