/* test_netaddr.c — src/base/netaddr.h: the one host[:port] parser behind the [redis] address,
 * the Cluster seeds, the [amqp] url and webhook URLs; its rules and its messages. */
#include "base/netaddr.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

static struct netaddr parse_ok(const char *s, int default_port)
{
    struct netaddr a;
    char err[200] = "";
    ck_assert_msg(netaddr_parse(s, strlen(s), default_port, &a, err, sizeof err) == 0, "%s: %s", s, err);
    return a;
}

/* The message of a refusal; *out is left all zero. */
static const char *refusal(const char *s, int default_port)
{
    static char err[200];
    struct netaddr a;
    err[0] = '\0';
    memset(&a, 0x55, sizeof a);
    ck_assert_msg(netaddr_parse(s, strlen(s), default_port, &a, err, sizeof err) == -1, "%s parsed", s);
    ck_assert_int_eq(a.port, 0);
    ck_assert_int_eq(a.kind, NETADDR_NAME);
    ck_assert_str_eq(a.host, "");
    return err;
}

START_TEST(test_hosts)
{
    struct netaddr a = parse_ok("redis-1.internal:6379", 0);
    ck_assert_int_eq(a.kind, NETADDR_NAME);
    ck_assert_str_eq(a.host, "redis-1.internal");
    ck_assert_int_eq(a.port, 6379);
    a = parse_ok("10.0.0.7:7000", 0);
    ck_assert_int_eq(a.kind, NETADDR_IPV4);
    ck_assert_str_eq(a.host, "10.0.0.7");
    a = parse_ok("[2001:DB8::1]:443", 0);
    ck_assert_int_eq(a.kind, NETADDR_IPV6);
    ck_assert_str_eq(a.host, "2001:DB8::1"); /* as written: a caller that needs one case folds it */
    a = parse_ok("[::ffff:1.2.3.4]:1", 0);
    ck_assert_str_eq(a.host, "::ffff:1.2.3.4");
    a = parse_ok("Under_Score.Example", 80);
    ck_assert_str_eq(a.host, "Under_Score.Example");
    a = parse_ok("localhost", 80);
    ck_assert_int_eq(a.kind, NETADDR_NAME);
}
END_TEST

START_TEST(test_ports)
{
    ck_assert_int_eq(parse_ok("h", 5672).port, 5672); /* the default when none is written */
    ck_assert_int_eq(parse_ok("[::1]", 443).port, 443);
    ck_assert_int_eq(parse_ok("h:1", 5672).port, 1);
    ck_assert_int_eq(parse_ok("h:65535", 0).port, 65535);
    ck_assert_int_eq(parse_ok("h:080", 0).port, 80);
}
END_TEST

/* Each refusal, with its whole message: one rule set, one style (netaddr.h). */
START_TEST(test_refused)
{
    static const struct {
        const char *s;
        int default_port;
        const char *says;
    } refused[] = {
        /* ports */
        {"h", 0, "no port"}, /* no default: a port is required */
        {"[::1]", 0, "no port"},
        {"h:0", 0, "port must be a number 1..65535, not \"0\""},
        {"h:65536", 80, "port must be a number 1..65535, not \"65536\""},
        {"h:99999999999999999999", 80, "port must be a number 1..65535, not \"99999999999999999999\""},
        {"h:123456789012345678901234", 80, "port must be a number 1..65535, not \"12345678901234567890...\""},
        {"h:", 80, "port must be a number 1..65535, not \"\""},
        {"[::1]:", 80, "port must be a number 1..65535, not \"\""},
        {"h:8a", 80, "port must be a number 1..65535, not \"8a\""},
        {"h:-1", 80, "port must be a number 1..65535, not \"-1\""},
        {"h:+80", 80, "port must be a number 1..65535, not \"+80\""},
        {"h: 80", 80, "port must be a number 1..65535, not \" 80\""},
        /* brackets */
        {"[::1", 80, "unclosed '[' (an IPv6 address is written [::1])"},
        {"[::1:80", 80, "unclosed '[' (an IPv6 address is written [::1])"},
        {"[::1]x", 80, "unexpected text after ']' (expected \":port\")"},
        {"[::1]80", 80, "unexpected text after ']' (expected \":port\")"},
        {"[]", 80, "no host"},
        {"[]:80", 80, "no host"},
        {"[::g]:80", 80, "bad IPv6 address \"::g\""},
        {"[1.2.3.4]:80", 80, "bad IPv6 address \"1.2.3.4\""},
        {"[localhost]:80", 80, "bad IPv6 address \"localhost\""},
        {"[fe80::1%eth0]:80", 80, "IPv6 zone ids (%...) are not allowed"},
        {"[1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa]:80", 80,
         "bad IPv6 address \"1111:2222:3333:4444:5555:6666:7777:8888:9999:...\""},
        /* an IPv6 address without brackets; more than one ':' in what cannot be one is a bad port */
        {"::1", 80, "an IPv6 address must be in brackets: \"[::1]:port\""},
        {"::1:6379", 0, "an IPv6 address must be in brackets: \"[::1]:port\""},
        {"fe80::1", 80, "an IPv6 address must be in brackets: \"[::1]:port\""},
        {"a:1,b:2", 0, "port must be a number 1..65535, not \"1,b:2\""},
        {"a:1;b:2", 0, "port must be a number 1..65535, not \"1;b:2\""},
        /* empty hosts */
        {"", 80, "no host"},
        {":6379", 0, "no host"},
        {":", 80, "no host"},
        /* names and IPv4 addresses */
        {"ho$t:1", 0, "character '$' is not allowed in a host name"},
        {"a b:1", 0, "character ' ' is not allowed in a host name"},
        {"a\tb:1", 0, "a control or non-ASCII byte is not allowed in a host name"},
        {"h\xc3\xa4.example", 80, "a control or non-ASCII byte is not allowed in a host name"},
        {"-foo.com", 80, "host name label \"-foo\" starts or ends with '-'"},
        {"foo-.com", 80, "host name label \"foo-\" starts or ends with '-'"},
        {"foo..com", 80, "empty label in host name \"foo..com\""},
        {".foo", 80, "empty label in host name \".foo\""},
        {"foo.com.", 80, "empty label in host name \"foo.com.\""},
        {"foo.123", 80, "bad IPv4 address \"foo.123\""},
        {"256.1.1.1", 80, "bad IPv4 address \"256.1.1.1\""},
        {"1.2.3", 80, "bad IPv4 address \"1.2.3\""},
        {"01.2.3.4:1", 0, "bad IPv4 address \"01.2.3.4\""},
        {"1234", 80, "bad IPv4 address \"1234\""},
        /* trailing junk */
        {"h:80/", 80, "port must be a number 1..65535, not \"80/\""},
        {"h:80 ", 80, "port must be a number 1..65535, not \"80 \""},
        {"[::1]:80]", 80, "port must be a number 1..65535, not \"80]\""},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *err = refusal(refused[i].s, refused[i].default_port);
        ck_assert_msg(strcmp(err, refused[i].says) == 0, "%s: got '%s', want '%s'", refused[i].s, err, refused[i].says);
    }
}
END_TEST

START_TEST(test_lengths)
{
    char s[400];
    /* a label of 63 bytes is fine, 64 is not */
    snprintf(s, sizeof s, "%.63s.example:1", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    parse_ok(s, 0);
    snprintf(s, sizeof s, "%.64s.example:1", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    ck_assert_str_eq(refusal(s, 0), "host name label longer than 63 bytes");
    /* a host of NETADDR_HOST_MAX bytes is fine, one more is not (whatever its labels) */
    char host[NETADDR_HOST_MAX + 2];
    for (int i = 0; i < NETADDR_HOST_MAX; i++)
        host[i] = (i % 50 == 49) ? '.' : 'h';
    host[NETADDR_HOST_MAX] = '\0';
    snprintf(s, sizeof s, "%s:6379", host);
    struct netaddr a = parse_ok(s, 0);
    ck_assert_uint_eq(strlen(a.host), NETADDR_HOST_MAX);
    host[NETADDR_HOST_MAX] = 'h';
    host[NETADDR_HOST_MAX + 1] = '\0';
    snprintf(s, sizeof s, "%s:6379", host);
    ck_assert_str_eq(refusal(s, 0), "host is longer than 253 bytes");
    memset(s, 'a', 300);
    s[300] = '\0';
    ck_assert_str_eq(refusal(s, 80), "host is longer than 253 bytes");
}
END_TEST

/* Only s[0..len) is read: callers hand in the authority of a longer URL. */
START_TEST(test_reads_len_bytes_only)
{
    struct netaddr a;
    char err[200];
    const char *url = "h.example:8080/path:9?x=[1]";
    ck_assert_int_eq(netaddr_parse(url, strlen("h.example:8080"), 80, &a, err, sizeof err), 0);
    ck_assert_str_eq(a.host, "h.example");
    ck_assert_int_eq(a.port, 8080);
    ck_assert_int_eq(netaddr_parse("[::1]:81/x", 5, 80, &a, err, sizeof err), 0);
    ck_assert_str_eq(a.host, "::1");
    ck_assert_int_eq(a.port, 80);
    ck_assert_int_eq(netaddr_parse("h:1", 0, 80, &a, err, sizeof err), -1);
    ck_assert_str_eq(err, "no host");
    ck_assert_int_eq(netaddr_parse("h:0", 3, 80, &a, NULL, 0), -1); /* nothing said, no crash */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("netaddr");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_hosts);
    tcase_add_test(tc, test_ports);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_lengths);
    tcase_add_test(tc, test_reads_len_bytes_only);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
