/* api_info.c — /health, /stats, /metrics, /fleet and /throughput. */
#include "api/handlers.h"
#include "core/dutywatch.h"
#include "api/api_util.h"
#include "base/clock.h"
#include "delivery/delivstats.h"
#include "durable/doubt.h"
#include "durable/journal.h"
#include "core/metrics.h"
#include "durable/pager.h"
#include "durable/firing.h"
#include "mysql/dbnode.h"
#include "redis/rlink.h"
#include "redis/rnodes.h"
#include "core/app.h"

#include <stdlib.h>
#include <string.h>

/* ",\"redisCluster\":{...}": the slot map's masters as this worker's connections see them
 * (each thread has its own; this one answers). Cluster mode only. */
static void cluster_json(const struct rcluster *rc, struct sbuf *sb)
{
    struct rcluster_node_status nodes[RNODES_MAX];
    struct rcluster_stats st;
    int n = rcluster_nodes(rc, nodes, RNODES_MAX);
    rcluster_stats(rc, &st);
    sb_printf(sb, ",\"redisCluster\":{\"masters\":%d,\"slotsCovered\":%d,\"nodes\":[", st.nmasters, st.covered);
    int first = 1;
    for (int i = 0; i < n && i < RNODES_MAX; i++) {
        if (!nodes[i].master)
            continue; /* a node being let go: no longer part of the map */
        sb_puts(sb, first ? "{\"addr\":" : ",{\"addr\":");
        first = 0;
        sb_json_cstr(sb, nodes[i].addr);
        sb_printf(sb, ",\"up\":%s,\"slots\":%d,\"replicas\":%d}", nodes[i].up ? "true" : "false", nodes[i].nslots,
                  nodes[i].nreplicas);
    }
    sb_puts(sb, "]}");
}

/* This instance's health as a JSON object; whether it can serve. */
static int health_json(struct request *r, struct sbuf *sb)
{
    struct app *app = r->ctx->app;
    /* Redis counts as up when every HTTP worker can use it, not only the one answering: a
     * load balancer that sees 200 sends requests to all of them. */
    int redis = rlink_ready(r->ctx->redis) && atomic_load(&app->redis_workers_up) == app->nworkers;
    int mysql = journal_up();
    int draining = atomic_load(&app->draining);
    int ids = atomic_load(&app->worker_id) >= 0; /* without a worker number it cannot take pushes */
    int layout = atomic_load(&app->layout) == 1; /* shard count checked against the data */
    /* Redis may answer and still refuse work (OOM, BUSY, READONLY...): name it (rconn.h). */
    struct rconn_error rerr;
    int refused = rcause_refuses(rconn_process_error(&rerr));
    int clock = clock_fleet_known(); /* without it nothing is moved or delivered (base/clock.h) */
    int ok = redis && !refused && mysql && ids && layout && clock && !draining;
    /* A Redis loss no restore has repaired yet (lossmark.h) is named in redisLoss. Rolled back
     * (older data) is "degraded": jobs deleted or finished since may be delivered again until
     * the restore. Lost (no data) keeps "ok", as it always did: nothing wrong is delivered, jobs
     * are missing until /reStore. 200 either way: a load balancer need not drop the instance. */
    int64_t loss_at = atomic_load(&app->redis_loss_at);
    int rolled_back = loss_at && atomic_load(&app->redis_loss_kind) == 1;
    /* A background duty that has not succeeded for longer than its bound (dutywatch.h) is
     * named and makes the instance "degraded": still 200, an operator sees it. */
    struct sbuf stuck = SBUF_INIT;
    int nstuck = dutywatch_stuck_json(&stuck, clock_unix_ms());
    sb_printf(sb, "{\"status\":\"%s\",\"redis\":\"%s\",\"mysql\":\"%s\",\"draining\":%s,\"instance\":",
              !ok                     ? "unavailable"
              : rolled_back || nstuck ? "degraded"
                                      : "ok",
              redis ? "up" : "down", mysql ? "up" : "down", draining ? "true" : "false");
    sb_json_cstr(sb, app->instance);
    if (clock)
        sb_printf(sb, ",\"clockOffsetMs\":%lld", (long long)(clock_fleet_offset_us / 1000));
    else
        sb_puts(sb, ",\"clockOffsetMs\":null,\"clock\":\"not measured yet: nothing is moved or delivered\"");
    if (loss_at)
        sb_printf(sb,
                  ",\"redisLoss\":{\"shard\":%d,\"kind\":\"%s\",\"detectedAt\":%lld,\"message\":\"Redis came "
                  "back with %s data; %s\"}",
                  atomic_load(&app->redis_loss_shard), atomic_load(&app->redis_loss_kind) == 1 ? "rolled back" : "lost",
                  (long long)loss_at, atomic_load(&app->redis_loss_kind) == 1 ? "older" : "none of its",
                  app->cfg.redis_auto_restore ? "an automatic restore is repairing it" : "run GET /reStore");
    /* With [mysql] hosts, the node every connection of this instance writes to: the runbook "a
     * MySQL node lost" asks which node each instance moved to, and how often (dbnode.h). */
    if (dbnode_count() > 0) {
        const struct netaddr *node = dbnode_at(dbnode_current());
        char address[NETADDR_HOST_MAX + 16];
        snprintf(address, sizeof address, node->kind == NETADDR_IPV6 ? "[%s]:%d" : "%s:%d", node->host, node->port);
        sb_puts(sb, ",\"mysqlNode\":{\"address\":");
        sb_json_cstr(sb, address);
        sb_printf(sb, ",\"index\":%d,\"switches\":%u}", dbnode_current(), dbnode_switches());
    }
    if (atomic_load(&app->redis_fenced) > 0)
        sb_printf(sb, ",\"fencedShards\":%d", atomic_load(&app->redis_fenced));
    if (nstuck)
        sb_put(sb, stuck.data, stuck.len);
    sb_free(&stuck);
    if (rerr.cause != RCAUSE_NONE) {
        sb_printf(sb, ",\"redisError\":{\"cause\":\"%s\",\"message\":", rcause_name(rerr.cause));
        sb_json_cstr(sb, rerr.text);
        sb_printf(sb, ",\"ageMs\":%lld}", (long long)rerr.age_ms);
    }
    if (r->ctx->redis->cluster != NULL)
        cluster_json(r->ctx->redis->cluster, sb);
    sb_printf(sb, ",\"workerId\":%d}", atomic_load(&app->worker_id));
    return ok;
}

void api_health(struct request *r)
{
    struct sbuf sb = SBUF_INIT;
    int ok = health_json(r, &sb);
    if (!ok)
        respond_header(r, "Retry-After", "1");
    respond_json(r, ok ? 200 : 503, &sb);
    sb_free(&sb);
}

/* ",\"journal\":{...},\"http\":{...}" — this instance's journal and connections (/stats, /fleet). */
static void journal_json(struct sbuf *sb, struct app *app, long outbox)
{
    sb_printf(sb,
              ",\"journal\":{\"mysql\":\"%s\",\"backlog\":%ld,\"durableWaiting\":%ld,\"accepting\":%s,\"inDoubt\":%ld}"
              ",\"http\":{\"parked\":%lld,\"connections\":%lld}",
              journal_up() ? "up" : "down", journal_local_backlog() + outbox, journal_durable_waiting(),
              journal_accepting() ? "true" : "false", doubt_count(), (long long)atomic_load(&app->parked),
              (long long)metrics_gauge_get(MG_CONNECTIONS));
}

/* /stats?prefix=&after=&limit=: which topics to list (the totals always cover them all). */
struct stats_query {
    struct request *r;
    const char *prefix, *after;
    size_t prefix_len;
    int64_t limit;
};

/* The keeper's part (mover, fleet). Before the keeper runs (the workers answer from their
 * start) and while it stops, the same members, empty (keeper_stats_json with NULL): a client
 * waiting for the fleet to form sees no instances yet, not a /stats without "fleet". */
static void keeper_json(struct app *app, struct sbuf *sb)
{
    app->keeper_stats_json(atomic_load(&app->keeper_stats_arg), app->cfg.redis_shards, sb);
}

#define STATS_LIMIT_DEFAULT 1000
#define STATS_LIMIT_MAX     10000

static void on_counts(const struct topic_counts *topics, int n, long outbox, int failed, void *arg)
{
    struct stats_query *q = arg;
    struct request *r = q->r;
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
    /* Far jobs (MySQL only) are delayed jobs too: merged in by topic, both lists sorted by name. */
    struct far_topic *far = NULL;
    int nfar = pager_far_counts(&far);
    if (nfar < 0)
        nfar = 0;
    int64_t total[5] = {0, 0, 0, 0, 0};
    int listed = 0, ntopics = 0;
    const char *next = NULL, *last = NULL;
    sb_puts(&sb, ",\"topics\":{");
    for (int i = 0, f = 0; i < n || f < nfar;) {
        static const struct topic_counts none;
        int c = i == n ? 1 : f == nfar ? -1 : strcmp(topics[i].topic, far[f].topic);
        const struct topic_counts *t = c <= 0 ? &topics[i] : &none;
        const char *name = c <= 0 ? topics[i].topic : far[f].topic;
        int64_t nfarjobs = c >= 0 ? far[f].jobs : 0;
        i += c <= 0;
        f += c >= 0;
        ntopics++;
        total[0] += t->delayed + nfarjobs;
        total[1] += t->ready;
        total[2] += t->reserved;
        total[3] += t->dead;
        total[4] += nfarjobs;
        if ((q->prefix_len && strncmp(name, q->prefix, q->prefix_len) != 0) ||
            (q->after && strcmp(name, q->after) <= 0) || next)
            continue;
        if (listed == q->limit) {
            next = last; /* more match: the next page starts after the last one listed */
            continue;
        }
        last = name;
        if (listed++)
            sb_putc(&sb, ',');
        sb_json_cstr(&sb, name);
        sb_printf(&sb, ":{\"delayed\":%lld,\"ready\":%lld,\"reserved\":%lld,\"dead\":%lld,\"far\":%lld}",
                  (long long)(t->delayed + nfarjobs), (long long)t->ready, (long long)t->reserved, (long long)t->dead,
                  (long long)nfarjobs);
    }
    sb_putc(&sb, '}');
    if (next) {
        sb_puts(&sb, ",\"next\":");
        sb_json_cstr(&sb, next);
    }
    sb_printf(&sb,
              ",\"topicCount\":%d,\"totals\":{\"delayed\":%lld,\"ready\":%lld,\"reserved\":%lld,\"dead\":%lld,"
              "\"far\":%lld}",
              ntopics, (long long)total[0], (long long)total[1], (long long)total[2], (long long)total[3],
              (long long)total[4]);
    pager_stats_json(&app->cfg, &sb);
    firing_stats_json(&sb);
    free(far);
    journal_json(&sb, app, outbox);
    keeper_json(app, &sb);
    sb_putc(&sb, '}');
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

void api_stats(struct request *r)
{
    static const char *const allowed[] = {"prefix", "after", "limit", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    struct stats_query *q = api_state_new(r, sizeof *q, NULL);
    if (q == NULL)
        return;
    q->r = r;
    char err[256];
    size_t after_len;
    if (api_param_topicish(r, "prefix", &q->prefix, &q->prefix_len) < 0 ||
        api_param_topicish(r, "after", &q->after, &after_len) < 0)
        return;
    if (param_int(&r->params, "limit", 0, STATS_LIMIT_MAX, STATS_LIMIT_DEFAULT, &q->limit, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    if (api_require_redis(r) < 0)
        return;
    if (store_counts(&r->ctx->store, on_counts, q) < 0)
        respond_unavailable(r, "Redis");
}

void api_metrics(struct request *r)
{
    struct sbuf sb = SBUF_INIT;
    metrics_gauge_set(MG_JOURNAL_BACKLOG, journal_backlog());
    metrics_render(&sb, r->ctx->app->instance);
    delivstats_render(&sb);
    pager_metrics(&sb);
    firing_metrics(&sb);
    dutywatch_metrics(&sb, clock_unix_ms());
    rnodes_render(&sb); /* nothing for a single Redis */
    respond_text(r, 200, "text/plain; version=0.0.4", &sb);
    sb_free(&sb);
}

/* ---- /fleet: the instances sharing this Redis, and this one's health, without the topics ---- */

static void on_fleet_outbox(long outbox, int failed, void *arg)
{
    struct request *r = arg;
    struct app *app = r->ctx->app;
    struct sbuf sb = SBUF_INIT;
    sb_printf(&sb, "{\"at\":%lld,\"startedAt\":%lld,\"shards\":%d,\"health\":", (long long)clock_unix_ms(),
              (long long)app->started_unix_ms, app->cfg.redis_shards);
    health_json(r, &sb);
    journal_json(&sb, app, outbox);
    if (failed)
        sb_puts(&sb, ",\"outboxUnknown\":true");
    keeper_json(app, &sb);
    sb_puts(&sb, ",\"latenessBounds\":");
    metrics_hist_bounds_json(MH_LATENESS, &sb);
    sb_putc(&sb, '}');
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

void api_fleet(struct request *r)
{
    static const char *const none[] = {NULL};
    if (api_params_only(r, none) < 0)
        return;
    /* answered even with Redis down: the health inside says so (outbox length unknown then) */
    if (store_outbox_len(&r->ctx->store, on_fleet_outbox, r) < 0)
        on_fleet_outbox(0, 1, r);
}

/* ---- /throughput?topics=a,b,c: per-topic running totals (store_tallies) ---- */

#define THROUGHPUT_TOPICS_MAX 1000

struct tally_query {
    struct request *r;
    int n;
    const char *topics[THROUGHPUT_TOPICS_MAX];
    size_t lens[THROUGHPUT_TOPICS_MAX];
};

static void on_tallies(const struct topic_tally *t, int n, void *arg)
{
    struct tally_query *q = arg;
    if (t == NULL) {
        respond_unavailable(q->r, "Redis");
        return;
    }
    struct sbuf sb = SBUF_INIT;
    sb_printf(&sb, "{\"at\":%lld,\"topics\":{", (long long)clock_unix_ms());
    for (int i = 0; i < n; i++) {
        if (i)
            sb_putc(&sb, ',');
        sb_json_str(&sb, q->topics[i], q->lens[i]);
        sb_printf(&sb, ":{\"pushed\":%lld,\"delivered\":%lld,\"firstDelivered\":%lld,\"latenessMsSum\":%lld}",
                  (long long)t[i].pushed, (long long)t[i].delivered, (long long)t[i].first, (long long)t[i].late_ms);
    }
    sb_puts(&sb, "}}");
    respond_json(q->r, 200, &sb);
    sb_free(&sb);
}

void api_throughput(struct request *r)
{
    static const char *const allowed[] = {"topics", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    const char *list = params_get(&r->params, "topics");
    if (list == NULL || list[0] == '\0') {
        respond_error(r, 400, "bad_request", "topics is required: a comma-separated list of topics");
        return;
    }
    struct tally_query *q = api_state_new(r, sizeof *q, NULL);
    if (q == NULL)
        return;
    q->r = r;
    for (const char *p = list;; p++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!job_topic_valid(p, len)) {
            respond_error(r, 400, "bad_request", "topics: each must be 1-%d characters of A-Z a-z 0-9 _ . : -",
                          TOPIC_MAX);
            return;
        }
        if (q->n == THROUGHPUT_TOPICS_MAX) {
            respond_error(r, 400, "bad_request", "topics: at most %d at a time", THROUGHPUT_TOPICS_MAX);
            return;
        }
        q->topics[q->n] = p; /* points into the parameters, which live as long as r */
        q->lens[q->n++] = len;
        if (e == NULL)
            break;
        p = e;
    }
    if (api_require_redis(r) < 0)
        return;
    if (store_tallies(&r->ctx->store, q->topics, q->lens, q->n, on_tallies, q) < 0)
        respond_unavailable(r, "Redis");
}
