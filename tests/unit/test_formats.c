/* dataloader formats: MNIST/FashionMNIST IDX files (plain and gzip), gunzip, CIFAR-10 (the
 * .bin folder and the .tar.gz), the dataset spec, and the real Fashion-MNIST test split
 * that Debian's dataset-fashion-mnist installs. Fixtures are written at test time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "formats.h"
#define FX_SPEC_TESTS
#define FX_OPEN_BAD_HINT_UTF8
#include "formats_testutil.h"

static const char *vision(const char *type, const char *root, int train) {
    static char s[1024];
    snprintf(s, sizeof s,
             "{\"type\": \"%s\", \"root\": \"%s\", \"train\": %s, \"transform\": null, \"target_transform\": null, "
             "\"download\": false}",
             type, root, train ? "true" : "false");
    return s;
}

static unsigned sum_u8(const taas_image *img) {
    unsigned s = 0;
    const unsigned char *p = img->data;
    for (int i = 0; i < img->h * img->w * img->c; i++) s += p[i];
    return s;
}

/* ---- IDX --------------------------------------------------------------------------- */

/* n images of 6x4 (not square, so swapped dimensions show) and n labels in folder rel. */
static void write_idx(const char *rel, const char *split, uint32_t n, uint32_t nlabels, int gz) {
    taas_buf img = TAAS_BUF_INIT, lab = TAAS_BUF_INIT, z = TAAS_BUF_INIT;
    fx_idx_images(&img, n, 6, 4);
    fx_idx_labels(&lab, nlabels);
    char p[256];
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte%s", rel, split, gz ? ".gz" : "");
    if (gz) {
        fx_gzip(img.data, img.len, &z);
        fx_buf_write(p, &z);
    } else {
        fx_buf_write(p, &img);
    }
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", rel, split);
    fx_buf_write(p, &lab);
    taas_buf_free(&img);
    taas_buf_free(&lab);
    taas_buf_free(&z);
}

static void check_idx_samples(taas_dataset *d, size_t n) {
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_int_equal(info->size, n);
    assert_int_equal(info->h, 6);
    assert_int_equal(info->w, 4);
    assert_int_equal(info->c, 1);
    for (size_t i = 0; i < n; i++) {
        taas_image img;
        int64_t label;
        assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), 0);
        assert_int_equal(img.h, 6);
        assert_int_equal(img.w, 4);
        assert_int_equal(img.c, 1);
        assert_int_equal(img.type, TAAS_PIX_U8);
        const unsigned char *px = img.data;
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 4; x++) assert_int_equal(px[y * 4 + x], fx_idx_px(i, y, x));
        assert_int_equal(label, (int64_t)((i * 7) % 10));
        taas_image_free(&img);
    }
}

static void test_idx_gzip_and_plain(void **state) {
    (void)state;
    write_idx("mnist", "train", 7, 7, 1);
    write_idx("mnist", "t10k", 3, 3, 0);
    taas_dataset *d = open_ok(vision("MNIST", fx_path("mnist"), 1));
    check_idx_samples(d, 7);
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_string_equal(info->type, "MNIST");
    assert_int_equal(info->num_classes, 10);
    assert_string_equal(info->classes[0], "0 - zero");
    assert_string_equal(info->classes[9], "9 - nine");
    assert_string_equal(info->source, fx_path("mnist"));
    taas_dataset_free(d);
    d = open_ok(vision("FashionMNIST", fx_path("mnist"), 0));
    check_idx_samples(d, 3);
    assert_string_equal(taas_dataset_info_get(d)->classes[0], "T-shirt/top");
    taas_dataset_free(d);
    /* a trailing slash on root is fine */
    char root[512];
    snprintf(root, sizeof root, "%s/", fx_path("mnist"));
    d = open_ok(vision("MNIST", root, 0));
    check_idx_samples(d, 3);
    taas_dataset_free(d);
}

static void test_idx_torchvision_layout(void **state) {
    (void)state;
    write_idx("tv/FashionMNIST/raw", "t10k", 4, 4, 0);
    taas_dataset *d = open_ok(vision("FashionMNIST", fx_path("tv"), 0));
    check_idx_samples(d, 4);
    taas_dataset_free(d);
}

static void test_idx_missing_file(void **state) {
    (void)state;
    open_bad(vision("FashionMNIST", fx_path("no-such-folder"), 0), "TaasIOError",
             "FashionMNIST: cannot read the test images (t10k-images-idx3-ubyte[.gz])", "no-such-folder", NULL);
    assert_non_null(strstr(E.hint, "root must be a folder or URL prefix"));
    /* the images are there, the labels are not */
    write_idx("nolabels", "train", 2, 2, 0);
    unlink(fx_path("nolabels/train-labels-idx1-ubyte"));
    open_bad(vision("MNIST", fx_path("nolabels"), 1), "TaasIOError",
             "MNIST: cannot read the training labels (train-labels-idx1-ubyte[.gz])", NULL);
}

static void test_idx_wrong_magic(void **state) {
    (void)state;
    taas_buf b = TAAS_BUF_INIT;
    fx_be32(&b, 0x802);
    fx_be32(&b, 1);
    fx_be32(&b, 1);
    fx_be32(&b, 1);
    taas_buf_putc(&b, 0);
    fx_buf_write("magic/t10k-images-idx3-ubyte", &b);
    taas_buf_free(&b);
    open_bad(vision("MNIST", fx_path("magic"), 0), "TaasDataError", "MNIST: ",
             "magic/t10k-images-idx3-ubyte: wrong IDX magic 0x00000802, expected 0x00000803", NULL);
    /* labels where the images belong: the hint says they look swapped */
    fx_idx_labels(&b, 3);
    fx_buf_write("magic/t10k-images-idx3-ubyte", &b);
    taas_buf_free(&b);
    open_bad(vision("MNIST", fx_path("magic"), 0), "TaasDataError", "wrong IDX magic 0x00000801", NULL);
    assert_non_null(strstr(E.hint, "swapped"));
    /* and the labels file's magic is checked too */
    write_idx("magic2", "t10k", 2, 2, 0);
    fx_idx_images(&b, 2, 6, 4);
    fx_buf_write("magic2/t10k-labels-idx1-ubyte", &b);
    taas_buf_free(&b);
    open_bad(vision("MNIST", fx_path("magic2"), 0), "TaasDataError",
             "t10k-labels-idx1-ubyte: wrong IDX magic 0x00000803, expected 0x00000801", NULL);
}

static void test_idx_count_mismatch(void **state) {
    (void)state;
    write_idx("mismatch", "train", 5, 4, 1);
    open_bad(vision("MNIST", fx_path("mismatch"), 1), "TaasDataError", "image/label count mismatch",
             "train-images-idx3-ubyte.gz has 5 images", "train-labels-idx1-ubyte has 4 labels", NULL);
}

static void test_idx_truncated_gzip(void **state) {
    (void)state;
    taas_buf img = TAAS_BUF_INIT, z = TAAS_BUF_INIT;
    fx_idx_images(&img, 50, 28, 28);
    fx_gzip(img.data, img.len, &z);
    fx_write("cut/t10k-images-idx3-ubyte.gz", z.data, z.len / 2);
    open_bad(vision("FashionMNIST", fx_path("cut"), 0), "TaasDataError",
             "cut/t10k-images-idx3-ubyte.gz: truncated gzip", NULL);
    /* all the data but the 8-byte trailer: the stream still lacks its end */
    fx_write("cut/t10k-images-idx3-ubyte.gz", z.data, z.len - 8);
    open_bad(vision("FashionMNIST", fx_path("cut"), 0), "TaasDataError", "truncated gzip", NULL);
    taas_buf_free(&img);
    taas_buf_free(&z);
}

/* A valid header for one 28x28 image, then 256 MiB of zeros: about 256 KB of gzip. Inflating
 * stops past what the header declares (issue 16, defect 8). */
static void test_idx_gzip_bomb(void **state) {
    (void)state;
    taas_buf head = TAAS_BUF_INIT, z = TAAS_BUF_INIT;
    fx_be32(&head, 0x00000803u);
    fx_be32(&head, 1);
    fx_be32(&head, 28);
    fx_be32(&head, 28);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    static unsigned char zeros[1 << 16], chunk[1 << 16];
    for (int i = 0; i <= 4096; i++) {
        zs.next_in = i == 0 ? (unsigned char *)head.data : zeros;
        zs.avail_in = i == 0 ? (uInt)head.len : (uInt)sizeof zeros;
        do {
            zs.next_out = chunk;
            zs.avail_out = sizeof chunk;
            deflate(&zs, i == 4096 ? Z_FINISH : Z_NO_FLUSH);
            taas_buf_add(&z, (const char *)chunk, sizeof chunk - zs.avail_out);
        } while (zs.avail_out == 0);
    }
    deflateEnd(&zs);
    fx_write("bomb/t10k-images-idx3-ubyte.gz", z.data, z.len);
    open_bad(vision("FashionMNIST", fx_path("bomb"), 0), "TaasDataError",
             "t10k-images-idx3-ubyte.gz: the gzip stream inflates to more than 800 bytes", "a gzip bomb", NULL);
    /* the limit is exact: 12 bytes inflate under a limit of 12, not of 11 */
    taas_buf two = TAAS_BUF_INIT;
    fx_gzip("hello, world", 12, &two);
    unsigned char *out, first[4];
    size_t n;
    assert_int_equal(taas_gunzip((unsigned char *)two.data, two.len, "x.gz", 12, &out, &n, &E), 0);
    assert_int_equal(n, 12);
    free(out);
    assert_int_equal(taas_gunzip((unsigned char *)two.data, two.len, "x.gz", 11, &out, &n, &E), -1);
    assert_non_null(strstr(E.message, "more than 11 bytes"));
    assert_int_equal(taas_gunzip_head((unsigned char *)two.data, two.len, first, sizeof first), 4);
    assert_memory_equal(first, "hell", 4);
    assert_int_equal(taas_gunzip_head((unsigned char *)"plain", 5, first, sizeof first), 0);
    taas_buf_free(&two);
    taas_buf_free(&head);
    taas_buf_free(&z);
}

static void test_idx_truncated_and_long(void **state) {
    (void)state;
    taas_buf img = TAAS_BUF_INIT;
    fx_idx_images(&img, 5, 6, 4);
    fx_write("short/t10k-images-idx3-ubyte", img.data, img.len - 24);
    open_bad(vision("MNIST", fx_path("short"), 0), "TaasDataError",
             "t10k-images-idx3-ubyte is truncated: its header promises 5 images of 6x4 pixels of 120 bytes, but "
             "only 96 bytes follow",
             NULL);
    fx_write("short/t10k-images-idx3-ubyte", img.data, 10);
    open_bad(vision("MNIST", fx_path("short"), 0), "TaasDataError", "too short for an IDX header", NULL);
    taas_buf_putc(&img, 1);
    fx_buf_write("short/t10k-images-idx3-ubyte", &img);
    open_bad(vision("MNIST", fx_path("short"), 0), "TaasDataError", "is longer than its header says", NULL);
    taas_buf_free(&img);
}

static void test_idx_bad_label(void **state) {
    (void)state;
    write_idx("badlabel", "t10k", 3, 3, 0);
    taas_buf lab = TAAS_BUF_INIT;
    fx_be32(&lab, 0x801);
    fx_be32(&lab, 3);
    taas_buf_add(&lab, "\x01\x0c\x02", 3);
    fx_buf_write("badlabel/t10k-labels-idx1-ubyte", &lab);
    taas_buf_free(&lab);
    open_bad(vision("MNIST", fx_path("badlabel"), 0), "TaasDataError", "label 12 of sample 1 is outside the 10 classes",
             NULL);
}

/* ---- gunzip ------------------------------------------------------------------------ */

static void test_gunzip(void **state) {
    (void)state;
    taas_buf z = TAAS_BUF_INIT;
    fx_gzip("hello, ", 7, &z);
    fx_gzip("world", 5, &z); /* two members back to back, as `cat a.gz b.gz` makes */
    unsigned char *out;
    size_t n;
    assert_int_equal(taas_gunzip((unsigned char *)z.data, z.len, "two.gz", SIZE_MAX, &out, &n, &E), 0);
    assert_int_equal(n, 12);
    assert_memory_equal(out, "hello, world", 12);
    free(out);
    /* an empty file compresses to a member with no data */
    taas_buf e = TAAS_BUF_INIT;
    fx_gzip("", 0, &e);
    assert_int_equal(taas_gunzip((unsigned char *)e.data, e.len, "empty.gz", SIZE_MAX, &out, &n, &E), 0);
    assert_int_equal(n, 0);
    assert_non_null(out);
    free(out);
    /* damage the deflate data: zlib's reason is passed on */
    char *bad = malloc(z.len);
    memcpy(bad, z.data, z.len);
    bad[10] = (char)0xff;
    bad[11] = (char)0xff;
    assert_int_equal(taas_gunzip((unsigned char *)bad, z.len, "bad.gz", SIZE_MAX, &out, &n, &E), -1);
    assert_string_equal(E.ename, "TaasDataError");
    assert_non_null(strstr(E.message, "bad.gz: corrupt gzip at compressed byte"));
    assert_non_null(E.hint[0] ? E.hint : NULL);
    free(bad);
    assert_int_equal(taas_gunzip((unsigned char *)"plain", 5, "plain.gz", SIZE_MAX, &out, &n, &E), -1);
    assert_non_null(strstr(E.message, "plain.gz: not a gzip file"));
    taas_buf_free(&z);
    taas_buf_free(&e);
}

/* ---- the real Fashion-MNIST ---------------------------------------------------------- */

#define FASHION "/usr/share/datasets/fashion-mnist"

static void test_fashion_mnist_debian(void **state) {
    (void)state;
    taas_dataset *d = open_ok(vision("FashionMNIST", FASHION, 0));
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_int_equal(info->size, 10000);
    assert_int_equal(info->h, 28);
    assert_int_equal(info->w, 28);
    assert_int_equal(info->c, 1);
    assert_int_equal(info->num_classes, 10);
    assert_string_equal(info->classes[9], "Ankle boot");
    assert_string_equal(info->source, FASHION);
    taas_image img;
    int64_t label;
    /* sums and labels read from the files with Python's gzip module */
    assert_int_equal(taas_dataset_get(d, 0, &img, &label, &E), 0);
    assert_int_equal(label, 9);
    assert_string_equal(info->classes[label], "Ankle boot");
    assert_int_equal(sum_u8(&img), 33456);
    assert_int_equal(((unsigned char *)img.data)[14 * 28 + 14], 110);
    taas_image_free(&img);
    assert_int_equal(taas_dataset_get(d, 9999, &img, &label, &E), 0);
    assert_int_equal(label, 5);
    assert_int_equal(sum_u8(&img), 24390);
    taas_image_free(&img);
    static const int64_t first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    for (size_t i = 0; i < 10; i++) {
        assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), 0);
        assert_int_equal(label, first[i]);
        taas_image_free(&img);
    }
    assert_int_equal(taas_dataset_get(d, 10000, &img, &label, &E), -1);
    assert_non_null(strstr(E.message, "sample 10000 is out of range: FashionMNIST has 10000 samples"));
    assert_null(img.data);
    taas_dataset_free(d);

    d = open_ok(vision("FashionMNIST", FASHION, 1));
    assert_int_equal(taas_dataset_info_get(d)->size, 60000);
    assert_int_equal(taas_dataset_get(d, 0, &img, &label, &E), 0);
    assert_int_equal(label, 9);
    assert_int_equal(sum_u8(&img), 76247);
    taas_image_free(&img);
    assert_int_equal(taas_dataset_get(d, 59999, &img, &label, &E), 0);
    assert_int_equal(label, 5);
    assert_int_equal(sum_u8(&img), 16684);
    taas_image_free(&img);
    taas_dataset_free(d);
}

/* ---- CIFAR-10 ---------------------------------------------------------------------- */

static unsigned char cifar_px(size_t i, int ch, int y, int x) {
    return (unsigned char)((i * 13 + (size_t)ch * 50 + (size_t)y * 3 + (size_t)x) & 0xff);
}

/* n records numbered from first: label (i % 10), planes R, G, B. */
static void cifar_batch(taas_buf *b, size_t first, size_t n) {
    for (size_t i = first; i < first + n; i++) {
        taas_buf_putc(b, (char)(i % 10));
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++) taas_buf_putc(b, (char)cifar_px(i, ch, y, x));
    }
}

static void check_cifar(taas_dataset *d, size_t n, size_t first) {
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_int_equal(info->size, n);
    assert_int_equal(info->h, 32);
    assert_int_equal(info->w, 32);
    assert_int_equal(info->c, 3);
    for (size_t i = 0; i < n; i++) {
        taas_image img;
        int64_t label;
        assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), 0);
        assert_int_equal(label, (int64_t)((first + i) % 10));
        const unsigned char *px = img.data;
        for (int y = 0; y < 32; y += 7)
            for (int x = 0; x < 32; x += 5)
                for (int ch = 0; ch < 3; ch++) assert_int_equal(px[(y * 32 + x) * 3 + ch], cifar_px(first + i, ch, y, x));
        taas_image_free(&img);
    }
}

/* Training batches of 3 records each (15 in all), a test batch of 2. */
static void cifar_files(taas_buf files[6]) {
    for (int k = 0; k < 5; k++) cifar_batch(&files[k], (size_t)k * 3, 3);
    cifar_batch(&files[5], 100, 2);
}

static const char *const CIFAR_NAMES[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

static void test_cifar_folder(void **state) {
    (void)state;
    taas_buf files[6] = {TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT};
    cifar_files(files);
    for (int k = 0; k < 6; k++) {
        char p[128];
        snprintf(p, sizeof p, "c1/cifar-10-batches-bin/%s", CIFAR_NAMES[k]);
        fx_buf_write(p, &files[k]);
        taas_buf_free(&files[k]);
    }
    const char *meta = "plane\ncar\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n";
    fx_write("c1/cifar-10-batches-bin/batches.meta.txt", meta, strlen(meta));
    taas_dataset *d = open_ok(vision("CIFAR10", fx_path("c1"), 1));
    check_cifar(d, 15, 0);
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_int_equal(info->num_classes, 10);
    assert_string_equal(info->classes[0], "plane"); /* from batches.meta.txt */
    assert_string_equal(info->classes[9], "truck");
    taas_dataset_free(d);
    /* root may be the batches folder itself */
    d = open_ok(vision("CIFAR10", fx_path("c1/cifar-10-batches-bin"), 0));
    check_cifar(d, 2, 100);
    taas_dataset_free(d);
}

static void write_cifar_tgz(const char *rel, int skip, int with_meta) {
    taas_buf files[6] = {TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT, TAAS_BUF_INIT};
    cifar_files(files);
    taas_buf tar = TAAS_BUF_INIT, z = TAAS_BUF_INIT;
    fx_tar_header(&tar, "cifar-10-batches-bin/", NULL, 0, '5', FX_USTAR, 0);
    if (with_meta) fx_tar_add_str(&tar, "cifar-10-batches-bin/batches.meta.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
    for (int k = 5; k >= 0; k--) { /* the archive's order need not be the batches' */
        char p[128];
        snprintf(p, sizeof p, "cifar-10-batches-bin/%s", CIFAR_NAMES[k]);
        if (k != skip) fx_tar_add(&tar, p, files[k].data, files[k].len);
        taas_buf_free(&files[k]);
    }
    fx_tar_end(&tar);
    fx_gzip(tar.data, tar.len, &z);
    fx_buf_write(rel, &z);
    taas_buf_free(&tar);
    taas_buf_free(&z);
}

static void test_cifar_tar_gz(void **state) {
    (void)state;
    write_cifar_tgz("c2/cifar-10-binary.tar.gz", -1, 0);
    taas_dataset *d = open_ok(vision("CIFAR10", fx_path("c2"), 1));
    check_cifar(d, 15, 0);
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_string_equal(info->classes[0], "airplane"); /* torchvision's names: no meta file */
    assert_string_equal(info->classes[9], "truck");
    taas_dataset_free(d);
    d = open_ok(vision("CIFAR10", fx_path("c2/cifar-10-binary.tar.gz"), 0));
    check_cifar(d, 2, 100);
    taas_dataset_free(d);
    write_cifar_tgz("c3/cifar-10-binary.tar.gz", -1, 1);
    d = open_ok(vision("CIFAR10", fx_path("c3"), 0));
    assert_string_equal(taas_dataset_info_get(d)->classes[3], "d");
    taas_dataset_free(d);
}

static void test_cifar_errors(void **state) {
    (void)state;
    open_bad(vision("CIFAR10", fx_path("nothing-here"), 1), "TaasIOError",
             "CIFAR10: found neither cifar-10-batches-bin/ nor cifar-10-binary.tar.gz in", "nothing-here", NULL);
    assert_non_null(strstr(E.hint, "binary version"));
    /* a batch cut short */
    taas_buf b = TAAS_BUF_INIT;
    cifar_batch(&b, 0, 2);
    fx_write("c4/cifar-10-batches-bin/test_batch.bin", b.data, b.len - 100);
    open_bad(vision("CIFAR10", fx_path("c4"), 0), "TaasDataError", "test_batch.bin is truncated or not a CIFAR-10 batch",
             "6046 bytes is not a whole number of 3073-byte records", NULL);
    /* the second training batch is missing: no fallback to the archive, say which */
    fx_write("c4/cifar-10-batches-bin/data_batch_1.bin", b.data, b.len);
    open_bad(vision("CIFAR10", fx_path("c4"), 1), "TaasIOError", "data_batch_2.bin", NULL);
    /* a label outside the ten classes (a CIFAR-100 file) */
    b.data[0] = 42;
    fx_buf_write("c4/cifar-10-batches-bin/test_batch.bin", &b);
    open_bad(vision("CIFAR10", fx_path("c4"), 0), "TaasDataError", "record 0 has label 42, outside the 10 classes",
             NULL);
    taas_buf_free(&b);
    write_cifar_tgz("c5/cifar-10-binary.tar.gz", 2, 0);
    open_bad(vision("CIFAR10", fx_path("c5"), 1), "TaasDataError", "cifar-10-binary.tar.gz has no data_batch_3.bin",
             NULL);
    /* a truncated archive download */
    FILE *f = fopen(fx_path("c5/cifar-10-binary.tar.gz"), "rb");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fx_write("c5/cifar-10-binary.tar.gz", buf, n / 2);
    open_bad(vision("CIFAR10", fx_path("c5"), 1), "TaasDataError", "cifar-10-binary.tar.gz: truncated gzip", NULL);
}

/* ---- the spec ---------------------------------------------------------------------- */

static void test_spec_errors(void **state) {
    (void)state;
    open_bad("[1, 2]", "TaasValueError", "a dataset spec must be a JSON object, not an array", NULL);
    open_bad("{\"root\": \"x\"}", "TaasValueError", "the dataset spec has no \"type\"", NULL);
    open_bad("{\"type\": \"ImageNet\"}", "TaasValueError", "unknown dataset type 'ImageNet'", NULL);
    assert_non_null(strstr(E.hint, "FashionMNIST"));
    open_bad("{\"type\": \"MNIST\", \"root\": null, \"train\": true}", "TaasValueError", "MNIST needs root", NULL);
    open_bad("{\"type\": \"CIFAR10\", \"root\": null}", "TaasValueError", "CIFAR10 needs root", NULL);
    open_bad("{\"type\": \"FashionMNIST\", \"root\": \"" FASHION "\", \"target_transform\": {\"type\": \"ToTensor\"}}",
             "TaasValueError", "FashionMNIST: target_transform is not supported", NULL);
}

/* ---- many threads at once ----------------------------------------------------------- */

typedef struct reader {
    taas_dataset *d;
    size_t first, step;
    uint64_t sum;
    int failed;
} reader;

static void *read_all(void *arg) {
    reader *r = arg;
    size_t n = taas_dataset_info_get(r->d)->size;
    taas_error e;
    for (size_t i = r->first; i < n; i += r->step) {
        taas_image img;
        int64_t label;
        if (taas_dataset_get(r->d, i, &img, &label, &e) != 0) {
            r->failed = 1;
            return NULL;
        }
        r->sum += sum_u8(&img) * (uint64_t)(label + 1);
        taas_image_free(&img);
    }
    return NULL;
}

static uint64_t threaded_sum(taas_dataset *d, int threads) {
    pthread_t th[8];
    reader r[8];
    for (int t = 0; t < threads; t++) {
        r[t] = (reader){d, (size_t)t, (size_t)threads, 0, 0};
        assert_int_equal(pthread_create(&th[t], NULL, read_all, &r[t]), 0);
    }
    uint64_t sum = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        assert_false(r[t].failed);
        sum += r[t].sum;
    }
    return sum;
}

static void test_concurrent_reads(void **state) {
    (void)state;
    taas_dataset *d = open_ok(vision("FashionMNIST", FASHION, 0));
    uint64_t one = threaded_sum(d, 1);
    assert_int_equal(threaded_sum(d, 4), one);
    taas_dataset_free(d);
    write_cifar_tgz("c6/cifar-10-binary.tar.gz", -1, 0);
    d = open_ok(vision("CIFAR10", fx_path("c6"), 1));
    one = threaded_sum(d, 1);
    assert_int_equal(threaded_sum(d, 4), one);
    taas_dataset_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_gzip_and_plain),
        cmocka_unit_test(test_idx_torchvision_layout),
        cmocka_unit_test(test_idx_missing_file),
        cmocka_unit_test(test_idx_wrong_magic),
        cmocka_unit_test(test_idx_count_mismatch),
        cmocka_unit_test(test_idx_truncated_gzip),
        cmocka_unit_test(test_idx_gzip_bomb),
        cmocka_unit_test(test_idx_truncated_and_long),
        cmocka_unit_test(test_idx_bad_label),
        cmocka_unit_test(test_gunzip),
        cmocka_unit_test(test_fashion_mnist_debian),
        cmocka_unit_test(test_cifar_folder),
        cmocka_unit_test(test_cifar_tar_gz),
        cmocka_unit_test(test_cifar_errors),
        cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_concurrent_reads),
    };
    return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
