/* Planning a model: spec parsing, shape inference layer by layer, the parameter layout and
 * the state_dict table. Nothing here computes or allocates numbers (model_plan.h). */
#include "model_plan.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bounds.h"
#include "errnames.h"
#include "layers.h"
#include "safetensors.h"

static const struct { const char *name; taas_layer_kind kind; } kinds[] = {
    {"Linear", TAAS_L_LINEAR}, {"LazyLinear", TAAS_L_LINEAR}, {"Conv2d", TAAS_L_CONV2D},
    {"LazyConv2d", TAAS_L_CONV2D}, {"MaxPool2d", TAAS_L_MAXPOOL2D},
    {"AvgPool2d", TAAS_L_AVGPOOL2D}, {"ReLU", TAAS_L_RELU}, {"LeakyReLU", TAAS_L_LEAKY_RELU},
    {"Tanh", TAAS_L_TANH}, {"Sigmoid", TAAS_L_SIGMOID}, {"GELU", TAAS_L_GELU},
    {"Dropout", TAAS_L_DROPOUT}, {"Dropout2d", TAAS_L_DROPOUT2D},
    {"BatchNorm1d", TAAS_L_BATCHNORM1D}, {"BatchNorm2d", TAAS_L_BATCHNORM2D},
    {"Flatten", TAAS_L_FLATTEN}, {"LogSoftmax", TAAS_L_LOG_SOFTMAX}, {"Softmax", TAAS_L_SOFTMAX},
    {"AdaptiveAvgPool2d", TAAS_L_ADAPTIVE_AVGPOOL2D}, {"Identity", TAAS_L_IDENTITY},
    {"Conv1D", TAAS_L_CONV1D}, {"Embedding", TAAS_L_EMBEDDING}, {"LayerNorm", TAAS_L_LAYERNORM},
};

static void shape_str(char *buf, size_t len, const taas_act_shape *s) {
    if (s->rank == 1) snprintf(buf, len, "(N, %d)", s->d[0]);
    else if (s->rank == 2) snprintf(buf, len, "(N, %d, %d)", s->d[0], s->d[1]);
    else snprintf(buf, len, "(N, %d, %d, %d)", s->d[0], s->d[1], s->d[2]);
}

static size_t shape_numel(const taas_act_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n = taas_size_mul(n, (size_t)s->d[i]);
    return n;
}

/* Where an op is, for messages: "layer 3" in a Sequential, "layer3.1.conv2" in a tree. */
typedef struct where_t { char s[80]; } where_t;
static where_t where_of(const taas_model_layer *L) {
    where_t w;
    if (L->path[0] >= '0' && L->path[0] <= '9') snprintf(w.s, sizeof w.s, "layer %s", L->path);
    else snprintf(w.s, sizeof w.s, "%s", L->path[0] ? L->path : "the model");
    return w;
}

/* "from the input" or "from layer 6 (Flatten)": where tensor t comes from. */
static void source_str(char *buf, size_t len, const taas_model_plan *m, int t) {
    if (t == 0) snprintf(buf, len, "from the input");
    else snprintf(buf, len, "from %s (%s)", where_of(&m->layers[t - 1]).s, m->layers[t - 1].name);
}

static int spec_err(taas_error *e, const taas_model_layer *L, const char *detail, const char *hint) {
    /* "Conv2d(kernel_size=...)" reads as one; "Conv2d has ..." needs the space. */
    taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s%s%s", where_of(L).s, L->name, detail[0] == '(' ? "" : " ",
                   detail);
    if (hint) taas_error_hint(e, "%s", hint);
    return -1;
}

/* A layer function's error (taas_conv2d_check's, ...) prefixed with where the op is: -1. */
static int where_prefix(taas_error *e, const taas_model_layer *L) {
    taas_error_prefix(e, "%s: ", where_of(L).s);
    return -1;
}

/* A JSON integer that an int holds: 0 with *out, or -1. */
static int as_int(const json_t *v, int *out) {
    if (!json_is_integer(v) || json_integer_value(v) < INT_MIN || json_integer_value(v) > INT_MAX) return -1;
    *out = (int)json_integer_value(v);
    return 0;
}

/* An int, or an [a, b] pair; a missing or null key gives def; -1 for anything else, a number
 * no int holds included. */
static int get_pair(const json_t *o, const char *key, int out[2], const int def[2]) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { out[0] = def[0]; out[1] = def[1]; return 0; }
    if (json_is_integer(v)) return as_int(v, &out[0]) ? -1 : (out[1] = out[0], 0);
    if (json_is_array(v) && json_array_size(v) == 2)
        return as_int(json_array_get(v, 0), &out[0]) || as_int(json_array_get(v, 1), &out[1]) ? -1 : 0;
    return -1;
}

/* key's int, def when it is missing or not an integer, INT_MIN (which every caller refuses)
 * when no int holds it. */
static int get_int(const json_t *o, const char *key, int def) {
    const json_t *v = json_object_get(o, key);
    int n;
    if (!json_is_integer(v)) return def;
    return as_int(v, &n) ? INT_MIN : n;
}

static double get_num(const json_t *o, const char *key, double def) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

static int get_bool(const json_t *o, const char *key, int def) {
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

/* Options PyTorch has that the C layers do not implement: refuse rather than compute
 * something else. */
static int check_unsupported(const json_t *o, taas_model_layer *L, taas_error *e) {
    char d[256];
    int one[2] = {1, 1}, dil[2];
    const json_t *pm = json_object_get(o, "padding_mode");
    if (L->kind == TAAS_L_CONV2D || L->kind == TAAS_L_MAXPOOL2D) {
        if (get_pair(o, "dilation", dil, one) || dil[0] != 1 || dil[1] != 1) {
            snprintf(d, sizeof d, "has dilation != 1, which the trainer does not support");
            return spec_err(e, L, d, "use dilation=1");
        }
    }
    if (L->kind == TAAS_L_CONV2D) {
        L->groups = get_int(o, "groups", 1);
        if (L->groups < 1)
            return spec_err(e, L, "has groups < 1 in its spec", "give groups >= 1");
        if (pm && !(json_is_string(pm) && strcmp(json_string_value(pm), "zeros") == 0))
            return spec_err(e, L, "has a padding_mode other than 'zeros', which the trainer does not support",
                            "use padding_mode='zeros'");
    }
    if ((L->kind == TAAS_L_MAXPOOL2D || L->kind == TAAS_L_AVGPOOL2D) && get_bool(o, "ceil_mode", 0))
        return spec_err(e, L, "has ceil_mode=True, which the trainer does not support",
                        "use ceil_mode=False (pad the input instead)");
    if (L->kind == TAAS_L_AVGPOOL2D &&
        (!get_bool(o, "count_include_pad", 1) ||
         (json_object_get(o, "divisor_override") && !json_is_null(json_object_get(o, "divisor_override")))))
        return spec_err(e, L, "has count_include_pad=False or a divisor_override, which the trainer does not support",
                        "use the defaults count_include_pad=True, divisor_override=None");
    if (L->kind == TAAS_L_GELU) {
        const json_t *a = json_object_get(o, "approximate");
        L->gelu_tanh = json_is_string(a) && strcmp(json_string_value(a), "tanh") == 0;
        if (json_is_string(a) && !L->gelu_tanh && strcmp(json_string_value(a), "none") != 0)
            return spec_err(e, L, "has an approximate other than 'none' or 'tanh'", "use GELU() or GELU(approximate='tanh')");
    }
    if (L->kind == TAAS_L_EMBEDDING) {
        static const char *const none[] = {"padding_idx", "max_norm", "_weight", "_freeze"};
        for (size_t k = 0; k < sizeof none / sizeof none[0]; k++) {
            const json_t *v = json_object_get(o, none[k]);
            if (v && !json_is_null(v) && !json_is_false(v)) {
                snprintf(d, sizeof d, "has %s, which the trainer does not support", none[k]);
                return spec_err(e, L, d, "leave padding_idx and max_norm None");
            }
        }
        if (get_bool(o, "scale_grad_by_freq", 0) || get_bool(o, "sparse", 0))
            return spec_err(e, L, "has scale_grad_by_freq=True or sparse=True, which the trainer does not support",
                            "use the defaults scale_grad_by_freq=False, sparse=False");
    }
    if (L->kind == TAAS_L_LAYERNORM && (!get_bool(o, "elementwise_affine", 1) || !get_bool(o, "bias", 1)))
        return spec_err(e, L, "has elementwise_affine=False or bias=False, which the trainer does not support",
                        "use the defaults elementwise_affine=True, bias=True");
    if (L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D) {
        const json_t *mo = json_object_get(o, "momentum");
        if (!get_bool(o, "affine", 1) || !get_bool(o, "track_running_stats", 1) || json_is_null(mo))
            return spec_err(e, L, "has affine=False, track_running_stats=False or momentum=None, which the trainer does not support",
                            "use the defaults affine=True, track_running_stats=True and a float momentum");
    }
    if (L->kind == TAAS_L_FLATTEN && (get_int(o, "start_dim", 1) != 1 || get_int(o, "end_dim", -1) != -1))
        return spec_err(e, L, "flattens other dimensions than 1..-1, which the trainer does not support",
                        "use Flatten() with start_dim=1, end_dim=-1");
    return 0;
}

/* LayerNorm's normalized_shape: one size, the last axis (an int or a list of one). */
static int norm_width(const json_t *o) {
    const json_t *v = json_object_get(o, "normalized_shape");
    int n;
    if (json_is_array(v) && json_array_size(v) == 1) v = json_array_get(v, 0);
    return json_is_integer(v) && !as_int(v, &n) ? n : -1;
}

/* The sizes Conv1D, Embedding and LayerNorm take from their spec alone (their parameters). */
static int spec_params(taas_model_layer *L, const json_t *o, taas_error *e) {
    L->has_w = 1;
    if (L->kind == TAAS_L_CONV1D) {  /* Conv1D(nf, nx): nx inputs, nf outputs */
        L->lin_out = get_int(o, "nf", -1);
        L->lin_in = get_int(o, "nx", -1);
        L->has_b = 1;
        L->init_std = 0.02f;
        if (L->lin_out < 1 || L->lin_in < 1)
            return spec_err(e, L, "has no valid nf/nx in its spec", "give positive nf (outputs) and nx (inputs)");
    } else if (L->kind == TAAS_L_EMBEDDING) {
        L->lin_in = get_int(o, "num_embeddings", -1);
        L->lin_out = get_int(o, "embedding_dim", -1);
        if (!L->init_std) L->init_std = 1.0f;  /* torch's normal_(0, 1) */
        if (L->lin_in < 1 || L->lin_out < 1 || L->lin_in > (1 << 24))
            return spec_err(e, L, "has no valid num_embeddings/embedding_dim in its spec",
                            "give num_embeddings in 1..16777216 and a positive embedding_dim");
    } else {
        L->lin_in = L->lin_out = norm_width(o);
        L->eps = (float)get_num(o, "eps", 1e-5);
        L->has_b = 1;
        if (L->lin_in < 1)
            return spec_err(e, L, "has a normalized_shape other than one positive size, which the trainer does not support",
                            "normalize the last axis: LayerNorm(C)");
    }
    return 0;
}

/* A layer whose input shape is unknown (rank 0): its tensors' shapes from its spec alone, a
 * Lazy layer's inferred size 0. Its output is known only when the spec fixes it (Linear),
 * so the layers after that are checked again. */
static int plan_spec_only(taas_model_layer *L, const json_t *o, int lazy, taas_error *e) {
    int k[2], zero[2] = {0, 0};
    switch (L->kind) {
    case TAAS_L_LINEAR:
        L->lin_in = lazy ? 0 : get_int(o, "in_features", -1);
        L->lin_out = get_int(o, "out_features", -1);
        if (L->lin_out < 1 || L->lin_in < 0)
            return spec_err(e, L, "has no valid in_features/out_features in its spec",
                            "give positive in_features and out_features");
        L->has_w = 1;
        L->has_b = get_bool(o, "bias", 1);
        L->out = (taas_act_shape){1, {L->lin_out, 0, 0}};
        return 0;
    case TAAS_L_CONV2D:
        L->oc = get_int(o, "out_channels", -1);
        L->in.d[0] = lazy ? 0 : get_int(o, "in_channels", -1);
        if (get_pair(o, "kernel_size", k, zero) || k[0] < 1 || k[1] < 1 || L->oc < 1 || L->in.d[0] < 0)
            return spec_err(e, L, "has no valid channels or kernel_size in its spec",
                            "give positive in_channels, out_channels and kernel_size");
        L->kh = k[0];
        L->kw = k[1];
        L->has_w = 1;
        L->has_b = get_bool(o, "bias", 1);
        return 0;
    case TAAS_L_CONV1D:
    case TAAS_L_EMBEDDING:
    case TAAS_L_LAYERNORM:
        return spec_params(L, o, e);
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D:
        L->in.d[0] = get_int(o, "num_features", -1);
        if (L->in.d[0] < 1)
            return spec_err(e, L, "has no valid num_features in its spec", "give num_features >= 1");
        L->eps = (float)get_num(o, "eps", 1e-5);
        L->momentum = (float)get_num(o, "momentum", 0.1);
        L->has_w = L->has_b = 1;
        return 0;
    default:
        return 0;
    }
}

/* Fills L from the spec and its input shape; errors name the layer and both shapes. */
static int infer_layer(taas_model_plan *m, int i, const json_t *o, taas_act_shape in, taas_error *e) {
    taas_model_layer *L = &m->layers[i];
    char d[640], is[64], src[160];
    L->in = in;
    L->out = in;
    L->b_off = SIZE_MAX;
    if (check_unsupported(o, L, e)) return -1;
    int lazy = strncmp(L->name, "Lazy", 4) == 0;
    if (in.rank == 0) return plan_spec_only(L, o, lazy, e);
    shape_str(is, sizeof is, &in);
    source_str(src, sizeof src, m, L->src[0]);
    switch (L->kind) {
    case TAAS_L_LINEAR: {
        /* on the last axis, as torch: (N, F) and (N, T, C); an image must be flattened unless
         * in_features says its rows are meant */
        int feat = in.d[in.rank - 1];
        if (in.rank == 3 && (lazy || get_int(o, "in_features", -1) != feat)) {
            snprintf(d, sizeof d, "needs an (N, features) input but gets %s %s", is, src);
            return spec_err(e, L, d, "put Flatten() before it");
        }
        L->lin_in = lazy ? feat : get_int(o, "in_features", -1);
        L->lin_out = get_int(o, "out_features", -1);
        if (L->lin_out < 1 || L->lin_in < 1) {
            snprintf(d, sizeof d, "has no valid in_features/out_features in its spec");
            return spec_err(e, L, d, "give positive in_features and out_features");
        }
        if (L->lin_in != feat) {
            char h[160];
            snprintf(d, sizeof d, "gets %d features %s", feat, src);
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: Linear(in_features=%d) %s", where_of(L).s,
                           L->lin_in, d);
            snprintf(h, sizeof h, "write Linear(%d, %d), or LazyLinear(%d) to infer it", feat,
                     L->lin_out, L->lin_out);
            taas_error_hint(e, "%s", h);
            return -1;
        }
        L->has_w = 1;
        L->has_b = get_bool(o, "bias", 1);
        L->out.d[in.rank - 1] = L->lin_out;
        return 0;
    }
    case TAAS_L_CONV1D:
    case TAAS_L_LAYERNORM: {
        if (spec_params(L, o, e)) return -1;
        if (in.rank == 3 || in.d[in.rank - 1] != L->lin_in) {
            snprintf(d, sizeof d, "(%s=%d) gets %s %s", L->kind == TAAS_L_CONV1D ? "nx" : "normalized_shape", L->lin_in,
                     is, src);
            return spec_err(e, L, d, L->kind == TAAS_L_CONV1D ? "give nx the size of the input's last axis"
                                                               : "give normalized_shape the size of the input's last axis");
        }
        L->out.d[in.rank - 1] = L->lin_out;
        return 0;
    }
    case TAAS_L_EMBEDDING:
        if (spec_params(L, o, e)) return -1;
        if (in.rank != 1) {
            snprintf(d, sizeof d, "needs (N, T) token ids but gets %s %s", is, src);
            return spec_err(e, L, d, "put the Embedding first, on the token ids");
        }
        L->out = (taas_act_shape){2, {in.d[0], L->lin_out, 0}};
        return 0;
    case TAAS_L_CONV2D:
    case TAAS_L_MAXPOOL2D:
    case TAAS_L_AVGPOOL2D: {
        int k[2], st[2], pad[2], zero[2] = {0, 0}, one[2] = {1, 1};
        if (in.rank != 3) {
            snprintf(d, sizeof d, "needs an (N, C, H, W) input but gets %s %s", is, src);
            return spec_err(e, L, d, "move it before Flatten(), or feed images");
        }
        if (get_pair(o, "kernel_size", k, zero) || k[0] < 1 || k[1] < 1)
            return spec_err(e, L, "has no valid kernel_size in its spec", "give kernel_size >= 1");
        if (get_pair(o, "stride", st, L->kind == TAAS_L_CONV2D ? one : k) || st[0] < 1 || st[1] < 1)
            return spec_err(e, L, "has an invalid stride in its spec", "give stride >= 1");
        const json_t *pv = json_object_get(o, "padding");
        if (json_is_string(pv)) {
            const char *ps = json_string_value(pv);
            if (strcmp(ps, "valid") == 0) pad[0] = pad[1] = 0;
            else if (strcmp(ps, "same") == 0 && k[0] % 2 == 1 && k[1] % 2 == 1 && st[0] == 1 && st[1] == 1) {
                pad[0] = k[0] / 2;
                pad[1] = k[1] / 2;
            } else {
                return spec_err(e, L, "has padding='same' with an even kernel or a stride, which the trainer does not support",
                                "use an odd kernel_size with stride 1, or give the padding as numbers");
            }
        } else if (get_pair(o, "padding", pad, zero) || pad[0] < 0 || pad[1] < 0) {
            return spec_err(e, L, "has an invalid padding in its spec", "give padding >= 0");
        }
        L->kh = k[0]; L->kw = k[1]; L->sh = st[0]; L->sw = st[1]; L->ph = pad[0]; L->pw = pad[1];
        if ((int64_t)in.d[1] + 2 * (int64_t)pad[0] < k[0] || (int64_t)in.d[2] + 2 * (int64_t)pad[1] < k[1]) {
            snprintf(d, sizeof d, "(kernel_size=(%d, %d), padding=(%d, %d)) is bigger than its %dx%d input %s %s",
                     k[0], k[1], pad[0], pad[1], in.d[1], in.d[2], is, src);
            return spec_err(e, L, d,
                            "use a smaller kernel_size, more padding, or fewer downsampling layers before it");
        }
        if (L->kind == TAAS_L_CONV2D) {
            int ic = lazy ? in.d[0] : get_int(o, "in_channels", -1);
            L->oc = get_int(o, "out_channels", -1);
            if (L->oc < 1 || ic < 1)
                return spec_err(e, L, "has no valid in_channels/out_channels in its spec",
                                "give positive in_channels and out_channels");
            if (ic != in.d[0]) {
                taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: Conv2d(in_channels=%d) gets %d channels %s %s",
                               where_of(L).s, ic, in.d[0], is, src);
                taas_error_hint(e, "write Conv2d(%d, %d, ...), or LazyConv2d(%d, ...) to infer it", in.d[0],
                                L->oc, L->oc);
                return -1;
            }
            taas_conv2d_shape cs = {1, in.d[0], in.d[1], in.d[2], L->oc, k[0], k[1], st[0], st[1], pad[0], pad[1],
                                    L->groups};
            if (taas_conv2d_check(&cs, e)) return where_prefix(e, L);
            L->has_w = 1;
            L->has_b = get_bool(o, "bias", 1);
            L->out.d[0] = L->oc;
            L->out.d[1] = taas_conv2d_out_h(&cs);
            L->out.d[2] = taas_conv2d_out_w(&cs);
        } else {
            taas_pool2d_shape ps = {1, in.d[0], in.d[1], in.d[2], k[0], k[1], st[0], st[1], pad[0], pad[1]};
            if (taas_pool2d_check(&ps, e)) {
                char msg[sizeof e->message], hint[sizeof e->hint];
                snprintf(msg, sizeof msg, "%s", e->message);
                snprintf(hint, sizeof hint, "%s", e->hint);
                taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s on %s %s: %s", where_of(L).s, L->name, is, src, msg);
                taas_error_hint(e, "%s", hint[0] ? hint : "use a padding of at most half the kernel, or a smaller kernel");
                return -1;
            }
            L->out.d[1] = taas_pool2d_out_h(&ps);
            L->out.d[2] = taas_pool2d_out_w(&ps);
        }
        return 0;
    }
    case TAAS_L_ADAPTIVE_AVGPOOL2D: {
        int os[2], none[2] = {0, 0};
        if (in.rank != 3) {
            snprintf(d, sizeof d, "needs an (N, C, H, W) input but gets %s %s", is, src);
            return spec_err(e, L, d, "move it before Flatten(), or feed images");
        }
        if (get_pair(o, "output_size", os, none) || os[0] < 1 || os[1] < 1)
            return spec_err(e, L, "has no valid output_size in its spec", "give output_size >= 1, e.g. AdaptiveAvgPool2d(1)");
        if (taas_adaptive_avgpool2d_check(in.d[1], in.d[2], os[0], os[1], e)) return where_prefix(e, L);
        L->out.d[1] = os[0];
        L->out.d[2] = os[1];
        return 0;
    }
    case TAAS_L_LEAKY_RELU:
        L->slope = (float)get_num(o, "negative_slope", 0.01);
        return 0;
    case TAAS_L_DROPOUT:
    case TAAS_L_DROPOUT2D:
        L->p = (float)get_num(o, "p", 0.5);
        if (taas_dropout_check(L->p, e)) {
            char msg[sizeof e->message];
            snprintf(msg, sizeof msg, "%s", e->message);
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s: %s", where_of(L).s, L->name, msg);
            taas_error_hint(e, "give a dropout probability p between 0 and 1");
            return -1;
        }
        if (L->kind == TAAS_L_DROPOUT2D && in.rank != 3) {
            snprintf(d, sizeof d, "needs an (N, C, H, W) input but gets %s %s", is, src);
            return spec_err(e, L, d, "use Dropout for (N, features) inputs");
        }
        return 0;
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D: {
        int want = L->kind == TAAS_L_BATCHNORM1D ? 1 : 3;
        int nf = get_int(o, "num_features", -1);
        if (in.rank != want) {
            snprintf(d, sizeof d, "needs an %s input but gets %s %s",
                     want == 1 ? "(N, features)" : "(N, C, H, W)", is, src);
            return spec_err(e, L, d,
                            want == 1 ? "use BatchNorm2d on images, or Flatten() first" : "use BatchNorm1d after Flatten()");
        }
        if (nf != in.d[0]) {
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s(num_features=%d) gets %d %s %s %s", where_of(L).s,
                           L->name, nf, in.d[0], want == 1 ? "features" : "channels", is, src);
            taas_error_hint(e, "write %s(%d)", L->name, in.d[0]);
            return -1;
        }
        L->eps = (float)get_num(o, "eps", 1e-5);
        L->momentum = (float)get_num(o, "momentum", 0.1);
        L->has_w = L->has_b = 1;
        return 0;
    }
    case TAAS_L_FLATTEN:
        if (shape_numel(&in) > (size_t)TAAS_MAX_DIM) {
            snprintf(d, sizeof d, "would give more than %d features from %s %s", TAAS_MAX_DIM, is, src);
            return spec_err(e, L, d, "make the input smaller first (a pooling or strided layer)");
        }
        L->out.rank = 1;
        L->out.d[0] = (int)shape_numel(&in);
        return 0;
    case TAAS_L_LOG_SOFTMAX:
    case TAAS_L_SOFTMAX: {
        const json_t *dv = json_object_get(o, "dim");
        int dim = json_is_integer(dv) ? (int)json_integer_value(dv) : 1;
        int r = in.rank + 1;
        if (in.rank == 2) {
            snprintf(d, sizeof d, "on %s %s: the trainer has no softmax over sequences", is, src);
            return spec_err(e, L, d, "end the model with the logits: CrossEntropyLoss takes (N, T, V) logits");
        }
        if (dim < 0) dim += r;
        if (dim != 1) {
            snprintf(d, sizeof d, "over dim=%d of %s %s: the trainer supports only dim=1", dim, is, src);
            return spec_err(e, L, d, "use dim=1 (the class dimension)");
        }
        return 0;
    }
    default:
        return 0;
    }
}

static int add_entry(taas_model_plan *m, const taas_model_layer *L, const char *what, taas_tensor_home home,
                     size_t off, int ndim, const int64_t *shape) {
    taas_param_entry *t = &m->table[m->ntable++];
    snprintf(t->key, sizeof t->key, "%s%s%s", L->path, *L->path ? "." : "", what);
    t->ndim = ndim;
    t->numel = 1;
    for (int k = 0; k < ndim; k++) { t->shape[k] = shape[k]; t->numel = taas_size_mul(t->numel, (size_t)shape[k]); }
    t->dtype = home == TAAS_T_COUNTER ? "I64" : "F32";
    t->home = home;
    t->tied = 0;
    t->alias_off = 0;
    t->offset = off;
    return 0;
}

/* An op's tensors, in state_dict order: weight, bias, running_mean, running_var,
 * num_batches_tracked (at most 5; the table has room for them). */
static void layout(taas_model_plan *m, taas_model_layer *L) {
    L->row = (int)m->ntable;
    if (L->kind == TAAS_L_LINEAR && L->tie >= 0) {  /* its weight is op tie's, placed by train_first */
        int64_t ws[2] = {L->lin_out, L->lin_in};
        add_entry(m, L, "weight", TAAS_T_PARAM, 0, 2, ws);
        m->table[m->ntable - 1].tied = 1;
    } else if (L->kind == TAAS_L_LINEAR || L->kind == TAAS_L_CONV1D || L->kind == TAAS_L_EMBEDDING ||
               L->kind == TAAS_L_POS_EMBEDDING) {
        /* torch's (out, in); Conv1D's (in, out); a table's (rows, width) */
        int conv1d = L->kind == TAAS_L_CONV1D, table = L->kind == TAAS_L_EMBEDDING || L->kind == TAAS_L_POS_EMBEDDING;
        int64_t ws[2] = {conv1d || table ? L->lin_in : L->lin_out, conv1d || table ? L->lin_out : L->lin_in};
        int64_t bs[1] = {L->lin_out};
        L->w_off = m->nparams;
        add_entry(m, L, "weight", TAAS_T_PARAM, m->nparams, 2, ws);
        m->nparams = taas_size_add(m->nparams, taas_size_mul((size_t)L->lin_out, (size_t)L->lin_in));
        if (L->has_b) {
            L->b_off = m->nparams;
            add_entry(m, L, "bias", TAAS_T_PARAM, m->nparams, 1, bs);
            m->nparams = taas_size_add(m->nparams, (size_t)L->lin_out);
        }
    } else if (L->kind == TAAS_L_CONV2D) {
        int icg = L->in.d[0] / (L->groups > 0 ? L->groups : 1);
        int64_t ws[4] = {L->oc, icg, L->kh, L->kw}, bs[1] = {L->oc};
        L->w_off = m->nparams;
        add_entry(m, L, "weight", TAAS_T_PARAM, m->nparams, 4, ws);
        m->nparams = taas_size_add(m->nparams, taas_size_mul(taas_size_mul((size_t)L->oc, (size_t)icg),
                                                             taas_size_mul((size_t)L->kh, (size_t)L->kw)));
        if (L->has_b) {
            L->b_off = m->nparams;
            add_entry(m, L, "bias", TAAS_T_PARAM, m->nparams, 1, bs);
            m->nparams = taas_size_add(m->nparams, (size_t)L->oc);
        }
    } else if (L->kind == TAAS_L_LAYERNORM) {
        int64_t cs[1] = {L->lin_in};
        L->w_off = m->nparams;
        add_entry(m, L, "weight", TAAS_T_PARAM, m->nparams, 1, cs);
        L->b_off = m->nparams + (size_t)L->lin_in;
        add_entry(m, L, "bias", TAAS_T_PARAM, L->b_off, 1, cs);
        m->nparams = taas_size_add(m->nparams, taas_size_mul(2, (size_t)L->lin_in));
    } else if (L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D) {
        int64_t cs[1] = {L->in.d[0]};
        size_t c = (size_t)L->in.d[0];
        L->w_off = m->nparams;
        add_entry(m, L, "weight", TAAS_T_PARAM, m->nparams, 1, cs);
        L->b_off = m->nparams + c;
        add_entry(m, L, "bias", TAAS_T_PARAM, m->nparams + c, 1, cs);
        m->nparams = taas_size_add(m->nparams, taas_size_mul(2, c));
        L->rm_off = m->nstats;
        add_entry(m, L, "running_mean", TAAS_T_STAT, m->nstats, 1, cs);
        L->rv_off = m->nstats + c;
        add_entry(m, L, "running_var", TAAS_T_STAT, m->nstats + c, 1, cs);
        m->nstats = taas_size_add(m->nstats, taas_size_mul(2, c));
        L->counter = m->ncounters;
        add_entry(m, L, "num_batches_tracked", TAAS_T_COUNTER, (size_t)m->ncounters++, 0, cs);
    }
    L->nrows = (int)m->ntable - L->row;
}

/* The parameters again, the trainable ops' first: each op's tensors keep their order, and the
 * offsets of its weight and bias move with them. */
static void train_first(taas_model_plan *p) {
    size_t at = 0;
    for (int i = 0; i < p->nlayers; i++)  /* a tied weight trains with the tensor it is */
        if (p->layers[i].tie >= 0) p->layers[i].frozen = p->layers[p->layers[i].tie].frozen;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->nlayers; i++) {
            taas_model_layer *L = &p->layers[i];
            if (L->frozen != pass || L->tie >= 0) continue;
            size_t w = L->w_off, b = L->b_off;
            for (int r = L->row; r < L->row + L->nrows; r++) {
                taas_param_entry *t = &p->table[r];
                if (t->home != TAAS_T_PARAM) continue;
                if (t->offset == w) L->w_off = at;
                else if (t->offset == b) L->b_off = at;
                t->offset = at;
                at += t->numel;
            }
        }
        if (pass == 0) p->ntrain = at;
    }
    for (int i = 0; i < p->nlayers; i++) {
        taas_model_layer *L = &p->layers[i];
        if (L->tie < 0) continue;
        L->w_off = p->layers[L->tie].w_off;
        p->table[L->row].offset = L->w_off;
    }
}


void taas_model_plan_free(taas_model_plan *p) {
    if (!p) return;
    free(p->layers);
    free(p->table);
    memset(p, 0, sizeof *p);
}

/* ---- lowering the module tree to ops ------------------------------------------------ */

/* Bounds that keep a hostile spec from taking the stack or the memory: deeper than any
 * torchvision model, and more ops than a ResNet-1000. */
#define MAX_DEPTH 32
#define MAX_OPS 100000

/* What a subtree inherits: the nearest requires_grad, and torchvision's ResNet init. */
typedef struct lower_ctx {
    int frozen;
    int resnet;              /* under a ResNet: convs are kaiming_normal_(fan_out) */
    int zero_residual;       /* under a ResNet with zero_init_residual=True */
    int depth;
} lower_ctx;

static int plan_oom(taas_error *e) {
    taas_error_set(e, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory planning the model");
    taas_error_hint(e, "use a smaller model");
    return -1;
}

/* A new op reading tensor `in` (and `in2`, -1 for none), with room in both arrays. */
static taas_model_layer *new_op(taas_model_plan *p, const char *path, const char *type, int in, int in2,
                                const lower_ctx *cx, taas_error *e) {
    if (p->nlayers >= MAX_OPS) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "the model has more than %d layers", MAX_OPS);
        taas_error_hint(e, "use a smaller model");
        return NULL;
    }
    if (p->nlayers == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        taas_model_layer *l = realloc(p->layers, (size_t)cap * sizeof *l);
        if (l) p->layers = l;
        taas_param_entry *t = realloc(p->table, (size_t)cap * 5 * sizeof *t);  /* at most 5 tensors an op */
        if (t) p->table = t;
        if (!l || !t) return plan_oom(e), NULL;
        p->cap = cap;
    }
    taas_model_layer *L = &p->layers[p->nlayers++];
    memset(L, 0, sizeof *L);
    snprintf(L->name, sizeof L->name, "%s", type);
    if ((size_t)snprintf(L->path, sizeof L->path, "%s", path) >= sizeof L->path) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "the module path %.60s... is longer than %zu characters", path,
                       sizeof L->path - 1);
        taas_error_hint(e, "nest the model less deeply");
        return NULL;
    }
    L->src[0] = in;
    L->src[1] = in2;
    L->nsrc = in2 < 0 ? 1 : 2;
    L->in = taas_plan_tensor_shape(p->layers, p->in_shape, in);
    L->out = L->in;
    L->b_off = SIZE_MAX;
    L->groups = 1;
    L->tie = -1;
    L->frozen = cx->frozen;
    return L;
}

/* A leaf layer from its spec o, reading tensor in; *out is the tensor it writes. */
static int lower_leaf(taas_model_plan *p, const json_t *o, const char *path, int in, const lower_ctx *cx, int *out,
                      taas_error *e) {
    const json_t *lt = json_object_get(o, "type");
    const char *tn = json_is_string(lt) ? json_string_value(lt) : "";
    size_t k, nk = sizeof kinds / sizeof kinds[0];
    for (k = 0; k < nk && strcmp(kinds[k].name, tn) != 0; k++) {}
    taas_model_layer *L = new_op(p, path, *tn ? tn : "(a value without a type)", in, -1, cx, e);
    if (!L) return -1;
    if (k == nk) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s is not a layer the trainer supports", where_of(L).s,
                       L->name);
        taas_error_hint(e, "use Linear, Conv2d, pools, activations, Dropout, BatchNorm, Flatten, (Log)Softmax, "
                           "Identity, BasicBlock, Bottleneck or a ResNet");
        return -1;
    }
    L->kind = kinds[k].kind;
    L->init_fan_out = cx->resnet && L->kind == TAAS_L_CONV2D;
    if (infer_layer(p, p->nlayers - 1, o, L->in, e)) return -1;
    layout(p, L);
    *out = p->nlayers;
    return 0;
}

static int lower(taas_model_plan *p, const json_t *o, const char *path, int in, lower_ctx cx, int *out,
                 taas_error *e);

/* "prefix.name", or "name" at the top. */
static void child_path(char *buf, size_t len, const char *prefix, const char *name) {
    /* one cut short is longer than new_op's limit, which then refuses it */
    if ((size_t)snprintf(buf, len, "%s%s%s", prefix, *prefix ? "." : "", name) >= len) buf[len - 1] = '\0';
}

static int lower_child(taas_model_plan *p, const json_t *o, const char *prefix, const char *name, int in,
                       lower_ctx cx, int *out, taas_error *e) {
    char path[160];
    child_path(path, sizeof path, prefix, name);
    return lower(p, o, path, in, cx, out, e);
}

/* A layer the block makes itself (torchvision's conv3x3, conv1x1, norm_layer, ReLU). */
static int lower_made(taas_model_plan *p, json_t *o, const char *prefix, const char *name, int in, lower_ctx cx,
                      int *out, taas_error *e) {
    if (!o) return plan_oom(e);
    int rc = lower_child(p, o, prefix, name, in, cx, out, e);
    json_decref(o);
    return rc;
}

static json_t *conv_spec(int in, int out, int k, int stride, int groups) {
    return json_pack("{s:s, s:i, s:i, s:[i,i], s:[i,i], s:[i,i], s:[i,i], s:i, s:b, s:s}", "type", "Conv2d",
                     "in_channels", in, "out_channels", out, "kernel_size", k, k, "stride", stride, stride, "padding",
                     k / 2, k / 2, "dilation", 1, 1, "groups", groups, "bias", 0, "padding_mode", "zeros");
}

static json_t *bn_spec(int c) {
    return json_pack("{s:s, s:i, s:f, s:f, s:b, s:b}", "type", "BatchNorm2d", "num_features", c, "eps", 1e-5,
                     "momentum", 0.1, "affine", 1, "track_running_stats", 1);
}

static json_t *relu_spec(void) { return json_pack("{s:s, s:b}", "type", "ReLU", "inplace", 1); }

/* The residual sum out = a + b; both shapes must agree. */
static int lower_add(taas_model_plan *p, const char *path, int a, int b, const lower_ctx *cx, int *out,
                     taas_error *e) {
    taas_model_layer *L = new_op(p, path, "add", a, b, cx, e);
    if (!L) return -1;
    L->kind = TAAS_L_ADD;
    taas_act_shape sb = taas_plan_tensor_shape(p->layers, p->in_shape, b);
    int same = L->in.rank == sb.rank;
    for (int k = 0; same && k < sb.rank; k++) same = L->in.d[k] == sb.d[k];
    if (!same && L->in.rank && sb.rank) {
        char sa[64], sbs[64], fa[160], fb[160];
        shape_str(sa, sizeof sa, &L->in);
        shape_str(sbs, sizeof sbs, &sb);
        source_str(fa, sizeof fa, p, a);
        source_str(fb, sizeof fb, p, b);
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the residual sum adds %s %s to %s %s", where_of(L).s, sa,
                       fa, sbs, fb);
        taas_error_hint(e, "give the block a downsample that maps its input to its output's shape, as torchvision "
                           "does: Sequential(Conv2d(inplanes, planes * expansion, 1, stride=stride, bias=False), "
                           "BatchNorm2d(planes * expansion))");
        return -1;
    }
    if (!L->in.rank) L->out = sb;
    *out = p->nlayers;
    return 0;
}

/* torchvision.models.resnet's BasicBlock (expansion 1) and Bottleneck (expansion 4), their
 * forward op by op; the ReLU module is one, applied where torchvision applies it. */
static int lower_block(taas_model_plan *p, const json_t *o, const char *path, int in, lower_ctx cx, int bottleneck,
                       int *out, taas_error *e) {
    int one[2] = {1, 1}, st[2];
    int inplanes = get_int(o, "inplanes", -1), planes = get_int(o, "planes", -1);
    int groups = get_int(o, "groups", 1), base_width = get_int(o, "base_width", 64);
    int dilation = get_int(o, "dilation", 1);
    const char *type = bottleneck ? "Bottleneck" : "BasicBlock";
    if (inplanes < 1 || planes < 1 || groups < 1 || base_width < 1 || get_pair(o, "stride", st, one) ||
        st[0] < 1 || st[0] != st[1] || dilation != 1 || (!bottleneck && (groups != 1 || base_width != 64))) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s has invalid arguments in its spec (inplanes %d, "
                       "planes %d, stride, groups %d, base_width %d, dilation %d)", *path ? path : "the model", type,
                       inplanes, planes, groups, base_width, dilation);
        taas_error_hint(e, "give positive inplanes and planes, one stride, dilation=1 (and groups=1, base_width=64 "
                           "for a BasicBlock), as torchvision requires");
        return -1;
    }
    const json_t *nl = json_object_get(o, "norm_layer");
    if (nl && !json_is_null(nl)) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s has a norm_layer, which the trainer does not support",
                       *path ? path : "the model", type);
        taas_error_hint(e, "leave norm_layer=None (BatchNorm2d)");
        return -1;
    }
    double wide = bottleneck ? (double)(int)(planes * (base_width / 64.0)) * groups : planes;
    if (wide < 1 || wide * 4 > TAAS_MAX_DIM) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s's width planes * base_width / 64 * groups is %.0f, "
                       "outside 1..%d", *path ? path : "the model", type, wide, TAAS_MAX_DIM / 4);
        taas_error_hint(e, "use torchvision's planes, groups and base_width");
        return -1;
    }
    if (planes > TAAS_MAX_DIM / 4) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: %s has %d planes, more than %d", *path ? path : "the model",
                       type, planes, TAAS_MAX_DIM / 4);
        taas_error_hint(e, "use fewer planes");
        return -1;
    }
    int t = in, width = (int)wide;
    int expansion = bottleneck ? 4 : 1, last;
    lower_ctx zx = cx;
    zx.depth++;
    if (bottleneck) {
        if (lower_made(p, conv_spec(inplanes, width, 1, 1, 1), path, "conv1", t, zx, &t, e) ||
            lower_made(p, bn_spec(width), path, "bn1", t, zx, &t, e) ||
            lower_made(p, relu_spec(), path, "relu", t, zx, &t, e) ||
            lower_made(p, conv_spec(width, width, 3, st[0], groups), path, "conv2", t, zx, &t, e) ||
            lower_made(p, bn_spec(width), path, "bn2", t, zx, &t, e) ||
            lower_made(p, relu_spec(), path, "relu", t, zx, &t, e) ||
            lower_made(p, conv_spec(width, planes * expansion, 1, 1, 1), path, "conv3", t, zx, &t, e) ||
            lower_made(p, bn_spec(planes * expansion), path, "bn3", t, zx, &t, e))
            return -1;
    } else {
        if (lower_made(p, conv_spec(inplanes, planes, 3, st[0], 1), path, "conv1", t, zx, &t, e) ||
            lower_made(p, bn_spec(planes), path, "bn1", t, zx, &t, e) ||
            lower_made(p, relu_spec(), path, "relu", t, zx, &t, e) ||
            lower_made(p, conv_spec(planes, planes, 3, 1, 1), path, "conv2", t, zx, &t, e) ||
            lower_made(p, bn_spec(planes), path, "bn2", t, zx, &t, e))
            return -1;
    }
    last = t;
    p->layers[last - 1].init_zero = cx.zero_residual;
    int identity = in;
    const json_t *ds = json_object_get(o, "downsample");
    if (ds && !json_is_null(ds) && lower_child(p, ds, path, "downsample", in, zx, &identity, e)) return -1;
    char apath[160];
    child_path(apath, sizeof apath, path, "add");
    if (lower_add(p, apath, last, identity, &zx, &t, e)) return -1;
    return lower_made(p, relu_spec(), path, "relu", t, zx, out, e);
}

/* torchvision's ResNet: its children in forward's order, torch.flatten before fc. */
static int lower_resnet(taas_model_plan *p, const json_t *o, const char *path, int in, lower_ctx cx, int *out,
                        taas_error *e) {
    static const char *const children[] = {"conv1", "bn1", "relu", "maxpool", "layer1", "layer2",
                                           "layer3", "layer4", "avgpool", "fc"};
    cx.resnet = 1;
    cx.zero_residual = get_bool(o, "zero_init_residual", 0);
    int t = in;
    for (size_t k = 0; k < sizeof children / sizeof children[0]; k++) {
        const json_t *c = json_object_get(o, children[k]);
        if (!json_is_object(c)) {
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the ResNet has no %s in its spec",
                           *path ? path : "the model", children[k]);
            taas_error_hint(e, "build it with resnet18(), resnet34() or resnet50()");
            return -1;
        }
        if (strcmp(children[k], "fc") == 0) {
            json_t *f = json_pack("{s:s, s:i, s:i}", "type", "Flatten", "start_dim", 1, "end_dim", -1);
            if (lower_made(p, f, path, "flatten", t, cx, &t, e)) return -1;
        }
        if (lower_child(p, c, path, children[k], t, cx, &t, e)) return -1;
    }
    *out = t;
    return 0;
}

/* ---- GPT-2 (Hugging Face's GPT2LMHeadModel) ---------------------------------------- */

/* GPT2Config's keys: what the trainer follows, what it accepts at the value it implements
 * only, and what does not change training (generation's token ids, the double-heads model's
 * summary_*). Any other key is refused by name. */
typedef struct gpt2_config {
    int vocab, positions, embd, layers, heads, inner;
    float resid_p, embd_p, attn_p, eps, init;
    int gelu_tanh;
} gpt2_config;

static int gpt2_refuse(taas_error *e, const char *path, const char *key, const char *why, const char *hint) {
    taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: GPT2Config(%s) %s", *path ? path : "the model", key, why);
    taas_error_hint(e, "%s", hint);
    return -1;
}

static int gpt2_parse(const json_t *cfg, const char *path, gpt2_config *g, taas_error *e) {
    static const char *const ignored[] = {"bos_token_id", "eos_token_id", "pad_token_id", "use_cache",
                                          "summary_type", "summary_use_proj", "summary_activation",
                                          "summary_proj_to_labels", "summary_first_dropout", "model_type",
                                          "architectures", "task_specific_params", "transformers_version",
                                          "torch_dtype", "n_ctx", "reorder_and_upcast_attn", "output_past"};
    static const char *const followed[] = {"vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
                                           "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                                           "layer_norm_epsilon", "initializer_range", "scale_attn_weights",
                                           "scale_attn_by_inverse_layer_idx", "tie_word_embeddings",
                                           "add_cross_attention"};
    if (cfg && !json_is_object(cfg))
        return gpt2_refuse(e, path, "config", "is not a configuration", "give config=GPT2Config(...)");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)cfg, key, v) {
        int known = strcmp(key, "type") == 0 && json_is_string(v) && strcmp(json_string_value(v), "GPT2Config") == 0;
        for (size_t k = 0; !known && k < sizeof ignored / sizeof ignored[0]; k++) known = strcmp(key, ignored[k]) == 0;
        for (size_t k = 0; !known && k < sizeof followed / sizeof followed[0]; k++) known = strcmp(key, followed[k]) == 0;
        if (!known) return gpt2_refuse(e, path, key, "is a key the trainer does not support", "leave it out");
    }
    g->vocab = get_int(cfg, "vocab_size", 50257);
    g->positions = get_int(cfg, "n_positions", 1024);
    g->embd = get_int(cfg, "n_embd", 768);
    g->layers = get_int(cfg, "n_layer", 12);
    g->heads = get_int(cfg, "n_head", 12);
    const json_t *ni = json_object_get(cfg, "n_inner");
    g->inner = ni && !json_is_null(ni) ? get_int(cfg, "n_inner", -1) : 4 * (g->embd > 0 ? g->embd : 0);
    g->resid_p = (float)get_num(cfg, "resid_pdrop", 0.1);
    g->embd_p = (float)get_num(cfg, "embd_pdrop", 0.1);
    g->attn_p = (float)get_num(cfg, "attn_pdrop", 0.1);
    g->eps = (float)get_num(cfg, "layer_norm_epsilon", 1e-5);
    g->init = (float)get_num(cfg, "initializer_range", 0.02);
    if (g->vocab < 1 || g->vocab > (1 << 24) || g->positions < 1 || g->embd < 1 || g->layers < 1 || g->heads < 1 ||
        g->inner < 1 || g->layers > 1000 || g->embd > TAAS_MAX_DIM / 4 || g->inner > TAAS_MAX_DIM / 3)
        return gpt2_refuse(e, path, "sizes", "are invalid: vocab_size, n_positions, n_embd, n_layer, n_head and n_inner "
                           "must be positive (vocab_size at most 2^24, n_layer at most 1000)",
                           "use GPT2Config's defaults or smaller positive sizes");
    if (g->embd % g->heads)
        return gpt2_refuse(e, path, "n_embd", "is not a multiple of n_head", "give n_embd a multiple of n_head");
    if (!(g->init > 0))
        return gpt2_refuse(e, path, "initializer_range", "must be positive", "use initializer_range=0.02");
    const json_t *af = json_object_get(cfg, "activation_function");
    const char *act = json_is_string(af) ? json_string_value(af) : "gelu_new";
    g->gelu_tanh = strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0;
    if (!g->gelu_tanh && strcmp(act, "gelu") != 0)
        return gpt2_refuse(e, path, "activation_function", "is not 'gelu_new', 'gelu_pytorch_tanh' or 'gelu'",
                           "use activation_function='gelu_new', GPT-2's");
    if (!get_bool(cfg, "scale_attn_weights", 1) || get_bool(cfg, "scale_attn_by_inverse_layer_idx", 0))
        return gpt2_refuse(e, path, "scale_attn_weights / scale_attn_by_inverse_layer_idx",
                           "differ from GPT-2's scaling by 1/sqrt(head width), the only one the trainer has",
                           "use scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False");
    if (!get_bool(cfg, "tie_word_embeddings", 1) || get_bool(cfg, "add_cross_attention", 0))
        return gpt2_refuse(e, path, "tie_word_embeddings / add_cross_attention",
                           "are not supported: lm_head is always tied to wte, and there is no cross-attention",
                           "use tie_word_embeddings=True, add_cross_attention=False");
    return 0;
}

static json_t *ln_spec(int c, float eps) {
    return json_pack("{s:s, s:[i], s:f, s:b}", "type", "LayerNorm", "normalized_shape", c, "eps", (double)eps,
                     "elementwise_affine", 1);
}

static json_t *c1d_spec(int nf, int nx) { return json_pack("{s:s, s:i, s:i}", "type", "Conv1D", "nf", nf, "nx", nx); }

static json_t *drop_spec(float p) { return json_pack("{s:s, s:f}", "type", "Dropout", "p", (double)p); }

/* A Conv1D at `name` with GPT-2's init: std, c_proj's scaled by 1/sqrt(2 n_layer). */
static int lower_c1d(taas_model_plan *p, const char *path, const char *name, int nf, int nx, float std, int in,
                     lower_ctx cx, int *out, taas_error *e) {
    if (lower_made(p, c1d_spec(nf, nx), path, name, in, cx, out, e)) return -1;
    p->layers[*out - 1].init_std = std;
    return 0;
}

/* One of transformer.h: x + attn(ln_1(x)), then that + mlp(ln_2(that)), as GPT2Block. */
static int lower_gpt2_block(taas_model_plan *p, const gpt2_config *g, const char *path, int in, lower_ctx cx, int *out,
                            taas_error *e) {
    char ap[160], mp[160], sp[160];
    int t, a, c = g->embd;
    float proj = g->init / sqrtf(2.0f * (float)g->layers);
    child_path(ap, sizeof ap, path, "attn");
    child_path(mp, sizeof mp, path, "mlp");
    if (lower_made(p, ln_spec(c, g->eps), path, "ln_1", in, cx, &t, e) ||
        lower_c1d(p, ap, "c_attn", 3 * c, c, g->init, t, cx, &t, e))
        return -1;
    taas_model_layer *L = new_op(p, ap, "CausalSelfAttention", t, -1, &cx, e);
    if (!L) return -1;
    L->kind = TAAS_L_ATTENTION;
    L->heads = g->heads;
    L->p = g->attn_p;
    L->out.d[1] = c;
    L->row = (int)p->ntable;
    t = p->nlayers;
    if (lower_c1d(p, ap, "c_proj", c, c, proj, t, cx, &t, e) ||
        lower_made(p, drop_spec(g->resid_p), ap, "resid_dropout", t, cx, &t, e))
        return -1;
    child_path(sp, sizeof sp, path, "add");
    if (lower_add(p, sp, t, in, &cx, &a, e) || lower_made(p, ln_spec(c, g->eps), path, "ln_2", a, cx, &t, e) ||
        lower_c1d(p, mp, "c_fc", g->inner, c, g->init, t, cx, &t, e))
        return -1;
    json_t *act = json_pack("{s:s, s:s}", "type", "GELU", "approximate", g->gelu_tanh ? "tanh" : "none");
    if (lower_made(p, act, mp, "act", t, cx, &t, e) || lower_c1d(p, mp, "c_proj", c, g->inner, proj, t, cx, &t, e) ||
        lower_made(p, drop_spec(g->resid_p), mp, "dropout", t, cx, &t, e))
        return -1;
    child_path(sp, sizeof sp, path, "add2");
    return lower_add(p, sp, t, a, &cx, out, e);
}

/* GPT2LMHeadModel: token ids (N, T) -> logits (N, T, vocab_size), its modules in forward's
 * order under Hugging Face's names, lm_head.weight being transformer.wte.weight. */
static int lower_gpt2(taas_model_plan *p, const json_t *o, const char *path, int in, lower_ctx cx, int *out,
                      taas_error *e) {
    gpt2_config g;
    char tp[160], hp[160];
    if (gpt2_parse(json_object_get(o, "config"), path, &g, e)) return -1;
    /* planned without an input (a summary before any data): for a full context */
    if (in == 0 && p->in_shape.rank == 0) p->in_shape = (taas_act_shape){1, {g.positions, 0, 0}};
    taas_act_shape ids = taas_plan_tensor_shape(p->layers, p->in_shape, in);
    if (ids.rank && (ids.rank != 1 || ids.d[0] > g.positions)) {
        char is[64];
        shape_str(is, sizeof is, &ids);
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: GPT2LMHeadModel takes (N, T) token ids with T at most "
                       "n_positions = %d, but gets %s", *path ? path : "the model", g.positions, is);
        taas_error_hint(e, "use a block_size of at most n_positions, or a config with more n_positions");
        return -1;
    }
    child_path(tp, sizeof tp, path, "transformer");
    json_t *wte = json_pack("{s:s, s:i, s:i}", "type", "Embedding", "num_embeddings", g.vocab, "embedding_dim", g.embd);
    int t, emb;
    if (lower_made(p, wte, tp, "wte", in, cx, &t, e)) return -1;
    emb = t - 1;
    p->layers[emb].init_std = g.init;
    char wp[160];
    child_path(wp, sizeof wp, tp, "wpe");
    taas_model_layer *L = new_op(p, wp, "Embedding", t, -1, &cx, e);
    if (!L) return -1;
    L->kind = TAAS_L_POS_EMBEDDING;
    L->lin_in = g.positions;
    L->lin_out = g.embd;
    L->has_w = 1;
    L->init_std = g.init;
    layout(p, L);
    t = p->nlayers;
    if (lower_made(p, drop_spec(g.embd_p), tp, "drop", t, cx, &t, e)) return -1;
    for (int i = 0; i < g.layers; i++) {
        char name[24];
        snprintf(name, sizeof name, "h.%d", i);
        child_path(hp, sizeof hp, tp, name);
        if (lower_gpt2_block(p, &g, hp, t, cx, &t, e)) return -1;
    }
    if (lower_made(p, ln_spec(g.embd, g.eps), tp, "ln_f", t, cx, &t, e)) return -1;
    /* GPT2Model's checkpoints (the model.safetensors Hugging Face publishes for gpt2) name the
     * transformer's tensors without its prefix */
    size_t tl = strlen(tp) + 1;
    for (int i = emb; i < p->nlayers; i++)
        for (int r = p->layers[i].row; r < p->layers[i].row + p->layers[i].nrows; r++)
            if (!strncmp(p->table[r].key, tp, tl - 1) && p->table[r].key[tl - 1] == '.') p->table[r].alias_off = (int)tl;
    json_t *head = json_pack("{s:s, s:i, s:i, s:b}", "type", "Linear", "in_features", g.embd, "out_features", g.vocab,
                             "bias", 0);
    if (!head) return plan_oom(e);
    char lp[160];
    child_path(lp, sizeof lp, path, "lm_head");
    L = new_op(p, lp, "Linear", t, -1, &cx, e);
    if (!L) return json_decref(head), -1;
    L->kind = TAAS_L_LINEAR;
    L->tie = emb;
    int rc = infer_layer(p, p->nlayers - 1, head, L->in, e);
    json_decref(head);
    if (rc) return -1;
    layout(p, L);
    *out = p->nlayers;
    return 0;
}

const char *taas_gpt2_module_type(const char *path, size_t len) {
    static const char *const tail[][2] = {{".attn", "GPT2Attention"}, {".mlp", "GPT2MLP"}};
    if (len == 11 && !strncmp(path, "transformer", 11)) return "GPT2Model";
    if (len == 13 && !strncmp(path, "transformer.h", 13)) return "ModuleList";
    if (len > 14 && !strncmp(path, "transformer.h.", 14) && strspn(path + 14, "0123456789") == len - 14)
        return "GPT2Block";
    for (size_t k = 0; k < sizeof tail / sizeof tail[0]; k++) {
        size_t t = strlen(tail[k][0]);
        if (len > t && !strncmp(path + len - t, tail[k][0], t)) return tail[k][1];
    }
    return "";
}

/* Lowers the module o, reading tensor in; *out is the tensor its output is. */
static int lower(taas_model_plan *p, const json_t *o, const char *path, int in, lower_ctx cx, int *out,
                 taas_error *e) {
    if (++cx.depth > MAX_DEPTH) {
        taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s: the model nests modules more than %d deep",
                       *path ? path : "the model", MAX_DEPTH);
        taas_error_hint(e, "nest Sequentials less deeply");
        return -1;
    }
    const json_t *rg = json_object_get(o, "requires_grad");
    if (json_is_boolean(rg)) cx.frozen = !json_is_true(rg);
    const json_t *ty = json_object_get(o, "type");
    const char *tn = json_is_string(ty) ? json_string_value(ty) : "";
    if (strcmp(tn, "Sequential") == 0) {
        const json_t *layers = json_object_get(o, "layers");
        if (!json_is_array(layers) || json_array_size(layers) == 0) {
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "%s%s has no layers", *path ? path : "the Sequential",
                           *path ? " (a Sequential)" : "");
            taas_error_hint(e, "add at least one layer, e.g. Sequential(Flatten(), LazyLinear(10))");
            return -1;
        }
        int t = in;
        for (size_t k = 0; k < json_array_size(layers); k++) {
            char name[24];
            snprintf(name, sizeof name, "%zu", k);
            if (lower_child(p, json_array_get(layers, k), path, name, t, cx, &t, e)) return -1;
        }
        *out = t;
        return 0;
    }
    if (strcmp(tn, "BasicBlock") == 0) return lower_block(p, o, path, in, cx, 0, out, e);
    if (strcmp(tn, "Bottleneck") == 0) return lower_block(p, o, path, in, cx, 1, out, e);
    if (strcmp(tn, "ResNet") == 0) return lower_resnet(p, o, path, in, cx, out, e);
    if (strcmp(tn, "GPT2LMHeadModel") == 0) return lower_gpt2(p, o, path, in, cx, out, e);
    return lower_leaf(p, o, path, in, &cx, out, e);
}

/* Which consumers tensor t has (the ops reading it). */
static int consumers(const taas_model_plan *p, int t) {
    int n = 0;
    for (int i = 0; i < p->nlayers; i++)
        for (int s = 0; s < p->layers[i].nsrc; s++) n += p->layers[i].src[s] == t;
    return n;
}

/* The fusion and memory-sharing rules (model_plan.h): decided here only. */
static void plan_fusion(taas_model_plan *p) {
    for (int i = 0; i < p->nlayers; i++) {
        taas_model_layer *L = &p->layers[i];
        int t = L->src[0];
        taas_model_layer *P = t > 0 ? &p->layers[t - 1] : NULL;  /* the op that wrote its input */
        int only = t > 0 && consumers(p, t) == 1;
        if (L->kind == TAAS_L_RELU && only && P->kind == TAAS_L_CONV2D) {
            P->fusion = TAAS_FUSE_RELU;
            L->fusion = TAAS_FUSED;
        }
        /* Dropout with p = 0 is the identity, as in PyTorch (no mask drawn, nothing scaled) */
        int identity = (L->kind == TAAS_L_DROPOUT || L->kind == TAAS_L_DROPOUT2D) && L->p == 0.0f;
        L->in_place = L->kind == TAAS_L_FLATTEN || L->kind == TAAS_L_IDENTITY || L->fusion == TAAS_FUSED || identity;
        /* A ReLU or a sum may write over an input that nothing else reads, when the op that
         * wrote it does not need its own output in backward (BatchNorm, a sum, Linear, an
         * unfused Conv2d do not); the ReLU's backward then reads its output's sign. */
        if (!L->in_place && (L->kind == TAAS_L_RELU || L->kind == TAAS_L_ADD) && only && !P->in_place &&
            !P->overwrite && (P->kind == TAAS_L_BATCHNORM1D || P->kind == TAAS_L_BATCHNORM2D ||
                              P->kind == TAAS_L_ADD || P->kind == TAAS_L_LINEAR || P->kind == TAAS_L_CONV1D ||
                              P->kind == TAAS_L_DROPOUT || P->kind == TAAS_L_LAYERNORM ||
                              (P->kind == TAAS_L_CONV2D && P->fusion == TAAS_FUSE_NONE)))
            L->overwrite = 1;
    }
}

int taas_model_plan_build(taas_model_plan *p, const json_t *spec, int c, int h, int w, taas_error *err) {
    memset(p, 0, sizeof *p);
    if (c < 0 || h < 0 || w < 0 || (h == 0) != (w == 0) || (c == 0 && h != 0)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "invalid input shape (N, %d, %d, %d) for the model", c, h, w);
        taas_error_hint(err, "give (C, H, W) with positive sizes, or (F, 0, 0) for flat inputs");
        return -1;
    }
    const json_t *ty = json_object_get(spec, "type");
    if (!json_is_object(spec) || !json_is_string(ty)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the model spec is not a module");
        taas_error_hint(err, "build the model as Sequential(layer, layer, ...) or resnet18()");
        return -1;
    }
    p->in_shape = c == 0 ? (taas_act_shape){0, {0, 0, 0}}
                  : h == 0 ? (taas_act_shape){1, {c, 0, 0}} : (taas_act_shape){3, {c, h, w}};
    lower_ctx cx = {0, 0, 0, 0};
    int out;
    if (lower(p, spec, "", 0, cx, &out, err)) {
        taas_model_plan_free(p);
        return -1;
    }
    /* The output is the last op's: every op feeds the output (the tree's forward is a chain
     * of modules), so execution order ends with it. */
    plan_fusion(p);
    train_first(p);
    return 0;
}

const taas_param_entry *taas_model_plan_find(const taas_model_plan *p, const char *key) {
    for (size_t i = 0; i < p->ntable; i++)
        if (strcmp(p->table[i].key, key) == 0) return &p->table[i];
    return NULL;
}

taas_st_tensor *taas_param_table_tensors(const taas_param_entry *table, size_t n, float *params, float *stats,
                                         int64_t *counters) {
    taas_st_tensor *t = calloc(n ? n : 1, sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++) {
        const taas_param_entry *e = &table[i];
        t[i].key = e->key;
        t[i].ndim = e->ndim;
        for (int d = 0; d < e->ndim; d++) t[i].shape[d] = e->shape[d] ? e->shape[d] : -1;
        t[i].dtype = e->home == TAAS_T_COUNTER ? TAAS_ST_I64 : TAAS_ST_F32;
        t[i].tied = e->tied;
        t[i].alias = e->alias_off > 0 ? e->key + e->alias_off : NULL;
        if (!params) continue;
        t[i].data = e->home == TAAS_T_PARAM ? (void *)(params + e->offset)
                    : e->home == TAAS_T_STAT ? (void *)(stats + e->offset)
                                             : (void *)(counters + e->offset);
    }
    return t;
}

int taas_model_plan_check_memory(const taas_model_plan *p, taas_error *err) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t have = pages > 0 && page > 0 ? taas_size_mul((size_t)pages, (size_t)page) : SIZE_MAX;
    /* the parameters, their gradients and the statistics: what the model allocates first */
    size_t need = taas_size_mul(taas_size_add(taas_size_mul(p->nparams, 2), p->nstats), sizeof(float));
    if (need <= have) return 0;
    const taas_param_entry *big = NULL;
    for (size_t i = 0; i < p->ntable; i++)
        if (!big || p->table[i].numel > big->numel) big = &p->table[i];
    char n[32];
    if (need == SIZE_MAX) snprintf(n, sizeof n, "more than 16 EiB");
    else snprintf(n, sizeof n, "%.1f GiB", (double)need / (1u << 30));
    taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "the model needs %s for its parameters and their gradients, "
                   "more than this machine's memory (%.1f GiB)", n, (double)have / (1u << 30));
    if (big) taas_error_hint(err, "make the layers smaller: the largest tensor, %s, holds %zu numbers", big->key,
                             big->numel);
    return -1;
}
