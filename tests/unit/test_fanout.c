/* test_fanout.c — one call of several Redis commands (fanout.h), against a fake Redis: every
 * reply reaches the caller with its command's index and `done` runs once, after the last; a
 * wrong reply (an error reply, which never reaches the caller, or one the caller refuses) fails
 * the call without cutting the other replies short; a hold keeps the call open; a call of which nothing could be sent
 * ends without `done`; a call of no commands is done at once.
 *
 * The fake is a thread on a loopback port that answers every command with the length of its
 * second argument as an integer (":3" for GET abc), or "-ERR" for FAIL, and ":1" to the link's
 * set-up (CLIENT SETNAME, ROLE). */
#include "redis/fanout.h"
#include "redis/rlink.h"

#include "loop_until.h"
#include "refused_port.h"

#include <arpa/inet.h>
#include <check.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake Redis: one client at a time ---- */

static int lfd, port;
static pthread_t fake_thread;
static atomic_int fake_stop;

/* One command of `b` (RESP array of bulk strings): bytes used (0: incomplete), with its first
 * two arguments' texts. */
static size_t parse(const char *b, size_t len, char *arg0, char *arg1)
{
    const char *end = b + len, *p = b;
    if (p >= end || *p != '*')
        return 0;
    int argc = atoi(p + 1);
    arg0[0] = arg1[0] = '\0';
    if ((p = memchr(p, '\n', (size_t)(end - p))) == NULL)
        return 0;
    p++;
    for (int i = 0; i < argc; i++) {
        if (p >= end || *p != '$')
            return 0;
        size_t n = (size_t)atol(p + 1);
        if ((p = memchr(p, '\n', (size_t)(end - p))) == NULL || (size_t)(end - ++p) < n + 2)
            return 0;
        if (i < 2)
            snprintf(i == 0 ? arg0 : arg1, 64, "%.*s", (int)(n < 63 ? n : 63), p);
        p += n + 2;
    }
    return (size_t)(p - b);
}

static void *fake_main(void *unused)
{
    (void)unused;
    static char buf[65536];
    int fd = -1;
    size_t len = 0;
    while (!atomic_load(&fake_stop)) {
        struct pollfd pfd = {fd >= 0 ? fd : lfd, POLLIN, 0};
        if (poll(&pfd, 1, 10) <= 0)
            continue;
        if (fd < 0) {
            fd = accept(lfd, NULL, NULL);
            len = 0;
            continue;
        }
        ssize_t r = read(fd, buf + len, sizeof buf - len);
        if (r <= 0) {
            close(fd);
            fd = -1;
            continue;
        }
        len += (size_t)r;
        char arg0[64], arg1[64], out[96];
        size_t used;
        while ((used = parse(buf, len, arg0, arg1)) > 0) {
            if (strcmp(arg0, "FAIL") == 0)
                snprintf(out, sizeof out, "-ERR told to fail\r\n");
            else if (strcmp(arg0, "GET") == 0)
                snprintf(out, sizeof out, ":%zu\r\n", strlen(arg1));
            else
                snprintf(out, sizeof out, ":1\r\n");
            ck_assert_int_eq(write(fd, out, strlen(out)), (ssize_t)strlen(out));
            memmove(buf, buf + used, len - used);
            len -= used;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void fake_start(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    getsockname(lfd, (struct sockaddr *)&a, &al);
    port = ntohs(a.sin_port);
    atomic_store(&fake_stop, 0);
    pthread_create(&fake_thread, NULL, fake_main, NULL);
}

static void fake_end(void)
{
    atomic_store(&fake_stop, 1);
    pthread_join(fake_thread, NULL);
    close(lfd);
}

/* ---- the caller ---- */

static struct event_base *base;
static struct event *ticker; /* wakes the loop every 2 ms, for RUN_UNTIL */
static struct rlink *link_;

static void tick(evutil_socket_t fd, short what, void *arg) {}

/* Run the loop until `cond` holds or `ms` pass; the condition's value. */
#define RUN_UNTIL(cond, ms) LOOP_UNTIL(base, cond, ms)

static void link_to(int to_port)
{
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", to_port);
    struct rlink_config cfg = {"test", addr, "", 0, 2000, 0, 0};
    base = event_base_new();
    ticker = event_new(base, -1, EV_PERSIST, tick, NULL);
    struct timeval every = {0, 2000};
    event_add(ticker, &every);
    link_ = rlink_new(base, &cfg, NULL, NULL);
    ck_assert_ptr_nonnull(link_);
}

static void unlink_(void)
{
    rlink_free(link_);
    event_free(ticker);
    event_base_free(base);
}

/* A link to a fresh fake, up. */
static void start_linked(void)
{
    fake_start();
    link_to(port);
    ck_assert_msg(RUN_UNTIL(rlink_ready(link_), 3000), "the link never came up");
}

static void finish_linked(void)
{
    unlink_();
    fake_end();
}

struct call {
    int replies, dones, failed, refuse_index;
    long sum;
    int seen[8];
};

static int on_reply(redisReply *r, int index, void *arg)
{
    struct call *c = arg;
    c->replies++;
    c->seen[index]++;
    if (r->type != REDIS_REPLY_INTEGER || index == c->refuse_index)
        return -1;
    c->sum += r->integer;
    return 0;
}

static void on_done(int failed, void *arg)
{
    struct call *c = arg;
    c->dones++;
    c->failed = failed;
}

static void send_get(struct fanout *f, int index, const char *cmd, const char *key)
{
    const char *argv[] = {cmd, key};
    size_t lens[] = {strlen(cmd), strlen(key)};
    ck_assert_int_eq(fanout_send(f, index, 2, argv, lens), 0);
}

START_TEST(every_reply_then_done_once)
{
    start_linked();
    struct call c = {.refuse_index = -1};
    struct fanout *f = fanout_new(link_, 3, on_reply, on_done, &c);
    ck_assert_ptr_nonnull(f);
    send_get(f, 0, "GET", "a");
    send_get(f, 1, "GET", "bb");
    send_get(f, 2, "GET", "ccc");
    ck_assert_int_eq(fanout_end(f), 0);
    ck_assert_int_eq(c.dones, 0); /* replies come on the loop, never from inside a call */
    ck_assert(RUN_UNTIL(c.dones > 0, 3000));
    ck_assert_int_eq(c.replies, 3);
    ck_assert_int_eq(c.seen[0] + c.seen[1] + c.seen[2], 3);
    ck_assert_int_eq(c.seen[1], 1);
    ck_assert_int_eq(c.sum, 6);
    ck_assert_int_eq(c.failed, 0);
    RUN_UNTIL(0, 50);
    ck_assert_int_eq(c.dones, 1);
    finish_linked();
}
END_TEST

START_TEST(a_wrong_reply_fails_the_call_but_the_rest_are_read)
{
    start_linked();
    struct call c = {.refuse_index = -1};
    struct fanout *f = fanout_new(link_, 3, on_reply, on_done, &c);
    send_get(f, 0, "GET", "a");
    send_get(f, 1, "FAIL", "x");
    send_get(f, 2, "GET", "ccc");
    ck_assert_int_eq(fanout_end(f), 0);
    ck_assert(RUN_UNTIL(c.dones > 0, 3000));
    ck_assert_int_eq(c.replies, 2); /* the error reply fails the call without reaching it */
    ck_assert_int_eq(c.seen[1], 0);
    ck_assert_int_eq(c.sum, 4);
    ck_assert_int_eq(c.failed, 1);

    struct call d = {.refuse_index = 0}; /* the caller refuses a reply */
    f = fanout_new(link_, 2, on_reply, on_done, &d);
    send_get(f, 0, "GET", "a");
    send_get(f, 1, "GET", "bb");
    ck_assert_int_eq(fanout_end(f), 0);
    ck_assert(RUN_UNTIL(d.dones > 0, 3000));
    ck_assert_int_eq(d.failed, 1);
    ck_assert_int_eq(d.replies, 2);
    finish_linked();
}
END_TEST

START_TEST(a_hold_keeps_the_call_open)
{
    start_linked();
    struct call c = {.refuse_index = -1};
    struct fanout *f = fanout_new(link_, 1, on_reply, on_done, &c);
    send_get(f, 0, "GET", "abcd");
    ck_assert_int_eq(fanout_sent(f), 0);
    fanout_hold(f);    /* something else the call waits for */
    fanout_release(f); /* the sender's own */
    ck_assert(RUN_UNTIL(c.replies > 0, 3000));
    RUN_UNTIL(0, 50);
    ck_assert_int_eq(c.dones, 0);
    fanout_release(f);
    ck_assert_int_eq(c.dones, 1);
    ck_assert_int_eq(c.sum, 4);
    finish_linked();
}
END_TEST

START_TEST(nothing_sent_ends_without_done)
{
    int fd;
    link_to(refused_port(&fd)); /* never up: every send fails */
    struct call c = {.refuse_index = -1};
    struct fanout *f = fanout_new(link_, 2, on_reply, on_done, &c);
    const char *argv[] = {"GET", "a"};
    size_t lens[] = {3, 1};
    ck_assert_int_eq(fanout_send(f, 0, 2, argv, lens), -1);
    ck_assert_int_eq(fanout_end(f), -1);
    RUN_UNTIL(0, 50);
    ck_assert_int_eq(c.dones, 0);
    ck_assert_int_eq(c.replies, 0);
    unlink_();
    close(fd);
}
END_TEST

START_TEST(no_commands_is_done_at_once)
{
    int fd;
    link_to(refused_port(&fd));
    struct call c = {.refuse_index = -1};
    struct fanout *f = fanout_new(link_, 0, on_reply, on_done, &c);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fanout_end(f), 0);
    ck_assert_int_eq(c.dones, 1);
    ck_assert_int_eq(c.failed, 0);
    unlink_();
    close(fd);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fanout");
    TCase *tc = tcase_create("calls");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, every_reply_then_done_once);
    tcase_add_test(tc, a_wrong_reply_fails_the_call_but_the_rest_are_read);
    tcase_add_test(tc, a_hold_keeps_the_call_open);
    tcase_add_test(tc, nothing_sent_ends_without_done);
    tcase_add_test(tc, no_commands_is_done_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
