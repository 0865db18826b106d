/* The digest history: signatures of messages already received, so that a replayed message
 * (the same signed frames sent again) is refused, as jupyter_client's Session does with its
 * digest_history. Bounded: when full, the oldest tenth is forgotten. */
#ifndef TAAS_DIGESTS_H
#define TAAS_DIGESTS_H

#include <stddef.h>

/* jupyter_client's digest_history_size */
#define TAAS_DIGESTS_MAX 65536

typedef struct taas_digests taas_digests;

/* A history of at most capacity signatures (0: TAAS_DIGESTS_MAX). NULL when out of
 * memory. It grows as signatures come, so an idle kernel holds almost nothing. */
taas_digests *taas_digests_new(size_t capacity);
void taas_digests_free(taas_digests *d);

/* Records sig[0..len): 1 when it is new, 0 when it was seen before (a replay), -1 when
 * it cannot be recorded (out of memory). */
int taas_digests_add(taas_digests *d, const char *sig, size_t len);
size_t taas_digests_count(const taas_digests *d);

#endif
