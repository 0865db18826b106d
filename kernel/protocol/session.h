/* The kernel's side of a Jupyter session (jupyter_client's Session): its id, the user
 * name, the signer and the digest history, and the building and sending of signed
 * messages. */
#ifndef TAAS_SESSION_H
#define TAAS_SESSION_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"
#include "hmac.h"
#include "wire.h"

#define TAAS_PROTOCOL_VERSION "5.3"

typedef struct taas_session taas_session;

/* A session with a fresh uuid4 id, signing with key[0..key_len) ("" = unsigned).
 * NULL with an error when the signer cannot be set up. */
taas_session *taas_session_new(const void *key, size_t key_len, taas_error *err);
void taas_session_free(taas_session *s);
taas_signer *taas_session_signer(taas_session *s);
/* The signatures received so far (jupyter_client's digest_history), for taas_wire_recv. */
taas_digests *taas_session_digests(taas_session *s);
const char *taas_session_id(const taas_session *s);

/* Random (version 4) UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", into out[37]. */
void taas_uuid4(char *out);
/* The current UTC time as "2024-05-01T12:34:56.123456Z" into out[32]. */
void taas_iso8601_now(char *out);

typedef struct taas_frames {
    taas_blob *f;
    size_t n;
} taas_frames;

/* Frames of a new message: ids..., "<IDS|MSG>", signature, header, parent_header,
 * metadata, content. The header gets a fresh msg_id (copied to msg_id_out[37] when not
 * NULL), the session id, user name, date and version 5.3. parent_header and metadata may
 * be NULL for {}. Borrows everything. -1 with an error when content is NULL or
 * something cannot be encoded. */
int taas_session_serialize(taas_session *s, const taas_blob *ids, size_t n_ids,
                           const char *msg_type, const json_t *parent_header,
                           const json_t *metadata, const json_t *content, taas_frames *out,
                           char *msg_id_out, taas_error *err);
void taas_frames_free(taas_frames *f);

/* Serializes and sends on a ZeroMQ socket. Steals metadata and content (content NULL
 * means building it failed upstream: nothing is sent). Failures are logged; -1. */
int taas_session_send(taas_session *s, void *socket, const taas_blob *ids, size_t n_ids,
                      const char *msg_type, const json_t *parent_header, json_t *metadata,
                      json_t *content);

#endif
