/* test_jobjson.c — src/redis/jobjson.h: a job as JSON, member names and order pinned (every
 * endpoint and every delivery renders jobs through it). */
#include "redis/jobjson.h"
#include "core/ids.h"
#include "core/job.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

START_TEST(test_id_is_a_string)
{
    struct sbuf sb = SBUF_INIT;
    jobjson_id(&sb, UINT64_C(9007199254740993)); /* 2^53 + 1: no JSON number holds it */
    ck_assert_str_eq(sb.data, "\"9007199254740993\"");
    sb_free(&sb);
}
END_TEST

START_TEST(test_open_leaves_out_what_is_unset)
{
    struct sbuf sb = SBUF_INIT;
    struct jobjson j = {
        .id = 42, .body = "{}", .body_len = 2, .priority = 1, .ttr = 30, .tries = 3, .attempt = 0, .run_at = 1000};
    jobjson_open(&sb, &j);
    ck_assert_str_eq(sb.data,
                     "{\"id\":\"42\",\"body\":{},\"priority\":1,\"ttr\":30,\"tries\":3,\"attempt\":0,\"runAt\":1000,"
                     "\"traceparent\":null,\"tracestate\":null,\"group\":null");
    sb_free(&sb);
}
END_TEST

START_TEST(test_open_every_member_in_order)
{
    struct sbuf sb = SBUF_INIT;
    struct jobjson j = {.id = 7,
                        .topic = "t\"q",
                        .topic_len = 3,
                        .state = "dead",
                        .body = "[1]",
                        .body_len = 3,
                        .biz = "b",
                        .biz_len = 1,
                        .priority = -2,
                        .ttr = 5,
                        .tries = 4,
                        .attempt = 4,
                        .run_at = 9,
                        .created_at = 1,
                        .lease_until = 2,
                        .died_at = 3,
                        .has_backoff = 1,
                        .backoff = 0,
                        .trace = {.parent = TP "-and-more", .parent_len = 55, .state = "k=v,x=\"y", .state_len = 5}};
    jobjson_open(&sb, &j);
    ck_assert_str_eq(sb.data, "{\"id\":\"7\",\"topic\":\"t\\\"q\",\"state\":\"dead\",\"body\":[1],\"priority\":-2,"
                              "\"ttr\":5,\"tries\":4,\"attempt\":4,\"runAt\":9,\"createdAt\":1,\"leaseUntil\":2,"
                              "\"diedAt\":3,\"bizKey\":\"b\",\"backoff\":0,\"traceparent\":\"" TP
                              "\",\"tracestate\":\"k=v,x\",\"group\":null");
    sb_free(&sb);
}
END_TEST

START_TEST(test_delivered_is_closed)
{
    struct sbuf sb = SBUF_INIT;
    struct delivered d = {.id = 12,
                          .topic = "mail",
                          .topic_len = 4,
                          .body = "{\"a\":1}",
                          .body_len = 7,
                          .biz = "k",
                          .biz_len = 1,
                          .priority = 3,
                          .tries = 5,
                          .attempt = 2,
                          .state = JS_RESERVED,
                          .ttr = 60,
                          .run_at = 100,
                          .lease_until = 160};
    jobjson_delivered(&sb, &d);
    ck_assert_str_eq(sb.data, "{\"id\":\"12\",\"topic\":\"mail\",\"body\":{\"a\":1},\"priority\":3,\"ttr\":60,"
                              "\"tries\":5,\"attempt\":2,\"runAt\":100,\"leaseUntil\":160,\"bizKey\":\"k\","
                              "\"traceparent\":null,\"tracestate\":null,\"group\":null}");
    sb_reset(&sb);
    /* a traceparent without a tracestate: the one a string, the other null */
    d.trace = (struct trace_ref){.parent = TP, .parent_len = 55};
    jobjson_delivered(&sb, &d);
    ck_assert_ptr_nonnull(
        strstr(sb.data, ",\"bizKey\":\"k\",\"traceparent\":\"" TP "\",\"tracestate\":null,\"group\":null}"));
    sb_reset(&sb);
    /* a group: a string, escaped as JSON */
    d.group = "c\"7";
    d.group_len = 3;
    jobjson_delivered(&sb, &d);
    ck_assert_ptr_nonnull(strstr(sb.data, ",\"tracestate\":null,\"group\":\"c\\\"7\"}"));
    sb_free(&sb);
}
END_TEST

START_TEST(test_view_has_state_and_creation)
{
    struct sbuf sb = SBUF_INIT;
    uint64_t id = UINT64_C(123456789012345);
    struct job_view v = {.found = 1,
                         .state = JS_DELAYED,
                         .priority = 0,
                         .tries = 1,
                         .attempts = 0,
                         .ttr = 10,
                         .run_at = 500,
                         .backoff = -1,
                         .topic = "x",
                         .topic_len = 1,
                         .body = "1",
                         .body_len = 1};
    jobjson_view(&sb, id, &v);
    char want[256];
    snprintf(want, sizeof want,
             "{\"id\":\"123456789012345\",\"topic\":\"x\",\"state\":\"delayed\",\"body\":1,\"priority\":0,"
             "\"ttr\":10,\"tries\":1,\"attempt\":0,\"runAt\":500,\"createdAt\":%lld,\"traceparent\":null,"
             "\"tracestate\":null,\"group\":null",
             (long long)id_unix_ms(id));
    ck_assert_str_eq(sb.data, want);
    sb_free(&sb);
}
END_TEST

static Suite *jobjson_suite(void)
{
    Suite *s = suite_create("jobjson");
    TCase *tc = tcase_create("render");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_id_is_a_string);
    tcase_add_test(tc, test_open_leaves_out_what_is_unset);
    tcase_add_test(tc, test_open_every_member_in_order);
    tcase_add_test(tc, test_delivered_is_closed);
    tcase_add_test(tc, test_view_has_state_and_creation);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jobjson_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
