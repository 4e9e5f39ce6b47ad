/* dispatch.c — see dispatch.h. */
#include "api/dispatch.h"
#include "api/access.h"
#include "api/handlers.h"
#include "core/app.h"
#include "http/httpconn.h"
#include "core/metrics.h"
#include "http/request.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <string.h>
#include <strings.h>

static enum method method_of(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
        return METHOD_GET;
    case EVHTTP_REQ_POST:
        return METHOD_POST;
    case EVHTTP_REQ_HEAD:
        return METHOD_HEAD;
    case EVHTTP_REQ_PUT:
        return METHOD_PUT;
    case EVHTTP_REQ_DELETE:
        return METHOD_DELETE;
    default:
        return METHOD_OTHER;
    }
}

/* Query string, then a POSTed form or flat JSON object (push reads its own body). */
static int read_params(struct request *r)
{
    char err[256];
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(r->req));
    if (query && params_parse_form(&r->params, query, strlen(query), err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return -1;
    }
    /* a POST body is parameters (finish, release...), except where it is a document */
    if (r->endpoint == EP_PUSH || r->endpoint == EP_SCHEDULES || r->method != METHOD_POST || r->body_len == 0)
        return 0;
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Content-Type");
    int rc = ctype && strncasecmp(ctype, "application/json", 16) == 0
                 ? params_parse_json(&r->params, r->body, r->body_len, err, sizeof err)
                 : params_parse_form(&r->params, r->body, r->body_len, err, sizeof err);
    if (rc < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return -1;
    }
    return 0;
}

typedef void (*handler_fn)(struct request *r);

static const handler_fn handlers[EP_COUNT] = {
    [EP_PUSH] = api_push,
    [EP_GET] = api_get,
    [EP_FINISH] = api_finish,
    [EP_RELEASE] = api_release,
    [EP_TOUCH] = api_touch,
    [EP_DELETE] = api_delete,
    [EP_RESCHEDULE] = api_reschedule,
    [EP_JOBS] = api_jobs,
    [EP_DEAD] = api_dead,
    [EP_RESTORE] = api_restore,
    [EP_RESTORE_ONE] = api_restore_one,
    [EP_HEALTH] = api_health,
    [EP_STATS] = api_stats,
    [EP_METRICS] = api_metrics,
    [EP_TOPICS] = api_topics,
    [EP_TOPIC] = api_topic,
    [EP_CONSOLE] = api_console,
    [EP_TOPIC_JOBS] = api_topic_jobs,
    [EP_FLEET] = api_fleet,
    [EP_THROUGHPUT] = api_throughput,
    [EP_SCHEDULES] = api_schedules,
    [EP_SCHEDULE] = api_schedule,
    [EP_LOOKUP] = api_lookup,
    [EP_PURGE] = api_purge,
    [EP_OPENAPI] = api_openapi,
    [EP_TOPIC_GROUPS] = api_topic_groups,
};

/* 0 when the path names an endpoint (r->endpoint set); otherwise answered. */
static int route(struct request *r)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (path == NULL || path[0] == '\0')
        path = "/";
    switch (router_match(path, strlen(path), &r->route)) {
    case ROUTE_OK:
        r->endpoint = r->route.endpoint;
        return 0;
    case ROUTE_NOT_FOUND:
        respond_error(r, 404, "not_found", "no such endpoint; see docs/api.md");
        return -1;
    case ROUTE_BAD_ENCODING:
        respond_error(r, 400, "bad_request", "malformed %%-escape or NUL in the path");
        return -1;
    case ROUTE_TOO_LONG:
        respond_error(r, 400, "bad_request", "path argument too long");
        return -1;
    }
    return -1;
}

void dispatch_request(struct evhttp_request *req, void *arg)
{
    struct hctx *ctx = arg;
    struct request *r = request_new(ctx, req);
    if (r == NULL) {
        evhttp_send_reply(req, 503, "Service Unavailable", NULL);
        return;
    }
    r->method = method_of(req);
    httpconn_request_started(ctx->conns, req);

    if (httpconn_head_has_nul(ctx->conns, req)) {
        respond_header(r, "Connection", "close");
        respond_error(r, 400, "bad_request", "NUL byte in the request head");
        return;
    }
    if (route(r) < 0)
        return;
    if (httpconn_over_limit(ctx->conns, req) && r->endpoint != EP_HEALTH) {
        respond_header(r, "Connection", "close");
        respond_error(r, 503, "unavailable", "too many open connections on this instance (max_connections)");
        return;
    }
    const char *allow;
    if (!router_method_allowed(r->endpoint, r->method, &allow)) {
        respond_error(r, 405, "method_not_allowed", "use %s for this endpoint", allow);
        return;
    }
    if (access_check(r) < 0)
        return;
    /* Shutting down (SIGTERM), a request on a connection still open is served as usual, and
     * its answer says Connection: close (request.c): refusing it cost a rolling restart
     * answers a balancer does not retry (a POST it has sent). worker.c closes the connections
     * left idle once [http] drain_window has passed. */

    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    r->body_len = evbuffer_get_length(in);
    r->body = r->body_len ? (const char *)evbuffer_pullup(in, -1) : "";
    if (r->body == NULL) {
        respond_unavailable(r, "memory");
        return;
    }
    if (read_params(r) < 0)
        return;
    handlers[r->endpoint](r);
}

int dispatch_internal(struct hctx *ctx, enum endpoint ep, enum method m, const char *body, size_t len, const char *who,
                      request_sink_fn sink, void *arg)
{
    struct evhttp_request *req = evhttp_request_new(NULL, NULL); /* no connection: headers and buffers */
    if (req == NULL)
        return -1;
    struct request *r = request_new(ctx, req);
    if (r == NULL) {
        evhttp_request_free(req);
        return -1;
    }
    r->sink = sink;
    r->sink_arg = arg;
    sb_str_put(r->client, sizeof r->client, 0, who);
    r->loopback = 1;
    r->method = m;
    r->endpoint = ep;
    r->body = body;
    r->body_len = len;
    if (atomic_load(&ctx->app->draining)) {
        respond_unavailable(r, "this instance (shutting down)");
        return 0;
    }
    handlers[ep](r);
    return 0;
}
