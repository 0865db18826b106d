/* A counter-based random generator: Philox4x32-10 (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11; the generator of Random123, cuRAND and JAX). A stream is a
 * pure function of (seed, epoch, index, stream), so a draw never depends on which thread or
 * loader makes it, and there is no global state.
 *
 * Layout: key = seed (64 bits); counter word 0 = block number, word 1 = stream (top 8 bits)
 * and epoch (low 24 bits), words 2 and 3 = index. Streams are distinct for epochs < 2^24 and
 * stream ids < 256; one stream yields 2^32 blocks of four 32-bit words.
 * Stream ids: TAAS_RNG_SAMPLER for the epoch's permutation (index 0), TAAS_RNG_TRANSFORM + i
 * for step i of a transform chain (index = sample index). */
#ifndef TAAS_RNG_H
#define TAAS_RNG_H

#include <stdint.h>

enum { TAAS_RNG_SAMPLER = 0, TAAS_RNG_TRANSFORM = 1, TAAS_RNG_MAX_STREAM = 255 };

typedef struct taas_rng {
    uint32_t key[2];
    uint32_t ctr[4];
    uint32_t buf[4];
    int avail;          /* words of buf not used yet */
} taas_rng;

/* One Philox4x32-10 block: the bijection of ctr under key. */
void taas_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

void taas_rng_init(taas_rng *r, uint64_t seed, uint64_t epoch, uint64_t index, uint32_t stream);
uint32_t taas_rng_u32(taas_rng *r);
uint64_t taas_rng_u64(taas_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double taas_rng_uniform(taas_rng *r);
/* Uniform in [0, n) without modulo bias (n >= 1): Lemire's multiply-and-reject on 32-bit
 * words for n <= 2^32 - 1, rejection on 64-bit words above. */
uint64_t taas_rng_below(taas_rng *r, uint64_t n);

#endif
