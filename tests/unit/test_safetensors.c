/* workers/train/safetensors.c: round trips, the fixtures written by hand in Python
 * (tests/gen_safetensors_ref.py), byte equality with them, and every refusal with its
 * message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "buf.h"
#include "safetensors.h"

/* The fixture's tensors, in gen_safetensors_ref.py's TENSORS order (k = index). */
#define NT 8
static const struct {
    const char *key;
    taas_st_dtype dtype;
    int ndim;
    int64_t shape[4];
} SPEC[NT] = {
    {"0.weight", TAAS_ST_F32, 2, {3, 4}},     {"0.bias", TAAS_ST_F32, 1, {3}},
    {"1.weight", TAAS_ST_F32, 1, {3}},        {"1.bias", TAAS_ST_F32, 1, {3}},
    {"1.running_mean", TAAS_ST_F32, 1, {3}},  {"1.running_var", TAAS_ST_F32, 1, {3}},
    {"1.num_batches_tracked", TAAS_ST_I64, 0, {0}}, {"10.weight", TAAS_ST_F32, 4, {2, 3, 1, 1}},
};

typedef struct model {
    taas_st_tensor t[NT + 2];
    unsigned char buf[NT + 2][256];
} model;

static size_t numel(const taas_st_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

/* fill: 1 = the fixture's formula, 0 = a sentinel byte pattern. */
static void model_init(model *m, int fill) {
    memset(m->buf, 0xAB, sizeof m->buf);
    for (int k = 0; k < NT; k++) {
        taas_st_tensor *t = &m->t[k];
        memset(t, 0, sizeof *t);
        t->key = SPEC[k].key;
        t->dtype = SPEC[k].dtype;
        t->ndim = SPEC[k].ndim;
        memcpy(t->shape, SPEC[k].shape, sizeof SPEC[k].shape);
        t->data = m->buf[k];
        for (size_t i = 0; fill && i < numel(t); i++) {
            if (t->dtype == TAAS_ST_F32)
                ((float *)t->data)[i] = (float)((int)(i % 7) - 3) * 0.25f + (float)k;
            else
                ((int64_t *)t->data)[i] = 1000 * k + (int64_t)i;
        }
    }
}

static void assert_model_values(const model *m) {
    for (int k = 0; k < NT; k++) {
        const taas_st_tensor *t = &m->t[k];
        for (size_t i = 0; i < numel(t); i++) {
            if (t->dtype == TAAS_ST_F32)
                assert_true(((const float *)t->data)[i] ==
                            (float)((int)(i % 7) - 3) * 0.25f + (float)k);
            else
                assert_int_equal(((const int64_t *)t->data)[i], 1000 * k + (int64_t)i);
        }
    }
}

static void fixture(char *out, size_t n, const char *name) {
    const char *src = getenv("TAAS_SOURCE_DIR");
    snprintf(out, n, "%s/tests/data/safetensors/%s", src && *src ? src : ".", name);
}

static char TMPDIR_[64];

static int setup(void **state) {
    (void)state;
    strcpy(TMPDIR_, "/tmp/taas-st-XXXXXX");
    return mkdtemp(TMPDIR_) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    DIR *d = opendir(TMPDIR_);
    struct dirent *de;
    char p[512];
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", TMPDIR_, de->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(TMPDIR_);
    return 0;
}

static void tmp_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", TMPDIR_, name);
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *len = (size_t)sz;
    return b;
}

static void spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* A file with the given header text (padded to 8 with spaces) and nzero data bytes. */
static void write_raw(const char *path, const char *header, size_t nzero) {
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    size_t total = 8 + padded + nzero;
    unsigned char *b = calloc(1, total);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(b + 8, header, hl);
    memset(b + 8 + hl, ' ', padded - hl);
    spit(path, b, total);
    free(b);
}

/* Reads path into a one-tensor F32 model of shape [n] and expects failure with msg. */
static void expect_read_error(const char *path, const taas_st_tensor *t, size_t n,
                              const char *msg, const char *hint) {
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_safetensors_read(path, t, n, &err), -1);
    if (!strstr(err.message, msg)) fail_msg("message '%s' lacks '%s'", err.message, msg);
    if (!strstr(err.message, path)) fail_msg("message '%s' does not name the file", err.message);
    if (hint && !strstr(err.hint, hint)) fail_msg("hint '%s' lacks '%s'", err.hint, hint);
}

static void test_round_trip(void **state) {
    (void)state;
    model a, b;
    model_init(&a, 1);
    model_init(&b, 0);
    char p[256];
    tmp_path(p, sizeof p, "rt.safetensors");
    taas_error err;
    taas_error_clear(&err);
    taas_st_meta meta[] = {{"format", "pt"}};
    assert_int_equal(taas_safetensors_write(p, a.t, NT, meta, 1, &err), 0);
    assert_int_equal(taas_safetensors_read(p, b.t, NT, &err), 0);
    assert_model_values(&b);
    /* The write went through a temporary file that is gone now. */
    DIR *d = opendir(TMPDIR_);
    struct dirent *de;
    while ((de = readdir(d))) assert_null(strstr(de->d_name, ".tmp."));
    closedir(d);
    /* Overwriting an existing file works (rename over it). */
    assert_int_equal(taas_safetensors_write(p, a.t, NT, NULL, 0, &err), 0);
    assert_int_equal(taas_safetensors_read(p, b.t, NT, &err), 0);
}

static void test_read_python_fixtures(void **state) {
    (void)state;
    const char *names[] = {"small.safetensors", "small_meta.safetensors",
                           "reordered.safetensors"};
    for (size_t i = 0; i < 3; i++) {
        model m;
        model_init(&m, 0);
        char p[1024];
        fixture(p, sizeof p, names[i]);
        taas_error err;
        taas_error_clear(&err);
        if (taas_safetensors_read(p, m.t, NT, &err) < 0)
            fail_msg("%s: %s (set TAAS_SOURCE_DIR)", p, err.message);
        assert_model_values(&m);
    }
}

static void assert_same_bytes(const char *ours, const char *ref) {
    size_t la, lb;
    unsigned char *a = slurp(ours, &la), *b = slurp(ref, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
}

static void test_bytes_match_python(void **state) {
    (void)state;
    model m;
    model_init(&m, 1);
    char p[256], ref[1024];
    taas_error err;
    taas_error_clear(&err);
    /* The table's order differs from the sorted header order on purpose. */
    tmp_path(p, sizeof p, "meta.safetensors");
    taas_st_meta meta[] = {{"format", "pt"}, {"taas", "1"}};
    assert_int_equal(taas_safetensors_write(p, m.t, NT, meta, 2, &err), 0);
    fixture(ref, sizeof ref, "small_meta.safetensors");
    assert_same_bytes(p, ref);
    tmp_path(p, sizeof p, "nometa.safetensors");
    assert_int_equal(taas_safetensors_write(p, m.t, NT, NULL, 0, &err), 0);
    fixture(ref, sizeof ref, "small.safetensors");
    assert_same_bytes(p, ref);
}

static void test_missing_and_extra_keys(void **state) {
    (void)state;
    char p[1024];
    fixture(p, sizeof p, "small.safetensors");
    model m;
    model_init(&m, 0);
    /* The model has two tensors more than the file. */
    m.t[NT] = m.t[1];
    m.t[NT].key = "2.weight";
    m.t[NT + 1] = m.t[1];
    m.t[NT + 1].key = "2.bias";
    expect_read_error(p, m.t, NT + 2, "missing keys '2.weight', '2.bias'",
                      "model definition differs");
    /* The model lacks the BatchNorm running stats that the file has. */
    model_init(&m, 0);
    taas_st_tensor t[NT];
    size_t n = 0;
    for (int k = 0; k < NT; k++)
        if (!strstr(m.t[k].key, "running")) t[n++] = m.t[k];
    expect_read_error(p, t, n, "'1.running_mean'", "model definition differs");
    expect_read_error(p, t, n, "unexpected keys", NULL);
    expect_read_error(p, t, n, "'1.running_var'", NULL);
    /* Both at once, in one message. */
    t[n] = m.t[1];
    t[n].key = "5.bias";
    expect_read_error(p, t, n + 1, "missing keys '5.bias'; unexpected keys", NULL);
    assert_true(m.buf[0][0] == 0xAB); /* nothing was written into the model */
}

/* A file marked partial (load(strict=False) into a model without weights) fills the tensors
 * it has and leaves the others as the model initialised them; the same tensors unmarked are
 * an error; an unexpected key stays one. */
static void test_partial_file(void **state) {
    (void)state;
    model a, b;
    model_init(&a, 1);
    char p[256], q[256];
    tmp_path(p, sizeof p, "partial.safetensors");
    tmp_path(q, sizeof q, "unmarked.safetensors");
    taas_error err;
    taas_error_clear(&err);
    const taas_st_meta meta[] = {{"format", "pt"}, {TAAS_ST_PARTIAL_KEY, "1"}};
    /* the file lacks the last two tensors (1.num_batches_tracked, 10.weight) */
    assert_int_equal(taas_safetensors_write(p, a.t, NT - 2, meta, 2, &err), 0);
    assert_int_equal(taas_safetensors_write(q, a.t, NT - 2, meta, 1, &err), 0);
    model_init(&b, 0);
    assert_int_equal(taas_safetensors_read(p, b.t, NT, &err), 0);
    for (int k = 0; k < NT - 2; k++) assert_memory_equal(b.buf[k], a.buf[k], numel(&a.t[k]) * 4);
    for (int k = NT - 2; k < NT; k++) assert_true(b.buf[k][0] == 0xAB && b.buf[k][1] == 0xAB);
    model_init(&b, 0);
    expect_read_error(q, b.t, NT, "missing keys '1.num_batches_tracked', '10.weight'", "strict=False");
    /* a key the model lacks: partial or not, an error */
    assert_int_equal(taas_safetensors_write(p, a.t, NT, meta, 2, &err), 0);
    expect_read_error(p, b.t, NT - 1, "unexpected keys '10.weight'", NULL);
    assert_true(b.buf[0][0] == 0xAB);
    /* a key both have must still fit */
    b.t[0].shape[0] = 5;
    expect_read_error(p, b.t, NT, "0.weight has shape [3, 4], the model expects [5, 4]", NULL);
}

/* strict=False's reading: missing keys are told by present[], unexpected ones listed. */
static void test_read_opts(void **state) {
    (void)state;
    char p[1024];
    fixture(p, sizeof p, "small.safetensors");
    model m;
    model_init(&m, 0);
    taas_st_tensor t[NT + 1];
    size_t n = 0;
    for (int k = 0; k < NT; k++)
        if (!strstr(m.t[k].key, "running")) t[n++] = m.t[k];
    t[n] = m.t[1];
    t[n].data = m.buf[NT];
    t[n++].key = "5.bias";
    unsigned char present[NT + 1];
    json_t *unexpected = json_array();
    taas_st_read_opts o = {1, 1, present, unexpected};
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_safetensors_read_opts(p, t, n, &o, &err), 0);
    for (size_t i = 0; i + 1 < n; i++) assert_int_equal(present[i], 1);
    assert_int_equal(present[n - 1], 0);
    assert_true(m.buf[NT][0] == 0xAB && m.buf[NT][11] == 0xAB);  /* "5.bias", not in the file: untouched */
    assert_true(((const float *)m.buf[0])[0] == -0.75f);  /* the rest was read: 0.weight[0] */
    assert_int_equal(json_array_size(unexpected), 2);
    assert_string_equal(json_string_value(json_array_get(unexpected, 0)), "1.running_mean");
    assert_string_equal(json_string_value(json_array_get(unexpected, 1)), "1.running_var");
    json_decref(unexpected);
    /* strict on either side: the error as taas_safetensors_read gives it */
    o = (taas_st_read_opts){1, 0, NULL, NULL};
    assert_int_equal(taas_safetensors_read_opts(p, t, n, &o, &err), -1);
    assert_non_null(strstr(err.message, "unexpected keys '1.running_mean', '1.running_var'"));
    assert_null(strstr(err.message, "missing"));
    o = (taas_st_read_opts){0, 1, NULL, NULL};
    assert_int_equal(taas_safetensors_read_opts(p, t, n, &o, &err), -1);
    assert_non_null(strstr(err.message, "missing keys '5.bias'"));
    assert_null(strstr(err.message, "unexpected"));
}

/* A file of 20,000 keys the model does not have: the message lists a few and counts the
 * rest (issue 16, defect 15). */
static void test_many_unexpected_keys_are_counted(void **state) {
    (void)state;
    enum { K = 20000 };
    taas_buf h = TAAS_BUF_INIT;
    taas_buf_puts(&h, "{");
    for (int k = 0; k < K; k++)
        taas_buf_printf(&h, "%s\"junk.%d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                        k ? "," : "", k, 4 * k, 4 * k + 4);
    taas_buf_puts(&h, "}");
    char dir[] = "/tmp/taas-st-many-XXXXXX", p[64];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/many.safetensors", dir);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    uint64_t len = h.len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(len >> (8 * i));
    static float zeros[K];
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    assert_int_equal(fwrite(h.data, 1, h.len, f), h.len);
    assert_int_equal(fwrite(zeros, sizeof *zeros, K, f), K);
    assert_int_equal(fclose(f), 0);
    taas_buf_free(&h);
    model m;
    model_init(&m, 0);
    expect_read_error(p, m.t, NT, "unexpected keys 'junk.0', 'junk.1',", NULL);
    expect_read_error(p, m.t, NT, "'junk.7' and 19992 more", NULL);
    unlink(p);
    rmdir(dir);
}

static void test_wrong_shape_and_dtype(void **state) {
    (void)state;
    static float rm[128];
    int64_t nbt = 3;
    taas_st_tensor saved[] = {
        {.key = "8.running_mean", .dtype = TAAS_ST_F32, .ndim = 1, .shape = {64}, .data = rm},
        {.key = "8.num_batches_tracked", .dtype = TAAS_ST_I64, .ndim = 0, .data = &nbt},
    };
    char p[256];
    tmp_path(p, sizeof p, "shape.safetensors");
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_safetensors_write(p, saved, 2, NULL, 0, &err), 0);
    taas_st_tensor want[2];
    memcpy(want, saved, sizeof want);
    want[0].shape[0] = 128;
    rm[0] = 42.0f;
    expect_read_error(p, want, 2, "8.running_mean has shape [64], the model expects [128]",
                      "model definition differs");
    assert_true(rm[0] == 42.0f);
    /* A scalar against a one-element vector is a different shape too. */
    memcpy(want, saved, sizeof want);
    want[1].ndim = 1;
    want[1].shape[0] = 1;
    expect_read_error(p, want, 2, "8.num_batches_tracked has shape [], the model expects [1]",
                      NULL);
    memcpy(want, saved, sizeof want);
    want[1].dtype = TAAS_ST_F32;
    expect_read_error(p, want, 2, "8.num_batches_tracked has dtype I64, the model expects F32",
                      "convert it to F32");
}

/* data NULL checks without reading; a negative size (a Lazy layer's unknown input) fits any. */
static void test_check_only(void **state) {
    (void)state;
    static float w[6] = {1, 2, 3, 4, 5, 6};
    taas_st_tensor saved[] = {{.key = "1.weight", .dtype = TAAS_ST_F32, .ndim = 2, .shape = {2, 3}, .data = w}};
    char p[256];
    tmp_path(p, sizeof p, "check.safetensors");
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_safetensors_write(p, saved, 1, NULL, 0, &err), 0);
    taas_st_tensor want[] = {{.key = "1.weight", .dtype = TAAS_ST_F32, .ndim = 2, .shape = {2, -1}, .data = NULL}};
    assert_int_equal(taas_safetensors_read(p, want, 1, &err), 0);
    want[0].shape[0] = 4;
    expect_read_error(p, want, 1, "1.weight has shape [2, 3], the model expects [4, ?]", "model definition differs");
    want[0].shape[0] = 2;
    taas_st_tensor more[] = {want[0], {.key = "1.bias", .dtype = TAAS_ST_F32, .ndim = 1, .shape = {2}, .data = NULL}};
    expect_read_error(p, more, 2, "missing keys '1.bias'", NULL);
}

static void test_truncated(void **state) {
    (void)state;
    char ref[1024], p[256];
    fixture(ref, sizeof ref, "small.safetensors");
    size_t len;
    unsigned char *b = slurp(ref, &len);
    model m;
    model_init(&m, 0);
    tmp_path(p, sizeof p, "trunc.safetensors");
    spit(p, b, 300); /* inside the header */
    expect_read_error(p, m.t, NT, "is truncated: the header should be", "incomplete");
    spit(p, b, len - 4); /* inside the last tensor's data */
    expect_read_error(p, m.t, NT, "but the data section holds only", "incomplete");
    spit(p, b, 5);
    expect_read_error(p, m.t, NT, "shorter than the 8-byte header size", NULL);
    free(b);
}

static void test_not_safetensors(void **state) {
    (void)state;
    char p[256];
    model m;
    model_init(&m, 0);
    tmp_path(p, sizeof p, "image.png");
    unsigned char png[64] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    spit(p, png, sizeof png);
    expect_read_error(p, m.t, NT, "is not a safetensors file: its first 8 bytes",
                      "give the path of a .safetensors file");
    write_raw(p, "[1, 2, 3]", 0);
    expect_read_error(p, m.t, NT, "is not a safetensors file: the header does not start", NULL);
    tmp_path(p, sizeof p, "absent.safetensors");
    expect_read_error(p, m.t, NT, "cannot open", "check the path");
}

static void test_header_not_json(void **state) {
    (void)state;
    char p[256];
    model m;
    model_init(&m, 0);
    tmp_path(p, sizeof p, "badjson.safetensors");
    write_raw(p, "{\"0.bias\": {\"dtype\": \"F32\", ", 12);
    expect_read_error(p, m.t, 1, "the header is not valid JSON", "save the model again");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_read_error(p, m.t, 1, "the header is not valid JSON", NULL);
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
    expect_read_error(p, m.t, 1, "tensor 'a' in the header lacks", NULL);
    write_raw(p, "{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_read_error(p, m.t, 1, "tensor 'a' in the header has an unknown dtype", NULL);
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    expect_read_error(p, m.t, 1, "has a shape that is not a list of sizes", NULL);
    write_raw(p, "{\"__metadata__\":{\"epoch\":3}}", 0);
    expect_read_error(p, m.t, 1, "__metadata__ value that is not a string", NULL);
}

static void test_bad_offsets(void **state) {
    (void)state;
    char p[256];
    float a[2], b[2];
    taas_st_tensor t[] = {
        {.key = "a", .dtype = TAAS_ST_F32, .ndim = 1, .shape = {2}, .data = a},
        {.key = "b", .dtype = TAAS_ST_F32, .ndim = 1, .shape = {2}, .data = b},
    };
    tmp_path(p, sizeof p, "offsets.safetensors");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
    expect_read_error(p, t, 2, "tensors 'a' [0, 8] and 'b' [4, 12] overlap",
                      "save the model again");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[100,108]}}", 16);
    expect_read_error(p, t, 2, "tensor 'b' has data_offsets [100, 108] but the data section "
                               "holds only 16 bytes", NULL);
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8);
    expect_read_error(p, t, 1, "tensor 'a' in the header has data_offsets whose length", NULL);
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8);
    expect_read_error(p, t, 1, "0 <= begin <= end", NULL);
}

static void test_write_errors(void **state) {
    (void)state;
    model m;
    model_init(&m, 1);
    taas_error err;
    char p[256];
    taas_error_clear(&err);
    assert_int_equal(taas_safetensors_write("/nonexistent-dir/x.safetensors", m.t, NT, NULL, 0,
                                            &err), -1);
    assert_non_null(strstr(err.message, "cannot create /nonexistent-dir/x.safetensors"));
    assert_non_null(strstr(err.hint, "directory exists"));
    tmp_path(p, sizeof p, "dup.safetensors");
    m.t[1].key = "0.weight";
    assert_int_equal(taas_safetensors_write(p, m.t, NT, NULL, 0, &err), -1);
    assert_non_null(strstr(err.message, "the key '0.weight' appears twice"));
    m.t[1].key = "__metadata__";
    assert_int_equal(taas_safetensors_write(p, m.t, NT, NULL, 0, &err), -1);
    assert_non_null(strstr(err.message, "has the key '__metadata__', which cannot be saved"));
    model_init(&m, 1);
    m.t[0].shape[0] = -3;
    assert_int_equal(taas_safetensors_write(p, m.t, NT, NULL, 0, &err), -1);
    assert_non_null(strstr(err.message, "tensor '0.weight' has an invalid shape"));
    assert_int_equal(access(p, F_OK), -1); /* nothing left behind */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_read_python_fixtures),
        cmocka_unit_test(test_bytes_match_python),
        cmocka_unit_test(test_missing_and_extra_keys),
        cmocka_unit_test(test_many_unexpected_keys_are_counted),
        cmocka_unit_test(test_partial_file),
        cmocka_unit_test(test_read_opts),
        cmocka_unit_test(test_wrong_shape_and_dtype),
        cmocka_unit_test(test_check_only),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_not_safetensors),
        cmocka_unit_test(test_header_not_json),
        cmocka_unit_test(test_bad_offsets),
        cmocka_unit_test(test_write_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
