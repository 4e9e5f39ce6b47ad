/* outbox.h — the outbox thread: carries transitions from the Redis outbox streams to MySQL.
 *
 * Every Lua script that changes a job appends the change to its shard's stream
 * (<prefix>:{n}:log, see src/redis/lua/lib.lua) atomically with the change itself. This thread
 * reads those entries through the consumer group "journal" (each entry goes to one
 * instance), hands each batch to the journal as one submission, waits for the commit, and
 * only then acknowledges and deletes the entries. So a transition reaches MySQL even when
 * the script's reply was lost (a timeout, a dropped connection) or the instance that ran it
 * died a moment later: the entry stays pending in the group, and another instance claims it
 * after OUTBOX_CLAIM_IDLE_MS. Writes are idempotent (a transition row is unique per job,
 * version and state; message rows only move to newer versions), so an entry written twice
 * is harmless.
 *
 * It has its own blocking Redis connection, so a hung Redis never holds up the journal's
 * MySQL work. It reads every shard's stream with one pipelined XREADGROUP per shard (no
 * BLOCK: BLOCK waits on one stream at a time) and, when nothing came, looks again after
 * IDLE_POLL_US (10 ms) — the delay a transition may spend in the outbox on an idle queue. */
#ifndef HG_OUTBOX_H
#define HG_OUTBOX_H

#include "core/config.h"
#include "durable/journal.h"

#define OUTBOX_CLAIM_IDLE_MS 15000

struct loopq;

int outbox_start(const struct config *cfg, const char *consumer) __attribute__((warn_unused_result));

/* Carry what is left (for at most deadline_ms), then stop the thread. */
void outbox_stop(int deadline_ms);

/* Call `done` on `reply_to` once every outbox entry that existed before this call has been
 * committed in MySQL (done(0, arg) if that cannot happen soon: MySQL or Redis down). For
 * read-your-writes in /jobs/{id}, and for /reStore (MySQL must know every job that ended
 * before its tombstones were switched on). `reply_to` NULL: `done` runs on the outbox thread
 * itself, and must only hand the outcome over (signal a waiter). */
int outbox_barrier(struct loopq *reply_to, journal_done_fn done, void *arg) __attribute__((warn_unused_result));

/* outbox_barrier for a thread that may block (a pool task: /reStore, a purge): wait until every
 * outbox entry that existed before the call is committed in MySQL. While it waits, tick(arg)
 * runs about once a second (with the number of the second); a tick answering nonzero gives
 * up. 1 once caught up; 0 when not (the barrier failed, or a tick gave up). */
int outbox_wait(int (*tick)(int second, void *arg), void *arg);

/* outbox_wait for the whole fleet, on `set` (a blocking connection to every shard): the
 * outbox is a consumer group, so an entry may be held by another instance's outbox (which
 * commits it in its own time, or, when that instance died or cannot reach MySQL, another takes
 * it over once it is OUTBOX_CLAIM_IDLE_MS old), and this instance's barrier sees only its own
 * reads. So it waits until no shard's stream holds an entry as old as the newest one there when
 * it was called: entries leave a stream only once committed, by whoever. For /reStore: a job that ended just before the
 * restore's tombstones went up must be ended in MySQL before the restore reads it. tick as
 * outbox_wait's; gives up (0) after OUTBOX_FLEET_WAIT_MS or when Redis fails. 1 once caught
 * up. */
#define OUTBOX_FLEET_WAIT_MS (2 * OUTBOX_CLAIM_IDLE_MS + 5000)
struct rblock_shards;
int outbox_wait_fleet(struct rblock_shards *set, int (*tick)(int second, void *arg), void *arg);

#endif
