/* rblock.h — the one blocking Redis connector: for the start-up checks (main.c) and the MySQL
 * pool threads (restore), where waiting is fine and pipelining hundreds of script calls in a
 * row is what matters. Same address (host:port, [v6]:port or unix:/path — rconn.h's
 * parser), password, db and timeout as the asynchronous connections (rconn.h).
 *
 * Every connection is made for a shard, a key, or all shards (rblock_shards), never "to Redis":
 * with [redis] cluster each shard's keys live on the master that serves its slot. A blocking
 * user does not follow redirects: an answer that says the cluster moved (rblock_shard_reply)
 * fails its step like a lost connection, and it reconnects with a fresh map, as it recovers
 * from any Redis failure. */
#ifndef HG_RBLOCK_H
#define HG_RBLOCK_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "core/config.h"
#include "redis/scripts.h"

enum rblock_failure {
    RBLOCK_UNREACHABLE, /* no connection (refused, timed out, bad address) */
    RBLOCK_REFUSED,     /* connected, but AUTH, SELECT or FUNCTION LOAD failed: a config error */
};

/* Connect to the server that holds `key`, authenticate, select the db and (load_scripts) load
 * the scripts' library (scripts.h): with [redis] cluster, the master that serves its slot in the map the first
 * seed that answers gives (CLUSTER SLOTS; db 0); else the one server. The key is not read: any
 * key of the slot will do ("{w}" for every {w} key). NULL with err and (unless NULL) *why
 * filled; a failure names the last seed tried. */
redisContext *rblock_connect_key(const struct config *cfg, const char *key, size_t len, int load_scripts,
                                 enum rblock_failure *why, char *err, size_t errlen);

/* rblock_connect_key for shard's keys (any key with its tag). */
redisContext *rblock_connect_shard(const struct config *cfg, int shard, int load_scripts, enum rblock_failure *why,
                                   char *err, size_t errlen);

/* Blocking connections for every shard: the one server for a single Redis; for a cluster, one
 * per master that serves a shard, by the map the first seed that answers gives (read once).
 * After a failover or a migration a shard's commands fail (MOVED, a lost connection): the
 * caller frees the set and opens a new one, as it reconnects a lost context today. */
struct rblock_shards;

/* NULL with err (and *why unless NULL) filled. */
struct rblock_shards *rblock_shards_open(const struct config *cfg, int load_scripts, enum rblock_failure *why,
                                         char *err, size_t errlen);

/* The context that serves shard (0 <= shard < [redis] shards): commands pipelined on it are
 * answered in order, as on any context, whichever other shards share it. */
redisContext *rblock_shard(const struct rblock_shards *set, int shard);

void rblock_shards_free(struct rblock_shards *set);

/* The lowest shard whose keys may go in one command with shard's (itself when it is the
 * first): any shard's on a single Redis (one connection); none but its own in a cluster, where
 * every shard is a slot of its own (a command across slots is refused, CROSSSLOT, even on one
 * node). One command per such group reads the streams of all its shards. */
int rblock_shards_first(const struct rblock_shards *set, int shard);

/* Shut every connection's socket of `set`, a struct rblock_shards * (another thread may be
 * blocked in a call on one: it fails now). The set must still be freed by its owner. A
 * bgthread_cut_fn (bgthread.h), for a stop to cut loose a thread blocked on the set. */
void rblock_shards_cut(void *set);

/* Read and drop one reply per shard from its connection, in shard order (a command was queued
 * on each shard's connection, in that order). 0, or -1 as rblock_drain. */
int rblock_shards_drain(struct rblock_shards *set);

/* What went wrong on the connections, for a log line ("" when nothing did). */
const char *rblock_shards_errstr(const struct rblock_shards *set);

/* rblock_reply, but NULL (as for a lost connection) for an answer that says the cluster moved
 * (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, cluster.h): the caller's set is out of date; it frees it
 * and opens a new one. A single Redis never answers so. */
redisReply *rblock_shard_reply(redisContext *c);

/* Queue FCALL of `script` (argv[0..2] reserved, as rconn_eval). Send with rblock_reply. */
int rblock_append_eval(redisContext *c, enum script_id script, int argc, const char **argv, size_t *lens);

/* FUNCTION LOAD the scripts' library on `c` (loaded already, or refused by a full Redis, is
 * fine: the calls then say OOM themselves). 0, or -1 with err. */
int rblock_load_library(redisContext *c, char *err, size_t errlen);

/* Read the next reply (caller frees with freeReplyObject). NULL on connection error;
 * an error reply is returned as such. */
redisReply *rblock_reply(redisContext *c);

/* Read and drop the next n replies (commands queued with redisAppendCommand for their effect
 * only). 0, or -1 when one was an error or the connection failed. */
int rblock_drain(redisContext *c, int n);

#endif
