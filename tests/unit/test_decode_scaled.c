/* Decoding only what the crop keeps: a JPEG decoded at libjpeg-turbo's smallest scale that
 * covers the output, only the box's rows and columns, then resized as RandomResizedCrop
 * resizes, against torchvision's resized_crop of PIL's full decode (tests/data/scaled_ref.json,
 * made by tests/gen_scaled_ref.py). The stated tolerance (docs/data.md), per image in 0..255:
 * mean absolute difference at most 2.5 and largest at most 32 at a reduced scale; at full
 * scale (a box that no reduced scale covers) none: every byte is torchvision's. The same for
 * the evaluation recipe, Resize(int) + CenterCrop and Resize alone, against torchvision's
 * Compose of them (RESIZE_TOL below). Also: the hint path through a dataset and the
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
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_testutil.h"
#include "formats.h"
#include "pipeline.h"
#include "transform_chain.h"

TU_FIXTURE_GROUP(REF, "scaled_ref.json")

static uint8_t *hex_bytes(const char *hex, size_t *n) {
    *n = strlen(hex) / 2;
    uint8_t *b = malloc(*n);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (uint8_t)v;
    }
    return b;
}

static unsigned char *jpeg_named(const char *key, size_t *n) {
    return hex_bytes(json_string_value(json_object_get(REF, key)), n);
}

static unsigned char *jpeg_bytes(size_t *n) {
    return jpeg_named("jpeg", n);
}

typedef struct fixed {
    int box[4], oh, ow;
} fixed;

/* a RandomResizedCrop's: the box (top, left, height, width) cut, then resized */
static int fixed_box(void *ctx, int h, int w, taas_crop_want *out) {
    const fixed *f = ctx;
    assert_int_equal(h, 375);
    assert_int_equal(w, 500);
    *out = (taas_crop_want){{f->box[1], f->box[0], f->box[1] + f->box[3], f->box[0] + f->box[2]}, f->oh, f->ow, 0};
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
        /* full scale is exact: only the reduced scales' averaging differs */
        double max_mean = denom == 1 ? 0.0 : 2.5;
        int max_worst = denom == 1 ? 0 : 32;
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

/* ---- Resize(int) + CenterCrop, and Resize alone -------------------------------------- */

/* The stated tolerance for the evaluation recipe (docs/data.md), per image in 0..255, by the
 * scale 1/denom: the mean and the largest absolute difference from torchvision's. */
static const struct {
    int denom;
    double mean;
    int worst;
} RESIZE_TOL[] = {{1, 0.0, 0}, {2, 2.5, 32}, {4, 2.5, 32}, {8, 2.5, 32}};

static taas_transform *chain_of(const json_t *steps) {
    json_t *spec = json_pack("{s:s, s:O}", "type", "Compose", "transforms", steps);
    taas_error err;
    taas_transform *t = taas_transform_new(spec, &err);
    if (!t) fail_msg("%s", err.message);
    json_decref(spec);
    return t;
}

/* mean and largest |a * 255 - want| over n values: a is the chain's CHW tensor (the implicit
 * ToTensor: v / 255), want torchvision's HWC bytes */
static double chw_diff(const float *a, const uint8_t *want, int h, int w, int *worst) {
    double sum = 0;
    *worst = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < 3; ch++) {
                int v = (int)lrintf(a[((size_t)ch * h + y) * w + x] * 255.0f);
                int d = abs(v - want[((size_t)y * w + x) * 3 + ch]);
                sum += d;
                if (d > *worst) *worst = d;
            }
    return sum / ((double)h * w * 3);
}

static void test_resize_center_crop_tolerance(void **state) {
    (void)state;
    size_t i;
    json_t *cs;
    int scales_seen = 0;
    json_array_foreach(json_object_get(REF, "resize_cases"), i, cs) {
        size_t n, nwant;
        unsigned char *jpg = jpeg_named(json_string_value(json_object_get(cs, "jpeg")), &n);
        uint8_t *want = hex_bytes(json_string_value(json_object_get(cs, "out")), &nwant);
        const json_t *shape = json_object_get(cs, "shape");
        int wh = (int)json_integer_value(json_array_get(shape, 0)), ww = (int)json_integer_value(json_array_get(shape, 1));
        int denom_want = (int)json_integer_value(json_object_get(cs, "scale"));
        taas_transform *t = chain_of(json_object_get(cs, "transforms"));
        char *what = json_dumps(json_object_get(cs, "transforms"), JSON_COMPACT);
        taas_error err;
        taas_image img;
        /* the chain's shape is the full image's, whatever is decoded */
        assert_int_equal(taas_decode_jpeg(jpg, n, &img, &err), 0);
        int oc, oh, ow;
        assert_int_equal(taas_transform_out_shape(t, img.h, img.w, img.c, &oc, &oh, &ow, &err), 0);
        assert_int_equal(oh, wh);
        assert_int_equal(ow, ww);
        float *full = malloc((size_t)3 * oh * ow * sizeof *full), *part = malloc((size_t)3 * oh * ow * sizeof *part);
        /* the full decode is Pillow's, bit for bit */
        assert_int_equal(taas_transform_apply(t, &img, 5, 1, i, full, &err), 0);
        int worst;
        double mean = chw_diff(full, want, oh, ow, &worst);
        if (worst != 0) fail_msg("%s: the full decode differs from torchvision's by up to %d", what, worst);
        /* only what the chain keeps */
        taas_transform_hint th;
        if (taas_transform_hint_for(t, 5, 1, i, &th) != 1) fail_msg("%s: no hint", what);
        int boxed;
        assert_int_equal(taas_decode_jpeg_hinted(jpg, n, &th.hint, &img, &boxed, &err), 0);
        if (!boxed) fail_msg("%s: decoded whole", what);
        if (img.denom != denom_want) fail_msg("%s: decoded at 1/%d, not 1/%d", what, img.denom, denom_want);
        scales_seen |= 1 << (img.denom == 8 ? 3 : img.denom == 4 ? 2 : img.denom == 2 ? 1 : 0);
        assert_int_equal(taas_transform_apply_boxed(t, &img, boxed, 5, 1, i, part, &err), 0);
        mean = chw_diff(part, want, oh, ow, &worst);
        printf("%s on %s: scale 1/%d, mean |diff| %.3f, max %d\n", what, json_string_value(json_object_get(cs, "jpeg")),
               denom_want, mean, worst);
        for (size_t k = 0; k < sizeof RESIZE_TOL / sizeof *RESIZE_TOL; k++)
            if (RESIZE_TOL[k].denom == denom_want && (mean > RESIZE_TOL[k].mean || worst > RESIZE_TOL[k].worst))
                fail_msg("%s: scale 1/%d: mean %.3f (at most %g), max %d (at most %d)", what, denom_want, mean,
                         RESIZE_TOL[k].mean, worst, RESIZE_TOL[k].worst);
        free(what);
        free(full);
        free(part);
        free(want);
        free(jpg);
        taas_transform_free(t);
    }
    assert_int_equal(scales_seen, 0xF); /* 1, 1/2, 1/4 and 1/8 all tried */
}

/* What is not planned: the whole image decoded, the full path's result. */
static void test_resize_hint_refusals(void **state) {
    (void)state;
    size_t n;
    unsigned char *jpg = jpeg_bytes(&n);
    taas_error err;
    /* nearest: a reduced scale would average what nearest picks */
    json_t *steps = json_loads("[{\"type\": \"Resize\", \"size\": 64, \"interpolation\": \"nearest\"}]", 0, NULL);
    taas_transform *t = chain_of(steps);
    json_decref(steps);
    taas_transform_hint th;
    assert_int_equal(taas_transform_hint_for(t, 5, 1, 0, &th), 0);
    taas_transform_free(t);
    /* a crop larger than the resized image is padded: decoded whole */
    steps = json_loads("[{\"type\": \"Resize\", \"size\": 40}, {\"type\": \"CenterCrop\", \"size\": 48}]", 0, NULL);
    t = chain_of(steps);
    json_decref(steps);
    assert_int_equal(taas_transform_hint_for(t, 5, 1, 0, &th), 1);
    taas_image img;
    int boxed;
    assert_int_equal(taas_decode_jpeg_hinted(jpg, n, &th.hint, &img, &boxed, &err), 0);
    assert_int_equal(boxed, 0);
    assert_int_equal(img.h, 375);
    assert_int_equal(img.w, 500);
    taas_image_free(&img);
    taas_transform_free(t);
    /* Resize alone to a size no reduced scale covers: the whole image at full scale */
    steps = json_loads("[{\"type\": \"Resize\", \"size\": 256}]", 0, NULL);
    t = chain_of(steps);
    json_decref(steps);
    assert_int_equal(taas_transform_hint_for(t, 5, 1, 0, &th), 1);
    assert_int_equal(taas_decode_jpeg_hinted(jpg, n, &th.hint, &img, &boxed, &err), 0);
    assert_int_equal(boxed, 0);
    assert_int_equal(img.h, 375);
    taas_image_free(&img);
    taas_transform_free(t);
    free(jpg);
}

/* Through a loader's pipeline: Resize(100) alone on a 500x375 JPEG is decoded at 1/2
 * (250x188), yet the batch has the full image's shape (100x133, where 250x188 would give
 * 100x132) and torchvision's values within the tolerance. */
static void test_resize_alone_through_the_pipeline(void **state) {
    (void)state;
    const json_t *cs = json_array_get(json_object_get(REF, "resize_cases"), 6);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(cs, "transforms"), 0),
                                                          "type")), "Resize");
    assert_int_equal(json_array_size(json_object_get(cs, "transforms")), 1);
    char root[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/taas-scaled-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(root));
    char dir[300], file[320];
    snprintf(dir, sizeof dir, "%s/cls", root);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/a.jpg", dir);
    size_t n, nwant;
    unsigned char *jpg = jpeg_bytes(&n);
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(jpg, 1, n, f), n);
    fclose(f);
    json_t *spec = json_pack("{s:s, s:s, s:{s:s, s:O}}", "type", "ImageFolder", "root", root, "transform", "type",
                             "Compose", "transforms", json_object_get(cs, "transforms"));
    taas_error err;
    taas_fetcher *fe = taas_fetcher_new(NULL, &err);
    assert_non_null(fe);
    taas_dataset *d = taas_dataset_open(spec, fe, &err);
    if (!d) fail_msg("%s", err.message);
    taas_transform *t = taas_transform_new(json_object_get(spec, "transform"), &err);
    assert_non_null(t);
    taas_sampler_cfg sc = {.size = 1, .batch = 1, .world = 1};
    taas_sampler *s = taas_sampler_new(&sc, &err);
    assert_non_null(s);
    taas_pipeline_cfg pc = {.dataset = d, .transform = t, .sampler = s, .epochs = 1, .loaders = 1, .threads = 1,
                            .queue_depth = 1};
    taas_pipeline *p = taas_pipeline_new(&pc, &err);
    assert_non_null(p);
    taas_batch *b;
    if (taas_pipeline_next(p, &b, &err) != 0) fail_msg("%s", err.message);
    assert_int_equal(b->c, 3);
    assert_int_equal(b->h, 100);
    assert_int_equal(b->w, 133);
    uint8_t *want = hex_bytes(json_string_value(json_object_get(cs, "out")), &nwant);
    int worst;
    double mean = chw_diff(b->images, want, 100, 133, &worst);
    printf("Resize(100) through the pipeline: mean |diff| %.3f, max %d\n", mean, worst);
    assert_true(mean <= RESIZE_TOL[1].mean && worst <= RESIZE_TOL[1].worst);
    taas_batch_free(b);
    assert_int_equal(taas_pipeline_next(p, &b, &err), 1);
    taas_pipeline_free(p);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
    taas_fetcher_free(fe);
    json_decref(spec);
    free(want);
    free(jpg);
    assert_int_equal(remove(file), 0);
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(rmdir(root), 0);
}

/* Boxes at full scale, narrow ones too (a box narrower than the part of the scanline before
 * it, found by fuzz_jpeg), at the image's edges and inside: every byte is the full decode's. */
static void test_boxes_at_full_scale_are_exact(void **state) {
    (void)state;
    size_t n;
    unsigned char *jpg = jpeg_bytes(&n);
    taas_image whole;
    taas_error err;
    assert_int_equal(taas_decode_jpeg(jpg, n, &whole, &err), 0);
    static const int boxes[][4] = {{0, 0, 9, 1},      {5, 17, 30, 1},  {100, 499, 20, 1}, {7, 33, 40, 2},
                                   {370, 480, 5, 20}, {0, 0, 375, 3}, {200, 250, 17, 5}, {1, 1, 1, 1}};
    for (size_t b = 0; b < sizeof boxes / sizeof *boxes; b++) {
        fixed f = {{boxes[b][0], boxes[b][1], boxes[b][2], boxes[b][3]}, boxes[b][2], boxes[b][3]};
        taas_crop_hint hint = {fixed_box, &f};
        taas_image img;
        int boxed;
        assert_int_equal(taas_decode_jpeg_hinted(jpg, n, &hint, &img, &boxed, &err), 0);
        assert_int_equal(boxed, 1);
        assert_int_equal(img.denom, 1);
        assert_int_equal(img.h, f.box[2]);
        assert_int_equal(img.w, f.box[3]);
        for (int y = 0; y < img.h; y++)
            if (memcmp((uint8_t *)img.data + (size_t)y * img.w * 3,
                       (uint8_t *)whole.data + ((size_t)(f.box[0] + y) * 500 + f.box[1]) * 3, (size_t)img.w * 3))
                fail_msg("box %d,%d %dx%d: row %d differs from the full decode's", f.box[0], f.box[1], f.box[2],
                         f.box[3], y);
        taas_image_free(&img);
    }
    taas_image_free(&whole);
    free(jpg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scaled_decode_tolerance),
        cmocka_unit_test(test_truncated_is_still_an_error),
        cmocka_unit_test(test_boxes_at_full_scale_are_exact),
        cmocka_unit_test(test_hint_through_the_chain),
        cmocka_unit_test(test_resize_center_crop_tolerance),
        cmocka_unit_test(test_resize_hint_refusals),
        cmocka_unit_test(test_resize_alone_through_the_pipeline),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
