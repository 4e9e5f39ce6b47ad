/* test_farpend.c — a journal's pending far counts (farpend.h): kept in topic_cmp order however
 * they are added, summed per topic, zeros left out of the row's text, the text read back into
 * the same counts (and added to what a map holds: the pager sums several rows), text that is
 * not such an array refused, names too long refused, and a copy independent of its source. */
#include "farpend.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *text_of(const struct farpend *m)
{
    struct sbuf sb = SBUF_INIT;
    farpend_json(m, &sb);
    ck_assert(!sb.oom);
    char *s = strndup(sb.data, sb.len);
    sb_free(&sb);
    return s;
}

START_TEST(counts_are_summed_per_topic_in_lock_order)
{
    struct farpend m = FARPEND_INIT;
    const char *adds[] = {"orders", "mail", "orders", "mai", "b", "mail", "orders"};
    for (size_t i = 0; i < sizeof adds / sizeof adds[0]; i++)
        ck_assert_int_eq(farpend_add(&m, adds[i], strlen(adds[i]), 1), 0);
    ck_assert_int_eq(m.n, 4);
    for (int i = 1; i < m.n; i++) /* the order far_count rows are locked in (job.h) */
        ck_assert_int_lt(topic_cmp(m.e[i - 1].topic, m.e[i - 1].len, m.e[i].topic, m.e[i].len), 0);
    char *t = text_of(&m);
    ck_assert_str_eq(t, "[[\"b\",1],[\"mai\",1],[\"mail\",2],[\"orders\",3]]");
    free(t);
    ck_assert_int_eq(farpend_nonzero(&m), 4);
    farpend_free(&m);
}
END_TEST

START_TEST(zero_counts_stay_out_of_the_text)
{
    struct farpend m = FARPEND_INIT;
    ck_assert_int_eq(farpend_add(&m, "a", 1, 2), 0);
    ck_assert_int_eq(farpend_add(&m, "z", 1, 5), 0);
    ck_assert_int_eq(farpend_add(&m, "a", 1, -2), 0);
    ck_assert_int_eq(farpend_nonzero(&m), 1);
    char *t = text_of(&m);
    ck_assert_str_eq(t, "[[\"z\",5]]");
    free(t);
    farpend_clear(&m);
    t = text_of(&m);
    ck_assert_str_eq(t, "[]");
    free(t);
    farpend_free(&m);
}
END_TEST

START_TEST(text_reads_back_and_adds_up)
{
    struct farpend m = FARPEND_INIT, back = FARPEND_INIT;
    for (int i = 0; i < 200; i++) {
        char name[16];
        int len = snprintf(name, sizeof name, "t.%d", i % 37);
        ck_assert_int_eq(farpend_add(&m, name, (size_t)len, i % 5 == 0 ? -1 : 1), 0);
    }
    char *t = text_of(&m);
    ck_assert_int_eq(farpend_parse_add(&back, t, strlen(t)), 0);
    char *again = text_of(&back);
    ck_assert_str_eq(again, t);
    free(again);
    /* a second row's counts add to the first's */
    const char *more = "[[\"t.0\",10],[\"new\",-3]]";
    ck_assert_int_eq(farpend_parse_add(&back, more, strlen(more)), 0);
    for (int i = 0; i < back.n; i++) {
        int64_t want = 0;
        for (int k = 0; k < m.n; k++)
            if (strcmp(m.e[k].topic, back.e[i].topic) == 0)
                want = m.e[k].jobs;
        want += strcmp(back.e[i].topic, "t.0") == 0 ? 10 : strcmp(back.e[i].topic, "new") == 0 ? -3 : 0;
        ck_assert_int_eq(back.e[i].jobs, want);
    }
    ck_assert_int_eq(back.n, m.n + 1);
    free(t);
    farpend_free(&m);
    farpend_free(&back);
}
END_TEST

START_TEST(text_that_is_not_pairs_is_refused)
{
    const char *bad[] = {"", "{}", "[[\"a\"]]", "[[\"a\",1,2]]", "[[1,1]]", "[[\"a\",\"1\"]]", "[[\"a\",1.5]]",
                         "[[\"\",1]]", "nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct farpend m = FARPEND_INIT;
        ck_assert_msg(farpend_parse_add(&m, bad[i], strlen(bad[i])) < 0, "accepted %s", bad[i]);
        farpend_free(&m);
    }
}
END_TEST

START_TEST(names_too_long_are_refused)
{
    struct farpend m = FARPEND_INIT;
    char name[TOPIC_MAX + 2];
    memset(name, 'x', sizeof name);
    ck_assert_int_eq(farpend_add(&m, name, TOPIC_MAX, 1), 0);
    ck_assert_int_lt(farpend_add(&m, name, TOPIC_MAX + 1, 1), 0);
    ck_assert_int_lt(farpend_add(&m, name, 0, 1), 0);
    ck_assert_int_eq(m.n, 1);
    farpend_free(&m);
}
END_TEST

START_TEST(a_copy_is_its_own)
{
    struct farpend a = FARPEND_INIT, b = FARPEND_INIT;
    ck_assert_int_eq(farpend_add(&b, "old", 3, 9), 0);
    for (int i = 0; i < 40; i++) {
        char name[8];
        int len = snprintf(name, sizeof name, "q%d", i);
        ck_assert_int_eq(farpend_add(&a, name, (size_t)len, i + 1), 0);
    }
    ck_assert_int_eq(farpend_copy(&b, &a), 0);
    ck_assert_int_eq(farpend_add(&b, "q0", 2, 100), 0);
    ck_assert_int_eq(b.n, 40);
    ck_assert_int_eq(a.e[0].jobs + 100, b.e[0].jobs);
    char *ta = text_of(&a);
    farpend_clear(&b);
    ck_assert_int_eq(farpend_copy(&b, &a), 0);
    char *tb = text_of(&b);
    ck_assert_str_eq(ta, tb);
    free(ta);
    free(tb);
    farpend_free(&a);
    farpend_free(&b);
}
END_TEST

static Suite *farpend_suite(void)
{
    Suite *s = suite_create("farpend");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, counts_are_summed_per_topic_in_lock_order);
    tcase_add_test(tc, zero_counts_stay_out_of_the_text);
    tcase_add_test(tc, text_reads_back_and_adds_up);
    tcase_add_test(tc, text_that_is_not_pairs_is_refused);
    tcase_add_test(tc, names_too_long_are_refused);
    tcase_add_test(tc, a_copy_is_its_own);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(farpend_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
