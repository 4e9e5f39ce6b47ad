/* dispatch.h — from a complete HTTP request to its handler: route, method, connection limit,
 * access (access.h), draining, body and parameters, then the handler table (handlers.h). Every
 * way out before the handler answers the request itself. */
#ifndef HG_DISPATCH_H
#define HG_DISPATCH_H

#include <stddef.h>

#include "http/request.h"

struct evhttp_request;

/* evhttp's general callback; `ctx` is the worker's struct hctx (request.h). */
void dispatch_request(struct evhttp_request *req, void *ctx);

/* A request made inside the daemon (the scheduler's pushes): run the handler of `ep` with
 * `body` (which must stay valid until the answer) as if a loopback client `who` had sent it,
 * past the access checks, and hand the answer to sink(arg). Call on the worker's thread. 0,
 * or -1 when out of memory (then the sink is not called). */
int dispatch_internal(struct hctx *ctx, enum endpoint ep, enum method m, const char *body, size_t len, const char *who,
                      request_sink_fn sink, void *arg);

#endif
