/* layout.c — see layout.h. */
#include "layout.h"
#include "app.h"
#include "log.h"
#include "rconn.h"
#include "sbuf.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* HSETNX <key> shards N, then HGET <key> shards: the argv of both commands. */
struct layout_cmds {
    char key[160], count[INT_TEXT_MAX];
    const char *set[4], *get[3];
    size_t setlen[4], getlen[3];
};

static void build(struct layout_cmds *c, const char *prefix, int shards)
{
    size_t klen = str_put(c->key, sizeof c->key, 0, prefix);
    klen = str_put(c->key, sizeof c->key, klen, ":{w}:meta");
    size_t nlen = int_to_text(shards, c->count);
    const char *set[] = {"HSETNX", c->key, "shards", c->count};
    size_t setlen[] = {6, klen, 6, nlen};
    const char *get[] = {"HGET", c->key, "shards"};
    size_t getlen[] = {4, klen, 6};
    memcpy(c->set, set, sizeof set);
    memcpy(c->setlen, setlen, sizeof setlen);
    memcpy(c->get, get, sizeof get);
    memcpy(c->getlen, getlen, sizeof getlen);
}

static enum layout_verdict verdict(const redisReply *r, int shards, int *recorded)
{
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        return LAYOUT_UNKNOWN;
    *recorded = atoi(r->str);
    return *recorded == shards ? LAYOUT_OK : LAYOUT_DIFFERS;
}

enum layout_verdict layout_check_blocking(redisContext *c, const char *prefix, int shards, int *recorded)
{
    struct layout_cmds cmds;
    build(&cmds, prefix, shards);
    redisReply *r = redisCommandArgv(c, 4, cmds.set, cmds.setlen);
    if (r)
        freeReplyObject(r);
    r = redisCommandArgv(c, 3, cmds.get, cmds.getlen);
    enum layout_verdict v = verdict(r, shards, recorded);
    if (r)
        freeReplyObject(r);
    return v;
}

static void on_claimed(redisReply *r, void *arg)
{
}

static void on_layout(redisReply *r, void *arg)
{
    struct app *app = arg;
    int recorded = 0, shards = app->cfg.redis_shards;
    enum layout_verdict v = verdict(r, shards, &recorded);
    if (v == LAYOUT_UNKNOWN)
        return; /* checked again on the next tick */
    int was = atomic_exchange(&app->layout, (int)v);
    if (v == LAYOUT_OK && was != LAYOUT_OK)
        log_info("redis: data layout checked ([redis] shards = %d)", shards);
    if (v == LAYOUT_DIFFERS && was != LAYOUT_DIFFERS)
        log_error("redis: the data under prefix \"%s\" was written with [redis] shards = %d, this instance has "
                  "%d; it refuses requests until the configuration matches",
                  app->cfg.redis_prefix, recorded, shards);
}

void layout_check(struct rconn *rc, struct app *app)
{
    struct layout_cmds cmds;
    build(&cmds, app->cfg.redis_prefix, app->cfg.redis_shards);
    if (rconn_command(rc, on_claimed, NULL, 4, cmds.set, cmds.setlen) < 0 ||
        rconn_command(rc, on_layout, app, 3, cmds.get, cmds.getlen) < 0)
        log_debug("redis: could not check the data layout now; next tick");
}
