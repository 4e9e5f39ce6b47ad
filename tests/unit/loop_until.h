/* loop_until.h — for unit tests (Check) that drive an event loop: run it until a condition
 * holds. The loop must wake now and then (a ticker event), as EVLOOP_ONCE waits for one. */
#ifndef HG_TEST_LOOP_UNTIL_H
#define HG_TEST_LOOP_UNTIL_H

#include <event2/event.h>
#include <stdint.h>
#include <time.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run `base_` until `cond` holds (or `ms` pass); the condition's value. */
#define LOOP_UNTIL(base_, cond, ms)                                                                                    \
    ({                                                                                                                 \
        int64_t until_ = now_ms() + (ms);                                                                              \
        while (!(cond) && now_ms() < until_)                                                                           \
            event_base_loop((base_), EVLOOP_ONCE);                                                                     \
        (cond);                                                                                                        \
    })

#endif
