/* longpoll.h — GET /get/{topic}: delivering ready jobs, and the long-polls parked on a worker
 * until a job is ready for them (design.md, decision 6).
 *
 * A parked request is filed under each of its topics, oldest first. A "ready" notification
 * for a topic tries a reservation for the oldest idle request filed there; when that gets a
 * job it passes the notification on, so a burst of ready jobs drains into the waiting
 * requests one after another. A request is filed BEFORE its first reservation, and a
 * notification that arrives while a reservation is in flight is remembered and retried, so
 * no notification falls between "found nothing" and "now waiting". A 1 s tick retries every
 * topic as a safety net for notifications lost while Redis reconnected.
 *
 * A client that hangs up is noticed while parked (its socket becomes readable with EOF) and
 * its request is dropped; jobs reserved for it in that instant are released again. */
#ifndef HG_LONGPOLL_H
#define HG_LONGPOLL_H

#include <stddef.h>

struct worker;
struct longpoll;

struct longpoll *longpoll_new(struct worker *w);
void longpoll_free(struct longpoll *lp);

/* Jobs became ready on `topic` (pub/sub, or a local change). */
void longpoll_notify(struct longpoll *lp, const char *topic, size_t len);

/* Once a second: retry every topic that has parked requests. */
void longpoll_tick(struct longpoll *lp);

/* Shutdown: answer every parked request with 204 (those mid-reservation answer when it ends). */
void longpoll_drain(struct longpoll *lp);

/* Requests parked on this worker. */
long longpoll_count(const struct longpoll *lp);

#endif
