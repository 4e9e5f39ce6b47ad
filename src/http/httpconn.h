/* httpconn.h — a worker's HTTP connections, from accept to close.
 *
 * evhttp (libevent 2.1) has no accept or close hook for server connections, yet limits need
 * both: how many connections are open, and how long each has been idle or sending its
 * request (a slowloris client trickling a header byte every few seconds would otherwise hold
 * a connection for hours). So every connection's bufferevent is made here (evhttp_set_bevcb)
 * and we keep one extra reference on it. evhttp "frees" a connection by dropping its own
 * reference after clearing the callbacks (and shutting the socket down for writing, so the
 * client sees the close at once); we notice that — right after the last write drains, or
 * in the once-a-second sweep — and only then let the bufferevent go.
 *
 * Phases: IDLE (between requests) -> READING (a byte of the next request arrived) -> BUSY
 * (evhttp handed us the request; ends when we answer). The sweep closes connections IDLE
 * longer than [http] idle_timeout and READING longer than [http] request_timeout. BUSY has
 * no deadline here: long-polls are bounded by their own timeout.
 *
 * [http] max_connections is applied at accept: a connection that makes the count pass it is
 * marked; its requests (but /health) are answered 503 with Connection: close, and while it
 * says nothing it is cut after request_timeout instead of idle_timeout. */
#ifndef HG_HTTPCONN_H
#define HG_HTTPCONN_H

#include <stdint.h>

#include "base/hmap.h"

struct config;
struct event;
struct evbuffer;
struct event_base;
struct bufferevent;
struct evhttp_request;

struct httpconn;

struct httpconn_registry {
    const char *name;         /* the worker's, for logs */
    const struct config *cfg; /* idle_timeout, request_timeout, max_body */
    struct event_base *base;
    struct httpconn *head; /* every connection of the worker, newest first */
    struct httpconn *reap; /* connections to check right after their output drained */
    struct hmap by_bev;    /* bufferevent -> conn */
    struct event *reap_ev;
    long count;
    /* Bytes added to a connection's output while `replying` points at it are our answer;
     * anything else evhttp wrote on its own (its error page, see errpage.h). */
    const struct evbuffer *replying;
    int rewriting;
};

/* Set up the registry on a worker's loop. */
int httpconn_init(struct httpconn_registry *reg, struct event_base *base, const struct config *cfg, const char *name)
    __attribute__((warn_unused_result));

/* evhttp_set_bevcb callback (arg = the registry). */
struct bufferevent *httpconn_make_bufferevent(struct event_base *base, void *arg);

/* evhttp handed us a request on its connection. */
void httpconn_request_started(struct httpconn_registry *reg, struct evhttp_request *req);

/* Around evhttp_send_reply of our answer to req: the connection goes back to IDLE, and what
 * is written meanwhile is known to be ours. */
void httpconn_reply_begin(struct httpconn_registry *reg, struct evhttp_request *req);
void httpconn_reply_end(struct httpconn_registry *reg);

/* Was the request's connection accepted past [http] max_connections (it gets 503)? */
int httpconn_over_limit(struct httpconn_registry *reg, struct evhttp_request *req);

/* Did the request's head contain a NUL byte (which evhttp would silently cut a value at)? */
int httpconn_head_has_nul(struct httpconn_registry *reg, struct evhttp_request *req);

/* Once a second: close connections past their deadline, release those evhttp let go. */
void httpconn_sweep(struct httpconn_registry *reg);

/* After evhttp_free: release every remaining connection. */
void httpconn_release_all(struct httpconn_registry *reg);

#endif
