/* Rows of the nn layers. Reprs follow PyTorch's extra_repr exactly; the parameter
 * flags say which arguments show and how. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "errnames.h"
#include "rows.h"

#define END {0}

static int64_t iarg(taas_value **a, int i) {
    return a[i]->type == TAAS_V_INT ? a[i]->u.i : 0;
}

/* Item k of a normalised pair, or the int itself. */
static int64_t pair_at(const taas_value *v, size_t k) {
    if (v->type == TAAS_V_INT) return v->u.i;
    if ((v->type == TAAS_V_TUPLE || v->type == TAAS_V_LIST) && k < v->u.seq.n &&
        v->u.seq.items[k]->type == TAAS_V_INT)
        return v->u.seq.items[k]->u.i;
    return 0;
}

/* ---- Linear ---------------------------------------------------------------------- */

static const taas_param LINEAR_P[] = {
    {"in_features", TAAS_P_INT, NULL, 0, TAAS_BETWEEN(1, TAAS_MAX_DIM), "size of each input sample (the last dimension)"},
    {"out_features", TAAS_P_INT, NULL, 0, TAAS_BETWEEN(1, TAAS_MAX_DIM), "size of each output sample"},
    {"bias", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "learn an additive bias"},
    END,
};

static const taas_param LAZY_LINEAR_P[] = {
    {"out_features", TAAS_P_INT, NULL, 0, TAAS_BETWEEN(1, TAAS_MAX_DIM), "size of each output sample"},
    {"bias", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "learn an additive bias"},
    END,
};

static int linear_nparams(const taas_value *v, int64_t *n) {
    int64_t in = taas_object_arg(v, "in_features")->u.i, out = taas_object_arg(v, "out_features")->u.i;
    *n = in * out + (taas_object_arg(v, "bias")->u.b ? out : 0);
    return 1;
}

static int lazy_nparams(const taas_value *v, int64_t *n) {
    (void)v;
    (void)n;
    return 0; /* in_features is only known at the first batch */
}

/* PyTorch shows a lazy layer's unknown input size as 0. */
static void lazy_linear_repr(const taas_value *v, taas_buf *out) {
    taas_buf_puts(out, "LazyLinear(in_features=0, ");
    taas_repr_params(v, out);
    taas_buf_putc(out, ')');
}

/* ---- Conv2d ---------------------------------------------------------------------- */

#define CONV_TAIL                                                                           \
    {"kernel_size", TAAS_P_INT_PAIR, NULL, TAAS_PF_PAIR, TAAS_BETWEEN(1, TAAS_MAX_DIM), "size of the convolving kernel"}, \
    {"stride", TAAS_P_INT_PAIR, "1", TAAS_PF_PAIR, TAAS_BETWEEN(1, TAAS_MAX_DIM), "stride of the convolution"},         \
    {"padding", TAAS_P_ANY, "0", TAAS_PF_PAIR | TAAS_PF_SHOW_SET | TAAS_PF_BARE | TAAS_PX(TAAS_PX_CONV_PADDING), \
     TAAS_AT_LEAST(0), "zeros (or padding_mode) added to both sides; 'same' keeps the size (stride 1 only)"},   \
    {"dilation", TAAS_P_INT_PAIR, "1", TAAS_PF_PAIR | TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, TAAS_MAX_DIM), "spacing between kernel elements"}, \
    {"groups", TAAS_P_INT, "1", TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, TAAS_MAX_DIM), "blocked connections from input to output channels"}, \
    {"bias", TAAS_P_BOOL, "True", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "learn an additive bias per output channel"}, \
    {"padding_mode", TAAS_P_STR, "'zeros'", TAAS_PF_SHOW_SET | TAAS_PF_BARE | TAAS_PX(TAAS_PX_CONV_PADMODE), \
     TAAS_NO_RANGE, "how the border is padded"},                                            \
    END

static const taas_param CONV2D_P[] = {
    {"in_channels", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, TAAS_MAX_DIM), "channels of the input image"},
    {"out_channels", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, TAAS_MAX_DIM), "channels produced by the convolution"},
    CONV_TAIL,
};

static const taas_param LAZY_CONV2D_P[] = {
    {"out_channels", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, TAAS_MAX_DIM), "channels produced by the convolution"},
    CONV_TAIL,
};

static int conv_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    int lazy = strcmp(r->b.name, "LazyConv2d") == 0;
    int o = lazy ? 0 : 1; /* index of out_channels */
    int64_t groups = iarg(a, o + 5);
    assert(groups >= 1); /* CONV_TAIL's range, checked by args.c before any row's check */
    if (!lazy && iarg(a, 0) % groups) {
        taas_error_set(err, TAAS_ERR_VALUE, w[o + 5], "%s() in_channels (%lld) must be divisible by groups (%lld)",
                       r->b.name, (long long)iarg(a, 0), (long long)groups);
        taas_sig_hint(err, &r->b, NULL);
        return -1;
    }
    if (iarg(a, o) % groups) {
        taas_error_set(err, TAAS_ERR_VALUE, w[o + 5], "%s() out_channels (%lld) must be divisible by groups (%lld)",
                       r->b.name, (long long)iarg(a, o), (long long)groups);
        taas_sig_hint(err, &r->b, NULL);
        return -1;
    }
    const taas_value *pad = a[o + 3], *stride = a[o + 2];
    if (pad->type == TAAS_V_STR && strcmp(pad->u.str.s, "same") == 0 &&
        (pair_at(stride, 0) != 1 || pair_at(stride, 1) != 1)) {
        taas_error_set(err, TAAS_ERR_VALUE, w[o + 3],
                       "%s() padding='same' is not supported for strided convolutions", r->b.name);
        taas_error_hint(err, "use stride=1 with padding='same', or give the padding as a number");
        return -1;
    }
    return 0;
}

static int conv_nparams(const taas_value *v, int64_t *n) {
    int64_t in = taas_object_arg(v, "in_channels")->u.i, out = taas_object_arg(v, "out_channels")->u.i;
    const taas_value *k = taas_object_arg(v, "kernel_size");
    int64_t g = taas_object_arg(v, "groups")->u.i;
    *n = out * (in / g) * pair_at(k, 0) * pair_at(k, 1) + (taas_object_arg(v, "bias")->u.b ? out : 0);
    return 1;
}

static void lazy_conv_repr(const taas_value *v, taas_buf *out) {
    taas_buf_puts(out, "LazyConv2d(0, ");
    taas_repr_params(v, out);
    taas_buf_putc(out, ')');
}

/* ---- pooling --------------------------------------------------------------------- */

static const taas_param MAXPOOL_P[] = {
    {"kernel_size", TAAS_P_INT_PAIR, NULL, TAAS_PF_SPEC_PAIR, TAAS_BETWEEN(1, TAAS_MAX_DIM), "size of the window to take the maximum over"},
    {"stride", TAAS_P_INT_PAIR, "None", TAAS_PF_NONE_OK | TAAS_PF_SPEC_PAIR, TAAS_BETWEEN(1, TAAS_MAX_DIM), "stride of the window; None means kernel_size"},
    {"padding", TAAS_P_INT_PAIR, "0", TAAS_PF_SPEC_PAIR, TAAS_BETWEEN(0, TAAS_MAX_DIM), "implicit -inf padding on both sides, at most half the kernel"},
    {"dilation", TAAS_P_INT_PAIR, "1", TAAS_PF_SPEC_PAIR, TAAS_BETWEEN(1, TAAS_MAX_DIM), "spacing between elements of the window"},
    {"return_indices", TAAS_P_BOOL, "False", TAAS_PF_HIDE, TAAS_NO_RANGE, "must stay False: a layer in a Sequential passes on one tensor"},
    {"ceil_mode", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "use ceil instead of floor for the output size"},
    END,
};

static const taas_param AVGPOOL_P[] = {
    {"kernel_size", TAAS_P_INT_PAIR, NULL, TAAS_PF_SPEC_PAIR, TAAS_BETWEEN(1, TAAS_MAX_DIM), "size of the window to average over"},
    {"stride", TAAS_P_INT_PAIR, "None", TAAS_PF_NONE_OK | TAAS_PF_SPEC_PAIR, TAAS_BETWEEN(1, TAAS_MAX_DIM), "stride of the window; None means kernel_size"},
    {"padding", TAAS_P_INT_PAIR, "0", TAAS_PF_SPEC_PAIR, TAAS_BETWEEN(0, TAAS_MAX_DIM), "implicit zero padding on both sides, at most half the kernel"},
    {"ceil_mode", TAAS_P_BOOL, "False", TAAS_PF_HIDE, TAAS_NO_RANGE, "use ceil instead of floor for the output size"},
    {"count_include_pad", TAAS_P_BOOL, "True", TAAS_PF_HIDE, TAAS_NO_RANGE, "count the zero padding in the average"},
    {"divisor_override", TAAS_P_INT, "None", TAAS_PF_NONE_OK | TAAS_PF_HIDE, TAAS_BETWEEN(1, TAAS_MAX_DIM), "divide by this instead of the window size"},
    END,
};

static int pool_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    int max = strcmp(r->b.name, "MaxPool2d") == 0;
    if (a[1]->type == TAAS_V_NONE) { /* as PyTorch: stride defaults to the kernel size */
        taas_unref(a[1]);
        a[1] = taas_ref(a[0]);
    }
    if (max && a[4]->u.b) {
        taas_error_set(err, TAAS_ERR_VALUE, w[4], "MaxPool2d() return_indices=True is not supported");
        taas_error_hint(err, "a layer in a Sequential passes one tensor to the next; leave return_indices=False");
        return -1;
    }
    for (size_t k = 0; k < 2; k++) {
        int64_t ks = pair_at(a[0], k), pad = pair_at(a[2], k);
        int64_t dil = max ? pair_at(a[3], k) : 1;
        int64_t eff = (ks - 1) * dil + 1;
        if (pad * 2 > eff) {
            taas_error_set(err, TAAS_ERR_VALUE, w[2],
                           "%s() padding should be at most half of the kernel size, but got padding=%lld, "
                           "kernel_size=%lld%s", r->b.name, (long long)pad, (long long)ks,
                           max && dil != 1 ? " (dilated)" : "");
            taas_error_hint(err, "use padding <= %lld", (long long)(eff / 2));
            return -1;
        }
    }
    return 0;
}

/* ---- activations, dropout, normalisation, shape ------------------------------------ */

static const taas_param NO_P[] = {END};

static const taas_param RELU_P[] = {
    {"inplace", TAAS_P_BOOL, "False", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "PyTorch's in-place flag; results are the same either way"},
    END,
};

static const taas_param LEAKY_P[] = {
    {"negative_slope", TAAS_P_FLOAT, "0.01", 0, TAAS_NO_RANGE, "slope for negative inputs"},
    {"inplace", TAAS_P_BOOL, "False", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "PyTorch's in-place flag; results are the same either way"},
    END,
};

static const taas_param GELU_P[] = {
    {"approximate", TAAS_P_STR, "'none'", TAAS_PX(TAAS_PX_GELU), TAAS_NO_RANGE, "'tanh' uses the tanh approximation"},
    END,
};

static const taas_param DROPOUT_P[] = {
    {"p", TAAS_P_FLOAT, "0.5", 0, TAAS_BETWEEN(0, 1), "probability of an element to be zeroed"},
    {"inplace", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "PyTorch's in-place flag; results are the same either way"},
    END,
};

static const taas_param BATCHNORM_P[] = {
    {"num_features", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, TAAS_MAX_DIM), "channels (C) of the input"},
    {"eps", TAAS_P_FLOAT, "1e-05", 0, TAAS_AT_LEAST(0), "added to the variance for numerical stability"},
    {"momentum", TAAS_P_FLOAT, "0.1", TAAS_PF_NONE_OK, TAAS_BETWEEN(0, 1), "weight of the new batch in the running statistics; None = cumulative average"},
    {"affine", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "learn a scale and a shift per channel"},
    {"track_running_stats", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "keep running mean and variance for evaluation"},
    END,
};

static int batchnorm_nparams(const taas_value *v, int64_t *n) {
    *n = taas_object_arg(v, "affine")->u.b ? 2 * taas_object_arg(v, "num_features")->u.i : 0;
    return 1;
}

static const taas_param FLATTEN_P[] = {
    {"start_dim", TAAS_P_INT, "1", 0, TAAS_NO_RANGE, "first dimension to flatten"},
    {"end_dim", TAAS_P_INT, "-1", 0, TAAS_NO_RANGE, "last dimension to flatten"},
    END,
};

static const taas_param SOFTMAX_P[] = {
    {"dim", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "dimension along which to normalise (1 for (N, C) inputs)"},
    END,
};

/* ---- Sequential ------------------------------------------------------------------ */

static const taas_param SEQUENTIAL_P[] = {
    {"layers", TAAS_P_LAYER, NULL, TAAS_PF_VARARGS, TAAS_NO_RANGE, "the layers, applied in order"},
    END,
};

/* PyTorch's _addindent: lines after the first move right by n spaces. */
static void add_indented(taas_buf *out, const char *s, int n) {
    for (const char *p = s; *p; p++) {
        taas_buf_putc(out, *p);
        if (*p == '\n') taas_buf_printf(out, "%*s", n, "");
    }
}

static void sequential_repr(const taas_value *v, taas_buf *out) {
    const taas_value *layers = v->u.obj.args[0];
    taas_buf_puts(out, "Sequential(");
    for (size_t i = 0; i < layers->u.seq.n; i++) {
        char *r = taas_value_repr(layers->u.seq.items[i]);
        taas_buf_printf(out, "\n  (%zu): ", i);
        add_indented(out, r, 2);
        free(r);
    }
    if (layers->u.seq.n) taas_buf_putc(out, '\n');
    taas_buf_putc(out, ')');
}

static int sequential_size(const taas_value *v, int64_t *n) {
    *n = (int64_t)v->u.obj.args[0]->u.seq.n;
    return 1;
}

static int sequential_nparams(const taas_value *v, int64_t *n) {
    const taas_value *layers = v->u.obj.args[0];
    *n = 0;
    for (size_t i = 0; i < layers->u.seq.n; i++) {
        const taas_row *r = taas_row_of(layers->u.seq.items[i]->u.obj.def);
        int64_t k = 0;
        if (r && r->nparams && !r->nparams(layers->u.seq.items[i], &k)) return 0;
        *n += k;
    }
    return 1;
}

#define LAYER(name_, params_, doc_) .b = {.name = name_, .module = "nn", .kind = TAAS_K_LAYER, .params = params_, .doc = doc_}

const taas_row taas_rows_layers[] = {
    {LAYER("Linear", LINEAR_P,
           "A fully connected layer: y = x W^T + b over the last dimension, with W of shape "
           "(out_features, in_features), initialised as PyTorch does."),
     .nparams = linear_nparams},
    {LAYER("LazyLinear", LAZY_LINEAR_P,
           "A Linear layer whose in_features is taken from the first batch it sees; handy after "
           "Flatten() when the flattened size is tedious to work out."),
     .repr = lazy_linear_repr, .nparams = lazy_nparams},
    {LAYER("Conv2d", CONV2D_P,
           "A 2-D convolution over an (N, C, H, W) input. kernel_size, stride, padding and "
           "dilation take an int or an (int, int) pair; groups splits the channels into "
           "blocked connections."),
     .check = conv_check, .nparams = conv_nparams},
    {LAYER("LazyConv2d", LAZY_CONV2D_P,
           "A Conv2d whose in_channels is taken from the first batch it sees."),
     .check = conv_check, .repr = lazy_conv_repr, .nparams = lazy_nparams},
    {LAYER("MaxPool2d", MAXPOOL_P,
           "2-D max pooling over an (N, C, H, W) input; stride defaults to the kernel size."),
     .check = pool_check},
    {LAYER("AvgPool2d", AVGPOOL_P,
           "2-D average pooling over an (N, C, H, W) input; stride defaults to the kernel size."),
     .check = pool_check},
    {LAYER("ReLU", RELU_P, "The rectified linear unit, max(0, x), element-wise.")},
    {LAYER("LeakyReLU", LEAKY_P, "max(0, x) + negative_slope * min(0, x), element-wise.")},
    {LAYER("Tanh", NO_P, "The hyperbolic tangent, element-wise.")},
    {LAYER("Sigmoid", NO_P, "The logistic sigmoid 1 / (1 + exp(-x)), element-wise.")},
    {LAYER("GELU", GELU_P, "The Gaussian error linear unit x * Phi(x), element-wise.")},
    {LAYER("Dropout", DROPOUT_P,
           "During training, zeroes each element with probability p and scales the rest by "
           "1 / (1 - p); does nothing in evaluation, nor with p = 0 (it then costs nothing).")},
    {LAYER("Dropout2d", DROPOUT_P,
           "During training, zeroes whole channels of an (N, C, H, W) input with probability p "
           "and scales the rest by 1 / (1 - p); does nothing in evaluation, nor with p = 0.")},
    {LAYER("BatchNorm1d", BATCHNORM_P,
           "Batch normalisation over an (N, C) or (N, C, L) input: each channel is normalised "
           "by the batch's mean and variance in training and by the running ones in evaluation."),
     .nparams = batchnorm_nparams},
    {LAYER("BatchNorm2d", BATCHNORM_P,
           "Batch normalisation over an (N, C, H, W) input, per channel, as BatchNorm1d."),
     .nparams = batchnorm_nparams},
    {LAYER("Flatten", FLATTEN_P,
           "Flattens dimensions start_dim..end_dim into one: (N, C, H, W) becomes (N, C*H*W).")},
    {LAYER("LogSoftmax", SOFTMAX_P,
           "log(softmax(x)) along dim, computed stably; pair it with NLLLoss.")},
    {LAYER("Softmax", SOFTMAX_P, "exp(x) / sum(exp(x)) along dim.")},
    {LAYER("Sequential", SEQUENTIAL_P,
           "A model made of layers applied one after the other. Its repr lists the layers by "
           "index as PyTorch does, its display is a table with each layer's parameter count, "
           "and its saved weights use PyTorch's state_dict names (0.weight, 0.bias, ...)."),
     .repr = sequential_repr, .size = sequential_size, .nparams = sequential_nparams},
};
const size_t taas_rows_layers_n = sizeof taas_rows_layers / sizeof *taas_rows_layers;
