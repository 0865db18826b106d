/* The fused causal attention alone on a GPU (cu_attention.cu), for bench/gpu_gpt_bench.py:
 * the three kernel sets, tiled, plain and through the products ("gemm"), on the same inputs,
 * timed with CUDA events.
 *
 *   taas-cuda-attention-bench [--batch N] [--t T] [--heads H] [--d D] [--steps S] [--warmup W]
 *                             [--dropout P] [--math fp32|tf32|bf16] [--kernels tiled,plain,gemm]
 *
 * --math is the matrix products' arithmetic (only the gemm set has products): FP32 by
 * default, BF16 as fit(precision='bf16') runs them. --kernels: the sets to time (all three by
 * default).
 * q, k, v and the output gradient uniform in [-1, 1) (the same generator as taas-train-bench's
 * CPU attention); per step the forward, then the backward. W untimed steps, then S timed ones.
 * Prints one JSON line a kernel set:
 *   {"kernels": "tiled", "math": "fp32", "batch": N, "t": T, "heads": H, "d": D, "dropout": P, "steps": S,
 *    "ms_per_step": ..., "fwd_ms": ..., "tflops": ...}
 * tflops counts the causal products' multiply-adds x 2 (forward 2, backward 5 of T*T*D/2 a
 * head), as FlashAttention's papers do. Exits 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cu_layers.h"
#include "cuda_plugin.h"
#include "init.h"

static int usage(void) {
    fprintf(stderr, "usage: taas-cuda-attention-bench [--batch N] [--t T] [--heads H] [--d D] [--steps S] "
                    "[--warmup W] [--dropout P] [--math fp32|tf32|bf16] [--kernels tiled,plain,gemm]\n");
    return 2;
}

static int cuda_ok(cudaError_t rc, const char *what) {
    if (rc == cudaSuccess) return 1;
    fprintf(stderr, "taas-cuda-attention-bench: %s: %s\n", what, cudaGetErrorString(rc));
    return 0;
}

/* Device copy of n floats of host (zeros when host is NULL), or NULL. */
static float *dev(const float *host, size_t n) {
    void *d = NULL;
    if (!cuda_ok(cudaMalloc(&d, n * sizeof(float)), "cudaMalloc")) return NULL;
    cudaError_t rc = host ? cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice)
                          : cudaMemset(d, 0, n * sizeof(float));
    if (!cuda_ok(rc, "filling a buffer")) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

typedef struct bufs {
    float *qkv, *dy, *y, *lse, *dqkv, *scratch;
    size_t room;
} bufs;

/* One kernel set's line; 0, or 1 after saying what failed. */
static const char *const names[] = {"tiled", "plain", "gemm"};

static int run(taas_cu *cu, const bufs *b, const taas_attention_shape *s, taas_cu_attention set, int warmup,
               int steps) {
    taas_error e;
    taas_error_clear(&e);
    cu->attention = set;
    size_t need = taas_cu_attention_scratch_floats(cu, s);
    if (need > b->room) {
        printf("{\"kernels\": \"%s\", \"error\": \"needs %zu floats of scratch\"}\n", names[set], need);
        return 0;
    }
    cudaEvent_t ev[3];
    for (int i = 0; i < 3; i++)
        if (!cuda_ok(cudaEventCreate(&ev[i]), "cudaEventCreate")) return 1;
    float fwd_ms = 0, all_ms = 0;
    for (int st = 0; st < warmup + steps; st++) {
        int timed = st >= warmup;
        if (timed && !cuda_ok(cudaEventRecord(ev[0], cu->stream), "cudaEventRecord")) return 1;
        if (taas_cu_attention_forward(cu, b->y, b->lse, b->qkv, s, b->scratch, b->room, 1, 0, &e)) goto failed;
        if (timed && !cuda_ok(cudaEventRecord(ev[1], cu->stream), "cudaEventRecord")) return 1;
        if (taas_cu_attention_backward(cu, b->dqkv, b->dy, b->qkv, b->y, b->lse, s, b->scratch, b->room, 1, 0, &e))
            goto failed;
        if (timed) {
            float f, a;
            if (!cuda_ok(cudaEventRecord(ev[2], cu->stream), "cudaEventRecord") ||
                !cuda_ok(cudaEventSynchronize(ev[2]), "the step") ||
                !cuda_ok(cudaEventElapsedTime(&f, ev[0], ev[1]), "cudaEventElapsedTime") ||
                !cuda_ok(cudaEventElapsedTime(&a, ev[0], ev[2]), "cudaEventElapsedTime"))
                return 1;
            fwd_ms += f, all_ms += a;
        }
    }
    if (taas_cu_sync(cu, "the attention", &e)) goto failed;
    for (int i = 0; i < 3; i++) cudaEventDestroy(ev[i]);
    int d = s->c / s->heads;
    double flop = 7.0 * s->n * s->heads * (double)s->t * s->t * d;  /* (2 + 5) x 2 x T*T*D/2 */
    const char *math = cu->math == TAAS_CU_BF16 ? "bf16" : cu->math == TAAS_CU_TF32 ? "tf32" : "fp32";
    printf("{\"kernels\": \"%s\", \"math\": \"%s\", \"batch\": %d, \"t\": %d, \"heads\": %d, \"d\": %d, "
           "\"dropout\": %g, \"steps\": %d, \"ms_per_step\": %.4f, \"fwd_ms\": %.4f, \"tflops\": %.3f}\n",
           names[set], math, s->n, s->t, s->heads, d, s->p, steps, all_ms / steps, fwd_ms / steps,
           flop / (all_ms / steps * 1e-3) / 1e12);
    fflush(stdout);
    return 0;
failed:
    fprintf(stderr, "taas-cuda-attention-bench: %s (%s)\n", e.message, e.hint);
    return 1;
}

int main(int argc, char **argv) {
    int n = 4, t = 1024, heads = 12, d = 64, steps = 20, warmup = 3;
    float p = 0.0f;
    taas_cu_math math = TAAS_CU_FP32;
    const char *kernels = "tiled,plain,gemm";
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--batch")) n = atoi(v);
        else if (!strcmp(k, "--t")) t = atoi(v);
        else if (!strcmp(k, "--heads")) heads = atoi(v);
        else if (!strcmp(k, "--d")) d = atoi(v);
        else if (!strcmp(k, "--steps")) steps = atoi(v);
        else if (!strcmp(k, "--warmup")) warmup = atoi(v);
        else if (!strcmp(k, "--dropout")) p = (float)atof(v);
        else if (!strcmp(k, "--math") && !strcmp(v, "fp32")) math = TAAS_CU_FP32;
        else if (!strcmp(k, "--math") && !strcmp(v, "tf32")) math = TAAS_CU_TF32;
        else if (!strcmp(k, "--math") && !strcmp(v, "bf16")) math = TAAS_CU_BF16;
        else if (!strcmp(k, "--kernels")) kernels = v;
        else return usage();
    }
    if (n < 1 || t < 1 || heads < 1 || d < 1 || steps < 1 || warmup < 0 || p < 0.0f || p >= 1.0f) return usage();
    if (taas_cuda_devices() < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    taas_cu cu;
    taas_error e;
    taas_error_clear(&e);
    if (taas_cu_init(&cu, 0, &e)) {
        fprintf(stderr, "taas-cuda-attention-bench: %s (%s)\n", e.message, e.hint);
        return 1;
    }
    taas_cu_set_math(&cu, math);
    taas_attention_shape s = {n, t, heads * d, heads, p};
    size_t cnt = (size_t)n * t * heads * d;
    float *qkv = malloc(3 * cnt * sizeof(float)), *dy = malloc(cnt * sizeof(float));
    bufs b = {0};
    int rc = 1;
    if (!qkv || !dy) {
        fprintf(stderr, "taas-cuda-attention-bench: out of memory\n");
        goto out;
    }
    taas_init_rng rng = {7, 0};
    taas_init_uniform(qkv, 3 * cnt, 1.0f, &rng);
    taas_init_uniform(dy, cnt, 1.0f, &rng);
    cu.attention = TAAS_CU_ATT_GEMM;  /* the most scratch any set takes */
    b.room = taas_cu_attention_scratch_floats(&cu, &s);
    if (!(b.qkv = dev(qkv, 3 * cnt)) || !(b.dy = dev(dy, cnt)) || !(b.y = dev(NULL, cnt)) ||
        !(b.lse = dev(NULL, (size_t)n * heads * t)) || !(b.dqkv = dev(NULL, 3 * cnt)) ||
        !(b.scratch = dev(NULL, b.room)))
        goto out;
    rc = 0;
    for (int set = 0; set < 3 && !rc; set++)
        if (strstr(kernels, names[set])) rc = run(&cu, &b, &s, (taas_cu_attention)set, warmup, steps);
out:
    cudaFree(b.qkv), cudaFree(b.dy), cudaFree(b.y), cudaFree(b.lse), cudaFree(b.dqkv), cudaFree(b.scratch);
    free(qkv), free(dy);
    taas_cu_free(&cu);
    return rc;
}
