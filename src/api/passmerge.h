/* passmerge.h — the reservations and finishes a worker makes in one pass of its event loop,
 * merged into one script call per shard (and topics) and actor.
 *
 * A delivery's Redis time is mostly the cost of script calls, not of the commands in them: a
 * reservation of one job makes 11 redis.calls, of which only the job's record read and its
 * outbox entry grow with the jobs taken; a finish pays the call itself and a look at the
 * tombstone flags (docs/performance.md, 2026-11-29). And a worker's consumers come in waves: one
 * read of Redis's answers (a burst of finishes) or of clients' requests starts many calls in the
 * same pass. So a call is queued here, and once the pass's other callbacks have run:
 *
 * - reservations that ask the same shard for the same topics (in the same order) as the same
 *   actor (`who`, which the journal writes into each transition) become one reserve call of the
 *   sum of their counts. The jobs that come back are handed out in the order the requests were
 *   queued, each taking up to its count; one that gets fewer than it asked for behaves as if its
 *   own call had found that many (a long-poll keeps waiting);
 * - finishes of jobs of one shard by the same actor become one finishmany call, each hearing its
 *   own job's outcome.
 *
 * Each request hears exactly once: its share or outcome, or that the call failed. Merging
 * changes only which of one pass's reservations gets which ready job, which nothing orders. A
 * callback may queue another call (a long-poll passing a notification on, a get?finish= going on
 * to its get); it goes into the next pass's call. */
#ifndef HG_PASSMERGE_H
#define HG_PASSMERGE_H

#include <stddef.h>
#include <stdint.h>

#include "redis/store.h"

struct event_base;
struct passmerge;

/* How merged calls are sent (store_reserve with each job's ttr as lease, store_finish_many; the
 * time is the sender's): 0 when sent (`fn` will run once), -1 when not (it will not). */
struct passmerge_sends {
    int (*reserve)(void *arg, int shard, const char *const *topics, const size_t *lens, int ntopics, int count,
                   const char *who, store_reserve_fn fn, void *fn_arg);
    int (*finish)(void *arg, int shard, const uint64_t *ids, const int *attempts, int n, const char *who,
                  store_ids_fn fn, void *fn_arg);
};

/* A reserve call grows to at most this many jobs, a finish call to this many ids: the next
 * request starts another. */
#define PASSMERGE_COUNT_MAX  1000
#define PASSMERGE_FINISH_MAX 200

struct passmerge *passmerge_new(struct event_base *base, const struct passmerge_sends *sends, void *send_arg);

/* Queue a reservation of up to `count` jobs; `fn(jobs, n, failed, wait_ms, arg)` runs once,
 * from a later callback of the loop (never from within this call). The topic strings must stay
 * valid until then; the arrays and `who` are copied. 0, or -1 when out of memory (then `fn`
 * will not run). */
int passmerge_reserve(struct passmerge *m, int shard, const char *const *topics, const size_t *lens, int ntopics,
                      int count, const char *who, store_reserve_fn fn, void *arg) __attribute__((warn_unused_result));

/* Queue the finish of job `id` (of `shard`; attempt as store_finish's); `fn(outcome, arg)` runs
 * once, as reservations' do, with NULL when the call failed. 0, or -1 when out of memory. */
int passmerge_finish(struct passmerge *m, int shard, uint64_t id, int attempt, const char *who, store_id_fn fn,
                     void *arg) __attribute__((warn_unused_result));

/* Send what is queued now (shutdown: a drain must not wait for another pass). */
void passmerge_flush(struct passmerge *m);

/* Free, after the loop has ended: what is still queued is dropped unheard (its requests went
 * with the HTTP server; the worker's drain flushes before that). NULL is fine. */
void passmerge_free(struct passmerge *m);

#endif
