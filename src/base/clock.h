/* clock.h — the two clocks: the fleet's wall time in unix milliseconds (job due times,
 * leases: one clock for every instance, see below) and monotonic time (timeouts, latencies;
 * never jumps); and the two timed waits the background threads share.
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

/* The stop protocol of the MySQL-side threads (journal, outbox): under `lock`, set *stop and a
 * deadline `deadline_ms` from now (the thread finishes what it can by then), wake it, and
 * join it. A thread blocked in a call that outlives the deadline by STOP_GRACE_MS (a hung
 * server answers only after its whole timeout) is cut loose by `interrupt` (may be NULL),
 * which makes that call fail, so a stop is bounded by the deadline, not by a timeout. */
#define STOP_GRACE_MS 500
static inline void clock_stop_thread(pthread_t thread, pthread_mutex_t *lock, pthread_cond_t *cond, int *stop,
                                     int64_t *deadline_us, int deadline_ms, void (*interrupt)(void))
{
    pthread_mutex_lock(lock);
    *stop = 1;
    *deadline_us = clock_mono_us() + (int64_t)deadline_ms * 1000;
    pthread_cond_broadcast(cond);
    pthread_mutex_unlock(lock);
    if (interrupt != NULL) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until); /* pthread_timedjoin_np's clock */
        int64_t ns = until.tv_nsec + (int64_t)(deadline_ms + STOP_GRACE_MS) * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        if (pthread_timedjoin_np(thread, NULL, &until) == 0)
            return;
        interrupt();
    }
    pthread_join(thread, NULL);
}

#endif
