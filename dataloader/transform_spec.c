/* Transform specs (what the kernel's taas_value_spec makes of Compose([...]) and friends)
 * into a flat chain of steps. What can be checked without an image is checked here: names,
 * parameter types, and the order of ToTensor and Normalize. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "transform_chain.h"
#include "utf8.h"

#define KNOWN                                                                                          \
    "ToTensor, Normalize, RandomCrop, RandomHorizontalFlip, Resize, CenterCrop, RandomResizedCrop, " \
    "ColorJitter, Compose"

/* A spec value as a message quotes it. */
static const char *show(const json_t *v, char *buf, size_t n) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    taas_utf8_clip(buf, n, s ? s : "?", s ? strlen(s) : 1, 60);
    free(s);
    return buf;
}

const char *tx_step_name(const tx_step *s) {
    switch (s->kind) {
    case ST_TO_TENSOR: return "ToTensor";
    case ST_NORMALIZE: return "Normalize";
    case ST_RANDOM_CROP: return "RandomCrop";
    case ST_FLIP: return "RandomHorizontalFlip";
    case ST_RESIZE: return "Resize";
    case ST_CENTER_CROP: return "CenterCrop";
    case ST_RANDOM_RESIZED_CROP: return "RandomResizedCrop";
    case ST_COLOR_JITTER: return "ColorJitter";
    }
    return "?";
}

void tx_step_where(const taas_transform *t, int i, char *out, size_t n) {
    if (t->n == 1)
        snprintf(out, n, "%s", tx_step_name(&t->steps[i]));
    else
        snprintf(out, n, "%s (transform %d of %d)", tx_step_name(&t->steps[i]), i + 1, t->n);
}

static const char *example(const char *name) {
    static const char *const ex[][2] = {
        {"RandomCrop", "RandomCrop(28, padding=4)"},
        {"Resize", "Resize(32) or Resize((32, 48))"},
        {"Normalize", "Normalize((0.5,), (0.5,))"},
        {"RandomHorizontalFlip", "RandomHorizontalFlip(p=0.5)"},
        {"CenterCrop", "CenterCrop(24)"},
        {"RandomResizedCrop", "RandomResizedCrop(224, scale=(0.08, 1.0), ratio=(0.75, 1.3333))"},
        {"ColorJitter", "ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)"},
        {"Compose", "Compose([ToTensor(), Normalize((0.5,), (0.5,))])"},
    };
    for (size_t i = 0; i < sizeof ex / sizeof *ex; i++)
        if (strcmp(ex[i][0], name) == 0) return ex[i][1];
    return "Compose([ToTensor()])";
}

static int bad(taas_error *err, const char *name, const char *param, const json_t *v, const char *want) {
    char b[96];
    taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "%s() %s must be %s, got %s", name, param, want,
                   v ? show(v, b, sizeof b) : "nothing");
    taas_error_hint(err, "write it as torchvision does, e.g. %s", example(name));
    return -1;
}

static int get_int(const json_t *v, int lo, int *out) {
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    if (x < lo || x > 1000000) return -1;
    *out = (int)x;
    return 0;
}

/* size: an int or [h, w] (a one-element list is an int, as torchvision). */
static int parse_size(const json_t *o, const char *name, tx_step *s, int allow_short, taas_error *err) {
    const json_t *v = json_object_get(o, "size");
    const char *want = allow_short ? "an int (the smaller edge) or (h, w) of ints >= 1"
                                   : "an int or (h, w) of ints >= 1";
    if (json_is_integer(v)) {
        if (get_int(v, 1, &s->size_h) < 0) return bad(err, name, "size", v, want);
        s->size_w = s->size_h;
        s->size_n = allow_short ? 1 : 2;
        return 0;
    }
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 1 || n == 2) {
        if (get_int(json_array_get(v, 0), 1, &s->size_h) < 0 ||
            get_int(json_array_get(v, n - 1), 1, &s->size_w) < 0)
            return bad(err, name, "size", v, want);
        s->size_n = (n == 1 && allow_short) ? 1 : 2;
        return 0;
    }
    return bad(err, name, "size", v, want);
}

static int parse_floats(const json_t *v, const char *name, const char *param, int *n, float *out_f,
                        taas_error *err) {
    size_t k = json_is_array(v) ? json_array_size(v) : json_is_number(v) ? 1 : 0;
    if (k == 0 || k > 64) return bad(err, name, param, v, "a number or a tuple of numbers");
    for (size_t i = 0; i < k; i++) {
        const json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_number(x)) {
            char b[96];
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s() %s must be finite numbers, got %s", name,
                           param, show(v, b, sizeof b));
            taas_error_hint(err, "give plain numbers, e.g. Normalize((0.2860,), (0.3530,))");
            return -1;
        }
        out_f[i] = (float)json_number_value(x);
    }
    *n = (int)k;
    return 0;
}

static int parse_normalize(const json_t *o, tx_step *s, taas_error *err) {
    float mean[64], std[64];
    if (parse_floats(json_object_get(o, "mean"), "Normalize", "mean", &s->nmean, mean, err) < 0 ||
        parse_floats(json_object_get(o, "std"), "Normalize", "std", &s->nstd, std, err) < 0)
        return -1;
    if (s->nmean != s->nstd && s->nmean != 1 && s->nstd != 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "Normalize() mean has %d values but std has %d",
                       s->nmean, s->nstd);
        taas_error_hint(err, "give one value per channel in both, e.g. Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))");
        return -1;
    }
    for (int i = 0; i < s->nstd; i++) {
        if (std[i] == 0.0f) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "Normalize() std evaluated to zero after conversion to float32, leading to "
                           "division by zero (std[%d] = %g)", i, (double)std[i]);
            taas_error_hint(err, "give each channel's standard deviation (> 0)");
            return -1;
        }
    }
    s->mean = malloc((size_t)s->nmean * sizeof *s->mean);
    s->std = malloc((size_t)s->nstd * sizeof *s->std);
    if (!s->mean || !s->std) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory");
    memcpy(s->mean, mean, (size_t)s->nmean * sizeof *mean);
    memcpy(s->std, std, (size_t)s->nstd * sizeof *std);
    return 0;
}

static int parse_padmode(const json_t *v, const char *name, tx_padmode *m, taas_error *err) {
    static const char *const names[] = {"constant", "edge", "reflect", "symmetric"};
    if (!v || json_is_null(v)) {
        *m = TX_PAD_CONSTANT;
        return 0;
    }
    for (int i = 0; json_is_string(v) && i < 4; i++) {
        if (strcmp(json_string_value(v), names[i]) == 0) {
            *m = (tx_padmode)i;
            return 0;
        }
    }
    char b[96];
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                   "%s() padding_mode should be either constant, edge, reflect or symmetric, got %s", name,
                   show(v, b, sizeof b));
    taas_error_hint(err, "padding_mode='constant' pads with fill; 'reflect' mirrors the image");
    return -1;
}

static int parse_random_crop(const json_t *o, tx_step *s, taas_error *err) {
    if (parse_size(o, "RandomCrop", s, 0, err) < 0) return -1;
    const json_t *p = json_object_get(o, "padding");
    const char *pwant = "an int, (left/right, top/bottom) or (left, top, right, bottom) of ints >= 0";
    if (p && !json_is_null(p)) {
        int v[4];
        size_t n = json_is_integer(p) ? 1 : json_is_array(p) ? json_array_size(p) : 0;
        if (n != 1 && n != 2 && n != 4) return bad(err, "RandomCrop", "padding", p, pwant);
        for (size_t i = 0; i < n; i++)
            if (get_int(json_is_array(p) ? json_array_get(p, i) : p, 0, &v[i]) < 0)
                return bad(err, "RandomCrop", "padding", p, pwant);
        s->has_padding = 1;
        if (n == 1) s->pad[0] = s->pad[1] = s->pad[2] = s->pad[3] = v[0];
        if (n == 2) s->pad[0] = s->pad[2] = v[0], s->pad[1] = s->pad[3] = v[1];
        if (n == 4) memcpy(s->pad, v, sizeof v);
    }
    const json_t *pin = json_object_get(o, "pad_if_needed");
    if (pin && !json_is_boolean(pin)) return bad(err, "RandomCrop", "pad_if_needed", pin, "True or False");
    s->pad_if_needed = json_is_true(pin);
    const json_t *f = json_object_get(o, "fill");
    size_t nf = !f || json_is_null(f) ? 0 : json_is_number(f) ? 1 : json_is_array(f) ? json_array_size(f) : 0;
    if (f && !json_is_null(f) && (nf == 0 || nf > 64))
        return bad(err, "RandomCrop", "fill", f, "a number or a tuple of numbers");
    s->fill_seq = json_is_array(f);
    s->nfill = nf ? (int)nf : 1;
    s->fill = calloc((size_t)s->nfill, sizeof *s->fill);
    if (!s->fill) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory");
    for (size_t i = 0; i < nf; i++) {
        const json_t *x = json_is_array(f) ? json_array_get(f, i) : f;
        if (!json_is_number(x)) return bad(err, "RandomCrop", "fill", f, "finite numbers");
        s->fill[i] = json_number_value(x);
    }
    return parse_padmode(json_object_get(o, "padding_mode"), "RandomCrop", &s->mode, err);
}

static int parse_flip(const json_t *o, tx_step *s, taas_error *err) {
    const json_t *p = json_object_get(o, "p");
    if (!p) {
        s->p = 0.5;
        return 0;
    }
    if (!json_is_number(p) || !(json_number_value(p) >= 0.0 && json_number_value(p) <= 1.0))
        return bad(err, "RandomHorizontalFlip", "p", p, "a probability between 0 and 1");
    s->p = json_number_value(p);
    return 0;
}

static int parse_interp(const json_t *o, const char *name, tx_step *s, taas_error *err) {
    const json_t *ip = json_object_get(o, "interpolation");
    s->interp = TX_BILINEAR;
    if (ip && !json_is_null(ip)) {
        const char *v = json_is_string(ip) ? json_string_value(ip) : "";
        if (strcmp(v, "nearest") == 0) s->interp = TX_NEAREST;
        else if (strcmp(v, "bicubic") == 0) s->interp = TX_BICUBIC;
        else if (strcmp(v, "bilinear") != 0) {
            char b[96];
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "%s() interpolation must be 'nearest', 'bilinear' or 'bicubic', got %s", name,
                           show(ip, b, sizeof b));
            taas_error_hint(err, "leave it out for bilinear, torchvision's default");
            return -1;
        }
    }
    return 0;
}

static int parse_antialias(const json_t *o, const char *name, tx_step *s, taas_error *err) {
    const json_t *aa = json_object_get(o, "antialias");
    if (aa && !json_is_null(aa) && !json_is_boolean(aa)) return bad(err, name, "antialias", aa, "None, True or False");
    s->antialias = (!aa || json_is_null(aa)) ? -1 : json_is_true(aa);
    return 0;
}

static int parse_resize(const json_t *o, tx_step *s, taas_error *err) {
    if (parse_size(o, "Resize", s, 1, err) < 0) return -1;
    if (parse_interp(o, "Resize", s, err) < 0) return -1;
    const json_t *ms = json_object_get(o, "max_size");
    if (ms && !json_is_null(ms) && get_int(ms, 1, &s->max_size) < 0)
        return bad(err, "Resize", "max_size", ms, "None or an int >= 1");
    if (s->max_size && s->size_n != 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "Resize() max_size should only be passed if size specifies the length of the "
                       "smaller edge, i.e. size should be an int");
        taas_error_hint(err, "give size as an int, or leave max_size=None");
        return -1;
    }
    if (s->max_size && s->max_size <= s->size_h) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "Resize() max_size = %d must be strictly greater than the requested size for "
                       "the smaller edge size = %d", s->max_size, s->size_h);
        taas_error_hint(err, "raise max_size, or leave it None");
        return -1;
    }
    return parse_antialias(o, "Resize", s, err);
}

/* scale or ratio: (min, max) of finite numbers, min <= max; ratio > 0 (its log is drawn). */
static int parse_range(const json_t *o, const char *param, double lo_bound, double dflt0, double dflt1,
                       double out[2], taas_error *err) {
    const json_t *v = json_object_get(o, param);
    out[0] = dflt0;
    out[1] = dflt1;
    if (!v || json_is_null(v)) return 0;
    if (json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) || !json_is_number(json_array_get(v, 1)))
        return bad(err, "RandomResizedCrop", param, v, "a (min, max) pair of numbers");
    out[0] = json_number_value(json_array_get(v, 0));
    out[1] = json_number_value(json_array_get(v, 1));
    if (!(out[0] <= out[1]) || !(out[0] > lo_bound)) {
        char b[96];
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "RandomResizedCrop() %s should be of kind (min, max) with min > %g, got %s", param, lo_bound,
                       show(v, b, sizeof b));
        taas_error_hint(err, "torchvision only warns here and then fails drawing; give e.g. %s",
                        param[0] == 's' ? "scale=(0.08, 1.0)" : "ratio=(3 / 4, 4 / 3)");
        return -1;
    }
    return 0;
}

static int parse_random_resized_crop(const json_t *o, tx_step *s, taas_error *err) {
    if (parse_size(o, "RandomResizedCrop", s, 0, err) < 0 ||
        parse_range(o, "scale", 0.0, 0.08, 1.0, s->scale, err) < 0 ||
        parse_range(o, "ratio", 0.0, 3.0 / 4.0, 4.0 / 3.0, s->ratio, err) < 0 ||
        parse_interp(o, "RandomResizedCrop", s, err) < 0)
        return -1;
    return parse_antialias(o, "RandomResizedCrop", s, err);
}

/* torchvision's ColorJitter._check_input: a number v gives (center - v, center + v),
 * clipped at 0 for the first three; a pair must lie within the bounds; (center, center)
 * is None. */
static int parse_jitter(const json_t *o, tx_step *s, taas_error *err) {
    static const char *const names[] = {"brightness", "contrast", "saturation", "hue"};
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(o, names[k]);
        /* the kernel writes a number as a list of one (its float-or-tuple parameters) */
        if (json_array_size(v) == 1) v = json_array_get(v, 0);
        double center = k < 3 ? 1.0 : 0.0, lo = k < 3 ? 0.0 : -0.5, hi = k < 3 ? INFINITY : 0.5, *r = s->jit[k];
        char b[96];
        if (!v || json_is_null(v)) {
            r[0] = r[1] = center;
        } else if (json_is_number(v)) {
            double x = json_number_value(v);
            if (x < 0) {
                taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                               "ColorJitter() if %s is a single number, it must be non negative, got %s", names[k],
                               show(v, b, sizeof b));
                taas_error_hint(err, "give a factor >= 0, or a (min, max) pair");
                return -1;
            }
            r[0] = center - x;
            r[1] = center + x;
            if (k < 3 && r[0] < 0) r[0] = 0;
        } else if (json_array_size(v) == 2 && json_is_number(json_array_get(v, 0)) &&
                   json_is_number(json_array_get(v, 1))) {
            r[0] = json_number_value(json_array_get(v, 0));
            r[1] = json_number_value(json_array_get(v, 1));
        } else {
            return bad(err, "ColorJitter", names[k], v, "a number or a (min, max) pair");
        }
        if (!(lo <= r[0] && r[0] <= r[1] && r[1] <= hi)) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "ColorJitter() %s values should be between (%g, %s), got %s",
                           names[k], lo, k < 3 ? "inf" : "0.5", show(v, b, sizeof b));
            taas_error_hint(err, "%s", k < 3 ? "factors are >= 0: 1 leaves the image as it is"
                                            : "hue shifts lie in [-0.5, 0.5]: 0 leaves the image as it is");
            return -1;
        }
        s->jit_on[k] = !(r[0] == center && r[1] == center);
    }
    return 0;
}

/* Keys a step may have besides "type"; anything else is a misspelt parameter. */
static int check_keys(const json_t *o, const char *name, const char *const *keys, taas_error *err) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        int ok = strcmp(k, "type") == 0;
        for (int i = 0; !ok && keys[i]; i++) ok = strcmp(k, keys[i]) == 0;
        if (!ok) {
            char b[96];
            taas_utf8_clip(b, sizeof b, k, strlen(k), 40);
            taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "%s() got an unexpected parameter '%s'", name, b);
            char list[256] = "";
            for (int i = 0; keys[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", keys[i]);
            if (keys[0])
                taas_error_hint(err, "%s() takes %s", name, list);
            else
                taas_error_hint(err, "%s() takes no parameters", name);
            return -1;
        }
    }
    return 0;
}

static int add_step(taas_transform *t, const json_t *o, int depth, taas_error *err);

static int add_compose(taas_transform *t, const json_t *o, int depth, taas_error *err) {
    static const char *const keys[] = {"transforms", NULL};
    if (check_keys(o, "Compose", keys, err) < 0) return -1;
    const json_t *list = json_object_get(o, "transforms");
    if (!json_is_array(list)) return bad(err, "Compose", "transforms", list, "a list of transforms");
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        if (add_step(t, item, depth + 1, err) < 0) return -1;
    }
    return 0;
}

static int add_step(taas_transform *t, const json_t *o, int depth, taas_error *err) {
    char b[96];
    if (depth > 16) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "Compose() nested more than 16 deep");
        taas_error_hint(err, "list the transforms in one Compose([...])");
        return -1;
    }
    const char *type = json_is_object(o) ? json_string_value(json_object_get(o, "type")) : NULL;
    if (!type) {
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "a transform spec must be an object with a \"type\", got %s",
                       show(o, b, sizeof b));
        taas_error_hint(err, "transforms are one of " KNOWN);
        return -1;
    }
    if (strcmp(type, "Compose") == 0) return add_compose(t, o, depth, err);
    if (t->n >= TX_MAX_STEPS) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "a chain of more than %d transforms", TX_MAX_STEPS);
        taas_error_hint(err, "shorten the Compose([...]) list");
        return -1;
    }
    tx_step *s = &t->steps[t->n];
    memset(s, 0, sizeof *s);
    int rc;
    if (strcmp(type, "ToTensor") == 0) {
        static const char *const keys[] = {NULL};
        s->kind = ST_TO_TENSOR;
        rc = check_keys(o, type, keys, err);
    } else if (strcmp(type, "Normalize") == 0) {
        static const char *const keys[] = {"mean", "std", "inplace", NULL};
        s->kind = ST_NORMALIZE;
        rc = check_keys(o, type, keys, err) < 0 ? -1 : parse_normalize(o, s, err);
    } else if (strcmp(type, "RandomCrop") == 0) {
        static const char *const keys[] = {"size", "padding", "pad_if_needed", "fill", "padding_mode", NULL};
        s->kind = ST_RANDOM_CROP;
        rc = check_keys(o, type, keys, err) < 0 ? -1 : parse_random_crop(o, s, err);
    } else if (strcmp(type, "RandomHorizontalFlip") == 0) {
        static const char *const keys[] = {"p", NULL};
        s->kind = ST_FLIP;
        rc = check_keys(o, type, keys, err) < 0 ? -1 : parse_flip(o, s, err);
    } else if (strcmp(type, "Resize") == 0) {
        static const char *const keys[] = {"size", "interpolation", "max_size", "antialias", NULL};
        s->kind = ST_RESIZE;
        rc = check_keys(o, type, keys, err) < 0 ? -1 : parse_resize(o, s, err);
    } else if (strcmp(type, "CenterCrop") == 0) {
        static const char *const keys[] = {"size", NULL};
        s->kind = ST_CENTER_CROP;
        rc = check_keys(o, type, keys, err) < 0 ? -1 : parse_size(o, "CenterCrop", s, 0, err);
    } else if (strcmp(type, "RandomResizedCrop") == 0) {
        static const char *const keys[] = {"size", "scale", "ratio", "interpolation", "antialias", NULL};
        s->kind = ST_RANDOM_RESIZED_CROP;
        rc = check_keys(o, type, keys, err) < 0 ? -1 : parse_random_resized_crop(o, s, err);
    } else if (strcmp(type, "ColorJitter") == 0) {
        static const char *const keys[] = {"brightness", "contrast", "saturation", "hue", NULL};
        s->kind = ST_COLOR_JITTER;
        rc = check_keys(o, type, keys, err) < 0 ? -1 : parse_jitter(o, s, err);
    } else {
        taas_utf8_clip(b, sizeof b, type, strlen(type), 40);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "'%s' is not a transform the data loaders know", b);
        taas_error_hint(err, "use one of " KNOWN);
        return -1;
    }
    t->n++; /* counted even on error, so that tx_steps_free frees what it holds */
    return rc;
}

/* ToTensor's tables, fused with a Normalize right after it: the same float32 arithmetic as
 * torch (x / 255, then (x - mean) / std), done once per byte value instead of per pixel. */
static int build_luts(taas_transform *t, taas_error *err) {
    for (int i = 0; i < t->n; i++) {
        tx_step *s = &t->steps[i];
        if (s->kind != ST_TO_TENSOR) continue;
        tx_step *nx = i + 1 < t->n && t->steps[i + 1].kind == ST_NORMALIZE ? &t->steps[i + 1] : NULL;
        s->nlut = nx ? (nx->nmean > nx->nstd ? nx->nmean : nx->nstd) : 1;
        s->lut = malloc((size_t)s->nlut * 256 * sizeof *s->lut);
        if (!s->lut) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory");
        for (int ch = 0; ch < s->nlut; ch++) {
            for (int v = 0; v < 256; v++) {
                float x = (float)v / 255.0f;
                if (nx) x = (x - nx->mean[nx->nmean == 1 ? 0 : ch]) / nx->std[nx->nstd == 1 ? 0 : ch];
                s->lut[ch * 256 + v] = x;
            }
        }
        if (nx) nx->fused = 1;
    }
    for (int v = 0; v < 256; v++) t->to_tensor_lut[v] = (float)v / 255.0f;
    return 0;
}

int tx_parse(taas_transform *t, const json_t *spec, taas_error *err) {
    t->steps = calloc(TX_MAX_STEPS, sizeof *t->steps);
    if (!t->steps) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory");
    if (spec && !json_is_null(spec) && add_step(t, spec, 0, err) < 0) return -1;
    int tensor = 0;
    for (int i = 0; i < t->n; i++) {
        tx_step *s = &t->steps[i];
        char where[96];
        tx_step_where(t, i, where, sizeof where);
        if (s->kind == ST_TO_TENSOR && tensor) {
            taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS,
                           "%s gets a tensor: pic should be an image, ToTensor() appears twice", where);
            taas_error_hint(err, "keep one ToTensor() in the chain");
            return -1;
        }
        if (s->kind == ST_NORMALIZE && !tensor) {
            taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS,
                           "%s needs a tensor, but it comes before ToTensor()", where);
            taas_error_hint(err, "put ToTensor() before Normalize(...): Compose([ToTensor(), Normalize(...)])");
            return -1;
        }
        s->on_tensor = tensor;
        if (s->kind == ST_TO_TENSOR) tensor = 1;
    }
    return build_luts(t, err);
}

void tx_steps_free(taas_transform *t) {
    for (int i = 0; t->steps && i < t->n; i++) {
        free(t->steps[i].mean);
        free(t->steps[i].std);
        free(t->steps[i].fill);
        free(t->steps[i].lut);
    }
    free(t->steps);
    t->steps = NULL;
    t->n = 0;
}
