/* NpyDataset: .npy versions 1-3, every supported dtype for images and labels, in memory and
 * read sample by sample (TAAS_NPY_MEMORY_LIMIT), and each bad file with its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "formats.h"
#define FX_SPEC_TESTS
#include "formats_testutil.h"

static int reset_env(void **state) {
    (void)state;
    unsetenv("TAAS_NPY_MEMORY_LIMIT");
    return 0;
}

static const char *npy_spec(const char *images, const char *labels) {
    static char s[1024];
    snprintf(s, sizeof s, "{\"type\": \"NpyDataset\", \"images\": \"%s\", \"labels\": \"%s\", \"transform\": null}",
             fx_path(images), fx_path(labels));
    return s;
}

static void write_npy(const char *rel, int version, const char *descr, const char *fortran, const char *shape,
                      const void *data, size_t n) {
    taas_buf b = TAAS_BUF_INIT;
    fx_npy(&b, version, descr, fortran, shape, data, n);
    fx_buf_write(rel, &b);
    taas_buf_free(&b);
}

/* Labels 0..n-1 as int64. */
static void write_labels(const char *rel, size_t n) {
    int64_t v[64];
    for (size_t i = 0; i < n; i++) v[i] = (int64_t)i;
    char shape[32];
    snprintf(shape, sizeof shape, "(%zu,)", n);
    write_npy(rel, 1, "<i8", "False", shape, v, n * 8);
}

/* ---- reading ----------------------------------------------------------------------- */

static void check_u8(taas_dataset *d) {
    const taas_dataset_info *info = taas_dataset_info_get(d);
    assert_int_equal(info->size, 3);
    assert_int_equal(info->h, 2);
    assert_int_equal(info->w, 5);
    assert_int_equal(info->c, 1);
    for (size_t i = 0; i < 3; i++) {
        taas_image img;
        int64_t label;
        assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), 0);
        assert_int_equal(img.type, TAAS_PIX_U8);
        assert_int_equal(img.h, 2);
        assert_int_equal(img.w, 5);
        assert_int_equal(img.c, 1);
        for (int k = 0; k < 10; k++) assert_int_equal(((unsigned char *)img.data)[k], (unsigned char)(i * 10 + k * 20));
        assert_int_equal(label, (int64_t)i);
        taas_image_free(&img);
    }
}

static void test_u8_images(void **state) {
    (void)state;
    unsigned char px[30];
    for (int i = 0; i < 30; i++) px[i] = (unsigned char)((i / 10) * 10 + (i % 10) * 20);
    write_npy("u8/images.npy", 1, "|u1", "False", "(3, 2, 5)", px, sizeof px);
    write_labels("u8/labels.npy", 3);
    taas_dataset *d = open_ok(npy_spec("u8/images.npy", "u8/labels.npy"));
    check_u8(d);
    assert_string_equal(taas_dataset_info_get(d)->type, "NpyDataset");
    assert_string_equal(taas_dataset_info_get(d)->source, fx_path("u8/images.npy"));
    assert_null(taas_dataset_info_get(d)->classes);
    taas_dataset_free(d);
    /* the same, read one sample at a time instead of kept in memory */
    setenv("TAAS_NPY_MEMORY_LIMIT", "16", 1);
    d = open_ok(npy_spec("u8/images.npy", "u8/labels.npy"));
    check_u8(d);
    taas_dataset_free(d);
}

/* Every image dtype comes out as float32 with the same values (uint8 stays uint8). */
static void test_image_dtypes(void **state) {
    (void)state;
    static const struct {
        const char *descr;
        int size;
    } T[] = {{"|i1", 1}, {"<u2", 2}, {"<i2", 2}, {"<u4", 4}, {"<i4", 4}, {"<u8", 8}, {"<i8", 8}, {"<f4", 4},
             {"<f8", 8}, {">u1", 1}, {"|u1", 1}};
    const double vals[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100};
    const double neg[12] = {0, -1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -100};
    for (int limit = 0; limit < 2; limit++) {
        if (limit) setenv("TAAS_NPY_MEMORY_LIMIT", "0", 1);
        for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
            int is_signed = T[t].descr[1] == 'i' || T[t].descr[1] == 'f';
            const double *v = is_signed ? neg : vals;
            unsigned char raw[12 * 8];
            for (int i = 0; i < 12; i++) {
                unsigned char *p = raw + i * T[t].size;
                switch (T[t].descr[1] << 8 | T[t].size) {
                case 'i' << 8 | 1: *(int8_t *)p = (int8_t)v[i]; break;
                case 'u' << 8 | 1: *p = (uint8_t)v[i]; break;
                case 'u' << 8 | 2: { uint16_t x = (uint16_t)v[i]; memcpy(p, &x, 2); } break;
                case 'i' << 8 | 2: { int16_t x = (int16_t)v[i]; memcpy(p, &x, 2); } break;
                case 'u' << 8 | 4: { uint32_t x = (uint32_t)v[i]; memcpy(p, &x, 4); } break;
                case 'i' << 8 | 4: { int32_t x = (int32_t)v[i]; memcpy(p, &x, 4); } break;
                case 'u' << 8 | 8: { uint64_t x = (uint64_t)v[i]; memcpy(p, &x, 8); } break;
                case 'i' << 8 | 8: { int64_t x = (int64_t)v[i]; memcpy(p, &x, 8); } break;
                case 'f' << 8 | 4: { float x = (float)v[i]; memcpy(p, &x, 4); } break;
                case 'f' << 8 | 8: memcpy(p, &v[i], 8); break;
                }
            }
            /* (N=2, H=2, W=1, C=3), version 3 for the variety */
            write_npy("dt/images.npy", 3, T[t].descr, "False", "(2, 2, 1, 3)", raw, (size_t)12 * T[t].size);
            write_labels("dt/labels.npy", 2);
            taas_dataset *d = open_ok(npy_spec("dt/images.npy", "dt/labels.npy"));
            assert_int_equal(taas_dataset_info_get(d)->c, 3);
            for (size_t s = 0; s < 2; s++) {
                taas_image img;
                int64_t label;
                assert_int_equal(taas_dataset_get(d, s, &img, &label, &E), 0);
                assert_int_equal(img.h, 2);
                assert_int_equal(img.w, 1);
                assert_int_equal(img.c, 3);
                for (int k = 0; k < 6; k++) {
                    double want = v[s * 6 + k];
                    if (strcmp(T[t].descr + 1, "u1") == 0) {
                        assert_int_equal(img.type, TAAS_PIX_U8);
                        assert_int_equal(((unsigned char *)img.data)[k], (unsigned char)want);
                    } else {
                        assert_int_equal(img.type, TAAS_PIX_F32);
                        if (((float *)img.data)[k] != (float)want)
                            fail_msg("%s sample %zu element %d: %g, wanted %g", T[t].descr, s, k,
                                     ((float *)img.data)[k], want);
                    }
                }
                taas_image_free(&img);
            }
            taas_dataset_free(d);
        }
    }
}

static void test_label_dtypes(void **state) {
    (void)state;
    unsigned char px[4] = {1, 2, 3, 4};
    write_npy("lab/images.npy", 1, "|u1", "False", "(4, 1, 1)", px, 4);
    int8_t i1[4] = {-1, 0, 5, 127};
    write_npy("lab/i1.npy", 1, "|i1", "False", "(4,)", i1, 4);
    uint16_t u2[4] = {0, 1, 65535, 9};
    write_npy("lab/u2.npy", 2, "<u2", "False", "(4, 1)", u2, 8);
    int32_t i4[4] = {-100, 7, 8, 9};
    write_npy("lab/i4.npy", 1, "<i4", "True", "(4,)", i4, 16); /* 1-D: Fortran order is the same */
    uint64_t u8[4] = {1, 2, 3, 4};
    write_npy("lab/u8.npy", 1, "<u8", "False", "(4,)", u8, 32);
    static const struct {
        const char *file;
        int64_t want[4];
    } T[] = {{"lab/i1.npy", {-1, 0, 5, 127}},
             {"lab/u2.npy", {0, 1, 65535, 9}},
             {"lab/i4.npy", {-100, 7, 8, 9}},
             {"lab/u8.npy", {1, 2, 3, 4}}};
    for (size_t t = 0; t < 4; t++) {
        taas_dataset *d = open_ok(npy_spec("lab/images.npy", T[t].file));
        for (size_t i = 0; i < 4; i++) {
            taas_image img;
            int64_t label;
            assert_int_equal(taas_dataset_get(d, i, &img, &label, &E), 0);
            assert_int_equal(label, T[t].want[i]);
            assert_int_equal(((unsigned char *)img.data)[0], px[i]);
            taas_image_free(&img);
        }
        taas_dataset_free(d);
    }
    /* a uint64 no int64 holds is no class index, never -1 (issue 16, defect 15) */
    uint64_t huge[4] = {1, 2, UINT64_MAX, 4};
    write_npy("lab/huge.npy", 1, "<u8", "False", "(4,)", huge, 32);
    open_bad(npy_spec("lab/images.npy", "lab/huge.npy"), "TaasDataError",
             "label 18446744073709551615 of sample 2 is beyond any class index", NULL);
}

/* ---- bad files --------------------------------------------------------------------- */

static void test_unsupported_dtypes(void **state) {
    (void)state;
    write_labels("bad/labels.npy", 2);
    unsigned char zeros[64] = {0};
    write_npy("bad/c8.npy", 1, "<c8", "False", "(2, 1, 1)", zeros, 16);
    open_bad(npy_spec("bad/c8.npy", "bad/labels.npy"), "TaasDataError", "bad/c8.npy: unsupported dtype '<c8'",
             "(supported: u1, u2, u4, u8, i1, i2, i4, i8, f4, f8", NULL);
    write_npy("bad/b1.npy", 1, "|b1", "False", "(2, 1, 1)", zeros, 2);
    open_bad(npy_spec("bad/b1.npy", "bad/labels.npy"), "TaasDataError", "unsupported dtype '|b1'", NULL);
    write_npy("bad/f2.npy", 1, "<f2", "False", "(2, 1, 1)", zeros, 4);
    open_bad(npy_spec("bad/f2.npy", "bad/labels.npy"), "TaasDataError", "unsupported dtype '<f2'", NULL);
    write_npy("bad/U5.npy", 1, "<U5", "False", "(2, 1, 1)", zeros, 40);
    open_bad(npy_spec("bad/U5.npy", "bad/labels.npy"), "TaasDataError", "unsupported dtype '<U5'", NULL);
    write_npy("bad/be.npy", 1, ">f4", "False", "(2, 1, 1)", zeros, 8);
    open_bad(npy_spec("bad/be.npy", "bad/labels.npy"), "TaasDataError", "big-endian dtype '>f4' is not supported",
             NULL);
    assert_non_null(strstr(E.hint, "newbyteorder"));
    /* a structured dtype: descr is a list */
    taas_buf b = TAAS_BUF_INIT;
    const char *hdr = "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }";
    size_t hl = strlen(hdr) + 1;
    taas_buf_add(&b, "\x93NUMPY\x01\x00", 8);
    taas_buf_putc(&b, (char)hl);
    taas_buf_putc(&b, 0);
    taas_buf_puts(&b, hdr);
    taas_buf_putc(&b, '\n');
    taas_buf_add(&b, (const char *)zeros, 8);
    fx_buf_write("bad/struct.npy", &b);
    taas_buf_free(&b);
    open_bad(npy_spec("bad/struct.npy", "bad/labels.npy"), "TaasDataError", "unsupported dtype: a structured array",
             NULL);
    /* labels must be integers */
    unsigned char px[2] = {0};
    write_npy("bad/images.npy", 1, "|u1", "False", "(2, 1, 1)", px, 2);
    float fl[2] = {0, 1};
    write_npy("bad/flabels.npy", 1, "<f4", "False", "(2,)", fl, 8);
    open_bad(npy_spec("bad/images.npy", "bad/flabels.npy"), "TaasDataError",
             "bad/flabels.npy: labels must be integers, not dtype '<f4'", NULL);
}

static void test_bad_layouts(void **state) {
    (void)state;
    unsigned char z[64] = {0};
    write_labels("lay/labels.npy", 2);
    write_npy("lay/fortran.npy", 1, "|u1", "True", "(2, 2, 2)", z, 8);
    open_bad(npy_spec("lay/fortran.npy", "lay/labels.npy"), "TaasDataError",
             "lay/fortran.npy: the array is in Fortran (column-major) order; taas reads C order only", NULL);
    assert_non_null(strstr(E.hint, "ascontiguousarray"));
    write_npy("lay/flat.npy", 1, "|u1", "False", "(2, 4)", z, 8);
    open_bad(npy_spec("lay/flat.npy", "lay/labels.npy"), "TaasDataError",
             "images must have shape (N, H, W) or (N, H, W, C), not 2 dimensions", NULL);
    write_npy("lay/images.npy", 1, "|u1", "False", "(3, 2, 2)", z, 12);
    open_bad(npy_spec("lay/images.npy", "lay/labels.npy"), "TaasDataError",
             "lay/images.npy has 3 images but", "lay/labels.npy has 2 labels", NULL);
    int64_t two[4] = {0};
    write_npy("lay/labels2d.npy", 1, "<i8", "False", "(3, 2)", two, 32);
    open_bad(npy_spec("lay/images.npy", "lay/labels2d.npy"), "TaasDataError", "labels must have shape (N,), not (3, 2)",
             NULL);
    write_npy("lay/empty.npy", 1, "|u1", "False", "(0, 2, 2)", z, 0);
    write_npy("lay/nolabels.npy", 1, "<i8", "False", "(0,)", z, 0);
    open_bad(npy_spec("lay/empty.npy", "lay/nolabels.npy"), "TaasDataError", "holds no samples", NULL);
}

static void test_truncated_and_corrupt(void **state) {
    (void)state;
    unsigned char z[64] = {0};
    write_labels("tr/labels.npy", 3);
    write_npy("tr/images.npy", 1, "|u1", "False", "(3, 2, 2)", z, 10);
    open_bad(npy_spec("tr/images.npy", "tr/labels.npy"), "TaasDataError",
             "tr/images.npy is truncated: its header promises 12 bytes of data, but the file has 10", NULL);
    setenv("TAAS_NPY_MEMORY_LIMIT", "1", 1); /* the same, found through range reads */
    open_bad(npy_spec("tr/images.npy", "tr/labels.npy"), "TaasDataError", "is truncated", NULL);
    unsetenv("TAAS_NPY_MEMORY_LIMIT");
    write_npy("tr/images.npy", 1, "|u1", "False", "(3, 2, 2)", z, 12);
    write_npy("tr/short_labels.npy", 1, "<i8", "False", "(3,)", z, 20);
    open_bad(npy_spec("tr/images.npy", "tr/short_labels.npy"), "TaasDataError", "tr/short_labels.npy is truncated",
             NULL);
    fx_write("tr/text.npy", "hello, world, not numpy", 23);
    open_bad(npy_spec("tr/text.npy", "tr/labels.npy"), "TaasDataError",
             "tr/text.npy: not a valid .npy file: it does not start with the magic", NULL);
    taas_buf b = TAAS_BUF_INIT;
    fx_npy(&b, 1, "|u1", "False", "(3, 2, 2)", z, 12);
    b.data[6] = 4; /* a future format version */
    fx_buf_write("tr/v4.npy", &b);
    open_bad(npy_spec("tr/v4.npy", "tr/labels.npy"), "TaasDataError", "format version 4.0", NULL);
    b.data[6] = 1;
    fx_write("tr/cut_header.npy", b.data, 30);
    open_bad(npy_spec("tr/cut_header.npy", "tr/labels.npy"), "TaasDataError", "the file ends inside the header", NULL);
    taas_buf_free(&b);
    fx_npy(&b, 1, "|u1", "Maybe", "(3, 2, 2)", z, 12);
    fx_buf_write("tr/maybe.npy", &b);
    taas_buf_free(&b);
    open_bad(npy_spec("tr/maybe.npy", "tr/labels.npy"), "TaasDataError", "fortran_order is neither True nor False",
             NULL);
    fx_npy(&b, 1, "|u1", "False", "(3, x)", z, 12);
    fx_buf_write("tr/shape.npy", &b);
    taas_buf_free(&b);
    open_bad(npy_spec("tr/shape.npy", "tr/labels.npy"), "TaasDataError", "shape is not a tuple of integers", NULL);
    open_bad(npy_spec("tr/missing.npy", "tr/labels.npy"), "TaasIOError", "tr/missing.npy", NULL);
    open_bad("{\"type\": \"NpyDataset\", \"images\": null, \"labels\": \"x\"}", "TaasValueError",
             "NpyDataset needs images and labels", NULL);
    setenv("TAAS_NPY_MEMORY_LIMIT", "lots", 1);
    open_bad(npy_spec("tr/images.npy", "tr/labels.npy"), "TaasValueError",
             "TAAS_NPY_MEMORY_LIMIT='lots' is not a size in bytes", NULL);
    setenv("TAAS_NPY_MEMORY_LIMIT", "2G", 1);
    taas_dataset *d = open_ok(npy_spec("tr/images.npy", "tr/labels.npy"));
    taas_dataset_free(d);
}

/* A sample whose range read fails after open names the sample and the file. */
static void test_read_error_names_sample(void **state) {
    (void)state;
    unsigned char px[12] = {0};
    write_npy("gone/images.npy", 1, "|u1", "False", "(3, 2, 2)", px, 12);
    write_labels("gone/labels.npy", 3);
    setenv("TAAS_NPY_MEMORY_LIMIT", "0", 1);
    taas_dataset *d = open_ok(npy_spec("gone/images.npy", "gone/labels.npy"));
    unlink(fx_path("gone/images.npy"));
    taas_image img;
    int64_t label;
    assert_int_equal(taas_dataset_get(d, 2, &img, &label, &E), -1);
    assert_null(img.data);
    if (strncmp(E.message, "sample 2 (", 10) != 0 || !strstr(E.message, "gone/images.npy"))
        fail_msg("got %s", E.message);
    taas_dataset_free(d);
}

/* ---- threads ----------------------------------------------------------------------- */

typedef struct reader {
    taas_dataset *d;
    int t, failed;
    double sum;
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
        for (int k = 0; k < img.h * img.w * img.c; k++) r->sum += ((float *)img.data)[k] * (double)(label + 1);
        taas_image_free(&img);
    }
    return NULL;
}

static void test_concurrent_reads(void **state) {
    (void)state;
    enum { N = 64 };
    static float px[N * 3 * 3];
    int64_t labels[N];
    double want = 0;
    for (int i = 0; i < N * 9; i++) {
        px[i] = (float)(i % 17) * 0.5f;
        want += px[i] * (double)(i / 9 + 1);
    }
    for (int i = 0; i < N; i++) labels[i] = i;
    write_npy("thr/images.npy", 2, "<f4", "False", "(64, 3, 3)", px, sizeof px);
    write_npy("thr/labels.npy", 1, "<i8", "False", "(64,)", labels, sizeof labels);
    for (int mode = 0; mode < 2; mode++) {
        if (mode) setenv("TAAS_NPY_MEMORY_LIMIT", "0", 1);
        taas_dataset *d = open_ok(npy_spec("thr/images.npy", "thr/labels.npy"));
        pthread_t th[4];
        reader r[4];
        for (int t = 0; t < 4; t++) {
            r[t] = (reader){d, t, 0, 0};
            assert_int_equal(pthread_create(&th[t], NULL, read_all, &r[t]), 0);
        }
        double sum = 0;
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            assert_false(r[t].failed);
            sum += r[t].sum;
        }
        assert_true(sum == want);
        taas_dataset_free(d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_u8_images, reset_env),
        cmocka_unit_test_setup(test_image_dtypes, reset_env),
        cmocka_unit_test_setup(test_label_dtypes, reset_env),
        cmocka_unit_test_setup(test_unsupported_dtypes, reset_env),
        cmocka_unit_test_setup(test_bad_layouts, reset_env),
        cmocka_unit_test_setup(test_truncated_and_corrupt, reset_env),
        cmocka_unit_test_setup(test_read_error_names_sample, reset_env),
        cmocka_unit_test_setup(test_concurrent_reads, reset_env),
    };
    return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
