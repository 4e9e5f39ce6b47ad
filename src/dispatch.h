/* dispatch.h — from a complete HTTP request to its handler: route, method, connection limit,
 * access (access.h), draining, body and parameters, then the handler table (api.h). Every
 * way out before the handler answers the request itself. */
#ifndef HG_DISPATCH_H
#define HG_DISPATCH_H

struct evhttp_request;

/* evhttp's general callback; `ctx` is the worker's struct hctx (request.h). */
void dispatch_request(struct evhttp_request *req, void *ctx);

#endif
