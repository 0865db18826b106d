/* kernel/protocol/hmac: HMAC-SHA256 signing and constant-time verification. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "hmac.h"

/* Linked with -Wl,--wrap=sodium_memcmp (tests/CMakeLists.txt): counts the calls to prove
 * that verification compares through libsodium's constant-time function. */
static int memcmp_calls;
int __real_sodium_memcmp(const void *a, const void *b, size_t len);
int __wrap_sodium_memcmp(const void *a, const void *b, size_t len);
int __wrap_sodium_memcmp(const void *a, const void *b, size_t len) {
    memcmp_calls++;
    return __real_sodium_memcmp(a, b, len);
}

static char *sign_parts(taas_signer *s, const char *const *parts, size_t n) {
    static char out[TAAS_HMAC_HEX_LEN + 1];
    const void *p[8];
    size_t l[8];
    for (size_t i = 0; i < n; i++) {
        p[i] = parts[i];
        l[i] = strlen(parts[i]);
    }
    assert_int_equal(taas_signer_sign(s, p, l, n, out), 0);
    return out;
}

/* RFC 4231, test case 2: key "Jefe". The message is split across parts, as the four
 * JSON frames are: HMAC runs over their concatenation. */
static void test_rfc4231_case2(void **state) {
    (void)state;
    taas_error err;
    taas_signer *s = taas_signer_new("Jefe", 4, &err);
    assert_non_null(s);
    assert_true(taas_signer_enabled(s));
    const char *whole[] = {"what do ya want for nothing?"};
    const char *split[] = {"what do ya", " want ", "", "for nothing?"};
    const char *want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
    assert_string_equal(sign_parts(s, whole, 1), want);
    assert_string_equal(sign_parts(s, split, 4), want);
    /* the context is reused: signing again gives the same digest */
    assert_string_equal(sign_parts(s, whole, 1), want);
    taas_signer_free(s);
}

/* RFC 4231, test case 1: a 20-byte binary key. */
static void test_rfc4231_case1(void **state) {
    (void)state;
    taas_error err;
    unsigned char key[20];
    memset(key, 0x0b, sizeof key);
    taas_signer *s = taas_signer_new(key, sizeof key, &err);
    assert_non_null(s);
    const char *msg[] = {"Hi There"};
    assert_string_equal(sign_parts(s, msg, 1),
                        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    taas_signer_free(s);
}

/* RFC 4231, test case 6: a key longer than SHA-256's block is hashed first. */
static void test_rfc4231_case6_long_key(void **state) {
    (void)state;
    taas_error err;
    unsigned char key[131];
    memset(key, 0xaa, sizeof key);
    taas_signer *s = taas_signer_new(key, sizeof key, &err);
    assert_non_null(s);
    const char *msg[] = {"Test Using Larger Than Block-Siz", "e Key - Hash Key First"};
    assert_string_equal(sign_parts(s, msg, 2),
                        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* the signer is reusable: the same digest again */
    assert_string_equal(sign_parts(s, msg, 2),
                        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    taas_signer_free(s);
}

/* A message signed by jupyter_client's Session (key b"c0ffee00-taas-test-key"). */
static const char *JUPYTER_FRAMES[4] = {
    ("{\"msg_id\": \"7b0d3a5e-1c1f-4d6b-9b55-2f6b0b9e3d21_13269_0\", \"msg_type\": "
     "\"execute_request\", \"username\": \"alice\", \"session\": "
     "\"7b0d3a5e-1c1f-4d6b-9b55-2f6b0b9e3d21\", \"date\": \"2026-11-22T03:09:17.522488Z\", "
     "\"version\": \"5.3\"}"),
    "{}",
    "{}",
    ("{\"code\": \"print(\\\"h\xc3\xa9llo\\\")\", \"silent\": false, \"store_history\": true, "
     "\"user_expressions\": {}, \"allow_stdin\": false, \"stop_on_error\": true}"),
};
static const char JUPYTER_SIG[] = "bdd66683ccce1c071cf78eda9fb43403a7253ad82ee72119ec1bc01bd3e8b8d8";
static const char JUPYTER_KEY[] = "c0ffee00-taas-test-key";

static int verify(taas_signer *s, const char *const *frames, const char *sig) {
    const void *p[4];
    size_t l[4];
    for (int i = 0; i < 4; i++) {
        p[i] = frames[i];
        l[i] = strlen(frames[i]);
    }
    return taas_signer_verify(s, p, l, 4, sig, strlen(sig));
}

static void test_jupyter_signed_message(void **state) {
    (void)state;
    taas_error err;
    taas_signer *s = taas_signer_new(JUPYTER_KEY, strlen(JUPYTER_KEY), &err);
    assert_non_null(s);
    assert_string_equal(sign_parts(s, JUPYTER_FRAMES, 4), JUPYTER_SIG);
    memcmp_calls = 0;
    assert_true(verify(s, JUPYTER_FRAMES, JUPYTER_SIG));
    assert_int_equal(memcmp_calls, 1);   /* compared in constant time */
    taas_signer_free(s);
}

static void test_bad_signatures_rejected(void **state) {
    (void)state;
    taas_error err;
    taas_signer *s = taas_signer_new(JUPYTER_KEY, strlen(JUPYTER_KEY), &err);
    assert_non_null(s);
    /* missing */
    assert_false(verify(s, JUPYTER_FRAMES, ""));
    /* one hex digit changed */
    char bad[sizeof JUPYTER_SIG];
    memcpy(bad, JUPYTER_SIG, sizeof bad);
    bad[10] = bad[10] == '0' ? '1' : '0';
    memcmp_calls = 0;
    assert_false(verify(s, JUPYTER_FRAMES, bad));
    assert_int_equal(memcmp_calls, 1);
    /* truncated, and upper case (Jupyter compares the lower-case hex exactly) */
    bad[0] = '\0';
    memcpy(bad, JUPYTER_SIG, sizeof bad);
    bad[63] = '\0';
    assert_false(verify(s, JUPYTER_FRAMES, bad));
    memcpy(bad, JUPYTER_SIG, sizeof bad);
    for (char *c = bad; *c; c++)
        if (*c >= 'a' && *c <= 'f') *c = (char)(*c - 'a' + 'A');
    assert_false(verify(s, JUPYTER_FRAMES, bad));
    /* content changed after signing */
    const char *tampered[4] = {JUPYTER_FRAMES[0], JUPYTER_FRAMES[1], JUPYTER_FRAMES[2],
                               "{\"code\": \"print(1)\"}"};
    assert_false(verify(s, tampered, JUPYTER_SIG));
    /* frames moved between parts: same bytes, different message */
    const char *swapped[4] = {JUPYTER_FRAMES[0], JUPYTER_FRAMES[3], JUPYTER_FRAMES[2],
                              JUPYTER_FRAMES[1]};
    assert_false(verify(s, swapped, JUPYTER_SIG));
    taas_signer_free(s);
    /* another key */
    s = taas_signer_new("other-key", 9, &err);
    assert_false(verify(s, JUPYTER_FRAMES, JUPYTER_SIG));
    taas_signer_free(s);
}

/* An empty key turns signing off, as jupyter_client does. */
static void test_disabled_signer(void **state) {
    (void)state;
    taas_error err;
    taas_signer *s = taas_signer_new("", 0, &err);
    assert_non_null(s);
    assert_false(taas_signer_enabled(s));
    assert_string_equal(sign_parts(s, JUPYTER_FRAMES, 4), "");
    assert_true(verify(s, JUPYTER_FRAMES, ""));
    assert_true(verify(s, JUPYTER_FRAMES, "anything"));
    taas_signer_free(s);
    taas_signer_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4231_case2),
        cmocka_unit_test(test_rfc4231_case1),
        cmocka_unit_test(test_rfc4231_case6_long_key),
        cmocka_unit_test(test_jupyter_signed_message),
        cmocka_unit_test(test_bad_signatures_rejected),
        cmocka_unit_test(test_disabled_signer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
