/* test_rconn.c — src/redis/rconn.h: the connection state machine against a fake Redis.
 *
 * The fake is a thread in this process speaking just enough RESP on a loopback port: AUTH,
 * SELECT, CLIENT, ROLE, FUNCTION LOAD (answered "already exists" while loaded, as Redis does)
 * and FCALL (answered "Function not found" until some FUNCTION LOAD came after the last flush,
 * else :42 or the error reply the test chose). The test drives rconn's event loop in its own
 * thread and tells the fake what to do (flush the functions, be a replica, answer OOM, stop
 * answering), so every edge runs in milliseconds.
 *
 * Built with -DRCONN_OLD_API it uses only what rconn.h offered before issue 11, to show the
 * NOSCRIPT tests failing against the old rconn.c (see the report of that change). */
#include "core/metrics.h"
#include "base/log.h"
#include "redis/rconn.h"
#include "redis/rcodec.h"
#include "base/resolve.h"
#include "redis/scripts.h"

#include "loop_until.h"

#include <arpa/inet.h>
#include <check.h>
#include <hiredis/hiredis.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake Redis ---- */

#define FAKE_CLIENTS 16
#define FAKE_BUF     (1 << 20) /* FUNCTION LOAD sends the whole library (~100 KB) */

static struct fake {
    int lfd, port;
    pthread_t thread;
    atomic_int stop;
    atomic_int loaded;      /* the library is loaded (a FUNCTION LOAD since the last flush) */
    atomic_int replica;     /* ROLE says slave */
    atomic_int hang;        /* read commands, answer nothing */
    atomic_int full;        /* FUNCTION LOAD answers OOM (it may write), as a full Redis does */
    atomic_int flush_every; /* > 0: flush the functions after every that many successful FCALL */
    atomic_int loads, evals, evals_ok, connects, roles;
    pthread_mutex_t lock;
    char eval_error[256]; /* non-empty: FCALL answers this error */
} F;

struct client {
    int fd;
    size_t len;
    char buf[FAKE_BUF];
};

static void fake_set_error(const char *err)
{
    pthread_mutex_lock(&F.lock);
    snprintf(F.eval_error, sizeof F.eval_error, "%s", err ? err : "");
    pthread_mutex_unlock(&F.lock);
}

static void put(int fd, const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = send(fd, s + off, n - off, MSG_NOSIGNAL); /* the client may be gone */
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

/* One command: 0 = none complete yet, -1 = garbage, else bytes used. argv[i] are copies. */
static long parse(const char *b, size_t len, char argv[4][64], int *argc)
{
    if (len < 4)
        return 0;
    if (b[0] != '*')
        return -1;
    const char *end = b + len, *p = b + 1;
    long n = strtol(p, NULL, 10);
    p = memchr(p, '\n', (size_t)(end - p));
    if (!p)
        return 0;
    p++;
    *argc = 0;
    for (long i = 0; i < n; i++) {
        if (p >= end)
            return 0;
        if (*p != '$')
            return -1;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return 0;
        long l = strtol(p + 1, NULL, 10);
        p = nl + 1;
        if (end - p < l + 2)
            return 0;
        if (i < 4) {
            size_t c = (size_t)l < 63 ? (size_t)l : 63;
            memcpy(argv[i], p, c);
            argv[i][c] = '\0';
            (*argc)++;
        }
        p += l + 2;
    }
    return (long)(p - b);
}

static void answer(int fd, char argv[4][64], int argc)
{
    if (argc == 0)
        return;
    const char *cmd = argv[0];
    if (!strcasecmp(cmd, "ROLE")) {
        atomic_fetch_add(&F.roles, 1);
        put(fd, atomic_load(&F.replica) ? "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:0\r\n"
                                        : "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    } else if (!strcasecmp(cmd, "FUNCTION") && argc > 1 && !strcasecmp(argv[1], "LOAD")) {
        atomic_fetch_add(&F.loads, 1);
        if (atomic_load(&F.full))
            put(fd, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
        else if (atomic_exchange(&F.loaded, 1))
            put(fd, "-ERR Library 'hg_000000000000' already exists\r\n");
        else
            put(fd, "$15\r\nhg_000000000000\r\n");
    } else if (!strcasecmp(cmd, "FCALL")) {
        atomic_fetch_add(&F.evals, 1);
        char err[256];
        pthread_mutex_lock(&F.lock);
        snprintf(err, sizeof err, "%s", F.eval_error);
        pthread_mutex_unlock(&F.lock);
        if (!atomic_load(&F.loaded)) {
            put(fd, "-ERR Function not found\r\n");
        } else if (err[0]) {
            put(fd, "-");
            put(fd, err);
            put(fd, "\r\n");
        } else {
            int ok = atomic_fetch_add(&F.evals_ok, 1) + 1, every = atomic_load(&F.flush_every);
            put(fd, ":42\r\n");
            if (every > 0 && ok % every == 0)
                atomic_store(&F.loaded, 0); /* FUNCTION FLUSH from another client, between two commands */
        }
    } else if (!strcasecmp(cmd, "PING")) {
        put(fd, "+PONG\r\n");
    } else {
        put(fd, "+OK\r\n"); /* AUTH, SELECT, CLIENT SETNAME */
    }
}

static void *fake_main(void *arg)
{
    (void)arg;
    struct client *cl[FAKE_CLIENTS] = {0};
    while (!atomic_load(&F.stop)) {
        struct pollfd pfd[FAKE_CLIENTS + 1];
        int map[FAKE_CLIENTS + 1], n = 0;
        pfd[n].fd = F.lfd;
        pfd[n].events = POLLIN;
        map[n++] = -1;
        for (int i = 0; i < FAKE_CLIENTS; i++)
            if (cl[i]) {
                pfd[n].fd = cl[i]->fd;
                pfd[n].events = POLLIN;
                map[n++] = i;
            }
        if (poll(pfd, (nfds_t)n, 10) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (map[k] < 0) {
                int fd = accept(F.lfd, NULL, NULL);
                if (fd < 0)
                    continue;
                int slot = -1;
                for (int i = 0; i < FAKE_CLIENTS && slot < 0; i++)
                    if (!cl[i])
                        slot = i;
                if (slot < 0) {
                    close(fd);
                    continue;
                }
                cl[slot] = calloc(1, sizeof **cl);
                cl[slot]->fd = fd;
                atomic_fetch_add(&F.connects, 1);
                continue;
            }
            struct client *c = cl[map[k]];
            ssize_t r = read(c->fd, c->buf + c->len, FAKE_BUF - c->len);
            if (r <= 0) {
                close(c->fd);
                free(c);
                cl[map[k]] = NULL;
                continue;
            }
            c->len += (size_t)r;
            for (;;) {
                char argv[4][64];
                int argc = 0;
                long used = parse(c->buf, c->len, argv, &argc);
                if (used <= 0)
                    break;
                if (!atomic_load(&F.hang))
                    answer(c->fd, argv, argc);
                memmove(c->buf, c->buf + used, c->len - (size_t)used);
                c->len -= (size_t)used;
            }
        }
    }
    for (int i = 0; i < FAKE_CLIENTS; i++)
        if (cl[i]) {
            close(cl[i]->fd);
            free(cl[i]);
        }
    return NULL;
}

static void fake_start(void)
{
    memset(&F, 0, sizeof F);
    pthread_mutex_init(&F.lock, NULL);
    F.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(F.lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(F.lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(F.lfd, 16), 0);
    socklen_t al = sizeof a;
    getsockname(F.lfd, (struct sockaddr *)&a, &al);
    F.port = ntohs(a.sin_port);
    pthread_create(&F.thread, NULL, fake_main, NULL);
}

static void fake_stop(void)
{
    atomic_store(&F.stop, 1);
    pthread_join(F.thread, NULL);
    close(F.lfd);
}

/* ---- the client side ---- */

static struct event_base *base;
static struct event *ticker;
static int ups, downs, ticks;

static void on_state(struct rconn *rc, int up, void *arg)
{
    (void)rc;
    (void)arg;
    if (up)
        ups++;
    else
        downs++;
}

struct result {
    int done, ok;
    long long value;
};

static void on_result(redisReply *reply, void *arg)
{
    struct result *r = arg;
    r->done++;
    r->ok = reply != NULL && reply->type == REDIS_REPLY_INTEGER;
    r->value = r->ok ? reply->integer : -1;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    ticks++;
}

/* Run the loop until `cond` holds (or `ms` pass); the condition's value. */
#define RUN_UNTIL(cond, ms) LOOP_UNTIL(base, cond, ms)

/* A connection to the fake at `host` (an address, or a name the test's resolver knows). */
static struct rconn *start_at(const char *host, int timeout_ms)
{
    fake_start();
    base = event_base_new();
    ticker = event_new(base, -1, EV_PERSIST, tick, NULL);
    struct timeval tv = {0, 2000};
    event_add(ticker, &tv);
    char addr[128];
    snprintf(addr, sizeof addr, "%s:%d", host, F.port);
    struct rconn_config cfg = {"test", addr, "", 0, timeout_ms, 1};
    ups = downs = ticks = 0;
    struct rconn *rc = rconn_new(base, &cfg, on_state, NULL);
    ck_assert_ptr_nonnull(rc);
    return rc;
}

static struct rconn *start(int timeout_ms)
{
    struct rconn *rc = start_at("127.0.0.1", timeout_ms);
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 2000), "never came up");
    return rc;
}

static void finish(struct rconn *rc)
{
    rconn_free(rc);
    event_free(ticker);
    event_base_free(base);
    fake_stop();
}

/* FCALL of SCRIPT_PUSH with one key; the fake does not care about arguments. */
static int eval(struct rconn *rc, struct result *r)
{
    const char *argv[4];
    size_t lens[4];
    argv[3] = "hg:{0}:jobs";
    lens[3] = strlen(argv[3]);
    memset(r, 0, sizeof *r);
    return rconn_eval(rc, SCRIPT_PUSH, 4, argv, lens, on_result, r);
}

static int eval_wait(struct rconn *rc, struct result *r)
{
    if (eval(rc, r) != 0)
        return -1;
    ck_assert_msg(RUN_UNTIL(r->done, 3000), "no callback");
    ck_assert_int_eq(r->done, 1);
    return r->ok ? 0 : -1;
}

/* ---- tests that hold before and after issue 11 ---- */

START_TEST(test_connect_setup_up)
{
    struct rconn *rc = start(1000);
    ck_assert_int_eq(ups, 1);
    ck_assert_int_eq(atomic_load(&F.loads), 1);
    struct result r;
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    ck_assert_int_eq(r.value, 42);
    finish(rc);
}
END_TEST

/* Issue 11: the functions flushed again and again; each time the next call must succeed
 * (reload + re-send), not fail once and then forever. */
START_TEST(test_noscript_every_flush_reloads_and_retries)
{
    struct rconn *rc = start(1000);
    struct result r;
    for (int i = 1; i <= 5; i++) {
        atomic_store(&F.loaded, 0); /* FUNCTION FLUSH */
        int loads = atomic_load(&F.loads);
        ck_assert_msg(eval_wait(rc, &r) == 0, "call after flush %d refused", i);
        ck_assert_int_eq(r.value, 42);
        ck_assert_int_eq(atomic_load(&F.loads), loads + 1); /* one reload per flush */
        ck_assert(rconn_is_up(rc));
    }
    finish(rc);
}
END_TEST

/* Flushes between commands while many calls are in flight: every call succeeds, and one
 * flush costs one reload, not one per call that saw "not found". */
START_TEST(test_noscript_under_pipelined_traffic)
{
    struct rconn *rc = start(1000);
    atomic_store(&F.flush_every, 7);
    enum { N = 300, INFLIGHT = 5 };
    static struct result r[N];
    int sent = 0, done = 0, failed = 0;
    int64_t until = now_ms() + 10000;
    while (done < N && now_ms() < until) {
        while (sent < N && sent - done < INFLIGHT)
            ck_assert_int_eq(eval(rc, &r[sent++]), 0);
        event_base_loop(base, EVLOOP_ONCE);
        while (done < sent && r[done].done) {
            failed += !r[done].ok;
            done++;
        }
    }
    ck_assert_int_eq(done, N);
    ck_assert_int_eq(failed, 0);
    int flushes = atomic_load(&F.evals_ok) / 7, rounds = atomic_load(&F.loads) - 1;
    ck_assert_msg(rounds >= flushes - 1 && rounds <= flushes + 1, "%d reload rounds for %d flushes", rounds, flushes);
    finish(rc);
}
END_TEST

#ifndef RCONN_OLD_API

/* ---- classification, causes, READONLY/LOADING, timeouts, the fault seam ---- */

START_TEST(test_classify)
{
    static const struct {
        const char *err;
        enum rcause cause;
    } t[] = {
        {"OOM command not allowed when used memory > 'maxmemory'.", RCAUSE_OOM},
        {"OOM command not allowed when used memory > 'maxmemory'. script: 1b2c, on @user_script:12.", RCAUSE_OOM},
        {"ERR Error running script (call to f_ab): @user_script:1: -OOM command not allowed when used memory > "
         "'maxmemory'",
         RCAUSE_OOM},
        {"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", RCAUSE_BUSY},
        {"READONLY You can't write against a read only replica.", RCAUSE_READONLY},
        {"READONLY You can't write against a read only replica. script: 1b2c, on @user_script:3.", RCAUSE_READONLY},
        {"LOADING Redis is loading the dataset in memory", RCAUSE_LOADING},
        {"NOSCRIPT No matching script. Please use EVAL.", RCAUSE_NOSCRIPT},
        {"ERR Function not found", RCAUSE_NOSCRIPT}, /* FCALL: the library is not loaded */
        {"NOAUTH Authentication required.", RCAUSE_AUTH},
        {"WRONGPASS invalid username-password pair or user is disabled.", RCAUSE_AUTH},
        {"NOPERM this user has no permissions to run the 'evalsha' command", RCAUSE_AUTH},
        {"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", RCAUSE_READONLY},
        {"ERR user_script:3: attempt to perform arithmetic on a nil value script: 1b2c, on @user_script:3.",
         RCAUSE_SCRIPT},
        {"ERR Error running script (call to f_ab): @user_script:9: user_script:9: bad argument", RCAUSE_SCRIPT},
        {"ERR user_function:2: attempt to perform arithmetic on local 'x' (a nil value) script: hg_ab_push, on "
         "@user_function:2.",
         RCAUSE_SCRIPT},
        {"WRONGTYPE Operation against a key holding the wrong kind of value", RCAUSE_OTHER},
        {"ERR unknown command 'FOO'", RCAUSE_OTHER},
        {"", RCAUSE_OTHER},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_msg(rcause_classify(t[i].err, strlen(t[i].err)) == t[i].cause, "%s -> %s, want %s", t[i].err,
                      rcause_name(rcause_classify(t[i].err, strlen(t[i].err))), rcause_name(t[i].cause));
    ck_assert_str_eq(rcause_name(RCAUSE_OOM), "oom");
    ck_assert_str_eq(rcause_name(RCAUSE_READONLY), "readonly");
    ck_assert_str_eq(rcause_name((enum rcause)99), "other");
    ck_assert(rcause_refuses(RCAUSE_OOM) && rcause_refuses(RCAUSE_BUSY));
    ck_assert(!rcause_refuses(RCAUSE_SCRIPT) && !rcause_refuses(RCAUSE_NONE));
}
END_TEST

static const char *render_metrics(void)
{
    static struct sbuf sb;
    sb_free(&sb);
    sb = (struct sbuf)SBUF_INIT;
    metrics_render(&sb, "t");
    return sb.data;
}

static long long cause_count(const char *cause)
{
    char key[128];
    snprintf(key, sizeof key, "hourglass_redis_error_causes_total{cause=\"%s\"} ", cause);
    const char *m = strstr(render_metrics(), key);
    return m ? atoll(m + strlen(key)) : -1;
}

/* An error reply is the command's: the callback gets NULL, the cause is named and counted,
 * the connection stays up, and a later success of the same script clears it. */
START_TEST(test_oom_named_counted_cleared)
{
    struct rconn *rc = start(1000);
    long long oom0 = cause_count("oom");
    uint64_t errors0 = metrics_counter_get(MC_REDIS_ERRORS);
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_NONE);
    fake_set_error("OOM command not allowed when used memory > 'maxmemory'.");
    struct result r;
    ck_assert_int_eq(eval_wait(rc, &r), -1);
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_OOM);
    ck_assert_ptr_nonnull(strstr(e.text, "maxmemory"));
    ck_assert_int_eq(rconn_process_error(&e), RCAUSE_OOM);
    ck_assert(rconn_is_up(rc)); /* Redis answers; only writes are refused */
    ck_assert_int_eq(downs, 0);
    ck_assert_int_eq(cause_count("oom"), oom0 + 1);
    ck_assert_uint_eq(metrics_counter_get(MC_REDIS_ERRORS), errors0 + 1);
    fake_set_error(NULL); /* memory freed */
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_NONE);
    ck_assert_int_eq(rconn_process_error(&e), RCAUSE_NONE);
    finish(rc);
}
END_TEST

/* Redis full when a connection is made: FUNCTION LOAD is refused (OOM), the library being
 * there already (loaded before memory ran out). The connection comes up all the same, a call is
 * refused as OOM (named, not "down"), and works once memory is freed. */
START_TEST(test_setup_on_a_full_redis_comes_up)
{
    struct rconn *rc = start_at("127.0.0.1", 1000);
    atomic_store(&F.loaded, 1);
    atomic_store(&F.full, 1);
    fake_set_error("OOM command not allowed when used memory > 'maxmemory'.");
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 2000), "a full Redis kept the connection down");
    ck_assert_int_ge(atomic_load(&F.loads), 1);
    struct result r;
    ck_assert_int_eq(eval_wait(rc, &r), -1);
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_OOM);
    atomic_store(&F.full, 0);
    fake_set_error(NULL); /* memory freed */
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    ck_assert_int_eq(r.value, 42);
    finish(rc);
}
END_TEST

START_TEST(test_script_error_is_not_down)
{
    struct rconn *rc = start(1000);
    fake_set_error("ERR user_script:3: attempt to compare nil with number script: ab, on @user_script:3.");
    struct result r;
    ck_assert_int_eq(eval_wait(rc, &r), -1);
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_SCRIPT);
    ck_assert(rconn_is_up(rc));
    ck_assert(!rcause_refuses(e.cause));
    finish(rc);
}
END_TEST

struct raw_result {
    int done, type;
    char text[128];
};

static void on_raw(redisReply *reply, void *arg)
{
    struct raw_result *r = arg;
    r->done++;
    r->type = reply ? reply->type : -1;
    snprintf(r->text, sizeof r->text, "%s", reply && reply->str ? reply->str : "");
}

static struct raw_result eval_raw(struct rconn *rc)
{
    const char *argv[4];
    size_t lens[4];
    argv[3] = "hg:{0}:jobs";
    lens[3] = strlen(argv[3]);
    struct raw_result r = {0};
    ck_assert_int_eq(rconn_eval(rc, SCRIPT_PUSH, 4, argv, lens, on_raw, &r), 0);
    ck_assert_msg(RUN_UNTIL(r.done, 3000), "no callback");
    ck_assert_int_eq(r.done, 1);
    return r;
}

/* rcluster.c's hook: MOVED/ASK/TRYAGAIN/CLUSTERDOWN reach the callback as the error replies
 * they are, and are no trouble of the connection (not recorded, not counted, still up).
 * Other errors still fail with NULL; without the opt-in a redirect fails like any error. */
START_TEST(test_cluster_errors_passed_on)
{
    struct rconn *rc = start(1000);
    uint64_t errors0 = metrics_counter_get(MC_REDIS_ERRORS);
    struct rconn_error e;
    fake_set_error("MOVED 3999 127.0.0.1:6381");
    struct raw_result r = eval_raw(rc);
    ck_assert_int_eq(r.type, -1); /* not opted in: a failure like any other */
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_OTHER);
    finish(rc);

    rc = start(1000);
    rconn_pass_cluster_errors(rc);
    errors0 = metrics_counter_get(MC_REDIS_ERRORS);
    const char *passed[] = {"MOVED 3999 127.0.0.1:6381", "ASK 105 127.0.0.1:6382",
                            "TRYAGAIN Multiple keys request during rehashing of slot",
                            "CLUSTERDOWN The cluster is down"};
    for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++) {
        fake_set_error(passed[i]);
        r = eval_raw(rc);
        ck_assert_int_eq(r.type, REDIS_REPLY_ERROR);
        ck_assert_str_eq(r.text, passed[i]);
        ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_NONE);
        ck_assert(rconn_is_up(rc));
    }
    ck_assert_uint_eq(metrics_counter_get(MC_REDIS_ERRORS), errors0);
    fake_set_error("OOM command not allowed when used memory > 'maxmemory'.");
    r = eval_raw(rc);
    ck_assert_int_eq(r.type, -1);
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_OOM);
    fake_set_error(NULL);
    r = eval_raw(rc);
    ck_assert_int_eq(r.type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(downs, 0);
    finish(rc);
}
END_TEST

/* A failover left us on a replica: READONLY drops the connection, which counts as down with
 * the cause, keeps reconnecting (ROLE at set-up keeps it down), and is back by itself once
 * the server is a master again. */
START_TEST(test_readonly_reconnects_until_master)
{
    struct rconn *rc = start(1000);
    atomic_store(&F.replica, 1);
    fake_set_error("READONLY You can't write against a read only replica.");
    struct result r;
    ck_assert_int_eq(eval_wait(rc, &r), -1);
    ck_assert_msg(RUN_UNTIL(!rconn_is_up(rc), 1000), "still up after READONLY");
    ck_assert_int_eq(downs, 1);
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_READONLY);
    int roles = atomic_load(&F.roles);
    ck_assert_msg(RUN_UNTIL(atomic_load(&F.roles) >= roles + 2, 3000), "not reconnecting");
    ck_assert(!rconn_is_up(rc)); /* ROLE said slave: set-up does not come up */
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_READONLY);
    ck_assert_int_eq(eval(rc, &r), -1); /* down: refused at once, no callback */
    atomic_store(&F.replica, 0);        /* REPLICAOF NO ONE */
    fake_set_error(NULL);
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 3000), "did not recover");
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_NONE);
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    finish(rc);
}
END_TEST

START_TEST(test_loading_reconnects)
{
    struct rconn *rc = start(1000);
    fake_set_error("LOADING Redis is loading the dataset in memory");
    struct result r;
    ck_assert_int_eq(eval_wait(rc, &r), -1);
    ck_assert_msg(RUN_UNTIL(!rconn_is_up(rc), 1000), "still up after LOADING");
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_LOADING);
    fake_set_error(NULL);
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 3000), "did not recover");
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    finish(rc);
}
END_TEST

START_TEST(test_setup_on_replica_stays_down)
{
    fake_start();
    atomic_store(&F.replica, 1);
    base = event_base_new();
    ticker = event_new(base, -1, EV_PERSIST, tick, NULL);
    struct timeval tv = {0, 2000};
    event_add(ticker, &tv);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", F.port);
    struct rconn_config cfg = {"test", addr, "", 0, 1000, 1};
    struct rconn *rc = rconn_new(base, &cfg, on_state, NULL);
    ck_assert(RUN_UNTIL(atomic_load(&F.roles) >= 2, 3000));
    ck_assert(!rconn_is_up(rc));
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_READONLY);
    atomic_store(&F.replica, 0);
    ck_assert(RUN_UNTIL(rconn_is_up(rc), 3000));
    finish(rc);
}
END_TEST

/* A Redis that stops answering: the watchdog fails the pending call after the timeout. */
START_TEST(test_timeout_watchdog)
{
    struct rconn *rc = start(200);
    atomic_store(&F.hang, 1);
    struct result r;
    int64_t t0 = now_ms();
    ck_assert_int_eq(eval(rc, &r), 0);
    ck_assert(RUN_UNTIL(r.done, 2000));
    int64_t took = now_ms() - t0;
    ck_assert_msg(!r.ok && took >= 190 && took < 2000, "failed after %lld ms", (long long)took);
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_TIMEOUT);
    ck_assert(!rconn_is_up(rc));
    atomic_store(&F.hang, 0);
    ck_assert(RUN_UNTIL(rconn_is_up(rc), 3000));
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    finish(rc);
}
END_TEST

/* ---- the fault seam ---- */

static enum rconn_fault fault_next;
static enum rconn_fault_at fault_at;
static int fault_script;

static enum rconn_fault hook(const struct rconn *rc, enum rconn_fault_at at, int script, void *arg)
{
    (void)rc;
    (void)arg;
    if (fault_next == RCONN_FAULT_NONE || at != fault_at || script != fault_script)
        return RCONN_FAULT_NONE;
    enum rconn_fault f = fault_next;
    fault_next = RCONN_FAULT_NONE; /* once */
    return f;
}

/* A connection whose next push.lua call meets `what` at `at` (the fault seam). */
static struct rconn *start_with_fault(int timeout_ms, int at, int what)
{
    rconn_set_fault_hook(hook, NULL);
    struct rconn *rc = start(timeout_ms);
    fault_at = at;
    fault_script = SCRIPT_PUSH;
    fault_next = what;
    return rc;
}

/* The connection names `cause`, comes back by itself, and a call then succeeds. */
static void assert_recovers(struct rconn *rc, enum rcause cause, struct result *r)
{
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), cause);
    ck_assert(RUN_UNTIL(rconn_is_up(rc), 3000));
    ck_assert_int_eq(eval_wait(rc, r), 0);
}

static void finish_with_fault(struct rconn *rc)
{
    finish(rc);
    rconn_set_fault_hook(NULL, NULL);
}

START_TEST(test_fault_send_fails)
{
    struct rconn *rc = start_with_fault(1000, RCONN_AT_SEND, RCONN_FAULT_FAIL);
    struct result r;
    ck_assert_int_eq(eval(rc, &r), -1);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(r.done, 0); /* -1 means the callback never runs */
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    finish_with_fault(rc);
}
END_TEST

START_TEST(test_fault_reply_dropped)
{
    struct rconn *rc = start_with_fault(1000, RCONN_AT_REPLY, RCONN_FAULT_DROP);
    struct result r[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(eval(rc, &r[i]), 0);
    ck_assert(RUN_UNTIL(r[0].done && r[1].done && r[2].done, 2000));
    for (int i = 0; i < 3; i++)
        ck_assert_msg(r[i].done == 1 && !r[i].ok, "call %d: done %d ok %d", i, r[i].done, r[i].ok);
    ck_assert_int_eq(downs, 1);
    assert_recovers(rc, RCAUSE_DOWN, &r[0]);
    ck_assert_int_eq(ups, 2);
    finish_with_fault(rc);
}
END_TEST

START_TEST(test_fault_reply_hangs_until_watchdog)
{
    struct rconn *rc = start_with_fault(150, RCONN_AT_REPLY, RCONN_FAULT_HANG);
    struct result r;
    ck_assert_int_eq(eval(rc, &r), 0);
    ck_assert(RUN_UNTIL(r.done, 2000));
    ck_assert_int_eq(r.done, 1);
    ck_assert(!r.ok);
    assert_recovers(rc, RCAUSE_TIMEOUT, &r);
    finish_with_fault(rc);
}
END_TEST

/* A hung reply outstanding when the connection is freed still gets its one callback. */
START_TEST(test_fault_hung_reply_failed_on_free)
{
    struct rconn *rc = start_with_fault(5000, RCONN_AT_REPLY, RCONN_FAULT_HANG);
    struct result r;
    ck_assert_int_eq(eval(rc, &r), 0);
    RUN_UNTIL(0, 100);
    ck_assert_int_eq(r.done, 0);
    finish(rc);
    ck_assert_int_eq(r.done, 1);
    ck_assert(!r.ok);
    rconn_set_fault_hook(NULL, NULL);
}
END_TEST

/* ---- host names: resolved off the loop, every address tried ---- */

static atomic_int resolver_delay_ms, resolver_fails, resolver_calls;
static const char *resolver_addrs[3];

/* The test's resolver: waits, then fails or answers the addresses the test chose. */
static void test_lookup(const char *host, struct resolve_result *out)
{
    (void)host;
    atomic_fetch_add(&resolver_calls, 1);
    struct timespec ts = {atomic_load(&resolver_delay_ms) / 1000, (atomic_load(&resolver_delay_ms) % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if (atomic_load(&resolver_fails)) {
        out->error = EAI_AGAIN;
        out->error_text = gai_strerror(EAI_AGAIN);
        return;
    }
    for (int i = 0; i < 3 && resolver_addrs[i]; i++)
        snprintf(out->addrs[out->count++], sizeof out->addrs[0], "%s", resolver_addrs[i]);
}

static void use_resolver(int delay_ms, int fails, const char *a0, const char *a1)
{
    atomic_store(&resolver_delay_ms, delay_ms);
    atomic_store(&resolver_fails, fails);
    atomic_store(&resolver_calls, 0);
    resolver_addrs[0] = a0;
    resolver_addrs[1] = a1;
    resolver_addrs[2] = NULL;
    resolve_set_lookup(test_lookup);
}

/* A resolver that takes 800 ms (a nameserver that does not answer) must not stop the loop:
 * before, hiredis resolved inside redisAsyncConnect and an HTTP worker answered nothing, not
 * even /health, until it returned. The 2 ms ticker keeps running meanwhile. */
START_TEST(test_slow_resolver_does_not_block_the_loop)
{
    use_resolver(800, 0, "127.0.0.1", NULL);
    struct rconn *rc = start_at("redis.test", 1000);
    int64_t t0 = now_ms();
    RUN_UNTIL(0, 500);
    ck_assert_msg(ticks >= 50, "the loop ran %d 2 ms ticks in 500 ms while resolving", ticks);
    ck_assert(!rconn_is_up(rc));
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 3000), "never came up");
    ck_assert_msg(now_ms() - t0 >= 750, "up after %lld ms: the resolver was not used", (long long)(now_ms() - t0));
    ck_assert_int_eq(atomic_load(&resolver_calls), 1);
    struct result r;
    ck_assert_int_eq(eval_wait(rc, &r), 0);
    finish(rc);
    resolve_set_lookup(NULL);
}
END_TEST

/* A name with several addresses ("localhost": ::1 and 127.0.0.1): one that refuses is
 * followed by the next at once, as hiredis itself did, rather than resolving forever to the
 * same first address. */
START_TEST(test_every_address_is_tried)
{
    use_resolver(0, 0, "127.0.0.2", "127.0.0.1"); /* the fake listens on 127.0.0.1 only */
    struct rconn *rc = start_at("redis.test", 1000);
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 3000), "never came up");
    ck_assert_int_eq(atomic_load(&resolver_calls), 1);
    ck_assert_int_eq(ups, 1);
    finish(rc);
    resolve_set_lookup(NULL);
}
END_TEST

/* A name that does not resolve: down, with a cause that says so; once it resolves, up by itself,
 * and a drop after that resolves anew (a failover that moves the name is followed). */
START_TEST(test_unresolvable_name_is_named_and_retried)
{
    use_resolver(0, 1, NULL, NULL);
    struct rconn *rc = start_at("redis.test", 1000);
    RUN_UNTIL(atomic_load(&resolver_calls) >= 2, 2000);
    ck_assert(!rconn_is_up(rc));
    struct rconn_error e;
    ck_assert_int_eq(rconn_last_error(rc, &e), RCAUSE_DOWN);
    ck_assert_msg(strstr(e.text, "cannot resolve redis.test") != NULL, "cause: %s", e.text);
    resolver_addrs[0] = "127.0.0.1";
    atomic_store(&resolver_fails, 0);
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 5000), "never came up once the name resolved");
    int calls = atomic_load(&resolver_calls);
    atomic_store(&F.hang, 1); /* a call times out: the connection drops */
    struct result r;
    ck_assert_int_eq(eval(rc, &r), 0);
    ck_assert(RUN_UNTIL(r.done, 3000));
    atomic_store(&F.hang, 0);
    ck_assert_msg(RUN_UNTIL(rconn_is_up(rc), 5000), "never came back after the drop");
    ck_assert_int_eq(atomic_load(&resolver_calls), calls + 1);
    finish(rc);
    resolve_set_lookup(NULL);
}
END_TEST

/* Freed while its lookup is still in getaddrinfo: nothing runs later, nothing leaks (ASan). */
START_TEST(test_freed_while_resolving)
{
    use_resolver(300, 0, "127.0.0.1", NULL);
    struct rconn *rc = start_at("redis.test", 1000);
    RUN_UNTIL(atomic_load(&resolver_calls) == 1, 1000);
    finish(rc);
    struct timespec ts = {0, 500 * 1000000L}; /* the lookup thread finishes and frees its part */
    nanosleep(&ts, NULL);
    resolve_set_lookup(NULL);
}
END_TEST

/* rcodec_format_command (rcodec.h), which formats script calls, makes the bytes hiredis's own
 * formatter makes: argument lengths across every digit count, empty arguments, bytes RESP
 * must carry as they are (NUL, CR, LF, '$', '*'), and argument counts of one and two digits. */
START_TEST(test_rcodec_format_command_is_hiredis_format)
{
    static char big[12345];
    memset(big, 'x', sizeof big);
    static const char binary[] = {'a', '\0', '\r', '\n', '$', '*', '\r', 'z'};
    const char *argv[40];
    size_t lens[40];
    const size_t sizes[] = {0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, sizeof big};
    for (int argc = 1; argc <= 40; argc += 13) {
        for (int i = 0; i < argc; i++) {
            if (i % 3 == 2) {
                argv[i] = binary;
                lens[i] = sizeof binary;
            } else {
                argv[i] = big;
                lens[i] = sizes[(size_t)(i + argc) % (sizeof sizes / sizeof sizes[0])];
            }
        }
        char *ours = NULL, *theirs = NULL;
        long n = rcodec_format_command(&ours, argc, argv, lens);
        int m = redisFormatCommandArgv(&theirs, argc, argv, lens);
        ck_assert_int_gt(m, 0);
        ck_assert_int_eq(n, m);
        ck_assert_msg(memcmp(ours, theirs, (size_t)m) == 0, "argc %d: the encodings differ", argc);
        ck_assert_int_eq(ours[n], '\0');
        free(ours);
        redisFreeCommand(theirs);
    }
}
END_TEST

#endif /* RCONN_OLD_API */

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the daemon does: a dropped connection is not a crash */
    evthread_use_pthreads();  /* as the daemon does: name lookups wake the loop from their thread */
    log_level_set(LL_ERROR);  /* the reconnects these tests provoke are expected: keep the output readable */
    if (scripts_init() < 0)
        return EXIT_FAILURE;
    Suite *s = suite_create("rconn");
    TCase *tc = tcase_create("state");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_connect_setup_up);
    tcase_add_test(tc, test_noscript_every_flush_reloads_and_retries);
    tcase_add_test(tc, test_noscript_under_pipelined_traffic);
#ifndef RCONN_OLD_API
    tcase_add_test(tc, test_classify);
    tcase_add_test(tc, test_oom_named_counted_cleared);
    tcase_add_test(tc, test_setup_on_a_full_redis_comes_up);
    tcase_add_test(tc, test_script_error_is_not_down);
    tcase_add_test(tc, test_cluster_errors_passed_on);
    tcase_add_test(tc, test_readonly_reconnects_until_master);
    tcase_add_test(tc, test_loading_reconnects);
    tcase_add_test(tc, test_setup_on_replica_stays_down);
    tcase_add_test(tc, test_timeout_watchdog);
    tcase_add_test(tc, test_fault_send_fails);
    tcase_add_test(tc, test_fault_reply_dropped);
    tcase_add_test(tc, test_fault_reply_hangs_until_watchdog);
    tcase_add_test(tc, test_fault_hung_reply_failed_on_free);
    tcase_add_test(tc, test_slow_resolver_does_not_block_the_loop);
    tcase_add_test(tc, test_every_address_is_tried);
    tcase_add_test(tc, test_unresolvable_name_is_named_and_retried);
    tcase_add_test(tc, test_freed_while_resolving);
    tcase_add_test(tc, test_rcodec_format_command_is_hiredis_format);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
