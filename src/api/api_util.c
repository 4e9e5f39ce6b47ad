/* api_util.c — see api_util.h. */
#include "api/api_util.h"
#include "api/passmerge.h"
#include "base/clock.h"
#include "core/ids.h"
#include "durable/journal.h"
#include "core/metrics.h"
#include "redis/rlink.h"
#include "base/sbuf.h"
#include "core/app.h"

#include <string.h>

int api_param_id_opt(struct request *r, const char *name, uint64_t *id)
{
    const char *v = params_get(&r->params, name);
    if (v == NULL)
        return 0;
    if (id_parse(v, strlen(v), id) < 0) {
        respond_error(r, 400, "bad_request", "%s must be a job id: a decimal number of up to 19 digits", name);
        return -1;
    }
    return 1;
}

int api_param_id(struct request *r, uint64_t *id)
{
    int got = api_param_id_opt(r, "id", id);
    if (got == 0)
        respond_error(r, 400, "bad_request", "id is required");
    return got == 1 ? 0 : -1;
}

int api_param_attempt(struct request *r, int *attempt)
{
    char err[128];
    int64_t v;
    if (param_int(&r->params, "attempt", 1, 1000000, 0, &v, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return -1;
    }
    *attempt = (int)v;
    return 0;
}

int api_answer_outcome(struct request *r, const struct id_outcome *o, const char *need)
{
    if (o == NULL) {
        respond_unavailable(r, "Redis");
        return 1;
    }
    switch (o->status) {
    case ID_OK:
        return 0;
    case ID_MISSING:
        respond_error(r, 404, "not_found", "no live job with this id (unknown, finished or deleted)");
        return 1;
    case ID_WRONG_STATE:
        respond_error(r, 404, "not_found", "the job is %s, not %s", job_state_name(o->state), need);
        return 1;
    case ID_STALE:
        respond_error(r, 409, "conflict", "your lease expired: the job was delivered again (attempt %u)", o->attempts);
        return 1;
    case ID_BIZ_HELD:
        respond_error(r, 409, "conflict", "another live job holds this job's bizKey");
        return 1;
    }
    return 1;
}

int api_param_topicish(struct request *r, const char *name, const char **out, size_t *len)
{
    const char *v = params_get(&r->params, name);
    *len = v ? strlen(v) : 0;
    *out = *len ? v : NULL;
    if (*len == 0)
        return 0;
    if (*len > TOPIC_MAX || !job_topic_valid(v, *len)) {
        respond_error(r, 400, "bad_request", "%s must be 1-%d characters of [A-Za-z0-9_.:-]", name, TOPIC_MAX);
        return -1;
    }
    return 0;
}

void *api_state_new(struct request *r, size_t size, void (*free_fn)(void *))
{
    void *st = calloc(1, size);
    if (st == NULL) {
        respond_unavailable(r, "memory");
        return NULL;
    }
    r->state = st;
    r->state_free = free_fn ? free_fn : free;
    return st;
}

int api_params_only(struct request *r, const char *const *allowed)
{
    char err[128];
    if (params_only(&r->params, allowed, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return -1;
    }
    return 0;
}

int api_require_redis(struct request *r)
{
    if (!rlink_usable(r->ctx->redis)) {
        respond_unavailable(r, "Redis");
        return -1;
    }
    int layout = atomic_load(&r->ctx->app->layout);
    if (layout != 1) {
        respond_error(r, 503, "unavailable",
                      layout < 0 ? "this instance's [redis] shards or shard tags differ from the data's (see the log)"
                                 : "Redis is being checked; retry shortly");
        return -1;
    }
    return 0;
}

int api_require_mysql(struct request *r)
{
    if (!journal_up()) {
        respond_unavailable(r, "MySQL");
        return -1;
    }
    return 0;
}

int api_require_journal_room(struct request *r)
{
    if (!journal_accepting()) {
        respond_unavailable(r, "the MySQL journal (backlog full)");
        return -1;
    }
    return 0;
}

void api_who(const struct request *r, char *out, size_t cap)
{
    store_who(out, cap, r->ctx->app->instance, r->ctx->name, r->client);
}

void api_fill_jobchange(struct jobchange *rec, struct request *r, uint64_t id, int shard, const char *key, int from,
                        int to, uint32_t ver, uint32_t attempts, int64_t run_at)
{
    memset(rec, 0, sizeof *rec);
    rec->kind = JC_TRANSITION;
    rec->id = id;
    rec->shard = (uint16_t)shard;
    rec->from = (uint8_t)from;
    rec->to = (uint8_t)to;
    rec->ver = ver;
    rec->attempts = attempts;
    rec->at = clock_unix_ms();
    rec->run_at = run_at;
    request_actor(r, shard, key, rec->actor, sizeof rec->actor);
    sb_str_put(rec->host, sizeof rec->host, 0, r->client);
}

static int send_reserve(void *arg, int shard, const char *const *topics, const size_t *lens, int ntopics, int count,
                        const char *who, store_reserve_fn fn, void *fn_arg)
{
    struct hctx *ctx = arg;
    return store_reserve(&ctx->store, shard, topics, lens, ntopics, count, clock_unix_ms(), who, 0, fn, fn_arg);
}

static int send_finish(void *arg, int shard, const uint64_t *ids, const int *attempts, int n, const char *who,
                       store_ids_fn fn, void *fn_arg)
{
    struct hctx *ctx = arg;
    return store_finish_many(&ctx->store, shard, ids, attempts, n, clock_unix_ms(), who, fn, fn_arg);
}

struct passmerge *api_merged(struct hctx *ctx)
{
    static const struct passmerge_sends sends = {send_reserve, send_finish};
    if (ctx->merged == NULL)
        ctx->merged = passmerge_new(ctx->base, &sends, ctx);
    return ctx->merged;
}

int api_merged_finish(struct hctx *ctx, uint64_t id, int attempt, const char *who, store_id_fn fn, void *arg)
{
    struct passmerge *merge = api_merged(ctx);
    return merge ? passmerge_finish(merge, id_shard(id, ctx->store.shards), id, attempt, who, fn, arg) : -1;
}

void api_merged_drain(struct hctx *ctx)
{
    if (ctx->merged)
        passmerge_flush(ctx->merged);
}

void api_merged_free(struct hctx *ctx)
{
    passmerge_free(ctx->merged);
    ctx->merged = NULL;
}
