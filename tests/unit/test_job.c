/* test_job.c — src/core/job.h: push validation, topics, bizKeys and state names. */
#include "core/job.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW INT64_C(1750000000000)
#define DAY INT64_C(86400000)

/* Defaults deliberately unlike the contract's, so a test sees they come from the limits. */
static const struct job_limits LIM = {
    .max_delay = 365 * DAY,
    .default_ttr = 12345,
    .max_ttr = DAY,
    .default_tries = 4,
    .max_tries = 50,
    .max_batch = 1000,
};

static char err[512];
static struct job_spec *jobs;
static int count, is_array;

static enum push_parse_result push_lim(const char *body, const struct job_limits *lim)
{
    err[0] = '\0';
    jobs = (struct job_spec *)1; /* must be reset by the parser */
    count = -1;
    is_array = -1;
    enum push_parse_result rc = job_parse_push(body, strlen(body), lim, NOW, &jobs, &count, &is_array, err, sizeof err);
    if (rc != PUSH_OK) {
        ck_assert_ptr_null(jobs);
        ck_assert_int_eq(count, 0);
        ck_assert_str_ne(err, "");
    }
    return rc;
}

static enum push_parse_result push(const char *body)
{
    return push_lim(body, &LIM);
}

static void done(void)
{
    job_specs_free(jobs, count);
    jobs = NULL;
    count = 0;
}

/* Push one object that must fail; the message must mention `word`. */
static void push_bad(const char *body, const char *word)
{
    ck_assert_msg(push(body) == PUSH_BAD, "accepted: %s", body);
    if (word)
        ck_assert_msg(strstr(err, word) != NULL, "%s: message \"%s\" does not mention %s", body, err, word);
}

/* ---- single objects ---- */

START_TEST(test_minimal_defaults)
{
    ck_assert_int_eq(push("{\"topic\":\"orders\"}"), PUSH_OK);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(is_array, 0);
    ck_assert_str_eq(jobs[0].topic, "orders");
    ck_assert_uint_eq(jobs[0].topic_len, 6);
    ck_assert_int_eq(jobs[0].priority, 5);
    ck_assert_int_eq(jobs[0].ttr, 12345);
    ck_assert_int_eq(jobs[0].tries, 4);
    ck_assert_int_eq(jobs[0].run_at, NOW); /* delay 0 */
    ck_assert_str_eq(jobs[0].body, "null");
    ck_assert_uint_eq(jobs[0].body_len, 4);
    ck_assert_ptr_null(jobs[0].biz_key);
    ck_assert_int_eq(jobs[0].replace, 0);
    done();
}
END_TEST

START_TEST(test_all_fields)
{
    ck_assert_int_eq(push("{\"topic\":\"t\",\"body\":{\"x\":1},\"delay\":1500,\"priority\":0,\"ttr\":0,"
                          "\"tries\":1,\"bizKey\":\"order-17\",\"replace\":true}"),
                     PUSH_OK);
    ck_assert_int_eq(jobs[0].run_at, NOW + 1500);
    ck_assert_int_eq(jobs[0].priority, 0);
    ck_assert_int_eq(jobs[0].ttr, 0); /* 0 = at most once */
    ck_assert_int_eq(jobs[0].tries, 1);
    ck_assert_str_eq(jobs[0].biz_key, "order-17");
    ck_assert_uint_eq(jobs[0].biz_len, 8);
    ck_assert_int_eq(jobs[0].replace, 1);
    ck_assert_str_eq(jobs[0].body, "{\"x\":1}");
    ck_assert_int_eq(jobs[0].has_backoff, 0); /* the topic's */
    done();
}
END_TEST

START_TEST(test_backoff)
{
    ck_assert_int_eq(push("{\"topic\":\"t\",\"backoff\":2500}"), PUSH_OK);
    ck_assert_int_eq(jobs[0].has_backoff, 1);
    ck_assert_int_eq(jobs[0].backoff, 2500);
    done();
    ck_assert_int_eq(push("{\"topic\":\"t\",\"backoff\":0}"), PUSH_OK);
    ck_assert_int_eq(jobs[0].has_backoff, 1);
    ck_assert_int_eq(jobs[0].backoff, 0);
    done();
    char body[96];
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"backoff\":%lld}", JOB_BACKOFF_MAX + 1);
    push_bad(body, "backoff");
}
END_TEST

START_TEST(test_delay_and_run_at)
{
    char body[160];
    /* runAt in the future */
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"runAt\":%lld}", (long long)(NOW + 60000));
    ck_assert_int_eq(push(body), PUSH_OK);
    ck_assert_int_eq(jobs[0].run_at, NOW + 60000);
    done();
    /* runAt in the past: due now */
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"runAt\":%lld}", (long long)(NOW - 60000));
    ck_assert_int_eq(push(body), PUSH_OK);
    ck_assert_int_eq(jobs[0].run_at, NOW);
    done();
    ck_assert_int_eq(push("{\"topic\":\"t\",\"runAt\":0}"), PUSH_OK);
    ck_assert_int_eq(jobs[0].run_at, NOW);
    done();
    /* exactly max_delay ahead is allowed, one more ms is not */
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"runAt\":%lld}", (long long)(NOW + LIM.max_delay));
    ck_assert_int_eq(push(body), PUSH_OK);
    ck_assert_int_eq(jobs[0].run_at, NOW + LIM.max_delay);
    done();
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"runAt\":%lld}", (long long)(NOW + LIM.max_delay + 1));
    push_bad(body, "runAt");
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"delay\":%lld}", (long long)LIM.max_delay);
    ck_assert_int_eq(push(body), PUSH_OK);
    ck_assert_int_eq(jobs[0].run_at, NOW + LIM.max_delay);
    done();
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"delay\":%lld}", (long long)(LIM.max_delay + 1));
    push_bad(body, "delay");
    /* both: refused, even when they agree */
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"delay\":1000,\"runAt\":%lld}", (long long)(NOW + 1000));
    push_bad(body, "runAt");
    push_bad("{\"topic\":\"t\",\"delay\":0,\"runAt\":0}", "delay");
}
END_TEST

START_TEST(test_integer_field_errors)
{
    static const char *const fields[] = {"delay", "runAt", "priority", "ttr", "tries", "backoff"};
    static const char *const bad_values[] = {"\"5\"", "1.5", "5.0", "true", "null", "[1]", "{}", "-1", "1e3"};
    char body[160];
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        for (size_t v = 0; v < sizeof bad_values / sizeof bad_values[0]; v++) {
            snprintf(body, sizeof body, "{\"topic\":\"t\",\"%s\":%s}", fields[f], bad_values[v]);
            push_bad(body, fields[f]);
        }
}
END_TEST

START_TEST(test_ranges)
{
    char body[160];
    /* priority 0..9 */
    for (int p = 0; p <= 9; p++) {
        snprintf(body, sizeof body, "{\"topic\":\"t\",\"priority\":%d}", p);
        ck_assert_int_eq(push(body), PUSH_OK);
        ck_assert_int_eq(jobs[0].priority, p);
        done();
    }
    push_bad("{\"topic\":\"t\",\"priority\":10}", "priority");
    push_bad("{\"topic\":\"t\",\"priority\":-1}", "priority");
    /* ttr 0..max_ttr */
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"ttr\":%lld}", (long long)LIM.max_ttr);
    ck_assert_int_eq(push(body), PUSH_OK);
    ck_assert_int_eq(jobs[0].ttr, LIM.max_ttr);
    done();
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"ttr\":%lld}", (long long)LIM.max_ttr + 1);
    push_bad(body, "ttr");
    /* tries 1..max_tries */
    push_bad("{\"topic\":\"t\",\"tries\":0}", "tries");
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"tries\":%d}", LIM.max_tries);
    ck_assert_int_eq(push(body), PUSH_OK);
    ck_assert_int_eq(jobs[0].tries, LIM.max_tries);
    done();
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"tries\":%d}", LIM.max_tries + 1);
    push_bad(body, "tries");
    /* huge numbers do not wrap */
    push_bad("{\"topic\":\"t\",\"delay\":9223372036854775807}", "delay");
    push_bad("{\"topic\":\"t\",\"runAt\":9223372036854775807}", "runAt");
    push_bad("{\"topic\":\"t\",\"tries\":4294967297}", "tries");
    push_bad("{\"topic\":\"t\",\"priority\":4294967296}", "priority");
}
END_TEST

START_TEST(test_topic_errors)
{
    char body[400], topic[200];
    push_bad("{}", "topic");
    push_bad("{\"body\":1}", "topic");
    push_bad("{\"topic\":\"\"}", "topic");
    push_bad("{\"topic\":null}", "topic");
    push_bad("{\"topic\":5}", "topic");
    push_bad("{\"topic\":[\"a\"]}", "topic");
    push_bad("{\"topic\":\"a b\"}", "topic");
    push_bad("{\"topic\":\"a/b\"}", "topic");
    push_bad("{\"topic\":\"a,b\"}", "topic");
    push_bad("{\"topic\":\"\\u00e9\"}", "topic");
    memset(topic, 'x', 128);
    topic[128] = '\0';
    snprintf(body, sizeof body, "{\"topic\":\"%s\"}", topic);
    ck_assert_int_eq(push(body), PUSH_OK);
    ck_assert_uint_eq(jobs[0].topic_len, 128);
    ck_assert_str_eq(jobs[0].topic, topic);
    done();
    topic[128] = 'x';
    topic[129] = '\0';
    snprintf(body, sizeof body, "{\"topic\":\"%s\"}", topic);
    push_bad(body, "topic");
}
END_TEST

START_TEST(test_unknown_and_duplicate_fields)
{
    push_bad("{\"topic\":\"t\",\"color\":\"red\"}", "color");
    push_bad("{\"topic\":\"t\",\"Topic\":\"t\"}", "Topic"); /* names are case-sensitive */
    push_bad("{\"topic\":\"t\",\"run_at\":1}", "run_at");
    push_bad("{\"topic\":\"t\",\"id\":\"1\"}", "\"id\"");
    push_bad("{\"topic\":\"t\",\"state\":\"ready\"}", "state");
    /* a repeated key: which one wins would be a guess, so neither does */
    ck_assert_int_eq(push("{\"topic\":\"a\",\"topic\":\"b\"}"), PUSH_BAD);
    ck_assert_int_eq(push("{\"topic\":\"a\",\"delay\":1,\"delay\":1}"), PUSH_BAD);
    ck_assert_int_eq(push("[{\"topic\":\"a\"},{\"topic\":\"a\",\"priority\":1,\"priority\":2}]"), PUSH_BAD);
}
END_TEST

static void check_body(const char *value, const char *want)
{
    char body[512];
    snprintf(body, sizeof body, "{\"topic\":\"t\",\"body\":%s}", value);
    ck_assert_msg(push(body) == PUSH_OK, "%s: %s", value, err);
    ck_assert_str_eq(jobs[0].body, want);
    ck_assert_uint_eq(jobs[0].body_len, strlen(want));
    /* independent check: the stored text is the same JSON value as what was sent */
    json_t *sent = json_loads(value, JSON_DECODE_ANY, NULL);
    json_t *kept = json_loadb(jobs[0].body, jobs[0].body_len, JSON_DECODE_ANY, NULL);
    ck_assert_ptr_nonnull(sent);
    ck_assert_ptr_nonnull(kept);
    ck_assert_msg(json_equal(sent, kept), "%s stored as %s", value, jobs[0].body);
    json_decref(sent);
    json_decref(kept);
    done();
}

START_TEST(test_body_any_json_value)
{
    check_body("{ \"a\" : 1 , \"b\" : [ true , null , \"x\" ] }", "{\"a\":1,\"b\":[true,null,\"x\"]}");
    check_body("[1, 2, {\"k\": {}}]", "[1,2,{\"k\":{}}]");
    check_body("\"just a string\"", "\"just a string\"");
    check_body("\"\"", "\"\"");
    check_body("42", "42");
    check_body("-7", "-7");
    check_body("1.5", "1.5");
    check_body("true", "true");
    check_body("false", "false");
    check_body("null", "null");
    check_body("{}", "{}");
    check_body("[]", "[]");
    /* escapes are kept as sent: the same value, not re-encoded */
    check_body("\"caf\\u00e9 \\u20ac\"", "\"caf\\u00e9 \\u20ac\"");
    check_body("\"caf\xc3\xa9 \xe2\x82\xac\"", "\"caf\xc3\xa9 \xe2\x82\xac\"");
    /* numbers keep their text: no binary round trip (0.1 stays 0.1, 1e2 stays 1e2) */
    check_body("0.1", "0.1");
    check_body("[1e2, 2.50, -0.0]", "[1e2,2.50,-0.0]");
    /* whitespace inside strings is the value; between tokens it is not */
    check_body("\" a  b \"", "\" a  b \"");
    check_body("\"quote\\\" back\\\\ nl\\n\"", "\"quote\\\" back\\\\ nl\\n\"");
    /* members keep their order */
    check_body("{\"z\":1,\"a\":2,\"m\":3}", "{\"z\":1,\"a\":2,\"m\":3}");

    /* values jansson cannot hold are still the producer's to send */
    ck_assert_int_eq(push("{\"topic\":\"t\",\"body\":123456789012345678901234567890}"), PUSH_OK);
    ck_assert_str_eq(jobs[0].body, "123456789012345678901234567890");
    done();
    ck_assert_int_eq(push("{\"topic\":\"t\",\"body\":{\"k\":1,\"k\":2}}"), PUSH_OK);
    ck_assert_str_eq(jobs[0].body, "{\"k\":1,\"k\":2}");
    done();
    /* but it must be JSON */
    ck_assert_int_eq(push("{\"topic\":\"t\",\"body\":01}"), PUSH_BAD);
    ck_assert_int_eq(push("{\"topic\":\"t\",\"body\":[1,]}"), PUSH_BAD);
    ck_assert_int_eq(push("{\"topic\":\"t\",\"body\":\"\\ud800\"}"), PUSH_BAD);
    ck_assert_int_eq(push("{\"topic\":\"t\",\"body\":\"\xff\"}"), PUSH_BAD);

    /* absent -> null */
    ck_assert_int_eq(push("{\"topic\":\"t\"}"), PUSH_OK);
    ck_assert_str_eq(jobs[0].body, "null");
    done();
}
END_TEST

START_TEST(test_replace)
{
    push_bad("{\"topic\":\"t\",\"replace\":true}", "bizKey");
    push_bad("{\"topic\":\"t\",\"replace\":true,\"bizKey\":null}", "bizKey");
    push_bad("{\"topic\":\"t\",\"replace\":\"yes\",\"bizKey\":\"k\"}", "replace");
    push_bad("{\"topic\":\"t\",\"replace\":1,\"bizKey\":\"k\"}", "replace");
    ck_assert_int_eq(push("{\"topic\":\"t\",\"replace\":false}"), PUSH_OK);
    ck_assert_int_eq(jobs[0].replace, 0);
    done();
    ck_assert_int_eq(push("{\"topic\":\"t\",\"bizKey\":\"k\",\"replace\":true}"), PUSH_OK);
    ck_assert_int_eq(jobs[0].replace, 1);
    done();
}
END_TEST

/* A push with bizKey = the JSON text `json_str` (already a JSON string literal). */
static enum push_parse_result push_biz(const char *json_str)
{
    size_t n = strlen(json_str) + 64;
    char *body = malloc(n);
    ck_assert_ptr_nonnull(body);
    snprintf(body, n, "{\"topic\":\"t\",\"bizKey\":%s}", json_str);
    enum push_parse_result rc = push(body);
    free(body);
    return rc;
}

static char *repeat(const char *unit, int times)
{
    size_t u = strlen(unit);
    char *s = malloc(u * (size_t)times + 3);
    ck_assert_ptr_nonnull(s);
    s[0] = '"';
    for (int i = 0; i < times; i++)
        memcpy(s + 1 + u * (size_t)i, unit, u);
    s[1 + u * (size_t)times] = '"';
    s[2 + u * (size_t)times] = '\0';
    return s;
}

START_TEST(test_bizkey_in_push)
{
    ck_assert_int_eq(push_biz("\"order-17\""), PUSH_OK);
    ck_assert_str_eq(jobs[0].biz_key, "order-17");
    done();
    ck_assert_int_eq(push_biz("null"), PUSH_OK); /* null = no bizKey */
    ck_assert_ptr_null(jobs[0].biz_key);
    done();
    ck_assert_int_eq(push_biz("\"with space & \\u00e9\""), PUSH_OK);
    ck_assert_str_eq(jobs[0].biz_key, "with space & \xc3\xa9");
    ck_assert_uint_eq(jobs[0].biz_len, 15);
    done();

    static const char *const bad[] = {"\"\"",        "5",           "true",        "[\"k\"]",     "{}",
                                      "\"a\\nb\"",   "\"a\\tb\"",   "\"\\u0001\"", "\"\\u001f\"", "\"\\u007f\"",
                                      "\"\\u0085\"", "\"\\u2028\"", "\"\\u2029\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(push_biz(bad[i]) == PUSH_BAD, "bizKey %s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "bizKey"));
    }

    /* 128 characters allowed, 129 refused: counted in code points, not bytes */
    static const char *const units[] = {"k", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\\u00e9"};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        char *s = repeat(units[u], BIZKEY_MAX);
        ck_assert_msg(push_biz(s) == PUSH_OK, "128 x %s refused: %s", units[u], err);
        done();
        free(s);
        s = repeat(units[u], BIZKEY_MAX + 1);
        ck_assert_msg(push_biz(s) == PUSH_BAD, "129 x %s accepted", units[u]);
        free(s);
    }
}
END_TEST

static int biz(const char *s)
{
    return job_bizkey_valid(s, strlen(s));
}

START_TEST(test_bizkey_valid)
{
    ck_assert(biz("a"));
    ck_assert(biz("order:2024-01-01/#17"));
    ck_assert(biz("\xc3\xa9"));         /* é */
    ck_assert(biz("\xe2\x82\xac"));     /* € */
    ck_assert(biz("\xf0\x9d\x84\x9e")); /* 𝄞 */
    ck_assert(biz("\xf4\x8f\xbf\xbf")); /* U+10FFFF */
    ck_assert(biz("\xc2\xa0"));         /* no-break space: printable */
    ck_assert(!biz(""));
    /* control characters: C0, DEL, C1, line/paragraph separators */
    ck_assert(!biz("a\x01"));
    ck_assert(!biz("\x1f"));
    ck_assert(!biz("a\nb"));
    ck_assert(!biz("\x7f"));
    ck_assert(!biz("\xc2\x80"));
    ck_assert(!biz("\xc2\x9f"));
    ck_assert(!biz("\xe2\x80\xa8"));
    ck_assert(!biz("\xe2\x80\xa9"));
    ck_assert(!job_bizkey_valid("a\0b", 3));
    /* invalid UTF-8 */
    ck_assert(!biz("\x80")); /* stray continuation byte */
    ck_assert(!biz("a\xbf"));
    ck_assert(!biz("\xc3")); /* truncated */
    ck_assert(!biz("\xe2\x82"));
    ck_assert(!biz("\xf0\x9f\x98"));
    ck_assert(!biz("\xc3(")); /* bad continuation */
    ck_assert(!biz("\xe2(\xac"));
    ck_assert(!biz("\xc0\x80"));     /* overlong NUL */
    ck_assert(!biz("\xc1\xbf"));     /* overlong */
    ck_assert(!biz("\xe0\x80\xaf")); /* overlong '/' */
    ck_assert(!biz("\xf0\x80\x80\xaf"));
    ck_assert(!biz("\xed\xa0\x80"));         /* surrogate U+D800 */
    ck_assert(!biz("\xed\xbf\xbf"));         /* U+DFFF */
    ck_assert(!biz("\xf4\x90\x80\x80"));     /* U+110000 */
    ck_assert(!biz("\xf8\x88\x80\x80\x80")); /* 5-byte form */
    ck_assert(!biz("\xfe"));
    ck_assert(!biz("\xff"));
    /* only `len` bytes: a multibyte character cut by len is invalid */
    ck_assert(!job_bizkey_valid("\xc3\xa9", 1));
    ck_assert(job_bizkey_valid("ab\xc3\xa9", 2));
}
END_TEST

/* ---- arrays ---- */

START_TEST(test_array_ok)
{
    ck_assert_int_eq(push("[{\"topic\":\"a\"},{\"topic\":\"b\",\"delay\":5,\"body\":[1]},{\"topic\":\"c\","
                          "\"bizKey\":\"k\"}]"),
                     PUSH_OK);
    ck_assert_int_eq(is_array, 1);
    ck_assert_int_eq(count, 3);
    ck_assert_str_eq(jobs[0].topic, "a");
    ck_assert_str_eq(jobs[1].topic, "b");
    ck_assert_str_eq(jobs[2].topic, "c");
    ck_assert_int_eq(jobs[1].run_at, NOW + 5);
    ck_assert_str_eq(jobs[1].body, "[1]");
    ck_assert_str_eq(jobs[0].body, "null");
    ck_assert_str_eq(jobs[2].biz_key, "k");
    ck_assert_ptr_null(jobs[0].biz_key);
    done();

    /* a one-element array is still an array */
    ck_assert_int_eq(push("[{\"topic\":\"a\"}]"), PUSH_OK);
    ck_assert_int_eq(is_array, 1);
    ck_assert_int_eq(count, 1);
    done();
}
END_TEST

START_TEST(test_array_errors_name_the_index)
{
    ck_assert_int_eq(push("[{\"topic\":\"a\"},{\"topic\":\"b\"},{\"topic\":\"c\"},{\"topic\":\"d\",\"priority\":11}]"),
                     PUSH_BAD);
    ck_assert_msg(strncmp(err, "jobs[3]: ", 9) == 0, "message: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "priority"));

    ck_assert_int_eq(push("[{\"topic\":\"a\",\"nope\":1}]"), PUSH_BAD);
    ck_assert_msg(strncmp(err, "jobs[0]: ", 9) == 0, "message: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "nope"));

    /* all-or-nothing: good items before and after a bad one are not returned */
    ck_assert_int_eq(push("[{\"topic\":\"a\"},{\"topic\":\"\"},{\"topic\":\"c\"}]"), PUSH_BAD);
    ck_assert_msg(strncmp(err, "jobs[1]: ", 9) == 0, "message: %s", err);

    /* a single object's errors carry no index */
    ck_assert_int_eq(push("{\"topic\":\"a\",\"priority\":11}"), PUSH_BAD);
    ck_assert_ptr_null(strstr(err, "jobs["));
}
END_TEST

START_TEST(test_array_non_object_items)
{
    static const char *const items[] = {"1", "\"x\"", "null", "true", "[]", "[{\"topic\":\"a\"}]"};
    char body[128];
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        snprintf(body, sizeof body, "[{\"topic\":\"a\"},%s]", items[i]);
        ck_assert_msg(push(body) == PUSH_BAD, "%s accepted", body);
        ck_assert_msg(strncmp(err, "jobs[1]: ", 9) == 0, "message: %s", err);
    }
}
END_TEST

START_TEST(test_array_empty)
{
    ck_assert_int_eq(push("[]"), PUSH_BAD);
    ck_assert_int_eq(push(" [ ] "), PUSH_BAD);
}
END_TEST

static char *array_of(int n)
{
    size_t cap = (size_t)n * 20 + 16;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    size_t o = 0;
    s[o++] = '[';
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s{\"topic\":\"t%d\"}", i ? "," : "", i);
    s[o++] = ']';
    s[o] = '\0';
    return s;
}

START_TEST(test_array_max_batch)
{
    char *s = array_of(1000);
    ck_assert_int_eq(push(s), PUSH_OK);
    ck_assert_int_eq(count, 1000);
    ck_assert_str_eq(jobs[999].topic, "t999");
    done();
    free(s);
    s = array_of(1001);
    ck_assert_int_eq(push(s), PUSH_TOO_MANY);
    free(s);

    struct job_limits small = LIM;
    small.max_batch = 3;
    s = array_of(3);
    ck_assert_int_eq(push_lim(s, &small), PUSH_OK);
    ck_assert_int_eq(count, 3);
    done();
    free(s);
    s = array_of(4);
    ck_assert_int_eq(push_lim(s, &small), PUSH_TOO_MANY);
    free(s);
}
END_TEST

START_TEST(test_not_a_job)
{
    static const char *const bad[] = {"42",
                                      "\"job\"",
                                      "null",
                                      "true",
                                      "{",
                                      "[{\"topic\":\"a\"}",
                                      "{}x",
                                      "{} {}",
                                      "{\"topic\":'a'}",
                                      "{\"topic\":\"a\",}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(push(bad[i]) == PUSH_BAD, "%s accepted", bad[i]);
    /* empty body */
    ck_assert_int_eq(push(""), PUSH_BAD);
    /* invalid UTF-8 inside a string */
    ck_assert_int_eq(push("{\"topic\":\"a\",\"body\":\"\xff\"}"), PUSH_BAD);
    /* only `len` bytes are parsed */
    ck_assert_int_eq(
        job_parse_push("{\"topic\":\"a\"}garbage", 13, &LIM, NOW, &jobs, &count, &is_array, err, sizeof err), PUSH_OK);
    done();
}
END_TEST

/* ---- topics ---- */

static int tv(const char *s)
{
    return job_topic_valid(s, strlen(s));
}

START_TEST(test_topic_valid)
{
    ck_assert(tv("a"));
    ck_assert(tv("ABCXYZabcxyz0189_.:-"));
    ck_assert(tv("orders.v2:eu-west_1"));
    ck_assert(tv("-"));
    ck_assert(!tv(""));
    static const char not_allowed[] = " !\"#$%&'()*+,/;<=>?@[\\]^`{|}~\t\n\x7f\x80\xff";
    for (size_t i = 0; i < sizeof not_allowed - 1; i++) {
        char t[4] = {'a', not_allowed[i], 'b', '\0'};
        ck_assert_msg(!job_topic_valid(t, 3), "0x%02x allowed", (unsigned char)not_allowed[i]);
    }
    ck_assert(!job_topic_valid("a\0b", 3));
    char t[200];
    memset(t, 'q', sizeof t);
    ck_assert(job_topic_valid(t, 128));
    ck_assert(!job_topic_valid(t, 129));
    ck_assert(job_topic_valid("ab,c", 2));
}
END_TEST

static int tlist(const char *in, const char **topics, size_t *lens, char *buf)
{
    strcpy(buf, in);
    err[0] = '\0';
    return job_topic_list_parse(buf, strlen(buf), topics, lens, err, sizeof err);
}

START_TEST(test_topic_list)
{
    char buf[8192];
    const char *topics[TOPICS_PER_GET + 8];
    size_t lens[TOPICS_PER_GET + 8];

    ck_assert_int_eq(tlist("a,bb,ccc", topics, lens, buf), 3);
    ck_assert_uint_eq(lens[0], 1);
    ck_assert_uint_eq(lens[1], 2);
    ck_assert_uint_eq(lens[2], 3);
    ck_assert_int_eq(memcmp(topics[0], "a", 1), 0);
    ck_assert_int_eq(memcmp(topics[1], "bb", 2), 0);
    ck_assert_int_eq(memcmp(topics[2], "ccc", 3), 0);
    ck_assert_str_eq(topics[0], "a"); /* commas became NULs */
    ck_assert_str_eq(topics[1], "bb");

    ck_assert_int_eq(tlist("orders", topics, lens, buf), 1);
    ck_assert_uint_eq(lens[0], 6);
    ck_assert_int_eq(memcmp(topics[0], "orders", 6), 0);

    /* empty elements */
    static const char *const bad[] = {"", ",", "a,", ",a", "a,,b", "a,b,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(tlist(bad[i], topics, lens, buf) == -1, "\"%s\" accepted", bad[i]);
    /* invalid characters */
    ck_assert_int_eq(tlist("a,b c", topics, lens, buf), -1);
    ck_assert_int_eq(tlist("a;b", topics, lens, buf), -1);
    ck_assert_int_eq(tlist("a,b/c", topics, lens, buf), -1);
    /* duplicates */
    ck_assert_int_eq(tlist("a,b,a", topics, lens, buf), -1);
    ck_assert_ptr_nonnull(strstr(err, "a"));
    ck_assert_int_eq(tlist("x,x", topics, lens, buf), -1);
    ck_assert_int_eq(tlist("ab,a,abc", topics, lens, buf), 3); /* prefixes are different topics */

    /* 32 topics allowed, 33 refused */
    char list[1024];
    size_t o = 0;
    for (int i = 0; i < TOPICS_PER_GET; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%st%d", i ? "," : "", i);
    ck_assert_int_eq(tlist(list, topics, lens, buf), TOPICS_PER_GET);
    ck_assert_str_eq(topics[31], "t31");
    snprintf(list + o, sizeof list - o, ",t%d", TOPICS_PER_GET);
    ck_assert_int_eq(tlist(list, topics, lens, buf), -1);
    ck_assert_ptr_nonnull(strstr(err, "32"));

    /* each topic is limited like a single one */
    char longt[300];
    memset(longt, 'z', 129);
    strcpy(longt + 129, ",a");
    ck_assert_int_eq(tlist(longt, topics, lens, buf), -1);
    memset(longt, 'z', 128);
    strcpy(longt + 128, ",a");
    ck_assert_int_eq(tlist(longt, topics, lens, buf), 2);
    ck_assert_uint_eq(lens[0], 128);
}
END_TEST

/* ---- states ---- */

START_TEST(test_state_names)
{
    /* the contract's names */
    ck_assert_str_eq(job_state_name(JS_DELAYED), "delayed");
    ck_assert_str_eq(job_state_name(JS_READY), "ready");
    ck_assert_str_eq(job_state_name(JS_RESERVED), "reserved");
    ck_assert_str_eq(job_state_name(JS_FINISHED), "finished");
    ck_assert_str_eq(job_state_name(JS_DELETED), "deleted");
    ck_assert_str_eq(job_state_name(JS_DEAD), "dead");
    ck_assert_str_eq(job_state_name(JS_NONE), "");
    ck_assert_str_eq(job_state_name(JS_FAR), "far");
    for (int s = JS_DELAYED; s <= JS_FAR; s++) {
        const char *name = job_state_name(s);
        ck_assert_uint_gt(strlen(name), 0);
        ck_assert_int_eq(job_state_parse(name), s);
        for (int t = s + 1; t <= JS_FAR; t++)
            ck_assert_str_ne(name, job_state_name(t));
    }
    ck_assert_int_eq(job_state_parse(""), -1);
    ck_assert_int_eq(job_state_parse("bogus"), -1);
    ck_assert_int_eq(job_state_parse("read"), -1);
    ck_assert_int_eq(job_state_parse("readyx"), -1);
    /* out of range: a string, but none that parses back */
    ck_assert_ptr_nonnull(job_state_name(-1));
    ck_assert_ptr_nonnull(job_state_name(JS_FAR + 1));
    ck_assert_int_eq(job_state_parse(job_state_name(JS_FAR + 1)), -1);
    ck_assert_int_eq(job_state_parse(job_state_name(-1)), -1);
}
END_TEST

static Suite *job_suite(void)
{
    Suite *s = suite_create("job");
    TCase *tc = tcase_create("push");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_minimal_defaults);
    tcase_add_test(tc, test_all_fields);
    tcase_add_test(tc, test_backoff);
    tcase_add_test(tc, test_delay_and_run_at);
    tcase_add_test(tc, test_integer_field_errors);
    tcase_add_test(tc, test_ranges);
    tcase_add_test(tc, test_topic_errors);
    tcase_add_test(tc, test_unknown_and_duplicate_fields);
    tcase_add_test(tc, test_body_any_json_value);
    tcase_add_test(tc, test_replace);
    tcase_add_test(tc, test_bizkey_in_push);
    tcase_add_test(tc, test_not_a_job);
    suite_add_tcase(s, tc);

    tc = tcase_create("arrays");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_array_ok);
    tcase_add_test(tc, test_array_errors_name_the_index);
    tcase_add_test(tc, test_array_non_object_items);
    tcase_add_test(tc, test_array_empty);
    tcase_add_test(tc, test_array_max_batch);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_bizkey_valid);
    tcase_add_test(tc, test_topic_valid);
    tcase_add_test(tc, test_topic_list);
    tcase_add_test(tc, test_state_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(job_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
