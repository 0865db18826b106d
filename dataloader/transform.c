/* Running a transform chain on one sample. Each step is planned on the shape first (the
 * same checks taas_transform_out_shape makes, with torchvision's rules and messages), then
 * run. Random steps draw from their own stream of (seed, epoch, index), so a sample's result
 * does not depend on the other steps, the thread or the loader. The last step writes
 * straight into the caller's buffer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "rng.h"
#include "transform_chain.h"

taas_transform *taas_transform_new(const json_t *spec, taas_error *err) {
    taas_transform *t = calloc(1, sizeof *t);
    if (!t) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory making the transforms");
        return NULL;
    }
    if (tx_parse(t, spec, err) < 0) {
        taas_transform_free(t);
        return NULL;
    }
    return t;
}

void taas_transform_free(taas_transform *t) {
    if (!t) return;
    tx_steps_free(t);
    free(t);
}

typedef struct shape {
    int c, h, w, tensor, u8;
} shape;

/* What a crop step does to the rows and columns, decided by the plan. */
typedef struct plan {
    int pad1[4];        /* first padding, left top right bottom (RandomCrop padding= or CenterCrop) */
    int pad2[4];        /* RandomCrop pad_if_needed */
    int ph, pw;         /* size after the padding */
    int oh, ow;         /* output size */
    int top, left;      /* crop origin when it is fixed (CenterCrop) */
} plan;

static const char *mode_name(tx_padmode m) {
    static const char *const n[] = {"constant", "edge", "reflect", "symmetric"};
    return n[m];
}

static const char *kind_of(const shape *sh) {
    return sh->tensor ? "tensor" : "image";
}

/* One F.pad call of torchvision on the current shape: the checks it makes. */
static int check_pad(const taas_transform *t, int i, const shape *sh, const int p[4], taas_error *err) {
    const tx_step *s = &t->steps[i];
    char where[96]; /* filled only on the way to an error: this runs for every sample */
    if (sh->tensor && s->fill_seq) {
        tx_step_where(t, i, where, sizeof where);
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS,
                       "%s pads a tensor, and torchvision pads tensors with one number: fill has %d values",
                       where, s->nfill);
        taas_error_hint(err, "give fill as one number, or put %s before ToTensor() (images take a "
                             "value per channel)", tx_step_name(s));
        return -1;
    }
    if (!sh->tensor && s->mode == TX_PAD_CONSTANT && s->fill_seq && s->nfill != sh->c) {
        tx_step_where(t, i, where, sizeof where);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "%s: the number of elements in 'fill' does not match the number of channels "
                       "of the image (%d != %d)", where, s->nfill, sh->c);
        taas_error_hint(err, "give one fill value per channel (%d here), or one number for all", sh->c);
        return -1;
    }
    if (sh->tensor && (s->mode == TX_PAD_REFLECT || s->mode == TX_PAD_SYMMETRIC)) {
        int strict = s->mode == TX_PAD_REFLECT;
        for (int k = 0; k < 4; k++) {
            int side = (k % 2 == 0) ? sh->w : sh->h;
            if (strict ? p[k] >= side : p[k] > side) {
                tx_step_where(t, i, where, sizeof where);
                taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                               "%s: padding_mode='%s' on a tensor needs padding %s the side it pads, "
                               "but pads %d pixels on a side of %d",
                               where, mode_name(s->mode), strict ? "smaller than" : "at most", p[k], side);
                taas_error_hint(err, "use a smaller padding or padding_mode='edge', or put %s before "
                                     "ToTensor() (images take any padding)", tx_step_name(s));
                return -1;
            }
        }
    }
    return 0;
}

/* Python's round() of d / 2 for an integer d >= 0: halves go to the even neighbour. */
static int half_round_even(int d) {
    int q = d / 2;
    if (d % 2 && q % 2) q++;
    return q;
}

static int resize_size(const tx_step *s, const shape *sh, int *oh, int *ow) {
    if (s->size_n == 2) {
        *oh = s->size_h;
        *ow = s->size_w;
        return 0;
    }
    /* torchvision's _compute_resized_output_size */
    int h = sh->h, w = sh->w;
    int shrt = w <= h ? w : h, lng = w <= h ? h : w;
    long ns = s->size_h, nl = (long)((double)((long long)s->size_h * lng) / shrt);
    if (s->max_size && nl > s->max_size) {
        ns = (long)((double)((long long)s->max_size * ns) / nl);
        nl = s->max_size;
    }
    if (nl > 1000000) return -1;
    *ow = (int)(w <= h ? ns : nl);
    *oh = (int)(w <= h ? nl : ns);
    return 0;
}

/* torch's interpolate refuses antialias with nearest; PIL images always antialias. */
static int check_antialias(const taas_transform *t, int i, const shape *sh, taas_error *err) {
    const tx_step *s = &t->steps[i];
    if ((sh->tensor || !sh->u8) && s->antialias == 1 && s->interp == TX_NEAREST) {
        char where[96];
        tx_step_where(t, i, where, sizeof where);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "%s: antialias option is supported for bilinear and bicubic interpolation modes only",
                       where);
        taas_error_hint(err, "drop antialias=True, or use interpolation='bilinear'");
        return -1;
    }
    return 0;
}

static int plan_step(const taas_transform *t, int i, shape *sh, plan *pl, taas_error *err) {
    const tx_step *s = &t->steps[i];
    char where[96]; /* filled only on the way to an error */
    memset(pl, 0, sizeof *pl);
    switch (s->kind) {
    case ST_TO_TENSOR:
        sh->tensor = 1;
        sh->u8 = 0;
        return 0;
    case ST_NORMALIZE:
        if ((s->nmean != 1 && s->nmean != sh->c) || (s->nstd != 1 && s->nstd != sh->c)) {
            int n = s->nmean != 1 && s->nmean != sh->c ? s->nmean : s->nstd;
            tx_step_where(t, i, where, sizeof where);
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "%s has %d %s values for a tensor of %d channel%s", where, n,
                           s->nmean != 1 && s->nmean != sh->c ? "mean" : "std", sh->c, sh->c == 1 ? "" : "s");
            taas_error_hint(err, "give one mean and one std per channel (%d here), or one value for all%s",
                            sh->c, sh->c == 1 ? ", e.g. Normalize((0.2860,), (0.3530,))" : "");
            return -1;
        }
        return 0;
    case ST_FLIP:
        return 0;
    case ST_RESIZE: {
        int oh, ow;
        if (resize_size(s, sh, &oh, &ow) < 0 || oh < 1 || ow < 1) {
            tx_step_where(t, i, where, sizeof where);
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "%s of a %dx%d %s to the smaller edge %d%s gives an output size of zero or "
                           "beyond 1000000 pixels", where, sh->h, sh->w, kind_of(sh), s->size_h,
                           s->max_size ? " with max_size" : "");
            taas_error_hint(err, "give Resize((h, w)) explicitly, or a larger max_size");
            return -1;
        }
        if (check_antialias(t, i, sh, err) < 0) return -1;
        pl->oh = oh;
        pl->ow = ow;
        sh->h = oh;
        sh->w = ow;
        return 0;
    }
    case ST_CENTER_CROP: {
        int ch = s->size_h, cw = s->size_w, h = sh->h, w = sh->w;
        if (cw > w || ch > h) {
            pl->pad1[0] = cw > w ? (cw - w) / 2 : 0;
            pl->pad1[1] = ch > h ? (ch - h) / 2 : 0;
            pl->pad1[2] = cw > w ? (cw - w + 1) / 2 : 0;
            pl->pad1[3] = ch > h ? (ch - h + 1) / 2 : 0;
            h += pl->pad1[1] + pl->pad1[3];
            w += pl->pad1[0] + pl->pad1[2];
        }
        pl->ph = h;
        pl->pw = w;
        pl->top = half_round_even(h - ch);
        pl->left = half_round_even(w - cw);
        pl->oh = sh->h = ch;
        pl->ow = sh->w = cw;
        return 0;
    }
    case ST_RANDOM_RESIZED_CROP:
        if (check_antialias(t, i, sh, err) < 0) return -1;
        pl->ph = sh->h;
        pl->pw = sh->w;
        pl->oh = sh->h = s->size_h;
        pl->ow = sh->w = s->size_w;
        return 0;
    case ST_COLOR_JITTER:
        if (sh->tensor || !sh->u8 || (sh->c != 1 && sh->c != 3)) {
            tx_step_where(t, i, where, sizeof where);
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "%s takes 8-bit images of 1 or 3 channels (PIL's L and RGB), not a %s of %d "
                           "channel%s%s", where, sh->tensor ? "tensor" : "image", sh->c, sh->c == 1 ? "" : "s",
                           !sh->tensor && !sh->u8 ? " of floats" : "");
            taas_error_hint(err, "put ColorJitter(...) before ToTensor(), on the dataset's images");
            return -1;
        }
        return 0;
    case ST_RANDOM_CROP: {
        shape cur = *sh;
        if (s->has_padding) {
            if (check_pad(t, i, &cur, s->pad, err) < 0) return -1;
            memcpy(pl->pad1, s->pad, sizeof pl->pad1);
            cur.w += s->pad[0] + s->pad[2];
            cur.h += s->pad[1] + s->pad[3];
        }
        if (s->pad_if_needed && cur.w < s->size_w) {
            /* torchvision pads both sides by the whole shortfall */
            int d = s->size_w - cur.w, p[4] = {d, 0, d, 0};
            if (check_pad(t, i, &cur, p, err) < 0) return -1;
            pl->pad2[0] = pl->pad2[2] = d;
            cur.w += 2 * d;
        }
        if (s->pad_if_needed && cur.h < s->size_h) {
            int d = s->size_h - cur.h, p[4] = {0, d, 0, d};
            if (check_pad(t, i, &cur, p, err) < 0) return -1;
            pl->pad2[1] = pl->pad2[3] = d;
            cur.h += 2 * d;
        }
        if (cur.h < s->size_h || cur.w < s->size_w) {
            tx_step_where(t, i, where, sizeof where);
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "%s: required crop size (%d, %d) is larger than input image size (%d, %d)",
                           where, s->size_h, s->size_w, cur.h, cur.w);
            taas_error_hint(err, "pad the %s first (padding=... or pad_if_needed=True), or crop a "
                                 "smaller size", kind_of(sh));
            return -1;
        }
        pl->ph = cur.h;
        pl->pw = cur.w;
        pl->oh = sh->h = s->size_h;
        pl->ow = sh->w = s->size_w;
        return 0;
    }
    }
    return 0;
}

int taas_transform_out_shape(const taas_transform *t, int h, int w, int c, int *oc, int *oh, int *ow,
                             taas_error *err) {
    if (h < 1 || w < 1 || c < 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "an image of %dx%d with %d channels has no pixels", h, w, c);
        taas_error_hint(err, "check the dataset: every sample needs height, width and channels >= 1");
        return -1;
    }
    shape sh = {c, h, w, 0, 1};
    plan pl;
    for (int i = 0; t && i < t->n; i++)
        if (plan_step(t, i, &sh, &pl, err) < 0) return -1;
    *oc = sh.c;
    *oh = sh.h;
    *ow = sh.w;
    return 0;
}

/* Row or column map of a crop step: padding (pad1, then pad2), then the window [off, off+n). */
static int *line_map(int n_in, const int before[2], const int after[2], tx_padmode mode, int off, int n) {
    int len = n_in + before[0] + after[0] + before[1] + after[1];
    int *a = malloc((size_t)len * sizeof *a), *b = malloc((size_t)len * sizeof *b);
    int *out = malloc((size_t)n * sizeof *out);
    if (!a || !b || !out) {
        free(a);
        free(b);
        free(out);
        return NULL;
    }
    int cur = n_in;
    for (int k = 0; k < cur; k++) a[k] = k;
    for (int pass = 0; pass < 2; pass++) {
        int nl = cur + before[pass] + after[pass];
        for (int k = 0; k < nl; k++) {
            int src = tx_pad_index(k - before[pass], cur, mode);
            b[k] = src < 0 ? -1 : a[src];
        }
        int *tmp = a;
        a = b;
        b = tmp;
        cur = nl;
    }
    memcpy(out, a + off, (size_t)n * sizeof *out);
    free(a);
    free(b);
    return out;
}

static int run_crop(const tx_step *s, const plan *pl, tx_img *im, int top, int left, float *dst) {
    tx_padmode mode = s->kind == ST_CENTER_CROP ? TX_PAD_CONSTANT : s->mode;
    int rb[2] = {pl->pad1[1], pl->pad2[1]}, ra[2] = {pl->pad1[3], pl->pad2[3]};
    int cb[2] = {pl->pad1[0], pl->pad2[0]}, ca[2] = {pl->pad1[2], pl->pad2[2]};
    int *rows = line_map(im->h, rb, ra, mode, top, pl->oh);
    int *cols = line_map(im->w, cb, ca, mode, left, pl->ow);
    double fill[64], *fv = fill;
    if (im->c > 64) fv = malloc((size_t)im->c * sizeof *fv);
    int rc = -1;
    if (rows && cols && fv) {
        for (int ch = 0; ch < im->c; ch++) {
            double f = 0.0;
            if (s->kind == ST_RANDOM_CROP) f = s->fill[s->nfill == 1 ? 0 : ch];
            if (!im->tensor && im->u8) /* PIL: int(), then clipped to a byte */
                f = f < 0 ? 0 : f > 255 ? 255 : (double)(int)f;
            fv[ch] = f;
        }
        rc = tx_remap(im, rows, pl->oh, cols, pl->ow, fv, dst);
    }
    free(rows);
    free(cols);
    if (fv != fill) free(fv);
    return rc;
}

static int run_flip(tx_img *im, float *dst) {
    int *rows = malloc((size_t)im->h * sizeof *rows), *cols = malloc((size_t)im->w * sizeof *cols);
    int rc = -1;
    if (rows && cols) {
        for (int y = 0; y < im->h; y++) rows[y] = y;
        for (int x = 0; x < im->w; x++) cols[x] = im->w - 1 - x;
        rc = tx_remap(im, rows, im->h, cols, im->w, NULL, dst);
    }
    free(rows);
    free(cols);
    return rc;
}

void tx_rrc_box(taas_rng *r, int h, int w, const double scale[2], const double ratio[2], int box[4]) {
    double area = (double)h * w, lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int k = 0; k < 10; k++) {
        double target = area * (scale[0] + (scale[1] - scale[0]) * taas_rng_uniform(r));
        double aspect = exp(lr0 + (lr1 - lr0) * taas_rng_uniform(r));
        int cw = (int)nearbyint(sqrt(target * aspect)), ch = (int)nearbyint(sqrt(target / aspect));
        if (0 < cw && cw <= w && 0 < ch && ch <= h) {
            box[0] = (int)taas_rng_below(r, (uint64_t)(h - ch + 1));
            box[1] = (int)taas_rng_below(r, (uint64_t)(w - cw + 1));
            box[2] = ch;
            box[3] = cw;
            return;
        }
    }
    /* the fallback: the central crop, clamped to ratio (Python's round is half-even) */
    double in_ratio = (double)w / h;
    int cw = w, ch = h;
    if (in_ratio < ratio[0]) ch = (int)nearbyint(cw / ratio[0]);
    else if (in_ratio > ratio[1]) cw = (int)nearbyint(ch * ratio[1]);
    box[0] = (h - ch) / 2;
    box[1] = (w - cw) / 2;
    box[2] = ch;
    box[3] = cw;
}

/* ColorJitter.forward: a random order of the four, then each enabled factor drawn, then
 * applied in that order. */
static void run_jitter(const tx_step *s, taas_rng *r, tx_img *im) {
    int order[4] = {0, 1, 2, 3};
    for (int k = 3; k > 0; k--) {
        int j = (int)taas_rng_below(r, (uint64_t)k + 1), tmp = order[k];
        order[k] = order[j];
        order[j] = tmp;
    }
    double f[4];
    for (int k = 0; k < 4; k++)
        f[k] = s->jit_on[k] ? s->jit[k][0] + (s->jit[k][1] - s->jit[k][0]) * taas_rng_uniform(r) : 0;
    for (int k = 0; k < 4; k++) {
        int fn = order[k];
        if (!s->jit_on[fn]) continue;
        if (fn == 0) tx_adjust_brightness(im, f[0]);
        else if (fn == 1) tx_adjust_contrast(im, f[1]);
        else if (fn == 2) tx_adjust_saturation(im, f[2]);
        else tx_adjust_hue(im, f[3]);
    }
}

/* The leading steps a decoder's region stands for (0: the chain is not planned that way):
 * RandomResizedCrop; Resize (bilinear or bicubic: a reduced scale averages, which nearest does
 * not), with the CenterCrop that follows it. */
static int hint_steps(const taas_transform *t) {
    if (!t || t->n == 0) return 0;
    const tx_step *s = &t->steps[0];
    if (s->kind == ST_RANDOM_RESIZED_CROP) return 1;
    if (s->kind != ST_RESIZE || s->interp == TX_NEAREST) return 0;
    return t->n > 1 && t->steps[1].kind == ST_CENTER_CROP ? 2 : 1;
}

static int hint_want(void *ctx, int h, int w, taas_crop_want *out) {
    const taas_transform_hint *th = ctx;
    const tx_step *s = &th->t->steps[0];
    if (s->kind == ST_RANDOM_RESIZED_CROP) {
        taas_rng r;
        int box[4];
        taas_rng_init(&r, th->seed, th->epoch, th->index, TAAS_RNG_TRANSFORM); /* step 0's stream */
        tx_rrc_box(&r, h, w, s->scale, s->ratio, box);
        *out = (taas_crop_want){{box[1], box[0], box[1] + box[3], box[0] + box[2]}, s->size_h, s->size_w, 0};
        return 1;
    }
    /* Resize, then CenterCrop: the crop's window in the resized image is a region of the
     * source, resized with the filter as the whole image would be (Pillow places output
     * pixel x of a resize at source (x + 0.5) * in / out, box or not) */
    shape sh = {3, h, w, 0, 1};
    int rh, rw;
    if (resize_size(s, &sh, &rh, &rw) < 0 || rh < 1 || rw < 1) return 0; /* the transform says why */
    int top = 0, left = 0, oh = rh, ow = rw;
    if (hint_steps(th->t) == 2) {
        const tx_step *c = &th->t->steps[1];
        if (c->size_h > rh || c->size_w > rw) return 0; /* padded: done on the whole image */
        top = half_round_even(rh - c->size_h);
        left = half_round_even(rw - c->size_w);
        oh = c->size_h;
        ow = c->size_w;
    }
    double sy = (double)h / rh, sx = (double)w / rw;
    *out = (taas_crop_want){{left * sx, top * sy, fmin((left + ow) * sx, w), fmin((top + oh) * sy, h)}, oh, ow,
                            /* no resize when the size is right: a crop, no filter */
                            rh == h && rw == w ? 0 : s->interp == TX_BICUBIC ? 2.0 : 1.0};
    return 1;
}

int taas_transform_hint_for(const taas_transform *t, uint64_t seed, uint64_t epoch, uint64_t index,
                            taas_transform_hint *h) {
    if (!hint_steps(t)) return 0;
    h->hint.want = hint_want;
    h->hint.ctx = h;
    h->t = t;
    h->seed = seed;
    h->epoch = epoch;
    h->index = index;
    return 1;
}

/* *mirror: a flip left for the ToTensor that follows it to fold in (set by the flip, used and
 * cleared by ToTensor). */
static int run_step(const taas_transform *t, int i, const plan *pl, tx_img *im, uint64_t seed,
                    uint64_t epoch, uint64_t index, int *mirror, float *dst) {
    const tx_step *s = &t->steps[i];
    taas_rng r;
    taas_rng_init(&r, seed, epoch, index, TAAS_RNG_TRANSFORM + (uint32_t)i);
    switch (s->kind) {
    case ST_TO_TENSOR: {
        const tx_step *nx = i + 1 < t->n && t->steps[i + 1].fused ? &t->steps[i + 1] : NULL;
        int m = *mirror;
        *mirror = 0;
        if (im->u8) return tx_to_tensor(im, s->lut, s->nlut, NULL, 0, NULL, 0, m, dst);
        return tx_to_tensor(im, NULL, 0, nx ? nx->mean : NULL, nx ? nx->nmean : 0, nx ? nx->std : NULL,
                            nx ? nx->nstd : 0, m, dst);
    }
    case ST_NORMALIZE:
        return tx_normalize(im, s->mean, s->nmean, s->std, s->nstd, dst);
    case ST_FLIP:
        if (taas_rng_uniform(&r) >= s->p) return 0;
        if (!im->tensor && (i + 1 == t->n || t->steps[i + 1].kind == ST_TO_TENSOR)) {
            *mirror = 1; /* ToTensor (the implicit one at the end too) reads the rows backwards */
            return 0;
        }
        return run_flip(im, dst);
    case ST_RESIZE:
        if (pl->oh == im->h && pl->ow == im->w) return 0;
        if (!im->tensor && im->u8) return tx_resize_pil(im, pl->oh, pl->ow, s->interp);
        return tx_resize_torch(im, pl->oh, pl->ow, s->interp, s->antialias == 1, dst);
    case ST_CENTER_CROP:
        if (pl->oh == im->h && pl->ow == im->w) return 0;
        return run_crop(s, pl, im, pl->top, pl->left, dst);
    case ST_RANDOM_RESIZED_CROP: {
        int box[4];
        tx_rrc_box(&r, im->h, im->w, s->scale, s->ratio, box);
        return tx_resized_crop(im, box, pl->oh, pl->ow, s->interp, s->antialias == 1, dst);
    }
    case ST_COLOR_JITTER:
        run_jitter(s, &r, im);
        return 0;
    case ST_RANDOM_CROP: {
        int top = 0, left = 0;
        if (pl->ph != pl->oh || pl->pw != pl->ow) {
            top = (int)taas_rng_below(&r, (uint64_t)(pl->ph - pl->oh + 1));
            left = (int)taas_rng_below(&r, (uint64_t)(pl->pw - pl->ow + 1));
        }
        return run_crop(s, pl, im, top, left, dst);
    }
    }
    return 0;
}

int taas_transform_apply(const taas_transform *t, taas_image *img, uint64_t seed, uint64_t epoch,
                         uint64_t index, float *out, taas_error *err) {
    return taas_transform_apply_boxed(t, img, 0, seed, epoch, index, out, err);
}

int taas_transform_apply_boxed(const taas_transform *t, taas_image *img, int boxed, uint64_t seed,
                               uint64_t epoch, uint64_t index, float *out, taas_error *err) {
    if (!img->data || img->h < 1 || img->w < 1 || img->c < 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "an image of %dx%d with %d channels has no pixels",
                       img->h, img->w, img->c);
        taas_error_hint(err, "check the dataset: every sample needs height, width and channels >= 1");
        taas_image_free(img);
        return -1;
    }
    tx_img cur = {img->c, img->h, img->w, 0, img->type == TAAS_PIX_U8, img->data, 1};
    /* a decoded region stands for the first steps: they are planned on the whole image */
    int covered = boxed ? hint_steps(t) : 0;
    shape sh = {cur.c, covered ? img->full_h : cur.h, covered ? img->full_w : cur.w, 0, cur.u8};
    double box_in[4];
    memcpy(box_in, img->box, sizeof box_in);
    img->data = NULL;
    taas_image_free(img);
    int n = t ? t->n : 0, last = -1;
    for (int i = 0; i < n; i++)
        if (!t->steps[i].fused) last = i;
    int ends_tensor = n > 0 && (t->steps[n - 1].on_tensor || t->steps[n - 1].kind == ST_TO_TENSOR);
    int mirror = 0;
    for (int i = 0; i < n; i++) {
        plan pl;
        if (plan_step(t, i, &sh, &pl, err) < 0) goto fail;
        if (t->steps[i].fused) continue;
        float *dst = (i == last && ends_tensor) ? out : NULL;
        int rc;
        if (i < covered) /* the region becomes what the covered steps make of the image */
            rc = i + 1 < covered ? 0 : tx_resize_pil_box(&cur, box_in, sh.h, sh.w, t->steps[0].interp);
        else
            rc = run_step(t, i, &pl, &cur, seed, epoch, index, &mirror, dst);
        if (rc < 0) {
            char where[96];
            tx_step_where(t, i, where, sizeof where);
            taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "%s: out of memory for a %dx%d %s", where,
                           sh.h, sh.w, kind_of(&sh));
            goto fail;
        }
    }
    if (!cur.tensor && tx_to_tensor(&cur, t ? t->to_tensor_lut : NULL, 1, NULL, 0, NULL, 0, mirror, out) < 0) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "ToTensor: out of memory");
        goto fail;
    }
    if (cur.data != out) memcpy(out, cur.data, tx_count(&cur) * sizeof(float));
    if (cur.owned) free(cur.data);
    return 0;
fail:
    if (cur.owned) free(cur.data);
    return -1;
}
