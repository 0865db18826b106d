/* TextFile (dataloader/format_text.c): a text's windows of block_size + 1 bytes at a stride of
 * block_size, the train and val splits as nanoGPT cuts them, bytes beyond ASCII as they are,
 * and the refusals: a text shorter than one window, a missing file, a bad spec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "formats.h"
#define FX_SPEC_TESTS
#include "formats_testutil.h"

static const char *text_spec(const char *rel, int block, const char *split) {
    static char s[1024];
    snprintf(s, sizeof s, "{\"type\": \"TextFile\", \"path\": \"%s\", \"block_size\": %d, \"split\": %s%s%s, "
             "\"val_fraction\": 0.1}", fx_path(rel), block, split ? "\"" : "", split ? split : "null", split ? "\"" : "");
    return s;
}

/* window i of d: the bytes at [i * block, i * block + block] of text */
static void check_windows(taas_dataset *d, const unsigned char *text, size_t begin, int block) {
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_true(info->tokens);
    assert_int_equal(info->num_classes, 256);
    assert_int_equal(info->c, block + 1);
    assert_int_equal(info->h, 1);
    assert_int_equal(info->w, 1);
    for (size_t i = 0; i < info->size; i++) {
        taas_image img;
        int64_t label;
        assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), 0);
        assert_int_equal(img.type, TAAS_PIX_F32);
        assert_int_equal(img.c, block + 1);
        for (int k = 0; k <= block; k++)
            assert_true(((float *)img.data)[k] == (float)text[begin + i * (size_t)block + (size_t)k]);
        taas_image_free(&img);
    }
}

static void test_windows_and_splits(void **state) {
    (void)state;
    unsigned char text[1000];
    for (int i = 0; i < 1000; i++) text[i] = (unsigned char)((i * 37 + 11) % 256);  /* every byte value */
    fx_write("t.txt", text, sizeof text);
    taas_dataset *d = open_ok(text_spec("t.txt", 10, NULL));
    assert_int_equal(taas_dataset_info_get(d)->size, (1000 - 1) / 10);  /* the last window ends at byte 990 */
    check_windows(d, text, 0, 10);
    taas_dataset_free(d);
    d = open_ok(text_spec("t.txt", 10, "train"));  /* the first 900 bytes */
    assert_int_equal(taas_dataset_info_get(d)->size, (900 - 1) / 10);
    check_windows(d, text, 0, 10);
    taas_dataset_free(d);
    d = open_ok(text_spec("t.txt", 7, "val"));  /* the last 100 */
    assert_int_equal(taas_dataset_info_get(d)->size, (100 - 1) / 7);
    check_windows(d, text, 900, 7);
    taas_dataset_free(d);
    fx_write("exact.txt", text, 11);  /* one window exactly */
    d = open_ok(text_spec("exact.txt", 10, NULL));
    assert_int_equal(taas_dataset_info_get(d)->size, 1);
    taas_dataset_free(d);
}

static void test_refusals(void **state) {
    (void)state;
    fx_write("short.txt", "too short", 9);
    open_bad(text_spec("short.txt", 10, NULL), "TaasDataError", "short.txt", "has 9 bytes, fewer than one window", NULL);
    open_bad(text_spec("missing.txt", 10, NULL), "TaasIOError", "missing.txt", NULL);
    open_bad(text_spec("short.txt", 0, NULL), "TaasValueError", "block_size", NULL);
    open_bad(text_spec("short.txt", 4, "test"), "TaasValueError", "split", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_and_splits),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
