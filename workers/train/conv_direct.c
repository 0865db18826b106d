/* The direct Conv2d kernels (conv_direct.h) through the table of the set this process runs
 * (cpu.h): AVX-512 or AVX2 (conv_direct_avx512.c, conv_direct_avx2.c, both written once in
 * conv_direct_impl.h); the generic set has none, and the layer uses im2col + sgemm. */
#include "conv_direct.h"

#include "conv_direct_kernels.h"
#include "cpu.h"

static int enabled = 1;

void taas_conv_direct_enable(int on) { enabled = on; }

static const taas_conv_kernels *kernels(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (taas_cpu_kernels()) {
    case TAAS_CPU_AVX512: return &taas_conv_avx512;
    case TAAS_CPU_AVX2: return &taas_conv_avx2;
    default: return NULL;
    }
#else
    return NULL;
#endif
}

int taas_conv_direct_usable(const taas_conv2d_shape *s) {
    /* With under 16 products per output (C*KH*KW: a first layer on grey images) the tiles'
     * set-up outweighs them; im2col + sgemm was faster there (conv1 of docs/design.md §1).
     * An unpadded 1x1 convolution is one sgemm on the input itself, no im2col, and that was
     * faster at every 1x1 shape of resnet50 (bench/RESULTS.md, issue 28). A grouped
     * convolution goes through im2col, a product per group. */
    int pointwise = s->kh == 1 && s->kw == 1 && s->ph == 0 && s->pw == 0;
    return enabled && kernels() && taas_conv2d_groups(s) == 1 && s->sh == 1 && s->sw == 1 && !pointwise &&
           s->c * s->kh * s->kw >= 16;
}

const char *taas_conv_direct_set(void) {
    const taas_conv_kernels *k = kernels();
    return k ? k->name : "none";
}

size_t taas_conv_direct_thread_floats(const taas_conv2d_shape *s) {
    const taas_conv_kernels *k = kernels();
    return k ? k->thread_floats(s) : 0;
}

size_t taas_conv_direct_shared_floats(const taas_conv2d_shape *s) {
    const taas_conv_kernels *k = kernels();
    return k ? k->shared_floats(s) : 0;
}

size_t taas_conv_direct_dw_floats(const taas_conv2d_shape *s) {
    const taas_conv_kernels *k = kernels();
    return k ? k->dw_floats(s) : 0;
}

/* The rest run only where taas_conv_direct_usable() said yes: a table exists. */
void taas_conv_direct_add_dw(float *dw, const float *dwt, const taas_conv2d_shape *s) {
    kernels()->add_dw(dw, dwt, s);
}

void taas_conv_direct_pack_forward(float *packed, const float *w, const taas_conv2d_shape *s) {
    kernels()->pack_forward(packed, w, s);
}

void taas_conv_direct_pack_backward(float *packed, const float *w, const taas_conv2d_shape *s) {
    kernels()->pack_backward(packed, w, s);
}

void taas_conv_direct_forward(float *y, const float *x, const float *packed, const float *b,
                              const taas_conv2d_shape *s, float *mine, int relu) {
    kernels()->forward(y, x, packed, b, s, mine, relu);
}

void taas_conv_direct_backward(float *dx, float *dwt, float *db, const float *dy, const float *relu_y,
                               const float *x, const float *packed, const taas_conv2d_shape *s, float *mine) {
    kernels()->backward(dx, dwt, db, dy, relu_y, x, packed, s, mine);
}
