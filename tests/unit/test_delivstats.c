/* test_delivstats.c — src/delivery/delivstats.h: per topic and route delivery counts and latency, as
 * Prometheus text. */
#include "delivery/delivstats.h"
#include "base/sbuf.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static char *render(void)
{
    struct sbuf sb = SBUF_INIT;
    delivstats_render(&sb);
    char *s = strndup(sb.data ? sb.data : "", sb.len);
    sb_free(&sb);
    return s;
}

START_TEST(test_counts_by_topic_route_and_outcome)
{
    delivstats_record("orders", 6, "webhook", DS_DELIVERED, 3000);
    delivstats_record("orders", 6, "webhook", DS_DELIVERED, 40000);
    delivstats_record("orders", 6, "webhook", DS_FAILED, 2000000);
    delivstats_record("orders", 6, "amqp", DS_UNDELIVERED, 100);
    ck_assert_uint_eq(delivstats_count("orders", "webhook", DS_DELIVERED), 2);
    ck_assert_uint_eq(delivstats_count("orders", "webhook", DS_FAILED), 1);
    ck_assert_uint_eq(delivstats_count("orders", "amqp", DS_UNDELIVERED), 1);
    ck_assert_uint_eq(delivstats_count("orders", "amqp", DS_DELIVERED), 0);
    ck_assert_uint_eq(delivstats_count("other", "webhook", DS_DELIVERED), 0);
    char *s = render();
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_deliveries_total{topic=\"orders\",route=\"webhook\",outcome=\"delivered\"} 2\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_deliveries_total{topic=\"orders\",route=\"webhook\",outcome=\"failed\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_deliveries_total{topic=\"orders\",route=\"amqp\",outcome=\"undelivered\"} 1\n"));
    /* cumulative buckets: 3 ms is in le=0.005, 40 ms in le=0.05, 2 s in le=2.5 */
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_latency_seconds_bucket{topic=\"orders\",route=\"webhook\",le=\"0.0025\"} 0\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_latency_seconds_bucket{topic=\"orders\",route=\"webhook\",le=\"0.005\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_latency_seconds_bucket{topic=\"orders\",route=\"webhook\",le=\"0.05\"} 2\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_latency_seconds_bucket{topic=\"orders\",route=\"webhook\",le=\"2.5\"} 3\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_latency_seconds_bucket{topic=\"orders\",route=\"webhook\",le=\"+Inf\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(s, "hourglass_route_latency_seconds_count{topic=\"orders\",route=\"webhook\"} 3\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "hourglass_route_latency_seconds_sum{topic=\"orders\",route=\"webhook\"} 2.043000\n"));
    /* one HELP/TYPE per family */
    ck_assert_ptr_eq(strstr(s, "# TYPE hourglass_route_deliveries_total counter"),
                     strstr(s, "# TYPE hourglass_route_deliveries"));
    free(s);
    delivstats_free();
    s = render();
    ck_assert_ptr_null(strstr(s, "orders"));
    free(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("delivstats");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_counts_by_topic_route_and_outcome);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
