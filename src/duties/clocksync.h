/* clocksync.h — this instance's offset to the fleet's clock, measured on the keeper's loop.
 *
 * Due times and leases are compared across instances, so they are read from one clock: Redis's
 * `TIME`, on the Redis that holds the fleet's {w} keys (the worker-number leases: one server
 * for the whole fleet, a single Redis or one master of a Cluster). Each keeper tick, and at
 * once when Redis comes up, one TIME is sent; a sample's offset is this host's clock at the
 * middle of the round trip minus Redis's answer, so its error is at most half the round trip.
 * Of the last CLOCKSYNC_WINDOW samples the one with the shortest round trip is used
 * (clock_fleet_set, base/clock.h), so a slow answer does not move the clock.
 *
 * Until the first sample the offset is unknown: the mover does not move, /get answers 503
 * and /health names it. Once known it is kept while Redis is away. Shown as /health's
 * "clockOffsetMs" and /metrics' hourglass_clock_offset_ms. */
#ifndef HG_CLOCKSYNC_H
#define HG_CLOCKSYNC_H

#define CLOCKSYNC_WINDOW 8

struct rlink;
struct clocksync;

struct clocksync *clocksync_new(struct rlink *redis);
void clocksync_free(struct clocksync *fc);

/* Send one TIME unless one is in flight; call once a second and when Redis comes up. */
void clocksync_tick(struct clocksync *fc);

#endif
