/* firing.h — the thread that fires schedules (schedule.h, docs/api.md "Schedules").
 *
 * Every instance runs one. It keeps a copy of the `schedule` table, reloaded whenever the
 * table's signature changes (polled every FIRING_POLL_MS, so a new, changed, paused or
 * deleted schedule reaches every instance within a second). It fires only the schedules whose
 * shard (id mod [redis] shards) this instance's mover owns (keeper.h, fleet.h): one instance
 * fires each schedule, and a dead instance's schedules pass on with its shards, within the
 * seconds a takeover takes.
 *
 * A fire is pushed up to FIRING_LOOKAHEAD_MS before its time, with runAt = the fire time and
 * bizKey "<id>@<fire time>", through the daemon's own POST /push (an internal request on an
 * HTTP worker's loop, dispatch.h): the same checks, durability and bizKey dedupe as any push,
 * and the mover makes it ready at its time like any job due then — a fire is no later than
 * an ordinary job due at the same moment. Once the push is answered, the watermark
 * fired_through moves past it (compare-and-set on the row). So:
 *  - a crash between the answer and the watermark makes the next owner push the same fire
 *    again, which the bizKey dedupe answers with the job already there while it is live (it
 *    is, for at least the look-ahead: it is not due before its time);
 *  - fires older than [queue] schedule_grace when they come to be made (the daemon, or the
 *    whole fleet, was down) follow the schedule's catchUp: skip them, make the last one, or
 *    make them all (at most SCHEDULE_CATCHUP_MAX); younger ones are made, late.
 * A push refused for its content (4xx: the job template no longer passes a changed limit) is
 * logged and the fire dropped; an unavailable answer (503) is tried again a second later. */
#ifndef HG_FIRING_H
#define HG_FIRING_H

#include <stddef.h>

struct app;
struct sbuf;

#define FIRING_TICK_MS      100
#define FIRING_POLL_MS      250
#define FIRING_LOOKAHEAD_MS 1000

/* Where a push's answer goes: its status and JSON body (request.h's request_sink_fn; named
 * here so that this header stays below the HTTP layer, as the layers in architecture.md want). */
typedef void (*firing_sink_fn)(int status, const char *body, size_t len, void *arg);

/* Send a /push body into the daemon (from the scheduler's thread; the answer comes to sink on
 * another thread). 0, or -1 when it could not be sent (the sink is then never called). */
typedef int (*firing_push_fn)(const char *body, size_t len, firing_sink_fn sink, void *arg, void *ctx);

int firing_start(struct app *app, firing_push_fn push, void *push_ctx) __attribute__((warn_unused_result));
void firing_stop(void);

/* The shards this instance's mover owns (keeper.h on_owned): their schedules are ours to fire. */
void firing_set_owned(const char *owned, int shards);

/* ",\"schedules\":{...}" for /stats: how many, fired by this instance, failed pushes. */
void firing_stats_json(struct sbuf *sb);

/* The Prometheus lines of the scheduler. */
void firing_metrics(struct sbuf *sb);

#endif
