/* api_util.h — pieces shared by the endpoint handlers: reading common parameters (answering
 * 400 themselves), writing jobs as JSON, and journaling a transition made in Redis. */
#ifndef HG_API_UTIL_H
#define HG_API_UTIL_H

#include <stdint.h>

#include "http/request.h"
#include "base/sbuf.h"
#include "redis/store.h"

/* The required "id" parameter. 0, or -1 after answering 400. */
int api_param_id(struct request *r, uint64_t *id);

/* Only these parameter names are allowed (NULL-terminated). 0, or -1 after answering 400. */
int api_params_only(struct request *r, const char *const *allowed);

/* An optional parameter that is a topic or the start of one (`prefix`, `after` of a listing):
 * topic characters only. *out points into the request's parameters (valid until it is
 * answered), NULL when absent or empty. 0, or -1 after answering 400. */
int api_param_topicish(struct request *r, const char *name, const char **out, size_t *len);

/* Zeroed per-request state of `size` bytes, owned by the request: freed by free_fn (NULL: free)
 * once it is answered. NULL after answering 503 when out of memory. */
void *api_state_new(struct request *r, size_t size, void (*free_fn)(void *));

/* Check Redis is usable (and, for transitions that must be journaled, that the journal has
 * room). 0, or -1 after answering 503. */
int api_require_redis(struct request *r);
int api_require_journal_room(struct request *r);

/* Check the journal's MySQL connection is up (for what must be committed before its answer).
 * 0, or -1 after answering 503. */
int api_require_mysql(struct request *r);

/* A job id as a JSON string (ids pass 2^53, so never a JSON number). */
void api_json_id(struct sbuf *sb, uint64_t id);

/* A job as JSON, whatever it was read from (a reservation, an inspect in Redis, a dead list,
 * a MySQL row): the one renderer, so every endpoint names and orders the members alike. */
struct job_json {
    uint64_t id;
    const char *topic, *state, *body, *biz; /* topic, state: NULL to leave out */
    size_t topic_len, body_len, biz_len;     /* biz_len 0: no bizKey */
    int64_t priority, ttr, tries, attempt, run_at;
    int64_t created_at, lease_until, died_at; /* 0: left out */
    int has_backoff;                          /* the job's own backoff, else left out */
    int64_t backoff;
};

/* {"id","topic","state","body","priority","ttr","tries","attempt","runAt",["createdAt",]
 * ["leaseUntil",]["diedAt",]["bizKey",]["backoff"] — without the closing brace, so callers may add more. */
void api_json_job_open(struct sbuf *sb, const struct job_json *j);

/* A delivered job (GET /get), closed. */
void api_json_delivered(struct sbuf *sb, const struct delivered *d);

/* A job seen by inspect, with its "state", left open (history is added by the caller). */
void api_json_view(struct sbuf *sb, uint64_t id, const struct job_view *v);

/* Who acts, for the outbox (store_who): this instance, this worker, the client's address. */
void api_who(const struct request *r, char *out, size_t cap);


/* Fill a jobchange for a transition this request made (the durable paths: push rows, delete); counts nothing. */
void api_fill_jobchange(struct jobchange *rec, struct request *r, uint64_t id, int shard, const char *key, int from, int to,
                   uint32_t ver, uint32_t attempts, int64_t run_at);

#endif
