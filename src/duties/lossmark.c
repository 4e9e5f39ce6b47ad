/* lossmark.c — see lossmark.h. */
#include "duties/lossmark.h"
#include "core/app.h"
#include "core/dutywatch.h"
#include "base/clock.h"
#include "redis/layout.h"
#include "base/log.h"
#include "core/metrics.h"
#include "redis/store.h"

#include <stdlib.h>

struct mark_call {
    struct lossmark *lm;
    int shard;
    int in_flight;
    int64_t written; /* the mark this process wrote last in the shard (0: none yet) */
    int64_t next;    /* the one in flight */
    int fenced;      /* the shard was fenced at the last answer (mark.lua) */
};

struct lossmark {
    struct app *app;
    struct store *store;
    void (*on_loss)(void *arg);
    void (*on_fenced)(int shard, void *arg);
    void *arg;
    int nfenced;
    int64_t last_mark;
    struct mark_call *calls; /* one per shard */
};

static const char *const kind_names[] = {"", "rolled back", "lost"};

/* A fenced shard (rolled back; mark.lua) moves and delivers nothing until its fence check
 * has run: ask for one at every answer that still says fenced. */
static void note_fence(struct lossmark *lm, struct mark_call *c, int64_t fenced)
{
    int now_fenced = fenced > 0;
    if (now_fenced != c->fenced) {
        lm->nfenced += now_fenced ? 1 : -1;
        atomic_store(&lm->app->redis_fenced, lm->nfenced);
        if (now_fenced)
            log_warn("redis: shard %d is fenced (rolled back): it moves and delivers nothing until its fence check "
                     "has let MySQL's newer states win",
                     c->shard);
        else
            log_info("redis: shard %d is no longer fenced", c->shard);
        if (lm->nfenced == 0 && atomic_load(&lm->app->redis_loss_at) == 0)
            dutywatch_ok(DUTY_RESTORE, -1); /* whoever checked it, nothing is left to repair */
    }
    c->fenced = now_fenced;
    if (now_fenced && lm->on_fenced)
        lm->on_fenced(c->shard, lm->arg);
}

static void on_mark(enum store_mark_verdict v, int64_t restored, int64_t fenced, void *arg)
{
    struct mark_call *c = arg;
    struct lossmark *lm = c->lm;
    struct app *app = lm->app;
    c->in_flight = 0;
    if (v == MARK_FAILED)
        return; /* Redis down or refusing: the next tick asks again */
    c->written = c->next;
    note_fence(lm, c, fenced);
    if (v == MARK_BEHIND || v == MARK_MISSING) {
        int kind = v == MARK_BEHIND ? 1 : 2;
        int64_t now = clock_unix_ms();
        int first = atomic_load(&app->redis_loss_at) == 0;
        atomic_store(&app->redis_loss_shard, c->shard);
        atomic_store(&app->redis_loss_kind, kind);
        atomic_store(&app->redis_loss_at, now);
        metrics_inc(MC_REDIS_LOSSES, 1);
        log_error("redis: shard %d came back with %s data (%s): jobs ended since may be live again and jobs pushed "
                  "since may be missing; %s",
                  c->shard, kind == 1 ? "older" : "none of its", kind_names[kind],
                  app->cfg.redis_auto_restore ? "restoring both ways ([redis] auto_restore)"
                                              : "run GET /reStore (docs/operations.md)");
        if (first && lm->on_loss)
            lm->on_loss(lm->arg);
        return;
    }
    int64_t at = atomic_load(&app->redis_loss_at);
    if (at != 0 && restored > at && atomic_compare_exchange_strong(&app->redis_loss_at, &at, 0)) {
        log_info("redis: the loss seen on shard %d was repaired by a restore", atomic_load(&app->redis_loss_shard));
        if (lm->nfenced == 0)
            dutywatch_ok(DUTY_RESTORE, -1); /* whoever restored it, nothing is left to repair */
    }
}

void lossmark_tick(struct lossmark *lm)
{
    /* Nothing is written into data laid out for another shard count or tags (layout.h). */
    if (atomic_load(&lm->app->layout) != LAYOUT_OK)
        return;
    int64_t now = clock_unix_ms();
    lm->last_mark = now > lm->last_mark ? now : lm->last_mark + 1;
    for (int s = 0; s < lm->store->shards; s++) {
        struct mark_call *c = &lm->calls[s];
        if (c->in_flight)
            continue;
        c->next = lm->last_mark;
        c->in_flight = 1;
        if (store_mark(lm->store, s, lm->app->instance, c->written, c->next, on_mark, c) < 0)
            c->in_flight = 0; /* Redis down: next tick */
    }
}

struct lossmark *lossmark_new(struct app *app, struct store *store, void (*on_loss)(void *arg),
                              void (*on_fenced)(int shard, void *arg), void *arg)
{
    struct lossmark *lm = calloc(1, sizeof *lm);
    if (lm == NULL || (lm->calls = calloc((size_t)store->shards, sizeof *lm->calls)) == NULL) {
        free(lm);
        return NULL;
    }
    lm->app = app;
    lm->store = store;
    lm->on_loss = on_loss;
    lm->on_fenced = on_fenced;
    lm->arg = arg;
    for (int s = 0; s < store->shards; s++)
        lm->calls[s] = (struct mark_call){.lm = lm, .shard = s};
    return lm;
}

void lossmark_free(struct lossmark *lm)
{
    if (lm == NULL)
        return;
    free(lm->calls);
    free(lm);
}
