/* What the GPT-2 tests share (test_gpt2.c on the CPU, test_cuda_gpt2.c on a GPU): the
 * fixtures' tensors (tests/data/gpt2/, made by tests/gen_gpt2_ref.py) laid out as the fused
 * attention takes them, and the step's batch. */
#ifndef TAAS_GPT2_TESTUTIL_H
#define TAAS_GPT2_TESTUTIL_H

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixture_testutil.h"
#include "layers.h"
#include "resnet_testutil.h"

/* q, k, v (N, H, T, D) of the fixture laid out as c_attn writes them: (N, T, 3C). */
static inline void to_qkv(float *qkv, const float *q, int n, int h, int t, int d, int part) {
    int c = h * d;
    for (int i = 0; i < n; i++)
        for (int hd = 0; hd < h; hd++)
            for (int r = 0; r < t; r++)
                for (int x = 0; x < d; x++)
                    qkv[((size_t)i * t + r) * 3 * c + (size_t)part * c + (size_t)hd * d + x] =
                        q[(((size_t)i * h + hd) * t + r) * d + x];
}

/* the reverse, from a tensor of row width `width` whose part starts at column `col` */
static inline void from_rows(float *q, const float *rows, int n, int h, int t, int d, size_t width, size_t col) {
    for (int i = 0; i < n; i++)
        for (int hd = 0; hd < h; hd++)
            for (int r = 0; r < t; r++)
                for (int x = 0; x < d; x++)
                    q[(((size_t)i * h + hd) * t + r) * d + x] = rows[((size_t)i * t + r) * width + col + (size_t)hd * d + x];
}

/* An attention case's inputs: qkv (N, T, 3C) from the formula's tensors index, +1, +2 (q, k,
 * v as (N, H, T, D)), and the output gradient dy (N, T, C) from tensor index + 3. */
static inline void gt_attention_inputs(float *qkv, float *dy, float *tmp, int n, int h, int t, int d, uint64_t index) {
    size_t cnt = (size_t)n * h * t * d, c = (size_t)h * d;
    for (int part = 0; part < 3; part++) {
        for (size_t j = 0; j < cnt; j++) tmp[j] = (float)rt_unit(index + (uint64_t)part, j);
        to_qkv(qkv, tmp, n, h, t, d, part);
    }
    for (size_t j = 0; j < cnt; j++) tmp[j] = (float)rt_unit(index + 3, j);
    for (int i = 0; i < n; i++)
        for (int hd = 0; hd < h; hd++)
            for (int row = 0; row < t; row++)
                for (int x = 0; x < d; x++)
                    dy[((size_t)i * t + row) * c + (size_t)hd * d + x] = tmp[(((size_t)i * h + hd) * t + row) * d + x];
}

/* The fused attention's y (N, T, C) and dqkv (N, T, 3C) against a case of the fixture (its
 * y, dq, dk, dv as (N, H, T, D)); tmp holds N*H*T*D floats. 0, or 1 after saying what differs. */
static inline int gt_attention_check(const json_t *r, const float *y, const float *dqkv, float *tmp, double tol_out,
                                     double tol_grad) {
    int n = (int)json_integer_value(json_object_get(r, "n")), h = (int)json_integer_value(json_object_get(r, "heads"));
    int t = (int)json_integer_value(json_object_get(r, "t")), d = (int)json_integer_value(json_object_get(r, "d"));
    size_t cnt = (size_t)n * h * t * d, c = (size_t)h * d;
    char what[64];
    snprintf(what, sizeof what, "T=%d y", t);
    from_rows(tmp, y, n, h, t, d, c, 0);
    int bad = rt_check(tmp, cnt, json_object_get(r, "y"), tol_out, what) != 0;
    static const char *const names[] = {"dq", "dk", "dv"};
    double dv_max = 0;
    for (size_t j = 0; j < 3 * cnt; j += 3 * c)
        for (size_t x = 2 * c; x < 3 * c; x++) dv_max = fmax(dv_max, fabs(dqkv[j + x]));
    for (int part = 0; part < 3; part++) {
        snprintf(what, sizeof what, "T=%d %s", t, names[part]);
        from_rows(tmp, dqkv, n, h, t, d, 3 * c, (size_t)part * c);
        const json_t *want = json_object_get(r, names[part]);
        if (json_number_value(json_object_get(want, "abs")) > 0) {
            bad |= rt_check(tmp, cnt, want, tol_grad, what) != 0;
            continue;
        }
        /* one key (T = 1): the softmax is 1 whatever q and k, and torch's dq and dk are exactly
         * 0; here they are dP - D, two roundings of one sum: 0 to float's precision of the
         * gradients' scale */
        for (size_t j = 0; j < cnt; j++)
            if (fabs(tmp[j]) > 1e-6 * dv_max) {
                fprintf(stderr, "%s[%zu] %.8g, torch 0\n", what, j, tmp[j]);
                bad = 1;
                break;
            }
    }
    return bad;
}

/* Runs `run` (the CPU's attention or the GPU's) on every case of the attention fixture and
 * checks it: 0, or 1 after saying what differs. */
typedef void (*gt_attention_run)(float *y, float *dqkv, const float *qkv, const float *dy,
                                 const taas_attention_shape *s);
static inline int gt_attention_fixture(gt_attention_run run, double tol_out, double tol_grad) {
    json_t *ref = tu_fixture_load("gpt2/attention.json");
    if (!ref) return 1;
    const json_t *cs = json_object_get(ref, "cases");
    int bad = 0;
    for (size_t k = 0; k < json_array_size(cs); k++) {
        const json_t *r = json_array_get(cs, k);
        int n = (int)json_integer_value(json_object_get(r, "n")), h = (int)json_integer_value(json_object_get(r, "heads"));
        int t = (int)json_integer_value(json_object_get(r, "t")), d = (int)json_integer_value(json_object_get(r, "d"));
        size_t cnt = (size_t)n * h * t * d;
        float *tmp = malloc(cnt * sizeof *tmp), *qkv = malloc(3 * cnt * sizeof *qkv), *y = malloc(cnt * sizeof *y);
        float *dy = malloc(cnt * sizeof *dy), *dqkv = malloc(3 * cnt * sizeof *dqkv);
        if (!tmp || !qkv || !y || !dy || !dqkv) abort();
        gt_attention_inputs(qkv, dy, tmp, n, h, t, d, (uint64_t)json_integer_value(json_object_get(r, "index")));
        taas_attention_shape s = {n, t, h * d, h, 0.0f};
        run(y, dqkv, qkv, dy, &s);
        bad |= gt_attention_check(r, y, dqkv, tmp, tol_out, tol_grad);
        free(tmp), free(qkv), free(y), free(dy), free(dqkv);
    }
    json_decref(ref);
    return bad;
}

/* x (n floats) = the formula's tensor k. */
static inline void gt_fill(float *x, size_t n, uint64_t k) {
    for (size_t j = 0; j < n; j++) x[j] = (float)rt_unit(k, j);
}

/* The step's token ids (as floats, the model's input) and targets, n * t of each. */
static inline void gt_batch(const json_t *ref, float *ids, int64_t *y, size_t rows) {
    for (size_t i = 0; i < rows; i++) {
        ids[i] = (float)json_integer_value(json_array_get(json_object_get(ref, "ids"), i));
        y[i] = json_integer_value(json_array_get(json_object_get(ref, "y"), i));
    }
}

#endif
