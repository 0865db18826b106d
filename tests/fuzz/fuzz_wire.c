/* A Jupyter message as it comes off a socket (kernel/protocol/wire.h): the frames are split,
 * the HMAC-SHA256 signature checked, replays refused, and only then the JSON frames
 * sanitized and parsed.
 *
 * Input: a flags byte, then the frames separated by 0x1e. Flags: 1 = the harness writes the
 * right signature into the frame after "<IDS|MSG>" (else the frame is taken as it is, and
 * mostly refused), 2 = signing off (an empty key), 4 = parse the message twice with a digest
 * history, as a replay would arrive. */
#include <stdlib.h>
#include <string.h>

#include "digests.h"
#include "fuzz_util.h"
#include "hmac.h"
#include "utf8.h"
#include "wire.h"

#define MAX_FRAMES 64
static const char KEY[] = "0a9e3b6c-5c0d-4a4e-9d6f-fuzzkey";
static taas_signer *signer_on, *signer_off;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    taas_error err;
    taas_error_clear(&err);
    signer_on = taas_signer_new(KEY, sizeof KEY - 1, &err);
    signer_off = taas_signer_new("", 0, &err);
    if (!signer_on || !signer_off) abort();
    return 0;
}

/* wire.h's promise: every string of the decoded frames is valid UTF-8 without NULs. */
static void check_strings(const json_t *v) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (strlen(s) != n || !taas_utf8_valid(s, n)) abort();
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (!taas_utf8_valid(k, strlen(k))) abort();
            check_strings(x);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) check_strings(x);
    }
}

static int parse(const taas_frame *fr, size_t n, taas_signer *signer, taas_digests *seen) {
    taas_msg *m = NULL;
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_wire_parse(fr, n, signer, seen, &m, &err);
    fz_say("parse: %s", rc ? err.message : m->undecodable ? m->undecodable : m->msg_type);
    if (rc == 0) {
        if (!m || !m->msg_type || !json_is_object(m->header) || !json_is_object(m->parent_header) ||
            !json_is_object(m->metadata) || !json_is_object(m->content))
            abort();
        check_strings(m->header);
        check_strings(m->parent_header);
        check_strings(m->metadata);
        check_strings(m->content);
        for (size_t i = 0; i < m->n_buffers; i++)
            if (m->buffers[i].len && !m->buffers[i].data) abort();
        taas_msg_free(m);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t flags = data[0];
    const uint8_t *part[MAX_FRAMES];
    size_t len[MAX_FRAMES];
    size_t n = fz_split(data + 1, size - 1, 0x1e, part, len, MAX_FRAMES);
    taas_frame fr[MAX_FRAMES];
    for (size_t i = 0; i < n; i++) fr[i] = (taas_frame){part[i], len[i]};
    taas_signer *signer = flags & 2 ? signer_off : signer_on;

    char sig[TAAS_HMAC_HEX_LEN + 1];
    if (flags & 1) {
        size_t d = 0;
        while (d < n && !(fr[d].len == strlen(TAAS_WIRE_DELIM) && !memcmp(fr[d].data, TAAS_WIRE_DELIM, fr[d].len)))
            d++;
        if (d + 1 < n) {
            /* header, parent_header, metadata, content: what the signature covers (a
             * missing one signs as empty; the parser refuses the message anyway) */
            const void *parts[4];
            size_t lens[4];
            for (size_t i = 0; i < 4; i++) {
                parts[i] = d + 2 + i < n ? fr[d + 2 + i].data : "";
                lens[i] = d + 2 + i < n ? fr[d + 2 + i].len : 0;
            }
            if (taas_signer_sign(signer, parts, lens, 4, sig) == 0) fr[d + 1] = (taas_frame){sig, strlen(sig)};
        }
    }
    taas_digests *seen = flags & 4 ? taas_digests_new(16) : NULL;
    int first = parse(fr, n, signer, seen);
    if (seen) {
        int again = parse(fr, n, signer, seen);
        /* the same signed message again is a replay, and is dropped */
        if (first == 0 && taas_signer_enabled(signer) && again == 0) abort();
        taas_digests_free(seen);
    }
    return 0;
}
