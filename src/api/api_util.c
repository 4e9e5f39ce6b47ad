/* api_util.c — see api_util.h. */
#include "api/api_util.h"
#include "base/clock.h"
#include "core/ids.h"
#include "durable/journal.h"
#include "core/metrics.h"
#include "redis/rlink.h"
#include "base/sbuf.h"
#include "core/app.h"

#include <string.h>

int api_param_id(struct request *r, uint64_t *id)
{
    const char *v = params_get(&r->params, "id");
    if (v == NULL) {
        respond_error(r, 400, "bad_request", "id is required");
        return -1;
    }
    if (id_parse(v, strlen(v), id) < 0) {
        respond_error(r, 400, "bad_request", "id must be a job id: a decimal number of up to 19 digits");
        return -1;
    }
    return 0;
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
