/* The token datasets: TextFile (dataloader/format_text.c): a text's windows of block_size + 1
 * bytes at a stride of block_size, the train and val splits as nanoGPT cuts them, bytes
 * beyond ASCII as they are, and the refusals: a text shorter than one window, a missing
 * file, a bad spec. TokenShards (format_tokens.c): llm.c's shards named by a brace range, a
 * glob or a list, windows per shard, bare uint16 files, and the header's errors named by
 * shard and offset. */
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

/* An llm.c shard of n tokens (token i = base + i mod 50000), with the header's count given. */
static void write_shard(const char *rel, uint32_t n, uint32_t count, uint32_t magic, uint32_t version, uint32_t base) {
    size_t bytes = 1024 + 2 * (size_t)n;
    unsigned char *b = calloc(1, bytes);
    uint32_t h[3] = {magic, version, count};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 4; j++) b[4 * k + j] = (unsigned char)(h[k] >> (8 * j));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = (base + i) % 50000;
        b[1024 + 2 * i] = (unsigned char)t;
        b[1024 + 2 * i + 1] = (unsigned char)(t >> 8);
    }
    fx_write(rel, b, bytes);
    free(b);
}

static const char *shards_spec(const char *urls, int block, int raw) {
    static char s[2048];
    snprintf(s, sizeof s, "{\"type\": \"TokenShards\", \"urls\": %s, \"block_size\": %d, \"raw\": %s}", urls, block,
             raw ? "true" : "false");
    return s;
}

/* window i of d holds tokens first + i * block .. + block of the shard that starts at base */
static void check_tokens(taas_dataset *d, size_t i, uint32_t base, int block, uint32_t first) {
    taas_image img;
    int64_t label;
    assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), 0);
    assert_int_equal(img.c, block + 1);
    for (int k = 0; k <= block; k++)
        assert_true(((float *)img.data)[k] == (float)((base + first + (uint32_t)k) % 50000));
    taas_image_free(&img);
}

static void test_token_shards(void **state) {
    (void)state;
    write_shard("s_000.bin", 100, 100, 20240520, 1, 0);
    write_shard("s_001.bin", 35, 35, 20240520, 1, 49990);  /* tokens past 65535 / 2: all 16 bits */
    char urls[1024];
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("s_{000..001}.bin"));
    taas_dataset *d = open_ok(shards_spec(urls, 10, 0));
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_true(info->tokens);
    assert_int_equal(info->size, 9 + 3);  /* (100 - 1) / 10 and (35 - 1) / 10: no window spans two shards */
    assert_int_equal(info->c, 11);
    check_tokens(d, 0, 0, 10, 0);
    check_tokens(d, 8, 0, 10, 80);
    check_tokens(d, 9, 49990, 10, 0);
    check_tokens(d, 11, 49990, 10, 20);
    taas_dataset_free(d);
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("s_*.bin"));  /* a local glob, sorted */
    d = open_ok(shards_spec(urls, 10, 0));
    assert_int_equal(taas_dataset_info_get(d)->size, 12);
    check_tokens(d, 9, 49990, 10, 0);
    taas_dataset_free(d);
    /* bare uint16 tokens (nanoGPT's train.bin): the same tokens without the header */
    unsigned char raw[2 * 30];
    for (int i = 0; i < 30; i++) raw[2 * i] = (unsigned char)(7 + i), raw[2 * i + 1] = 1;
    fx_write("train.bin", raw, sizeof raw);
    snprintf(urls, sizeof urls, "[\"%s\"]", fx_path("train.bin"));
    d = open_ok(shards_spec(urls, 4, 1));
    assert_int_equal(taas_dataset_info_get(d)->size, (30 - 1) / 4);
    check_tokens(d, 2, 256 + 7, 4, 8);
    taas_dataset_free(d);
}

static void test_token_shard_errors(void **state) {
    (void)state;
    char urls[1024];
    write_shard("magic.bin", 20, 20, 12345, 1, 0);
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("magic.bin"));
    open_bad(shards_spec(urls, 4, 0), "TaasDataError", "magic.bin", "magic number at offset 0 is 12345", NULL);
    write_shard("version.bin", 20, 20, 20240520, 2, 0);
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("version.bin"));
    open_bad(shards_spec(urls, 4, 0), "TaasDataError", "version.bin", "version at offset 4 is 2", NULL);
    write_shard("short.bin", 20, 21, 20240520, 1, 0);  /* the header promises one token more */
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("short.bin"));
    open_bad(shards_spec(urls, 4, 0), "TaasDataError", "short.bin", "token count at offset 8 is 21", NULL);
    fx_write("tiny.bin", "abc", 3);
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("tiny.bin"));
    open_bad(shards_spec(urls, 4, 0), "TaasDataError", "tiny.bin", "fewer than a token shard's 1024-byte header", NULL);
    open_bad(shards_spec(urls, 4, 1), "TaasDataError", "tiny.bin", "not a whole number of uint16 tokens", NULL);
    write_shard("few.bin", 5, 5, 20240520, 1, 0);
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("few.bin"));
    open_bad(shards_spec(urls, 8, 0), "TaasDataError", "no shard", "block_size + 1 = 9", NULL);
    snprintf(urls, sizeof urls, "\"%s\"", fx_path("none_*.bin"));
    open_bad(shards_spec(urls, 8, 0), "TaasIOError", "matches no file", NULL);
    open_bad(shards_spec("[]", 8, 0), "TaasValueError", "TokenShards: urls names no shard", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_and_splits),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_token_shards),
        cmocka_unit_test(test_token_shard_errors),
    };
    return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
