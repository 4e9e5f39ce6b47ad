/* test_dbfence.c — src/mysql/dbfence.h: a connection's ticket as the reconciler's ledger keeps it
 * (one word of a line of state_dir/in-doubt), written and read back. Taking a ticket and closing a
 * connection need a server: tests/integration/test_journal_fence.py. */
#include "mysql/dbfence.h"

#include <check.h>
#include <string.h>

START_TEST(test_a_ticket_reads_back_as_written)
{
    struct dbfence t = {
        .ok = 1, .conn_id = 18446744073709551615ull, .server = 0x0123456789abcdefull, .started_s = 1790000000};
    char word[DBFENCE_WORD_MAX];
    int n = dbfence_format(&t, word, sizeof word);
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, DBFENCE_WORD_MAX);
    ck_assert_str_eq(word, "18446744073709551615/0123456789abcdef/1790000000");
    struct dbfence back;
    ck_assert_int_eq(dbfence_parse(word, &back), 0);
    ck_assert(dbfence_same(&t, &back));
    ck_assert_uint_eq(back.conn_id, t.conn_id);
    ck_assert_uint_eq(back.server, t.server);
    ck_assert_int_eq(back.started_s, t.started_s);
}
END_TEST

START_TEST(test_no_ticket_is_a_dash)
{
    struct dbfence none = {0}, back = {.ok = 1};
    char word[DBFENCE_WORD_MAX];
    dbfence_format(&none, word, sizeof word);
    ck_assert_str_eq(word, "-");
    ck_assert_int_eq(dbfence_parse("-", &back), 0);
    ck_assert_int_eq(back.ok, 0);
    ck_assert(dbfence_same(&none, &back));
}
END_TEST

START_TEST(test_what_is_not_a_ticket_is_refused)
{
    static const char *bad[] = {"", "12", "12/ab", "12/ab/", "12/zz/3", "12/ab/3x", "x/ab/3", "12 /ab/3", "--"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct dbfence t = {.ok = 1};
        ck_assert_msg(dbfence_parse(bad[i], &t) == -1, "'%s' read as a ticket", bad[i]);
        ck_assert_int_eq(t.ok, 0);
    }
}
END_TEST

START_TEST(test_tickets_differ_by_any_part)
{
    struct dbfence a = {.ok = 1, .conn_id = 7, .server = 9, .started_s = 100};
    struct dbfence b = a, c = a, d = a;
    b.conn_id = 8;
    c.server = 10;
    d.started_s = 101;
    ck_assert(dbfence_same(&a, &a));
    ck_assert(!dbfence_same(&a, &b));
    ck_assert(!dbfence_same(&a, &c));
    ck_assert(!dbfence_same(&a, &d));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dbfence");
    TCase *tc = tcase_create("ticket");
    tcase_add_test(tc, test_a_ticket_reads_back_as_written);
    tcase_add_test(tc, test_no_ticket_is_a_dash);
    tcase_add_test(tc, test_what_is_not_a_ticket_is_refused);
    tcase_add_test(tc, test_tickets_differ_by_any_part);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
