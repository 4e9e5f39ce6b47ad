/* shardtag.h — the hash tag in every key of a shard: "<prefix>:{<tag>}:<suffix>" (rcodec.h's
 * rkey builds them all).
 *
 * The tag scheme is part of the data layout, like the shard count (layout.h records both):
 *   plain    the tag is the shard number, "3": the keys a single Redis has always held, byte
 *            for byte;
 *   cluster  the tag is cluster_shard_tag(n, shards), "3.2520": shard n's slot is the middle of
 *            the n-th of `shards` equal slices of 0..16383, so the masters of a Redis Cluster
 *            share the shards evenly (cluster.h). It still starts with the shard number and a
 *            '.', which is how the scripts read the shard back (src/redis/lua/lib.lua).
 *
 * The table is computed once, by shardtag_init in main() before any thread starts (a cluster
 * tag costs ~16384 CRCs: ~40 ms for all 256 of 256 shards here), and only read afterwards, so any
 * thread may look a tag up without a lock, and a lookup is an array index. Before
 * shardtag_init every lookup fails: a forgotten init shows at once instead of writing keys
 * under a guessed scheme. */
#ifndef HG_SHARDTAG_H
#define HG_SHARDTAG_H

#include <stddef.h>

#include "core/cluster.h"

enum shardtag_scheme {
    SHARDTAG_PLAIN,
    SHARDTAG_CLUSTER,
};

#define SHARDTAG_MAX CLUSTER_TAG_MAX /* a tag and its NUL */

/* Compute the tags of shards 0..shards-1 (1..IDS_MAX_SHARDS) under `scheme`, replacing the
 * table. 0, or -1 with err filled (and no table). Not thread-safe: call before threads start. */
int shardtag_init(int shards, enum shardtag_scheme scheme, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The tag of `shard` (NUL-terminated, in the table: valid for the life of the process), its
 * length in *len unless len is NULL; NULL when shard is not in the table. */
const char *shardtag(int shard, size_t *len);

/* The scheme of the table (SHARDTAG_PLAIN before shardtag_init). */
enum shardtag_scheme shardtag_scheme(void);

/* "plain" or "cluster", as the layout record stores it; and back (0, or -1 for another word). */
const char *shardtag_scheme_name(enum shardtag_scheme scheme);
int shardtag_scheme_parse(const char *name, enum shardtag_scheme *out) __attribute__((warn_unused_result));

#endif
