/* test_dbnode.c — src/mysql/dbnode.h: the one node in use for the whole process ([mysql] hosts),
 * and how a failure moves it. */
#include "mysql/dbnode.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct config cfg;

static int setup_with(const char *hosts)
{
    dbnode_reset();
    config_defaults(&cfg);
    snprintf(cfg.mysql_hosts, sizeof cfg.mysql_hosts, "%s", hosts);
    return dbnode_setup(&cfg);
}

START_TEST(test_no_list_is_one_server)
{
    ck_assert_int_eq(setup_with(""), 0);
    ck_assert_int_eq(dbnode_count(), 0);
    ck_assert_int_eq(dbnode_current(), 0);
    ck_assert_int_eq(dbnode_failed(0, "refused"), 0); /* nothing to move to */
    ck_assert_uint_eq(dbnode_switches(), 0);
}
END_TEST

START_TEST(test_list_read_once_in_order)
{
    ck_assert_int_eq(setup_with("a:1, b:2,c"), 3);
    ck_assert_str_eq(dbnode_at(0)->host, "a");
    ck_assert_int_eq(dbnode_at(1)->port, 2);
    ck_assert_int_eq(dbnode_at(2)->port, 3306); /* [mysql] port */
    /* the process has one config: a second setup keeps the first list */
    snprintf(cfg.mysql_hosts, sizeof cfg.mysql_hosts, "x:9");
    ck_assert_int_eq(dbnode_setup(&cfg), 3);
    ck_assert_str_eq(dbnode_at(0)->host, "a");
}
END_TEST

START_TEST(test_failure_moves_to_the_next_round)
{
    ck_assert_int_eq(setup_with("a:1,b:2,c:3"), 3);
    ck_assert_int_eq(dbnode_current(), 0);
    ck_assert_int_eq(dbnode_failed(0, "refused"), 1);
    ck_assert_int_eq(dbnode_failed(1, "not ready"), 2);
    ck_assert_int_eq(dbnode_failed(2, "refused"), 0); /* round */
    ck_assert_int_eq(dbnode_current(), 0);
    ck_assert_uint_eq(dbnode_switches(), 3);
}
END_TEST

START_TEST(test_a_stale_failure_does_not_move_it_again)
{
    /* two threads saw node 0 fail: the first moves the process to 1, the second's report of 0
     * must not skip node 1 (it would split the threads over two nodes again) */
    ck_assert_int_eq(setup_with("a:1,b:2,c:3"), 3);
    ck_assert_int_eq(dbnode_failed(0, "refused"), 1);
    ck_assert_int_eq(dbnode_failed(0, "refused"), 1);
    ck_assert_int_eq(dbnode_current(), 1);
    ck_assert_uint_eq(dbnode_switches(), 1);
}
END_TEST

#define THREADS 8
static void *fail_node0(void *arg)
{
    (void)arg;
    dbnode_failed(0, "refused");
    return NULL;
}

START_TEST(test_concurrent_failures_move_once)
{
    ck_assert_int_eq(setup_with("a:1,b:2,c:3"), 3);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, fail_node0, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(dbnode_current(), 1);
    ck_assert_uint_eq(dbnode_switches(), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dbnode");
    TCase *tc = tcase_create("node");
    tcase_add_test(tc, test_no_list_is_one_server);
    tcase_add_test(tc, test_list_read_once_in_order);
    tcase_add_test(tc, test_failure_moves_to_the_next_round);
    tcase_add_test(tc, test_a_stale_failure_does_not_move_it_again);
    tcase_add_test(tc, test_concurrent_failures_move_once);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
