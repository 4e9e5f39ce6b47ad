/* api_util.h — pieces shared by the endpoint handlers: reading common parameters (answering
 * 400 themselves), per-request state, and journaling a transition made in Redis. (A job as
 * JSON is redis/jobjson.h, which deliveries use too.) */
#ifndef HG_API_UTIL_H
#define HG_API_UTIL_H

#include <stdint.h>

#include "http/request.h"
#include "base/sbuf.h"
#include "redis/store.h"

/* The required "id" parameter. 0, or -1 after answering 400. */
int api_param_id(struct request *r, uint64_t *id);

/* An optional job-id parameter `name`: 1 with *id set, 0 when absent, -1 after answering 400. */
int api_param_id_opt(struct request *r, const char *name, uint64_t *id);

/* The optional "attempt" parameter (1..1000000; 0 when absent: any attempt). 0, or -1 after
 * answering 400. */
int api_param_attempt(struct request *r, int *attempt);

/* Answer the outcome of a script acting on one job (store.h id_outcome), unless it is ID_OK:
 * 503 for no answer, 404 for a job missing or not in state `need`, 409 for a lease that ran out
 * or a bizKey held. 1 when it answered, 0 for ID_OK. */
int api_answer_outcome(struct request *r, const struct id_outcome *o, const char *need);

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

/* Who acts, for the outbox (store_who): this instance, this worker, the client's address. */
void api_who(const struct request *r, char *out, size_t cap);

/* The worker's calls of one loop pass, merged (passmerge.h); made on first use, NULL when out
 * of memory. api_merged_drain sends what is queued (shutdown); api_merged_free frees it. */
struct passmerge *api_merged(struct hctx *ctx);
void api_merged_drain(struct hctx *ctx);
/* Queue the finish of job `id` with the other finishes of this pass (passmerge_finish, on the
 * id's shard). 0, or -1 when out of memory (then `fn` will not run). */
int api_merged_finish(struct hctx *ctx, uint64_t id, int attempt, const char *who, store_id_fn fn, void *arg);
void api_merged_free(struct hctx *ctx);

/* Fill a jobchange for a transition this request made (the durable paths: push rows, delete); counts nothing. */
void api_fill_jobchange(struct jobchange *rec, struct request *r, uint64_t id, int shard, const char *key, int from,
                        int to, uint32_t ver, uint32_t attempts, int64_t run_at);

#endif
