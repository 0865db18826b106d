/* The counter-based RNG of init.h and Dropout: taas_ctr_uniform(seed, i) is a pure function
 * of (seed, i), so any element can be drawn on its own. One definition for the CPU core and
 * the CUDA kernels (nvcc compiles it for the device too), so that a GPU's Dropout mask is the
 * CPU's bit for bit. */
#ifndef TAAS_CTR_RNG_H
#define TAAS_CTR_RNG_H
#include <stdint.h>

#ifdef __CUDACC__
#define TAAS_HOST_DEVICE __host__ __device__
#else
#define TAAS_HOST_DEVICE
#endif

/* Inline, so that a loop over counters (Dropout's mask) vectorises. */
static inline TAAS_HOST_DEVICE uint64_t taas_ctr_u64(uint64_t seed, uint64_t counter) {
    /* splitmix64 applied to a key mixing seed and counter; two rounds so nearby seeds and
     * nearby counters give unrelated streams */
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull;
    z ^= z >> 31;
    z += counter * 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < 2; r++) {
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        z += 0x9E3779B97F4A7C15ull;
    }
    return z;
}
/* Uniform in [0, 1) with 24 random bits (every value exactly representable as a float). */
static inline TAAS_HOST_DEVICE float taas_ctr_uniform(uint64_t seed, uint64_t counter) {
    return (float)(int32_t)(taas_ctr_u64(seed, counter) >> 40) * (1.0f / 16777216.0f);
}

#endif
