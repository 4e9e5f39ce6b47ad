/* whclient.h — the webhook delivery client: asynchronous HTTP/1.1 POSTs over http and https.
 *
 * One client lives on one event_base and is used from that loop's thread only: nothing here is
 * thread-safe, by design (a thread that delivers owns its own client, as it owns its loop).
 * The process must ignore SIGPIPE (hourglassd does): a receiver that goes away mid-write would
 * otherwise kill it.
 *
 * Each accepted request gets exactly one callback, always from the loop (never from inside
 * whclient_post), or from whclient_free for what is still pending. A request is bounded as a
 * whole by its timeout, counted from whclient_post: waiting for a free connection, connecting,
 * the TLS handshake, sending and the answer. Connections are kept alive and pooled per origin
 * (scheme, host, port), at most `max_per_origin` of them; requests beyond wait in FIFO order.
 * An https peer's certificate is verified against the system CA store (plus `ca_file`) and the
 * URL's host name or IP address. Redirects are not followed: a 3xx is an answer like any other.
 *
 * A request sent on a kept-alive connection that turns out to have been closed by the receiver
 * (closed or reset before any answer byte: the race with a receiver's idle timeout) is sent
 * once more on a new connection, within the same timeout. A receiver may then see it twice,
 * which at-least-once delivery allows; failing the attempt instead would spend one of the
 * job's tries on a connection that was never going to work. */
#ifndef HG_WHCLIENT_H
#define HG_WHCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/netaddr.h"

struct event_base;
struct evdns_base;
struct whclient;

/* ---- URLs ---- */

#define WH_URL_MAX  2048             /* longest URL accepted, in bytes */
#define WH_HOST_MAX NETADDR_HOST_MAX /* longest host name (DNS limit) */

struct wh_url {
    int https;                  /* 0: http, 1: https */
    int host_ip;                /* 4 or 6 for an address literal, 0 for a name */
    uint16_t port;              /* as given, else 80 / 443 */
    char host[WH_HOST_MAX + 1]; /* a lowercased name, a dotted IPv4, or an IPv6 without brackets */
    char path[WH_URL_MAX + 2];  /* path and query as given, starting with '/' ("/" when empty) */
};

/* Parse and check a webhook URL: http or https (any case), a host and optional port by the
 * rules of every address the daemon reads (base/netaddr.h: a host name, an IPv4 address or an
 * [IPv6] address, a port 1..65535), then a path and query. Refused: other schemes, user
 * information (user:pass@), fragments (#...), spaces and control or non-ASCII bytes,
 * characters RFC 3986 does not allow, bad %-escapes, URLs over WH_URL_MAX bytes. Pure (no
 * DNS). 0 with *out filled, or -1 with a message for an API answer (400) in err. */
int whclient_parse_url(const char *url, struct wh_url *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* ---- the client ---- */

struct whclient_opts {
    int max_per_origin;     /* connections per (scheme, host, port); 0 = 8 */
    int idle_timeout_ms;    /* close a kept-alive connection idle this long; 0 = 30000 */
    size_t max_answer;      /* answer body bytes kept for the callback; the rest is read and
                               discarded; 0 = 65536 */
    const char *ca_file;    /* PEM file of CA certificates trusted besides the system store
                               (private CAs, tests); NULL or "" for none */
    struct evdns_base *dns; /* resolver for host names (on the same base); NULL: the client makes
                               its own from /etc/resolv.conf and /etc/hosts */
};

/* A client on `base` (whose thread alone may use it afterwards); opts may be NULL for the
 * defaults. NULL with the reason in err (say, an unreadable ca_file). */
struct whclient *whclient_new(struct event_base *base, const struct whclient_opts *opts, char *err, size_t errlen);

/* Close every connection and free the client. Requests still pending get their callback first,
 * each exactly once, before this returns: an outcome already known (answered, failed) as it
 * was, anything else WH_CANCELLED. Callbacks run from here must not post (whclient_post then
 * fails); calling whclient_free from a callback is allowed (the other callbacks still run once).
 * Call it before freeing the event_base (or `dns`). NULL is a no-op. */
void whclient_free(struct whclient *c);

enum wh_outcome {
    WH_ANSWERED,  /* an HTTP answer: `status` says which; the caller judges 2xx or not */
    WH_TIMEOUT,   /* no complete answer within the request's timeout */
    WH_CONNECT,   /* could not resolve or connect (refused, unreachable) */
    WH_TLS,       /* TLS handshake failed, or the peer's certificate did not verify */
    WH_CLOSED,    /* the connection closed or broke before a complete answer */
    WH_PROTOCOL,  /* the answer was not valid HTTP (or its headers were too long) */
    WH_CANCELLED, /* the client was freed first */
};

struct wh_result {
    enum wh_outcome outcome;
    int status;         /* the HTTP status with WH_ANSWERED, else 0 */
    const char *error;  /* NULL with WH_ANSWERED, else a short text for logs and the job's
                           history ("timeout after 5000 ms", "connection refused", "TLS
                           certificate verification failed: hostname mismatch", ...) */
    int64_t latency_us; /* from whclient_post to the outcome */
    const char *body;   /* the answer body's first bytes (at most max_answer), NUL-terminated */
    size_t body_len;
    int body_truncated; /* the answer body was longer than body_len */
    int reused;         /* the request went out on a kept-alive connection */
};

/* The result and everything it points to are valid during the callback only. */
typedef void (*whclient_done_fn)(const struct wh_result *res, void *arg);

struct wh_header {
    const char *name;
    const char *value;
};

/* POST body[0..len) to url with the given headers, the answer due within timeout_ms (> 0).
 * Headers, body and url are copied: the caller may free them once this returns. Host,
 * Content-Length and User-Agent (unless given) are added; a header named Host, Content-Length,
 * Transfer-Encoding or Connection is refused, as are names that are not HTTP tokens and values
 * with control characters. 0: accepted, done(res, arg) will be called exactly once. -1: refused
 * (bad URL, header or timeout, out of memory, the client closing); no callback. */
int whclient_post(struct whclient *c, const char *url, const struct wh_header *headers, size_t nheaders,
                  const void *body, size_t len, int timeout_ms, whclient_done_fn done, void *arg)
    __attribute__((warn_unused_result));

struct whclient_stats {
    uint64_t connects; /* connections opened so far */
    uint64_t reused;   /* requests sent on a kept-alive connection */
    uint64_t retried;  /* requests sent again after a kept-alive connection turned out closed */
    int open;          /* connections open now, busy or idle */
    int idle;          /* of which idle */
    int in_flight;     /* requests on a connection now */
    int queued;        /* requests waiting for a connection now */
};

/* Counters and gauges for metrics and tests. */
void whclient_get_stats(const struct whclient *c, struct whclient_stats *out);

#endif
