/* The image decoders: PNG through libpng (every colour type, bit depths, palettes with and
 * without transparency, interlacing) and JPEG through libjpeg-turbo, against images written
 * by the same libraries; corrupt and truncated files are errors, never a crash or an exit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "formats.h"
#include "formats_testutil.h"

static taas_error E;

static void decode_png_ok(const taas_buf *b, taas_image *img) {
    if (taas_decode_png((const unsigned char *)b->data, b->len, img, &E) != 0)
        fail_msg("PNG decode failed: %s", E.message);
    assert_int_equal(img->type, TAAS_PIX_U8);
}

static void expect_pixels(const taas_image *img, int w, int h, int c, const unsigned char *want) {
    assert_int_equal(img->w, w);
    assert_int_equal(img->h, h);
    assert_int_equal(img->c, c);
    assert_memory_equal(img->data, want, (size_t)w * h * c);
}

static void test_png_8bit_channels(void **state) {
    (void)state;
    for (int c = 1; c <= 4; c++) {
        unsigned char *px = fx_pic_make(7, 5, c, c);
        taas_buf b = TAAS_BUF_INIT;
        fx_png8(&b, 7, 5, c, px);
        taas_image img;
        decode_png_ok(&b, &img);
        expect_pixels(&img, 7, 5, c, px);
        taas_image_free(&img);
        taas_buf_free(&b);
        free(px);
    }
}

static void test_png_palette(void **state) {
    (void)state;
    png_color pal[3] = {{255, 0, 0}, {0, 128, 0}, {10, 20, 30}};
    unsigned char idx[6] = {0, 1, 2, 2, 1, 0};
    taas_buf b = TAAS_BUF_INIT;
    fx_png(&b, 3, 2, PNG_COLOR_TYPE_PALETTE, 8, idx, 3, pal, 3, NULL, 0, 0);
    taas_image img;
    decode_png_ok(&b, &img);
    unsigned char rgb[18];
    for (int i = 0; i < 6; i++) {
        rgb[3 * i] = pal[idx[i]].red;
        rgb[3 * i + 1] = pal[idx[i]].green;
        rgb[3 * i + 2] = pal[idx[i]].blue;
    }
    expect_pixels(&img, 3, 2, 3, rgb);
    taas_image_free(&img);
    taas_buf_free(&b);
    /* with transparency the palette expands to RGBA */
    unsigned char trns[2] = {0, 77};
    fx_png(&b, 3, 2, PNG_COLOR_TYPE_PALETTE, 8, idx, 3, pal, 3, trns, 2, 0);
    decode_png_ok(&b, &img);
    unsigned char rgba[24];
    for (int i = 0; i < 6; i++) {
        rgba[4 * i] = pal[idx[i]].red;
        rgba[4 * i + 1] = pal[idx[i]].green;
        rgba[4 * i + 2] = pal[idx[i]].blue;
        rgba[4 * i + 3] = idx[i] < 2 ? trns[idx[i]] : 255;
    }
    expect_pixels(&img, 3, 2, 4, rgba);
    taas_image_free(&img);
    taas_buf_free(&b);
    /* a 4-bit palette (two pixels a byte) */
    unsigned char packed[2] = {0x01, 0x20}; /* 0 1 | 2 0 */
    fx_png(&b, 2, 2, PNG_COLOR_TYPE_PALETTE, 4, packed, 1, pal, 3, NULL, 0, 0);
    decode_png_ok(&b, &img);
    assert_int_equal(img.c, 3);
    unsigned char *p = img.data;
    assert_int_equal(p[0], 255);      /* index 0: red */
    assert_int_equal(p[3 + 1], 128);  /* index 1: green */
    assert_int_equal(p[6 + 2], 30);   /* index 2 */
    assert_int_equal(p[9], 255);      /* index 0 */
    taas_image_free(&img);
    taas_buf_free(&b);
}

static void test_png_low_and_high_depth(void **state) {
    (void)state;
    taas_buf b = TAAS_BUF_INIT;
    taas_image img;
    /* 1-bit grey: 0 and 255, as PIL's convert('L') gives */
    unsigned char bits[2] = {0xA0, 0x40}; /* row 0: 1 0 1; row 1: 0 1 0 */
    fx_png(&b, 3, 2, PNG_COLOR_TYPE_GRAY, 1, bits, 1, NULL, 0, NULL, 0, 0);
    decode_png_ok(&b, &img);
    const unsigned char want1[6] = {255, 0, 255, 0, 255, 0};
    expect_pixels(&img, 3, 2, 1, want1);
    taas_image_free(&img);
    taas_buf_free(&b);
    /* 4-bit grey scales by 17 */
    unsigned char nib[2] = {0x0F, 0x73};
    fx_png(&b, 2, 2, PNG_COLOR_TYPE_GRAY, 4, nib, 1, NULL, 0, NULL, 0, 0);
    decode_png_ok(&b, &img);
    const unsigned char want4[4] = {0, 255, 7 * 17, 3 * 17};
    expect_pixels(&img, 2, 2, 1, want4);
    taas_image_free(&img);
    taas_buf_free(&b);
    /* 16-bit grey and RGB: the high byte */
    unsigned char g16[8] = {0x12, 0x34, 0xAB, 0xCD, 0x00, 0xFF, 0xFF, 0x00};
    fx_png(&b, 2, 2, PNG_COLOR_TYPE_GRAY, 16, g16, 4, NULL, 0, NULL, 0, 0);
    decode_png_ok(&b, &img);
    const unsigned char want16[4] = {0x12, 0xAB, 0x00, 0xFF};
    expect_pixels(&img, 2, 2, 1, want16);
    taas_image_free(&img);
    taas_buf_free(&b);
    unsigned char rgb16[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    fx_png(&b, 2, 1, PNG_COLOR_TYPE_RGB, 16, rgb16, 12, NULL, 0, NULL, 0, 0);
    decode_png_ok(&b, &img);
    const unsigned char wantrgb[6] = {1, 3, 5, 7, 9, 11};
    expect_pixels(&img, 2, 1, 3, wantrgb);
    taas_image_free(&img);
    taas_buf_free(&b);
}

static void test_png_interlaced(void **state) {
    (void)state;
    unsigned char *px = fx_pic_make(13, 11, 3, 5);
    taas_buf b = TAAS_BUF_INIT;
    fx_png(&b, 13, 11, PNG_COLOR_TYPE_RGB, 8, px, 13 * 3, NULL, 0, NULL, 0, 1);
    taas_image img;
    decode_png_ok(&b, &img);
    expect_pixels(&img, 13, 11, 3, px);
    taas_image_free(&img);
    taas_buf_free(&b);
    free(px);
}

static void png_bad(const void *data, size_t n, const char *want) {
    taas_image img;
    if (taas_decode_png(data, n, &img, &E) != -1) fail_msg("a bad PNG was decoded (want %s)", want);
    assert_string_equal(E.ename, "TaasDataError");
    if (strncmp(E.message, "corrupt PNG: ", 13) != 0 || !strstr(E.message, want))
        fail_msg("got '%s', wanted 'corrupt PNG: ...%s...'", E.message, want);
    assert_true(E.hint[0] != '\0');
    assert_null(img.data);
}

static void test_png_corrupt(void **state) {
    (void)state;
    unsigned char *px = fx_pic_make(40, 30, 3, 1);
    taas_buf b = TAAS_BUF_INIT;
    fx_png8(&b, 40, 30, 3, px);
    free(px);
    png_bad(b.data, b.len / 2, "truncated");
    png_bad("GIF89a......", 12, "it does not start with the PNG signature");
    png_bad(b.data, 4, "signature");
    /* a damaged byte in the image data: zlib or the chunk's CRC says so */
    char *bad = malloc(b.len);
    memcpy(bad, b.data, b.len);
    char *idat = memmem(bad, b.len, "IDAT", 4);
    assert_non_null(idat);
    idat[20] ^= 0x55;
    png_bad(bad, b.len, "IDAT");
    /* a header that claims an absurd width */
    memcpy(bad, b.data, b.len);
    bad[16] = 0x7f; /* IHDR width's top byte, CRC fixed below */
    uLong crc = crc32(0, (const Bytef *)bad + 12, 17);
    bad[29] = (char)(crc >> 24);
    bad[30] = (char)(crc >> 16);
    bad[31] = (char)(crc >> 8);
    bad[32] = (char)crc;
    png_bad(bad, b.len, "width");
    free(bad);
    taas_buf_free(&b);
}

/* ---- JPEG -------------------------------------------------------------------------- */

static void test_jpeg(void **state) {
    (void)state;
    for (int c = 1; c <= 3; c += 2) {
        unsigned char *px = fx_pic_make(24, 16, c, 3);
        taas_buf b = TAAS_BUF_INIT;
        fx_jpeg(&b, 24, 16, c, px, 95);
        taas_image img;
        if (taas_decode_jpeg((const unsigned char *)b.data, b.len, &img, &E) != 0)
            fail_msg("JPEG decode failed: %s", E.message);
        assert_int_equal(img.w, 24);
        assert_int_equal(img.h, 16);
        assert_int_equal(img.c, c);
        assert_int_equal(img.type, TAAS_PIX_U8);
        int worst = 0;
        for (int i = 0; i < 24 * 16 * c; i++) {
            int d = abs((int)((unsigned char *)img.data)[i] - (int)px[i]);
            if (d > worst) worst = d;
        }
        if (worst > 8) fail_msg("JPEG (%d channels) differs from the original by %d levels", c, worst);
        taas_image_free(&img);
        taas_buf_free(&b);
        free(px);
    }
}

static void jpeg_bad(const void *data, size_t n, const char *want) {
    taas_image img;
    if (taas_decode_jpeg(data, n, &img, &E) != -1) fail_msg("a bad JPEG was decoded (want %s)", want);
    assert_string_equal(E.ename, "TaasDataError");
    if (strncmp(E.message, "corrupt JPEG: ", 14) != 0 || !strstr(E.message, want))
        fail_msg("got '%s', wanted 'corrupt JPEG: ...%s...'", E.message, want);
    assert_true(E.hint[0] != '\0');
    assert_null(img.data);
}

static void test_jpeg_corrupt(void **state) {
    (void)state;
    unsigned char *px = fx_pic_make(64, 64, 3, 2);
    taas_buf b = TAAS_BUF_INIT;
    fx_jpeg(&b, 64, 64, 3, px, 90);
    free(px);
    jpeg_bad(b.data, b.len / 2, "truncated JPEG");
    jpeg_bad("\x89PNG\r\n\x1a\n", 8, "it does not start with a JPEG SOI marker");
    /* SOI, then garbage instead of markers: libjpeg's error, not its exit() */
    char junk[64];
    memset(junk, 0x42, sizeof junk);
    junk[0] = (char)0xFF;
    junk[1] = (char)0xD8;
    jpeg_bad(junk, sizeof junk, "");
    jpeg_bad(b.data, 40, "");
    taas_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_8bit_channels), cmocka_unit_test(test_png_palette),
        cmocka_unit_test(test_png_low_and_high_depth), cmocka_unit_test(test_png_interlaced),
        cmocka_unit_test(test_png_corrupt), cmocka_unit_test(test_jpeg),
        cmocka_unit_test(test_jpeg_corrupt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
