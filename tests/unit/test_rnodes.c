/* test_rnodes.c — src/redis/rnodes.h: the links' snapshots summed per node; counters that stay
 * monotonic when a link lets a node go or comes back to it; the map's view taken from the
 * freshest snapshot; the Prometheus series, and none before any post (a single Redis). The
 * table is process-wide: each test uses addresses of its own, so the tests also pass in one
 * process (CK_FORK=no). */
#include "redis/rnodes.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct rcluster_node_status node(const char *addr, int up, int master, int nslots, uint64_t sent)
{
    struct rcluster_node_status n;
    memset(&n, 0, sizeof n);
    snprintf(n.addr, sizeof n.addr, "%s", addr);
    n.up = up;
    n.master = master;
    n.nslots = nslots;
    n.nreplicas = 1;
    n.sent = sent;
    n.answered = sent;
    n.latency_us = sent * 100;
    return n;
}

/* The sum for addr (fails the test when it is not listed). */
static struct rnodes_sum find(const char *addr)
{
    static struct rnodes_sum all[RNODES_MAX];
    int n = rnodes_sum(all, RNODES_MAX, NULL);
    for (int i = 0; i < n && i < RNODES_MAX; i++)
        if (strcmp(all[i].node.addr, addr) == 0)
            return all[i];
    ck_abort_msg("%s is not listed", addr);
    return all[0];
}

static const struct rcluster_stats no_stats;

START_TEST(test_nothing_rendered_before_a_post)
{
    struct sbuf sb = SBUF_INIT;
    int slot = rnodes_join("idle");
    ck_assert_int_ge(slot, 0);
    rnodes_render(&sb);
    ck_assert_msg(sb.len == 0, "rendered: %s", sb.data);
    rnodes_leave(slot);
    rnodes_render(&sb);
    ck_assert_msg(sb.len == 0, "rendered: %s", sb.data);
    sb_free(&sb);
}
END_TEST

START_TEST(test_links_summed)
{
    int a = rnodes_join("http-0"), b = rnodes_join("keeper");
    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(b, 0);
    ck_assert_int_ne(a, b);
    struct rcluster_node_status na[2] = {node("10.1.0.1:7000", 1, 1, 5461, 10), node("10.1.0.2:7000", 1, 1, 5462, 4)};
    struct rcluster_node_status nb[1] = {node("10.1.0.1:7000", 0, 1, 5461, 5)};
    nb[0].failed = 2;
    nb[0].moved = 3;
    nb[0].asked = 1;
    nb[0].retried = 4;
    rnodes_post(a, na, 2, &no_stats);
    rnodes_post(b, nb, 1, &no_stats);
    struct rnodes_sum s = find("10.1.0.1:7000");
    ck_assert_int_eq(s.links, 2);
    ck_assert_int_eq(s.node.up, 1); /* the keeper's connection to it is down */
    ck_assert_int_eq(s.node.master, 1);
    ck_assert_int_eq(s.node.nslots, 5461);
    ck_assert_uint_eq(s.node.sent, 15);
    ck_assert_uint_eq(s.node.answered, 15);
    ck_assert_uint_eq(s.node.failed, 2);
    ck_assert_uint_eq(s.node.moved, 3);
    ck_assert_uint_eq(s.node.asked, 1);
    ck_assert_uint_eq(s.node.retried, 4);
    ck_assert_uint_eq(s.node.latency_us, 1500);
    s = find("10.1.0.2:7000");
    ck_assert_int_eq(s.links, 1);
    ck_assert_uint_eq(s.node.sent, 4);
    rnodes_leave(a);
    rnodes_leave(b);
}
END_TEST

START_TEST(test_monotonic_when_a_node_is_let_go)
{
    int a = rnodes_join("http-1");
    struct rcluster_node_status n = node("10.2.0.1:7000", 1, 1, 100, 10);
    rnodes_post(a, &n, 1, &no_stats);
    ck_assert_uint_eq(find("10.2.0.1:7000").node.sent, 10);
    rnodes_post(a, NULL, 0, &no_stats); /* the link let it go (a failed master) */
    struct rnodes_sum s = find("10.2.0.1:7000");
    ck_assert_uint_eq(s.node.sent, 10);
    ck_assert_int_eq(s.links, 0);
    ck_assert_int_eq(s.node.up, 0);
    n = node("10.2.0.1:7000", 1, 1, 100, 3); /* back, counting from 0 again */
    rnodes_post(a, &n, 1, &no_stats);
    ck_assert_uint_eq(find("10.2.0.1:7000").node.sent, 13);
    n = node("10.2.0.1:7000", 1, 1, 100, 1); /* let go and back between two posts */
    rnodes_post(a, &n, 1, &no_stats);
    ck_assert_uint_eq(find("10.2.0.1:7000").node.sent, 14);
    rnodes_leave(a); /* the thread ended: what it counted stays */
    s = find("10.2.0.1:7000");
    ck_assert_uint_eq(s.node.sent, 14);
    ck_assert_uint_eq(s.node.latency_us, 1400);
}
END_TEST

START_TEST(test_freshest_view_of_the_map)
{
    int a = rnodes_join("http-2"), b = rnodes_join("deliver");
    struct rcluster_node_status old = node("10.3.0.1:7000", 1, 1, 5461, 1);
    struct rcluster_node_status heir = node("10.3.0.1:7000", 1, 0, 0, 1);
    struct rcluster_stats sa = {.map_reads = 2, .map_changes = 1, .nmasters = 3, .covered = 16384};
    struct rcluster_stats sb = {.map_reads = 5, .map_errors = 1, .gave_up = 2, .nmasters = 2, .covered = 10923};
    rnodes_post(a, &old, 1, &sa);
    rnodes_post(b, &heir, 1, &sb); /* b read a newer map: the node is no master any more */
    struct rnodes_sum s = find("10.3.0.1:7000");
    ck_assert_int_eq(s.node.master, 0);
    ck_assert_int_eq(s.node.nslots, 0);
    struct rcluster_stats before, after;
    struct rnodes_sum all[RNODES_MAX];
    rnodes_sum(all, RNODES_MAX, &before);
    ck_assert_int_eq(before.nmasters, 2);
    ck_assert_int_eq(before.covered, 10923);
    rnodes_post(a, &old, 1, &sa); /* a posts again, later: its view is the freshest now */
    ck_assert_int_eq(find("10.3.0.1:7000").node.master, 1);
    rnodes_leave(b);
    rnodes_sum(all, RNODES_MAX, &after);
    ck_assert_uint_eq(after.map_reads, before.map_reads); /* b's counts are kept */
    ck_assert_uint_eq(after.gave_up, before.gave_up);
    ck_assert_int_eq(after.nmasters, 3);
    rnodes_leave(a);
}
END_TEST

START_TEST(test_series_rendered)
{
    int a = rnodes_join("http-3");
    struct rcluster_node_status n = node("10.4.0.1:7001", 1, 1, 5461, 7);
    n.failed = 2;
    n.moved = 1;
    rnodes_post(a, &n, 1, &no_stats);
    struct sbuf sb = SBUF_INIT;
    rnodes_render(&sb);
    ck_assert_ptr_nonnull(sb.data);
    static const char *const want[] = {
        "# TYPE hourglass_redis_node_up gauge\n",
        "hourglass_redis_node_up{node=\"10.4.0.1:7001\"} 1\n",
        "hourglass_redis_node_master{node=\"10.4.0.1:7001\"} 1\n",
        "hourglass_redis_node_slots{node=\"10.4.0.1:7001\"} 5461\n",
        "hourglass_redis_node_commands_total{node=\"10.4.0.1:7001\"} 7\n",
        "hourglass_redis_node_errors_total{node=\"10.4.0.1:7001\"} 2\n",
        "hourglass_redis_node_redirects_total{node=\"10.4.0.1:7001\",kind=\"moved\"} 1\n",
        "hourglass_redis_node_redirects_total{node=\"10.4.0.1:7001\",kind=\"ask\"} 0\n",
        "# TYPE hourglass_redis_node_command_seconds summary\n",
        "hourglass_redis_node_command_seconds_sum{node=\"10.4.0.1:7001\"} 0.000700\n",
        "hourglass_redis_node_command_seconds_count{node=\"10.4.0.1:7001\"} 7\n",
        "# TYPE hourglass_redis_cluster_masters gauge\n",
        "# TYPE hourglass_redis_cluster_map_reads_total counter\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(sb.data, want[i]) != NULL, "missing %s in:\n%s", want[i], sb.data);
    sb_free(&sb);
    rnodes_leave(a);
}
END_TEST

/* Posts and sums from several threads at once (for TSan/ASan runs: the mutex is the contract). */
static void *poster(void *arg)
{
    int slot = rnodes_join("t");
    const char *addr = arg;
    for (uint64_t i = 1; i <= 2000; i++) {
        struct rcluster_node_status n = node(addr, 1, 1, 1, i);
        rnodes_post(slot, &n, 1, &no_stats);
        if (i % 100 == 0) {
            struct rnodes_sum all[8];
            rnodes_sum(all, 8, NULL);
        }
    }
    rnodes_leave(slot);
    return NULL;
}

START_TEST(test_threads)
{
    static char addr[] = "10.5.0.1:7000";
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, poster, addr), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    struct rnodes_sum s = find("10.5.0.1:7000");
    ck_assert_uint_eq(s.node.sent, 4 * 2000);
    ck_assert_int_eq(s.links, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rnodes");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_nothing_rendered_before_a_post); /* first: the table is empty then */
    tcase_add_test(tc, test_links_summed);
    tcase_add_test(tc, test_monotonic_when_a_node_is_let_go);
    tcase_add_test(tc, test_freshest_view_of_the_map);
    tcase_add_test(tc, test_series_rendered);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
