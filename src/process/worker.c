/* worker.c — see worker.h. */
#include "process/worker.h"
#include "api/handlers.h"
#include "core/app.h"
#include "api/dispatch.h"
#include "redis/layout.h"
#include "base/evbase.h"
#include "base/log.h"
#include "api/longpoll.h"
#include "api/api_util.h"
#include "base/loopq.h"
#include "redis/rlink.h"

#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLUSH_GRACE_US 250000

static void conn_tick(struct hctx *ctx)
{
    httpconn_sweep(ctx->conns);
}

static void conn_free(struct hctx *ctx)
{
    httpconn_release_all(ctx->conns);
}

/* The subsystems on a worker's loop and when each wants to be called, in one place (as
 * redis's serverCron). A NULL entry means "nothing then". */
static const struct subsystem {
    void (*tick)(struct hctx *);        /* once a second */
    void (*redis_up)(struct hctx *);    /* the worker's Redis connection is usable (again) */
    void (*after_drain)(struct hctx *); /* after each drain of the inbox */
    void (*drain)(struct hctx *);       /* shutdown began: answer what waits */
    void (*free)(struct hctx *);        /* the loop has ended and the HTTP server is gone */
} subsystems[] = {
    /* long-polls: the tick is a safety net for notifications lost while Redis reconnected */
    {longpoll_tick, longpoll_tick, NULL, longpoll_drain, longpoll_free},
    /* pushes: committed ones go to Redis together */
    {NULL, NULL, api_push_flush, NULL, api_push_free},
    /* reservations and finishes of one loop pass: merged calls (passmerge.h) */
    {NULL, NULL, NULL, api_merged_drain, api_merged_free},
    /* connections: deadlines, and releasing those evhttp let go */
    {conn_tick, NULL, NULL, NULL, conn_free},
};
#define NSUBSYSTEMS (sizeof subsystems / sizeof subsystems[0])

/* Draining: end the loop once [http] drain_window has passed and nothing is in flight, after a
 * short grace period in which the last answers are written out to their sockets.
 *
 * The window is for connections a balancer keeps alive to this instance: requests it sends on
 * them meanwhile are served, each answer with Connection: close, so it stops using each one
 * cleanly. A connection closed while idle races a request the balancer may be sending on it
 * (nginx does not retry a POST it has sent); the window leaves open only those it has not used
 * for drain_window, and nginx reuses its most recently used connection first. */
static void exit_if_idle(struct worker *w)
{
    if (!w->stopping || w->ctx.inflight != 0 || !w->drain_window_over)
        return;
    /* evhttp writes answers to the socket on a later loop turn: leave it time to. */
    struct timeval tv = {0, FLUSH_GRACE_US};
    event_base_loopexit(w->ctx.base, &tv);
}

static void on_answered(struct hctx *ctx)
{
    exit_if_idle((struct worker *)ctx);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    for (size_t i = 0; i < NSUBSYSTEMS; i++)
        if (subsystems[i].tick)
            subsystems[i].tick(&w->ctx);
    exit_if_idle(w);
}

static void after_drain(void *arg)
{
    struct worker *w = arg;
    for (size_t i = 0; i < NSUBSYSTEMS; i++)
        if (subsystems[i].after_drain)
            subsystems[i].after_drain(&w->ctx);
}

static void redis_back(struct worker *w)
{
    for (size_t i = 0; i < NSUBSYSTEMS; i++)
        if (subsystems[i].redis_up)
            subsystems[i].redis_up(&w->ctx);
}

static void on_layout_checked(enum layout_verdict v, void *arg)
{
    if (v == LAYOUT_OK)
        redis_back(arg);
}

static void on_redis_state(int up, void *arg)
{
    struct worker *w = arg;
    atomic_fetch_add(&w->ctx.app->redis_workers_up, up ? 1 : -1);
    if (!up)
        return;
    /* Requests wait for a layout verdict after a reconnect (layout.h): whichever link is back
     * first asks, so a worker back before the keeper does not refuse longer than it must,
     * and its parked long-polls are tried once the verdict is in. */
    if (atomic_load(&w->ctx.app->layout) == LAYOUT_UNKNOWN)
        layout_check(w->ctx.redis, w->ctx.app, on_layout_checked, w);
    else
        redis_back(w);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    log_set_thread_name(w->name);
    event_base_dispatch(w->ctx.base);
    loopq_close(w->ctx.inbox); /* late notifications and completions run now, or stay with their senders */
    return NULL;
}

static int http_start(struct worker *w, int fd)
{
    const struct config *cfg = &w->ctx.app->cfg;
    w->http = evhttp_new(w->ctx.base);
    if (w->http == NULL) {
        close(fd);
        return -1;
    }
    evhttp_set_bevcb(w->http, httpconn_make_bufferevent, &w->conns);
    evhttp_set_gencb(w->http, dispatch_request, &w->ctx);
    evhttp_set_max_body_size(w->http, (ev_ssize_t)cfg->max_body);
    evhttp_set_max_headers_size(w->http, cfg->max_header);
    evhttp_set_timeout(w->http, cfg->idle_timeout);
    evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                            EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(w->http, "application/json");
    w->bound = evhttp_accept_socket_with_handle(w->http, fd);
    if (w->bound == NULL) {
        close(fd);
        return -1;
    }
    return 0;
}

static void pass_ready(struct hctx *ctx, const char *topic, size_t len);

int worker_start(struct worker *w, struct app *app, int index, int listen_fd)
{
    const struct config *cfg = &app->cfg;
    struct hctx *ctx = &w->ctx;
    w->index = index;
    snprintf(w->name, sizeof w->name, "http-%d", index);
    ctx->name = w->name;
    ctx->app = app;
    ctx->on_answered = on_answered;
    ctx->pass_ready = pass_ready;
    ctx->conns = &w->conns;
    /* evhttp turns a connection's read and write interest off and on around every request;
     * with the changelist, libevent hands epoll only the net change of each loop iteration:
     * 3 epoll_ctl calls a push instead of 4 at 64 connections, and ~8 % less of hourglassd's
     * CPU a push. Its one hazard, two descriptors of one socket (dup), does not arise: nothing
     * here dups a descriptor it gives libevent. */
    ctx->base = evbase_new(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    if (ctx->base == NULL)
        return -1;
    ctx->inbox = loopq_new(ctx->base);
    struct rlink_config rcfg = {w->name, cfg->redis_address, cfg->redis_password, cfg->redis_db, cfg->redis_timeout_ms,
                                1,       cfg->redis_cluster};
    ctx->redis = rlink_new(ctx->base, &rcfg, on_redis_state, w);
    w->tick = event_new(ctx->base, -1, EV_PERSIST, on_tick, w);
    if (!ctx->inbox || !ctx->redis || !w->tick || longpoll_new(ctx) < 0)
        return -1;
    loopq_after_each_drain(ctx->inbox, after_drain, w); /* committed pushes go to Redis together */
    ctx->store.rc = ctx->redis;
    ctx->store.prefix = cfg->redis_prefix;
    ctx->store.shards = cfg->redis_shards;
    struct timeval second = {1, 0};
    event_add(w->tick, &second);
    if (httpconn_init(&w->conns, ctx->base, cfg, w->name) < 0 || http_start(w, listen_fd) < 0)
        return -1;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        return -1;
    return 0;
}

int worker_post(struct worker *w, void (*fn)(void *), void *arg)
{
    return loopq_post(w->ctx.inbox, fn, arg);
}

struct internal {
    struct worker *w;
    enum endpoint ep;
    enum method m;
    const char *body;
    size_t len;
    const char *who;
    request_sink_fn sink;
    void *arg;
};

static void internal_on_loop(void *arg)
{
    struct internal *in = arg;
    static const char oom[] = "{\"error\":\"unavailable\",\"message\":\"out of memory\"}";
    if (dispatch_internal(&in->w->ctx, in->ep, in->m, in->body, in->len, in->who, in->sink, in->arg) < 0)
        in->sink(503, oom, sizeof oom - 1, in->arg);
    free(in);
}

int worker_internal(struct worker *w, enum endpoint ep, enum method m, const char *body, size_t len, const char *who,
                    request_sink_fn sink, void *arg)
{
    struct internal *in = malloc(sizeof *in);
    if (in == NULL)
        return -1;
    *in = (struct internal){w, ep, m, body, len, who, sink, arg};
    if (worker_post(w, internal_on_loop, in) < 0) {
        free(in);
        return -1;
    }
    return 0;
}

static void on_drain_window(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    w->drain_window_over = 1;
    exit_if_idle(w);
}

static void drain_on_loop(void *arg)
{
    struct worker *w = arg;
    int window_ms = w->ctx.app->cfg.drain_window_ms;
    w->stopping = 1;
    w->drain_timer = evtimer_new(w->ctx.base, on_drain_window, w);
    if (w->drain_timer != NULL) {
        struct timeval tv = {window_ms / 1000, (window_ms % 1000) * 1000};
        evtimer_add(w->drain_timer, &tv);
    } else {
        w->drain_window_over = 1; /* no timer to wake us: end as soon as nothing is in flight */
    }
    if (w->bound) { /* stop accepting */
        evhttp_del_accept_socket(w->http, w->bound);
        w->bound = NULL;
    }
    for (size_t i = 0; i < NSUBSYSTEMS; i++)
        if (subsystems[i].drain)
            subsystems[i].drain(&w->ctx);
    exit_if_idle(w); /* otherwise the last answer (or the tick) ends the loop */
}

void worker_drain(struct worker *w)
{
    if (worker_post(w, drain_on_loop, w) < 0)
        log_error("%s: cannot post the drain request", w->name);
}

void worker_close_redis(struct worker *w)
{
    rlink_free(w->ctx.redis);
    w->ctx.redis = NULL;
}

void worker_free(struct worker *w)
{
    /* Redis first: its pending callbacks answer their requests, which needs evhttp alive. */
    worker_close_redis(w);
    if (w->http)
        evhttp_free(w->http);
    w->http = NULL;
    request_pool_free(&w->ctx);
    for (size_t i = 0; i < NSUBSYSTEMS; i++)
        if (subsystems[i].free)
            subsystems[i].free(&w->ctx);
    event_free(w->tick);
    if (w->drain_timer)
        event_free(w->drain_timer);
    loopq_free(w->ctx.inbox);
    event_base_free(w->ctx.base);
}

/* Shutting down: notifications stay where they are, as the other workers' loops end (posting to
 * an ended loop would leave the note unfreed; a loop ends 250 ms or more after draining began). */
static int draining(const struct worker *w)
{
    return atomic_load(&w->ctx.app->draining) != 0;
}

struct ready_note {
    struct worker *w;
    int hops; /* workers after w still to offer it to */
    size_t len;
    char topic[];
};

static void ready_on_loop(void *arg)
{
    struct ready_note *n = arg;
    if (n->len == 0) {
        longpoll_tick(&n->w->ctx);
    } else if (!longpoll_notify(&n->w->ctx, n->topic, n->len) && n->hops > 0 && !draining(n->w)) {
        n->w = n->w->next; /* nobody idle here: the next worker's long-polls may be */
        n->hops--;
        if (worker_post(n->w, ready_on_loop, n) == 0)
            return;
    }
    free(n);
}

static void post_ready(struct worker *w, const char *topic, size_t len, int hops)
{
    struct ready_note *n = malloc(sizeof *n + len + 1);
    if (n == NULL)
        return;
    n->w = w;
    n->hops = hops;
    n->len = len;
    if (len)
        memcpy(n->topic, topic, len);
    n->topic[len] = '\0';
    if (worker_post(w, ready_on_loop, n) < 0)
        free(n);
}

void worker_notify_ready(struct worker *w, const char *topic, size_t len)
{
    post_ready(w, topic, len, len && w->next ? w->ctx.app->nworkers - 1 : 0);
}

/* hctx.pass_ready: the workers after this one, each at most once. */
static void pass_ready(struct hctx *ctx, const char *topic, size_t len)
{
    struct worker *w = (struct worker *)ctx; /* ctx is its first member */
    if (w->next && w->ctx.app->nworkers > 1 && !draining(w))
        post_ready(w->next, topic, len, w->ctx.app->nworkers - 2);
}
