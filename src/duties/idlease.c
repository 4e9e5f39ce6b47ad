/* idlease.c — see idlease.h. */
#include "duties/idlease.h"
#include "core/app.h"
#include "base/clock.h"
#include "base/log.h"
#include "redis/rlink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEASE_TTL_MS 10000
#define HORIZON_MS   5000

struct idlease {
    struct app *app;
    struct rlink *rc;
    int held;             /* worker number held, -1 none */
    int trying;           /* number being tried by an acquire in flight */
    int busy;             /* a call is in flight */
    int tried;            /* numbers tried in this acquisition round */
    int64_t sent_horizon; /* the mark the call in flight makes durable */
    int warned;
    char token[96];
    char key[128];
};

static void call(struct idlease *l, const char *op, int worker, int64_t horizon, rconn_reply_fn fn)
{
    char wbuf[16], ttl[16], hz[24];
    snprintf(wbuf, sizeof wbuf, "%d", worker);
    snprintf(ttl, sizeof ttl, "%d", LEASE_TTL_MS);
    snprintf(hz, sizeof hz, "%lld", (long long)horizon);
    const char *argv[9] = {NULL, NULL, NULL, l->key, op, wbuf, l->token, ttl, hz};
    size_t lens[9] = {0, 0, 0, strlen(l->key), strlen(op), strlen(wbuf), strlen(l->token), strlen(ttl), strlen(hz)};
    if (rlink_eval(l->rc, SCRIPT_LEASE, 9, argv, lens, fn, l) == 0) {
        l->busy = 1;
        l->sent_horizon = horizon;
    }
}

static int64_t next_horizon(struct idlease *l)
{
    int64_t now = clock_unix_ms(), last = idgen_last_ms(&l->app->ids);
    return (now > last ? now : last) + HORIZON_MS;
}

static void hold(struct idlease *l, int worker, int64_t floor_ms, int64_t horizon)
{
    l->held = worker;
    idgen_set_worker(&l->app->ids, worker, floor_ms);
    idgen_set_horizon(&l->app->ids, horizon);
    atomic_store(&l->app->worker_id, worker);
    log_info("ids: holding worker number %d (ids start after %lld)", worker, (long long)floor_ms);
}

static void drop(struct idlease *l, const char *why)
{
    if (l->held >= 0)
        log_warn("ids: lost worker number %d (%s); pushes get 503 until a number is held again", l->held, why);
    l->held = -1;
    idgen_set_worker(&l->app->ids, -1, 0);
    atomic_store(&l->app->worker_id, -1);
}

static void on_acquire(redisReply *r, void *arg);

static void try_next(struct idlease *l)
{
    if (l->tried >= IDS_MAX_WORKER + 1) {
        log_error("ids: all %d worker numbers are leased by other instances", IDS_MAX_WORKER + 1);
        l->tried = 0;
        return;
    }
    l->tried++;
    l->trying = (l->trying + 1) % (IDS_MAX_WORKER + 1);
    call(l, "acquire", l->trying, next_horizon(l), on_acquire);
}

static void on_acquire(redisReply *r, void *arg)
{
    struct idlease *l = arg;
    l->busy = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return; /* Redis trouble: the next tick tries again */
    if (r->element[0]->integer == 1 && r->elements >= 2) {
        l->tried = 0;
        hold(l, l->trying, r->element[1]->integer, l->sent_horizon);
        return;
    }
    try_next(l);
}

static void on_renew(redisReply *r, void *arg)
{
    struct idlease *l = arg;
    l->busy = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return; /* keep issuing up to the horizon already made durable */
    if (r->element[0]->integer == 1 && r->elements >= 2)
        idgen_set_horizon(&l->app->ids, r->element[1]->integer);
    else
        drop(l, "the lease expired or was taken");
}

static void on_fixed(redisReply *r, void *arg)
{
    struct idlease *l = arg;
    l->busy = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
        return;
    if (r->element[0]->integer != 1) {
        /* Two instances configured with one number would issue the same ids: refuse. */
        if (l->held >= 0 || !l->warned)
            log_error("ids: [instance] worker_id = %d is held by another instance (%s); pushes get 503 until it "
                      "is released or this instance gets its own number",
                      l->app->cfg.worker_id, r->element[1]->str ? r->element[1]->str : "?");
        l->warned = 1;
        drop(l, "configured number in use elsewhere");
        return;
    }
    l->warned = 0;
    if (l->held < 0)
        hold(l, l->app->cfg.worker_id, r->element[1]->integer, l->sent_horizon);
    else
        idgen_set_horizon(&l->app->ids, l->sent_horizon);
}

void idlease_tick(struct idlease *l)
{
    if (l->busy || !rlink_usable(l->rc))
        return;
    int64_t horizon = next_horizon(l);
    if (l->app->cfg.worker_id >= 0) {
        call(l, "fixed", l->app->cfg.worker_id, horizon, on_fixed);
    } else if (l->held >= 0) {
        call(l, "renew", l->held, horizon, on_renew);
    } else {
        l->tried = 0;
        try_next(l);
    }
}

static void on_released(redisReply *r, void *arg)
{
    struct idlease *l = arg;
    l->busy = 0;
}

void idlease_release(struct idlease *l)
{
    if (l->held >= 0 && rlink_usable(l->rc))
        call(l, "release", l->held, 0, on_released);
}

struct idlease *idlease_new(struct app *app, struct rlink *rc)
{
    struct idlease *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    l->app = app;
    l->rc = rc;
    l->held = -1;
    /* auto: a fresh token per process, so a restarted instance leases a new number while its
     * old lease runs out; fixed: the instance's name, so it takes its own number back at once */
    if (app->cfg.worker_id >= 0)
        snprintf(l->token, sizeof l->token, "%s", app->instance);
    else
        snprintf(l->token, sizeof l->token, "%s/%d/%lld", app->instance, (int)getpid(), (long long)clock_unix_ms());
    snprintf(l->key, sizeof l->key, "%s:{w}:workers", app->cfg.redis_prefix);
    /* start the search somewhere different on each instance, so a fleet rarely collides */
    l->trying = (int)((unsigned)(getpid() * 2654435761u + (unsigned)clock_mono_us()) % (IDS_MAX_WORKER + 1)) - 1;
    return l;
}

void idlease_free(struct idlease *l)
{
    free(l);
}
