/* mover.c — see mover.h. */
#include "mover.h"
#include "clock.h"
#include "fleet.h"
#include "idlease.h"
#include "job.h"
#include "journal.h"
#include "log.h"
#include "loopq.h"
#include "metrics.h"
#include "rconn.h"
#include "retention.h"
#include "store.h"
#include "worker.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NEVER INT64_MAX
#define SAFETY_MS 1000

struct mover {
    struct app *app;
    pthread_t thread;
    struct event_base *base;
    struct rconn *redis;
    struct rconn *sub;
    struct store store;
    struct idlease *lease;
    struct fleet *fleet;
    char who[STORE_WHO_MAX];
    struct event *timer;      /* next due time of an owned shard */
    struct event *tick;       /* every second: safety re-check, lease */
    struct event *stop_ev;
    int ticks;
    int shards;
    int64_t *next_due;        /* per shard, unix ms; NEVER when the zset is empty */
    char *running;            /* a move.lua call is in flight */
    char *again;              /* run again when it returns */
    char *owned;
    atomic_llong moved_total;
    atomic_llong expired_total;
};

struct move_call {
    struct mover *m;
    int shard;
};

static void arm_timer(struct mover *m);
static void run_shard(struct mover *m, int shard);
static void check_layout(struct mover *m);

/* move.lua logged the transitions in the outbox; here they are only counted. */
static void count_moves(struct mover *m, const struct move_outcome *o)
{
    long long expired = 0;
    for (int i = 0; i < o->n; i++) {
        metrics_transition(o->moved[i].from, o->moved[i].to, 1);
        if (o->moved[i].from == JS_RESERVED)
            expired++;
    }
    atomic_fetch_add(&m->moved_total, o->n);
    atomic_fetch_add(&m->expired_total, expired);
}

static void on_moved(const struct move_outcome *o, void *arg)
{
    struct move_call *call = arg;
    struct mover *m = call->m;
    int shard = call->shard;
    free(call);
    m->running[shard] = 0;
    metrics_inc(MC_MOVER_RUNS, 1);
    if (o == NULL) {
        m->again[shard] = 0; /* Redis trouble: the safety tick retries */
        return;
    }
    count_moves(m, o);
    m->next_due[shard] = o->next_due < 0 ? NEVER : o->next_due;
    if (o->more || m->again[shard]) {
        m->again[shard] = 0;
        run_shard(m, shard);
    }
    arm_timer(m);
}

static void run_shard(struct mover *m, int shard)
{
    if (atomic_load(&m->app->layout) != 1)
        return; /* not before the shard count is known to match the data */
    if (m->running[shard]) {
        m->again[shard] = 1;
        return;
    }
    if (!journal_accepting())
        return; /* back-pressure: leave the jobs where they are until MySQL catches up */
    struct move_call *call = malloc(sizeof *call);
    if (call == NULL)
        return;
    call->m = m;
    call->shard = shard;
    m->running[shard] = 1;
    if (store_move(&m->store, shard, clock_unix_ms(), m->app->cfg.mover_batch, m->who, on_moved, call) < 0) {
        m->running[shard] = 0;
        free(call);
    }
}

/* Run every owned shard that is due, then sleep until the next one (at most SAFETY_MS). */
static void run_due(struct mover *m)
{
    int64_t now = clock_unix_ms();
    for (int s = 0; s < m->shards; s++)
        if (m->owned[s] && m->next_due[s] <= now)
            run_shard(m, s);
    arm_timer(m);
}

static void arm_timer(struct mover *m)
{
    int64_t next = NEVER;
    for (int s = 0; s < m->shards; s++)
        if (m->owned[s] && !m->running[s] && m->next_due[s] < next)
            next = m->next_due[s];
    int64_t now_us = clock_unix_us();
    int64_t wait_us = next == NEVER ? SAFETY_MS * 1000 : next * 1000 - now_us;
    if (wait_us < 0)
        wait_us = 0;
    if (wait_us > SAFETY_MS * 1000)
        wait_us = SAFETY_MS * 1000;
    struct timeval tv = {(time_t)(wait_us / 1000000), (suseconds_t)(wait_us % 1000000)};
    event_add(m->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    run_due(arg);
}

/* This instance's summary for the fleet view of /stats. */
static void local_stats(struct mover *m, struct sbuf *sb)
{
    struct app *app = m->app;
    int owned = 0;
    for (int s = 0; s < m->shards; s++)
        owned += m->owned[s];
    sb_puts(sb, "{\"instance\":");
    sb_json_cstr(sb, app->instance);
    sb_printf(sb,
              ",\"workerId\":%d,\"startedAt\":%lld,\"ownedShards\":%d,\"parked\":%lld,\"connections\":%lld,"
              "\"journalBacklog\":%ld,\"mysql\":\"%s\",\"draining\":%s,\"pushed\":%llu,\"delivered\":%llu,"
              "\"moved\":%lld}",
              atomic_load(&app->worker_id), (long long)app->started_unix_ms, owned,
              (long long)atomic_load(&app->parked), (long long)metrics_gauge_get(MG_CONNECTIONS), journal_backlog(),
              journal_up() ? "up" : "down", atomic_load(&app->draining) ? "true" : "false",
              (unsigned long long)metrics_counter_get(MC_JOBS_PUSHED),
              (unsigned long long)metrics_counter_get(MC_JOBS_DELIVERED), (long long)atomic_load(&m->moved_total));
}

struct outbox_measure {
    int waiting, failed;
    long total;
};

static void outbox_measure_release(struct outbox_measure *om)
{
    if (--om->waiting > 0)
        return;
    if (!om->failed)
        journal_note_outbox(om->total);
    free(om);
}

static void on_outbox_len(redisReply *r, void *arg)
{
    struct outbox_measure *om = arg;
    if (r && r->type == REDIS_REPLY_INTEGER)
        om->total += r->integer;
    else
        om->failed = 1;
    outbox_measure_release(om);
}

/* How many transitions wait in the outbox streams for the journal (back-pressure, /stats). */
static void measure_outbox(struct mover *m)
{
    struct outbox_measure *om = calloc(1, sizeof *om);
    if (om == NULL)
        return;
    om->waiting = 1;
    for (int s = 0; s < m->shards; s++) {
        char key[160];
        int n = store_key(key, sizeof key, m->app->cfg.redis_prefix, s, "log");
        const char *argv[] = {"XLEN", key};
        size_t lens[] = {4, (size_t)n};
        om->waiting++;
        if (rconn_command(m->redis, on_outbox_len, om, 2, argv, lens) < 0) {
            om->waiting--;
            om->failed = 1;
        }
    }
    outbox_measure_release(om); /* our own hold, taken so an early reply cannot finish it */
}

static void on_owned(const char *owned, int shards, void *arg)
{
    struct mover *m = arg;
    int count = 0;
    for (int s = 0; s < shards && s < m->shards; s++) {
        if (owned[s] && !m->owned[s])
            m->next_due[s] = 0; /* newly ours: look at it now */
        m->owned[s] = owned[s];
        count += owned[s];
    }
    metrics_gauge_set(MG_OWNED_SHARDS, count);
    run_due(m);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct mover *m = arg;
    /* Safety net: every shard, owned or not, at least once a second. */
    for (int s = 0; s < m->shards; s++)
        run_shard(m, s);
    idlease_tick(m->lease);
    measure_outbox(m);
    if (m->ticks % 10 == 0 || atomic_load(&m->app->layout) != 1)
        check_layout(m);
    struct sbuf local = SBUF_INIT;
    local_stats(m, &local);
    fleet_tick(m->fleet, local.data ? local.data : "{}");
    sb_free(&local);
    if (++m->ticks % m->app->cfg.retention_interval == 0)
        retention_schedule(&m->app->cfg);
}

/* "<shard> <due>" on <prefix>:wake: a sooner entry on a shard. */
static void on_wake(struct mover *m, const char *payload, size_t len)
{
    char buf[64];
    if (len >= sizeof buf)
        return;
    memcpy(buf, payload, len);
    buf[len] = '\0';
    char *end;
    long shard = strtol(buf, &end, 10);
    long long due = strtoll(end, NULL, 10);
    if (shard < 0 || shard >= m->shards || due <= 0)
        return;
    if (due < m->next_due[shard]) {
        m->next_due[shard] = due;
        if (due <= clock_unix_ms())
            run_shard(m, (int)shard);
        arm_timer(m);
    }
}

static void on_message(const char *channel, const char *payload, size_t len, void *arg)
{
    struct mover *m = arg;
    metrics_inc(MC_PUBSUB_MESSAGES, 1);
    size_t clen = strlen(channel);
    if (clen > 5 && strcmp(channel + clen - 5, ":wake") == 0) {
        on_wake(m, payload, len);
        return;
    }
    for (int i = 0; i < m->app->nworkers; i++)
        worker_notify_ready(m->app->workers[i], payload, len);
}

static void on_sub_state(struct rconn *rc, int up, void *arg)
{
    struct mover *m = arg;
    if (!up)
        return;
    /* Notifications may have been missed while disconnected: look at everything now. */
    for (int s = 0; s < m->shards; s++)
        m->next_due[s] = 0;
    run_due(m);
    for (int i = 0; i < m->app->nworkers; i++)
        worker_notify_ready(m->app->workers[i], NULL, 0);
}

static void on_layout(redisReply *r, void *arg)
{
    struct mover *m = arg;
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        return; /* checked again on the next tick */
    int shards = atoi(r->str), was = atomic_load(&m->app->layout);
    if (shards == m->app->cfg.redis_shards) {
        atomic_store(&m->app->layout, 1);
        if (was != 1)
            log_info("redis: data layout checked ([redis] shards = %d)", shards);
    } else {
        atomic_store(&m->app->layout, -1);
        if (was != -1)
            log_error("redis: the data under prefix \"%s\" was written with [redis] shards = %d, this instance has "
                      "%d; it refuses requests until the configuration matches",
                      m->app->cfg.redis_prefix, shards, m->app->cfg.redis_shards);
    }
}

static void on_layout_claimed(redisReply *r, void *arg)
{
}

/* The shard count is part of the data (ids.h): record it if the data has none (a new or
 * emptied Redis), and compare. Cheap, so done on every connect and every 10 s. */
static void check_layout(struct mover *m)
{
    char key[128], shards[16];
    snprintf(key, sizeof key, "%s:{w}:meta", m->app->cfg.redis_prefix);
    snprintf(shards, sizeof shards, "%d", m->app->cfg.redis_shards);
    const char *set[] = {"HSETNX", key, "shards", shards};
    size_t setlen[] = {6, strlen(key), 6, strlen(shards)};
    const char *get[] = {"HGET", key, "shards"};
    size_t getlen[] = {4, strlen(key), 6};
    if (rconn_command(m->redis, on_layout_claimed, m, 4, set, setlen) == 0 &&
        rconn_command(m->redis, on_layout, m, 3, get, getlen) < 0)
        log_debug("mover: could not check the data layout now; next tick");
}

static void on_redis_state(struct rconn *rc, int up, void *arg)
{
    struct mover *m = arg;
    if (up) {
        check_layout(m);
        idlease_tick(m->lease);
        for (int s = 0; s < m->shards; s++)
            m->next_due[s] = 0;
        run_due(m);
    }
}

static void *mover_main(void *arg)
{
    struct mover *m = arg;
    log_set_thread_name("mover");
    event_base_dispatch(m->base);
    return NULL;
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct mover *m = arg;
    idlease_release(m->lease);
    fleet_leave(m->fleet);
    event_del(m->tick);
    event_del(m->timer);
    /* give the release a moment to reach Redis, then leave the loop */
    struct timeval tv = {0, 200000};
    event_base_loopexit(m->base, &tv);
}

struct mover *mover_start(struct app *app)
{
    struct mover *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->app = app;
    m->shards = app->cfg.redis_shards;
    m->next_due = calloc((size_t)m->shards, sizeof *m->next_due);
    m->running = calloc((size_t)m->shards, 1);
    m->again = calloc((size_t)m->shards, 1);
    m->owned = calloc((size_t)m->shards, 1);
    struct event_config *ec = event_config_new();
    event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
    m->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (!m->next_due || !m->running || !m->again || !m->owned || !m->base)
        goto fail;
    for (int s = 0; s < m->shards; s++)
        m->owned[s] = 1; /* alone until the fleet registry says otherwise (fleet.c) */
    metrics_gauge_set(MG_OWNED_SHARDS, m->shards);

    const struct config *cfg = &app->cfg;
    struct rconn_config rcfg = {"mover", cfg->redis_address, cfg->redis_password, cfg->redis_db,
                                cfg->redis_timeout_ms, 1};
    m->redis = rconn_new(m->base, &rcfg, on_redis_state, m);
    struct rconn_config scfg = {"subscriber", cfg->redis_address, cfg->redis_password, cfg->redis_db,
                                cfg->redis_timeout_ms, 0};
    m->sub = rconn_new(m->base, &scfg, on_sub_state, m);
    if (m->redis == NULL || m->sub == NULL)
        goto fail;
    char ready[96], wake[96];
    snprintf(ready, sizeof ready, "%s:ready", cfg->redis_prefix);
    snprintf(wake, sizeof wake, "%s:wake", cfg->redis_prefix);
    const char *channels[] = {ready, wake};
    if (rconn_subscribe(m->sub, channels, 2, on_message, m) < 0)
        goto fail;
    store_who(m->who, sizeof m->who, app->instance, "mover", app->hostname);
    m->store.rc = m->redis;
    m->store.prefix = cfg->redis_prefix;
    m->store.shards = m->shards;
    m->lease = idlease_new(app, m->redis);
    m->fleet = fleet_new(app, m->redis, on_owned, m);
    m->timer = evtimer_new(m->base, on_timer, m);
    m->tick = event_new(m->base, -1, EV_PERSIST, on_tick, m);
    m->stop_ev = evtimer_new(m->base, on_stop, m);
    if (!m->lease || !m->fleet || !m->timer || !m->tick || !m->stop_ev)
        goto fail;
    struct timeval second = {1, 0};
    event_add(m->tick, &second);
    arm_timer(m);
    if (pthread_create(&m->thread, NULL, mover_main, m) != 0)
        goto fail;
    return m;
fail:
    log_error("mover: cannot start (out of memory or bad [redis] address)");
    return NULL;
}

void mover_stop(struct mover *m)
{
    if (m == NULL)
        return;
    event_active(m->stop_ev, EV_TIMEOUT, 0);
    pthread_join(m->thread, NULL);
    rconn_free(m->sub);
    rconn_free(m->redis);
    idlease_free(m->lease);
    fleet_free(m->fleet);
    event_free(m->timer);
    event_free(m->tick);
    event_free(m->stop_ev);
    event_base_free(m->base);
    free(m->next_due);
    free(m->running);
    free(m->again);
    free(m->owned);
    free(m);
}

void mover_stats_json(struct mover *m, struct sbuf *sb)
{
    if (m == NULL)
        return;
    sb_printf(sb, ",\"mover\":{\"shards\":%d,\"owned\":%lld,\"moved\":%lld,\"leasesExpired\":%lld}", m->shards,
              (long long)metrics_gauge_get(MG_OWNED_SHARDS), (long long)atomic_load(&m->moved_total),
              (long long)atomic_load(&m->expired_total));
    fleet_stats_json(m->fleet, sb);
}
