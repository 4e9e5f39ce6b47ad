/* mover.h — making due jobs ready and expiring leases, shard by shard (architecture.md,
 * "The mover"). Runs on the keeper's loop (keeper.h), which feeds it wake-ups, shard
 * ownership and its once-a-second safety tick.
 *
 * Timing: for every shard it moves, the mover knows the earliest entry of the shard's delay
 * zset (each move.lua call returns it) and sleeps until the earliest of those, waking early
 * when a push, release or reschedule makes a sooner entry (the scripts publish "<shard> <due>"
 * on <prefix>:wake, which pubsub.c hands to mover_wake), and checking every shard at least
 * once a second regardless. A shard owned by another instance (fleet.h) is only checked by
 * the safety tick. */
#ifndef HG_MOVER_H
#define HG_MOVER_H

#include <stdint.h>

struct app;
struct event_base;
struct store;
struct mover;

/* A mover for every shard on `base`, calling scripts through `store`. `who`: store_who() of
 * the keeper thread. NULL when out of memory. */
struct mover *mover_new(struct app *app, struct event_base *base, struct store *store, const char *who);
void mover_free(struct mover *m);

/* Once a second: every shard, owned or not (the safety net). */
void mover_tick(struct mover *m);

/* A sooner entry is due at `due` (unix ms) on `shard` (a wake-up from pub/sub). */
void mover_wake(struct mover *m, int shard, int64_t due);

/* Wake-ups may have been missed (Redis reconnected): look at every owned shard now. */
void mover_rescan(struct mover *m);

/* The shards this instance owns changed (owned[s] != 0: ours). */
void mover_set_owned(struct mover *m, const char *owned, int shards);

/* This instance moves `shard` precisely (fleet.h); other background duties follow it. */
int mover_owns(const struct mover *m, int shard);

/* Stop the timer (shutdown; the loop ends soon after). */
void mover_stop(struct mover *m);

/* Totals since start, for /stats. Thread-safe. */
long long mover_moved_total(const struct mover *m);
long long mover_expired_total(const struct mover *m);

#endif
