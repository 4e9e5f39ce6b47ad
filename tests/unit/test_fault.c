/* test_fault.c — the fault seam's spec (fault.h): what parses, what is refused with a message
 * naming the bad rule, and which arrivals fire (the Nth and K-1 after it, per thread name when
 * one is given, nothing when disarmed). */
#include "base/fault.h"
#include "base/log.h"

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void teardown(void)
{
    fault_disarm();
}

START_TEST(fires_at_the_nth_arrival_for_k_arrivals)
{
    char err[200];
    ck_assert_int_eq(fault_arm("mysql.commit=lost@3+2", err, sizeof err), 0);
    ck_assert(fault_armed(FP_MYSQL_COMMIT));
    ck_assert(!fault_armed(FP_MYSQL_EXEC));
    enum fault_action seen[7];
    for (int i = 0; i < 7; i++)
        seen[i] = fault_at(FP_MYSQL_COMMIT);
    const enum fault_action want[7] = {FA_NONE, FA_NONE, FA_LOST, FA_LOST, FA_NONE, FA_NONE, FA_NONE};
    for (int i = 0; i < 7; i++)
        ck_assert_msg(seen[i] == want[i], "arrival %d: %d, want %d", i + 1, seen[i], want[i]);
    ck_assert_int_eq(fault_at(FP_MYSQL_EXEC), FA_NONE); /* another point is not counted */
}
END_TEST

START_TEST(several_rules_and_points)
{
    char err[200];
    ck_assert_int_eq(fault_arm("mysql.exec=fail@1,redis.send=fail@2,redis.reply=hang@1", err, sizeof err), 0);
    ck_assert_int_eq(fault_at(FP_MYSQL_EXEC), FA_FAIL);
    ck_assert_int_eq(fault_at(FP_MYSQL_EXEC), FA_NONE);
    ck_assert_int_eq(fault_at(FP_REDIS_SEND), FA_NONE);
    ck_assert_int_eq(fault_at(FP_REDIS_SEND), FA_FAIL);
    ck_assert_int_eq(fault_at(FP_REDIS_REPLY), FA_HANG);
    fault_disarm();
    ck_assert(!fault_armed(FP_REDIS_REPLY));
    ck_assert_int_eq(fault_at(FP_MYSQL_EXEC), FA_NONE);
}
END_TEST

static void *arrive_as(void *name)
{
    log_set_thread_name(name);
    return (void *)(long)fault_at(FP_MYSQL_COMMIT);
}

START_TEST(a_thread_name_limits_the_rule_to_that_thread)
{
    char err[200];
    ck_assert_int_eq(fault_arm("journal:mysql.commit=fail@1", err, sizeof err), 0);
    static char retention[] = "retention", journal[] = "journal"; /* outlive the threads */
    pthread_t t;
    void *got;
    ck_assert_int_eq(pthread_create(&t, NULL, arrive_as, retention), 0);
    pthread_join(t, &got);
    ck_assert_int_eq((long)got, FA_NONE); /* other threads do not even count */
    ck_assert_int_eq(pthread_create(&t, NULL, arrive_as, journal), 0);
    pthread_join(t, &got);
    ck_assert_int_eq((long)got, FA_FAIL);
}
END_TEST

START_TEST(bad_specs_are_refused_naming_the_rule)
{
    static const char *const bad[] = {
        "mysql.commit",          /* no action */
        "mysql.commit=lost",     /* no count */
        "mysql.commit=boom@1",   /* no such action */
        "mysql.rollback=fail@1", /* no such point */
        "redis.send=lost@1",     /* a send cannot lose an answer */
        "redis.reply=fail@1",    /* a reply cannot fail before it is sent */
        "mysql.exec=fail@0",     /* arrivals count from 1 */
        "mysql.exec=fail@1+0",   /* at least once */
        "mysql.exec=fail@1x",    /* trailing junk */
        "mysql.exec=fail@1,",    /* empty rule */
        "a-thread-name-much-too-long-to-keep:mysql.exec=fail@1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[200] = "";
        ck_assert_msg(fault_arm(bad[i], err, sizeof err) == -1, "'%s' was accepted", bad[i]);
        ck_assert_msg(strstr(err, "HOURGLASS_FAULTS") != NULL, "'%s': %s", bad[i], err);
    }
    /* a refused spec leaves what was armed before */
    char err[200];
    ck_assert_int_eq(fault_arm("mysql.exec=fail@1", err, sizeof err), 0);
    ck_assert_int_eq(fault_arm("mysql.exec=nope@1", err, sizeof err), -1);
    ck_assert(fault_armed(FP_MYSQL_EXEC));
}
END_TEST

static Suite *fault_suite(void)
{
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, fires_at_the_nth_arrival_for_k_arrivals);
    tcase_add_test(tc, several_rules_and_points);
    tcase_add_test(tc, a_thread_name_limits_the_rule_to_that_thread);
    tcase_add_test(tc, bad_specs_are_refused_naming_the_rule);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fault_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
