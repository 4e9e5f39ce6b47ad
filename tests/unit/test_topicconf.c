/* test_topicconf.c — src/core/topicconf.h: a topic's settings, merged from PUT bodies, written as
 * JSON and as the scripts' compact value. */
#include "base/sbuf.h"
#include "core/topicconf.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[256];

static int merge(struct topic_conf *c, const char *json)
{
    err[0] = '\0';
    return topicconf_merge_json(c, json, strlen(json), err, sizeof err);
}

/* The settings as an answer (with_secret 0) or as stored (1); caller frees. */
static char *render(const struct topic_conf *c, int with_secret)
{
    struct sbuf sb = SBUF_INIT;
    topicconf_json(c, with_secret, &sb);
    char *s = strndup(sb.data, sb.len);
    sb_free(&sb);
    return s;
}

START_TEST(test_defaults)
{
    struct topic_conf c;
    topicconf_defaults(&c);
    ck_assert(topicconf_is_default(&c));
    char *s = render(&c, 0);
    ck_assert_str_eq(s, "\"paused\":false,\"rate\":0,\"backoff\":0,\"maxBackoff\":3600000,"
                        "\"groupConcurrency\":0,\"groupOrder\":\"any\",\"groupRate\":0,\"deliver\":null");
    free(s);
    char v[96];
    topicconf_script_value(&c, 42, v, sizeof v);
    ck_assert_str_eq(v, "0 0 0 3600000 42");
}
END_TEST

START_TEST(test_merge_keeps_what_is_not_named)
{
    struct topic_conf c;
    topicconf_defaults(&c);
    ck_assert_int_eq(merge(&c, "{\"paused\":true,\"rate\":50}"), 0);
    ck_assert_int_eq(merge(&c, "{\"backoff\":1000,\"maxBackoff\":60000}"), 0);
    ck_assert(c.paused);
    ck_assert_int_eq(c.rate, 50);
    ck_assert_int_eq(c.backoff, 1000);
    ck_assert_int_eq(c.max_backoff, 60000);
    ck_assert(!topicconf_is_default(&c));
    char v[96];
    topicconf_script_value(&c, 7, v, sizeof v);
    ck_assert_str_eq(v, "1 50 1000 60000 7");
    ck_assert_int_eq(merge(&c, "{\"paused\":false,\"rate\":0,\"backoff\":0,\"maxBackoff\":3600000}"), 0);
    ck_assert(topicconf_is_default(&c));
}
END_TEST

START_TEST(test_bad_input_names_the_field_and_changes_nothing)
{
    static const struct {
        const char *json, *word;
    } cases[] = {
        {"{\"rate\":-1}", "rate"},
        {"{\"rate\":1000001}", "rate"},
        {"{\"rate\":2.5}", "rate"},
        {"{\"paused\":1}", "paused"},
        {"{\"backoff\":\"5\"}", "backoff"},
        {"{\"maxBackoff\":-1}", "maxBackoff"},
        {"{\"nope\":1}", "unknown field nope"},
        {"[]", "object"},
        {"{\"rate\":1,\"rate\":2}", "malformed"},
        {"{\"deliver\":[]}", "deliver"},
        {"{\"deliver\":{}}", "exactly one"},
        {"{\"deliver\":{\"webhook\":\"http://h/\",\"amqp\":{\"exchange\":\"\"}}}", "exactly one"},
        {"{\"deliver\":{\"webhook\":\"\"}}", "deliver.webhook"},
        {"{\"deliver\":{\"webhook\":\"http://h/\\u0001\"}}", "control"},
        {"{\"deliver\":{\"webhook\":\"http://h/\",\"timeout\":600001}}", "timeout"},
        {"{\"deliver\":{\"webhook\":\"http://h/\",\"concurrency\":0}}", "concurrency"},
        {"{\"deliver\":{\"webhook\":\"http://h/\",\"secret\":5}}", "secret"},
        {"{\"deliver\":{\"webhook\":\"http://h/\",\"colour\":5}}", "deliver.colour"},
        {"{\"deliver\":{\"amqp\":\"x\"}}", "deliver.amqp"},
        {"{\"deliver\":{\"amqp\":{\"routingKey\":\"k\"}}}", "exchange"},
        {"{\"deliver\":{\"amqp\":{\"exchange\":\"e\",\"queue\":\"q\"}}}", "deliver.amqp.queue"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct topic_conf c, before;
        topicconf_defaults(&c);
        ck_assert_int_eq(merge(&c, "{\"rate\":9}"), 0);
        before = c;
        ck_assert_msg(merge(&c, cases[i].json) == -1, "accepted %s", cases[i].json);
        ck_assert_msg(strstr(err, cases[i].word) != NULL, "%s: \"%s\" lacks \"%s\"", cases[i].json, err, cases[i].word);
        ck_assert_msg(memcmp(&c, &before, sizeof c) == 0, "%s changed the settings", cases[i].json);
    }
}
END_TEST

START_TEST(test_webhook_route_and_its_secret)
{
    struct topic_conf c;
    topicconf_defaults(&c);
    ck_assert_int_eq(merge(&c, "{\"deliver\":{\"webhook\":\"https://[::1]:8443/h?a=1\",\"timeout\":2000,"
                               "\"concurrency\":4,\"secret\":\"s3\"}}"),
                     0);
    ck_assert_int_eq(c.route, TOPIC_ROUTE_WEBHOOK);
    ck_assert_str_eq(c.url, "https://[::1]:8443/h?a=1");
    ck_assert_str_eq(c.secret, "s3");
    char *shown = render(&c, 0), *stored = render(&c, 1);
    ck_assert_ptr_null(strstr(shown, "s3")); /* answers never show it */
    ck_assert_ptr_nonnull(strstr(shown, "\"signed\":true"));
    ck_assert_ptr_nonnull(strstr(stored, "\"secret\":\"s3\""));
    /* the answer sent back keeps the secret; the stored form reads back the same */
    struct topic_conf again = c;
    char body[4096];
    snprintf(body, sizeof body, "{%s}", shown);
    ck_assert_int_eq(merge(&again, body), 0);
    ck_assert_str_eq(again.secret, "s3");
    struct topic_conf fresh;
    topicconf_defaults(&fresh);
    snprintf(body, sizeof body, "{%s}", stored);
    ck_assert_int_eq(merge(&fresh, body), 0);
    ck_assert_int_eq(memcmp(&fresh, &c, sizeof c), 0);
    /* a new route without a secret is unsigned; null goes back to long-polling */
    ck_assert_int_eq(merge(&c, "{\"deliver\":{\"webhook\":\"http://h/\"}}"), 0);
    ck_assert_str_eq(c.secret, "");
    ck_assert_int_eq(c.timeout, TOPICCONF_DEFAULT_TIMEOUT);
    ck_assert_int_eq(merge(&c, "{\"deliver\":null}"), 0);
    ck_assert_int_eq(c.route, TOPIC_ROUTE_POLL);
    free(shown);
    free(stored);
}
END_TEST

/* Group settings: the JSON forms, fifo's concurrency of one, and the script value's g part —
 * there only when a group setting is set, so the scripts tell a grouped topic by it. */
START_TEST(test_group_settings)
{
    struct topic_conf c;
    topicconf_defaults(&c);
    ck_assert_int_eq(merge(&c, "{\"groupConcurrency\":3,\"groupRate\":20}"), 0);
    ck_assert(!topicconf_is_default(&c));
    char v[128];
    topicconf_script_value(&c, 9, v, sizeof v);
    ck_assert_str_eq(v, "0 0 0 3600000 g3 0 20 9");
    ck_assert_int_eq(merge(&c, "{\"groupOrder\":\"fifo\"}"), 0);
    ck_assert_int_eq(c.group_concurrency, 1);
    char *s = render(&c, 0);
    ck_assert_ptr_nonnull(strstr(s, "\"groupConcurrency\":1,\"groupOrder\":\"fifo\",\"groupRate\":20,"));
    free(s);
    topicconf_script_value(&c, 10, v, sizeof v);
    ck_assert_str_eq(v, "0 0 0 3600000 g1 1 20 10");
    /* fifo is one at a time: more in the same body is refused, and nothing changes */
    ck_assert_int_eq(merge(&c, "{\"groupConcurrency\":2}"), -1);
    ck_assert_int_eq(merge(&c, "{\"groupOrder\":\"any\",\"groupConcurrency\":2}"), 0);
    ck_assert_int_eq(c.group_concurrency, 2);
    ck_assert_int_eq(merge(&c, "{\"groupOrder\":\"lifo\"}"), -1);
    ck_assert_int_eq(merge(&c, "{\"groupConcurrency\":-1}"), -1);
    ck_assert_int_eq(merge(&c, "{\"groupRate\":1.5}"), -1);
    ck_assert_int_eq(merge(&c, "{\"groupConcurrency\":0,\"groupRate\":0}"), 0);
    ck_assert(topicconf_is_default(&c));
    topicconf_script_value(&c, 11, v, sizeof v);
    ck_assert_str_eq(v, "0 0 0 3600000 11");
}
END_TEST

START_TEST(test_amqp_route)
{
    struct topic_conf c;
    topicconf_defaults(&c);
    ck_assert_int_eq(merge(&c, "{\"deliver\":{\"amqp\":{\"exchange\":\"\",\"routingKey\":\"jobs\"}}}"), 0);
    ck_assert_int_eq(c.route, TOPIC_ROUTE_AMQP);
    char *s = render(&c, 0);
    ck_assert_str_eq(s, "\"paused\":false,\"rate\":0,\"backoff\":0,\"maxBackoff\":3600000,"
                        "\"groupConcurrency\":0,\"groupOrder\":\"any\",\"groupRate\":0,"
                        "\"deliver\":{\"amqp\":{\"exchange\":\"\",\"routingKey\":\"jobs\"}}");
    free(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("topicconf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_merge_keeps_what_is_not_named);
    tcase_add_test(tc, test_bad_input_names_the_field_and_changes_nothing);
    tcase_add_test(tc, test_webhook_route_and_its_secret);
    tcase_add_test(tc, test_amqp_route);
    tcase_add_test(tc, test_group_settings);
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
