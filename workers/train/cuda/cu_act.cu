// Element-wise layers on the GPU: the activations, Dropout and the residual sum, one thread
// per element with the CPU's formulas (layer_act.c, layer_dropout.c, layer_add.c).
#include <math.h>

#include "ctr_rng.h"  /* the CPU's Dropout mask, bit for bit (test_cuda_layers checks it) */
#include "cu_kern.cuh"
#include "cu_layers.h"
#include "errnames.h"

// GELU(approximate='tanh')'s constants, layer_act.c's
#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f

__global__ static void act_fwd(taas_cu_act kind, float *y, const float *x, size_t n, float slope) {
    TAAS_CU_LOOP(i, n) {
        float v = x[i];
        switch (kind) {
        case TAAS_CU_RELU: y[i] = v > 0.0f ? v : 0.0f; break;
        case TAAS_CU_LEAKY_RELU: y[i] = v > 0.0f ? v : v * slope; break;
        case TAAS_CU_TANH: y[i] = tanhf(v); break;
        case TAAS_CU_SIGMOID: y[i] = 1.0f / (1.0f + expf(-v)); break;
        case TAAS_CU_GELU: y[i] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2)); break;
        case TAAS_CU_GELU_TANH: y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * v * v * v))); break;
        }
    }
}

__global__ static void act_bwd(taas_cu_act kind, float *dx, const float *dy, const float *x, const float *y,
                               size_t n, float slope) {
    const float inv_sqrt_2pi = 0.3989422804014327f;
    TAAS_CU_LOOP(i, n) {
        switch (kind) {
        case TAAS_CU_RELU: dx[i] = x[i] > 0.0f ? dy[i] : 0.0f; break;
        case TAAS_CU_LEAKY_RELU: dx[i] = x[i] > 0.0f ? dy[i] : dy[i] * slope; break;
        case TAAS_CU_TANH: dx[i] = dy[i] * (1.0f - y[i] * y[i]); break;
        case TAAS_CU_SIGMOID: dx[i] = dy[i] * y[i] * (1.0f - y[i]); break;
        case TAAS_CU_GELU: {  // d/dx x*Phi(x) = Phi(x) + x*phi(x)
            float v = x[i];
            float cdf = 0.5f * (1.0f + erff(v * (float)M_SQRT1_2)), pdf = inv_sqrt_2pi * expf(-0.5f * v * v);
            dx[i] = dy[i] * (cdf + v * pdf);
            break;
        }
        case TAAS_CU_GELU_TANH: {
            float v = x[i], th = tanhf(GELU_K * (v + GELU_A * v * v * v));
            float dth = (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
            dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * dth);
            break;
        }
        }
    }
}

__device__ static inline float keep_scale(float p) {
    return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
}

// the counter offset of a kernel given `offset`: plus the step's part (cu_device.h)
__device__ static inline uint64_t step_offset(uint64_t offset, const uint64_t *step, uint64_t stride) {
    return step ? offset + *step * stride : offset;
}

__global__ static void dropout_fwd(float *y, float *mask, const float *x, size_t n, float p, uint64_t seed,
                                   uint64_t offset, const uint64_t *step, uint64_t stride) {
    float scale = keep_scale(p);
    offset = step_offset(offset, step, stride);
    TAAS_CU_LOOP(i, n) {
        float m = taas_ctr_uniform(seed, offset + i) >= p ? scale : 0.0f;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

__global__ static void channel_mask(float *mask, size_t planes, float p, uint64_t seed, uint64_t offset,
                                    const uint64_t *step, uint64_t stride) {
    float scale = keep_scale(p);
    offset = step_offset(offset, step, stride);
    TAAS_CU_LOOP(ch, planes) mask[ch] = taas_ctr_uniform(seed, offset + ch) >= p ? scale : 0.0f;
}

// y = x times the mask of its (n, c) plane
__global__ static void times_plane_mask(float *y, const float *x, const float *mask, size_t total, size_t hw) {
    TAAS_CU_LOOP(i, total) y[i] = x[i] * mask[i / hw];
}

__global__ static void times_mask(float *y, const float *x, const float *mask, size_t n) {
    TAAS_CU_LOOP(i, n) y[i] = x[i] * mask[i];
}

// y = a + b; y may be a or b: each thread reads its element before it writes it
__global__ static void add_kernel(float *y, const float *a, const float *b, size_t n) {
    TAAS_CU_LOOP(i, n) y[i] = a[i] + b[i];
}

__global__ static void accumulate_kernel(float *y, const float *x, size_t n) {
    TAAS_CU_LOOP(i, n) y[i] += x[i];
}

extern "C" int taas_cu_add(taas_cu *cu, float *y, const float *a, const float *b, size_t n, taas_error *err) {
    if (n == 0) return 0;
    add_kernel<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(y, a, b, n);
    return TAAS_CU_LAUNCHED("a residual sum", err);
}

extern "C" int taas_cu_accumulate(taas_cu *cu, float *y, const float *x, size_t n, taas_error *err) {
    if (n == 0) return 0;
    accumulate_kernel<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(y, x, n);
    return TAAS_CU_LAUNCHED("a gradient's accumulation", err);
}

extern "C" int taas_cu_act_forward(taas_cu *cu, taas_cu_act kind, float *y, const float *x, size_t n, float slope,
                                   taas_error *err) {
    if (n == 0) return 0;
    act_fwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(kind, y, x, n, slope);
    return TAAS_CU_LAUNCHED("an activation's forward", err);
}

extern "C" int taas_cu_act_backward(taas_cu *cu, taas_cu_act kind, float *dx, const float *dy, const float *x,
                                    const float *y, size_t n, float slope, taas_error *err) {
    if (n == 0) return 0;
    act_bwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(kind, dx, dy, x, y, n, slope);
    return TAAS_CU_LAUNCHED("an activation's backward", err);
}

extern "C" int taas_cu_dropout_forward(taas_cu *cu, float *y, float *mask, const float *x, size_t n, float p,
                                       uint64_t seed, uint64_t offset, taas_error *err) {
    if (n == 0) return 0;
    dropout_fwd<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(y, mask, x, n, p, seed, offset, cu->step,
                                                                     cu->step_stride);
    return TAAS_CU_LAUNCHED("Dropout's forward", err);
}

extern "C" int taas_cu_dropout2d_forward(taas_cu *cu, float *y, float *mask, const float *x, int n, int c, int hw,
                                         float p, uint64_t seed, uint64_t offset, taas_error *err) {
    size_t planes = (size_t)n * c;
    if (planes == 0) return 0;
    channel_mask<<<taas_cu_blocks(planes), TAAS_CU_THREADS, 0, cu->stream>>>(mask, planes, p, seed, offset, cu->step,
                                                                            cu->step_stride);
    if (TAAS_CU_LAUNCHED("Dropout2d's mask", err)) return -1;
    return taas_cu_dropout2d_backward(cu, y, x, mask, n, c, hw, err);  // the same product: y = x * plane mask
}

extern "C" int taas_cu_dropout_backward(taas_cu *cu, float *dx, const float *dy, const float *mask, size_t n,
                                        taas_error *err) {
    if (n == 0) return 0;
    times_mask<<<taas_cu_blocks(n), TAAS_CU_THREADS, 0, cu->stream>>>(dx, dy, mask, n);
    return TAAS_CU_LAUNCHED("Dropout's backward", err);
}

extern "C" int taas_cu_dropout2d_backward(taas_cu *cu, float *dx, const float *dy, const float *mask, int n, int c,
                                          int hw, taas_error *err) {
    size_t total = (size_t)n * c * hw;
    if (total == 0) return 0;
    times_plane_mask<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(dx, dy, mask, total, (size_t)hw);
    return TAAS_CU_LAUNCHED("Dropout2d's product", err);
}

extern "C" int taas_cu_copy(taas_cu *cu, float *y, const float *x, size_t n, taas_error *err) {
    if (n == 0 || y == x) return 0;
    return taas_cu_check(cudaMemcpyAsync(y, x, n * sizeof *y, cudaMemcpyDeviceToDevice, cu->stream),
                         "a copy on the GPU", err);
}

// Whether this build has code for the device: the kernels are compiled for the
// CMAKE_CUDA_ARCHITECTURES of the build (80 and 90 by default), and an older GPU has none.
extern "C" int taas_cu_check_code(taas_cu *cu, taas_error *err) {
    cudaFuncAttributes fa;
    cudaError_t rc = cudaFuncGetAttributes(&fa, times_mask);
    if (rc == cudaSuccess) return 0;
    (void)cudaGetLastError();
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cu->device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cu->device);
    taas_srcpos nowhere = {0, 0};
    taas_error_set(err, TAAS_ERR_DEVICE, nowhere, "this build of taas has no GPU code for %s (compute capability "
                   "%d.%d): %s", cu->name, major, minor, cudaGetErrorString(rc));
    taas_error_hint(err, "rebuild with -DCMAKE_CUDA_ARCHITECTURES=%d%d (or native), or train on the CPU", major, minor);
    return -1;
}
