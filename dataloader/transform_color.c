/* ColorJitter's adjustments, as torchvision 0.14's functional_pil makes them with Pillow 9:
 * brightness, contrast and saturation are ImageEnhance blends of the image with a
 * "degenerate" one (black; the mean grey; the grey image), Image.blend's arithmetic in C
 * float with truncation; hue goes through PIL's RGB -> HSV -> RGB conversions (Convert.c),
 * the hue byte shifted by uint8(shift * 255). Checked byte for byte against torchvision
 * (tests/data/jitter_ref.json). */
#include <math.h>
#include <stdint.h>

#include "transform_ops.h"

/* PIL's rgb2l: ITU-R 601-2 luma in 16-bit fixed point, rounded. */
static inline uint8_t luma(const uint8_t *p) {
    return (uint8_t)((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
}

/* ImagingBlend(degenerate, image, alpha): in1 + alpha * (in2 - in1), in float, truncated;
 * clipped only when alpha is outside [0, 1]. */
static inline uint8_t blend(int in1, int in2, float alpha) {
    float t = (float)in1 + alpha * (float)(in2 - in1);
    if (alpha >= 0 && alpha <= 1.0f) return (uint8_t)t;
    return t <= 0.0f ? 0 : t >= 255.0f ? 255 : (uint8_t)t;
}

static void blend_with(tx_img *im, const uint8_t *grey, int grey_const, double factor) {
    float a = (float)factor;
    if (a == 1.0f) return; /* ImagingBlend copies the image */
    uint8_t *p = im->data;
    size_t n = (size_t)im->h * im->w;
    for (size_t i = 0; i < n; i++) {
        int g = grey ? grey[i] : grey_const;
        for (int ch = 0; ch < im->c; ch++) p[i * im->c + ch] = blend(g, p[i * im->c + ch], a);
    }
}

void tx_adjust_brightness(tx_img *im, double factor) {
    blend_with(im, NULL, 0, factor);
}

void tx_adjust_contrast(tx_img *im, double factor) {
    /* ImageEnhance.Contrast: the mean of the grey image, int(mean + 0.5) */
    const uint8_t *p = im->data;
    size_t n = (size_t)im->h * im->w;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += im->c == 3 ? luma(p + 3 * i) : p[i];
    blend_with(im, NULL, (int)((double)sum / (double)n + 0.5), factor);
}

void tx_adjust_saturation(tx_img *im, double factor) {
    float a = (float)factor;
    /* an L image's grey is itself, which the blend leaves; alpha 1 is a copy */
    if (im->c != 3 || a == 1.0f) return;
    uint8_t *p = im->data;
    size_t n = (size_t)im->h * im->w;
    for (size_t i = 0; i < n; i++) {
        uint8_t *q = p + 3 * i, g = luma(q);
        for (int ch = 0; ch < 3; ch++) q[ch] = blend(g, q[ch], a);
    }
}

static inline uint8_t clip8(int v) {
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Convert.c's rgb2hsv_row, following colorsys.py */
static void rgb2hsv(const uint8_t *in, uint8_t *out) {
    uint8_t r = in[0], g = in[1], b = in[2];
    uint8_t maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    uint8_t minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    out[2] = maxc;
    if (minc == maxc) {
        out[0] = out[1] = 0;
        return;
    }
    float cr = (float)(maxc - minc), s = cr / (float)maxc, h;
    float rc = (float)(maxc - r) / cr, gc = (float)(maxc - g) / cr, bc = (float)(maxc - b) / cr;
    if (r == maxc) h = bc - gc;
    else if (g == maxc) h = 2.0 + rc - bc;
    else h = 4.0 + gc - rc;
    h = fmod((h / 6.0 + 1.0), 1.0);
    out[0] = clip8((int)(h * 255.0));
    out[1] = clip8((int)(s * 255.0));
}

/* Convert.c's hsv2rgb */
static void hsv2rgb(const uint8_t *in, uint8_t *out) {
    uint8_t h = in[0], s = in[1], v = in[2];
    if (s == 0) {
        out[0] = out[1] = out[2] = v;
        return;
    }
    int i = (int)floor((float)h * 6.0 / 255.0);
    float f = (float)h * 6.0 / 255.0 - (float)i, fs = ((float)s) / 255.0;
    uint8_t up = clip8((int)round((float)v * (1.0 - fs)));
    uint8_t uq = clip8((int)round((float)v * (1.0 - fs * f)));
    uint8_t ut = clip8((int)round((float)v * (1.0 - fs * (1.0 - f))));
    switch (i % 6) {
    case 0: out[0] = v, out[1] = ut, out[2] = up; break;
    case 1: out[0] = uq, out[1] = v, out[2] = up; break;
    case 2: out[0] = up, out[1] = v, out[2] = ut; break;
    case 3: out[0] = up, out[1] = uq, out[2] = v; break;
    case 4: out[0] = ut, out[1] = up, out[2] = v; break;
    default: out[0] = v, out[1] = up, out[2] = uq; break;
    }
}

void tx_adjust_hue(tx_img *im, double shift) {
    if (im->c != 3) return; /* torchvision leaves L images as they are */
    /* np.uint8(shift * 255): truncated toward zero, then modulo 256 */
    uint8_t d = (uint8_t)(int)(shift * 255.0); /* even 0 goes through HSV, as PIL's does */
    uint8_t *p = im->data;
    size_t n = (size_t)im->h * im->w;
    for (size_t i = 0; i < n; i++) {
        uint8_t hsv[3];
        rgb2hsv(p + 3 * i, hsv);
        hsv[0] = (uint8_t)(hsv[0] + d);
        hsv2rgb(hsv, p + 3 * i);
    }
}
