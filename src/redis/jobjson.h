/* jobjson.h — a job as JSON, whatever it was read from (a reservation, an inspect in Redis, a
 * dead list, a MySQL row): the one renderer, so every endpoint and every delivery (webhook,
 * AMQP) names and orders the members alike. It renders store.h's views of a job, hence its
 * place beside them. Pure: it only appends to the caller's buffer (any thread). */
#ifndef HG_JOBJSON_H
#define HG_JOBJSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/sbuf.h"
#include "redis/store.h"

/* An id (ids.h: a job's, a schedule's) as a JSON string (ids pass 2^53, so never a JSON number). */
void jobjson_id(struct sbuf *sb, uint64_t id);

/* The members of a job, from whichever record it was read. */
struct jobjson {
    uint64_t id;
    const char *topic, *state, *body, *biz; /* topic, state: NULL to leave out */
    size_t topic_len, body_len, biz_len;    /* biz_len 0: no bizKey */
    int64_t priority, ttr, tries, attempt, run_at;
    int64_t created_at, lease_until, died_at; /* 0: left out */
    int has_backoff;                          /* the job's own backoff, else left out */
    int64_t backoff;
    struct trace_ref trace; /* W3C Trace Context (core/trace.h); parent NULL: none */
    const char *group;      /* flow control by key; NULL: none */
    size_t group_len;
};

/* {"id","topic","state","body","priority","ttr","tries","attempt","runAt",["createdAt",]
 * ["leaseUntil",]["diedAt",]["bizKey",]["backoff",]"traceparent","tracestate","group" — without
 * the closing brace, so callers may add more. traceparent, tracestate and group are always
 * there: a string, or null for a job without (docs/api.md, "Trace context", "Groups"). */
void jobjson_open(struct sbuf *sb, const struct jobjson *j);

/* A delivered job (GET /get, a webhook's or an AMQP message's body), closed. */
void jobjson_delivered(struct sbuf *sb, const struct delivered *d);

/* A job seen by inspect, with its "state", left open (history is added by the caller). */
void jobjson_view(struct sbuf *sb, uint64_t id, const struct job_view *v);

#endif
