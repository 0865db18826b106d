/* The matrix products through cuBLASLt (cu_lt.h). */
#include "cu_lt.h"

#include <cublasLt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A product's shape as cuBLASLt sees it: compared and hashed as bytes (zeroed first). */
typedef struct lt_key {
    int ct, ta, tb, m, n, k, lda, ldb, ldc, batches;
    long long sa, sb, sc;
    unsigned align_a, align_b, align_c;
} lt_key;

typedef struct lt_entry {
    lt_key key;
    int used, ok;  /* ok: cuBLASLt has an algorithm for it */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t ws;
} lt_entry;

/* Shapes kept: a model has a few dozen; past this many a product is planned each call */
enum { LT_SHAPES = 512 };

struct taas_cu_lt {
    cublasLtHandle_t h;
    lt_entry e[LT_SHAPES];
};

taas_cu_lt *taas_cu_lt_new(void) {
    taas_cu_lt *lt = calloc(1, sizeof *lt);
    if (!lt) return NULL;
    if (cublasLtCreate(&lt->h) != CUBLAS_STATUS_SUCCESS) {
        free(lt);
        return NULL;
    }
    return lt;
}

static void release(lt_entry *x) {
    if (x->lc) cublasLtMatrixLayoutDestroy(x->lc);
    if (x->lb) cublasLtMatrixLayoutDestroy(x->lb);
    if (x->la) cublasLtMatrixLayoutDestroy(x->la);
    if (x->desc) cublasLtMatmulDescDestroy(x->desc);
    memset(x, 0, sizeof *x);
}

void taas_cu_lt_free(taas_cu_lt *lt) {
    if (!lt) return;
    for (int i = 0; i < LT_SHAPES; i++)
        if (lt->e[i].used) release(&lt->e[i]);
    cublasLtDestroy(lt->h);
    free(lt);
}

/* The largest power of two, up to 256, that a byte address is a multiple of */
static unsigned align_of(uintptr_t p) {
    unsigned r = 256;
    while (r > 4 && p % r) r /= 2;
    return r;
}

/* An operand's alignment over all its batches: its first's, and its stride's */
static unsigned operand_align(const void *p, long long stride, int batches) {
    unsigned a = align_of((uintptr_t)p);
    if (batches > 1) {
        unsigned s = align_of((uintptr_t)stride * sizeof(float));
        if (s < a) a = s;
    }
    return a;
}

static int layout(cublasLtMatrixLayout_t *l, uint64_t rows, uint64_t cols, int64_t ld, int batches, long long stride) {
    if (cublasLtMatrixLayoutCreate(l, CUDA_R_32F, rows, cols, ld) != CUBLAS_STATUS_SUCCESS) return -1;
    if (batches <= 1) return 0;
    int32_t count = batches;
    int64_t offset = stride;
    return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count) ||
                   cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset,
                                                    sizeof offset)
               ? -1
               : 0;
}

/* x's descriptors and cuBLASLt's first algorithm for k within wsz bytes of workspace; x->ok
 * stays 0 where there is none (or a descriptor could not be made) */
static void plan(taas_cu_lt *lt, lt_entry *x, const lt_key *k, size_t wsz) {
    memset(x, 0, sizeof *x);
    x->key = *k;
    x->used = 1;
    int32_t ta = k->ta, tb = k->tb;
    if (cublasLtMatmulDescCreate(&x->desc, (cublasComputeType_t)k->ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        /* op(A) is m x k, op(B) k x n, C m x n; A and B as stored, before the transposes */
        layout(&x->la, ta == CUBLAS_OP_N ? k->m : k->k, ta == CUBLAS_OP_N ? k->k : k->m, k->lda, k->batches, k->sa) ||
        layout(&x->lb, tb == CUBLAS_OP_N ? k->k : k->n, tb == CUBLAS_OP_N ? k->n : k->k, k->ldb, k->batches, k->sb) ||
        layout(&x->lc, k->m, k->n, k->ldc, k->batches, k->sc))
        return;
    cublasLtMatmulPreference_t pref;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return;
    uint64_t room = wsz;
    uint32_t aa = k->align_a, ab = k->align_b, ac = k->align_c;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (!cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &room, sizeof room) &&
        !cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa) &&
        !cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab) &&
        !cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac) &&
        !cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof ac) &&
        cublasLtMatmulAlgoGetHeuristic(lt->h, x->desc, x->la, x->lb, x->lc, x->lc, pref, 1, &res, &found) ==
            CUBLAS_STATUS_SUCCESS &&
        found > 0 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize <= wsz) {
        x->algo = res.algo;
        x->ws = res.workspaceSize;
        x->ok = 1;
    }
    cublasLtMatmulPreferenceDestroy(pref);
}

/* k's entry: found, or planned into a free one; NULL when all are taken */
static lt_entry *entry(taas_cu_lt *lt, const lt_key *k, size_t wsz) {
    uint64_t hash = 1469598103934665603ULL;  /* FNV-1a */
    const unsigned char *b = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++) hash = (hash ^ b[i]) * 1099511628211ULL;
    for (int probe = 0; probe < LT_SHAPES; probe++) {
        lt_entry *x = &lt->e[(hash + (uint64_t)probe) % LT_SHAPES];
        if (!x->used) {
            plan(lt, x, k, wsz);
            return x;
        }
        if (!memcmp(&x->key, k, sizeof *k)) return x;
    }
    return NULL;
}

cublasStatus_t taas_cu_lt_gemm(taas_cu_lt *lt, cudaStream_t st, void *ws, size_t wsz, cublasComputeType_t ct,
                               cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                               const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                               const float *beta, float *c, int ldc, long long sc, int batches) {
    lt_key key;
    memset(&key, 0, sizeof key);
    key.ct = (int)ct, key.ta = (int)ta, key.tb = (int)tb, key.m = m, key.n = n, key.k = k;
    key.lda = lda, key.ldb = ldb, key.ldc = ldc, key.batches = batches > 1 ? batches : 1;
    if (key.batches > 1) key.sa = sa, key.sb = sb, key.sc = sc;
    key.align_a = operand_align(a, sa, key.batches), key.align_b = operand_align(b, sb, key.batches);
    key.align_c = operand_align(c, sc, key.batches);
    lt_entry once, *x = entry(lt, &key, wsz);
    if (!x) {  /* every entry taken: planned for this call alone */
        x = &once;
        plan(lt, x, &key, wsz);
    }
    cublasStatus_t rc = CUBLAS_STATUS_NOT_SUPPORTED;
    if (x->ok)
        rc = cublasLtMatmul(lt->h, x->desc, alpha, a, x->la, b, x->lb, beta, c, x->lc, c, x->lc, &x->algo, ws, x->ws,
                            st);
    if (x == &once) release(x);
    return rc;
}
