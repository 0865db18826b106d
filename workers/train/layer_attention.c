/* Causal self-attention as one op, flash attention's way: each (sample, head) walks blocks
 * of B query rows against the key blocks up to the diagonal with an online softmax, so the
 * (T x T) scores are never held whole; the forward keeps only each row's log-sum-exp, and
 * the backward recomputes the probabilities from it block by block. A (sample, head) is one
 * thread's from start to end, so the sums' order depends on nothing but the shapes. The
 * products are single-threaded sgemm (blas.h); dropout on the probabilities draws
 * element (sample, head, row, key) from the counter RNG, so the backward redraws the same mask. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "blas.h"
#include "ctr_rng.h"
#include "errnames.h"
#include "layers.h"
#include "simd.h"

enum { B = 64 };

/* s[j] = exp(s[j] - m) over a row's n scores, in vectors (simd.h's exp) */
TAAS_VEC static void exp_row(float *s, int n, float m) {
#pragma omp simd
    for (int j = 0; j < n; j++) s[j] = taas_expf(s[j] - m);
}

static size_t per_thread(const taas_attention_shape *s) {
    size_t d = (size_t)(s->c / s->heads);
    size_t f = 2 * (size_t)B * B + (size_t)B * d + 2 * (size_t)B;
    return (f + 15) / 16 * 16;  /* whole cache lines */
}

size_t taas_attention_scratch_floats(const taas_attention_shape *s, int nthreads) {
    return per_thread(s) * (size_t)(nthreads > 0 ? nthreads : 1);
}

int taas_attention_check(const taas_attention_shape *s, taas_error *e) {
    if (s->heads < 1 || s->c < 1 || s->c % s->heads != 0) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "attention: the embedding width %d does not split into %d heads",
                       s->c, s->heads);
        taas_error_hint(e, "give n_embd a multiple of n_head");
        return -1;
    }
    return taas_dropout_check(s->p, e);
}

static float keep_scale(float p) { return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p); }

/* the counter of probability (row, key) of unit u */
static uint64_t ctr(uint64_t offset, size_t u, int t, int row, int key) {
    return offset + ((uint64_t)u * (uint64_t)t + (uint64_t)row) * (uint64_t)t + (uint64_t)key;
}

void taas_attention_forward(float *y, float *lse, const float *qkv, const taas_attention_shape *s, float *scratch,
                            int nthreads, uint64_t seed, uint64_t offset) {
    const int n = s->n, t = s->t, c = s->c, h = s->heads, d = c / h;
    const size_t ld = 3 * (size_t)c, per = per_thread(s);
    const float scale = 1.0f / sqrtf((float)d), ks = keep_scale(s->p), p = s->p;
    taas_blas_setup();
#pragma omp parallel num_threads(nthreads)
    {
        float *S = scratch + per * (size_t)omp_get_thread_num(), *O = S + 2 * B * B, *m = O + (size_t)B * d, *l = m + B;
#pragma omp for schedule(static)
        for (int u = 0; u < n * h; u++) {
            int i = u / h, hd = u % h;
            const float *q = qkv + (size_t)i * t * ld + (size_t)hd * d, *k = q + c, *v = q + 2 * (size_t)c;
            float *out = y + (size_t)i * t * c + (size_t)hd * d, *L = lse + (size_t)u * t;
            for (int r0 = 0; r0 < t; r0 += B) {
                int br = t - r0 < B ? t - r0 : B;
                memset(O, 0, (size_t)br * d * sizeof(float));
                for (int r = 0; r < br; r++) m[r] = -INFINITY, l[r] = 0.0f;
                for (int c0 = 0; c0 < r0 + br; c0 += B) {
                    int bc = r0 + br - c0 < B ? r0 + br - c0 : B;
                    /* S (br, bc) = scale * Q_i K_j^T */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, d, scale, q + (size_t)r0 * ld,
                                (int)ld, k + (size_t)c0 * ld, (int)ld, 0.0f, S, B);
                    for (int r = 0; r < br; r++) {
                        float *sr = S + (size_t)r * B;
                        int row = r0 + r, lim = row - c0 + 1 < bc ? row - c0 + 1 : bc;  /* keys <= row */
                        float mx = m[r];
                        for (int j = 0; j < lim; j++) mx = sr[j] > mx ? sr[j] : mx;
                        float corr = m[r] == -INFINITY ? 0.0f : taas_expf(m[r] - mx), sum = 0.0f;
                        exp_row(sr, lim, mx);
                        for (int j = 0; j < lim; j++) sum += sr[j];
                        if (p > 0.0f)
                            for (int j = 0; j < lim; j++)
                                sr[j] = taas_ctr_uniform(seed, ctr(offset, (size_t)u, t, row, c0 + j)) < p ? 0.0f
                                                                                                         : sr[j] * ks;
                        for (int j = lim; j < bc; j++) sr[j] = 0.0f;
                        l[r] = l[r] * corr + sum;
                        m[r] = mx;
                        float *o = O + (size_t)r * d;
                        for (int x = 0; x < d; x++) o[x] *= corr;
                    }
                    /* O (br, d) += P V_j */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, d, bc, 1.0f, S, B,
                                v + (size_t)c0 * ld, (int)ld, 1.0f, O, d);
                }
                for (int r = 0; r < br; r++) {
                    float inv = 1.0f / l[r], *o = out + (size_t)(r0 + r) * c;
                    for (int x = 0; x < d; x++) o[x] = O[(size_t)r * d + x] * inv;
                    L[r0 + r] = m[r] + logf(l[r]);
                }
            }
        }
    }
}

void taas_attention_backward(float *dqkv, const float *dy, const float *qkv, const float *y, const float *lse,
                             const taas_attention_shape *s, float *scratch, int nthreads, uint64_t seed,
                             uint64_t offset) {
    const int n = s->n, t = s->t, c = s->c, h = s->heads, d = c / h;
    const size_t ld = 3 * (size_t)c, per = per_thread(s);
    const float scale = 1.0f / sqrtf((float)d), ks = keep_scale(s->p), p = s->p;
    taas_blas_setup();
#pragma omp parallel num_threads(nthreads)
    {
        float *P = scratch + per * (size_t)omp_get_thread_num(), *dS = P + B * B, *Dr = dS + B * B;
#pragma omp for schedule(static)
        for (int u = 0; u < n * h; u++) {
            int i = u / h, hd = u % h;
            size_t base = (size_t)i * t * ld + (size_t)hd * d;
            const float *q = qkv + base, *k = q + c, *v = q + 2 * (size_t)c, *L = lse + (size_t)u * t;
            const float *dO = dy + (size_t)i * t * c + (size_t)hd * d, *O = y + (size_t)i * t * c + (size_t)hd * d;
            float *dq = dqkv + base, *dk = dq + c, *dv = dq + 2 * (size_t)c;
            for (int r = 0; r < t; r++)
                for (int part = 0; part < 3; part++) memset(dq + (size_t)r * ld + (size_t)part * c, 0, (size_t)d * sizeof(float));
            for (int r0 = 0; r0 < t; r0 += B) {
                int br = t - r0 < B ? t - r0 : B;
                for (int r = 0; r < br; r++) {  /* D_r = dO_r . O_r */
                    const float *a = dO + (size_t)(r0 + r) * c, *b = O + (size_t)(r0 + r) * c;
                    double acc = 0;
                    for (int x = 0; x < d; x++) acc += (double)a[x] * b[x];
                    Dr[r] = (float)acc;
                }
                for (int c0 = 0; c0 < r0 + br; c0 += B) {
                    int bc = r0 + br - c0 < B ? r0 + br - c0 : B;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, d, scale, q + (size_t)r0 * ld,
                                (int)ld, k + (size_t)c0 * ld, (int)ld, 0.0f, P, B);
                    /* dP (br, bc) = dO_i V_j^T */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, d, 1.0f, dO + (size_t)r0 * c, c,
                                v + (size_t)c0 * ld, (int)ld, 0.0f, dS, B);
                    for (int r = 0; r < br; r++) {
                        float *pr = P + (size_t)r * B, *gr = dS + (size_t)r * B, lr = L[r0 + r];
                        int row = r0 + r, lim = row - c0 + 1 < bc ? row - c0 + 1 : bc;
                        exp_row(pr, lim, lr);
                        for (int j = 0; j < lim; j++) {
                            float pj = pr[j], mk = 1.0f;
                            if (p > 0.0f)
                                mk = taas_ctr_uniform(seed, ctr(offset, (size_t)u, t, row, c0 + j)) < p ? 0.0f : ks;
                            gr[j] = pj * (gr[j] * mk - Dr[r]);  /* dS */
                            pr[j] = pj * mk;                    /* the probabilities that V saw */
                        }
                        for (int j = lim; j < bc; j++) pr[j] = gr[j] = 0.0f;
                    }
                    /* dV_j += P^T dO_i; dQ_i += scale dS K_j; dK_j += scale dS^T Q_i */
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bc, d, br, 1.0f, P, B, dO + (size_t)r0 * c, c,
                                1.0f, dv + (size_t)c0 * ld, (int)ld);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, d, bc, scale, dS, B,
                                k + (size_t)c0 * ld, (int)ld, 1.0f, dq + (size_t)r0 * ld, (int)ld);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bc, d, br, scale, dS, B,
                                q + (size_t)r0 * ld, (int)ld, 1.0f, dk + (size_t)c0 * ld, (int)ld);
                }
            }
        }
    }
}
