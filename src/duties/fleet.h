/* fleet.h — this instance among the others that share one Redis.
 *
 * Every second the instance records a heartbeat (with a small stats summary) in Redis and
 * reads back the live instances — those heard from within 3 s. Each shard's mover duty
 * goes to one live instance by rendezvous hashing (the instance with the highest
 * hash(instance, shard)), which every instance computes alike from the same list: no
 * coordination, and when an instance joins or leaves only its share of shards moves.
 * Ownership only decides who moves a shard *precisely*; every instance still checks every
 * shard once a second, so a dead owner costs at most a second of lateness until the others
 * stop hearing from it. Runs on the keeper's loop (keeper.h). */
#ifndef HG_FLEET_H
#define HG_FLEET_H

#include "base/sbuf.h"

struct app;
struct rlink;
struct fleet;

/* Called on the keeper's loop when the set of shards this instance owns changes. */
typedef void (*fleet_owned_fn)(const char *owned, int shards, void *arg);

struct fleet *fleet_new(struct app *app, struct rlink *rc, fleet_owned_fn on_change, void *arg);
void fleet_free(struct fleet *f);

/* Heartbeat and recompute ownership; call once a second. `local_stats` is this instance's
 * summary (a JSON object) published for the fleet view. */
void fleet_tick(struct fleet *f, const char *local_stats);

/* Leave the registry now (shutdown), so the others take over this instance's shards. */
void fleet_leave(struct fleet *f);

/* Append ,"fleet":{"instances":[...]} from the last heartbeat ([] with f NULL, or before
 * the first). Thread-safe. */
void fleet_stats_json(struct fleet *f, struct sbuf *sb);

/* Rendezvous owner of `shard` among names[0..n) (exposed for unit tests). */
int fleet_owner(const char *const *names, int n, int shard);

#endif
