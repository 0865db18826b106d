/* Message signing: HMAC-SHA256 over the header, parent_header, metadata and content
 * frames, as a lower-case hex digest (the Jupyter wire protocol's "hmac-sha256"). */
#ifndef TAAS_HMAC_H
#define TAAS_HMAC_H

#include <stddef.h>

#include "error.h"

#define TAAS_HMAC_HEX_LEN 64

typedef struct taas_signer taas_signer;

/* A signer for key[0..key_len). An empty key gives a signer that is disabled: it signs
 * with an empty signature and accepts any, as jupyter_client does without a key.
 * NULL with a TaasCryptoError when libsodium cannot be set up. */
taas_signer *taas_signer_new(const void *key, size_t key_len, taas_error *err);
void taas_signer_free(taas_signer *s);
int taas_signer_enabled(const taas_signer *s);

/* Hex digest of the concatenation of parts[0..n) into out (TAAS_HMAC_HEX_LEN + 1 bytes,
 * NUL-terminated); "" when disabled. -1 on a libsodium failure. Not thread-safe: one
 * signer per thread. */
int taas_signer_sign(taas_signer *s, const void *const *parts, const size_t *lens, size_t n,
                     char *out);

/* 1 when sig[0..sig_len) is the digest of the parts (compared in constant time),
 * 0 otherwise; always 1 when disabled. */
int taas_signer_verify(taas_signer *s, const void *const *parts, const size_t *lens, size_t n,
                       const char *sig, size_t sig_len);

#endif
