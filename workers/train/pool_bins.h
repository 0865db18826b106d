/* AdaptiveAvgPool2d's bins along one axis, PyTorch's: output i of `out` averages the inputs
 * [floor(i*in/out), ceil((i+1)*in/out)). The same functions on the CPU (layer_pool.c) and the
 * GPU (cu_pool.cu), so that both take the same windows. */
#ifndef TAAS_POOL_BINS_H
#define TAAS_POOL_BINS_H

#ifdef __CUDACC__
#define TAAS_HOST_DEVICE __host__ __device__
#else
#define TAAS_HOST_DEVICE
#endif

/* Bin i's first input and one past its last (products in 64 bits: in * out may pass 2^31) */
static inline TAAS_HOST_DEVICE int taas_bin_start(int i, int in, int out) {
    return (int)((long long)i * in / out);
}
static inline TAAS_HOST_DEVICE int taas_bin_end(int i, int in, int out) {
    return (int)(((long long)(i + 1) * in + out - 1) / out);
}

/* The bins that hold input x: [*lo, *hi). start(i) <= x  <=>  i < (x+1)*out/in, and
 * end(i) > x  <=>  i >= floor(x*out/in). */
static inline TAAS_HOST_DEVICE void taas_bins_of(int x, int in, int out, int *lo, int *hi) {
    *lo = (int)((long long)x * out / in);
    *hi = (int)(((long long)(x + 1) * out + in - 1) / in);
}

#endif
