/* test_raddr.c — src/core/raddr.h: the [redis] address parser every connection and the config
 * check use, and the Cluster seed list. */
#include "core/raddr.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An IPv6 host keeps its colons ([::1]:6379 once broke a start-up check that split on the
 * last ':' itself). */
START_TEST(test_parse_address)
{
    char host[64];
    int port = 0, is_unix = 0;
    ck_assert_int_eq(raddr_parse("[::1]:6379", host, sizeof host, &port, &is_unix), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_int_eq(port, 6379);
    ck_assert_int_eq(is_unix, 0);
    ck_assert_int_eq(raddr_parse("127.0.0.1:16379", host, sizeof host, &port, &is_unix), 0);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(port, 16379);
    ck_assert_int_eq(raddr_parse("unix:/run/redis.sock", host, sizeof host, &port, &is_unix), 0);
    ck_assert_str_eq(host, "/run/redis.sock");
    ck_assert_int_eq(is_unix, 1);
    static const char *const bad[] = {"[::1]", "::1",     "host", ":6379",  "[]:1",   "h:0",     "h:65536", "h:12x",
                                      "unix:", "a:1,b:2", "",     "ho$t:1", "a..b:1", "[::g]:1", "h:+1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(raddr_parse(bad[i], host, sizeof host, &port, &is_unix) < 0, "%s parsed", bad[i]);
    ck_assert_int_eq(raddr_parse("h:1", host, 1, &port, &is_unix), -1); /* the host does not fit */
    ck_assert_int_eq(raddr_parse("unix:/x", host, 2, &port, &is_unix), -1);
}
END_TEST

/* raddr_check says why, in base/netaddr.h's words for the host and port. */
START_TEST(test_check_says_why)
{
    static const struct {
        const char *address, *says;
    } bad[] = {
        {"127.0.0.1:0", "port must be a number 1..65535, not \"0\""}, {"redis", "no port"},
        {"::1:6379", "an IPv6 address must be in brackets"},          {"[::1:6379", "unclosed '['"},
        {"ho$t:6379", "character '$' is not allowed in a host name"}, {"unix:", "no socket path after \"unix:\""},
    };
    char err[200];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(raddr_check(bad[i].address, err, sizeof err) == -1, "accepted '%s'", bad[i].address);
        ck_assert_msg(strstr(err, bad[i].says) == err, "'%s': %s", bad[i].address, err);
    }
    ck_assert_int_eq(raddr_check("[::1]:6379", err, sizeof err), 0);
    ck_assert_int_eq(raddr_check("unix:/run/redis.sock", err, sizeof err), 0);
}
END_TEST

START_TEST(test_seeds)
{
    char seeds[4][CLUSTER_ADDR_MAX], err[200];
    ck_assert_int_eq(raddr_seeds("10.0.0.1:7000", seeds, 4, err, sizeof err), 1);
    ck_assert_str_eq(seeds[0], "10.0.0.1:7000");
    ck_assert_int_eq(raddr_seeds(" a:1 ,\t[::1]:7001,, redis-3.internal:7002 ", seeds, 4, err, sizeof err), 3);
    ck_assert_str_eq(seeds[0], "a:1");
    ck_assert_str_eq(seeds[1], "[::1]:7001");
    ck_assert_str_eq(seeds[2], "redis-3.internal:7002");
    ck_assert_int_eq(raddr_seeds("a:1,b:2", NULL, 4, err, sizeof err), 2); /* a check only */
}
END_TEST

START_TEST(test_bad_seeds_named)
{
    static const struct {
        const char *list, *says;
    } bad[] = {
        {"", "no seed node"},
        {" , ", "no seed node"},
        {"127.0.0.1", "seed \"127.0.0.1\" is not host:port or [IPv6]:port: no port"},
        {"127.0.0.1:0",
         "seed \"127.0.0.1:0\" is not host:port or [IPv6]:port: port must be a number 1..65535, not \"0\""},
        {"unix:/tmp/x.sock", "seed \"unix:/tmp/x.sock\" is not host:port or [IPv6]:port: a cluster node is reached "
                             "over TCP, not a unix socket"}, /* cluster nodes are TCP */
        {"127.0.0.1:6379,nohost", "seed \"nohost\""},
        {"a:1;b:2", "seed \"a:1;b:2\""},
        {"a:1,b:2,c:3,d:4,e:5", "more than 4 seed nodes"},
    };
    char seeds[4][CLUSTER_ADDR_MAX], err[200];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(raddr_seeds(bad[i].list, seeds, 4, err, sizeof err) == -1, "accepted '%s'", bad[i].list);
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "'%s': %s", bad[i].list, err);
    }
    char list[400];
    memset(list, 'h', sizeof list);
    memcpy(list + sizeof list - 6, ":6379", 6); /* one seed longer than any address */
    ck_assert_int_eq(raddr_seeds(list, seeds, 4, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "longer than"));
    ck_assert_int_eq(raddr_seeds(NULL, seeds, 4, err, sizeof err), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("raddr");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_parse_address);
    tcase_add_test(tc, test_check_says_why);
    tcase_add_test(tc, test_seeds);
    tcase_add_test(tc, test_bad_seeds_named);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
