/* test_cron.c — src/base/cron.h and src/base/tz.h: parsing, next-fire times across DST in real zones,
 * intervals, enumeration, zone names and the TZif / POSIX TZ readers.
 *
 * Expected fire times were not computed with cron.c: they come from tests/crondiff/ref.py, a
 * brute-force reference built on Python's zoneinfo (which reads the same /usr/share/zoneinfo
 * files), and offsets were checked the same way, e.g.
 *   python3 -c 'import zoneinfo, datetime as dt; z = zoneinfo.ZoneInfo("Europe/Berlin");
 *               print(dt.datetime(2026, 3, 29, 1, 0, tzinfo=dt.timezone.utc).astimezone(z))'
 * For fixed-time expressions the reference walks wall minutes, keeps fold=0 for a repeated
 * time and bisects for the transition instant for a time in a gap; for wildcard expressions
 * it walks UTC minutes and keeps those whose wall time matches (cron.h states the rules).
 * Each case lists the fires in UTC with the wall time in a comment. tests/crondiff/crondiff.py
 * compares cron.c with the same reference on hundreds of random expressions around the
 * transitions of 17 zone windows (Lord Howe's 30-minute DST, Sao Paulo's midnight changes,
 * Apia's skipped day, Troll's 2-hour DST, Dublin's negative DST, the footer rule in 2045). */
#include "base/cron.h"
#include "base/tz.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "2026-03-29T01:00:00Z" to unix ms, with libc's timegm (independent of tz.c's calendar). */
static int64_t ms(const char *iso)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    ck_assert_int_eq(
        sscanf(iso, "%d-%d-%dT%d:%d:%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec),
        6);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000;
}

static struct tz *zone(const char *name)
{
    char err[128] = "";
    struct tz *tz = tz_load(name, err, sizeof err);
    ck_assert_msg(tz != NULL, "tz_load(%s): %s", name, err);
    return tz;
}

/* The fires of `expr` in zone `zname` within (a, b] must be exactly want[] (NULL-ended). */
static void check_fires(const char *expr, const char *zname, const char *a, const char *b, const char *const *want)
{
    struct tz *tz = zone(zname);
    struct cron_rule s;
    char err[CRON_ERR_MAX] = "";
    ck_assert_msg(cron_rule_init_cron(&s, expr, tz, err, sizeof err) == 0, "%s: %s", expr, err);
    int64_t got[64];
    size_t n = cron_rule_fires(&s, ms(a), ms(b), got, 64), nwant = 0;
    while (want[nwant])
        nwant++;
    for (size_t i = 0; i < n && i < nwant; i++)
        ck_assert_msg(got[i] == ms(want[i]), "%s in %s: fire %zu is %lld, want %s (%lld)", expr, zname, i,
                      (long long)got[i], want[i], (long long)ms(want[i]));
    ck_assert_msg(n == nwant, "%s in %s: %zu fires, want %zu", expr, zname, n, nwant);
    tz_free(tz);
}

#define FIRES(expr, zname, a, b, ...)                                                                                  \
    do {                                                                                                               \
        static const char *const want_[] = {__VA_ARGS__, NULL};                                                        \
        check_fires(expr, zname, a, b, want_);                                                                         \
    } while (0)

static struct cron_expr parse_ok(const char *expr)
{
    struct cron_expr c;
    char err[CRON_ERR_MAX] = "";
    ck_assert_msg(cron_parse(expr, &c, err, sizeof err) == 0, "%s: %s", expr, err);
    return c;
}

static uint64_t bits(int lo, int hi, int step)
{
    uint64_t m = 0;
    for (int i = lo; i <= hi; i += step)
        m |= UINT64_C(1) << i;
    return m;
}

/* ---- parsing ---------------------------------------------------------------------------- */

START_TEST(test_parse_every_form)
{
    struct cron_expr c = parse_ok("* * * * *");
    ck_assert(c.minute == bits(0, 59, 1) && c.hour == bits(0, 23, 1) && c.dom == bits(1, 31, 1));
    ck_assert(c.month == bits(1, 12, 1) && c.dow == bits(0, 6, 1));
    ck_assert_int_eq(c.flags, CRON_DOM_STAR | CRON_DOW_STAR | CRON_WILDCARD);

    c = parse_ok("5 4 3 2 1");
    ck_assert(c.minute == bits(5, 5, 1) && c.hour == bits(4, 4, 1) && c.dom == bits(3, 3, 1));
    ck_assert(c.month == bits(2, 2, 1) && c.dow == bits(1, 1, 1));
    ck_assert_int_eq(c.flags, 0);

    c = parse_ok("10-20 0-23 1-31 1-12 0-6"); /* ranges, including the full ones */
    ck_assert(c.minute == bits(10, 20, 1) && c.hour == bits(0, 23, 1) && c.dom == bits(1, 31, 1));
    ck_assert_int_eq(c.flags, 0); /* "restricted" means "does not start with *", as in Vixie cron */

    c = parse_ok("1,2,59 0,12 1,15,31 1,6,12 0,3");
    ck_assert(c.minute == ((UINT64_C(1) << 1) | (UINT64_C(1) << 2) | (UINT64_C(1) << 59)));
    ck_assert(c.hour == ((1u << 0) | (1u << 12)) && c.dom == ((1u << 1) | (1u << 15) | (1u << 31)));
    ck_assert(c.month == ((1u << 1) | (1u << 6) | (1u << 12)) && c.dow == ((1u << 0) | (1u << 3)));

    c = parse_ok("*/15 */5 */10 */3 */2");
    ck_assert(c.minute == bits(0, 59, 15) && c.hour == bits(0, 23, 5) && c.dom == bits(1, 31, 10));
    ck_assert(c.month == bits(1, 12, 3) && c.dow == bits(0, 6, 2));
    ck_assert_int_eq(c.flags, CRON_DOM_STAR | CRON_DOW_STAR | CRON_WILDCARD);

    c = parse_ok("10-50/20 1-23/11 5-25/10 2-11/3 1-5/2");
    ck_assert(c.minute == bits(10, 50, 20) && c.hour == bits(1, 23, 11) && c.dom == bits(5, 25, 10));
    ck_assert(c.month == bits(2, 11, 3) && c.dow == bits(1, 5, 2));

    c = parse_ok("0,*/20,7-9 1 1 1 1"); /* list items of every form */
    ck_assert(c.minute == (bits(0, 59, 20) | bits(7, 9, 1)));

    c = parse_ok("  0\t0   1 1 1  "); /* blanks around and between fields */
    ck_assert(c.minute == 1 && c.hour == 1);

    c = parse_ok("*/60 */24 */31 */12 */7"); /* a step as long as the field: its first value */
    ck_assert(c.minute == 1 && c.hour == 1 && c.dom == 2 && c.month == 2 && c.dow == 1);
}
END_TEST

START_TEST(test_parse_names)
{
    struct cron_expr c = parse_ok("0 0 * JAN-MAR *");
    ck_assert(c.month == bits(1, 3, 1));
    c = parse_ok("0 0 * jan,Jun,dEc *");
    ck_assert(c.month == ((1u << 1) | (1u << 6) | (1u << 12)));
    c = parse_ok("0 0 * feb-nov/3 *");
    ck_assert(c.month == bits(2, 11, 3));
    c = parse_ok("0 0 * * MON-FRI");
    ck_assert(c.dow == bits(1, 5, 1));
    c = parse_ok("0 0 * * sun,Sat");
    ck_assert(c.dow == ((1u << 0) | (1u << 6)));
    c = parse_ok("0 0 * * tue-thu,SUN");
    ck_assert(c.dow == (bits(2, 4, 1) | 1u));
    c = parse_ok("0 0 * 1-dec *"); /* numbers and names mix */
    ck_assert(c.month == bits(1, 12, 1));
}
END_TEST

START_TEST(test_parse_sunday_0_and_7)
{
    ck_assert(parse_ok("0 0 * * 7").dow == 1u);
    ck_assert(parse_ok("0 0 * * 0").dow == 1u);
    ck_assert(parse_ok("0 0 * * 0,7").dow == 1u);
    ck_assert(parse_ok("0 0 * * 5-7").dow == ((1u << 5) | (1u << 6) | 1u));
    ck_assert(parse_ok("0 0 * * 1-7").dow == bits(0, 6, 1));
    ck_assert(parse_ok("0 0 * * 0-7/7").dow == 1u);
}
END_TEST

START_TEST(test_parse_errors_name_the_field)
{
    static const struct {
        const char *expr, *want;
    } cases[] = {
        {"60 * * * *", "minute: 60 is out of range 0-59"},
        {"-1 * * * *", "minute: missing value"},
        {"a * * * *", "minute: \"a\" is not a number"},
        {"99999999999 * * * *", "minute: \"99999999999\" is not a number"},
        {"5-1 * * * *", "minute: range 5-1 goes backwards"},
        {"*/0 * * * *", "minute: step 0 is out of range 1-60"},
        {"*/61 * * * *", "minute: step 61 is out of range 1-60"},
        {"*/ * * * *", "minute: missing step after '/'"},
        {"*/x * * * *", "minute: step \"x\" is not a number"},
        {"1/5 * * * *", "minute: a step needs '*' or a range before it"},
        {"1,,2 * * * *", "minute: empty list item"},
        {"1, * * * *", "minute: empty list item"},
        {"** * * * *", "minute: \"**\" is not a number"},
        {"* 24 * * *", "hour: 24 is out of range 0-23"},
        {"* MON * * *", "hour: \"MON\" is not a number"},
        {"* 1-2-3 * * *", "hour: \"2-3\" is not a number"},
        {"* * 0 * *", "day-of-month: 0 is out of range 1-31"},
        {"* * 32 * *", "day-of-month: 32 is out of range 1-31"},
        {"* * L * *", "day-of-month: \"L\" is not a number"},
        {"* * * 0 *", "month: 0 is out of range 1-12"},
        {"* * * 13 *", "month: 13 is out of range 1-12"},
        {"* * * FOO *", "month: \"FOO\" is not a number or name"},
        {"* * * January *", "month: \"January\" is not a number or name"},
        {"* * * JAN- *", "month: missing value"},
        {"* * * * 8", "day-of-week: 8 is out of range 0-7"},
        {"* * * * MONDAY", "day-of-week: \"MONDAY\" is not a number or name"},
        {"* * * * FRI-MON", "day-of-week: range 5-1 goes backwards"},
        {"* * * * ?", "day-of-week: \"?\" is not a number or name"},
        {"0 0 30 2 *", "day-of-month: no listed day exists in any listed month"},
        {"0 0 31 4,6,9,11 *", "day-of-month: no listed day exists in any listed month"},
        {"0 0 30,31 feb *", "day-of-month: no listed day exists in any listed month"},
        {"0 0 31 2 */2", "day-of-month: no listed day exists in any listed month"},
        {"", "expected 5 fields (minute hour day-of-month month day-of-week), got 0"},
        {"* * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 4"},
        {"* * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 6"},
        {"@daily", "expected 5 fields (minute hour day-of-month month day-of-week), got 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cron_expr c;
        char err[CRON_ERR_MAX] = "";
        ck_assert_msg(cron_parse(cases[i].expr, &c, err, sizeof err) == -1, "accepted \"%s\"", cases[i].expr);
        ck_assert_msg(strcmp(err, cases[i].want) == 0, "\"%s\": got \"%s\", want \"%s\"", cases[i].expr, err,
                      cases[i].want);
    }
    /* Possible, if rarely: Feb 29 alone, and the 31st OR a weekday when both are restricted. */
    parse_ok("0 0 29 2 *");
    parse_ok("0 0 31 2 1");
    /* A short or absent error buffer is fine. */
    struct cron_expr c;
    char small[8];
    ck_assert_int_eq(cron_parse("61 * * * *", &c, small, sizeof small), -1);
    ck_assert_str_eq(small, "minute:");
    ck_assert_int_eq(cron_parse("61 * * * *", &c, NULL, 0), -1);
}
END_TEST

/* ---- next fire, no DST ------------------------------------------------------------------ */

START_TEST(test_next_field_forms_utc)
{
    FIRES("*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", "2026-01-01T01:00:00Z", "2026-01-01T00:15:00Z",
          "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:00:00Z");
    FIRES("5-10/2 * * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-01T01:06:00Z", "2026-01-01T00:05:00Z",
          "2026-01-01T00:07:00Z", "2026-01-01T00:09:00Z", "2026-01-01T01:05:00Z");
    FIRES("1,2,59 22-23 * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-01T22:01:00Z",
          "2026-01-01T22:02:00Z", "2026-01-01T22:59:00Z", "2026-01-01T23:01:00Z", "2026-01-01T23:02:00Z",
          "2026-01-01T23:59:00Z");
    /* jan-mar/2 is January and March. */
    FIRES("0 0 1,31 jan-mar/2,DEC *", "UTC", "2026-01-30T00:00:00Z", "2027-01-01T00:00:00Z", "2026-01-31T00:00:00Z",
          "2026-03-01T00:00:00Z", "2026-03-31T00:00:00Z", "2026-12-01T00:00:00Z", "2026-12-31T00:00:00Z",
          "2027-01-01T00:00:00Z");
    FIRES("0 0 * * 0,7", "UTC", "2026-01-01T00:00:00Z", "2026-01-20T00:00:00Z", "2026-01-04T00:00:00Z",
          "2026-01-11T00:00:00Z", "2026-01-18T00:00:00Z"); /* Sundays */
    FIRES("0 0 * * Mon-Wed", "UTC", "2026-01-01T00:00:00Z", "2026-01-10T00:00:00Z", "2026-01-05T00:00:00Z",
          "2026-01-06T00:00:00Z", "2026-01-07T00:00:00Z");
}
END_TEST

START_TEST(test_next_is_strictly_after)
{
    struct tz *tz = zone("UTC");
    struct cron_expr c = parse_ok("0 * * * *");
    int64_t h = ms("2026-05-05T10:00:00Z");
    ck_assert_int_eq(cron_next(&c, tz, h - 1), h);
    ck_assert_int_eq(cron_next(&c, tz, h), h + 3600000);
    ck_assert_int_eq(cron_next(&c, tz, h + 1), h + 3600000);
    ck_assert_int_eq(cron_next(&c, tz, h - 3600000), h);
    /* Instants before 1970 work too (floor division of negative milliseconds). */
    ck_assert_int_eq(cron_next(&c, tz, -1), 0);
    ck_assert_int_eq(cron_next(&c, tz, -3600001), -3600000);
    tz_free(tz);
}
END_TEST

START_TEST(test_leap_days)
{
    FIRES("0 0 29 2 *", "UTC", "2026-03-01T00:00:00Z", "2033-01-01T00:00:00Z", "2028-02-29T00:00:00Z",
          "2032-02-29T00:00:00Z");
    /* 2100 is not a leap year: the next Feb 29 after 2096 is in 2104, 8 years on. */
    FIRES("0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", "2105-01-01T00:00:00Z", "2104-02-29T00:00:00Z");
    FIRES("0 12 28-29 feb *", "Europe/Berlin", "2028-01-01T00:00:00Z", "2029-03-01T00:00:00Z", "2028-02-28T11:00:00Z",
          "2028-02-29T11:00:00Z", "2029-02-28T11:00:00Z");
}
END_TEST

START_TEST(test_31st_of_months)
{
    FIRES("0 12 31 * *", "UTC", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-01-31T12:00:00Z",
          "2026-03-31T12:00:00Z", "2026-05-31T12:00:00Z", "2026-07-31T12:00:00Z", "2026-08-31T12:00:00Z",
          "2026-10-31T12:00:00Z", "2026-12-31T12:00:00Z");
    /* Only months with a 31st in the list: April/June never fire, July does. */
    FIRES("0 0 31 4,6,7 *", "UTC", "2026-01-01T00:00:00Z", "2028-01-01T00:00:00Z", "2026-07-31T00:00:00Z",
          "2027-07-31T00:00:00Z");
}
END_TEST

START_TEST(test_vixie_dom_dow)
{
    /* Both restricted: the 13th OR any Friday. */
    FIRES("0 0 13 * FRI", "UTC", "2026-02-01T00:00:00Z", "2026-03-14T00:00:00Z", "2026-02-06T00:00:00Z",
          "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z",
          "2026-03-13T00:00:00Z");
    /* Day-of-month starts with '*': both must match (days 1, 11, 21, 31 that are Fridays). */
    FIRES("0 0 */10 * fri", "UTC", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-05-01T00:00:00Z",
          "2026-07-31T00:00:00Z", "2026-08-21T00:00:00Z", "2026-09-11T00:00:00Z", "2026-12-11T00:00:00Z",
          "2027-01-01T00:00:00Z");
    /* 31st of February OR a Monday: only the Mondays of February. */
    FIRES("0 0 31 2 1", "UTC", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-02-02T00:00:00Z",
          "2026-02-09T00:00:00Z", "2026-02-16T00:00:00Z", "2026-02-23T00:00:00Z");
}
END_TEST

START_TEST(test_no_dst_zones)
{
    FIRES("0 9 * * *", "Asia/Tokyo", "2026-06-01T00:00:00Z", "2026-06-03T00:00:00Z", "2026-06-02T00:00:00Z",
          "2026-06-03T00:00:00Z");
    FIRES("30 2 * * *", "Asia/Tokyo", "2026-03-27T00:00:00Z", "2026-03-30T00:00:00Z", "2026-03-27T17:30:00Z",
          "2026-03-28T17:30:00Z", "2026-03-29T17:30:00Z");
    FIRES("0 0 1 1 *", "Etc/UTC", "2026-06-01T00:00:00Z", "2028-06-01T00:00:00Z", "2027-01-01T00:00:00Z",
          "2028-01-01T00:00:00Z");
}
END_TEST

/* ---- DST -------------------------------------------------------------------------------- */

START_TEST(test_berlin_fixed_time)
{
    /* Spring 2026-03-29: 02:00 CET -> 03:00 CEST. 02:30 does not exist: fires at 03:00 CEST. */
    FIRES("30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z", "2026-03-30T12:00:00Z",
          "2026-03-28T01:30:00Z",  /* 02:30 CET */
          "2026-03-29T01:00:00Z",  /* 03:00 CEST, the end of the gap */
          "2026-03-30T00:30:00Z"); /* 02:30 CEST */
    /* Autumn 2026-10-25: 03:00 CEST -> 02:00 CET. 02:30 happens twice: only the first fires. */
    FIRES("30 2 * * *", "Europe/Berlin", "2026-10-23T12:00:00Z", "2026-10-26T12:00:00Z",
          "2026-10-24T00:30:00Z",  /* 02:30 CEST */
          "2026-10-25T00:30:00Z",  /* 02:30 CEST, first of the two */
          "2026-10-26T01:30:00Z"); /* 02:30 CET */
    /* Two gap times of one expression collapse into one fire. */
    FIRES("0,30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T12:00:00Z", "2026-03-29T01:00:00Z",
          "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z");
    /* Asked from between the two 02:30s, the repeat is not a fire. */
    struct tz *tz = zone("Europe/Berlin");
    struct cron_expr c = parse_ok("30 2 * * *");
    ck_assert_int_eq(cron_next(&c, tz, ms("2026-10-25T01:00:00Z")), ms("2026-10-26T01:30:00Z"));
    ck_assert_int_eq(cron_next(&c, tz, ms("2026-10-25T00:29:59Z")), ms("2026-10-25T00:30:00Z"));
    /* Asked from just before the spring gap (01:59:59 CET), and from its end. */
    ck_assert_int_eq(cron_next(&c, tz, ms("2026-03-29T00:59:59Z")), ms("2026-03-29T01:00:00Z"));
    ck_assert_int_eq(cron_next(&c, tz, ms("2026-03-29T01:00:00Z")), ms("2026-03-30T00:30:00Z"));
    tz_free(tz);
    /* The footer POSIX rule (after the file's last transition): 2045-03-26. */
    FIRES("30 2 * * *", "Europe/Berlin", "2045-03-25T12:00:00Z", "2045-03-27T12:00:00Z", "2045-03-26T01:00:00Z",
          "2045-03-27T00:30:00Z");
}
END_TEST

START_TEST(test_berlin_wildcard)
{
    /* Hourly keeps real-time spacing across both transitions. */
    FIRES("0 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z", "2026-03-29T02:30:00Z",
          "2026-03-29T00:00:00Z",  /* 01:00 CET */
          "2026-03-29T01:00:00Z",  /* 03:00 CEST */
          "2026-03-29T02:00:00Z"); /* 04:00 CEST */
    FIRES("0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", "2026-10-25T02:30:00Z",
          "2026-10-25T00:00:00Z",  /* 02:00 CEST */
          "2026-10-25T01:00:00Z",  /* 02:00 CET, the repeat */
          "2026-10-25T02:00:00Z"); /* 03:00 CET */
    /* Every 20 minutes within hour 2: none on the spring day, both passes on the autumn day. */
    FIRES("*/20 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z", "2026-03-30T12:00:00Z", "2026-03-28T01:00:00Z",
          "2026-03-28T01:20:00Z", "2026-03-28T01:40:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:20:00Z",
          "2026-03-30T00:40:00Z");
    FIRES("*/20 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T12:00:00Z", "2026-10-25T00:00:00Z",
          "2026-10-25T00:20:00Z", "2026-10-25T00:40:00Z",                          /* CEST */
          "2026-10-25T01:00:00Z", "2026-10-25T01:20:00Z", "2026-10-25T01:40:00Z"); /* CET */
    /* Every 15 minutes over the autumn night: 12 fires in 3 hours, evenly spaced. */
    struct tz *tz = zone("Europe/Berlin");
    struct cron_rule s;
    ck_assert_int_eq(cron_rule_init_cron(&s, "*/15 * * * *", tz, NULL, 0), 0);
    int64_t out[20];
    int64_t a = ms("2026-10-24T23:00:00Z");
    ck_assert_uint_eq(cron_rule_fires(&s, a, a + 3 * 3600000, out, 20), 12);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(out[i], a + (i + 1) * 900000);
    tz_free(tz);
}
END_TEST

START_TEST(test_new_york)
{
    /* Spring 2026-03-08: 02:00 EST -> 03:00 EDT. */
    FIRES("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", "2026-03-09T12:00:00Z",
          "2026-03-08T07:00:00Z",  /* 03:00 EDT */
          "2026-03-09T06:30:00Z"); /* 02:30 EDT */
    /* Autumn 2026-11-01: 02:00 EDT -> 01:00 EST; 01:30 repeats, 02:30 does not. */
    FIRES("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z",
          "2026-11-01T05:30:00Z",  /* 01:30 EDT, first of the two */
          "2026-11-02T06:30:00Z"); /* 01:30 EST */
    FIRES("30 2 * * *", "America/New_York", "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z", "2026-11-01T07:30:00Z",
          "2026-11-02T07:30:00Z"); /* 02:30 EST both days */
    FIRES("0 * * * *", "America/New_York", "2026-03-08T05:30:00Z", "2026-03-08T08:30:00Z",
          "2026-03-08T06:00:00Z",  /* 01:00 EST */
          "2026-03-08T07:00:00Z",  /* 03:00 EDT */
          "2026-03-08T08:00:00Z"); /* 04:00 EDT */
    FIRES("0 * * * *", "America/New_York", "2026-11-01T04:30:00Z", "2026-11-01T07:30:00Z",
          "2026-11-01T05:00:00Z",  /* 01:00 EDT */
          "2026-11-01T06:00:00Z",  /* 01:00 EST, the repeat */
          "2026-11-01T07:00:00Z"); /* 02:00 EST */
}
END_TEST

START_TEST(test_half_hour_dst)
{
    /* Lord Howe Island 2026-10-04: 02:00 +1030 -> 02:30 +11, a 30-minute gap. */
    FIRES("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z", "2026-10-05T00:00:00Z",
          "2026-10-03T15:30:00Z",  /* 02:30 +11, the end of the gap */
          "2026-10-04T15:15:00Z"); /* 02:15 +11 */
}
END_TEST

/* ---- intervals, enumeration ------------------------------------------------------------- */

START_TEST(test_every)
{
    struct cron_rule s;
    char err[CRON_ERR_MAX] = "";
    int64_t t0 = ms("2026-01-01T00:00:00Z") + 123;
    ck_assert_int_eq(cron_rule_init_every(&s, 1000, t0, err, sizeof err), 0);
    ck_assert_int_eq(cron_rule_next(&s, t0 - 5000), t0); /* before the anchor: the anchor */
    ck_assert_int_eq(cron_rule_next(&s, t0 - 1), t0);
    ck_assert_int_eq(cron_rule_next(&s, t0), t0 + 1000);
    ck_assert_int_eq(cron_rule_next(&s, t0 + 999), t0 + 1000);
    ck_assert_int_eq(cron_rule_next(&s, t0 + 1000), t0 + 2000);
    ck_assert_int_eq(cron_rule_next(&s, t0 + 86400000 + 1), t0 + 86401000);
    ck_assert_int_eq(cron_rule_init_every(&s, 0, t0, err, sizeof err), -1);
    ck_assert_str_eq(err, "every: must be at least 1 ms");
    ck_assert_int_eq(cron_rule_init_every(&s, -5, t0, err, sizeof err), -1);
    /* Near the end of time the next fire is "never", not an overflow. */
    ck_assert_int_eq(cron_rule_init_every(&s, INT64_MAX / 2, 0, err, sizeof err), 0);
    ck_assert_int_eq(cron_rule_next(&s, INT64_MAX / 2), INT64_MAX / 2 * 2);
    ck_assert_int_eq(cron_rule_next(&s, INT64_MAX / 2 * 2), CRON_NEVER);
    ck_assert_int_eq(cron_rule_init_every(&s, 7, INT64_MIN + 3, err, sizeof err), 0);
    ck_assert_int_eq(cron_rule_next(&s, INT64_MAX - 1), CRON_NEVER);
    /* A DST change does not move an interval schedule. */
    ck_assert_int_eq(cron_rule_init_every(&s, 3600000, ms("2026-03-28T23:00:00Z"), err, sizeof err), 0);
    ck_assert_int_eq(cron_rule_next(&s, ms("2026-03-29T00:30:00Z")), ms("2026-03-29T01:00:00Z"));
}
END_TEST

START_TEST(test_fires_between)
{
    struct cron_rule s;
    int64_t t0 = ms("2026-01-01T00:00:00Z"), out[8];
    ck_assert_int_eq(cron_rule_init_every(&s, 1000, t0, NULL, 0), 0);
    /* (a, b]: a fire at a is excluded, a fire at b included. */
    ck_assert_uint_eq(cron_rule_fires(&s, t0, t0 + 3000, out, 8), 3);
    ck_assert_int_eq(out[0], t0 + 1000);
    ck_assert_int_eq(out[2], t0 + 3000);
    ck_assert_uint_eq(cron_rule_fires(&s, t0 - 1, t0 + 2999, out, 8), 3);
    ck_assert_int_eq(out[0], t0);
    ck_assert_int_eq(out[2], t0 + 2000);
    /* Over the cap: cap written, cap + 1 returned, nothing beyond the cap touched. */
    out[2] = 42;
    ck_assert_uint_eq(cron_rule_fires(&s, t0, t0 + 100000, out, 2), 3);
    ck_assert_int_eq(out[0], t0 + 1000);
    ck_assert_int_eq(out[1], t0 + 2000);
    ck_assert_int_eq(out[2], 42);
    ck_assert_uint_eq(cron_rule_fires(&s, t0, t0 + 100000, NULL, 0), 1); /* "any?" */
    ck_assert_uint_eq(cron_rule_fires(&s, t0, t0 + 999, NULL, 0), 0);
    ck_assert_uint_eq(cron_rule_fires(&s, t0 + 5000, t0, out, 8), 0); /* empty range */
    /* Cron across the Berlin autumn night: hourly, 5 fires in 5 hours. */
    struct tz *tz = zone("Europe/Berlin");
    ck_assert_int_eq(cron_rule_init_cron(&s, "0 * * * *", tz, NULL, 0), 0);
    ck_assert_uint_eq(cron_rule_fires(&s, ms("2026-10-24T22:00:00Z"), ms("2026-10-25T03:00:00Z"), out, 8), 5);
    ck_assert_int_eq(out[0], ms("2026-10-24T23:00:00Z"));
    ck_assert_int_eq(out[4], ms("2026-10-25T03:00:00Z"));
    tz_free(tz);
}
END_TEST

START_TEST(test_last_fire)
{
    struct cron_rule s;
    int64_t t0 = ms("2026-01-01T00:00:00Z");
    ck_assert_int_eq(cron_rule_init_every(&s, 1000, t0, NULL, 0), 0);
    ck_assert_int_eq(cron_rule_last(&s, t0, t0 + 10500), t0 + 10000);
    ck_assert_int_eq(cron_rule_last(&s, t0, t0 + 10000), t0 + 10000);
    ck_assert_int_eq(cron_rule_last(&s, t0, t0 + 999), CRON_NEVER);
    ck_assert_int_eq(cron_rule_last(&s, t0 - 10, t0 + 999), t0);
    ck_assert_int_eq(cron_rule_last(&s, t0 - 5000, t0 - 1), CRON_NEVER); /* before the anchor */
    ck_assert_int_eq(cron_rule_last(&s, t0 + 5, t0 + 5), CRON_NEVER);

    struct tz *tz = zone("Europe/Berlin");
    ck_assert_int_eq(cron_rule_init_cron(&s, "30 2 * * *", tz, NULL, 0), 0);
    /* Down for ten years: the last missed fire, found without walking 3,650 of them. */
    ck_assert_int_eq(cron_rule_last(&s, ms("2016-06-01T00:00:00Z"), ms("2026-10-25T12:00:00Z")),
                     ms("2026-10-25T00:30:00Z")); /* 02:30 CEST, the first of the two */
    ck_assert_int_eq(cron_rule_last(&s, ms("2026-03-28T12:00:00Z"), ms("2026-03-29T01:00:00Z")),
                     ms("2026-03-29T01:00:00Z"));
    ck_assert_int_eq(cron_rule_last(&s, ms("2026-03-29T01:00:00Z"), ms("2026-03-30T00:29:59Z")), CRON_NEVER);
    ck_assert_int_eq(cron_rule_init_cron(&s, "0 0 1 1 *", tz, NULL, 0), 0);
    ck_assert_int_eq(cron_rule_last(&s, ms("2020-06-01T00:00:00Z"), ms("2026-06-01T00:00:00Z")),
                     ms("2025-12-31T23:00:00Z")); /* 2026-01-01 00:00 CET */
    tz_free(tz);
}
END_TEST

START_TEST(test_never)
{
    struct tz *tz = zone("UTC");
    struct cron_expr c = parse_ok("* * * * *");
    ck_assert_int_eq(cron_next(&c, tz, INT64_MAX), CRON_NEVER);
    ck_assert_int_eq(cron_next(&c, tz, INT64_MAX - 1000), CRON_NEVER);
    /* The far past is clamped, not overflowed (UBSan checks the arithmetic). */
    int64_t far = cron_next(&c, tz, INT64_MIN);
    ck_assert(far < 0 && far % 60000 == 0);
    ck_assert_int_eq(cron_next(&c, tz, far), far + 60000);
    /* A rare expression is found inside the horizon: day-of-month starts with '*', so both
     * fields must match: February 1st or 29th falling on a Monday. */
    c = parse_ok("0 0 */28 2 MON");
    int64_t t = cron_next(&c, tz, ms("2026-01-01T00:00:00Z"));
    ck_assert_int_eq(t, ms("2027-02-01T00:00:00Z"));
    tz_free(tz);
    tz = zone("Europe/Berlin");
    int32_t o = tz_offset(tz, INT64_MAX); /* the rule, evaluated at 2^60 s */
    ck_assert(o == 3600 || o == 7200);
    ck_assert_int_eq(tz_offset(tz, INT64_MIN), 3208);
    int64_t out[2], gap;
    ck_assert_int_le(tz_local_to_utc(tz, INT64_MAX, out, &gap), 2);
    ck_assert_int_le(tz_local_to_utc(tz, INT64_MIN, out, &gap), 2);
    (void)cron_next(&c, tz, INT64_MIN);
    tz_free(tz);
}
END_TEST

/* Many threads on one zone must agree with one thread: nothing is shared but the zone. */
struct thread_arg {
    const struct tz *tz;
    int64_t sum;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    struct cron_expr c;
    if (cron_parse("*/7 1-3 * * *", &c, NULL, 0) < 0)
        return NULL;
    int64_t t = 1774400000000; /* 2026-03-25, spanning the spring change */
    for (int i = 0; i < 2000; i++) {
        t = cron_next(&c, a->tz, t);
        a->sum += t % 1000003;
    }
    return NULL;
}

START_TEST(test_threads)
{
    struct tz *tz = zone("Europe/Berlin");
    struct thread_arg one = {tz, 0}, args[4];
    thread_main(&one);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){tz, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].sum, one.sum);
    }
    tz_free(tz);
}
END_TEST

/* ---- zones ------------------------------------------------------------------------------ */

START_TEST(test_tz_names)
{
    static const char *const good[] = {"UTC",        "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5",
                                       "Etc/GMT-14", "EST5EDT",       "America/Port-au-Prince",         "a.b"};
    static const char *const bad[] = {"",
                                      "/etc/passwd",
                                      "../etc/passwd",
                                      "Europe/../../etc/passwd",
                                      "..",
                                      ".",
                                      "Europe//Berlin",
                                      "Europe/Berlin/",
                                      "Europe/./Berlin",
                                      ".hidden",
                                      "Europe/.x",
                                      "-rf",
                                      "Europe/Ber lin",
                                      "Europe\\Berlin",
                                      "Europe/Berlin\n",
                                      "Europe/Berlin;rm",
                                      "Europe/Bérlin",
                                      "localtime",
                                      "posixrules"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(tz_name_valid(good[i]) == 0, "rejected \"%s\"", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(tz_name_valid(bad[i]) == -1, "accepted \"%s\"", bad[i]);
    char longname[TZ_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[TZ_NAME_MAX + 1] = '\0';
    ck_assert_int_eq(tz_name_valid(longname), -1);
    longname[TZ_NAME_MAX] = '\0';
    ck_assert_int_eq(tz_name_valid(longname), 0);

    char err[128];
    ck_assert_ptr_null(tz_load("../../../etc/passwd", err, sizeof err));
    ck_assert_str_eq(err, "invalid time zone name");
    ck_assert_ptr_null(tz_load("Mars/Olympus_Mons", err, sizeof err));
    ck_assert_str_eq(err, "unknown time zone \"Mars/Olympus_Mons\"");
    ck_assert_ptr_null(tz_load("Europe", err, sizeof err)); /* a directory */
    ck_assert_str_eq(err, "unknown time zone \"Europe\"");
    ck_assert_ptr_null(tz_load("zone.tab", err, sizeof err)); /* a file, not TZif */
    ck_assert_str_eq(err, "time zone \"zone.tab\": not a TZif file");
    ck_assert_ptr_null(tz_load(NULL, err, sizeof err));
    struct tz *tz = zone("Europe/Berlin");
    ck_assert_str_eq(tz_name(tz), "Europe/Berlin");
    tz_free(tz);
    tz = zone("UTC"); /* built in */
    ck_assert_str_eq(tz_name(tz), "UTC");
    ck_assert_int_eq(tz_offset(tz, 0), 0);
    ck_assert_int_eq(tz_span_after(tz, 0), 0);
    tz_free(tz);
    tz_free(NULL);
}
END_TEST

START_TEST(test_tz_offsets)
{
    struct tz *tz = zone("Europe/Berlin");
    int64_t t = ms("2026-03-29T01:00:00Z") / 1000; /* the spring transition */
    ck_assert_int_eq(tz_offset(tz, t - 1), 3600);
    ck_assert_int_eq(tz_offset(tz, t), 7200);
    ck_assert_int_eq(tz_offset(tz, ms("2026-10-25T00:59:59Z") / 1000), 7200);
    ck_assert_int_eq(tz_offset(tz, ms("2026-10-25T01:00:00Z") / 1000), 3600);
    ck_assert_int_eq(tz_offset(tz, ms("2045-07-01T00:00:00Z") / 1000), 7200); /* footer rule */
    ck_assert_int_eq(tz_offset(tz, ms("2045-12-01T00:00:00Z") / 1000), 3600);
    ck_assert_int_eq(tz_offset(tz, ms("1945-06-01T00:00:00Z") / 1000), 10800); /* CEMT, double summer time */
    ck_assert_int_eq(tz_offset(tz, -5000000000), 3208); /* LMT 0:53:28, before the first transition */

    /* Wall time to instants: a gap gives none and its end; an overlap gives two. */
    int64_t out[2], gap_end;
    int64_t wall = (ms("2026-03-29T02:30:00Z") / 1000); /* 02:30 local as if UTC */
    ck_assert_int_eq(tz_local_to_utc(tz, wall, out, &gap_end), 0);
    ck_assert_int_eq(gap_end, t);
    wall = ms("2026-10-25T02:30:00Z") / 1000;
    ck_assert_int_eq(tz_local_to_utc(tz, wall, out, &gap_end), 2);
    ck_assert_int_eq(out[0], ms("2026-10-25T00:30:00Z") / 1000);
    ck_assert_int_eq(out[1], ms("2026-10-25T01:30:00Z") / 1000);
    wall = ms("2026-07-01T12:00:00Z") / 1000;
    ck_assert_int_eq(tz_local_to_utc(tz, wall, out, &gap_end), 1);
    ck_assert_int_eq(out[0], ms("2026-07-01T10:00:00Z") / 1000);

    /* Spans and wall extents, which bound cron_next's search. */
    ck_assert_int_eq(tz_span_after(tz, ms("2026-01-01T00:00:00Z") / 1000), 3600);
    ck_assert_int_eq(tz_span_after(tz, -5000000000), 10800 - 3208); /* CEMT .. LMT */
    int64_t lo, hi, a = ms("2026-10-25T00:00:00Z") / 1000;          /* 02:00 CEST */
    tz_wall_extent(tz, a, a + 7200, &lo, &hi);
    ck_assert_int_eq(lo, a + 7200);            /* 02:00 CEST */
    ck_assert_int_eq(hi, a + 7200 + 3600);     /* 03:00 CET at the end, after 02:59:59 CEST */
    tz_wall_extent(tz, a, a + 3599, &lo, &hi); /* up to 02:59:59 CEST */
    ck_assert_int_eq(hi, a + 7200 + 3599);
    tz_free(tz);

    /* A version 1 file (32-bit times, no footer) gives the same offsets for its range. */
    FILE *f = fopen(TZ_DEFAULT_DIR "/Europe/Berlin", "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[8192];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(len, 44);
    uint32_t cnt[6];
    for (int i = 0; i < 6; i++)
        cnt[i] = (uint32_t)buf[20 + 4 * i] << 24 | (uint32_t)buf[21 + 4 * i] << 16 | (uint32_t)buf[22 + 4 * i] << 8 |
                 buf[23 + 4 * i];
    /* isutcnt isstdcnt leapcnt timecnt typecnt charcnt (RFC 8536 3.1) */
    size_t v1 = 44 + cnt[3] * 5 + cnt[4] * 6 + cnt[5] + cnt[2] * 8 + cnt[1] + cnt[0];
    ck_assert_uint_gt(cnt[3], 100); /* Debian ships "fat" files: the v1 block is complete */
    buf[4] = 0;
    struct tz *v1tz = tz_from_tzif(buf, v1, "v1", NULL, 0);
    ck_assert_ptr_nonnull(v1tz);
    tz = zone("Europe/Berlin");
    for (int64_t w = ms("1990-01-01T00:00:00Z") / 1000; w < ms("2037-01-01T00:00:00Z") / 1000; w += 86400 * 7)
        ck_assert_int_eq(tz_offset(v1tz, w), tz_offset(tz, w));
    tz_free(v1tz);
    tz_free(tz);

    tz = zone("America/New_York");
    ck_assert_int_eq(tz_offset(tz, ms("2026-01-15T00:00:00Z") / 1000), -18000);
    ck_assert_int_eq(tz_offset(tz, ms("2026-07-15T00:00:00Z") / 1000), -14400);
    tz_free(tz);
    tz = zone("Asia/Tokyo");
    ck_assert_int_eq(tz_offset(tz, ms("2026-07-15T00:00:00Z") / 1000), 32400);
    ck_assert_int_eq(tz_offset(tz, ms("2099-01-15T00:00:00Z") / 1000), 32400);
    tz_free(tz);
}
END_TEST

START_TEST(test_tz_posix_strings)
{
    char err[64];
    /* Southern hemisphere: DST spans the new year. */
    struct tz *tz = tz_from_posix("AEST-10AEDT,M10.1.0,M4.1.0/3", err, sizeof err);
    ck_assert_ptr_nonnull(tz);
    ck_assert_int_eq(tz_offset(tz, ms("2026-01-15T00:00:00Z") / 1000), 39600);
    ck_assert_int_eq(tz_offset(tz, ms("2026-07-15T00:00:00Z") / 1000), 36000);
    /* 2026-04-05 03:00 AEDT = 2026-04-04T16:00Z, 2026-10-04 02:00 AEST = 2026-10-03T16:00Z. */
    ck_assert_int_eq(tz_offset(tz, ms("2026-04-04T15:59:59Z") / 1000), 39600);
    ck_assert_int_eq(tz_offset(tz, ms("2026-04-04T16:00:00Z") / 1000), 36000);
    ck_assert_int_eq(tz_offset(tz, ms("2026-10-03T15:59:59Z") / 1000), 36000);
    ck_assert_int_eq(tz_offset(tz, ms("2026-10-03T16:00:00Z") / 1000), 39600);
    tz_free(tz);
    /* Quoted names and minutes. */
    tz = tz_from_posix("<+0330>-3:30", err, sizeof err);
    ck_assert_ptr_nonnull(tz);
    ck_assert_int_eq(tz_offset(tz, 0), 12600);
    tz_free(tz);
    /* Julian days and all-year DST (RFC 8536 example). */
    tz = tz_from_posix("EST5EDT,0/0,J365/25", err, sizeof err);
    ck_assert_ptr_nonnull(tz);
    ck_assert_int_eq(tz_offset(tz, ms("2026-01-01T12:00:00Z") / 1000), -14400);
    ck_assert_int_eq(tz_offset(tz, ms("2026-07-01T12:00:00Z") / 1000), -14400);
    ck_assert_int_eq(tz_offset(tz, ms("2026-12-31T23:00:00Z") / 1000), -14400);
    tz_free(tz);
    /* v3 extension: rule times beyond 24 h (Greenland's -2 -> -1 rule). */
    tz = tz_from_posix("<-02>2<-01>,M3.5.0/-1,M10.5.0/0", err, sizeof err);
    ck_assert_ptr_nonnull(tz);
    ck_assert_int_eq(tz_offset(tz, ms("2026-07-01T00:00:00Z") / 1000), -3600);
    ck_assert_int_eq(tz_offset(tz, ms("2026-01-01T00:00:00Z") / 1000), -7200);
    tz_free(tz);
    static const char *const bad[] = {"",
                                      "C",
                                      "CET",
                                      "CET-1CEST,M3.5.0",
                                      "CET-1CEST,M13.5.0,M10.5.0",
                                      "CET-1CEST,M3.6.0,M10.5.0",
                                      "CET-1CEST,J366,J1",
                                      "<+01-1",
                                      "CET-1x",
                                      "CET-25"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tz = tz_from_posix(bad[i], err, sizeof err);
        ck_assert_msg(tz == NULL, "accepted \"%s\"", bad[i]);
    }
}
END_TEST

START_TEST(test_tzif_truncated_and_corrupt)
{
    FILE *f = fopen(TZ_DEFAULT_DIR "/America/New_York", "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[16384];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(len, 100);
    char err[128];
    struct tz *tz = tz_from_tzif(buf, len, "NY", err, sizeof err);
    ck_assert_ptr_nonnull(tz);
    tz_free(tz);
    /* Every truncation is refused or parsed, never read out of bounds (ASan/valgrind). */
    for (size_t n = 0; n < len; n++) {
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, buf, n);
        tz = tz_from_tzif(copy, n, "NY", err, sizeof err);
        tz_free(tz);
        free(copy);
    }
    /* Flipped bytes in the headers and tables are refused or parsed, never trusted. */
    for (size_t i = 0; i < len; i += 3) {
        unsigned char save = buf[i];
        buf[i] ^= 0xa5;
        tz = tz_from_tzif(buf, len, "NY", err, sizeof err);
        if (tz) { /* whatever it parsed, lookups stay sane */
            (void)tz_offset(tz, 0);
            int64_t out[2], gap;
            (void)tz_local_to_utc(tz, 1774750000, out, &gap);
        }
        tz_free(tz);
        buf[i] = save;
    }
    ck_assert_ptr_null(tz_from_tzif((const unsigned char *)"TZif", 4, "x", err, sizeof err));
    ck_assert_str_eq(err, "not a TZif file");
}
END_TEST

static Suite *cron_suite(void)
{
    Suite *s = suite_create("cron");
    TCase *tc = tcase_create("parse");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_parse_every_form);
    tcase_add_test(tc, test_parse_names);
    tcase_add_test(tc, test_parse_sunday_0_and_7);
    tcase_add_test(tc, test_parse_errors_name_the_field);
    suite_add_tcase(s, tc);

    tc = tcase_create("next");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_next_field_forms_utc);
    tcase_add_test(tc, test_next_is_strictly_after);
    tcase_add_test(tc, test_leap_days);
    tcase_add_test(tc, test_31st_of_months);
    tcase_add_test(tc, test_vixie_dom_dow);
    tcase_add_test(tc, test_no_dst_zones);
    tcase_add_test(tc, test_never);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);

    tc = tcase_create("dst");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_berlin_fixed_time);
    tcase_add_test(tc, test_berlin_wildcard);
    tcase_add_test(tc, test_new_york);
    tcase_add_test(tc, test_half_hour_dst);
    suite_add_tcase(s, tc);

    tc = tcase_create("sched");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_every);
    tcase_add_test(tc, test_fires_between);
    tcase_add_test(tc, test_last_fire);
    suite_add_tcase(s, tc);

    tc = tcase_create("tz");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tz_names);
    tcase_add_test(tc, test_tz_offsets);
    tcase_add_test(tc, test_tz_posix_strings);
    tcase_add_test(tc, test_tzif_truncated_and_corrupt);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cron_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
