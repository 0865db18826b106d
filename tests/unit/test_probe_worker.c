/* taas-worker probe and show, run as the kernel runs them: specs made by the builtin table
 * (taas_value_spec), the process's JSON line, exit status and PNG checked. Data: Debian's
 * Fashion-MNIST files and .npy files written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <png.h>

#include "builtins_testutil.h"
#include "test_probe_util.h"

static char *dir;

static int setup(void **state) {
    (void)state;
    pu_worker();
    dir = pu_mkdtemp();
    pu_write_npy_pair(dir, "grey", 5, 4, 3);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pu_rmdir(dir);
    return 0;
}

static char *spec_of(taas_value *v) {
    assert_non_null(v);
    json_t *j = taas_value_spec(v);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    taas_unref(v);
    return s;
}

static char *fashion_test(void) {
    taas_error err;
    return spec_of(TU(&err, "FashionMNIST", "train=False"));
}

/* A dataset with a transform: FashionMNIST(train=False, transform=objs[0]). */
static char *fashion_with(taas_value *t) {
    taas_error err;
    taas_value *objs[] = {t};
    taas_value *ds = TUO(&err, "FashionMNIST", objs, "train=False", "transform=$0");
    taas_unref(t);
    return spec_of(ds);
}

static char *loader_of(char *(*ds)(void), const char *batch, const char *drop) {
    taas_error err;
    char *dspec = ds();
    json_t *d = json_loads(dspec, 0, NULL);
    free(dspec);
    taas_value *objs[] = {TU(&err, "FashionMNIST", "train=False")};
    taas_value *l = TUO(&err, "DataLoader", objs, "$0", batch, drop);
    taas_unref(objs[0]);
    json_t *j = taas_value_spec(l);
    taas_unref(l);
    json_object_set_new(j, "dataset", d);  /* the dataset given, whatever it is */
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static json_t *probe_ok(const char *spec) {
    const char *args[] = {"probe", "--spec", "-", NULL};
    pu_run r = pu_worker_run(args, spec);
    if (r.status != 0) fprintf(stderr, "probe failed: %s%s\n", r.out, r.err);
    assert_int_equal(r.status, 0);
    assert_true(r.out_len > 0 && strchr(r.out, '\n') == r.out + r.out_len - 1);  /* one line */
    json_t *j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    pu_run_free(&r);
    return j;
}

/* The {"error": ...} a failed run writes (stdout for probe, stderr for show). */
static json_t *failure(const char *const *args, const char *input, int status, int on_stderr) {
    pu_run r = pu_worker_run(args, input);
    assert_int_equal(r.status, status);
    json_t *j = json_loads(on_stderr ? r.err : r.out, 0, NULL);
    if (!j) fprintf(stderr, "not JSON: %s / %s\n", r.out, r.err);
    assert_non_null(j);
    json_t *e = json_incref(json_object_get(j, "error"));
    assert_non_null(e);
    assert_non_null(json_string_value(json_object_get(e, "ename")));
    assert_non_null(json_string_value(json_object_get(e, "message")));
    assert_non_null(json_string_value(json_object_get(e, "hint")));
    json_decref(j);
    pu_run_free(&r);
    return e;
}

static void assert_error(json_t *e, const char *ename, const char *message_part, const char *hint_part) {
    const char *m = json_string_value(json_object_get(e, "message"));
    const char *h = json_string_value(json_object_get(e, "hint"));
    if (!strstr(m, message_part) || (hint_part && !strstr(h, hint_part)))
        fprintf(stderr, "got: %s / %s\n", m, h);
    assert_string_equal(json_string_value(json_object_get(e, "ename")), ename);
    assert_non_null(strstr(m, message_part));
    if (hint_part) assert_non_null(strstr(h, hint_part));
    json_decref(e);
}

static json_int_t geti(const json_t *j, const char *k) {
    assert_true(json_is_integer(json_object_get(j, k)));
    return json_integer_value(json_object_get(j, k));
}

static void assert_shape(const json_t *j, const char *k, int a, int b, int c) {
    const json_t *s = json_object_get(j, k);
    assert_int_equal(json_array_size(s), 3);
    assert_int_equal(json_integer_value(json_array_get(s, 0)), a);
    assert_int_equal(json_integer_value(json_array_get(s, 1)), b);
    assert_int_equal(json_integer_value(json_array_get(s, 2)), c);
}

/* ---- probe -------------------------------------------------------------------------- */

static const char *const PROBE[] = {"probe", "--spec", "-", NULL};

static void test_probe_fashion_mnist(void **state) {
    (void)state;
    char *spec = fashion_test();
    json_t *j = probe_ok(spec);
    free(spec);
    assert_string_equal(json_string_value(json_object_get(j, "type")), "FashionMNIST");
    assert_int_equal(geti(j, "size"), 10000);
    assert_shape(j, "shape", 1, 28, 28);
    assert_shape(j, "raw_shape", 28, 28, 1);
    assert_true(json_is_false(json_object_get(j, "shape_varies")));
    assert_true(json_is_false(json_object_get(j, "transformed")));
    assert_int_equal(geti(j, "num_classes"), 10);
    const json_t *cl = json_object_get(j, "classes");
    assert_int_equal(json_array_size(cl), 10);
    assert_string_equal(json_string_value(json_array_get(cl, 0)), "T-shirt/top");
    assert_string_equal(json_string_value(json_array_get(cl, 9)), "Ankle boot");
    assert_string_equal(json_string_value(json_object_get(j, "source")), "/usr/share/datasets/fashion-mnist");
    assert_null(json_object_get(j, "batches"));
    json_decref(j);
}

static void test_probe_shape_after_transform(void **state) {
    (void)state;
    taas_error err;
    char *spec = fashion_with(TU(&err, "Resize", "(14, 12)"));
    json_t *j = probe_ok(spec);
    assert_shape(j, "shape", 1, 14, 12);
    assert_shape(j, "raw_shape", 28, 28, 1);
    assert_true(json_is_true(json_object_get(j, "transformed")));
    json_decref(j);
    free(spec);
    taas_value *objs[] = {TU0(&err, "ToTensor"), TU(&err, "CenterCrop", "20"),
                          TU(&err, "Normalize", "(0.5,)", "(0.5,)")};
    taas_value *c = TUO(&err, "Compose", objs, "[$1, $0, $2]");
    for (int i = 0; i < 3; i++) taas_unref(objs[i]);
    spec = fashion_with(c);
    j = probe_ok(spec);
    assert_shape(j, "shape", 1, 20, 20);
    json_decref(j);
    free(spec);
}

static void test_probe_loader_batches(void **state) {
    (void)state;
    struct { const char *batch, *drop; int batches; } cases[] = {
        {"batch_size=64", "drop_last=False", 157}, {"batch_size=64", "drop_last=True", 156},
        {"batch_size=1000", "drop_last=False", 10}, {"batch_size=1000", "drop_last=True", 10},
        {"batch_size=20000", "drop_last=False", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *spec = loader_of(fashion_test, cases[i].batch, cases[i].drop);
        json_t *j = probe_ok(spec);
        assert_string_equal(json_string_value(json_object_get(j, "type")), "DataLoader");
        assert_string_equal(json_string_value(json_object_get(j, "dataset")), "FashionMNIST");
        assert_int_equal(geti(j, "size"), 10000);
        assert_int_equal(geti(j, "batches"), cases[i].batches);
        json_decref(j);
        free(spec);
    }
    /* the sampler the loaders use refuses an epoch without a batch, and says why */
    char *spec = loader_of(fashion_test, "batch_size=20000", "drop_last=True");
    assert_error(failure(PROBE, spec, 1, 0), "TaasValueError", "drop_last=True leaves no batch", "batch_size");
    free(spec);
}

static void test_probe_npy(void **state) {
    (void)state;
    char ip[PATH_MAX], lp[PATH_MAX], a[PATH_MAX + 16], b[PATH_MAX + 16];
    snprintf(ip, sizeof ip, "%s/grey-images.npy", dir);
    snprintf(lp, sizeof lp, "%s/grey-labels.npy", dir);
    snprintf(a, sizeof a, "'%s'", ip);
    snprintf(b, sizeof b, "'%s'", lp);
    taas_error err;
    char *spec = spec_of(TU(&err, "NpyDataset", a, b));
    json_t *j = probe_ok(spec);
    free(spec);
    assert_string_equal(json_string_value(json_object_get(j, "type")), "NpyDataset");
    assert_int_equal(geti(j, "size"), 5);
    assert_shape(j, "raw_shape", 4, 3, 1);
    assert_shape(j, "shape", 1, 4, 3);
    json_decref(j);

    /* colour images, float32 */
    float px[2 * 2 * 3 * 3];
    for (size_t i = 0; i < sizeof px / sizeof *px; i++) px[i] = (float)i / 36.0f;
    int64_t lab[2] = {0, 1};
    uint64_t ish[4] = {2, 2, 3, 3}, lsh[1] = {2};
    snprintf(ip, sizeof ip, "%s/rgb-images.npy", dir);
    snprintf(lp, sizeof lp, "%s/rgb-labels.npy", dir);
    pu_write_npy(ip, "<f4", ish, 4, px, sizeof px);
    pu_write_npy(lp, "<i8", lsh, 1, lab, sizeof lab);
    snprintf(a, sizeof a, "'%s'", ip);
    snprintf(b, sizeof b, "'%s'", lp);
    spec = spec_of(TU(&err, "NpyDataset", a, b));
    j = probe_ok(spec);
    free(spec);
    assert_int_equal(geti(j, "size"), 2);
    assert_shape(j, "raw_shape", 2, 3, 3);
    assert_shape(j, "shape", 3, 2, 3);
    assert_true(json_is_null(json_object_get(j, "classes")));
    json_decref(j);
}

/* ---- probe errors ------------------------------------------------------------------- */

static void test_probe_missing_files(void **state) {
    (void)state;
    taas_error err;
    char *spec = spec_of(TU(&err, "FashionMNIST", "root='/nonexistent/fm'"));
    assert_error(failure(PROBE, spec, 1, 0), "TaasIOError", "/nonexistent/fm", NULL);
    free(spec);
    spec = spec_of(TU(&err, "NpyDataset", "'/nonexistent/x.npy'", "'/nonexistent/y.npy'"));
    assert_error(failure(PROBE, spec, 1, 0), "TaasIOError", "/nonexistent/x.npy", NULL);
    free(spec);
}

static void test_probe_transform_that_cannot_take_the_images(void **state) {
    (void)state;
    taas_error err;
    taas_value *objs[] = {TU0(&err, "ToTensor"), TU(&err, "Normalize", "(0.5, 0.5, 0.5)", "(0.2, 0.2, 0.2)")};
    taas_value *c = TUO(&err, "Compose", objs, "[$0, $1]");
    taas_unref(objs[0]);
    taas_unref(objs[1]);
    char *spec = fashion_with(c);
    json_t *e = failure(PROBE, spec, 1, 0);
    assert_error(e, "TaasValueError", "the transform cannot take FashionMNIST's 28x28x1 images: ", NULL);
    free(spec);
}

static void test_probe_bad_specs(void **state) {
    (void)state;
    assert_error(failure(PROBE, "{\"type\": \"FashionMNIST\",", 1, 0), "TaasValueError",
                 "the spec in stdin is not valid JSON", "give the JSON spec");
    assert_error(failure(PROBE, "[1, 2]", 1, 0), "TaasValueError", "is not an object with a \"type\"", NULL);
    assert_error(failure(PROBE, "{\"type\": \"DataLoader\", \"batch_size\": 4}", 1, 0), "TaasValueError",
                 "the DataLoader spec has no \"dataset\" object", NULL);
    assert_error(failure(PROBE, "{\"type\": \"ImageNet\"}", 1, 0), "TaasValueError", "unknown dataset type 'ImageNet'",
                 NULL);
    char *spec = loader_of(fashion_test, "batch_size=64", "drop_last=False");
    json_t *j = json_loads(spec, 0, NULL);
    json_object_set_new(j, "batch_size", json_integer(0));
    char *bad = json_dumps(j, 0);
    assert_error(failure(PROBE, bad, 1, 0), "TaasValueError", "\"batch_size\" must be an integer from 1", NULL);
    json_decref(j);
    free(bad);
    free(spec);
    const char *nofile[] = {"probe", "--spec", "/nonexistent/spec.json", NULL};
    assert_error(failure(nofile, NULL, 1, 0), "TaasIOError", "cannot open the spec file /nonexistent/spec.json",
                 "give the path of a JSON spec");
}

static void test_command_line_errors(void **state) {
    (void)state;
    const char *nospec[] = {"probe", NULL};
    assert_error(failure(nospec, NULL, 2, 0), "TaasUsageError", "probe: --spec is required", "--spec -");
    const char *typo[] = {"probe", "--spek", "-", NULL};
    assert_error(failure(typo, NULL, 2, 0), "TaasUsageError", "unknown option '--spek'", "did you mean --spec?");
    const char *noval[] = {"probe", "--spec", NULL};
    assert_error(failure(noval, NULL, 2, 0), "TaasUsageError", "--spec needs a value", NULL);
    const char *role[] = {"porbe", NULL};
    assert_error(failure(role, NULL, 2, 1), "TaasUsageError", "unknown role 'porbe'", "did you mean 'probe'?");
    const char *n0[] = {"show", "--spec", "-", "--n", "0", NULL};
    assert_error(failure(n0, "{}", 2, 1), "TaasUsageError", "--n must be an integer from 1 to 256, not '0'", NULL);
    const char *nx[] = {"show", "--spec", "-", "--seed", "x", NULL};
    assert_error(failure(nx, "{}", 2, 1), "TaasUsageError", "--seed must be an integer", NULL);
    const char *help[] = {"--help", NULL};
    pu_run r = pu_worker_run(help, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "taas-worker probe --spec FILE|-"));
    pu_run_free(&r);
}

/* ---- show --------------------------------------------------------------------------- */

typedef struct shown {
    json_t *side;
    unsigned char *png;
    size_t len;
} shown;

static shown show_ok(const char *spec, const char *n, const char *seed) {
    const char *args[] = {"show", "--spec", "-", "--n", n, seed ? "--seed" : NULL, seed, NULL};
    pu_run r = pu_worker_run(args, spec);
    if (r.status != 0) fprintf(stderr, "show failed: %s\n", r.err);
    assert_int_equal(r.status, 0);
    shown s = {json_loads(r.err, 0, NULL), (unsigned char *)r.out, r.out_len};
    assert_non_null(s.side);
    free(r.err);
    /* the PNG signature, then IHDR with the size the sidecar gives */
    static const unsigned char SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    assert_true(s.len > 33);
    assert_memory_equal(s.png, SIG, 8);
    assert_memory_equal(s.png + 12, "IHDR", 4);
    uint32_t w = (uint32_t)s.png[16] << 24 | (uint32_t)s.png[17] << 16 | (uint32_t)s.png[18] << 8 | s.png[19];
    uint32_t h = (uint32_t)s.png[20] << 24 | (uint32_t)s.png[21] << 16 | (uint32_t)s.png[22] << 8 | s.png[23];
    assert_int_equal(w, geti(s.side, "width"));
    assert_int_equal(h, geti(s.side, "height"));
    return s;
}

static void shown_free(shown *s) {
    json_decref(s->side);
    free(s->png);
}

/* The decoded picture, to look at pixels. */
static unsigned char *decode(const shown *s, png_image *img) {
    memset(img, 0, sizeof *img);
    img->version = PNG_IMAGE_VERSION;
    assert_true(png_image_begin_read_from_memory(img, s->png, s->len));
    img->format = PNG_FORMAT_GRAY;
    unsigned char *px = malloc(PNG_IMAGE_SIZE(*img));
    assert_true(png_image_finish_read(img, NULL, px, 0, NULL));
    return px;
}

static void test_show_first_n(void **state) {
    (void)state;
    char *spec = fashion_test();
    shown s = show_ok(spec, "16", NULL);
    free(spec);
    const json_t *idx = json_object_get(s.side, "indices"), *lab = json_object_get(s.side, "labels");
    assert_int_equal(json_array_size(idx), 16);
    /* Fashion-MNIST's test split starts with these labels (torchvision agrees) */
    static const int first[16] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7, 4, 5, 7, 3, 4, 1};
    for (int i = 0; i < 16; i++) {
        assert_int_equal(json_integer_value(json_array_get(idx, (size_t)i)), i);
        assert_int_equal(json_integer_value(json_array_get(lab, (size_t)i)), first[i]);
    }
    const char *text = json_string_value(json_object_get(s.side, "text"));
    assert_non_null(strstr(text, "FashionMNIST: 16 of 10000 samples (the first 16), as decoded"));
    assert_non_null(strstr(text, "#0 Ankle boot | #1 Pullover"));
    assert_true(json_is_false(json_object_get(s.side, "transformed")));
    /* 8 cells to a row: two rows; a grey picture with ink (labels) and white margins */
    png_image img;
    unsigned char *px = decode(&s, &img);
    assert_int_equal(img.width, geti(s.side, "width"));
    assert_int_equal(px[0], 255);
    int dark = 0;
    for (size_t i = 0; i < (size_t)img.width * img.height; i++) dark += px[i] == 0;
    assert_true(dark > 1000);
    free(px);
    shown_free(&s);
}

static void test_show_seeded_pick_repeats(void **state) {
    (void)state;
    char *spec = fashion_test();
    shown a = show_ok(spec, "8", "7"), b = show_ok(spec, "8", "7"), c = show_ok(spec, "8", "8");
    free(spec);
    assert_true(json_equal(json_object_get(a.side, "indices"), json_object_get(b.side, "indices")));
    assert_false(json_equal(json_object_get(a.side, "indices"), json_object_get(c.side, "indices")));
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.png, b.png, a.len);
    int in_order = 1;
    const json_t *ai = json_object_get(a.side, "indices");
    for (size_t i = 0; i < 8; i++) in_order &= json_integer_value(json_array_get(ai, i)) == (json_int_t)i;
    assert_false(in_order);
    assert_non_null(strstr(json_string_value(json_object_get(a.side, "text")), "(seed 7)"));
    shown_free(&a);
    shown_free(&b);
    shown_free(&c);
}

/* ToTensor then Normalize: the Normalize is left out, which gives exactly the decoded
 * pixels back, so the picture is the same as with no transform at all. */
static void test_show_undoes_a_trailing_normalize(void **state) {
    (void)state;
    taas_error err;
    taas_value *objs[] = {TU0(&err, "ToTensor"), TU(&err, "Normalize", "(0.2860,)", "(0.3530,)"),
                          TU(&err, "RandomHorizontalFlip", "p=0.0")};
    taas_value *c = TUO(&err, "Compose", objs, "[$0, $1]");
    char *spec = fashion_with(c), *plain = fashion_test();
    shown t = show_ok(spec, "16", NULL), p = show_ok(plain, "16", NULL);
    assert_true(json_is_true(json_object_get(t.side, "transformed")));
    assert_true(json_is_true(json_object_get(t.side, "normalize_undone")));
    assert_non_null(strstr(json_string_value(json_object_get(t.side, "text")), "Normalize undone"));
    assert_int_equal(t.len, p.len);
    assert_memory_equal(t.png, p.png, t.len);
    shown_free(&t);
    free(spec);
    /* a Normalize before the end cannot be left out: the images are shown as decoded */
    c = TUO(&err, "Compose", objs, "[$0, $1, $2]");
    spec = fashion_with(c);
    t = show_ok(spec, "16", NULL);
    assert_true(json_is_false(json_object_get(t.side, "transformed")));
    assert_int_equal(t.len, p.len);
    assert_memory_equal(t.png, p.png, t.len);
    shown_free(&t);
    shown_free(&p);
    free(spec);
    free(plain);
    for (int i = 0; i < 3; i++) taas_unref(objs[i]);
}

static void test_show_loader_and_small_datasets(void **state) {
    (void)state;
    char *spec = loader_of(fashion_test, "batch_size=64", "drop_last=False");
    shown s = show_ok(spec, "3", NULL);
    assert_string_equal(json_string_value(json_object_get(s.side, "type")), "FashionMNIST");
    assert_int_equal(json_array_size(json_object_get(s.side, "indices")), 3);
    shown_free(&s);
    free(spec);
    /* n larger than the dataset: all of it; labels without class names are numbers */
    char a[PATH_MAX + 32], b[PATH_MAX + 32];
    snprintf(a, sizeof a, "'%s/grey-images.npy'", dir);
    snprintf(b, sizeof b, "'%s/grey-labels.npy'", dir);
    taas_error err;
    spec = spec_of(TU(&err, "NpyDataset", a, b));
    s = show_ok(spec, "16", NULL);
    assert_int_equal(json_array_size(json_object_get(s.side, "indices")), 5);
    assert_string_equal(json_string_value(json_array_get(json_object_get(s.side, "captions"), 4)), "1");
    shown_free(&s);
    free(spec);
}

/* Colour, and images large enough to be reduced (200x180 becomes 100x90, box filter). */
static void test_show_colour_and_large_images(void **state) {
    (void)state;
    enum { N = 2, H = 200, W = 180 };
    unsigned char *px = malloc((size_t)N * H * W * 3);
    for (size_t i = 0; i < (size_t)H * W; i++) {
        px[i * 3] = 255, px[i * 3 + 1] = 0, px[i * 3 + 2] = 0;                            /* red */
        px[(H * W + i) * 3] = 0, px[(H * W + i) * 3 + 1] = 0, px[(H * W + i) * 3 + 2] = 200; /* blue */
    }
    int64_t lab[N] = {0, 1};
    uint64_t ish[4] = {N, H, W, 3}, lsh[1] = {N};
    char ip[PATH_MAX], lp[PATH_MAX], a[PATH_MAX + 16], b[PATH_MAX + 16];
    snprintf(ip, sizeof ip, "%s/big-images.npy", dir);
    snprintf(lp, sizeof lp, "%s/big-labels.npy", dir);
    pu_write_npy(ip, "|u1", ish, 4, px, (size_t)N * H * W * 3);
    pu_write_npy(lp, "<i8", lsh, 1, lab, sizeof lab);
    free(px);
    snprintf(a, sizeof a, "'%s'", ip);
    snprintf(b, sizeof b, "'%s'", lp);
    taas_error err;
    char *spec = spec_of(TU(&err, "NpyDataset", a, b));
    shown s = show_ok(spec, "2", NULL);
    free(spec);
    assert_int_equal(s.png[25], 2); /* IHDR colour type: RGB */
    /* two cells of 90x100 (4 px around and between) over a label band */
    assert_int_equal(geti(s.side, "width"), 2 * 90 + 3 * 4);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    assert_true(png_image_begin_read_from_memory(&img, s.png, s.len));
    img.format = PNG_FORMAT_RGB;
    unsigned char *rgb = malloc(PNG_IMAGE_SIZE(img));
    assert_true(png_image_finish_read(&img, NULL, rgb, 0, NULL));
    const unsigned char *c0 = rgb + ((size_t)54 * img.width + 49) * 3, *c1 = rgb + ((size_t)54 * img.width + 143) * 3;
    assert_int_equal(c0[0], 255);
    assert_int_equal(c0[1], 0);
    assert_int_equal(c0[2], 0);
    assert_int_equal(c1[0], 0);
    assert_int_equal(c1[2], 200);
    assert_int_equal(rgb[0], 255); /* the white margin */
    free(rgb);
    shown_free(&s);
}

static void test_show_errors(void **state) {
    (void)state;
    taas_error err;
    const char *args[] = {"show", "--spec", "-", NULL};
    char *spec = spec_of(TU(&err, "NpyDataset", "'/nonexistent/x.npy'", "'/nonexistent/y.npy'"));
    assert_error(failure(args, spec, 1, 1), "TaasIOError", "/nonexistent/x.npy", NULL);
    free(spec);
    assert_error(failure(args, "not json", 1, 1), "TaasValueError", "is not valid JSON", NULL);
    /* an empty dataset */
    char a[PATH_MAX + 32], b[PATH_MAX + 32];
    pu_write_npy_pair(dir, "empty", 0, 4, 4);
    snprintf(a, sizeof a, "'%s/empty-images.npy'", dir);
    snprintf(b, sizeof b, "'%s/empty-labels.npy'", dir);
    spec = spec_of(TU(&err, "NpyDataset", a, b));
    assert_error(failure(args, spec, 1, 1), "TaasDataError", "empty-images.npy holds no samples", NULL);
    free(spec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_fashion_mnist),
        cmocka_unit_test(test_probe_shape_after_transform),
        cmocka_unit_test(test_probe_loader_batches),
        cmocka_unit_test(test_probe_npy),
        cmocka_unit_test(test_probe_missing_files),
        cmocka_unit_test(test_probe_transform_that_cannot_take_the_images),
        cmocka_unit_test(test_probe_bad_specs),
        cmocka_unit_test(test_command_line_errors),
        cmocka_unit_test(test_show_first_n),
        cmocka_unit_test(test_show_seeded_pick_repeats),
        cmocka_unit_test(test_show_undoes_a_trailing_normalize),
        cmocka_unit_test(test_show_loader_and_small_datasets),
        cmocka_unit_test(test_show_colour_and_large_images),
        cmocka_unit_test(test_show_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
