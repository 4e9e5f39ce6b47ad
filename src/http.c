/* http.c — see http.h.
 *
 * evhttp in libevent 2.1 answers some bad requests itself (malformed request line or headers,
 * a body or header block over the limit) with an HTML page, and 2.1 has no hook to change
 * that (evhttp_set_errorcb arrived in 2.2). The contract promises JSON errors, so every
 * connection's output buffer carries a callback (conn.c): bytes that evhttp writes on its
 * own (that is, outside respond_*) are recognised as its error page once complete and
 * replaced, in place and before they reach the socket, by http_rewrite_error_page. "Is this
 * ours" is answered by the worker's `replying` pointer, set only while respond_* runs. (A
 * bufferevent filter would be the obvious tool, but under evhttp 2.1 a filter stalls: evhttp
 * writes while EV_WRITE is disabled and enabling it does not flush a filter.) */
#include "http.h"
#include "api.h"
#include "clock.h"
#include "conn.h"
#include "log.h"
#include "metrics.h"
#include "ratelimit.h"
#include "rconn.h"
#include "sbuf.h"
#include "worker.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void request_free(struct request *r)
{
    if (r->state_free && r->state)
        r->state_free(r->state);
    params_free(&r->params);
    struct worker *w = r->w;
    if (w->nfree_requests < 256) { /* keep some for reuse: a request is ~5 KB */
        r->next_free = w->free_requests;
        w->free_requests = r;
        w->nfree_requests++;
    } else {
        free(r);
    }
    w->inflight--;
    worker_exit_if_idle(w);
}

static void send_reply(struct request *r, int status, const char *reason, struct evbuffer *body)
{
    struct worker *w = r->w;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(r->req);
    if (atomic_load(&w->app->draining))
        evhttp_add_header(headers, "Connection", "close");
    struct evhttp_connection *evcon = evhttp_request_get_connection(r->req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    w->replying = bev ? bufferevent_get_output(bev) : NULL;
    conn_request_answering(w, r->req);
    evhttp_send_reply(r->req, status, reason, body);
    w->replying = NULL;
    metrics_http(r->endpoint, status, clock_mono_us() - r->start_us);
    request_free(r);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
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
    send_reply(r, status, reason_phrase(status), NULL);
}

void respond_text(struct request *r, int status, const char *content_type, struct sbuf *text)
{
    if (text->len)
        evbuffer_add(evhttp_request_get_output_buffer(r->req), text->data, text->len);
    evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", content_type);
    send_reply(r, status, reason_phrase(status), NULL);
}

void respond_no_content(struct request *r)
{
    send_reply(r, 204, "No Content", NULL);
}

static void build_error(struct sbuf *sb, const char *code, const char *message, const struct sbuf *members)
{
    sb_puts(sb, "{\"error\":");
    sb_json_cstr(sb, code);
    sb_puts(sb, ",\"message\":");
    sb_json_cstr(sb, message);
    if (members && members->len) {
        sb_putc(sb, ',');
        sb_put(sb, members->data, members->len);
    }
    sb_putc(sb, '}');
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
        log_debug("%s %s -> %d %s", endpoint_name(r->endpoint), r->client, status, message);
    struct sbuf sb = SBUF_INIT;
    build_error(&sb, code, message, members);
    respond_json(r, status, &sb);
    sb_free(&sb);
}

void respond_unavailable(struct request *r, const char *what)
{
    /* Redis: say why (OOM, READONLY...), from this worker's connection (rconn.h). */
    struct rconn_error rerr;
    if (strcmp(what, "Redis") == 0 && rconn_last_error(r->w->redis, &rerr) != RCAUSE_NONE) {
        respond_error(r, 503, "unavailable", "Redis is unavailable (%s: %s); retry shortly",
                      rconn_cause_name(rerr.cause), rerr.text);
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
    char num[INT_TEXT_MAX];
    int_to_text(shard, num);
    size_t n = str_put(out, cap, 0, r->w->name); /* "<worker> <prefix>:{<shard>}:<what>" */
    n = str_put(out, cap, n, " ");
    n = str_put(out, cap, n, r->w->app->cfg.redis_prefix);
    n = str_put(out, cap, n, ":{");
    n = str_put(out, cap, n, num);
    n = str_put(out, cap, n, "}:");
    str_put(out, cap, n, what);
}

/* ---- evhttp's own error pages, rewritten to JSON ---- */

static const char *find_crlf2(const char *p, size_t len)
{
    for (size_t i = 0; i + 3 < len; i++)
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n')
            return p + i;
    return NULL;
}

static long header_content_length(const char *head, size_t len)
{
    static const char name[] = "\r\nContent-Length:";
    for (size_t i = 0; i + sizeof name - 1 <= len; i++)
        if (strncasecmp(head + i, name, sizeof name - 1) == 0)
            return strtol(head + i + sizeof name - 1, NULL, 10);
    return -1;
}

void http_rewrite_error_page(struct worker *w, struct evbuffer *buf, int corrupt_chunked)
{
    size_t len = evbuffer_get_length(buf);
    if (len > 16384)
        return; /* not one of evhttp's small pages */
    const char *p = (const char *)evbuffer_pullup(buf, (ev_ssize_t)len);
    if (p == NULL)
        return;
    size_t off = 0;
    for (;;) {
        const char *end = find_crlf2(p + off, len - off);
        if (end == NULL || len - off < 12 || strncmp(p + off, "HTTP/1.", 7) != 0)
            return; /* header block incomplete (or not a response): wait for more */
        int status = atoi(p + off + 9);
        size_t head_len = (size_t)(end - (p + off)) + 4;
        if (status >= 100 && status < 200) {
            off += head_len; /* "100 Continue": keep it */
            continue;
        }
        if (status < 400)
            return;
        long cl = header_content_length(p + off, head_len);
        size_t body_len = len - off - head_len;
        if (cl >= 0 ? body_len < (size_t)cl : !(body_len >= 15 && memcmp(p + len - 15, "</BODY></HTML>\n", 15) == 0))
            return; /* body still being written */

        if (status == 413 && corrupt_chunked)
            status = 400; /* libevent 2.1 reports a corrupt chunked body as "too long" */
        const char *code = status == 413 ? "too_large" : status == 404 ? "not_found"
                         : status == 405 || status == 501 ? "method_not_allowed" : "bad_request";
        const char *message = status == 413 ? "request body larger than the server accepts (max_body)"
                            : corrupt_chunked && status == 400 ? "malformed chunked request body (chunk extensions are not supported)"
                            : status == 501 ? "unsupported HTTP method"
                            : "malformed HTTP request line or headers (or a header block over max_header bytes)";
        if (status == 501)
            status = 405; /* never a 5xx for bad input */
        else if (status != 413 && status != 404)
            status = 400;

        struct sbuf sb = SBUF_INIT;
        build_error(&sb, code, message, NULL);
        sb_putc(&sb, '\n');
        char head[256];
        int hn = snprintf(head, sizeof head,
                          "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n",
                          status, reason_phrase(status), sb.len);
        char keep[256];
        size_t keep_len = off < sizeof keep ? off : 0;
        memcpy(keep, p, keep_len);

        w->rewriting = 1;
        /* A socket bufferevent keeps its output's start frozen after its first write (only its
         * own write path may drain it, unfreezing around it); do as evhttp itself does. */
        evbuffer_unfreeze(buf, 1);
        evbuffer_drain(buf, len);
        evbuffer_freeze(buf, 1);
        evbuffer_add(buf, keep, keep_len);
        evbuffer_add(buf, head, (size_t)hn);
        evbuffer_add(buf, sb.data, sb.len);
        w->rewriting = 0;
        sb_free(&sb);
        metrics_http(EP_NOT_FOUND, status, 0);
        return;
    }
}

/* ---- authentication ---- */

/* Constant-time comparison: the time taken does not depend on where the strings differ. */
static int secret_equal(const char *given, size_t given_len, const char *secret)
{
    size_t secret_len = strlen(secret);
    unsigned char diff = (unsigned char)(given_len != secret_len);
    for (size_t i = 0; i < secret_len; i++)
        diff |= (unsigned char)(secret[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

/* The Bearer token of the request, or NULL. */
static const char *bearer(struct request *r, size_t *len)
{
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    auth += 7;
    while (*auth == ' ')
        auth++;
    *len = strlen(auth);
    while (*len > 0 && auth[*len - 1] == ' ')
        (*len)--;
    return auth;
}

/* 0 when allowed; otherwise the request has been answered (401/403). */
static int authorize(struct request *r)
{
    const struct config *cfg = &r->w->app->cfg;
    size_t len = 0;
    const char *token = bearer(r, &len);
    int is_admin_token = token && cfg->admin_token[0] && secret_equal(token, len, cfg->admin_token);

    if (router_is_admin(r->endpoint)) {
        if (cfg->admin_token[0]) {
            if (is_admin_token)
                return 0;
            if (token == NULL)
                respond_error(r, 401, "unauthorized", "this admin endpoint needs Authorization: Bearer <admin_token>");
            else
                respond_error(r, 403, "forbidden", "the token given is not the admin token");
            return -1;
        }
        if (!r->loopback) {
            respond_error(r, 403, "forbidden", "admin endpoints answer loopback clients only when no admin_token is set");
            return -1;
        }
        /* no admin token: a loopback client still needs the general token, if one is set */
    }
    if (cfg->token[0] && r->endpoint != EP_HEALTH) {
        if (token == NULL) {
            respond_error(r, 401, "unauthorized", "missing Authorization: Bearer <token>");
            return -1;
        }
        if (!is_admin_token && !secret_equal(token, len, cfg->token)) {
            respond_error(r, 401, "unauthorized", "invalid token");
            return -1;
        }
    }
    return 0;
}

/* Over [http] rate_limit? Then it has been answered 429. The bucket is the token's when the
 * request carries a valid one (so one client's burst does not starve another behind the
 * same proxy), else the client address's — so made-up tokens cannot dodge the limit, and
 * failed authentication attempts count too. */
static int rate_limited(struct request *r)
{
    struct ratelimit *rl = r->w->app->ratelimit;
    const struct config *cfg = &r->w->app->cfg;
    if (rl == NULL || r->endpoint == EP_HEALTH || r->endpoint == EP_METRICS)
        return 0;
    size_t len = 0;
    const char *key = bearer(r, &len);
    if (key != NULL && !(cfg->token[0] && secret_equal(key, len, cfg->token)) &&
        !(cfg->admin_token[0] && secret_equal(key, len, cfg->admin_token)))
        key = NULL;
    if (key == NULL) {
        key = r->client;
        len = strlen(key);
    }
    int wait = ratelimit_take(rl, key, len, r->start_us);
    if (wait == 0)
        return 0;
    char retry[16];
    snprintf(retry, sizeof retry, "%d", wait);
    respond_header(r, "Retry-After", retry);
    metrics_inc(MC_RATE_LIMITED, 1);
    respond_error(r, 429, "rate_limited", "over %d requests per second; retry after %d s",
                  r->w->app->cfg.rate_limit, wait);
    return 1;
}

/* ---- dispatch ---- */

static enum method method_of(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: return METHOD_GET;
    case EVHTTP_REQ_POST: return METHOD_POST;
    case EVHTTP_REQ_HEAD: return METHOD_HEAD;
    default: return METHOD_OTHER;
    }
}

static int is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 || strncmp(addr, "::ffff:127.", 11) == 0;
}

static int read_params(struct request *r)
{
    char err[256];
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(r->req));
    if (query && params_parse_form(&r->params, query, strlen(query), err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return -1;
    }
    if (r->endpoint == EP_PUSH || r->method != METHOD_POST || r->body_len == 0)
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
    [EP_PUSH] = api_push,       [EP_GET] = api_get,           [EP_FINISH] = api_finish,
    [EP_RELEASE] = api_release, [EP_TOUCH] = api_touch,       [EP_DELETE] = api_delete,
    [EP_RESCHEDULE] = api_reschedule, [EP_JOBS] = api_jobs,   [EP_DEAD] = api_dead,
    [EP_RESTORE] = api_restore, [EP_RESTORE_ONE] = api_restore_one, [EP_HEALTH] = api_health,
    [EP_STATS] = api_stats,     [EP_METRICS] = api_metrics,
};

static void on_request(struct evhttp_request *req, void *arg)
{
    struct worker *w = arg;
    struct request *r = w->free_requests;
    if (r) {
        w->free_requests = r->next_free;
        w->nfree_requests--;
    } else if ((r = malloc(sizeof *r)) == NULL) {
        evhttp_send_reply(req, 503, "Service Unavailable", NULL);
        return;
    }
    memset(r, 0, offsetof(struct request, route)); /* the route sets its own fields */
    w->inflight++;
    r->w = w;
    r->req = req;
    r->start_us = clock_mono_us();
    r->method = method_of(req);
    params_init(&r->params);

    conn_request_started(w, req);
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    char *peer = NULL;
    ev_uint16_t port = 0;
    if (evcon)
        evhttp_connection_get_peer(evcon, &peer, &port);
    str_put(r->client, sizeof r->client, 0, peer ? peer : "unknown");
    r->loopback = is_loopback(r->client);

    if (conn_head_has_nul(w, req)) {
        respond_header(r, "Connection", "close");
        respond_error(r, 400, "bad_request", "NUL byte in the request head");
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (path == NULL || path[0] == '\0')
        path = "/";
    switch (router_match(path, strlen(path), &r->route)) {
    case ROUTE_OK:
        r->endpoint = r->route.endpoint;
        break;
    case ROUTE_NOT_FOUND:
        respond_error(r, 404, "not_found", "no such endpoint; see docs/api.md");
        return;
    case ROUTE_BAD_ENCODING:
        respond_error(r, 400, "bad_request", "malformed %%-escape or NUL in the path");
        return;
    case ROUTE_TOO_LONG:
        respond_error(r, 400, "bad_request", "path argument too long");
        return;
    }

    if (metrics_gauge_get(MG_CONNECTIONS) > w->app->cfg.max_connections && r->endpoint != EP_HEALTH) {
        respond_header(r, "Connection", "close");
        respond_error(r, 503, "unavailable", "too many open connections on this instance (max_connections)");
        return;
    }
    const char *allow;
    if (!router_method_allowed(r->endpoint, r->method, &allow)) {
        respond_error(r, 405, "method_not_allowed", "use %s for this endpoint", allow);
        return;
    }
    if (rate_limited(r) || authorize(r) < 0)
        return;
    if (atomic_load(&w->app->draining) && r->endpoint != EP_HEALTH) {
        respond_unavailable(r, "this instance (shutting down)");
        return;
    }

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

int http_start(struct worker *w)
{
    const struct config *cfg = &w->app->cfg;
    w->http = evhttp_new(w->base);
    if (w->http == NULL)
        return -1;
    evhttp_set_bevcb(w->http, conn_make_bufferevent, w);
    evhttp_set_gencb(w->http, on_request, w);
    evhttp_set_max_body_size(w->http, (ev_ssize_t)cfg->max_body);
    evhttp_set_max_headers_size(w->http, cfg->max_header);
    evhttp_set_timeout(w->http, cfg->idle_timeout);
    evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                            EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(w->http, "application/json");
    int fd = w->app->listen_fds[w->index];
    w->bound = evhttp_accept_socket_with_handle(w->http, fd);
    if (w->bound == NULL) {
        close(fd);
        return -1;
    }
    return 0;
}

void http_stop_accepting(struct worker *w)
{
    if (w->bound) {
        evhttp_del_accept_socket(w->http, w->bound);
        w->bound = NULL;
    }
}

void http_free(struct worker *w)
{
    while (w->free_requests) {
        struct request *r = w->free_requests;
        w->free_requests = r->next_free;
        free(r);
    }
    if (w->http) {
        evhttp_free(w->http);
        w->http = NULL;
    }
}
