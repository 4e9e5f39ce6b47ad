/* test_sha1.c — src/sha1.h against the FIPS 180 test vectors and the padding boundaries. */
#include "sha1.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void check_hex(const void *data, size_t len, const char *want)
{
    char hex[41];
    memset(hex, 'X', sizeof hex);
    sha1_hex(data, len, hex);
    ck_assert_int_eq(hex[40], '\0');
    ck_assert_msg(strcmp(hex, want) == 0, "len %zu: got %s, want %s", len, hex, want);
}

START_TEST(test_fips_empty)
{
    check_hex("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}
END_TEST

START_TEST(test_fips_abc)
{
    check_hex("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
}
END_TEST

START_TEST(test_fips_448_bits)
{
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    ck_assert_uint_eq(strlen(m) * 8, 448);
    check_hex(m, strlen(m), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}
END_TEST

START_TEST(test_fips_896_bits)
{
    const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
                    "nopqrstu";
    ck_assert_uint_eq(strlen(m) * 8, 896);
    check_hex(m, strlen(m), "a49b2446a02c645bf419f995b67091253a04a259");
}
END_TEST

START_TEST(test_fips_million_a)
{
    size_t n = 1000000;
    char *m = malloc(n);
    ck_assert_ptr_nonnull(m);
    memset(m, 'a', n);
    check_hex(m, n, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    free(m);
}
END_TEST

START_TEST(test_padding_boundaries)
{
    /* n x 'a' around the one-block / two-block padding edges (55/56 and 119/120 bytes) and
     * whole blocks; expected digests computed independently (Python hashlib). */
    static const struct {
        size_t n;
        const char *hex;
    } v[] = {
        {55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"},  {56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"},
        {57, "f08f24908d682555111be7ff6f004e78283d989a"},  {63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"},
        {64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"},  {65, "11655326c708d70319be2610e8a57d9a5b959d3b"},
        {119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"}, {120, "f34c1488385346a55709ba056ddd08280dd4c6d6"},
        {127, "89d95fa32ed44a7c610b7ee38517ddf57e0bb975"}, {128, "ad5b3fdbcb526778c2839d2f151ea753995e26a0"},
        {129, "d96debf1bdcbc896e6c134ea76e8141f40d78536"},
    };
    char buf[200];
    memset(buf, 'a', sizeof buf);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        check_hex(buf, v[i].n, v[i].hex);
}
END_TEST

START_TEST(test_all_byte_values)
{
    /* bytes 0..255 once each, including NULs and high bytes: not a C string */
    unsigned char m[256];
    for (int i = 0; i < 256; i++)
        m[i] = (unsigned char)i;
    check_hex(m, sizeof m, "4916d6bdb7f78e6803698cab32d1586ea457dfc8");
}
END_TEST

START_TEST(test_reads_only_len_bytes)
{
    /* "abc" followed by garbage that must not be hashed */
    check_hex("abcdef", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
}
END_TEST

static Suite *sha1_suite(void)
{
    Suite *s = suite_create("sha1");
    TCase *tc = tcase_create("vectors");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_fips_empty);
    tcase_add_test(tc, test_fips_abc);
    tcase_add_test(tc, test_fips_448_bits);
    tcase_add_test(tc, test_fips_896_bits);
    tcase_add_test(tc, test_fips_million_a);
    tcase_add_test(tc, test_padding_boundaries);
    tcase_add_test(tc, test_all_byte_values);
    tcase_add_test(tc, test_reads_only_len_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sha1_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
