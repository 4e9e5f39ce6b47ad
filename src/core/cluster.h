/* cluster.h — Redis Cluster routing, the pure part: key slots, the slot map read from a
 * CLUSTER SLOTS reply, MOVED/ASK redirections, and the hash tags that place the shards.
 *
 * Debian's hiredis (0.14) knows nothing of Redis Cluster, so routing is ours. This module does
 * no I/O and keeps no state: the caller (rconn's owner) asks CLUSTER SLOTS of a seed node,
 * hands the reply to cluster_map_parse, sends each shard's commands to the master the map
 * names, and on an error reply asks cluster_redirect_parse whether it was a MOVED (refresh
 * the map, re-send there) or an ASK (send ASKING then the command, once, to that node).
 * Every reply comes from the network, so a malformed one is refused with a message rather
 * than trusted.
 *
 * Shards under Cluster: shard n of S is tagged so that its slot is the middle slot of the
 * n-th of S equal slices of 0..16383 (cluster_shard_slot). The tag depends only on n and S,
 * never on the current map, because it is part of the data layout. Placing each shard at the
 * middle of its slice means a master holding a contiguous range of L slots serves either
 * floor(L*S/16384) or ceil(L*S/16384) shards — so masters with equal ranges (redis-cli's
 * split, or any even one) differ by at most one shard. */
#ifndef HG_CLUSTER_H
#define HG_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_SLOTS    16384
#define CLUSTER_HOST_MAX 255                    /* a DNS name's length limit */
#define CLUSTER_ADDR_MAX (CLUSTER_HOST_MAX + 9) /* "[" host "]:" port NUL */
#define CLUSTER_ID_LEN   40                     /* node ids: 40 hex digits */
#define CLUSTER_ERR_MAX  160
#define CLUSTER_TAG_MAX  16 /* "255.1234567" and a NUL fit */

/* The slot of a key: CRC16 (XMODEM) mod 16384 of its hash tag — the bytes between the first
 * '{' and the first '}' after it, if there are any — or of the whole key otherwise. */
int cluster_keyslot(const char *key, size_t len);

/* A node as the map names it: "host:port" (or "[v6]:port", as raddr_parse (core/raddr.h) reads it)
 * and its node id ("" when the reply gave none). */
struct cluster_node {
    char addr[CLUSTER_ADDR_MAX];
    char id[CLUSTER_ID_LEN + 1];
};

struct cluster_master {
    struct cluster_node node;
    struct cluster_node *replicas; /* as CLUSTER SLOTS listed them (healthy ones only) */
    int nreplicas;
    int nslots; /* slots this master serves */
};

/* A range as the reply gave it (a master may own several). */
struct cluster_range {
    int first, last; /* inclusive */
    int master;      /* index into masters */
};

struct cluster_map {
    struct cluster_master *masters; /* distinct, in the order the reply first named them */
    int nmasters;
    struct cluster_range *ranges;
    int nranges;
    int covered;                  /* slots with a master; CLUSTER_SLOTS when all are */
    int16_t owner[CLUSTER_SLOTS]; /* slot -> master index, -1 when no master serves it */
};

/* Read a CLUSTER SLOTS reply (hiredis, RESP2) into a new map; the caller frees it with
 * cluster_map_free. asked_host is the host the command was sent to: a node whose endpoint the
 * reply leaves empty or nil (cluster-preferred-endpoint-type unknown-endpoint) lives there;
 * NULL refuses such a reply. NULL with a message in err when the reply is an error, is not
 * the shape CLUSTER SLOTS has, names a port or slot out of range, claims a slot twice, names
 * a master whose endpoint is unknown ("?"), assigns no slot at all, or memory runs out. Slots
 * that no range claims are allowed (a cluster in trouble): they look up as -1. */
struct cluster_map *cluster_map_parse(const redisReply *reply, const char *asked_host, char *err, size_t errlen)
    __attribute__((warn_unused_result));

void cluster_map_free(struct cluster_map *m);

/* The master serving a slot (an index into m->masters), or -1 (no master, or slot out of range). */
int cluster_map_lookup(const struct cluster_map *m, int slot);

/* The master serving a key, or -1. */
int cluster_map_key_master(const struct cluster_map *m, const char *key, size_t len);

/* The master serving shard n of `shards`, or -1. */
int cluster_map_shard_master(const struct cluster_map *m, int n, int shards);

/* How many of `shards` shards each master serves, into counts[0..m->nmasters-1]. Returns the
 * number of shards no master serves (0 in a healthy cluster), or -1 for bad arguments. */
int cluster_map_shard_counts(const struct cluster_map *m, int shards, int *counts);

enum cluster_redirect_kind {
    CLUSTER_NOT_REDIRECT = 0, /* an ordinary error reply */
    CLUSTER_MOVED,            /* the slot lives elsewhere now: refresh the map, re-send there */
    CLUSTER_ASK,              /* the slot is being migrated: ASKING + the command there, once */
};

struct cluster_redirect {
    enum cluster_redirect_kind kind;
    int slot;
    char addr[CLUSTER_ADDR_MAX];
};

/* Is this error reply (hiredis's str/len, without the '-') "MOVED <slot> <host>:<port>" or
 * "ASK ..."? Fills *out and returns its kind; anything else, or a redirect with a slot or port
 * out of range or a host with spaces or control characters, is CLUSTER_NOT_REDIRECT. An empty
 * host (cluster-preferred-endpoint-type unknown-endpoint) means asked_host. out->addr is left
 * empty when the node cannot be named — "?" (hostname type, hostname not set), or an empty host
 * with asked_host NULL: the caller cannot follow it, and refreshes the map instead. */
enum cluster_redirect_kind cluster_redirect_parse(const char *s, size_t len, const char *asked_host,
                                                  struct cluster_redirect *out);

/* Error replies about the cluster rather than the command. MOVED and ASK name where the slot
 * lives (cluster_redirect_parse reads them); TRYAGAIN (a multi-key command while its slot
 * migrates) and CLUSTERDOWN (no quorum, or the slot has no master yet) pass by themselves, so
 * the command is worth sending again a little later. */
enum cluster_error_kind {
    CLUSTER_ERR_OTHER = 0, /* not about the cluster: the command's own failure */
    CLUSTER_ERR_MOVED,
    CLUSTER_ERR_ASK,
    CLUSTER_ERR_TRYAGAIN,
    CLUSTER_ERR_DOWN,
    /* "Script attempted to access a non local key": a script met a key its node does not
     * serve now — its slot is migrating. Our scripts meet it at their first line (the guard
     * scripts/embed-lua.py puts first in every function in cluster mode: one EXISTS of KEYS[1]
     * and a key that never exists, which Redis refuses exactly while the slot migrates or
     * imports), before any write, so it is retried like TRYAGAIN. */
    CLUSTER_ERR_NONLOCAL,
};

/* Which of these an error reply (hiredis's str/len, without the '-') is: by its first word,
 * and CLUSTER_ERR_NONLOCAL by Redis's words anywhere in it (it comes wrapped in the script's
 * error: "ERR Script attempted to access a non local key in a cluster node script: ..."). */
enum cluster_error_kind cluster_error_kind(const char *s, size_t len);

/* The fixed slot of shard n (0 <= n < shards, 1 <= shards <= 16384): the middle slot of the
 * n-th of `shards` equal slices of 0..16383. -1 for bad arguments. */
int cluster_shard_slot(int n, int shards);

/* The hash tag of shard n under Cluster: the first of "n", "n.0", "n.1", ... whose slot is
 * cluster_shard_slot(n, shards). Keys of the shard are then "<prefix>:{<tag>}:...". Writes it
 * NUL-terminated into out and returns its length, or -1 for bad arguments (shards is at most
 * IDS_MAX_SHARDS here) or cap < CLUSTER_TAG_MAX. A search of ~16384 CRCs on average (about 40 ms for all 256 tags of
 * 256 shards here): compute each tag once, at start-up. Part of the data layout: never change the rule. */
int cluster_shard_tag(int n, int shards, char *out, size_t cap) __attribute__((warn_unused_result));

#endif
