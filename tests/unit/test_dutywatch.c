/* test_dutywatch.c — src/core/dutywatch.h: when a background duty counts as stuck, and what
 * /health and /metrics say of it. Times are passed in, so no test waits for a bound. */
#include "core/dutywatch.h"
#include "base/clock.h"
#include "base/sbuf.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static char *stuck_at(int64_t now, int *n)
{
    static struct sbuf sb;
    sb_free(&sb);
    sb = (struct sbuf)SBUF_INIT;
    *n = dutywatch_stuck_json(&sb, now);
    sb_putc(&sb, '\0');
    return sb.data;
}

START_TEST(nothing_reported_is_not_stuck)
{
    dutywatch_reset();
    int n;
    ck_assert_str_eq(stuck_at(clock_unix_ms() + 60000, &n), "");
    ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(failing_past_its_bound_is_stuck_with_its_error)
{
    dutywatch_reset();
    int64_t t0 = clock_unix_ms();
    dutywatch_ok(DUTY_OUTBOX, 3);
    dutywatch_failed(DUTY_OUTBOX, 3, "Redis down");
    int n;
    ck_assert_str_eq(stuck_at(t0 + DUTYWATCH_BOUND_MS - 100, &n), "");
    const char *s = stuck_at(t0 + DUTYWATCH_BOUND_MS + 2000, &n);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_nonnull(strstr(s, "\"duty\":\"outbox\",\"shard\":3,\"sinceMs\":"));
    ck_assert_ptr_nonnull(strstr(s, "\"error\":\"Redis down\""));
    ck_assert_int_eq(strncmp(s, ",\"stuck\":[{", 11), 0);
}
END_TEST

START_TEST(a_success_ends_it)
{
    dutywatch_reset();
    int64_t t0 = clock_unix_ms();
    dutywatch_failed(DUTY_RECONCILER, -1, "MySQL unavailable");
    dutywatch_ok(DUTY_RECONCILER, -1);
    int n;
    stuck_at(t0 + DUTYWATCH_BOUND_MS + 2000, &n);
    ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(a_periodic_duty_that_falls_silent_is_stuck)
{
    dutywatch_reset();
    int64_t t0 = clock_unix_ms();
    dutywatch_ok(DUTY_PAGER, -1);      /* periodic: hangs are seen */
    dutywatch_ok(DUTY_RECONCILER, -1); /* on demand: silence is fine */
    int n;
    const char *s = stuck_at(t0 + DUTYWATCH_BOUND_MS + 2000, &n);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_nonnull(strstr(s, "\"duty\":\"pager\",\"shard\":null"));
    ck_assert_ptr_nonnull(strstr(s, "hung"));
}
END_TEST

START_TEST(a_cleared_duty_is_not_watched)
{
    dutywatch_reset();
    int64_t t0 = clock_unix_ms();
    dutywatch_failed(DUTY_MOVER, 5, "Redis down");
    dutywatch_clear(DUTY_MOVER, 5);
    int n;
    stuck_at(t0 + DUTYWATCH_BOUND_MS + 2000, &n);
    ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(a_duty_of_every_shard_at_once)
{
    dutywatch_reset();
    int64_t t0 = clock_unix_ms();
    dutywatch_all_shards(DUTY_OUTBOX, 3, "WRONGTYPE");
    int n;
    const char *s = stuck_at(t0 + DUTYWATCH_BOUND_MS + 1000, &n);
    ck_assert_int_eq(n, 3);
    ck_assert_ptr_nonnull(strstr(s, "\"shard\":0,"));
    ck_assert_ptr_nonnull(strstr(s, "\"shard\":2,"));
    ck_assert_ptr_null(strstr(s, "\"shard\":3,"));
    dutywatch_all_shards(DUTY_OUTBOX, 3, NULL);
    stuck_at(clock_unix_ms() + 1000, &n); /* within the bound of that success (periodic) */
    ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(metrics_count_and_name_them)
{
    dutywatch_reset();
    int64_t t0 = clock_unix_ms();
    dutywatch_failed(DUTY_MOVER, 1, "x");
    dutywatch_failed(DUTY_SCHEDULER, -1, "y");
    struct sbuf sb = SBUF_INIT;
    dutywatch_metrics(&sb, t0 + DUTYWATCH_BOUND_MS + 1000);
    sb_putc(&sb, '\0');
    ck_assert_ptr_nonnull(strstr(sb.data, "hourglass_duties_stuck 2\n"));
    ck_assert_ptr_nonnull(strstr(sb.data, "hourglass_duty_stuck_seconds{duty=\"mover\",shard=\"1\"} "));
    ck_assert_ptr_nonnull(strstr(sb.data, "hourglass_duty_stuck_seconds{duty=\"scheduler\",shard=\"\"} "));
    sb_free(&sb);
    sb = (struct sbuf)SBUF_INIT;
    dutywatch_metrics(&sb, t0);
    sb_putc(&sb, '\0');
    ck_assert_ptr_nonnull(strstr(sb.data, "hourglass_duties_stuck 0\n"));
    sb_free(&sb);
}
END_TEST

static Suite *dutywatch_suite(void)
{
    Suite *s = suite_create("dutywatch");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, nothing_reported_is_not_stuck);
    tcase_add_test(tc, failing_past_its_bound_is_stuck_with_its_error);
    tcase_add_test(tc, a_success_ends_it);
    tcase_add_test(tc, a_periodic_duty_that_falls_silent_is_stuck);
    tcase_add_test(tc, a_cleared_duty_is_not_watched);
    tcase_add_test(tc, a_duty_of_every_shard_at_once);
    tcase_add_test(tc, metrics_count_and_name_them);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dutywatch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
