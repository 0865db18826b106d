/* HTTP requests through libcurl: the pool of easy handles, the options of one request, the
 * response callbacks, what to retry, and the messages for what failed. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "fetch_priv.h"
#include "utf8.h"

/* ---- targets ---- */

int fetch_target_init(taas_fetcher *f, fetch_target *t, const char *url, taas_error *err) {
    memset(t, 0, sizeof *t);
    t->url = url;
    if (!strncasecmp(url, "s3://", 5)) {
        if (fetch_s3_target(f, t, url, err)) {
            fetch_target_free(t);
            return -1;
        }
        return 0;
    }
    t->http_url = strdup(url);
    t->cache_key = strdup(url);
    if (!t->http_url || !t->cache_key) {
        fetch_target_free(t);
        taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0}, "out of memory");
        return -1;
    }
    return 0;
}

void fetch_target_free(fetch_target *t) {
    free(t->http_url);
    free(t->cache_key);
    if (t->userpwd) {
        memset(t->userpwd, 0, strlen(t->userpwd));
        free(t->userpwd);
    }
    curl_slist_free_all(t->headers);
    memset(t, 0, sizeof *t);
}

/* ---- responses ---- */

void fetch_resp_reset(fetch_resp *r) {
    unsigned char *dst = r->dst, *buf = r->buf;
    size_t dst_cap = r->dst_cap, cap = r->cap;
    taas_fetcher *f = r->f;
    memset(r, 0, sizeof *r);
    r->dst = dst;
    r->dst_cap = dst_cap;
    r->buf = buf;
    r->cap = cap;
    r->f = f;
}

void fetch_resp_free(fetch_resp *r) {
    free(r->buf);
    r->buf = NULL;
    r->cap = r->len = 0;
}

static const char *reason_for(long status) {
    switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 410: return "Gone";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
    }
}

static int header_is(const char *line, size_t n, const char *name, const char **value,
                     size_t *vlen) {
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) || line[k] != ':') return 0;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    *value = v;
    *vlen = (size_t)(end - v);
    return 1;
}

static void copy_value(char *dst, size_t cap, const char *v, size_t n) {
    if (n >= cap) n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static size_t on_header(char *line, size_t size, size_t nitems, void *user) {
    fetch_resp *r = user;
    size_t n = size * nitems;
    const char *v;
    size_t vn;
    char tmp[128];
    if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
        /* A new response (after a redirect or a 100 Continue): forget the last one's. */
        long st = 0;
        const char *p = memchr(line, ' ', n);
        if (p) st = strtol(p + 1, NULL, 10);
        r->status = st;
        r->has_length = r->has_range = r->range_unsatisfied = r->accept_ranges = 0;
        r->header_seen = 0;
        r->errlen = 0;
        r->errbody[0] = '\0';
        r->etag[0] = r->last_modified[0] = r->reason[0] = '\0';
        const char *rs = p ? memchr(p + 1, ' ', n - (size_t)(p + 1 - line)) : NULL;
        if (rs) {
            rs++;
            size_t rn = n - (size_t)(rs - line);
            while (rn && (rs[rn - 1] == '\r' || rs[rn - 1] == '\n' || rs[rn - 1] == ' ')) rn--;
            taas_utf8_clip(r->reason, sizeof r->reason, rs, rn, 40);
        }
        if (!r->reason[0]) snprintf(r->reason, sizeof r->reason, "%s", reason_for(st));
    } else if (n <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        if (r->status >= 200) r->header_seen = 1;
    } else if (header_is(line, n, "Content-Length", &v, &vn)) {
        copy_value(tmp, sizeof tmp, v, vn);
        char *end;
        errno = 0;
        unsigned long long x = strtoull(tmp, &end, 10);
        if (!errno && end != tmp && !*end) {
            r->has_length = 1;
            r->length = x;
        }
    } else if (header_is(line, n, "Content-Range", &v, &vn)) {
        copy_value(tmp, sizeof tmp, v, vn);
        unsigned long long a, b, total;
        if (sscanf(tmp, "bytes %llu-%llu/%llu", &a, &b, &total) == 3 && a <= b) {
            r->has_range = 1;
            r->range_first = a;
            r->range_last = b;
            r->range_total = total;
        } else if (sscanf(tmp, "bytes */%llu", &total) == 1) {
            r->range_unsatisfied = 1;
            r->range_total = total;
        }
    } else if (header_is(line, n, "ETag", &v, &vn)) {
        copy_value(r->etag, sizeof r->etag, v, vn);
    } else if (header_is(line, n, "Last-Modified", &v, &vn)) {
        copy_value(r->last_modified, sizeof r->last_modified, v, vn);
    } else if (header_is(line, n, "Accept-Ranges", &v, &vn)) {
        r->accept_ranges = vn == 5 && !strncasecmp(v, "bytes", 5);
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    fetch_resp *r = user;
    size_t n = size * nmemb;
    if (r->f) atomic_fetch_add(&r->f->bytes, n);
    if (r->status >= 300) {
        /* An error page: keep its start for the message. */
        size_t room = sizeof r->errbody - 1 - r->errlen;
        size_t k = n < room ? n : room;
        memcpy(r->errbody + r->errlen, data, k);
        r->errlen += k;
        r->errbody[r->errlen] = '\0';
        return n;
    }
    if (r->dst) {
        if (n > r->dst_cap - r->len) {
            r->overflow = 1;
            return 0;
        }
        memcpy(r->dst + r->len, data, n);
        r->len += n;
        return n;
    }
    if (n > r->cap - r->len) {
        size_t want = r->cap ? r->cap : 65536;
        /* The announced size, once, so that a big body is not copied while it grows. */
        if (r->cap == 0 && r->has_length && r->length >= n && r->length < SIZE_MAX / 2)
            want = (size_t)r->length;
        while (want - r->len < n) {
            if (want > SIZE_MAX / 2) {
                r->alloc_failed = 1;
                return 0;
            }
            want *= 2;
        }
        unsigned char *p = realloc(r->buf, want);
        if (!p) {
            r->alloc_failed = 1;
            return 0;
        }
        r->buf = p;
        r->cap = want;
    }
    memcpy(r->buf + r->len, data, n);
    r->len += n;
    return n;
}

void fetch_validator(const fetch_resp *r, char *out, size_t cap) {
    if (r->etag[0])
        snprintf(out, cap, "%s", r->etag);
    else if (r->last_modified[0])
        snprintf(out, cap, "lm:%s", r->last_modified);
    else if (cap)
        out[0] = '\0';
}

/* ---- easy handles ---- */

CURL *fetch_handle_get(taas_fetcher *f, taas_error *err) {
    CURL *h = NULL;
    pthread_mutex_lock(&f->pool_lock);
    if (f->npool > 0) h = f->pool[--f->npool];
    pthread_mutex_unlock(&f->pool_lock);
    if (!h) h = curl_easy_init();
    if (!h) taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0}, "libcurl: out of memory");
    return h;
}

void fetch_handle_put(taas_fetcher *f, CURL *h) {
    if (!h) return;
    pthread_mutex_lock(&f->pool_lock);
    if (f->npool == f->cappool) {
        int cap = f->cappool ? f->cappool * 2 : 8;
        CURL **p = realloc(f->pool, (size_t)cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&f->pool_lock);
            curl_easy_cleanup(h);
            return;
        }
        f->pool = p;
        f->cappool = cap;
    }
    f->pool[f->npool++] = h;
    pthread_mutex_unlock(&f->pool_lock);
}

int fetch_handle_setup(taas_fetcher *f, CURL *h, const fetch_target *t, int head,
                       const char *range, fetch_resp *r, char *errbuf, taas_error *err) {
    curl_easy_reset(h);
    errbuf[0] = '\0';
    long low = (long)ceil(f->o.low_speed_timeout_s);
    CURLcode c = CURLE_OK;
#define SET(opt, val)                                  \
    do {                                               \
        if (c == CURLE_OK) c = curl_easy_setopt(h, opt, val); \
    } while (0)
    SET(CURLOPT_URL, t->http_url);
    SET(CURLOPT_SHARE, f->share);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, 1L);
    SET(CURLOPT_MAXREDIRS, 5L);
    /* One transfer per TCP connection, so that `connections` means connections. */
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SET(CURLOPT_MAXCONNECTS, 256L);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)(f->o.connect_timeout_s * 1000));
    SET(CURLOPT_LOW_SPEED_LIMIT, 1024L);
    SET(CURLOPT_LOW_SPEED_TIME, low);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_USERAGENT, "taas/" TAAS_VERSION);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, r);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, r);
    if (head)
        SET(CURLOPT_NOBODY, 1L);
    else
        SET(CURLOPT_HTTPGET, 1L);
    if (range) SET(CURLOPT_RANGE, range);
    if (t->s3) {
        SET(CURLOPT_AWS_SIGV4, t->sigv4);
        SET(CURLOPT_USERPWD, t->userpwd);
        SET(CURLOPT_HTTPHEADER, t->headers);
        /* An object key is a name, not a path: "a/../b" must reach the store as it is. */
        SET(CURLOPT_PATH_AS_IS, 1L);
    }
#undef SET
    if (c != CURLE_OK) {
        char q[400];
        taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "%s: libcurl refused an option: %s",
                       fetch_quote(q, sizeof q, t->url), curl_easy_strerror(c));
        taas_error_hint(err, "taas needs libcurl 7.85 or newer with HTTP and AWS SigV4 support");
        return -1;
    }
    r->f = f;
    return 0;
}

/* ---- outcomes ---- */

int fetch_classify(CURLcode rc, const fetch_resp *r) {
    switch (rc) {
    case CURLE_OK:
        if (r->status >= 500) return FETCH_RETRY;
        if (r->status >= 300 || r->status < 200) return FETCH_FAIL;
        return FETCH_DONE;
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return FETCH_RETRY;
    case CURLE_WRITE_ERROR:
        /* Our callback said stop (too much data, no memory); a 5xx error page cut short
         * lands here too. */
        return r->status >= 500 && !r->overflow && !r->alloc_failed ? FETCH_RETRY : FETCH_FAIL;
    default:
        return FETCH_FAIL;
    }
}

/* "host:port" of the request, for "connection refused by ...". */
static void host_port(const fetch_target *t, char *out, size_t cap) {
    snprintf(out, cap, "the server");
    CURLU *u = curl_url();
    if (!u) return;
    char *host = NULL, *port = NULL;
    if (curl_url_set(u, CURLUPART_URL, t->http_url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
        snprintf(out, cap, "%s:%s", host, port);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
}

/* <Code>X</Code> ... <Message>Y</Message> of an S3 error body, as "X: Y". */
static void s3_error_detail(const fetch_resp *r, char *out, size_t cap) {
    out[0] = '\0';
    const char *c = strstr(r->errbody, "<Code>"), *m = strstr(r->errbody, "<Message>");
    if (!c) return;
    c += 6;
    const char *ce = strstr(c, "</Code>");
    if (!ce) return;
    char code[96], msg[300] = "";
    taas_utf8_clip(code, sizeof code, c, (size_t)(ce - c), 60);
    if (m) {
        m += 9;
        const char *me = strstr(m, "</Message>");
        if (me) taas_utf8_clip(msg, sizeof msg, m, (size_t)(me - m), 200);
    }
    snprintf(out, cap, msg[0] ? "%s: %s" : "%s", code, msg);
}

static void status_hint(const fetch_target *t, long status, taas_fetcher *f, taas_error *err) {
    const char *endpoint = f->aws_endpoint ? f->aws_endpoint : "AWS S3";
    if (t->s3 && (status == 403 || status == 401)) {
        taas_error_hint(err, "check the credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                             "(and AWS_SESSION_TOKEN for temporary ones) must be valid for %s and "
                             "allowed to read this object; AWS_REGION must be the bucket's region",
                        endpoint);
    } else if (t->s3 && status == 404) {
        taas_error_hint(err, "check the bucket and the key: %s has no such object", endpoint);
    } else if (t->s3 && status == 301) {
        taas_error_hint(err, "the bucket is in another region: set AWS_REGION to its region");
    } else if (status == 404 || status == 410) {
        taas_error_hint(err, "check the URL: the server has no file at this path");
    } else if (status == 401) {
        taas_error_hint(err, "the server wants credentials, which taas does not send for "
                             "http(s) URLs: serve the data without authentication or use s3://");
    } else if (status == 403) {
        taas_error_hint(err, "the server refuses access to this file: check the URL and the "
                             "server's permissions");
    } else if (status >= 500) {
        taas_error_hint(err, "the server kept failing: try again later, or raise "
                             "TAAS_FETCH_RETRIES (now %d)", f->o.retries);
    } else if (status >= 300 && status < 400) {
        taas_error_hint(err, "the server redirects without a usable Location, or too often: "
                             "use the final URL");
    } else {
        taas_error_hint(err, "check the URL");
    }
}

int fetch_fail(taas_fetcher *f, const fetch_target *t, const char *method, CURLcode rc,
               CURL *h, const char *errbuf, const fetch_resp *r, int attempts, taas_error *err) {
    char q[400], tries[48] = "", hp[300];
    fetch_quote(q, sizeof q, t->url);
    if (attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", attempts);
    taas_srcpos nowhere = {0, 0};
    if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && r->status >= 300)) {
        char detail[400] = "";
        if (t->s3) s3_error_detail(r, detail, sizeof detail);
        if (r->status == 416 && r->range_unsatisfied) {
            taas_error_set(err, TAAS_ERR_IO, nowhere,
                           "%s %s: %ld %s: the range asked for is beyond the end of the object "
                           "(%llu bytes)",
                           method, q, r->status, r->reason, (unsigned long long)r->range_total);
            taas_error_hint(err, "the object is shorter than expected: it may be truncated");
            return -1;
        }
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: %ld%s%s%s%s%s%s", method, q, r->status,
                       r->reason[0] ? " " : "", r->reason, detail[0] ? " (" : "", detail,
                       detail[0] ? ")" : "", tries);
        status_hint(t, r->status, f, err);
        return -1;
    }
    if (r->overflow) {
        taas_error_set(err, TAAS_ERR_IO, nowhere,
                       "%s %s: the server sent more than the %zu bytes asked for (HTTP %ld: it "
                       "ignored the Range header)",
                       method, q, r->dst_cap, r->status);
        taas_error_hint(err, "serve the data from a server that supports range requests "
                             "(nginx, S3, most web servers)");
        return -1;
    }
    if (r->alloc_failed) {
        taas_error_set(err, TAAS_ERR_MEMORY, nowhere, "%s %s: out of memory after %zu bytes",
                       method, q, r->len);
        taas_error_hint(err, "the object does not fit in memory: use smaller files or fewer "
                             "decode threads");
        return -1;
    }
    long oserr = 0;
    if (h) curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
    const char *detail = errbuf && errbuf[0] ? errbuf : curl_easy_strerror(rc);
    host_port(t, hp, sizeof hp);
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        if (oserr == ECONNREFUSED) {
            taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: connection refused by %s%s",
                           method, q, hp, tries);
            taas_error_hint(err, "nothing is listening at %s: check the host and port, and that "
                                 "the server is running", hp);
        } else {
            taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: cannot connect to %s: %s%s",
                           method, q, hp, detail, tries);
            taas_error_hint(err, "check the address and the network between here and %s", hp);
        }
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: unknown host: %s", method, q, detail);
        taas_error_hint(err, "check the host name in the URL");
        break;
    case CURLE_OPERATION_TIMEDOUT:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: timed out: %s%s", method, q, detail,
                       tries);
        if (strstr(detail, "too slow"))
            taas_error_hint(err, "the server at %s stalls or does not answer: check it, or raise "
                                 "TAAS_FETCH_LOW_SPEED_TIMEOUT (now %g s)", hp,
                            f->o.low_speed_timeout_s);
        else
            taas_error_hint(err, "the server at %s does not accept the connection in time: "
                                 "check the address, or raise TAAS_FETCH_CONNECT_TIMEOUT (now %g s)",
                            hp, f->o.connect_timeout_s);
        break;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: the connection broke: %s%s", method, q,
                       detail, tries);
        taas_error_hint(err, "the server at %s closed or reset the connection: check the server "
                             "and the network", hp);
        break;
    case CURLE_URL_MALFORMAT:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: malformed URL: %s", method, q, detail);
        taas_error_hint(err, "write http(s)://host[:port]/path and percent-encode spaces and "
                             "special characters");
        break;
    case CURLE_UNSUPPORTED_PROTOCOL:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: %s", method, q, detail);
        taas_error_hint(err, "only http:// and https:// can be fetched (redirects included)");
        break;
    case CURLE_TOO_MANY_REDIRECTS:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: too many redirects", method, q);
        taas_error_hint(err, "use the final URL");
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CACERT_BADFILE:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: TLS failed: %s", method, q, detail);
        taas_error_hint(err, "the server's certificate is not trusted here: install its CA "
                             "(update-ca-certificates) or use the right host name");
        break;
    default:
        taas_error_set(err, TAAS_ERR_IO, nowhere, "%s %s: %s%s", method, q, detail, tries);
        taas_error_hint(err, "check the URL and the server");
        break;
    }
    return -1;
}

/* ---- one request, retried ---- */

int fetch_http_request(taas_fetcher *f, const fetch_target *t, int head, const char *range,
                       fetch_resp *r, taas_error *err) {
    CURL *h = fetch_handle_get(f, err);
    if (!h) return -1;
    char errbuf[CURL_ERROR_SIZE];
    for (int attempt = 0;; attempt++) {
        fetch_resp_reset(r);
        if (fetch_handle_setup(f, h, t, head, range, r, errbuf, err)) break;
        atomic_fetch_add(&f->requests, 1);
        CURLcode rc = curl_easy_perform(h);
        int what = fetch_classify(rc, r);
        if (what == FETCH_DONE) {
            fetch_handle_put(f, h);
            return 0;
        }
        if (what == FETCH_RETRY && attempt < f->o.retries) {
            atomic_fetch_add(&f->retries, 1);
            fetch_sleep(fetch_backoff(f, attempt));
            continue;
        }
        fetch_fail(f, t, head ? "HEAD" : "GET", rc, h, errbuf, r, attempt + 1, err);
        break;
    }
    fetch_handle_put(f, h);
    return -1;
}

int fetch_http_info(taas_fetcher *f, const fetch_target *t, taas_object_info *out,
                    taas_error *err) {
    memset(out, 0, sizeof *out);
    fetch_resp r = {0};
    int rc = fetch_http_request(f, t, 1, NULL, &r, err);
    if (rc == 0 && r.has_length) {
        out->size = r.length;
        fetch_validator(&r, out->etag, sizeof out->etag);
        fetch_resp_free(&r);
        return 0;
    }
    if (rc && r.status != 405 && r.status != 501) {
        fetch_resp_free(&r);
        return -1;
    }
    /* HEAD refused or without a size: the size from a one-byte GET's Content-Range. */
    taas_error_clear(err);
    rc = fetch_http_request(f, t, 0, "0-0", &r, err);
    if (rc == 0 && (r.has_range || (r.status == 200 && (r.has_length || r.len)))) {
        out->size = r.has_range ? r.range_total : r.has_length ? r.length : r.len;
        fetch_validator(&r, out->etag, sizeof out->etag);
        fetch_resp_free(&r);
        return 0;
    }
    if (rc && r.status == 416 && r.range_unsatisfied) {
        /* "bytes 0-0" of an empty object */
        taas_error_clear(err);
        out->size = r.range_total;
        fetch_validator(&r, out->etag, sizeof out->etag);
        fetch_resp_free(&r);
        return 0;
    }
    fetch_resp_free(&r);
    if (rc) return -1;
    char q[400];
    taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0},
                   "HEAD %s: the server does not say how big the object is", fetch_quote(q, sizeof q, t->url));
    taas_error_hint(err, "serve the data from a server that sends Content-Length (nginx, S3, "
                         "most web servers)");
    return -1;
}
