/* RandomResizedCrop and ColorJitter. Their pixels against real torchvision for fixed
 * parameters (tests/data/jitter_ref.json, made by tests/gen_jitter_ref.py: resized_crop of
 * fixed boxes, the adjust_* functions for fixed factors, the central fallback); their draws,
 * which cannot be PyTorch's, by their properties: inside the ranges, a pure function of
 * (seed, epoch, index), different from sample to sample. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_testutil.h"
#include "transform_chain.h"

TU_FIXTURE_GROUP(REF, "jitter_ref.json")

/* The fixture's image as a tx_img (owned). */
static tx_img ref_image(const char *name) {
    const json_t *im = json_object_get(json_object_get(REF, "images"), name);
    const json_t *shape = json_object_get(im, "shape"), *data = json_object_get(im, "data");
    tx_img t = {(int)json_integer_value(json_array_get(shape, 2)), (int)json_integer_value(json_array_get(shape, 0)),
                (int)json_integer_value(json_array_get(shape, 1)), 0, 1, NULL, 1};
    t.data = malloc(json_array_size(data));
    for (size_t i = 0; i < json_array_size(data); i++) ((uint8_t *)t.data)[i] = (uint8_t)json_integer_value(json_array_get(data, i));
    return t;
}

/* The largest difference between the bytes of im and want. */
static int max_diff_u8(const tx_img *im, const json_t *want) {
    assert_int_equal(json_array_size(want), (size_t)im->h * im->w * im->c);
    int worst = 0;
    for (size_t i = 0; i < json_array_size(want); i++) {
        int d = abs(((const uint8_t *)im->data)[i] - (int)json_integer_value(json_array_get(want, i)));
        if (d > worst) worst = d;
    }
    return worst;
}

static void test_adjust_matches_torchvision(void **state) {
    (void)state;
    size_t i;
    json_t *cs;
    int n = 0;
    json_array_foreach(json_object_get(REF, "adjust"), i, cs) {
        tx_img im = ref_image(json_string_value(json_object_get(cs, "image")));
        const char *op = json_string_value(json_object_get(cs, "op"));
        double f = json_number_value(json_object_get(cs, "factor"));
        if (!strcmp(op, "brightness")) tx_adjust_brightness(&im, f);
        else if (!strcmp(op, "contrast")) tx_adjust_contrast(&im, f);
        else if (!strcmp(op, "saturation")) tx_adjust_saturation(&im, f);
        else tx_adjust_hue(&im, f);
        int d = max_diff_u8(&im, json_object_get(cs, "out"));
        /* the stated tolerance: exact, byte for byte (docs/data.md) */
        if (d != 0) fail_msg("%s(%g) on the %s image differs from torchvision by %d", op, f,
                             json_string_value(json_object_get(cs, "image")), d);
        free(im.data);
        n++;
    }
    assert_true(n >= 40);
}

static void test_resized_crop_matches_torchvision(void **state) {
    (void)state;
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(REF, "resized_crop"), i, cs) {
        tx_img im = ref_image("rgb");
        int box[4], oh, ow;
        for (int k = 0; k < 4; k++) box[k] = (int)json_integer_value(json_array_get(json_object_get(cs, "box"), k));
        oh = (int)json_integer_value(json_array_get(json_object_get(cs, "size"), 0));
        ow = (int)json_integer_value(json_array_get(json_object_get(cs, "size"), 1));
        const char *ip = json_string_value(json_object_get(cs, "interpolation"));
        tx_interp mode = !strcmp(ip, "nearest") ? TX_NEAREST : !strcmp(ip, "bicubic") ? TX_BICUBIC : TX_BILINEAR;
        if (json_is_true(json_object_get(cs, "tensor"))) {
            assert_int_equal(tx_to_tensor(&im, NULL, 0, NULL, 0, NULL, 0, 0, NULL), 0);
            assert_int_equal(tx_resized_crop(&im, box, oh, ow, mode, 0, NULL), 0);
            const json_t *want = json_object_get(cs, "chw");
            assert_int_equal(json_array_size(want), (size_t)3 * oh * ow);
            for (size_t k = 0; k < json_array_size(want); k++)
                assert_true(fabs(((float *)im.data)[k] - json_number_value(json_array_get(want, k))) <= 1e-6);
        } else {
            assert_int_equal(tx_resized_crop(&im, box, oh, ow, mode, 0, NULL), 0);
            assert_int_equal(im.h, oh);
            assert_int_equal(im.w, ow);
            int d = max_diff_u8(&im, json_object_get(cs, "out"));
            if (d != 0) fail_msg("resized_crop case %zu (%s) differs from torchvision by %d", i, ip, d);
        }
        free(im.data);
    }
}

static taas_transform *parse(const char *text) {
    json_error_t je;
    json_t *spec = json_loads(text, 0, &je);
    if (!spec) fail_msg("bad test spec %s: %s", text, je.text);
    taas_error err;
    taas_error_clear(&err);
    taas_transform *t = taas_transform_new(spec, &err);
    json_decref(spec);
    if (!t) fail_msg("spec %s: %s: %s", text, err.ename, err.message);
    return t;
}

static taas_image ref_sample(const char *name) {
    tx_img t = ref_image(name);
    taas_image im = {.h = t.h, .w = t.w, .c = t.c, .type = TAAS_PIX_U8, .data = t.data};
    return im;
}

/* A scale above 1 can never be drawn: torchvision falls back to the central crop clamped
 * to ratio, which is deterministic. */
static void test_fallback_matches_torchvision(void **state) {
    (void)state;
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(REF, "fallback"), i, cs) {
        const json_t *r = json_object_get(cs, "ratio"), *want = json_object_get(cs, "out");
        char spec[256];
        snprintf(spec, sizeof spec,
                 "{\"type\": \"RandomResizedCrop\", \"size\": [9, 10], \"scale\": [2.0, 3.0], \"ratio\": [%.17g, %.17g]}",
                 json_number_value(json_array_get(r, 0)), json_number_value(json_array_get(r, 1)));
        taas_transform *t = parse(spec);
        taas_image im = ref_sample("rgb");
        float out[3 * 9 * 10];
        taas_error err;
        assert_int_equal(taas_transform_apply(t, &im, 1, 0, i, out, &err), 0);
        /* the implicit ToTensor: bytes / 255, CHW */
        for (int ch = 0; ch < 3; ch++)
            for (int p = 0; p < 90; p++) {
                double w = json_integer_value(json_array_get(want, (size_t)p * 3 + ch)) / 255.0;
                if (fabs(out[ch * 90 + p] - w) > 1e-6) fail_msg("fallback case %zu pixel %d ch %d", i, p, ch);
            }
        taas_transform_free(t);
    }
}

static void test_rrc_draws(void **state) {
    (void)state;
    const double scale[2] = {0.08, 1.0}, ratio[2] = {3.0 / 4.0, 4.0 / 3.0};
    int H = 800, W = 1000, distinct = 0, prev[4] = {-1, -1, -1, -1};
    double amin = 1, amax = 0, rmin = 10, rmax = 0;
    for (uint64_t idx = 0; idx < 2000; idx++) {
        taas_rng r;
        int box[4], again[4];
        taas_rng_init(&r, 42, 3, idx, TAAS_RNG_TRANSFORM);
        tx_rrc_box(&r, H, W, scale, ratio, box);
        taas_rng_init(&r, 42, 3, idx, TAAS_RNG_TRANSFORM);
        tx_rrc_box(&r, H, W, scale, ratio, again);
        assert_memory_equal(box, again, sizeof box); /* a pure function of (seed, epoch, index) */
        assert_true(box[0] >= 0 && box[1] >= 0 && box[2] > 0 && box[3] > 0);
        assert_true(box[0] + box[2] <= H && box[1] + box[3] <= W);
        double a = (double)box[2] * box[3] / ((double)H * W), q = (double)box[3] / box[2];
        /* rounding the sides to pixels moves area and ratio a little */
        assert_true(a >= 0.08 * 0.97 && a <= 1.0);
        assert_true(q >= 0.75 * 0.98 && q <= 4.0 / 3.0 * 1.02);
        amin = fmin(amin, a), amax = fmax(amax, a), rmin = fmin(rmin, q), rmax = fmax(rmax, q);
        distinct += memcmp(box, prev, sizeof box) != 0;
        memcpy(prev, box, sizeof box);
    }
    /* the draws cover the ranges */
    assert_true(amin < 0.1 && amax > 0.9);
    assert_true(rmin < 0.77 && rmax > 1.3);
    assert_true(distinct > 1990);
    /* another epoch, another box */
    taas_rng r;
    int b0[4], b1[4];
    taas_rng_init(&r, 42, 0, 5, TAAS_RNG_TRANSFORM);
    tx_rrc_box(&r, H, W, scale, ratio, b0);
    taas_rng_init(&r, 42, 1, 5, TAAS_RNG_TRANSFORM);
    tx_rrc_box(&r, H, W, scale, ratio, b1);
    assert_memory_not_equal(b0, b1, sizeof b0);
}

/* Through the chain: the same (seed, epoch, index) gives the same tensor, another index or
 * epoch another one; ColorJitter on a tensor is refused. */
static void test_chain_determinism_and_errors(void **state) {
    (void)state;
    taas_transform *t = parse("{\"type\": \"Compose\", \"transforms\": [{\"type\": \"RandomResizedCrop\", \"size\": 8},"
                              "{\"type\": \"ColorJitter\", \"brightness\": 0.4, \"contrast\": 0.4, \"saturation\": 0.4,"
                              "\"hue\": 0.1}, {\"type\": \"ToTensor\"}]}");
    float a[3 * 64], b[3 * 64], c[3 * 64];
    taas_error err;
    taas_image im = ref_sample("rgb");
    assert_int_equal(taas_transform_apply(t, &im, 9, 2, 17, a, &err), 0);
    im = ref_sample("rgb");
    assert_int_equal(taas_transform_apply(t, &im, 9, 2, 17, b, &err), 0);
    assert_memory_equal(a, b, sizeof a);
    im = ref_sample("rgb");
    assert_int_equal(taas_transform_apply(t, &im, 9, 2, 18, c, &err), 0);
    assert_memory_not_equal(a, c, sizeof a);
    im = ref_sample("rgb");
    assert_int_equal(taas_transform_apply(t, &im, 9, 3, 17, c, &err), 0);
    assert_memory_not_equal(a, c, sizeof a);
    int oc, oh, ow;
    assert_int_equal(taas_transform_out_shape(t, 17, 23, 3, &oc, &oh, &ow, &err), 0);
    assert_true(oc == 3 && oh == 8 && ow == 8);
    taas_transform_free(t);

    t = parse("{\"type\": \"Compose\", \"transforms\": [{\"type\": \"ToTensor\"}, {\"type\": \"ColorJitter\", "
              "\"brightness\": 0.4}]}");
    assert_int_equal(taas_transform_out_shape(t, 17, 23, 3, &oc, &oh, &ow, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "ColorJitter (transform 2 of 2) takes 8-bit images"));
    assert_non_null(strstr(err.hint, "before ToTensor()"));
    taas_transform_free(t);

    /* torchvision's parameter checks */
    static const char *const bad[][2] = {
        {"{\"type\": \"ColorJitter\", \"brightness\": -0.1}", "must be non negative"},
        {"{\"type\": \"ColorJitter\", \"hue\": 0.6}", "hue values should be between (-0.5, 0.5)"},
        {"{\"type\": \"ColorJitter\", \"contrast\": [1.5, 0.5]}", "contrast values should be between"},
        {"{\"type\": \"RandomResizedCrop\", \"size\": 8, \"scale\": [1.0, 0.5]}", "scale should be of kind (min, max)"},
        {"{\"type\": \"RandomResizedCrop\", \"size\": 8, \"ratio\": [0, 1]}", "ratio should be of kind (min, max)"},
        {"{\"type\": \"RandomResizedCrop\", \"size\": 8, \"interpolation\": \"box\"}", "interpolation must be"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        json_t *spec = json_loads(bad[k][0], 0, NULL);
        taas_error_clear(&err);
        t = taas_transform_new(spec, &err);
        json_decref(spec);
        if (t) fail_msg("%s was accepted", bad[k][0]);
        if (!strstr(err.message, bad[k][1])) fail_msg("%s gave %s", bad[k][0], err.message);
        assert_true(err.hint[0] != '\0');
    }
}

/* ---- the RGB loops against the per-channel ones ------------------------------------------ */

/* Channel ch of an RGB image as a grey one (owned). */
static tx_img channel_of(const tx_img *rgb, int ch) {
    tx_img g = {1, rgb->h, rgb->w, 0, 1, malloc((size_t)rgb->h * rgb->w), 1};
    for (size_t i = 0; i < (size_t)rgb->h * rgb->w; i++) ((uint8_t *)g.data)[i] = ((const uint8_t *)rgb->data)[3 * i + ch];
    return g;
}

static tx_img random_rgb(uint32_t *seed, int h, int w) {
    tx_img t = {3, h, w, 0, 1, malloc((size_t)h * w * 3), 1};
    for (size_t i = 0; i < (size_t)h * w * 3; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        /* runs of extremes too, where bicubic's negative lobes clip at 0 and 255 */
        ((uint8_t *)t.data)[i] = (uint8_t)((*seed >> 24) < 64 ? ((*seed >> 16) & 1) * 255 : *seed >> 24);
    }
    return t;
}

/* RGB images take their own loops (the resize's horizontal pass with AVX2 where the CPU has
 * it, the remap and ToTensor in one pass over the pixels, a flip folded into ToTensor): each
 * channel must come out as the same image's channel alone, through the plain loops, byte for
 * byte and float for float. */
static void test_rgb_loops_match_per_channel(void **state) {
    (void)state;
    uint32_t seed = 7;
    int cases = 0;
    for (int trial = 0; trial < 300; trial++) {
        seed = seed * 1664525u + 1013904223u;
        int h = 1 + (int)(seed >> 8) % 60, w = 1 + (int)(seed >> 16) % 130;
        seed = seed * 1664525u + 1013904223u;
        int oh = 1 + (int)(seed >> 8) % 90, ow = 1 + (int)(seed >> 16) % 90;
        tx_interp mode = trial % 3 == 0 ? TX_BICUBIC : TX_BILINEAR;
        tx_img rgb = random_rgb(&seed, h, w);
        double box[4] = {0, 0, w, h};
        if (trial % 2) { /* a sub-pixel box */
            seed = seed * 1664525u + 1013904223u;
            box[0] = w * ((seed >> 8) % 100) / 400.0;
            box[1] = h * ((seed >> 16) % 100) / 400.0;
            box[2] = w - w * ((seed >> 4) % 100) / 400.0;
            box[3] = h - h * ((seed >> 12) % 100) / 400.0;
        }
        tx_img planes[3];
        for (int ch = 0; ch < 3; ch++) {
            planes[ch] = channel_of(&rgb, ch);
            assert_int_equal(tx_resize_pil_box(&planes[ch], box, oh, ow, mode), 0);
        }
        assert_int_equal(tx_resize_pil_box(&rgb, box, oh, ow, mode), 0);
        for (int ch = 0; ch < 3; ch++) {
            for (size_t i = 0; i < (size_t)oh * ow; i++)
                if (((uint8_t *)rgb.data)[3 * i + ch] != ((uint8_t *)planes[ch].data)[i])
                    fail_msg("%dx%d -> %dx%d (%s, box %g,%g,%g,%g): channel %d, pixel %zu: %u, alone %u", h, w, oh, ow,
                             mode == TX_BICUBIC ? "bicubic" : "bilinear", box[0], box[1], box[2], box[3], ch, i,
                             ((uint8_t *)rgb.data)[3 * i + ch], ((uint8_t *)planes[ch].data)[i]);
        }
        /* a flip with some filled columns, then ToTensor through per-channel tables */
        int *rows = malloc((size_t)oh * sizeof *rows), *cols = malloc((size_t)ow * sizeof *cols);
        for (int y = 0; y < oh; y++) rows[y] = y;
        for (int x = 0; x < ow; x++) cols[x] = x % 7 == 3 ? -1 : ow - 1 - x;
        const double fill[3] = {10, 20, 30}, fills[3][1] = {{10}, {20}, {30}};
        assert_int_equal(tx_remap(&rgb, rows, oh, cols, ow, fill, NULL), 0);
        float lut[3 * 256];
        for (int k = 0; k < 3 * 256; k++) lut[k] = (float)(k % 256) / 255.0f - 0.1f * (float)(k / 256);
        int mirror = trial % 4 >= 2; /* ToTensor with a flip folded in, every other pair of trials */
        assert_int_equal(tx_to_tensor(&rgb, lut, 3, NULL, 0, NULL, 0, mirror, NULL), 0);
        for (int ch = 0; ch < 3; ch++) {
            assert_int_equal(tx_remap(&planes[ch], rows, oh, cols, ow, fills[ch], NULL), 0);
            assert_int_equal(tx_to_tensor(&planes[ch], lut + 256 * ch, 1, NULL, 0, NULL, 0, mirror, NULL), 0);
            assert_memory_equal((float *)rgb.data + (size_t)ch * oh * ow, planes[ch].data, (size_t)oh * ow * sizeof(float));
            free(planes[ch].data);
        }
        free(rows);
        free(cols);
        free(rgb.data);
        cases++;
    }
    assert_int_equal(cases, 300);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adjust_matches_torchvision),
        cmocka_unit_test(test_resized_crop_matches_torchvision),
        cmocka_unit_test(test_fallback_matches_torchvision),
        cmocka_unit_test(test_rrc_draws),
        cmocka_unit_test(test_chain_determinism_and_errors),
        cmocka_unit_test(test_rgb_loops_match_per_channel),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
