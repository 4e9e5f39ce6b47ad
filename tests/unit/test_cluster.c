/* test_cluster.c — src/core/cluster.h: key slots, the slot map, MOVED/ASK, shard tags.
 *
 * The CLUSTER SLOTS replies and redirections below are real: recorded from a 3-master +
 * 3-replica Redis 7.0.15 cluster on loopback (tests/integration/rcluster_record.py prints
 * them) and turned back into redisReply trees by hiredis's own reader, as the daemon will
 * get them. The cluster's masters were M0 = :22659 (slots 0-5460, replica :28161), M1 = :30333
 * (5461-10922, replica :23526) and M2 = :24924 (10923-16383, replica :25765). CLUSTER SLOTS
 * with slot 105 half-way through a migration was byte for byte REC_INITIAL (a migration shows
 * only as ASK), so it is not repeated. Hand-written replies cover what a healthy cluster never
 * says (wrong types, ranges, ports). */
#include "core/cluster.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M0            "127.0.0.1:22659"
#define M0_ID         "bb5aa62f14d6fe0f1032c508a2c9687b4e01562a"
#define M0_REPLICA    "127.0.0.1:28161"
#define M1            "127.0.0.1:30333"
#define M1_REPLICA    "127.0.0.1:23526"
#define M1_REPLICA_ID "2b818eca075d93bf7ba57b1a6508832bc60e3f49"
#define M2            "127.0.0.1:24924"
#define M2_REPLICA    "127.0.0.1:25765"

/* recorded: masters ['127.0.0.1:22659', '127.0.0.1:30333', '127.0.0.1:24924']; killed 127.0.0.1:30333
 * (357c28f4bcb0dff7230361f9eecbc7560a350733), 127.0.0.1:23526 (2b818eca075d93bf7ba57b1a6508832bc60e3f49) took over
 * in 2.8 s */
static const char REC_INITIAL[] = "*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:22659\r\n"
                                  "$40\r\nbb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n*0\r\n*4\r\n"
                                  "$9\r\n127.0.0.1\r\n:28161\r\n$40\r\n922ff5014239bb515b46961a1ca99cc196cdbb1b\r\n"
                                  "*0\r\n*4\r\n:5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:30333\r\n"
                                  "$40\r\n357c28f4bcb0dff7230361f9eecbc7560a350733\r\n*0\r\n*4\r\n"
                                  "$9\r\n127.0.0.1\r\n:23526\r\n$40\r\n2b818eca075d93bf7ba57b1a6508832bc60e3f49\r\n"
                                  "*0\r\n*4\r\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:24924\r\n"
                                  "$40\r\n5700df6e33f85fd36b8eb6c4b0da7676443f9d8a\r\n*0\r\n*4\r\n"
                                  "$9\r\n127.0.0.1\r\n:25765\r\n$40\r\n965ab1825697f5c7e09738a49d57da8f86edfa22\r\n"
                                  "*0\r\n";

static const char REC_MOVED[] = "-MOVED 12182 127.0.0.1:24924\r\n";

static const char REC_SLOTS_UNKNOWN_ENDPOINT[] =
    "*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$-1\r\n:22659\r\n$40\r\nbb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n"
    "*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$-1\r\n:28161\r\n$40\r\n"
    "922ff5014239bb515b46961a1ca99cc196cdbb1b\r\n*2\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n*4\r\n:5461\r\n:10922\r\n*4\r\n$-1\r\n:30333\r\n"
    "$40\r\n357c28f4bcb0dff7230361f9eecbc7560a350733\r\n*2\r\n$2\r\n"
    "ip\r\n$9\r\n127.0.0.1\r\n*4\r\n$-1\r\n:23526\r\n$40\r\n2b818eca075d93bf7ba57b1a6508832bc60e3f49\r\n"
    "*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:10923\r\n:16383\r\n"
    "*4\r\n$-1\r\n:24924\r\n$40\r\n5700df6e33f85fd36b8eb6c4b0da7676443f9d8a\r\n"
    "*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$-1\r\n:25765\r\n$40\r\n"
    "965ab1825697f5c7e09738a49d57da8f86edfa22\r\n*2\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n";

static const char REC_MOVED_UNKNOWN_ENDPOINT[] = "-MOVED 12182 :24924\r\n";

static const char REC_SLOTS_HOSTNAME_UNSET[] =
    "*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$1\r\n?\r\n:22659\r\n$40\r\n"
    "bb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n*2\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:28161\r\n$40\r\n922ff5014239bb515b46961a1ca99cc196cdbb1b\r\n"
    "*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:5461\r\n:10922\r\n"
    "*4\r\n$1\r\n?\r\n:30333\r\n$40\r\n357c28f4bcb0dff7230361f9eecbc7560a350733\r\n"
    "*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:23526\r\n"
    "$40\r\n2b818eca075d93bf7ba57b1a6508832bc60e3f49\r\n*2\r\n$2\r\n"
    "ip\r\n$9\r\n127.0.0.1\r\n*4\r\n:10923\r\n:16383\r\n*4\r\n$1\r\n"
    "?\r\n:24924\r\n$40\r\n5700df6e33f85fd36b8eb6c4b0da7676443f9d8a\r\n"
    "*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:25765\r\n"
    "$40\r\n965ab1825697f5c7e09738a49d57da8f86edfa22\r\n*2\r\n$2\r\n"
    "ip\r\n$9\r\n127.0.0.1\r\n";

static const char REC_MOVED_HOSTNAME_UNSET[] = "-MOVED 12182 ?:24924\r\n";

static const char REC_ASK[] = "-ASK 105 127.0.0.1:30333\r\n";

static const char REC_SPLIT[] = "*5\r\n*4\r\n:0\r\n:99\r\n*4\r\n$9\r\n127.0.0.1\r\n:22659\r\n$40\r\n"
                                "bb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n*0\r\n*4\r\n$9\r\n"
                                "127.0.0.1\r\n:28161\r\n$40\r\n922ff5014239bb515b46961a1ca99cc196cdbb1b\r\n"
                                "*0\r\n*4\r\n:100\r\n:109\r\n*4\r\n$9\r\n127.0.0.1\r\n:30333\r\n"
                                "$40\r\n357c28f4bcb0dff7230361f9eecbc7560a350733\r\n*0\r\n*4\r\n"
                                "$9\r\n127.0.0.1\r\n:23526\r\n$40\r\n2b818eca075d93bf7ba57b1a6508832bc60e3f49\r\n"
                                "*0\r\n*4\r\n:110\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:22659\r\n"
                                "$40\r\nbb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n*0\r\n*4\r\n"
                                "$9\r\n127.0.0.1\r\n:28161\r\n$40\r\n922ff5014239bb515b46961a1ca99cc196cdbb1b\r\n"
                                "*0\r\n*4\r\n:5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:30333\r\n"
                                "$40\r\n357c28f4bcb0dff7230361f9eecbc7560a350733\r\n*0\r\n*4\r\n"
                                "$9\r\n127.0.0.1\r\n:23526\r\n$40\r\n2b818eca075d93bf7ba57b1a6508832bc60e3f49\r\n"
                                "*0\r\n*4\r\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:24924\r\n"
                                "$40\r\n5700df6e33f85fd36b8eb6c4b0da7676443f9d8a\r\n*0\r\n*4\r\n"
                                "$9\r\n127.0.0.1\r\n:25765\r\n$40\r\n965ab1825697f5c7e09738a49d57da8f86edfa22\r\n"
                                "*0\r\n";

static const char REC_FAILOVER[] =
    "*5\r\n*4\r\n:0\r\n:99\r\n*4\r\n$9\r\n127.0.0.1\r\n:22659\r\n$40\r\n"
    "bb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n*0\r\n*4\r\n$9\r\n"
    "127.0.0.1\r\n:28161\r\n$40\r\n922ff5014239bb515b46961a1ca99cc196cdbb1b\r\n"
    "*0\r\n*3\r\n:100\r\n:109\r\n*4\r\n$9\r\n127.0.0.1\r\n:23526\r\n"
    "$40\r\n2b818eca075d93bf7ba57b1a6508832bc60e3f49\r\n*0\r\n*4\r\n"
    ":110\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:22659\r\n$40\r\nbb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n"
    "*0\r\n*4\r\n$9\r\n127.0.0.1\r\n:28161\r\n$40\r\n922ff5014239bb515b46961a1ca99cc196cdbb1b\r\n"
    "*0\r\n*3\r\n:5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:23526\r\n"
    "$40\r\n2b818eca075d93bf7ba57b1a6508832bc60e3f49\r\n*0\r\n*4\r\n"
    ":10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:24924\r\n$40\r\n"
    "5700df6e33f85fd36b8eb6c4b0da7676443f9d8a\r\n*0\r\n*4\r\n$9\r\n"
    "127.0.0.1\r\n:25765\r\n$40\r\n965ab1825697f5c7e09738a49d57da8f86edfa22\r\n"
    "*0\r\n";

/* ---- helpers ---- */

/* The reply hiredis's reader makes of these bytes; NULL when they are not one whole reply. */
static redisReply *reply_of(const char *resp, size_t len)
{
    redisReader *r = redisReaderCreate();
    ck_assert_ptr_nonnull(r);
    void *reply = NULL;
    if (redisReaderFeed(r, resp, len) != REDIS_OK || redisReaderGetReply(r, &reply) != REDIS_OK)
        reply = NULL;
    redisReaderFree(r);
    return reply;
}

/* Parse RESP text; the map, or NULL with the message in err. */
static struct cluster_map *map_of(const char *resp, const char *asked, char *err, size_t errlen)
{
    redisReply *reply = reply_of(resp, strlen(resp));
    struct cluster_map *m = cluster_map_parse(reply, asked, err, errlen);
    if (reply != NULL)
        freeReplyObject(reply);
    return m;
}

static struct cluster_map *map_ok(const char *resp)
{
    char err[CLUSTER_ERR_MAX];
    struct cluster_map *m = map_of(resp, "127.0.0.1", err, sizeof err);
    ck_assert_msg(m != NULL, "refused: %s", err);
    return m;
}

/* Assert that resp is refused with a message containing `words`. */
static void refused(const char *resp, const char *words)
{
    char err[CLUSTER_ERR_MAX] = "";
    struct cluster_map *m = map_of(resp, "127.0.0.1", err, sizeof err);
    ck_assert_msg(m == NULL, "accepted: %s", resp);
    ck_assert_msg(strstr(err, words) != NULL, "message \"%s\" lacks \"%s\" (reply %s)", err, words, resp);
}

static int master_named(const struct cluster_map *m, const char *addr)
{
    for (int i = 0; i < m->nmasters; i++)
        if (strcmp(m->masters[i].node.addr, addr) == 0)
            return i;
    return -1;
}

/* What must hold of any map the parser hands out. Counted first and asserted once: each
 * ck_assert costs Check a write, and this runs over 16384 slots thousands of times. */
static void check_invariants(const struct cluster_map *m)
{
    int covered = 0, bad_owner = 0, bad_range = 0, from_ranges = 0, per[CLUSTER_SLOTS] = {0};
    ck_assert_int_gt(m->nmasters, 0);
    for (int s = 0; s < CLUSTER_SLOTS; s++) {
        if (m->owner[s] < -1 || m->owner[s] >= m->nmasters)
            bad_owner++;
        else if (m->owner[s] >= 0) {
            covered++;
            per[m->owner[s]]++;
        }
    }
    ck_assert_int_eq(bad_owner, 0);
    ck_assert_int_eq(covered, m->covered);
    for (int i = 0; i < m->nranges; i++) {
        const struct cluster_range *r = &m->ranges[i];
        if (r->first > r->last)
            bad_range++;
        for (int s = r->first; s <= r->last; s++)
            bad_range += m->owner[s] != r->master;
        from_ranges += r->last - r->first + 1;
    }
    ck_assert_int_eq(bad_range, 0);
    ck_assert_int_eq(from_ranges, covered);
    for (int i = 0; i < m->nmasters; i++) {
        ck_assert_int_eq(m->masters[i].nslots, per[i]);
        ck_assert_ptr_nonnull(memchr(m->masters[i].node.addr, '\0', CLUSTER_ADDR_MAX));
        ck_assert_int_gt((int)strlen(m->masters[i].node.addr), 0);
        ck_assert_int_eq(master_named(m, m->masters[i].node.addr), i); /* distinct */
    }
}

/* ---- key slots ---- */

START_TEST(test_keyslot_matches_redis)
{
    /* CLUSTER KEYSLOT answers of the recorded cluster */
    static const struct {
        const char *key;
        int slot;
    } known[] = {
        {"foo", 12182},     {"bar", 5061},  {"{user1000}.following", 3443},
        {"user1000", 3443}, {"{}a", 10875}, {"a{}b", 13694},
        {"{a}{b}", 15495},  {"a", 15495},   {"}{x}", 16287},
        {"x", 16287},       {"", 0},        {"123456789", 12739},
        {"{", 4092},        {"}", 12090},   {"{}", 15257},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ck_assert_msg(cluster_keyslot(known[i].key, strlen(known[i].key)) == known[i].slot, "%s: %d, not %d",
                      known[i].key, cluster_keyslot(known[i].key, strlen(known[i].key)), known[i].slot);
}
END_TEST

START_TEST(test_keyslot_reads_len_bytes_only)
{
    ck_assert_int_eq(cluster_keyslot("foobar", 3), 12182);
    ck_assert_int_eq(cluster_keyslot("{user1000}", 9), cluster_keyslot("{user1000", 9)); /* no '}' within len */
    ck_assert_int_ne(cluster_keyslot("{user1000}", 9), 3443);
    ck_assert_int_eq(cluster_keyslot("{user1000}", 10), 3443);
    /* bytes past a NUL count: keys are binary */
    ck_assert_int_ne(cluster_keyslot("a\0b", 3), cluster_keyslot("a", 1));
    /* the daemon's key form: every key of a shard shares the tag's slot */
    ck_assert_int_eq(cluster_keyslot("hg:{7.5679}:jobs", 16), cluster_keyslot("7.5679", 6));
    ck_assert_int_eq(cluster_keyslot("hg:{7.5679}:ready:t{x}", 22), cluster_keyslot("7.5679", 6));
}
END_TEST

/* ---- the slot map, recorded ---- */

START_TEST(test_map_initial)
{
    struct cluster_map *m = map_ok(REC_INITIAL);
    check_invariants(m);
    ck_assert_int_eq(m->nmasters, 3);
    ck_assert_int_eq(m->nranges, 3);
    ck_assert_int_eq(m->covered, CLUSTER_SLOTS);
    ck_assert_str_eq(m->masters[0].node.addr, M0);
    ck_assert_str_eq(m->masters[0].node.id, M0_ID);
    ck_assert_str_eq(m->masters[1].node.addr, M1);
    ck_assert_str_eq(m->masters[2].node.addr, M2);
    ck_assert_int_eq(m->masters[0].nreplicas, 1);
    ck_assert_str_eq(m->masters[0].replicas[0].addr, M0_REPLICA);
    ck_assert_str_eq(m->masters[1].replicas[0].addr, M1_REPLICA);
    ck_assert_str_eq(m->masters[1].replicas[0].id, M1_REPLICA_ID);
    ck_assert_str_eq(m->masters[2].replicas[0].addr, M2_REPLICA);
    ck_assert_int_eq(m->masters[0].nslots, 5461);
    ck_assert_int_eq(m->masters[1].nslots, 5462);
    ck_assert_int_eq(m->masters[2].nslots, 5461);
    ck_assert_int_eq(cluster_map_lookup(m, 0), 0);
    ck_assert_int_eq(cluster_map_lookup(m, 5460), 0);
    ck_assert_int_eq(cluster_map_lookup(m, 5461), 1);
    ck_assert_int_eq(cluster_map_lookup(m, 10922), 1);
    ck_assert_int_eq(cluster_map_lookup(m, 10923), 2);
    ck_assert_int_eq(cluster_map_lookup(m, 16383), 2);
    ck_assert_int_eq(cluster_map_lookup(m, -1), -1);
    ck_assert_int_eq(cluster_map_lookup(m, CLUSTER_SLOTS), -1);
    ck_assert_int_eq(cluster_map_lookup(NULL, 0), -1);
    /* the recording's MOVED for "foo" named M2 */
    ck_assert_int_eq(cluster_map_key_master(m, "foo", 3), 2);
    ck_assert_int_eq(cluster_map_key_master(m, "{user1000}.following", 20), 0);
    cluster_map_free(m);
    cluster_map_free(NULL);
}
END_TEST

START_TEST(test_map_split_range)
{
    struct cluster_map *m = map_ok(REC_SPLIT);
    check_invariants(m);
    ck_assert_int_eq(m->nranges, 5);
    ck_assert_int_eq(m->nmasters, 3);
    ck_assert_str_eq(m->masters[0].node.addr, M0);
    ck_assert_str_eq(m->masters[1].node.addr, M1);
    ck_assert_int_eq(cluster_map_lookup(m, 99), 0);
    for (int s = 100; s <= 109; s++)
        ck_assert_int_eq(cluster_map_lookup(m, s), 1);
    ck_assert_int_eq(cluster_map_lookup(m, 110), 0);
    ck_assert_int_eq(m->masters[0].nslots, 5461 - 10);
    ck_assert_int_eq(m->masters[1].nslots, 5462 + 10);
    /* listed with each of its two ranges, M0's replica is counted once */
    ck_assert_int_eq(m->masters[0].nreplicas, 1);
    ck_assert_int_eq(m->masters[1].nreplicas, 1);
    cluster_map_free(m);
}
END_TEST

START_TEST(test_map_after_failover)
{
    /* M1 was SIGKILLed; its replica now serves M1's slots, with no replica of its own, and the
     * dead master is not listed at all */
    struct cluster_map *m = map_ok(REC_FAILOVER);
    check_invariants(m);
    ck_assert_int_eq(m->nmasters, 3);
    ck_assert_int_eq(m->covered, CLUSTER_SLOTS);
    ck_assert_int_eq(master_named(m, M1), -1);
    int heir = master_named(m, M1_REPLICA);
    ck_assert_int_ge(heir, 0);
    ck_assert_str_eq(m->masters[heir].node.id, M1_REPLICA_ID);
    ck_assert_int_eq(m->masters[heir].nreplicas, 0);
    ck_assert_int_eq(cluster_map_lookup(m, 5461), heir);
    ck_assert_int_eq(cluster_map_lookup(m, 100), heir);
    ck_assert_int_eq(m->masters[heir].nslots, 5472);
    ck_assert_int_eq(cluster_map_lookup(m, 0), master_named(m, M0));
    cluster_map_free(m);
}
END_TEST

START_TEST(test_map_unknown_endpoint_means_asked_host)
{
    /* cluster-preferred-endpoint-type unknown-endpoint: every host is nil */
    char err[CLUSTER_ERR_MAX];
    struct cluster_map *m = map_of(REC_SLOTS_UNKNOWN_ENDPOINT, "127.0.0.1", err, sizeof err);
    ck_assert_msg(m != NULL, "%s", err);
    struct cluster_map *want = map_ok(REC_INITIAL);
    ck_assert_int_eq(m->nmasters, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(m->masters[i].node.addr, want->masters[i].node.addr);
        ck_assert_str_eq(m->masters[i].replicas[0].addr, want->masters[i].replicas[0].addr);
    }
    ck_assert_mem_eq(m->owner, want->owner, sizeof m->owner);
    cluster_map_free(m);
    cluster_map_free(want);

    m = map_of(REC_SLOTS_UNKNOWN_ENDPOINT, "::1", err, sizeof err);
    ck_assert_msg(m != NULL, "%s", err);
    ck_assert_str_eq(m->masters[0].node.addr, "[::1]:22659");
    cluster_map_free(m);

    ck_assert_ptr_null(map_of(REC_SLOTS_UNKNOWN_ENDPOINT, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "no endpoint"));
}
END_TEST

START_TEST(test_map_hostname_unset_refused)
{
    /* cluster-preferred-endpoint-type hostname without hostnames: every host is "?" */
    refused(REC_SLOTS_HOSTNAME_UNSET, "no known endpoint");
}
END_TEST

START_TEST(test_map_truncated_bytes)
{
    /* every strict prefix of a real reply is no reply at all: refused, never read past */
    size_t len = strlen(REC_SPLIT);
    for (size_t n = 0; n < len; n++) {
        redisReply *reply = reply_of(REC_SPLIT, n);
        ck_assert_ptr_null(reply);
        char err[CLUSTER_ERR_MAX];
        ck_assert_ptr_null(cluster_map_parse(reply, "127.0.0.1", err, sizeof err));
        ck_assert_str_eq(err, "CLUSTER SLOTS: no reply");
    }
}
END_TEST

/* ---- the slot map, malformed ---- */

#define NODE(port) "*3\r\n$9\r\n127.0.0.1\r\n:" #port "\r\n$40\r\n" M0_ID "\r\n"

START_TEST(test_map_malformed)
{
    refused("-ERR This instance has cluster support disabled\r\n", "cluster support disabled");
    refused("+OK\r\n", "not an array");
    refused(":3\r\n", "not an array");
    refused("$-1\r\n", "not an array");
    refused("*-1\r\n", "not an array");
    refused("*0\r\n", "no slot is assigned");
    /* an entry that is not [first, last, master...] */
    refused("*1\r\n:0\r\n", "entry 0 is not an array");
    refused("*1\r\n*2\r\n:0\r\n:16383\r\n", "entry 0 is not an array");
    refused("*1\r\n*0\r\n", "entry 0 is not an array");
    refused("*1\r\n*-1\r\n", "entry 0 is not an array");
    refused("*2\r\n*3\r\n:0\r\n:99\r\n" NODE(7000) "*2\r\n:100\r\n:200\r\n", "entry 1 is not an array");
    /* slots */
    refused("*1\r\n*3\r\n$1\r\n0\r\n:16383\r\n" NODE(7000), "slots are not integers");
    refused("*1\r\n*3\r\n:0\r\n$-1\r\n" NODE(7000), "slots are not integers");
    refused("*1\r\n*3\r\n:0\r\n:16384\r\n" NODE(7000), "bad slot range 0-16384");
    refused("*1\r\n*3\r\n:-1\r\n:10\r\n" NODE(7000), "bad slot range -1-10");
    refused("*1\r\n*3\r\n:10\r\n:9\r\n" NODE(7000), "bad slot range 10-9");
    refused("*1\r\n*3\r\n:9223372036854775807\r\n:0\r\n" NODE(7000), "bad slot range");
    refused("*2\r\n*3\r\n:0\r\n:100\r\n" NODE(7000) "*3\r\n:100\r\n:200\r\n" NODE(7001),
            "entry 1: slot 100 is claimed twice");
    refused("*2\r\n*3\r\n:0\r\n:100\r\n" NODE(7000) "*3\r\n:0\r\n:100\r\n" NODE(7000), "claimed twice");
    /* the master node */
    refused("*1\r\n*3\r\n:0\r\n:1\r\n:7000\r\n", "master: a node is not an array");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$9\r\n127.0.0.1\r\n", "master: a node is not an array");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*0\r\n", "master: a node is not an array");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:7000\r\n", "host is not a string");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$9\r\n127.0.0.1\r\n$4\r\n7000\r\n", "port is not an integer");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$9\r\n127.0.0.1\r\n:0\r\n", "port 0 out of range");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$9\r\n127.0.0.1\r\n:70000\r\n", "port 70000 out of range");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$9\r\n127.0.0.1\r\n:-6379\r\n", "port -6379 out of range");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$9\r\n127.0.0.1\r\n:65536\r\n", "port 65536 out of range");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$9\r\n127.0 0.1\r\n:7000\r\n", "bad characters");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$9\r\n127.0\t0.1\r\n:7000\r\n", "bad characters");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$7\r\n[::1]:1\r\n:7000\r\n", "bad characters");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nabc\r\n", "node id is not a string");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n:1\r\n", "node id is not a string");
    refused("*1\r\n*3\r\n:0\r\n:1\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n"
            "$40\r\nzb5aa62f14d6fe0f1032c508a2c9687b4e01562a\r\n",
            "not hexadecimal");
    /* a replica */
    refused("*1\r\n*4\r\n:0\r\n:1\r\n" NODE(7000) "*2\r\n$9\r\n127.0.0.1\r\n:99999\r\n", "replica 0: port 99999");
    refused("*1\r\n*5\r\n:0\r\n:1\r\n" NODE(7000) NODE(7001) "$2\r\nno\r\n", "replica 1: a node is not an array");
}
END_TEST

START_TEST(test_map_long_host)
{
    char resp[1024], host[CLUSTER_HOST_MAX + 2];
    memset(host, 'h', sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(resp, sizeof resp, "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$%zu\r\n%s\r\n:7000\r\n", strlen(host), host);
    refused(resp, "too long");
    host[CLUSTER_HOST_MAX] = '\0'; /* 255 characters: the longest DNS name */
    snprintf(resp, sizeof resp, "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$%zu\r\n%s\r\n:65535\r\n", strlen(host), host);
    struct cluster_map *m = map_ok(resp);
    ck_assert_int_eq((int)strlen(m->masters[0].node.addr), CLUSTER_HOST_MAX + 6);
    cluster_map_free(m);
}
END_TEST

START_TEST(test_map_accepts_older_and_partial_shapes)
{
    /* Redis 3.0 gave [host, port] without the id; slots nobody serves are left -1; extra
     * elements after the id (7.0's metadata) are ignored; an IPv6 host is bracketed */
    struct cluster_map *m = map_ok("*2\r\n*3\r\n:0\r\n:99\r\n*2\r\n$8\r\n10.0.0.1\r\n:7000\r\n"
                                   "*4\r\n:200\r\n:299\r\n*4\r\n$3\r\n::1\r\n:7001\r\n$40\r\n" M0_ID
                                   "\r\n*2\r\n$8\r\nhostname\r\n$1\r\nh\r\n*2\r\n$1\r\n?\r\n:7002\r\n");
    check_invariants(m);
    ck_assert_int_eq(m->covered, 200);
    ck_assert_str_eq(m->masters[0].node.id, "");
    ck_assert_str_eq(m->masters[1].node.addr, "[::1]:7001");
    ck_assert_int_eq(m->masters[1].nreplicas, 0); /* a replica with no known endpoint is left out */
    ck_assert_int_eq(cluster_map_lookup(m, 150), -1);
    ck_assert_int_eq(cluster_map_lookup(m, 250), 1);
    int counts[2];
    ck_assert_int_eq(cluster_map_shard_counts(m, 8, counts), 8); /* no shard slot lies in 0-99 or 200-299 */
    cluster_map_free(m);
}
END_TEST

START_TEST(test_map_replicas_union)
{
    /* Redis repeats a master's replicas with each of its ranges; should two ranges disagree,
     * the master keeps every replica named, each once */
    struct cluster_map *m = map_ok("*2\r\n*4\r\n:0\r\n:9\r\n" NODE(7000) NODE(7001) "*5\r\n:10\r\n:19\r\n" NODE(7000)
                                       NODE(7002) NODE(7001));
    check_invariants(m);
    ck_assert_int_eq(m->nmasters, 1);
    ck_assert_int_eq(m->masters[0].nslots, 20);
    ck_assert_int_eq(m->masters[0].nreplicas, 2);
    ck_assert_str_eq(m->masters[0].replicas[0].addr, "127.0.0.1:7001");
    ck_assert_str_eq(m->masters[0].replicas[1].addr, "127.0.0.1:7002");
    cluster_map_free(m);
}
END_TEST

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * UINT64_C(2685821657736338717);
}

START_TEST(test_map_mutated_replies)
{
    /* random byte changes to a real reply: whatever hiredis still reads as a reply is either
     * refused with a message or makes a map that keeps every invariant (ASan/valgrind watch) */
    static const char alphabet[] = "0123456789:*$-+\r\n?a ";
    size_t len = strlen(REC_SPLIT);
    char *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    int parsed = 0, refused_n = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, REC_SPLIT, len);
        int changes = 1 + (int)(rnd() % 3);
        for (int c = 0; c < changes; c++)
            buf[rnd() % len] = alphabet[rnd() % (sizeof alphabet - 1)];
        redisReply *reply = reply_of(buf, len);
        if (reply == NULL)
            continue;
        char err[CLUSTER_ERR_MAX] = "";
        struct cluster_map *m = cluster_map_parse(reply, NULL, err, sizeof err);
        freeReplyObject(reply);
        if (m == NULL) {
            ck_assert_int_gt((int)strlen(err), 0);
            refused_n++;
        } else {
            check_invariants(m);
            cluster_map_free(m);
            parsed++;
        }
    }
    free(buf);
    ck_assert_int_gt(parsed, 0);
    ck_assert_int_gt(refused_n, 0);
}
END_TEST

/* ---- redirections ---- */

static enum cluster_redirect_kind redirect_of(const char *resp, const char *asked, struct cluster_redirect *out)
{
    redisReply *reply = reply_of(resp, strlen(resp));
    ck_assert_ptr_nonnull(reply);
    ck_assert_int_eq(reply->type, REDIS_REPLY_ERROR);
    enum cluster_redirect_kind k = cluster_redirect_parse(reply->str, reply->len, asked, out);
    freeReplyObject(reply);
    return k;
}

START_TEST(test_redirect_recorded)
{
    struct cluster_redirect rd;
    ck_assert_int_eq(redirect_of(REC_MOVED, "127.0.0.1", &rd), CLUSTER_MOVED);
    ck_assert_int_eq(rd.slot, 12182);
    ck_assert_str_eq(rd.addr, M2);
    ck_assert_int_eq(redirect_of(REC_ASK, NULL, &rd), CLUSTER_ASK);
    ck_assert_int_eq(rd.slot, 105);
    ck_assert_str_eq(rd.addr, M1);
    /* unknown-endpoint: ":port" is the asked host */
    ck_assert_int_eq(redirect_of(REC_MOVED_UNKNOWN_ENDPOINT, "127.0.0.1", &rd), CLUSTER_MOVED);
    ck_assert_str_eq(rd.addr, M2);
    ck_assert_int_eq(redirect_of(REC_MOVED_UNKNOWN_ENDPOINT, NULL, &rd), CLUSTER_MOVED);
    ck_assert_str_eq(rd.addr, "");
    /* hostname type without a hostname: a redirect to a node nobody can name */
    ck_assert_int_eq(redirect_of(REC_MOVED_HOSTNAME_UNSET, "127.0.0.1", &rd), CLUSTER_MOVED);
    ck_assert_int_eq(rd.slot, 12182);
    ck_assert_str_eq(rd.addr, "");
}
END_TEST

/* The first word decides; the rest of the text is Redis's and may change between versions. */
START_TEST(test_error_kinds)
{
#define KIND(s) cluster_error_kind(s, strlen(s))
    ck_assert_int_eq(KIND("MOVED 3999 127.0.0.1:6381"), CLUSTER_ERR_MOVED);
    ck_assert_int_eq(KIND("ASK 105 127.0.0.1:7001"), CLUSTER_ERR_ASK);
    ck_assert_int_eq(KIND("TRYAGAIN Multiple keys request during rehashing of slot"), CLUSTER_ERR_TRYAGAIN);
    ck_assert_int_eq(KIND("CLUSTERDOWN The cluster is down"), CLUSTER_ERR_DOWN);
    ck_assert_int_eq(KIND("CLUSTERDOWN Hash slot not served"), CLUSTER_ERR_DOWN);
    ck_assert_int_eq(KIND("NOSCRIPT No matching script. Please use EVAL."), CLUSTER_ERR_OTHER);
    ck_assert_int_eq(KIND("READONLY You can't write against a read only replica."), CLUSTER_ERR_OTHER);
    ck_assert_int_eq(KIND("ERR MOVED is not a command"), CLUSTER_ERR_OTHER);
    ck_assert_int_eq(KIND("MOVEDX 1 a:1"), CLUSTER_ERR_OTHER);
    ck_assert_int_eq(KIND("ASK"), CLUSTER_ERR_OTHER);
    ck_assert_int_eq(KIND(""), CLUSTER_ERR_OTHER);
    ck_assert_int_eq(cluster_error_kind(NULL, 0), CLUSTER_ERR_OTHER);
    ck_assert_int_eq(cluster_error_kind("MOVED 1 a:1", 5), CLUSTER_ERR_OTHER); /* len is honoured */
    /* Redis 7.0's words for a script that met a key of a migrating slot (guard.lua's EXISTS),
     * as rconn gets them */
    ck_assert_int_eq(KIND("ERR Script attempted to access a non local key in a cluster node script: "
                          "f03ae8bcd6e9e3a0b8d43a4bcbd1ce1e2c3a1f37, on @user_script:10."),
                     CLUSTER_ERR_NONLOCAL);
    ck_assert_int_eq(KIND("ERR Error running script: Script attempted to access a non local key"),
                     CLUSTER_ERR_NONLOCAL);
    ck_assert_int_eq(KIND("ERR Script attempted to access keys that do not hash to the same slot"),
                     CLUSTER_ERR_OTHER); /* our bug, not the cluster's moment: never retried */
    ck_assert_int_eq(cluster_error_kind("ERR Script attempted to access a non local key", 20), CLUSTER_ERR_OTHER);
#undef KIND
}
END_TEST

START_TEST(test_redirect_forms)
{
    struct cluster_redirect rd;
#define RD(s) cluster_redirect_parse(s, strlen(s), "10.0.0.9", &rd)
    ck_assert_int_eq(RD("MOVED 3999 127.0.0.1:6381"), CLUSTER_MOVED);
    ck_assert_int_eq(rd.slot, 3999);
    ck_assert_str_eq(rd.addr, "127.0.0.1:6381");
    ck_assert_int_eq(RD("ASK 0 redis-2.example:1"), CLUSTER_ASK);
    ck_assert_int_eq(rd.slot, 0);
    ck_assert_str_eq(rd.addr, "redis-2.example:1");
    ck_assert_int_eq(RD("MOVED 16383 ::1:65535"), CLUSTER_MOVED); /* Redis does not bracket IPv6 */
    ck_assert_str_eq(rd.addr, "[::1]:65535");
    ck_assert_int_eq(RD("MOVED 7 :6379"), CLUSTER_MOVED);
    ck_assert_str_eq(rd.addr, "10.0.0.9:6379");
    /* not redirects */
    static const char *const no[] = {
        "",
        "MOVED",
        "MOVED ",
        "ASK",
        "ASKING",
        "MOVEDX 1 h:1",
        "moved 1 h:1",
        "ERR unknown command",
        "NOSCRIPT No matching script",
        "CLUSTERDOWN The cluster is down",
        "TRYAGAIN Multiple keys",
        "MOVED 16384 h:1",
        "MOVED -1 h:1",
        "MOVED x h:1",
        "MOVED 1 h:0",
        "MOVED 1 h:65536",
        "MOVED 1 h:",
        "MOVED 1 h",
        "MOVED 1",
        "MOVED 1 h:1x",
        "MOVED 1 h:1 ",
        "MOVED 1  h:1",
        "MOVED 1 h :1",
        "MOVED 1234567 h:1",
        "MOVED 1 h:0000001",
        "ASK 1 [::1]:1",
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ck_assert_msg(RD(no[i]) == CLUSTER_NOT_REDIRECT, "\"%s\" read as a redirect", no[i]);
#undef RD
    /* only len bytes are read: the reply need not be NUL-terminated */
    ck_assert_int_eq(cluster_redirect_parse("MOVED 12 h:6379999", 15, NULL, &rd), CLUSTER_MOVED);
    ck_assert_str_eq(rd.addr, "h:6379");
    ck_assert_int_eq(cluster_redirect_parse(NULL, 0, NULL, &rd), CLUSTER_NOT_REDIRECT);
    ck_assert_int_eq(cluster_redirect_parse("MOVED 1 h:1", 11, NULL, NULL), CLUSTER_NOT_REDIRECT);
}
END_TEST

/* ---- shard tags ---- */

START_TEST(test_shard_slot_is_mid_slice)
{
    for (int S = 1; S <= 256; S++) {
        for (int n = 0; n < S; n++) {
            int slot = cluster_shard_slot(n, S);
            int lo = n * CLUSTER_SLOTS / S, hi = (n + 1) * CLUSTER_SLOTS / S; /* [lo, hi) */
            ck_assert_int_ge(slot, lo);
            ck_assert_int_lt(slot, hi);
            ck_assert_int_le(abs(2 * slot - (lo + hi - 1)), 2); /* the middle, give or take rounding */
        }
    }
    ck_assert_int_eq(cluster_shard_slot(0, 1), 8192);
    ck_assert_int_eq(cluster_shard_slot(0, 0), -1);
    ck_assert_int_eq(cluster_shard_slot(-1, 8), -1);
    ck_assert_int_eq(cluster_shard_slot(8, 8), -1);
    ck_assert_int_eq(cluster_shard_slot(0, CLUSTER_SLOTS + 1), -1);
    ck_assert_int_eq(cluster_shard_slot(CLUSTER_SLOTS - 1, CLUSTER_SLOTS), CLUSTER_SLOTS - 1);
}
END_TEST

START_TEST(test_shard_tags_land_in_their_slices)
{
    static const int sizes[] = {1, 2, 3, 8, 9, 16, 48, 64, 100, 255, 256};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int S = sizes[i];
        for (int n = 0; n < S; n++) {
            char tag[CLUSTER_TAG_MAX], again[CLUSTER_TAG_MAX];
            int len = cluster_shard_tag(n, S, tag, sizeof tag);
            ck_assert_int_gt(len, 0);
            ck_assert_int_eq(len, (int)strlen(tag));
            ck_assert_ptr_null(strpbrk(tag, "{}")); /* it goes between braces */
            int slot = cluster_keyslot(tag, (size_t)len);
            ck_assert_msg(slot == cluster_shard_slot(n, S), "S=%d n=%d tag %s slot %d", S, n, tag, slot);
            ck_assert_int_ge(slot, n * CLUSTER_SLOTS / S);
            ck_assert_int_lt(slot, (n + 1) * CLUSTER_SLOTS / S);
            ck_assert_int_eq(cluster_shard_tag(n, S, again, sizeof again), len);
            ck_assert_str_eq(tag, again);
        }
    }
}
END_TEST

START_TEST(test_shard_tags_pinned)
{
    /* part of the data layout: these may never change */
    static const char *const eight[] = {"0.6957", "1.48242", "2.68352", "3.2520",
                                        "4.586",  "5.22978", "6.1197",  "7.5679"};
    char tag[CLUSTER_TAG_MAX];
    for (int n = 0; n < 8; n++) {
        ck_assert_int_gt(cluster_shard_tag(n, 8, tag, sizeof tag), 0);
        ck_assert_str_eq(tag, eight[n]);
    }
    ck_assert_int_gt(cluster_shard_tag(255, 256, tag, sizeof tag), 0);
    ck_assert_str_eq(tag, "255.57581");
    ck_assert_int_gt(cluster_shard_tag(0, 16, tag, sizeof tag), 0);
    ck_assert_str_eq(tag, "0.19950");
}
END_TEST

START_TEST(test_shard_tag_bad_arguments)
{
    char tag[CLUSTER_TAG_MAX];
    ck_assert_int_eq(cluster_shard_tag(0, 0, tag, sizeof tag), -1);
    ck_assert_int_eq(cluster_shard_tag(-1, 8, tag, sizeof tag), -1);
    ck_assert_int_eq(cluster_shard_tag(8, 8, tag, sizeof tag), -1);
    ck_assert_int_eq(cluster_shard_tag(0, 257, tag, sizeof tag), -1);
    ck_assert_int_eq(cluster_shard_tag(0, 8, tag, CLUSTER_TAG_MAX - 1), -1);
    ck_assert_int_eq(cluster_shard_tag(0, 8, NULL, CLUSTER_TAG_MAX), -1);
}
END_TEST

/* ---- shards over masters ---- */

/* CLUSTER SLOTS for M masters holding redis-cli --cluster create's split (its clusterManager-
 * CommandCreate: slotsPerNode = 16384.0 / M, last = lround(cursor + slotsPerNode - 1)). */
static char *even_split(int masters)
{
    size_t cap = 256 + (size_t)masters * 128, len = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    len += (size_t)snprintf(out, cap, "*%d\r\n", masters);
    double per = (double)CLUSTER_SLOTS / masters, cursor = 0;
    int first = 0;
    for (int i = 0; i < masters; i++) {
        int last = (int)lround(cursor + per - 1);
        if (last > CLUSTER_SLOTS - 1 || i == masters - 1)
            last = CLUSTER_SLOTS - 1;
        len += (size_t)snprintf(out + len, cap - len, "*3\r\n:%d\r\n:%d\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n", first,
                                last, 7000 + i);
        first = last + 1;
        cursor += per;
    }
    return out;
}

/* Each master holding one contiguous range of L slots serves floor(L*S/16384) or
 * ceil(L*S/16384) shards (see cluster.h); returns max - min over the masters. */
static int check_spread(const struct cluster_map *m, int S)
{
    int counts[64], lo = S, hi = 0, sum = 0;
    ck_assert_int_le(m->nmasters, 64);
    ck_assert_int_eq(cluster_map_shard_counts(m, S, counts), 0);
    for (int i = 0; i < m->nmasters; i++) {
        long L = m->masters[i].nslots;
        long fl = L * S / CLUSTER_SLOTS, ce = (L * S + CLUSTER_SLOTS - 1) / CLUSTER_SLOTS;
        ck_assert_msg(counts[i] >= fl && counts[i] <= ce, "S=%d master %d (%ld slots): %d shards, not %ld..%ld", S, i,
                      L, counts[i], fl, ce);
        lo = counts[i] < lo ? counts[i] : lo;
        hi = counts[i] > hi ? counts[i] : hi;
        sum += counts[i];
    }
    ck_assert_int_eq(sum, S);
    return hi - lo;
}

START_TEST(test_spread_default_split)
{
    /* the recorded cluster: redis-cli's 3-way split 0-5460, 5461-10922, 10923-16383 */
    struct cluster_map *m = map_ok(REC_INITIAL);
    for (int S = 1; S <= 256; S++) {
        int d = check_spread(m, S);
        ck_assert_msg(d <= 1, "S=%d: masters differ by %d shards", S, d);
    }
    int counts[3];
    ck_assert_int_eq(cluster_map_shard_counts(m, 8, counts), 0);
    ck_assert_int_eq(counts[0] + counts[1] + counts[2], 8);
    ck_assert_int_eq(cluster_map_shard_counts(m, 0, counts), -1);
    ck_assert_int_eq(cluster_map_shard_counts(NULL, 8, counts), -1);
    ck_assert_int_eq(cluster_map_shard_master(m, 0, 8), 0); /* slot 1024 */
    ck_assert_int_eq(cluster_map_shard_master(m, 7, 8), 2); /* slot 15360 */
    ck_assert_int_eq(cluster_map_shard_master(m, 8, 8), -1);
    cluster_map_free(m);
}
END_TEST

START_TEST(test_spread_any_even_split)
{
    /* 2..32 masters on redis-cli's split, any shard count from 3 per master up to 256 */
    for (int M = 2; M <= 32; M++) {
        char *resp = even_split(M);
        struct cluster_map *m = map_ok(resp);
        ck_assert_int_eq(m->nmasters, M);
        ck_assert_int_eq(m->covered, CLUSTER_SLOTS);
        for (int S = 3 * M; S <= 256; S++) {
            int d = check_spread(m, S);
            ck_assert_msg(d <= 1, "M=%d S=%d: masters differ by %d shards", M, S, d);
        }
        cluster_map_free(m);
        free(resp);
    }
}
END_TEST

START_TEST(test_spread_after_failover_and_split)
{
    /* a master with two ranges (the split): the floor/ceil bound is per range, so only the
     * totals are checked; after the failover the heir serves what the dead master did */
    struct cluster_map *split = map_ok(REC_SPLIT), *after = map_ok(REC_FAILOVER);
    for (int S = 1; S <= 256; S++) {
        int a[3], b[3];
        ck_assert_int_eq(cluster_map_shard_counts(split, S, a), 0);
        ck_assert_int_eq(cluster_map_shard_counts(after, S, b), 0);
        ck_assert_int_eq(a[0] + a[1] + a[2], S);
        ck_assert_int_eq(a[master_named(split, M1)], b[master_named(after, M1_REPLICA)]);
        ck_assert_int_eq(a[master_named(split, M0)], b[master_named(after, M0)]);
    }
    cluster_map_free(split);
    cluster_map_free(after);
}
END_TEST

static Suite *cluster_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("keyslot");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_keyslot_matches_redis);
    tcase_add_test(tc, test_keyslot_reads_len_bytes_only);
    suite_add_tcase(s, tc);

    tc = tcase_create("map");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_map_initial);
    tcase_add_test(tc, test_map_split_range);
    tcase_add_test(tc, test_map_after_failover);
    tcase_add_test(tc, test_map_unknown_endpoint_means_asked_host);
    tcase_add_test(tc, test_map_hostname_unset_refused);
    tcase_add_test(tc, test_map_truncated_bytes);
    tcase_add_test(tc, test_map_malformed);
    tcase_add_test(tc, test_map_long_host);
    tcase_add_test(tc, test_map_accepts_older_and_partial_shapes);
    tcase_add_test(tc, test_map_replicas_union);
    tcase_add_test(tc, test_map_mutated_replies);
    suite_add_tcase(s, tc);

    tc = tcase_create("redirect");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_redirect_recorded);
    tcase_add_test(tc, test_redirect_forms);
    suite_add_tcase(s, tc);

    tc = tcase_create("shards");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_shard_slot_is_mid_slice);
    tcase_add_test(tc, test_shard_tags_land_in_their_slices);
    tcase_add_test(tc, test_shard_tags_pinned);
    tcase_add_test(tc, test_shard_tag_bad_arguments);
    tcase_add_test(tc, test_spread_default_split);
    tcase_add_test(tc, test_spread_any_even_split);
    tcase_add_test(tc, test_spread_after_failover_and_split);
    tcase_add_test(tc, test_error_kinds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cluster_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
