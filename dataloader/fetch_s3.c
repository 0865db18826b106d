/* s3://bucket/key: where the request goes and how it is signed. libcurl signs it (AWS
 * SigV4, CURLOPT_AWS_SIGV4); this file picks the endpoint and the credentials from the
 * standard AWS environment variables, copied when the fetcher was made. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "buf.h"
#include "fetch_priv.h"
#include "formats.h"
#include "s3_list.h"
#include "utf8.h"

/* SHA-256 of the empty body: GET and HEAD carry none, and S3 wants the hash said. */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static int s3_error(const char *url, const char *why, const char *hint, taas_error *err) {
    char q[400];
    taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "%s: %s", fetch_quote(q, sizeof q, url),
                   why);
    taas_error_hint(err, "%s", hint);
    return -1;
}

/* Percent-encodes everything but RFC 3986's unreserved characters, and '/' unless
 * keep_slash: S3 wants a key in the path with its '/' (and so does the signature's canonical
 * URI), a query value with '/' encoded (SigV4's canonical query string). */
static char *encode(const char *key, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(key);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/')) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

static int valid_bucket(const char *b, size_t n) {
    if (n == 0 || n > 255) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)b[i]) && b[i] != '-' && b[i] != '.' && b[i] != '_') return 0;
    return 1;
}

/* Virtual-host style works for names that can be a DNS label under TLS: no dots. */
static int vhost_bucket(const char *b, size_t n) {
    if (n < 3 || n > 63) return 0;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '-'))
            return 0;
    return 1;
}

static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

/* The target for url (s3://bucket/...): the object key after the bucket, or with query
 * set the bucket itself with that query string (already encoded, parameters sorted as
 * SigV4's canonical query wants them: libcurl 7.88 signs the query as it is). */
static int s3_target(taas_fetcher *f, fetch_target *t, const char *url, const char *query, taas_error *err) {
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (bn == 0)
        return s3_error(url, "the s3:// URL names no bucket",
                        "write s3://bucket/key, e.g. s3://my-data/train/shard-0000.tar", err);
    if (!valid_bucket(b, bn))
        return s3_error(url, "the bucket name may hold only letters, digits, '.', '-' and '_'",
                        "write s3://bucket/key, e.g. s3://my-data/train/shard-0000.tar", err);
    if (!query && (!slash || !slash[1]))
        return s3_error(url, "the s3:// URL names a bucket but no object key",
                        "write s3://bucket/key, e.g. s3://my-data/train/shard-0000.tar", err);
    if (!f->aws_key || !f->aws_secret)
        return s3_error(url, "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                             "are not set",
                        "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN "
                        "for temporary credentials) in the environment the kernel was started "
                        "in, then restart the kernel",
                        err);
    const char *region = f->aws_region ? f->aws_region : "us-east-1";
    for (const char *p = region; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-')
            return s3_error(url, "AWS_REGION is not a region name",
                            "set AWS_REGION to a region such as us-east-1 or eu-west-3", err);
    if (strlen(region) > 64)
        return s3_error(url, "AWS_REGION is not a region name",
                        "set AWS_REGION to a region such as us-east-1 or eu-west-3", err);

    char *key = query ? strf("?%s", query) : encode(slash + 1, 1);
    /* a path-style listing is GET /bucket?list-type=2: "/bucket/" is another canonical URI */
    const char *sep = query ? "" : "/";
    if (!key) return s3_error(url, "out of memory", "", err);
    if (f->aws_endpoint) {
        const char *e = f->aws_endpoint;
        if (strncasecmp(e, "http://", 7) && strncasecmp(e, "https://", 8)) {
            free(key);
            char why[300], q[200];
            snprintf(why, sizeof why, "AWS_ENDPOINT_URL '%s' is not an http:// or https:// URL",
                     taas_utf8_clip(q, sizeof q, e, strlen(e), 100));
            return s3_error(url, why,
                            "set AWS_ENDPOINT_URL to the store's address, e.g. "
                            "http://127.0.0.1:9000, or unset it for AWS",
                            err);
        }
        size_t en = strlen(e);
        while (en > 0 && e[en - 1] == '/') en--;
        /* Custom endpoints get path-style requests: they rarely have per-bucket DNS names. */
        t->http_url = strf("%.*s/%.*s%s%s", (int)en, e, (int)bn, b, sep, key);
    } else if (vhost_bucket(b, bn)) {
        t->http_url = strf("https://%.*s.s3.%s.amazonaws.com/%s", (int)bn, b, region, key);
    } else {
        t->http_url = strf("https://s3.%s.amazonaws.com/%.*s%s%s", region, (int)bn, b, sep, key);
    }
    free(key);
    t->s3 = 1;
    snprintf(t->sigv4, sizeof t->sigv4, "aws:amz:%s:s3", region);
    t->userpwd = strf("%s:%s", f->aws_key, f->aws_secret);
    t->cache_key = t->http_url ? strdup(t->http_url) : NULL;
    struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: " EMPTY_SHA256);
    if (h && f->aws_token) {
        char *tok = strf("x-amz-security-token: %s", f->aws_token);
        struct curl_slist *h2 = tok ? curl_slist_append(h, tok) : NULL;
        free(tok);
        if (!h2) {
            curl_slist_free_all(h);
            h = NULL;
        }
    }
    t->headers = h;
    if (!t->http_url || !t->userpwd || !t->cache_key || !t->headers)
        return s3_error(url, "out of memory", "", err);
    return 0;
}

int fetch_s3_target(taas_fetcher *f, fetch_target *t, const char *url, taas_error *err) {
    return s3_target(f, t, url, NULL, err);
}

/* A failed listing's hint, by S3's error code (fetch_fail's is about one object). */
static void list_hint(taas_fetcher *f, const char *url, const fetch_resp *r, taas_error *err) {
    s3_list_page pg = {0}; /* freed below even when there is no body to parse */
    taas_error ignored;
    const char *endpoint = f->aws_endpoint ? f->aws_endpoint : "AWS S3";
    const char *b = url + 5, *slash = strchr(b, '/');
    int bn = (int)(slash ? (size_t)(slash - b) : strlen(b));
    if (r->errlen && s3_list_parse(r->errbody, r->errlen, &pg, &ignored) == 0 && pg.is_error && pg.code) {
        if (!strcmp(pg.code, "NoSuchBucket"))
            taas_error_hint(err, "%s has no bucket '%.*s': check the bucket's name in the s3:// URL (and "
                            "AWS_ENDPOINT_URL, AWS_REGION)", endpoint, bn, b);
        else if (!strcmp(pg.code, "AccessDenied"))
            taas_error_hint(err, "the credentials may not list the bucket '%.*s': they need the "
                            "s3:ListBucket permission on it (and s3:GetObject on its objects)", bn, b);
        else if (!strcmp(pg.code, "SignatureDoesNotMatch"))
            taas_error_hint(err, "%s refused the request's signature: check AWS_SECRET_ACCESS_KEY (it "
                            "must belong to AWS_ACCESS_KEY_ID) and AWS_REGION, then restart the kernel",
                            endpoint);
        else if (!strcmp(pg.code, "InvalidAccessKeyId"))
            taas_error_hint(err, "%s does not know the access key: check AWS_ACCESS_KEY_ID, then restart "
                            "the kernel", endpoint);
    }
    s3_list_page_free(&pg);
}

/* Appends a query parameter's "name=value&" with the value encoded. */
static int add_param(taas_buf *q, const char *name, const char *value) {
    char *v = encode(value, 0);
    taas_buf_printf(q, "%s%s=%s", q->len ? "&" : "", name, v ? v : "");
    free(v);
    return v && !q->failed ? 0 : -1;
}

int taas_fetch_s3_list(taas_fetcher *f, const char *url, int page_keys, size_t max_keys, taas_strvec *keys,
                       taas_error *err) {
    if (strncmp(url, "s3://", 5))
        return s3_error(url, "not an s3:// URL", "write s3://bucket/prefix/", err);
    if (page_keys <= 0 || page_keys > 1000) page_keys = 1000;
    const char *slash = strchr(url + 5, '/');
    const char *prefix = slash ? slash + 1 : "";
    char *token = NULL;
    int rc = 0;
    size_t start = keys->n;
    for (size_t page = 0; rc == 0; page++) {
        if (page >= max_keys / (size_t)page_keys + 2) {
            /* a store that keeps answering "truncated" with nothing new */
            rc = s3_error(url, "the listing did not end", "check the store: it answers every page as truncated",
                          err);
            break;
        }
        char count[16];
        snprintf(count, sizeof count, "%d", page_keys);
        taas_buf q = TAAS_BUF_INIT;
        int qrc = (token ? add_param(&q, "continuation-token", token) : 0) | add_param(&q, "list-type", "2") |
                  add_param(&q, "max-keys", count) | (prefix[0] ? add_param(&q, "prefix", prefix) : 0);
        fetch_target t = {.url = url};
        fetch_resp r = {.f = f};
        if (qrc != 0) rc = s3_error(url, "out of memory", "", err);
        if (rc == 0) rc = s3_target(f, &t, url, q.data, err);
        taas_buf_free(&q);
        if (rc == 0 && fetch_http_request(f, &t, 0, NULL, &r, err) != 0) {
            list_hint(f, url, &r, err);
            rc = -1;
        }
        fetch_target_free(&t);
        s3_list_page pg = {0};
        if (rc == 0 && s3_list_parse((const char *)r.buf, r.len, &pg, err) != 0) {
            taas_fmt_prefix(err, "%s", url);
            rc = -1;
        }
        fetch_resp_free(&r);
        if (rc == 0 && pg.is_error) {
            char why[400], code[80], msg[200];
            snprintf(why, sizeof why, "the store answered the listing with the error %s: %s",
                     pg.code ? taas_utf8_clip(code, sizeof code, pg.code, strlen(pg.code), 60) : "(no code)",
                     pg.message ? taas_utf8_clip(msg, sizeof msg, pg.message, strlen(pg.message), 150) : "");
            rc = s3_error(url, why, "check the bucket's name and the credentials", err);
        }
        for (size_t i = 0; rc == 0 && i < pg.keys.n; i++) {
            if (keys->n - start >= max_keys) {
                char why[160];
                snprintf(why, sizeof why, "more than %zu objects under this prefix", max_keys);
                rc = s3_error(url, why, "list a narrower prefix (one folder of the bucket per dataset), or pack "
                              "the images into WebDataset tar shards", err);
                break;
            }
            if (taas_strvec_push(keys, pg.keys.v[i]) != 0) rc = s3_error(url, "out of memory", "", err);
            pg.keys.v[i] = NULL;
        }
        if (rc == 0 && pg.truncated) {
            if (!pg.next_token || !pg.next_token[0] || (token && !strcmp(token, pg.next_token)))
                rc = s3_error(url, "the listing says it is truncated but gives no new NextContinuationToken",
                              "check the store: it does not page ListObjectsV2 as S3 does", err);
        }
        free(token);
        token = pg.next_token;
        pg.next_token = NULL;
        int more = pg.truncated;
        s3_list_page_free(&pg);
        if (!more) break;
    }
    free(token);
    return rc;
}
