/* longpoll.h — GET /get/{topic}: delivering ready jobs, and the long-polls parked on a worker
 * until a job is ready for them (architecture.md, "Long-polls").
 *
 * A parked request is filed under each of its topics, oldest first. A "ready" notification
 * for a topic tries a reservation for the oldest idle request filed there (on this worker, or
 * the next: worker.h); when that fills the request it passes the notification on, so a burst of
 * ready jobs drains into the waiting requests one after another. A request filed behind an
 * idle one on each of its topics makes no first reservation (parkbook_behind_idle: it could
 * only find nothing). A request is filed BEFORE its first reservation, and a
 * notification that arrives while a reservation is in flight is remembered and retried, so
 * no notification falls between "found nothing" and "now waiting". A 1 s tick retries every
 * topic as a safety net for notifications lost while Redis reconnected. Who is filed where and
 * whom a notification wakes is parkbook.h, pure and unit-tested; this file adds Redis and HTTP.
 *
 * A client that hangs up is noticed while parked (its socket becomes readable with EOF) and
 * its request is dropped; jobs reserved for it in that instant are released again. */
#ifndef HG_LONGPOLL_H
#define HG_LONGPOLL_H

#include <stddef.h>

struct hctx;

/* Set up the worker's parked-request table (ctx->parked). 0 / -1. */
int longpoll_new(struct hctx *ctx) __attribute__((warn_unused_result));

/* Free the table (every request was answered by longpoll_drain or its own timeout). */
void longpoll_free(struct hctx *ctx);

/* Jobs became ready on `topic` (pub/sub, or a local change): wake the oldest idle request parked
 * there. 1 when one was woken; 0 when nobody here was idle to take it (none parked, or all busy:
 * the oldest then retries once its reservation returns), so the caller may offer it to another
 * worker (worker.h). */
int longpoll_notify(struct hctx *ctx, const char *topic, size_t len);

/* Once a second, and when Redis is back: retry every topic that has parked requests. */
void longpoll_tick(struct hctx *ctx);

/* Shutdown: answer every parked request with 204 (those mid-reservation answer when it ends). */
void longpoll_drain(struct hctx *ctx);

#endif
