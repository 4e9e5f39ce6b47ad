/* longpoll.c — see longpoll.h. */
#include "api/longpoll.h"
#include "api/passmerge.h"
#include "api/handlers.h"
#include "api/api_util.h"
#include "redis/jobjson.h"
#include "core/app.h"
#include "base/clock.h"
#include "core/ids.h"
#include "redis/layout.h"
#include "base/log.h"
#include "core/metrics.h"
#include "core/parkbook.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct parked {
    struct request *r;
    struct longpoll *lp;
    int ntopics;
    const char *topics[TOPICS_PER_GET];
    size_t lens[TOPICS_PER_GET];
    int shards[TOPICS_PER_GET];
    int count;
    int64_t timeout_ms;
    int first_attempt; /* no reservation has come back yet */
    int hung_up;       /* the client is gone */
    int segment;       /* first topic of the reservation in flight */
    int got;           /* jobs reserved so far (several segments may each give some) */
    struct sbuf acc;   /* their JSON, comma-separated */
    struct taken_job {
        uint64_t id;
        int attempt, state;
    } taken[100];
    struct event *timer;
    struct event *hup;
    struct event *retry;     /* a topic's rate held its jobs back: try again when a token comes */
    int64_t wait_ms;         /* the shortest such wait this round, 0 = none */
    struct parkbook_entry e; /* reserving, finished and rewake live there */
    uint64_t finish_id;      /* finish=: the job finished before the get began */
};

struct longpoll {
    struct hctx *ctx;
    struct parkbook book;
};

static int link_parked(struct parked *p)
{
    p->e.owner = p;
    if (parkbook_file(&p->lp->book, &p->e, p->topics, p->lens, p->ntopics) < 0)
        return -1;
    atomic_fetch_add(&p->lp->ctx->app->parked, 1);
    metrics_gauge_add(MG_PARKED, 1);
    return 0;
}

static void unlink_parked(struct parked *p)
{
    if (!p->e.filed)
        return;
    parkbook_unfile(&p->lp->book, &p->e);
    atomic_fetch_sub(&p->lp->ctx->app->parked, 1);
    metrics_gauge_add(MG_PARKED, -1);
}

static void parked_free(void *arg)
{
    struct parked *p = arg;
    unlink_parked(p);
    if (p->timer)
        event_free(p->timer);
    if (p->hup)
        event_free(p->hup);
    if (p->retry)
        event_free(p->retry);
    sb_free(&p->acc);
    free(p);
}

/* Answer and forget. The request owns p (state_free), so this frees p too. */
static void answer_empty(struct parked *p)
{
    unlink_parked(p);
    respond_no_content(p->r);
}

static void try_reserve(struct parked *p);

static void wake(struct parkbook_entry *e, void *arg)
{
    try_reserve(e->owner);
}

int longpoll_notify(struct hctx *ctx, const char *topic, size_t len)
{
    struct parkbook_entry *e = parkbook_notify(&ctx->parked->book, topic, len);
    if (e)
        wake(e, NULL);
    return e != NULL;
}

/* A notification passed on that nobody parked here was idle to take: offer it to the other
 * workers (request.h pass_ready). */
static void pass_elsewhere(const char *topic, size_t len, void *arg)
{
    struct hctx *ctx = arg;
    if (ctx->pass_ready)
        ctx->pass_ready(ctx, topic, len);
}

static void release_taken(struct parked *p);

/* Count and render jobs just reserved for p (reserve.lua logged the transitions). */
static void take(struct parked *p, const struct delivered *jobs, int n)
{
    int64_t now = clock_unix_ms();
    for (int i = 0; i < n && p->got < p->count; i++) {
        const struct delivered *d = &jobs[i];
        metrics_transition(JS_READY, d->state, 1);
        if (d->attempt == 1)
            metrics_observe(MH_LATENESS, now > d->run_at ? (double)(now - d->run_at) / 1000.0 : 0.0);
        if (p->got)
            sb_putc(&p->acc, ',');
        jobjson_delivered(&p->acc, d);
        p->taken[p->got].id = d->id;
        p->taken[p->got].attempt = d->attempt;
        p->taken[p->got].state = d->state;
        p->got++;
    }
    metrics_inc(MC_JOBS_DELIVERED, (uint64_t)n);
}

/* Answer with what was taken, then pass the notification on when more may wait for others
 * (parkbook_pass_on_wanted). `unsure`: a rate held jobs back or a reservation failed. */
static void deliver(struct parked *p, int unsure)
{
    struct request *r = p->r;
    struct longpoll *lp = p->lp;
    if (p->hung_up) {
        release_taken(p);
        answer_empty(p);
        return;
    }
    struct sbuf sb = SBUF_INIT;
    if (p->count > 1)
        sb_putc(&sb, '[');
    sb_put(&sb, p->acc.data, p->acc.len);
    if (p->count > 1)
        sb_putc(&sb, ']');

    int pass_on = parkbook_pass_on_wanted(&p->e, p->got, p->count, unsure);
    struct parkbook_topics saved;
    if (pass_on)
        parkbook_topics_save(&saved, p->topics, p->lens, p->ntopics);
    unlink_parked(p);
    respond_json(r, 200, &sb); /* frees p */
    sb_free(&sb);
    if (pass_on)
        parkbook_pass_on(&lp->book, &saved, wake, pass_elsewhere, lp->ctx);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct parked *p = arg;
    if (p->e.reserving)
        p->e.rewake = 1;
    else
        try_reserve(p);
}

/* Nothing came because a rate held the jobs back: come back when the next token does (the
 * timer is armed only while parked; a notification meanwhile tries sooner, harmlessly). */
static void arm_retry(struct parked *p)
{
    if (p->retry == NULL && (p->retry = evtimer_new(p->lp->ctx->base, on_retry, p)) == NULL)
        return; /* the 1 s tick retries */
    struct timeval tv = {(time_t)(p->wait_ms / 1000), (suseconds_t)((p->wait_ms % 1000) * 1000)};
    event_add(p->retry, &tv);
}

/* Parked with nothing for it: wait for a notification, the request's timeout or a hang-up. */
static void start_waiting(struct parked *p)
{
    struct timeval tv = {(time_t)(p->timeout_ms / 1000), (suseconds_t)((p->timeout_ms % 1000) * 1000)};
    event_add(p->timer, &tv);
    if (p->hup)
        event_add(p->hup, NULL);
}

static void on_reserved(const struct delivered *jobs, int n, int failed, int64_t wait_ms, void *arg)
{
    struct parked *p = arg;
    p->e.reserving = 0;
    if (!failed) {
        metrics_inc(MC_LONGPOLL_RESERVATIONS, 1);
        if (n == 0)
            metrics_inc(MC_LONGPOLL_EMPTY, 1);
    }
    if (wait_ms > 0 && (p->wait_ms == 0 || wait_ms < p->wait_ms))
        p->wait_ms = wait_ms;
    if (n > 0)
        take(p, jobs, n);
    if (!failed && p->got < p->count && !p->hung_up && !p->e.finished) {
        /* try the next shard's topics, in the order asked */
        int next = p->segment;
        while (next < p->ntopics && p->shards[next] == p->shards[p->segment])
            next++;
        if (next < p->ntopics) {
            p->segment = next;
            try_reserve(p);
            return;
        }
    }
    p->segment = 0;
    if (p->got > 0) {
        deliver(p, failed || p->wait_ms > 0);
        return;
    }
    if (failed && p->first_attempt && !p->e.finished) {
        unlink_parked(p);
        respond_unavailable(p->r, "Redis");
        return;
    }
    int first = p->first_attempt;
    p->first_attempt = 0;
    if (p->e.finished || p->hung_up || (first && p->timeout_ms == 0)) {
        answer_empty(p);
        return;
    }
    if (first)
        start_waiting(p);
    int64_t wait = p->wait_ms;
    p->wait_ms = 0;
    if (parkbook_take_rewake(&p->e))
        try_reserve(p);
    else if (wait > 0)
        arm_retry(p);
}

static void try_reserve(struct parked *p)
{
    struct hctx *ctx = p->lp->ctx;
    if (!p->first_attempt && !journal_accepting())
        return; /* back-pressure: stay parked; the tick retries */
    if (!p->first_attempt && atomic_load(&ctx->app->layout) != LAYOUT_OK)
        return; /* Redis came back and is not checked yet (layout.h): the tick retries */
    const char *topics[TOPICS_PER_GET];
    size_t lens[TOPICS_PER_GET];
    int n = 0;
    for (int i = p->segment; i < p->ntopics && p->shards[i] == p->shards[p->segment]; i++) {
        topics[n] = p->topics[i];
        lens[n++] = p->lens[i];
    }
    p->e.reserving = 1;
    char who[STORE_WHO_MAX];
    api_who(p->r, who, sizeof who);
    struct passmerge *merge = api_merged(ctx);
    if (merge == NULL ||
        passmerge_reserve(merge, p->shards[p->segment], topics, lens, n, p->count - p->got, who, on_reserved, p) < 0) {
        /* out of memory (Redis's failures come back through on_reserved) */
        p->e.reserving = 0;
        p->segment = 0;
        if (p->got > 0)
            deliver(p, 1);
        else if (p->first_attempt) {
            unlink_parked(p);
            respond_unavailable(p->r, "memory");
        }
    }
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct parked *p = arg;
    metrics_inc(MC_LONGPOLL_TIMEOUTS, 1);
    if (p->e.reserving) {
        p->e.finished = 1;
        return;
    }
    answer_empty(p);
}

static void on_hangup_check(evutil_socket_t fd, short what, void *arg)
{
    struct parked *p = arg;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0)
        return; /* the client sent more (a pipelined request): it is there; stop watching */
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        event_add(p->hup, NULL);
        return;
    }
    metrics_inc(MC_LONGPOLL_HANGUPS, 1);
    p->hung_up = 1;
    event_free(p->hup);
    p->hup = NULL;
    if (p->e.reserving)
        return; /* answered (and any job released) when the reservation returns */
    answer_empty(p);
}

static void on_released(const struct id_outcome *out, void *arg)
{
    (void)out;
    (void)arg;
}

/* Jobs reserved for a client that has gone: give them back now rather than after their lease. */
static void release_taken(struct parked *p)
{
    struct hctx *ctx = p->lp->ctx;
    int64_t now = clock_unix_ms();
    char who[STORE_WHO_MAX];
    api_who(p->r, who, sizeof who);
    for (int i = 0; i < p->got; i++)
        if (p->taken[i].state == JS_RESERVED &&
            store_release(&ctx->store, p->taken[i].id, now, 0, p->taken[i].attempt, who, on_released, NULL) < 0)
            log_warn("get: job %llu reserved for a client that left will be redelivered after its lease",
                     (unsigned long long)p->taken[i].id);
}

static void get_begin(struct parked *p);

/* finish=: the job is finished first; refused, the get takes nothing and answers why. Every
 * answer after it says that it was finished (Hourglass-Finished), a 503 of the get part too. */
static void on_finished_first(const struct id_outcome *o, void *arg)
{
    struct parked *p = arg;
    if (api_answer_outcome(p->r, o, "reserved"))
        return;
    metrics_transition(JS_RESERVED, JS_FINISHED, 1);
    char id[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)p->finish_id);
    evhttp_add_header(evhttp_request_get_output_headers(p->r->req), "Hourglass-Finished", id);
    get_begin(p);
}

void api_get(struct request *r)
{
    static const char *const allowed[] = {"timeout", "count", "finish", "attempt", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    struct hctx *ctx = r->ctx;
    const struct config *cfg = &ctx->app->cfg;
    char err[256];
    int64_t count, timeout_ms;
    int64_t max_ms = (int64_t)cfg->longpoll_max * 1000;
    if (param_int(&r->params, "count", 1, 100, 1, &count, err, sizeof err) < 0 ||
        param_seconds(&r->params, "timeout", max_ms, 30000 < max_ms ? 30000 : max_ms, &timeout_ms, err, sizeof err) <
            0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    uint64_t finish_id = 0;
    int finish_attempt = 0;
    int finishing = api_param_id_opt(r, "finish", &finish_id);
    if (finishing < 0 || api_param_attempt(r, &finish_attempt) < 0)
        return;
    if (!finishing && finish_attempt) {
        respond_error(r, 400, "bad_request", "attempt goes with finish (the attempt of the job it finishes)");
        return;
    }

    struct parked *p = api_state_new(r, sizeof *p, parked_free);
    if (p == NULL)
        return;
    p->r = r;
    p->lp = ctx->parked;
    int n = job_topic_list_parse(r->route.arg, r->route.arg_len, p->topics, p->lens, err, sizeof err);
    if (n < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    p->ntopics = n;
    for (int i = 0; i < n; i++)
        p->shards[i] = id_topic_shard(p->topics[i], p->lens[i], cfg->redis_shards);
    p->count = (int)count;
    /* shutting down: what arrives on an open connection is served, but not parked (it would
     * hold the drain up); the client polls again, through the balancer, elsewhere */
    if (atomic_load(&ctx->app->draining))
        timeout_ms = 0;
    p->timeout_ms = timeout_ms;
    p->first_attempt = 1;

    if (api_require_redis(r) < 0 || api_require_journal_room(r) < 0)
        return;
    if (!clock_fleet_known()) { /* a lease needs the fleet's clock (base/clock.h) */
        respond_unavailable(r, "the fleet's clock (not measured yet)");
        return;
    }
    if (finishing) {
        p->finish_id = finish_id;
        char who[STORE_WHO_MAX];
        api_who(r, who, sizeof who);
        if (api_merged_finish(ctx, finish_id, finish_attempt, who, on_finished_first, p) < 0)
            respond_unavailable(r, "memory");
        return;
    }
    get_begin(p);
}

/* The get itself: park (a long-poll) and make the first reservation. */
static void get_begin(struct parked *p)
{
    struct request *r = p->r;
    struct hctx *ctx = r->ctx;
    const struct config *cfg = &ctx->app->cfg;
    if (p->timeout_ms > 0) {
        if (atomic_load(&ctx->app->parked) >= cfg->max_parked) {
            respond_error(r, 503, "unavailable", "too many consumers are waiting on this instance (max_parked)");
            return;
        }
        p->timer = evtimer_new(ctx->base, on_timeout, p);
        struct evhttp_connection *evcon = evhttp_request_get_connection(r->req);
        struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
        evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
        if (fd >= 0)
            p->hup = event_new(ctx->base, fd, EV_READ, on_hangup_check, p);
        /* filed before the first reservation: see longpoll.h */
        if (p->timer == NULL || link_parked(p) < 0) {
            respond_unavailable(r, "memory");
            return;
        }
        if (parkbook_behind_idle(&p->e)) {
            /* an older long-poll waits idle on each of its topics: nothing is ready there that
             * would not go to that one first (parkbook.h), so no first look */
            p->first_attempt = 0;
            metrics_inc(MC_LONGPOLL_QUEUED, 1);
            start_waiting(p);
            return;
        }
    }
    try_reserve(p);
}

int longpoll_new(struct hctx *ctx)
{
    struct longpoll *lp = calloc(1, sizeof *lp);
    if (lp == NULL)
        return -1;
    lp->ctx = ctx;
    ctx->parked = lp;
    return 0;
}

void longpoll_free(struct hctx *ctx)
{
    struct longpoll *lp = ctx->parked;
    if (lp == NULL)
        return;
    parkbook_free(&lp->book); /* entries left only after a loop broken at the shutdown deadline */
    free(lp);
    ctx->parked = NULL;
}

/* The safety re-check, for notifications lost while Redis reconnected (and for requests that
 * waited out the journal's back-pressure): instead of a reservation per parked topic every
 * second, one HMGET of the shard's counters per shard asks which of them have ready jobs,
 * and only those are tried. */
struct tick_call {
    struct hctx *ctx;
    int n;
    char **topics;
    size_t *lens;
};

static void tick_call_free(struct tick_call *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->topics[i]);
    free(t->topics);
    free(t->lens);
    free(t);
}

static void on_ready_counts(const int64_t *ready, int n, void *arg)
{
    struct tick_call *t = arg;
    for (int i = 0; i < t->n; i++)
        if (ready == NULL || (i < n && ready[i] > 0)) /* no answer: try them, as before */
            longpoll_notify(t->ctx, t->topics[i], t->lens[i]);
    tick_call_free(t);
}

void longpoll_tick(struct hctx *ctx)
{
    struct longpoll *lp = ctx->parked;
    int shards = ctx->store.shards;
    size_t ntopics = parkbook_topic_count(&lp->book);
    if (ntopics == 0)
        return;
    struct tick_call **calls = calloc((size_t)shards, sizeof *calls);
    if (calls == NULL)
        return;
    size_t pos = 0, len;
    const char *topic;
    while ((topic = parkbook_next_topic(&lp->book, &pos, &len)) != NULL) {
        int s = id_topic_shard(topic, len, shards);
        struct tick_call *c = calls[s];
        if (c == NULL && (c = calls[s] = calloc(1, sizeof *c)) != NULL) {
            c->ctx = ctx;
            c->topics = calloc(ntopics, sizeof *c->topics);
            c->lens = calloc(ntopics, sizeof *c->lens);
        }
        if (c == NULL || c->topics == NULL || c->lens == NULL || (c->topics[c->n] = strndup(topic, len)) == NULL)
            continue;
        c->lens[c->n++] = len;
    }
    for (int s = 0; s < shards; s++) {
        struct tick_call *c = calls[s];
        if (c == NULL)
            continue;
        if (c->n == 0 ||
            store_ready_counts(&ctx->store, s, (const char *const *)c->topics, c->lens, c->n, on_ready_counts, c) < 0)
            tick_call_free(c); /* Redis down: the redis_up hook ticks again */
    }
    free(calls);
}

static void answer_drained(struct parkbook_entry *e, void *arg)
{
    answer_empty(e->owner);
}

void longpoll_drain(struct hctx *ctx)
{
    parkbook_drain(&ctx->parked->book, answer_drained, NULL);
}
