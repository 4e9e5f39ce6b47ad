/* test_sbuf.c — src/base/sbuf.h: the growable buffer and its JSON helpers. */
#include "base/sbuf.h"

#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The buffer's invariants: NUL-terminated when it has memory, len < cap. */
static void check_invariants(const struct sbuf *sb)
{
    ck_assert_int_eq(sb->oom, 0);
    if (sb->data != NULL) {
        ck_assert_uint_lt(sb->len, sb->cap);
        ck_assert_int_eq(sb->data[sb->len], '\0');
    } else {
        ck_assert_uint_eq(sb->len, 0);
    }
}

START_TEST(test_empty)
{
    struct sbuf sb = SBUF_INIT;
    ck_assert_ptr_null(sb.data);
    ck_assert_uint_eq(sb.len, 0);
    sb_put(&sb, "", 0);
    check_invariants(&sb);
    sb_free(&sb);
    ck_assert_ptr_null(sb.data);
    ck_assert_uint_eq(sb.cap, 0);
}
END_TEST

START_TEST(test_growth_bytewise)
{
    struct sbuf sb = SBUF_INIT;
    enum { N = 100000 };
    for (int i = 0; i < N; i++) {
        sb_putc(&sb, (char)('a' + i % 26));
        ck_assert_uint_eq(sb.len, (size_t)i + 1);
        check_invariants(&sb);
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(sb.data[i], 'a' + i % 26);
    ck_assert_uint_eq(strlen(sb.data), N);
    sb_free(&sb);
}
END_TEST

START_TEST(test_growth_large_chunks)
{
    struct sbuf sb = SBUF_INIT;
    size_t total = 0;
    char *chunk = malloc(70000);
    ck_assert_ptr_nonnull(chunk);
    for (size_t n = 1; n <= 70000; n = n * 3 + 1) {
        memset(chunk, (int)('0' + n % 10), n);
        sb_put(&sb, chunk, n);
        check_invariants(&sb);
        ck_assert_int_eq(memcmp(sb.data + total, chunk, n), 0);
        total += n;
        ck_assert_uint_eq(sb.len, total);
    }
    free(chunk);
    sb_free(&sb);
}
END_TEST

START_TEST(test_put_keeps_nul_bytes)
{
    struct sbuf sb = SBUF_INIT;
    sb_put(&sb, "a\0b", 3);
    sb_puts(&sb, "cd");
    ck_assert_uint_eq(sb.len, 5);
    ck_assert_int_eq(memcmp(sb.data, "a\0bcd", 6), 0);
    check_invariants(&sb);
    sb_free(&sb);
}
END_TEST

START_TEST(test_printf)
{
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "x=");
    sb_printf(&sb, "%d-%s-%05.1f", 42, "forty-two", 3.14159);
    ck_assert_str_eq(sb.data, "x=42-forty-two-003.1");
    ck_assert_uint_eq(sb.len, strlen("x=42-forty-two-003.1"));
    check_invariants(&sb);

    /* output longer than any initial capacity, several times over */
    char big[5000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 4; i++)
        sb_printf(&sb, "[%s]%d", big, i);
    ck_assert_uint_eq(sb.len, strlen("x=42-forty-two-003.1") + 4 * (2 + 4999 + 1));
    ck_assert_uint_eq(strlen(sb.data), sb.len);
    ck_assert_int_eq(sb.data[sb.len - 1], '3');
    check_invariants(&sb);

    sb_printf(&sb, "%s", "");
    ck_assert_uint_eq(strlen(sb.data), sb.len);
    sb_free(&sb);
}
END_TEST

START_TEST(test_reset)
{
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "hello");
    sb_reset(&sb);
    ck_assert_uint_eq(sb.len, 0);
    ck_assert_str_eq(sb.data, "");
    sb_puts(&sb, "again");
    ck_assert_str_eq(sb.data, "again");
    check_invariants(&sb);
    sb_free(&sb);
}
END_TEST

START_TEST(test_reserve)
{
    struct sbuf sb = SBUF_INIT;
    ck_assert_int_eq(sb_reserve(&sb, 1000), 0);
    ck_assert_uint_ge(sb.cap, 1001);
    ck_assert_uint_eq(sb.len, 0);
    check_invariants(&sb); /* "always NUL-terminated when non-NULL" */
    memcpy(sb.data + sb.len, "abc", 3);
    sb.len += 3;
    sb_putc(&sb, 'd');
    ck_assert_str_eq(sb.data, "abcd");
    sb_free(&sb);
}
END_TEST

START_TEST(test_steal)
{
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "payload");
    size_t len = 0;
    char *p = sb_steal(&sb, &len);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(len, 7);
    ck_assert_str_eq(p, "payload");
    ck_assert_ptr_null(sb.data);
    ck_assert_uint_eq(sb.len, 0);
    ck_assert_uint_eq(sb.cap, 0);
    /* the sbuf is usable again, independent of the stolen memory */
    sb_puts(&sb, "next");
    ck_assert_str_eq(sb.data, "next");
    ck_assert_str_eq(p, "payload");
    free(p);
    p = sb_steal(&sb, NULL);
    ck_assert_str_eq(p, "next");
    free(p);
}
END_TEST

START_TEST(test_steal_empty)
{
    /* an empty buffer still hands over a valid, empty C string */
    struct sbuf sb = SBUF_INIT;
    size_t len = 99;
    char *p = sb_steal(&sb, &len);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(p, "");
    free(p);
}
END_TEST

static char *json_of(const char *s, size_t len)
{
    struct sbuf sb = SBUF_INIT;
    sb_json_str(&sb, s, len);
    ck_assert_int_eq(sb.oom, 0);
    return sb_steal(&sb, NULL);
}

static void check_json(const char *s, size_t len, const char *want)
{
    char *got = json_of(s, len);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(test_json_escapes)
{
    check_json("", 0, "\"\"");
    check_json("plain", 5, "\"plain\"");
    check_json("a\"b", 3, "\"a\\\"b\"");
    check_json("a\\b", 3, "\"a\\\\b\"");
    check_json("\\\"", 2, "\"\\\\\\\"\"");
    check_json("l1\nl2\r\tx", 8, "\"l1\\nl2\\r\\tx\"");
    check_json("\x01", 1, "\"\\u0001\"");
    check_json("\x1f", 1, "\"\\u001f\"");
    check_json("a\0b", 3, "\"a\\u0000b\"");
    check_json("\x7f", 1, "\"\\u007f\"");
    check_json("/", 1, "\"/\"");
    /* UTF-8 passes through untouched */
    check_json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    /* only `len` bytes */
    check_json("abcdef", 2, "\"ab\"");
}
END_TEST

START_TEST(test_json_every_ascii_byte_round_trips)
{
    /* Independent check: jansson must read back exactly the bytes that went in, and no raw
     * control character may appear in the output. */
    char in[128];
    for (int i = 0; i < 128; i++)
        in[i] = (char)i;
    char *out = json_of(in, sizeof in);
    for (const char *c = out; *c; c++)
        ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f, "raw control byte 0x%02x in output", (unsigned char)*c);
    json_error_t jerr;
    json_t *v = json_loads(out, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(v != NULL, "not JSON: %s", jerr.text);
    ck_assert(json_is_string(v));
    ck_assert_uint_eq(json_string_length(v), sizeof in);
    ck_assert_int_eq(memcmp(json_string_value(v), in, sizeof in), 0);
    json_decref(v);
    free(out);
}
END_TEST

START_TEST(test_json_cstr_and_key)
{
    struct sbuf sb = SBUF_INIT;
    sb_putc(&sb, '{');
    sb_json_key(&sb, "na\"me");
    sb_json_cstr(&sb, "va\nlue");
    sb_putc(&sb, '}');
    ck_assert_str_eq(sb.data, "{\"na\\\"me\":\"va\\nlue\"}");
    json_t *v = json_loads(sb.data, 0, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(json_string_value(json_object_get(v, "na\"me")), "va\nlue");
    json_decref(v);
    sb_free(&sb);
}
END_TEST

START_TEST(test_json_ints)
{
    struct sbuf sb = SBUF_INIT;
    static const int64_t sv[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN};
    char want[32];
    for (size_t i = 0; i < sizeof sv / sizeof sv[0]; i++) {
        sb_reset(&sb);
        sb_json_int(&sb, sv[i]);
        snprintf(want, sizeof want, "%" PRId64, sv[i]);
        ck_assert_str_eq(sb.data, want);
        ck_assert_uint_eq(sb.len, strlen(want));
    }
    static const uint64_t uv[] = {0, 1, UINT64_C(9007199254740993), UINT64_MAX};
    for (size_t i = 0; i < sizeof uv / sizeof uv[0]; i++) {
        sb_reset(&sb);
        sb_json_uint(&sb, uv[i]);
        snprintf(want, sizeof want, "%" PRIu64, uv[i]);
        ck_assert_str_eq(sb.data, want);
    }
    ck_assert_str_eq(sb.data, "18446744073709551615");
    sb_reset(&sb);
    sb_json_int(&sb, INT64_MIN);
    ck_assert_str_eq(sb.data, "-9223372036854775808");
    sb_free(&sb);
}
END_TEST

START_TEST(test_int_to_text)
{
    static const struct {
        int64_t v;
        const char *want;
    } cases[] = {{0, "0"},
                 {7, "7"},
                 {-7, "-7"},
                 {10, "10"},
                 {1763700000000LL, "1763700000000"},
                 {INT64_MAX, "9223372036854775807"},
                 {INT64_MIN, "-9223372036854775808"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[INT_TEXT_MAX];
        memset(out, 'X', sizeof out);
        size_t n = sb_int_to_text(cases[i].v, out);
        ck_assert_str_eq(out, cases[i].want);
        ck_assert_uint_eq(n, strlen(cases[i].want));
    }
}
END_TEST

START_TEST(test_str_put_joins_and_truncates_like_snprintf)
{
    /* what snprintf(out, 12, "%s %s%s", "http-0", "hg:{3}", ":jobs") leaves: 11 chars + NUL */
    char out[12];
    size_t n = sb_str_put(out, sizeof out, 0, "http-0");
    ck_assert_uint_eq(n, 6);
    n = sb_str_put(out, sizeof out, n, " ");
    n = sb_str_put(out, sizeof out, n, "hg:{3}");
    ck_assert_str_eq(out, "http-0 hg:{");
    ck_assert_uint_eq(n, 11);
    n = sb_str_put(out, sizeof out, n, ":jobs"); /* full: nothing more fits */
    ck_assert_uint_eq(n, 11);
    ck_assert_str_eq(out, "http-0 hg:{");
    ck_assert_uint_eq(sb_str_put(out, sizeof out, 0, ""), 0);
    ck_assert_str_eq(out, "");
}
END_TEST

static Suite *sbuf_suite(void)
{
    Suite *s = suite_create("sbuf");
    TCase *tc = tcase_create("buffer");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_growth_bytewise);
    tcase_add_test(tc, test_growth_large_chunks);
    tcase_add_test(tc, test_put_keeps_nul_bytes);
    tcase_add_test(tc, test_printf);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_reserve);
    tcase_add_test(tc, test_steal);
    tcase_add_test(tc, test_steal_empty);
    suite_add_tcase(s, tc);

    tc = tcase_create("json");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_json_escapes);
    tcase_add_test(tc, test_json_every_ascii_byte_round_trips);
    tcase_add_test(tc, test_json_cstr_and_key);
    tcase_add_test(tc, test_json_ints);
    tcase_add_test(tc, test_int_to_text);
    tcase_add_test(tc, test_str_put_joins_and_truncates_like_snprintf);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sbuf_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
