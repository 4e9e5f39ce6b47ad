/* metrics.h — process-wide counters, gauges and histograms, rendered as Prometheus text.
 *
 * Every update is one relaxed atomic add, safe from any thread and cheap enough for hot
 * paths. Names and help texts live in metrics.c next to the renderer. */
#ifndef HG_METRICS_H
#define HG_METRICS_H

#include <stdint.h>

#include "core/router.h"
#include "base/sbuf.h"

enum metric_counter {
    MC_REDIS_ERRORS,
    MC_REDIS_RECONNECTS,
    MC_REDIS_TIMEOUTS,
    MC_MYSQL_ERRORS,
    MC_MYSQL_RECONNECTS,
    MC_JOBS_PUSHED,
    MC_JOBS_DUPLICATE,
    MC_JOBS_REPLACED,
    MC_JOBS_DELIVERED,
    MC_JOURNAL_RECORDS,
    MC_JOURNAL_BATCHES,
    MC_JOURNAL_STATEMENT_COMMITS, /* of those, cycles of new jobs alone committed by their one statement */
    MC_MOVER_RUNS,
    MC_LONGPOLL_TIMEOUTS,
    MC_LONGPOLL_RESERVATIONS, /* reservations a long-poll made (a script call each) */
    MC_LONGPOLL_EMPTY,        /* of those, the ones that found nothing */
    MC_LONGPOLL_QUEUED,       /* long-polls that waited behind an idle one without a first look */
    MC_LONGPOLL_HANGUPS,
    MC_SLOW_CLIENTS,
    MC_RATE_LIMITED,
    MC_PUBSUB_MESSAGES,
    MC_RESTORED,
    MC_RETENTION_DELETED,
    MC_DEAD_EXPIRED,
    MC_REDIS_LOSSES,
    MC_JOURNAL_REFUSED,
    MC_JOURNAL_LOCK_RETRIES,
    MC_OUTBOX_UNREADABLE,
    MC_DOUBT_SETTLED,
    MC_BAD_RECORDS, /* job records a script found missing or corrupt (quarantined, not dropped) */
    MC_COUNT
};

enum metric_gauge {
    MG_PARKED,
    MG_CONNECTIONS,
    MG_JOURNAL_BACKLOG,  /* records waiting to be written to MySQL */
    MG_JOURNAL_INFLIGHT, /* durable writes (push/delete) waiting for their commit */
    MG_REDIS_UP,         /* connections currently up */
    MG_MYSQL_UP,
    MG_OWNED_SHARDS,
    MG_IN_DOUBT,        /* outcomes in doubt waiting to be settled (doubt.h) */
    MG_CLOCK_OFFSET_MS, /* this host's clock minus the fleet's (duties/clocksync.h) */
    MG_COUNT
};

enum metric_hist {
    MH_LATENESS,      /* seconds from due to first delivery */
    MH_REDIS_LATENCY, /* seconds per Redis command */
    MH_MYSQL_COMMIT,  /* seconds per journal transaction */
    MH_JOURNAL_BATCH, /* records per journal transaction */
    MH_COUNT
};

void metrics_inc(enum metric_counter c, uint64_t n);
void metrics_gauge_add(enum metric_gauge g, int64_t delta);
void metrics_gauge_set(enum metric_gauge g, int64_t value);
int64_t metrics_gauge_get(enum metric_gauge g);
uint64_t metrics_counter_get(enum metric_counter c);
void metrics_observe(enum metric_hist h, double value);

/* One failed Redis command, by cause (enum rcause); also counted in MC_REDIS_ERRORS by the
 * caller. /metrics shows them as hourglass_redis_error_causes_total{cause=...}; failures
 * counted only in MC_REDIS_ERRORS show as cause="other". */
void metrics_redis_error(int cause);

/* One HTTP response: endpoint, status code and time from request to response. */
void metrics_http(enum endpoint ep, int status, int64_t duration_us);

/* One job state change (states from job.h). */
void metrics_transition(int from_state, int to_state, uint64_t n);

/* A histogram's counts per bucket as a JSON array, not cumulative: one number per bound, then
 * one for the values above every bound. */
void metrics_hist_counts_json(enum metric_hist h, struct sbuf *out);

/* Its bucket bounds as a JSON array (seconds for times). */
void metrics_hist_bounds_json(enum metric_hist h, struct sbuf *out);

/* Append everything in Prometheus text exposition format. */
void metrics_render(struct sbuf *out, const char *instance);

#endif
