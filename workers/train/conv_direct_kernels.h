/* A set of direct Conv2d kernels for one vector width (conv_direct_impl.h writes them once;
 * conv_direct_avx512.c and conv_direct_avx2.c build them), as a table of functions that
 * conv_direct.c calls through: the one the CPU runs (taas_cpu_set) is picked once. */
#ifndef TAAS_CONV_DIRECT_KERNELS_H
#define TAAS_CONV_DIRECT_KERNELS_H

#include <stddef.h>

#include "layers.h"

typedef struct taas_conv_kernels {
    const char *name;
    size_t (*thread_floats)(const taas_conv2d_shape *s);
    size_t (*shared_floats)(const taas_conv2d_shape *s);
    size_t (*dw_floats)(const taas_conv2d_shape *s);
    void (*add_dw)(float *dw, const float *dwt, const taas_conv2d_shape *s);
    void (*pack_forward)(float *packed, const float *w, const taas_conv2d_shape *s);
    void (*pack_backward)(float *packed, const float *w, const taas_conv2d_shape *s);
    void (*forward)(float *y, const float *x, const float *packed, const float *b, const taas_conv2d_shape *s,
                    float *mine, int relu);
    void (*backward)(float *dx, float *dwt, float *db, const float *dy, const float *relu_y, const float *x,
                     const float *packed, const taas_conv2d_shape *s, float *mine);
} taas_conv_kernels;

#if defined(__x86_64__) && defined(__GNUC__)
extern const taas_conv_kernels taas_conv_avx512, taas_conv_avx2;
#endif

#endif
