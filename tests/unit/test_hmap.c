/* test_hmap.c — the one hash map: put/get/replace/remove, keys of any bytes (NUL included),
 * pointer keys, growth, backward-shift deletion keeping every other key findable (checked
 * against a plain array model with random operations), and iteration. */
#include "base/hmap.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(hash_is_fnv1a)
{
    /* FNV-1a 64 reference values: "" -> offset basis, "a" -> 0xaf63dc4c8601ec8c */
    ck_assert_uint_eq(hmap_hash_bytes("", 0), UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(hmap_hash_bytes("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(hmap_hash_bytes("foobar", 6), UINT64_C(0x85944171f73967e8));
}
END_TEST

START_TEST(put_get_replace_remove)
{
    struct hmap m = HMAP_INIT;
    int a = 1, b = 2;
    ck_assert_ptr_null(hmap_get(&m, "x", 1));
    ck_assert_ptr_null(hmap_remove(&m, "x", 1));
    ck_assert_int_eq(hmap_put(&m, "x", 1, &a), 0);
    ck_assert_ptr_eq(hmap_get(&m, "x", 1), &a);
    ck_assert_int_eq(hmap_put(&m, "x", 1, &b), 0); /* replaces */
    ck_assert_ptr_eq(hmap_get(&m, "x", 1), &b);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_int_eq(hmap_put(&m, "x", 1, NULL), -1); /* NULL values are refused */
    ck_assert_ptr_eq(hmap_remove(&m, "x", 1), &b);
    ck_assert_ptr_null(hmap_get(&m, "x", 1));
    ck_assert_uint_eq(m.count, 0);
    hmap_free(&m);
}
END_TEST

START_TEST(keys_are_bytes_not_strings)
{
    struct hmap m = HMAP_INIT;
    int a = 1, b = 2, c = 3;
    ck_assert_int_eq(hmap_put(&m, "ab\0c", 4, &a), 0);
    ck_assert_int_eq(hmap_put(&m, "ab\0d", 4, &b), 0);
    ck_assert_int_eq(hmap_put(&m, "ab", 2, &c), 0); /* a prefix is another key */
    ck_assert_ptr_eq(hmap_get(&m, "ab\0c", 4), &a);
    ck_assert_ptr_eq(hmap_get(&m, "ab\0d", 4), &b);
    ck_assert_ptr_eq(hmap_get(&m, "ab", 2), &c);
    ck_assert_ptr_null(hmap_get(&m, "ab\0", 3));
    hmap_free(&m);
}
END_TEST

START_TEST(pointer_keys)
{
    struct hmap m = HMAP_INIT;
    int objs[100];
    for (int i = 0; i < 100; i++) {
        int *p = &objs[i];
        ck_assert_int_eq(hmap_put(&m, &p, sizeof p, p), 0);
    }
    for (int i = 0; i < 100; i++)
        ck_assert_ptr_eq(hmap_get_ptr(&m, &objs[i]), &objs[i]);
    ck_assert_ptr_null(hmap_get_ptr(&m, &m));
    hmap_free(&m);
}
END_TEST

/* Random puts and removes against a model: after every step, every key is found with its
 * value and every removed key is absent (backward-shift deletion must not lose a run). */
START_TEST(random_operations_match_a_model)
{
    enum { KEYS = 500, STEPS = 20000 };
    static int values[KEYS];
    static int present[KEYS];
    struct hmap m = HMAP_INIT;
    srand(12345);
    char key[16];
    for (int step = 0; step < STEPS; step++) {
        int k = rand() % KEYS;
        int len = snprintf(key, sizeof key, "t%d", k);
        if (rand() % 3) {
            ck_assert_int_eq(hmap_put(&m, key, (size_t)len, &values[k]), 0);
            present[k] = 1;
        } else {
            ck_assert_ptr_eq(hmap_remove(&m, key, (size_t)len), present[k] ? &values[k] : NULL);
            present[k] = 0;
        }
        if (step % 1000 == 0 || step == STEPS - 1) {
            size_t n = 0;
            for (int i = 0; i < KEYS; i++) {
                len = snprintf(key, sizeof key, "t%d", i);
                ck_assert_ptr_eq(hmap_get(&m, key, (size_t)len), present[i] ? &values[i] : NULL);
                n += (size_t)present[i];
            }
            ck_assert_uint_eq(m.count, n);
        }
    }
    hmap_free(&m);
}
END_TEST

START_TEST(iteration_visits_each_entry_once)
{
    struct hmap m = HMAP_INIT;
    static int values[300];
    char key[16];
    for (int i = 0; i < 300; i++) {
        int len = snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(hmap_put(&m, key, (size_t)len, &values[i]), 0);
    }
    static int seen[300];
    size_t pos = 0, n = 0, len;
    const void *k;
    int *v;
    while ((v = hmap_next(&m, &pos, &k, &len)) != NULL) {
        int i = (int)(v - values);
        ck_assert_int_ge(i, 0);
        ck_assert_int_lt(i, 300);
        ck_assert_int_eq(seen[i], 0);
        seen[i] = 1;
        int want = snprintf(key, sizeof key, "k%d", i);
        ck_assert_uint_eq(len, (size_t)want);
        ck_assert_int_eq(memcmp(k, key, len), 0);
        n++;
    }
    ck_assert_uint_eq(n, 300);
    hmap_free(&m);
    ck_assert_uint_eq(m.count, 0);
    pos = 0;
    ck_assert_ptr_null(hmap_next(&m, &pos, NULL, NULL)); /* freed map is empty and reusable */
    ck_assert_int_eq(hmap_put(&m, "again", 5, &values[0]), 0);
    ck_assert_ptr_eq(hmap_get(&m, "again", 5), &values[0]);
    hmap_free(&m);
}
END_TEST

static Suite *hmap_suite(void)
{
    Suite *s = suite_create("hmap");
    TCase *tc = tcase_create("map");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, hash_is_fnv1a);
    tcase_add_test(tc, put_get_replace_remove);
    tcase_add_test(tc, keys_are_bytes_not_strings);
    tcase_add_test(tc, pointer_keys);
    tcase_add_test(tc, random_operations_match_a_model);
    tcase_add_test(tc, iteration_visits_each_entry_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hmap_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
