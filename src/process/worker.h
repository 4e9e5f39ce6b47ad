/* worker.h — an HTTP worker thread: its own event_base, evhttp server on its own listening
 * socket (SO_REUSEPORT), async Redis connection, inbox for cross-thread calls, and the
 * subsystems that live on its loop (connections, parked long-polls, push batching), which
 * it calls from one table: once a second, when Redis comes back, after each inbox drain,
 * at shutdown and at the end (architecture.md, "Threads"). Handlers see only the worker's
 * struct hctx (request.h). Nothing in a worker is touched by another thread except through
 * worker_post(). */
#ifndef HG_WORKER_H
#define HG_WORKER_H

#include <pthread.h>

#include "http/httpconn.h"
#include "http/request.h"

struct app;
struct evhttp;
struct evhttp_bound_socket;
struct event;

struct worker {
    struct hctx ctx; /* first: what handlers see */
    int index;
    char name[16];
    pthread_t thread;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct httpconn_registry conns;
    struct event *tick; /* once a second: the subsystems' tick */
    int stopping;
    int drain_window_over;     /* stopping: [http] drain_window has passed (drain_timer fired) */
    struct event *drain_timer; /* fires when the window ends */
    struct worker *next;       /* the ring of all app->nworkers workers a "ready"
                                * notification goes round (worker_notify_ready); set
                                * before worker_start */
};

/* Create the worker's loop, HTTP server on listen_fd (taken over) and Redis connection, and
 * start its thread. */
int worker_start(struct worker *w, struct app *app, int index, int listen_fd) __attribute__((warn_unused_result));

/* Run fn(arg) on the worker's thread. */
int worker_post(struct worker *w, void (*fn)(void *), void *arg) __attribute__((warn_unused_result));

/* From any thread: run a request made inside the daemon (dispatch_internal) on the worker's
 * loop; `body` must stay valid until sink(arg) has been called. 0, or -1 when it could not be
 * queued (then sink is never called). */
int worker_internal(struct worker *w, enum endpoint ep, enum method m, const char *body, size_t len, const char *who,
                    request_sink_fn sink, void *arg) __attribute__((warn_unused_result));

/* From any thread: stop accepting, answer parked long-polls (204), and let the loop end
 * once in-flight requests are answered (the caller joins the thread). */
void worker_drain(struct worker *w);

/* Once the worker's thread has ended: close its Redis connection, whose pending callbacks
 * answer their requests (503) — a push among them whose call went unanswered is written down
 * as in doubt and its rows may be journaled as aborted, so call this while the journal and the
 * reconciler (doubt.h) still run. */
void worker_close_redis(struct worker *w);

/* Free everything once the worker's thread has ended (closing Redis first if
 * worker_close_redis was not called: its callbacks need the HTTP server alive). */
void worker_free(struct worker *w);

/* From any thread: jobs became ready on `topic`; the oldest idle long-poll parked on it in w
 * tries to take them, and when nobody in w is idle to, the notification goes on round the ring
 * (w->next), each worker at most once, until one is. One notification thus costs one
 * reservation, not one per worker, of which all but the first would find nothing (a Redis
 * script call each: thousands a second while a bucket comes due). A reservation that fills its
 * request passes the notification on the same way (longpoll.c). len 0: look at every topic, on
 * w alone (the safety tick, after Redis came back). */
void worker_notify_ready(struct worker *w, const char *topic, size_t len);

#endif
