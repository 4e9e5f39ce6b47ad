/* api_util.c — see api_util.h. */
#include "api_util.h"
#include "clock.h"
#include "ids.h"
#include "journal.h"
#include "metrics.h"
#include "rconn.h"
#include "sbuf.h"
#include "worker.h"

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
    if (!rconn_is_up(r->w->redis)) {
        respond_unavailable(r, "Redis");
        return -1;
    }
    int layout = atomic_load(&r->w->app->layout);
    if (layout != 1) {
        respond_error(r, 503, "unavailable",
                      layout < 0 ? "this instance's [redis] shards differs from the one the data was written with"
                                 : "Redis is being checked; retry shortly");
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

void api_json_delivered(struct sbuf *sb, const struct delivered *d)
{
    sb_puts(sb, "{\"id\":");
    api_json_id(sb, d->id);
    sb_puts(sb, ",\"topic\":");
    sb_json_str(sb, d->topic, d->topic_len);
    sb_puts(sb, ",\"body\":");
    sb_put(sb, d->body, d->body_len); /* stored as compact JSON text */
    sb_puts(sb, ",\"priority\":");
    sb_json_int(sb, d->priority);
    sb_puts(sb, ",\"ttr\":");
    sb_json_int(sb, d->ttr);
    sb_puts(sb, ",\"tries\":");
    sb_json_int(sb, d->tries);
    sb_puts(sb, ",\"attempt\":");
    sb_json_int(sb, d->attempt);
    sb_puts(sb, ",\"runAt\":");
    sb_json_int(sb, d->run_at);
    if (d->lease_until > 0) {
        sb_puts(sb, ",\"leaseUntil\":");
        sb_json_int(sb, d->lease_until);
    }
    if (d->biz_len > 0) {
        sb_puts(sb, ",\"bizKey\":");
        sb_json_str(sb, d->biz, d->biz_len);
    }
    sb_putc(sb, '}');
}

void api_json_view(struct sbuf *sb, uint64_t id, const struct job_view *v)
{
    sb_puts(sb, "{\"id\":");
    api_json_id(sb, id);
    sb_puts(sb, ",\"topic\":");
    sb_json_str(sb, v->topic, v->topic_len);
    sb_puts(sb, ",\"state\":");
    sb_json_cstr(sb, job_state_name(v->state));
    sb_puts(sb, ",\"body\":");
    sb_put(sb, v->body, v->body_len);
    sb_printf(sb, ",\"priority\":%d,\"ttr\":%lld,\"tries\":%d,\"attempt\":%u,\"runAt\":%lld,\"createdAt\":%lld",
              v->priority, (long long)v->ttr, v->tries, v->attempts, (long long)v->run_at,
              (long long)id_unix_ms(id));
    if (v->lease_until > 0)
        sb_printf(sb, ",\"leaseUntil\":%lld", (long long)v->lease_until);
    if (v->biz_len > 0) {
        sb_puts(sb, ",\"bizKey\":");
        sb_json_str(sb, v->biz, v->biz_len);
    }
}

void api_who(const struct request *r, char *out, size_t cap)
{
    store_who(out, cap, r->w->app->instance, r->w->name, r->client);
}

void api_fill_jrec(struct jrec *rec, struct request *r, uint64_t id, int shard, const char *key, int from, int to,
                   uint32_t ver, uint32_t attempts, int64_t run_at)
{
    memset(rec, 0, sizeof *rec);
    rec->kind = JR_TRANSITION;
    rec->id = id;
    rec->from = (uint8_t)from;
    rec->to = (uint8_t)to;
    rec->ver = ver;
    rec->attempts = attempts;
    rec->at = clock_unix_ms();
    rec->run_at = run_at;
    request_actor(r, shard, key, rec->actor, sizeof rec->actor);
    str_put(rec->host, sizeof rec->host, 0, r->client);
}
