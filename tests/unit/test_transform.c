/* dataloader/transform*.c against real torchvision (tests/data/transform_ref.json, made by
 * tests/gen_transform_ref.py with torch 1.13 / torchvision 0.14 / Pillow 9.4), the random
 * transforms' draws, and every error a user can reach. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "transform.h"
#include "fixture_testutil.h"

TU_FIXTURE_GROUP(REF, "transform_ref.json")

/* A fresh image: h x w x c, bytes from a simple pattern (or the given values). */
static taas_image make_u8(int h, int w, int c, const uint8_t *values) {
    taas_image im = {.h = h, .w = w, .c = c, .type = TAAS_PIX_U8, .data = malloc((size_t)h * w * c)};
    for (int i = 0; i < h * w * c; i++) ((uint8_t *)im.data)[i] = values ? values[i] : (uint8_t)(i * 37 + 11);
    return im;
}

static taas_transform *parse(const char *spec_text) {
    json_error_t je;
    json_t *spec = json_loads(spec_text, JSON_DECODE_ANY, &je);
    if (!spec) fail_msg("bad test spec %s: %s", spec_text, je.text);
    taas_error err;
    taas_error_clear(&err);
    taas_transform *t = taas_transform_new(spec, &err);
    if (!t) fail_msg("spec %s: %s: %s", spec_text, err.ename, err.message);
    json_decref(spec);
    return t;
}

/* ---- torchvision reference values ----------------------------------------------------- */

static taas_image ref_input(const json_t *in) {
    int h = (int)json_integer_value(json_object_get(in, "h"));
    int w = (int)json_integer_value(json_object_get(in, "w"));
    int c = (int)json_integer_value(json_object_get(in, "c"));
    int u8 = strcmp(json_string_value(json_object_get(in, "dtype")), "uint8") == 0;
    const json_t *data = json_object_get(in, "data");
    taas_image im = {.h = h, .w = w, .c = c, .type = u8 ? TAAS_PIX_U8 : TAAS_PIX_F32, .data = malloc((size_t)h * w * c * (u8 ? 1 : 4))};
    assert_int_equal(json_array_size(data), (size_t)h * w * c);
    for (size_t i = 0; i < json_array_size(data); i++) {
        const json_t *v = json_array_get(data, i);
        if (u8)
            ((uint8_t *)im.data)[i] = (uint8_t)json_integer_value(v);
        else
            ((float *)im.data)[i] = (float)json_number_value(v);
    }
    return im;
}

/* Whether res (c x oh x ow) is a window of want (c x H x W) within tol. */
static int is_window(const float *res, int c, int oh, int ow, const json_t *want, int H, int W, double tol) {
    for (int top = 0; top + oh <= H; top++) {
        for (int left = 0; left + ow <= W; left++) {
            int ok = 1;
            for (int ch = 0; ch < c && ok; ch++)
                for (int y = 0; y < oh && ok; y++)
                    for (int x = 0; x < ow && ok; x++) {
                        double w = (float)json_number_value(json_array_get(want, ((size_t)ch * H + top + y) * W + left + x));
                        ok = fabs(res[((size_t)ch * oh + y) * ow + x] - w) <= tol;
                    }
            if (ok) return 1;
        }
    }
    return 0;
}

static int check_case(const json_t *cs) {
    const char *name = json_string_value(json_object_get(cs, "name"));
    double tol = json_number_value(json_object_get(cs, "tol"));
    if (tol == 0) tol = 1e-7; /* exact: values are k / 255, one float32 each */
    int window = json_is_true(json_object_get(cs, "window"));
    taas_error err;
    taas_error_clear(&err);
    taas_transform *t = taas_transform_new(json_object_get(cs, "spec"), &err);
    if (!t) fail_msg("%s: %s: %s", name, err.ename, err.message);
    const json_t *in = json_object_get(json_object_get(REF, "images"), json_string_value(json_object_get(cs, "input")));
    const json_t *out = json_object_get(cs, "output"), *want = json_object_get(out, "data");
    assert_non_null(in);
    int rc_ = (int)json_integer_value(json_object_get(out, "c"));
    int rh = (int)json_integer_value(json_object_get(out, "h"));
    int rw = (int)json_integer_value(json_object_get(out, "w"));
    int oc, oh, ow, failures = 0;
    if (taas_transform_out_shape(t, (int)json_integer_value(json_object_get(in, "h")),
                                 (int)json_integer_value(json_object_get(in, "w")),
                                 (int)json_integer_value(json_object_get(in, "c")), &oc, &oh, &ow, &err) < 0)
        fail_msg("%s: out_shape: %s", name, err.message);
    assert_int_equal(oc, rc_);
    if (window) {
        assert_true(oh <= rh && ow <= rw);
    } else {
        assert_int_equal(oh, rh);
        assert_int_equal(ow, rw);
    }
    float *res = malloc((size_t)oc * oh * ow * sizeof *res);
    /* a window case runs a few samples: each crop must be a window of torchvision's padding */
    for (uint64_t index = 0; index < (window ? 8u : 1u); index++) {
        taas_image im = ref_input(in);
        if (taas_transform_apply(t, &im, 1, 0, index, res, &err) < 0) fail_msg("%s: apply: %s", name, err.message);
        assert_null(im.data); /* consumed */
        if (window) {
            if (!is_window(res, oc, oh, ow, want, rh, rw, tol)) {
                fprintf(stderr, "%s: sample %llu's crop is no window of torchvision's padded image\n", name,
                        (unsigned long long)index);
                failures++;
            }
            continue;
        }
        double worst = 0;
        size_t worst_at = 0;
        for (size_t k = 0; k < json_array_size(want); k++) {
            double d = fabs((double)res[k] - (double)(float)json_number_value(json_array_get(want, k)));
            if (d > worst) worst = d, worst_at = k;
        }
        if (worst > tol) {
            fprintf(stderr, "%s: element %zu is %.9g, torchvision %.9g (|diff| %.3g > %.3g)\n", name, worst_at,
                    (double)res[worst_at], json_number_value(json_array_get(want, worst_at)), worst, tol);
            failures++;
        }
    }
    free(res);
    taas_transform_free(t);
    return failures;
}

static void test_torchvision_reference(void **state) {
    (void)state;
    const json_t *cases = json_object_get(REF, "cases");
    assert_true(json_array_size(cases) >= 70);
    size_t i;
    json_t *cs;
    int failures = 0;
    json_array_foreach(cases, i, cs) failures += check_case(cs);
    assert_int_equal(failures, 0);
}

/* ---- random transforms ---------------------------------------------------------------- */

static void run(const taas_transform *t, int h, int w, int c, uint64_t seed, uint64_t epoch, uint64_t index,
                float *out) {
    taas_image im = make_u8(h, w, c, NULL);
    taas_error err;
    taas_error_clear(&err);
    if (taas_transform_apply(t, &im, seed, epoch, index, out, &err) < 0) fail_msg("apply: %s", err.message);
}

static void test_random_crop_deterministic_per_sample(void **state) {
    (void)state;
    taas_transform *t = parse("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"RandomCrop\",\"size\":[8,8],"
                              "\"padding\":3,\"pad_if_needed\":false,\"fill\":0,\"padding_mode\":\"reflect\"},"
                              "{\"type\":\"ToTensor\"}]}");
    /* the whole padded image, against which every crop must be a window */
    taas_transform *whole = parse("{\"type\":\"RandomCrop\",\"size\":[16,16],\"padding\":3,"
                                  "\"padding_mode\":\"reflect\"}");
    float padded[16 * 16], a[64], b[64];
    run(whole, 10, 10, 1, 0, 0, 0, padded);
    int seen[9][9] = {{0}};
    int differs = 0, differs_next = 0;
    float prev[64];
    for (uint64_t idx = 0; idx < 400; idx++) {
        run(t, 10, 10, 1, 42, 3, idx, a);
        run(t, 10, 10, 1, 42, 3, idx, b);
        assert_memory_equal(a, b, sizeof a); /* same (seed, epoch, index): same crop */
        int found = 0;
        for (int top = 0; top <= 8 && !found; top++) {
            for (int left = 0; left <= 8 && !found; left++) {
                int ok = 1;
                for (int y = 0; y < 8 && ok; y++)
                    for (int x = 0; x < 8 && ok; x++) ok = a[y * 8 + x] == padded[(top + y) * 16 + left + x];
                if (ok) found = 1, seen[top][left]++;
            }
        }
        assert_true(found);
        if (idx) differs_next += memcmp(a, prev, sizeof a) != 0; /* the next index draws again */
        memcpy(prev, a, sizeof a);
        run(t, 10, 10, 1, 42, 4, idx, b); /* so does another epoch */
        differs += memcmp(a, b, sizeof a) != 0;
    }
    assert_true(differs_next > 350);
    /* 81 positions, 400 draws: every position comes up (p of missing one ~ 81 * e^-4.9) */
    int positions = 0;
    for (int y = 0; y < 9; y++)
        for (int x = 0; x < 9; x++) positions += seen[y][x] > 0;
    assert_true(positions >= 78);
    assert_true(differs > 350);
    taas_transform_free(t);
    taas_transform_free(whole);
}

static void test_flip_fraction(void **state) {
    (void)state;
    taas_transform *t = parse("{\"type\":\"RandomHorizontalFlip\",\"p\":0.3}");
    float plain[12], out[12];
    taas_transform *none = parse("null");
    run(none, 3, 4, 1, 0, 0, 0, plain);
    int flips = 0;
    const int n = 5000;
    for (int idx = 0; idx < n; idx++) {
        run(t, 3, 4, 1, 7, 0, (uint64_t)idx, out);
        if (memcmp(out, plain, sizeof out) != 0) {
            for (int y = 0; y < 3; y++)
                for (int x = 0; x < 4; x++) assert_true(out[y * 4 + x] == plain[y * 4 + 3 - x]);
            flips++;
        }
    }
    /* mean 1500, standard deviation 32.4: within 5 of them */
    assert_true(abs(flips - 1500) < 162);
    /* the same indices with another seed flip differently */
    int same = 0;
    for (int idx = 0; idx < 200; idx++) {
        float a[12], b[12];
        run(t, 3, 4, 1, 7, 0, (uint64_t)idx, a);
        run(t, 3, 4, 1, 8, 0, (uint64_t)idx, b);
        same += memcmp(a, b, sizeof a) == 0;
    }
    assert_true(same < 180);
    taas_transform_free(t);
    taas_transform_free(none);
}

/* A flip right before ToTensor is folded into it (the rows read backwards, no flipped copy):
 * the same floats as the flip made on its own (a CenterCrop of the same size in between keeps
 * them apart), RGB and grey, with Normalize fused into ToTensor and without. */
static void test_flip_folded_into_to_tensor(void **state) {
    (void)state;
    static const char *const tails[] = {
        "{\"type\":\"ToTensor\"},{\"type\":\"Normalize\",\"mean\":[0.4,0.5,0.6],\"std\":[0.2,0.3,0.25]}]}",
        "{\"type\":\"ToTensor\"}]}"};
    for (int k = 0; k < 2; k++)
        for (int c = 1; c <= 3; c += 2) {
            char a[512], b[512];
            const char *tail = c == 1 && k == 0 ? "{\"type\":\"ToTensor\"},{\"type\":\"Normalize\",\"mean\":[0.4],"
                                                  "\"std\":[0.2]}]}" : tails[k];
            snprintf(a, sizeof a, "{\"type\":\"Compose\",\"transforms\":[{\"type\":\"RandomHorizontalFlip\",\"p\":0.5},%s",
                     tail);
            snprintf(b, sizeof b, "{\"type\":\"Compose\",\"transforms\":[{\"type\":\"RandomHorizontalFlip\",\"p\":0.5},"
                     "{\"type\":\"CenterCrop\",\"size\":[5,7]},%s", tail);
            taas_transform *folded = parse(a), *apart = parse(b);
            int flips = 0;
            for (uint64_t idx = 0; idx < 40; idx++) {
                float x[3 * 5 * 7], y[3 * 5 * 7], plain[3 * 5 * 7];
                run(folded, 5, 7, c, 3, 1, idx, x);
                run(apart, 5, 7, c, 3, 1, idx, y);
                assert_memory_equal(x, y, (size_t)c * 5 * 7 * sizeof(float));
                run(folded, 5, 7, c, 4, 9, idx, plain); /* another draw */
                flips += memcmp(x, plain, (size_t)c * 5 * 7 * sizeof(float)) != 0;
            }
            assert_true(flips > 0);
            taas_transform_free(folded);
            taas_transform_free(apart);
        }
}

/* Adding a step before a random one does not change its draws: each step has its own stream. */
static void test_random_streams_per_step(void **state) {
    (void)state;
    taas_transform *a = parse("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"RandomHorizontalFlip\",\"p\":0.5},"
                              "{\"type\":\"ToTensor\"}]}");
    taas_transform *b = parse("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"RandomHorizontalFlip\",\"p\":0.5},"
                              "{\"type\":\"RandomHorizontalFlip\",\"p\":0.0},{\"type\":\"ToTensor\"}]}");
    for (uint64_t idx = 0; idx < 50; idx++) {
        float x[20], y[20];
        run(a, 4, 5, 1, 1, 2, idx, x);
        run(b, 4, 5, 1, 1, 2, idx, y);
        assert_memory_equal(x, y, sizeof x);
    }
    taas_transform_free(a);
    taas_transform_free(b);
}

static void test_implicit_to_tensor(void **state) {
    (void)state;
    uint8_t px[6] = {0, 255, 51, 1, 2, 3};
    float out[6];
    taas_error err;
    taas_error_clear(&err);
    /* no transform at all (NULL) and a JSON null both end with ToTensor */
    taas_image im = make_u8(1, 2, 3, px);
    assert_int_equal(taas_transform_apply(NULL, &im, 0, 0, 0, out, &err), 0);
    assert_true(out[0] == 0.0f && out[1] == 1.0f / 255.0f && out[2] == 255.0f / 255.0f);
    assert_true(out[4] == 51.0f / 255.0f && out[5] == 3.0f / 255.0f);
    int oc, oh, ow;
    assert_int_equal(taas_transform_out_shape(NULL, 28, 28, 1, &oc, &oh, &ow, &err), 0);
    assert_true(oc == 1 && oh == 28 && ow == 28);
    taas_transform *t = parse("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"CenterCrop\",\"size\":[1,1]}]}");
    im = make_u8(1, 2, 3, px);
    assert_int_equal(taas_transform_apply(t, &im, 0, 0, 0, out, &err), 0);
    /* CenterCrop of width 2 to 1: left = round(0.5) = 0 */
    assert_true(out[0] == 0.0f && out[1] == 1.0f && out[2] == 51.0f / 255.0f);
    taas_transform_free(t);
}

/* ---- errors a user can reach ---------------------------------------------------------- */

static void expect_new_error(const char *spec_text, const char *ename, const char *msg_part, const char *hint_part) {
    json_error_t je;
    json_t *spec = json_loads(spec_text, JSON_DECODE_ANY, &je);
    assert_non_null(spec);
    taas_error err;
    taas_error_clear(&err);
    taas_transform *t = taas_transform_new(spec, &err);
    json_decref(spec);
    if (t) fail_msg("spec %s was accepted", spec_text);
    assert_string_equal(err.ename, ename);
    if (!strstr(err.message, msg_part)) fail_msg("message '%s' lacks '%s'", err.message, msg_part);
    if (!strstr(err.hint, hint_part)) fail_msg("hint '%s' lacks '%s'", err.hint, hint_part);
}

static void test_spec_errors(void **state) {
    (void)state;
    expect_new_error("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"Normalize\",\"mean\":[0.5],\"std\":[0.5]},"
                     "{\"type\":\"ToTensor\"}]}",
                     "TaasTypeError", "Normalize (transform 1 of 2) needs a tensor, but it comes before ToTensor()",
                     "put ToTensor() before Normalize");
    expect_new_error("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"ToTensor\"},{\"type\":\"ToTensor\"}]}",
                     "TaasTypeError", "ToTensor (transform 2 of 2) gets a tensor", "keep one ToTensor()");
    expect_new_error("{\"type\":\"GaussianBlur\",\"kernel_size\":3}", "TaasValueError",
                     "'GaussianBlur' is not a transform the data loaders know", "RandomHorizontalFlip");
    expect_new_error("[1, 2]", "TaasTypeError", "a transform spec must be an object with a \"type\", got [1,2]",
                     "ToTensor");
    expect_new_error("{\"type\":\"RandomCrop\",\"size\":[0,5]}", "TaasTypeError",
                     "RandomCrop() size must be an int or (h, w) of ints >= 1, got [0,5]", "RandomCrop(28, padding=4)");
    expect_new_error("{\"type\":\"RandomCrop\",\"size\":8,\"padding\":[1,2,3]}", "TaasTypeError",
                     "RandomCrop() padding must be an int, (left/right, top/bottom) or (left, top, right, bottom)",
                     "RandomCrop(");
    expect_new_error("{\"type\":\"RandomCrop\",\"size\":8,\"padding_mode\":\"wrap\"}", "TaasValueError",
                     "padding_mode should be either constant, edge, reflect or symmetric, got \"wrap\"", "reflect");
    expect_new_error("{\"type\":\"RandomCrop\",\"size\":8,\"fill\":\"red\"}", "TaasTypeError",
                     "RandomCrop() fill must be a number or a tuple of numbers, got \"red\"", "RandomCrop(");
    expect_new_error("{\"type\":\"RandomCrop\",\"size\":8,\"paddding\":2}", "TaasTypeError",
                     "RandomCrop() got an unexpected parameter 'paddding'", "size, padding, pad_if_needed");
    expect_new_error("{\"type\":\"ToTensor\",\"scale\":true}", "TaasTypeError",
                     "ToTensor() got an unexpected parameter 'scale'", "takes no parameters");
    expect_new_error("{\"type\":\"Normalize\",\"mean\":[0.5,0.5],\"std\":[1,1,1]}", "TaasValueError",
                     "Normalize() mean has 2 values but std has 3", "one value per channel");
    expect_new_error("{\"type\":\"Normalize\",\"mean\":[0.5],\"std\":[1e-50]}", "TaasValueError",
                     "std evaluated to zero after conversion to float32", "> 0");
    expect_new_error("{\"type\":\"Normalize\",\"mean\":[null],\"std\":[1]}", "TaasValueError",
                     "Normalize() mean must be finite numbers, got [null]", "plain numbers");
    expect_new_error("{\"type\":\"RandomHorizontalFlip\",\"p\":1.5}", "TaasTypeError",
                     "RandomHorizontalFlip() p must be a probability between 0 and 1, got 1.5", "p=0.5");
    expect_new_error("{\"type\":\"Resize\",\"size\":[4,5],\"interpolation\":\"lanczos\"}", "TaasValueError",
                     "interpolation must be 'nearest', 'bilinear' or 'bicubic', got \"lanczos\"", "bilinear");
    expect_new_error("{\"type\":\"Resize\",\"size\":[4,5],\"max_size\":10}", "TaasValueError",
                     "max_size should only be passed if size specifies the length of the smaller edge", "size as an int");
    expect_new_error("{\"type\":\"Resize\",\"size\":10,\"max_size\":10}", "TaasValueError",
                     "max_size = 10 must be strictly greater than the requested size for the smaller edge size = 10",
                     "raise max_size");
    expect_new_error("{\"type\":\"Resize\",\"size\":10,\"antialias\":\"yes\"}", "TaasTypeError",
                     "Resize() antialias must be None, True or False", "Resize(32)");
    expect_new_error("{\"type\":\"Compose\",\"transforms\":{\"type\":\"ToTensor\"}}", "TaasTypeError",
                     "Compose() transforms must be a list of transforms", "Compose([ToTensor()");
}

static void expect_shape_error(const char *spec_text, int h, int w, int c, const char *msg_part, const char *hint_part) {
    taas_transform *t = parse(spec_text);
    taas_error err;
    taas_error_clear(&err);
    int oc, oh, ow;
    if (taas_transform_out_shape(t, h, w, c, &oc, &oh, &ow, &err) == 0) fail_msg("%s accepted %dx%dx%d", spec_text, h, w, c);
    if (!strstr(err.message, msg_part)) fail_msg("message '%s' lacks '%s'", err.message, msg_part);
    if (!strstr(err.hint, hint_part)) fail_msg("hint '%s' lacks '%s'", err.hint, hint_part);
    /* applying to such an image fails the same way, and frees the image */
    char msg[sizeof err.message];
    snprintf(msg, sizeof msg, "%s", err.message);
    taas_image im = make_u8(h, w, c, NULL);
    float *out = malloc(4096 * sizeof *out);
    taas_error_clear(&err);
    assert_int_equal(taas_transform_apply(t, &im, 0, 0, 0, out, &err), -1);
    assert_string_equal(err.message, msg);
    assert_null(im.data);
    free(out);
    taas_transform_free(t);
}

static void test_shape_errors(void **state) {
    (void)state;
    expect_shape_error("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"ToTensor\"},"
                       "{\"type\":\"Normalize\",\"mean\":[0.5,0.5,0.5],\"std\":[0.2,0.2,0.2]}]}",
                       28, 28, 1, "Normalize (transform 2 of 2) has 3 mean values for a tensor of 1 channel",
                       "Normalize((0.2860,), (0.3530,))");
    expect_shape_error("{\"type\":\"RandomCrop\",\"size\":[32,32]}", 28, 28, 1,
                       "RandomCrop: required crop size (32, 32) is larger than input image size (28, 28)",
                       "pad_if_needed=True");
    expect_shape_error("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"ToTensor\"},{\"type\":\"RandomCrop\","
                       "\"size\":[8,8],\"padding\":1,\"fill\":[1,2,3]}]}",
                       8, 8, 3, "pads a tensor, and torchvision pads tensors with one number: fill has 3 values",
                       "before ToTensor()");
    expect_shape_error("{\"type\":\"RandomCrop\",\"size\":[8,8],\"padding\":1,\"fill\":[1,2]}", 8, 8, 3,
                       "the number of elements in 'fill' does not match the number of channels of the image (2 != 3)",
                       "one fill value per channel (3 here)");
    expect_shape_error("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"ToTensor\"},{\"type\":\"RandomCrop\","
                       "\"size\":[4,4],\"padding\":4,\"padding_mode\":\"reflect\"}]}",
                       4, 4, 1, "padding_mode='reflect' on a tensor needs padding smaller than the side it pads, "
                       "but pads 4 pixels on a side of 4", "padding_mode='edge'");
    expect_shape_error("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"ToTensor\"},{\"type\":\"RandomCrop\","
                       "\"size\":[4,4],\"padding\":5,\"padding_mode\":\"symmetric\"}]}",
                       4, 4, 1, "needs padding at most the side it pads, but pads 5 pixels on a side of 4",
                       "images take any padding");
    expect_shape_error("{\"type\":\"Compose\",\"transforms\":[{\"type\":\"ToTensor\"},{\"type\":\"Resize\","
                       "\"size\":[4,4],\"interpolation\":\"nearest\",\"antialias\":true}]}",
                       8, 8, 1, "antialias option is supported for bilinear and bicubic interpolation modes only",
                       "drop antialias=True");
    expect_shape_error("{\"type\":\"Resize\",\"size\":1,\"max_size\":2}", 1, 100, 1,
                       "Resize of a 1x100 image to the smaller edge 1 with max_size gives an output size of zero",
                       "Resize((h, w))");
    expect_shape_error("null", 0, 5, 1, "an image of 0x5 with 1 channels has no pixels", "height, width and channels");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torchvision_reference),
        cmocka_unit_test(test_random_crop_deterministic_per_sample),
        cmocka_unit_test(test_flip_fraction),
        cmocka_unit_test(test_flip_folded_into_to_tensor),
        cmocka_unit_test(test_random_streams_per_step),
        cmocka_unit_test(test_implicit_to_tensor),
        cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_shape_errors),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
