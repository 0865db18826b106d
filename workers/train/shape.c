/* The shape rules of the layers: output sizes and the checks PyTorch makes before it
 * computes. Apart from the arithmetic (no BLAS, no OpenMP) so that the kernel can plan a
 * model, and find its shape errors, without loading the training core. */
#include <limits.h>
#include <stdint.h>

#include "errnames.h"
#include "layers.h"

/* A padded side that int arithmetic can hold twice over: the output sizes below are computed
 * in int. */
static int padded_too_big(int side, int pad) { return (int64_t)side + 2 * (int64_t)pad > INT_MAX / 2; }

static int too_big(taas_error *e, const char *what, int h, int w, int ph, int pw) {
    taas_srcpos nowhere = {0, 0};
    taas_error_set(e, TAAS_ERR_VALUE, nowhere, "%s: the input %dx%d with padding %dx%d is larger than %d a side", what,
                   h, w, ph, pw, INT_MAX / 2);
    taas_error_hint(e, "use a smaller padding");
    return -1;
}

int taas_conv2d_out_h(const taas_conv2d_shape *s) { return (s->h + 2 * s->ph - s->kh) / s->sh + 1; }
int taas_conv2d_out_w(const taas_conv2d_shape *s) { return (s->w + 2 * s->pw - s->kw) / s->sw + 1; }

int taas_conv2d_check(const taas_conv2d_shape *s, taas_error *e) {
    taas_srcpos nowhere = {0, 0};
    if (s->n <= 0 || s->c <= 0 || s->h <= 0 || s->w <= 0 || s->oc <= 0 || s->kh <= 0 ||
        s->kw <= 0 || s->sh <= 0 || s->sw <= 0 || s->ph < 0 || s->pw < 0) {
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "Conv2d: sizes must be positive (input %dx%dx%dx%d, out_channels %d, "
                       "kernel %dx%d, stride %dx%d) and padding non-negative (%dx%d)",
                       s->n, s->c, s->h, s->w, s->oc, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw);
        taas_error_hint(e, "check the Conv2d arguments and the input shape");
        return -1;
    }
    if (padded_too_big(s->h, s->ph) || padded_too_big(s->w, s->pw)) return too_big(e, "Conv2d", s->h, s->w, s->ph, s->pw);
    if (s->h + 2 * s->ph < s->kh || s->w + 2 * s->pw < s->kw) {
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "Conv2d: kernel %dx%d is larger than the padded input %dx%d",
                       s->kh, s->kw, s->h + 2 * s->ph, s->w + 2 * s->pw);
        taas_error_hint(e, "use a smaller kernel_size, more padding, or a larger input");
        return -1;
    }
    int g = taas_conv2d_groups(s);
    if (s->groups < 0 || s->c % g || s->oc % g) {
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "Conv2d: groups=%d must be at least 1 and divide in_channels %d and "
                       "out_channels %d",
                       s->groups, s->c, s->oc);
        taas_error_hint(e, "choose groups that divides both channel counts (groups=in_channels "
                           "makes a depthwise convolution)");
        return -1;
    }
    return 0;
}

int taas_pool2d_out_h(const taas_pool2d_shape *s) { return (s->h + 2 * s->ph - s->kh) / s->sh + 1; }
int taas_pool2d_out_w(const taas_pool2d_shape *s) { return (s->w + 2 * s->pw - s->kw) / s->sw + 1; }

int taas_pool2d_check(const taas_pool2d_shape *s, taas_error *e) {
    taas_srcpos nowhere = {0, 0};
    if (s->n <= 0 || s->c <= 0 || s->h <= 0 || s->w <= 0 || s->kh <= 0 || s->kw <= 0 ||
        s->sh <= 0 || s->sw <= 0 || s->ph < 0 || s->pw < 0) {
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "pooling: sizes must be positive (input %dx%dx%dx%d, kernel %dx%d, "
                       "stride %dx%d) and padding non-negative (%dx%d)",
                       s->n, s->c, s->h, s->w, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw);
        taas_error_hint(e, "check the pooling layer's arguments and the input shape");
        return -1;
    }
    if (2 * (int64_t)s->ph > s->kh || 2 * (int64_t)s->pw > s->kw) {
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "pooling: padding %dx%d is more than half the kernel %dx%d",
                       s->ph, s->pw, s->kh, s->kw);
        taas_error_hint(e, "use padding <= kernel_size // 2, as PyTorch requires");
        return -1;
    }
    if (s->h + 2 * s->ph < s->kh || s->w + 2 * s->pw < s->kw) {
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "pooling: kernel %dx%d is larger than the padded input %dx%d",
                       s->kh, s->kw, s->h + 2 * s->ph, s->w + 2 * s->pw);
        taas_error_hint(e, "use a smaller kernel_size or pool earlier in the network");
        return -1;
    }
    return 0;
}

int taas_adaptive_avgpool2d_check(int h, int w, int oh, int ow, taas_error *e) {
    if (h <= 0 || w <= 0 || oh <= 0 || ow <= 0) {
        taas_srcpos nowhere = {0, 0};
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "AdaptiveAvgPool2d: output size %dx%d from an input of %dx%d: both must be "
                       "at least 1x1", oh, ow, h, w);
        taas_error_hint(e, "give output_size as positive ints, e.g. AdaptiveAvgPool2d(1) or (7, 7)");
        return -1;
    }
    return 0;
}

int taas_dropout_check(float p, taas_error *e) {
    if (!(p >= 0.0f && p <= 1.0f)) {
        taas_srcpos nowhere = {0, 0};
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "Dropout: probability p=%g is outside [0, 1]", (double)p);
        taas_error_hint(e, "p is the chance of zeroing an element, e.g. Dropout(0.5)");
        return -1;
    }
    return 0;
}
