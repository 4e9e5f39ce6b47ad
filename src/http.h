/* http.h — the HTTP front end of a worker: evhttp set-up, one struct request per request in
 * flight, authentication, and the only functions that answer a client.
 *
 * Lifetime: a struct request is created when evhttp hands us a complete request and freed by
 * the respond_* call that answers it; exactly one respond_* call per request. evhttp keeps the
 * underlying evhttp_request valid until we answer, even when the client has gone (libevent
 * 2.1 detaches it from the connection instead of freeing it), so asynchronous steps never need
 * to check whether the request still exists. */
#ifndef HG_HTTP_H
#define HG_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "journal.h"
#include "params.h"
#include "router.h"
#include "sbuf.h"

struct worker;
struct evhttp_request;

struct request {
    struct request *next_free;  /* the worker's free list of answered requests */
    struct worker *w;
    struct evhttp_request *req;
    enum endpoint endpoint;
    enum method method;
    int64_t start_us;
    char client[JREC_HOST_MAX]; /* peer address */
    int loopback;
    const char *body;           /* request body, linearised; valid until the answer */
    size_t body_len;
    void *state;                /* endpoint-specific, freed by state_free when answered */
    void (*state_free)(void *state);
    struct params params;
    struct route route;         /* last: its 4 KB argument buffer is never cleared as a whole */
};

/* Start serving HTTP on the worker's loop (shared listening socket). */
int http_start(struct worker *w) __attribute__((warn_unused_result));

/* evhttp wrote something on its own into `buf` (a connection's output): once it is a complete
 * error page, replace it in place with our JSON error (see http.c). `corrupt_chunked`: the
 * request used chunked encoding and had not sent more than max_body (libevent reports a
 * corrupt chunked body as "too long"). */
struct evbuffer;
void http_rewrite_error_page(struct worker *w, struct evbuffer *buf, int chunked_request);

/* Stop accepting new connections on this worker. */
void http_stop_accepting(struct worker *w);
void http_free(struct worker *w);

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

/* Add a response header before answering. */
void respond_header(struct request *r, const char *name, const char *value);

/* "http-0 hg:{3}:ready" style actor string for journal records. */
void request_actor(const struct request *r, int shard, const char *what, char *out, size_t cap);

#endif
