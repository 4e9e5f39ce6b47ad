/* delivstats.c — see delivstats.h. */
#include "delivery/delivstats.h"
#include "base/hmap.h"
#include "base/sbuf.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Latency bucket bounds in seconds (the last is +Inf). */
static const double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
#define NBOUNDS (sizeof bounds / sizeof bounds[0])

struct series {
    char *route, *topic; /* the key is "<route>\0<topic>" */
    uint64_t outcomes[DS_OUTCOMES];
    uint64_t buckets[NBOUNDS + 1];
    double sum;
    uint64_t count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmap all = HMAP_INIT;

static const char *const outcome_names[DS_OUTCOMES] = {"delivered", "failed", "undelivered"};

/* The series of (route, topic), made on first use; NULL when out of memory. Under the lock. */
static struct series *find(const char *route, const char *topic, size_t len, int make)
{
    char key[256];
    size_t rl = strlen(route);
    if (rl + 1 + len > sizeof key)
        return NULL;
    memcpy(key, route, rl + 1);
    memcpy(key + rl + 1, topic, len);
    struct series *s = hmap_get(&all, key, rl + 1 + len);
    if (s || !make)
        return s;
    s = calloc(1, sizeof *s);
    if (s == NULL || (s->route = strdup(route)) == NULL || (s->topic = strndup(topic, len)) == NULL ||
        hmap_put(&all, key, rl + 1 + len, s) < 0) {
        if (s) {
            free(s->route);
            free(s->topic);
        }
        free(s);
        return NULL;
    }
    return s;
}

void delivstats_record(const char *topic, size_t len, const char *route, enum delivstats_outcome outcome,
                       int64_t latency_us)
{
    double secs = (double)latency_us / 1e6;
    size_t b = 0;
    while (b < NBOUNDS && secs > bounds[b])
        b++;
    pthread_mutex_lock(&lock);
    struct series *s = find(route, topic, len, 1);
    if (s) {
        s->outcomes[outcome]++;
        s->buckets[b]++;
        s->sum += secs;
        s->count++;
    }
    pthread_mutex_unlock(&lock);
}

uint64_t delivstats_count(const char *topic, const char *route, enum delivstats_outcome outcome)
{
    pthread_mutex_lock(&lock);
    struct series *s = find(route, topic, strlen(topic), 0);
    uint64_t n = s ? s->outcomes[outcome] : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

static void labels(struct sbuf *sb, const struct series *s)
{
    /* topic names are [A-Za-z0-9_.:-]: nothing to escape */
    sb_printf(sb, "topic=\"%s\",route=\"%s\"", s->topic, s->route);
}

void delivstats_render(struct sbuf *sb)
{
    pthread_mutex_lock(&lock);
    sb_puts(sb, "# HELP hourglass_route_deliveries_total Deliveries by a route (webhook, amqp), by outcome.\n"
                "# TYPE hourglass_route_deliveries_total counter\n");
    size_t pos = 0;
    struct series *s;
    while ((s = hmap_next(&all, &pos, NULL, NULL)) != NULL) {
        for (int o = 0; o < DS_OUTCOMES; o++) {
            sb_puts(sb, "hourglass_route_deliveries_total{");
            labels(sb, s);
            sb_printf(sb, ",outcome=\"%s\"} %llu\n", outcome_names[o], (unsigned long long)s->outcomes[o]);
        }
    }
    sb_puts(sb, "# HELP hourglass_route_latency_seconds From handing a job to its route to the route's answer.\n"
                "# TYPE hourglass_route_latency_seconds histogram\n");
    pos = 0;
    while ((s = hmap_next(&all, &pos, NULL, NULL)) != NULL) {
        uint64_t cum = 0;
        for (size_t b = 0; b <= NBOUNDS; b++) {
            cum += s->buckets[b];
            sb_puts(sb, "hourglass_route_latency_seconds_bucket{");
            labels(sb, s);
            if (b < NBOUNDS)
                sb_printf(sb, ",le=\"%g\"} %llu\n", bounds[b], (unsigned long long)cum);
            else
                sb_printf(sb, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
        }
        sb_puts(sb, "hourglass_route_latency_seconds_sum{");
        labels(sb, s);
        sb_printf(sb, "} %.6f\nhourglass_route_latency_seconds_count{", s->sum);
        labels(sb, s);
        sb_printf(sb, "} %llu\n", (unsigned long long)s->count);
    }
    pthread_mutex_unlock(&lock);
}

void delivstats_free(void)
{
    pthread_mutex_lock(&lock);
    size_t pos = 0;
    struct series *s;
    while ((s = hmap_next(&all, &pos, NULL, NULL)) != NULL) {
        free(s->route);
        free(s->topic);
        free(s);
    }
    hmap_free(&all);
    pthread_mutex_unlock(&lock);
}
