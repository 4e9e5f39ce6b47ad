/* worker.c — see worker.h. */
#include "worker.h"
#include "api.h"
#include "http.h"
#include "log.h"
#include "longpoll.h"
#include "rconn.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#define FLUSH_GRACE_US 250000

void worker_exit_if_idle(struct worker *w)
{
    if (!w->stopping || w->inflight != 0)
        return;
    /* evhttp writes answers to the socket on a later loop turn: leave it time to. */
    struct timeval tv = {0, FLUSH_GRACE_US};
    event_base_loopexit(w->base, &tv);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    longpoll_tick(w->parked);
    conn_sweep(w);
    api_push_tick(w);
    worker_exit_if_idle(w);
}

static void on_redis_state(struct rconn *rc, int up, void *arg)
{
    struct worker *w = arg;
    atomic_fetch_add(&w->app->redis_workers_up, up ? 1 : -1);
    if (up) {
        longpoll_tick(w->parked); /* jobs may have become ready while we were cut off */
        api_push_tick(w);         /* and pushes cut off mid-call can be looked up now */
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    log_set_thread_name(w->name);
    event_base_dispatch(w->base);
    loopq_close(w->inbox); /* late notifications and completions run now, or stay with their senders */
    return NULL;
}

int worker_start(struct worker *w, struct app *app, int index)
{
    const struct config *cfg = &app->cfg;
    w->index = index;
    w->app = app;
    snprintf(w->name, sizeof w->name, "http-%d", index);
    w->base = event_base_new();
    if (w->base == NULL)
        return -1;
    w->inbox = loopq_new(w->base);
    w->parked = longpoll_new(w);
    struct rconn_config rcfg = {w->name, cfg->redis_address, cfg->redis_password, cfg->redis_db,
                                cfg->redis_timeout_ms, 1};
    w->redis = rconn_new(w->base, &rcfg, on_redis_state, w);
    w->tick = event_new(w->base, -1, EV_PERSIST, on_tick, w);
    if (!w->inbox || !w->parked || !w->redis || !w->tick)
        return -1;
    loopq_after_each_drain(w->inbox, api_push_flush, w); /* committed pushes go to Redis together */
    w->store.rc = w->redis;
    w->store.prefix = cfg->redis_prefix;
    w->store.shards = cfg->redis_shards;
    struct timeval second = {1, 0};
    event_add(w->tick, &second);
    if (conn_init(w) < 0 || http_start(w) < 0)
        return -1;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        return -1;
    return 0;
}

int worker_post(struct worker *w, loopq_fn fn, void *arg)
{
    return loopq_post(w->inbox, fn, arg);
}

static void drain_on_loop(void *arg)
{
    struct worker *w = arg;
    w->stopping = 1;
    http_stop_accepting(w);
    longpoll_drain(w->parked);
    worker_exit_if_idle(w); /* otherwise the last answer (or the tick) ends the loop */
}

void worker_drain(struct worker *w)
{
    if (worker_post(w, drain_on_loop, w) < 0)
        log_error("%s: cannot post the drain request", w->name);
}

void worker_free(struct worker *w)
{
    http_free(w);
    conn_release_all(w);
    rconn_free(w->redis);
    longpoll_free(w->parked);
    event_free(w->tick);
    loopq_free(w->inbox);
    api_push_free(w);
    event_base_free(w->base);
}

struct ready_note {
    struct worker *w;
    size_t len;
    char topic[];
};

static void ready_on_loop(void *arg)
{
    struct ready_note *n = arg;
    if (n->len == 0)
        longpoll_tick(n->w->parked);
    else
        longpoll_notify(n->w->parked, n->topic, n->len);
    free(n);
}

void worker_notify_ready(struct worker *w, const char *topic, size_t len)
{
    struct ready_note *n = malloc(sizeof *n + len + 1);
    if (n == NULL)
        return;
    n->w = w;
    n->len = len;
    if (len)
        memcpy(n->topic, topic, len);
    n->topic[len] = '\0';
    if (worker_post(w, ready_on_loop, n) < 0)
        free(n);
}
