/* layout.h — the data layout check. The shard count is part of the data (a job id names its
 * shard, ids.h), so an instance must refuse to work on data written with another one. The
 * count is recorded in "<prefix>:{w}:meta" (field "shards") by the first instance that finds
 * none — a new or emptied Redis — and compared by every instance: at start-up (blocking, so
 * a wrong config fails at once with a message) and on the keeper's loop at every connect
 * and every 10 s (so an emptied and re-filled Redis is noticed). */
#ifndef HG_LAYOUT_H
#define HG_LAYOUT_H

#include <hiredis/hiredis.h>

struct app;
struct rconn;

enum layout_verdict {
    LAYOUT_DIFFERS = -1, /* the data says another shard count */
    LAYOUT_UNKNOWN = 0,  /* not checked yet (Redis unreachable, or the check failed) */
    LAYOUT_OK = 1,
};

/* Blocking check on a connected context; *recorded gets the count the data has (when known). */
enum layout_verdict layout_check_blocking(redisContext *c, const char *prefix, int shards, int *recorded);

/* Asynchronous check on rc: records the verdict in app->layout and logs when it changes. */
void layout_check(struct rconn *rc, struct app *app);

#endif
