/* test_schedule.c — src/durable/schedule.h: a POST /schedules body checked field by field (the 400
 * messages name the field), the /push body of a fire, and which fires to make when (the
 * catch-up policies after downtime, the look-ahead, the cap). */
#include "base/cron.h"
#include "core/job.h"
#include "base/sbuf.h"
#include "durable/schedule.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct job_limits LIMITS = {31536000000LL, 30000, 86400000, 3, 1000, 1000};

static void parse_ok(const char *json, struct schedule *s)
{
    char err[512] = "";
    int rc = schedule_parse(json, strlen(json), &LIMITS, s, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", json, err);
}

/* The body is refused, and the message starts with `field`. */
static void parse_bad(const char *json, const char *field)
{
    struct schedule s;
    char err[512] = "";
    ck_assert_msg(schedule_parse(json, strlen(json), &LIMITS, &s, err, sizeof err) < 0, "%s was accepted", json);
    ck_assert_msg(strncmp(err, field, strlen(field)) == 0, "%s: message \"%s\" does not start with \"%s\"", json, err,
                  field);
}

START_TEST(test_parse_cron_and_every)
{
    struct schedule s;
    parse_ok("{\"topic\":\"bill\",\"cron\":\"30 2 * * MON-FRI\",\"tz\":\"Europe/Berlin\","
             "\"job\":{\"body\":{\"a\":1},\"ttr\":5000},\"catchUp\":\"one\"}",
             &s);
    ck_assert_str_eq(s.topic, "bill");
    ck_assert_str_eq(s.cron, "30 2 * * MON-FRI");
    ck_assert_str_eq(s.tz, "Europe/Berlin");
    ck_assert_int_eq(s.every_ms, 0);
    ck_assert_int_eq(s.catch_up, CATCHUP_ONE);
    ck_assert_str_eq(s.job, "{\"body\":{\"a\":1},\"ttr\":5000}");
    schedule_clear(&s);
    parse_ok("{\"topic\":\"t\",\"every\":1000,\"job\":{}}", &s);
    ck_assert_int_eq(s.every_ms, 1000);
    ck_assert_str_eq(s.tz, "UTC");
    ck_assert_int_eq(s.catch_up, CATCHUP_SKIP); /* the default */
    ck_assert_int_eq(s.paused, 0);
    schedule_clear(&s);
    parse_ok("{\"topic\":\"t\",\"cron\":\"*/5 * * * *\",\"job\":{\"body\":\"x\"},\"paused\":true,\"catchUp\":\"all\"}",
             &s);
    ck_assert_int_eq(s.paused, 1);
    ck_assert_int_eq(s.catch_up, CATCHUP_ALL);
    schedule_clear(&s);
}
END_TEST

START_TEST(test_bad_bodies_name_the_field)
{
    parse_bad("", "body is not valid JSON");
    parse_bad("[1]", "body must be a JSON object");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{},\"colour\":1}", "unknown field \"colour\"");
    parse_bad("{\"every\":1000,\"job\":{}}", "topic");
    parse_bad("{\"topic\":\"a b\",\"every\":1000,\"job\":{}}", "topic");
    parse_bad("{\"topic\":\"t\",\"job\":{}}", "give cron");
    parse_bad("{\"topic\":\"t\",\"cron\":\"* * * * *\",\"every\":1000,\"job\":{}}", "give cron");
    /* each cron field by name, as cron_parse says it */
    parse_bad("{\"topic\":\"t\",\"cron\":\"61 * * * *\",\"job\":{}}", "cron: minute");
    parse_bad("{\"topic\":\"t\",\"cron\":\"* 24 * * *\",\"job\":{}}", "cron: hour");
    parse_bad("{\"topic\":\"t\",\"cron\":\"* * 32 * *\",\"job\":{}}", "cron: day-of-month");
    parse_bad("{\"topic\":\"t\",\"cron\":\"* * * FOO *\",\"job\":{}}", "cron: month");
    parse_bad("{\"topic\":\"t\",\"cron\":\"* * * * 8\",\"job\":{}}", "cron: day-of-week");
    parse_bad("{\"topic\":\"t\",\"cron\":\"* * * *\",\"job\":{}}", "cron: ");
    parse_bad("{\"topic\":\"t\",\"cron\":\"0 0 30 2 *\",\"job\":{}}", "cron: ");
    parse_bad("{\"topic\":\"t\",\"cron\":5,\"job\":{}}", "cron: ");
    /* a well-formed name of no zone passes the parse (no file is read on the event loop) and is
     * refused by schedule_load_zone, which reads the zone's file */
    struct schedule mars;
    parse_ok("{\"topic\":\"t\",\"cron\":\"* * * * *\",\"tz\":\"Mars/Olympus\",\"job\":{}}", &mars);
    char err[256] = "";
    struct tz *zone = (struct tz *)&mars; /* not NULL: the call must set it */
    ck_assert_int_eq(schedule_load_zone(&mars, &zone, err, sizeof err), -1);
    ck_assert_ptr_null(zone);
    ck_assert_str_eq(err, "tz: unknown time zone \"Mars/Olympus\"");
    schedule_clear(&mars);
    struct schedule berlin, every;
    parse_ok("{\"topic\":\"t\",\"cron\":\"* * * * *\",\"tz\":\"Europe/Berlin\",\"job\":{}}", &berlin);
    ck_assert_int_eq(schedule_load_zone(&berlin, &zone, err, sizeof err), 0);
    ck_assert_ptr_nonnull(zone);
    ck_assert_str_eq(tz_name(zone), "Europe/Berlin");
    tz_free(zone);
    schedule_clear(&berlin);
    parse_ok("{\"topic\":\"t\",\"every\":1000,\"job\":{}}", &every);
    ck_assert_int_eq(schedule_load_zone(&every, &zone, err, sizeof err), 0);
    ck_assert_ptr_null(zone); /* an interval has no zone to read */
    schedule_clear(&every);
    parse_bad("{\"topic\":\"t\",\"cron\":\"* * * * *\",\"tz\":\"../etc/passwd\",\"job\":{}}", "tz: ");
    parse_bad("{\"topic\":\"t\",\"cron\":\"* * * * *\",\"tz\":3,\"job\":{}}", "tz: ");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"tz\":\"UTC\",\"job\":{}}", "tz: ");
    parse_bad("{\"topic\":\"t\",\"every\":999,\"job\":{}}", "every: ");
    parse_bad("{\"topic\":\"t\",\"every\":1.5,\"job\":{}}", "every: ");
    parse_bad("{\"topic\":\"t\",\"every\":\"1000\",\"job\":{}}", "every: ");
    parse_bad("{\"topic\":\"t\",\"every\":1000}", "job: required");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":[]}", "job: must be a JSON object");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{\"runAt\":5}}", "job.runAt");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{\"bizKey\":\"k\"}}", "job.bizKey");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{\"ttr\":-1}}", "job: ");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{\"tries\":0}}", "job: ");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{\"priority\":10}}", "job: ");
    /* each fire starts its own trace: a template cannot give them all one */
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{\"traceparent\":"
              "\"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\"}}",
              "job.traceparent: ");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{},\"catchUp\":\"some\"}", "catchUp: ");
    parse_bad("{\"topic\":\"t\",\"every\":1000,\"job\":{},\"paused\":1}", "paused: ");
}
END_TEST

START_TEST(test_push_body)
{
    struct schedule s;
    parse_ok("{\"topic\":\"bill\",\"every\":60000,\"job\":{\"body\":{\"n\":1},\"tries\":5}}", &s);
    s.id = 4242;
    struct sbuf sb = SBUF_INIT;
    int64_t at[2] = {1790000000000LL, 1790000060000LL};
    schedule_push_body(&sb, &s, at, 2);
    /* each fire a new trace: a valid traceparent of its own (cut out to compare the rest) */
    char *tp[2], *from = sb.data;
    for (int i = 0; i < 2; i++) {
        tp[i] = strstr(from, ",\"traceparent\":\"");
        ck_assert_ptr_nonnull(tp[i]);
        tp[i] += strlen(",\"traceparent\":\"");
        ck_assert_int_eq(trace_parent_valid(tp[i], TRACE_PARENT_LEN), 1);
        ck_assert(strncmp(tp[i], "00-", 3) == 0 && strncmp(tp[i] + 52, "-01\"", 4) == 0); /* sampled */
        from = tp[i];
    }
    ck_assert(memcmp(tp[0] + 3, tp[1] + 3, 32) != 0); /* not one trace for two fires */
    ck_assert(memcmp(tp[0] + 36, tp[1] + 36, 16) != 0);
    for (int i = 1; i >= 0; i--) { /* "...,\"traceparent\":\"<55>\"" out */
        char *start = tp[i] - strlen(",\"traceparent\":\"");
        memmove(start, tp[i] + TRACE_PARENT_LEN + 1, strlen(tp[i] + TRACE_PARENT_LEN + 1) + 1);
    }
    ck_assert_str_eq(sb.data, "[{\"topic\":\"bill\",\"runAt\":1790000000000,\"bizKey\":\"4242@1790000000000\","
                              "\"body\":{\"n\":1},\"tries\":5},"
                              "{\"topic\":\"bill\",\"runAt\":1790000060000,\"bizKey\":\"4242@1790000060000\","
                              "\"body\":{\"n\":1},\"tries\":5}]");
    sb_free(&sb);
    /* an empty template: topic, runAt and bizKey alone (valid JSON: no stray comma) */
    schedule_clear(&s);
    parse_ok("{\"topic\":\"t\",\"every\":1000,\"job\":{}}", &s);
    s.id = 7;
    schedule_push_body(&sb, &s, at, 1);
    json_error_t e;
    json_t *j = json_loads(sb.data, 0, &e);
    ck_assert_msg(j != NULL, "%s: %s", sb.data, e.text);
    json_decref(j);
    sb_free(&sb);
    schedule_clear(&s);
}
END_TEST

/* every second from T0; missed fires are at least 2 s old; look 1 s ahead */
#define T0 1790000000000LL
static struct schedule_due D;
static int due(enum catch_up cu, int64_t through, int64_t now, int64_t *at, int cap)
{
    struct schedule s;
    memset(&s, 0, sizeof s);
    s.catch_up = cu;
    s.fired_through = through;
    struct cron_rule sc;
    char err[64];
    ck_assert_int_eq(cron_rule_init_every(&sc, 1000, T0, err, sizeof err), 0);
    memset(&D, 0xff, sizeof D);
    if (schedule_due(&s, &sc, now, 2000, 1000, at, cap, &D) == 0)
        return -1;
    return D.n;
}

START_TEST(test_due_on_time_and_lookahead)
{
    int64_t at[16];
    /* running: the watermark is 1 s ahead; the next fire enters the look-ahead */
    ck_assert_int_eq(due(CATCHUP_SKIP, T0 + 5000, T0 + 4500, at, 16), -1); /* nothing to do */
    ck_assert_int_eq(due(CATCHUP_SKIP, T0 + 5000, T0 + 5000, at, 16), 1);
    ck_assert_int_eq(at[0], T0 + 6000); /* pushed a second ahead of its time */
    ck_assert_int_eq(D.through, T0 + 6000);
    ck_assert_int_eq(D.skipped, 0);
    ck_assert_int_eq(D.caught_up, 0);
    /* a short stall (within the grace): the late fires are made, whatever the policy */
    ck_assert_int_eq(due(CATCHUP_SKIP, T0 + 5000, T0 + 6500, at, 16), 2);
    ck_assert_int_eq(at[0], T0 + 6000);
    ck_assert_int_eq(at[1], T0 + 7000);
    ck_assert_int_eq(D.through, T0 + 7500);
    /* more than fit: the first `cap`, the watermark on the last of them */
    ck_assert_int_eq(due(CATCHUP_SKIP, T0 + 5000, T0 + 6500, at, 1), 1);
    ck_assert_int_eq(D.through, T0 + 6000);
}
END_TEST

START_TEST(test_due_catch_up_policies)
{
    int64_t at[16];
    /* down from T0 + 1 s to T0 + 10 s: fires 2..8 are at least the 2 s grace old, 9..11 are not */
    ck_assert_int_eq(due(CATCHUP_SKIP, T0 + 1000, T0 + 10000, at, 16), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(at[i], T0 + 9000 + 1000 * i);
    ck_assert_int_eq(D.through, T0 + 11000);
    ck_assert_int_eq(D.skipped, 7);
    ck_assert_int_eq(D.caught_up, 0);
    ck_assert_int_eq(due(CATCHUP_ONE, T0 + 1000, T0 + 10000, at, 16), 4);
    ck_assert_int_eq(at[0], T0 + 8000); /* the last missed one */
    ck_assert_int_eq(at[1], T0 + 9000);
    ck_assert_int_eq(D.skipped, 6);
    ck_assert_int_eq(D.caught_up, 1);
    ck_assert_int_eq(due(CATCHUP_ALL, T0 + 1000, T0 + 10000, at, 16), 10);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(at[i], T0 + 2000 + 1000 * i);
    ck_assert_int_eq(D.through, T0 + 11000);
    ck_assert_int_eq(D.skipped, 0);
    ck_assert_int_eq(D.caught_up, 7);
    /* all, bounded: a cap of 3 makes the first 3 missed ones and skips the rest of the missed */
    ck_assert_int_eq(due(CATCHUP_ALL, T0 + 1000, T0 + 10000, at, 3), 3);
    ck_assert_int_eq(at[0], T0 + 2000);
    ck_assert_int_eq(at[2], T0 + 4000);
    ck_assert_int_eq(D.through, T0 + 8000); /* the missed window is done; the on-time fires come next */
    ck_assert_int_eq(D.skipped, 4);
    ck_assert_int_eq(D.caught_up, 3);
    /* a year down, every second: counted (up to the bound), not walked one by one */
    ck_assert_int_eq(due(CATCHUP_SKIP, T0, T0 + 365LL * 86400000, at, 16), 3);
    ck_assert_int_eq(D.skipped, SCHEDULE_COUNT_MAX);
}
END_TEST

START_TEST(test_due_nothing_missed_nothing_written)
{
    int64_t at[4];
    /* a monthly cron idle for weeks: an old watermark with no fire since is nothing to do */
    struct schedule s;
    memset(&s, 0, sizeof s);
    s.fired_through = T0;
    struct cron_rule sc;
    char err[CRON_ERR_MAX];
    struct tz *utc = tz_load("UTC", err, sizeof err);
    ck_assert_ptr_nonnull(utc);
    ck_assert_int_eq(cron_rule_init_cron(&sc, "0 0 1 * *", utc, err, sizeof err), 0);
    int64_t next = cron_rule_next(&sc, T0);
    struct schedule_due d;
    ck_assert_int_eq(schedule_due(&s, &sc, next - 5000, 2000, 1000, at, 4, &d), 0);
    /* its day: made a second ahead */
    ck_assert_int_eq(schedule_due(&s, &sc, next - 1000, 2000, 1000, at, 4, &d), 1);
    ck_assert_int_eq(d.n, 1);
    ck_assert_int_eq(at[0], next);
    /* skipped while down: nothing to push, but the watermark moves past it */
    ck_assert_int_eq(schedule_due(&s, &sc, next + 60000, 2000, 1000, at, 4, &d), 1);
    ck_assert_int_eq(d.n, 0);
    ck_assert_int_eq(d.skipped, 1);
    ck_assert_int_eq(d.through, next + 61000);
    tz_free(utc);
}
END_TEST

static Suite *schedule_suite(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("schedule");
    tcase_add_test(tc, test_parse_cron_and_every);
    tcase_add_test(tc, test_bad_bodies_name_the_field);
    tcase_add_test(tc, test_push_body);
    tcase_add_test(tc, test_due_on_time_and_lookahead);
    tcase_add_test(tc, test_due_catch_up_policies);
    tcase_add_test(tc, test_due_nothing_missed_nothing_written);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(schedule_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
