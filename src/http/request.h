/* request.h — the bottom of the HTTP side: one struct request per request in flight, the
 * narrow context (struct hctx) a handler sees of the worker that runs it, and the only
 * functions that answer a client.
 *
 * Lifetime: a struct request is made by request_new when evhttp hands over a complete
 * request and is freed by the respond_* call that answers it; exactly one respond_* call per
 * request. evhttp keeps the underlying evhttp_request valid until we answer, even when the
 * client has gone (libevent 2.1 detaches it from the connection instead of freeing it), so
 * asynchronous steps never need to check whether the request still exists.
 *
 * Answering reports to the owner of the context through hctx.on_answered (the worker uses it
 * to end its loop once draining and idle): this layer calls nothing above it. */
#ifndef HG_REQUEST_H
#define HG_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "durable/journal.h"
#include "http/params.h"
#include "core/router.h"
#include "base/sbuf.h"
#include "redis/store.h"

struct app;
struct httpconn_registry;
struct event_base;
struct evhttp_request;
struct loopq;
struct longpoll;
struct push_batch;
struct rlink;

/* What a handler may use of the worker that runs it. Owned by the worker and touched only
 * on its thread; handlers read it and pass it on. */
struct hctx {
    const char *name; /* the worker's thread name ("http-0"): actors and logs */
    struct app *app;  /* shared by every thread (app.h) */
    struct event_base *base;
    struct loopq *inbox; /* other threads' results come back through it */
    struct rlink *redis;
    struct store store;              /* typed script calls on `redis` */
    struct httpconn_registry *conns; /* the worker's HTTP connections (httpconn.h) */
    struct longpoll *parked;         /* long-polls parked on this worker (longpoll.h) */
    struct push_batch *pushes;       /* committed pushes on their way to Redis (api_push.c) */
    struct passmerge *merged;        /* this pass's reservations and finishes, merged (api/passmerge.h) */
    /* requests */
    long inflight;                 /* made and not yet answered */
    struct request *free_requests; /* answered requests kept for reuse */
    int nfree_requests;
    void (*on_answered)(struct hctx *ctx); /* after every answer */
    /* offer a "ready" notification on topic that nobody idle here took to the other workers
     * (worker.c; NULL: this worker is alone) */
    void (*pass_ready)(struct hctx *ctx, const char *topic, size_t len);
};

/* Where the answer to a request made inside the daemon goes (dispatch_internal): its status
 * and JSON body, on the worker's thread, just before the request is freed. */
typedef void (*request_sink_fn)(int status, const char *body, size_t len, void *arg);

struct request {
    struct request *next_free; /* the context's free list of answered requests */
    struct hctx *ctx;
    struct evhttp_request *req;
    enum endpoint endpoint;
    enum method method;
    int64_t start_us;
    char client[JOBCHANGE_HOST_MAX]; /* peer address */
    int loopback;
    const char *body; /* request body, linearised; valid until the answer */
    size_t body_len;
    void *state; /* endpoint-specific, freed by state_free when answered */
    void (*state_free)(void *state);
    request_sink_fn sink; /* an internal request (no client connection): its answer goes here */
    void *sink_arg;
    struct params params;
    struct route route; /* last: its 4 KB argument buffer is never cleared as a whole */
};

/* A request for `req` (client address filled in), or NULL when out of memory (then the
 * caller answers evhttp directly). */
struct request *request_new(struct hctx *ctx, struct evhttp_request *req);

/* Free the context's pool of answered requests (at worker shutdown). */
void request_pool_free(struct hctx *ctx);

/* Answer with `status` and the JSON in `json` (may be NULL for an empty 204). Frees r. */
void respond_json(struct request *r, int status, struct sbuf *json);

/* Answer {"error": code, "message": ...}. Adds Retry-After for 429/503 and Allow for 405. */
void respond_error(struct request *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The same error with more members: `members` holds JSON object members ("k":v,...) appended
 * after "message" (NULL or empty for none). */
void respond_error_members(struct request *r, int status, const char *code, const char *message,
                           const struct sbuf *members);

/* 503 unavailable + Retry-After: 1, naming what is down ("Redis", "MySQL"...). */
void respond_unavailable(struct request *r, const char *what);

/* 204 with no body. */
void respond_no_content(struct request *r);

/* Answer with arbitrary text (metrics). Frees r. */
void respond_text(struct request *r, int status, const char *content_type, struct sbuf *text);

/* Answer with `len` bytes of static data (not copied: they must outlive the answer, as
 * constants do); no body for a 304. Frees r. */
void respond_static(struct request *r, int status, const char *content_type, const void *data, size_t len);

/* A request header's value, or NULL. */
const char *request_header(const struct request *r, const char *name);

/* The request's path, without the query ("/" when empty). */
const char *request_path(const struct request *r);

/* Add a response header before answering. */
void respond_header(struct request *r, const char *name, const char *value);

/* "<worker> <prefix>:{<tag>}:<what>": the actor of a transition this request made (store_actor). */
void request_actor(const struct request *r, int shard, const char *what, char *out, size_t cap);

#endif
