/* An insertion-ordered ring of digests and an open-addressing index into it. Each signature
 * is kept as its BLAKE2b-256 (32 bytes, whatever the signature's length): uniform bytes, so
 * the first 8 are the hash, and a full history is 2.5 MiB. */
#include "digests.h"

#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DIGEST_BYTES 32

typedef unsigned char digest[DIGEST_BYTES];

struct taas_digests {
    size_t max;        /* at most this many are remembered */
    size_t cap;        /* ring slots allocated (grows to max) */
    size_t head;       /* the oldest */
    size_t count;
    digest *ring;
    uint32_t *slots;   /* ring index + 1; 0 is empty */
    size_t n_slots;    /* a power of two, at least twice cap */
};

taas_digests *taas_digests_new(size_t capacity) {
    taas_digests *d = calloc(1, sizeof *d);
    if (!d || sodium_init() < 0) {
        free(d);
        return NULL;
    }
    d->max = capacity ? capacity : TAAS_DIGESTS_MAX;
    return d;
}

void taas_digests_free(taas_digests *d) {
    if (!d) return;
    free(d->ring);
    free(d->slots);
    free(d);
}

size_t taas_digests_count(const taas_digests *d) {
    return d->count;
}

static size_t home(const taas_digests *d, const digest h) {
    uint64_t x;
    memcpy(&x, h, sizeof x);
    return (size_t)x & (d->n_slots - 1);
}

static int find(const taas_digests *d, const digest h) {
    if (!d->n_slots) return 0;
    for (size_t i = home(d, h); d->slots[i]; i = (i + 1) & (d->n_slots - 1))
        if (memcmp(d->ring[d->slots[i] - 1], h, DIGEST_BYTES) == 0) return 1;
    return 0;
}

static void index_slot(taas_digests *d, size_t ring_index) {
    size_t i = home(d, d->ring[ring_index]);
    while (d->slots[i]) i = (i + 1) & (d->n_slots - 1);
    d->slots[i] = (uint32_t)(ring_index + 1);
}

/* Linear probing has no cheap delete: after a cull the index is built again, once per
 * tenth of the capacity, so about 9 insertions per message. */
static void reindex(taas_digests *d) {
    memset(d->slots, 0, d->n_slots * sizeof *d->slots);
    for (size_t k = 0; k < d->count; k++) index_slot(d, (d->head + k) % d->cap);
}

/* Before the first cull the ring is never wrapped (head is 0), so it grows by realloc. */
static int grow(taas_digests *d) {
    size_t cap = d->cap ? d->cap * 2 : 64;
    if (cap > d->max) cap = d->max;
    size_t n_slots = 1;
    while (n_slots < 2 * cap) n_slots *= 2;
    digest *ring = realloc(d->ring, cap * sizeof *ring);
    if (!ring) return -1;
    d->ring = ring;
    uint32_t *slots = malloc(n_slots * sizeof *slots);
    if (!slots) return -1;
    free(d->slots);
    d->slots = slots;
    d->n_slots = n_slots;
    d->cap = cap;
    reindex(d);
    return 0;
}

int taas_digests_add(taas_digests *d, const char *sig, size_t len) {
    digest h;
    crypto_generichash(h, sizeof h, (const unsigned char *)sig, len, NULL, 0);
    if (find(d, h)) return 0;
    if (d->count == d->max) {
        /* full: forget the oldest tenth, as jupyter_client culls 10% */
        size_t drop = d->max / 10 ? d->max / 10 : 1;
        d->head = (d->head + drop) % d->cap;
        d->count -= drop;
        reindex(d);
    } else if (d->count == d->cap && grow(d)) {
        return -1;
    }
    size_t at = (d->head + d->count) % d->cap;
    memcpy(d->ring[at], h, sizeof h);
    d->count++;
    index_slot(d, at);
    return 1;
}
