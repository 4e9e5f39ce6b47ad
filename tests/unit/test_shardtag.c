/* test_shardtag.c — src/core/shardtag.h and the key builders over it (rkey, store_actor): plain
 * tags leave every key byte for byte as single-Redis data has them; cluster tags are the
 * pinned ones, each key lands in its shard's slot, and every tag reads back as its shard
 * number the way lib.lua reads it. */
#include "core/cluster.h"
#include "core/ids.h"
#include "redis/rcodec.h"
#include "core/shardtag.h"
#include "redis/store.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const suffixes[] = {"jobs", "delay", "ready:orders.eu-1", "biz:t", "log", "topic", "autorestore"};
#define NSUFFIXES (sizeof suffixes / sizeof suffixes[0])

static void init(int shards, enum shardtag_scheme scheme)
{
    char err[160];
    ck_assert_msg(shardtag_init(shards, scheme, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(shardtag_scheme(), scheme);
}

/* What lib.lua does with a key's tag: ":{(%d+)}:$" or ":{(%d+)%.%d+}:$" -> the shard number. */
static int shard_as_lua_reads_it(const char *tag)
{
    size_t digits = strspn(tag, "0123456789");
    if (digits == 0)
        return -1;
    if (tag[digits] == '.') {
        size_t more = strspn(tag + digits + 1, "0123456789");
        if (more == 0 || tag[digits + 1 + more] != '\0')
            return -1;
    } else if (tag[digits] != '\0') {
        return -1;
    }
    return atoi(tag);
}

START_TEST(test_plain_keys_unchanged)
{
    static const int sizes[] = {1, 8, 100, IDS_MAX_SHARDS};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int S = sizes[i];
        init(S, SHARDTAG_PLAIN);
        for (int n = 0; n < S; n++) {
            char want[160], got[160], num[16];
            size_t len;
            snprintf(num, sizeof num, "%d", n);
            ck_assert_str_eq(shardtag(n, &len), num);
            ck_assert_uint_eq(len, strlen(num));
            for (size_t k = 0; k < NSUFFIXES; k++) {
                /* what rcodec.c and topics.c wrote before the tag table existed */
                int wn = snprintf(want, sizeof want, "%s:{%d}:%s", "hg-prod.1", n, suffixes[k]);
                ck_assert_int_eq(rkey(got, sizeof got, "hg-prod.1", n, suffixes[k]), wn);
                ck_assert_str_eq(got, want);
            }
        }
        ck_assert_ptr_null(shardtag(S, NULL));
        ck_assert_ptr_null(shardtag(-1, NULL));
    }
}
END_TEST

START_TEST(test_cluster_tags_pinned)
{
    /* part of the data layout, as test_cluster.c pins cluster_shard_tag: these may never change */
    static const char *const eight[] = {"0.6957", "1.48242", "2.68352", "3.2520",
                                        "4.586",  "5.22978", "6.1197",  "7.5679"};
    init(8, SHARDTAG_CLUSTER);
    for (int n = 0; n < 8; n++) {
        size_t len;
        ck_assert_str_eq(shardtag(n, &len), eight[n]);
        ck_assert_uint_eq(len, strlen(eight[n]));
    }
    ck_assert_ptr_null(shardtag(8, NULL));
    char key[160];
    ck_assert_int_eq(rkey(key, sizeof key, "hg", 3, "jobs"), (int)strlen("hg:{3.2520}:jobs"));
    ck_assert_str_eq(key, "hg:{3.2520}:jobs");
    ck_assert_int_gt(rkey(key, sizeof key, "hg", 0, "autorestore"), 0);
    ck_assert_str_eq(key, "hg:{0.6957}:autorestore");
}
END_TEST

/* Every key of shard n, whatever its suffix, is in shard n's slot: a script's keys stay in one
 * slot, and the shards sit in the middles of their slices. */
START_TEST(test_cluster_keys_in_their_slot)
{
    static const int sizes[] = {1, 3, 8, 16, 48, 256};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int S = sizes[i];
        init(S, SHARDTAG_CLUSTER);
        for (int n = 0; n < S; n++) {
            const char *tag = shardtag(n, NULL);
            ck_assert_ptr_nonnull(tag);
            ck_assert_msg(shard_as_lua_reads_it(tag) == n, "S=%d: tag %s does not read back as shard %d", S, tag, n);
            char want[SHARDTAG_MAX];
            ck_assert_int_gt(cluster_shard_tag(n, S, want, sizeof want), 0);
            ck_assert_str_eq(tag, want);
            for (size_t k = 0; k < NSUFFIXES; k++) {
                char key[160];
                int len = rkey(key, sizeof key, "hg", n, suffixes[k]);
                ck_assert_int_gt(len, 0);
                ck_assert_int_eq(cluster_keyslot(key, (size_t)len), cluster_shard_slot(n, S));
            }
        }
    }
}
END_TEST

START_TEST(test_plain_tags_read_back)
{
    init(IDS_MAX_SHARDS, SHARDTAG_PLAIN);
    for (int n = 0; n < IDS_MAX_SHARDS; n++)
        ck_assert_int_eq(shard_as_lua_reads_it(shardtag(n, NULL)), n);
}
END_TEST

/* Without a table (before shardtag_init, or after one that failed) no key is made. */
START_TEST(test_no_table_no_keys)
{
    char key[160] = "x", err[160];
    ck_assert_int_eq(shardtag_init(0, SHARDTAG_CLUSTER, err, sizeof err), -1); /* the state, also under CK_FORK=no */
    ck_assert_ptr_null(shardtag(0, NULL));
    ck_assert_int_eq(rkey(key, sizeof key, "hg", 0, "jobs"), -1);
    ck_assert_str_eq(key, "");
    ck_assert_int_eq(shardtag_scheme(), SHARDTAG_PLAIN);
}
END_TEST

START_TEST(test_bad_init_refused)
{
    char err[160];
    init(8, SHARDTAG_CLUSTER);
    static const int bad[] = {0, -1, IDS_MAX_SHARDS + 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_int_eq(shardtag_init(bad[i], SHARDTAG_PLAIN, err, sizeof err), -1);
        ck_assert_ptr_nonnull(strstr(err, "shards"));
        ck_assert_ptr_null(shardtag(0, NULL)); /* no table, not the old one */
    }
    ck_assert_int_eq(shardtag_init(8, (enum shardtag_scheme)7, err, sizeof err), -1);
    ck_assert_ptr_null(shardtag(0, NULL));
}
END_TEST

START_TEST(test_rkey_fits_or_fails)
{
    init(8, SHARDTAG_CLUSTER);
    const char *want = "hg:{7.5679}:jobs";
    size_t n = strlen(want);
    char key[32];
    ck_assert_int_eq(rkey(key, n + 1, "hg", 7, "jobs"), (int)n); /* exactly room for the NUL */
    ck_assert_str_eq(key, want);
    strcpy(key, "x");
    ck_assert_int_eq(rkey(key, n, "hg", 7, "jobs"), -1);
    ck_assert_str_eq(key, "");
    ck_assert_int_eq(rkey(key, sizeof key, "hg", 8, "jobs"), -1); /* no such shard */
    ck_assert_int_eq(rkey(key, sizeof key, "hg", -1, "jobs"), -1);
}
END_TEST

START_TEST(test_actor_names_the_tagged_key)
{
    char actor[96];
    init(8, SHARDTAG_PLAIN);
    store_actor(actor, sizeof actor, "mover", "hg", 3, "delay");
    ck_assert_str_eq(actor, "mover hg:{3}:delay");
    init(8, SHARDTAG_CLUSTER);
    store_actor(actor, sizeof actor, "http-0", "hg", 3, "jobs");
    ck_assert_str_eq(actor, "http-0 hg:{3.2520}:jobs");
}
END_TEST

START_TEST(test_scheme_names)
{
    enum shardtag_scheme s;
    ck_assert_str_eq(shardtag_scheme_name(SHARDTAG_PLAIN), "plain");
    ck_assert_str_eq(shardtag_scheme_name(SHARDTAG_CLUSTER), "cluster");
    ck_assert_int_eq(shardtag_scheme_parse("plain", &s), 0);
    ck_assert_int_eq(s, SHARDTAG_PLAIN);
    ck_assert_int_eq(shardtag_scheme_parse("cluster", &s), 0);
    ck_assert_int_eq(s, SHARDTAG_CLUSTER);
    static const char *const bad[] = {"", "Cluster", "true", "cluster ", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(shardtag_scheme_parse(bad[i], &s) == -1, "'%s' parsed", bad[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shardtag");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_plain_keys_unchanged);
    tcase_add_test(tc, test_cluster_tags_pinned);
    tcase_add_test(tc, test_cluster_keys_in_their_slot);
    tcase_add_test(tc, test_plain_tags_read_back);
    tcase_add_test(tc, test_no_table_no_keys);
    tcase_add_test(tc, test_bad_init_refused);
    tcase_add_test(tc, test_rkey_fits_or_fails);
    tcase_add_test(tc, test_actor_names_the_tagged_key);
    tcase_add_test(tc, test_scheme_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
