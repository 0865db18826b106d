/* Rows of the nn layers. Reprs follow PyTorch's extra_repr exactly; the parameter
 * flags say which arguments show and how. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "errnames.h"
#include "modules.h"
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

/* ---- adaptive pooling, identity --------------------------------------------------- */

static const taas_param ADAPTIVE_P[] = {
    {"output_size", TAAS_P_INT_PAIR, NULL, TAAS_PF_SPEC_PAIR | TAAS_PX(TAAS_PX_OUTPUT_SIZE), TAAS_BETWEEN(1, TAAS_MAX_DIM),
     "the output's (H, W); an int is both"},
    END,
};

static int adaptive_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    const taas_value *v = a[0];
    if (v->type == TAAS_V_INT) return 0;
    for (size_t k = 0; k < v->u.seq.n; k++)
        if (v->u.seq.items[k]->type == TAAS_V_NONE) {
            taas_error_set(err, TAAS_ERR_VALUE, w[0], "%s() output_size with None (keep that side of the input) "
                           "is not supported", r->b.name);
            taas_sig_hint(err, &r->b, "give both sizes, e.g. AdaptiveAvgPool2d((1, 1))");
            return -1;
        }
    return 0;
}

/* torch's nn.Identity(*args, **kwargs) takes anything and keeps nothing */
static const taas_param IDENTITY_P[] = {
    {"args", TAAS_P_ANY, NULL, TAAS_PF_VARARGS | TAAS_PF_IGNORED | TAAS_PF_HIDE, TAAS_NO_RANGE, "ignored, as in PyTorch"},
    {"kwargs", TAAS_P_ANY, NULL, TAAS_PF_VARKW | TAAS_PF_IGNORED | TAAS_PF_HIDE, TAAS_NO_RANGE, "ignored, as in PyTorch"},
    END,
};

/* ---- Sequential ------------------------------------------------------------------ */

static const taas_param SEQUENTIAL_P[] = {
    {"layers", TAAS_P_LAYER, NULL, TAAS_PF_VARARGS, TAAS_NO_RANGE, "the layers, applied in order"},
    END,
};

static void sequential_children(const taas_value *v, taas_children *out) {
    const taas_value *layers = v->u.obj.args[0];
    for (size_t i = 0; i < layers->u.seq.n && !out->failed; i++) {
        char name[24];
        snprintf(name, sizeof name, "%zu", i);
        taas_children_add(out, name, taas_ref(layers->u.seq.items[i]), 0);
    }
}

static int sequential_size(const taas_value *v, int64_t *n) {
    *n = (int64_t)v->u.obj.args[0]->u.seq.n;
    return 1;
}

/* A module that holds modules: the sum of its children's. */
static int tree_nparams(const taas_value *v, int64_t *n) {
    int64_t trainable;
    return taas_module_count(v, n, &trainable);
}

/* ---- ResNet blocks, as torchvision.models.resnet writes them ------------------------ */

#define BLOCK_P(what)                                                                              \
    {"inplanes", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, TAAS_MAX_DIM), "channels of the block's input"}, \
    {"planes", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, TAAS_MAX_DIM), what},                \
    {"stride", TAAS_P_INT, "1", 0, TAAS_BETWEEN(1, TAAS_MAX_DIM), "stride of the 3x3 convolution (the downsample must match it)"}, \
    {"downsample", TAAS_P_LAYER, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE,                           \
     "the skip connection's module when the input does not fit the output: torchvision's "       \
     "Sequential(Conv2d(inplanes, out, 1, stride=stride, bias=False), BatchNorm2d(out))"},        \
    {"groups", TAAS_P_INT, "1", 0, TAAS_BETWEEN(1, TAAS_MAX_DIM), "groups of the 3x3 convolution (ResNeXt; BasicBlock: 1)"}, \
    {"base_width", TAAS_P_INT, "64", 0, TAAS_BETWEEN(1, TAAS_MAX_DIM), "width per group (Wide ResNet; BasicBlock: 64)"}, \
    {"dilation", TAAS_P_INT, "1", 0, TAAS_BETWEEN(1, TAAS_MAX_DIM), "dilation of the 3x3 convolution (BasicBlock: 1)"}, \
    {"norm_layer", TAAS_P_ANY, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "None or BatchNorm2d (the same: the only norm there is)"}, \
    END

static const taas_param BASICBLOCK_P[] = {BLOCK_P("channels of both 3x3 convolutions and of the output")};
static const taas_param BOTTLENECK_P[] = {BLOCK_P("channels of the 3x3 convolution; the output has planes * 4")};

enum { B_IN, B_PLANES, B_STRIDE, B_DOWN, B_GROUPS, B_WIDTH, B_DIL, B_NORM };

static int block_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    taas_value *norm = a[B_NORM];
    if (norm->type == TAAS_V_BUILTIN && !strcmp(norm->u.fn->name, "BatchNorm2d")) {
        taas_unref(a[B_NORM]);  /* torchvision's default: the spec says null for both */
        if (!(a[B_NORM] = taas_none())) return taas_value_oom(err, w[B_NORM], "making a block");
    } else if (norm->type != TAAS_V_NONE) {
        taas_error_set(err, TAAS_ERR_VALUE, w[B_NORM], "%s() norm_layer must be None or BatchNorm2d, not %s",
                       r->b.name, taas_value_type_name(norm));
        taas_sig_hint(err, &r->b, "BatchNorm2d is the one norm layer taas has; leave norm_layer out");
        return -1;
    }
    if (strcmp(r->b.name, "BasicBlock")) return 0;
    if (iarg(a, B_GROUPS) != 1 || iarg(a, B_WIDTH) != 64) {  /* torchvision's ValueError */
        taas_error_set(err, TAAS_ERR_VALUE, w[iarg(a, B_GROUPS) != 1 ? B_GROUPS : B_WIDTH],
                       "BasicBlock only supports groups=1 and base_width=64");
        taas_sig_hint(err, &r->b, "groups and base_width are Bottleneck's (resnet50); leave them out");
        return -1;
    }
    if (iarg(a, B_DIL) > 1) {  /* torchvision's NotImplementedError */
        taas_error_set(err, TAAS_ERR_VALUE, w[B_DIL], "Dilation > 1 not supported in BasicBlock");
        taas_sig_hint(err, &r->b, "dilation is Bottleneck's; leave it out");
        return -1;
    }
    return 0;
}

static taas_value *pair(int64_t a, int64_t b) {
    taas_value *t = taas_tuple_new(2);
    if (!t) return NULL;
    t->u.seq.items[0] = taas_int(a);
    t->u.seq.items[1] = taas_int(b);
    if (t->u.seq.items[0] && t->u.seq.items[1]) return t;
    taas_unref(t);
    return NULL;
}

/* torchvision's conv3x3 and conv1x1 */
static taas_value *conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups, int64_t dilation,
                        taas_error *err) {
    return taas_construct("Conv2d", (taas_karg[]){{NULL, taas_int(in)}, {NULL, taas_int(out)},
                                                  {"kernel_size", taas_int(k)}, {"stride", taas_int(stride)},
                                                  {"padding", taas_int(k == 3 ? dilation : 0)},
                                                  {"groups", taas_int(groups)}, {"bias", taas_bool(0)},
                                                  {"dilation", taas_int(k == 3 ? dilation : 1)}},
                          8, err);
}

static taas_value *bn(int64_t c, taas_error *err) {
    return taas_construct("BatchNorm2d", (taas_karg[]){{NULL, taas_int(c)}}, 1, err);
}

static taas_value *relu(taas_error *err) {
    return taas_construct("ReLU", (taas_karg[]){{"inplace", taas_bool(1)}}, 1, err);
}

static void add_derived(taas_children *out, const char *name, taas_value *v) {
    taas_children_add(out, name, v, 1);
}

/* The children torchvision's __init__ makes, in its order (a derived child cannot fail
 * its checks: the block's arguments passed them; only memory can fail). */
static void block_children(const taas_value *v, taas_children *out) {
    taas_error e;
    int64_t in = iarg(v->u.obj.args, B_IN), planes = iarg(v->u.obj.args, B_PLANES),
            stride = iarg(v->u.obj.args, B_STRIDE), groups = iarg(v->u.obj.args, B_GROUPS),
            dil = iarg(v->u.obj.args, B_DIL);
    if (taas_value_is(v, "BasicBlock")) {
        add_derived(out, "conv1", conv(in, planes, 3, stride, 1, 1, &e));
        add_derived(out, "bn1", bn(planes, &e));
        add_derived(out, "relu", relu(&e));
        add_derived(out, "conv2", conv(planes, planes, 3, 1, 1, 1, &e));
        add_derived(out, "bn2", bn(planes, &e));
    } else {
        int64_t width = (int64_t)((double)planes * ((double)iarg(v->u.obj.args, B_WIDTH) / 64.0)) * groups;
        add_derived(out, "conv1", conv(in, width, 1, 1, 1, 1, &e));
        add_derived(out, "bn1", bn(width, &e));
        add_derived(out, "conv2", conv(width, width, 3, stride, groups, dil, &e));
        add_derived(out, "bn2", bn(width, &e));
        add_derived(out, "conv3", conv(width, planes * 4, 1, 1, 1, 1, &e));
        add_derived(out, "bn3", bn(planes * 4, &e));
        add_derived(out, "relu", relu(&e));
    }
    if (v->u.obj.args[B_DOWN]->type == TAAS_V_OBJECT)
        taas_children_add(out, "downsample", taas_ref(v->u.obj.args[B_DOWN]), 0);
}

static int bottleneck_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (block_check(r, a, w, err)) return -1;
    if ((double)iarg(a, B_PLANES) * ((double)iarg(a, B_WIDTH) / 64.0) < 1) {
        taas_error_set(err, TAAS_ERR_VALUE, w[B_WIDTH], "Bottleneck() planes * base_width / 64 must be at least 1");
        taas_sig_hint(err, &r->b, NULL);
        return -1;
    }
    return 0;
}

/* ---- ResNet ------------------------------------------------------------------------ */

static const taas_param RESNET_P[] = {
    {"conv1", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the stem's convolution"},
    {"bn1", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the stem's batch norm"},
    {"relu", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the stem's activation"},
    {"maxpool", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the stem's pooling"},
    {"layer1", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the first stage: a Sequential of blocks"},
    {"layer2", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the second stage"},
    {"layer3", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the third stage"},
    {"layer4", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the fourth stage"},
    {"avgpool", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the pooling before the head"},
    {"fc", TAAS_P_LAYER, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the head, applied to the flattened features"},
    {"zero_init_residual", TAAS_P_BOOL, "False", TAAS_PF_KWONLY | TAAS_PF_HIDE, TAAS_NO_RANGE,
     "start each block's last BatchNorm weight at zero, so each block starts as the identity"},
    END,
};

static void resnet_children(const taas_value *v, taas_children *out) {
    const taas_builtin *b = v->u.obj.def;
    for (size_t i = 0; i < v->u.obj.nargs && !out->failed; i++)
        if (b->params[i].type == TAAS_P_LAYER) taas_children_add(out, b->params[i].name, taas_ref(v->u.obj.args[i]), 0);
}

/* resnet18(*, weights=None, progress=True, num_classes=1000, zero_init_residual=False, groups=1,
 * width_per_group=64): torchvision's keywords */
static const taas_param RESNET_FN_P[] = {
    {"weights", TAAS_P_ANY, "None", TAAS_PF_KWONLY | TAAS_PF_NONE_OK, TAAS_NO_RANGE,
     "must stay None: nothing is downloaded; load() a converted file instead"},
    {"progress", TAAS_P_BOOL, "True", TAAS_PF_KWONLY, TAAS_NO_RANGE, "torchvision's download progress bar; no effect"},
    {"num_classes", TAAS_P_INT, "1000", TAAS_PF_KWONLY, TAAS_BETWEEN(1, TAAS_MAX_DIM), "outputs of the head (fc)"},
    {"zero_init_residual", TAAS_P_BOOL, "False", TAAS_PF_KWONLY, TAAS_NO_RANGE,
     "start each block's last BatchNorm weight at zero"},
    {"groups", TAAS_P_INT, "1", TAAS_PF_KWONLY, TAAS_BETWEEN(1, TAAS_MAX_DIM), "groups of the blocks' 3x3 convolutions (Bottleneck only)"},
    {"width_per_group", TAAS_P_INT, "64", TAAS_PF_KWONLY, TAAS_BETWEEN(1, TAAS_MAX_DIM), "width per group (Bottleneck only)"},
    END,
};

/* torchvision's ResNet._make_layer: a Sequential of `blocks` blocks, the first with the
 * stride and, where the shape changes, a downsample. */
static taas_value *make_layer(const char *block, int64_t *inplanes, int64_t planes, int64_t blocks, int64_t stride,
                              int64_t groups, int64_t width, taas_error *err) {
    int64_t expansion = strcmp(block, "Bottleneck") ? 1 : 4;
    taas_value *down = NULL;
    if (stride != 1 || *inplanes != planes * expansion) {
        down = taas_construct("Sequential", (taas_karg[]){{NULL, conv(*inplanes, planes * expansion, 1, stride, 1, 1, err)},
                                                          {NULL, bn(planes * expansion, err)}}, 2, err);
        if (!down) return NULL;
    }
    taas_karg items[8];
    items[0] = (taas_karg){NULL, taas_construct(block, (taas_karg[]){{NULL, taas_int(*inplanes)}, {NULL, taas_int(planes)},
                                                                     {"stride", taas_int(stride)},
                                                                     {"downsample", down ? down : taas_none()},
                                                                     {"groups", taas_int(groups)},
                                                                     {"base_width", taas_int(width)}}, 6, err)};
    *inplanes = planes * expansion;
    for (int64_t k = 1; k < blocks; k++)
        items[k] = (taas_karg){NULL, taas_construct(block, (taas_karg[]){{NULL, taas_int(*inplanes)}, {NULL, taas_int(planes)},
                                                                         {"groups", taas_int(groups)},
                                                                         {"base_width", taas_int(width)}}, 4, err)};
    return taas_construct("Sequential", items, (size_t)blocks, err);
}

/* torchvision.models.resnet's ResNet.__init__ for the row's depth. */
static int resnet_build(taas_call_ctx *cx, taas_value **a, taas_value **out, const char *block, const int64_t layers[4]) {
    taas_error *err = cx->err;
    if (a[0]->type != TAAS_V_NONE) {
        taas_error_set(err, TAAS_ERR_VALUE, cx->pos, "pretrained weights are not downloaded: weights= must be None");
        taas_error_hint(err, "build the model, then load torchvision's weights converted to safetensors: "
                             "python3 scripts/pth_to_safetensors.py resnet18.pth resnet18.safetensors, then "
                             "load('resnet18.safetensors', into=net)");
        return -1;
    }
    int64_t classes = a[2]->u.i, groups = a[4]->u.i, width = a[5]->u.i, inplanes = 64;
    int64_t expansion = strcmp(block, "Bottleneck") ? 1 : 4;
    taas_value *l[4] = {NULL};
    for (int i = 0; i < 4; i++)
        if (!(l[i] = make_layer(block, &inplanes, 64 << i, layers[i], i ? 2 : 1, groups, width, err))) {
            for (int k = 0; k < i; k++) taas_unref(l[k]);
            err->pos = cx->pos;
            return -1;
        }
    *out = taas_construct(
        "ResNet",
        (taas_karg[]){{NULL, taas_construct("Conv2d", (taas_karg[]){{NULL, taas_int(3)}, {NULL, taas_int(64)},
                                                                    {"kernel_size", taas_int(7)}, {"stride", taas_int(2)},
                                                                    {"padding", taas_int(3)}, {"bias", taas_bool(0)}},
                                            6, err)},
                      {NULL, bn(64, err)},
                      {NULL, relu(err)},
                      {NULL, taas_construct("MaxPool2d", (taas_karg[]){{"kernel_size", taas_int(3)}, {"stride", taas_int(2)},
                                                                       {"padding", taas_int(1)}}, 3, err)},
                      {NULL, l[0]}, {NULL, l[1]}, {NULL, l[2]}, {NULL, l[3]},
                      {NULL, taas_construct("AdaptiveAvgPool2d",
                                            (taas_karg[]){{NULL, pair(1, 1)}}, 1, err)},
                      {NULL, taas_construct("Linear", (taas_karg[]){{NULL, taas_int(512 * expansion)},
                                                                    {NULL, taas_int(classes)}}, 2, err)},
                      {"zero_init_residual", taas_bool(a[3]->u.b)}},
        11, err);
    if (!*out) err->pos = cx->pos;
    return *out ? 0 : -1;
}

static int resnet18_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    return resnet_build(cx, a, out, "BasicBlock", (const int64_t[]){2, 2, 2, 2});
}
static int resnet34_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    return resnet_build(cx, a, out, "BasicBlock", (const int64_t[]){3, 4, 6, 3});
}
static int resnet50_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    return resnet_build(cx, a, out, "Bottleneck", (const int64_t[]){3, 4, 6, 3});
}

/* ---- sequences: Embedding, LayerNorm --------------------------------------------- */

static const taas_param EMBEDDING_P[] = {
    {"num_embeddings", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, 1 << 24), "size of the vocabulary (token ids 0 .. num_embeddings - 1)"},
    {"embedding_dim", TAAS_P_INT, NULL, TAAS_PF_POS, TAAS_BETWEEN(1, TAAS_MAX_DIM), "size of each embedding vector"},
    {"padding_idx", TAAS_P_INT, "None", TAAS_PF_NONE_OK | TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "not supported: must stay None"},
    {"max_norm", TAAS_P_FLOAT, "None", TAAS_PF_NONE_OK | TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "not supported: must stay None"},
    {"norm_type", TAAS_P_FLOAT, "2.0", TAAS_PF_HIDE, TAAS_NO_RANGE, "the norm of max_norm"},
    {"scale_grad_by_freq", TAAS_P_BOOL, "False", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "not supported: must stay False"},
    {"sparse", TAAS_P_BOOL, "False", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "not supported: must stay False"},
    END,
};

static int embedding_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    static const char *const what[] = {NULL, NULL, "padding_idx", "max_norm", NULL, "scale_grad_by_freq", "sparse"};
    for (int i = 2; i < 7; i++) {
        if (!what[i] || a[i]->type == TAAS_V_NONE || (a[i]->type == TAAS_V_BOOL && !a[i]->u.b)) continue;
        taas_error_set(err, TAAS_ERR_VALUE, w[i], "%s() %s is not supported by the trainer", r->b.name, what[i]);
        taas_sig_hint(err, &r->b, "leave it out");
        return -1;
    }
    return 0;
}

static int embedding_nparams(const taas_value *v, int64_t *n) {
    *n = taas_object_arg(v, "num_embeddings")->u.i * taas_object_arg(v, "embedding_dim")->u.i;
    return 1;
}

static const taas_param LAYERNORM_P[] = {
    {"normalized_shape", TAAS_P_ANY, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "the size of the last axis (an int, or a list of one)"},
    {"eps", TAAS_P_FLOAT, "1e-05", 0, TAAS_AT_LEAST(0), "added to the variance for numerical stability"},
    {"elementwise_affine", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "learn a scale and a shift per element (must stay True)"},
    {"bias", TAAS_P_BOOL, "True", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "learn the shift (must stay True)"},
    END,
};

/* normalized_shape's one size, or 0 */
static int64_t norm_size(const taas_value *v) {
    if (v->type == TAAS_V_INT) return v->u.i;
    if ((v->type == TAAS_V_LIST || v->type == TAAS_V_TUPLE) && v->u.seq.n == 1 && v->u.seq.items[0]->type == TAAS_V_INT)
        return v->u.seq.items[0]->u.i;
    return 0;
}

static int layernorm_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    int64_t c = norm_size(a[0]);
    if (c < 1 || c > TAAS_MAX_DIM) {
        taas_error_set(err, TAAS_ERR_VALUE, w[0], "%s() normalized_shape must be one size in 1..%d: the trainer "
                       "normalizes the last axis", r->b.name, TAAS_MAX_DIM);
        taas_sig_hint(err, &r->b, "write LayerNorm(768)");
        return -1;
    }
    if (!a[2]->u.b || !a[3]->u.b) {
        taas_error_set(err, TAAS_ERR_VALUE, w[a[2]->u.b ? 3 : 2], "%s() elementwise_affine=False and bias=False are "
                       "not supported by the trainer", r->b.name);
        taas_sig_hint(err, &r->b, "leave them out");
        return -1;
    }
    taas_value *t = taas_tuple_new(1);  /* as torch keeps it: (C,) */
    if (!t || !(t->u.seq.items[0] = taas_int(c))) {
        taas_unref(t);
        return taas_value_oom(err, w[0], "making a LayerNorm");
    }
    taas_unref(a[0]);
    a[0] = t;
    return 0;
}

static int layernorm_nparams(const taas_value *v, int64_t *n) {
    *n = 2 * norm_size(taas_object_arg(v, "normalized_shape"));
    return 1;
}

/* ---- GPT-2, as Hugging Face's transformers builds it ------------------------------- */

/* GPT2Config's keywords with its defaults; each shows in repr only when set. */
static const taas_param GPT2_CONFIG_P[] = {
    {"vocab_size", TAAS_P_INT, "50257", TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, 1 << 24), "tokens in the vocabulary"},
    {"n_positions", TAAS_P_INT, "1024", TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, TAAS_MAX_DIM), "the longest sequence: a block_size of at most this"},
    {"n_embd", TAAS_P_INT, "768", TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, TAAS_MAX_DIM / 4), "width of the embeddings and the residual stream"},
    {"n_layer", TAAS_P_INT, "12", TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, 1000), "transformer blocks"},
    {"n_head", TAAS_P_INT, "12", TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, TAAS_MAX_DIM), "attention heads (n_embd must be a multiple)"},
    {"n_inner", TAAS_P_INT, "None", TAAS_PF_NONE_OK | TAAS_PF_SHOW_SET, TAAS_BETWEEN(1, TAAS_MAX_DIM / 3), "width of the MLP; None: 4 * n_embd"},
    {"activation_function", TAAS_P_STR, "'gelu_new'", TAAS_PF_SHOW_SET | TAAS_PX(TAAS_PX_GPT2_ACT), TAAS_NO_RANGE,
     "the MLP's GELU: 'gelu_new' and 'gelu_pytorch_tanh' are GPT-2's tanh form, 'gelu' the exact one"},
    {"resid_pdrop", TAAS_P_FLOAT, "0.1", TAAS_PF_SHOW_SET, TAAS_BETWEEN(0, 1), "dropout after the attention's and the MLP's projections"},
    {"embd_pdrop", TAAS_P_FLOAT, "0.1", TAAS_PF_SHOW_SET, TAAS_BETWEEN(0, 1), "dropout on the embeddings"},
    {"attn_pdrop", TAAS_P_FLOAT, "0.1", TAAS_PF_SHOW_SET, TAAS_BETWEEN(0, 1), "dropout on the attention's probabilities"},
    {"layer_norm_epsilon", TAAS_P_FLOAT, "1e-05", TAAS_PF_SHOW_SET, TAAS_AT_LEAST(0), "the LayerNorms' eps"},
    {"initializer_range", TAAS_P_FLOAT, "0.02", TAAS_PF_SHOW_SET, TAAS_AT_LEAST(0), "std of the weights' normal initialisation"},
    {"scale_attn_weights", TAAS_P_BOOL, "True", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "scale the scores by 1/sqrt(head width) (must stay True)"},
    {"use_cache", TAAS_P_BOOL, "True", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "generation's key/value cache; no effect on training"},
    {"bos_token_id", TAAS_P_INT, "50256", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "the beginning-of-text token"},
    {"eos_token_id", TAAS_P_INT, "50256", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "the end-of-text token"},
    {"scale_attn_by_inverse_layer_idx", TAAS_P_BOOL, "False", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "must stay False"},
    {"reorder_and_upcast_attn", TAAS_P_BOOL, "False", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "fp16's upcast; the same in float32"},
    {"tie_word_embeddings", TAAS_P_BOOL, "True", TAAS_PF_SHOW_SET, TAAS_NO_RANGE, "lm_head.weight is transformer.wte.weight (must stay True)"},
    END,
};

enum { G_VOCAB, G_POS, G_EMBD, G_LAYER, G_HEAD, G_INNER };

static int gpt2_config_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    if (a[G_EMBD]->u.i % a[G_HEAD]->u.i) {
        taas_error_set(err, TAAS_ERR_VALUE, w[G_HEAD], "%s() n_embd (%lld) must be a multiple of n_head (%lld)",
                       r->b.name, (long long)a[G_EMBD]->u.i, (long long)a[G_HEAD]->u.i);
        taas_sig_hint(err, &r->b, NULL);
        return -1;
    }
    return 0;
}

static const taas_param GPT2_P[] = {
    {"config", TAAS_P_CONFIG, NULL, TAAS_PF_POS, TAAS_NO_RANGE, "a GPT2Config: the sizes and settings"},
    END,
};

/* transformer.wte and wpe, n_layer blocks, ln_f; lm_head is wte's (not counted twice) */
static int gpt2_nparams(const taas_value *v, int64_t *n) {
    const taas_value *c = taas_object_arg(v, "config");
    int64_t vocab = iarg(c->u.obj.args, G_VOCAB), pos = iarg(c->u.obj.args, G_POS), e = iarg(c->u.obj.args, G_EMBD);
    int64_t layers = iarg(c->u.obj.args, G_LAYER), inner = c->u.obj.args[G_INNER]->type == TAAS_V_INT
                                                               ? c->u.obj.args[G_INNER]->u.i : 4 * e;
    int64_t block = 4 * e + (3 * e * e + 3 * e) + (e * e + e) + (e * inner + inner) + (inner * e + e);
    *n = vocab * e + pos * e + layers * block + 2 * e;
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
     .repr = taas_module_repr, .size = sequential_size, .nparams = tree_nparams, .children = sequential_children},
    {LAYER("AdaptiveAvgPool2d", ADAPTIVE_P,
           "2-D average pooling to a given output size, whatever the input's: each output cell "
           "averages its share of the input. AdaptiveAvgPool2d(1) (or (1, 1)) averages each channel "
           "to one value, as before a ResNet's head."),
     .check = adaptive_check},
    {LAYER("Identity", IDENTITY_P, "Passes its input on unchanged; it takes any arguments and ignores them, as PyTorch's "
                                   "does. Put it where a layer is removed: net.fc = Identity().")},
    {.b = {.name = "BasicBlock", .module = "models.resnet", .kind = TAAS_K_LAYER, .params = BASICBLOCK_P,
           .doc = "torchvision's ResNet block of two 3x3 convolutions with a skip connection: relu(bn2(conv2("
                  "relu(bn1(conv1(x))))) + downsample(x)), downsample(x) being x when None. Its children (conv1, "
                  "bn1, relu, conv2, bn2, downsample) are made from its arguments, as torchvision's __init__ "
                  "makes them, and are read-only."},
     .check = block_check, .repr = taas_module_repr, .nparams = tree_nparams, .children = block_children},
    {.b = {.name = "Bottleneck", .module = "models.resnet", .kind = TAAS_K_LAYER, .params = BOTTLENECK_P,
           .doc = "torchvision's ResNet block of a 1x1, a 3x3 and a 1x1 convolution with a skip connection; the "
                  "output has planes * 4 channels. Its children (conv1, bn1, conv2, bn2, conv3, bn3, relu, "
                  "downsample) are made from its arguments and are read-only."},
     .check = bottleneck_check, .repr = taas_module_repr, .nparams = tree_nparams, .children = block_children},
    {.b = {.name = "ResNet", .module = "models.resnet", .kind = TAAS_K_LAYER, .params = RESNET_P,
           .doc = "A ResNet as torchvision's: its arguments are its children, in torchvision's order, and its "
                  "forward applies them in turn, flattening before fc. resnet18(), resnet34() and resnet50() "
                  "build one; read and replace its parts by name (net.fc = Linear(512, 10)). torchvision's "
                  "ResNet(block, layers) signature is not taken: build from the functions or from parts."},
     .repr = taas_module_repr, .nparams = tree_nparams, .children = resnet_children},
    {LAYER("Embedding", EMBEDDING_P,
           "A lookup table: token id i gives row i of a (num_embeddings, embedding_dim) weight, so (N, T) ids "
           "become (N, T, embedding_dim). Initialised normal(0, 1), as PyTorch. A token outside the table is "
           "the job's error, naming its place in the batch."),
     .check = embedding_check, .nparams = embedding_nparams},
    {LAYER("LayerNorm", LAYERNORM_P,
           "Layer normalisation over the last axis: each position's features are normalised by their own mean "
           "and variance, then scaled and shifted per feature; the same in training and evaluation."),
     .check = layernorm_check, .nparams = layernorm_nparams},
    {.b = {.name = "GPT2Config", .module = "transformers", .kind = TAAS_K_CONFIG, .params = GPT2_CONFIG_P,
           .doc = "GPT-2's configuration under Hugging Face's names and defaults (GPT-2 small: 12 layers, 12 heads, "
                  "768 wide, 50257 tokens, 1024 positions). A key Hugging Face has and taas does not is refused "
                  "by name."},
     .check = gpt2_config_check},
    {.b = {.name = "GPT2LMHeadModel", .module = "transformers", .kind = TAAS_K_LAYER, .params = GPT2_P,
           .doc = "GPT-2 with its language-model head, as Hugging Face's transformers builds it from a GPT2Config: "
                  "token ids (N, T) in, logits (N, T, vocab_size) out. Its state_dict keys are Hugging Face's "
                  "(transformer.wte.weight, transformer.h.0.attn.c_attn.weight in Conv1D's (in, out) layout, "
                  "lm_head.weight tied to wte), so a model.safetensors of GPT-2 loads as it is; initialised as "
                  "GPT-2 (normal(0, 0.02), the projections into the residual stream scaled by 1/sqrt(2 n_layer)). "
                  "The attention is causal and fused; a block_size above n_positions is refused."},
     .nparams = gpt2_nparams, .modules = 1},
    {.b = {.name = "resnet18", .module = "models", .kind = TAAS_K_LAYER, .params = RESNET_FN_P,
           .doc = "torchvision's ResNet-18 (BasicBlock, [2, 2, 2, 2]), with its random initialisation; its "
                  "state_dict keys are torchvision's (conv1.weight, layer1.0.bn1.running_mean, fc.bias).",
           .action = resnet18_action}},
    {.b = {.name = "resnet34", .module = "models", .kind = TAAS_K_LAYER, .params = RESNET_FN_P,
           .doc = "torchvision's ResNet-34 (BasicBlock, [3, 4, 6, 3]).", .action = resnet34_action}},
    {.b = {.name = "resnet50", .module = "models", .kind = TAAS_K_LAYER, .params = RESNET_FN_P,
           .doc = "torchvision's ResNet-50 (Bottleneck, [3, 4, 6, 3]); groups and width_per_group make "
                  "ResNeXt and Wide ResNet variants.", .action = resnet50_action}},
};
const size_t taas_rows_layers_n = sizeof taas_rows_layers / sizeof *taas_rows_layers;
