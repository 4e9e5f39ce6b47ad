/* api_info.c — /health, /stats and /metrics. */
#include "api.h"
#include "api_util.h"
#include "clock.h"
#include "journal.h"
#include "metrics.h"
#include "rconn.h"
#include "app.h"

#include <stdlib.h>

void api_health(struct request *r)
{
    struct app *app = r->ctx->app;
    /* Redis counts as up when every HTTP worker can use it, not only the one answering: a
     * load balancer that sees 200 sends requests to all of them. */
    int redis = rconn_is_up(r->ctx->redis) && atomic_load(&app->redis_workers_up) == app->nworkers;
    int mysql = journal_up();
    int draining = atomic_load(&app->draining);
    int ids = atomic_load(&app->worker_id) >= 0; /* without a worker number it cannot take pushes */
    int layout = atomic_load(&app->layout) == 1;  /* shard count checked against the data */
    /* Redis may answer and still refuse work (OOM, BUSY, READONLY...): name it (rconn.h). */
    struct rconn_error rerr;
    int refused = rconn_cause_refuses(rconn_process_error(&rerr));
    int ok = redis && !refused && mysql && ids && layout && !draining;
    struct sbuf sb = SBUF_INIT;
    sb_printf(&sb, "{\"status\":\"%s\",\"redis\":\"%s\",\"mysql\":\"%s\",\"draining\":%s,\"instance\":",
              ok ? "ok" : "unavailable", redis ? "up" : "down", mysql ? "up" : "down", draining ? "true" : "false");
    sb_json_cstr(&sb, app->instance);
    if (rerr.cause != RCAUSE_NONE) {
        sb_printf(&sb, ",\"redisError\":{\"cause\":\"%s\",\"message\":", rconn_cause_name(rerr.cause));
        sb_json_cstr(&sb, rerr.text);
        sb_printf(&sb, ",\"ageMs\":%lld}", (long long)rerr.age_ms);
    }
    sb_printf(&sb, ",\"workerId\":%d}", atomic_load(&app->worker_id));
    if (!ok)
        respond_header(r, "Retry-After", "1");
    respond_json(r, ok ? 200 : 503, &sb);
    sb_free(&sb);
}

static void on_counts(const struct topic_counts *topics, int n, long outbox, int failed, void *arg)
{
    struct request *r = arg;
    struct app *app = r->ctx->app;
    if (failed) {
        respond_unavailable(r, "Redis");
        return;
    }
    int64_t now = clock_unix_ms();
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "{\"instance\":");
    sb_json_cstr(&sb, app->instance);
    sb_printf(&sb, ",\"startedAt\":%lld,\"uptimeMs\":%lld,\"workerId\":%d", (long long)app->started_unix_ms,
              (long long)(now - app->started_unix_ms), atomic_load(&app->worker_id));
    int64_t total[4] = {0, 0, 0, 0};
    sb_puts(&sb, ",\"topics\":{");
    for (int i = 0; i < n; i++) {
        const struct topic_counts *t = &topics[i];
        if (i)
            sb_putc(&sb, ',');
        sb_json_cstr(&sb, t->topic);
        sb_printf(&sb, ":{\"delayed\":%lld,\"ready\":%lld,\"reserved\":%lld,\"dead\":%lld}", (long long)t->delayed,
                  (long long)t->ready, (long long)t->reserved, (long long)t->dead);
        total[0] += t->delayed;
        total[1] += t->ready;
        total[2] += t->reserved;
        total[3] += t->dead;
    }
    sb_printf(&sb, "},\"totals\":{\"delayed\":%lld,\"ready\":%lld,\"reserved\":%lld,\"dead\":%lld}",
              (long long)total[0], (long long)total[1], (long long)total[2], (long long)total[3]);
    sb_printf(&sb,
              ",\"journal\":{\"mysql\":\"%s\",\"backlog\":%ld,\"durableWaiting\":%ld,\"accepting\":%s}"
              ",\"http\":{\"parked\":%lld,\"connections\":%lld}",
              journal_up() ? "up" : "down", journal_local_backlog() + outbox, journal_durable_waiting(),
              journal_accepting() ? "true" : "false", (long long)atomic_load(&app->parked),
              (long long)metrics_gauge_get(MG_CONNECTIONS));
    if (app->keeper_stats_json)
        app->keeper_stats_json(app->keeper_stats_arg, &sb);
    sb_putc(&sb, '}');
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

void api_stats(struct request *r)
{
    static const char *const none[] = {NULL};
    if (api_params_only(r, none) < 0 || api_require_redis(r) < 0)
        return;
    if (store_counts(&r->ctx->store, on_counts, r) < 0)
        respond_unavailable(r, "Redis");
}

void api_metrics(struct request *r)
{
    struct sbuf sb = SBUF_INIT;
    metrics_gauge_set(MG_JOURNAL_BACKLOG, journal_backlog());
    metrics_render(&sb, r->ctx->app->instance);
    respond_text(r, 200, "text/plain; version=0.0.4", &sb);
    sb_free(&sb);
}
