/* keeper.h — the housekeeping thread ("keeper"): one event loop with its own Redis command
 * connection and subscriber, hosting the background duties that are not HTTP:
 *   mover.c    due jobs -> ready, expired leases (precise timers per shard);
 *   pubsub.c   wake-ups for the mover, ready topics for the HTTP workers;
 *   idlease.c  this instance's id-generator worker number;
 *   fleet.c    heartbeat, the live instances, which shards this instance moves;
 *   layout.c   the shard count and shard tags checked against the data;
 *   the outbox's length (store_outbox_len) for the journal's back-pressure;
 *   retention.c scheduled on the MySQL pool every [mysql] retention_interval seconds, and
 *   expiry.c, which removes dead jobs from Redis at the same age.
 * All of them run from its 1 s tick or its Redis connection's up-callback. */
#ifndef HG_KEEPER_H
#define HG_KEEPER_H

#include <stddef.h>

struct app;
struct keeper;
struct sbuf;

/* Jobs became ready on `topic` (len 0: on any topic, look at all). Called on the keeper's
 * thread; main.c passes it on to every HTTP worker. */
typedef void (*keeper_ready_fn)(const char *topic, size_t len, void *arg);

/* Create the keeper and start its thread. NULL on failure (logged). */
struct keeper *keeper_start(struct app *app, keeper_ready_fn on_ready, void *arg);

/* Stop the thread (releasing the id lease, leaving the fleet) and free everything. */
void keeper_stop(struct keeper *k);

/* Append ,"mover":{...},"fleet":{...} to a /stats object: with keeper NULL (not running yet,
 * or stopping) the same members, empty. Thread-safe (app->keeper_stats_json). */
void keeper_stats_json(void *keeper, int shards, struct sbuf *sb);

#endif
