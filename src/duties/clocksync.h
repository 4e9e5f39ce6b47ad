/* clocksync.h — this instance's offset to the fleet's clock, measured on the keeper's loop.
 *
 * Due times and leases are compared across instances, so they are read from one clock: Redis's
 * `TIME`, on the Redis that holds the fleet's {w} keys (the worker-number leases: one server
 * for the whole fleet, a single Redis or one master of a Cluster). Each keeper tick, and at
 * once when Redis comes up, one TIME is sent. Redis read its clock somewhere between the
 * send and the answer, so a sample bounds this host's offset (its clock minus the fleet's) to
 * [send - redis, answer - redis]: a slow answer widens the bound, it never moves it off the
 * truth. The offset in use is kept while it lies within every bound of the recent samples
 * (CLOCKSYNC_WINDOW of them, the newest run that agrees: a stepped clock starts a new run),
 * and otherwise set to the middle of where they overlap (clocksync_choose). So two instances
 * on Redis's own host follow it exactly, an instance whose host is off follows it to within
 * the tightest round trip, and a busy loop that reads an answer late does not move anyone's
 * clock by its delay.
 *
 * Until the first sample the offset is unknown: the mover does not move, /get answers 503
 * and /health names it. Once known it is kept while Redis is away. Shown as /health's
 * "clockOffsetMs" and /metrics' hourglass_clock_offset_ms. */
#ifndef HG_CLOCKSYNC_H
#define HG_CLOCKSYNC_H

#define CLOCKSYNC_WINDOW 8

#include <stdint.h>

struct rlink;
struct clocksync;

/* What one TIME round trip says: this host's offset to the fleet lay in [lo_us, hi_us]. */
struct clock_bound {
    int64_t lo_us, hi_us;
};

/* The offset to use, from `n` >= 1 bounds newest first and the offset now in use: the
 * bounds are overlapped from the newest back while they agree; the offset in use is kept if
 * it lies in the overlap, otherwise the overlap's middle is returned. Pure. */
int64_t clocksync_choose(const struct clock_bound *newest_first, int n, int64_t current_us);

struct clocksync *clocksync_new(struct rlink *redis);
void clocksync_free(struct clocksync *fc);

/* Send one TIME unless one is in flight; call once a second and when Redis comes up. */
void clocksync_tick(struct clocksync *fc);

#endif
