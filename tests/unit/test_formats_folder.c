/* ImageFolder against real torchvision (tests/data/imagefolder_ref.json, made by
 * tests/gen_imagefolder_ref.py): the same files give the same classes, the same samples in
 * the same order with the same labels, and the same RGB pixels. Then each refusal: an image
 * extension the loaders do not decode, a truncated JPEG, an empty class folder, no class
 * folder, a missing root, a symlink loop, an HTTP root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "fixture_testutil.h"
#include "formats.h"
#define FX_SPEC_TESTS
#include "formats_testutil.h"

TU_FIXTURE_GROUP(REF, "imagefolder_ref.json")

static const char *folder(const char *root) {
    static char s[1024];
    snprintf(s, sizeof s, "{\"type\": \"ImageFolder\", \"root\": \"%s\", \"transform\": null}", root);
    return s;
}

static void write_hex(const char *rel, const char *hex) {
    size_t n = strlen(hex) / 2;
    unsigned char *b = malloc(n ? n : 1);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        b[i] = (unsigned char)v;
    }
    fx_write(rel, b, n);
    free(b);
}

static void write_ref_files(void) {
    const char *rel;
    json_t *hex;
    json_object_foreach(json_object_get(REF, "files"), rel, hex) write_hex(rel, json_string_value(hex));
}

static void test_torchvision_order_labels_pixels(void **state) {
    (void)state;
    write_ref_files();
    taas_dataset *d = open_ok(folder(FX_DIR));
    const taas_dataset_info *info = taas_dataset_info_get(d);
    const json_t *classes = json_object_get(REF, "classes"), *samples = json_object_get(REF, "samples");
    assert_string_equal(info->type, "ImageFolder");
    assert_int_equal(info->num_classes, json_array_size(classes));
    for (size_t k = 0; k < json_array_size(classes); k++)
        assert_string_equal(info->classes[k], json_string_value(json_array_get(classes, k)));
    assert_int_equal(info->size, json_array_size(samples));
    for (size_t i = 0; i < json_array_size(samples); i++) {
        const json_t *s = json_array_get(samples, i);
        taas_image img;
        int64_t label;
        if (taas_dataset_get(d, i, &img, &label, &E) != 0) fail_msg("sample %zu: %s", i, E.message);
        assert_int_equal(label, json_integer_value(json_object_get(s, "label")));
        const json_t *shape = json_object_get(s, "shape"), *px = json_object_get(s, "pixels");
        assert_int_equal(img.h, json_integer_value(json_array_get(shape, 0)));
        assert_int_equal(img.w, json_integer_value(json_array_get(shape, 1)));
        assert_int_equal(img.c, 3);
        assert_int_equal(img.type, TAAS_PIX_U8);
        assert_int_equal(json_array_size(px), (size_t)img.h * img.w * 3);
        const unsigned char *p = img.data;
        for (size_t k = 0; k < json_array_size(px); k++)
            if (p[k] != json_integer_value(json_array_get(px, k)))
                fail_msg("%s: byte %zu is %u, torchvision reads %lld", json_string_value(json_object_get(s, "path")),
                         k, p[k], (long long)json_integer_value(json_array_get(px, k)));
        taas_image_free(&img);
    }
    taas_dataset_free(d);
    /* file:// names the same folder */
    char url[600];
    snprintf(url, sizeof url, "file://%s", FX_DIR);
    d = open_ok(folder(url));
    assert_int_equal(taas_dataset_info_get(d)->size, json_array_size(samples));
    taas_dataset_free(d);
}

static void small_jpeg(const char *rel) {
    unsigned char *px = fx_pic_make(8, 6, 3, 1);
    taas_buf b = TAAS_BUF_INIT;
    fx_jpeg(&b, 8, 6, 3, px, 90);
    fx_buf_write(rel, &b);
    taas_buf_free(&b);
    free(px);
}

static void test_undecoded_extension_is_named(void **state) {
    (void)state;
    small_jpeg("a/1.jpg");
    fx_write("b/sub/pic.WebP", "RIFF", 4);
    open_bad(folder(FX_DIR), "TaasDataError", "b/sub/pic.WebP", "webp image", "JPEG and PNG only", NULL);
    fx_rmtree();
    fx_mkdtemp();
    small_jpeg("a/1.jpg");
    fx_write("a/2.bmp", "BM", 2);
    open_bad(folder(FX_DIR), "TaasDataError", "a/2.bmp", "bmp image", NULL);
}

static void test_truncated_jpeg_names_file_and_host(void **state) {
    (void)state;
    small_jpeg("cls/ok.jpg");
    unsigned char *px = fx_pic_make(64, 48, 3, 2);
    taas_buf b = TAAS_BUF_INIT;
    fx_jpeg(&b, 64, 48, 3, px, 90);
    fx_write("cls/torn.jpg", b.data, b.len / 2);
    taas_buf_free(&b);
    free(px);
    taas_dataset *d = open_ok(folder(FX_DIR));
    assert_int_equal(taas_dataset_info_get(d)->size, 2);
    taas_image img;
    int64_t label;
    assert_int_equal(taas_dataset_get(d, 0, &img, &label, &E), 0);
    taas_image_free(&img);
    assert_int_equal(taas_dataset_get(d, 1, &img, &label, &E), -1);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    assert_string_equal(E.ename, "TaasDataError");
    assert_non_null(strstr(E.message, "sample 1 ("));
    assert_non_null(strstr(E.message, "cls/torn.jpg on "));
    assert_non_null(strstr(E.message, host));
    assert_non_null(strstr(E.message, "truncated JPEG"));
    taas_dataset_free(d);
}

static void test_listing_refusals(void **state) {
    (void)state;
    open_bad(folder(FX_DIR), "TaasDataError", "no class folder", NULL);
    small_jpeg("full/1.jpeg");
    fx_write("empty/notes.txt", "x", 1);
    open_bad(folder(FX_DIR), "TaasDataError", "no image in the class folder empty", NULL);
    open_bad(folder(fx_path("nowhere")), "TaasIOError", "nowhere", "No such file or directory", NULL);
    open_bad(folder("https://example.org/train/"), "TaasValueError", "cannot be listed", NULL);
    assert_non_null(strstr(E.hint, "WebDataset"));
    /* a link to a folder above it would be walked for ever */
    fx_rmtree();
    fx_mkdtemp();
    small_jpeg("c/1.jpg");
    assert_int_equal(symlink(fx_path("c"), fx_path("c/loop")), 0);
    open_bad(folder(FX_DIR), "TaasDataError", "c/loop", "symbolic link", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_torchvision_order_labels_pixels, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_undecoded_extension_is_named, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_jpeg_names_file_and_host, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_listing_refusals, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
