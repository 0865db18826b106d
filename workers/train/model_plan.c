/* Planning a model: spec parsing, shape inference layer by layer, the parameter layout and
 * the state_dict table. Nothing here computes or allocates numbers (model_plan.h). */
#include "model_plan.h"

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
};

static void shape_str(char *buf, size_t len, const taas_act_shape *s) {
    if (s->rank == 1) snprintf(buf, len, "(N, %d)", s->d[0]);
    else snprintf(buf, len, "(N, %d, %d, %d)", s->d[0], s->d[1], s->d[2]);
}

static size_t shape_numel(const taas_act_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n = taas_size_mul(n, (size_t)s->d[i]);
    return n;
}

/* "from the input" or "from layer 6 (Flatten)". */
static void source_str(char *buf, size_t len, const taas_model_plan *m, int i) {
    if (i == 0) snprintf(buf, len, "from the input");
    else snprintf(buf, len, "from layer %d (%s)", i - 1, m->layers[i - 1].name);
}

static int spec_err(taas_error *e, int i, const char *name, const char *detail, const char *hint) {
    /* "Conv2d(kernel_size=...)" reads as one; "Conv2d has ..." needs the space. */
    taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d: %s%s%s", i, name, detail[0] == '(' ? "" : " ",
                   detail);
    if (hint) taas_error_hint(e, "%s", hint);
    return -1;
}

/* An int, or an [a, b] pair; a missing or null key gives def. */
static int get_pair(const json_t *o, const char *key, int out[2], const int def[2]) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { out[0] = def[0]; out[1] = def[1]; return 0; }
    if (json_is_integer(v)) { out[0] = out[1] = (int)json_integer_value(v); return 0; }
    if (json_is_array(v) && json_array_size(v) == 2 && json_is_integer(json_array_get(v, 0)) &&
        json_is_integer(json_array_get(v, 1))) {
        out[0] = (int)json_integer_value(json_array_get(v, 0));
        out[1] = (int)json_integer_value(json_array_get(v, 1));
        return 0;
    }
    return -1;
}

static int get_int(const json_t *o, const char *key, int def) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : def;
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
static int check_unsupported(const json_t *o, taas_model_layer *L, int i, taas_error *e) {
    char d[256];
    int one[2] = {1, 1}, dil[2];
    const json_t *pm = json_object_get(o, "padding_mode");
    if (L->kind == TAAS_L_CONV2D || L->kind == TAAS_L_MAXPOOL2D) {
        if (get_pair(o, "dilation", dil, one) || dil[0] != 1 || dil[1] != 1) {
            snprintf(d, sizeof d, "has dilation != 1, which the trainer does not support");
            return spec_err(e, i, L->name, d, "use dilation=1");
        }
    }
    if (L->kind == TAAS_L_CONV2D) {
        if (get_int(o, "groups", 1) != 1)
            return spec_err(e, i, L->name, "has groups != 1, which the trainer does not support",
                            "use groups=1");
        if (pm && !(json_is_string(pm) && strcmp(json_string_value(pm), "zeros") == 0))
            return spec_err(e, i, L->name, "has a padding_mode other than 'zeros', which the trainer does not support",
                            "use padding_mode='zeros'");
    }
    if ((L->kind == TAAS_L_MAXPOOL2D || L->kind == TAAS_L_AVGPOOL2D) && get_bool(o, "ceil_mode", 0))
        return spec_err(e, i, L->name, "has ceil_mode=True, which the trainer does not support",
                        "use ceil_mode=False (pad the input instead)");
    if (L->kind == TAAS_L_AVGPOOL2D &&
        (!get_bool(o, "count_include_pad", 1) ||
         (json_object_get(o, "divisor_override") && !json_is_null(json_object_get(o, "divisor_override")))))
        return spec_err(e, i, L->name, "has count_include_pad=False or a divisor_override, which the trainer does not support",
                        "use the defaults count_include_pad=True, divisor_override=None");
    if (L->kind == TAAS_L_GELU) {
        const json_t *a = json_object_get(o, "approximate");
        if (json_is_string(a) && strcmp(json_string_value(a), "none") != 0)
            return spec_err(e, i, L->name, "has approximate='tanh', which the trainer does not support",
                            "use GELU() (approximate='none')");
    }
    if (L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D) {
        const json_t *mo = json_object_get(o, "momentum");
        if (!get_bool(o, "affine", 1) || !get_bool(o, "track_running_stats", 1) || json_is_null(mo))
            return spec_err(e, i, L->name, "has affine=False, track_running_stats=False or momentum=None, which the trainer does not support",
                            "use the defaults affine=True, track_running_stats=True and a float momentum");
    }
    if (L->kind == TAAS_L_FLATTEN && (get_int(o, "start_dim", 1) != 1 || get_int(o, "end_dim", -1) != -1))
        return spec_err(e, i, L->name, "flattens other dimensions than 1..-1, which the trainer does not support",
                        "use Flatten() with start_dim=1, end_dim=-1");
    return 0;
}

/* A layer whose input shape is unknown (rank 0): its tensors' shapes from its spec alone, a
 * Lazy layer's inferred size 0. Its output is known only when the spec fixes it (Linear),
 * so the layers after that are checked again. */
static int plan_spec_only(taas_model_layer *L, int i, const json_t *o, int lazy, taas_error *e) {
    int k[2], zero[2] = {0, 0};
    switch (L->kind) {
    case TAAS_L_LINEAR:
        L->lin_in = lazy ? 0 : get_int(o, "in_features", -1);
        L->lin_out = get_int(o, "out_features", -1);
        if (L->lin_out < 1 || L->lin_in < 0)
            return spec_err(e, i, L->name, "has no valid in_features/out_features in its spec",
                            "give positive in_features and out_features");
        L->has_w = 1;
        L->has_b = get_bool(o, "bias", 1);
        L->out = (taas_act_shape){1, {L->lin_out, 0, 0}};
        return 0;
    case TAAS_L_CONV2D:
        L->oc = get_int(o, "out_channels", -1);
        L->in.d[0] = lazy ? 0 : get_int(o, "in_channels", -1);
        if (get_pair(o, "kernel_size", k, zero) || k[0] < 1 || k[1] < 1 || L->oc < 1 || L->in.d[0] < 0)
            return spec_err(e, i, L->name, "has no valid channels or kernel_size in its spec",
                            "give positive in_channels, out_channels and kernel_size");
        L->kh = k[0];
        L->kw = k[1];
        L->has_w = 1;
        L->has_b = get_bool(o, "bias", 1);
        return 0;
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D:
        L->in.d[0] = get_int(o, "num_features", -1);
        if (L->in.d[0] < 1)
            return spec_err(e, i, L->name, "has no valid num_features in its spec", "give num_features >= 1");
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
    char d[512], is[64], src[96];
    L->in = in;
    L->out = in;
    L->b_off = SIZE_MAX;
    if (check_unsupported(o, L, i, e)) return -1;
    int lazy = strncmp(L->name, "Lazy", 4) == 0;
    if (in.rank == 0) return plan_spec_only(L, i, o, lazy, e);
    shape_str(is, sizeof is, &in);
    source_str(src, sizeof src, m, i);
    switch (L->kind) {
    case TAAS_L_LINEAR: {
        int feat = (int)shape_numel(&in);
        if (in.rank != 1) {
            snprintf(d, sizeof d, "needs an (N, features) input but gets %s %s", is, src);
            return spec_err(e, i, L->name, d, "put Flatten() before it");
        }
        L->lin_in = lazy ? feat : get_int(o, "in_features", -1);
        L->lin_out = get_int(o, "out_features", -1);
        if (L->lin_out < 1 || L->lin_in < 1) {
            snprintf(d, sizeof d, "has no valid in_features/out_features in its spec");
            return spec_err(e, i, L->name, d, "give positive in_features and out_features");
        }
        if (L->lin_in != feat) {
            char h[160];
            snprintf(d, sizeof d, "gets %d features %s", feat, src);
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d: Linear(in_features=%d) %s", i,
                           L->lin_in, d);
            snprintf(h, sizeof h, "write Linear(%d, %d), or LazyLinear(%d) to infer it", feat,
                     L->lin_out, L->lin_out);
            taas_error_hint(e, "%s", h);
            return -1;
        }
        L->has_w = 1;
        L->has_b = get_bool(o, "bias", 1);
        L->out.rank = 1;
        L->out.d[0] = L->lin_out;
        return 0;
    }
    case TAAS_L_CONV2D:
    case TAAS_L_MAXPOOL2D:
    case TAAS_L_AVGPOOL2D: {
        int k[2], st[2], pad[2], zero[2] = {0, 0}, one[2] = {1, 1};
        if (in.rank != 3) {
            snprintf(d, sizeof d, "needs an (N, C, H, W) input but gets %s %s", is, src);
            return spec_err(e, i, L->name, d, "move it before Flatten(), or feed images");
        }
        if (get_pair(o, "kernel_size", k, zero) || k[0] < 1 || k[1] < 1)
            return spec_err(e, i, L->name, "has no valid kernel_size in its spec", "give kernel_size >= 1");
        if (get_pair(o, "stride", st, L->kind == TAAS_L_CONV2D ? one : k) || st[0] < 1 || st[1] < 1)
            return spec_err(e, i, L->name, "has an invalid stride in its spec", "give stride >= 1");
        const json_t *pv = json_object_get(o, "padding");
        if (json_is_string(pv)) {
            const char *ps = json_string_value(pv);
            if (strcmp(ps, "valid") == 0) pad[0] = pad[1] = 0;
            else if (strcmp(ps, "same") == 0 && k[0] % 2 == 1 && k[1] % 2 == 1 && st[0] == 1 && st[1] == 1) {
                pad[0] = k[0] / 2;
                pad[1] = k[1] / 2;
            } else {
                return spec_err(e, i, L->name, "has padding='same' with an even kernel or a stride, which the trainer does not support",
                                "use an odd kernel_size with stride 1, or give the padding as numbers");
            }
        } else if (get_pair(o, "padding", pad, zero) || pad[0] < 0 || pad[1] < 0) {
            return spec_err(e, i, L->name, "has an invalid padding in its spec", "give padding >= 0");
        }
        L->kh = k[0]; L->kw = k[1]; L->sh = st[0]; L->sw = st[1]; L->ph = pad[0]; L->pw = pad[1];
        if (in.d[1] + 2 * pad[0] < k[0] || in.d[2] + 2 * pad[1] < k[1]) {
            snprintf(d, sizeof d, "(kernel_size=(%d, %d), padding=(%d, %d)) is bigger than its %dx%d input %s %s",
                     k[0], k[1], pad[0], pad[1], in.d[1], in.d[2], is, src);
            return spec_err(e, i, L->name, d,
                            "use a smaller kernel_size, more padding, or fewer downsampling layers before it");
        }
        if (L->kind == TAAS_L_CONV2D) {
            int ic = lazy ? in.d[0] : get_int(o, "in_channels", -1);
            L->oc = get_int(o, "out_channels", -1);
            if (L->oc < 1 || ic < 1)
                return spec_err(e, i, L->name, "has no valid in_channels/out_channels in its spec",
                                "give positive in_channels and out_channels");
            if (ic != in.d[0]) {
                taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d: Conv2d(in_channels=%d) gets %d channels %s %s",
                               i, ic, in.d[0], is, src);
                taas_error_hint(e, "write Conv2d(%d, %d, ...), or LazyConv2d(%d, ...) to infer it", in.d[0],
                                L->oc, L->oc);
                return -1;
            }
            taas_conv2d_shape cs = {1, in.d[0], in.d[1], in.d[2], L->oc, k[0], k[1], st[0], st[1], pad[0], pad[1]};
            if (taas_conv2d_check(&cs, e)) return -1;
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
                taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d: %s on %s %s: %s", i, L->name, is, src, msg);
                taas_error_hint(e, "%s", hint[0] ? hint : "use a padding of at most half the kernel, or a smaller kernel");
                return -1;
            }
            L->out.d[1] = taas_pool2d_out_h(&ps);
            L->out.d[2] = taas_pool2d_out_w(&ps);
        }
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
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d: %s: %s", i, L->name, msg);
            taas_error_hint(e, "give a dropout probability p between 0 and 1");
            return -1;
        }
        if (L->kind == TAAS_L_DROPOUT2D && in.rank != 3) {
            snprintf(d, sizeof d, "needs an (N, C, H, W) input but gets %s %s", is, src);
            return spec_err(e, i, L->name, d, "use Dropout for (N, features) inputs");
        }
        return 0;
    case TAAS_L_BATCHNORM1D:
    case TAAS_L_BATCHNORM2D: {
        int want = L->kind == TAAS_L_BATCHNORM1D ? 1 : 3;
        int nf = get_int(o, "num_features", -1);
        if (in.rank != want) {
            snprintf(d, sizeof d, "needs an %s input but gets %s %s",
                     want == 1 ? "(N, features)" : "(N, C, H, W)", is, src);
            return spec_err(e, i, L->name, d,
                            want == 1 ? "use BatchNorm2d on images, or Flatten() first" : "use BatchNorm1d after Flatten()");
        }
        if (nf != in.d[0]) {
            taas_error_set(e, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d: %s(num_features=%d) gets %d %s %s %s", i,
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
            return spec_err(e, i, L->name, d, "make the input smaller first (a pooling or strided layer)");
        }
        L->out.rank = 1;
        L->out.d[0] = (int)shape_numel(&in);
        return 0;
    case TAAS_L_LOG_SOFTMAX:
    case TAAS_L_SOFTMAX: {
        const json_t *dv = json_object_get(o, "dim");
        int dim = json_is_integer(dv) ? (int)json_integer_value(dv) : 1;
        int r = in.rank + 1;
        if (dim < 0) dim += r;
        if (dim != 1) {
            snprintf(d, sizeof d, "over dim=%d of %s %s: the trainer supports only dim=1", dim, is, src);
            return spec_err(e, i, L->name, d, "use dim=1 (the class dimension)");
        }
        return 0;
    }
    default:
        return 0;
    }
}

static int add_entry(taas_model_plan *m, int layer, const char *what, taas_tensor_home home, size_t off,
                     int ndim, const int64_t *shape) {
    taas_param_entry *t = &m->table[m->ntable++];
    snprintf(t->key, sizeof t->key, "%d.%s", layer, what);
    t->ndim = ndim;
    t->numel = 1;
    for (int k = 0; k < ndim; k++) { t->shape[k] = shape[k]; t->numel = taas_size_mul(t->numel, (size_t)shape[k]); }
    t->dtype = home == TAAS_T_COUNTER ? "I64" : "F32";
    t->home = home;
    t->offset = off;
    return 0;
}

/* Offsets in state_dict order: weight, bias, running_mean, running_var, num_batches_tracked. */
static void layout(taas_model_plan *m) {
    for (int i = 0; i < m->nlayers; i++) {
        taas_model_layer *L = &m->layers[i];
        if (L->kind == TAAS_L_LINEAR) {
            int64_t ws[2] = {L->lin_out, L->lin_in}, bs[1] = {L->lin_out};
            L->w_off = m->nparams;
            add_entry(m, i, "weight", TAAS_T_PARAM, m->nparams, 2, ws);
            m->nparams = taas_size_add(m->nparams, taas_size_mul((size_t)L->lin_out, (size_t)L->lin_in));
            if (L->has_b) {
                L->b_off = m->nparams;
                add_entry(m, i, "bias", TAAS_T_PARAM, m->nparams, 1, bs);
                m->nparams = taas_size_add(m->nparams, (size_t)L->lin_out);
            }
        } else if (L->kind == TAAS_L_CONV2D) {
            int64_t ws[4] = {L->oc, L->in.d[0], L->kh, L->kw}, bs[1] = {L->oc};
            L->w_off = m->nparams;
            add_entry(m, i, "weight", TAAS_T_PARAM, m->nparams, 4, ws);
            m->nparams = taas_size_add(m->nparams, taas_size_mul(taas_size_mul((size_t)L->oc, (size_t)L->in.d[0]),
                                                                 taas_size_mul((size_t)L->kh, (size_t)L->kw)));
            if (L->has_b) {
                L->b_off = m->nparams;
                add_entry(m, i, "bias", TAAS_T_PARAM, m->nparams, 1, bs);
                m->nparams = taas_size_add(m->nparams, (size_t)L->oc);
            }
        } else if (L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D) {
            int64_t cs[1] = {L->in.d[0]};
            size_t c = (size_t)L->in.d[0];
            L->w_off = m->nparams;
            add_entry(m, i, "weight", TAAS_T_PARAM, m->nparams, 1, cs);
            L->b_off = m->nparams + c;
            add_entry(m, i, "bias", TAAS_T_PARAM, m->nparams + c, 1, cs);
            m->nparams = taas_size_add(m->nparams, taas_size_mul(2, c));
            L->rm_off = m->nstats;
            add_entry(m, i, "running_mean", TAAS_T_STAT, m->nstats, 1, cs);
            L->rv_off = m->nstats + c;
            add_entry(m, i, "running_var", TAAS_T_STAT, m->nstats + c, 1, cs);
            m->nstats = taas_size_add(m->nstats, taas_size_mul(2, c));
            L->counter = m->ncounters;
            add_entry(m, i, "num_batches_tracked", TAAS_T_COUNTER, (size_t)m->ncounters++, 0, cs);
        }
    }
}


void taas_model_plan_free(taas_model_plan *p) {
    if (!p) return;
    free(p->layers);
    free(p->table);
    memset(p, 0, sizeof *p);
}

/* The fusion rules (model_plan.h): decided here only. */
static void plan_fusion(taas_model_plan *p) {
    for (int i = 0; i < p->nlayers; i++) {
        taas_model_layer *L = &p->layers[i];
        if (i > 0 && L->kind == TAAS_L_RELU && p->layers[i - 1].kind == TAAS_L_CONV2D) {
            p->layers[i - 1].fusion = TAAS_FUSE_RELU;
            L->fusion = TAAS_FUSED;
        }
        /* Dropout with p = 0 is the identity, as in PyTorch (no mask drawn, nothing scaled) */
        int identity = (L->kind == TAAS_L_DROPOUT || L->kind == TAAS_L_DROPOUT2D) && L->p == 0.0f;
        L->in_place = L->kind == TAAS_L_FLATTEN || L->fusion == TAAS_FUSED || identity;
    }
}

int taas_model_plan_build(taas_model_plan *p, const json_t *spec, int c, int h, int w, taas_error *err) {
    memset(p, 0, sizeof *p);
    const json_t *ty = json_object_get(spec, "type"), *layers = json_object_get(spec, "layers");
    if (!json_is_string(ty) || strcmp(json_string_value(ty), "Sequential") != 0 || !json_is_array(layers)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the model spec is not a Sequential with a layers list");
        taas_error_hint(err, "build the model as Sequential(layer, layer, ...)");
        return -1;
    }
    if (c < 0 || h < 0 || w < 0 || (h == 0) != (w == 0) || (c == 0 && h != 0)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "invalid input shape (N, %d, %d, %d) for the model", c, h, w);
        taas_error_hint(err, "give (C, H, W) with positive sizes, or (F, 0, 0) for flat inputs");
        return -1;
    }
    size_t nl = json_array_size(layers);
    if (nl == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the Sequential has no layers");
        taas_error_hint(err, "add at least one layer, e.g. Sequential(Flatten(), LazyLinear(10))");
        return -1;
    }
    p->nlayers = (int)nl;
    p->layers = calloc(nl, sizeof *p->layers);
    p->table = calloc(nl * 5, sizeof *p->table);  /* at most 5 tensors a layer (BatchNorm) */
    if (!p->layers || !p->table) {
        taas_model_plan_free(p);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory planning the model");
        taas_error_hint(err, "use a smaller model");
        return -1;
    }
    p->in_shape = c == 0 ? (taas_act_shape){0, {0, 0, 0}}
                  : h == 0 ? (taas_act_shape){1, {c, 0, 0}} : (taas_act_shape){3, {c, h, w}};
    taas_act_shape cur = p->in_shape;
    for (int i = 0; i < p->nlayers; i++) {
        const json_t *o = json_array_get(layers, (size_t)i);
        const json_t *lt = json_object_get(o, "type");
        taas_model_layer *L = &p->layers[i];
        size_t k, nk = sizeof kinds / sizeof kinds[0];
        const char *tn = json_is_string(lt) ? json_string_value(lt) : "";
        for (k = 0; k < nk && strcmp(kinds[k].name, tn) != 0; k++) {}
        if (k == nk) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "layer %d: %s is not a layer the trainer supports", i,
                           *tn ? tn : "(a value without a type)");
            taas_error_hint(err, "use Linear, Conv2d, pools, activations, Dropout, BatchNorm, Flatten or (Log)Softmax");
            taas_model_plan_free(p);
            return -1;
        }
        L->kind = kinds[k].kind;
        snprintf(L->name, sizeof L->name, "%s", tn);
        if (infer_layer(p, i, o, cur, err)) {
            taas_model_plan_free(p);
            return -1;
        }
        cur = L->out;
    }
    plan_fusion(p);
    layout(p);
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
