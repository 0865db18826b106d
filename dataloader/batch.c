/* A batch is one 64-byte aligned allocation ready to send as one message: a fixed header,
 * then images (float32 NCHW), labels (int64) and sample indices (uint64), each on a 64-byte
 * boundary so that a receiver can use them in place. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "errnames.h"

#define BATCH_MAGIC "TAASBT01"
#define ALIGN 64

/* The header as laid out at the start of buf. */
typedef struct wire_header {
    char magic[8];
    uint64_t epoch, k;
    uint32_t n, c, h, w;
    uint64_t images_off, labels_off, indices_off;
} wire_header;

_Static_assert(sizeof(wire_header) == 64, "the batch header is 64 bytes");

static size_t round_up(size_t n) {
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* Offsets of the three arrays; 0 on overflow. */
static size_t layout(uint32_t n, uint32_t c, uint32_t h, uint32_t w, size_t *img, size_t *lab, size_t *idx) {
    uint64_t floats = (uint64_t)n * c * h * w;
    if (c && h && w && floats / c / h / w != n) return 0;
    if (floats > (SIZE_MAX - 3 * ALIGN) / 8) return 0;
    *img = sizeof(wire_header);
    *lab = *img + round_up((size_t)floats * sizeof(float));
    *idx = *lab + round_up((size_t)n * sizeof(int64_t));
    return *idx + (size_t)n * sizeof(uint64_t);
}

static void point(taas_batch *b, void *buf, size_t len, const wire_header *h) {
    b->epoch = h->epoch;
    b->k = h->k;
    b->n = h->n;
    b->c = h->c;
    b->h = h->h;
    b->w = h->w;
    b->images = (float *)((char *)buf + h->images_off);
    b->labels = (int64_t *)((char *)buf + h->labels_off);
    b->indices = (uint64_t *)((char *)buf + h->indices_off);
    b->buf = buf;
    b->buf_len = len;
    b->release = NULL;
    b->release_ctx = NULL;
}

/* One buffer of a pool: allocated with its buffer, freed with it. */
typedef struct pool_buf {
    taas_batch_pool *pool;
    void *mem;
    size_t cap;
    struct pool_buf *next;
} pool_buf;

struct taas_batch_pool {
    pthread_mutex_t mu;
    int refs;           /* the owner's, and one per buffer out in a batch */
    int released;       /* by the owner: buffers that come back are freed */
    int nidle;
    pool_buf *idle;     /* most recently returned first */
    uint64_t allocated;
};

static void buf_free(pool_buf *pb) {
    free(pb->mem);
    free(pb);
}

/* Drops a reference (under mu); the last one frees the pool, which has no idle buffer left
 * by then (the owner's release freed them). */
static void pool_unref_locked(taas_batch_pool *p) {
    int last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (last) {
        pthread_mutex_destroy(&p->mu);
        free(p);
    }
}

taas_batch_pool *taas_batch_pool_new(void) {
    taas_batch_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    p->refs = 1;
    return p;
}

void taas_batch_pool_release(taas_batch_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    pool_buf *pb = p->idle;
    p->idle = NULL;
    p->nidle = 0;
    p->released = 1; /* buffers still out are freed when they come back */
    while (pb) {
        pool_buf *next = pb->next;
        buf_free(pb);
        pb = next;
    }
    pool_unref_locked(p);
}

int taas_batch_pool_idle(taas_batch_pool *p) {
    pthread_mutex_lock(&p->mu);
    int n = p->nidle;
    pthread_mutex_unlock(&p->mu);
    return n;
}

uint64_t taas_batch_pool_allocated(taas_batch_pool *p) {
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->allocated;
    pthread_mutex_unlock(&p->mu);
    return n;
}

/* taas_batch_free's hook for a pooled buffer. */
static void pool_put(void *ctx) {
    pool_buf *pb = ctx;
    taas_batch_pool *p = pb->pool;
    pthread_mutex_lock(&p->mu);
    if (!p->released) {
        pb->next = p->idle;
        p->idle = pb;
        p->nidle++;
    } else {
        buf_free(pb);
    }
    pool_unref_locked(p);
}

/* An idle buffer of at least cap bytes and not twice as large (a short last batch does not
 * pin a full one), or a new one; then the oldest idle one goes, so that there are never more
 * buffers than batches were out at once, and buffers of a size no longer made are not kept. */
static pool_buf *pool_take(taas_batch_pool *p, size_t cap) {
    pool_buf *evict = NULL;
    pthread_mutex_lock(&p->mu);
    pool_buf **at = &p->idle, **last = NULL;
    for (; *at; at = &(*at)->next) {
        if ((*at)->cap >= cap && (*at)->cap / 2 < cap) break;
        last = at;
    }
    pool_buf *pb = *at;
    if (pb) {
        *at = pb->next;
        p->nidle--;
    } else if (last) {
        evict = *last;
        *last = NULL;
        p->nidle--;
    }
    if (pb) p->refs++;
    pthread_mutex_unlock(&p->mu);
    if (evict) buf_free(evict);
    if (pb) return pb;
    pb = malloc(sizeof *pb);
    void *mem = aligned_alloc(ALIGN, cap);
    if (!pb || !mem) {
        free(pb);
        free(mem);
        return NULL;
    }
    *pb = (pool_buf){p, mem, cap, NULL};
    pthread_mutex_lock(&p->mu);
    p->refs++;
    p->allocated++;
    pthread_mutex_unlock(&p->mu);
    return pb;
}

taas_batch *taas_batch_alloc_pooled(taas_batch_pool *p, uint64_t epoch, uint64_t k, uint32_t n, uint32_t c,
                                    uint32_t h, uint32_t w) {
    size_t img, lab, idx, len = layout(n, c, h, w, &img, &lab, &idx);
    if (!len) return NULL;
    taas_batch *b = malloc(sizeof *b);
    pool_buf *pb = NULL;
    void *buf = NULL;
    if (b && p) {
        pb = pool_take(p, round_up(len));
        buf = pb ? pb->mem : NULL;
    } else if (b) {
        buf = aligned_alloc(ALIGN, round_up(len));
    }
    if (!b || !buf) {
        free(b);
        free(buf);
        return NULL;
    }
    wire_header hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, BATCH_MAGIC, 8);
    hd.epoch = epoch;
    hd.k = k;
    hd.n = n;
    hd.c = c;
    hd.h = h;
    hd.w = w;
    hd.images_off = img;
    hd.labels_off = lab;
    hd.indices_off = idx;
    memcpy(buf, &hd, sizeof hd);
    /* the gaps after images and labels, so that equal batches are equal bytes */
    size_t img_end = img + (size_t)n * c * h * w * sizeof(float), lab_end = lab + (size_t)n * sizeof(int64_t);
    memset((char *)buf + img_end, 0, lab - img_end);
    memset((char *)buf + lab_end, 0, idx - lab_end);
    point(b, buf, len, &hd);
    if (pb) {
        b->release = pool_put;
        b->release_ctx = pb;
    }
    return b;
}

taas_batch *taas_batch_alloc(uint64_t epoch, uint64_t k, uint32_t n, uint32_t c, uint32_t h, uint32_t w) {
    return taas_batch_alloc_pooled(NULL, epoch, k, n, c, h, w);
}

void taas_batch_free(taas_batch *b) {
    if (!b) return;
    if (b->release)
        b->release(b->release_ctx);
    else
        free(b->buf);
    free(b);
}

int taas_batch_view(const void *buf, size_t len, taas_batch *out, taas_error *err) {
    taas_srcpos nowhere = {0, 0};
    wire_header h;
    if (!buf || len < sizeof h) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere, "a batch of %zu bytes is shorter than its %zu-byte header",
                       len, sizeof h);
        taas_error_hint(err, "the message was cut: check the sender and the transport");
        return -1;
    }
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, BATCH_MAGIC, 8) != 0) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere, "not a batch: the header does not start with " BATCH_MAGIC);
        taas_error_hint(err, "loader and trainer must run the same taas version");
        return -1;
    }
    size_t img = 0, lab = 0, idx = 0, want = layout(h.n, h.c, h.h, h.w, &img, &lab, &idx);
    if (!want || want != len || h.images_off != img || h.labels_off != lab || h.indices_off != idx) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere,
                       "a batch of %u samples of %ux%ux%u should be %zu bytes with arrays at %zu, %zu, %zu, "
                       "but is %zu bytes with them at %llu, %llu, %llu", h.n, h.c, h.h, h.w, want, img, lab, idx,
                       len, (unsigned long long)h.images_off, (unsigned long long)h.labels_off,
                       (unsigned long long)h.indices_off);
        taas_error_hint(err, "the message was cut or changed on the way: check the sender and the transport");
        return -1;
    }
    if ((uintptr_t)buf % 8 != 0) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere, "a batch buffer must be 8-byte aligned to be read in place");
        taas_error_hint(err, "copy the message into an aligned buffer first");
        return -1;
    }
    point(out, (void *)buf, len, &h);
    return 0;
}
