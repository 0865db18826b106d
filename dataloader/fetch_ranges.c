/* Objects over HTTP in parallel range requests (curl multi, up to `connections` transfers at
 * once), each part retried on its own. A whole object starts with one request for its first
 * range_min bytes: a small object is done in that one request, and for a large one the
 * answer's Content-Range gives the size, so the other parts start while it runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errnames.h"
#include "fetch_priv.h"

#define PART_MAX ((uint64_t)64 << 20)

enum { P_WAIT, P_RUN, P_DONE };

typedef struct part {
    uint64_t off, len;     /* bytes [off, off + len) of the object */
    int probe;             /* into its own buffer, not into the job's */
    int whole;             /* no Range header: the whole object (a probe only) */
    int state, attempts;
    double not_before;
    CURL *h;
    fetch_resp r;
    char errbuf[CURL_ERROR_SIZE];
} part;

typedef struct job {
    taas_fetcher *f;
    const fetch_target *t;
    part **parts;
    int n, cap;
    unsigned char *dst;    /* bytes [base, base + dst_len) of the object */
    uint64_t base, dst_len;
    int64_t size;          /* of the object, -1 until known */
    int spawned;           /* the probe's answer was big and the rest is planned */
    char validator[128];   /* every part must come from the same version of the object */
    taas_error *err;
} job;

static int oom(job *j) {
    char q[400];
    taas_error_set(j->err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0}, "out of memory fetching %s",
                   fetch_quote(q, sizeof q, j->t->url));
    taas_error_hint(j->err, "the object does not fit in memory: use smaller files or fewer "
                            "decode threads");
    return -1;
}

static part *add_part(job *j, uint64_t off, uint64_t len, int probe) {
    if (j->n == j->cap) {
        int cap = j->cap ? 2 * j->cap : 8;
        part **p = realloc(j->parts, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        j->parts = p;
        j->cap = cap;
    }
    part *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->off = off;
    p->len = len;
    p->probe = probe;
    p->r.f = j->f;
    j->parts[j->n++] = p;
    return p;
}

static int split(job *j, uint64_t off, uint64_t len) {
    uint64_t conns = (uint64_t)j->f->o.connections;
    uint64_t per = (len + conns - 1) / conns;
    if (per > PART_MAX) per = PART_MAX;
    if (per == 0) per = 1;
    for (uint64_t at = off; at < off + len; at += per)
        if (!add_part(j, at, off + len - at < per ? off + len - at : per, 0)) return oom(j);
    return 0;
}

static int changed(job *j) {
    char q[400];
    taas_error_set(j->err, TAAS_ERR_IO, (taas_srcpos){0, 0},
                   "GET %s: the object changed while it was being read",
                   fetch_quote(q, sizeof q, j->t->url));
    taas_error_hint(j->err, "something rewrote it during the download: run again once it is "
                            "stable");
    return FETCH_FAIL;
}

/* The first answer of a big object: plan the rest. */
static int spawn(job *j, part *p) {
    if (j->spawned || !p->probe || p->whole || p->r.status != 206 || !p->r.has_range ||
        p->r.range_first != 0 || p->r.range_total <= p->len)
        return 0;
    uint64_t total = p->r.range_total;
    if (total > SIZE_MAX / 2) return oom(j);
    j->dst = malloc((size_t)total);
    if (!j->dst) return oom(j);
    j->base = 0;
    j->dst_len = total;
    j->size = (int64_t)total;
    j->spawned = 1;
    if (!j->validator[0]) fetch_validator(&p->r, j->validator, sizeof j->validator);
    return split(j, p->len, total - p->len);
}

static int start(job *j, CURLM *m, part *p) {
    p->h = fetch_handle_get(j->f, j->err);
    if (!p->h) return -1;
    fetch_resp_reset(&p->r);
    if (!p->probe) {
        p->r.dst = j->dst + (p->off - j->base);
        p->r.dst_cap = (size_t)p->len;
    }
    char range[64];
    snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)p->off,
             (unsigned long long)(p->off + p->len - 1));
    if (fetch_handle_setup(j->f, p->h, j->t, 0, p->whole ? NULL : range, &p->r, p->errbuf,
                           j->err) ||
        curl_easy_setopt(p->h, CURLOPT_PRIVATE, (void *)p) != CURLE_OK ||
        curl_multi_add_handle(m, p->h) != CURLM_OK) {
        if (!taas_error_is_set(j->err)) oom(j);
        fetch_handle_put(j->f, p->h);
        p->h = NULL;
        return -1;
    }
    atomic_fetch_add(&j->f->requests, 1);
    p->attempts++;
    p->state = P_RUN;
    return 0;
}

static int wrong_range(job *j, part *p) {
    char q[400];
    const fetch_resp *r = &p->r;
    if (r->has_range && r->range_first == p->off && r->range_total <= p->off + p->len) {
        taas_error_set(j->err, TAAS_ERR_IO, (taas_srcpos){0, 0},
                       "short read from %s: asked for bytes %llu to %llu, the object has %llu "
                       "bytes",
                       fetch_quote(q, sizeof q, j->t->url), (unsigned long long)p->off,
                       (unsigned long long)(p->off + p->len), (unsigned long long)r->range_total);
        taas_error_hint(j->err, "the object is shorter than expected: it may be truncated");
    } else if (r->has_range) {
        taas_error_set(j->err, TAAS_ERR_IO, (taas_srcpos){0, 0},
                       "GET %s: asked for bytes %llu-%llu, the server answered with bytes "
                       "%llu-%llu",
                       fetch_quote(q, sizeof q, j->t->url), (unsigned long long)p->off,
                       (unsigned long long)(p->off + p->len - 1),
                       (unsigned long long)r->range_first, (unsigned long long)r->range_last);
        taas_error_hint(j->err, "serve the data from a server that supports range requests "
                                "(nginx, S3, most web servers)");
    } else {
        taas_error_set(j->err, TAAS_ERR_IO, (taas_srcpos){0, 0},
                       "GET %s: asked for bytes %llu-%llu, the server answered HTTP %ld without "
                       "a Content-Range",
                       fetch_quote(q, sizeof q, j->t->url), (unsigned long long)p->off,
                       (unsigned long long)(p->off + p->len - 1), r->status);
        taas_error_hint(j->err, "serve the data from a server that supports range requests "
                                "(nginx, S3, most web servers)");
    }
    return FETCH_FAIL;
}

/* What one finished attempt means; err is set for FETCH_FAIL when the reason is ours. */
static int finish(job *j, part *p, CURLcode rc) {
    fetch_resp *r = &p->r;
    int what = fetch_classify(rc, r);
    if (p->probe && rc == CURLE_OK && r->status == 416) {
        if (r->range_unsatisfied && r->range_total == 0) return FETCH_DONE; /* empty object */
        p->whole = 1; /* the server would not say; ask for everything */
        p->attempts--;
        return FETCH_RETRY;
    }
    if (what != FETCH_DONE) return what;
    char v[128];
    fetch_validator(r, v, sizeof v);
    if (j->validator[0] && v[0] && strcmp(v, j->validator)) return changed(j);
    if (!j->validator[0]) snprintf(j->validator, sizeof j->validator, "%s", v);
    if (p->probe) {
        if (r->status != 206) {
            /* The whole object (the server ignores Range, or we did not ask). */
            if (r->has_length && r->len != r->length) return FETCH_RETRY;
            return j->spawned ? changed(j) : FETCH_DONE;
        }
        if (!r->has_range || r->range_first != 0) return wrong_range(j, p);
        if (r->len != r->range_last + 1) return FETCH_RETRY;
        if (r->range_total == r->len) return j->spawned ? changed(j) : FETCH_DONE;
        if (r->len != p->len) return wrong_range(j, p);
        if (!j->spawned && spawn(j, p)) return FETCH_FAIL;
        if (j->size != (int64_t)r->range_total) return changed(j);
        return FETCH_DONE;
    }
    if (r->status == 200 && p->off == 0 && r->len == p->len &&
        (j->size < 0 || (uint64_t)j->size == p->len))
        return FETCH_DONE; /* the whole object was asked for */
    if (r->status != 206 || !r->has_range || r->range_first != p->off ||
        r->range_last != p->off + p->len - 1)
        return wrong_range(j, p);
    if (r->len != p->len) return FETCH_RETRY;
    if (j->size >= 0 && r->range_total != (uint64_t)j->size) return changed(j);
    return FETCH_DONE;
}

static int run(job *j) {
    taas_fetcher *f = j->f;
    CURLM *m = curl_multi_init();
    if (!m) return oom(j);
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, 256L);
    int running = 0, rc = -1;
    for (;;) {
        double now = taas_now();
        int pending = 0;
        for (int i = 0; i < j->n; i++) {
            part *p = j->parts[i];
            if (p->state == P_RUN) pending = 1;
            if (p->state != P_WAIT) continue;
            pending = 1;
            if (p->not_before <= now && running < f->o.connections) {
                if (start(j, m, p)) goto out;
                running++;
            }
        }
        if (!pending) {
            rc = 0;
            break;
        }
        int still = 0;
        CURLMcode mc = curl_multi_perform(m, &still);
        if (mc != CURLM_OK) {
            char q[400];
            taas_error_set(j->err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "GET %s: libcurl: %s",
                           fetch_quote(q, sizeof q, j->t->url), curl_multi_strerror(mc));
            taas_error_hint(j->err, "this is a libcurl failure: try again");
            goto out;
        }
        /* A probe whose headers are in can start the other parts now. */
        for (int i = 0; i < j->n; i++) {
            part *p = j->parts[i];
            if (p->state == P_RUN && p->probe && p->r.header_seen && !j->spawned) {
                if (spawn(j, p)) goto out;
            }
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            part *p = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&p);
            CURLcode res = msg->data.result;
            curl_multi_remove_handle(m, p->h);
            running--;
            int what = finish(j, p, res);
            if (what == FETCH_DONE) {
                p->state = P_DONE;
            } else if (what == FETCH_RETRY && p->attempts <= f->o.retries) {
                if (p->attempts > 0) atomic_fetch_add(&f->retries, 1);
                p->state = P_WAIT;
                p->not_before = taas_now() + (p->attempts > 0 ? fetch_backoff(f, p->attempts - 1) : 0);
            } else {
                if (!taas_error_is_set(j->err))
                    fetch_fail(f, j->t, "GET", res, p->h, p->errbuf, &p->r, p->attempts, j->err);
                fetch_handle_put(f, p->h);
                p->h = NULL;
                p->state = P_DONE;
                goto out;
            }
            fetch_handle_put(f, p->h);
            p->h = NULL;
        }
        /* Wait for the sockets, or until a part that backs off may start again. */
        double now2 = taas_now(), next = -1;
        int waiting = 0, ready = 0;
        for (int i = 0; i < j->n; i++) {
            part *p = j->parts[i];
            if (p->state != P_WAIT) continue;
            waiting = 1;
            if (p->not_before <= now2 && running < f->o.connections) ready = 1;
            if (p->not_before > now2 && (next < 0 || p->not_before < next)) next = p->not_before;
        }
        if (ready || (running == 0 && !waiting)) continue;
        long timeout = 1000;
        if (next >= 0 && (next - now2) * 1000 + 1 < timeout) timeout = (long)((next - now2) * 1000) + 1;
        curl_multi_poll(m, NULL, 0, (int)timeout, NULL);
    }
out:
    for (int i = 0; i < j->n; i++) {
        part *p = j->parts[i];
        if (p->h) {
            curl_multi_remove_handle(m, p->h);
            fetch_handle_put(f, p->h);
            p->h = NULL;
        }
    }
    curl_multi_cleanup(m);
    return rc;
}

static void job_free(job *j) {
    for (int i = 0; i < j->n; i++) {
        fetch_resp_free(&j->parts[i]->r);
        free(j->parts[i]);
    }
    free(j->parts);
    free(j->dst);
}

int fetch_http_whole(taas_fetcher *f, const fetch_target *t, taas_blob *out, char *validator,
                     size_t cap, taas_error *err) {
    job j = {.f = f, .t = t, .size = -1, .err = err};
    /* Even when a HEAD told the size, the first request is for range_min bytes: a server
     * that ignores Range then simply sends everything, and no part asks for what it won't
     * honour. With one connection, one plain GET. */
    part *probe = add_part(&j, 0, f->o.range_min, 1);
    if (!probe) {
        oom(&j);
        goto fail;
    }
    probe->whole = f->o.connections == 1;
    if (run(&j)) goto fail;
    if (j.spawned) {
        memcpy(j.dst, probe->r.buf, probe->r.len);
    } else {
        j.dst = probe->r.buf;
        j.dst_len = probe->r.len;
        probe->r.buf = NULL;
        if (!j.dst) j.dst = malloc(1);
        if (!j.dst) {
            oom(&j);
            goto fail;
        }
    }
    out->data = j.dst;
    out->len = (size_t)j.dst_len;
    j.dst = NULL;
    snprintf(validator, cap, "%s", j.validator);
    job_free(&j);
    return 0;
fail:
    job_free(&j);
    return -1;
}

int fetch_http_range(taas_fetcher *f, const fetch_target *t, uint64_t off, size_t len,
                     unsigned char *dst, taas_error *err) {
    job j = {.f = f, .t = t, .size = -1, .err = err, .dst = dst, .base = off, .dst_len = len};
    int rc = -1;
    if (len >= f->o.range_min && f->o.connections > 1)
        rc = split(&j, off, len);
    else
        rc = add_part(&j, off, len, 0) ? 0 : oom(&j);
    if (rc == 0) rc = run(&j);
    j.dst = NULL; /* the caller's */
    job_free(&j);
    return rc;
}
