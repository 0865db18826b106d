/* Work items of an epoch are the slices [k*B, (k+1)*B) of its permutation: step s, rank r
 * is k = s*W + r, and s*B*W + r*B == k*B. So item k's positions only need k, and the units
 * limit counts min(k*B, per_epoch) samples before item k of an epoch. */
#include <pthread.h>
#include <stdlib.h>

#include "errnames.h"
#include "rng.h"
#include "sampler.h"

/* Permutations of the epochs most recently asked for: the threads of a pipeline work on one
 * epoch, or two around an epoch boundary. */
#define PERM_CACHE 3

typedef struct perm_slot {
    uint64_t epoch;
    uint32_t *perm;     /* allocated up front, so that drawing an item cannot fail */
    int filled;
    uint64_t used;      /* last use, for eviction */
} perm_slot;

struct taas_sampler {
    taas_sampler_cfg cfg;
    uint64_t per_epoch;     /* positions used per epoch (size, or whole steps with drop_last) */
    uint64_t steps, items;
    pthread_mutex_t mu;
    perm_slot cache[PERM_CACHE];
    uint64_t tick;
};

taas_sampler *taas_sampler_new(const taas_sampler_cfg *cfg, taas_error *err) {
    taas_srcpos nowhere = {0, 0};
    if (cfg->size == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere, "the dataset has no samples, so there is nothing to batch");
        taas_error_hint(err, "check the dataset's files (root, images, urls)");
        return NULL;
    }
    if (cfg->batch == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere, "batch_size must be at least 1, got 0");
        taas_error_hint(err, "give DataLoader(..., batch_size=64) for example");
        return NULL;
    }
    if (cfg->world == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere, "the number of ranks must be at least 1, got 0");
        taas_error_hint(err, "use world = 1 without offloaded training");
        return NULL;
    }
    if (cfg->shuffle && cfg->size > (uint64_t)UINT32_MAX + 1) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere,
                       "shuffle=True supports at most 4294967296 samples, the dataset has %llu",
                       (unsigned long long)cfg->size);
        taas_error_hint(err, "split the dataset, or use shuffle=False");
        return NULL;
    }
    uint64_t span = (uint64_t)cfg->batch * cfg->world; /* samples per step; < 2^64 */
    uint64_t steps = cfg->drop_last ? cfg->size / span : cfg->size / span + (cfg->size % span != 0);
    if (steps == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere,
                       "drop_last=True leaves no batch: %llu samples are fewer than one step of "
                       "batch_size %u x %u rank%s = %llu",
                       (unsigned long long)cfg->size, cfg->batch, cfg->world, cfg->world == 1 ? "" : "s",
                       (unsigned long long)span);
        taas_error_hint(err, "use a smaller batch_size, fewer GPUs, or drop_last=False");
        return NULL;
    }
    taas_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        taas_error_set(err, TAAS_ERR_MEMORY, nowhere, "out of memory making the sampler");
        return NULL;
    }
    s->cfg = *cfg;
    s->steps = steps;
    s->items = steps * cfg->world;
    s->per_epoch = cfg->drop_last ? steps * span : cfg->size;
    pthread_mutex_init(&s->mu, NULL);
    for (int i = 0; cfg->shuffle && i < PERM_CACHE; i++) {
        s->cache[i].perm = malloc(cfg->size * sizeof(uint32_t));
        if (!s->cache[i].perm) {
            taas_sampler_free(s);
            taas_error_set(err, TAAS_ERR_MEMORY, nowhere,
                           "out of memory for the permutations of %llu samples",
                           (unsigned long long)cfg->size);
            return NULL;
        }
    }
    return s;
}

void taas_sampler_free(taas_sampler *s) {
    if (!s) return;
    for (int i = 0; i < PERM_CACHE; i++) free(s->cache[i].perm);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

uint64_t taas_sampler_steps(const taas_sampler *s) {
    return s->steps;
}

uint64_t taas_sampler_items(const taas_sampler *s) {
    return s->items;
}

uint32_t taas_sampler_batch(const taas_sampler *s) {
    return s->cfg.batch;
}

/* Fisher-Yates, high to low, driven by the (seed, epoch) stream: the permutation is a pure
 * function of (seed, epoch, size). */
static void make_perm(const taas_sampler *s, uint64_t epoch, uint32_t *p) {
    uint64_t n = s->cfg.size;
    for (uint64_t i = 0; i < n; i++) p[i] = (uint32_t)i;
    taas_rng r;
    taas_rng_init(&r, s->cfg.seed, epoch, 0, TAAS_RNG_SAMPLER);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = taas_rng_below(&r, i + 1);
        uint32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* Samples drawn before position pos of epoch e, across epochs, saturating. */
static uint64_t drawn_before(const taas_sampler *s, uint64_t epoch, uint64_t pos) {
    uint64_t e = s->per_epoch;
    if (epoch > (UINT64_MAX - pos) / e) return UINT64_MAX;
    return epoch * e + pos;
}

size_t taas_sampler_item(taas_sampler *s, uint64_t epoch, uint64_t k, uint64_t *out) {
    uint64_t b = s->cfg.batch;
    if (k >= s->items) return 0;
    uint64_t start = k * b; /* k < items <= size / 1, so no overflow */
    if (start >= s->per_epoch) return 0;
    uint64_t n = s->per_epoch - start < b ? s->per_epoch - start : b;
    if (s->cfg.units) {
        uint64_t before = drawn_before(s, epoch, start);
        if (before >= s->cfg.units) return 0;
        if (s->cfg.units - before < n) n = s->cfg.units - before;
    }
    if (!s->cfg.shuffle) {
        for (uint64_t i = 0; i < n; i++) out[i] = start + i;
        return (size_t)n;
    }
    pthread_mutex_lock(&s->mu);
    perm_slot *hit = NULL, *victim = &s->cache[0];
    for (int i = 0; i < PERM_CACHE; i++) {
        perm_slot *c = &s->cache[i];
        if (c->filled && c->epoch == epoch) {
            hit = c;
            break;
        }
        if (!c->filled || (victim->filled && c->used < victim->used)) victim = c;
    }
    if (!hit) {
        make_perm(s, epoch, victim->perm);
        victim->epoch = epoch;
        victim->filled = 1;
        hit = victim;
    }
    hit->used = ++s->tick;
    for (uint64_t i = 0; i < n; i++) out[i] = hit->perm[start + i];
    pthread_mutex_unlock(&s->mu);
    return (size_t)n;
}

int taas_sampler_done(const taas_sampler *s, uint64_t epoch) {
    if (!s->cfg.units) return 0;
    return drawn_before(s, epoch, 0) >= s->cfg.units;
}
