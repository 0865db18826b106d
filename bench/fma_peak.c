/* The machine's own FMA peak, per kernel set (issue 19): on every core at once (one OpenMP
 * thread each), independent chains of fused multiply-adds on registers, no memory, for
 * AVX-512 and for AVX2 where the CPU runs them. bench/RESULTS.md states the training core's
 * figures as a share of these.
 *
 *   taas-fma-peak [--threads T] [--seconds S]
 *
 * Prints one JSON line per set: {"set": "avx2", "threads": T, "gflops": G, "per_core": g}. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 12 independent chains: more than an FMA's latency times its units, so the units never wait */
#define CHAINS 12

__attribute__((target("avx512f"))) static double run512(long iters) {
    __m512 a[CHAINS], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_ps((float)i);
    for (long n = 0; n < iters; n++)
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    float out[16], s = 0;
    for (int i = 0; i < CHAINS; i++) {
        _mm512_storeu_ps(out, a[i]);
        s += out[0];
    }
    return s;  /* kept: the loop is not optimised away */
}

__attribute__((target("avx2,fma"))) static double run256(long iters) {
    __m256 a[CHAINS], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm256_set1_ps((float)i);
    for (long n = 0; n < iters; n++)
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    float out[8], s = 0;
    for (int i = 0; i < CHAINS; i++) {
        _mm256_storeu_ps(out, a[i]);
        s += out[0];
    }
    return s;
}

/* GFLOP/s of `threads` threads running set's loop for about `seconds` */
static double measure(int wide, int threads, double seconds, double *sink) {
    int vl = wide ? 16 : 8;
    long iters = 1000000;
    double t0 = taas_now(), dt = 0;
    for (int round = 0; round < 40; round++) {  /* grow the count until a run lasts long enough */
        t0 = taas_now();
#pragma omp parallel num_threads(threads) reduction(+ : sink[0])
        sink[0] += wide ? run512(iters) : run256(iters);
        dt = taas_now() - t0;
        if (dt >= seconds) break;
        iters *= dt > 0.01 ? (long)(seconds / dt) + 1 : 10;
    }
    return (double)threads * iters * CHAINS * vl * 2 / dt / 1e9;
}
#endif

int main(int argc, char **argv) {
    int threads = omp_get_num_procs();
    double seconds = 2.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    }
    if (threads < 1 || seconds <= 0) {
        fprintf(stderr, "usage: taas-fma-peak [--threads T] [--seconds S]\n");
        return 2;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    double sink = 0;
    taas_cpu_set best = taas_cpu_best();
    for (int wide = 1; wide >= 0; wide--) {
        if ((wide && best < TAAS_CPU_AVX512) || (!wide && best < TAAS_CPU_AVX2)) continue;
        double g = measure(wide, threads, seconds, &sink);
        printf("{\"set\": \"%s\", \"threads\": %d, \"gflops\": %.1f, \"per_core\": %.1f}\n", wide ? "avx512" : "avx2",
               threads, g, g / threads);
    }
    if (sink == 12345.0) printf("\n");
#endif
    return 0;
}
