/* keeper.c — see keeper.h. */
#include "process/keeper.h"
#include "core/app.h"
#include "base/clock.h"
#include "durable/doubt.h"
#include "duties/expiry.h"
#include "duties/lossmark.h"
#include "duties/fleet.h"
#include "duties/clocksync.h"
#include "duties/idlease.h"
#include "durable/journal.h"
#include "redis/layout.h"
#include "base/evbase.h"
#include "base/log.h"
#include "durable/pager.h"
#include "durable/firing.h"
#include "durable/restore.h"
#include "core/metrics.h"
#include "duties/mover.h"
#include "duties/pubsub.h"
#include "redis/rlink.h"
#include "duties/retention.h"
#include "redis/store.h"
#include "duties/topics.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>

#define LAYOUT_RECHECK_TICKS     10
#define AUTO_RESTORE_RETRY_TICKS 10 /* seconds between auto-restore attempts while a loss is unrepaired */

struct keeper {
    struct app *app;
    pthread_t thread;
    struct event_base *base;
    struct rlink *redis;
    struct store store;
    char who[STORE_WHO_MAX];
    struct mover *mover;
    struct pubsub *pubsub;
    struct idlease *lease;
    struct fleet *fleet;
    struct expiry *expiry;
    struct lossmark *marks;  /* Redis loss detection (lossmark.h) */
    struct clocksync *clock; /* this host's offset to the fleet's clock (clocksync.h) */
    keeper_ready_fn on_ready;
    void *ready_arg;
    struct event *tick;
    struct event *topics_tick; /* topic settings refreshed twice a second (topics.h) */
    struct event *stop_ev;
    int ticks;
};

/* This instance's summary for the fleet view of /stats. */
static void local_stats(struct keeper *k, struct sbuf *sb)
{
    struct app *app = k->app;
    sb_puts(sb, "{\"instance\":");
    sb_json_cstr(sb, app->instance);
    sb_printf(sb,
              ",\"workerId\":%d,\"startedAt\":%lld,\"ownedShards\":%lld,\"parked\":%lld,\"connections\":%lld,"
              "\"journalBacklog\":%ld,\"mysql\":\"%s\",\"draining\":%s,\"pushed\":%llu,\"delivered\":%llu,"
              "\"moved\":%lld,\"at\":%lld,\"lateness\":",
              atomic_load(&app->worker_id), (long long)app->started_unix_ms,
              (long long)metrics_gauge_get(MG_OWNED_SHARDS), (long long)atomic_load(&app->parked),
              (long long)metrics_gauge_get(MG_CONNECTIONS), journal_backlog(), journal_up() ? "up" : "down",
              atomic_load(&app->draining) ? "true" : "false", (unsigned long long)metrics_counter_get(MC_JOBS_PUSHED),
              (unsigned long long)metrics_counter_get(MC_JOBS_DELIVERED), mover_moved_total(k->mover),
              (long long)clock_unix_ms());
    /* for the console's plots (GET /fleet): the totals above were read at "at"; the lateness
     * histogram is summed over the fleet there */
    metrics_hist_counts_json(MH_LATENESS, sb);
    sb_putc(sb, '}');
}

/* How many transitions wait in the outbox streams for the journal (back-pressure, /stats). */
static void on_outbox_len(long total, int failed, void *arg)
{
    if (!failed)
        journal_note_outbox(total);
}

/* A loss lossmark saw: with [redis] auto_restore, repair it (both ways). */
static void on_loss(void *arg)
{
    struct keeper *k = arg;
    if (k->app->cfg.redis_auto_restore)
        restore_auto(k->app);
}

/* A rolled-back shard is fenced: its fence check runs now, whatever [redis] auto_restore says
 * (the shard delivers nothing until it has run). */
static void on_fenced(int shard, void *arg)
{
    struct keeper *k = arg;
    restore_fence_check(k->app, shard);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct keeper *k = arg;
    clocksync_tick(k->clock);
    mover_tick(k->mover);
    lossmark_tick(k->marks);
    if (atomic_load(&k->app->redis_loss_at) != 0 && k->ticks % AUTO_RESTORE_RETRY_TICKS == 0)
        on_loss(k); /* not repaired yet: a failed or refused auto-restore is tried again */
    /* the worker-id lease and the fleet heartbeat write {w} keys: not into another layout's data */
    int layout_ok = atomic_load(&k->app->layout) == LAYOUT_OK;
    if (layout_ok)
        idlease_tick(k->lease);
    doubt_schedule(&k->app->cfg);
    if (store_outbox_len(&k->store, on_outbox_len, k) < 0)
        log_debug("keeper: cannot measure the outbox now (Redis down)");
    if (k->ticks % LAYOUT_RECHECK_TICKS == 0 || !layout_ok)
        layout_check(k->redis, k->app, NULL, NULL);
    if (layout_ok) {
        struct sbuf local = SBUF_INIT;
        local_stats(k, &local);
        fleet_tick(k->fleet, local.data ? local.data : "{}");
        sb_free(&local);
    }
    if (++k->ticks % k->app->cfg.retention_interval == 0) {
        retention_schedule(&k->app->cfg);
        expiry_start(k->expiry);
    }
}

static void on_topics_tick(evutil_socket_t fd, short what, void *arg)
{
    topics_schedule();
}

static void on_owned(const char *owned, int shards, void *arg)
{
    struct keeper *k = arg;
    mover_set_owned(k->mover, owned, shards);
    pager_set_owned(owned, shards);  /* the pager pages the shards the mover moves */
    firing_set_owned(owned, shards); /* and their schedules fire here */
}

static void on_wake(int shard, int64_t due, void *arg)
{
    struct keeper *k = arg;
    mover_wake(k->mover, shard, due);
}

static void on_ready(const char *topic, size_t len, void *arg)
{
    struct keeper *k = arg;
    k->on_ready(topic, len, k->ready_arg);
}

/* The subscriber (re)connected: notifications may have been missed meanwhile. */
static void on_resync(void *arg)
{
    struct keeper *k = arg;
    mover_rescan(k->mover);
    k->on_ready(NULL, 0, k->ready_arg);
}

/* The layout check sent on a (re)connect answered: what waited for it runs now. */
static void on_layout_after_connect(enum layout_verdict v, void *arg)
{
    struct keeper *k = arg;
    if (v != LAYOUT_OK)
        return;              /* the tick checks again and the writers below keep waiting */
    lossmark_tick(k->marks); /* first, so a loss is seen before the mover acts on old data */
    idlease_tick(k->lease);
    mover_rescan(k->mover);
}

static void on_redis_state(int up, void *arg)
{
    struct keeper *k = arg;
    if (!up) {
        /* A single Redis we cannot see may come back holding other data (restarted from
         * another file, emptied and re-filled): nothing is written again — by the mover,
         * lossmark, the lease, the fleet heartbeat or a request — until the check after the
         * reconnect says OK. A cluster that is not whole keeps its verdict: its other masters
         * still serve their shards (a failover changes no layout). */
        int ok = LAYOUT_OK;
        if (!k->app->cfg.redis_cluster)
            atomic_compare_exchange_strong(&k->app->layout, &ok, LAYOUT_UNKNOWN);
        return;
    }
    clocksync_tick(k->clock); /* before the first move: the mover waits for the fleet's clock */
    layout_check(k->redis, k->app, on_layout_after_connect, k);
}

static void *keeper_main(void *arg)
{
    struct keeper *k = arg;
    log_set_thread_name("keeper");
    event_base_dispatch(k->base);
    return NULL;
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct keeper *k = arg;
    idlease_release(k->lease);
    fleet_leave(k->fleet);
    event_del(k->tick);
    event_del(k->topics_tick);
    mover_stop(k->mover);
    /* give the release a moment to reach Redis, then leave the loop */
    struct timeval tv = {0, 200000};
    event_base_loopexit(k->base, &tv);
}

static void keeper_free(struct keeper *k)
{
    pubsub_free(k->pubsub);
    rlink_free(k->redis);
    expiry_free(k->expiry);
    lossmark_free(k->marks);
    clocksync_free(k->clock);
    mover_free(k->mover);
    idlease_free(k->lease);
    fleet_free(k->fleet);
    if (k->tick)
        event_free(k->tick);
    if (k->topics_tick)
        event_free(k->topics_tick);
    if (k->stop_ev)
        event_free(k->stop_ev);
    if (k->base)
        event_base_free(k->base);
    free(k);
}

struct keeper *keeper_start(struct app *app, keeper_ready_fn ready_fn, void *arg)
{
    struct keeper *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->app = app;
    k->on_ready = ready_fn;
    k->ready_arg = arg;
    const struct config *cfg = &app->cfg;
    /* precise timers: the mover sleeps until a job's due millisecond */
    k->base = evbase_new(EVENT_BASE_FLAG_PRECISE_TIMER);
    if (k->base == NULL)
        goto fail;
    struct rlink_config rcfg = {"keeper", cfg->redis_address, cfg->redis_password, cfg->redis_db, cfg->redis_timeout_ms,
                                1,        cfg->redis_cluster};
    k->redis = rlink_new(k->base, &rcfg, on_redis_state, k);
    if (k->redis == NULL)
        goto fail;
    /* transitions the mover makes say "mover" in their history, whichever thread hosts it */
    store_who(k->who, sizeof k->who, app->instance, "mover", app->hostname);
    k->store.rc = k->redis;
    k->store.prefix = cfg->redis_prefix;
    k->store.shards = cfg->redis_shards;
    k->mover = mover_new(app, k->base, &k->store, k->who);
    struct pubsub_handlers h = {on_wake, on_ready, on_resync, k};
    k->pubsub = k->mover ? pubsub_start(app, k->base, &h, k->redis) : NULL;
    k->lease = idlease_new(app, k->redis);
    k->fleet = fleet_new(app, k->redis, on_owned, k);
    k->expiry = k->mover ? expiry_new(app, &k->store, k->mover) : NULL;
    k->marks = lossmark_new(app, &k->store, on_loss, on_fenced, k);
    k->clock = clocksync_new(k->redis);
    k->tick = event_new(k->base, -1, EV_PERSIST, on_tick, k);
    k->topics_tick = event_new(k->base, -1, EV_PERSIST, on_topics_tick, k);
    k->stop_ev = evtimer_new(k->base, on_stop, k);
    if (!k->mover || !k->pubsub || !k->lease || !k->fleet || !k->expiry || !k->marks || !k->clock || !k->tick ||
        !k->topics_tick || !k->stop_ev)
        goto fail;
    struct timeval second = {1, 0}, half = {0, 500000};
    event_add(k->tick, &second);
    event_add(k->topics_tick, &half);
    topics_schedule(); /* the first read now: a start-up does not wait for its settings */
    if (pthread_create(&k->thread, NULL, keeper_main, k) != 0)
        goto fail;
    return k;
fail:
    log_error("keeper: cannot start (out of memory or bad [redis] address)");
    keeper_free(k);
    return NULL;
}

void keeper_stop(struct keeper *k)
{
    if (k == NULL)
        return;
    event_active(k->stop_ev, EV_TIMEOUT, 0);
    pthread_join(k->thread, NULL);
    keeper_free(k);
}

void keeper_stats_json(void *arg, int shards, struct sbuf *sb)
{
    struct keeper *k = arg;
    sb_printf(sb, ",\"mover\":{\"shards\":%d,\"owned\":%lld,\"moved\":%lld,\"leasesExpired\":%lld}", shards,
              k ? (long long)metrics_gauge_get(MG_OWNED_SHARDS) : 0LL, k ? mover_moved_total(k->mover) : 0LL,
              k ? mover_expired_total(k->mover) : 0LL);
    fleet_stats_json(k ? k->fleet : NULL, sb);
}
