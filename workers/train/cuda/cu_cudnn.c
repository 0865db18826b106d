/* Conv2d through cuDNN 9 (cu_cudnn.h). cuDNN's header gives the types and the functions'
 * signatures (__typeof__, so that a pointer cannot disagree with the library); the functions
 * themselves come from libcudnn.so.9 with dlsym. The convolution API used is cuDNN's legacy
 * one (descriptors, heuristics, three passes): deprecated in 9 but kept, and what a plain C
 * caller has (the graph API's C side is the backend descriptors, the frontend is C++). */
#include "cu_cudnn.h"

#include <stdlib.h>
#include <string.h>

#include "errnames.h"

/* A toolkit without cuDNN's header builds the plugin without it: TAAS_CUDA_CUDNN=1 is then
 * refused, with why. */
#if defined(__has_include)
#if __has_include(<cudnn.h>)
#define TAAS_HAVE_CUDNN 1
#endif
#endif

#ifndef TAAS_HAVE_CUDNN

taas_cu_dnn *taas_cu_dnn_new(cudaStream_t st, taas_error *err) {
    (void)st;
    taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS,
                   "TAAS_CUDA_CUDNN=1, but this taas was built without cuDNN (no cudnn.h in its CUDA toolkit)");
    taas_error_hint(err, "unset TAAS_CUDA_CUDNN, or rebuild with cuDNN 9's headers beside the toolkit's");
    return NULL;
}
void taas_cu_dnn_free(taas_cu_dnn *d) { (void)d; }
int taas_cu_dnn_conv_plan(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, size_t *ws_bytes) {
    (void)d, (void)s, (void)math;
    *ws_bytes = 0;
    return 0;
}
int taas_cu_dnn_conv_forward(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *y,
                             const float *x, const float *w, void *ws, size_t ws_bytes, taas_error *err) {
    (void)d, (void)s, (void)math, (void)y, (void)x, (void)w, (void)ws, (void)ws_bytes;
    return taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "Conv2d through cuDNN in a build without it");
}
int taas_cu_dnn_conv_backward_data(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *dx,
                                   const float *dy, const float *w, void *ws, size_t ws_bytes, taas_error *err) {
    (void)d, (void)s, (void)math, (void)dx, (void)dy, (void)w, (void)ws, (void)ws_bytes;
    return taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "Conv2d through cuDNN in a build without it");
}
int taas_cu_dnn_conv_backward_filter(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *dw,
                                     const float *dy, const float *x, void *ws, size_t ws_bytes, taas_error *err) {
    (void)d, (void)s, (void)math, (void)dw, (void)dy, (void)x, (void)ws, (void)ws_bytes;
    return taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "Conv2d through cuDNN in a build without it");
}

#else

#include <cudnn.h>
#include <dlfcn.h>

#define API(name) __typeof__(name) *name
typedef struct dnn_api {
    API(cudnnGetVersion);
    API(cudnnGetErrorString);
    API(cudnnCreate);
    API(cudnnDestroy);
    API(cudnnSetStream);
    API(cudnnCreateTensorDescriptor);
    API(cudnnDestroyTensorDescriptor);
    API(cudnnSetTensor4dDescriptor);
    API(cudnnCreateFilterDescriptor);
    API(cudnnDestroyFilterDescriptor);
    API(cudnnSetFilter4dDescriptor);
    API(cudnnCreateConvolutionDescriptor);
    API(cudnnDestroyConvolutionDescriptor);
    API(cudnnSetConvolution2dDescriptor);
    API(cudnnSetConvolutionGroupCount);
    API(cudnnSetConvolutionMathType);
    API(cudnnGetConvolutionForwardAlgorithm_v7);
    API(cudnnGetConvolutionBackwardDataAlgorithm_v7);
    API(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
    API(cudnnGetConvolutionForwardWorkspaceSize);
    API(cudnnGetConvolutionBackwardDataWorkspaceSize);
    API(cudnnGetConvolutionBackwardFilterWorkspaceSize);
    API(cudnnConvolutionForward);
    API(cudnnConvolutionBackwardData);
    API(cudnnConvolutionBackwardFilter);
} dnn_api;
#undef API

/* A shape in an arithmetic, compared as bytes (zeroed first). */
typedef struct conv_key {
    taas_conv2d_shape s;
    int math;
} conv_key;

typedef struct conv_plan {
    conv_key key;
    int ok;  /* cuDNN has an algorithm for each pass */
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws;  /* the most of the three passes' workspaces */
} conv_plan;

struct taas_cu_dnn {
    void *lib;
    dnn_api f;
    cudnnHandle_t h;
    conv_plan *plans;
    size_t nplans, cap;
};

/* A pass's workspace at most: more, and the pass takes cuDNN's next algorithm */
static const size_t WS_CAP = (size_t)256 << 20;

taas_cu_dnn *taas_cu_dnn_new(cudaStream_t st, taas_error *err) {
    taas_cu_dnn *d = calloc(1, sizeof *d);
    if (!d) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for cuDNN's state");
        return NULL;
    }
    d->lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "TAAS_CUDA_CUDNN=1, but cuDNN 9 does not load (%s)",
                       dlerror());
        taas_error_hint(err, "install cuDNN 9 where the dynamic linker finds libcudnn.so.9, or unset TAAS_CUDA_CUDNN");
        free(d);
        return NULL;
    }
    struct {
        const char *name;
        void **slot;
    } sym[] = {
#define SYM(name) {#name, (void **)&d->f.name}
        SYM(cudnnGetVersion),
        SYM(cudnnGetErrorString),
        SYM(cudnnCreate),
        SYM(cudnnDestroy),
        SYM(cudnnSetStream),
        SYM(cudnnCreateTensorDescriptor),
        SYM(cudnnDestroyTensorDescriptor),
        SYM(cudnnSetTensor4dDescriptor),
        SYM(cudnnCreateFilterDescriptor),
        SYM(cudnnDestroyFilterDescriptor),
        SYM(cudnnSetFilter4dDescriptor),
        SYM(cudnnCreateConvolutionDescriptor),
        SYM(cudnnDestroyConvolutionDescriptor),
        SYM(cudnnSetConvolution2dDescriptor),
        SYM(cudnnSetConvolutionGroupCount),
        SYM(cudnnSetConvolutionMathType),
        SYM(cudnnGetConvolutionForwardAlgorithm_v7),
        SYM(cudnnGetConvolutionBackwardDataAlgorithm_v7),
        SYM(cudnnGetConvolutionBackwardFilterAlgorithm_v7),
        SYM(cudnnGetConvolutionForwardWorkspaceSize),
        SYM(cudnnGetConvolutionBackwardDataWorkspaceSize),
        SYM(cudnnGetConvolutionBackwardFilterWorkspaceSize),
        SYM(cudnnConvolutionForward),
        SYM(cudnnConvolutionBackwardData),
        SYM(cudnnConvolutionBackwardFilter),
#undef SYM
    };
    for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++) {
        *sym[i].slot = dlsym(d->lib, sym[i].name);
        if (!*sym[i].slot) {
            taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "TAAS_CUDA_CUDNN=1, but libcudnn.so.9 has no %s",
                           sym[i].name);
            taas_error_hint(err, "install cuDNN 9, or unset TAAS_CUDA_CUDNN");
            dlclose(d->lib);
            free(d);
            return NULL;
        }
    }
    size_t v = d->f.cudnnGetVersion();
    cudnnStatus_t rc = CUDNN_STATUS_SUCCESS;
    if (v < 90000 || (rc = d->f.cudnnCreate(&d->h)) != CUDNN_STATUS_SUCCESS ||
        (rc = d->f.cudnnSetStream(d->h, st)) != CUDNN_STATUS_SUCCESS) {
        if (v < 90000)
            taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "TAAS_CUDA_CUDNN=1, but the cuDNN found is %zu, not 9",
                           v);
        else
            taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "TAAS_CUDA_CUDNN=1, but cuDNN did not start (%s)",
                           d->f.cudnnGetErrorString(rc));
        taas_error_hint(err, "unset TAAS_CUDA_CUDNN to use taas's own convolutions");
        if (d->h) d->f.cudnnDestroy(d->h);
        dlclose(d->lib);
        free(d);
        return NULL;
    }
    return d;
}

static void release(const dnn_api *f, conv_plan *p) {
    if (p->x) f->cudnnDestroyTensorDescriptor(p->x);
    if (p->y) f->cudnnDestroyTensorDescriptor(p->y);
    if (p->w) f->cudnnDestroyFilterDescriptor(p->w);
    if (p->conv) f->cudnnDestroyConvolutionDescriptor(p->conv);
}

void taas_cu_dnn_free(taas_cu_dnn *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nplans; i++) release(&d->f, &d->plans[i]);
    free(d->plans);
    d->f.cudnnDestroy(d->h);
    dlclose(d->lib);
    free(d);
}

/* FP32: no tensor cores (TF32 would round the inputs); TF32 and BF16: TF32 tensor cores
 * (cuDNN's BF16 convolutions want BF16 tensors, and taas's stay FP32 in memory). */
static cudnnMathType_t math_type(taas_cu_math math) {
    return math == TAAS_CU_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/* An algorithm's result usable as taas's: it ran, repeats its bits, is no FFT (whose
 * rounding is further from the direct sum's than the tests allow), fits the cap, and in FP32
 * uses no tensor cores. */
static int usable(cudnnStatus_t st, cudnnDeterminism_t det, size_t memory, cudnnMathType_t mt, int fft,
                  taas_cu_math math) {
    return st == CUDNN_STATUS_SUCCESS && det == CUDNN_DETERMINISTIC && !fft && memory <= WS_CAP &&
           (math != TAAS_CU_FP32 || (mt != CUDNN_TENSOR_OP_MATH && mt != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
}

/* Fills p for its key: descriptors, each pass's algorithm and the workspace; p->ok 0 where a
 * pass has none (or cuDNN refuses the shape). */
static void plan(taas_cu_dnn *d, conv_plan *p) {
    const dnn_api *f = &d->f;
    const taas_conv2d_shape *s = &p->key.s;
    taas_cu_math math = (taas_cu_math)p->key.math;
    int g = taas_conv2d_groups(s), oh = taas_conv2d_out_h(s), ow = taas_conv2d_out_w(s);
    cudnnMathType_t mt = math_type(math);
    if (f->cudnnCreateTensorDescriptor(&p->x) || f->cudnnCreateTensorDescriptor(&p->y) ||
        f->cudnnCreateFilterDescriptor(&p->w) || f->cudnnCreateConvolutionDescriptor(&p->conv) ||
        f->cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->n, s->c, s->h, s->w) ||
        f->cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->n, s->oc, oh, ow) ||
        f->cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->oc, s->c / g, s->kh, s->kw) ||
        f->cudnnSetConvolution2dDescriptor(p->conv, s->ph, s->pw, s->sh, s->sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT) ||
        f->cudnnSetConvolutionGroupCount(p->conv, g) || f->cudnnSetConvolutionMathType(p->conv, mt))
        return;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nf = 0, nd = 0, nw = 0, i, j, k;
    if (f->cudnnGetConvolutionForwardAlgorithm_v7(d->h, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                  &nf, fp) ||
        f->cudnnGetConvolutionBackwardDataAlgorithm_v7(d->h, p->w, p->y, p->conv, p->x,
                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, dp) ||
        f->cudnnGetConvolutionBackwardFilterAlgorithm_v7(d->h, p->x, p->y, p->conv, p->w,
                                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, wp))
        return;
#define FFT(a, pass) ((a) == CUDNN_CONVOLUTION_##pass##_ALGO_FFT || (a) == CUDNN_CONVOLUTION_##pass##_ALGO_FFT_TILING)
    for (i = 0; i < nf && !usable(fp[i].status, fp[i].determinism, fp[i].memory, fp[i].mathType,
                                  FFT(fp[i].algo, FWD), math);
         i++) {}
    for (j = 0; j < nd && !usable(dp[j].status, dp[j].determinism, dp[j].memory, dp[j].mathType,
                                  FFT(dp[j].algo, BWD_DATA), math);
         j++) {}
    for (k = 0; k < nw && !usable(wp[k].status, wp[k].determinism, wp[k].memory, wp[k].mathType,
                                  FFT(wp[k].algo, BWD_FILTER), math);
         k++) {}
#undef FFT
    if (i == nf || j == nd || k == nw) return;
    p->fwd = fp[i].algo, p->bwd_data = dp[j].algo, p->bwd_filter = wp[k].algo;
    /* the sizes the passes ask for, which the heuristics' figures should be */
    size_t a = 0, b = 0, c = 0;
    if (f->cudnnGetConvolutionForwardWorkspaceSize(d->h, p->x, p->w, p->conv, p->y, p->fwd, &a) ||
        f->cudnnGetConvolutionBackwardDataWorkspaceSize(d->h, p->w, p->y, p->conv, p->x, p->bwd_data, &b) ||
        f->cudnnGetConvolutionBackwardFilterWorkspaceSize(d->h, p->x, p->y, p->conv, p->w, p->bwd_filter, &c))
        return;
    p->ws = a > b ? a : b;
    if (c > p->ws) p->ws = c;
    p->ok = p->ws <= WS_CAP;
}

/* s's plan in math, planned on first use; NULL out of memory */
static conv_plan *find(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math) {
    conv_key key;
    memset(&key, 0, sizeof key);
    key.s = *s;
    key.s.groups = taas_conv2d_groups(s);
    key.math = (int)math;
    for (size_t i = 0; i < d->nplans; i++)
        if (!memcmp(&d->plans[i].key, &key, sizeof key)) return &d->plans[i];
    if (d->nplans == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        conv_plan *p = realloc(d->plans, cap * sizeof *p);
        if (!p) return NULL;
        d->plans = p, d->cap = cap;
    }
    conv_plan *p = &d->plans[d->nplans++];
    memset(p, 0, sizeof *p);
    p->key = key;
    plan(d, p);
    return p;
}

int taas_cu_dnn_conv_plan(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, size_t *ws_bytes) {
    conv_plan *p = find(d, s, math);
    *ws_bytes = p && p->ok ? p->ws : 0;
    return p && p->ok;
}

/* s's usable plan for a pass, or NULL with err */
static conv_plan *ready(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, size_t ws_bytes,
                        taas_error *err) {
    conv_plan *p = find(d, s, math);
    if (p && p->ok && ws_bytes >= p->ws) return p;
    taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "Conv2d through cuDNN: %s",
                   !p ? "out of memory for its plan"
                   : !p->ok ? "no algorithm for the shape"
                            : "less workspace than planned");
    taas_error_hint(err, "this is a bug in taas; please report it");
    return NULL;
}

/* 0; 1 where cuDNN refuses the planned algorithm when it runs (not supported there, or a
 * pointer not aligned as it wants: the plan is dropped and the caller runs its own); -1 with
 * err for anything else */
static int check(const taas_cu_dnn *d, conv_plan *p, cudnnStatus_t rc, const char *what, taas_error *err) {
    if (rc == CUDNN_STATUS_SUCCESS) return 0;
    if ((rc >= CUDNN_STATUS_NOT_SUPPORTED && rc < CUDNN_STATUS_NOT_SUPPORTED + 1000) ||
        rc == CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER) {
        p->ok = 0;
        return 1;
    }
    taas_error_set(err, TAAS_ERR_DEVICE, TAAS_NOPOS, "%s failed in cuDNN: %s", what, d->f.cudnnGetErrorString(rc));
    return -1;
}

int taas_cu_dnn_conv_forward(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *y,
                             const float *x, const float *w, void *ws, size_t ws_bytes, taas_error *err) {
    conv_plan *p = ready(d, s, math, ws_bytes, err);
    const float one = 1.0f, zero = 0.0f;
    return p ? check(d, p,
                     d->f.cudnnConvolutionForward(d->h, &one, p->x, x, p->w, w, p->conv, p->fwd, ws, p->ws, &zero,
                                                  p->y, y),
                     "Conv2d's forward", err)
             : -1;
}

int taas_cu_dnn_conv_backward_data(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *dx,
                                   const float *dy, const float *w, void *ws, size_t ws_bytes, taas_error *err) {
    conv_plan *p = ready(d, s, math, ws_bytes, err);
    const float one = 1.0f, zero = 0.0f;
    return p ? check(d, p,
                     d->f.cudnnConvolutionBackwardData(d->h, &one, p->w, w, p->y, dy, p->conv, p->bwd_data, ws,
                                                       p->ws, &zero, p->x, dx),
                     "Conv2d's input gradient", err)
             : -1;
}

int taas_cu_dnn_conv_backward_filter(taas_cu_dnn *d, const taas_conv2d_shape *s, taas_cu_math math, float *dw,
                                     const float *dy, const float *x, void *ws, size_t ws_bytes, taas_error *err) {
    conv_plan *p = ready(d, s, math, ws_bytes, err);
    const float one = 1.0f;
    /* beta 1: the weight gradient accumulates */
    return p ? check(d, p,
                     d->f.cudnnConvolutionBackwardFilter(d->h, &one, p->x, x, p->y, dy, p->conv, p->bwd_filter, ws,
                                                         p->ws, &one, p->w, dw),
                     "Conv2d's weight gradient", err)
             : -1;
}

#endif
