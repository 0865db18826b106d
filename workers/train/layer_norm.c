/* BatchNorm1d (N, C) and BatchNorm2d (N, C, H, W), as one (N, C, HW) routine, and LayerNorm
 * over the last axis. Statistics are accumulated in double so large batches do not lose
 * precision. */
#include <math.h>
#include "errnames.h"
#include "layers.h"
#include "simd.h"

/* A channel's sums run in LANES double lanes, a value's lane its index in its row mod LANES,
 * the lanes added in a fixed order at the end: one running sum in double is a chain of
 * dependent adds (80 % of BatchNorm's time in resnet50), the lanes are vector code, and
 * they give the same bits on every kernel set. A channel's rows: n of hw floats, `stride`
 * apart. */
enum { LANES = 8 };

static double lanes_total(const double *a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* sum of x, or with `mu` given (squares) the sum of (x - mu)^2 */
TAAS_VEC static double channel_sum(const float *x, size_t stride, int n, int hw, int squares, double mu) {
    double a[LANES] = {0};
    for (int i = 0; i < n; i++) {
        const float *p = x + (size_t)i * stride;
        int k = 0;
        if (squares) {
            for (; k + LANES <= hw; k += LANES)
                for (int l = 0; l < LANES; l++) a[l] += (p[k + l] - mu) * (p[k + l] - mu);
            for (; k < hw; k++) a[k % LANES] += (p[k] - mu) * (p[k] - mu);
        } else {
            for (; k + LANES <= hw; k += LANES)
                for (int l = 0; l < LANES; l++) a[l] += p[k + l];
            for (; k < hw; k++) a[k % LANES] += p[k];
        }
    }
    return lanes_total(a);
}

/* sum of dy and of dy * xhat, xhat = (x - mu) * is */
TAAS_VEC static void channel_grad_sums(const float *dy, const float *x, size_t stride, int n, int hw, float mu,
                                       float is, double *sdy, double *sdyx) {
    double a[LANES] = {0}, b[LANES] = {0};
    for (int i = 0; i < n; i++) {
        const float *g = dy + (size_t)i * stride, *p = x + (size_t)i * stride;
        int k = 0;
        for (; k + LANES <= hw; k += LANES)
            for (int l = 0; l < LANES; l++) {
                a[l] += g[k + l];
                b[l] += g[k + l] * (p[k + l] - mu) * is;
            }
        for (; k < hw; k++) {
            a[k % LANES] += g[k];
            b[k % LANES] += g[k] * (p[k] - mu) * is;
        }
    }
    *sdy = lanes_total(a);
    *sdyx = lanes_total(b);
}

/* y = (x - mu) * is * g + b over a channel's rows */
TAAS_VEC static void channel_affine(float *y, const float *x, size_t stride, int n, int hw, float mu, float is,
                                    float g, float b) {
    for (int i = 0; i < n; i++) {
        const float *p = x + (size_t)i * stride;
        float *q = y + (size_t)i * stride;
#pragma omp simd
        for (int k = 0; k < hw; k++) q[k] = (p[k] - mu) * is * g + b;
    }
}

/* y = (x - mu) * is * g + b along one LayerNorm row, g and b per column */
TAAS_VEC static void channel_affine_row(float *y, const float *x, int c, float mu, float is, const float *g,
                                        const float *b) {
#pragma omp simd
    for (int k = 0; k < c; k++) y[k] = (x[k] - mu) * is * g[k] + b[k];
}

/* dx = scale * (dy - mdy - xhat * mdyx) over a channel's rows */
TAAS_VEC static void channel_dx(float *dx, const float *dy, const float *x, size_t stride, int n, int hw, float mu,
                                float is, float scale, float mdy, float mdyx) {
    for (int i = 0; i < n; i++) {
        const float *p = x + (size_t)i * stride, *g = dy + (size_t)i * stride;
        float *q = dx + (size_t)i * stride;
#pragma omp simd
        for (int k = 0; k < hw; k++) q[k] = scale * (g[k] - mdy - (p[k] - mu) * is * mdyx);
    }
}

int taas_batchnorm_forward_train(float *y, float *mean, float *invstd, float *running_mean,
                                 float *running_var, const float *x, const float *gamma,
                                 const float *beta, int n, int c, int hw, float momentum,
                                 float eps, taas_error *e) {
    size_t m = (size_t)n * hw;
    if (m < 2) {
        taas_srcpos nowhere = {0, 0};
        taas_error_set(e, TAAS_ERR_VALUE, nowhere,
                       "BatchNorm: expected more than 1 value per channel when training, got "
                       "input of %d x %d x %d", n, c, hw);
        taas_error_hint(e, "use a batch size of at least 2 (drop_last=True avoids a final "
                           "batch of 1), or put the model in eval mode");
        return -1;
    }
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * hw;
        size_t stride = (size_t)c * hw;
        double mu = channel_sum(xc, stride, n, hw, 0, 0.0) / (double)m;
        double ss = channel_sum(xc, stride, n, hw, 1, mu), var = ss / (double)m;
        float is = (float)(1.0 / sqrt(var + eps));
        mean[ch] = (float)mu;
        invstd[ch] = is;
        if (running_mean)
            running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + momentum * mu);
        if (running_var)
            running_var[ch] = (float)((1.0 - momentum) * running_var[ch] +
                                      momentum * ss / (double)(m - 1));
        channel_affine(y + (size_t)ch * hw, xc, stride, n, hw, (float)mu, is, gamma ? gamma[ch] : 1.0f,
                       beta ? beta[ch] : 0.0f);
    }
    return 0;
}

void taas_batchnorm_forward_eval(float *y, const float *x, const float *gamma, const float *beta,
                                 const float *running_mean, const float *running_var, int n,
                                 int c, int hw, float eps) {
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        float is = 1.0f / sqrtf(running_var[ch] + eps), mu = running_mean[ch];
        float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
        for (int i = 0; i < n; i++) {
            const float *p = x + ((size_t)i * c + ch) * hw;
            float *q = y + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) q[k] = (p[k] - mu) * is * g + b;
        }
    }
}

void taas_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                             const float *x, const float *mean, const float *invstd,
                             const float *gamma, int n, int c, int hw) {
    double m = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double sdy, sdyx;
        float mu = mean[ch], is = invstd[ch];
        channel_grad_sums(dy + (size_t)ch * hw, x + (size_t)ch * hw, (size_t)c * hw, n, hw, mu, is, &sdy, &sdyx);
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
        if (!dx) continue;
        /* dx = gamma*invstd/m * (m*dy - sum dy - xhat * sum(dy*xhat)) */
        float scale = (gamma ? gamma[ch] : 1.0f) * is;
        size_t at = (size_t)ch * hw;
        channel_dx(dx + at, dy + at, x + at, (size_t)c * hw, n, hw, mu, is, scale, (float)(sdy / m),
                   (float)(sdyx / m));
    }
}

void taas_batchnorm_backward_eval(float *dx, float *dgamma, float *dbeta, const float *dy,
                                  const float *x, const float *gamma, const float *running_mean,
                                  const float *running_var, int n, int c, int hw, float eps) {
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        float is = 1.0f / sqrtf(running_var[ch] + eps), mu = running_mean[ch];
        float scale = (gamma ? gamma[ch] : 1.0f) * is;
        double sdy, sdyx;
        channel_grad_sums(dy + (size_t)ch * hw, x + (size_t)ch * hw, (size_t)c * hw, n, hw, mu, is, &sdy, &sdyx);
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
        for (int i = 0; i < n && dx; i++) {
            const float *g = dy + ((size_t)i * c + ch) * hw;
            float *q = dx + ((size_t)i * c + ch) * hw;
            for (int k = 0; k < hw; k++) q[k] = g[k] * scale;
        }
    }
}

/* ---- LayerNorm over the last axis: x (R, C), a row's statistics in LANES double lanes ---- */

TAAS_VEC static void row_stats(const float *x, int c, float eps, float *mean, float *rstd) {
    double a[LANES] = {0}, q[LANES] = {0};
    int k = 0;
    for (; k + LANES <= c; k += LANES)
        for (int l = 0; l < LANES; l++) a[l] += x[k + l];
    for (; k < c; k++) a[k % LANES] += x[k];
    double mu = lanes_total(a) / c;
    for (k = 0; k + LANES <= c; k += LANES)
        for (int l = 0; l < LANES; l++) q[l] += (x[k + l] - mu) * (x[k + l] - mu);
    for (; k < c; k++) q[k % LANES] += (x[k] - mu) * (x[k] - mu);
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(lanes_total(q) / c + eps));
}

void taas_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *g, const float *b,
                            size_t rows, int c, float eps) {
#pragma omp parallel for if (rows * (size_t)c >= TAAS_PAR_MIN) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *p = x + r * (size_t)c;
        row_stats(p, c, eps, &mean[r], &rstd[r]);
        channel_affine_row(y + r * (size_t)c, p, c, mean[r], rstd[r], g, b);
    }
}

/* a row's sums of dy*g and dy*g*xhat */
TAAS_VEC static void row_grad_sums(const float *dy, const float *x, const float *g, int c, float mu, float is,
                                   double *s1, double *s2) {
    double a[LANES] = {0}, q[LANES] = {0};
    int k = 0;
    for (; k + LANES <= c; k += LANES)
        for (int l = 0; l < LANES; l++) {
            float d = dy[k + l] * g[k + l];
            a[l] += d;
            q[l] += d * (x[k + l] - mu) * is;
        }
    for (; k < c; k++) {
        float d = dy[k] * g[k];
        a[k % LANES] += d;
        q[k % LANES] += d * (x[k] - mu) * is;
    }
    *s1 = lanes_total(a);
    *s2 = lanes_total(q);
}

/* dgamma and dbeta over a block of columns [o0, o0 + w): down the rows in order */
TAAS_VEC static void ln_param_sums(double *sg, double *sb, const float *dy, const float *x, const float *mean,
                                   const float *rstd, size_t rows, int c, int o0, int w) {
    for (size_t r = 0; r < rows; r++) {
        const float *d = dy + r * (size_t)c + o0, *p = x + r * (size_t)c + o0;
        float mu = mean[r], is = rstd[r];
#pragma omp simd
        for (int o = 0; o < w; o++) {
            sg[o] += d[o] * ((p[o] - mu) * is);
            sb[o] += d[o];
        }
    }
}

enum { LN_COLS = 128 };

void taas_layernorm_backward(float *dx, float *dg, float *db, const float *dy, const float *x, const float *mean,
                             const float *rstd, const float *g, size_t rows, int c) {
    int par = rows * (size_t)c >= TAAS_PAR_MIN;
    if (dx) {
#pragma omp parallel for if (par) schedule(static)
        for (size_t r = 0; r < rows; r++) {
            const float *d = dy + r * (size_t)c, *p = x + r * (size_t)c;
            float *q = dx + r * (size_t)c, mu = mean[r], is = rstd[r];
            double s1, s2;
            row_grad_sums(d, p, g, c, mu, is, &s1, &s2);
            float m1 = (float)(s1 / c), m2 = (float)(s2 / c);
            for (int k = 0; k < c; k++) q[k] = is * (d[k] * g[k] - m1 - (p[k] - mu) * is * m2);
        }
    }
    if (!dg && !db) return;
    int nb = (c + LN_COLS - 1) / LN_COLS;
#pragma omp parallel for if (par) schedule(static)
    for (int blk = 0; blk < nb; blk++) {
        int o0 = blk * LN_COLS, w = c - o0 < LN_COLS ? c - o0 : LN_COLS;
        double sg[LN_COLS] = {0}, sb[LN_COLS] = {0};
        ln_param_sums(sg, sb, dy, x, mean, rstd, rows, c, o0, w);
        for (int o = 0; o < w; o++) {
            if (dg) dg[o0 + o] += (float)sg[o];
            if (db) db[o0 + o] += (float)sb[o];
        }
    }
}
