/* cluster_probe — drives src/core/cluster.h for tests/integration/test_rcluster_harness.py, so the
 * C code itself is checked against a real Redis Cluster (not a Python copy of it).
 *
 *   cluster_probe tags S                 one line per shard n < S: "n tag slot"
 *   cluster_probe map ASKED_HOST S       stdin: the raw RESP reply of CLUSTER SLOTS asked of
 *                                        ASKED_HOST; stdout: the map as JSON, with each
 *                                        master's share of S shards
 *   cluster_probe redirect ASKED_HOST    stdin: a raw RESP error reply; stdout: JSON
 *                                        {"kind": "moved"|"ask"|"none", "slot", "addr"}
 *   cluster_probe keyslot KEY...         one line per key: its slot
 *
 * Exits 0, or 1 when the reply is refused (its message on stderr), 2 on bad usage. */
#include "core/cluster.h"

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static redisReply *read_reply(void)
{
    redisReader *r = redisReaderCreate();
    char buf[65536];
    size_t n;
    void *reply = NULL;
    while (r != NULL && (n = fread(buf, 1, sizeof buf, stdin)) > 0)
        if (redisReaderFeed(r, buf, n) != REDIS_OK)
            break;
    if (r == NULL || redisReaderGetReply(r, &reply) != REDIS_OK)
        reply = NULL;
    redisReaderFree(r);
    return reply;
}

static int usage(void)
{
    fprintf(stderr, "usage: cluster_probe tags S | map ASKED_HOST S | redirect ASKED_HOST | keyslot KEY...\n");
    return 2;
}

static int cmd_tags(int shards)
{
    for (int n = 0; n < shards; n++) {
        char tag[CLUSTER_TAG_MAX];
        if (cluster_shard_tag(n, shards, tag, sizeof tag) < 0) {
            fprintf(stderr, "cluster_probe: no tag for shard %d of %d\n", n, shards);
            return 1;
        }
        printf("%d %s %d\n", n, tag, cluster_keyslot(tag, strlen(tag)));
    }
    return 0;
}

static int cmd_map(const char *asked_host, int shards)
{
    redisReply *reply = read_reply();
    char err[CLUSTER_ERR_MAX];
    struct cluster_map *m = cluster_map_parse(reply, asked_host, err, sizeof err);
    if (reply != NULL)
        freeReplyObject(reply);
    if (m == NULL) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int *counts = calloc((size_t)m->nmasters, sizeof *counts);
    int unserved = counts != NULL ? cluster_map_shard_counts(m, shards, counts) : -1;
    json_t *masters = json_array(), *ranges = json_array();
    for (int i = 0; i < m->nmasters; i++) {
        json_t *reps = json_array();
        for (int j = 0; j < m->masters[i].nreplicas; j++)
            json_array_append_new(reps, json_string(m->masters[i].replicas[j].addr));
        json_array_append_new(masters, json_pack("{s:s, s:s, s:o, s:i, s:i}", "addr", m->masters[i].node.addr, "id",
                                                 m->masters[i].node.id, "replicas", reps, "slots", m->masters[i].nslots,
                                                 "shards", counts ? counts[i] : -1));
    }
    for (int i = 0; i < m->nranges; i++)
        json_array_append_new(ranges,
                              json_pack("[i, i, i]", m->ranges[i].first, m->ranges[i].last, m->ranges[i].master));
    json_t *out = json_pack("{s:o, s:o, s:i, s:i}", "masters", masters, "ranges", ranges, "covered", m->covered,
                            "unserved", unserved);
    char *text = json_dumps(out, JSON_COMPACT);
    puts(text ? text : "null");
    free(text);
    json_decref(out);
    free(counts);
    cluster_map_free(m);
    return 0;
}

static int cmd_redirect(const char *asked_host)
{
    redisReply *reply = read_reply();
    if (reply == NULL || reply->type != REDIS_REPLY_ERROR) {
        fprintf(stderr, "cluster_probe: stdin is not an error reply\n");
        if (reply != NULL)
            freeReplyObject(reply);
        return 1;
    }
    struct cluster_redirect rd;
    enum cluster_redirect_kind k = cluster_redirect_parse(reply->str, reply->len, asked_host, &rd);
    freeReplyObject(reply);
    const char *kind = k == CLUSTER_MOVED ? "moved" : k == CLUSTER_ASK ? "ask" : "none";
    printf("{\"kind\": \"%s\", \"slot\": %d, \"addr\": \"%s\"}\n", kind, k ? rd.slot : -1, k ? rd.addr : "");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "tags") == 0)
        return cmd_tags(atoi(argv[2]));
    if (argc == 4 && strcmp(argv[1], "map") == 0)
        return cmd_map(argv[2], atoi(argv[3]));
    if (argc == 3 && strcmp(argv[1], "redirect") == 0)
        return cmd_redirect(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "keyslot") == 0) {
        for (int i = 2; i < argc; i++)
            printf("%d\n", cluster_keyslot(argv[i], strlen(argv[i])));
        return 0;
    }
    return usage();
}
