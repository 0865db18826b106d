/* ImageFolder with an s3://bucket/prefix/ root, against a real S3-compatible server that the
 * test starts (tests/lib/s3server: s3rver, which checks every request's SigV4 signature and
 * pages ListObjectsV2 as S3 does). The same files go to a local folder and under a prefix of
 * the bucket (torchvision's reference tree of tests/data/imagefolder_ref.json: class folders,
 * nested and sibling folders whose sorted order differs from a depth-first walk, mixed-case
 * extensions, files that are no image; plus more keys than one page holds): both give the
 * same classes, samples, labels and decoded bytes. Then the refusals: a .webp named by its
 * URL, an empty class, no class, a torn JPEG named by URL and host, and the store's errors
 * (no such bucket, a wrong secret, an unknown access key) with their hints. */
#include "test_fetch_util.h"

#include "fixture_testutil.h"
#include "formats.h"
#define FX_SPEC_TESTS
#include "formats_testutil.h"

#define BUCKET "taas-test"
#define MANY 1010 /* keys in one class: more than ListObjectsV2's 1000 a page */

TU_FIXTURE_GROUP(REF, "imagefolder_ref.json")

static char ROOT[128];
static tu_server S;

static const char *folder(const char *root) {
    static char s[1024];
    snprintf(s, sizeof s, "{\"type\": \"ImageFolder\", \"root\": \"%s\", \"transform\": null}", root);
    return s;
}

static void use_credentials(const char *key, const char *secret) {
    tu_s3_env(S.port, key, secret);
}

/* s3://BUCKET/key, made with a signed PUT */
static void put(const char *key, const void *data, size_t len) {
    char url[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/" BUCKET "/%s", S.port, key);
    assert_int_equal(tu_s3_put(url, "S3RVER:S3RVER", data ? data : "", len), 200);
}

/* rel under FX_DIR and under the prefix pre of the bucket */
static void both(const char *pre, const char *rel, const void *data, size_t len) {
    char key[600];
    snprintf(key, sizeof key, "%s%s", pre, rel);
    put(key, data, len);
    fx_write(rel, data, len);
}

static unsigned char *from_hex(const char *hex, size_t *n) {
    *n = strlen(hex) / 2;
    unsigned char *b = malloc(*n ? *n : 1);
    assert_non_null(b);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        b[i] = (unsigned char)v;
    }
    return b;
}

static void small_jpeg(taas_buf *b) {
    unsigned char *px = fx_pic_make(8, 6, 3, 1);
    fx_jpeg(b, 8, 6, 3, px, 90);
    free(px);
}

static void test_same_as_local_folder(void **state) {
    (void)state;
    const char *pre = "sets/train/";
    const char *rel;
    json_t *hex;
    json_object_foreach(json_object_get(REF, "files"), rel, hex) {
        size_t n;
        unsigned char *b = from_hex(json_string_value(hex), &n);
        both(pre, rel, b, n);
        free(b);
    }
    /* a class whose keys span two listing pages; files of root itself are no class's */
    taas_buf jpg = TAAS_BUF_INIT;
    small_jpeg(&jpg);
    both(pre, "many/0.jpg", jpg.data, jpg.len);
    for (int i = 0; i < MANY; i++) {
        char name[64];
        snprintf(name, sizeof name, "many/n%04d.txt", i);
        both(pre, name, "x", 1);
    }
    both(pre, "zz.jpg", jpg.data, jpg.len);
    /* a sibling prefix that starts like the root is not under it */
    put("sets/train2/cls/1.jpg", jpg.data, jpg.len);
    taas_buf_free(&jpg);

    taas_dataset *local = open_ok(folder(FX_DIR));
    const char *roots[] = {"s3://" BUCKET "/sets/train/", "s3://" BUCKET "/sets/train"};
    for (size_t r = 0; r < 2; r++) {
        taas_dataset *s3 = open_ok(folder(roots[r]));
        const taas_dataset_info *a = taas_dataset_info_get(local), *b = taas_dataset_info_get(s3);
        assert_int_equal(b->num_classes, json_array_size(json_object_get(REF, "classes")) + 1);
        assert_int_equal(b->num_classes, a->num_classes);
        for (int k = 0; k < a->num_classes; k++) assert_string_equal(b->classes[k], a->classes[k]);
        assert_int_equal(b->size, a->size);
        assert_int_equal(b->size, json_array_size(json_object_get(REF, "samples")) + 1);
        for (size_t i = 0; i < a->size; i++) {
            taas_image ia, ib;
            int64_t la, lb;
            if (taas_dataset_get(local, i, &ia, &la, &E) != 0) fail_msg("local %zu: %s", i, E.message);
            if (taas_dataset_get(s3, i, &ib, &lb, &E) != 0) fail_msg("s3 %zu: %s", i, E.message);
            assert_int_equal(lb, la);
            assert_int_equal(ib.h, ia.h);
            assert_int_equal(ib.w, ia.w);
            assert_int_equal(ib.c, ia.c);
            assert_memory_equal(ib.data, ia.data, (size_t)ia.h * ia.w * ia.c);
            taas_image_free(&ia);
            taas_image_free(&ib);
        }
        taas_dataset_free(s3);
    }
    taas_dataset_free(local);
}

static void test_listing_refusals(void **state) {
    (void)state;
    taas_buf jpg = TAAS_BUF_INIT;
    small_jpeg(&jpg);
    put("webp/a/1.jpg", jpg.data, jpg.len);
    put("webp/b/sub/pic.WebP", "RIFF", 4);
    open_bad(folder("s3://" BUCKET "/webp/"), "TaasDataError", "s3://" BUCKET "/webp/b/sub/pic.WebP", "webp image",
             "JPEG and PNG only", NULL);
    put("empty/full/1.jpeg", jpg.data, jpg.len);
    put("empty/hollow/notes.txt", "x", 1);
    open_bad(folder("s3://" BUCKET "/empty"), "TaasDataError", "no image in the class folder hollow", NULL);
    put("noclass/readme.jpg", jpg.data, jpg.len);
    open_bad(folder("s3://" BUCKET "/noclass/"), "TaasDataError", "no class folder", "s3://" BUCKET "/noclass/",
             NULL);
    open_bad(folder("s3://" BUCKET "/nothing-here/"), "TaasDataError", "no class folder", NULL);
    /* a torn image fails when read, naming its URL and the loader's host */
    put("torn/cls/ok.jpg", jpg.data, jpg.len);
    put("torn/cls/torn.jpg", jpg.data, jpg.len / 2);
    taas_dataset *d = open_ok(folder("s3://" BUCKET "/torn/"));
    taas_image img;
    int64_t label;
    assert_int_equal(taas_dataset_get(d, 0, &img, &label, &E), 0);
    taas_image_free(&img);
    assert_int_equal(taas_dataset_get(d, 1, &img, &label, &E), -1);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    assert_non_null(strstr(E.message, "s3://" BUCKET "/torn/cls/torn.jpg on "));
    assert_non_null(strstr(E.message, host));
    taas_dataset_free(d);
    taas_buf_free(&jpg);
}

/* The store's errors, each with what to do. */
static void store_error(const char *root, const char *code, const char *hint) {
    taas_fetcher *f = fx_fetcher();
    taas_dataset *d = fx_open(f, folder(root), &E);
    assert_null(d);
    assert_string_equal(E.ename, "TaasIOError");
    if (!strstr(E.message, code) || !strstr(E.message, root) || !strstr(E.hint, hint))
        fail_msg("%s gave %s (hint: %s), wanted %s and '%s'", root, E.message, E.hint, code, hint);
    taas_fetcher_free(f);
}

static void test_store_errors(void **state) {
    (void)state;
    store_error("s3://no-such-bucket/train/", "NoSuchBucket", "no bucket 'no-such-bucket'");
    use_credentials("S3RVER", "not-the-secret");
    store_error("s3://" BUCKET "/sets/train/", "SignatureDoesNotMatch", "AWS_SECRET_ACCESS_KEY");
    use_credentials("AKIDUNKNOWN", "S3RVER");
    store_error("s3://" BUCKET "/sets/train/", "InvalidAccessKeyId", "AWS_ACCESS_KEY_ID");
    unsetenv("AWS_ACCESS_KEY_ID");
    store_error("s3://" BUCKET "/sets/train/", "no AWS credentials", "AWS_ACCESS_KEY_ID");
    use_credentials("S3RVER", "S3RVER");
}

/* Answers that the S3 test server cannot give, from canned files served as a store's
 * listings (tests/lib/faultserver.py serves GET /bucket?... from the file root/bucket). */
static void test_odd_listings(void **state) {
    (void)state;
    static const char *const files[][2] = {
        {"dots", "<ListBucketResult><Contents><Key>p/cls/1.jpg</Key></Contents><Contents><Key>p/cls/../x/2.jpg"
                 "</Key></Contents><IsTruncated>false</IsTruncated></ListBucketResult>"},
        {"html", "<html><body>It works!</body></html>"},
        {"notoken", "<ListBucketResult><Contents><Key>p/cls/1.jpg</Key></Contents><IsTruncated>true</IsTruncated>"
                    "</ListBucketResult>"},
        {"okerror", "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>"},
        {"sametoken", "<ListBucketResult><Contents><Key>p/cls/1.jpg</Key></Contents><IsTruncated>true"
                      "</IsTruncated><NextContinuationToken>t</NextContinuationToken></ListBucketResult>"},
    };
    char canned[300], p[400];
    snprintf(canned, sizeof canned, "%s/canned", ROOT);
    mkdir(canned, 0755);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", canned, files[i][0]);
        tu_write(p, files[i][1], strlen(files[i][1]));
    }
    tu_server fs;
    tu_server_dir(&fs, ROOT, "fault");
    assert_int_equal(tu_faultserver(&fs, canned, NULL), 0);
    tu_s3_env(fs.port, "S3RVER", "S3RVER");
    taas_fetcher *f = fx_fetcher();
    assert_null(fx_open(f, folder("s3://dots/p/"), &E));
    assert_string_equal(E.ename, "TaasDataError");
    assert_non_null(strstr(E.message, "s3://dots/p/cls/../x/2.jpg has a '.' or '..' folder"));
    assert_null(fx_open(f, folder("s3://html/p/"), &E));
    assert_string_equal(E.ename, "TaasIOError");
    assert_non_null(strstr(E.message, "not a ListObjectsV2 answer: a root element other than ListBucketResult"));
    assert_null(fx_open(f, folder("s3://notoken/p/"), &E));
    assert_non_null(strstr(E.message, "truncated but gives no new NextContinuationToken"));
    assert_null(fx_open(f, folder("s3://sametoken/p/"), &E));
    assert_non_null(strstr(E.message, "truncated but gives no new NextContinuationToken"));
    assert_null(fx_open(f, folder("s3://okerror/p/"), &E));
    assert_non_null(strstr(E.message, "answered the listing with the error SlowDown: Reduce your request rate."));
    /* no store there any more: an error without a body */
    tu_server_stop(&fs);
    assert_null(fx_open(f, folder("s3://dots/p/"), &E));
    assert_string_equal(E.ename, "TaasIOError");
    assert_non_null(strstr(E.message, "ImageFolder: cannot list s3://dots/p/ on "));
    taas_fetcher_free(f);
    use_credentials("S3RVER", "S3RVER");
}

static int setup(void **state) {
    if (load_ref(state)) return -1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (tu_tmpdir(ROOT, sizeof ROOT, "folder-s3")) return -1;
    tu_server_dir(&S, ROOT, "server");
    if (tu_s3server(&S, BUCKET)) return -1;
    use_credentials("S3RVER", "S3RVER");
    return 0;
}

static int teardown(void **state) {
    tu_server_stop(&S);
    tu_cleanup(ROOT, NULL, NULL);
    return free_ref(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_as_local_folder, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_listing_refusals, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_store_errors, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_odd_listings, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
