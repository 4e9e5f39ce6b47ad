/* clocksync.c — see clocksync.h. */
#include "duties/clocksync.h"
#include "base/clock.h"
#include "base/log.h"
#include "core/metrics.h"
#include "redis/rlink.h"

#include <stdlib.h>

#define WARN_OFFSET_US 1000000 /* a host this far off is worth a warning: fix its NTP */

struct clocksync {
    struct rlink *redis;
    int busy;
    int64_t sent_us;                             /* this host's clock when the TIME in flight was sent */
    struct clock_bound window[CLOCKSYNC_WINDOW]; /* a ring, newest at next - 1 */
    int nsamples, next;
    int64_t logged_offset_us;
    int logged;
};

int64_t clocksync_choose(const struct clock_bound *newest_first, int n, int64_t current_us)
{
    int64_t lo = newest_first[0].lo_us, hi = newest_first[0].hi_us;
    for (int i = 1; i < n; i++) {
        int64_t l = newest_first[i].lo_us > lo ? newest_first[i].lo_us : lo;
        int64_t h = newest_first[i].hi_us < hi ? newest_first[i].hi_us : hi;
        if (l > h)
            break; /* disagrees with the newer ones: a clock stepped in between, they win */
        lo = l, hi = h;
    }
    if (current_us >= lo && current_us <= hi)
        return current_us; /* still consistent: no reason to move, so no jitter */
    return lo + (hi - lo) / 2;
}

static void note(struct clocksync *cs, int64_t offset_us)
{
    int64_t moved = offset_us - cs->logged_offset_us;
    if (cs->logged && moved < 100000 && moved > -100000)
        return; /* log the first offset, and later ones only when they move by 100 ms or more */
    cs->logged = 1;
    cs->logged_offset_us = offset_us;
    if (offset_us >= WARN_OFFSET_US || offset_us <= -WARN_OFFSET_US)
        log_warn("clock: this host's clock is %+lld ms off the fleet's (Redis TIME); due times and leases "
                 "follow the fleet's clock, but fix this host's time synchronisation",
                 (long long)(offset_us / 1000));
    else
        log_info("clock: this host's clock is %+lld ms off the fleet's (Redis TIME)", (long long)(offset_us / 1000));
}

static void on_time(redisReply *r, void *arg)
{
    struct clocksync *cs = arg;
    int64_t now_us = clock_host_us();
    cs->busy = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return; /* down or refusing: the offset stays as it was */
    int64_t redis_us = strtoll(r->element[0]->str, NULL, 10) * 1000000 + strtoll(r->element[1]->str, NULL, 10);
    if (now_us < cs->sent_us)
        return; /* this host's clock stepped back during the call: not a measurement */
    cs->window[cs->next] = (struct clock_bound){cs->sent_us - redis_us, now_us - redis_us};
    cs->next = (cs->next + 1) % CLOCKSYNC_WINDOW;
    if (cs->nsamples < CLOCKSYNC_WINDOW)
        cs->nsamples++;
    struct clock_bound newest_first[CLOCKSYNC_WINDOW];
    for (int i = 0; i < cs->nsamples; i++)
        newest_first[i] = cs->window[(cs->next - 1 - i + CLOCKSYNC_WINDOW) % CLOCKSYNC_WINDOW];
    /* the offset in use is the process's (base/clock.h; 0 before the first sample) */
    int64_t in_use = atomic_load_explicit(&clock_fleet_offset_us, memory_order_relaxed);
    int64_t offset_us = clocksync_choose(newest_first, cs->nsamples, in_use);
    clock_fleet_set(offset_us);
    metrics_gauge_set(MG_CLOCK_OFFSET_MS, offset_us / 1000);
    note(cs, offset_us);
}

void clocksync_tick(struct clocksync *cs)
{
    if (cs->busy || !rlink_usable(cs->redis))
        return;
    static const char *argv[1] = {"TIME"};
    static const size_t lens[1] = {4};
    cs->sent_us = clock_host_us();
    /* "{w}": any key with that hash tag lives where every {w} key does (the worker leases) */
    if (rlink_command_for_key(cs->redis, "{w}", 3, on_time, cs, 1, argv, lens) == 0)
        cs->busy = 1;
}

struct clocksync *clocksync_new(struct rlink *redis)
{
    struct clocksync *cs = calloc(1, sizeof *cs);
    if (cs == NULL)
        return NULL;
    cs->redis = redis;
    return cs;
}

void clocksync_free(struct clocksync *cs)
{
    free(cs);
}
