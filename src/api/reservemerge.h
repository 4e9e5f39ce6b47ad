/* reservemerge.h — the reservations a worker's long-polls make in one pass of its event loop,
 * merged into one reserve call per shard, topics and actor.
 *
 * A delivery's Redis time is mostly the cost of the script call itself, not of the commands it
 * runs: a reservation of one job makes 11 redis.calls, of which only the job's own record read
 * and its outbox entry grow with the jobs taken (docs/performance.md, 2026-11-29 10:20). And the
 * consumers of one worker come in waves: a burst of answers from Redis (finishes, another
 * reservation) or of requests from clients leads to many reservations in the same pass. So a
 * reservation is queued here, and once the pass's other callbacks have run, the requests that
 * ask the same shard for the same topics (in the same order) as the same actor (`who`, which
 * the journal writes into each transition) become one call for the sum of their counts. The
 * jobs that come back are handed out in the order the requests were queued, each request
 * taking up to its own count; a request that gets fewer than it asked for behaves as if its own
 * call had found that many (a long-poll keeps waiting). Each request hears exactly once: with
 * its share, or that the call failed.
 *
 * Merging changes which request gets which of the ready jobs only among requests of the same
 * pass, which nothing promises to order. A request's callback may queue a new reservation
 * (a long-poll passing a notification on); it goes into the next pass's call. */
#ifndef HG_RESERVEMERGE_H
#define HG_RESERVEMERGE_H

#include <stddef.h>
#include <stdint.h>

#include "redis/store.h"

struct event_base;
struct reservemerge;

/* The call a merged reservation is sent with (store_reserve's, with a lease of each job's ttr):
 * 0 when sent (`fn` will run once), -1 when it could not be (`fn` will not run). */
typedef int (*reservemerge_send_fn)(void *send_arg, int shard, const char *const *topics, const size_t *lens,
                                    int ntopics, int count, const char *who, store_reserve_fn fn, void *arg);

/* Calls of more than this many jobs are not grown further: the next request starts another. */
#define RESERVEMERGE_COUNT_MAX 1000

struct reservemerge *reservemerge_new(struct event_base *base, reservemerge_send_fn send, void *send_arg);

/* Queue a reservation of up to `count` jobs; `fn(jobs, n, failed, wait_ms, arg)` runs once,
 * from a later callback of the loop (never from within this call). The topic strings must stay
 * valid until then; the arrays and `who` are copied. 0, or -1 when out of memory (then `fn`
 * will not run). */
int reservemerge_add(struct reservemerge *m, int shard, const char *const *topics, const size_t *lens, int ntopics,
                     int count, const char *who, store_reserve_fn fn, void *arg) __attribute__((warn_unused_result));

/* Send what is queued now (shutdown: a drain must not wait for another pass). */
void reservemerge_flush(struct reservemerge *m);

/* Free, after the loop has ended: what is still queued is dropped unheard (its requests went
 * with the HTTP server; longpoll_drain flushes before that). NULL is fine. */
void reservemerge_free(struct reservemerge *m);

#endif
