/* metrics.c — see metrics.h. */
#include "core/metrics.h"
#include "core/job.h"
#include "core/rcause.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct counter_def {
    const char *name, *help;
};

static const struct counter_def counter_defs[MC_COUNT] = {
    [MC_REDIS_ERRORS] = {"hourglass_redis_errors_total", "Redis commands that failed (error reply, timeout or drop)"},
    [MC_REDIS_RECONNECTS] = {"hourglass_redis_reconnects_total", "Redis connections re-established"},
    [MC_REDIS_TIMEOUTS] = {"hourglass_redis_timeouts_total", "Redis connections dropped for not answering in time"},
    [MC_MYSQL_ERRORS] = {"hourglass_mysql_errors_total", "MySQL statements or connects that failed"},
    [MC_MYSQL_RECONNECTS] = {"hourglass_mysql_reconnects_total", "MySQL connections re-established"},
    [MC_JOBS_PUSHED] = {"hourglass_jobs_pushed_total", "jobs accepted by POST /push"},
    [MC_JOBS_DUPLICATE] = {"hourglass_jobs_duplicate_total", "pushes answered with an existing job (bizKey)"},
    [MC_JOBS_REPLACED] = {"hourglass_jobs_replaced_total", "pushes that replaced a live job (bizKey + replace)"},
    [MC_JOBS_DELIVERED] = {"hourglass_jobs_delivered_total", "jobs handed to consumers"},
    [MC_JOURNAL_RECORDS] = {"hourglass_journal_records_total", "records committed to MySQL"},
    [MC_JOURNAL_BATCHES] = {"hourglass_journal_batches_total", "MySQL transactions committed by the journal"},
    [MC_JOURNAL_STATEMENT_COMMITS] =
        {"hourglass_journal_statement_commits_total",
         "journal cycles of new jobs alone, committed by their one statement (autocommit)"},
    [MC_MOVER_RUNS] = {"hourglass_mover_runs_total", "mover script calls"},
    [MC_LONGPOLL_TIMEOUTS] = {"hourglass_longpoll_timeouts_total", "long-polls answered 204 after their timeout"},
    [MC_LONGPOLL_RESERVATIONS] = {"hourglass_longpoll_reservations_total",
                                  "reservations made for GET /get (a Redis script call each)"},
    [MC_LONGPOLL_EMPTY] = {"hourglass_longpoll_empty_reservations_total",
                           "of those, the ones that found no job (woken for nothing, or the first look)"},
    [MC_LONGPOLL_QUEUED] = {"hourglass_longpoll_queued_total",
                            "long-polls that waited behind an idle one on their topics, without a first look"},
    [MC_LONGPOLL_HANGUPS] = {"hourglass_longpoll_hangups_total", "parked long-polls whose client went away"},
    [MC_SLOW_CLIENTS] = {"hourglass_slow_clients_total", "connections closed for sending a request too slowly"},
    [MC_RATE_LIMITED] = {"hourglass_rate_limited_total", "requests answered 429 (rate limit)"},
    [MC_PUBSUB_MESSAGES] = {"hourglass_pubsub_messages_total", "ready/wake notifications received"},
    [MC_RESTORED] = {"hourglass_restored_total", "jobs put back into Redis by /reStore"},
    [MC_RETENTION_DELETED] = {"hourglass_retention_deleted_total", "terminal messages removed by retention"},
    [MC_DOUBT_SETTLED] = {"hourglass_doubt_settled_total", "outcomes in doubt (lost COMMIT or Redis replies) settled"},
    [MC_OUTBOX_UNREADABLE] = {"hourglass_outbox_unreadable_total",
                              "outbox entries that could not be read, kept in <prefix>:{n}:logbad"},
    [MC_JOURNAL_REFUSED] = {"hourglass_journal_refused_total", "journal records MySQL refused, kept in refused_record"},
    [MC_JOURNAL_LOCK_RETRIES] =
        {"hourglass_journal_lock_retries_total",
         "journal cycles written again after MySQL chose them as a deadlock victim or their lock wait timed out"},
    [MC_DEAD_EXPIRED] = {"hourglass_dead_expired_total", "dead jobs removed from Redis at the retention age"},
    [MC_REDIS_LOSSES] = {"hourglass_redis_losses_total",
                         "times a shard was found holding older data than this instance wrote, or none"},
    [MC_BAD_RECORDS] = {"hourglass_bad_records_total",
                        "job records scripts found missing or corrupt, set aside instead of delivered or moved"},
};

static const struct counter_def gauge_defs[MG_COUNT] = {
    [MG_PARKED] = {"hourglass_parked_longpolls", "GET /get requests waiting for a job"},
    [MG_CONNECTIONS] = {"hourglass_http_connections", "open HTTP connections"},
    [MG_JOURNAL_BACKLOG] = {"hourglass_journal_backlog", "records waiting to be written to MySQL"},
    [MG_JOURNAL_INFLIGHT] = {"hourglass_journal_durable_waiting", "pushes/deletes waiting for their MySQL commit"},
    [MG_REDIS_UP] = {"hourglass_redis_connections_up", "Redis connections currently usable"},
    [MG_MYSQL_UP] = {"hourglass_mysql_up", "1 when the journal's MySQL connection is usable"},
    [MG_OWNED_SHARDS] = {"hourglass_owned_shards", "shards whose mover duty this instance holds"},
    [MG_IN_DOUBT] = {"hourglass_outcomes_in_doubt", "lost COMMIT or Redis replies waiting to be settled"},
    [MG_CLOCK_OFFSET_MS] = {"hourglass_clock_offset_ms",
                            "this host's clock minus the fleet's (Redis TIME), which due times and leases follow"},
};

#define NBUCKETS 16
static const double time_buckets[NBUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
static const double size_buckets[NBUCKETS] = {1,   2,    5,    10,   20,    50,    100,   200,
                                              500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};

struct hist {
    const char *name, *help;
    const double *bounds;
    _Atomic uint64_t buckets[NBUCKETS + 1];
    _Atomic uint64_t count;
    _Atomic uint64_t sum_micro; /* sum * 1e6, to keep it an integer atomic */
};

static struct hist hists[MH_COUNT] = {
    [MH_LATENESS] = {"hourglass_delivery_lateness_seconds",
                     "time from a job's due time to its first delivery",
                     time_buckets,
                     {0},
                     0,
                     0},
    [MH_REDIS_LATENCY] = {"hourglass_redis_command_seconds", "Redis command round-trip time", time_buckets, {0}, 0, 0},
    [MH_MYSQL_COMMIT] =
        {"hourglass_mysql_commit_seconds", "time to write and commit one journal batch", time_buckets, {0}, 0, 0},
    [MH_JOURNAL_BATCH] =
        {"hourglass_journal_batch_records", "records per journal transaction", size_buckets, {0}, 0, 0},
};

static _Atomic uint64_t counters[MC_COUNT];
static _Atomic int64_t gauges[MG_COUNT];

/* HTTP: per endpoint and status class; statuses we send are few and fixed. */
static const int statuses[] = {200, 204, 400, 401, 403, 404, 405, 409, 413, 429, 500, 503};
#define NSTATUS (int)(sizeof statuses / sizeof statuses[0])
static _Atomic uint64_t http_count[EP_COUNT][NSTATUS + 1];
static struct hist http_latency[EP_COUNT];

static _Atomic uint64_t transitions[JS_FAR + 1][JS_FAR + 1];

static _Atomic uint64_t redis_errors[RCAUSE_COUNT];

void metrics_redis_error(int cause)
{
    if (cause <= RCAUSE_NONE || cause >= RCAUSE_COUNT)
        cause = RCAUSE_OTHER;
    atomic_fetch_add_explicit(&redis_errors[cause], 1, memory_order_relaxed);
}

/* hourglass_redis_errors_total split by cause, as its own family: the label-less total stays
 * what it was for existing dashboards. Every cause is always present, so an alert can name one
 * before it first happens. The sum equals the total: what was counted there without a cause
 * (the outbox's own connection) shows as "other". */
static void render_redis_errors(struct sbuf *out)
{
    static const struct counter_def def[1] = {{"hourglass_redis_error_causes_total",
                                               "Redis commands that failed, by cause (an error reply's code, "
                                               "timeout or down); sums to hourglass_redis_errors_total"}};
    uint64_t total = atomic_load_explicit(&counters[MC_REDIS_ERRORS], memory_order_relaxed), known = 0;
    uint64_t v[RCAUSE_COUNT];
    for (int c = RCAUSE_NONE + 1; c < RCAUSE_COUNT; c++) {
        v[c] = atomic_load_explicit(&redis_errors[c], memory_order_relaxed);
        known += v[c];
    }
    if (total > known)
        v[RCAUSE_OTHER] += total - known;
    sb_printf(out, "# HELP %s %s\n# TYPE %s counter\n", def->name, def->help, def->name);
    for (int c = RCAUSE_NONE + 1; c < RCAUSE_COUNT; c++)
        sb_printf(out, "%s{cause=\"%s\"} %llu\n", def->name, rcause_name((enum rcause)c), (unsigned long long)v[c]);
}

void metrics_inc(enum metric_counter c, uint64_t n)
{
    atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed);
}

uint64_t metrics_counter_get(enum metric_counter c)
{
    return atomic_load_explicit(&counters[c], memory_order_relaxed);
}

void metrics_gauge_add(enum metric_gauge g, int64_t delta)
{
    atomic_fetch_add_explicit(&gauges[g], delta, memory_order_relaxed);
}

void metrics_gauge_set(enum metric_gauge g, int64_t value)
{
    atomic_store_explicit(&gauges[g], value, memory_order_relaxed);
}

int64_t metrics_gauge_get(enum metric_gauge g)
{
    return atomic_load_explicit(&gauges[g], memory_order_relaxed);
}

static void hist_observe(struct hist *h, const double *bounds, double v)
{
    int b = 0;
    while (b < NBUCKETS && v > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    if (v > 0)
        atomic_fetch_add_explicit(&h->sum_micro, (uint64_t)(v * 1e6), memory_order_relaxed);
}

void metrics_observe(enum metric_hist h, double value)
{
    hist_observe(&hists[h], hists[h].bounds, value);
}

void metrics_http(enum endpoint ep, int status, int64_t duration_us)
{
    if ((unsigned)ep >= EP_COUNT)
        ep = EP_NOT_FOUND;
    int s = 0;
    while (s < NSTATUS && statuses[s] != status)
        s++;
    atomic_fetch_add_explicit(&http_count[ep][s], 1, memory_order_relaxed);
    hist_observe(&http_latency[ep], time_buckets, (double)duration_us / 1e6);
}

void metrics_transition(int from_state, int to_state, uint64_t n)
{
    if (from_state < 0 || from_state > JS_FAR || to_state < 0 || to_state > JS_FAR)
        return;
    atomic_fetch_add_explicit(&transitions[from_state][to_state], n, memory_order_relaxed);
}

static void render_hist(struct sbuf *out, const char *name, const char *labels, const struct hist *h,
                        const double *bounds)
{
    uint64_t cumulative = 0;
    const char *sep = labels[0] ? "," : "";
    for (int b = 0; b <= NBUCKETS; b++) {
        cumulative += atomic_load_explicit(&h->buckets[b], memory_order_relaxed);
        if (b < NBUCKETS)
            sb_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[b],
                      (unsigned long long)cumulative);
        else
            sb_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cumulative);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    sb_printf(out, "%s_sum%s%s%s %.6f\n", name, open, labels, close,
              (double)atomic_load_explicit(&h->sum_micro, memory_order_relaxed) / 1e6);
    sb_printf(out, "%s_count%s%s%s %llu\n", name, open, labels, close,
              (unsigned long long)atomic_load_explicit(&h->count, memory_order_relaxed));
}

void metrics_hist_counts_json(enum metric_hist h, struct sbuf *out)
{
    for (int b = 0; b <= NBUCKETS; b++)
        sb_printf(out, "%c%llu", b ? ',' : '[',
                  (unsigned long long)atomic_load_explicit(&hists[h].buckets[b], memory_order_relaxed));
    sb_putc(out, ']');
}

void metrics_hist_bounds_json(enum metric_hist h, struct sbuf *out)
{
    for (int b = 0; b < NBUCKETS; b++)
        sb_printf(out, "%c%g", b ? ',' : '[', hists[h].bounds[b]);
    sb_putc(out, ']');
}

void metrics_render(struct sbuf *out, const char *instance)
{
    /* The instance name is free text ([instance] id): escape it as a label value must be. */
    sb_puts(out, "# HELP hourglass_info instance name\n# TYPE hourglass_info gauge\nhourglass_info{instance=\"");
    for (const char *c = instance; *c; c++) {
        if (*c == '\\' || *c == '"')
            sb_putc(out, '\\');
        if (*c == '\n')
            sb_puts(out, "\\n");
        else
            sb_putc(out, *c);
    }
    sb_puts(out, "\"} 1\n");

    sb_puts(out, "# HELP hourglass_http_requests_total HTTP responses by endpoint and status\n"
                 "# TYPE hourglass_http_requests_total counter\n");
    for (int ep = 0; ep < EP_COUNT; ep++)
        for (int s = 0; s <= NSTATUS; s++) {
            uint64_t v = atomic_load_explicit(&http_count[ep][s], memory_order_relaxed);
            char code[16] = "other"; /* statuses outside the fixed list share one series */
            if (s < NSTATUS)
                snprintf(code, sizeof code, "%d", statuses[s]);
            if (v)
                sb_printf(out, "hourglass_http_requests_total{endpoint=\"%s\",code=\"%s\"} %llu\n",
                          router_endpoint_name((enum endpoint)ep), code, (unsigned long long)v);
        }
    sb_puts(out, "# HELP hourglass_http_request_seconds time from request to response\n"
                 "# TYPE hourglass_http_request_seconds histogram\n");
    for (int ep = 0; ep < EP_COUNT; ep++) {
        if (atomic_load_explicit(&http_latency[ep].count, memory_order_relaxed) == 0)
            continue;
        char labels[64];
        snprintf(labels, sizeof labels, "endpoint=\"%s\"", router_endpoint_name((enum endpoint)ep));
        render_hist(out, "hourglass_http_request_seconds", labels, &http_latency[ep], time_buckets);
    }

    sb_puts(out, "# HELP hourglass_transitions_total job state changes\n"
                 "# TYPE hourglass_transitions_total counter\n");
    for (int f = 0; f <= JS_FAR; f++)
        for (int t = 0; t <= JS_FAR; t++) {
            uint64_t v = atomic_load_explicit(&transitions[f][t], memory_order_relaxed);
            if (v)
                sb_printf(out, "hourglass_transitions_total{from=\"%s\",to=\"%s\"} %llu\n",
                          f ? job_state_name(f) : "new", job_state_name(t), (unsigned long long)v);
        }

    for (int c = 0; c < MC_COUNT; c++)
        sb_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counter_defs[c].name, counter_defs[c].help,
                  counter_defs[c].name, counter_defs[c].name,
                  (unsigned long long)atomic_load_explicit(&counters[c], memory_order_relaxed));
    render_redis_errors(out);
    for (int g = 0; g < MG_COUNT; g++)
        sb_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", gauge_defs[g].name, gauge_defs[g].help,
                  gauge_defs[g].name, gauge_defs[g].name,
                  (long long)atomic_load_explicit(&gauges[g], memory_order_relaxed));
    for (int h = 0; h < MH_COUNT; h++) {
        sb_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", hists[h].name, hists[h].help, hists[h].name);
        render_hist(out, hists[h].name, "", &hists[h], hists[h].bounds);
    }
}
