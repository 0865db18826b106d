/* A batch is one 64-byte aligned allocation ready to send as one message: a fixed header,
 * then images (float32 NCHW), labels (int64) and sample indices (uint64), each on a 64-byte
 * boundary so that a receiver can use them in place. */
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

taas_batch *taas_batch_alloc(uint64_t epoch, uint64_t k, uint32_t n, uint32_t c, uint32_t h, uint32_t w) {
    size_t img, lab, idx, len = layout(n, c, h, w, &img, &lab, &idx);
    if (!len) return NULL;
    taas_batch *b = malloc(sizeof *b);
    void *buf = aligned_alloc(ALIGN, round_up(len));
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
    return b;
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
