/* whclient.c — see whclient.h.
 *
 * libevent's evhttp_connection carries one request at a time and can queue and reconnect by
 * itself; we use neither. Each `struct conn` wraps one evhttp_connection that is dropped, never
 * reconnected, once it closes for any reason (an SSL bufferevent cannot be reconnected, and a
 * connection that failed is not worth a second try). An origin holds its connections, busy and
 * idle, and a FIFO of requests waiting for one; `pump` hands waiting requests to idle
 * connections (the most recently used first, so spare ones age out) or opens new ones up to
 * max_per_origin.
 *
 * libevent's callbacks (done, error, header, chunk, close) only record what happened. The
 * user's callbacks run later from the client's `tick` event, and the connections libevent has
 * finished with are freed there too, never inside a libevent callback that still uses them.
 * Only our own timers free a live evhttp_connection directly: a request's deadline (the
 * connection is cut, so a hanging receiver cannot keep it) and an idle connection's timeout.
 *
 * libevent 2.1 reports failures in three ways, all handled in on_done: a connect refused comes
 * as the done callback with a request whose status is 0 (no error callback); other failures
 * come as the error callback, then the done callback with NULL. It calls the close callback
 * only for a connection it saw established (for TLS: after the handshake), which tells a
 * failed connect from a dropped connection. */
#include "delivery/whclient.h"
#include "base/clock.h"
#include "base/netaddr.h"
#include "base/sbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#define DEFAULT_MAX_PER_ORIGIN 8
#define DEFAULT_IDLE_MS        30000
#define DEFAULT_MAX_ANSWER     65536
#define MAX_ANSWER_HEADERS     65536 /* status line and headers of an answer */
#define USER_AGENT             "hourglass-webhook"

/* ---- URLs ---- */

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int is_digit(int ch)
{
    return ch >= '0' && ch <= '9';
}

static int is_alpha(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static int is_hex(int ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* RFC 3986 pchar plus '/' and '?', without the %-escape (checked apart). */
static int path_char_ok(int ch)
{
    return is_alpha(ch) || is_digit(ch) || strchr("-._~!$&'()*+,;=:@/?", ch) != NULL;
}

int whclient_parse_url(const char *url, struct wh_url *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (url == NULL || url[0] == '\0')
        return fail(err, errlen, "empty URL");
    size_t n = strnlen(url, WH_URL_MAX + 1);
    if (n > WH_URL_MAX)
        return fail(err, errlen, "URL longer than %d bytes", WH_URL_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)url[i];
        if (ch == ' ')
            return fail(err, errlen, "URL contains a space (percent-encode it as %%20)");
        if (ch < 0x20 || ch >= 0x7f)
            return fail(err, errlen, "URL contains a control or non-ASCII byte at offset %zu", i);
    }
    const char *p;
    if (strncasecmp(url, "http://", 7) == 0) {
        out->https = 0;
        p = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        out->https = 1;
        p = url + 8;
    } else {
        return fail(err, errlen, "URL must start with http:// or https://");
    }
    if (strchr(p, '#') != NULL)
        return fail(err, errlen, "fragments (#...) are not allowed in the URL");

    const char *end = p + strcspn(p, "/?"); /* the authority is [p, end) */
    if (memchr(p, '@', (size_t)(end - p)) != NULL)
        return fail(err, errlen, "user information (user:password@) is not allowed in the URL");
    struct netaddr a;
    if (netaddr_parse(p, (size_t)(end - p), out->https ? 443 : 80, &a, err, errlen) < 0)
        return -1;
    for (size_t i = 0; a.host[i]; i++) /* one origin, and the name TLS checks, whatever the case */
        out->host[i] = (char)((a.host[i] >= 'A' && a.host[i] <= 'Z') ? a.host[i] + 32 : a.host[i]);
    out->host_ip = (int)a.kind;
    out->port = (uint16_t)a.port;

    for (const char *s = end; *s; s++) {
        if (*s == '%') {
            if (!is_hex(s[1]) || !is_hex(s[2]))
                return fail(err, errlen, "bad %%-escape in the URL's path or query");
            s += 2;
        } else if (!path_char_ok(*s)) {
            return fail(err, errlen, "character '%c' is not allowed in the URL's path or query (percent-encode it)",
                        *s);
        }
    }
    size_t at = 0;
    if (*end != '/')
        out->path[at++] = '/';
    memcpy(out->path + at, end, strlen(end) + 1); /* fits: path holds WH_URL_MAX + 2 */
    return 0;
}

/* ---- the client ---- */

enum rq_state { RQ_QUEUED, RQ_FLIGHT, RQ_DONE };

struct conn;
struct origin;

struct whreq {
    TAILQ_ENTRY(whreq) link; /* an origin's waiting list, or the client's done list */
    struct whclient *c;
    struct origin *o;  /* while queued or in flight */
    struct conn *conn; /* while in flight */
    struct event *timer;
    whclient_done_fn done;
    void *arg;
    enum rq_state state;
    int64_t start_us;
    int timeout_ms;
    int retried;
    int reused;
    /* the attempt in flight, as libevent reported it */
    int ev_error; /* an evhttp_request_error + 1; 0: none */
    int ev_errno;
    int answer_started; /* status line and headers arrived */
    int seen_status;
    /* the outcome */
    enum wh_outcome outcome;
    int status;
    int64_t latency_us;
    char error[200];
    struct sbuf answer;
    int truncated;
    /* the request, kept to send it (again) */
    char *path;
    char **hdr; /* name, value, name, value, ... */
    size_t nhdr;
    char *body;
    size_t len;
};

TAILQ_HEAD(req_list, whreq);

struct conn {
    TAILQ_ENTRY(conn) link; /* its origin's connections, or the client's retired list */
    struct whclient *c;
    struct origin *o; /* NULL once retired */
    struct evhttp_connection *evcon;
    struct whreq *rq; /* in flight, or NULL: idle */
    struct event *idle_timer;
    unsigned requests; /* sent on it so far */
    int closed;        /* libevent closed it (after it was established): never send on it again */
};

TAILQ_HEAD(conn_list, conn);

struct origin {
    TAILQ_ENTRY(origin) link;
    int https, host_ip;
    uint16_t port;
    char host[WH_HOST_MAX + 1];
    char host_header[WH_HOST_MAX + 10]; /* "host", "[v6]", with ":port" unless the default */
    struct conn_list conns;             /* busy and idle, the most recently idle first */
    int nconns;
    struct req_list waiting;
};

struct whclient {
    struct event_base *base;
    struct evdns_base *dns;
    int own_dns;
    SSL_CTX *ssl;
    int max_per_origin, idle_timeout_ms;
    size_t max_answer;
    TAILQ_HEAD(, origin) origins;
    struct conn_list retired; /* done with by libevent; freed by tick */
    struct req_list done;     /* outcome known, callback due */
    struct event *tick;
    int closing;
    int *freed; /* while tick runs callbacks: set when one of them frees the client */
    uint64_t connects, reused, retried;
};

static void schedule(struct whclient *c)
{
    event_active(c->tick, EV_TIMEOUT, 0);
}

static void free_req(struct whreq *rq)
{
    if (rq->timer)
        event_free(rq->timer);
    for (size_t i = 0; i < 2 * rq->nhdr; i++)
        free(rq->hdr[i]);
    free(rq->hdr);
    free(rq->path);
    free(rq->body);
    sb_free(&rq->answer);
    free(rq);
}

/* The outcome is known: stop the clock and queue the callback. The caller has detached the
 * request from its origin and connection. */
static void finish(struct whreq *rq, enum wh_outcome outcome, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void finish(struct whreq *rq, enum wh_outcome outcome, int status, const char *fmt, ...)
{
    rq->state = RQ_DONE;
    evtimer_del(rq->timer);
    rq->outcome = outcome;
    rq->status = status;
    rq->latency_us = clock_mono_us() - rq->start_us;
    rq->error[0] = '\0';
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rq->error, sizeof rq->error, fmt, ap);
        va_end(ap);
    }
    rq->o = NULL;
    rq->conn = NULL;
    TAILQ_INSERT_TAIL(&rq->c->done, rq, link);
    schedule(rq->c);
}

static void deliver(struct whreq *rq)
{
    struct wh_result r = {
        .outcome = rq->outcome,
        .status = rq->status,
        .error = rq->error[0] ? rq->error : NULL,
        .latency_us = rq->latency_us,
        .body = rq->answer.data ? rq->answer.data : "",
        .body_len = rq->answer.data ? rq->answer.len : 0,
        .body_truncated = rq->truncated,
        .reused = rq->reused,
    };
    rq->done(&r, rq->arg);
}

/* Free an evhttp_connection from a context where libevent is not using it (our own events). */
static void free_conn(struct conn *conn)
{
    evhttp_connection_set_closecb(conn->evcon, NULL, NULL);
    evhttp_connection_free(conn->evcon);
    event_free(conn->idle_timer);
    free(conn);
}

static void unlink_conn(struct conn *conn)
{
    if (conn->o != NULL) {
        TAILQ_REMOVE(&conn->o->conns, conn, link);
        conn->o->nconns--;
        conn->o = NULL;
    }
}

/* Drop a connection from inside a libevent callback: out of its origin now, freed by tick. */
static void retire(struct conn *conn)
{
    unlink_conn(conn);
    evtimer_del(conn->idle_timer);
    TAILQ_INSERT_TAIL(&conn->c->retired, conn, link);
    schedule(conn->c);
}

/* A request left the connection with an answer: keep it for the next one, unless it closed. */
static void idle_or_retire(struct conn *conn)
{
    struct origin *o = conn->o;
    if (conn->closed || o == NULL) {
        retire(conn);
        return;
    }
    TAILQ_REMOVE(&o->conns, conn, link);
    TAILQ_INSERT_HEAD(&o->conns, conn, link);
    struct timeval tv = {conn->c->idle_timeout_ms / 1000, (conn->c->idle_timeout_ms % 1000) * 1000};
    evtimer_add(conn->idle_timer, &tv);
    schedule(conn->c); /* a waiting request may take it */
}

static void on_close(struct evhttp_connection *evcon, void *arg)
{
    struct conn *conn = arg;
    conn->closed = 1;
    if (conn->rq == NULL && conn->o != NULL) /* an idle one the receiver closed */
        retire(conn);
}

static void on_idle_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct conn *conn = arg;
    struct whclient *c = conn->c;
    unlink_conn(conn);
    free_conn(conn);
    schedule(c); /* its origin may now be empty */
}

static int on_header(struct evhttp_request *req, void *arg)
{
    struct whreq *rq = arg;
    rq->answer_started = 1;
    rq->seen_status = evhttp_request_get_response_code(req);
    return 0;
}

/* Each piece of the answer body as it arrives (libevent drains it afterwards): keep the first
 * max_answer bytes, count the rest as discarded. */
static void on_chunk(struct evhttp_request *req, void *arg)
{
    struct whreq *rq = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in), have = rq->answer.len, max = rq->c->max_answer;
    size_t take = n;
    if (have + take > max) {
        take = max - have;
        rq->truncated = 1;
    }
    if (take > 0 && sb_reserve(&rq->answer, take) == 0) {
        evbuffer_copyout(in, rq->answer.data + have, take);
        rq->answer.len = have + take;
        rq->answer.data[rq->answer.len] = '\0';
    }
}

static void on_error(enum evhttp_request_error error, void *arg)
{
    struct whreq *rq = arg;
    rq->ev_errno = errno; /* libevent restores the errno of the failure before calling this */
    rq->ev_error = (int)error + 1;
}

/* Why an attempt failed: the outcome, with the text in rq->error. `refused` is libevent's
 * connect-failure path (a request with status 0 and no error callback), which 2.1 takes for
 * ECONNREFUSED (and socket errors reported on connect, which we cannot tell apart). */
static enum wh_outcome describe(struct whreq *rq, struct conn *conn, int refused)
{
    const struct origin *o = rq->o;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(conn->evcon);
    char *e = rq->error;
    size_t el = sizeof rq->error;
    int dns = bev ? bufferevent_socket_get_dns_error(bev) : 0;
    if (dns != 0) {
        snprintf(e, el, "cannot resolve %.100s: %s", o->host, evutil_gai_strerror(dns));
        return WH_CONNECT;
    }
    unsigned long tls_err = 0, x;
    int handshake_done = 1;
    if (o->https && bev != NULL) {
        SSL *ssl = bufferevent_openssl_get_ssl(bev);
        /* libevent queues OpenSSL's errors and also SSL_get_error()'s code (no library part):
         * SSL_ERROR_SYSCALL says only that the socket failed, which the rest below describes */
        while ((x = bufferevent_get_openssl_error(bev)) != 0)
            if (tls_err == 0 && ERR_GET_LIB(x) != 0)
                tls_err = x;
        if (ssl != NULL && !SSL_is_init_finished(ssl)) {
            handshake_done = 0;
            long v = SSL_get_verify_result(ssl);
            if (v != X509_V_OK) {
                snprintf(e, el, "TLS certificate verification failed: %s", X509_verify_cert_error_string(v));
                return WH_TLS;
            }
            if (tls_err != 0) {
                const char *why = ERR_reason_error_string(tls_err);
                snprintf(e, el, "TLS handshake failed: %s", why ? why : "unknown error");
                return WH_TLS;
            }
        }
    }
    if (refused) {
        snprintf(e, el, "connection refused");
        return WH_CONNECT;
    }
    if (!conn->closed) {
        /* never established (libevent calls the close callback only for established ones) */
        if (!handshake_done)
            snprintf(e, el, "connect failed or connection closed during the TLS handshake");
        else
            snprintf(e, el, "connect failed: %s", strerror(rq->ev_errno));
        return WH_CONNECT;
    }
    switch (rq->ev_error - 1) {
    case EVREQ_HTTP_TIMEOUT:
        snprintf(e, el, "timeout (libevent: no progress)");
        return WH_TIMEOUT;
    case EVREQ_HTTP_INVALID_HEADER:
        snprintf(e, el, "invalid HTTP answer");
        return WH_PROTOCOL;
    case EVREQ_HTTP_DATA_TOO_LONG:
        snprintf(e, el, "answer headers longer than %d bytes, or a malformed chunked body", MAX_ANSWER_HEADERS);
        return WH_PROTOCOL;
    default:
        break;
    }
    if (tls_err != 0) {
        const char *why = ERR_reason_error_string(tls_err);
        snprintf(e, el, "TLS error: %s", why ? why : "unknown error");
    } else if (rq->ev_errno == ECONNRESET) {
        snprintf(e, el, "connection reset by the receiver");
    } else if (rq->answer_started) {
        snprintf(e, el, "connection closed during the answer (status %d)", rq->seen_status);
    } else {
        snprintf(e, el, "connection closed before an answer");
    }
    return WH_CLOSED;
}

static void on_done(struct evhttp_request *req, void *arg)
{
    struct whreq *rq = arg;
    if (rq->state != RQ_FLIGHT) /* cannot happen: only this and freeing the connection end a flight */
        return;
    struct conn *conn = rq->conn;
    struct origin *o = rq->o;
    struct whclient *c = rq->c;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    if (req != NULL && code != 0) {
        conn->rq = NULL;
        idle_or_retire(conn);
        finish(rq, WH_ANSWERED, code, NULL);
        return;
    }
    enum wh_outcome out = describe(rq, conn, req != NULL);
    conn->rq = NULL;
    conn->closed = 1; /* dropped after any transport error */
    retire(conn);
    rq->conn = NULL;
    if (out == WH_CLOSED && rq->reused && !rq->answer_started && !rq->retried && !c->closing) {
        rq->retried = 1;
        c->retried++;
        rq->state = RQ_QUEUED;
        TAILQ_INSERT_HEAD(&o->waiting, rq, link);
        return; /* retire() scheduled the tick, which pumps */
    }
    char text[sizeof rq->error];
    memcpy(text, rq->error, sizeof text);
    finish(rq, out, 0, "%s", text);
}

static struct conn *open_conn(struct whclient *c, struct origin *o)
{
    struct conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL)
        return NULL;
    conn->c = c;
    conn->idle_timer = evtimer_new(c->base, on_idle_timeout, conn);
    if (conn->idle_timer == NULL) {
        free(conn);
        return NULL;
    }
    struct bufferevent *bev;
    if (o->https) {
        SSL *ssl = SSL_new(c->ssl);
        if (ssl == NULL)
            goto fail;
        int ok;
        if (o->host_ip)
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), o->host) == 1;
        else /* SNI is for names only (RFC 6066) */
            ok = SSL_set_tlsext_host_name(ssl, o->host) == 1 && SSL_set1_host(ssl, o->host) == 1;
        SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (!ok) {
            SSL_free(ssl);
            goto fail;
        }
        bev = bufferevent_openssl_socket_new(c->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                             BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (bev == NULL) {
            SSL_free(ssl);
            goto fail;
        }
        /* many servers close without close_notify; the answer's framing says when it is complete */
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    } else {
        bev = bufferevent_socket_new(c->base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (bev == NULL)
            goto fail;
    }
    conn->evcon = evhttp_connection_base_bufferevent_new(c->base, c->dns, bev, o->host, o->port);
    if (conn->evcon == NULL) {
        bufferevent_free(bev);
        goto fail;
    }
    evhttp_connection_set_closecb(conn->evcon, on_close, conn);
    evhttp_connection_set_max_headers_size(conn->evcon, MAX_ANSWER_HEADERS);
    conn->o = o;
    TAILQ_INSERT_HEAD(&o->conns, conn, link);
    o->nconns++;
    c->connects++;
    return conn;
fail:
    event_free(conn->idle_timer);
    free(conn);
    return NULL;
}

/* Send rq on conn (idle, or new and not yet connected). */
static void start(struct conn *conn, struct whreq *rq)
{
    struct whclient *c = conn->c;
    struct origin *o = conn->o;
    struct evhttp_request *req = evhttp_request_new(on_done, rq);
    int ok = req != NULL;
    if (ok) {
        evhttp_request_set_error_cb(req, on_error);
        evhttp_request_set_header_cb(req, on_header);
        evhttp_request_set_chunked_cb(req, on_chunk);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        char clen[24];
        snprintf(clen, sizeof clen, "%zu", rq->len);
        int ua = 0;
        ok = evhttp_add_header(h, "Host", o->host_header) == 0 && evhttp_add_header(h, "Content-Length", clen) == 0;
        for (size_t i = 0; ok && i < rq->nhdr; i++) {
            ua |= strcasecmp(rq->hdr[2 * i], "User-Agent") == 0;
            ok = evhttp_add_header(h, rq->hdr[2 * i], rq->hdr[2 * i + 1]) == 0;
        }
        if (ok && !ua)
            ok = evhttp_add_header(h, "User-Agent", USER_AGENT) == 0;
        if (ok && rq->len > 0)
            ok = evbuffer_add(evhttp_request_get_output_buffer(req), rq->body, rq->len) == 0;
        if (!ok)
            evhttp_request_free(req);
    }
    if (!ok) {
        TAILQ_REMOVE(&o->waiting, rq, link);
        idle_or_retire(conn);
        finish(rq, WH_CLOSED, 0, "out of memory building the request");
        return;
    }
    TAILQ_REMOVE(&o->waiting, rq, link);
    rq->state = RQ_FLIGHT;
    rq->conn = conn;
    rq->reused = conn->requests > 0;
    rq->ev_error = 0;
    rq->ev_errno = 0;
    rq->answer_started = 0;
    rq->seen_status = 0;
    rq->truncated = 0;
    sb_reset(&rq->answer);
    conn->rq = rq;
    conn->requests++;
    if (rq->reused)
        c->reused++;
    evtimer_del(conn->idle_timer);
    /* libevent's own inactivity timeouts (connect, read, write) outlast ours, which decides */
    int64_t left_ms = rq->timeout_ms - (clock_mono_us() - rq->start_us) / 1000;
    if (left_ms < 0)
        left_ms = 0;
    struct timeval tv = {(time_t)(left_ms / 1000 + 1), (suseconds_t)(left_ms % 1000) * 1000};
    evhttp_connection_set_timeout_tv(conn->evcon, &tv);
    if (evhttp_make_request(conn->evcon, req, EVHTTP_REQ_POST, rq->path) != 0) {
        /* libevent called nothing back; its state is unknown: drop the connection */
        conn->rq = NULL;
        conn->closed = 1;
        retire(conn);
        finish(rq, WH_CONNECT, 0, "cannot start a connection to %.100s", o->host);
    }
    /* on success, rq may already be finished (a connect that failed at once): touch nothing */
}

/* The first idle connection (the most recently used), or NULL. */
static struct conn *idle_conn(struct origin *o)
{
    struct conn *conn;
    for (conn = TAILQ_FIRST(&o->conns); conn != NULL; conn = TAILQ_NEXT(conn, link))
        if (conn->rq == NULL && !conn->closed)
            return conn;
    return NULL;
}

/* Hand waiting requests to idle connections, or to new ones while under the cap. */
static void pump(struct whclient *c, struct origin *o)
{
    struct whreq *rq;
    while ((rq = TAILQ_FIRST(&o->waiting)) != NULL) {
        struct conn *conn = idle_conn(o);
        if (conn == NULL) {
            if (o->nconns >= c->max_per_origin)
                return;
            conn = open_conn(c, o);
            if (conn == NULL) {
                TAILQ_REMOVE(&o->waiting, rq, link);
                finish(rq, WH_CONNECT, 0, "out of memory opening a connection");
                continue;
            }
        }
        start(conn, rq);
    }
}

static void free_origin(struct whclient *c, struct origin *o)
{
    TAILQ_REMOVE(&c->origins, o, link);
    free(o);
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
    struct whclient *c = arg;
    struct conn *conn;
    while ((conn = TAILQ_FIRST(&c->retired)) != NULL) {
        TAILQ_REMOVE(&c->retired, conn, link);
        free_conn(conn);
    }
    struct origin *o, *next;
    for (o = TAILQ_FIRST(&c->origins); o != NULL; o = TAILQ_NEXT(o, link))
        pump(c, o);
    int freed = 0;
    c->freed = &freed;
    struct whreq *rq;
    while ((rq = TAILQ_FIRST(&c->done)) != NULL) {
        TAILQ_REMOVE(&c->done, rq, link);
        deliver(rq);
        free_req(rq);
        if (freed)
            return; /* a callback freed the client */
    }
    c->freed = NULL;
    for (o = TAILQ_FIRST(&c->origins); o != NULL; o = next) {
        next = TAILQ_NEXT(o, link);
        if (o->nconns == 0 && TAILQ_EMPTY(&o->waiting))
            free_origin(c, o);
    }
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct whreq *rq = arg;
    /* libevent's timers run on its cached, possibly coarse clock and may fire a few ms early by
     * ours: the deadline is the full timeout from whclient_post, never less */
    int64_t left_us = (int64_t)rq->timeout_ms * 1000 - (clock_mono_us() - rq->start_us);
    if (left_us > 0) {
        struct timeval tv = {(time_t)(left_us / 1000000), (suseconds_t)(left_us % 1000000)};
        evtimer_add(rq->timer, &tv);
        return;
    }
    if (rq->state == RQ_QUEUED) {
        TAILQ_REMOVE(&rq->o->waiting, rq, link);
        finish(rq, WH_TIMEOUT, 0, "timeout after %d ms waiting for a connection", rq->timeout_ms);
    } else if (rq->state == RQ_FLIGHT) {
        /* cut the connection: libevent frees its request without calling back */
        struct conn *conn = rq->conn;
        conn->rq = NULL;
        unlink_conn(conn);
        free_conn(conn);
        if (rq->answer_started)
            finish(rq, WH_TIMEOUT, 0, "timeout after %d ms reading the answer (status %d)", rq->timeout_ms,
                   rq->seen_status);
        else
            finish(rq, WH_TIMEOUT, 0, "timeout after %d ms", rq->timeout_ms);
    }
}

static struct origin *find_origin(struct whclient *c, const struct wh_url *u)
{
    struct origin *o;
    for (o = TAILQ_FIRST(&c->origins); o != NULL; o = TAILQ_NEXT(o, link))
        if (o->https == u->https && o->port == u->port && strcmp(o->host, u->host) == 0)
            return o;
    o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->https = u->https;
    o->host_ip = u->host_ip;
    o->port = u->port;
    memcpy(o->host, u->host, sizeof o->host);
    const char *l = u->host_ip == 6 ? "[" : "", *r = u->host_ip == 6 ? "]" : "";
    if (u->port == (u->https ? 443 : 80))
        snprintf(o->host_header, sizeof o->host_header, "%s%s%s", l, u->host, r);
    else
        snprintf(o->host_header, sizeof o->host_header, "%s%s%s:%u", l, u->host, r, (unsigned)u->port);
    TAILQ_INIT(&o->conns);
    TAILQ_INIT(&o->waiting);
    TAILQ_INSERT_TAIL(&c->origins, o, link);
    return o;
}

/* An HTTP token (RFC 9110 tchar). */
static int header_name_ok(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (; *s; s++)
        if (!is_alpha(*s) && !is_digit(*s) && strchr("!#$%&'*+-.^_`|~", *s) == NULL)
            return 0;
    return 1;
}

static int header_value_ok(const char *s)
{
    if (s == NULL)
        return 0;
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return 0;
    return 1;
}

int whclient_post(struct whclient *c, const char *url, const struct wh_header *headers, size_t nheaders,
                  const void *body, size_t len, int timeout_ms, whclient_done_fn done, void *arg)
{
    static const char *const reserved[] = {"Host", "Content-Length", "Transfer-Encoding", "Connection"};
    struct wh_url u;
    char err[160];
    if (c == NULL || c->closing || done == NULL || timeout_ms <= 0 || (len > 0 && body == NULL) ||
        (nheaders > 0 && headers == NULL) || whclient_parse_url(url, &u, err, sizeof err) < 0)
        return -1;
    for (size_t i = 0; i < nheaders; i++) {
        if (!header_name_ok(headers[i].name) || !header_value_ok(headers[i].value))
            return -1;
        for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++)
            if (strcasecmp(headers[i].name, reserved[k]) == 0)
                return -1;
    }
    struct whreq *rq = calloc(1, sizeof *rq);
    if (rq == NULL)
        return -1;
    rq->c = c;
    rq->done = done;
    rq->arg = arg;
    rq->timeout_ms = timeout_ms;
    rq->start_us = clock_mono_us();
    rq->path = strdup(u.path);
    rq->hdr = nheaders ? calloc(2 * nheaders, sizeof *rq->hdr) : NULL;
    rq->nhdr = nheaders;
    rq->body = len ? malloc(len) : NULL;
    rq->len = len;
    rq->timer = evtimer_new(c->base, on_deadline, rq);
    int ok = rq->path && (nheaders == 0 || rq->hdr) && (len == 0 || rq->body) && rq->timer;
    for (size_t i = 0; ok && i < nheaders; i++) {
        rq->hdr[2 * i] = strdup(headers[i].name);
        rq->hdr[2 * i + 1] = strdup(headers[i].value);
        ok = rq->hdr[2 * i] && rq->hdr[2 * i + 1];
    }
    struct origin *o = ok ? find_origin(c, &u) : NULL;
    if (o == NULL) {
        free_req(rq);
        return -1;
    }
    if (len)
        memcpy(rq->body, body, len);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(rq->timer, &tv);
    rq->o = o;
    rq->state = RQ_QUEUED;
    TAILQ_INSERT_TAIL(&o->waiting, rq, link);
    pump(c, o);
    return 0;
}

static int ssl_fail(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "unknown error";
    if (e != 0)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return fail(err, errlen, "%s: %s", what, buf);
}

struct whclient *whclient_new(struct event_base *base, const struct whclient_opts *opts, char *err, size_t errlen)
{
    static const struct whclient_opts none;
    if (opts == NULL)
        opts = &none;
    if (opts->max_per_origin < 0 || opts->idle_timeout_ms < 0) {
        fail(err, errlen, "max_per_origin and idle_timeout_ms must not be negative");
        return NULL;
    }
    struct whclient *c = calloc(1, sizeof *c);
    if (c == NULL) {
        fail(err, errlen, "out of memory");
        return NULL;
    }
    c->base = base;
    c->max_per_origin = opts->max_per_origin ? opts->max_per_origin : DEFAULT_MAX_PER_ORIGIN;
    c->idle_timeout_ms = opts->idle_timeout_ms ? opts->idle_timeout_ms : DEFAULT_IDLE_MS;
    c->max_answer = opts->max_answer ? opts->max_answer : DEFAULT_MAX_ANSWER;
    TAILQ_INIT(&c->origins);
    TAILQ_INIT(&c->retired);
    TAILQ_INIT(&c->done);
    c->tick = event_new(base, -1, 0, tick, c);
    if (c->tick == NULL) {
        fail(err, errlen, "out of memory");
        goto bad;
    }
    if (opts->dns != NULL) {
        c->dns = opts->dns;
    } else {
        c->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        c->own_dns = 1;
        if (c->dns == NULL) {
            fail(err, errlen, "cannot set up the DNS resolver (/etc/resolv.conf)");
            goto bad;
        }
    }
    c->ssl = SSL_CTX_new(TLS_client_method());
    if (c->ssl == NULL) {
        ssl_fail(err, errlen, "TLS context");
        goto bad;
    }
    SSL_CTX_set_min_proto_version(c->ssl, TLS1_2_VERSION);
    SSL_CTX_set_verify(c->ssl, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(c->ssl, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_default_verify_paths(c->ssl) != 1) {
        ssl_fail(err, errlen, "system CA store");
        goto bad;
    }
    if (opts->ca_file != NULL && opts->ca_file[0] != '\0' &&
        SSL_CTX_load_verify_locations(c->ssl, opts->ca_file, NULL) != 1) {
        char what[300];
        snprintf(what, sizeof what, "ca_file %s", opts->ca_file);
        ssl_fail(err, errlen, what);
        goto bad;
    }
    return c;
bad:
    if (c->ssl)
        SSL_CTX_free(c->ssl);
    if (c->own_dns && c->dns)
        evdns_base_free(c->dns, 1);
    if (c->tick)
        event_free(c->tick);
    free(c);
    return NULL;
}

void whclient_free(struct whclient *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = 1;
    if (c->freed != NULL)
        *c->freed = 1;
    /* cut every connection first, so libevent calls nothing back while the callbacks run */
    struct origin *o;
    struct conn *conn;
    struct whreq *rq;
    for (o = TAILQ_FIRST(&c->origins); o != NULL; o = TAILQ_NEXT(o, link)) {
        while ((conn = TAILQ_FIRST(&o->conns)) != NULL) {
            rq = conn->rq;
            conn->rq = NULL;
            unlink_conn(conn);
            free_conn(conn);
            if (rq != NULL)
                finish(rq, WH_CANCELLED, 0, "cancelled: the client was freed");
        }
        while ((rq = TAILQ_FIRST(&o->waiting)) != NULL) {
            TAILQ_REMOVE(&o->waiting, rq, link);
            finish(rq, WH_CANCELLED, 0, "cancelled: the client was freed");
        }
    }
    while ((conn = TAILQ_FIRST(&c->retired)) != NULL) {
        TAILQ_REMOVE(&c->retired, conn, link);
        free_conn(conn);
    }
    while ((rq = TAILQ_FIRST(&c->done)) != NULL) {
        TAILQ_REMOVE(&c->done, rq, link);
        deliver(rq);
        free_req(rq);
    }
    while ((o = TAILQ_FIRST(&c->origins)) != NULL)
        free_origin(c, o);
    event_free(c->tick);
    SSL_CTX_free(c->ssl);
    if (c->own_dns)
        evdns_base_free(c->dns, 1);
    free(c);
}

void whclient_get_stats(const struct whclient *c, struct whclient_stats *out)
{
    memset(out, 0, sizeof *out);
    out->connects = c->connects;
    out->reused = c->reused;
    out->retried = c->retried;
    const struct origin *o;
    const struct conn *conn;
    const struct whreq *rq;
    for (o = TAILQ_FIRST(&c->origins); o != NULL; o = TAILQ_NEXT(o, link)) {
        for (conn = TAILQ_FIRST(&o->conns); conn != NULL; conn = TAILQ_NEXT(conn, link)) {
            out->open++;
            if (conn->rq == NULL)
                out->idle++;
            else
                out->in_flight++;
        }
        for (rq = TAILQ_FIRST(&o->waiting); rq != NULL; rq = TAILQ_NEXT(rq, link))
            out->queued++;
    }
}
