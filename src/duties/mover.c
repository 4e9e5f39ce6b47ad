/* mover.c — see mover.h. */
#include "duties/mover.h"
#include "core/app.h"
#include "core/dutywatch.h"
#include "base/clock.h"
#include "durable/journal.h"
#include "core/metrics.h"
#include "redis/store.h"

#include <event2/event.h>
#include <stdatomic.h>
#include <stdlib.h>

#define NEVER          INT64_MAX
#define SAFETY_MS      1000
#define RETRY_FIRST_MS 10 /* after a move that could not run: doubled each time, up to SAFETY_MS */

struct mover {
    struct app *app;
    struct store *store;
    const char *who;
    struct event *timer; /* next due time of an owned shard */
    int shards;
    int64_t *next_due; /* per shard, unix ms; NEVER when the zset is empty */
    char *running;     /* a move.lua call is in flight */
    char *again;       /* run again when it returns */
    char *owned;
    /* A shard whose move could not run (Redis down or refusing, the layout unchecked, the
     * journal full) is not tried again before retry_at: without it a due time that passed
     * during an outage re-armed the timer at 0 and the keeper spun at 100 % of a core. */
    int64_t *retry_at; /* per shard, unix ms; 0 when the last move ran */
    int *retry_ms;     /* per shard, the current back-off */
    atomic_llong moved_total;
    atomic_llong expired_total;
};

struct move_call {
    struct mover *m;
    int shard;
};

static void arm_timer(struct mover *m);
static void run_shard(struct mover *m, int shard);

/* The move of `shard` could not run now (why: for /health's stuck duties): back off before
 * the next try. */
static void back_off(struct mover *m, int shard, const char *why)
{
    dutywatch_failed(DUTY_MOVER, shard, why);
    int wait = m->retry_ms[shard] ? m->retry_ms[shard] * 2 : RETRY_FIRST_MS;
    m->retry_ms[shard] = wait > SAFETY_MS ? SAFETY_MS : wait;
    m->retry_at[shard] = clock_unix_ms() + m->retry_ms[shard];
}

static void clear_back_off(struct mover *m, int shard)
{
    dutywatch_ok(DUTY_MOVER, shard);
    m->retry_ms[shard] = 0;
    m->retry_at[shard] = 0;
}

/* When the shard's timer should fire: its next due time, not before a back-off ends. */
static int64_t wake_at(const struct mover *m, int shard)
{
    int64_t due = m->next_due[shard];
    return due < m->retry_at[shard] ? m->retry_at[shard] : due;
}

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
        m->again[shard] = 0; /* Redis trouble: tried again after a back-off */
        back_off(m, shard, "move.lua failed (Redis down or refusing)");
        arm_timer(m);
        return;
    }
    clear_back_off(m, shard);
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
    if (m->running[shard]) {
        m->again[shard] = 1;
        return;
    }
    /* not before the shard count is known to match the data, nor before the fleet's clock is
     * (base/clock.h: due times are judged by it); under back-pressure, leave the jobs where they
     * are until MySQL catches up */
    const char *why = atomic_load(&m->app->layout) != 1 ? "the data layout is not checked (Redis down?)"
                      : !clock_fleet_known()            ? "the fleet's clock is not measured yet"
                      : !journal_accepting()            ? "the journal is full (MySQL behind or down)"
                                                        : NULL;
    struct move_call *call = why ? NULL : malloc(sizeof *call);
    if (call == NULL) {
        back_off(m, shard, why ? why : "out of memory");
        return;
    }
    call->m = m;
    call->shard = shard;
    m->running[shard] = 1;
    if (store_move(m->store, shard, clock_unix_ms(), m->app->cfg.mover_batch, m->who, on_moved, call) < 0) {
        m->running[shard] = 0;
        free(call);
        back_off(m, shard, "Redis down");
    }
}

/* Run every owned shard that is due and not backing off, then sleep until the next one (at
 * most SAFETY_MS). */
static void run_due(struct mover *m)
{
    int64_t now = clock_unix_ms();
    for (int s = 0; s < m->shards; s++)
        if (m->owned[s] && wake_at(m, s) <= now)
            run_shard(m, s);
    arm_timer(m);
}

static void arm_timer(struct mover *m)
{
    int64_t next = NEVER;
    for (int s = 0; s < m->shards; s++)
        if (m->owned[s] && !m->running[s] && wake_at(m, s) < next)
            next = wake_at(m, s);
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

void mover_tick(struct mover *m)
{
    for (int s = 0; s < m->shards; s++)
        run_shard(m, s);
}

void mover_wake(struct mover *m, int shard, int64_t due)
{
    if (shard < 0 || shard >= m->shards || due <= 0 || due >= m->next_due[shard])
        return;
    m->next_due[shard] = due;
    if (due <= clock_unix_ms())
        run_shard(m, shard);
    arm_timer(m);
}

void mover_rescan(struct mover *m)
{
    for (int s = 0; s < m->shards; s++) {
        m->next_due[s] = 0;
        clear_back_off(m, s); /* Redis is back: look now */
    }
    run_due(m);
}

void mover_set_owned(struct mover *m, const char *owned, int shards)
{
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

struct mover *mover_new(struct app *app, struct event_base *base, struct store *store, const char *who)
{
    struct mover *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->app = app;
    m->store = store;
    m->who = who;
    m->shards = app->cfg.redis_shards;
    m->next_due = calloc((size_t)m->shards, sizeof *m->next_due);
    m->running = calloc((size_t)m->shards, 1);
    m->again = calloc((size_t)m->shards, 1);
    m->owned = calloc((size_t)m->shards, 1);
    m->retry_at = calloc((size_t)m->shards, sizeof *m->retry_at);
    m->retry_ms = calloc((size_t)m->shards, sizeof *m->retry_ms);
    m->timer = evtimer_new(base, on_timer, m);
    if (!m->next_due || !m->running || !m->again || !m->owned || !m->retry_at || !m->retry_ms || !m->timer) {
        mover_free(m);
        return NULL;
    }
    for (int s = 0; s < m->shards; s++)
        m->owned[s] = 1; /* alone until the fleet registry says otherwise (fleet.c) */
    metrics_gauge_set(MG_OWNED_SHARDS, m->shards);
    arm_timer(m);
    return m;
}

void mover_stop(struct mover *m)
{
    event_del(m->timer);
}

void mover_free(struct mover *m)
{
    if (m == NULL)
        return;
    if (m->timer)
        event_free(m->timer);
    free(m->next_due);
    free(m->running);
    free(m->again);
    free(m->owned);
    free(m->retry_at);
    free(m->retry_ms);
    free(m);
}

int mover_owns(const struct mover *m, int shard)
{
    return shard >= 0 && shard < m->shards && m->owned[shard];
}

long long mover_moved_total(const struct mover *m)
{
    return atomic_load(&m->moved_total);
}

long long mover_expired_total(const struct mover *m)
{
    return atomic_load(&m->expired_total);
}
