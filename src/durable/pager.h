/* pager.h — the pager: far jobs (MySQL only, state 'far') into Redis shortly before they are due
 * (architecture.md, "Tiers").
 *
 * A job pushed due later than now + [queue] horizon is committed to MySQL alone: a message row
 * in state 'far' carrying its far key (far_shard, far_run_at, id: message's idx_far, schema 6).
 * One pager thread per instance pages the
 * far jobs of the shards this instance moves (the mover's shard ownership, fleet.h: so
 * instances share the paging without loading the same rows twice, and a dead instance's
 * shards are taken over with its mover duties):
 *
 *   every PAGER_TICK_MS, per owned shard, the rows whose far key is due before
 *   bucket_end(now + lead), CHUNK at a time in key order (one range of idx_far) — unless one
 *   count over the owned shards, first, finds none (an idle pager: one statement a tick):
 *   1. read them;
 *   2. put them into Redis with restore.lua (insert-if-absent: a job Redis holds is left, a job
 *      that ended meanwhile left a tombstone — finish/delete leave them while the shard's
 *      "paging" set holds a token, one per step between this write and its commit in 3 — and a
 *      bizKey held by another job is not taken);
 *   3. in one MySQL transaction, with the message rows locked: for each row still 'far' at the
 *      version read, clear its far key, delete its far_biz row, mark it delayed/ready
 *      (or deleted, when its bizKey went to another job), subtract it from far_count, and
 *      advance the watermark (far_mark); a row whose key is still there but whose message
 *      moved on (an earlier step paged it and died before its commit) loses its key and count
 *      too. A row that changed between 1 and 3 (deleted, rescheduled: its key is gone) is
 *      taken back out of Redis (unpage.lua, guarded on the version written in 2).
 * Step 3 runs on two committer threads, shard s on committer s mod 2, while the pager reads and
 * sends the next chunks: different shards' chunks lock disjoint rows, a shard's keep their order
 * (pager_commit.h; pager.c is the thread and steps 1-2, pager_counts.h the far counts).
 * A crash anywhere leaves the far keys of what was not committed in 3; paging them again is
 * harmless (2 skips what Redis holds or what ended), so nothing is lost or delivered twice.
 *
 * lead = horizon - min(60 s, horizon / 2); bucket = min(10 s, max(50 ms, horizon / 8)); a push is
 * far only beyond now + horizon > now + lead + bucket, so paging never runs behind a push. (A far row due
 * before what was paged — another instance's clock, a reschedule — is still found: each pass
 * reads the shard's far keys from the start of the range, and paged rows leave it.) With
 * horizon 0 nothing is pushed far; rows of an earlier setting page in with lead 60 s. */
#ifndef HG_PAGER_H
#define HG_PAGER_H

#include <stddef.h>
#include <stdint.h>

#include "durable/pager_counts.h"

struct app;
struct config;
struct sbuf;

#define PAGER_TICK_MS 100

int64_t pager_lead_ms(const struct config *cfg);
int64_t pager_bucket_ms(const struct config *cfg);

/* Pacing. Paging flat out saturates a small machine (MySQL's step 3 above all) and makes every
 * other job late while it lasts (figure 13). So a pass first counts what it will page and
 * finds the earliest due time among it; while that job is due more than pager_pace_slack_ms
 * away, the pass spreads its jobs evenly over the time until then (at PAGER_PACED_RATE jobs/s
 * at least, in chunks of 250 rather than 1,000, one restore.lua call per round trip), and from
 * then on, or when the count is huge, it pages at full speed: pacing leaves at least the
 * slack for full speed (15 minutes at the default hour: ~10 M jobs here), so it does not make
 * a bucket late that flat-out paging had in time. With the default hour (lead 59 min) a
 * million jobs due in one minute page in at the floor rate, over ~8 minutes. Slack =
 * max(lead / 4, 60 s); a lead of a minute or less (short horizons: tests) is never paced. */
#define PAGER_PACED_RATE 2000
int64_t pager_pace_slack_ms(const struct config *cfg);

/* Start the threads (also with horizon 0: it keeps the far counts, which restore and older far
 * rows may still need). 0 / -1. */
int pager_start(struct app *app);
/* Stop it (a chunk in progress is finished or abandoned; both are safe). */
void pager_stop(void);

/* The shards this instance moves (owned[s] != 0), from the keeper's fleet duty. Thread-safe. */
void pager_set_owned(const char *owned, int shards);

/* Page this one far job now (a reschedule brought it within the horizon). Thread-safe. */
void pager_page_now(int shard, int64_t run_at, uint64_t id);

/* The far counts per topic (pager_far_counts, pager_far_count) are in pager_counts.h; the
 * pager refreshes them twice a second. */

/* ,"pager":{...} for /stats; the pager's series for /metrics. Thread-safe. */
void pager_stats_json(const struct config *cfg, struct sbuf *sb);
void pager_metrics(struct sbuf *sb);

#endif
