/* shardtag.c — see shardtag.h. */
#include "core/shardtag.h"
#include "core/ids.h"
#include "base/sbuf.h"

#include <stdio.h>
#include <string.h>

static struct {
    int shards; /* 0 until shardtag_init */
    enum shardtag_scheme scheme;
    char tag[IDS_MAX_SHARDS][SHARDTAG_MAX];
    unsigned char len[IDS_MAX_SHARDS];
} table;

int shardtag_init(int shards, enum shardtag_scheme scheme, char *err, size_t errlen)
{
    table.shards = 0;
    table.scheme = SHARDTAG_PLAIN;
    if (shards < 1 || shards > IDS_MAX_SHARDS || (scheme != SHARDTAG_PLAIN && scheme != SHARDTAG_CLUSTER)) {
        snprintf(err, errlen, "shard tags: %d shards (1..%d) or scheme %d is out of range", shards, IDS_MAX_SHARDS,
                 (int)scheme);
        return -1;
    }
    for (int n = 0; n < shards; n++) {
        int len;
        if (scheme == SHARDTAG_CLUSTER) {
            len = cluster_shard_tag(n, shards, table.tag[n], SHARDTAG_MAX);
        } else {
            char num[INT_TEXT_MAX];
            len = (int)sb_int_to_text(n, num); /* n < 256: 3 digits */
            memcpy(table.tag[n], num, (size_t)len + 1);
        }
        if (len <= 0) { /* cluster_shard_tag's search is proven to end for these arguments */
            snprintf(err, errlen, "shard tags: no cluster tag found for shard %d of %d", n, shards);
            return -1;
        }
        table.len[n] = (unsigned char)len;
    }
    table.scheme = scheme;
    table.shards = shards;
    return 0;
}

const char *shardtag(int shard, size_t *len)
{
    if (shard < 0 || shard >= table.shards)
        return NULL;
    if (len)
        *len = table.len[shard];
    return table.tag[shard];
}

enum shardtag_scheme shardtag_scheme(void)
{
    return table.scheme;
}

const char *shardtag_scheme_name(enum shardtag_scheme scheme)
{
    return scheme == SHARDTAG_CLUSTER ? "cluster" : "plain";
}

int shardtag_scheme_parse(const char *name, enum shardtag_scheme *out)
{
    if (strcmp(name, "plain") == 0)
        *out = SHARDTAG_PLAIN;
    else if (strcmp(name, "cluster") == 0)
        *out = SHARDTAG_CLUSTER;
    else
        return -1;
    return 0;
}
