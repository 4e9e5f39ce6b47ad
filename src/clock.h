/* clock.h — the two clocks: wall time in unix milliseconds (job due times, the server's clock
 * is authoritative) and monotonic time (timeouts, latencies; never jumps). */
#ifndef HG_CLOCK_H
#define HG_CLOCK_H

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

#endif
