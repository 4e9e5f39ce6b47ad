/* delivstats.h — per topic and route delivery figures for /metrics: attempts by outcome and
 * their latency (from the hand-over to the route's answer), as
 *   hourglass_route_deliveries_total{topic,route,outcome="delivered|failed|undelivered"}
 *   hourglass_route_latency_seconds{topic,route} (a histogram).
 * Topics with a route are few (each is configured by an operator), so a labelled series per
 * topic is affordable; long-poll topics are not counted here. Thread-safe (one mutex; an
 * update is a hash lookup and a few adds). */
#ifndef HG_DELIVSTATS_H
#define HG_DELIVSTATS_H

#include <stddef.h>
#include <stdint.h>

struct sbuf;

enum delivstats_outcome { DS_DELIVERED, DS_FAILED, DS_UNDELIVERED, DS_OUTCOMES };

/* One attempt of `route` ("webhook", "amqp") on topic[0..len) and how long it took. */
void delivstats_record(const char *topic, size_t len, const char *route, enum delivstats_outcome outcome,
                       int64_t latency_us);

/* Append the series in Prometheus text format. */
void delivstats_render(struct sbuf *sb);

/* Attempts of `route` on `topic` with `outcome` so far (tests, /topics). */
uint64_t delivstats_count(const char *topic, const char *route, enum delivstats_outcome outcome);

/* Forget everything (process exit, tests). */
void delivstats_free(void);

#endif
