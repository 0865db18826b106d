// Conv2d on the GPU: im2col, then cuBLAS sgemm, over the batch in chunks of samples.
// For a chunk of cn samples the column matrix col is (K, cn*P), K = C*KH*KW, P = OH*OW,
// column j*P + p holding sample j's receptive field at output position p. Forward is one
// strided-batched sgemm per chunk, writing each sample's (OC, P) output in place; backward
// gathers the output gradient as T (OC, cn*P), so the weight gradient is one sgemm with the
// whole chunk in its inner dimension and the input gradient one sgemm and a col2im gather.
// With G groups, K = C/G*KH*KW and each group runs those products on its own channels: its
// C/G input planes, its OC/G rows of w, of the output and of T.
// With TAAS_CUDA_CUDNN=1 a shape cuDNN has an algorithm for runs through it instead
// (cu_cudnn.h): the whole batch in one call a pass, the bias and the fused ReLU as here.
#include "cu_cudnn.h"
#include "cu_kern.cuh"
#include "cu_layers.h"
#include "errnames.h"

// Scratch floats the model gives a convolution: col and T together (256 MiB).
static const size_t SCRATCH_BUDGET = (size_t)64 << 20;

struct conv_dims {
    int oh, ow, groups, cg, ocg;  // and a group's input and output channels
    size_t k, p;                  // rows of col, output positions per sample
};

static conv_dims dims(const taas_conv2d_shape *s) {
    conv_dims d;
    d.oh = (s->h + 2 * s->ph - s->kh) / s->sh + 1;
    d.ow = (s->w + 2 * s->pw - s->kw) / s->sw + 1;
    d.groups = taas_conv2d_groups(s);
    d.cg = s->c / d.groups;
    d.ocg = s->oc / d.groups;
    d.k = (size_t)d.cg * s->kh * s->kw;
    d.p = (size_t)d.oh * d.ow;
    return d;
}

// Samples per chunk: as many as `room` floats hold, at most the batch; 0 when not even one.
static int chunk(const taas_conv2d_shape *s, const conv_dims &d, size_t room) {
    size_t per = (d.k + (size_t)s->oc) * d.p, c = room / per;
    return c > (size_t)s->n ? s->n : (int)c;
}

// Through cuDNN the scratch holds the fused ReLU's masked output gradient (N, OC, P) first,
// then cuDNN's workspace, 256-byte aligned as the scratch is.
static size_t dnn_dy_floats(const taas_conv2d_shape *s) {
    conv_dims d = dims(s);
    return ((size_t)s->n * s->oc * d.p + 63) / 64 * 64;
}

// The scratch floats s takes through cuDNN, or 0 where it does not run s
static size_t dnn_floats(taas_cu *cu, const taas_conv2d_shape *s) {
    size_t ws;
    if (!cu->dnn || !taas_cu_dnn_conv_plan(cu->dnn, s, cu->math, &ws)) return 0;
    return dnn_dy_floats(s) + (ws + sizeof(float) - 1) / sizeof(float);
}

// With cuDNN, the room for either path: a shape cuDNN refuses as it runs, or in an arithmetic
// planned later, runs im2col in the same scratch.
extern "C" size_t taas_cu_conv2d_scratch_floats(taas_cu *cu, const taas_conv2d_shape *s) {
    conv_dims d = dims(s);
    size_t per = (d.k + (size_t)s->oc) * d.p, dnn = dnn_floats(cu, s);
    int c = chunk(s, d, SCRATCH_BUDGET);
    size_t own = (size_t)(c < 1 ? 1 : c) * per;
    return dnn > own ? dnn : own;
}

// c: one group's channels; xs: floats per sample of x (all its channels)
struct conv_args {
    int c, h, w, kh, kw, sh, sw, ph, pw, ow;
    size_t k, p, xs;
};

static conv_args args(const taas_conv2d_shape *s, const conv_dims &d) {
    conv_args a = {d.cg, s->h, s->w, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw, d.ow, d.k, d.p,
                   (size_t)s->c * s->h * s->w};
    return a;
}

// col (K, cn*P) from a.c channels of samples x (cn, a.xs floats apart); zero outside the
// image (padding)
__global__ static void im2col(float *col, const float *x, conv_args a, int cn) {
    size_t cols = (size_t)cn * a.p;
    TAAS_CU_LOOP(t, a.k * cols) {
        size_t k = t / cols, q = t % cols, j = q / a.p, p = q % a.p;
        int oh = (int)(p / a.ow), ow = (int)(p % a.ow);
        int c = (int)(k / (a.kh * a.kw)), r = (int)(k % (a.kh * a.kw)), kh = r / a.kw, kw = r % a.kw;
        int h = oh * a.sh - a.ph + kh, w = ow * a.sw - a.pw + kw;
        col[t] = (h >= 0 && h < a.h && w >= 0 && w < a.w) ? x[j * a.xs + ((size_t)c * a.h + h) * a.w + w] : 0.0f;
    }
}

// dx's a.c channels of cn samples (a.xs floats apart) = the sum, over the kernel positions
// that saw each input element, of dcol
__global__ static void col2im(float *dx, const float *dcol, conv_args a, int cn) {
    size_t cols = (size_t)cn * a.p, oh_n = a.p / a.ow, plane = (size_t)a.c * a.h * a.w;
    TAAS_CU_LOOP(t, (size_t)cn * plane) {
        int w = (int)(t % a.w), h = (int)(t / a.w % a.h), c = (int)(t / ((size_t)a.w * a.h) % a.c);
        size_t j = t / plane;
        float s = 0.0f;
        for (int kh = 0; kh < a.kh; kh++) {
            int ny = h + a.ph - kh;
            if (ny < 0 || ny % a.sh) continue;
            int oh = ny / a.sh;
            if ((size_t)oh >= oh_n) continue;
            for (int kw = 0; kw < a.kw; kw++) {
                int nx = w + a.pw - kw;
                if (nx < 0 || nx % a.sw) continue;
                int ow = nx / a.sw;
                if (ow >= a.ow) continue;
                size_t k = ((size_t)c * a.kh + kh) * a.kw + kw;
                s += dcol[k * cols + j * a.p + (size_t)oh * a.ow + ow];
            }
        }
        dx[j * a.xs + t % plane] = s;
    }
}

// y (N, OC, P) = max(y + b, 0) or y + b: the bias, and the fused ReLU
__global__ static void bias_act(float *y, const float *b, size_t total, size_t p, int oc, int relu) {
    TAAS_CU_LOOP(i, total) {
        float v = y[i];
        if (b) v += b[i / p % (size_t)oc];
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

// dy masked where the fused ReLU's output y is not positive, as it is laid out (cuDNN's input)
__global__ static void relu_mask(float *g, const float *dy, const float *y, size_t total) {
    TAAS_CU_LOOP(i, total) g[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// T (OC, cn*P) from dy (cn, OC, P), masked where the fused ReLU's output y is not positive
__global__ static void gather_dy(float *t, const float *dy, const float *y, size_t p, int oc, int cn, int relu) {
    size_t cols = (size_t)cn * p;
    TAAS_CU_LOOP(i, (size_t)oc * cols) {
        size_t o = i / cols, q = i % cols, j = q / p, pos = q % p;
        size_t at = (j * oc + o) * p + pos;
        t[i] = (!relu || y[at] > 0.0f) ? dy[at] : 0.0f;
    }
}

// The chunk for `room` floats of scratch, or 0 with err: cuBLAS takes int sizes, and a chunk
// needs at least one sample's room.
static int checked_chunk(const taas_conv2d_shape *s, const conv_dims &d, size_t room, taas_error *err) {
    taas_srcpos nowhere = {0, 0};
    int cn = chunk(s, d, room);
    if (cn < 1) {
        taas_error_set(err, TAAS_ERR_INTERNAL, nowhere, "Conv2d: %zu floats of scratch hold no sample's %zu", room,
                       (d.k + (size_t)s->oc) * d.p);
        taas_error_hint(err, "this is a bug in taas; please report it");
        return 0;
    }
    if ((size_t)cn * d.p > 0x7fffffff || d.k > 0x7fffffff) {
        taas_error_set(err, TAAS_ERR_VALUE, nowhere,
                       "Conv2d: a %dx%d output of %zu rows per position is too large for cuBLAS's int sizes",
                       d.oh, d.ow, d.k);
        taas_error_hint(err, "use smaller images or fewer channels");
        return 0;
    }
    return cn;
}

// What a pass over the batch needs: the sizes, the chunk, the per-sample strides.
struct conv_pass {
    conv_dims d;
    conv_args a;
    int cn;
    size_t in_per, out_per;
    size_t in_g, w_g, out_g;  // a group's offset in a sample's input, in w, in a sample's output
};

static int pass(const taas_conv2d_shape *s, size_t room, conv_pass *p, taas_error *err) {
    p->d = dims(s);
    p->a = args(s, p->d);
    p->cn = checked_chunk(s, p->d, room, err);
    p->in_per = (size_t)s->c * s->h * s->w;
    p->out_per = (size_t)s->oc * p->d.p;
    p->in_g = (size_t)p->d.cg * s->h * s->w;
    p->w_g = (size_t)p->d.ocg * p->d.k;
    p->out_g = (size_t)p->d.ocg * p->d.p;
    return p->cn ? 0 : -1;
}

// y (N, OC, P) += b, then the fused ReLU: both paths' last kernel
static int bias_and_relu(taas_cu *cu, float *y, const float *b, const taas_conv2d_shape *s, int relu,
                         taas_error *err) {
    if (!b && !relu) return 0;
    size_t p = dims(s).p, total = (size_t)s->n * s->oc * p;
    bias_act<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(y, b, total, p, s->oc, relu);
    return TAAS_CU_LAUNCHED("Conv2d's bias and ReLU", err);
}

extern "C" int taas_cu_conv2d_forward(taas_cu *cu, float *y, const float *x, const float *w, const float *b,
                                      const taas_conv2d_shape *s, int relu, float *scratch, size_t room,
                                      taas_error *err) {
    size_t dnn = dnn_floats(cu, s);
    if (dnn && room >= dnn) {
        size_t at = dnn_dy_floats(s);
        size_t wsb = (room - at) * sizeof(float);
        int rc = taas_cu_dnn_conv_forward(cu->dnn, s, cu->math, y, x, w, scratch + at, wsb, err);
        if (rc < 0) return -1;
        if (rc == 0) {
            cu->dnn_convs++;
            return bias_and_relu(cu, y, b, s, relu, err);
        }
    }
    if (cu->dnn) cu->dnn_fallbacks++;
    conv_pass c;
    if (pass(s, room, &c, err)) return -1;
    const float one = 1.0f, zero = 0.0f;
    for (int s0 = 0; s0 < s->n; s0 += c.cn) {
        int m = s->n - s0 < c.cn ? s->n - s0 : c.cn;
        for (int g = 0; g < c.d.groups; g++) {
            im2col<<<taas_cu_blocks(c.d.k * m * c.d.p), TAAS_CU_THREADS, 0, cu->stream>>>(
                scratch, x + s0 * c.in_per + g * c.in_g, c.a, m);
            if (TAAS_CU_LAUNCHED("Conv2d's im2col", err)) return -1;
            // per sample j, column-major: y_jg^T (P, OC/G) = col_j^T (P, K; rows j*P.. of ld m*P) w_g^T (K, OC/G)
            if (taas_cu_check_blas(taas_cu_gemm_strided(cu, CUBLAS_OP_N, CUBLAS_OP_N, (int)c.d.p, c.d.ocg,
                                                             (int)c.d.k, &one, scratch, (int)(m * c.d.p),
                                                             (long long)c.d.p, w + g * c.w_g, (int)c.d.k, 0, &zero,
                                                             y + s0 * c.out_per + g * c.out_g, (int)c.d.p,
                                                             (long long)c.out_per, m),
                                   "Conv2d's forward product", err))
                return -1;
        }
    }
    return bias_and_relu(cu, y, b, s, relu, err);
}

// The backward through cuDNN: the masked output gradient (with the fused ReLU), cuDNN's
// input gradient (written), its weight gradient (accumulated), then the bias's sum. 1 where
// cuDNN refused a pass, before anything was accumulated: im2col then writes dx again.
static int dnn_backward(taas_cu *cu, float *dx, float *dw, float *db, const float *dy, const float *y,
                        const float *x, const float *w, const taas_conv2d_shape *s, int relu, float *scratch,
                        size_t room, taas_error *err) {
    size_t p = dims(s).p, total = (size_t)s->n * s->oc * p, at = dnn_dy_floats(s), wsb = (room - at) * sizeof(float);
    const float *g = dy;
    if (relu) {
        relu_mask<<<taas_cu_blocks(total), TAAS_CU_THREADS, 0, cu->stream>>>(scratch, dy, y, total);
        if (TAAS_CU_LAUNCHED("Conv2d's output gradient", err)) return -1;
        g = scratch;
    }
    int rc = dx ? taas_cu_dnn_conv_backward_data(cu->dnn, s, cu->math, dx, g, w, scratch + at, wsb, err) : 0;
    if (!rc && dw) rc = taas_cu_dnn_conv_backward_filter(cu->dnn, s, cu->math, dw, g, x, scratch + at, wsb, err);
    if (rc) return rc;
    if (db && taas_cu_channel_sum(cu, db, g, s->n, s->oc, (int)p, err)) return -1;
    cu->dnn_convs++;
    return 0;
}

extern "C" int taas_cu_conv2d_backward(taas_cu *cu, float *dx, float *dw, float *db, const float *dy,
                                       const float *y, const float *x, const float *w, const taas_conv2d_shape *s,
                                       int relu, float *scratch, size_t room, taas_error *err) {
    size_t dnn = dnn_floats(cu, s);
    if (dnn && room >= dnn) {
        int rc = dnn_backward(cu, dx, dw, db, dy, y, x, w, s, relu, scratch, room, err);
        if (rc <= 0) return rc;
    }
    if (cu->dnn) cu->dnn_fallbacks++;
    conv_pass c;
    if (pass(s, room, &c, err)) return -1;
    const float one = 1.0f, zero = 0.0f;
    int k = (int)c.d.k;
    for (int s0 = 0; s0 < s->n; s0 += c.cn) {
        int m = s->n - s0 < c.cn ? s->n - s0 : c.cn;
        int cols = (int)(m * c.d.p);
        float *col = scratch, *t = scratch + c.d.k * (size_t)cols;
        gather_dy<<<taas_cu_blocks((size_t)s->oc * cols), TAAS_CU_THREADS, 0, cu->stream>>>(
            t, dy + s0 * c.out_per, relu ? y + s0 * c.out_per : NULL, c.d.p, s->oc, m, relu);
        if (TAAS_CU_LAUNCHED("Conv2d's output gradient", err)) return -1;
        if (db && taas_cu_channel_sum(cu, db, t, 1, s->oc, cols, err)) return -1;
        for (int g = 0; g < c.d.groups; g++) {
            // group g's rows of T (OC/G, cols) and of w (OC/G, K)
            const float *tg = t + (size_t)g * c.d.ocg * cols, *wg = w + g * c.w_g;
            if (dw) {
                im2col<<<taas_cu_blocks(c.d.k * cols), TAAS_CU_THREADS, 0, cu->stream>>>(
                    col, x + s0 * c.in_per + g * c.in_g, c.a, m);
                if (TAAS_CU_LAUNCHED("Conv2d's im2col", err)) return -1;
                // column-major dw_g^T (K, OC/G) += (col-view (cols, K))^T T_g-view (cols, OC/G)
                if (taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_T, CUBLAS_OP_N, k, c.d.ocg, cols, &one, col,
                                                   cols, tg, cols, &one, dw + g * c.w_g, k),
                                       "Conv2d's weight gradient", err))
                    return -1;
            }
            if (!dx) continue;
            // dcol (K, cols) = w_g^T T_g: column-major dcol^T (cols, K) = T_g-view (cols, OC/G) (w_g-view (K, OC/G))^T
            if (taas_cu_check_blas(taas_cu_gemm(cu, CUBLAS_OP_N, CUBLAS_OP_T, cols, k, c.d.ocg, &one, tg, cols,
                                               wg, k, &zero, col, cols),
                                   "Conv2d's input gradient", err))
                return -1;
            col2im<<<taas_cu_blocks((size_t)m * c.in_g), TAAS_CU_THREADS, 0, cu->stream>>>(
                dx + s0 * c.in_per + g * c.in_g, col, c.a, m);
            if (TAAS_CU_LAUNCHED("Conv2d's col2im", err)) return -1;
        }
    }
    return 0;
}
