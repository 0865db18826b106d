/* kernel/protocol/wire, digests and session: framing, signing, parsing, the checks that
 * drop a malformed or replayed message, and the signed ones that are answered instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "digests.h"
#include "session.h"
#include "wire.h"

static const char KEY[] = "c0ffee00-taas-test-key";

/* The message jupyter_client's Session signed with KEY, from a client "client-id-1". */
static const char *JUPYTER[7] = {
    "client-id-1",
    "<IDS|MSG>",
    "bdd66683ccce1c071cf78eda9fb43403a7253ad82ee72119ec1bc01bd3e8b8d8",
    ("{\"msg_id\": \"7b0d3a5e-1c1f-4d6b-9b55-2f6b0b9e3d21_13269_0\", \"msg_type\": "
     "\"execute_request\", \"username\": \"alice\", \"session\": "
     "\"7b0d3a5e-1c1f-4d6b-9b55-2f6b0b9e3d21\", \"date\": \"2026-11-22T03:09:17.522488Z\", "
     "\"version\": \"5.3\"}"),
    "{}",
    "{}",
    ("{\"code\": \"print(\\\"h\xc3\xa9llo\\\")\", \"silent\": false, \"store_history\": true, "
     "\"user_expressions\": {}, \"allow_stdin\": false, \"stop_on_error\": true}"),
};

static void frames_of(const char *const *s, size_t n, taas_frame *out) {
    for (size_t i = 0; i < n; i++) {
        out[i].data = s[i];
        out[i].len = strlen(s[i]);
    }
}

/* One frame: text without its NUL. */
static void set_frame(taas_frame *f, const char *text) {
    f->data = text;
    f->len = strlen(text);
}

static taas_signer *signer(void) {
    taas_error err;
    taas_signer *s = taas_signer_new(KEY, strlen(KEY), &err);
    assert_non_null(s);
    return s;
}

static void test_parse_jupyter_message(void **state) {
    (void)state;
    taas_frame f[7];
    frames_of(JUPYTER, 7, f);
    taas_signer *s = signer();
    taas_msg *m;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_wire_parse(f, 7, s, NULL, &m, &err), 0);
    assert_string_equal(m->msg_type, "execute_request");
    assert_int_equal(m->n_ids, 1);
    assert_int_equal(m->ids[0].len, 11);
    assert_memory_equal(m->ids[0].data, "client-id-1", 11);
    assert_int_equal(m->n_buffers, 0);
    assert_string_equal(taas_json_get_str(m->content, "code", NULL), "print(\"h\xc3\xa9llo\")");
    assert_false(taas_json_get_bool(m->content, "silent", 1));
    assert_int_equal(json_object_size(m->parent_header), 0);
    taas_msg_free(m);
    taas_signer_free(s);
}

/* Serialize with our session, parse back: every header field, parent, ids, content. */
static void test_round_trip(void **state) {
    (void)state;
    taas_error err;
    taas_session *ss = taas_session_new(KEY, strlen(KEY), &err);
    assert_non_null(ss);
    taas_blob ids[2] = {{"id-one", 6}, {"\x00\x01\xff", 3}};   /* identities are binary */
    json_t *parent = json_pack("{s:s, s:s}", "msg_id", "parent-1", "msg_type", "execute_request");
    json_t *content = json_pack("{s:s, s:s}", "name", "stdout", "text", "h\xc3\xa9llo\n");
    taas_frames fr;
    char msg_id[37];
    assert_int_equal(taas_session_serialize(ss, ids, 2, "stream", parent, NULL, content, &fr,
                                            msg_id, &err), 0);
    assert_int_equal(fr.n, 8);
    assert_memory_equal(fr.f[2].data, TAAS_WIRE_DELIM, fr.f[2].len);
    assert_int_equal(fr.f[3].len, TAAS_HMAC_HEX_LEN);

    taas_frame in[8];
    for (size_t i = 0; i < fr.n; i++) {
        in[i].data = fr.f[i].data;
        in[i].len = fr.f[i].len;
    }
    taas_msg *m;
    taas_signer *s = signer();
    assert_int_equal(taas_wire_parse(in, fr.n, s, NULL, &m, &err), 0);
    assert_int_equal(m->n_ids, 2);
    assert_memory_equal(m->ids[1].data, "\x00\x01\xff", 3);
    assert_string_equal(m->msg_type, "stream");
    const json_t *h = m->header;
    assert_string_equal(taas_json_get_str(h, "msg_id", ""), msg_id);
    assert_int_equal(strlen(msg_id), 36);
    assert_int_equal(msg_id[14], '4');   /* uuid version 4 */
    assert_string_equal(taas_json_get_str(h, "session", ""), taas_session_id(ss));
    assert_string_equal(taas_json_get_str(h, "version", ""), "5.3");
    assert_non_null(taas_json_get_str(h, "username", NULL));
    const char *date = taas_json_get_str(h, "date", "");
    assert_int_equal(strlen(date), 27);   /* 2024-05-01T12:34:56.123456Z */
    assert_int_equal(date[10], 'T');
    assert_int_equal(date[19], '.');
    assert_int_equal(date[26], 'Z');
    assert_true(json_equal(m->parent_header, parent));
    assert_true(json_equal(m->content, content));
    assert_int_equal(json_object_size(m->metadata), 0);
    taas_msg_free(m);

    /* a second message gets another msg_id */
    taas_frames fr2;
    char id2[37];
    assert_int_equal(taas_session_serialize(ss, NULL, 0, "stream", NULL, NULL, content, &fr2, id2,
                                            &err), 0);
    assert_string_not_equal(id2, msg_id);
    assert_int_equal(fr2.n, 6);
    taas_frames_free(&fr2);

    /* no content: refused, nothing built */
    assert_int_equal(taas_session_serialize(ss, NULL, 0, "stream", NULL, NULL, NULL, &fr2, NULL,
                                            &err), -1);
    assert_non_null(strstr(err.message, "no content for a stream message"));

    taas_frames_free(&fr);
    json_decref(parent);
    json_decref(content);
    taas_signer_free(s);
    taas_session_free(ss);
}

static void expect_drop(const taas_frame *f, size_t n, taas_signer *s, const char *why) {
    taas_msg *m = (taas_msg *)1;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_wire_parse(f, n, s, NULL, &m, &err), -1);
    assert_null(m);
    assert_string_equal(err.ename, "TaasProtocolError");
    if (!strstr(err.message, why)) fail_msg("'%s' does not say '%s'", err.message, why);
    assert_true(err.hint[0] != '\0');
}

/* f with a signature of zeros in place of its own (frame 2): dropped, not answered. */
static void expect_bad_signature_dropped(taas_frame *f, size_t n, taas_signer *s) {
    set_frame(&f[2], "0000000000000000000000000000000000000000000000000000000000000000");
    expect_drop(f, n, s, "signature does not match");
}

/* A signed message that is kept, to be answered with an error saying why. */
static taas_msg *expect_undecodable(const taas_frame *f, size_t n, taas_signer *s,
                                    const char *why) {
    taas_msg *m = NULL;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_wire_parse(f, n, s, NULL, &m, &err), 0);
    assert_non_null(m);
    assert_non_null(m->undecodable);
    if (!strstr(m->undecodable, why)) fail_msg("'%s' does not say '%s'", m->undecodable, why);
    /* whom to answer, and frames that are objects whatever was sent */
    assert_string_equal(m->msg_type, "execute_request");
    assert_true(json_is_object(m->parent_header) && json_is_object(m->metadata) &&
                json_is_object(m->content));
    assert_int_equal(m->n_buffers, 0);
    return m;
}

/* frames[3..6] signed with KEY into frames[2] (sig[TAAS_HMAC_HEX_LEN + 1]). */
static void sign_frames(taas_signer *s, const char **frames, char *sig) {
    const void *p[4];
    size_t l[4];
    for (int i = 0; i < 4; i++) {
        p[i] = frames[3 + i];
        l[i] = strlen(frames[3 + i]);
    }
    assert_int_equal(taas_signer_sign(s, p, l, 4, sig), 0);
    frames[2] = sig;
}

static void test_identities_and_buffers(void **state) {
    (void)state;
    taas_signer *s = signer();
    taas_frame f[10];
    /* no identities (delimiter first), two extra buffers after content */
    frames_of(JUPYTER + 1, 6, f);
    set_frame(&f[6], "\x01\x02");
    set_frame(&f[7], "");
    taas_msg *m;
    taas_error err;
    assert_int_equal(taas_wire_parse(f, 8, s, NULL, &m, &err), 0);
    assert_int_equal(m->n_ids, 0);
    assert_int_equal(m->n_buffers, 2);
    assert_int_equal(m->buffers[0].len, 2);
    assert_memory_equal(m->buffers[0].data, "\x01\x02", 2);
    assert_int_equal(m->buffers[1].len, 0);
    taas_msg_free(m);
    /* three identities */
    set_frame(&f[0], "a");
    set_frame(&f[1], "b");
    frames_of(JUPYTER, 7, f + 2);
    assert_int_equal(taas_wire_parse(f, 9, s, NULL, &m, &err), 0);
    assert_int_equal(m->n_ids, 3);
    assert_memory_equal(m->ids[2].data, "client-id-1", 11);
    taas_msg_free(m);
    taas_signer_free(s);
}

static void test_malformed_dropped(void **state) {
    (void)state;
    taas_signer *s = signer();
    taas_frame f[7];

    frames_of(JUPYTER, 7, f);
    set_frame(&f[1], "<IDS|MSG");   /* no delimiter */
    expect_drop(f, 7, s, "has no \"<IDS|MSG>\" delimiter");

    frames_of(JUPYTER, 7, f);
    expect_drop(f, 6, s, "4 frames after the \"<IDS|MSG>\" delimiter; 5 are required");
    expect_drop(f, 2, s, "0 frames after");
    expect_drop(f, 0, s, "has no");

    frames_of(JUPYTER, 7, f);
    set_frame(&f[2], "");
    expect_drop(f, 7, s, "unsigned message");

    frames_of(JUPYTER, 7, f);
    expect_bad_signature_dropped(f, 7, s);

    frames_of(JUPYTER, 7, f);
    set_frame(&f[6], "{\"code\": \"print(1)\"}");   /* content changed after signing */
    expect_drop(f, 7, s, "signature does not match");
    taas_signer_free(s);

    /* the JSON checks come after the signature; with signing off they are reached. A
     * header that is not an object with a msg_type leaves no one to answer: dropped */
    taas_error err;
    taas_signer *off = taas_signer_new("", 0, &err);
    frames_of(JUPYTER, 7, f);
    set_frame(&f[3], "{\"msg_type\": ");
    expect_drop(f, 7, off, "the header frame is not valid JSON");
    set_frame(&f[3], "[1, 2]");
    expect_drop(f, 7, off, "the header frame is JSON but not an object");
    set_frame(&f[3], "{\"msg_id\": \"x\", \"session\": \"y\"}");
    expect_drop(f, 7, off, "header has no msg_type");
    set_frame(&f[3], "{\"msg_type\": 42}");
    expect_drop(f, 7, off, "header has no msg_type");
    taas_signer_free(off);
}

/* Signed, with a header to answer, but a frame that cannot be used: kept and marked. */
static void test_undecodable_answered(void **state) {
    (void)state;
    taas_signer *s = signer();
    const char *frames[7];
    char sig[TAAS_HMAC_HEX_LEN + 1];
    taas_frame f[7];
    static const struct {
        int frame;
        const char *text, *why;
    } cases[] = {
        {6, "{\"code\": ", "the content frame is not valid JSON"},
        {6, "not json at all", "the content frame is not valid JSON"},
        {6, "", "the content frame is not valid JSON"},
        {6, "\"print(1)\"", "the content frame is JSON but not an object"},
        {4, "[1, 2]", "the parent_header frame is JSON but not an object"},
        {5, "{\"a\": [}", "the metadata frame is not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(frames, JUPYTER, sizeof frames);
        frames[cases[i].frame] = cases[i].text;
        sign_frames(s, frames, sig);
        frames_of(frames, 7, f);
        taas_msg *m = expect_undecodable(f, 7, s, cases[i].why);
        assert_string_equal(taas_json_get_str(m->header, "msg_id", ""),
                            "7b0d3a5e-1c1f-4d6b-9b55-2f6b0b9e3d21_13269_0");
        assert_int_equal(m->n_ids, 1);
        taas_msg_free(m);
        /* the same bytes badly signed: dropped, not answered */
        frames_of(frames, 7, f);
        expect_bad_signature_dropped(f, 7, s);
    }
    taas_signer_free(s);
}

/* Valid JSON that jansson refuses as it stands: numbers beyond 64 bits or a double, a NUL
 * in a key, lone surrogates. Parsed, with what jansson cannot hold made representable. */
static void test_relaxed_json(void **state) {
    (void)state;
    taas_signer *s = signer();
    const char *frames[7];
    memcpy(frames, JUPYTER, sizeof frames);
    frames[5] = "{\"deep\": [1e999, -1E+400, 1e-999]}";
    frames[6] = "{\"code\": \"x\\u0000y \\ud83d\\ude00 \\ud800 \\udcff\", "
                "\"big\": 1000000000000000000000000000000, \"neg\": -99999999999999999999, "
                "\"max\": 9223372036854775807, \"k\\u0000ey\": 1, \"s\": \"1e999\", "
                "\"esc\": \"a\\\\u0000\"}";
    char sig[TAAS_HMAC_HEX_LEN + 1];
    sign_frames(s, frames, sig);
    taas_frame f[7];
    frames_of(frames, 7, f);
    taas_msg *m;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_wire_parse(f, 7, s, NULL, &m, &err), 0);
    assert_null(m->undecodable);
    const json_t *deep = json_object_get(m->metadata, "deep");
    assert_true(json_real_value(json_array_get(deep, 0)) == DBL_MAX);
    assert_true(json_real_value(json_array_get(deep, 1)) == -DBL_MAX);
    assert_true(json_real_value(json_array_get(deep, 2)) == 0.0);
    const json_t *c = m->content;
    assert_true(json_is_real(json_object_get(c, "big")));
    assert_true(json_real_value(json_object_get(c, "big")) == 1e30);
    assert_true(json_real_value(json_object_get(c, "neg")) == -1e20);
    /* what jansson holds stays as it was */
    assert_true(json_is_integer(json_object_get(c, "max")));
    assert_true(json_integer_value(json_object_get(c, "max")) == 9223372036854775807LL);
    assert_string_equal(taas_json_get_str(c, "s", ""), "1e999");
    assert_string_equal(taas_json_get_str(c, "esc", ""), "a\\u0000");
    assert_string_equal(taas_json_get_str(c, "code", ""),
                        "x\xef\xbf\xbdy \xf0\x9f\x98\x80 \xef\xbf\xbd \xef\xbf\xbd");
    assert_int_equal(json_integer_value(json_object_get(c, "k\xef\xbf\xbd" "ey")), 1);
    taas_msg_free(m);
    taas_signer_free(s);
}

/* jupyter_client's digest_history: a signature is accepted once. */
static void test_replay_dropped(void **state) {
    (void)state;
    taas_signer *s = signer();
    taas_digests *seen = taas_digests_new(0);
    taas_frame f[7];
    frames_of(JUPYTER, 7, f);
    taas_msg *m;
    taas_error err;
    assert_int_equal(taas_wire_parse(f, 7, s, seen, &m, &err), 0);
    taas_msg_free(m);
    for (int i = 0; i < 2; i++) {
        taas_error_clear(&err);
        assert_int_equal(taas_wire_parse(f, 7, s, seen, &m, &err), -1);
        assert_null(m);
        assert_non_null(strstr(err.message, "replayed message: its signature was seen before"));
        assert_true(err.hint[0] != '\0');
    }
    /* a bad signature never enters the history, so it cannot shut a good one out */
    const char *frames[7];
    memcpy(frames, JUPYTER, sizeof frames);
    frames[6] = "{\"code\": \"1\"}";
    char sig[TAAS_HMAC_HEX_LEN + 1];
    sign_frames(s, frames, sig);
    frames_of(frames, 7, f);
    taas_frame bad[7];
    memcpy(bad, f, sizeof bad);
    bad[6].data = "{\"code\": \"2\"}";
    expect_drop(bad, 7, s, "signature does not match");
    assert_int_equal(taas_digests_count(seen), 1);
    assert_int_equal(taas_wire_parse(f, 7, s, seen, &m, &err), 0);
    taas_msg_free(m);
    /* an undecodable message is answered once too */
    frames[6] = "{not json";
    sign_frames(s, frames, sig);
    frames_of(frames, 7, f);
    assert_int_equal(taas_wire_parse(f, 7, s, seen, &m, &err), 0);
    assert_non_null(m->undecodable);
    taas_msg_free(m);
    taas_error_clear(&err);
    assert_int_equal(taas_wire_parse(f, 7, s, seen, &m, &err), -1);
    assert_non_null(strstr(err.message, "replayed message"));
    assert_int_equal(taas_digests_count(seen), 3);
    taas_signer_free(s);
    taas_digests_free(seen);
}

static void test_digests_bounded(void **state) {
    (void)state;
    char sig[72];
    taas_digests *d = taas_digests_new(100);
    assert_non_null(d);
    for (int i = 0; i < 100; i++) {
        snprintf(sig, sizeof sig, "sig-%d", i);
        assert_int_equal(taas_digests_add(d, sig, strlen(sig)), 1);
    }
    for (int i = 0; i < 100; i++) {
        snprintf(sig, sizeof sig, "sig-%d", i);
        assert_int_equal(taas_digests_add(d, sig, strlen(sig)), 0);
    }
    assert_int_equal(taas_digests_count(d), 100);
    /* full: the oldest tenth goes, the rest is still remembered */
    assert_int_equal(taas_digests_add(d, "sig-100", 7), 1);
    assert_int_equal(taas_digests_count(d), 91);
    assert_int_equal(taas_digests_add(d, "sig-10", 6), 0);
    assert_int_equal(taas_digests_add(d, "sig-99", 6), 0);
    assert_int_equal(taas_digests_add(d, "sig-9", 5), 1);   /* forgotten, so new again */
    assert_int_equal(taas_digests_add(d, "sig-0", 5), 1);
    assert_int_equal(taas_digests_count(d), 93);
    taas_digests_free(d);

    /* the kernel's: jupyter_client's 2**16, culled by a tenth, over several rounds */
    d = taas_digests_new(0);
    int n = 3 * TAAS_DIGESTS_MAX;
    for (int i = 0; i < n; i++) {
        snprintf(sig, sizeof sig, "%064d", i);
        assert_int_equal(taas_digests_add(d, sig, 64), 1);
        assert_true(taas_digests_count(d) <= TAAS_DIGESTS_MAX);
    }
    assert_true(taas_digests_count(d) >= TAAS_DIGESTS_MAX - TAAS_DIGESTS_MAX / 10);
    for (int i = n - 1000; i < n; i++) {
        snprintf(sig, sizeof sig, "%064d", i);
        assert_int_equal(taas_digests_add(d, sig, 64), 0);
    }
    snprintf(sig, sizeof sig, "%064d", 0);
    assert_int_equal(taas_digests_add(d, sig, 64), 1);
    taas_digests_free(d);
}

/* Over the limits, a signed message is kept (unparsed) to be answered; the unsigned
 * one is dropped. */
static void test_oversized_answered(void **state) {
    (void)state;
    taas_signer *s = signer();
    taas_frame f[8];
    frames_of(JUPYTER, 7, f);
    char *big = calloc(1, TAAS_WIRE_MAX_BYTES);
    assert_non_null(big);
    f[7].data = big;   /* a buffer frame that pushes the whole past the limit */
    f[7].len = TAAS_WIRE_MAX_BYTES;
    size_t rest = 0;   /* from the delimiter on: the identity is ROUTER's, not the client's */
    for (int i = 1; i < 7; i++) rest += f[i].len;
    char why[128];
    snprintf(why, sizeof why, "the request is %zu bytes; the kernel takes at most 64 MiB "
             "(67108864 bytes)", rest + TAAS_WIRE_MAX_BYTES);
    taas_msg_free(expect_undecodable(f, 8, s, why));
    expect_bad_signature_dropped(f, 8, s);
    /* just under the limit is served */
    frames_of(JUPYTER, 7, f);
    f[7].len = TAAS_WIRE_MAX_BYTES - rest;
    taas_msg *m;
    taas_error err;
    assert_int_equal(taas_wire_parse(f, 8, s, NULL, &m, &err), 0);
    assert_null(m->undecodable);
    assert_int_equal(m->n_buffers, 1);
    taas_msg_free(m);
    free(big);

    /* too many frames */
    size_t n = TAAS_WIRE_MAX_FRAMES + 10;
    taas_frame *many = calloc(n, sizeof *many);
    frames_of(JUPYTER, 7, many);
    for (size_t i = 7; i < n; i++) many[i].data = "b", many[i].len = 1;
    snprintf(why, sizeof why, "the request has %zu frames; the kernel takes at most 1024", n - 1);
    taas_msg_free(expect_undecodable(many, n, s, why));
    free(many);
    taas_signer_free(s);
}

/* Invalid UTF-8 and NULs in a correctly signed message: sanitized, never a crash. */
static void test_bad_utf8_sanitized(void **state) {
    (void)state;
    taas_error err;
    taas_session *ss = taas_session_new(KEY, strlen(KEY), &err);
    const char *frames[7];
    memcpy(frames, JUPYTER, sizeof frames);
    frames[6] = "{\"code\": \"print('a\xff\xfe b')\", \"x\": \"nul\\u0000here\"}";
    /* sign the bad bytes as a client would */
    const void *p[4];
    size_t l[4];
    for (int i = 0; i < 4; i++) {
        p[i] = frames[3 + i];
        l[i] = strlen(frames[3 + i]);
    }
    char sig[TAAS_HMAC_HEX_LEN + 1];
    assert_int_equal(taas_signer_sign(taas_session_signer(ss), p, l, 4, sig), 0);
    frames[2] = sig;
    taas_frame f[7];
    frames_of(frames, 7, f);
    taas_msg *m;
    assert_int_equal(taas_wire_parse(f, 7, taas_session_signer(ss), NULL, &m, &err), 0);
    assert_string_equal(taas_json_get_str(m->content, "code", ""),
                        "print('a\xef\xbf\xbd\xef\xbf\xbd b')");
    const json_t *x = json_object_get(m->content, "x");
    assert_int_equal(json_string_length(x), strlen(json_string_value(x)));
    assert_string_equal(json_string_value(x), "nul\xef\xbf\xbdhere");
    taas_msg_free(m);
    taas_session_free(ss);
}

static void test_json_string_never_null(void **state) {
    (void)state;
    json_t *j = taas_json_string("ok \xc3\xa9");
    assert_string_equal(json_string_value(j), "ok \xc3\xa9");
    json_decref(j);
    j = taas_json_string("bad \xc3");
    assert_non_null(j);
    assert_string_equal(json_string_value(j), "bad \xef\xbf\xbd");
    json_decref(j);
    j = taas_json_stringn("a\0b", 3);
    assert_string_equal(json_string_value(j), "a\xef\xbf\xbd" "b");
    json_decref(j);
    j = taas_json_string(NULL);
    assert_string_equal(json_string_value(j), "");
    json_decref(j);
}

/* Over real ZeroMQ sockets: a DEALER client, the kernel's ROUTER. */
static void test_zmq_send_recv(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_ROUTING_ID, "cli", 3);
    assert_int_equal(zmq_bind(router, "inproc://test-wire"), 0);
    assert_int_equal(zmq_connect(dealer, "inproc://test-wire"), 0);
    taas_error err;
    taas_session *client = taas_session_new(KEY, strlen(KEY), &err);
    taas_session *kernel = taas_session_new(KEY, strlen(KEY), &err);
    taas_msg *m;

    /* nothing waiting */
    assert_int_equal(taas_wire_recv(router, taas_session_signer(kernel), NULL, &m, &err), 1);

    assert_int_equal(taas_session_send(client, dealer, NULL, 0, "kernel_info_request", NULL,
                                       NULL, json_object()), 0);
    zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, 2000), 1);
    assert_int_equal(taas_wire_recv(router, taas_session_signer(kernel), NULL, &m, &err), 0);
    assert_string_equal(m->msg_type, "kernel_info_request");
    assert_int_equal(m->n_ids, 1);
    assert_memory_equal(m->ids[0].data, "cli", 3);

    /* the reply goes back to the identity, with the request as parent */
    assert_int_equal(taas_session_send(kernel, router, m->ids, m->n_ids, "kernel_info_reply",
                                       m->header, NULL, json_pack("{s:s}", "status", "ok")), 0);
    it.socket = dealer;
    assert_int_equal(zmq_poll(&it, 1, 2000), 1);
    taas_msg *r;
    assert_int_equal(taas_wire_recv(dealer, taas_session_signer(client), NULL, &r, &err), 0);
    assert_string_equal(r->msg_type, "kernel_info_reply");
    assert_string_equal(taas_json_get_str(r->parent_header, "msg_id", "?"),
                        taas_json_get_str(m->header, "msg_id", "!"));
    taas_msg_free(r);
    taas_msg_free(m);

    /* an oversized message is read whole and kept to be answered; a replay of it and a
     * bad one are dropped; the next one still arrives */
    taas_digests *seen = taas_digests_new(0);
    taas_frames fr;
    json_t *code = json_pack("{s:s}", "code", "1");
    assert_int_equal(taas_session_serialize(client, NULL, 0, "execute_request", NULL, NULL, code,
                                            &fr, NULL, &err), 0);
    json_decref(code);
    char *big = calloc(1, TAAS_WIRE_MAX_BYTES + 1);
    for (int copy = 0; copy < 2; copy++) {
        for (size_t i = 0; i < fr.n; i++) zmq_send(dealer, fr.f[i].data, fr.f[i].len, ZMQ_SNDMORE);
        zmq_send(dealer, big, TAAS_WIRE_MAX_BYTES + 1, 0);
    }
    zmq_send(dealer, TAAS_WIRE_DELIM, strlen(TAAS_WIRE_DELIM), ZMQ_SNDMORE);
    zmq_send(dealer, "sig", 3, ZMQ_SNDMORE);
    zmq_send(dealer, big, TAAS_WIRE_MAX_BYTES + 1, 0);
    free(big);
    taas_frames_free(&fr);
    assert_int_equal(taas_session_send(client, dealer, NULL, 0, "comm_info_request", NULL, NULL,
                                       json_object()), 0);
    it.socket = router;
    assert_int_equal(zmq_poll(&it, 1, 2000), 1);
    assert_int_equal(taas_wire_recv(router, taas_session_signer(kernel), seen, &m, &err), 0);
    assert_non_null(m->undecodable);
    assert_non_null(strstr(m->undecodable, "; the kernel takes at most 64 MiB"));
    assert_string_equal(m->msg_type, "execute_request");
    assert_memory_equal(m->ids[0].data, "cli", 3);
    taas_msg_free(m);
    taas_error_clear(&err);
    assert_int_equal(taas_wire_recv(router, taas_session_signer(kernel), seen, &m, &err), -1);
    assert_non_null(strstr(err.message, "replayed message"));
    taas_error_clear(&err);
    assert_int_equal(taas_wire_recv(router, taas_session_signer(kernel), seen, &m, &err), -1);
    assert_non_null(strstr(err.message, "5 are required"));
    assert_int_equal(zmq_poll(&it, 1, 2000), 1);
    assert_int_equal(taas_wire_recv(router, taas_session_signer(kernel), seen, &m, &err), 0);
    assert_string_equal(m->msg_type, "comm_info_request");
    assert_null(m->undecodable);
    taas_msg_free(m);
    taas_digests_free(seen);

    /* content NULL (a failed json_pack upstream): nothing is sent */
    assert_int_equal(taas_session_send(client, dealer, NULL, 0, "x", NULL, NULL, NULL), -1);
    assert_int_equal(zmq_poll(&it, 1, 50), 0);

    taas_session_free(client);
    taas_session_free(kernel);
    zmq_close(router);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_jupyter_message),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_identities_and_buffers),
        cmocka_unit_test(test_malformed_dropped),
        cmocka_unit_test(test_undecodable_answered),
        cmocka_unit_test(test_relaxed_json),
        cmocka_unit_test(test_replay_dropped),
        cmocka_unit_test(test_digests_bounded),
        cmocka_unit_test(test_oversized_answered),
        cmocka_unit_test(test_bad_utf8_sanitized),
        cmocka_unit_test(test_json_string_never_null),
        cmocka_unit_test(test_zmq_send_recv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
