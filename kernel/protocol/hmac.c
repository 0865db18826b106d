/* HMAC-SHA256 with libsodium (crypto_auth_hmacsha256), compared in constant time with
 * sodium_memcmp.
 *
 * Why libsodium and not OpenSSL: libsodium is already in the process (libzmq links it for
 * CURVE), while loading libcrypto and activating its providers made up 1.6 to 3.4 MiB of the
 * kernel's resident memory, more than the whole budget the kernel has (bench/RESULTS.md). */
#include "hmac.h"
#include "errnames.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct taas_signer {
    int enabled;
    crypto_auth_hmacsha256_state keyed;   /* the state after the key: copied per message */
};

taas_signer *taas_signer_new(const void *key, size_t key_len, taas_error *err) {
    taas_signer *s = calloc(1, sizeof *s);
    if (!s || sodium_init() < 0) {
        free(s);
        taas_error_set(err, TAAS_ERR_SECURITY, (taas_srcpos){0, 0},
                       "cannot set up HMAC-SHA256 for message signing (libsodium)");
        taas_error_hint(err, "check the libsodium installation (libsodium23)");
        return NULL;
    }
    if (key_len == 0) return s;
    s->enabled = 1;
    crypto_auth_hmacsha256_init(&s->keyed, key, key_len);
    return s;
}

void taas_signer_free(taas_signer *s) {
    if (!s) return;
    sodium_memzero(s, sizeof *s);
    free(s);
}

int taas_signer_enabled(const taas_signer *s) {
    return s->enabled;
}

int taas_signer_sign(taas_signer *s, const void *const *parts, const size_t *lens, size_t n,
                     char *out) {
    out[0] = '\0';
    if (!s->enabled) return 0;
    unsigned char md[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state st = s->keyed;
    for (size_t i = 0; i < n; i++)
        if (lens[i] && crypto_auth_hmacsha256_update(&st, parts[i], lens[i]) != 0) return -1;
    if (crypto_auth_hmacsha256_final(&st, md) != 0) return -1;
    sodium_memzero(&st, sizeof st);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof md; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * sizeof md] = '\0';
    return 0;
}

int taas_signer_verify(taas_signer *s, const void *const *parts, const size_t *lens, size_t n,
                       const char *sig, size_t sig_len) {
    if (!s->enabled) return 1;
    char want[TAAS_HMAC_HEX_LEN + 1];
    if (sig_len != TAAS_HMAC_HEX_LEN) return 0;   /* the length is public, the digest is not */
    if (taas_signer_sign(s, parts, lens, n, want)) return 0;
    return sodium_memcmp(want, sig, TAAS_HMAC_HEX_LEN) == 0;
}
