/* test_clocksync.c — choosing this host's offset to the fleet's clock from TIME round trips:
 * an offset every sample agrees with is kept (on Redis's own host that is exactly 0, however
 * late an answer is read), a host that is off follows the overlap of the samples, and a
 * stepped clock is followed by its newest samples, not averaged with the old ones. */
#include "duties/clocksync.h"

#include <check.h>
#include <stdlib.h>

#define MS 1000LL /* microseconds per millisecond */

/* A round trip sent at `sent`, answered at `answered` (this host's clock), Redis saying
 * `redis`: the offset lay between sent - redis and answered - redis. */
static struct clock_bound trip(int64_t sent, int64_t redis, int64_t answered)
{
    return (struct clock_bound){sent - redis, answered - redis};
}

START_TEST(same_host_stays_exactly_zero)
{
    /* Redis on this host: its answer lies inside every round trip. A busy loop that reads the
     * answer 40 ms late, or a send that left 30 ms after it was stamped, must not move the
     * clock: with the middle of a round trip it would be off by 20 and 15 ms. */
    struct clock_bound b[3] = {
        trip(1000 * MS, 1000 * MS + 50, 1040 * MS), /* answer read 40 ms late */
        trip(2000 * MS, 2030 * MS, 2030 * MS + 80), /* sent 30 ms after stamping */
        trip(3000 * MS, 3000 * MS + 40, 3000 * MS + 90),
    };
    ck_assert_int_eq(clocksync_choose(b, 1, 0), 0);
    ck_assert_int_eq(clocksync_choose(b, 2, 0), 0);
    ck_assert_int_eq(clocksync_choose(b, 3, 0), 0);
}
END_TEST

START_TEST(a_host_that_is_off_follows_the_overlap)
{
    /* this host 5 s ahead: the first, slow sample puts the offset within its 400 us; a
     * tighter one narrows it to the truth */
    int64_t off = 5000 * MS;
    struct clock_bound b[2];
    b[1] = trip(100 * MS, 100 * MS - off + 100, 100 * MS + 400);
    int64_t first = clocksync_choose(&b[1], 1, 0);
    ck_assert_int_ge(first, off - 100);
    ck_assert_int_le(first, off + 300);
    b[0] = trip(200 * MS, 200 * MS - off + 10, 200 * MS + 20); /* newest first */
    int64_t second = clocksync_choose(b, 2, first);
    ck_assert_int_ge(second, off - 10);
    ck_assert_int_le(second, off + 10);
    /* a late answer afterwards agrees with the offset in use: nothing moves */
    struct clock_bound c[3] = {trip(300 * MS, 300 * MS - off + 5, 300 * MS + 60 * MS), b[0], b[1]};
    ck_assert_int_eq(clocksync_choose(c, 3, second), second);
}
END_TEST

START_TEST(a_stepped_clock_is_followed_by_its_newest_samples)
{
    /* the host's clock was stepped 2 s forward between the older samples and the newer: the
     * older ones no longer agree and are not blended in */
    struct clock_bound b[4] = {
        trip(9000 * MS, 7000 * MS + 20, 9000 * MS + 40), /* newest */
        trip(8000 * MS, 6000 * MS + 10, 8000 * MS + 30),
        trip(5000 * MS, 5000 * MS + 10, 5000 * MS + 30),
        trip(4000 * MS, 4000 * MS + 10, 4000 * MS + 30),
    };
    int64_t off = clocksync_choose(b, 4, 0);
    ck_assert_int_ge(off, 2000 * MS - 20);
    ck_assert_int_le(off, 2000 * MS + 20);
}
END_TEST

START_TEST(a_lost_agreement_moves_to_the_overlap)
{
    /* the offset in use lies outside the newest bound (the fleet's clock was stepped): it moves
     * to the middle of what the samples that agree allow */
    struct clock_bound b[1] = {{-300, -100}};
    ck_assert_int_eq(clocksync_choose(b, 1, 0), -200);
    ck_assert_int_eq(clocksync_choose(b, 1, -250), -250);
}
END_TEST

static Suite *clocksync_suite(void)
{
    Suite *s = suite_create("clocksync");
    TCase *tc = tcase_create("choose");
    tcase_add_test(tc, same_host_stays_exactly_zero);
    tcase_add_test(tc, a_host_that_is_off_follows_the_overlap);
    tcase_add_test(tc, a_stepped_clock_is_followed_by_its_newest_samples);
    tcase_add_test(tc, a_lost_agreement_moves_to_the_overlap);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(clocksync_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
