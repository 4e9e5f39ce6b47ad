/* test_ratelimit.c — token buckets per key: a burst is allowed then refused with the seconds
 * to wait, refill follows the rate, keys are independent, full buckets are forgotten (the
 * table stays as small as the active clients), and a clock going backwards refunds nothing. */
#include "base/ratelimit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S 1000000LL /* microseconds per second */

START_TEST(burst_then_refusal_then_refill)
{
    struct ratelimit *rl = ratelimit_new(2, 4); /* 2/s, bursts of 4 */
    int64_t t = 100 * S;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ratelimit_take(rl, "a", 1, t), 0);
    ck_assert_int_eq(ratelimit_take(rl, "a", 1, t), 1);         /* one token needs 0.5 s: Retry-After 1 */
    ck_assert_int_eq(ratelimit_take(rl, "a", 1, t + S / 2), 0); /* refilled one */
    ck_assert_int_ge(ratelimit_take(rl, "a", 1, t + S / 2), 1);
    ck_assert_int_eq(ratelimit_take(rl, "b", 1, t), 0);          /* another key has its own bucket */
    ck_assert_int_eq(ratelimit_take(rl, "a", 1, t + 10 * S), 0); /* a long pause: full again */
    ratelimit_free(rl);
}
END_TEST

START_TEST(retry_after_counts_whole_seconds)
{
    struct ratelimit *rl = ratelimit_new(1, 1); /* 1/s, no burst beyond one */
    int64_t t = 5 * S;
    ck_assert_int_eq(ratelimit_take(rl, "k", 1, t), 0);
    ck_assert_int_eq(ratelimit_take(rl, "k", 1, t), 1);
    /* refused requests do not spend tokens: after 1 s it is allowed again */
    ck_assert_int_eq(ratelimit_take(rl, "k", 1, t + S), 0);
    ratelimit_free(rl);
    rl = ratelimit_new(1, 0); /* burst 0 means burst = rate */
    ck_assert_int_eq(ratelimit_take(rl, "k", 1, t), 0);
    ck_assert_int_eq(ratelimit_take(rl, "k", 1, t), 1);
    ratelimit_free(rl);
}
END_TEST

START_TEST(full_buckets_are_forgotten)
{
    struct ratelimit *rl = ratelimit_new(100, 100);
    char key[32];
    int64_t t = S;
    for (int i = 0; i < 2000; i++) { /* 2,000 clients, one request each */
        int n = snprintf(key, sizeof key, "client-%d", i);
        ck_assert_int_eq(ratelimit_take(rl, key, (size_t)n, t), 0);
    }
    ck_assert_uint_le(ratelimit_size(rl), 2000);
    /* a second later every one of those buckets is full again: the next newcomers let the
     * table drop them instead of growing */
    for (int i = 0; i < 600; i++) {
        int n = snprintf(key, sizeof key, "late-%d", i);
        ck_assert_int_eq(ratelimit_take(rl, key, (size_t)n, t + 2 * S), 0);
    }
    ck_assert_uint_lt(ratelimit_size(rl), 1500);
    ratelimit_free(rl);
}
END_TEST

START_TEST(clock_going_backwards_refunds_nothing)
{
    struct ratelimit *rl = ratelimit_new(1, 1);
    ck_assert_int_eq(ratelimit_take(rl, "x", 1, 10 * S), 0);
    ck_assert_int_ge(ratelimit_take(rl, "x", 1, 5 * S), 1); /* earlier than the last take */
    ratelimit_free(rl);
}
END_TEST

static Suite *ratelimit_suite(void)
{
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("buckets");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, burst_then_refusal_then_refill);
    tcase_add_test(tc, retry_after_counts_whole_seconds);
    tcase_add_test(tc, full_buckets_are_forgotten);
    tcase_add_test(tc, clock_going_backwards_refunds_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ratelimit_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
