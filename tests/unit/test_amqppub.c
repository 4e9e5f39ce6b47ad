/* test_amqppub.c — src/core/amqpurl.h (the [amqp] url) and the pure parts of src/delivery/amqppub.h: the
 * confirm ledger, outcome names; plus what the publisher does without a broker (a refused
 * port, a silent one, the backoff). Publishing to a real RabbitMQ is
 * tests/integration/test_amqp_publisher.py. */
#include "delivery/amqppub.h"
#include "core/amqpurl.h"
#include "base/clock.h"
#include "base/log.h"
#include "refused_port.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the url ---- */

static struct amqpurl parse_ok(const char *url)
{
    struct amqpurl u;
    char err[256] = "";
    int rc = amqpurl_parse(url, &u, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", url, err);
    return u;
}

static void parse_fails(const char *url, const char *want)
{
    struct amqpurl u;
    char err[256] = "";
    memset(&u, 0x55, sizeof u);
    ck_assert_msg(amqpurl_parse(url, &u, err, sizeof err) == -1, "%s parsed", url ? url : "(null)");
    ck_assert_msg(strstr(err, want) != NULL, "%s: error '%s' lacks '%s'", url ? url : "(null)", err, want);
    ck_assert_int_eq(u.port, 0); /* cleared */
    ck_assert_str_eq(u.host, "");
    ck_assert_str_eq(u.password, "");
}

START_TEST(test_url_full)
{
    struct amqpurl u = parse_ok("amqp://hg:secret@mq.example.com:5673/jobs");
    ck_assert_str_eq(u.user, "hg");
    ck_assert_str_eq(u.password, "secret");
    ck_assert_str_eq(u.host, "mq.example.com");
    ck_assert_int_eq(u.port, 5673);
    ck_assert_str_eq(u.vhost, "jobs");
}
END_TEST

START_TEST(test_url_defaults)
{
    struct amqpurl u = parse_ok("amqp://localhost");
    ck_assert_str_eq(u.user, "guest");
    ck_assert_str_eq(u.password, "guest");
    ck_assert_str_eq(u.host, "localhost");
    ck_assert_int_eq(u.port, 5672);
    ck_assert_str_eq(u.vhost, "/");
    u = parse_ok("AMQP://127.0.0.1:1/"); /* scheme in any case; a bare "/" is the default vhost */
    ck_assert_int_eq(u.port, 1);
    ck_assert_str_eq(u.vhost, "/");
    u = parse_ok("amqp://u@h/v"); /* a user without a password */
    ck_assert_str_eq(u.user, "u");
    ck_assert_str_eq(u.password, "");
    u = parse_ok("amqp://u:@h:65535");
    ck_assert_str_eq(u.password, "");
    ck_assert_int_eq(u.port, 65535);
}
END_TEST

START_TEST(test_url_percent_decoding)
{
    struct amqpurl u = parse_ok("amqp://us%3Aer:p%40ss%2Fw%25rd:x@h/%2F");
    ck_assert_str_eq(u.user, "us:er");
    ck_assert_str_eq(u.password, "p@ss/w%rd:x"); /* only the first ':' splits user and password */
    ck_assert_str_eq(u.vhost, "/");
    u = parse_ok("amqp://h/a%2fb%20c");
    ck_assert_str_eq(u.vhost, "a/b c");
}
END_TEST

START_TEST(test_url_ipv6)
{
    struct amqpurl u = parse_ok("amqp://u:p@[::1]:5680/v");
    ck_assert_str_eq(u.host, "::1");
    ck_assert_int_eq(u.port, 5680);
    u = parse_ok("amqp://[fe80::1:2]");
    ck_assert_str_eq(u.host, "fe80::1:2");
    ck_assert_int_eq(u.port, 5672);
    parse_fails("amqp://::1:5672/", "IPv6 address must be in brackets");
    parse_fails("amqp://[::1/", "unclosed '['");
    parse_fails("amqp://[::1]x/", "after ']'");
    parse_fails("amqp://[]:5672/", "no host");
    parse_fails("amqp://[::g]/", "bad IPv6 address \"::g\"");
}
END_TEST

START_TEST(test_url_errors)
{
    parse_fails(NULL, "empty");
    parse_fails("", "empty");
    parse_fails("http://h/", "must start with amqp://");
    parse_fails("amqp:/h", "must start with amqp://");
    parse_fails("h:5672", "must start with amqp://");
    parse_fails("amqps://h/", "amqps:// (TLS) is not supported");
    parse_fails("amqp://h/v?heartbeat=10", "query parameters");
    parse_fails("amqp://h/v#x", "query parameters");
    parse_fails("amqp://u:p@/v", "no host");
    parse_fails("amqp://", "no host");
    parse_fails("amqp://:5672", "no host");
    parse_fails("amqp://h:/v", "port must be a number 1..65535, not \"\"");
    parse_fails("amqp://h:0/v", "port must be a number 1..65535, not \"0\"");
    parse_fails("amqp://h:65536/v", "port must be a number 1..65535, not \"65536\"");
    parse_fails("amqp://h:123456/v", "port must be a number 1..65535, not \"123456\"");
    parse_fails("amqp://h:56x/v", "port must be a number 1..65535, not \"56x\"");
    parse_fails("amqp://h:-1/v", "port must be a number 1..65535, not \"-1\"");
    parse_fails("amqp://u:p@h:1@x/v", "more than one '@'");
    parse_fails("amqp://:p@h/v", "empty user");
    parse_fails("amqp://u:p%4@h/v", "bad percent-escape in the password");
    parse_fails("amqp://u%zz@h/v", "bad percent-escape in the user");
    parse_fails("amqp://h/v%", "bad percent-escape in the vhost");
    parse_fails("amqp://h/v%00", "%00 is not allowed in the vhost");
    parse_fails("amqp://h/a/b", "one path segment");
    parse_fails("amqp://my host/", "space or a control character");
    parse_fails("amqp://h/v\n", "space or a control character");
    parse_fails("amqp://h\x7f/", "space or a control character");
    parse_fails("amqp://ho$t/", "character '$' is not allowed in a host name");
}
END_TEST

START_TEST(test_url_errors_never_show_the_password)
{
    const char *bad[] = {"amqp://u:hunter2@h:0/v", "amqp://u:hunter2@/v", "amqp://u:hunter2@h/v?x=1",
                         "amqps://u:hunter2@h/", "amqp://u:hunter2@h/a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct amqpurl u;
        char err[256];
        ck_assert_int_eq(amqpurl_parse(bad[i], &u, err, sizeof err), -1);
        ck_assert_msg(strstr(err, "hunter2") == NULL, "%s", err);
    }
}
END_TEST

START_TEST(test_url_lengths)
{
    char url[1200], name[300];
    memset(name, 'a', 255);
    name[255] = '\0';
    snprintf(url, sizeof url, "amqp://%s:%s@h/%s", name, name, name);
    struct amqpurl u = parse_ok(url);
    ck_assert_uint_eq(strlen(u.user), 255);
    ck_assert_uint_eq(strlen(u.password), 255);
    ck_assert_uint_eq(strlen(u.vhost), 255);
    snprintf(url, sizeof url, "amqp://h/%sb", name);
    parse_fails(url, "vhost is longer than 255 bytes");
    snprintf(url, sizeof url, "amqp://%sb@h/", name);
    parse_fails(url, "user is longer than 255 bytes");
    snprintf(url, sizeof url, "amqp://%sb/", name);
    parse_fails(url, "host is longer than 253 bytes");
    /* an escape counts as the one byte it decodes to */
    char enc[800] = "amqp://h/";
    for (int i = 0; i < 255; i++)
        strcat(enc, "%2F");
    u = parse_ok(enc);
    ck_assert_uint_eq(strlen(u.vhost), 255);
}
END_TEST

START_TEST(test_url_redact)
{
    char buf[256];
    struct amqpurl u = parse_ok("amqp://hg:secret@mq:5673/jobs");
    amqpurl_redact(&u, buf, sizeof buf);
    ck_assert_str_eq(buf, "amqp://hg:***@mq:5673/jobs");
    u = parse_ok("amqp://a%40b:x@[::1]/%2F");
    amqpurl_redact(&u, buf, sizeof buf);
    ck_assert_str_eq(buf, "amqp://a%40b:***@[::1]:5672/%2F");
    /* what it prints parses back to the same place */
    struct amqpurl back;
    char err[128];
    ck_assert_int_eq(amqpurl_parse(buf, &back, err, sizeof err), 0);
    ck_assert_str_eq(back.user, "a@b");
    ck_assert_str_eq(back.vhost, "/");
    ck_assert_str_eq(back.host, "::1");
    /* cut short, still terminated */
    amqpurl_redact(&u, buf, 10);
    ck_assert_str_eq(buf, "amqp://a%");
    amqpurl_redact(&u, buf, 1);
    ck_assert_str_eq(buf, "");
}
END_TEST

/* ---- the ledger ---- */

#define N 6
static struct amqp_out M[N];
static enum amqppub_outcome O[N];

static void setup_msgs(void)
{
    static char ids[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "id%d", i);
        M[i] = (struct amqp_out){.exchange = "ex",
                                 .routing_key = "rk",
                                 .body = "{}",
                                 .body_len = 2,
                                 .id = ids[i],
                                 .topic = "t",
                                 .attempt = 1};
        O[i] = (enum amqppub_outcome)99; /* init must reset it */
    }
}

START_TEST(test_ledger_ack_single_and_multiple)
{
    setup_msgs();
    struct amqppub_ledger l;
    ck_assert_int_eq(amqppub_ledger_init(&l, M, O, N), 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(O[i], AMQPPUB_UNKNOWN);
    for (int i = 0; i < N; i++)
        amqppub_ledger_sent(&l, i, 10 + (uint64_t)i); /* tags need not start at 1 */
    ck_assert_int_eq(l.waiting, N);
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 12, 0, 1), 1); /* single ack: only tag 12 */
    ck_assert_int_eq(O[2], AMQPPUB_CONFIRMED);
    ck_assert_int_eq(O[0], AMQPPUB_UNKNOWN);
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 13, 1, 1), 3); /* multiple: 10, 11, 13 (12 already) */
    ck_assert_int_eq(O[0], AMQPPUB_CONFIRMED);
    ck_assert_int_eq(O[1], AMQPPUB_CONFIRMED);
    ck_assert_int_eq(O[3], AMQPPUB_CONFIRMED);
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 13, 1, 1), 0); /* again: nothing */
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 7, 1, 1), 0);  /* a tag of an earlier batch */
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 99, 0, 1), 0); /* a tag never sent */
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 15, 1, 0), 2); /* nack multiple */
    ck_assert_int_eq(O[4], AMQPPUB_NACKED);
    ck_assert_int_eq(O[5], AMQPPUB_NACKED);
    ck_assert_int_eq(l.waiting, 0);
    amqppub_ledger_free(&l);
}
END_TEST

START_TEST(test_ledger_unpublished_stay_unknown)
{
    setup_msgs();
    struct amqppub_ledger l;
    ck_assert_int_eq(amqppub_ledger_init(&l, M, O, N), 0);
    amqppub_ledger_sent(&l, 0, 1);
    amqppub_ledger_sent(&l, 1, 2);
    amqppub_ledger_sent(&l, 1, 3); /* sent twice: ignored */
    amqppub_ledger_sent(&l, N, 4); /* out of range: ignored */
    ck_assert_int_eq(l.waiting, 2);
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 1000, 1, 1), 2);
    ck_assert_int_eq(O[1], AMQPPUB_CONFIRMED);
    for (int i = 2; i < N; i++)
        ck_assert_int_eq(O[i], AMQPPUB_UNKNOWN); /* the connection died before they went out */
    amqppub_ledger_free(&l);
}
END_TEST

START_TEST(test_ledger_return_then_ack)
{
    setup_msgs();
    M[1].routing_key = "nowhere";
    M[3].routing_key = "nowhere";
    struct amqppub_ledger l;
    ck_assert_int_eq(amqppub_ledger_init(&l, M, O, N), 0);
    for (int i = 0; i < N; i++)
        amqppub_ledger_sent(&l, i, 1 + (uint64_t)i);
    /* RabbitMQ: the return, then the ack (here a multiple one covering it) */
    ck_assert_int_eq(amqppub_ledger_returned(&l, "id3", 3, "ex", 2, "nowhere", 7), 3);
    ck_assert_int_eq(amqppub_ledger_returned(&l, "id1", 3, "ex", 2, "nowhere", 7), 1);
    ck_assert_int_eq(l.waiting, N); /* a return settles nothing: its ack does */
    ck_assert_int_eq(amqppub_ledger_confirm(&l, N, 1, 1), N);
    ck_assert_int_eq(O[0], AMQPPUB_CONFIRMED);
    ck_assert_int_eq(O[1], AMQPPUB_RETURNED);
    ck_assert_int_eq(O[2], AMQPPUB_CONFIRMED);
    ck_assert_int_eq(O[3], AMQPPUB_RETURNED);
    /* a return that matches nothing open */
    ck_assert_int_eq(amqppub_ledger_returned(&l, "id3", 3, "ex", 2, "nowhere", 7), -1);
    amqppub_ledger_free(&l);
}
END_TEST

START_TEST(test_ledger_return_matching)
{
    setup_msgs();
    M[2].id = M[4].id; /* the same job twice in a batch (a retry): the first open one is returned first */
    struct amqppub_ledger l;
    ck_assert_int_eq(amqppub_ledger_init(&l, M, O, N), 0);
    for (int i = 0; i < N; i++)
        amqppub_ledger_sent(&l, i, 1 + (uint64_t)i);
    ck_assert_int_eq(amqppub_ledger_returned(&l, "id4", 3, "ex", 2, "rk", 2), 2);
    ck_assert_int_eq(amqppub_ledger_returned(&l, "id4", 3, "ex", 2, "rk", 2), 4);
    /* the id must come with the right exchange and key */
    ck_assert_int_eq(amqppub_ledger_returned(&l, "id0", 3, "other", 5, "rk", 2), -1);
    /* no message-id on the return: the first open message with that exchange and key */
    ck_assert_int_eq(amqppub_ledger_returned(&l, "", 0, "ex", 2, "rk", 2), 0);
    /* an unknown id falls back the same way */
    ck_assert_int_eq(amqppub_ledger_returned(&l, "zz", 2, "ex", 2, "rk", 2), 1);
    ck_assert_int_eq(O[0], AMQPPUB_RETURNED);
    ck_assert_int_eq(O[1], AMQPPUB_RETURNED);
    ck_assert_int_eq(O[3], AMQPPUB_UNKNOWN);
    /* a nack after a return keeps RETURNED */
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 1, 0, 0), 1);
    ck_assert_int_eq(O[0], AMQPPUB_RETURNED);
    amqppub_ledger_free(&l);
}
END_TEST

START_TEST(test_ledger_refused_by_channel_close)
{
    setup_msgs();
    M[2].exchange = "nope";
    M[4].exchange = "nope";
    M[5].exchange = "";
    struct amqppub_ledger l;
    ck_assert_int_eq(amqppub_ledger_init(&l, M, O, N), 0);
    for (int i = 0; i < N; i++)
        amqppub_ledger_sent(&l, i, 1 + (uint64_t)i);
    amqppub_ledger_confirm(&l, 1, 0, 1);
    const char *t = "NOT_FOUND - no exchange 'nope' in vhost '/'";
    ck_assert_int_eq(amqppub_ledger_refused(&l, t, strlen(t)), 2); /* the first one to that exchange */
    ck_assert_int_eq(O[2], AMQPPUB_REFUSED);
    ck_assert_int_eq(O[4], AMQPPUB_UNKNOWN); /* never processed by the broker */
    ck_assert_int_eq(l.waiting, N - 2);
    const char *acc = "ACCESS_REFUSED - access to exchange 'amq.default' in vhost 'v' refused for user 'u'";
    ck_assert_int_eq(amqppub_ledger_refused(&l, acc, strlen(acc)), 5); /* "" is amq.default */
    const char *q = "NOT_FOUND - no exchange 'it''s' in vhost '/'";
    ck_assert_int_eq(amqppub_ledger_refused(&l, q, strlen(q)), -1);
    const char *other = "PRECONDITION_FAILED - unknown delivery tag 42";
    ck_assert_int_eq(amqppub_ledger_refused(&l, other, strlen(other)), -1);
    const char *cut = "NOT_FOUND - no exchange 'ex";
    ck_assert_int_eq(amqppub_ledger_refused(&l, cut, strlen(cut)), -1);
    amqppub_ledger_free(&l);
}
END_TEST

START_TEST(test_ledger_refused_name_with_quote)
{
    setup_msgs();
    M[0].exchange = "it's";
    struct amqppub_ledger l;
    ck_assert_int_eq(amqppub_ledger_init(&l, M, O, 1), 0);
    amqppub_ledger_sent(&l, 0, 1);
    const char *t = "NOT_FOUND - no exchange 'it's' in vhost '/'";
    ck_assert_int_eq(amqppub_ledger_refused(&l, t, strlen(t)), 0);
    ck_assert_int_eq(O[0], AMQPPUB_REFUSED);
    amqppub_ledger_free(&l);
}
END_TEST

START_TEST(test_ledger_empty)
{
    struct amqppub_ledger l;
    ck_assert_int_eq(amqppub_ledger_init(&l, NULL, NULL, 0), 0);
    ck_assert_int_eq(amqppub_ledger_confirm(&l, 1, 1, 1), 0);
    ck_assert_int_eq(amqppub_ledger_returned(&l, "a", 1, "", 0, "", 0), -1);
    amqppub_ledger_free(&l);
}
END_TEST

START_TEST(test_outcome_names)
{
    ck_assert_str_eq(amqppub_outcome_name(AMQPPUB_UNKNOWN), "unknown");
    ck_assert_str_eq(amqppub_outcome_name(AMQPPUB_CONFIRMED), "confirmed");
    ck_assert_str_eq(amqppub_outcome_name(AMQPPUB_NACKED), "nacked");
    ck_assert_str_eq(amqppub_outcome_name(AMQPPUB_RETURNED), "returned");
    ck_assert_str_eq(amqppub_outcome_name(AMQPPUB_REFUSED), "refused");
    ck_assert_str_eq(amqppub_outcome_name((enum amqppub_outcome)42), "?");
}
END_TEST

/* ---- the publisher without a broker ---- */

START_TEST(test_new_rejects_a_bad_url)
{
    char err[256];
    ck_assert_ptr_null(amqppub_new("amqp://u:pw@h:0/", NULL, err, sizeof err));
    ck_assert_str_eq(err, "bad amqp url: port must be a number 1..65535, not \"0\"");
    amqppub_free(NULL);
}
END_TEST

START_TEST(test_refused_then_backoff)
{
    int fd, port = refused_port(&fd);
    char url[64], err[256];
    snprintf(url, sizeof url, "amqp://127.0.0.1:%d/", port);
    struct amqppub *p = amqppub_new(url, "unit", err, sizeof err);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(amqppub_connected(p), 0);
    struct amqp_out m = {.exchange = "", .routing_key = "q", .body = "1", .body_len = 1, .id = "1", .topic = "t"};
    enum amqppub_outcome o = AMQPPUB_CONFIRMED;
    int64_t t0 = clock_mono_ms();
    ck_assert_int_eq(amqppub_publish_batch(p, &m, 1, &o, 2000), -1);
    ck_assert_int_lt(clock_mono_ms() - t0, 1000);
    ck_assert_int_eq(o, AMQPPUB_UNKNOWN);
    ck_assert_msg(strstr(amqppub_error(p), "connect to 127.0.0.1:") != NULL, "%s", amqppub_error(p));
    /* within the backoff (200 ms) and a timeout shorter than it: fails at once, says when it retries */
    t0 = clock_mono_ms();
    ck_assert_int_eq(amqppub_publish_batch(p, &m, 1, &o, 50), -1);
    ck_assert_int_lt(clock_mono_ms() - t0, 40);
    ck_assert_msg(strstr(amqppub_error(p), "not connected (connect to") != NULL, "%s", amqppub_error(p));
    ck_assert_msg(strstr(amqppub_error(p), "next attempt in") != NULL, "%s", amqppub_error(p));
    /* a timeout that outlasts the backoff waits it out and tries again (and the backoff doubles) */
    t0 = clock_mono_ms();
    ck_assert_int_eq(amqppub_connect(p, 1000), -1);
    int64_t took = clock_mono_ms() - t0;
    ck_assert_int_ge(took, 100);
    ck_assert_int_lt(took, 1000);
    ck_assert_msg(strstr(amqppub_error(p), "connect to") == amqppub_error(p), "%s", amqppub_error(p));
    t0 = clock_mono_ms();
    ck_assert_int_eq(amqppub_connect(p, 300), -1); /* backoff now 400 ms: longer than the timeout */
    ck_assert_int_lt(clock_mono_ms() - t0, 100);
    ck_assert_msg(strstr(amqppub_error(p), "next attempt in") != NULL, "%s", amqppub_error(p));
    amqppub_free(p);
    close(fd);
}
END_TEST

START_TEST(test_silent_server_times_out)
{
    /* accepts TCP (the kernel does, from the backlog) but never says a word: login must give up */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 8), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
    char url[64], err[256];
    snprintf(url, sizeof url, "amqp://127.0.0.1:%d/", ntohs(a.sin_port));
    struct amqppub *p = amqppub_new(url, NULL, err, sizeof err);
    ck_assert_ptr_nonnull(p);
    struct amqp_out m = {.exchange = "", .routing_key = "q", .body = "1", .body_len = 1, .id = "1", .topic = "t"};
    enum amqppub_outcome o;
    int64_t t0 = clock_mono_ms();
    ck_assert_int_eq(amqppub_publish_batch(p, &m, 1, &o, 300), -1);
    int64_t took = clock_mono_ms() - t0;
    ck_assert_int_ge(took, 250);
    ck_assert_int_lt(took, 800);
    ck_assert_int_eq(o, AMQPPUB_UNKNOWN);
    ck_assert_msg(strstr(amqppub_error(p), "login") != NULL, "%s", amqppub_error(p));
    ck_assert_int_eq(amqppub_connected(p), 0);
    amqppub_free(p);
    close(lfd);
}
END_TEST

START_TEST(test_empty_batch_does_nothing)
{
    char err[256];
    struct amqppub *p = amqppub_new("amqp://127.0.0.1:1/", NULL, err, sizeof err);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(amqppub_publish_batch(p, NULL, 0, NULL, 100), 0);
    ck_assert_str_eq(amqppub_error(p), "");
    amqppub_free(p);
}
END_TEST

int main(void)
{
    log_level_set(LL_ERROR); /* the refused connects are expected */
    Suite *s = suite_create("amqppub");
    TCase *url = tcase_create("url");
    tcase_add_test(url, test_url_full);
    tcase_add_test(url, test_url_defaults);
    tcase_add_test(url, test_url_percent_decoding);
    tcase_add_test(url, test_url_ipv6);
    tcase_add_test(url, test_url_errors);
    tcase_add_test(url, test_url_errors_never_show_the_password);
    tcase_add_test(url, test_url_lengths);
    tcase_add_test(url, test_url_redact);
    suite_add_tcase(s, url);
    TCase *ledger = tcase_create("ledger");
    tcase_add_test(ledger, test_ledger_ack_single_and_multiple);
    tcase_add_test(ledger, test_ledger_unpublished_stay_unknown);
    tcase_add_test(ledger, test_ledger_return_then_ack);
    tcase_add_test(ledger, test_ledger_return_matching);
    tcase_add_test(ledger, test_ledger_refused_by_channel_close);
    tcase_add_test(ledger, test_ledger_refused_name_with_quote);
    tcase_add_test(ledger, test_ledger_empty);
    tcase_add_test(ledger, test_outcome_names);
    suite_add_tcase(s, ledger);
    TCase *io = tcase_create("no broker");
    tcase_set_timeout(io, 30);
    tcase_add_test(io, test_new_rejects_a_bad_url);
    tcase_add_test(io, test_refused_then_backoff);
    tcase_add_test(io, test_silent_server_times_out);
    tcase_add_test(io, test_empty_batch_does_nothing);
    suite_add_tcase(s, io);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
