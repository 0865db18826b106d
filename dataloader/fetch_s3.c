/* s3://bucket/key: where the request goes and how it is signed. libcurl signs it (AWS
 * SigV4, CURLOPT_AWS_SIGV4); this file picks the endpoint and the credentials from the
 * standard AWS environment variables, copied when the fetcher was made. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "fetch_priv.h"
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

/* Percent-encodes everything but RFC 3986's unreserved characters and '/', as S3 wants a
 * key in the path (and in the signature's canonical URI). */
static char *encode_key(const char *key) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(key);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == '/') {
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

int fetch_s3_target(taas_fetcher *f, fetch_target *t, const char *url, taas_error *err) {
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (bn == 0)
        return s3_error(url, "the s3:// URL names no bucket",
                        "write s3://bucket/key, e.g. s3://my-data/train/shard-0000.tar", err);
    if (!valid_bucket(b, bn))
        return s3_error(url, "the bucket name may hold only letters, digits, '.', '-' and '_'",
                        "write s3://bucket/key, e.g. s3://my-data/train/shard-0000.tar", err);
    if (!slash || !slash[1])
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

    char *key = encode_key(slash + 1);
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
        t->http_url = strf("%.*s/%.*s/%s", (int)en, e, (int)bn, b, key);
    } else if (vhost_bucket(b, bn)) {
        t->http_url = strf("https://%.*s.s3.%s.amazonaws.com/%s", (int)bn, b, region, key);
    } else {
        t->http_url = strf("https://s3.%s.amazonaws.com/%.*s/%s", region, (int)bn, b, key);
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
