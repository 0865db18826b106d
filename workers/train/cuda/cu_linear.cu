// Linear on the GPU: y = x w^T + b as one cuBLAS sgemm and a bias pass; the bias's gradient
// as a per-channel sum (also the convolution's).
#include "cu_kern.cuh"
#include "cu_layers.h"

// y (N, OUT) += b (OUT) on every row
__global__ static void add_bias(float *y, const float *b, size_t total, int out) {
    TAAS_CU_LOOP(i, total) y[i] += b[i % (size_t)out];
}

// One block per channel: out[ch] += sum of x[i, ch, k] over i < n, k < hw, added in double
// as the CPU's taas_bias_grad adds (a long column's float sum drifts by 1e-5).
__global__ static void channel_sum(float *out, const float *x, int n, int c, int hw) {
    __shared__ double sh[TAAS_CU_THREADS];
    int ch = blockIdx.x;
    size_t m = (size_t)n * hw;
    double s = 0.0;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        size_t i = t / (size_t)hw, k = t % (size_t)hw;
        s += x[(i * c + ch) * hw + k];
    }
    s = taas_cu_block_sum(s, sh);
    if (threadIdx.x == 0) out[ch] += (float)s;
}

// hw == 1 (the rows of a Linear or a Conv1D): a block per 32 channels, its 32 phases taking
// every 32nd row, so that a warp reads 32 neighbouring channels of a row at once (a block per
// channel read one float of each row, c apart)
__global__ static void column_sum(float *out, const float *x, int n, int c) {
    __shared__ double sh[TAAS_CU_PHASES][TAAS_CU_COLS];
    int ch = (int)(blockIdx.x * TAAS_CU_COLS + threadIdx.x);
    double s = 0.0;
    if (ch < c)
        for (size_t i = threadIdx.y; i < (size_t)n; i += TAAS_CU_PHASES) s += x[i * c + ch];
    s = taas_cu_phase_sum(s, sh);
    if (!threadIdx.y && ch < c) out[ch] += (float)s;
}

extern "C" int taas_cu_channel_sum(taas_cu *cu, float *out, const float *x, int n, int c, int hw, taas_error *err) {
    if (c <= 0) return 0;
    if (hw == 1)
        column_sum<<<(unsigned)((c + TAAS_CU_COLS - 1) / TAAS_CU_COLS), dim3(TAAS_CU_COLS, TAAS_CU_PHASES), 0,
                     cu->stream>>>(out, x, n, c);
    else
        channel_sum<<<c, TAAS_CU_THREADS, 0, cu->stream>>>(out, x, n, c, hw);
    return TAAS_CU_LAUNCHED("a bias gradient", err);
}

extern "C" int taas_cu_linear_forward(taas_cu *cu, float *y, const float *x, const float *w, const float *b, int n,
                                      int in, int out, taas_error *err) {
    const float one = 1.0f, zero = 0.0f;
    // row-major y (N, OUT) = x (N, IN) w^T is column-major y^T (OUT, N) = w^T... as cuBLAS sees
    // the same memory: op(A) = A^T with A = w (IN x OUT, ld IN), B = x (IN x N, ld IN)
    if (taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x, in, &zero, y,
                                       out),
                           "Linear's forward product", err))
        return -1;
    if (!b) return 0;
    size_t total = (size_t)n * out;
    add_bias<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(y, b, total, out);
    return TAAS_CU_LAUNCHED("Linear's bias", err);
}

// Conv1D: row-major y (R, OUT) = x (R, IN) w (IN, OUT) is column-major y^T = w^T x^T, where
// cuBLAS sees w as (OUT, IN) with ld OUT and x as (IN, R) with ld IN
extern "C" int taas_cu_conv1d_forward(taas_cu *cu, float *y, const float *x, const float *w, const float *b,
                                      size_t rows, int in, int out, taas_error *err) {
    const float one = 1.0f, zero = 0.0f;
    if (taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_N, CUBLAS_OP_N, out, (int)rows, in, &one, w, out, x, in,
                                       &zero, y, out),
                           "Conv1D's forward product", err))
        return -1;
    if (!b) return 0;
    size_t total = rows * (size_t)out;
    add_bias<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(y, b, total, out);
    return TAAS_CU_LAUNCHED("Conv1D's bias", err);
}

extern "C" int taas_cu_conv1d_backward(taas_cu *cu, float *dx, float *dw, float *db, const float *dy, const float *x,
                                       const float *w, size_t rows, int in, int out, taas_error *err) {
    const float one = 1.0f, zero = 0.0f;
    // dx (R, IN) = dy w^T: column-major dx^T (IN, R) = (w as (OUT, IN))^T dy^T (OUT, R)
    if (dx && taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_T, CUBLAS_OP_N, in, (int)rows, out, &one, w, out, dy,
                                             out, &zero, dx, in),
                                 "Conv1D's input gradient", err))
        return -1;
    // dw (IN, OUT) += x^T dy: column-major dw^T (OUT, IN) += dy^T (OUT, R) (x^T (IN, R))^T
    if (dw && taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_N, CUBLAS_OP_T, out, in, (int)rows, &one, dy, out, x,
                                             in, &one, dw, out),
                                 "Conv1D's weight gradient", err))
        return -1;
    return db ? taas_cu_channel_sum(cu, db, dy, (int)rows, out, 1, err) : 0;
}

extern "C" int taas_cu_linear_backward(taas_cu *cu, float *dx, float *dw, float *db, const float *dy,
                                       const float *x, const float *w, int n, int in, int out, taas_error *err) {
    const float one = 1.0f, zero = 0.0f;
    // dx (N, IN) = dy (N, OUT) w (OUT, IN): column-major dx^T (IN, N) = w^T-view (IN, OUT) dy^T-view (OUT, N)
    if (dx && taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w, in, dy, out,
                                             &zero, dx, in),
                                 "Linear's input gradient", err))
        return -1;
    // dw (OUT, IN) += dy^T x: column-major dw^T (IN, OUT) += x-view (IN, N) (dy-view (OUT, N))^T
    if (dw && taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy, out,
                                             &one, dw, in),
                                 "Linear's weight gradient", err))
        return -1;
    return db ? taas_cu_channel_sum(cu, db, dy, n, out, 1, err) : 0;
}
