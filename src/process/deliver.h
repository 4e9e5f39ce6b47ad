/* deliver.h — the delivery thread ("deliver"): due jobs of topics whose settings name a route
 * (topicconf.h `deliver`) are handed to where the work happens instead of waiting for a
 * long-poll: POSTed to a webhook (whclient.h) or published to RabbitMQ (amqppub.h, on a thread
 * of its own since librabbitmq blocks).
 *
 * A job is delivered as a long-poll would receive it: reserve.lua takes it off its ready zset
 * (pause and rate hold here exactly as for long-polls) and leases it — for the route's timeout
 * plus a second rather than for its ttr — then the route answers:
 *   webhook  a 2xx within `timeout` finishes the job; any other answer, a timeout or a
 *            transport error is a failed attempt (release.lua fail = 1: backoff, then dead
 *            after `tries`), its outcome ("webhook:503", "webhook:timeout") kept in the job's
 *            history;
 *   amqp     a publisher confirm finishes it; a nack, a return (unroutable) or a refusal is a
 *            failed attempt; no answer (the broker down or gone mid-batch) gives the job back
 *            without counting against it... it was not delivered, so only its lease is lost.
 * At-least-once: the job stays reserved until the outcome is written, so a crash anywhere in
 * between redelivers it when its lease runs out. Each instance delivers with at most
 * `concurrency` webhook requests in flight per topic.
 *
 * Wake-ups come from the keeper's ready fan-out (deliver_notify_ready); a 1 s sweep retries
 * topics whose notification was missed, and a rate-limited topic is retried when its next
 * token is due. */
#ifndef HG_DELIVER_H
#define HG_DELIVER_H

#include <stddef.h>

struct app;
struct deliver;

/* Start the thread (and the AMQP publisher's when [amqp] url is set). NULL on failure (logged). */
struct deliver *deliver_start(struct app *app);

/* Jobs became ready on `topic` (len 0: on any). Thread-safe; cheap for topics without a route. */
void deliver_notify_ready(struct deliver *d, const char *topic, size_t len);

/* Stop taking jobs, wait up to wait_ms for the deliveries in flight to finish and their
 * outcomes to be written, then stop the threads and free everything. Jobs still out are
 * delivered again after their lease. NULL is a no-op. */
void deliver_stop(struct deliver *d, int wait_ms);

#endif
