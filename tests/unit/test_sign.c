/* test_sign.c — src/delivery/sign.h: HMAC-SHA256 as lowercase hex, against the RFC 4231 test vectors
 * (section 4, the SHA-256 rows), and the Hourglass-Signature header value built from it. */
#include "delivery/sign.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char *p, int byte, size_t n)
{
    memset(p, byte, n);
}

/* The digest of key/data must be `want` (64 hex digits, or a prefix for the truncated case 5). */
static void expect(const void *key, size_t keylen, const void *data, size_t len, const char *want)
{
    char out[SIGN_HEX_LEN + 1];
    memset(out, 'X', sizeof out);
    ck_assert_int_eq(sign_hmac_sha256_hex(key, keylen, data, len, out), 0);
    ck_assert_uint_eq(strlen(out), SIGN_HEX_LEN);
    ck_assert_int_eq(strncmp(out, want, strlen(want)), 0);
}

START_TEST(rfc4231_case1)
{
    unsigned char key[20];
    fill(key, 0x0b, sizeof key);
    expect(key, sizeof key, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}
END_TEST

START_TEST(rfc4231_case2_short_key)
{
    const char *data = "what do ya want for nothing?";
    expect("Jefe", 4, data, strlen(data), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}
END_TEST

START_TEST(rfc4231_case3)
{
    unsigned char key[20], data[50];
    fill(key, 0xaa, sizeof key);
    fill(data, 0xdd, sizeof data);
    expect(key, sizeof key, data, sizeof data, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
}
END_TEST

START_TEST(rfc4231_case4)
{
    unsigned char key[25], data[50];
    for (int i = 0; i < 25; i++)
        key[i] = (unsigned char)(i + 1);
    fill(data, 0xcd, sizeof data);
    expect(key, sizeof key, data, sizeof data, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
}
END_TEST

START_TEST(rfc4231_case5_truncated_prefix)
{
    unsigned char key[20];
    fill(key, 0x0c, sizeof key);
    expect(key, sizeof key, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b");
}
END_TEST

START_TEST(rfc4231_case6_long_key)
{
    unsigned char key[131];
    fill(key, 0xaa, sizeof key);
    const char *data = "Test Using Larger Than Block-Size Key - Hash Key First";
    expect(key, sizeof key, data, strlen(data), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}
END_TEST

START_TEST(rfc4231_case7_long_key_and_data)
{
    unsigned char key[131];
    fill(key, 0xaa, sizeof key);
    const char *data = "This is a test using a larger than block-size key and a larger than block-size data. "
                       "The key needs to be hashed before being used by the HMAC algorithm.";
    expect(key, sizeof key, data, strlen(data), "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}
END_TEST

START_TEST(empty_key_and_body)
{
    /* HMAC-SHA256("", ""): lengths 0 with NULL pointers are allowed */
    expect(NULL, 0, NULL, 0, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}
END_TEST

START_TEST(body_is_hashed_by_length_not_by_nul)
{
    char a[SIGN_HEX_LEN + 1], b[SIGN_HEX_LEN + 1];
    ck_assert_int_eq(sign_hmac_sha256_hex("k", 1, "a\0b", 3, a), 0);
    ck_assert_int_eq(sign_hmac_sha256_hex("k", 1, "a", 1, b), 0);
    ck_assert_str_ne(a, b);
    for (int i = 0; i < SIGN_HEX_LEN; i++)
        ck_assert_msg((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'), "not lowercase hex: %s", a);
}
END_TEST

START_TEST(header_value)
{
    char v[SIGN_HEADER_LEN + 1];
    const char *body = "what do ya want for nothing?";
    ck_assert_int_eq(sign_header_value("Jefe", body, strlen(body), v), 0);
    ck_assert_str_eq(v, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    ck_assert_uint_eq(strlen(v), SIGN_HEADER_LEN);
}
END_TEST

static Suite *sign_suite(void)
{
    Suite *s = suite_create("sign");
    TCase *tc = tcase_create("hmac");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, rfc4231_case1);
    tcase_add_test(tc, rfc4231_case2_short_key);
    tcase_add_test(tc, rfc4231_case3);
    tcase_add_test(tc, rfc4231_case4);
    tcase_add_test(tc, rfc4231_case5_truncated_prefix);
    tcase_add_test(tc, rfc4231_case6_long_key);
    tcase_add_test(tc, rfc4231_case7_long_key_and_data);
    tcase_add_test(tc, empty_key_and_body);
    tcase_add_test(tc, body_is_hashed_by_length_not_by_nul);
    tcase_add_test(tc, header_value);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sign_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
