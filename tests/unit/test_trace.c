/* test_trace.c — src/core/trace.h, W3C Trace Context: which traceparent and tracestate values
 * a job keeps, the traceparent a schedule's fire starts; and how a push's own fields and its
 * headers combine (core/job.h: job_parse_push, job_trace_from_headers). */
#include "core/job.h"
#include "core/trace.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TP2 "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"

static int tp_ok(const char *s)
{
    return trace_parent_valid(s, strlen(s));
}

START_TEST(test_traceparent_version_00)
{
    ck_assert_int_eq(tp_ok(TP), 1);
    ck_assert_int_eq(tp_ok(TP2), 1);
    ck_assert_int_eq(tp_ok("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff"), 1); /* unknown flags pass */
    static const char *const bad[] = {
        "",
        "00",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",    /* 54 characters */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  /* 00 is exactly 55 */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  /* ditto */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",  /* ditto */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",   /* uppercase hex */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067aa0ba902b7-01",   /* one uppercase digit */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   /* all-zero trace-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   /* all-zero parent-id */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* version ff */
        "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* version not hex */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* separators */
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",   /*   */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",   /*   */
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",   /* fields shifted */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",   /* flags not hex */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-\n1",  /* a control character */
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  /* leading space */
        "00-4bf92f3577b34da6a3ce929d0e0e4736--0f067aa0ba902b7-01",   /* a '-' inside a field */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r", /* CR: never into a header */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(tp_ok(bad[i]) == 0, "accepted \"%s\"", bad[i]);
    ck_assert_int_eq(trace_parent_valid(NULL, 0), 0);
    /* not NUL-terminated: only len counts */
    ck_assert_int_eq(trace_parent_valid(TP "garbage", TRACE_PARENT_LEN), 1);
}
END_TEST

START_TEST(test_traceparent_later_versions)
{
    /* forward compatibility: a later version is read by its first 55 characters, then the end or
     * a '-' and whatever that version adds */
    ck_assert_int_eq(tp_ok("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), 1);
    ck_assert_int_eq(tp_ok("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next"), 1);
    ck_assert_int_eq(tp_ok("fe-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-"), 1);
    ck_assert_int_eq(tp_ok("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.x"), 0); /* no '-' after */
    ck_assert_int_eq(tp_ok("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0"), 0);    /* shorter */
    ck_assert_int_eq(tp_ok("cc-00000000000000000000000000000000-00f067aa0ba902b7-01"), 0);   /* zero id */
}
END_TEST

static int ts_ok(const char *s, const char *kept)
{
    size_t start = 99, keep = 99;
    int ok = trace_state_valid(s, strlen(s), &start, &keep);
    if (ok && kept)
        ck_assert_msg(keep == strlen(kept) && memcmp(s + start, kept, keep) == 0, "\"%s\" kept as \"%.*s\"", s,
                      (int)keep, s + start);
    return ok;
}

START_TEST(test_tracestate)
{
    ck_assert_int_eq(ts_ok("congo=t61rcWkgMzE", "congo=t61rcWkgMzE"), 1);
    ck_assert_int_eq(ts_ok("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", NULL), 1);
    ck_assert_int_eq(ts_ok("  rojo=1 , congo=2  ", "rojo=1 , congo=2"), 1); /* spaces around it trimmed */
    ck_assert_int_eq(ts_ok("a=1,,b=2", NULL), 1);                           /* empty members are allowed */
    ck_assert_int_eq(ts_ok("tenant@vendor=x", NULL), 1);
    ck_assert_int_eq(ts_ok("0a-_*/=v a l", NULL), 1);
    ck_assert_int_eq(ts_ok("k=v;with:all!sorts~of#punctuation", NULL), 1);

    static const char *const bad[] = {
        "",      " ",    ",",    ", ,",   "novalue", "=v",          "k=",     "K=v",
        "k=v=w", "k=\t", "_k=v", "k v=1", "k=v\n",   "k=v\r\nX: y", "k=\x7f", "k=\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(ts_ok(bad[i], NULL) == 0, "accepted \"%s\"", bad[i]);

    /* at most 512 characters and 32 members */
    char s[TRACE_STATE_MAX + 2];
    memset(s, 'v', sizeof s);
    memcpy(s, "k=", 2);
    s[TRACE_STATE_MAX] = '\0';
    ck_assert_int_eq(ts_ok(s, NULL), 0); /* a value longer than 256 */
    /* 32 members, 512 characters in all, then one more character */
    for (size_t len = TRACE_STATE_MAX; len <= TRACE_STATE_MAX + 1; len++) {
        size_t values = len - 31 - 32 * 4, n = 0; /* commas, "kNN=" */
        for (int m = 0; m < 32; m++) {
            size_t v = values / 32 + (m == 0 ? values % 32 : 0);
            n += (size_t)snprintf(s + n, sizeof s - n, "%sk%02d=", m ? "," : "", m);
            memset(s + n, 'v', v);
            n += v;
        }
        s[n] = '\0';
        ck_assert_uint_eq(strlen(s), len);
        ck_assert_msg(ts_ok(s, NULL) == (len <= TRACE_STATE_MAX), "length %zu", len);
    }
    char members[512] = "";
    for (int m = 0; m < 33; m++)
        snprintf(members + strlen(members), sizeof members - strlen(members), "%sk%d=v", m ? "," : "", m);
    ck_assert_int_eq(ts_ok(members, NULL), 0); /* 33 members */
    *strrchr(members, ',') = '\0';             /* 32 */
    ck_assert_int_eq(ts_ok(members, NULL), 1);
}
END_TEST

START_TEST(test_new_trace_for_a_fire)
{
    unsigned char r[TRACE_RANDOM_BYTES];
    for (int i = 0; i < TRACE_RANDOM_BYTES; i++)
        r[i] = (unsigned char)(0x10 * i + 1);
    char out[TRACE_PARENT_LEN + 1];
    ck_assert_int_eq(trace_parent_make(out, r), 0);
    ck_assert_str_eq(out, "00-01112131415161718191a1b1c1d1e1f1-0111213141516171-01");
    ck_assert_int_eq(tp_ok(out), 1);
    /* an all-zero trace-id or parent-id is no trace: draw again */
    memset(r, 0, 16);
    memset(out, 'x', sizeof out);
    ck_assert_int_eq(trace_parent_make(out, r), -1);
    ck_assert_int_eq(out[0], 'x');
    memset(r, 7, 16);
    memset(r + 16, 0, 8);
    ck_assert_int_eq(trace_parent_make(out, r), -1);
}
END_TEST

/* ---- a push's fields and headers (core/job.h) ---- */

static struct job_spec *parse(const char *body, int *n)
{
    struct job_limits lim = {.max_delay = 1000000,
                             .default_ttr = 30000,
                             .max_ttr = 86400000,
                             .default_tries = 3,
                             .max_tries = 100,
                             .max_batch = 1000};
    struct job_spec *jobs;
    int is_array;
    char err[256];
    enum push_parse_result rc = job_parse_push(body, strlen(body), &lim, 1000, &jobs, n, &is_array, err, sizeof err);
    ck_assert_msg(rc == PUSH_OK, "%s: %s", body, err);
    return jobs;
}

START_TEST(test_job_fields)
{
    int n;
    struct job_spec *j = parse("{\"topic\":\"t\",\"traceparent\":\"" TP "\",\"tracestate\":\" a=1 \"}", &n);
    ck_assert_str_eq(j[0].traceparent, TP);
    ck_assert_str_eq(j[0].tracestate, "a=1");
    ck_assert_uint_eq(j[0].tracestate_len, 3);
    job_specs_free(j, n);

    /* a later version keeps its first 55 characters */
    j = parse("{\"topic\":\"t\",\"traceparent\":\"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more\"}", &n);
    ck_assert_str_eq(j[0].traceparent, "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    ck_assert_ptr_null(j[0].tracestate);
    job_specs_free(j, n);

    /* anything malformed is ignored, never an error: no context, and no tracestate either */
    static const char *const ignored[] = {
        "\"traceparent\":\"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\",\"tracestate\":\"a=1\"",
        "\"traceparent\":\"00-00000000000000000000000000000000-00f067aa0ba902b7-01\",\"tracestate\":\"a=1\"",
        "\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\\n\"",
        "\"traceparent\":\"\"",
        "\"traceparent\":null,\"tracestate\":\"a=1\"",
        "\"traceparent\":55",
        "\"traceparent\":[\"" TP "\"]",
        "\"traceparent\":{\"v\":1}",
        "\"traceparent\":true",
        "\"tracestate\":\"a=1\"", /* a tracestate alone */
    };
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"topic\":\"t\",%s}", ignored[i]);
        j = parse(body, &n);
        ck_assert_msg(j[0].traceparent[0] == '\0' && j[0].tracestate == NULL, "%s", body);
        job_specs_free(j, n);
    }
    /* a bad tracestate alone is dropped; the traceparent stays */
    j = parse("{\"topic\":\"t\",\"traceparent\":\"" TP "\",\"tracestate\":\"K=\\u0001\"}", &n);
    ck_assert_str_eq(j[0].traceparent, TP);
    ck_assert_ptr_null(j[0].tracestate);
    job_specs_free(j, n);
    j = parse("{\"topic\":\"t\",\"traceparent\":\"" TP "\",\"tracestate\":7}", &n);
    ck_assert_str_eq(j[0].traceparent, TP);
    ck_assert_ptr_null(j[0].tracestate);
    job_specs_free(j, n);
}
END_TEST

START_TEST(test_headers_and_own_fields)
{
    int n;
    struct job_spec *j = parse("[{\"topic\":\"a\"},"
                               "{\"topic\":\"b\",\"traceparent\":\"" TP2 "\"},"
                               "{\"topic\":\"c\",\"traceparent\":\"" TP2 "\",\"tracestate\":\"own=1\"},"
                               "{\"topic\":\"d\",\"traceparent\":\"bad\",\"tracestate\":\"own=2\"}]",
                               &n);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(job_trace_from_headers(j, n, TP, "hdr=1"), 0);
    /* no field of its own: the headers' */
    ck_assert_str_eq(j[0].traceparent, TP);
    ck_assert_str_eq(j[0].tracestate, "hdr=1");
    /* its own traceparent wins, with its own tracestate (none here: not the header's) */
    ck_assert_str_eq(j[1].traceparent, TP2);
    ck_assert_ptr_null(j[1].tracestate);
    ck_assert_str_eq(j[2].traceparent, TP2);
    ck_assert_str_eq(j[2].tracestate, "own=1");
    /* a malformed one of its own counts as none: the headers' */
    ck_assert_str_eq(j[3].traceparent, TP);
    ck_assert_str_eq(j[3].tracestate, "hdr=1");
    job_specs_free(j, n);

    /* a malformed header traceparent: nothing, its tracestate dropped with it */
    j = parse("[{\"topic\":\"a\"},{\"topic\":\"b\"}]", &n);
    ck_assert_int_eq(job_trace_from_headers(j, n, "00-xyz", "hdr=1"), 0);
    ck_assert_int_eq(job_trace_from_headers(j, n, NULL, "hdr=1"), 0);
    for (int i = 0; i < n; i++)
        ck_assert(j[i].traceparent[0] == '\0' && j[i].tracestate == NULL);
    /* a malformed header tracestate alone is dropped */
    ck_assert_int_eq(job_trace_from_headers(j, n, TP, "a=1\r\nInjected: yes"), 0);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(j[i].traceparent, TP);
        ck_assert_ptr_null(j[i].tracestate);
    }
    job_specs_free(j, n);
}
END_TEST

static Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("w3c");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_traceparent_version_00);
    tcase_add_test(tc, test_traceparent_later_versions);
    tcase_add_test(tc, test_tracestate);
    tcase_add_test(tc, test_new_trace_for_a_fire);
    tcase_add_test(tc, test_job_fields);
    tcase_add_test(tc, test_headers_and_own_fields);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(trace_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
