/* worker.h — an HTTP worker thread: its own event_base, evhttp server on the shared
 * listening socket, async Redis connection, inbox for cross-thread calls and the long-polls
 * parked on it (design.md, decision 2). Nothing in a worker is touched by another thread
 * except through worker_post(). */
#ifndef HG_WORKER_H
#define HG_WORKER_H

#include <pthread.h>

#include "app.h"
#include "loopq.h"
#include "conn.h"
#include "store.h"

struct evbuffer;
struct longpoll;

struct worker {
    int index;
    char name[16];
    struct app *app;
    pthread_t thread;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct rconn *redis;
    struct store store;
    struct loopq *inbox;
    struct longpoll *parked;
    struct event *tick;              /* 1 s housekeeping: long-poll safety re-check */
    long inflight;                   /* requests received and not yet answered */
    struct conn_registry conns;      /* open HTTP connections (conn.c) */
    struct unsure_push *unsure_pushes; /* pushes whose Redis outcome is unknown (api_push.c) */
    struct push_pending *push_pending; /* committed pushes waiting for their shard's call (api_push.c) */
    struct request *free_requests;   /* answered requests kept for reuse (http.c) */
    int nfree_requests;
    const struct evbuffer *replying; /* output buffer of the reply being sent (see http.c) */
    int rewriting;
    int stopping;
};

/* Create the worker's loop, HTTP server and Redis connection, and start its thread. */
int worker_start(struct worker *w, struct app *app, int index) __attribute__((warn_unused_result));

/* Run fn(arg) on the worker's thread. */
int worker_post(struct worker *w, loopq_fn fn, void *arg) __attribute__((warn_unused_result));

/* From any thread: stop accepting, answer parked long-polls (204), and let the loop end
 * once in-flight requests are answered (main joins the thread). */
void worker_drain(struct worker *w);

/* Draining: end the loop once nothing is in flight, after a short grace period in which the
 * last answers are written out to their sockets. Call after answering a request. */
void worker_exit_if_idle(struct worker *w);

/* Free everything once the worker's thread has ended. */
void worker_free(struct worker *w);

/* From any thread: jobs became ready on `topic`; parked long-polls try to take them. */
void worker_notify_ready(struct worker *w, const char *topic, size_t len);

#endif
