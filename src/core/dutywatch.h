/* dutywatch.h — which background duties have stopped succeeding, for /health and /metrics.
 *
 * A background duty (the journal's outbox reader per shard, the pager, the mover per shard,
 * the reconciler, the restore and fence check, the scheduler) that fails keeps retrying by
 * itself; what an operator must see is one that has not succeeded for longer than its bound,
 * whatever stops it: a server down, a refusal, a partition. Each duty reports here: ok after
 * every success, failed with the error after every failure. A duty is stuck when it has been
 * failing for longer than its bound, or — for a periodic duty, one that succeeds every
 * iteration while it runs — when it has not succeeded for longer than its bound (it hangs in
 * a call). /health lists the stuck ones under "stuck" and says "degraded" (contract,
 * "Background duties are visible"); /metrics counts them. A duty that stops for a reason
 * (its shard now owned by another instance, shutdown) clears itself.
 *
 * Any thread; a mutex per call (a few a second per duty). */
#ifndef HG_DUTYWATCH_H
#define HG_DUTYWATCH_H

#include <stdint.h>

struct sbuf;

enum dutywatch_duty {
    DUTY_OUTBOX,     /* per shard: the journal's reader of the shard's outbox stream */
    DUTY_PAGER,      /* far jobs paged in from MySQL */
    DUTY_MOVER,      /* per shard: due jobs made ready, leases expired */
    DUTY_RECONCILER, /* outcomes in doubt settled */
    DUTY_RESTORE,    /* a restore or a rolled-back shard's fence check */
    DUTY_SCHEDULER,  /* schedules fired */
    DUTY_COUNT
};

#define DUTYWATCH_BOUND_MS 5000 /* failing (or, periodic, silent) this long: stuck */
#define DUTYWATCH_SHARDS   1024 /* per-shard duties: shards beyond are folded into the last */

/* A success of `duty` on `shard` (-1: not per shard), now. */
void dutywatch_ok(enum dutywatch_duty duty, int shard);

/* A failure: its error (a short text); the duty fails since the first failure after a success. */
void dutywatch_failed(enum dutywatch_duty duty, int shard, const char *error);

/* A success (error NULL) or failure of every shard 0..shards-1 of a per-shard duty at once,
 * under one lock: for a thread whose one cycle serves every shard (the outbox reader). */
void dutywatch_all_shards(enum dutywatch_duty duty, int shards, const char *error);

/* The duty stopped on purpose (its shard went to another instance): no longer watched. */
void dutywatch_clear(enum dutywatch_duty duty, int shard);

/* Append ",\"stuck\":[{\"duty\",\"shard\",\"sinceMs\",\"error\"}...]" when some duty is stuck at
 * `now_ms` (sinceMs: how long it has not succeeded); nothing when none is. Returns how many. */
int dutywatch_stuck_json(struct sbuf *sb, int64_t now_ms);

/* Prometheus lines: hourglass_duties_stuck and hourglass_duty_stuck_seconds{duty,shard}. */
void dutywatch_metrics(struct sbuf *sb, int64_t now_ms);

/* Forget everything (tests). */
void dutywatch_reset(void);

#endif
