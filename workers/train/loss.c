/* Losses, mean reduction, the arithmetic PyTorch's CPU kernels do (sums in double where
 * that only makes the result closer to the exact value). */
#include "loss.h"
#include "errnames.h"

#include <math.h>

static int check_targets(const int64_t *target, int n, int c, int64_t ignore_index, const char *what,
                         taas_error *err) {
    taas_srcpos nopos = {0, 0};
    if (n <= 0 || c <= 0) {
        taas_error_set(err, TAAS_ERR_VALUE, nopos, "%s: got a batch of %d samples with %d classes",
                       what, n, c);
        taas_error_hint(err, "the input must be (N, C) with N >= 1 and C >= 1");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        /* an ignored target may be anything, e.g. torch's -100 padding */
        if (target[i] != ignore_index && (target[i] < 0 || target[i] >= c)) {
            taas_error_set(err, TAAS_ERR_VALUE, nopos,
                           "%s: target %lld of sample %d is out of range for %d classes", what,
                           (long long)target[i], i, c);
            taas_error_hint(err, "class labels must be integers in [0, %d); check the dataset's "
                                 "labels or the size of the last layer", c);
            return -1;
        }
    }
    return 0;
}

int taas_nll_loss_forward(float *loss, const float *logp, const int64_t *target, int n, int c,
                          int64_t ignore_index, taas_error *err) {
    if (check_targets(target, n, c, ignore_index, "NLLLoss", err) != 0) return -1;
    double sum = 0.0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (target[i] == ignore_index) continue;
        sum -= logp[(size_t)i * c + target[i]];
        m++;
    }
    *loss = m ? (float)(sum / m) : NAN;  /* torch's 0/0 when every sample is ignored */
    return 0;
}

void taas_nll_loss_backward(float *dlogp, const int64_t *target, int n, int c, int64_t ignore_index,
                            float dloss) {
    int m = taas_loss_counted(target, n, ignore_index);
    for (size_t k = 0; k < (size_t)n * c; k++) dlogp[k] = 0.0f;
    if (m == 0) return;  /* torch: a zero gradient, not nan */
    float g = -dloss / (float)m;
    for (int i = 0; i < n; i++)
        if (target[i] != ignore_index) dlogp[(size_t)i * c + target[i]] = g;
}

int taas_cross_entropy_forward(float *loss, float *probs, const float *logits, const int64_t *target,
                               int n, int c, float label_smoothing, int64_t ignore_index, taas_error *err) {
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f)) {
        taas_error_set(err, TAAS_ERR_VALUE, (taas_srcpos){0, 0},
                       "CrossEntropyLoss: label_smoothing=%g is outside [0, 1]",
                       (double)label_smoothing);
        taas_error_hint(err, "use a value such as 0.1; 0 means no smoothing");
        return -1;
    }
    if (check_targets(target, n, c, ignore_index, "CrossEntropyLoss", err) != 0) return -1;
    double nll = 0.0, smooth = 0.0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        const float *x = logits + (size_t)i * c;
        float *p = probs + (size_t)i * c;
        float mx = x[0];
        for (int j = 1; j < c; j++) mx = x[j] > mx ? x[j] : mx;
        double z = 0.0;
        for (int j = 0; j < c; j++) z += exp((double)x[j] - mx);
        double logz = log(z) + mx;
        double rowsum = 0.0;
        for (int j = 0; j < c; j++) {
            double lp = (double)x[j] - logz;
            p[j] = (float)exp(lp);
            rowsum -= lp;
        }
        if (target[i] == ignore_index) continue;  /* neither term counts it (torch 1.13) */
        nll -= (double)x[target[i]] - logz;
        smooth += rowsum;
        m++;
    }
    double s = label_smoothing;
    *loss = m ? (float)((1.0 - s) * nll / m + s / c * smooth / m) : NAN;
    return 0;
}

void taas_cross_entropy_backward(float *dlogits, const float *probs, const int64_t *target, int n,
                                 int c, float label_smoothing, int64_t ignore_index, float dloss) {
    int m = taas_loss_counted(target, n, ignore_index);
    float scale = m ? dloss / (float)m : 0.0f;
    float off = label_smoothing / (float)c;
    for (int i = 0; i < n; i++) {
        const float *p = probs + (size_t)i * c;
        float *d = dlogits + (size_t)i * c;
        if (target[i] == ignore_index) {
            for (int j = 0; j < c; j++) d[j] = 0.0f;
            continue;
        }
        for (int j = 0; j < c; j++) d[j] = (p[j] - off) * scale;
        d[target[i]] -= (1.0f - label_smoothing) * scale;
    }
}

float taas_mse_loss_forward(const float *x, const float *y, size_t count) {
    double sum = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = (double)x[i] - y[i];
        sum += d * d;
    }
    return count ? (float)(sum / count) : NAN;  /* torch also gives nan for an empty input */
}

void taas_mse_loss_backward(float *dx, const float *x, const float *y, size_t count, float dloss) {
    float scale = 2.0f * dloss / (float)count;
    for (size_t i = 0; i < count; i++) dx[i] = (x[i] - y[i]) * scale;
}
