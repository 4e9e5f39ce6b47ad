/* mover.h — the mover thread: makes due jobs ready and expires leases, shard by shard
 * (design.md, decisions 4 and 5). It also hosts the pub/sub subscriber that tells the HTTP
 * workers about newly ready jobs, and the id-generator lease.
 *
 * Timing: for every shard it moves, the mover knows the earliest entry of the shard's delay
 * zset (each move.lua call returns it) and sleeps until the earliest of those, waking early
 * when a push, release or reschedule makes a sooner entry (the scripts publish "<shard> <due>"
 * on <prefix>:wake), and checking every shard at least once a second regardless. */
#ifndef HG_MOVER_H
#define HG_MOVER_H

#include "app.h"
#include "sbuf.h"

struct mover;

/* Create the mover (its loop, Redis connections) and start its thread. */
struct mover *mover_start(struct app *app);

/* Stop the thread (releasing the id lease) and free the mover. */
void mover_stop(struct mover *m);

/* Append ,"mover":{...} to a /stats object. Thread-safe. */
void mover_stats_json(struct mover *m, struct sbuf *sb);

#endif
