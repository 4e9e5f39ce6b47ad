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
    if (*len > TOPIC_MAX || !topic_valid(v, *len)) {
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

void api_json_id(struct sbuf *sb, uint64_t id)
{
    char dec[ID_DECIMAL_MAX + 1];
    int n = id_format(id, dec);
    sb_putc(sb, '"');
    sb_put(sb, dec, (size_t)n);
    sb_putc(sb, '"');
}

void api_json_job_open(struct sbuf *sb, const struct job_json *j)
{
    sb_puts(sb, "{\"id\":");
    api_json_id(sb, j->id);
    if (j->topic) {
        sb_puts(sb, ",\"topic\":");
        sb_json_str(sb, j->topic, j->topic_len);
    }
    if (j->state) {
        sb_puts(sb, ",\"state\":");
        sb_json_cstr(sb, j->state);
    }
    sb_puts(sb, ",\"body\":");
    sb_put(sb, j->body, j->body_len); /* stored as compact JSON text */
    sb_puts(sb, ",\"priority\":");
    sb_json_int(sb, j->priority);
    sb_puts(sb, ",\"ttr\":");
    sb_json_int(sb, j->ttr);
    sb_puts(sb, ",\"tries\":");
    sb_json_int(sb, j->tries);
    sb_puts(sb, ",\"attempt\":");
    sb_json_int(sb, j->attempt);
    sb_puts(sb, ",\"runAt\":");
    sb_json_int(sb, j->run_at);
    if (j->created_at > 0) {
        sb_puts(sb, ",\"createdAt\":");
        sb_json_int(sb, j->created_at);
    }
    if (j->lease_until > 0) {
        sb_puts(sb, ",\"leaseUntil\":");
        sb_json_int(sb, j->lease_until);
    }
    if (j->died_at > 0) {
        sb_puts(sb, ",\"diedAt\":");
        sb_json_int(sb, j->died_at);
    }
    if (j->biz_len > 0) {
        sb_puts(sb, ",\"bizKey\":");
        sb_json_str(sb, j->biz, j->biz_len);
    }
    if (j->has_backoff) {
        sb_puts(sb, ",\"backoff\":");
        sb_json_int(sb, j->backoff);
    }
}

void api_json_delivered(struct sbuf *sb, const struct delivered *d)
{
    struct job_json j = {.id = d->id, .topic = d->topic, .topic_len = d->topic_len, .body = d->body,
                         .body_len = d->body_len, .biz = d->biz, .biz_len = d->biz_len, .priority = d->priority,
                         .ttr = d->ttr, .tries = d->tries, .attempt = d->attempt, .run_at = d->run_at,
                         .lease_until = d->lease_until};
    api_json_job_open(sb, &j);
    sb_putc(sb, '}');
}

void api_json_view(struct sbuf *sb, uint64_t id, const struct job_view *v)
{
    struct job_json j = {.id = id, .topic = v->topic, .topic_len = v->topic_len, .state = job_state_name(v->state),
                         .body = v->body, .body_len = v->body_len, .biz = v->biz, .biz_len = v->biz_len,
                         .priority = v->priority, .ttr = v->ttr, .tries = v->tries, .attempt = v->attempts,
                         .run_at = v->run_at, .created_at = id_unix_ms(id), .lease_until = v->lease_until,
                         .has_backoff = v->backoff >= 0, .backoff = v->backoff};
    api_json_job_open(sb, &j);
}

void api_who(const struct request *r, char *out, size_t cap)
{
    store_who(out, cap, r->ctx->app->instance, r->ctx->name, r->client);
}

void api_fill_jobchange(struct jobchange *rec, struct request *r, uint64_t id, int shard, const char *key, int from, int to,
                   uint32_t ver, uint32_t attempts, int64_t run_at)
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
    str_put(rec->host, sizeof rec->host, 0, r->client);
}
