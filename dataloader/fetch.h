/* Reading objects from where datasets live: local paths and file://, http(s):// and
 * s3://bucket/key (AWS SigV4 through libcurl). One fetcher is shared by the threads of a
 * loader: it is thread-safe, reuses connections, retries what can be retried, and keeps a
 * local cache of fetched objects keyed by URL and ETag. */
#ifndef TAAS_FETCH_H
#define TAAS_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct taas_fetch_opts {
    int connections;          /* parallel range requests for one large object (default 4) */
    size_t range_min;         /* objects at least this big are fetched in ranges (8 MiB) */
    int retries;              /* attempts after the first, on 5xx, timeouts, resets (4) */
    double backoff_s;         /* first retry delay, doubled each time, jittered (0.2 s) */
    double connect_timeout_s; /* (10 s) */
    double low_speed_timeout_s; /* abort a transfer that stalls below 1 KiB/s this long (30 s) */
    const char *cache_dir;    /* NULL = $TAAS_CACHE_DIR, else ~/.cache/taas; "" = no cache */
    uint64_t cache_limit;     /* bytes; least recently used objects go first (10 GiB) */
} taas_fetch_opts;

/* Defaults as documented above (environment variables may override, see docs/data.md). */
void taas_fetch_opts_default(taas_fetch_opts *o);

typedef struct taas_fetcher taas_fetcher;

taas_fetcher *taas_fetcher_new(const taas_fetch_opts *o, taas_error *err);
void taas_fetcher_free(taas_fetcher *f);

/* A whole object in memory. Owned by the caller: taas_blob_free. */
typedef struct taas_blob {
    unsigned char *data;
    size_t len;
} taas_blob;
void taas_blob_free(taas_blob *b);

/* Object metadata: size and ETag ("" when the source has none, e.g. a local file uses
 * size + mtime instead). */
typedef struct taas_object_info {
    uint64_t size;
    char etag[128];
} taas_object_info;

/* Reads the whole object at url (a path, file://, http(s)://, s3://). Errors are
 * TaasIOError naming the URL: missing file, 4xx with the status (403: credentials; 404:
 * not found), 5xx after the retries, connection refused, timeouts, a short read. */
int taas_fetch(taas_fetcher *f, const char *url, taas_blob *out, taas_error *err);
int taas_fetch_info(taas_fetcher *f, const char *url, taas_object_info *out, taas_error *err);
/* Bytes [off, off + len) of the object into dst. */
int taas_fetch_range(taas_fetcher *f, const char *url, uint64_t off, size_t len, void *dst,
                     taas_error *err);

/* Counters since the fetcher was made, for benchmarks and progress lines. */
typedef struct taas_fetch_stats {
    uint64_t requests, retries, bytes, cache_hits;
} taas_fetch_stats;
void taas_fetch_stats_get(taas_fetcher *f, taas_fetch_stats *out);

/* "train-{000..002}.tar" → three strings; also "a.tar b.tar" lists and "{a,b}" sets, as
 * WebDataset's braceexpand. NULL-terminated malloc'd array (taas_strv_free), or NULL with a
 * TaasValueError for an unclosed brace or a range over 1,000,000 names. */
char **taas_brace_expand(const char *pattern, taas_error *err);
void taas_strv_free(char **v);

/* A growing list of malloc'd strings (shard lists, folder listings). */
typedef struct taas_strvec {
    char **v;
    size_t n, cap;
} taas_strvec;
/* Appends str, which the list takes (and frees when it cannot grow): -1 when str is NULL
 * (a failed strdup) or memory is out. */
int taas_strvec_push(taas_strvec *s, char *str);
void taas_strvec_clear(taas_strvec *s); /* frees the strings and the list, leaves it empty */

/* The keys under url, s3://bucket/prefix (the prefix may be empty), through S3's
 * ListObjectsV2, signed as the object requests are: every page, page_keys keys each (1 to
 * 1000; 0 or out of range: 1000), appended to keys in the store's order (by bytes). More
 * than max_keys keys is a TaasIOError saying the cap; so are the store's errors
 * (NoSuchBucket, AccessDenied, a bad signature: each with its hint) and a malformed
 * answer. */
int taas_fetch_s3_list(taas_fetcher *f, const char *url, int page_keys, size_t max_keys, taas_strvec *keys,
                       taas_error *err);

#endif
