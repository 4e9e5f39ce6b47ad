/* rsync.h — the one blocking Redis connector: for the start-up checks (main.c) and the MySQL
 * pool threads (restore), where waiting is fine and pipelining hundreds of script calls in a
 * row is what matters. Same address (host:port, [v6]:port or unix:/path — rconn.h's
 * parser), password, db and timeout as the asynchronous connections (rconn.h). */
#ifndef HG_RSYNC_H
#define HG_RSYNC_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "config.h"
#include "scripts.h"

enum rsync_failure {
    RSYNC_UNREACHABLE, /* no connection (refused, timed out, bad address) */
    RSYNC_REFUSED,     /* connected, but AUTH, SELECT or SCRIPT LOAD failed: a config error */
};

/* Connect, authenticate, select the db and (load_scripts) load every Lua script. NULL with
 * err and (unless NULL) *why filled. */
redisContext *rsync_connect(const struct config *cfg, int load_scripts, enum rsync_failure *why, char *err,
                            size_t errlen);

/* The same to the server that holds `key`: with [redis] cluster, the master that serves its
 * slot in the map the first seed that answers gives (CLUSTER SLOTS; db 0); else the one
 * server, as rsync_connect. The key is not read: any key of the slot will do ("{w}" for
 * every {w} key). A failure names the last seed tried. */
redisContext *rsync_connect_key(const struct config *cfg, const char *key, size_t len, int load_scripts,
                                enum rsync_failure *why, char *err, size_t errlen);

/* Blocking connections for every shard: the one server for a single Redis; for a cluster, one
 * per master that serves a shard, by the map the first seed that answers gives (read once).
 * After a failover or a migration a shard's commands fail (MOVED, a lost connection): the
 * caller frees the set and opens a new one, as it reconnects a lost context today. */
struct rsync_shards;

/* NULL with err (and *why unless NULL) filled. */
struct rsync_shards *rsync_shards_open(const struct config *cfg, int load_scripts, enum rsync_failure *why, char *err,
                                       size_t errlen);

/* The context that serves shard (0 <= shard < [redis] shards): commands pipelined on it are
 * answered in order, as on any context, whichever other shards share it. */
redisContext *rsync_shard(const struct rsync_shards *set, int shard);

void rsync_shards_free(struct rsync_shards *set);

/* Queue EVALSHA of `script` (argv[0..2] reserved, as rconn_eval). Send with rsync_reply. */
int rsync_append_eval(redisContext *c, enum script_id script, int argc, const char **argv, size_t *lens);

/* Read the next reply (caller frees with freeReplyObject). NULL on connection error;
 * an error reply is returned as such. */
redisReply *rsync_reply(redisContext *c);

/* Read and drop the next n replies (commands queued with redisAppendCommand for their effect
 * only). 0, or -1 when one was an error or the connection failed. */
int rsync_drain(redisContext *c, int n);

#endif
