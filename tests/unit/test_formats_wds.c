/* The tar reader (ustar, pax, GNU, v7 headers) and WebDataset shards: grouping by key,
 * PNG/JPEG/.npy images, .cls and .txt labels, brace-expanded shard lists, and each bad
 * shard with its message. Shards are written at test time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "formats.h"
#define FX_SPEC_TESTS
#include "formats_testutil.h"

/* A WebDataset spec; urls is JSON text (a string with quotes, or a list). */
static const char *wds(const char *urls, const char *image_key, const char *label_key, const char *length) {
    static char s[2048];
    snprintf(s, sizeof s,
             "{\"type\": \"WebDataset\", \"urls\": %s, \"transform\": null, \"image_key\": \"%s\", "
             "\"label_key\": \"%s\", \"length\": %s}",
             urls, image_key, label_key, length);
    return s;
}

static const char *quoted(const char *rel) {
    static char s[4][600];
    static int k;
    char *p = s[k++ % 4];
    snprintf(p, 600, "\"%s\"", fx_path(rel));
    return p;
}

/* ---- the tar reader ----------------------------------------------------------------- */

typedef struct got {
    char names[16][300];
    char data[16][64];
    int n;
} got;

static int list_tar(const taas_buf *b, got *g) {
    taas_tar_iter it;
    taas_tar_iter_init(&it, (const unsigned char *)b->data, b->len, "test.tar");
    taas_tar_member m;
    int r;
    g->n = 0;
    while ((r = taas_tar_next(&it, &m, &E)) == 1 && g->n < 16) {
        snprintf(g->names[g->n], sizeof g->names[0], "%s", m.name);
        size_t n = m.size < 63 ? (size_t)m.size : 63;
        memcpy(g->data[g->n], b->data + m.offset, n);
        g->data[g->n][n] = '\0';
        g->n++;
    }
    taas_tar_iter_free(&it);
    return r;
}

static void test_tar_flavours(void **state) {
    (void)state;
    taas_buf b = TAAS_BUF_INIT;
    char longname[260];
    memset(longname, 'a', 250);
    strcpy(longname + 250, ".png");
    fx_tar_add_str(&b, "plain.txt", "one");
    fx_tar_header(&b, "dir/", NULL, 0, '5', FX_USTAR, 0);           /* skipped */
    fx_tar_header(&b, "link", NULL, 0, '2', FX_USTAR, 0);           /* skipped */
    fx_tar_header(&b, "file.txt", "some/prefix", 3, '0', FX_USTAR, 0); /* ustar prefix */
    fx_tar_data(&b, "two", 3);
    fx_tar_add_long(&b, longname, "three", 5, 1);                    /* pax path */
    fx_tar_add_long(&b, longname, "four", 4, 0);                     /* GNU 'L' */
    fx_tar_header(&b, "big.bin", NULL, 4, '0', FX_GNU, 1);           /* base-256 size */
    fx_tar_data(&b, "five", 4);
    fx_tar_header(&b, "old.txt", NULL, 3, '\0', FX_V7, 0);           /* v7: no magic */
    fx_tar_data(&b, "six", 3);
    fx_tar_end(&b);
    got g;
    assert_int_equal(list_tar(&b, &g), 0);
    assert_int_equal(g.n, 6);
    assert_string_equal(g.names[0], "plain.txt");
    assert_string_equal(g.data[0], "one");
    assert_string_equal(g.names[1], "some/prefix/file.txt");
    assert_string_equal(g.data[1], "two");
    assert_string_equal(g.names[2], longname);
    assert_string_equal(g.data[2], "three");
    assert_string_equal(g.names[3], longname);
    assert_string_equal(g.data[3], "four");
    assert_string_equal(g.names[4], "big.bin");
    assert_string_equal(g.data[4], "five");
    assert_string_equal(g.names[5], "old.txt");
    assert_string_equal(g.data[5], "six");
    /* without the end blocks (some writers stop at the last member): the same */
    b.len -= 1024;
    assert_int_equal(list_tar(&b, &g), 0);
    assert_int_equal(g.n, 6);
    taas_buf_free(&b);
}

static void tar_bad(const taas_buf *b, const char *want) {
    got g;
    if (list_tar(b, &g) != -1) fail_msg("a bad archive was read (want %s)", want);
    assert_string_equal(E.ename, "TaasDataError");
    if (!strstr(E.message, "test.tar: corrupt tar archive at byte ") || !strstr(E.message, want))
        fail_msg("got '%s', wanted '...%s...'", E.message, want);
    assert_true(E.hint[0] != '\0');
}

static void test_tar_corrupt(void **state) {
    (void)state;
    taas_buf b = TAAS_BUF_INIT;
    fx_tar_add_str(&b, "a.txt", "hello");
    fx_tar_add(&b, "b.bin", "0123456789", 10);
    fx_tar_end(&b);
    taas_buf cut = TAAS_BUF_INIT;
    taas_buf_add(&cut, b.data, 512 + 512 + 512 + 4); /* b.bin's data is cut short */
    tar_bad(&cut, "a member needs 10 bytes but only 4 remain (truncated archive)");
    taas_buf_free(&cut);
    taas_buf_add(&cut, b.data, 512 + 512 + 100); /* inside the second header */
    tar_bad(&cut, "the archive ends inside a header (truncated)");
    taas_buf_free(&cut);
    b.data[1024 + 3] ^= 1; /* b.bin's name, so its checksum is wrong */
    tar_bad(&b, "header checksum mismatch");
    taas_buf_free(&b);
    /* not a tar file at all */
    taas_buf_add(&b, "<html>not found</html>", 22);
    for (int i = 0; i < 600; i++) taas_buf_putc(&b, ' ');
    tar_bad(&b, "at byte 0: header checksum mismatch");
    taas_buf_free(&b);
}

/* ---- WebDataset ---------------------------------------------------------------------- */

/* Shard k of 3 holds samples 4k..4k+3: a grey 5x3 PNG and an integer label. */
static void write_png_shards(const char *dir) {
    for (int k = 0; k < 3; k++) {
        taas_buf b = TAAS_BUF_INIT;
        for (int i = 4 * k; i < 4 * k + 4; i++) {
            char name[64], label[16];
            unsigned char *px = fx_pic_make(5, 3, 1, i);
            taas_buf png = TAAS_BUF_INIT;
            fx_png8(&png, 5, 3, 1, px);
            snprintf(name, sizeof name, "%s/s%06d.png", k == 1 ? "sub" : ".", i);
            fx_tar_add(&b, name + (k == 1 ? 0 : 2), png.data, png.len);
            snprintf(name, sizeof name, "%s/s%06d.cls", k == 1 ? "sub" : ".", i);
            snprintf(label, sizeof label, "%d\n", (i * 3) % 10);
            fx_tar_add_str(&b, name + (k == 1 ? 0 : 2), label);
            if (i % 2) { /* metadata members are ignored */
                snprintf(name, sizeof name, "%s/s%06d.json", k == 1 ? "sub" : ".", i);
                fx_tar_add_str(&b, name + (k == 1 ? 0 : 2), "{}");
            }
            taas_buf_free(&png);
            free(px);
        }
        fx_tar_end(&b);
        char rel[128];
        snprintf(rel, sizeof rel, "%s/shard-%04d.tar", dir, k);
        fx_buf_write(rel, &b);
        taas_buf_free(&b);
    }
}

static void check_png_samples(taas_dataset *d, size_t n) {
    assert_int_equal(taas_dataset_info_get(d)->size, n);
    for (size_t i = 0; i < n; i++) {
        taas_image img;
        int64_t label;
        if (taas_dataset_get(d, i, &img, &label, &E) != 0) fail_msg("sample %zu: %s", i, E.message);
        unsigned char *want = fx_pic_make(5, 3, 1, (int)i);
        assert_int_equal(img.w, 5);
        assert_int_equal(img.h, 3);
        assert_int_equal(img.c, 1);
        assert_memory_equal(img.data, want, 15);
        assert_int_equal(label, (int64_t)((i * 3) % 10));
        free(want);
        taas_image_free(&img);
    }
}

static void test_wds_png_shards(void **state) {
    (void)state;
    write_png_shards("w1");
    char urls[600];
    snprintf(urls, sizeof urls, "\"%s/shard-{0000..0002}.tar\"", fx_path("w1"));
    taas_dataset *d = open_ok(wds(urls, "jpg;jpeg;png", "cls", "null"));
    check_png_samples(d, 12);
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_string_equal(info->type, "WebDataset");
    assert_int_equal(info->h, 0); /* varies from sample to sample */
    assert_int_equal(info->num_classes, 0);
    assert_null(info->classes);
    assert_non_null(strstr(info->source, "shard-0000.tar (and 2 more shards)"));
    taas_dataset_free(d);
    /* a list of URLs, with the length given */
    snprintf(urls, sizeof urls, "[%s, \"%s/shard-{0001..0002}.tar\"]", quoted("w1/shard-0000.tar"), fx_path("w1"));
    d = open_ok(wds(urls, "png", "cls", "12"));
    check_png_samples(d, 12);
    taas_dataset_free(d);
}

static void test_wds_length_mismatch(void **state) {
    (void)state;
    write_png_shards("w2");
    char urls[600];
    snprintf(urls, sizeof urls, "\"%s/shard-{0000..0002}.tar\"", fx_path("w2"));
    open_bad(wds(urls, "png", "cls", "100"), "TaasDataError", "WebDataset: length=100, but the 3 shards hold 12 samples",
             NULL);
    assert_non_null(strstr(E.hint, "length=12"));
    open_bad(wds(quoted("w2/shard-0099.tar"), "png", "cls", "null"), "TaasIOError", "shard-0099.tar", NULL);
    open_bad(wds("[]", "png", "cls", "null"), "TaasValueError", "WebDataset: urls names no shard", NULL);
    open_bad(wds("[1]", "png", "cls", "null"), "TaasValueError", "WebDataset: urls[0] is not a string", NULL);
    open_bad(wds(quoted("w2/shard-{0000..0002.tar"), "png", "cls", "null"), "TaasValueError", "", NULL);
    open_bad(wds(quoted("w2/shard-0000.tar"), ";", "cls", "null"), "TaasValueError", "image_key names no extension",
             NULL);
}

/* Images of every kind in one shard, labels as .txt class names. */
static void test_wds_kinds_and_names(void **state) {
    (void)state;
    taas_buf b = TAAS_BUF_INIT, img = TAAS_BUF_INIT;
    unsigned char *px = fx_pic_make(8, 6, 3, 1);
    fx_jpeg(&img, 8, 6, 3, px, 95);
    fx_tar_add(&b, "a.jpg", img.data, img.len);
    fx_tar_add_str(&b, "a.txt", "cat\n");
    taas_buf_free(&img);
    fx_png8(&img, 8, 6, 3, px);
    fx_tar_add(&b, "b.PNG", img.data, img.len); /* extensions match in any case */
    fx_tar_add_str(&b, "b.txt", "  dog ");
    taas_buf_free(&img);
    float f[6] = {0.5f, -1, 2, 3, 4, 5};
    fx_npy(&img, 1, "<f4", "False", "(2, 3)", f, sizeof f);
    fx_tar_add(&b, "c.npy", img.data, img.len);
    fx_tar_add_str(&b, "c.txt", "cat");
    taas_buf_free(&img);
    /* both a png and a jpg: image_key's order decides */
    fx_png8(&img, 8, 6, 3, px);
    fx_tar_add(&b, "d.png", img.data, img.len);
    taas_buf_free(&img);
    fx_jpeg(&img, 8, 6, 3, px, 95);
    fx_tar_add(&b, "d.jpg", img.data, img.len);
    fx_tar_add_str(&b, "d.txt", "ant");
    taas_buf_free(&img);
    fx_tar_end(&b);
    fx_buf_write("w3/mixed.tar", &b);
    taas_buf_free(&b);

    taas_dataset *d = open_ok(wds(quoted("w3/mixed.tar"), "png;jpg;npy", "txt", "4"));
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_int_equal(info->size, 4);
    assert_int_equal(info->num_classes, 3); /* sorted: ant, cat, dog */
    assert_string_equal(info->classes[0], "ant");
    assert_string_equal(info->classes[1], "cat");
    assert_string_equal(info->classes[2], "dog");
    taas_image im;
    int64_t label;
    assert_int_equal(taas_dataset_get(d, 0, &im, &label, &E), 0); /* JPEG */
    assert_int_equal(label, 1);
    assert_int_equal(im.c, 3);
    assert_int_equal(im.type, TAAS_PIX_U8);
    for (int i = 0; i < 8 * 6 * 3; i++) assert_true(abs((int)((unsigned char *)im.data)[i] - px[i]) <= 8);
    taas_image_free(&im);
    assert_int_equal(taas_dataset_get(d, 1, &im, &label, &E), 0); /* PNG */
    assert_int_equal(label, 2);
    assert_memory_equal(im.data, px, 8 * 6 * 3);
    taas_image_free(&im);
    assert_int_equal(taas_dataset_get(d, 2, &im, &label, &E), 0); /* .npy, (H, W) */
    assert_int_equal(label, 1);
    assert_int_equal(im.type, TAAS_PIX_F32);
    assert_int_equal(im.h, 2);
    assert_int_equal(im.w, 3);
    assert_int_equal(im.c, 1);
    assert_memory_equal(im.data, f, sizeof f);
    taas_image_free(&im);
    assert_int_equal(taas_dataset_get(d, 3, &im, &label, &E), 0); /* the png, not the jpg */
    assert_int_equal(label, 0);
    assert_memory_equal(im.data, px, 8 * 6 * 3);
    taas_image_free(&im);
    taas_dataset_free(d);
    free(px);
}

static void write_tar(const char *rel, const char *const *members) {
    taas_buf b = TAAS_BUF_INIT;
    for (int i = 0; members[i]; i += 2) fx_tar_add_str(&b, members[i], members[i + 1]);
    fx_tar_end(&b);
    fx_buf_write(rel, &b);
    taas_buf_free(&b);
}

static void test_wds_bad_samples(void **state) {
    (void)state;
    static const char *const nolabel[] = {"x/0001.png", "P", "x/0001.cls", "1", "x/0002.png", "P",
                                          "x/0002.json", "{}", "x/0003.png", "P", "x/0003.cls", "3", NULL};
    write_tar("w4/nolabel.tar", nolabel);
    open_bad(wds(quoted("w4/nolabel.tar"), "jpg;jpeg;png", "cls", "null"), "TaasDataError", "w4/nolabel.tar: ",
             "sample 'x/0002' has no label (its members: .png, .json)", NULL);
    assert_non_null(strstr(E.hint, "a label (.cls)"));
    static const char *const noimage[] = {"0001.cls", "1", "0001.jpg", "J", "0002.cls", "2", NULL};
    write_tar("w4/noimage.tar", noimage);
    open_bad(wds(quoted("w4/noimage.tar"), "png", "cls", "null"), "TaasDataError",
             "sample '0001' has no image (its members: .cls, .jpg)", NULL);
    assert_non_null(strstr(E.hint, "an image (.png)"));
    static const char *const dup[] = {"0001.png", "P", "0001.cls", "1", "0001.png", "Q", NULL};
    write_tar("w4/dup.tar", dup);
    open_bad(wds(quoted("w4/dup.tar"), "png", "cls", "null"), "TaasDataError",
             "sample '0001' has two members named 0001.png", NULL);
    static const char *const badcls[] = {"0001.png", "P", "0001.cls", "seven", NULL};
    write_tar("w4/badcls.tar", badcls);
    open_bad(wds(quoted("w4/badcls.tar"), "png", "cls", "null"), "TaasDataError",
             "sample '0001' has a label member .cls that is not an integer: 'seven'", NULL);
    static const char *const mixed[] = {"0001.png", "P", "0001.txt", "7", "0002.png", "P", "0002.txt", "cat", NULL};
    write_tar("w4/mixed.tar", mixed);
    open_bad(wds(quoted("w4/mixed.tar"), "png", "txt", "null"), "TaasDataError",
             "the labels mix integers and class names: 0002.png is labelled 'cat' but 0001.png is labelled 7", NULL);
    static const char *const none[] = {"README", "nothing here", NULL};
    write_tar("w4/none.tar", none);
    open_bad(wds(quoted("w4/none.tar"), "png", "cls", "null"), "TaasDataError", "hold no samples", NULL);
    fx_write("w4/notatar.tar", "<html>404</html>", 16);
    open_bad(wds(quoted("w4/notatar.tar"), "png", "cls", "null"), "TaasDataError", "w4/notatar.tar: corrupt tar archive",
             NULL);
}

/* A bad image is found when the sample is read: the error names sample, shard and member. */
static void test_wds_corrupt_images(void **state) {
    (void)state;
    taas_buf b = TAAS_BUF_INIT, png = TAAS_BUF_INIT;
    unsigned char *px = fx_pic_make(16, 16, 3, 0);
    fx_png8(&png, 16, 16, 3, px);
    fx_tar_add(&b, "good.png", png.data, png.len);
    fx_tar_add_str(&b, "good.cls", "1");
    fx_tar_add(&b, "cut.png", png.data, png.len / 2);
    fx_tar_add_str(&b, "cut.cls", "2");
    taas_buf_free(&png);
    fx_jpeg(&png, 16, 16, 3, px, 90);
    fx_tar_add(&b, "cutj.jpg", png.data, png.len / 2);
    fx_tar_add_str(&b, "cutj.cls", "3");
    fx_tar_add_str(&b, "text.png", "this is not an image");
    fx_tar_add_str(&b, "text.cls", "4");
    fx_tar_end(&b);
    fx_buf_write("w5/bad.tar", &b);
    taas_buf_free(&b);
    taas_buf_free(&png);
    free(px);
    taas_dataset *d = open_ok(wds(quoted("w5/bad.tar"), "png;jpg", "cls", "null"));
    assert_int_equal(taas_dataset_info_get(d)->size, 4);
    taas_image img;
    int64_t label;
    assert_int_equal(taas_dataset_get(d, 0, &img, &label, &E), 0);
    taas_image_free(&img);
    static const char *const want[] = {NULL, "member cut.png): corrupt PNG: ", "member cutj.jpg): corrupt JPEG: ",
                                       "member text.png): not a PNG, JPEG or .npy image (20 bytes)"};
    for (size_t i = 1; i < 4; i++) {
        assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), -1);
        char head[32];
        snprintf(head, sizeof head, "sample %zu (", i);
        if (strncmp(E.message, head, strlen(head)) != 0 || !strstr(E.message, "w5/bad.tar member ") ||
            !strstr(E.message, want[i]))
            fail_msg("sample %zu: got '%s', wanted '%s...%s'", i, E.message, head, want[i]);
        assert_string_equal(E.ename, "TaasDataError");
        assert_null(img.data);
    }
    taas_dataset_free(d);
}

/* ---- threads ------------------------------------------------------------------------ */

typedef struct reader {
    taas_dataset *d;
    int t, failed;
    uint64_t sum;
} reader;

static void *read_all(void *arg) {
    reader *r = arg;
    taas_error e;
    for (size_t i = (size_t)r->t; i < taas_dataset_info_get(r->d)->size; i += 4) {
        taas_image img;
        int64_t label;
        if (taas_dataset_get(r->d, i, &img, &label, &e) != 0) {
            r->failed = 1;
            return NULL;
        }
        for (int k = 0; k < img.h * img.w * img.c; k++) r->sum += ((unsigned char *)img.data)[k] * (uint64_t)(label + 1);
        taas_image_free(&img);
    }
    return NULL;
}

static void test_wds_concurrent_reads(void **state) {
    (void)state;
    write_png_shards("w6");
    char urls[600];
    snprintf(urls, sizeof urls, "\"%s/shard-{0000..0002}.tar\"", fx_path("w6"));
    taas_dataset *d = open_ok(wds(urls, "png", "cls", "12"));
    uint64_t want = 0;
    for (int i = 0; i < 12; i++) {
        unsigned char *px = fx_pic_make(5, 3, 1, i);
        for (int k = 0; k < 15; k++) want += px[k] * (uint64_t)((i * 3) % 10 + 1);
        free(px);
    }
    for (int round = 0; round < 3; round++) {
        pthread_t th[4];
        reader r[4];
        for (int t = 0; t < 4; t++) {
            r[t] = (reader){d, t, 0, 0};
            assert_int_equal(pthread_create(&th[t], NULL, read_all, &r[t]), 0);
        }
        uint64_t sum = 0;
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            assert_false(r[t].failed);
            sum += r[t].sum;
        }
        assert_int_equal(sum, want);
    }
    taas_dataset_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tar_flavours),        cmocka_unit_test(test_tar_corrupt),
        cmocka_unit_test(test_wds_png_shards),      cmocka_unit_test(test_wds_length_mismatch),
        cmocka_unit_test(test_wds_kinds_and_names), cmocka_unit_test(test_wds_bad_samples),
        cmocka_unit_test(test_wds_corrupt_images),  cmocka_unit_test(test_wds_concurrent_reads),
    };
    return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
