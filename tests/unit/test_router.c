/* test_router.c — src/core/router.h: paths to endpoints, path arguments, methods, admin endpoints. */
#include "core/router.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum route_status match(const char *path, struct route *r)
{
    return router_match(path, strlen(path), r);
}

/* The contract's endpoint table. */
static const struct {
    const char *path;
    enum endpoint ep;
} exact[] = {
    {"/push", EP_PUSH},       {"/finish", EP_FINISH},         {"/release", EP_RELEASE}, {"/touch", EP_TOUCH},
    {"/delete", EP_DELETE},   {"/reschedule", EP_RESCHEDULE}, {"/reStore", EP_RESTORE}, {"/health", EP_HEALTH},
    {"/stats", EP_STATS},     {"/metrics", EP_METRICS},       {"/fleet", EP_FLEET},     {"/throughput", EP_THROUGHPUT},
    {"/console", EP_CONSOLE},
};

static const struct {
    const char *prefix;
    enum endpoint ep;
} with_arg[] = {
    {"/get/", EP_GET},         {"/jobs/", EP_JOBS}, {"/dead/", EP_DEAD}, {"/reStore/", EP_RESTORE_ONE},
    {"/console/", EP_CONSOLE},
};

#define N_EXACT (sizeof exact / sizeof exact[0])
#define N_ARG   (sizeof with_arg / sizeof with_arg[0])

START_TEST(test_exact_paths)
{
    struct route r;
    for (size_t i = 0; i < N_EXACT; i++) {
        memset(&r, 'x', sizeof r);
        ck_assert_msg(match(exact[i].path, &r) == ROUTE_OK, "%s", exact[i].path);
        ck_assert_int_eq(r.endpoint, exact[i].ep);
        ck_assert_uint_eq(r.arg_len, 0);
        ck_assert_str_eq(r.arg, "");
    }
}
END_TEST

START_TEST(test_arg_paths)
{
    struct route r;
    char path[64];
    for (size_t i = 0; i < N_ARG; i++) {
        snprintf(path, sizeof path, "%s%s", with_arg[i].prefix, "orders.v2");
        ck_assert_int_eq(match(path, &r), ROUTE_OK);
        ck_assert_int_eq(r.endpoint, with_arg[i].ep);
        ck_assert_str_eq(r.arg, "orders.v2");
        ck_assert_uint_eq(r.arg_len, 9);
    }
    ck_assert_int_eq(match("/jobs/123456789012345", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_JOBS);
    ck_assert_str_eq(r.arg, "123456789012345");
    ck_assert_int_eq(match("/reStore/42", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_RESTORE_ONE);
    ck_assert_str_eq(r.arg, "42");
    ck_assert_int_eq(match("/get/a,b,c", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_GET);
    ck_assert_str_eq(r.arg, "a,b,c");
}
END_TEST

START_TEST(test_topic_jobs_path)
{
    struct route r;
    ck_assert_int_eq(match("/topics/orders.v2/jobs", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_TOPIC_JOBS);
    ck_assert_str_eq(r.arg, "orders.v2");
    ck_assert_int_eq(match("/topics/a%3Ab/jobs", &r), ROUTE_OK); /* the argument is decoded */
    ck_assert_str_eq(r.arg, "a:b");
    ck_assert_int_eq(match("/topics/jobs/jobs", &r), ROUTE_OK); /* a topic called "jobs" */
    ck_assert_str_eq(r.arg, "jobs");
    /* one segment in the middle, never none or two */
    static const char *const not_found[] = {"/topics//jobs",   "/topics/a/b/jobs", "/topics/jobs",
                                            "/topics/a/jobs/", "/topics/a/jobsx",  "/topics/a/job"};
    for (size_t i = 0; i < sizeof not_found / sizeof not_found[0]; i++)
        ck_assert_msg(match(not_found[i], &r) != ROUTE_OK || r.endpoint != EP_TOPIC_JOBS, "\"%s\" matched",
                      not_found[i]);
    ck_assert_int_eq(match("/topics/a%zz/jobs", &r), ROUTE_BAD_ENCODING);
    /* the console: the page, its files, and the bare path (redirected by the handler) */
    ck_assert_int_eq(match("/console/", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_CONSOLE);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(match("/console/console.js", &r), ROUTE_OK);
    ck_assert_str_eq(r.arg, "console.js");
    ck_assert_int_eq(match("/console/../stats", &r), ROUTE_NOT_FOUND);
}
END_TEST

START_TEST(test_only_len_bytes_count)
{
    struct route r;
    ck_assert_int_eq(router_match("/pushy", 5, &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_PUSH);
    ck_assert_int_eq(router_match("/get/ab/c", 7, &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_GET);
    ck_assert_str_eq(r.arg, "ab");
}
END_TEST

START_TEST(test_percent_decoded_args)
{
    struct route r;
    ck_assert_int_eq(match("/get/a%2Cb", &r), ROUTE_OK);
    ck_assert_str_eq(r.arg, "a,b");
    ck_assert_int_eq(match("/get/a%2cb", &r), ROUTE_OK); /* lower-case hex */
    ck_assert_str_eq(r.arg, "a,b");
    ck_assert_int_eq(match("/dead/%41%62%3A%5f", &r), ROUTE_OK);
    ck_assert_str_eq(r.arg, "Ab:_");
    ck_assert_uint_eq(r.arg_len, 4);
    /* '+' is a literal plus in a path, not a space */
    ck_assert_int_eq(match("/get/a+b", &r), ROUTE_OK);
    ck_assert_str_eq(r.arg, "a+b");
    ck_assert_int_eq(match("/get/a%20b", &r), ROUTE_OK);
    ck_assert_str_eq(r.arg, "a b");
    /* an encoded slash is part of the one argument, not a new segment */
    ck_assert_int_eq(match("/jobs/1%2F2", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_JOBS);
    ck_assert_str_eq(r.arg, "1/2");
    /* high bytes decode as bytes */
    ck_assert_int_eq(match("/get/%C3%A9", &r), ROUTE_OK);
    ck_assert_str_eq(r.arg, "\xc3\xa9");
    ck_assert_uint_eq(r.arg_len, 2);
}
END_TEST

START_TEST(test_lookup_and_purge)
{
    struct route r;
    const char *allow;
    /* "/jobs" alone is the lookup by bizKey; "/jobs/{id}" stays the inspect by id */
    ck_assert_int_eq(match("/jobs", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_LOOKUP);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(match("/jobs/12", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_JOBS);
    ck_assert(router_method_allowed(EP_LOOKUP, METHOD_GET, &allow));
    ck_assert(!router_method_allowed(EP_LOOKUP, METHOD_POST, &allow));
    ck_assert(!router_is_admin(EP_LOOKUP, METHOD_GET));
    /* the topic is the middle segment, percent-decoded */
    ck_assert_int_eq(match("/topics/a%3Ab/purge", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_PURGE);
    ck_assert_str_eq(r.arg, "a:b");
    ck_assert_int_eq(match("/topics/purge", &r), ROUTE_OK); /* the topic named "purge" */
    ck_assert_int_eq(r.endpoint, EP_TOPIC);
    ck_assert(router_method_allowed(EP_PURGE, METHOD_POST, &allow));
    ck_assert_str_eq(allow, "POST");
    ck_assert(!router_method_allowed(EP_PURGE, METHOD_GET, &allow));
    ck_assert(router_is_admin(EP_PURGE, METHOD_POST));
}
END_TEST

/* GET /openapi.json: the API's description, exact path, read-only, open to every client */
START_TEST(test_openapi)
{
    struct route r;
    const char *allow;
    ck_assert_int_eq(match("/openapi.json", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_OPENAPI);
    ck_assert_int_eq(match("/openapi.json/x", &r), ROUTE_NOT_FOUND);
    ck_assert_int_eq(match("/openapi", &r), ROUTE_NOT_FOUND);
    ck_assert(router_method_allowed(EP_OPENAPI, METHOD_GET, &allow));
    ck_assert(router_method_allowed(EP_OPENAPI, METHOD_HEAD, &allow));
    ck_assert(!router_method_allowed(EP_OPENAPI, METHOD_POST, &allow));
    ck_assert_str_eq(allow, "GET, HEAD");
    ck_assert(!router_is_admin(EP_OPENAPI, METHOD_GET));
    ck_assert_str_eq(router_endpoint_name(EP_OPENAPI), "openapi");
}
END_TEST

START_TEST(test_schedules)
{
    struct route r;
    const char *allow;
    ck_assert_int_eq(match("/schedules", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_SCHEDULES);
    ck_assert_int_eq(match("/schedules/384241991366135808", &r), ROUTE_OK);
    ck_assert_int_eq(r.endpoint, EP_SCHEDULE);
    ck_assert_str_eq(r.arg, "384241991366135808");
    /* reading is for any client; creating, pausing and deleting are admin */
    ck_assert(router_method_allowed(EP_SCHEDULES, METHOD_GET, &allow));
    ck_assert(router_method_allowed(EP_SCHEDULES, METHOD_POST, &allow));
    ck_assert(!router_method_allowed(EP_SCHEDULES, METHOD_DELETE, &allow));
    ck_assert_str_eq(allow, "GET, HEAD, POST");
    ck_assert(!router_is_admin(EP_SCHEDULES, METHOD_GET));
    ck_assert(router_is_admin(EP_SCHEDULES, METHOD_POST));
    ck_assert(router_method_allowed(EP_SCHEDULE, METHOD_PUT, &allow));
    ck_assert(router_method_allowed(EP_SCHEDULE, METHOD_DELETE, &allow));
    ck_assert(!router_method_allowed(EP_SCHEDULE, METHOD_POST, &allow));
    ck_assert(!router_is_admin(EP_SCHEDULE, METHOD_GET));
    ck_assert(router_is_admin(EP_SCHEDULE, METHOD_PUT));
    ck_assert(router_is_admin(EP_SCHEDULE, METHOD_DELETE));
    ck_assert_int_ne(match("/schedules/1/x", &r) == ROUTE_OK && r.endpoint == EP_SCHEDULE, 1);
}
END_TEST

START_TEST(test_not_found)
{
    static const char *const paths[] = {
        "",
        "/",
        "push",
        "/pus",
        "/pushx",
        "/Push",
        "/PUSH",
        "/restore",
        "/RESTORE",
        "/reStoreX",
        "/get",
        "/jobsx",
        "/dead",
        "//push",
        "/push/",
        "/health/",
        "/metrics/",
        "/stats/x",
        "/finish/1",
        "/api/push",
        "/get-x/t",
        "/jobsx/1",
        "/push?x=1",
        "/health/..",
        "/./health",
        "/topics//purge",
        "/topics/a/b/purge",
        "/topics/t/purgex",
    };
    struct route r;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        ck_assert_msg(match(paths[i], &r) == ROUTE_NOT_FOUND, "\"%s\" matched", paths[i]);
        ck_assert_int_eq(r.endpoint, EP_NOT_FOUND);
    }
}
END_TEST

START_TEST(test_nested_segments)
{
    static const char *const paths[] = {
        "/get/a/b",     "/get/a/",     "/jobs/1/history", "/jobs/1/", "/dead/t/x",
        "/reStore/1/2", "/reStore/1/", "/get/../push",    "/jobs//1", "/get//",
    };
    struct route r;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        ck_assert_msg(match(paths[i], &r) == ROUTE_NOT_FOUND, "\"%s\" matched", paths[i]);
}
END_TEST

START_TEST(test_bad_escapes)
{
    static const char *const paths[] = {
        "/get/%",  "/get/%4",  "/get/a%",   "/get/a%4", "/get/%zz", "/get/%4g",     "/get/%g4",
        "/jobs/%", "/dead/%%", "/get/%%41", "/get/%-1", "/get/% 1", "/reStore/1%2",
    };
    struct route r;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        ck_assert_msg(match(paths[i], &r) == ROUTE_BAD_ENCODING, "\"%s\" not refused as bad encoding", paths[i]);
}
END_TEST

START_TEST(test_nul_refused)
{
    struct route r;
    ck_assert_int_eq(match("/get/%00", &r), ROUTE_BAD_ENCODING);
    ck_assert_int_eq(match("/get/a%00b", &r), ROUTE_BAD_ENCODING);
    ck_assert_int_eq(match("/jobs/1%00", &r), ROUTE_BAD_ENCODING);
}
END_TEST

START_TEST(test_arg_length_limits)
{
    size_t cap = 3 * ROUTE_ARG_MAX + 64;
    char *path = malloc(cap + 16);
    ck_assert_ptr_nonnull(path);
    struct route r;

    /* exactly ROUTE_ARG_MAX characters: fine */
    strcpy(path, "/get/");
    memset(path + 5, 'a', ROUTE_ARG_MAX);
    path[5 + ROUTE_ARG_MAX] = '\0';
    ck_assert_int_eq(match(path, &r), ROUTE_OK);
    ck_assert_uint_eq(r.arg_len, ROUTE_ARG_MAX);
    ck_assert_uint_eq(strlen(r.arg), ROUTE_ARG_MAX);

    /* one more: too long */
    memset(path + 5, 'a', ROUTE_ARG_MAX + 1);
    path[5 + ROUTE_ARG_MAX + 1] = '\0';
    ck_assert_int_eq(match(path, &r), ROUTE_TOO_LONG);

    /* far too long */
    memset(path + 5, 'a', cap - 5);
    path[cap] = '\0';
    ck_assert_int_eq(match(path, &r), ROUTE_TOO_LONG);

    /* the limit is on the decoded argument: ROUTE_ARG_MAX escapes decode to ROUTE_ARG_MAX bytes */
    for (size_t i = 0; i < ROUTE_ARG_MAX; i++)
        memcpy(path + 5 + 3 * i, "%41", 3);
    path[5 + 3 * ROUTE_ARG_MAX] = '\0';
    ck_assert_int_eq(match(path, &r), ROUTE_OK);
    ck_assert_uint_eq(r.arg_len, ROUTE_ARG_MAX);
    ck_assert_int_eq(r.arg[0], 'A');
    ck_assert_int_eq(r.arg[ROUTE_ARG_MAX - 1], 'A');
    ck_assert_int_eq(r.arg[ROUTE_ARG_MAX], '\0');

    /* one escape more decodes past the limit */
    memcpy(path + 5 + 3 * ROUTE_ARG_MAX, "%41", 4);
    ck_assert_int_eq(match(path, &r), ROUTE_TOO_LONG);
    free(path);
}
END_TEST

static int method_in_allow(const char *allow, const char *m)
{
    /* Allow is a comma-separated list of tokens */
    size_t n = strlen(m);
    const char *p = allow;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if ((size_t)(e - p) == n && memcmp(p, m, n) == 0)
            return 1;
        p = e;
    }
    return 0;
}

START_TEST(test_methods_follow_contract)
{
    static const enum endpoint actions[] = {EP_GET,    EP_FINISH,     EP_RELEASE, EP_TOUCH,
                                            EP_DELETE, EP_RESCHEDULE, EP_RESTORE, EP_RESTORE_ONE};
    const char *allow;
    /* "Action endpoints accept GET and POST." */
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        ck_assert_msg(router_method_allowed(actions[i], METHOD_GET, &allow), "%s GET",
                      router_endpoint_name(actions[i]));
        ck_assert_msg(router_method_allowed(actions[i], METHOD_POST, &allow), "%s POST",
                      router_endpoint_name(actions[i]));
        ck_assert(!router_method_allowed(actions[i], METHOD_OTHER, &allow));
    }
    /* POST /push; a GET has no body to push */
    ck_assert(router_method_allowed(EP_PUSH, METHOD_POST, &allow));
    ck_assert(!router_method_allowed(EP_PUSH, METHOD_GET, &allow));
    ck_assert_str_eq(allow, "POST");
    ck_assert(!router_method_allowed(EP_PUSH, METHOD_HEAD, &allow));
    ck_assert(!router_method_allowed(EP_PUSH, METHOD_OTHER, &allow));
    /* read-only endpoints: GET (and HEAD), never POST */
    static const enum endpoint readers[] = {EP_JOBS,       EP_DEAD,  EP_HEALTH,     EP_STATS,  EP_METRICS,
                                            EP_TOPIC_JOBS, EP_FLEET, EP_THROUGHPUT, EP_CONSOLE};
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
        ck_assert(router_method_allowed(readers[i], METHOD_GET, &allow));
        ck_assert(router_method_allowed(readers[i], METHOD_HEAD, &allow));
        ck_assert(!router_method_allowed(readers[i], METHOD_POST, &allow));
        ck_assert(!router_method_allowed(readers[i], METHOD_OTHER, &allow));
    }
}
END_TEST

START_TEST(test_allow_header_matches_rules)
{
    /* For every endpoint, the Allow value names exactly the methods that are allowed. */
    static const struct {
        enum method m;
        const char *name;
    } methods[] = {{METHOD_GET, "GET"},
                   {METHOD_POST, "POST"},
                   {METHOD_HEAD, "HEAD"},
                   {METHOD_PUT, "PUT"},
                   {METHOD_DELETE, "DELETE"}};
    for (int ep = EP_PUSH; ep < EP_COUNT; ep++) {
        const char *allow = NULL;
        router_method_allowed((enum endpoint)ep, METHOD_OTHER, &allow);
        ck_assert_ptr_nonnull(allow);
        ck_assert_msg(allow[0] != '\0', "empty Allow for %s", router_endpoint_name((enum endpoint)ep));
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
            const char *a2 = NULL;
            int ok = router_method_allowed((enum endpoint)ep, methods[i].m, &a2);
            ck_assert_str_eq(a2, allow); /* the same Allow whatever the method asked */
            ck_assert_msg(ok == method_in_allow(allow, methods[i].name), "%s: %s allowed=%d but Allow is \"%s\"",
                          router_endpoint_name((enum endpoint)ep), methods[i].name, ok, allow);
        }
    }
}
END_TEST

START_TEST(test_admin_endpoints)
{
    for (int ep = 0; ep < EP_COUNT; ep++) {
        int want = ep == EP_RESTORE || ep == EP_RESTORE_ONE || ep == EP_DEAD || ep == EP_CONSOLE ||
                   ep == EP_TOPIC_JOBS || ep == EP_PURGE || ep == EP_TOPIC_GROUPS;
        ck_assert_msg(router_is_admin((enum endpoint)ep, METHOD_GET) == want, "%s",
                      router_endpoint_name((enum endpoint)ep));
    }
    /* a topic's settings: anyone reads them, only an admin changes them */
    ck_assert(router_is_admin(EP_TOPIC, METHOD_PUT));
    ck_assert(router_is_admin(EP_TOPIC, METHOD_DELETE));
    ck_assert(!router_is_admin(EP_TOPIC, METHOD_GET));
    ck_assert(!router_is_admin(EP_TOPICS, METHOD_GET));
    struct route r;
    ck_assert_int_eq(match("/reStore", &r), ROUTE_OK);
    ck_assert(router_is_admin(r.endpoint, METHOD_GET));
    ck_assert_int_eq(match("/reStore/5", &r), ROUTE_OK);
    ck_assert(router_is_admin(r.endpoint, METHOD_GET));
    ck_assert_int_eq(match("/dead/t", &r), ROUTE_OK);
    ck_assert(router_is_admin(r.endpoint, METHOD_GET));
    ck_assert_int_eq(match("/jobs/5", &r), ROUTE_OK);
    ck_assert(!router_is_admin(r.endpoint, METHOD_GET));
}
END_TEST

START_TEST(test_endpoint_names)
{
    ck_assert_str_eq(router_endpoint_name(EP_PUSH), "push");
    ck_assert_str_eq(router_endpoint_name(EP_GET), "get");
    ck_assert_str_eq(router_endpoint_name(EP_FINISH), "finish");
    ck_assert_str_eq(router_endpoint_name(EP_HEALTH), "health");
    ck_assert_str_eq(router_endpoint_name(EP_METRICS), "metrics");
    /* every name: non-empty, lowercase label-safe, distinct */
    for (int a = 0; a < EP_COUNT; a++) {
        const char *na = router_endpoint_name((enum endpoint)a);
        ck_assert_ptr_nonnull(na);
        ck_assert_uint_gt(strlen(na), 0);
        for (const char *c = na; *c; c++)
            ck_assert_msg((*c >= 'a' && *c <= 'z') || *c == '_', "name \"%s\"", na);
        for (int b = a + 1; b < EP_COUNT; b++)
            ck_assert_str_ne(na, router_endpoint_name((enum endpoint)b));
    }
    /* out of range: still a string, never one of the real names */
    const char *bad = router_endpoint_name(EP_COUNT);
    ck_assert_ptr_nonnull(bad);
    for (int a = 1; a < EP_COUNT; a++)
        ck_assert_str_ne(bad, router_endpoint_name((enum endpoint)a));
    ck_assert_ptr_nonnull(router_endpoint_name((enum endpoint) - 1));
}
END_TEST

START_TEST(test_percent_decode)
{
    char out[16];
    ck_assert_int_eq(router_percent_decode("a+b%2B", 6, out, sizeof out, 1), 4);
    ck_assert_str_eq(out, "a b+");
    ck_assert_int_eq(router_percent_decode("a+b%2B", 6, out, sizeof out, 0), 4);
    ck_assert_str_eq(out, "a+b+");
    ck_assert_int_eq(router_percent_decode("", 0, out, sizeof out, 1), 0);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(router_percent_decode("%", 1, out, sizeof out, 1), -1);
    ck_assert_int_eq(router_percent_decode("%0", 2, out, sizeof out, 1), -1);
    ck_assert_int_eq(router_percent_decode("%0x", 3, out, sizeof out, 1), -1);
    ck_assert_int_eq(router_percent_decode("%ff%FF", 6, out, sizeof out, 1), 2);
    ck_assert_int_eq((unsigned char)out[0], 0xff);
    ck_assert_int_eq((unsigned char)out[1], 0xff);
    /* capacity counts the NUL */
    ck_assert_int_eq(router_percent_decode("abc", 3, out, 4, 0), 3);
    ck_assert_str_eq(out, "abc");
    ck_assert_int_eq(router_percent_decode("abcd", 4, out, 4, 0), -1);
    ck_assert_int_eq(router_percent_decode("%41%42%43", 9, out, 4, 0), 3);
    ck_assert_str_eq(out, "ABC");
}
END_TEST

static Suite *router_suite(void)
{
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("paths");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_exact_paths);
    tcase_add_test(tc, test_arg_paths);
    tcase_add_test(tc, test_topic_jobs_path);
    tcase_add_test(tc, test_only_len_bytes_count);
    tcase_add_test(tc, test_percent_decoded_args);
    tcase_add_test(tc, test_not_found);
    tcase_add_test(tc, test_lookup_and_purge);
    tcase_add_test(tc, test_nested_segments);
    tcase_add_test(tc, test_bad_escapes);
    tcase_add_test(tc, test_nul_refused);
    tcase_add_test(tc, test_arg_length_limits);
    tcase_add_test(tc, test_percent_decode);
    suite_add_tcase(s, tc);

    tc = tcase_create("methods");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_methods_follow_contract);
    tcase_add_test(tc, test_allow_header_matches_rules);
    tcase_add_test(tc, test_admin_endpoints);
    tcase_add_test(tc, test_endpoint_names);
    tcase_add_test(tc, test_schedules);
    tcase_add_test(tc, test_openapi);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(router_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
