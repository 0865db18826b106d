/* Which samples go into which batch (docs/design.md §3 "Exactly-once, deterministic batches").
 * Each epoch has a permutation of the sample indices drawn from (seed, epoch) (identity
 * when shuffle is off). With W ranks and batch size B per rank, step s takes positions
 * [s*B*W, (s+1)*B*W) of it and rank r the slice [s*B*W + r*B, s*B*W + (r+1)*B): that slice is
 * work item k = s*W + r. Loader j of L makes the items with k % L == j. A units limit
 * counts samples in (epoch, k) order across epochs and cuts exactly. */
#ifndef TAAS_SAMPLER_H
#define TAAS_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct taas_sampler_cfg {
    uint64_t size;      /* samples in the dataset */
    uint32_t batch;     /* B, per rank */
    uint32_t world;     /* W, ranks (1 without offload) */
    uint64_t seed;
    int shuffle;
    int drop_last;      /* drop a last step that cannot give every rank a full batch */
    uint64_t units;     /* samples to draw in all, across epochs; 0 = no limit */
} taas_sampler_cfg;

typedef struct taas_sampler taas_sampler;

taas_sampler *taas_sampler_new(const taas_sampler_cfg *cfg, taas_error *err);
void taas_sampler_free(taas_sampler *s);

/* Steps per epoch, and work items per epoch (the last step's items may be short, or empty
 * for the highest ranks, when drop_last is off). */
uint64_t taas_sampler_steps(const taas_sampler *s);
uint64_t taas_sampler_items(const taas_sampler *s);
/* B: the room taas_sampler_item needs in out. */
uint32_t taas_sampler_batch(const taas_sampler *s);

/* The sample indices of item k of epoch e into out (room for batch); returns how many
 * (< batch for a short item or where units cut; 0 for an empty item or past the units).
 * Thread-safe (permutations are cached per epoch). */
size_t taas_sampler_item(taas_sampler *s, uint64_t epoch, uint64_t k, uint64_t *out);

/* 1 when no item of epoch e or later is drawn any more (units spent). */
int taas_sampler_done(const taas_sampler *s, uint64_t epoch);

#endif
