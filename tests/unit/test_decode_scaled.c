/* Decoding only what the crop keeps: a JPEG decoded at libjpeg-turbo's smallest scale that
 * covers the output, only the box's rows and columns, then resized as RandomResizedCrop
 * resizes, against torchvision's resized_crop of PIL's full decode (tests/data/scaled_ref.json,
 * made by tests/gen_scaled_ref.py). The stated tolerance (docs/data.md), per image in 0..255:
 * mean absolute difference at most 2.5 and largest at most 32 at a reduced scale; at full
 * scale (a box that no reduced scale covers) at most 0.05 and 4. Also: the hint path through a dataset and the
 * transforms gives the same tensor shape as the full path, and a truncated JPEG is still
 * an error when only its top is wanted. */
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
#include "formats.h"
#include "transform_chain.h"

TU_FIXTURE_GROUP(REF, "scaled_ref.json")

static unsigned char *jpeg_bytes(size_t *n) {
    const char *hex = json_string_value(json_object_get(REF, "jpeg"));
    *n = strlen(hex) / 2;
    unsigned char *b = malloc(*n);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (unsigned char)v;
    }
    return b;
}

typedef struct fixed {
    int box[4], oh, ow;
} fixed;

static int fixed_box(void *ctx, int h, int w, int box[4], int *oh, int *ow) {
    const fixed *f = ctx;
    assert_int_equal(h, 375);
    assert_int_equal(w, 500);
    memcpy(box, f->box, sizeof f->box);
    *oh = f->oh;
    *ow = f->ow;
    return 1;
}

static void test_scaled_decode_tolerance(void **state) {
    (void)state;
    size_t n, i;
    unsigned char *jpg = jpeg_bytes(&n);
    json_t *cs;
    int scales_seen = 0;
    json_array_foreach(json_object_get(REF, "cases"), i, cs) {
        fixed f;
        for (int k = 0; k < 4; k++) f.box[k] = (int)json_integer_value(json_array_get(json_object_get(cs, "box"), k));
        f.oh = (int)json_integer_value(json_array_get(json_object_get(cs, "size"), 0));
        f.ow = (int)json_integer_value(json_array_get(json_object_get(cs, "size"), 1));
        taas_crop_hint hint = {fixed_box, &f};
        taas_image img;
        int boxed;
        taas_error err;
        assert_int_equal(taas_decode_jpeg_hinted(jpg, n, &hint, &img, &boxed, &err), 0);
        assert_int_equal(boxed, 1);
        int denom = (int)lround((double)f.box[2] / img.h); /* the box at the chosen scale, widened */
        scales_seen |= 1 << (denom == 8 ? 3 : denom == 4 ? 2 : denom == 2 ? 1 : 0);
        tx_img t = {img.c, img.h, img.w, 0, 1, img.data, 1};
        assert_int_equal(tx_resize_pil_box(&t, img.box, f.oh, f.ow, TX_BILINEAR), 0);
        const json_t *want = json_object_get(cs, "out");
        assert_int_equal(json_array_size(want), (size_t)f.oh * f.ow * 3);
        double sum = 0;
        int worst = 0;
        for (size_t k = 0; k < json_array_size(want); k++) {
            int d = abs(((uint8_t *)t.data)[k] - (int)json_integer_value(json_array_get(want, k)));
            sum += d;
            if (d > worst) worst = d;
        }
        double mean = sum / (double)json_array_size(want);
        printf("box %d,%d %dx%d -> %dx%d: scale 1/%d, mean |diff| %.3f, max %d\n", f.box[0], f.box[1], f.box[2],
               f.box[3], f.oh, f.ow, denom, mean, worst);
        /* full scale differs only where libjpeg-turbo's skip leaves the upsampler without
         * the row above the box */
        double max_mean = denom == 1 ? 0.05 : 2.5;
        int max_worst = denom == 1 ? 4 : 32;
        if (mean > max_mean || worst > max_worst)
            fail_msg("scale 1/%d: mean %.3f (at most %g), max %d (at most %d)", denom, mean, max_mean, worst, max_worst);
        free(t.data);
    }
    assert_int_equal(scales_seen, 0xF); /* 1, 1/2, 1/4 and 1/8 all tried */
    free(jpg);
}

/* Only the top rows are wanted, but the rows below are still read: a cut file is an error. */
static void test_truncated_is_still_an_error(void **state) {
    (void)state;
    size_t n;
    unsigned char *jpg = jpeg_bytes(&n);
    fixed f = {{0, 0, 200, 200}, 24, 24};
    taas_crop_hint hint = {fixed_box, &f};
    taas_image img;
    int boxed;
    taas_error err;
    assert_int_equal(taas_decode_jpeg_hinted(jpg, n * 2 / 3, &hint, &img, &boxed, &err), -1);
    assert_string_equal(err.ename, "TaasDataError");
    assert_non_null(strstr(err.message, "truncated JPEG"));
    free(jpg);
}

/* Through the transforms: the hint draws the box apply would draw, and the boxed image
 * comes out with the chain's shape and close to the full path's values. */
static void test_hint_through_the_chain(void **state) {
    (void)state;
    size_t n;
    unsigned char *jpg = jpeg_bytes(&n);
    json_t *spec = json_loads("{\"type\": \"Compose\", \"transforms\": [{\"type\": \"RandomResizedCrop\", \"size\": 56},"
                              "{\"type\": \"ToTensor\"}]}", 0, NULL);
    taas_error err;
    taas_transform *t = taas_transform_new(spec, &err);
    json_decref(spec);
    assert_non_null(t);
    static float a[3 * 56 * 56], b[3 * 56 * 56];
    double worst_mean = 0;
    for (uint64_t idx = 0; idx < 20; idx++) {
        taas_transform_hint th;
        assert_int_equal(taas_transform_hint_for(t, 5, 1, idx, &th), 1);
        taas_image img;
        int boxed;
        assert_int_equal(taas_decode_jpeg_hinted(jpg, n, &th.hint, &img, &boxed, &err), 0);
        assert_int_equal(taas_transform_apply_boxed(t, &img, boxed, 5, 1, idx, a, &err), 0);
        assert_int_equal(taas_decode_jpeg(jpg, n, &img, &err), 0);
        assert_int_equal(taas_transform_apply(t, &img, 5, 1, idx, b, &err), 0);
        double sum = 0;
        for (size_t k = 0; k < sizeof a / sizeof *a; k++) sum += fabs(a[k] - b[k]) * 255.0;
        worst_mean = fmax(worst_mean, sum / (sizeof a / sizeof *a));
    }
    printf("through the chain, 20 draws: worst mean |diff| %.3f\n", worst_mean);
    assert_true(worst_mean <= 2.5);
    taas_transform_free(t);
    free(jpg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scaled_decode_tolerance),
        cmocka_unit_test(test_truncated_is_still_an_error),
        cmocka_unit_test(test_hint_through_the_chain),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
