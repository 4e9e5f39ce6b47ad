/* test_jscan.c — the validating JSON scanner (src/base/jscan.h): it must accept exactly RFC 8259
 * JSON. jansson serves as the independent judge for inputs both can represent. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/jscan.h"

static int scan(const char *text, size_t *start, size_t *end)
{
    struct jscan j;
    jscan_init(&j, text, strlen(text));
    if (jscan_value(&j, start, end) < 0)
        return -1;
    return jscan_end(&j);
}

static int valid(const char *text)
{
    size_t s, e;
    return scan(text, &s, &e) == 0;
}

START_TEST(test_accepts_json)
{
    const char *ok[] = {"0",
                        "-0",
                        "1.5",
                        "-1.5e+10",
                        "1E-2",
                        "123456789012345678901234567890",
                        "true",
                        "false",
                        "null",
                        "\"\"",
                        "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
                        "\"\\u00e9\\uD83D\\uDE00\"",
                        "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"",
                        "[]",
                        "{}",
                        " [ 1 , [ ] , { } ] ",
                        "{\"a\":{\"b\":[null]}}",
                        "{\"k\":1,\"k\":2}"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_msg(valid(ok[i]), "rejected valid JSON: %s", ok[i]);
}
END_TEST

START_TEST(test_rejects_non_json)
{
    const char *bad[] = {"",
                         " ",
                         "01",
                         "-",
                         "1.",
                         ".5",
                         "1e",
                         "+1",
                         "0x10",
                         "NaN",
                         "Infinity",
                         "tru",
                         "nul",
                         "\"abc",
                         "\"\\x\"",
                         "\"\\u12\"",
                         "\"\\ud800\"",
                         "\"\\udc00\"",
                         "\"\\ud800\\u0041\"",
                         "\"\x01\"",
                         "\"\xff\"",
                         "\"\xc0\xaf\"",
                         "\"\xed\xa0\x80\"",
                         "\"\xf4\x90\x80\x80\"",
                         "[1,]",
                         "[,1]",
                         "{\"a\"}",
                         "{\"a\":}",
                         "{\"a\":1,}",
                         "{1:2}",
                         "[1 2]",
                         "{} {}",
                         "[",
                         "{\"a\":1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!valid(bad[i]), "accepted invalid JSON: %s", bad[i]);
}
END_TEST

START_TEST(test_depth_limit)
{
    char deep[2 * JSCAN_MAX_DEPTH + 10];
    size_t n = 0;
    for (int i = 0; i < JSCAN_MAX_DEPTH; i++)
        deep[n++] = '[';
    for (int i = 0; i < JSCAN_MAX_DEPTH; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    ck_assert(valid(deep));
    char deeper[2 * JSCAN_MAX_DEPTH + 10];
    snprintf(deeper, sizeof deeper, "[%s]", deep);
    ck_assert(!valid(deeper));
}
END_TEST

START_TEST(test_span_and_string_decoding)
{
    size_t s, e;
    ck_assert_int_eq(scan("  {\"a\": [1, 2]}  ", &s, &e), 0);
    ck_assert_uint_eq(s, 2);
    ck_assert_uint_eq(e, 15); /* 2 spaces + 13 characters of value */

    struct jscan j;
    const char *text = "\"a\\u00e9\\n\\uD83D\\uDE00\"";
    char out[32];
    size_t len;
    int truncated;
    jscan_init(&j, text, strlen(text));
    ck_assert_int_eq(jscan_string(&j, out, sizeof out, &len, &truncated), 0);
    ck_assert_int_eq(truncated, 0);
    ck_assert_uint_eq(len, 8);
    ck_assert(memcmp(out, "a\xc3\xa9\n\xf0\x9f\x98\x80", 8) == 0);

    jscan_init(&j, text, strlen(text));
    ck_assert_int_eq(jscan_string(&j, out, 2, &len, &truncated), 0);
    ck_assert_int_eq(truncated, 1);
}
END_TEST

/* Where both can represent the input, jscan and jansson agree on validity. */
START_TEST(test_agrees_with_jansson)
{
    unsigned seed = 12345;
    const char alphabet[] = "{}[],:\"\\ 0123456789.-+eEtrufalsn\xc3\xa9u";
    for (int round = 0; round < 20000; round++) {
        char text[24];
        int n = (int)(rand_r(&seed) % 12) + 1;
        for (int i = 0; i < n; i++)
            text[i] = alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
        text[n] = '\0';
        json_error_t err;
        json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        int jansson_ok = v != NULL;
        json_decref(v);
        if (!jansson_ok && strstr(err.text, "too big") != NULL)
            continue; /* jansson's integer range is not JSON's */
        ck_assert_msg(valid(text) == jansson_ok, "disagree on <%s>: jscan %d, jansson %d (%s)", text, valid(text),
                      jansson_ok, err.text);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jscan");
    TCase *tc = tcase_create("scan");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_accepts_json);
    tcase_add_test(tc, test_rejects_non_json);
    tcase_add_test(tc, test_depth_limit);
    tcase_add_test(tc, test_span_and_string_decoding);
    tcase_add_test(tc, test_agrees_with_jansson);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
