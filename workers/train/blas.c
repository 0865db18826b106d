/* OpenBLAS set-up and sgemm split across OpenMP threads (see blas.h). */
#include "blas.h"
#include "cpu.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* OpenBLAS's DYNAMIC_ARCH entry points (Debian's libopenblas0 exports them): quit forgets
 * the kernel set, init picks one again, reading OPENBLAS_CORETYPE first. Weak, so that a
 * build for one fixed CPU (without them) still links and keeps its kernels. */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));
/* Stops OpenBLAS's thread pool (what its fork handler calls); it is not restarted while
 * OpenBLAS runs single-threaded. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

/* How much SIMD a kernel set uses: 0 SSE, 1 AVX, 2 AVX2+FMA, 3 AVX-512. */
static int core_level(const char *name) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen", "Excavator", "Steamroller"};
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(name, avx512[i])) return 3;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (!strcasecmp(name, avx2[i])) return 2;
    if (!strcasecmp(name, "Sandybridge") || !strcasecmp(name, "Bulldozer") || !strcasecmp(name, "Piledriver"))
        return 1;
    return 0;
}

/* OpenBLAS's core for the process's kernel set (cpu.h): its AVX-512, AVX2 or baseline
 * kernels, so that TAAS_CPU lowers OpenBLAS with the rest. */
static const char *core_for_set(void) {
    switch (taas_cpu_kernels()) {
    case TAAS_CPU_AVX512: return "SkylakeX";
    case TAAS_CPU_AVX2: return "Haswell";
    default: return "Nehalem";  /* SSE4.2: what every x86-64 CPU of the last 15 years runs */
    }
}

static void setup_once(void) {
    openblas_set_num_threads(1);
    /* Its idle threads spin for a while after start and would take turns on the cores
     * with the OpenMP threads (measured: parallel regions 8 ms late for the first second). */
    if (blas_thread_shutdown_) blas_thread_shutdown_();
    if (getenv("OPENBLAS_CORETYPE") || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
    const char *want = core_for_set();
    /* OpenBLAS's own pick stands unless it is below the set (it takes unknown CPUs for old
     * ones) or TAAS_CPU asked for a lower set than it took */
    int have = core_level(openblas_get_corename()), level = core_level(want);
    int forced = taas_cpu_kernels() < taas_cpu_best();
    if (have == level || (have > level && !forced)) return;
    /* Runs before main (the constructor below), while the process has one thread: setenv
     * is safe there, and the variable is gone again before anything else reads it. */
    setenv("OPENBLAS_CORETYPE", want, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void taas_blas_setup(void) { pthread_once(&once, setup_once); }

__attribute__((constructor)) static void setup_at_start(void) { taas_blas_setup(); }

const char *taas_blas_core(void) {
    taas_blas_setup();
    return openblas_get_corename();
}

void taas_sgemm(int nthreads, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    taas_blas_setup();
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    int split_n = n >= m, len = split_n ? n : m;
    /* slices of whole 16-float vectors, and none so thin that the call costs more than it does */
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((long)m * n * k < 1L << 18) nt = 1;
    if (nt > (len + 15) / 16) nt = (len + 15) / 16;
    if (nt <= 1) {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    int per = ((len + nt - 1) / nt + 15) / 16 * 16;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++) {
        int lo = t * per, hi = lo + per < len ? lo + per : len;
        if (lo >= hi) continue;
        if (split_n) /* columns lo..hi of op(B) and C */
            cblas_sgemm(CblasRowMajor, ta, tb, m, hi - lo, k, alpha, a, lda,
                        trans_b ? b + (size_t)lo * ldb : b + lo, ldb, beta, c + lo, ldc);
        else /* rows lo..hi of op(A) and C */
            cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, n, k, alpha,
                        trans_a ? a + lo : a + (size_t)lo * lda, lda, b, ldb, beta,
                        c + (size_t)lo * ldc, ldc);
    }
}
