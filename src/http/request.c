/* request.c — see request.h. */
#include "http/request.h"
#include "core/app.h"
#include "base/clock.h"
#include "http/httpconn.h"
#include "http/errpage.h"
#include "base/log.h"
#include "core/metrics.h"
#include "redis/rlink.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define REQUEST_POOL_MAX 256 /* answered requests kept for reuse: a request is ~5 KB */

static int is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 || strncmp(addr, "::ffff:127.", 11) == 0;
}

struct request *request_new(struct hctx *ctx, struct evhttp_request *req)
{
    struct request *r = ctx->free_requests;
    if (r) {
        ctx->free_requests = r->next_free;
        ctx->nfree_requests--;
    } else if ((r = malloc(sizeof *r)) == NULL) {
        return NULL;
    }
    memset(r, 0, offsetof(struct request, route)); /* the route sets its own fields */
    ctx->inflight++;
    r->ctx = ctx;
    r->req = req;
    r->start_us = clock_mono_us();
    params_init(&r->params);
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    char *peer = NULL;
    ev_uint16_t port = 0;
    if (evcon)
        evhttp_connection_get_peer(evcon, &peer, &port);
    sb_str_put(r->client, sizeof r->client, 0, peer ? peer : "unknown");
    r->loopback = is_loopback(r->client);
    return r;
}

void request_pool_free(struct hctx *ctx)
{
    while (ctx->free_requests) {
        struct request *r = ctx->free_requests;
        ctx->free_requests = r->next_free;
        free(r);
    }
    ctx->nfree_requests = 0;
}

static void request_free(struct request *r)
{
    if (r->state_free && r->state)
        r->state_free(r->state);
    params_free(&r->params);
    struct hctx *ctx = r->ctx;
    if (ctx->nfree_requests < REQUEST_POOL_MAX) {
        r->next_free = ctx->free_requests;
        ctx->free_requests = r;
        ctx->nfree_requests++;
    } else {
        free(r);
    }
    ctx->inflight--;
    if (ctx->on_answered)
        ctx->on_answered(ctx);
}

static void send_reply(struct request *r, int status, const char *reason)
{
    struct hctx *ctx = r->ctx;
    if (r->sink) { /* an internal request: nobody to send it to */
        struct evbuffer *out = evhttp_request_get_output_buffer(r->req);
        size_t len = evbuffer_get_length(out);
        const char *body = len ? (const char *)evbuffer_pullup(out, -1) : "";
        r->sink(body ? status : 503, body ? body : "", body ? len : 0, r->sink_arg);
        evhttp_request_free(r->req);
        request_free(r);
        return;
    }
    if (atomic_load(&ctx->app->draining))
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "Connection", "close");
    httpconn_reply_begin(ctx->conns, r->req);
    evhttp_send_reply(r->req, status, reason, NULL);
    httpconn_reply_end(ctx->conns);
    metrics_http(r->endpoint, status, clock_mono_us() - r->start_us);
    request_free(r);
}

void respond_json(struct request *r, int status, struct sbuf *json)
{
    if (json && json->oom)
        status = 503;
    else if (json && json->len > 0) {
        struct evbuffer *out = evhttp_request_get_output_buffer(r->req);
        evbuffer_add(out, json->data, json->len);
        evbuffer_add(out, "\n", 1);
    }
    if (status != 204)
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", "application/json");
    send_reply(r, status, errpage_reason(status));
}

void respond_text(struct request *r, int status, const char *content_type, struct sbuf *text)
{
    if (text->len)
        evbuffer_add(evhttp_request_get_output_buffer(r->req), text->data, text->len);
    evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", content_type);
    send_reply(r, status, errpage_reason(status));
}

void respond_static(struct request *r, int status, const char *content_type, const void *data, size_t len)
{
    if (status != 304 && len)
        evbuffer_add_reference(evhttp_request_get_output_buffer(r->req), data, len, NULL, NULL);
    if (content_type)
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", content_type);
    send_reply(r, status, errpage_reason(status));
}

const char *request_header(const struct request *r, const char *name)
{
    return evhttp_find_header(evhttp_request_get_input_headers(r->req), name);
}

const char *request_path(const struct request *r)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    return path && path[0] ? path : "/";
}

void respond_no_content(struct request *r)
{
    send_reply(r, 204, "No Content");
}

void respond_error(struct request *r, int status, const char *code, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    respond_error_members(r, status, code, message, NULL);
}

void respond_error_members(struct request *r, int status, const char *code, const char *message,
                           const struct sbuf *members)
{
    struct evkeyvalq *headers = evhttp_request_get_output_headers(r->req);
    if ((status == 503 || status == 429) && evhttp_find_header(headers, "Retry-After") == NULL)
        evhttp_add_header(headers, "Retry-After", "1");
    if (status == 405) {
        const char *allow = "";
        router_method_allowed(r->endpoint, r->method, &allow);
        evhttp_add_header(headers, "Allow", allow);
    }
    if (status >= 500 || status == 429)
        log_debug("%s %s -> %d %s", router_endpoint_name(r->endpoint), r->client, status, message);
    struct sbuf sb = SBUF_INIT;
    errpage_json(&sb, code, message, members);
    respond_json(r, status, &sb);
    sb_free(&sb);
}

void respond_unavailable(struct request *r, const char *what)
{
    /* Redis: say why (OOM, READONLY...), from this worker's connection (rconn.h). */
    struct rconn_error rerr;
    if (strcmp(what, "Redis") == 0 && r->ctx->redis && rlink_last_error(r->ctx->redis, &rerr) != RCAUSE_NONE) {
        respond_error(r, 503, "unavailable", "Redis is unavailable (%s: %s); retry shortly", rcause_name(rerr.cause),
                      rerr.text);
        return;
    }
    respond_error(r, 503, "unavailable", "%s is unavailable; retry shortly", what);
}

void respond_header(struct request *r, const char *name, const char *value)
{
    evhttp_add_header(evhttp_request_get_output_headers(r->req), name, value);
}

void request_actor(const struct request *r, int shard, const char *what, char *out, size_t cap)
{
    store_actor(out, cap, r->ctx->name, r->ctx->app->cfg.redis_prefix, shard, what);
}
