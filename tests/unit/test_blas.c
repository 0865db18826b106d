/* taas_sgemm against a plain triple loop in double, for every transpose combination, with
 * the split over rows and over columns, thread counts that do not divide the sizes, and
 * leading dimensions wider than the matrices; and the OpenBLAS set-up (blas.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blas.h"
#include "cpu.h"

static float *rnd(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    }
    return p;
}

/* C = alpha op(A) op(B) + beta C with op(A) (m, k), op(B) (k, n), row-major, padded lds. */
static void gemm_case(int ta, int tb, int m, int n, int k, int nthreads) {
    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
    float *a = rnd((size_t)(ta ? k : m) * lda, 1), *b = rnd((size_t)(tb ? n : k) * ldb, 2);
    float *c = rnd((size_t)m * ldc, 3), *c0 = malloc((size_t)m * ldc * sizeof *c0);
    memcpy(c0, c, (size_t)m * ldc * sizeof *c0);
    const float alpha = 0.75f, beta = 0.5f;
    taas_sgemm(nthreads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            if (j >= n) { /* the padding between rows is not touched */
                assert_true(c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j]);
                continue;
            }
            double acc = 0;
            for (int q = 0; q < k; q++)
                acc += (double)(ta ? a[(size_t)q * lda + i] : a[(size_t)i * lda + q]) *
                       (tb ? b[(size_t)j * ldb + q] : b[(size_t)q * ldb + j]);
            double want = alpha * acc + beta * c0[(size_t)i * ldc + j];
            if (fabs(c[(size_t)i * ldc + j] - want) > 1e-4 * (1 + fabs(want)))
                fail_msg("ta=%d tb=%d %dx%dx%d threads %d: C[%d,%d] = %g, expected %g", ta, tb, m, n,
                         k, nthreads, i, j, c[(size_t)i * ldc + j], want);
        }
    free(a), free(b), free(c), free(c0);
}

static void test_sgemm_matches_loops(void **state) {
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(ta, tb, 7, 5, 3, 2);       /* too small to split */
            gemm_case(ta, tb, 37, 300, 29, 2);   /* split over columns */
            gemm_case(ta, tb, 300, 37, 29, 3);   /* over rows, three slices */
            gemm_case(ta, tb, 64, 129, 64, 5);   /* more threads than 16-wide slices */
            gemm_case(ta, tb, 64, 129, 64, 1);
        }
}

/* The same call twice gives the same bits (the split depends on the sizes alone). */
static void test_sgemm_repeats(void **state) {
    (void)state;
    int m = 96, n = 333, k = 250;
    float *a = rnd((size_t)m * k, 4), *b = rnd((size_t)k * n, 5);
    float *c1 = calloc((size_t)m * n, sizeof *c1), *c2 = calloc((size_t)m * n, sizeof *c2);
    taas_sgemm(2, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c1, n);
    taas_sgemm(2, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c2, n);
    assert_memory_equal(c1, c2, (size_t)m * n * sizeof *c1);
    free(a), free(b), free(c1), free(c2);
}

/* OpenBLAS runs the one core of the kernel set in use, whatever its own detection made of the
 * CPU and whatever OPENBLAS_CORETYPE says (tests/CMakeLists.txt runs this test with it set to
 * a core no set uses), and it follows a job's set (taas_cpu_use). */
static void test_core_is_the_sets(void **state) {
    (void)state;
    static const char *const cores[] = {"Nehalem", "Haswell", "SkylakeX"};
    const char *core = taas_blas_core();
    assert_non_null(core);
    taas_cpu_set own = taas_cpu_kernels();
    if (strcasecmp(core, cores[own])) fail_msg("the %s set runs OpenBLAS's %s core", taas_cpu_set_name(own), core);
    taas_error err;
    for (int s = (int)taas_cpu_best(); s >= 0; s--) {
        assert_int_equal(taas_cpu_use((taas_cpu_set)s, &err), 0);
        taas_blas_follow();
        if (strcasecmp(taas_blas_core(), cores[s]))
            fail_msg("the job's %s set runs OpenBLAS's %s core", taas_cpu_set_name((taas_cpu_set)s), taas_blas_core());
    }
    if (taas_cpu_best() < TAAS_CPU_AVX512) {  /* a set the CPU lacks is an error, and nothing changes */
        assert_int_equal(taas_cpu_use(TAAS_CPU_AVX512, &err), -1);
        assert_non_null(strstr(err.message, "cannot run the job's avx512 kernels"));
        assert_int_equal(taas_cpu_kernels(), TAAS_CPU_GENERIC);
    }
    assert_int_equal(taas_cpu_use(own, &err), 0);
    taas_blas_follow();
    assert_string_equal(taas_blas_core(), cores[own]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_matches_loops),
        cmocka_unit_test(test_sgemm_repeats),
        cmocka_unit_test(test_core_is_the_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
