/* layout.c — see layout.h. */
#include "redis/layout.h"
#include "core/app.h"
#include "base/log.h"
#include "redis/rlink.h"
#include "redis/rblock.h"
#include "base/sbuf.h"
#include "redis/scripts.h"
#include "core/shardtag.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FCALL layout 1 <prefix>:{w}:meta <shards> <tags>: argv[0..2] filled by the sender. */
struct layout_call {
    char key[160], count[INT_TEXT_MAX];
    const char *argv[6];
    size_t lens[6];
};

static void build(struct layout_call *c, const char *prefix, int shards)
{
    size_t klen = sb_str_put(c->key, sizeof c->key, 0, prefix);
    klen = sb_str_put(c->key, sizeof c->key, klen, ":{w}:meta");
    const char *tags = shardtag_scheme_name(shardtag_scheme());
    c->argv[3] = c->key;
    c->lens[3] = klen;
    c->argv[4] = c->count;
    c->lens[4] = sb_int_to_text(shards, c->count);
    c->argv[5] = tags;
    c->lens[5] = strlen(tags);
}

static enum layout_verdict verdict(const redisReply *r, int shards, struct layout_record *found)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return LAYOUT_UNKNOWN;
    found->shards = atoi(r->element[0]->str);
    snprintf(found->tags, sizeof found->tags, "%s", r->element[1]->str);
    int same = found->shards == shards && strcmp(found->tags, shardtag_scheme_name(shardtag_scheme())) == 0;
    return same ? LAYOUT_OK : LAYOUT_DIFFERS;
}

/* How each scheme tags shard 3, for the operator. */
static const char *tags_described(const char *tags)
{
    if (strcmp(tags, "plain") == 0)
        return "plain shard tags, {3}: a single Redis, [redis] cluster = false";
    if (strcmp(tags, "cluster") == 0)
        return "cluster shard tags, {3.2520}: [redis] cluster = true";
    return "an unknown shard tag scheme";
}

void layout_explain(const struct layout_record *found, const char *prefix, int shards, char *out, size_t cap)
{
    if (found->shards != shards)
        snprintf(out, cap, "the data under prefix \"%s\" was written with [redis] shards = %d, this instance has %d",
                 prefix, found->shards, shards);
    else
        snprintf(out, cap, "the data under prefix \"%s\" was written with %s (\"%s\"), this instance uses %s", prefix,
                 tags_described(found->tags), found->tags, tags_described(shardtag_scheme_name(shardtag_scheme())));
}

enum layout_verdict layout_check_blocking(redisContext *c, const char *prefix, int shards, struct layout_record *found)
{
    /* the start-up connection loads no library by itself: the check loads it first */
    if (rblock_load_library(c, c->errstr, sizeof c->errstr) < 0)
        return LAYOUT_UNKNOWN; /* why, in errstr: the caller shows it */
    struct layout_call call;
    build(&call, prefix, shards);
    script_call_head(SCRIPT_LAYOUT, call.argv, call.lens);
    redisReply *r = redisCommandArgv(c, 6, call.argv, call.lens);
    enum layout_verdict v = verdict(r, shards, found);
    if (r && r->type == REDIS_REPLY_ERROR) /* (a full Redis: OOM) why, for the caller */
        snprintf(c->errstr, sizeof c->errstr, "%s", r->str);
    if (r)
        freeReplyObject(r);
    return v;
}

struct layout_wait {
    struct app *app;
    layout_done_fn done;
    void *arg;
};

static void on_layout(redisReply *r, void *arg)
{
    struct layout_wait *w = arg;
    struct app *app = w->app;
    layout_done_fn done = w->done;
    void *done_arg = w->arg;
    free(w);
    struct layout_record found;
    int shards = app->cfg.redis_shards;
    enum layout_verdict v = verdict(r, shards, &found);
    if (v != LAYOUT_UNKNOWN) { /* else checked again on the next tick */
        int was = atomic_exchange(&app->layout, (int)v);
        if (v == LAYOUT_OK && was != LAYOUT_OK)
            log_info("redis: data layout checked ([redis] shards = %d, %s shard tags)", shards, found.tags);
        if (v == LAYOUT_DIFFERS && was != LAYOUT_DIFFERS) {
            char why[512];
            layout_explain(&found, app->cfg.redis_prefix, shards, why, sizeof why);
            log_error("redis: %s; it refuses requests until the configuration matches", why);
        }
    }
    if (done)
        done(v, done_arg);
}

void layout_check(struct rlink *rc, struct app *app, layout_done_fn done, void *arg)
{
    struct layout_call call;
    struct layout_wait *w = malloc(sizeof *w);
    if (w == NULL)
        return; /* checked again on the next tick */
    *w = (struct layout_wait){app, done, arg};
    build(&call, app->cfg.redis_prefix, app->cfg.redis_shards);
    if (rlink_eval(rc, SCRIPT_LAYOUT, 6, call.argv, call.lens, on_layout, w) < 0) {
        free(w);
        log_debug("redis: could not check the data layout now; next tick");
    }
}

struct rblock_shards *layout_open_shards(const struct config *cfg, int load_scripts, enum layout_verdict *v, char *err,
                                         size_t errlen)
{
    enum layout_verdict ignored;
    if (v == NULL)
        v = &ignored;
    *v = LAYOUT_UNKNOWN;
    struct rblock_shards *set = rblock_shards_open(cfg, load_scripts, NULL, err, errlen);
    if (set == NULL)
        return NULL;
    /* The record is a {w} key: a single Redis's one connection has it; in a cluster it is on
     * the master of {w}'s slot, which need not serve a shard. Made after the set, so the
     * answer speaks of the data the set's connections reach. */
    redisContext *c =
        cfg->redis_cluster ? rblock_connect_key(cfg, "{w}", 3, 0, NULL, err, errlen) : rblock_shard(set, 0);
    struct layout_record found;
    if (c != NULL) {
        *v = layout_check_blocking(c, cfg->redis_prefix, cfg->redis_shards, &found);
        if (*v == LAYOUT_UNKNOWN)
            snprintf(err, errlen, "the data layout could not be checked now%s%s", c->errstr[0] ? ": " : "", c->errstr);
        else if (*v == LAYOUT_DIFFERS)
            layout_explain(&found, cfg->redis_prefix, cfg->redis_shards, err, errlen);
        if (cfg->redis_cluster)
            redisFree(c);
    }
    if (*v == LAYOUT_OK)
        return set;
    rblock_shards_free(set);
    return NULL;
}
