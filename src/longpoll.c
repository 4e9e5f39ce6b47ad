/* longpoll.c — see longpoll.h. */
#include "longpoll.h"
#include "api.h"
#include "api_util.h"
#include "app.h"
#include "clock.h"
#include "hmap.h"
#include "ids.h"
#include "log.h"
#include "metrics.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct parked;
struct topic_list;

struct link {
    struct parked *p;
    struct topic_list *list;
    struct link *prev, *next;
};

struct topic_list {
    struct link *head, *tail;
    size_t len;
    char topic[];
};

struct parked {
    struct request *r;
    struct longpoll *lp;
    int ntopics;
    const char *topics[TOPICS_PER_GET];
    size_t lens[TOPICS_PER_GET];
    int shards[TOPICS_PER_GET];
    int count;
    int64_t timeout_ms;
    int first_attempt;     /* no reservation has come back yet */
    int reserving;         /* a reservation is in flight */
    int rewake;            /* a notification arrived during it */
    int finished;          /* timed out / shutting down: answer once the reservation returns */
    int hung_up;           /* the client is gone */
    int linked;
    int segment;           /* first topic of the reservation in flight */
    int got;               /* jobs reserved so far (several segments may each give some) */
    struct sbuf acc;       /* their JSON, comma-separated */
    struct taken_job {
        uint64_t id;
        int attempt, state;
    } taken[100];
    struct event *timer;
    struct event *hup;
    struct link links[TOPICS_PER_GET];
};

struct longpoll {
    struct hctx *ctx;
    struct hmap lists; /* topic -> struct topic_list, while requests are parked on it */
};

static struct topic_list *find_list(struct longpoll *lp, const char *topic, size_t len, int create)
{
    struct topic_list *t = hmap_get(&lp->lists, topic, len);
    if (t || !create)
        return t;
    t = calloc(1, sizeof *t + len + 1);
    if (t == NULL)
        return NULL;
    memcpy(t->topic, topic, len);
    t->len = len;
    if (hmap_put(&lp->lists, topic, len, t) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

static void drop_list(struct longpoll *lp, struct topic_list *t)
{
    hmap_remove(&lp->lists, t->topic, t->len);
    free(t);
}

static int link_parked(struct parked *p)
{
    for (int i = 0; i < p->ntopics; i++) {
        struct topic_list *t = find_list(p->lp, p->topics[i], p->lens[i], 1);
        if (t == NULL) {
            while (--i >= 0) { /* undo */
                struct link *l = &p->links[i];
                if (l->prev) l->prev->next = l->next; else l->list->head = l->next;
                if (l->next) l->next->prev = l->prev; else l->list->tail = l->prev;
                if (l->list->head == NULL) drop_list(p->lp, l->list);
            }
            return -1;
        }
        struct link *l = &p->links[i];
        l->p = p;
        l->list = t;
        l->next = NULL;
        l->prev = t->tail;
        if (t->tail)
            t->tail->next = l;
        else
            t->head = l;
        t->tail = l;
    }
    p->linked = 1;
    atomic_fetch_add(&p->lp->ctx->app->parked, 1);
    metrics_gauge_add(MG_PARKED, 1);
    return 0;
}

static void unlink_parked(struct parked *p)
{
    if (!p->linked)
        return;
    for (int i = 0; i < p->ntopics; i++) {
        struct link *l = &p->links[i];
        if (l->prev)
            l->prev->next = l->next;
        else
            l->list->head = l->next;
        if (l->next)
            l->next->prev = l->prev;
        else
            l->list->tail = l->prev;
        if (l->list->head == NULL)
            drop_list(p->lp, l->list);
    }
    p->linked = 0;
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

/* Pass a notification on to the next idle request parked on `topic`. */
static void notify_list(struct longpoll *lp, struct topic_list *t)
{
    struct link *first = t->head;
    for (struct link *l = t->head; l; l = l->next)
        if (!l->p->reserving && !l->p->finished) {
            try_reserve(l->p);
            return;
        }
    if (first)
        first->p->rewake = 1; /* everyone is mid-reservation: the oldest retries */
}

void longpoll_notify(struct hctx *ctx, const char *topic, size_t len)
{
    struct longpoll *lp = ctx->parked;
    struct topic_list *t = find_list(lp, topic, len, 0);
    if (t)
        notify_list(lp, t);
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
        api_json_delivered(&p->acc, d);
        p->taken[p->got].id = d->id;
        p->taken[p->got].attempt = d->attempt;
        p->taken[p->got].state = d->state;
        p->got++;
    }
    metrics_inc(MC_JOBS_DELIVERED, (uint64_t)n);
}

/* Answer with what was taken, then pass the notification on: more may wait for others. */
static void deliver(struct parked *p)
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

    char topics[TOPICS_PER_GET][TOPIC_MAX + 1];
    size_t lens[TOPICS_PER_GET];
    int ntopics = p->ntopics;
    for (int i = 0; i < ntopics; i++) {
        memcpy(topics[i], p->topics[i], p->lens[i]);
        lens[i] = p->lens[i];
    }
    unlink_parked(p);
    respond_json(r, 200, &sb); /* frees p */
    sb_free(&sb);
    for (int i = 0; i < ntopics; i++)
        longpoll_notify(lp->ctx, topics[i], lens[i]);
}

static void on_reserved(const struct delivered *jobs, int n, int failed, void *arg)
{
    struct parked *p = arg;
    p->reserving = 0;
    if (n > 0)
        take(p, jobs, n);
    if (!failed && p->got < p->count && !p->hung_up && !p->finished) {
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
        deliver(p);
        return;
    }
    if (failed && p->first_attempt && !p->finished) {
        unlink_parked(p);
        respond_unavailable(p->r, "Redis");
        return;
    }
    int first = p->first_attempt;
    p->first_attempt = 0;
    if (p->finished || p->hung_up || (first && p->timeout_ms == 0)) {
        answer_empty(p);
        return;
    }
    if (first) {
        struct timeval tv = {(time_t)(p->timeout_ms / 1000), (suseconds_t)((p->timeout_ms % 1000) * 1000)};
        event_add(p->timer, &tv);
        if (p->hup)
            event_add(p->hup, NULL);
    }
    if (p->rewake) {
        p->rewake = 0;
        try_reserve(p);
    }
}

static void try_reserve(struct parked *p)
{
    struct hctx *ctx = p->lp->ctx;
    if (!p->first_attempt && !journal_accepting())
        return; /* back-pressure: stay parked; the tick retries */
    const char *topics[TOPICS_PER_GET];
    size_t lens[TOPICS_PER_GET];
    int n = 0;
    for (int i = p->segment; i < p->ntopics && p->shards[i] == p->shards[p->segment]; i++) {
        topics[n] = p->topics[i];
        lens[n++] = p->lens[i];
    }
    p->reserving = 1;
    char who[STORE_WHO_MAX];
    api_who(p->r, who, sizeof who);
    if (store_reserve(&ctx->store, p->shards[p->segment], topics, lens, n, p->count - p->got, clock_unix_ms(), who,
                      on_reserved, p) < 0) {
        p->reserving = 0;
        p->segment = 0;
        if (p->got > 0)
            deliver(p);
        else if (p->first_attempt) {
            unlink_parked(p);
            respond_unavailable(p->r, "Redis");
        }
    }
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct parked *p = arg;
    metrics_inc(MC_LONGPOLL_TIMEOUTS, 1);
    if (p->reserving) {
        p->finished = 1;
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
    if (p->reserving)
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

void api_get(struct request *r)
{
    static const char *const allowed[] = {"timeout", "count", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    struct hctx *ctx = r->ctx;
    const struct config *cfg = &ctx->app->cfg;
    char err[256];
    int64_t count, timeout_ms;
    int64_t max_ms = (int64_t)cfg->longpoll_max * 1000;
    if (param_int(&r->params, "count", 1, 100, 1, &count, err, sizeof err) < 0 ||
        param_seconds(&r->params, "timeout", max_ms, 30000 < max_ms ? 30000 : max_ms, &timeout_ms, err,
                      sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }

    struct parked *p = calloc(1, sizeof *p);
    if (p == NULL) {
        respond_unavailable(r, "memory");
        return;
    }
    p->r = r;
    p->lp = ctx->parked;
    r->state = p;
    r->state_free = parked_free;
    int n = topic_list_parse(r->route.arg, r->route.arg_len, p->topics, p->lens, err, sizeof err);
    if (n < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    p->ntopics = n;
    for (int i = 0; i < n; i++)
        p->shards[i] = topic_shard(p->topics[i], p->lens[i], cfg->redis_shards);
    p->count = (int)count;
    p->timeout_ms = timeout_ms;
    p->first_attempt = 1;

    if (api_require_redis(r) < 0 || api_require_journal_room(r) < 0)
        return;
    if (timeout_ms > 0) {
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
    size_t pos = 0;
    struct topic_list *t;
    while ((t = hmap_next(&lp->lists, &pos, NULL, NULL)) != NULL)
        free(t); /* only after a loop broken at the shutdown deadline */
    hmap_free(&lp->lists);
    free(lp);
    ctx->parked = NULL;
}

/* Visit each topic list once; fn may unlink and free lists, so collect the names first. */
static void for_each_list(struct longpoll *lp, void (*fn)(struct longpoll *, struct topic_list *))
{
    size_t n = lp->lists.count;
    if (n == 0)
        return;
    char **names = calloc(n, sizeof *names);
    size_t *lens = calloc(n, sizeof *lens);
    size_t k = 0, pos = 0;
    const void *key;
    size_t len;
    while (names && lens && hmap_next(&lp->lists, &pos, &key, &len) != NULL) {
        names[k] = strndup(key, len);
        lens[k++] = len;
    }
    for (size_t i = 0; i < k; i++) {
        struct topic_list *t = names[i] ? find_list(lp, names[i], lens[i], 0) : NULL;
        if (t)
            fn(lp, t);
        free(names[i]);
    }
    free(names);
    free(lens);
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
    if (lp->lists.count == 0)
        return;
    struct tick_call **calls = calloc((size_t)shards, sizeof *calls);
    if (calls == NULL)
        return;
    size_t pos = 0;
    struct topic_list *t;
    while ((t = hmap_next(&lp->lists, &pos, NULL, NULL)) != NULL) {
        int s = topic_shard(t->topic, t->len, shards);
        struct tick_call *c = calls[s];
        if (c == NULL && (c = calls[s] = calloc(1, sizeof *c)) != NULL) {
            c->ctx = ctx;
            c->topics = calloc(lp->lists.count, sizeof *c->topics);
            c->lens = calloc(lp->lists.count, sizeof *c->lens);
        }
        if (c == NULL || c->topics == NULL || c->lens == NULL || (c->topics[c->n] = strndup(t->topic, t->len)) == NULL)
            continue;
        c->lens[c->n++] = t->len;
    }
    for (int s = 0; s < shards; s++) {
        struct tick_call *c = calls[s];
        if (c == NULL)
            continue;
        if (c->n == 0 || store_ready_counts(&ctx->store, s, (const char *const *)c->topics, c->lens, c->n,
                                            on_ready_counts, c) < 0)
            tick_call_free(c); /* Redis down: the redis_up hook ticks again */
    }
    free(calls);
}

static void drain_list(struct longpoll *lp, struct topic_list *t)
{
    struct link *l = t->head;
    while (l) {
        struct parked *p = l->p;
        struct link *next = l->next;
        /* answering unlinks p from every list, possibly freeing t: stop at the last one */
        int last = next == NULL;
        if (p->reserving) {
            p->finished = 1;
        } else {
            answer_empty(p);
            if (last)
                return;
            /* t may be gone if p was its only member; it was not (next != NULL) */
        }
        l = next;
    }
}

void longpoll_drain(struct hctx *ctx)
{
    for_each_list(ctx->parked, drain_list);
}
