/* httpconn.c — see httpconn.h. */
#include "http/httpconn.h"
#include "base/clock.h"
#include "core/config.h"
#include "http/errpage.h"
#include "base/log.h"
#include "core/metrics.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum phase { PHASE_IDLE, PHASE_READING, PHASE_BUSY };

struct httpconn {
    struct httpconn_registry *reg;
    struct bufferevent *bev;
    enum phase phase;
    int64_t since_us;
    int closing;    /* we asked evhttp to close it */
    int over_limit; /* accepted past [http] max_connections: refused, and cut early */
    int queued_for_reap;
    int closecb_set;
    /* the request being received (see on_input): its head chunked? a NUL in its head? */
    int head_done, chunked, nul_in_head;
    size_t body_bytes; /* bytes after the head */
    char line[64];
    size_t line_len;
    struct httpconn *prev, *next;
    struct httpconn *reap_next;
};

/* evhttp dropped it: bufferevent_free cleared every callback (only that does). */
static int released_by_evhttp(struct bufferevent *bev)
{
    bufferevent_data_cb readcb, writecb;
    bufferevent_event_cb eventcb;
    void *arg;
    bufferevent_getcb(bev, &readcb, &writecb, &eventcb, &arg);
    return readcb == NULL && writecb == NULL && eventcb == NULL;
}

static void release(struct httpconn *c)
{
    struct httpconn_registry *reg = c->reg;
    if (c->prev)
        c->prev->next = c->next;
    else
        reg->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    hmap_remove(&reg->by_bev, &c->bev, sizeof c->bev);
    reg->count--;
    metrics_gauge_add(MG_CONNECTIONS, -1);
    bufferevent_decref(c->bev); /* our reference was the last: this closes the socket */
    free(c);
}

static void queue_reap(struct httpconn *c)
{
    if (c->queued_for_reap)
        return;
    c->queued_for_reap = 1;
    c->reap_next = c->reg->reap;
    c->reg->reap = c;
    event_active(c->reg->reap_ev, EV_TIMEOUT, 0);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    struct httpconn_registry *reg = arg;
    struct httpconn *c = reg->reap;
    reg->reap = NULL;
    while (c) {
        struct httpconn *next = c->reap_next;
        c->queued_for_reap = 0;
        if (released_by_evhttp(c->bev))
            release(c);
        c = next;
    }
}

/* Replace evhttp's error page in `buf` by our JSON error once it is complete (errpage.h). */
static void rewrite_error_page(struct httpconn *c, struct evbuffer *buf)
{
    struct httpconn_registry *reg = c->reg;
    size_t len = evbuffer_get_length(buf);
    const char *p = (const char *)evbuffer_pullup(buf, (ev_ssize_t)len);
    if (p == NULL)
        return;
    struct sbuf out = SBUF_INIT;
    int status = 0;
    int corrupt_chunked = c->chunked && c->body_bytes <= (size_t)reg->cfg->max_body;
    if (errpage_rewrite(p, len, corrupt_chunked, &out, &status) == ERRPAGE_REWRITE) {
        reg->rewriting = 1;
        /* A socket bufferevent keeps its output's start frozen after its first write (only its
         * own write path may drain it, unfreezing around it); do as evhttp itself does. */
        evbuffer_unfreeze(buf, 1);
        evbuffer_drain(buf, len);
        evbuffer_freeze(buf, 1);
        evbuffer_add(buf, out.data, out.len);
        reg->rewriting = 0;
        metrics_http(EP_NOT_FOUND, status, 0);
    }
    sb_free(&out);
}

static void on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct httpconn *c = arg;
    /* bytes evhttp wrote on its own: its error page, to become our JSON error */
    if (info->n_added > 0 && !c->reg->rewriting && c->reg->replying != buf)
        rewrite_error_page(c, buf);
    /* output drained: evhttp may be about to let the connection go (Connection: close);
     * look again once the current callback has returned */
    if (info->n_deleted > 0 && evbuffer_get_length(buf) == 0)
        queue_reap(c);
}

/* One line of the request head (without CR LF): is it "Transfer-Encoding: ...chunked"? */
static void head_line(struct httpconn *c)
{
    static const char name[] = "transfer-encoding:";
    c->line[c->line_len] = '\0';
    if (c->line_len == 0) {
        c->head_done = 1;
        return;
    }
    if (strncasecmp(c->line, name, sizeof name - 1) == 0 && strcasestr(c->line + sizeof name - 1, "chunked"))
        c->chunked = 1;
}

/* Watch the request head go by (evhttp parses it after this callback) for one fact: whether
 * the body is chunked, which tells a corrupt chunked body from a body that is too large when
 * evhttp reports both as "too long". */
static void scan_head(struct httpconn *c, struct evbuffer *buf, size_t added)
{
    size_t len = evbuffer_get_length(buf);
    struct evbuffer_ptr at;
    struct evbuffer_iovec vec[8];
    if (added > len || evbuffer_ptr_set(buf, &at, len - added, EVBUFFER_PTR_SET) < 0)
        return;
    int n = evbuffer_peek(buf, (ev_ssize_t)added, &at, vec, 8);
    size_t seen = 0;
    for (int v = 0; v < n && v < 8 && !c->head_done; v++) {
        const char *p = vec[v].iov_base;
        size_t i = 0;
        for (; i < vec[v].iov_len && !c->head_done; i++) {
            if (p[i] == '\0')
                c->nul_in_head = 1; /* evhttp would cut the header value there: refuse it */
            if (p[i] == '\n') {
                head_line(c);
                c->line_len = 0;
            } else if (p[i] != '\r' && c->line_len < sizeof c->line - 1) {
                c->line[c->line_len++] = p[i];
            }
        }
        seen += i;
    }
    if (c->head_done && added > seen)
        c->body_bytes += added - seen; /* what came in the same read, after the head */
}

static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct httpconn *c = arg;
    if (info->n_added == 0)
        return;
    if (c->phase == PHASE_IDLE) {
        c->phase = PHASE_READING;
        c->since_us = clock_mono_us();
        c->head_done = c->chunked = c->nul_in_head = 0;
        c->body_bytes = 0;
        c->line_len = 0;
    }
    if (c->phase != PHASE_READING)
        return;
    if (c->head_done)
        c->body_bytes += info->n_added;
    else
        scan_head(c, buf, info->n_added);
}

/* evhttp is freeing the connection (it calls this first): release it right after. */
static void on_connection_closed(struct evhttp_connection *evcon, void *arg)
{
    queue_reap(arg);
}

struct bufferevent *httpconn_make_bufferevent(struct event_base *base, void *arg)
{
    struct httpconn_registry *reg = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL)
        return NULL;
    struct httpconn *c = calloc(1, sizeof *c);
    if (c == NULL || hmap_put(&reg->by_bev, &bev, sizeof bev, c) < 0) {
        free(c); /* untracked but served: evhttp still frees the bufferevent itself */
        return bev;
    }
    c->reg = reg;
    c->bev = bev;
    c->phase = PHASE_IDLE;
    c->since_us = clock_mono_us();
    bufferevent_incref(bev);
    evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
    evbuffer_add_cb(bufferevent_get_output(bev), on_output, c);
    c->next = reg->head;
    if (c->next)
        c->next->prev = c;
    reg->head = c;
    reg->count++;
    metrics_gauge_add(MG_CONNECTIONS, 1);
    /* Decided once, at accept: a connection past the limit gets 503 for what it asks (but
     * /health) and is closed, and one that asks nothing is cut after request_timeout rather
     * than idle_timeout, so connections past the limit cost little and not for long. */
    c->over_limit = metrics_gauge_get(MG_CONNECTIONS) > reg->cfg->max_connections;
    return bev;
}

static struct bufferevent *bev_of(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    return evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
}

static struct httpconn *conn_of(struct httpconn_registry *reg, struct evhttp_request *req)
{
    struct bufferevent *bev = bev_of(req);
    return bev ? hmap_get_ptr(&reg->by_bev, bev) : NULL;
}

void httpconn_request_started(struct httpconn_registry *reg, struct evhttp_request *req)
{
    struct httpconn *c = conn_of(reg, req);
    if (c) {
        c->phase = PHASE_BUSY;
        c->since_us = clock_mono_us();
        if (!c->closecb_set) {
            c->closecb_set = 1;
            evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_connection_closed, c);
        }
    }
}

int httpconn_over_limit(struct httpconn_registry *reg, struct evhttp_request *req)
{
    struct httpconn *c = conn_of(reg, req);
    return c && c->over_limit;
}

int httpconn_head_has_nul(struct httpconn_registry *reg, struct evhttp_request *req)
{
    struct httpconn *c = conn_of(reg, req);
    return c && c->nul_in_head;
}

void httpconn_reply_begin(struct httpconn_registry *reg, struct evhttp_request *req)
{
    struct bufferevent *bev = bev_of(req);
    reg->replying = bev ? bufferevent_get_output(bev) : NULL;
    struct httpconn *c = bev ? hmap_get_ptr(&reg->by_bev, bev) : NULL;
    if (c) {
        c->phase = PHASE_IDLE;
        c->since_us = clock_mono_us();
    }
}

void httpconn_reply_end(struct httpconn_registry *reg)
{
    reg->replying = NULL;
}

void httpconn_sweep(struct httpconn_registry *reg)
{
    const struct config *cfg = reg->cfg;
    int64_t now = clock_mono_us();
    int64_t idle_us = (int64_t)cfg->idle_timeout * 1000000, request_us = (int64_t)cfg->request_timeout * 1000000;
    struct httpconn *c = reg->head;
    while (c) {
        struct httpconn *next = c->next;
        if (released_by_evhttp(c->bev)) {
            if (!c->queued_for_reap)
                release(c);
        } else if (!c->closing &&
                   ((c->phase == PHASE_IDLE && now - c->since_us > (c->over_limit ? request_us : idle_us)) ||
                    (c->phase == PHASE_READING && now - c->since_us > request_us))) {
            if (c->phase == PHASE_READING) {
                metrics_inc(MC_SLOW_CLIENTS, 1);
                log_debug("%s: closing a connection that took over %d s to send its request", reg->name,
                          cfg->request_timeout);
            }
            /* evhttp closes a connection on a read timeout without answering */
            c->closing = 1;
            bufferevent_trigger_event(c->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, 0);
        }
        c = next;
    }
}

int httpconn_init(struct httpconn_registry *reg, struct event_base *base, const struct config *cfg, const char *name)
{
    reg->name = name;
    reg->cfg = cfg;
    reg->base = base;
    reg->reap_ev = event_new(base, -1, 0, on_reap, reg);
    return reg->reap_ev ? 0 : -1;
}

void httpconn_release_all(struct httpconn_registry *reg)
{
    /* evhttp_free has freed every connection: all that is left is our reference */
    while (reg->head)
        release(reg->head);
    hmap_free(&reg->by_bev);
    if (reg->reap_ev)
        event_free(reg->reap_ev);
    reg->reap_ev = NULL;
}
