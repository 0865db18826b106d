/* The Jupyter wire format (messaging protocol 5.3): a multipart ZeroMQ message
 *
 *   [routing identities...] "<IDS|MSG>" signature header parent_header metadata content
 *   [extra binary buffers...]
 *
 * Receiving splits the frames, checks the signature over the four JSON frames and that it
 * was not seen before (a replay), and only then sanitizes them for UTF-8 and parses them.
 * What cannot be trusted (no delimiter, a bad or replayed signature, a header without
 * msg_type) is dropped: the caller logs it and never acts on it. A signed message with a
 * header that cannot otherwise be used (too large, a frame that is not JSON) comes back
 * marked undecodable, so that the kernel answers it with an error instead of leaving the
 * client waiting. */
#ifndef TAAS_WIRE_H
#define TAAS_WIRE_H

#include <jansson.h>
#include <stddef.h>

#include "digests.h"
#include "error.h"
#include "hmac.h"

#define TAAS_WIRE_DELIM "<IDS|MSG>"
/* Largest message served, all frames together. Jupyter messages are code and small
 * JSON; a bigger one is answered with an error without its frames being parsed. */
#define TAAS_WIRE_MAX_BYTES ((size_t)64 << 20)
/* Most frames in one message (identities + 6 + buffers); the rest are read and let go. */
#define TAAS_WIRE_MAX_FRAMES 1024
/* Largest frame ZeroMQ takes at all (ZMQ_MAXMSGSIZE): a peer that sends more is dropped
 * without a word, before its signature is known. It guards the kernel's memory against any
 * process that can connect; frames between TAAS_WIRE_MAX_BYTES and it get an error reply. */
#define TAAS_WIRE_ZMQ_MAXMSGSIZE ((int64_t)1 << 30)

/* A frame as received (borrowed). */
typedef struct taas_frame {
    const void *data;
    size_t len;
} taas_frame;

/* Owned bytes: identities, buffers, serialized frames. */
typedef struct taas_blob {
    void *data;
    size_t len;
} taas_blob;

typedef struct taas_msg {
    taas_blob *ids;          /* routing identities, to address the reply */
    size_t n_ids;
    json_t *header;          /* each an object; every string is valid UTF-8 without NULs */
    json_t *parent_header;
    json_t *metadata;
    json_t *content;
    taas_blob *buffers;
    size_t n_buffers;
    const char *msg_type;    /* header's msg_type, borrowed from header */
    /* Why a signed message cannot be served (NULL when it can): it is to be answered with
     * an error reply. Frames that could not be decoded are {} then, and there are no
     * buffers. */
    char *undecodable;
} taas_msg;

void taas_msg_free(taas_msg *m);

/* Splits and checks frames[0..n). 0 and a new message in *out (check its undecodable);
 * -1 with a TaasProtocolError saying why the message is dropped (no delimiter, too few
 * frames, missing, bad or replayed signature, a header that is not a JSON object with a
 * msg_type). seen, when not NULL and signing is on, records every good signature and
 * refuses one seen before. */
int taas_wire_parse(const taas_frame *frames, size_t n, taas_signer *signer,
                    taas_digests *seen, taas_msg **out, taas_error *err);

/* Receives one message from a ZeroMQ socket without waiting. 0: *out holds it;
 * 1: nothing was waiting; -1: a message arrived and was dropped (err says why). */
int taas_wire_recv(void *socket, taas_signer *signer, taas_digests *seen, taas_msg **out,
                   taas_error *err);

/* JSON strings that are always valid: invalid UTF-8 and NULs become U+FFFD, and NULL
 * gives "". jansson's json_string returns NULL on invalid UTF-8; these never do (short
 * of running out of memory). */
json_t *taas_json_string(const char *s);
json_t *taas_json_stringn(const char *s, size_t n);

/* String member of a JSON object, or dflt when it is missing or not a string. */
const char *taas_json_get_str(const json_t *obj, const char *key, const char *dflt);
/* Boolean member, or dflt when missing or not a boolean. */
int taas_json_get_bool(const json_t *obj, const char *key, int dflt);

#endif
