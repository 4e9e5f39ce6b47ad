/* rsync.h — a blocking Redis connection for the MySQL pool threads (restore), where waiting
 * is fine and pipelining hundreds of script calls in a row is what matters. Same address,
 * password, db and timeout as everything else; scripts are loaded on connect. */
#ifndef HG_RSYNC_H
#define HG_RSYNC_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "config.h"
#include "scripts.h"

/* Connect, authenticate, select the db, load the scripts. NULL with err filled. */
redisContext *rsync_connect(const struct config *cfg, char *err, size_t errlen);

/* Queue EVALSHA of `script` (argv[0..2] reserved, as rconn_eval). Send with rsync_reply. */
int rsync_append_eval(redisContext *c, enum script_id script, int argc, const char **argv, size_t *lens);

/* Read the next reply (caller frees with freeReplyObject). NULL on connection error;
 * an error reply is returned as such. */
redisReply *rsync_reply(redisContext *c);

#endif
