/* clock.h — the two clocks: wall time in unix milliseconds (job due times, the server's clock
 * is authoritative) and monotonic time (timeouts, latencies; never jumps); and the timed wait
 * the background threads share (their start and stop: bgthread.h). */
#ifndef HG_CLOCK_H
#define HG_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline int64_t clock_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t clock_unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

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
