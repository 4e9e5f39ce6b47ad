/* test_pager.c — the pager's timing (pager.h): how far ahead far jobs are paged (lead) and in
 * what steps (bucket), for the horizons people set. The lead is as long as the horizon allows
 * less a margin of min(60 s, horizon / 2), and whatever the horizon the paging front
 * (bucket_end(now + lead) <= now + lead + bucket) stays behind where far pushes begin
 * (now + horizon), so paging never races a push being made. */
#include "core/config.h"
#include "durable/pager.h"

#include <check.h>
#include <stdlib.h>

static int64_t lead(int64_t horizon)
{
    struct config cfg = {.horizon = horizon};
    return pager_lead_ms(&cfg);
}

static int64_t bucket(int64_t horizon)
{
    struct config cfg = {.horizon = horizon};
    return pager_bucket_ms(&cfg);
}

START_TEST(lead_and_bucket_of_common_horizons)
{
    /* horizon 0: nothing is pushed far; rows of an earlier setting page in a minute ahead */
    ck_assert_int_eq(lead(0), 60000);
    ck_assert_int_eq(bucket(0), 10000);
    /* short horizons (tests): half of it */
    ck_assert_int_eq(lead(3000), 1500);
    ck_assert_int_eq(bucket(3000), 375);
    ck_assert_int_eq(lead(20000), 10000);
    ck_assert_int_eq(lead(120000), 60000);
    /* beyond two minutes: all of it but the last minute */
    ck_assert_int_eq(lead(180000), 120000);
    ck_assert_int_eq(bucket(180000), 10000);
    ck_assert_int_eq(lead(3600000), 3540000); /* the default hour */
    ck_assert_int_eq(bucket(3600000), 10000);
    ck_assert_int_eq(lead(86400000), 86340000);
}
END_TEST

START_TEST(paging_stays_behind_the_far_boundary)
{
    /* every horizon from 1 s to 10 h, in steps that hit both sides of the 2-minute bend */
    for (int64_t h = 1000; h <= 36000000; h += h < 200000 ? 500 : 60000) {
        int64_t l = lead(h), b = bucket(h);
        ck_assert_int_gt(l, 0);
        ck_assert_int_ge(l, h / 2); /* never shorter than the old min(60 s, h / 2) rule... */
        ck_assert_int_lt(l + b, h); /* ...and the paging front stays behind now + horizon */
    }
}
END_TEST

START_TEST(pacing_leaves_full_speed_time_and_spares_short_leads)
{
    for (int64_t h = 1000; h <= 36000000; h += h < 200000 ? 500 : 60000) {
        struct config cfg = {.horizon = h};
        int64_t l = lead(h), slack = pager_pace_slack_ms(&cfg);
        ck_assert_int_ge(slack, l < 60000 ? l : 60000);
        if (l <= 60000)
            ck_assert_int_ge(slack, l); /* a short lead (tests' horizons) is never paced */
        else
            ck_assert_int_ge(slack, l / 4); /* pacing gives up at 3/4 of the lead: full speed after */
    }
    /* the default hour: a million jobs due in one minute fit in the paced part of the lead */
    struct config hour = {.horizon = 3600000};
    ck_assert_int_ge((lead(3600000) - pager_pace_slack_ms(&hour)) / 1000 * PAGER_PACED_RATE, 1000000);
}
END_TEST

static Suite *pager_suite(void)
{
    Suite *s = suite_create("pager");
    TCase *tc = tcase_create("timing");
    tcase_add_test(tc, lead_and_bucket_of_common_horizons);
    tcase_add_test(tc, paging_stays_behind_the_far_boundary);
    tcase_add_test(tc, pacing_leaves_full_speed_time_and_spares_short_leads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pager_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
