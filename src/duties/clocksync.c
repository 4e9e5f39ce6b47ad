/* clocksync.c — see clocksync.h. */
#include "duties/clocksync.h"
#include "base/clock.h"
#include "base/log.h"
#include "core/app.h"
#include "core/metrics.h"
#include "redis/rlink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARN_OFFSET_US 1000000 /* a host this far off is worth a warning: fix its NTP */

struct sample {
    int64_t rtt_us, offset_us;
};

struct clocksync {
    struct rlink *redis;
    char key[128]; /* routes TIME to the {w} keys' server in a Cluster */
    int busy;
    int64_t sent_us; /* this host's clock when the TIME in flight was sent */
    struct sample window[CLOCKSYNC_WINDOW];
    int nsamples, next;
    int64_t logged_offset_us;
    int logged;
};

/* The sample the clock follows: the shortest round trip of the window. */
static const struct sample *best(const struct clocksync *fc)
{
    const struct sample *b = &fc->window[0];
    for (int i = 1; i < fc->nsamples; i++)
        if (fc->window[i].rtt_us < b->rtt_us)
            b = &fc->window[i];
    return b;
}

static void note(struct clocksync *fc, int64_t offset_us)
{
    int64_t moved = offset_us - fc->logged_offset_us;
    if (fc->logged && moved < 100000 && moved > -100000)
        return; /* log the first offset, and later ones only when they move by 100 ms or more */
    fc->logged = 1;
    fc->logged_offset_us = offset_us;
    if (offset_us >= WARN_OFFSET_US || offset_us <= -WARN_OFFSET_US)
        log_warn("clock: this host's clock is %+lld ms off the fleet's (Redis TIME); due times and leases "
                 "follow the fleet's clock, but fix this host's time synchronisation",
                 (long long)(offset_us / 1000));
    else
        log_info("clock: this host's clock is %+lld ms off the fleet's (Redis TIME)", (long long)(offset_us / 1000));
}

static void on_time(redisReply *r, void *arg)
{
    struct clocksync *fc = arg;
    int64_t now_us = clock_host_us();
    fc->busy = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return; /* down or refusing: the offset stays as it was */
    int64_t redis_us = strtoll(r->element[0]->str, NULL, 10) * 1000000 + strtoll(r->element[1]->str, NULL, 10);
    struct sample s = {now_us - fc->sent_us, (fc->sent_us + now_us) / 2 - redis_us};
    if (s.rtt_us < 0)
        return; /* this host's clock stepped back during the call: not a measurement */
    fc->window[fc->next] = s;
    fc->next = (fc->next + 1) % CLOCKSYNC_WINDOW;
    if (fc->nsamples < CLOCKSYNC_WINDOW)
        fc->nsamples++;
    int64_t offset_us = best(fc)->offset_us;
    clock_fleet_set(offset_us);
    metrics_gauge_set(MG_CLOCK_OFFSET_MS, offset_us / 1000);
    note(fc, offset_us);
}

void clocksync_tick(struct clocksync *fc)
{
    if (fc->busy || !rlink_usable(fc->redis))
        return;
    static const char *argv[1] = {"TIME"};
    static const size_t lens[1] = {4};
    fc->sent_us = clock_host_us();
    if (rlink_command_for_key(fc->redis, fc->key, strlen(fc->key), on_time, fc, 1, argv, lens) == 0)
        fc->busy = 1;
}

struct clocksync *clocksync_new(struct app *app, struct rlink *redis)
{
    struct clocksync *fc = calloc(1, sizeof *fc);
    if (fc == NULL)
        return NULL;
    fc->redis = redis;
    snprintf(fc->key, sizeof fc->key, "%s:{w}:workers", app->cfg.redis_prefix);
    return fc;
}

void clocksync_free(struct clocksync *fc)
{
    free(fc);
}
