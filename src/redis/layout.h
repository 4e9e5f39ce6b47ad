/* layout.h — the data layout check. The shard count is part of the data (a job id names its
 * shard, ids.h), and so is the way shard keys are tagged (shardtag.h: "{3}" for a single
 * Redis, "{3.2520}" for a Redis Cluster), so an instance must refuse to work on data written
 * with another count or tag scheme. Both are recorded in "<prefix>:{w}:meta" (fields "shards"
 * and "tags"; a record without "tags", written before it existed, means plain) by the first
 * instance that finds none — a new or emptied Redis — in one step (layout.lua), and compared
 * by every instance: at start-up (blocking, so a wrong config fails at once with a message)
 * and on the keeper's loop at every connect and every 10 s (so an emptied and re-filled Redis
 * is noticed). */
#ifndef HG_LAYOUT_H
#define HG_LAYOUT_H

#include <hiredis/hiredis.h>
#include <stddef.h>

struct app;
struct config;
struct rlink;
struct rblock_shards;

enum layout_verdict {
    LAYOUT_DIFFERS = -1, /* the data says another shard count or tag scheme */
    LAYOUT_UNKNOWN = 0,  /* not checked yet (Redis unreachable, or the check failed) */
    LAYOUT_OK = 1,
};

/* What the record says: the shard count, and the tag scheme's name as stored ("plain",
 * "cluster", or whatever else someone wrote there, which differs from both). */
struct layout_record {
    int shards;
    char tags[16];
};

/* Blocking check on a connected context (the scripts need not be loaded) of this instance's
 * [redis] shards and shard tags (shardtag_scheme()); *found gets the record (when known). */
enum layout_verdict layout_check_blocking(redisContext *c, const char *prefix, int shards, struct layout_record *found);

/* Told the verdict of one layout_check (LAYOUT_UNKNOWN when the check failed), on rc's thread. */
typedef void (*layout_done_fn)(enum layout_verdict v, void *arg);

/* Asynchronous check on rc: records the verdict in app->layout, logs when it changes, then
 * tells done (may be NULL). */
void layout_check(struct rlink *rc, struct app *app, layout_done_fn done, void *arg);

/* Blocking connections for every shard (rblock_shards_open), handed out only once the layout
 * record, read after they were made, says this instance's shard count and tags: a blocking
 * writer (the outbox, the pager, topics' catch-up, the reconciler, /reStore) that (re)connects
 * to a Redis holding another layout's data — or that cannot check it yet — writes nothing
 * there. NULL with err filled and *v (unless NULL) the verdict (LAYOUT_UNKNOWN when Redis could
 * not be reached or checked). The caller frees the set with rblock_shards_free. */
struct rblock_shards *layout_open_shards(const struct config *cfg, int load_scripts, enum layout_verdict *v, char *err,
                                         size_t errlen);

/* The operator's sentence for a LAYOUT_DIFFERS: "the data under prefix "hg" was written with
 * [redis] shards = 8, this instance has 4", or the same of the tag schemes, into out. */
void layout_explain(const struct layout_record *found, const char *prefix, int shards, char *out, size_t cap);

#endif
