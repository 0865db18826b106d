/* The direct Conv2d kernels on AVX-512 (conv_direct_impl.h): 16 floats a vector. The
 * input-gradient tile of 8 rows by 3 vectors is 24 of the 32 zmm registers, with 3 loads and
 * a broadcast beside; 3 vectors rather than 6: a 3x3 convolution of 26 x 26 has 39 vectors
 * of positions a channel, which 6-vector tiles leave half empty at the end. The forward and
 * weight-gradient tiles, 6 broadcast values by 4 vectors of output channels, are 24 too, with
 * 4 loads and a broadcast (bench/RESULTS.md, issue 19). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

enum { VL = 16, MR = 8, NV = 3, NS = 6, OV = 4 };
#define VEC __m512
#define MASK __mmask16
#define TARGET "avx512f"
#define SET_TABLE taas_conv_avx512
#define SET_NAME "avx512"
#define TILE static inline __attribute__((always_inline, target(TARGET)))
#define KERNEL __attribute__((target(TARGET)))

TILE VEC v_zero(void) { return _mm512_setzero_ps(); }
TILE VEC v_set1(float x) { return _mm512_set1_ps(x); }
TILE VEC v_loadu(const float *p) { return _mm512_loadu_ps(p); }
TILE void v_storeu(float *p, VEC x) { _mm512_storeu_ps(p, x); }
TILE VEC v_add(VEC a, VEC b) { return _mm512_add_ps(a, b); }
TILE VEC v_max(VEC a, VEC b) { return _mm512_max_ps(a, b); }
/* a's lanes where r > 0 (not a NaN), else 0: the ReLU's mask on a gradient */
TILE VEC v_where_positive(VEC a, VEC r) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, _mm512_setzero_ps(), _CMP_GT_OQ), a);
}
TILE VEC v_fma(VEC a, VEC b, VEC c) { return _mm512_fmadd_ps(a, b, c); }
TILE float v_reduce(VEC x) { return _mm512_reduce_add_ps(x); }
TILE VEC v_maskload(const float *p, MASK m) { return _mm512_maskz_loadu_ps(m, p); }
TILE void v_maskstore(float *p, MASK m, VEC x) { _mm512_mask_storeu_ps(p, m, x); }
TILE MASK mask_first(int n) { return n >= VL ? (MASK)0xFFFF : (MASK)((1u << n) - 1); }

/* dst (16 x 16, row stride ldd) = src (16 x 16, row stride lds) transposed */
TILE void transpose_block(float *dst, size_t ldd, const float *src, size_t lds) {
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
    /* pairs of rows interleaved, then pairs of pairs: r[4i+j] holds columns j, j+4, j+8,
     * j+12 of rows 4i..4i+3, one 128-bit lane each */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
        __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    /* then the 128-bit lanes gathered across groups of rows */
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
        }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
        r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xDD);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ldd, r[i]);
}

#include "conv_direct_impl.h"
#endif
