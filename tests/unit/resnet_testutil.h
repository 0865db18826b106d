/* The ResNet fixtures (tests/data/resnet/, one file a model, made by tests/gen_resnet_ref.py from
 * torchvision): the formula both sides fill every state_dict tensor and the batch from, and
 * the comparison of a tensor with the fixture's summary of torch's (sum, sum of magnitudes,
 * 16 elements). Shared by the CPU's test (test_resnet.c) and the CUDA one. */
#ifndef TAAS_RESNET_TESTUTIL_H
#define TAAS_RESNET_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "model.h"


/* Element j of tensor k: in [-1, 1), exactly as the generator's numpy computes it
 * (splitmix64 of j + (k + 1) * golden, its top 53 bits). */
static inline double rt_unit(uint64_t k, uint64_t j) {
    uint64_t z = j + (k + 1) * 0x9E3779B97F4A7C15u;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* The batch: the formula's tensor `index` (the fixture's input_index), times 2. */
static inline void rt_input(float *x, size_t n, uint64_t index) {
    for (size_t j = 0; j < n; j++) x[j] = (float)(2.0 * rt_unit(index, j));
}

/* Every tensor of the model's table, in state_dict order k, from the formula (the
 * generator's fill()); the table's keys and shapes must be the fixture's, in order. */
static inline int rt_fill(taas_model *m, const json_t *keys) {
    if (json_array_size(keys) != m->ntable) {
        fprintf(stderr, "the model has %zu state_dict tensors, torchvision %zu\n", m->ntable, json_array_size(keys));
        return -1;
    }
    for (size_t k = 0; k < m->ntable; k++) {
        const taas_param_entry *t = &m->table[k];
        const json_t *row = json_array_get(keys, k), *shape = json_array_get(row, 1);
        if (strcmp(t->key, json_string_value(json_array_get(row, 0))) != 0 || (size_t)t->ndim != json_array_size(shape)) {
            fprintf(stderr, "state_dict tensor %zu: taas %s, torchvision %s\n", k, t->key,
                    json_string_value(json_array_get(row, 0)));
            return -1;
        }
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] != json_integer_value(json_array_get(shape, (size_t)d))) {
                fprintf(stderr, "%s: dimension %d is %lld, torchvision's %lld\n", t->key, d, (long long)t->shape[d],
                        (long long)json_integer_value(json_array_get(shape, (size_t)d)));
                return -1;
            }
        if (t->home == TAAS_T_COUNTER) {
            m->counters[t->offset] = 0;
            continue;
        }
        float *v = (t->home == TAAS_T_PARAM ? m->params : m->stats) + t->offset;
        const char *leaf = strrchr(t->key, '.');
        leaf = leaf ? leaf + 1 : t->key;
        double fan_in = t->ndim > 1 ? (double)(t->numel / (size_t)t->shape[0]) : 0;
        for (size_t j = 0; j < t->numel; j++) {
            double u = rt_unit(k, j);
            if (t->ndim > 1) u = u * sqrt(3.0 / fan_in);
            else if (strcmp(leaf, "running_var") == 0) u = 1.0 + 0.25 * (u + 1.0);
            else if (strcmp(leaf, "weight") == 0) u = 1.0 + 0.25 * u;
            else u = 0.25 * u;
            v[j] = (float)u;
        }
    }
    return 0;
}

/* The fixture's numbers are float64; float32 is allowed RT_TIMES torch's own float32 distance
 * from them (err, serr: a train-mode BatchNorm over few values amplifies rounding), plus
 * `floor` of the magnitude. */
#define RT_TIMES 4.0

/* got (n floats) against torch's summary: the sums, and each sampled element, allowed ten
 * times `floor` of the tensor's mean magnitude beside its own (an element of a gradient that
 * 50 layers summed in another order carries their rounding). 0, or -1 after
 * saying what differs. */
static inline int rt_check(const float *got, size_t n, const json_t *want, double floor, const char *what) {
    double sum = 0, abs = 0;
    for (size_t j = 0; j < n; j++) sum += got[j], abs += fabs(got[j]);
    double wabs = json_number_value(json_object_get(want, "abs")), scale = wabs / (double)n + 1e-12;
    double serr = RT_TIMES * json_number_value(json_object_get(want, "serr")) + floor * (wabs + 1e-9);
    double err = RT_TIMES * json_number_value(json_object_get(want, "err"));
    if (fabs(sum - json_number_value(json_object_get(want, "sum"))) > serr || fabs(abs - wabs) > serr) {
        fprintf(stderr, "%s: sum %.8g |sum| %.8g, torch %.8g %.8g (allowed %.3g)\n", what, sum, abs,
                json_number_value(json_object_get(want, "sum")), wabs, serr);
        return -1;
    }
    const json_t *at = json_object_get(want, "at"), *v = json_object_get(want, "v");
    for (size_t i = 0; i < json_array_size(at); i++) {
        size_t j = (size_t)json_integer_value(json_array_get(at, i));
        double w = json_number_value(json_array_get(v, i));
        double allowed = err + floor * fabs(w) + 10 * floor * scale;
        if (j >= n || fabs(got[j] - w) > allowed) {
            fprintf(stderr, "%s[%zu]: got %.8g, torch %.8g (allowed %.3g)\n", what, j, j < n ? got[j] : NAN, w,
                    allowed);
            return -1;
        }
    }
    return 0;
}

/* The fixture's spec (a Sequential) with its backbone frozen: requires_grad False on the root,
 * True again on its last layer, the head. A new reference. */
static inline json_t *rt_frozen_spec(const json_t *ref) {
    json_t *spec = json_deep_copy(json_object_get(ref, "spec")), *layers = json_object_get(spec, "layers");
    json_object_set_new(spec, "requires_grad", json_false());
    json_object_set_new(json_array_get(layers, json_array_size(layers) - 1), "requires_grad", json_true());
    return spec;
}

#endif
