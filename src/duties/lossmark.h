/* lossmark.h — noticing that Redis came back with older data than this instance wrote.
 *
 * Once a second, on the keeper's loop, each shard gets this instance's mark (mark.lua): a
 * number that only grows, compared with the one written last in the same atomic step. Redis
 * restarted from a snapshot, or a replica promoted after asynchronous replication dropped the
 * master's last writes, holds an older mark ("rolled back"); Redis that lost everything holds
 * none ("lost"). Either is a loss: jobs deleted or finished since may be live again, jobs
 * pushed since may be missing. It is logged, counted (hourglass_redis_losses_total), named in
 * /health (member redisLoss; status "degraded" after a rollback) until a restore completes
 * after it (restore writes its end time into each shard), and reported to `on_loss` (the
 * keeper runs the two-way restore there when [redis] auto_restore is on).
 *
 * A rollback also fences the shard in Redis (mark.lua): it moves and delivers nothing until
 * its fence check (restore_fence_check, durable/restore.h) has let MySQL's newer states win.
 * Every answer that says the shard is fenced is reported to `on_fenced` (the keeper asks for
 * the check there, so it runs at once, and again while it has not succeeded), and
 * app->redis_fenced counts the shards this instance last saw fenced (/health).
 *
 * It sees what happened while this process ran: a Redis loss during a restart of the daemon
 * itself is not noticed (the runbook says to run /reStore after such an event). */
#ifndef HG_LOSSMARK_H
#define HG_LOSSMARK_H

struct app;
struct store;
struct lossmark;

struct lossmark *lossmark_new(struct app *app, struct store *store, void (*on_loss)(void *arg),
                              void (*on_fenced)(int shard, void *arg), void *arg);
void lossmark_free(struct lossmark *lm);

/* Check and advance every shard's mark (calls still in flight are not repeated). */
void lossmark_tick(struct lossmark *lm);

#endif
