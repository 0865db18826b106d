/* Stride-1 Conv2d without im2col, on register-tiled kernels for AVX-512 or AVX2 + FMA, the
 * set the process runs (cpu.h); layer_conv.c uses them where they apply, and im2col + sgemm
 * elsewhere (the generic set, strides above 1).
 *
 * The image is read in place (or zero-padded once when the layer pads): output (i, j) reads
 * element (i+ki)*Wp + j+kj of a padded plane of width Wp, so every im2col column and row is
 * a shift of the plane, never built. The forward broadcasts a few outputs' inputs against
 * vectors of output channels and transposes its results into the output (VL x VL blocks);
 * the weight gradient does the same with the output gradient transposed. The input gradient
 * lays the output gradient on the padded width (its Wp - OW extra columns zero) with vectors
 * along the positions, and adds each weight row's product back into the plane at its shift:
 * no col2im.
 * All work is per sample, in the calling thread's slice of the scratch memory. */
#ifndef TAAS_CONV_DIRECT_H
#define TAAS_CONV_DIRECT_H

#include <stddef.h>
#include "layers.h"

/* 1 when the kernels run this shape here: stride 1, at least 16 products per output
 * (C*KH*KW), a kernel set with them (avx512 or avx2), and not turned off by
 * taas_conv_direct_enable(0). */
int taas_conv_direct_usable(const taas_conv2d_shape *s);
/* The set's name ("avx512", "avx2"), or "none". */
const char *taas_conv_direct_set(void);
/* On by default; tests turn it off to run the same cases through im2col + sgemm. */
void taas_conv_direct_enable(int on);

/* Floats of scratch: per thread, and shared by the threads (the packed weights). */
size_t taas_conv_direct_thread_floats(const taas_conv2d_shape *s);
size_t taas_conv_direct_shared_floats(const taas_conv2d_shape *s);

/* The weights (OC,C,KH,KW) rearranged for the forward kernel, or for the input gradient's;
 * once per call, before the samples. */
void taas_conv_direct_pack_forward(float *packed, const float *w, const taas_conv2d_shape *s);
void taas_conv_direct_pack_backward(float *packed, const float *w, const taas_conv2d_shape *s);

/* One sample: x (C,H,W) -> y (OC,OH,OW) = conv + b (b may be NULL), then max(., 0) with
 * relu. */
void taas_conv_direct_forward(float *y, const float *x, const float *packed, const float *b,
                              const taas_conv2d_shape *s, float *mine, int relu);
/* One sample's backward: dy (OC,OH,OW), masked by relu_y > 0 when relu_y is not NULL.
 * dwt and db (OC) accumulate (either may be NULL); dwt is the weight gradient transposed,
 * taas_conv_direct_dw_floats() floats, zeroed before the first sample and added into the
 * (OC,C,KH,KW) gradient by taas_conv_direct_add_dw(). dx (C,H,W) is written (NULL to skip;
 * packed from taas_conv_direct_pack_backward). */
void taas_conv_direct_backward(float *dx, float *dwt, float *db, const float *dy, const float *relu_y,
                               const float *x, const float *packed, const taas_conv2d_shape *s,
                               float *mine);
size_t taas_conv_direct_dw_floats(const taas_conv2d_shape *s);
/* dw (OC,C,KH,KW) += dwt */
void taas_conv_direct_add_dw(float *dw, const float *dwt, const taas_conv2d_shape *s);

#endif
