/* Every dataset format read over HTTP from a real nginx that the test starts on a loopback
 * port (tests/lib/nginx.py), with and without the fetcher's cache: MNIST IDX (gzip and
 * plain), the real Fashion-MNIST test split, CIFAR-10 (.tar.gz and .bin folder),
 * NpyDataset (whole and by range requests) and WebDataset shards (PNG and JPEG), plus a
 * missing file (404) named in the error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "formats.h"
#include "formats_testutil.h"
#include "test_fetch_util.h"

static tu_server NGINX;
static char BASE[128];     /* http://127.0.0.1:port */
static char CACHE[256];
static taas_fetcher *F[2]; /* without and with a cache */
static taas_error E;

static int setup(void **state) {
    (void)state;
    fx_mkdtemp();
    if (tu_tmpdir(NGINX.dir, sizeof NGINX.dir, "formats-nginx") != 0) return -1;
    if (tu_tmpdir(CACHE, sizeof CACHE, "formats-cache") != 0) return -1;
    if (symlink("/usr/share/datasets/fashion-mnist", fx_path("fashion")) != 0) return -1;
    if (tu_nginx(&NGINX, FX_DIR) != 0) return -1;
    snprintf(BASE, sizeof BASE, "http://127.0.0.1:%d", NGINX.port);
    F[0] = fx_fetcher();
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = CACHE;
    o.retries = 0;
    F[1] = taas_fetcher_new(&o, &E);
    return F[1] ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    taas_fetcher_free(F[0]);
    taas_fetcher_free(F[1]);
    tu_server_stop(&NGINX);
    tu_rmtree(NGINX.dir);
    tu_rmtree(CACHE);
    fx_rmtree();
    return 0;
}

static taas_dataset *open_ok(int cached, const char *json) {
    taas_dataset *d = fx_open(F[cached], json, &E);
    if (!d) fail_msg("spec %s\nfailed: %s: %s (hint: %s)", json, E.ename, E.message, E.hint);
    return d;
}

static const char *vision(const char *type, const char *rel, int train) {
    static char s[1024];
    snprintf(s, sizeof s, "{\"type\": \"%s\", \"root\": \"%s/%s\", \"train\": %s, \"transform\": null, "
             "\"target_transform\": null, \"download\": false}",
             type, BASE, rel, train ? "true" : "false");
    return s;
}

static unsigned sum_u8(const taas_image *img) {
    unsigned s = 0;
    for (int i = 0; i < img->h * img->w * img->c; i++) s += ((unsigned char *)img->data)[i];
    return s;
}

static void get_ok(taas_dataset *d, size_t i, taas_image *img, int64_t *label) {
    if (taas_dataset_get(d, i, img, label, &E) != 0) fail_msg("sample %zu: %s", i, E.message);
}

static void test_idx_over_http(void **state) {
    (void)state;
    taas_buf img = TAAS_BUF_INIT, lab = TAAS_BUF_INIT, z = TAAS_BUF_INIT;
    fx_idx_images(&img, 9, 28, 28);
    fx_idx_labels(&lab, 9);
    fx_gzip(img.data, img.len, &z);
    fx_buf_write("mnist/train-images-idx3-ubyte.gz", &z);
    fx_buf_write("mnist/train-labels-idx1-ubyte", &lab);
    taas_buf_free(&img);
    taas_buf_free(&lab);
    taas_buf_free(&z);
    for (int cached = 0; cached < 2; cached++) {
        taas_dataset *d = open_ok(cached, vision("MNIST", "mnist", 1));
        assert_int_equal(taas_dataset_info_get(d)->size, 9);
        assert_non_null(strstr(taas_dataset_info_get(d)->source, "http://127.0.0.1:"));
        for (size_t i = 0; i < 9; i++) {
            taas_image im;
            int64_t label;
            get_ok(d, i, &im, &label);
            assert_int_equal(label, (int64_t)((i * 7) % 10));
            assert_int_equal(((unsigned char *)im.data)[5 * 28 + 3], fx_idx_px(i, 5, 3));
            taas_image_free(&im);
        }
        taas_dataset_free(d);
    }
    /* the real test split, served by nginx */
    taas_dataset *d = open_ok(0, vision("FashionMNIST", "fashion", 0));
    assert_int_equal(taas_dataset_info_get(d)->size, 10000);
    taas_image im;
    int64_t label;
    get_ok(d, 0, &im, &label);
    assert_int_equal(label, 9);
    assert_int_equal(sum_u8(&im), 33456);
    taas_image_free(&im);
    taas_dataset_free(d);
    /* nothing there: the 404 and the URL are in the message */
    d = fx_open(F[0], vision("FashionMNIST", "nowhere", 0), &E);
    assert_null(d);
    assert_string_equal(E.ename, "TaasIOError");
    if (!strstr(E.message, "FashionMNIST: cannot read the test images (t10k-images-idx3-ubyte[.gz])") ||
        !strstr(E.message, "404") || !strstr(E.message, "/nowhere/t10k-images-idx3-ubyte.gz"))
        fail_msg("got %s", E.message);
    assert_non_null(strstr(E.hint, "root must be a folder or URL prefix"));
}

static void cifar_batch(taas_buf *b, size_t first, size_t n) {
    for (size_t i = first; i < first + n; i++) {
        taas_buf_putc(b, (char)(i % 10));
        for (int k = 0; k < 3072; k++) taas_buf_putc(b, (char)((i * 13 + (size_t)k) & 0xff));
    }
}

static void test_cifar_over_http(void **state) {
    (void)state;
    taas_buf tar = TAAS_BUF_INIT, z = TAAS_BUF_INIT, b = TAAS_BUF_INIT;
    cifar_batch(&b, 0, 3);
    fx_buf_write("cifar-bin/cifar-10-batches-bin/test_batch.bin", &b);
    fx_tar_add(&tar, "cifar-10-batches-bin/test_batch.bin", b.data, b.len);
    fx_tar_end(&tar);
    fx_gzip(tar.data, tar.len, &z);
    fx_buf_write("cifar-tgz/cifar-10-binary.tar.gz", &z);
    const char *roots[2] = {"cifar-bin", "cifar-tgz"};
    for (int r = 0; r < 2; r++) {
        taas_dataset *d = open_ok(r, vision("CIFAR10", roots[r], 0));
        assert_int_equal(taas_dataset_info_get(d)->size, 3);
        for (size_t i = 0; i < 3; i++) {
            taas_image im;
            int64_t label;
            get_ok(d, i, &im, &label);
            assert_int_equal(label, (int64_t)(i % 10));
            /* HWC pixel (0, 1) channel 2 is CHW byte 2 * 1024 + 1 */
            assert_int_equal(((unsigned char *)im.data)[1 * 3 + 2], (unsigned char)((i * 13 + 2049) & 0xff));
            taas_image_free(&im);
        }
        taas_dataset_free(d);
    }
    taas_buf_free(&tar);
    taas_buf_free(&z);
    taas_buf_free(&b);
}

static void test_npy_over_http(void **state) {
    (void)state;
    float px[4 * 2 * 3];
    for (int i = 0; i < 24; i++) px[i] = (float)i / 4;
    int32_t labels[4] = {3, 1, 4, 1};
    taas_buf b = TAAS_BUF_INIT;
    fx_npy(&b, 1, "<f4", "False", "(4, 2, 3)", px, sizeof px);
    fx_buf_write("npy/images.npy", &b);
    taas_buf_free(&b);
    fx_npy(&b, 2, "<i4", "False", "(4,)", labels, sizeof labels);
    fx_buf_write("npy/labels.npy", &b);
    taas_buf_free(&b);
    char spec[1024];
    snprintf(spec, sizeof spec, "{\"type\": \"NpyDataset\", \"images\": \"%s/npy/images.npy\", "
             "\"labels\": \"%s/npy/labels.npy\", \"transform\": null}", BASE, BASE);
    for (int mode = 0; mode < 3; mode++) {
        /* whole; by range requests; by range requests from the cache */
        if (mode) setenv("TAAS_NPY_MEMORY_LIMIT", "0", 1);
        taas_dataset *d = open_ok(mode == 2, spec);
        assert_int_equal(taas_dataset_info_get(d)->size, 4);
        for (size_t i = 0; i < 4; i++) {
            taas_image im;
            int64_t label;
            get_ok(d, i, &im, &label);
            assert_int_equal(label, labels[i]);
            assert_int_equal(im.type, TAAS_PIX_F32);
            assert_memory_equal(im.data, px + i * 6, 6 * sizeof(float));
            taas_image_free(&im);
        }
        taas_dataset_free(d);
    }
    unsetenv("TAAS_NPY_MEMORY_LIMIT");
}

static void test_webdataset_over_http(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        taas_buf b = TAAS_BUF_INIT;
        for (int i = 0; i < 5; i++) {
            int n = k * 5 + i;
            unsigned char *px = fx_pic_make(12, 10, 3, n);
            taas_buf img = TAAS_BUF_INIT;
            char name[32], cls[8];
            if (n % 2) {
                fx_jpeg(&img, 12, 10, 3, px, 95);
                snprintf(name, sizeof name, "%05d.jpg", n);
            } else {
                fx_png8(&img, 12, 10, 3, px);
                snprintf(name, sizeof name, "%05d.png", n);
            }
            fx_tar_add(&b, name, img.data, img.len);
            snprintf(name, sizeof name, "%05d.cls", n);
            snprintf(cls, sizeof cls, "%d", n % 3);
            fx_tar_add_str(&b, name, cls);
            taas_buf_free(&img);
            free(px);
        }
        fx_tar_end(&b);
        char rel[64];
        snprintf(rel, sizeof rel, "wds/train-%03d.tar", k);
        fx_buf_write(rel, &b);
        taas_buf_free(&b);
    }
    char spec[1024];
    snprintf(spec, sizeof spec, "{\"type\": \"WebDataset\", \"urls\": \"%s/wds/train-{000..001}.tar\", "
             "\"transform\": null, \"image_key\": \"jpg;jpeg;png\", \"label_key\": \"cls\", \"length\": 10}", BASE);
    for (int cached = 0; cached < 2; cached++) {
        taas_dataset *d = open_ok(cached, spec);
        assert_int_equal(taas_dataset_info_get(d)->size, 10);
        for (size_t i = 0; i < 10; i++) {
            taas_image im;
            int64_t label;
            get_ok(d, i, &im, &label);
            assert_int_equal(label, (int64_t)(i % 3));
            unsigned char *px = fx_pic_make(12, 10, 3, (int)i);
            for (int k = 0; k < 12 * 10 * 3; k++) {
                int diff = abs((int)((unsigned char *)im.data)[k] - (int)px[k]);
                if (diff > (i % 2 ? 8 : 0)) fail_msg("sample %zu byte %d: off by %d", i, k, diff);
            }
            free(px);
            taas_image_free(&im);
        }
        taas_dataset_free(d);
    }
    /* a missing shard: the 404 names it */
    snprintf(spec, sizeof spec, "{\"type\": \"WebDataset\", \"urls\": \"%s/wds/train-{000..002}.tar\", "
             "\"transform\": null, \"image_key\": \"jpg;png\", \"label_key\": \"cls\", \"length\": null}", BASE);
    assert_null(fx_open(F[0], spec, &E));
    if (!strstr(E.message, "404") || !strstr(E.message, "/wds/train-002.tar")) fail_msg("got %s", E.message);
}

/* Only "not there" makes the formats look for another file name; other failures are
 * reported as they are. Checked against the errors the real fetcher gives. */
static void test_not_found_vs_other_failures(void **state) {
    (void)state;
    taas_blob b = {0};
    char url[512];
    snprintf(url, sizeof url, "%s/no/such/file", BASE);
    assert_int_equal(taas_fetch(F[0], url, &b, &E), -1);
    assert_true(taas_fmt_not_found(&E)); /* 404 */
    assert_int_equal(taas_fetch(F[0], fx_path("no/such/file"), &b, &E), -1);
    assert_true(taas_fmt_not_found(&E)); /* ENOENT */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", tu_dead_port());
    assert_int_equal(taas_fetch(F[0], url, &b, &E), -1);
    assert_false(taas_fmt_not_found(&E)); /* refused */
    /* so a dead server is named at once, with the fetcher's hint */
    char root[128], spec[512];
    snprintf(root, sizeof root, "http://127.0.0.1:%d/data", tu_dead_port());
    snprintf(spec, sizeof spec, "{\"type\": \"MNIST\", \"root\": \"%s\", \"train\": false}", root);
    assert_null(fx_open(F[0], spec, &E));
    if (!strstr(E.message, "MNIST: cannot read the test images") || !strstr(E.message, "connection refused") ||
        !strstr(E.message, "/data/t10k-images-idx3-ubyte.gz"))
        fail_msg("got %s", E.message);
    assert_null(strstr(E.hint, "root must be a folder"));
    /* a folder where the .gz file should be is there but unreadable: said so, no fallback */
    taas_buf lab = TAAS_BUF_INIT;
    fx_idx_labels(&lab, 2);
    fx_buf_write("odd/t10k-labels-idx1-ubyte", &lab);
    fx_buf_write("odd/t10k-images-idx3-ubyte.gz/x", &lab);
    taas_buf_free(&lab);
    snprintf(spec, sizeof spec, "{\"type\": \"MNIST\", \"root\": \"%s\", \"train\": false}", fx_path("odd"));
    assert_null(fx_open(F[0], spec, &E));
    if (!strstr(E.message, "odd/t10k-images-idx3-ubyte.gz") || taas_fmt_not_found(&E)) fail_msg("got %s", E.message);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_over_http),
        cmocka_unit_test(test_cifar_over_http),
        cmocka_unit_test(test_npy_over_http),
        cmocka_unit_test(test_webdataset_over_http),
        cmocka_unit_test(test_not_found_vs_other_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
