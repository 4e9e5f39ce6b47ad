/* clock.h — the two clocks: the fleet's wall time in unix milliseconds (job due times,
 * leases: one clock for every instance, see below) and monotonic time (timeouts, latencies;
 * never jumps); and the timed wait the background threads share (their start and stop:
 * bgthread.h).
 *
 * One clock for the fleet: due times and leases are compared by every instance, so they are
 * read from one clock, not from each host's. The fleet's clock is Redis's `TIME` (the
 * keeper measures this host's offset to it, duties/clocksync.h); clock_unix_ms() and
 * clock_unix_us() are this host's clock corrected by that offset. Until the first
 * measurement the offset is 0 and clock_fleet_known() is 0: an instance then neither moves
 * nor delivers jobs (contract, "One clock for the fleet"). */
#ifndef HG_CLOCK_H
#define HG_CLOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/* This host's clock minus the fleet's, in microseconds (clock_fleet_set). */
extern _Atomic int64_t clock_fleet_offset_us;

/* This host's own wall clock: for measuring the offset, nothing else. */
static inline int64_t clock_host_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t clock_unix_us(void)
{
    return clock_host_us() - atomic_load_explicit(&clock_fleet_offset_us, memory_order_relaxed);
}

static inline int64_t clock_unix_ms(void)
{
    return clock_unix_us() / 1000;
}

/* Set the offset (this host minus the fleet, us) from a measurement; from then on
 * clock_fleet_known() is 1. Any thread. */
void clock_fleet_set(int64_t offset_us);

/* 1 once the offset was measured (it is kept while Redis is away: clocks drift by
 * milliseconds a day, not seconds). */
int clock_fleet_known(void);

static inline int64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t clock_mono_ms(void)
{
    return clock_mono_us() / 1000;
}

/* Wait on `cond` (with `lock` held) for at most `us` microseconds, or until signalled. The
 * condition variables here use the default (realtime) clock, as pthread_cond_timedwait
 * expects its deadline. */
static inline void clock_cond_wait_us(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t us)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (us % 1000000) * 1000;
    ts.tv_sec += (time_t)(us / 1000000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(cond, lock, &ts);
}

#endif
