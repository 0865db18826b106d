/* The direct Conv2d kernels on AVX2 + FMA (conv_direct_impl.h): 8 floats a vector, and 16
 * ymm registers. The input-gradient tile, 4 rows by 3 vectors, is 12 accumulators with 3
 * loads and a broadcast beside; the forward and weight-gradient tiles, 6 broadcast values by
 * 2 vectors of 8 output channels, are 12 with 2 loads and a broadcast (6 x 2 beat 4 x 3 and
 * 3 x 4 by 8 to 20 %, and waste no channels of 16 or 64: bench/RESULTS.md, issue 19); masked
 * ends through vmaskmovps. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

enum { VL = 8, MR = 4, NV = 3, NS = 6, OV = 2 };
#define VEC __m256
#define MASK __m256i
#define TARGET "avx2,fma"
#define SET_TABLE taas_conv_avx2
#define SET_NAME "avx2"
#define TILE static inline __attribute__((always_inline, target(TARGET)))
#define KERNEL __attribute__((target(TARGET)))

TILE VEC v_zero(void) { return _mm256_setzero_ps(); }
TILE VEC v_set1(float x) { return _mm256_set1_ps(x); }
TILE VEC v_loadu(const float *p) { return _mm256_loadu_ps(p); }
TILE void v_storeu(float *p, VEC x) { _mm256_storeu_ps(p, x); }
TILE VEC v_add(VEC a, VEC b) { return _mm256_add_ps(a, b); }
TILE VEC v_max(VEC a, VEC b) { return _mm256_max_ps(a, b); }
/* a's lanes where r > 0 (not a NaN), else 0: the ReLU's mask on a gradient */
TILE VEC v_where_positive(VEC a, VEC r) { return _mm256_and_ps(_mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_GT_OQ), a); }
TILE VEC v_fma(VEC a, VEC b, VEC c) { return _mm256_fmadd_ps(a, b, c); }
TILE float v_reduce(VEC x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
TILE VEC v_maskload(const float *p, MASK m) { return _mm256_maskload_ps(p, m); }
TILE void v_maskstore(float *p, MASK m, VEC x) { _mm256_maskstore_ps(p, m, x); }
/* lanes 0..n-1 set (their sign bit), the rest clear */
TILE MASK mask_first(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* dst (8 x 8, row stride ldd) = src (8 x 8, row stride lds) transposed: pairs of rows
 * interleaved, pairs of pairs, then the 128-bit halves exchanged */
TILE void transpose_block(float *dst, size_t ldd, const float *src, size_t lds) {
    __m256 r[8], t[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));
        _mm256_storeu_ps(dst + (4 + j) * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31));
    }
}

#include "conv_direct_impl.h"
#endif
