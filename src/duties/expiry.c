/* expiry.c — see expiry.h. */
#include "duties/expiry.h"
#include "core/app.h"
#include "base/clock.h"
#include "redis/layout.h"
#include "base/log.h"
#include "core/metrics.h"
#include "duties/mover.h"
#include "redis/store.h"

#include <stdlib.h>
#include <string.h>

#define EXPIRY_BATCH 200 /* jobs removed per script call: keeps each call short */

struct expiry {
    struct app *app;
    struct store *store;
    const struct mover *mover;
    int running;       /* a pass is under way (one call in flight at a time) */
    int shard;         /* the shard being swept */
    char cursor[32];   /* HSCAN cursor within it */
    int64_t cutoff;    /* dead before this go */
    long long removed; /* in this pass */
};

static void step(struct expiry *e);

static void on_expired(const char *cursor, long long removed, void *arg)
{
    struct expiry *e = arg;
    if (cursor == NULL) { /* Redis trouble: the next scheduled pass starts over */
        e->running = 0;
        return;
    }
    e->removed += removed;
    metrics_inc(MC_DEAD_EXPIRED, (uint64_t)removed);
    snprintf(e->cursor, sizeof e->cursor, "%s", cursor);
    if (strcmp(e->cursor, "0") == 0)
        e->shard++;
    step(e);
}

/* The next call of the pass, or its end. */
static void step(struct expiry *e)
{
    const struct config *cfg = &e->app->cfg;
    while (e->shard < cfg->redis_shards && !mover_owns(e->mover, e->shard))
        e->shard++;
    if (e->shard >= cfg->redis_shards) {
        if (e->removed > 0)
            log_info("expiry: %lld dead jobs older than %d days removed from Redis", e->removed, cfg->retention_days);
        e->running = 0;
        return;
    }
    if (store_dead_expire(e->store, e->shard, e->cursor, e->cutoff, EXPIRY_BATCH, on_expired, e) < 0)
        e->running = 0; /* Redis down: next time */
}

void expiry_start(struct expiry *e)
{
    const struct config *cfg = &e->app->cfg;
    if (e->running || cfg->retention_days <= 0 || atomic_load(&e->app->layout) != LAYOUT_OK)
        return;
    e->running = 1;
    e->shard = 0;
    e->removed = 0;
    strcpy(e->cursor, "0");
    e->cutoff = clock_unix_ms() - (int64_t)cfg->retention_days * 86400000;
    step(e);
}

struct expiry *expiry_new(struct app *app, struct store *store, const struct mover *mover)
{
    struct expiry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->app = app;
    e->store = store;
    e->mover = mover;
    return e;
}

void expiry_free(struct expiry *e)
{
    free(e);
}
