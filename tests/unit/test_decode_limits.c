/* The decoders allocate what the input justifies, not what a few bytes of it claim (found by
 * the fuzz harnesses, tests/fuzz/regressions/):
 *   - gunzip: the gzip trailer's size field is a guess from the file, and a 90-byte file
 *     whose trailer said 4 GB made taas_gunzip ask for 4 GB before inflating a byte
 *     (fuzz_idx);
 *   - JPEG: the size check came after jpeg_start_decompress, which for a progressive image
 *     allocates and zeroes its coefficients, 2.6 GB for a 145-byte file (fuzz_jpeg); and
 *     libjpeg's own memory is bounded for images within the size limit;
 *   - PNG: an ancillary chunk that claims 1.9 GB was read into a buffer of that size (the
 *     suite's fuzz.png).
 * Allocations here are capped: under ASan, one above 1 GiB ends the program with ASan's
 * report; elsewhere RLIMIT_AS makes it fail, which shows as an error other than the file's
 * real fault. A program of its own, as the cap holds for the whole process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "errnames.h"
#include "formats.h"
#include "formats_testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#ifdef UNDER_SANITIZER
/* ASan: an allocation above 1 GiB is an error that ends the program, so that no decoder
 * can ask for one unseen (libpng's for a chunk fails silently under RLIMIT_AS) */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "max_allocation_size_mb=1024";
}
#endif

/* Without a sanitizer: the address space is capped 1 GiB above what the process has. */
static int cap_memory(void **state) {
    (void)state;
#ifndef UNDER_SANITIZER
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long vm_kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &vm_kb) == 1) break;
    if (f) fclose(f);
    assert_true(vm_kb > 0);
    struct rlimit r = {(rlim_t)(vm_kb * 1024 + (1ull << 30)), (rlim_t)(vm_kb * 1024 + (1ull << 30))};
    struct rlimit old;
    getrlimit(RLIMIT_AS, &old);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < r.rlim_max) r.rlim_cur = r.rlim_max = old.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_AS, &r), 0);
#endif
    return 0;
}

/* A trailer that claims 4 GB - 16 bytes on a stream of 5: the stream is reported as what it
 * is (zlib's length check fails), and nothing near 4 GB is asked for. */
static void test_gunzip_trailer_is_only_a_guess(void **state) {
    (void)state;
    taas_buf z = TAAS_BUF_INIT;
    fx_gzip("hello", 5, &z);
    unsigned char *t = (unsigned char *)z.data + z.len - 4;
    t[0] = 0xf0;
    t[1] = t[2] = t[3] = 0xff;
    unsigned char *out = NULL;
    size_t n = 0;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_gunzip((unsigned char *)z.data, z.len, "x.gz", SIZE_MAX, &out, &n, &err), -1);
    assert_string_equal(err.ename, TAAS_ERR_DATA);
    assert_non_null(strstr(err.message, "x.gz: corrupt gzip"));
    assert_null(out);
    taas_buf_free(&z);
}

/* The fuzzer's input itself: an IDX header that declares about 4 GB of pixels, and the same
 * trailer: the limit from the header does not make the guess believable either. */
static void test_gunzip_fuzz_input(void **state) {
    (void)state;
    static const unsigned char in[] = {
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x03, 0x63, 0x60, 0xe0, 0x60, 0xf2, 0x60,
        0x60, 0x60, 0x02, 0x62, 0x66, 0x30, 0x66, 0x66, 0x63, 0xe7, 0xe2, 0xe5, 0x13, 0x54, 0x91, 0x57,
        0x52, 0x55, 0xd3, 0xd4, 0xd1, 0x35, 0x30, 0x06, 0x00, 0x3d, 0x00, 0x00, 0x22, 0x97, 0x41, 0x00, 0xed};
    unsigned char *out = NULL;
    size_t n = 0;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_gunzip(in, sizeof in, "images.gz", (size_t)4 << 30, &out, &n, &err), -1);
    assert_string_equal(err.ename, TAAS_ERR_DATA);
    assert_null(out);
}

/* A true trailer is still taken at its word: 1 MiB of zeros, about 1 KB of gzip (deflate's
 * best is 1032 to 1), inflates whole. */
static void test_gunzip_true_trailer(void **state) {
    (void)state;
    size_t big = (size_t)1 << 20;
    char *zeros = calloc(big, 1);
    assert_non_null(zeros);
    taas_buf z = TAAS_BUF_INIT;
    fx_gzip(zeros, big, &z);
    unsigned char *out = NULL;
    size_t n = 0;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_gunzip((unsigned char *)z.data, z.len, "zeros.gz", big, &out, &n, &err), 0);
    assert_int_equal(n, big);
    assert_memory_equal(out, zeros, big);
    free(out);
    free(zeros);
    taas_buf_free(&z);
}

/* fuzz_jpeg's input: a progressive JPEG whose frame header (at byte 73) declares 65312 x
 * 13328 pixels, past the 2^28 the decoder takes. */
static const unsigned char HUGE_JPEG[] = {
    0xff, 0xd8, 0x00, 0x00, 0xff, 0xdb, 0x00, 0x43, 0x00, 0x10, 0x0b, 0x0c, 0x0e, 0x0c, 0x0a, 0x10,
    0x0e, 0x0d, 0x0e, 0x12, 0x11, 0xff, 0x13, 0x18, 0x28, 0x1a, 0x18, 0x16, 0x16, 0x31, 0x23, 0x2d,
    0xfc, 0x57, 0x97, 0xfe, 0x0d, 0x7f, 0x00, 0x00, 0x38, 0x37, 0xe6, 0xe6, 0xe6, 0xe6, 0xe6, 0xca,
    0xe6, 0xe6, 0xe6, 0xe6, 0xe6, 0xe6, 0xe6, 0xe6, 0xff, 0xff, 0xe6, 0xe6, 0xe6, 0xe6, 0xe6, 0xe6,
    0xe6, 0xe6, 0xe6, 0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0xff, 0xc2, 0x00, 0x11, 0x08, 0xff, 0x20,
    0x34, 0x10, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x03, 0xff, 0x00, 0xff, 0xc4,
    0x00, 0x16, 0x10, 0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x11, 0x00, 0x10, 0xff, 0xda, 0x00, 0x08, 0x01, 0x01, 0x00, 0x01, 0x05, 0x02,
    0x2a, 0x20, 0xff, 0xda, 0x00, 0x08, 0x01, 0x01, 0x00, 0x01, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x10,
    0x1f,
};
#define SOF_SIZE 78  /* height, then width, 16 bits each, big-endian */

/* Refused from its header, before libjpeg allocates for it. */
static void test_jpeg_too_large(void **state) {
    (void)state;
    taas_image img;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_decode_jpeg(HUGE_JPEG, sizeof HUGE_JPEG, &img, &err), -1);
    assert_string_equal(err.ename, TAAS_ERR_DATA);
    assert_non_null(strstr(err.message, "the image is too large (13328x65312)"));
    assert_null(img.data);
}

/* 16384 x 16384 is within the size limit, but a progressive image of that size would keep
 * 768 MB of coefficients: libjpeg's working memory is bounded, and the image refused. */
static void test_jpeg_progressive_memory(void **state) {
    (void)state;
    unsigned char in[sizeof HUGE_JPEG];
    memcpy(in, HUGE_JPEG, sizeof in);
    in[SOF_SIZE] = 0x40;
    in[SOF_SIZE + 1] = 0x00;
    in[SOF_SIZE + 2] = 0x40;
    in[SOF_SIZE + 3] = 0x00;
    taas_image img;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_decode_jpeg(in, sizeof in, &img, &err), -1);
    assert_string_equal(err.ename, TAAS_ERR_DATA);
    assert_non_null(strstr(err.message, "corrupt JPEG: Backing store not supported"));
    assert_null(img.data);
}

/* The suite's fuzz.png input: a 4x2 palette PNG whose sPLT chunk claims 0x73737373 bytes
 * (1.9 GB) in a 245-byte file. */
static const unsigned char SPLT_PNG[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x08, 0x03, 0x00, 0x00, 0x00, 0x48, 0x76, 0x8d,
    0x51, 0x00, 0x00, 0x00, 0x0c, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x50, 0x4c,
    0x54, 0x45, 0xff, 0x00, 0x00, 0x00, 0xff, 0x00, 0x00, 0x00, 0xff, 0x09, 0x09, 0x09, 0x5c, 0x71,
    0x7e, 0x86, 0x00, 0x00, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73,
    0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x00, 0x02, 0x74, 0x52, 0x4e,
    0x53, 0x00, 0x80, 0x9b, 0x2b, 0x4e, 0x18, 0x00, 0x00, 0x00, 0x12, 0x49, 0x44, 0x41, 0x54, 0x08,
    0x99, 0x63, 0x60, 0x60, 0x64, 0x62, 0x66, 0x60, 0x66, 0x62, 0x26, 0x00, 0x46, 0x00, 0x0d, 0x89,
    0x50, 0x4e, 0x47, 0x63, 0xb4,
};

/* libpng skips the chunk (the pixels need no ancillary chunk but tRNS) instead of reading
 * it into a buffer of the length it claims. The ASan build sees the allocation; elsewhere
 * it failed silently under RLIMIT_AS, and the message is the same. */
static void test_png_ancillary_chunk(void **state) {
    (void)state;
    taas_image img;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_decode_png(SPLT_PNG, sizeof SPLT_PNG, &img, &err), -1);
    assert_string_equal(err.ename, TAAS_ERR_DATA);
    assert_string_equal(err.message, "corrupt PNG: unexpected end of data (truncated PNG) (sPLT: chunk data is too "
                                     "large)");
    assert_null(img.data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gunzip_trailer_is_only_a_guess),
        cmocka_unit_test(test_gunzip_fuzz_input),
        cmocka_unit_test(test_gunzip_true_trailer),
        cmocka_unit_test(test_jpeg_too_large),
        cmocka_unit_test(test_jpeg_progressive_memory),
        cmocka_unit_test(test_png_ancillary_chunk),
    };
    return cmocka_run_group_tests(tests, cap_memory, NULL);
}
