#include "rng.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void taas_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void taas_rng_init(taas_rng *r, uint64_t seed, uint64_t epoch, uint64_t index, uint32_t stream) {
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = 0;
    r->ctr[1] = ((stream & 0xffu) << 24) | (uint32_t)(epoch & 0xffffffu);
    r->ctr[2] = (uint32_t)index;
    r->ctr[3] = (uint32_t)(index >> 32);
    r->avail = 0;
}

uint32_t taas_rng_u32(taas_rng *r) {
    if (r->avail == 0) {
        taas_philox4x32_10(r->ctr, r->key, r->buf);
        r->ctr[0]++;
        r->avail = 4;
    }
    return r->buf[4 - r->avail--];
}

uint64_t taas_rng_u64(taas_rng *r) {
    uint64_t lo = taas_rng_u32(r);
    uint64_t hi = taas_rng_u32(r);
    return lo | (hi << 32);
}

double taas_rng_uniform(taas_rng *r) {
    return (double)(taas_rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t taas_rng_below(taas_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    if (n <= UINT32_MAX) {
        uint32_t n32 = (uint32_t)n;
        uint64_t m = (uint64_t)taas_rng_u32(r) * n32;
        uint32_t low = (uint32_t)m;
        if (low < n32) {
            uint32_t threshold = (uint32_t)(-n32) % n32;
            while (low < threshold) {
                m = (uint64_t)taas_rng_u32(r) * n32;
                low = (uint32_t)m;
            }
        }
        return m >> 32;
    }
    uint64_t threshold = (uint64_t)(-n) % n;
    uint64_t x;
    do {
        x = taas_rng_u64(r);
    } while (x < threshold);
    return x % n;
}
