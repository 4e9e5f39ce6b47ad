/* conn.c — see conn.h. */
#include "conn.h"
#include "clock.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "worker.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum phase { PHASE_IDLE, PHASE_READING, PHASE_BUSY };

struct conn {
    struct worker *w;
    struct bufferevent *bev;
    enum phase phase;
    int64_t since_us;
    int closing;             /* we asked evhttp to close it */
    int queued_for_reap;
    int closecb_set;
    /* the request being received (see on_input): its head chunked? a NUL in its head? */
    int head_done, chunked, nul_in_head;
    size_t body_bytes;       /* bytes after the head */
    char line[64];
    size_t line_len;
    struct conn *prev, *next;
    struct conn *reap_next;
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

static void release(struct conn *c)
{
    struct conn_registry *reg = &c->w->conns;
    if (c->prev)
        c->prev->next = c->next;
    else
        reg->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    ptrmap_remove(&reg->by_bev, c->bev);
    reg->count--;
    metrics_gauge_add(MG_CONNECTIONS, -1);
    bufferevent_decref(c->bev); /* our reference was the last: this closes the socket */
    free(c);
}

static void queue_reap(struct conn *c)
{
    if (c->queued_for_reap)
        return;
    c->queued_for_reap = 1;
    c->reap_next = c->w->conns.reap;
    c->w->conns.reap = c;
    event_active(c->w->conns.reap_ev, EV_TIMEOUT, 0);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct conn *c = w->conns.reap;
    w->conns.reap = NULL;
    while (c) {
        struct conn *next = c->reap_next;
        c->queued_for_reap = 0;
        if (released_by_evhttp(c->bev))
            release(c);
        c = next;
    }
}

static void on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct conn *c = arg;
    struct worker *w = c->w;
    /* bytes evhttp wrote on its own: its error page, to become our JSON error */
    if (info->n_added > 0 && !w->rewriting && w->replying != buf)
        http_rewrite_error_page(w, buf, c->chunked && c->body_bytes <= (size_t)w->app->cfg.max_body);
    /* output drained: evhttp may be about to let the connection go (Connection: close);
     * look again once the current callback has returned */
    if (info->n_deleted > 0 && evbuffer_get_length(buf) == 0)
        queue_reap(c);
}

/* One line of the request head (without CR LF): is it "Transfer-Encoding: ...chunked"? */
static void head_line(struct conn *c)
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
static void scan_head(struct conn *c, struct evbuffer *buf, size_t added)
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
    struct conn *c = arg;
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

struct bufferevent *conn_make_bufferevent(struct event_base *base, void *arg)
{
    struct worker *w = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL)
        return NULL;
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL || ptrmap_put(&w->conns.by_bev, bev, c) < 0) {
        free(c); /* untracked but served: evhttp still frees the bufferevent itself */
        return bev;
    }
    c->w = w;
    c->bev = bev;
    c->phase = PHASE_IDLE;
    c->since_us = clock_mono_us();
    bufferevent_incref(bev);
    evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
    evbuffer_add_cb(bufferevent_get_output(bev), on_output, c);
    c->next = w->conns.head;
    if (c->next)
        c->next->prev = c;
    w->conns.head = c;
    w->conns.count++;
    metrics_gauge_add(MG_CONNECTIONS, 1);
    return bev;
}

static struct conn *conn_of(struct worker *w, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    return bev ? ptrmap_get(&w->conns.by_bev, bev) : NULL;
}

void conn_request_started(struct worker *w, struct evhttp_request *req)
{
    struct conn *c = conn_of(w, req);
    if (c) {
        c->phase = PHASE_BUSY;
        c->since_us = clock_mono_us();
        if (!c->closecb_set) {
            c->closecb_set = 1;
            evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_connection_closed, c);
        }
    }
}

int conn_head_has_nul(struct worker *w, struct evhttp_request *req)
{
    struct conn *c = conn_of(w, req);
    return c && c->nul_in_head;
}

void conn_request_answering(struct worker *w, struct evhttp_request *req)
{
    struct conn *c = conn_of(w, req);
    if (c) {
        c->phase = PHASE_IDLE;
        c->since_us = clock_mono_us();
    }
}

void conn_sweep(struct worker *w)
{
    const struct config *cfg = &w->app->cfg;
    int64_t now = clock_mono_us();
    int64_t idle_us = (int64_t)cfg->idle_timeout * 1000000, request_us = (int64_t)cfg->request_timeout * 1000000;
    struct conn *c = w->conns.head;
    while (c) {
        struct conn *next = c->next;
        if (released_by_evhttp(c->bev)) {
            if (!c->queued_for_reap)
                release(c);
        } else if (!c->closing && ((c->phase == PHASE_IDLE && now - c->since_us > idle_us) ||
                                   (c->phase == PHASE_READING && now - c->since_us > request_us))) {
            if (c->phase == PHASE_READING) {
                metrics_inc(MC_SLOW_CLIENTS, 1);
                log_debug("%s: closing a connection that took over %d s to send its request", w->name,
                          cfg->request_timeout);
            }
            /* evhttp closes a connection on a read timeout without answering */
            c->closing = 1;
            bufferevent_trigger_event(c->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, 0);
        }
        c = next;
    }
}

int conn_init(struct worker *w)
{
    w->conns.reap_ev = event_new(w->base, -1, 0, on_reap, w);
    return w->conns.reap_ev ? 0 : -1;
}

void conn_release_all(struct worker *w)
{
    /* evhttp_free has freed every connection: all that is left is our reference */
    while (w->conns.head)
        release(w->conns.head);
    ptrmap_free(&w->conns.by_bev);
    if (w->conns.reap_ev)
        event_free(w->conns.reap_ev);
    w->conns.reap_ev = NULL;
}
