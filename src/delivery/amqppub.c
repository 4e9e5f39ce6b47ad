/* amqppub.c — see amqppub.h.
 *
 * Design. One connection, one channel (1) in confirm mode. A batch is published without
 * waiting (pipelined), then the confirms are read until every message is settled or the
 * deadline passes. Delivery tags count 1, 2, ... per channel from confirm.select, so the
 * ledger maps each tag back to its message; an ack or nack with `multiple` settles every
 * open tag up to it. A mandatory message that no queue takes comes back as basic.return
 * (followed by its header and body, read and dropped here) before its ack, so a return
 * marks the message RETURNED and the later ack cannot turn it into CONFIRMED.
 *
 * Failures. The broker closes the channel for a publish to a missing exchange (404) or one
 * the user may not write (403): the close names the exchange, so that message is REFUSED;
 * the others of the batch stay UNKNOWN (their confirms died with the channel), and the next
 * call reopens the channel on the same connection. Anything else — a socket error, a
 * connection.close, a confirm that does not come in time — drops the connection: a late
 * confirm or return must never be read as one of the next batch's. The next call reconnects
 * at once; a failed connect waits a backoff (200 ms doubling to 5 s) before the next try,
 * and a call that cannot wait that long within its own timeout fails without blocking.
 *
 * Time. Reads take an explicit deadline (amqp_simple_wait_frame_noblock), connect and login
 * their timeouts; but librabbitmq sends with no deadline when heartbeats are off (and
 * only to the next expected heartbeat when they are on), so a broker that stops reading
 * (paused, memory alarm) would hold amqp_basic_publish forever. A watchdog thread, armed
 * with the socket and the call's deadline, shuts the socket down when the deadline passes;
 * the blocked send then fails and the call returns. Heartbeats stay off: the publisher
 * sleeps between batches and could not answer them; each call first reads what arrived
 * meanwhile (a close, connection.blocked) and TCP keepalive covers dead peers. */
#include "delivery/amqppub.h"
#include "core/amqpurl.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "base/log.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#define CHANNEL          1
#define FRAME_MAX        131072
#define BACKOFF_MIN_MS   200
#define BACKOFF_MAX_MS   5000
#define WATCHDOG_GRACE   20000 /* us past the deadline: the call's own timeout path goes first */
#define DRAIN_EVERY      64    /* read pending confirms every this many publishes (keeps the socket flowing) */
#define CLOSE_TIMEOUT_MS 1000  /* amqppub_free's polite connection.close */
#define SHORTSTR_MAX     255

struct watchdog {
    struct bgthread bg; /* its start and stop (base/bgthread.h): no deadline, nothing to cut */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int fd;              /* the socket to cut, valid while armed */
    int64_t deadline_us; /* monotonic */
    int armed, fired;
};

struct amqppub {
    struct amqpurl url;
    char name[128];
    char where[2 * AMQPURL_MAX];  /* the url without its password, for logs */
    amqp_connection_state_t conn; /* NULL = not connected */
    int channel_open;
    uint64_t next_tag; /* delivery tag of the next publish on the channel */
    int blocked;       /* connection.blocked seen, no unblocked since */
    char blocked_reason[128];
    int64_t retry_at_us; /* no connect attempt before this (monotonic) */
    int backoff_ms;
    int cut;                  /* the watchdog cut the socket during this call */
    int64_t call_deadline_us; /* the deadline of the call in progress (monotonic) */
    char connect_err[512];
    char err[512];
    struct watchdog wd;
};

/* ---------------------------------------------------------------- helpers */

static void seterr(struct amqppub *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void seterr(struct amqppub *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
}

static struct timeval tv_until(int64_t deadline_us, int64_t min_us)
{
    int64_t left = deadline_us - clock_mono_us();
    if (left < min_us)
        left = min_us;
    return (struct timeval){.tv_sec = (time_t)(left / 1000000), .tv_usec = (suseconds_t)(left % 1000000)};
}

static int bytes_eq(const char *s, const void *b, size_t len)
{
    if (s == NULL)
        s = "";
    return strlen(s) == len && (len == 0 || memcmp(s, b, len) == 0);
}

const char *amqppub_outcome_name(enum amqppub_outcome o)
{
    switch (o) {
    case AMQPPUB_UNKNOWN:
        return "unknown";
    case AMQPPUB_CONFIRMED:
        return "confirmed";
    case AMQPPUB_NACKED:
        return "nacked";
    case AMQPPUB_RETURNED:
        return "returned";
    case AMQPPUB_REFUSED:
        return "refused";
    }
    return "?";
}

/* ---------------------------------------------------------------- the ledger */

int amqppub_ledger_init(struct amqppub_ledger *l, const struct amqp_out *msg, enum amqppub_outcome *outcome, int n)
{
    memset(l, 0, sizeof *l);
    l->msg = msg;
    l->outcome = outcome;
    l->n = n > 0 ? n : 0;
    for (int i = 0; i < l->n; i++)
        outcome[i] = AMQPPUB_UNKNOWN;
    if (l->n == 0)
        return 0;
    l->tag = calloc((size_t)l->n, sizeof *l->tag);
    l->open = calloc((size_t)l->n, 1);
    if (l->tag == NULL || l->open == NULL) {
        amqppub_ledger_free(l);
        return -1;
    }
    return 0;
}

void amqppub_ledger_free(struct amqppub_ledger *l)
{
    free(l->tag);
    free(l->open);
    l->tag = NULL;
    l->open = NULL;
}

void amqppub_ledger_sent(struct amqppub_ledger *l, int i, uint64_t tag)
{
    if (i < 0 || i >= l->n || l->open[i])
        return;
    l->tag[i] = tag;
    l->open[i] = 1;
    l->waiting++;
}

int amqppub_ledger_confirm(struct amqppub_ledger *l, uint64_t tag, int multiple, int ack)
{
    int settled = 0;
    /* tags grow with the index: stop at the first one past `tag` */
    for (int i = 0; i < l->n && l->waiting > 0; i++) {
        if (!l->open[i])
            continue;
        if (l->tag[i] > tag)
            break;
        if (l->tag[i] != tag && !multiple)
            continue;
        l->open[i] = 0;
        l->waiting--;
        settled++;
        if (l->outcome[i] == AMQPPUB_UNKNOWN)
            l->outcome[i] = ack ? AMQPPUB_CONFIRMED : AMQPPUB_NACKED;
    }
    return settled;
}

int amqppub_ledger_returned(struct amqppub_ledger *l, const char *id, size_t id_len, const char *exchange,
                            size_t exchange_len, const char *routing_key, size_t routing_key_len)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < l->n; i++) {
            const struct amqp_out *m = &l->msg[i];
            if (!l->open[i] || l->outcome[i] != AMQPPUB_UNKNOWN)
                continue;
            if (!bytes_eq(m->exchange, exchange, exchange_len) ||
                !bytes_eq(m->routing_key, routing_key, routing_key_len))
                continue;
            if (pass == 0 && !bytes_eq(m->id, id, id_len))
                continue;
            l->outcome[i] = AMQPPUB_RETURNED;
            return i;
        }
    }
    return -1;
}

int amqppub_ledger_refused(struct amqppub_ledger *l, const char *text, size_t len)
{
    static const char open_q[] = "exchange '";
    const char *a = memmem(text, len, open_q, sizeof open_q - 1);
    if (a == NULL)
        return -1;
    a += sizeof open_q - 1;
    const char *end = text + len;
    /* the name may hold a quote: it ends at the "' in vhost" that follows it, else at the next quote */
    const char *b = memmem(a, (size_t)(end - a), "' in vhost", 10);
    if (b == NULL)
        b = memchr(a, '\'', (size_t)(end - a));
    if (b == NULL)
        return -1;
    size_t n = (size_t)(b - a);
    int is_default = n == 11 && memcmp(a, "amq.default", 11) == 0; /* RabbitMQ's name for "" */
    for (int i = 0; i < l->n; i++) {
        if (!l->open[i] || l->outcome[i] != AMQPPUB_UNKNOWN)
            continue;
        const char *ex = l->msg[i].exchange ? l->msg[i].exchange : "";
        if (bytes_eq(ex, a, n) || (is_default && ex[0] == '\0')) {
            l->outcome[i] = AMQPPUB_REFUSED;
            l->open[i] = 0;
            l->waiting--;
            return i;
        }
    }
    return -1;
}

/* ---------------------------------------------------------------- the watchdog */

static void *watchdog_main(void *arg)
{
    struct watchdog *w = arg;
    log_set_thread_name("amqp-watchdog");
    pthread_mutex_lock(&w->lock);
    while (!w->bg.stop) {
        if (!w->armed) {
            pthread_cond_wait(&w->cond, &w->lock);
            continue;
        }
        int64_t left = w->deadline_us - clock_mono_us();
        if (left <= 0) {
            shutdown(w->fd, SHUT_RDWR); /* the blocked call fails; the fd stays open until its owner drops it */
            w->fired = 1;
            w->armed = 0;
            continue;
        }
        clock_cond_wait_us(&w->cond, &w->lock, left);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void watchdog_arm(struct watchdog *w, int fd, int64_t deadline_us)
{
    pthread_mutex_lock(&w->lock);
    w->fd = fd;
    w->deadline_us = deadline_us + WATCHDOG_GRACE;
    w->armed = fd >= 0;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Disarm; returns 1 when it had cut the socket since it was armed. */
static int watchdog_disarm(struct watchdog *w)
{
    pthread_mutex_lock(&w->lock);
    int fired = w->fired;
    w->armed = 0;
    w->fired = 0;
    pthread_mutex_unlock(&w->lock);
    return fired;
}

/* ---------------------------------------------------------------- the connection */

/* Close the socket and forget the connection (and its channel and blocked state). */
static void pub_drop(struct amqppub *p)
{
    if (p->conn == NULL)
        return;
    if (watchdog_disarm(&p->wd))
        p->cut = 1;
    amqp_destroy_connection(p->conn);
    p->conn = NULL;
    p->channel_open = 0;
    p->blocked = 0;
}

/* An RPC's reply into p->err; 0 when it was a normal reply. */
static int rpc_check(struct amqppub *p, amqp_rpc_reply_t r, const char *what)
{
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return 0;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        seterr(p, "%s: %s", what, amqp_error_string2(r.library_error));
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            seterr(p, "%s: the broker closed the connection: %u %.*s", what, m->reply_code, (int)m->reply_text.len,
                   (const char *)m->reply_text.bytes);
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            seterr(p, "%s: the broker closed the channel: %u %.*s", what, m->reply_code, (int)m->reply_text.len,
                   (const char *)m->reply_text.bytes);
        } else {
            seterr(p, "%s: unexpected %s", what, amqp_method_name(r.reply.id));
        }
        break;
    default:
        seterr(p, "%s: no reply", what);
        break;
    }
    return -1;
}

static int pub_open_channel(struct amqppub *p, int64_t deadline_us)
{
    struct timeval tv = tv_until(deadline_us, 1000);
    amqp_set_rpc_timeout(p->conn, &tv);
    amqp_channel_open(p->conn, CHANNEL);
    if (rpc_check(p, amqp_get_rpc_reply(p->conn), "channel.open") < 0)
        return -1;
    amqp_confirm_select(p->conn, CHANNEL);
    if (rpc_check(p, amqp_get_rpc_reply(p->conn), "confirm.select") < 0)
        return -1;
    p->channel_open = 1;
    p->next_tag = 1;
    return 0;
}

static int pub_connect_once(struct amqppub *p, int64_t deadline_us)
{
    p->conn = amqp_new_connection();
    if (p->conn == NULL) {
        seterr(p, "out of memory");
        return -1;
    }
    amqp_socket_t *sock = amqp_tcp_socket_new(p->conn);
    if (sock == NULL) {
        seterr(p, "out of memory");
        return -1;
    }
    struct timeval tv = tv_until(deadline_us, 1000);
    int rc = amqp_socket_open_noblock(sock, p->url.host, p->url.port, &tv);
    if (rc != AMQP_STATUS_OK) {
        seterr(p, "connect to %s:%d: %s", p->url.host, p->url.port, amqp_error_string2(rc));
        return -1;
    }
    watchdog_arm(&p->wd, amqp_get_sockfd(p->conn), deadline_us);
    tv = tv_until(deadline_us, 1000);
    amqp_set_handshake_timeout(p->conn, &tv);
    amqp_set_rpc_timeout(p->conn, &tv);

    /* connection_name shows in the broker's connection list; connection.blocked asks the
     * broker to say so when it stops reading publishers (memory or disk alarm) */
    amqp_table_entry_t caps[1], props[2];
    caps[0].key = amqp_cstring_bytes("connection.blocked");
    caps[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
    caps[0].value.value.boolean = 1;
    props[0].key = amqp_cstring_bytes("connection_name");
    props[0].value.kind = AMQP_FIELD_KIND_UTF8;
    props[0].value.value.bytes = amqp_cstring_bytes(p->name);
    props[1].key = amqp_cstring_bytes("capabilities");
    props[1].value.kind = AMQP_FIELD_KIND_TABLE;
    props[1].value.value.table = (amqp_table_t){.num_entries = 1, .entries = caps};
    amqp_table_t client = {.num_entries = 2, .entries = props};
    amqp_rpc_reply_t r = amqp_login_with_properties(p->conn, p->url.vhost, 0, FRAME_MAX, 0, &client,
                                                    AMQP_SASL_METHOD_PLAIN, p->url.user, p->url.password);
    if (rpc_check(p, r, "login") < 0)
        return -1;
    return pub_open_channel(p, deadline_us);
}

/* Connect (socket, login, channel, confirms) unless the backoff forbids it before the deadline. */
static int pub_open(struct amqppub *p, int64_t deadline_us)
{
    int64_t now = clock_mono_us();
    if (now < p->retry_at_us) {
        if (p->retry_at_us >= deadline_us) {
            seterr(p, "not connected (%.400s); next attempt in %lld ms", p->connect_err,
                   (long long)((p->retry_at_us - now) / 1000));
            return -1;
        }
        int64_t us = p->retry_at_us - now;
        struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    p->cut = 0;
    if (pub_connect_once(p, deadline_us) < 0) {
        pub_drop(p);
        if (p->cut) {
            char why[sizeof p->err];
            snprintf(why, sizeof why, "%s", p->err);
            seterr(p, "connect: timed out (%s)", why);
        }
        snprintf(p->connect_err, sizeof p->connect_err, "%s", p->err);
        p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (p->backoff_ms > BACKOFF_MAX_MS)
            p->backoff_ms = BACKOFF_MAX_MS;
        p->retry_at_us = clock_mono_us() + (int64_t)p->backoff_ms * 1000;
        log_warn("amqp %s: %s (next attempt in %d ms)", p->where, p->err, p->backoff_ms);
        return -1;
    }
    if (p->backoff_ms)
        log_info("amqp %s: connected again", p->where);
    else
        log_info("amqp %s: connected", p->where);
    p->backoff_ms = 0;
    p->retry_at_us = 0;
    p->connect_err[0] = '\0';
    return 0;
}

/* ---------------------------------------------------------------- reading */

/* Next frame until the deadline (0 = only what has arrived). AMQP_STATUS_* */
static int wait_frame(struct amqppub *p, amqp_frame_t *f, int64_t deadline_us)
{
    amqp_maybe_release_buffers(p->conn);
    struct timeval tv = tv_until(deadline_us, 0);
    return amqp_simple_wait_frame_noblock(p->conn, f, &tv);
}

/* The socket failed or closed under a read or write: say so and drop. -1. */
static int lost(struct amqppub *p, const char *what, int status)
{
    seterr(p, "%s: %s", what, amqp_error_string2(status));
    pub_drop(p);
    if (p->cut) {
        char why[sizeof p->err];
        snprintf(why, sizeof why, "%s", p->err);
        seterr(p, "timed out (%s)", why);
    } else {
        log_warn("amqp %s: connection lost: %s", p->where, p->err);
    }
    return -1;
}

static int on_connection_close(struct amqppub *p, const amqp_frame_t *f)
{
    const amqp_connection_close_t *m = f->payload.method.decoded;
    seterr(p, "the broker closed the connection: %u %.*s", m->reply_code, (int)m->reply_text.len,
           (const char *)m->reply_text.bytes);
    amqp_connection_close_ok_t ok;
    memset(&ok, 0, sizeof ok);
    (void)amqp_send_method(p->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    log_warn("amqp %s: %s", p->where, p->err);
    pub_drop(p);
    return -1;
}

/* After a basic.return: its header (for the message-id) and body, then the ledger. */
static int read_return(struct amqppub *p, struct amqppub_ledger *l, const amqp_basic_return_t *ret)
{
    /* the header and body follow the method at once, but may be a segment behind: wait for
     * them up to the call's deadline even when only draining */
    int64_t deadline_us = p->call_deadline_us;
    char exchange[SHORTSTR_MAX + 1], rkey[SHORTSTR_MAX + 1], id[SHORTSTR_MAX + 1], text[128];
    size_t exchange_len = ret->exchange.len < SHORTSTR_MAX ? ret->exchange.len : SHORTSTR_MAX;
    size_t rkey_len = ret->routing_key.len < SHORTSTR_MAX ? ret->routing_key.len : SHORTSTR_MAX;
    size_t id_len = 0;
    memcpy(exchange, ret->exchange.bytes, exchange_len);
    memcpy(rkey, ret->routing_key.bytes, rkey_len);
    snprintf(text, sizeof text, "%u %.*s", ret->reply_code, (int)ret->reply_text.len,
             (const char *)ret->reply_text.bytes);

    int have_header = 0;
    uint64_t body_left = 0;
    while (!have_header || body_left > 0) {
        amqp_frame_t f;
        /* ret points into the frame pool: everything needed was copied above */
        int rc = wait_frame(p, &f, deadline_us);
        if (rc == AMQP_STATUS_TIMEOUT) {
            seterr(p, "timed out reading a returned message");
            pub_drop(p);
            return -1;
        }
        if (rc != AMQP_STATUS_OK)
            return lost(p, "reading a returned message", rc);
        if (f.channel != CHANNEL) {
            if (f.frame_type == AMQP_FRAME_METHOD && f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)
                return on_connection_close(p, &f);
            continue;
        }
        if (!have_header) {
            if (f.frame_type != AMQP_FRAME_HEADER) {
                seterr(p, "protocol error: a returned message without its header");
                pub_drop(p);
                return -1;
            }
            const amqp_basic_properties_t *bp = f.payload.properties.decoded;
            if (bp->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
                id_len = bp->message_id.len < SHORTSTR_MAX ? bp->message_id.len : SHORTSTR_MAX;
                memcpy(id, bp->message_id.bytes, id_len);
            }
            body_left = f.payload.properties.body_size;
            have_header = 1;
        } else if (f.frame_type == AMQP_FRAME_BODY) {
            size_t got = f.payload.body_fragment.len;
            body_left -= got < body_left ? got : body_left;
        } else {
            seterr(p, "protocol error: a returned message cut short");
            pub_drop(p);
            return -1;
        }
    }
    if (l != NULL) {
        int i = amqppub_ledger_returned(l, id, id_len, exchange, exchange_len, rkey, rkey_len);
        if (i < 0)
            log_warn("amqp %s: a returned message (%s, message-id %.*s) matches none of the batch", p->where, text,
                     (int)id_len, id);
        else
            log_debug("amqp %s: message %.*s returned: %s", p->where, (int)id_len, id, text);
    }
    return 1;
}

/* Read one frame until the deadline (0 = only what has arrived) and act on it. 1 = a frame
 * was handled, 0 = none came in time, -1 = the connection is gone (dropped, p->err says
 * why), -2 = the broker closed the channel (p->err). */
static int pub_read(struct amqppub *p, struct amqppub_ledger *l, int64_t deadline_us)
{
    amqp_frame_t f;
    int rc = wait_frame(p, &f, deadline_us);
    if (rc == AMQP_STATUS_TIMEOUT)
        return 0;
    if (rc != AMQP_STATUS_OK)
        return lost(p, "read", rc);
    if (f.frame_type != AMQP_FRAME_METHOD)
        return 1;
    switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        const amqp_basic_ack_t *a = f.payload.method.decoded;
        if (l != NULL && f.channel == CHANNEL)
            amqppub_ledger_confirm(l, a->delivery_tag, a->multiple, 1);
        return 1;
    }
    case AMQP_BASIC_NACK_METHOD: {
        const amqp_basic_nack_t *a = f.payload.method.decoded;
        if (l != NULL && f.channel == CHANNEL)
            amqppub_ledger_confirm(l, a->delivery_tag, a->multiple, 0);
        return 1;
    }
    case AMQP_BASIC_RETURN_METHOD:
        return read_return(p, l, f.payload.method.decoded);
    case AMQP_CHANNEL_CLOSE_METHOD: {
        const amqp_channel_close_t *m = f.payload.method.decoded;
        seterr(p, "the broker closed the channel: %u %.*s", m->reply_code, (int)m->reply_text.len,
               (const char *)m->reply_text.bytes);
        if (l != NULL)
            amqppub_ledger_refused(l, m->reply_text.bytes, m->reply_text.len);
        p->channel_open = 0;
        amqp_channel_close_ok_t ok;
        memset(&ok, 0, sizeof ok);
        rc = amqp_send_method(p->conn, f.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        log_warn("amqp %s: %s", p->where, p->err);
        if (rc != AMQP_STATUS_OK) {
            char why[sizeof p->err];
            snprintf(why, sizeof why, "%s", p->err);
            lost(p, "channel.close-ok", rc);
            seterr(p, "%s", why);
        }
        return -2;
    }
    case AMQP_CONNECTION_CLOSE_METHOD:
        return on_connection_close(p, &f);
    case AMQP_CONNECTION_BLOCKED_METHOD: {
        const amqp_connection_blocked_t *b = f.payload.method.decoded;
        p->blocked = 1;
        snprintf(p->blocked_reason, sizeof p->blocked_reason, "%.*s", (int)b->reason.len,
                 (const char *)b->reason.bytes);
        log_warn("amqp %s: the broker blocks publishers: %s", p->where, p->blocked_reason);
        return 1;
    }
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
        p->blocked = 0;
        log_info("amqp %s: the broker accepts publishers again", p->where);
        return 1;
    default:
        return 1;
    }
}

/* Make the connection and channel ready for a batch: read what arrived since the last call
 * (a close, a blocked notice), reconnect or reopen as needed, arm the watchdog. */
static int pub_prepare(struct amqppub *p, int64_t deadline_us)
{
    p->call_deadline_us = deadline_us;
    if (p->conn != NULL) {
        watchdog_arm(&p->wd, amqp_get_sockfd(p->conn), deadline_us);
        while (pub_read(p, NULL, 0) > 0)
            ;
    }
    if (p->conn == NULL) {
        if (pub_open(p, deadline_us) < 0)
            return -1;
    } else if (!p->channel_open) {
        if (pub_open_channel(p, deadline_us) < 0) {
            char why[sizeof p->err];
            snprintf(why, sizeof why, "%s", p->err);
            pub_drop(p);
            seterr(p, "%s%s", p->cut ? "timed out: " : "", why);
            return -1;
        }
    }
    if (p->blocked) {
        seterr(p, "the broker blocks publishers (%s)", p->blocked_reason);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the API */

struct amqppub *amqppub_new(const char *url, const char *name, char *err, size_t errlen)
{
    struct amqpurl u;
    char why[256];
    if (amqpurl_parse(url, &u, why, sizeof why) < 0) {
        snprintf(err, errlen, "bad amqp url: %s", why);
        return NULL;
    }
    struct amqppub *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->url = u;
    snprintf(p->name, sizeof p->name, "%s", name && name[0] ? name : "hourglass");
    amqpurl_redact(&u, p->where, sizeof p->where);
    p->wd.fd = -1;
    pthread_mutex_init(&p->wd.lock, NULL);
    pthread_cond_init(&p->wd.cond, NULL);
    p->wd.bg = (struct bgthread)BGTHREAD_INIT(&p->wd.lock, &p->wd.cond, NULL);
    if (bgthread_start(&p->wd.bg, watchdog_main, &p->wd) < 0) {
        snprintf(err, errlen, "cannot start the amqp watchdog thread");
        pthread_cond_destroy(&p->wd.cond);
        pthread_mutex_destroy(&p->wd.lock);
        free(p);
        return NULL;
    }
    return p;
}

void amqppub_free(struct amqppub *p)
{
    if (p == NULL)
        return;
    if (p->conn != NULL) {
        int64_t deadline = clock_mono_us() + (int64_t)CLOSE_TIMEOUT_MS * 1000;
        struct timeval tv = tv_until(deadline, 1000);
        watchdog_arm(&p->wd, amqp_get_sockfd(p->conn), deadline);
        amqp_set_rpc_timeout(p->conn, &tv);
        (void)amqp_connection_close(p->conn, AMQP_REPLY_SUCCESS);
        pub_drop(p);
    }
    bgthread_stop(&p->wd.bg, 0);
    pthread_cond_destroy(&p->wd.cond);
    pthread_mutex_destroy(&p->wd.lock);
    free(p);
}

int amqppub_connect(struct amqppub *p, int timeout_ms)
{
    p->err[0] = '\0';
    p->cut = 0;
    int64_t deadline = clock_mono_us() + (int64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000;
    int rc = pub_prepare(p, deadline);
    if (p->conn != NULL && watchdog_disarm(&p->wd)) {
        seterr(p, "timed out");
        pub_drop(p);
        rc = -1;
    }
    return rc;
}

const char *amqppub_error(const struct amqppub *p)
{
    return p->err;
}

int amqppub_connected(const struct amqppub *p)
{
    return p->conn != NULL && p->channel_open;
}

/* The body of amqppub_publish_batch, with the ledger set up. */
static int publish(struct amqppub *p, struct amqppub_ledger *l, int64_t deadline_us, int timeout_ms)
{
    const struct amqp_out *msgs = l->msg;
    int n = l->n, refused = 0;
    if (pub_prepare(p, deadline_us) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        const struct amqp_out *m = &msgs[i];
        const char *ex = m->exchange ? m->exchange : "", *rk = m->routing_key ? m->routing_key : "";
        const char *id = m->id ? m->id : "", *topic = m->topic ? m->topic : "";
        if (strlen(ex) > SHORTSTR_MAX || strlen(rk) > SHORTSTR_MAX || strlen(id) > SHORTSTR_MAX) {
            l->outcome[i] = AMQPPUB_REFUSED;
            seterr(p, "message %d: exchange, routing key or id longer than %d bytes", i, SHORTSTR_MAX);
            refused++;
            continue;
        }
        if (i > 0 && i % DRAIN_EVERY == 0) {
            int r;
            while ((r = pub_read(p, l, 0)) > 0)
                ;
            if (r < 0)
                return -1;
        }
        amqp_table_entry_t h[5];
        int nh = 3;
        h[0].key = amqp_cstring_bytes("Hourglass-Id");
        h[0].value.kind = AMQP_FIELD_KIND_UTF8;
        h[0].value.value.bytes = amqp_cstring_bytes(id);
        h[1].key = amqp_cstring_bytes("Hourglass-Topic");
        h[1].value.kind = AMQP_FIELD_KIND_UTF8;
        h[1].value.value.bytes = amqp_cstring_bytes(topic);
        h[2].key = amqp_cstring_bytes("Hourglass-Attempt");
        h[2].value.kind = AMQP_FIELD_KIND_I64;
        h[2].value.value.i64 = m->attempt;
        /* W3C Trace Context as message headers (OpenTelemetry's AMQP propagation reads them) */
        const char *trace[2][2] = {{"traceparent", m->traceparent},
                                   {"tracestate", m->traceparent ? m->tracestate : NULL}};
        for (int k = 0; k < 2; k++)
            if (trace[k][1]) {
                h[nh].key = amqp_cstring_bytes(trace[k][0]);
                h[nh].value.kind = AMQP_FIELD_KIND_UTF8;
                h[nh++].value.value.bytes = amqp_cstring_bytes(trace[k][1]);
            }
        amqp_basic_properties_t props;
        memset(&props, 0, sizeof props);
        props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
                       AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_TIMESTAMP_FLAG;
        props.content_type = amqp_cstring_bytes("application/json");
        props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
        props.message_id = amqp_cstring_bytes(id);
        props.timestamp = (uint64_t)(clock_unix_ms() / 1000);
        props.headers = (amqp_table_t){.num_entries = nh, .entries = h};
        amqp_bytes_t body = {.len = m->body ? m->body_len : 0, .bytes = (void *)m->body};
        int rc =
            amqp_basic_publish(p->conn, CHANNEL, amqp_cstring_bytes(ex), amqp_cstring_bytes(rk), 1, 0, &props, body);
        if (rc != AMQP_STATUS_OK)
            return lost(p, "publish", rc);
        amqppub_ledger_sent(l, i, p->next_tag++);
    }
    while (l->waiting > 0) {
        int r = pub_read(p, l, deadline_us);
        if (r < 0)
            return -1;
        if (r == 0) {
            seterr(p, "no confirm for %d of %d messages within %d ms", l->waiting, n, timeout_ms);
            log_warn("amqp %s: %s; dropping the connection", p->where, p->err);
            pub_drop(p);
            return -1;
        }
    }
    return refused ? -1 : 0;
}

int amqppub_publish_batch(struct amqppub *p, const struct amqp_out *msgs, int n, enum amqppub_outcome *outcome,
                          int timeout_ms)
{
    struct amqppub_ledger l;
    p->err[0] = '\0';
    p->cut = 0;
    if (amqppub_ledger_init(&l, msgs, outcome, n) < 0) {
        seterr(p, "out of memory");
        return -1;
    }
    if (l.n == 0)
        return 0;
    int64_t deadline = clock_mono_us() + (int64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000;
    int rc = publish(p, &l, deadline, timeout_ms);
    amqppub_ledger_free(&l);
    if (p->conn != NULL && watchdog_disarm(&p->wd)) {
        /* cut after the last read: the batch is settled, but the socket is not usable */
        pub_drop(p);
    }
    if (rc < 0 && p->cut && strncmp(p->err, "timed out", 9) != 0) {
        char why[sizeof p->err];
        snprintf(why, sizeof why, "%s", p->err);
        seterr(p, "timed out after %d ms (%s)", timeout_ms, why);
    }
    return rc;
}
