/* test_rcluster.c — the parts of src/redis/rcluster.h that need no server: which slot a command
 * routes by, how far a command follows redirects and retries, seed lists, and refusing
 * commands before a map has arrived. The rest is proven against a real cluster by
 * tests/integration/test_rcluster_conn.py. */
#include "core/cluster.h"
#include "base/log.h"
#include "refused_port.h"
#include "redis/rcluster.h"
#include "redis/rlink.h"
#include "redis/scripts.h"

#include <check.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int slot_of(int argc, const char **argv)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return rcluster_command_slot(argc, argv, lens);
}

#define SLOT(...) slot_of(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *), (const char *[]){__VA_ARGS__})

START_TEST(test_command_slot)
{
    int jobs = cluster_keyslot("hg:{3}:jobs", 11);
    ck_assert_int_eq(SLOT("GET", "hg:{3}:jobs"), jobs);
    ck_assert_int_eq(SLOT("SET", "hg:{3}:jobs", "x"), jobs);
    ck_assert_int_eq(SLOT("INCR", "{3}"), cluster_keyslot("3", 1));
    /* scripts route by their first KEY, not by the sha, the function or numkeys */
    ck_assert_int_eq(SLOT("EVALSHA", "0123456789012345678901234567890123456789", "1", "hg:{3}:jobs", "a"), jobs);
    ck_assert_int_eq(SLOT("FCALL", "hg_0123456789ab_push", "1", "hg:{3}:jobs", "a"), jobs); /* the daemon's */
    ck_assert_int_eq(SLOT("evalsha", "0123", "2", "hg:{3}:jobs", "hg:{3}:delay"), jobs);
    ck_assert_int_eq(SLOT("EVAL", "return 1", "1", "hg:{3}:jobs"), jobs);
    ck_assert_int_eq(SLOT("FCALL", "f", "1", "hg:{3}:jobs"), jobs);
    /* keyless: any master */
    ck_assert_int_eq(SLOT("EVAL", "return 1", "0"), -1);
    ck_assert_int_eq(SLOT("EVAL", "return 1", "0", "arg"), -1);
    ck_assert_int_eq(SLOT("EVALSHA", "0123", "x", "hg:{3}:jobs"), -1);
    ck_assert_int_eq(SLOT("EVALSHA", "0123", "1"), -1);
    ck_assert_int_eq(SLOT("PING"), -1);
    ck_assert_int_eq(SLOT("INFO"), -1);
    ck_assert_int_eq(rcluster_command_slot(0, NULL, NULL), -1);
}
END_TEST

START_TEST(test_redirects_are_bounded)
{
    int delay = -1;
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_OTHER, 0, 0, 0, 2000, &delay), RCLUSTER_DELIVER);
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_OTHER, 99, 99, 99999, 2000, &delay), RCLUSTER_DELIVER);
    for (int r = 0; r < RCLUSTER_MAX_REDIRECTS; r++) {
        ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_MOVED, r, 0, 0, 2000, &delay), RCLUSTER_FOLLOW);
        ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_ASK, r, 0, 0, 2000, &delay), RCLUSTER_FOLLOW);
    }
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_MOVED, RCLUSTER_MAX_REDIRECTS, 0, 0, 2000, &delay),
                     RCLUSTER_GIVE_UP);
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_ASK, RCLUSTER_MAX_REDIRECTS, 0, 0, 2000, &delay), RCLUSTER_GIVE_UP);
    ck_assert_int_eq(delay, -1); /* untouched unless RETRY */
}
END_TEST

/* A command answered TRYAGAIN (or CLUSTERDOWN) for ever is retried with a growing delay and
 * given up before the timeout would pass: the total never exceeds it. */
START_TEST(test_retries_stay_within_the_timeout)
{
    static const int timeouts[] = {50, 200, 1000, 2000, 60000};
    for (size_t t = 0; t < sizeof timeouts / sizeof timeouts[0]; t++) {
        for (int kind = CLUSTER_ERR_TRYAGAIN; kind <= CLUSTER_ERR_NONLOCAL; kind++) {
            int64_t elapsed = 0;
            int retries = 0, delay = 0, last = 0;
            while (rcluster_next_step((enum cluster_error_kind)kind, 0, retries, elapsed, timeouts[t], &delay) ==
                   RCLUSTER_RETRY) {
                ck_assert_int_ge(delay, RCLUSTER_RETRY_FIRST_MS);
                ck_assert_int_le(delay, RCLUSTER_RETRY_MAX_MS);
                ck_assert_int_ge(delay, last); /* backs off, never speeds up */
                last = delay;
                elapsed += delay + 1; /* and each answer took a millisecond */
                retries++;
                ck_assert_int_lt(retries, 1000);
            }
            ck_assert_int_le(elapsed, timeouts[t]);
            if (timeouts[t] >= 1000)
                ck_assert_int_ge(retries, 5);
        }
    }
    int delay = 0;
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_TRYAGAIN, 0, 0, 0, 2000, &delay), RCLUSTER_RETRY);
    ck_assert_int_eq(delay, RCLUSTER_RETRY_FIRST_MS);
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_TRYAGAIN, 0, 40, 0, 2000, &delay), RCLUSTER_RETRY);
    ck_assert_int_eq(delay, RCLUSTER_RETRY_MAX_MS);
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_DOWN, 0, 0, 1995, 2000, &delay), RCLUSTER_GIVE_UP);
    /* a guarded script refused while its slot migrates: retried exactly like TRYAGAIN */
    for (int retries = 0; retries < 8; retries++) {
        int d1 = -1, d2 = -1;
        ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_NONLOCAL, 0, retries, 100, 2000, &d1), RCLUSTER_RETRY);
        ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_TRYAGAIN, 0, retries, 100, 2000, &d2), RCLUSTER_RETRY);
        ck_assert_int_eq(d1, d2);
    }
    ck_assert_int_eq(rcluster_next_step(CLUSTER_ERR_NONLOCAL, 0, 0, 1995, 2000, &delay), RCLUSTER_GIVE_UP);
}
END_TEST

static int called;

static void on_reply(redisReply *reply, void *arg)
{
    (void)reply;
    (void)arg;
    called++;
}

START_TEST(test_bad_seeds_refused)
{
    struct event_base *base = event_base_new();
    const char *bad[] = {"", " , ", "127.0.0.1", "127.0.0.1:0", "unix:/tmp/x.sock", "127.0.0.1:6379,nohost"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct rcluster_config cfg = {"t", bad[i], "", 1000, 0};
        ck_assert_msg(rcluster_new(base, &cfg) == NULL, "accepted seeds '%s'", bad[i]);
    }
    event_base_free(base);
}
END_TEST

/* No map yet (every seed refuses): commands are refused at once, their callbacks never run;
 * the seeds are tried in turn; free is clean. */
START_TEST(test_no_map_refuses_fast)
{
    int fd1, fd2;
    char seeds[64];
    snprintf(seeds, sizeof seeds, " 127.0.0.1:%d , 127.0.0.1:%d ", refused_port(&fd1), refused_port(&fd2));
    struct event_base *base = event_base_new();
    struct rcluster_config cfg = {"t", seeds, "", 200, 0};
    struct rcluster *rc = rcluster_new(base, &cfg);
    ck_assert_ptr_nonnull(rc);
    struct timeval tv = {0, 700 * 1000};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
    ck_assert(!rcluster_ready(rc));
    const char *argv[] = {"GET", "k"};
    const size_t lens[] = {3, 1};
    ck_assert_int_eq(rcluster_command(rc, -1, on_reply, NULL, 2, argv, lens), -1);
    ck_assert_int_eq(rcluster_command(rc, 5, on_reply, NULL, 2, argv, lens), -1);
    ck_assert_int_eq(rcluster_command(rc, CLUSTER_SLOTS, on_reply, NULL, 2, argv, lens), -1);
    ck_assert_int_eq(rcluster_command_all(rc, NULL, NULL, 2, argv, lens), -1);
    struct rcluster_stats st;
    rcluster_stats(rc, &st);
    ck_assert_int_eq(st.nmasters, 0);
    ck_assert_uint_ge(st.map_errors, 2); /* both seeds tried, each given up after the timeout */
    ck_assert_int_eq(rcluster_nodes(rc, NULL, 0), 0);
    rcluster_free(rc);
    ck_assert_int_eq(called, 0);
    event_base_free(base);
    close(fd1);
    close(fd2);
}
END_TEST

static int states, last_state = -1;

static void on_link_state(int up, void *arg)
{
    (void)arg;
    states++;
    last_state = up;
}

/* The facade (rlink.h) in cluster mode with no map: not usable, not ready, "down" with the
 * reason, commands and scripts refused at once (callbacks never run), no state change told;
 * in plain mode against a refused port the same, through rconn. */
START_TEST(test_rlink_without_a_server)
{
    int fd1, fd2, fd3;
    char seeds[64], one[32];
    snprintf(seeds, sizeof seeds, "127.0.0.1:%d,127.0.0.1:%d", refused_port(&fd1), refused_port(&fd2));
    snprintf(one, sizeof one, "127.0.0.1:%d", refused_port(&fd3));
    ck_assert_int_eq(scripts_init(), 0);
    struct event_base *base = event_base_new();
    for (int cluster = 0; cluster <= 1; cluster++) {
        struct rlink_config cfg = {"t", cluster ? seeds : one, "", 0, 200, 1, cluster};
        struct rlink *l = rlink_new(base, &cfg, on_link_state, NULL);
        ck_assert_ptr_nonnull(l);
        ck_assert(cluster ? l->cluster != NULL && l->plain == NULL : l->plain != NULL && l->cluster == NULL);
        struct timeval tv = {0, 500 * 1000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
        ck_assert(!rlink_usable(l));
        ck_assert(!rlink_ready(l));
        struct rconn_error e;
        ck_assert_int_eq(rlink_last_error(l, &e), RCAUSE_DOWN);
        if (cluster)
            ck_assert_str_eq(e.text, "no Redis Cluster map yet");
        const char *argv[5] = {"HGET", "hg:{3.2520}:count", "ready:t"};
        size_t lens[5] = {4, 17, 7};
        ck_assert_int_eq(rlink_command(l, on_reply, NULL, 3, argv, lens), -1);
        argv[3] = "hg:{3.2520}:jobs";
        lens[3] = 16;
        argv[4] = "x";
        lens[4] = 1;
        ck_assert_int_eq(rlink_eval(l, SCRIPT_INSPECT, 5, argv, lens, on_reply, NULL), -1);
        rlink_free(l);
    }
    rlink_free(NULL);
    ck_assert_int_eq(called, 0);
    ck_assert_int_eq(states, 0); /* never up, so nothing to tell */
    ck_assert_int_eq(last_state, -1);
    event_base_free(base);
    close(fd1);
    close(fd2);
    close(fd3);
}
END_TEST

int main(void)
{
    log_level_set(LL_ERROR); /* the refused connects are the point: keep the output readable */
    Suite *s = suite_create("rcluster");
    TCase *tc = tcase_create("pure");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_command_slot);
    tcase_add_test(tc, test_redirects_are_bounded);
    tcase_add_test(tc, test_retries_stay_within_the_timeout);
    tcase_add_test(tc, test_bad_seeds_refused);
    tcase_add_test(tc, test_no_map_refuses_fast);
    tcase_add_test(tc, test_rlink_without_a_server);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
