/* What the .cu files share: the launch shape, a grid-stride loop, a block's sum, and the
 * check after a launch. Kernels are plain one-thread-per-element loops over contiguous
 * buffers; sums go through fixed trees in shared memory, never atomics, so that a run
 * repeats to the last bit. */
#ifndef TAAS_CU_KERN_CUH
#define TAAS_CU_KERN_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cu_device.h"

#define TAAS_CU_THREADS 256

/* Blocks for n elements at one per thread; a grid-stride loop covers the rest above the cap. */
static inline unsigned taas_cu_blocks(size_t n) {
    size_t b = (n + TAAS_CU_THREADS - 1) / TAAS_CU_THREADS;
    const size_t cap = (size_t)1 << 20;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

#define TAAS_CU_LOOP(i, n)                                                                                   \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);                         \
         i += (size_t)blockDim.x * gridDim.x)

/* The block's sum of v, in every thread; sh has blockDim.x entries (a power of two). */
template <typename T> __device__ inline T taas_cu_block_sum(T v, T *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

/* Column sums of a row-major matrix by blocks of TAAS_CU_COLS x TAAS_CU_PHASES threads:
 * threadIdx.x a column (a warp reads a row's 32 neighbours at once), threadIdx.y a phase that
 * takes every 32nd row. taas_cu_phase_sum adds the phases' values of each column in a fixed
 * tree and gives the sum to every thread of the column; sh has PHASES x COLS entries. */
#define TAAS_CU_COLS 32
#define TAAS_CU_PHASES 32
template <typename T> __device__ inline T taas_cu_phase_sum(T v, T (*sh)[TAAS_CU_COLS]) {
    unsigned col = threadIdx.x, ph = threadIdx.y;
    sh[ph][col] = v;
    __syncthreads();
    for (unsigned s = TAAS_CU_PHASES / 2; s > 0; s >>= 1) {
        if (ph < s) sh[ph][col] += sh[ph + s][col];
        __syncthreads();
    }
    T r = sh[0][col];
    __syncthreads();
    return r;
}

/* A warp per row: TAAS_CU_ROWS(i, n) gives each warp of the grid rows i, i + warps, ... (the
 * same i in all its lanes, so a warp's shuffles stay in step; blocks of a multiple of 32
 * threads); taas_cu_warp_rows(n) is the grid for it. taas_cu_warp_sum and taas_cu_warp_max
 * give every lane lane 0's result of a fixed tree, so that all lanes use the same number. */
#define TAAS_CU_WARP 32
#define TAAS_CU_ALL 0xffffffffu /* every lane of a warp, for the __shfl_*_sync calls */
#define TAAS_CU_ROWS(i, n)                                                                                   \
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / TAAS_CU_WARP; i < (size_t)(n);      \
         i += (size_t)blockDim.x * gridDim.x / TAAS_CU_WARP)

static inline unsigned taas_cu_warp_rows(size_t n) { return taas_cu_blocks(n * TAAS_CU_WARP); }

template <typename T> __device__ inline T taas_cu_warp_sum(T v) {
    for (int o = TAAS_CU_WARP / 2; o > 0; o >>= 1) v += __shfl_down_sync(TAAS_CU_ALL, v, o);
    return __shfl_sync(TAAS_CU_ALL, v, 0);
}

/* loss.c's running maximum: a NaN after the first place is passed over, as there */
__device__ inline float taas_cu_warp_max(float v) {
    for (int o = TAAS_CU_WARP / 2; o > 0; o >>= 1) {
        float u = __shfl_down_sync(TAAS_CU_ALL, v, o);
        v = u > v ? u : v;
    }
    return __shfl_sync(TAAS_CU_ALL, v, 0);
}

/* After `kernel<<<...>>>`: 0 or -1 with err naming it. */
#define TAAS_CU_LAUNCHED(what, err) taas_cu_check_launch(what, err)

#endif
