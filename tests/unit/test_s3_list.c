/* The ListObjectsV2 answer parser (dataloader/s3_list.c): the elements it reads, entities
 * decoded, what it skips, and each malformed answer refused with where it went wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "s3_list.h"

static taas_error E;

static void parse_ok(const char *xml, s3_list_page *pg) {
    taas_error_clear(&E);
    if (s3_list_parse(xml, strlen(xml), pg, &E) != 0) fail_msg("%s\nrefused: %s", xml, E.message);
}

static void parse_bad(const char *xml, const char *why) {
    s3_list_page pg;
    taas_error_clear(&E);
    int rc = s3_list_parse(xml, strlen(xml), &pg, &E);
    s3_list_page_free(&pg);
    if (rc != -1) fail_msg("%s\nwas accepted", xml);
    assert_string_equal(E.ename, "TaasIOError");
    if (!strstr(E.message, why) || !strstr(E.message, " at byte ")) fail_msg("%s\ngave %s, wanted '%s'", xml, E.message, why);
    assert_true(E.hint[0] != '\0');
}

static void test_page(void **state) {
    (void)state;
    s3_list_page pg;
    parse_ok("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
             "<!-- a comment <Key>x</Key> -->"
             "<Contents><Key>cls/a&amp;b&lt;&gt;&quot;&apos;.jpg</Key><ETag>&quot;e&quot;</ETag>"
             "<Size>12</Size><Owner/></Contents>\n"
             "<Contents><Key>&#65;&#x263a;&#x1F600;/x.PNG</Key><Size>0</Size></Contents>"
             "<IsTruncated>true</IsTruncated><NextContinuationToken>1/a+b=</NextContinuationToken>"
             "<Key>not a content's</Key></ListBucketResult>\n",
             &pg);
    assert_int_equal(pg.keys.n, 2);
    assert_string_equal(pg.keys.v[0], "cls/a&b<>\"'.jpg");
    assert_string_equal(pg.keys.v[1], "A\xe2\x98\xba\xf0\x9f\x98\x80/x.PNG");
    assert_true(pg.truncated);
    assert_false(pg.is_error);
    assert_string_equal(pg.next_token, "1/a+b=");
    s3_list_page_free(&pg);

    parse_ok("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>", &pg);
    assert_int_equal(pg.keys.n, 0);
    assert_false(pg.truncated);
    assert_null(pg.next_token);
    s3_list_page_free(&pg);

    parse_ok("<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not "
             "exist</Message><BucketName>b</BucketName></Error>",
             &pg);
    assert_true(pg.is_error);
    assert_string_equal(pg.code, "NoSuchBucket");
    assert_string_equal(pg.message, "The specified bucket does not exist");
    s3_list_page_free(&pg);
}

static void test_refusals(void **state) {
    (void)state;
    parse_bad("<ListBucketResult><Contents><Key>a&nbsp;b</Key></Contents></ListBucketResult>", "unknown entity");
    parse_bad("<ListBucketResult><Contents><Key>a&amp</Key></Contents></ListBucketResult>", "unknown entity");
    parse_bad("<ListBucketResult><Contents><Key>&#0;</Key></Contents></ListBucketResult>", "no allowed character");
    parse_bad("<ListBucketResult><Contents><Key>&#xD800;</Key></Contents></ListBucketResult>",
              "no allowed character");
    parse_bad("<ListBucketResult><Contents><Key>&#x110000;</Key></Contents></ListBucketResult>",
              "no allowed character");
    parse_bad("<ListBucketResult><Contents><Key>&#x;</Key></Contents></ListBucketResult>", "malformed character");
    parse_bad("<ListBucketResult><Contents><Key>&#12a;</Key></Contents></ListBucketResult>", "malformed character");
    parse_bad("<ListBucketResult><Contents><Key>a</Size></Contents></ListBucketResult>", "matches no start tag");
    parse_bad("<ListBucketResult><Contents><Key>a</Key>", "ends before its root element");
    parse_bad("", "ends before its root element");
    parse_bad("<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>", "neither true nor false");
    parse_bad("<ListBucketResult><Contents><Key>a<b/>c</Key></Contents></ListBucketResult>", "inside Key");
    parse_bad("<Error><Code>X<i>Y</i></Code></Error>", "inside Key");
    parse_bad("<ListBucketResult><Contents><Size>12a</Size></Contents></ListBucketResult>", "Size");
    parse_bad("<ListBucketResult><Contents><Key></Key></Contents></ListBucketResult>", "empty Key");
    parse_bad("<ListBucketResult><Contents><Key>\xff</Key></Contents></ListBucketResult>", "not UTF-8");
    parse_bad("<html><body>Not Found</body></html>", "root element other than ListBucketResult");
    parse_bad("<!DOCTYPE x><ListBucketResult/>", "DOCTYPE");
    parse_bad("<ListBucketResult/><ListBucketResult/>", "after the root element");
    parse_bad("hello", "text outside the root element");
    parse_bad("<ListBucketResult><Key", "unclosed start tag");
    parse_bad("<ListBucketResult><!-- x", "unclosed comment");
    parse_bad("<ListBucketResult><NextContinuationToken>a</NextContinuationToken>"
              "<NextContinuationToken>b</NextContinuationToken></ListBucketResult>",
              "given twice");
    parse_bad("<ListBucketResult><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a></a></a></a></a></a></a></a>"
              "</a></a></a></a></a></a></a></a></a></ListBucketResult>",
              "nested too deep");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
