/* deliver.c — see deliver.h.
 *
 * One event loop ("deliver") owns the Redis connection that reserves and settles, the webhook
 * client, and a table of the topics that have a route (read from topics.c every 250 ms). For
 * each such topic it keeps how many of its jobs are out; pump() reserves more while there is
 * room (webhook: `concurrency`; amqp: two batches) and the topic may have ready jobs. The AMQP
 * publisher blocks, so batches go to a thread of its own ("amqp") through a small queue and
 * their confirms come back through the loop's inbox. */
#include "process/deliver.h"
#include "delivery/amqppub.h"
#include "redis/jobjson.h"
#include "core/app.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "delivery/delivstats.h"
#include "base/evbase.h"
#include "base/hmap.h"
#include "durable/journal.h"
#include "redis/layout.h"
#include "base/log.h"
#include "base/loopq.h"
#include "core/metrics.h"
#include "redis/rlink.h"
#include "delivery/sign.h"
#include "redis/store.h"
#include "duties/topics.h"
#include "delivery/whclient.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REFRESH_MS     250  /* routes re-read from topics.c */
#define SWEEP_TICKS    4    /* every REFRESH_MS * 4: try every topic (a missed notification) */
#define LEASE_GRACE_MS 1000 /* a delivery's lease: the route's timeout and this */
#define RESERVE_MAX    100  /* jobs per reserve call */
#define AMQP_BATCH     100  /* jobs per publish batch */
#define AMQP_BATCHES_OUT                                                                                               \
    2                        /* batches of a topic out at once: while they are, its ready jobs                         \
                                gather into the next (bigger) batch */
#define AMQP_MERGE_MAX   16  /* queued batches published together (amqp_main) */
#define AMQP_DOWN_MIN_MS 250 /* after a batch found the broker down, wait before the next */
#define AMQP_DOWN_MAX_MS 5000

struct deliver;

struct dtopic {
    struct deliver *d;
    char name[TOPIC_MAX + 1];
    size_t len;
    int shard;
    struct topic_conf conf; /* as last read; a change applies to the next reservations */
    int seen;               /* refresh generation that last found it configured */
    int out;                /* jobs reserved and not yet answered by their route */
    int batches;            /* amqp: batches out */
    int reserving;          /* a reserve call is in flight */
    int again;              /* woken while reserving: try once more when it returns */
    struct event *retry;    /* its rate held jobs back: try when the next token comes */
};

struct amqp_job {
    uint64_t id;
    int attempt;
    int settle; /* 0: finished by the reservation already (ttr 0): nothing to write */
    char idtext[24];
    struct sbuf body;
    char traceparent[TRACE_PARENT_LEN + 1]; /* "" = none: the message has no such header */
    char *tracestate;                       /* NULL = none; malloc'd */
};

struct amqp_batch {
    struct amqp_batch *next;
    struct dtopic *topic;
    int n;
    int64_t start_us;
    int connected; /* the publisher had a connection after the batch */
    char exchange[TOPICCONF_AMQP_NAME_MAX + 1], routing_key[TOPICCONF_AMQP_NAME_MAX + 1];
    enum amqppub_outcome outcome[AMQP_BATCH];
    struct amqp_job jobs[AMQP_BATCH];
};

struct deliver {
    struct app *app;
    pthread_t thread;
    struct event_base *base;
    struct loopq *inbox;
    struct rlink *redis;
    struct store store;
    char who[STORE_WHO_MAX];
    struct whclient *wh;
    struct hmap topics; /* name -> struct dtopic */
    struct event *tick;
    int ticks, gen;
    int stopping;      /* take no more jobs */
    int closed;        /* the loop has ended: what still arrives is only freed */
    atomic_int routes; /* topics with a route: 0 = notifications are ignored at once */
    atomic_int busy;   /* jobs out plus outcomes being written (deliver_stop waits for 0) */
    /* AMQP: the publisher's thread and its queue (under amqp_lock) */
    int amqp_on;
    struct bgthread amqp_thread; /* amqp_thread.stop: quit once the queue is empty */
    pthread_mutex_t amqp_lock;
    pthread_cond_t amqp_cond;
    struct amqp_batch *amqp_head, **amqp_tail;
    struct amqppub *pub;
    int64_t amqp_down_until; /* loop thread: no new batch before (mono ms) */
    int amqp_down_ms;
};

static void pump(struct dtopic *t);

/* ---- settling: the outcome written to Redis ---- */

static void on_settled(const struct id_outcome *o, void *arg)
{
    struct deliver *d = arg;
    if (o == NULL)
        log_warn("deliver: an outcome could not be written (Redis): the job is delivered again after its lease");
    else if (o->status == ID_STALE || o->status == ID_WRONG_STATE || o->status == ID_MISSING)
        log_info("deliver: an outcome came after the job's lease had run out (it was or will be delivered again)");
    atomic_fetch_sub(&d->busy, 1);
}

static void settle(struct deliver *d, uint64_t id, int attempt, enum store_route_result result, const char *outcome)
{
    atomic_fetch_add(&d->busy, 1);
    if (store_route_outcome(&d->store, id, clock_unix_ms(), attempt, d->who, result, outcome, on_settled, d) < 0)
        on_settled(NULL, d);
}

/* ---- webhook ---- */

struct wh_job {
    struct dtopic *topic;
    uint64_t id;
    int attempt;
    int settle;
};

static void on_webhook_done(const struct wh_result *res, void *arg)
{
    struct wh_job *w = arg;
    struct dtopic *t = w->topic;
    struct deliver *d = t->d;
    int ok = res->outcome == WH_ANSWERED && res->status >= 200 && res->status < 300;
    char outcome[48];
    static const char *const names[] = {
        [WH_ANSWERED] = "answered", [WH_TIMEOUT] = "timeout",   [WH_CONNECT] = "connect",    [WH_TLS] = "tls",
        [WH_CLOSED] = "closed",     [WH_PROTOCOL] = "protocol", [WH_CANCELLED] = "cancelled"};
    if (res->outcome == WH_ANSWERED)
        snprintf(outcome, sizeof outcome, "webhook:%d", res->status);
    else
        snprintf(outcome, sizeof outcome, "webhook:%s", names[res->outcome]);
    if (!ok && res->outcome != WH_CANCELLED)
        log_info("deliver: webhook %s for job %llu of %s (attempt %d): %s", outcome + 8, (unsigned long long)w->id,
                 t->name, w->attempt, res->error ? res->error : "not 2xx");
    delivstats_record(t->name, t->len, "webhook", ok ? DS_DELIVERED : DS_FAILED, res->latency_us);
    /* cancelled, or the loop has ended: the daemon is stopping; the lease brings the job back */
    if (w->settle && res->outcome != WH_CANCELLED && !d->closed)
        settle(d, w->id, w->attempt, ok ? ROUTE_DELIVERED : ROUTE_FAILED, outcome);
    t->out--;
    atomic_fetch_sub(&d->busy, 1);
    free(w);
    pump(t);
}

static void send_webhook(struct dtopic *t, const struct delivered *job)
{
    struct deliver *d = t->d;
    struct wh_job *w = malloc(sizeof *w);
    struct sbuf body = SBUF_INIT;
    jobjson_delivered(&body, job);
    char idtext[24], attempt[16], signature[SIGN_HEADER_LEN + 1];
    snprintf(idtext, sizeof idtext, "%llu", (unsigned long long)job->id);
    snprintf(attempt, sizeof attempt, "%d", job->attempt);
    struct wh_header h[7] = {{"Content-Type", "application/json"},
                             {"Hourglass-Id", idtext},
                             {"Hourglass-Topic", t->name},
                             {"Hourglass-Attempt", attempt}};
    size_t nh = 4;
    /* W3C Trace Context: the push's, as the headers of that name, for the receiver to link to */
    char traceparent[TRACE_PARENT_LEN + 1], tracestate[TRACE_STATE_MAX + 1];
    if (job->trace.parent) {
        snprintf(traceparent, sizeof traceparent, "%.*s", (int)job->trace.parent_len, job->trace.parent);
        h[nh++] = (struct wh_header){"traceparent", traceparent};
        if (job->trace.state && job->trace.state_len <= TRACE_STATE_MAX) {
            snprintf(tracestate, sizeof tracestate, "%.*s", (int)job->trace.state_len, job->trace.state);
            h[nh++] = (struct wh_header){"tracestate", tracestate};
        }
    }
    int ok = w != NULL && !body.oom;
    if (ok && t->conf.secret[0]) {
        ok = sign_header_value(t->conf.secret, body.data, body.len, signature) == 0;
        h[nh++] = (struct wh_header){"Hourglass-Signature", signature};
    }
    if (ok) {
        *w = (struct wh_job){t, job->id, job->attempt, job->state == JS_RESERVED};
        t->out++;
        atomic_fetch_add(&d->busy, 1);
        if (whclient_post(d->wh, t->conf.url, h, nh, body.data, body.len, (int)t->conf.timeout, on_webhook_done, w) <
            0) {
            t->out--;
            atomic_fetch_sub(&d->busy, 1);
            ok = 0;
        }
    }
    if (!ok) {
        log_warn("deliver: job %llu of %s could not be sent (out of memory or a URL the client refuses)",
                 (unsigned long long)job->id, t->name);
        if (job->state == JS_RESERVED)
            settle(d, job->id, job->attempt, ROUTE_FAILED, "webhook:unsent");
        free(w);
    }
    sb_free(&body);
}

/* ---- amqp: the publisher's thread ---- */

static void on_amqp_batch_done(void *arg);

/* Everything queued (up to AMQP_MERGE_MAX batches, of any topics) goes out in one publish and
 * one wait for confirms: a confirm round trip costs the same for one message or a thousand, so
 * at 1,000 jobs/s the many small batches that punctual reservations make must share it (one
 * round trip per batch could not keep up). */
static void *amqp_main(void *arg)
{
    struct deliver *d = arg;
    log_set_thread_name("amqp");
    struct amqp_out *msgs = malloc(AMQP_MERGE_MAX * AMQP_BATCH * sizeof *msgs);
    enum amqppub_outcome *outcome = malloc(AMQP_MERGE_MAX * AMQP_BATCH * sizeof *outcome);
    pthread_mutex_lock(&d->amqp_lock);
    for (;;) {
        while (d->amqp_head == NULL && !d->amqp_thread.stop)
            pthread_cond_wait(&d->amqp_cond, &d->amqp_lock);
        if (d->amqp_head == NULL)
            break; /* quit, and nothing left */
        struct amqp_batch *taken[AMQP_MERGE_MAX];
        int nb = 0, total = 0;
        while (d->amqp_head && nb < AMQP_MERGE_MAX) {
            struct amqp_batch *b = d->amqp_head;
            d->amqp_head = b->next;
            taken[nb++] = b;
            total += b->n;
        }
        if (d->amqp_head == NULL)
            d->amqp_tail = &d->amqp_head;
        int quitting = d->amqp_thread.stop;
        pthread_mutex_unlock(&d->amqp_lock);
        int k = 0;
        for (int i = 0; msgs && outcome && i < nb; i++) {
            struct amqp_batch *b = taken[i];
            for (int j = 0; j < b->n; j++, k++)
                msgs[k] = (struct amqp_out){.exchange = b->exchange,
                                            .routing_key = b->routing_key,
                                            .body = b->jobs[j].body.data,
                                            .body_len = b->jobs[j].body.len,
                                            .id = b->jobs[j].idtext,
                                            .topic = b->topic->name,
                                            .attempt = b->jobs[j].attempt,
                                            .traceparent = b->jobs[j].traceparent[0] ? b->jobs[j].traceparent : NULL,
                                            .tracestate = b->jobs[j].tracestate};
        }
        int sent = 0;
        if (!quitting && msgs && outcome) {
            if (amqppub_publish_batch(d->pub, msgs, total, outcome, d->app->cfg.amqp_timeout_ms) < 0)
                log_warn("deliver: amqp: %s", amqppub_error(d->pub));
            sent = 1;
        }
        int connected = amqppub_connected(d->pub);
        k = 0;
        for (int i = 0; i < nb; i++) {
            struct amqp_batch *b = taken[i];
            for (int j = 0; j < b->n; j++, k++)
                b->outcome[j] = sent ? outcome[k] : AMQPPUB_UNKNOWN;
            b->connected = connected;
            if (loopq_post(d->inbox, on_amqp_batch_done, b) < 0)
                log_error("deliver: amqp batch outcome lost (stopping): its jobs are delivered again after their "
                          "lease");
        }
        pthread_mutex_lock(&d->amqp_lock);
    }
    pthread_mutex_unlock(&d->amqp_lock);
    free(msgs);
    free(outcome);
    return NULL;
}

static void amqp_batch_free(struct amqp_batch *b)
{
    for (int i = 0; i < b->n; i++) {
        sb_free(&b->jobs[i].body);
        free(b->jobs[i].tracestate);
    }
    free(b);
}

static void on_amqp_batch_done(void *arg)
{
    struct amqp_batch *b = arg;
    struct dtopic *t = b->topic;
    struct deliver *d = t->d;
    if (d->closed) { /* stopping: the jobs' leases bring them back */
        t->batches--;
        atomic_fetch_sub(&d->busy, b->n);
        amqp_batch_free(b);
        return;
    }
    int64_t latency = clock_mono_us() - b->start_us;
    int unknown = 0;
    for (int i = 0; i < b->n; i++) {
        const struct amqp_job *j = &b->jobs[i];
        enum amqppub_outcome o = b->outcome[i];
        char outcome[32];
        snprintf(outcome, sizeof outcome, "amqp:%s", amqppub_outcome_name(o));
        enum store_route_result result = o == AMQPPUB_CONFIRMED ? ROUTE_DELIVERED
                                         : o == AMQPPUB_UNKNOWN ? ROUTE_UNDELIVERED
                                                                : ROUTE_FAILED;
        unknown += o == AMQPPUB_UNKNOWN;
        delivstats_record(t->name, t->len, "amqp",
                          result == ROUTE_DELIVERED ? DS_DELIVERED
                          : result == ROUTE_FAILED  ? DS_FAILED
                                                    : DS_UNDELIVERED,
                          latency);
        if (j->settle)
            settle(d, j->id, j->attempt, result, outcome);
    }
    /* The broker was not there: wait a little before handing it more (backoff to 5 s), so an
     * outage costs a reservation now and then, not a loop of them. */
    if (unknown && !b->connected) {
        d->amqp_down_ms = d->amqp_down_ms ? d->amqp_down_ms * 2 : AMQP_DOWN_MIN_MS;
        if (d->amqp_down_ms > AMQP_DOWN_MAX_MS)
            d->amqp_down_ms = AMQP_DOWN_MAX_MS;
        d->amqp_down_until = clock_mono_ms() + d->amqp_down_ms;
    } else if (!unknown) {
        d->amqp_down_ms = 0;
        d->amqp_down_until = 0;
    }
    t->out -= b->n;
    t->batches--;
    atomic_fetch_sub(&d->busy, b->n);
    amqp_batch_free(b);
    pump(t);
}

static void send_amqp(struct dtopic *t, const struct delivered *jobs, int n)
{
    struct deliver *d = t->d;
    struct amqp_batch *b = calloc(1, sizeof *b);
    if (b == NULL) {
        for (int i = 0; i < n; i++)
            if (jobs[i].state == JS_RESERVED)
                settle(d, jobs[i].id, jobs[i].attempt, ROUTE_UNDELIVERED, "amqp:unsent");
        return;
    }
    b->topic = t;
    b->n = n;
    b->start_us = clock_mono_us();
    memcpy(b->exchange, t->conf.exchange, sizeof b->exchange);
    memcpy(b->routing_key, t->conf.routing_key, sizeof b->routing_key);
    for (int i = 0; i < n; i++) {
        struct amqp_job *j = &b->jobs[i];
        j->id = jobs[i].id;
        j->attempt = jobs[i].attempt;
        j->settle = jobs[i].state == JS_RESERVED;
        snprintf(j->idtext, sizeof j->idtext, "%llu", (unsigned long long)jobs[i].id);
        jobjson_delivered(&j->body, &jobs[i]);
        const struct trace_ref *tr = &jobs[i].trace;
        if (tr->parent) { /* the message carries the push's context as its headers */
            memcpy(j->traceparent, tr->parent, TRACE_PARENT_LEN);
            j->traceparent[TRACE_PARENT_LEN] = '\0';
            if (tr->state && (j->tracestate = malloc(tr->state_len + 1)) != NULL) {
                memcpy(j->tracestate, tr->state, tr->state_len);
                j->tracestate[tr->state_len] = '\0';
            }
        }
    }
    t->out += n;
    t->batches++;
    atomic_fetch_add(&d->busy, n);
    pthread_mutex_lock(&d->amqp_lock);
    *d->amqp_tail = b;
    d->amqp_tail = &b->next;
    pthread_cond_signal(&d->amqp_cond);
    pthread_mutex_unlock(&d->amqp_lock);
}

/* ---- reserving ---- */

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    pump(arg);
}

static void on_reserved(const struct delivered *jobs, int n, int failed, int64_t wait_ms, void *arg)
{
    struct dtopic *t = arg;
    struct deliver *d = t->d;
    t->reserving = 0;
    atomic_fetch_sub(&d->busy, 1);
    if (failed)
        return; /* Redis: the sweep tries again */
    if (n == 0 && wait_ms > 0 && t->retry) {
        struct timeval tv = {(time_t)(wait_ms / 1000), (suseconds_t)((wait_ms % 1000) * 1000)};
        event_add(t->retry, &tv);
    }
    int64_t now = clock_unix_ms();
    for (int i = 0; i < n; i++) {
        metrics_transition(JS_READY, jobs[i].state, 1);
        if (jobs[i].attempt == 1)
            metrics_observe(MH_LATENESS, now > jobs[i].run_at ? (double)(now - jobs[i].run_at) / 1000.0 : 0.0);
    }
    metrics_inc(MC_JOBS_DELIVERED, (uint64_t)n);
    if (t->conf.route == TOPIC_ROUTE_WEBHOOK) {
        for (int i = 0; i < n; i++)
            send_webhook(t, &jobs[i]);
    } else if (n > 0) {
        send_amqp(t, jobs, n);
    }
    /* a full answer: more may be ready */
    if (n > 0 || t->again) {
        t->again = 0;
        pump(t);
    }
}

/* Reserve as many of the topic's ready jobs as it has room for. */
static void pump(struct dtopic *t)
{
    struct deliver *d = t->d;
    if (d->stopping || t->seen != d->gen || !journal_accepting())
        return;
    if (atomic_load(&d->app->layout) != LAYOUT_OK)
        return; /* not into data of another layout (layout.h); the sweep tries again */
    if (t->reserving) {
        t->again = 1;
        return;
    }
    int room;
    int64_t lease;
    if (t->conf.route == TOPIC_ROUTE_WEBHOOK) {
        room = t->conf.concurrency - t->out;
        lease = t->conf.timeout + LEASE_GRACE_MS;
    } else {
        if (!d->amqp_on || clock_mono_ms() < d->amqp_down_until || t->batches >= AMQP_BATCHES_OUT)
            return;
        room = AMQP_BATCH;
        lease = d->app->cfg.amqp_timeout_ms + LEASE_GRACE_MS;
    }
    if (room <= 0)
        return;
    if (room > RESERVE_MAX)
        room = RESERVE_MAX;
    const char *topics[1] = {t->name};
    size_t lens[1] = {t->len};
    t->reserving = 1;
    atomic_fetch_add(&d->busy, 1);
    if (store_reserve(&d->store, t->shard, topics, lens, 1, room, clock_unix_ms(), d->who, lease, on_reserved, t) < 0) {
        t->reserving = 0;
        atomic_fetch_sub(&d->busy, 1);
    }
}

/* ---- the table of routed topics ---- */

static void dtopic_free(struct dtopic *t)
{
    if (t->retry)
        event_free(t->retry);
    free(t);
}

static void refresh(struct deliver *d)
{
    d->gen++;
    int count = 0;
    for (enum topic_route route = TOPIC_ROUTE_WEBHOOK; route <= TOPIC_ROUTE_AMQP; route++) {
        char **names = NULL;
        int n = topics_with_route(route, &names);
        for (int i = 0; i < n; i++) {
            size_t len = strlen(names[i]);
            struct dtopic *t = hmap_get(&d->topics, names[i], len);
            if (t == NULL) {
                t = calloc(1, sizeof *t);
                if (t == NULL || hmap_put(&d->topics, names[i], len, t) < 0) {
                    free(t);
                    continue;
                }
                t->d = d;
                memcpy(t->name, names[i], len + 1);
                t->len = len;
                t->shard = id_topic_shard(t->name, len, d->store.shards);
                t->retry = evtimer_new(d->base, on_retry, t);
                log_info("deliver: topic %s now delivers by %s", t->name,
                         route == TOPIC_ROUTE_WEBHOOK ? "webhook" : "amqp");
            }
            topics_get(t->name, len, &t->conf);
            if (t->conf.route != route)
                continue; /* changed between the two reads: the next refresh sees it */
            t->seen = d->gen;
            count++;
        }
        if (n >= 0) /* an empty answer is an array too */
            topics_names_free(names, n);
    }
    /* topics that lost their route: forgotten once nothing of theirs is out */
    size_t pos = 0;
    const void *key;
    size_t klen;
    struct dtopic *t;
    while ((t = hmap_next(&d->topics, &pos, &key, &klen)) != NULL) {
        if (t->seen == d->gen || t->out > 0 || t->reserving)
            continue;
        log_info("deliver: topic %s has no route any more", t->name);
        hmap_remove(&d->topics, key, klen);
        dtopic_free(t);
        pos = 0; /* the map changed: start over (few topics) */
    }
    atomic_store(&d->routes, count);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct deliver *d = arg;
    refresh(d);
    int sweep = ++d->ticks % SWEEP_TICKS == 0;
    size_t pos = 0;
    struct dtopic *t;
    while ((t = hmap_next(&d->topics, &pos, NULL, NULL)) != NULL)
        if (sweep || t->out == 0)
            pump(t);
}

struct ready_note {
    struct deliver *d;
    size_t len;
    char topic[];
};

static void ready_on_loop(void *arg)
{
    struct ready_note *n = arg;
    struct deliver *d = n->d;
    if (d->closed) {
        free(n);
        return;
    }
    if (n->len == 0) {
        size_t pos = 0;
        struct dtopic *t;
        while ((t = hmap_next(&d->topics, &pos, NULL, NULL)) != NULL)
            pump(t);
    } else {
        struct dtopic *t = hmap_get(&d->topics, n->topic, n->len);
        if (t)
            pump(t);
    }
    free(n);
}

void deliver_notify_ready(struct deliver *d, const char *topic, size_t len)
{
    if (d == NULL || atomic_load(&d->routes) == 0)
        return;
    struct ready_note *n = malloc(sizeof *n + len + 1);
    if (n == NULL)
        return;
    n->d = d;
    n->len = len;
    memcpy(n->topic, topic, len);
    n->topic[len] = '\0';
    if (loopq_post(d->inbox, ready_on_loop, n) < 0)
        free(n);
}

/* ---- the thread ---- */

static void *deliver_main(void *arg)
{
    struct deliver *d = arg;
    log_set_thread_name("deliver");
    event_base_dispatch(d->base);
    return NULL;
}

static void stop_taking(void *arg)
{
    struct deliver *d = arg;
    d->stopping = 1;
}

static void leave_loop(void *arg)
{
    struct deliver *d = arg;
    event_del(d->tick);
    event_base_loopexit(d->base, NULL);
}

static void deliver_free(struct deliver *d)
{
    d->stopping = d->closed = 1; /* the loop is not running (any more): nothing is started */
    if (d->amqp_on)
        bgthread_stop(&d->amqp_thread, 0); /* what is still queued goes back unsent */
    if (d->inbox)
        loopq_close(d->inbox); /* batch outcomes posted last: their jobs are out of reach now */
    whclient_free(d->wh);      /* pending requests are cancelled: their jobs come back after the lease */
    size_t pos = 0;
    struct dtopic *t;
    while ((t = hmap_next(&d->topics, &pos, NULL, NULL)) != NULL)
        dtopic_free(t);
    hmap_free(&d->topics);
    rlink_free(d->redis);
    amqppub_free(d->pub);
    if (d->tick)
        event_free(d->tick);
    loopq_free(d->inbox);
    if (d->base)
        event_base_free(d->base);
    if (d->amqp_on) {
        pthread_mutex_destroy(&d->amqp_lock);
        pthread_cond_destroy(&d->amqp_cond);
    }
    free(d);
}

struct deliver *deliver_start(struct app *app)
{
    const struct config *cfg = &app->cfg;
    struct deliver *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->app = app;
    d->base = evbase_new(EVENT_BASE_FLAG_PRECISE_TIMER);
    char err[256] = "";
    if (d->base == NULL || (d->inbox = loopq_new(d->base)) == NULL)
        goto fail;
    struct rlink_config rcfg = {"deliver",         cfg->redis_address,    cfg->redis_password,
                                cfg->redis_db,     cfg->redis_timeout_ms, 0,
                                cfg->redis_cluster};
    if ((d->redis = rlink_new(d->base, &rcfg, NULL, NULL)) == NULL)
        goto fail;
    d->store.rc = d->redis;
    d->store.prefix = cfg->redis_prefix;
    d->store.shards = cfg->redis_shards;
    store_who(d->who, sizeof d->who, app->instance, "deliver", app->hostname);
    struct whclient_opts wopts = {.max_per_origin = cfg->webhook_max_per_origin, .ca_file = cfg->webhook_ca_file};
    if ((d->wh = whclient_new(d->base, &wopts, err, sizeof err)) == NULL)
        goto fail;
    if (cfg->amqp_url[0]) {
        if ((d->pub = amqppub_new(cfg->amqp_url, app->instance, err, sizeof err)) == NULL)
            goto fail;
        pthread_mutex_init(&d->amqp_lock, NULL);
        pthread_cond_init(&d->amqp_cond, NULL);
        d->amqp_tail = &d->amqp_head;
        d->amqp_thread = (struct bgthread)BGTHREAD_INIT(&d->amqp_lock, &d->amqp_cond, NULL);
        if (bgthread_start(&d->amqp_thread, amqp_main, d) < 0) {
            pthread_mutex_destroy(&d->amqp_lock);
            pthread_cond_destroy(&d->amqp_cond);
            goto fail;
        }
        d->amqp_on = 1;
    }
    d->tick = event_new(d->base, -1, EV_PERSIST, on_tick, d);
    if (d->tick == NULL)
        goto fail;
    struct timeval every = {0, REFRESH_MS * 1000};
    event_add(d->tick, &every);
    if (pthread_create(&d->thread, NULL, deliver_main, d) != 0)
        goto fail;
    return d;
fail:
    log_error("deliver: cannot start%s%s", err[0] ? ": " : " (out of memory or a bad [redis] address)", err);
    deliver_free(d);
    return NULL;
}

void deliver_stop(struct deliver *d, int wait_ms)
{
    if (d == NULL)
        return;
    if (loopq_post(d->inbox, stop_taking, d) == 0) {
        int64_t deadline = clock_mono_ms() + wait_ms;
        while (atomic_load(&d->busy) > 0 && clock_mono_ms() < deadline) {
            struct timespec ts = {0, 10 * 1000000};
            nanosleep(&ts, NULL);
        }
        if (atomic_load(&d->busy) > 0)
            log_warn("deliver: %d deliveries still out at the stop deadline: they are delivered again after their "
                     "lease",
                     atomic_load(&d->busy));
    }
    if (loopq_post(d->inbox, leave_loop, d) == 0)
        pthread_join(d->thread, NULL);
    deliver_free(d);
}
