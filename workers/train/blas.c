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

/* OpenBLAS's core for the kernel set in use (cpu.h), always the same one, so that every
 * host of a job sums its products in the same order: whatever OpenBLAS picked itself (it
 * takes unknown CPUs for old ones, and an AVX-512 CPU for a SkylakeX, Cooperlake or
 * SapphireRapids), and whatever OPENBLAS_CORETYPE in a host's environment says. */
static const char *core_for_set(void) {
    switch (taas_cpu_kernels()) {
    case TAAS_CPU_AVX512: return "SkylakeX";
    case TAAS_CPU_AVX2: return "Haswell";
    default: return "Nehalem";  /* SSE4.2: what every x86-64 CPU of the last 15 years runs */
    }
}

/* OpenBLAS reads its core from OPENBLAS_CORETYPE when it starts again: the variable is set
 * for that moment, then the environment is as it was (children see the user's). It runs
 * before main (the constructor below), while the process has one thread, and in a rank once
 * more, from taas_blas_follow, before any compute thread exists (ZeroMQ's and Open MPI's
 * threads do not read the environment after they start). */
static void follow(void) {
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;  /* a build for one CPU */
    const char *want = core_for_set();
    if (!strcasecmp(openblas_get_corename(), want)) return;
    const char *had = getenv("OPENBLAS_CORETYPE");
    char saved[64] = "";
    int restore = had && strlen(had) < sizeof saved;
    if (restore) strcpy(saved, had);
    setenv("OPENBLAS_CORETYPE", want, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    if (restore) setenv("OPENBLAS_CORETYPE", saved, 1);
    else unsetenv("OPENBLAS_CORETYPE");
}

static void setup_once(void) {
    openblas_set_num_threads(1);
    /* Its idle threads spin for a while after start and would take turns on the cores
     * with the OpenMP threads (measured: parallel regions 8 ms late for the first second). */
    if (blas_thread_shutdown_) blas_thread_shutdown_();
    follow();
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void taas_blas_setup(void) { pthread_once(&once, setup_once); }

void taas_blas_follow(void) {
    taas_blas_setup();
    follow();
}

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
