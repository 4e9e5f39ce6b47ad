/* rconn.c — see rconn.h.
 *
 * States: DOWN (waiting to reconnect) -> CONNECTING (TCP/unix connect in flight) ->
 * SETUP (AUTH/SELECT/SCRIPT LOAD sent, waiting for their replies) -> UP. Any failure
 * goes back to DOWN and arms the reconnect timer (100 ms doubling to 2 s).
 *
 * Connections of one process fail together but back off independently, so without help
 * one HTTP worker could answer 503 for two seconds after Redis came back while another
 * already serves. Any connection reaching UP therefore bumps a process-wide epoch, and a
 * connection waiting out its backoff that sees the epoch move reconnects at once.
 *
 * Timeout rule: while commands are pending, some reply must arrive at least every
 * timeout_ms; otherwise the connection is dropped. Replies arrive in order, so "no reply
 * for timeout_ms" is the same as "the oldest pending command waited timeout_ms".
 *
 * A hung Redis (not refusing, just not answering) is found only by a connection that was
 * waiting for a reply. Another connection with nothing pending would go on counting as up,
 * and send each new request into the hang for a whole timeout (and /health on that worker
 * would say "up"). So a timeout counts for the whole process: once any connection timed out,
 * every connection counts as down until some connection hears from Redis again (a reply, an
 * error reply, a pub/sub message — the reconnecting one's set-up replies at the latest). */
#include "rconn.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"

#include <event2/event.h>
#include <stdatomic.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>

enum rc_state { RC_DOWN, RC_CONNECTING, RC_SETUP, RC_UP };

#define CHANNELS_MAX 4
#define WATCHDOG_TICK_MAX_MS 100

/* Bumped whenever any connection of this process becomes usable ("Redis is back"). */
static atomic_uint up_epoch;

/* Monotonic µs of the last answer any connection got, and of the last timeout any had. */
static _Atomic int64_t last_answer_us, last_hang_us;

static void heard_from_redis(int64_t now)
{
    atomic_store_explicit(&last_answer_us, now, memory_order_relaxed);
}

struct rconn {
    struct event_base *base;
    redisAsyncContext *ac;
    enum rc_state state;
    char name[32];
    char address[256];
    char password[256];
    int db;
    int timeout_ms;
    int load_scripts;

    rconn_state_fn on_state;
    void *state_arg;

    /* subscriber mode */
    int subscriber;
    char *channels[CHANNELS_MAX];
    int nchannels;
    rconn_message_fn on_message;
    void *message_arg;

    struct event *reconnect_timer;
    struct event *watchdog;
    int backoff_ms;
    unsigned down_epoch;     /* up_epoch when the reconnect timer was armed */
    int64_t state_since_us;  /* when CONNECTING/SETUP began */
    int pending;             /* commands sent, not answered */
    int64_t progress_us;     /* last reply, or first send after idle */
    int setup_pending;       /* set-up replies still awaited */
    int reload_scheduled;
    int64_t last_error_log_us;
    int freeing;
};

struct pending {
    struct rconn *rc;
    rconn_reply_fn fn;
    void *arg;
    int64_t sent_us;
};

static void connect_now(struct rconn *rc);

int rconn_parse_address(const char *address, char *host, size_t hostlen, int *port, int *is_unix)
{
    if (strncmp(address, "unix:", 5) == 0) {
        if (address[5] == '\0' || strlen(address + 5) >= hostlen)
            return -1;
        strcpy(host, address + 5);
        *port = 0;
        *is_unix = 1;
        return 0;
    }
    *is_unix = 0;
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon == address)
        return -1;
    const char *h = address;
    size_t hlen = (size_t)(colon - address);
    if (h[0] == '[') {
        if (hlen < 3 || h[hlen - 1] != ']')
            return -1;
        h++;
        hlen -= 2;
    }
    if (hlen >= hostlen)
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535)
        return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
}

static void set_state(struct rconn *rc, enum rc_state state)
{
    enum rc_state old = rc->state;
    rc->state = state;
    if (state == RC_CONNECTING || state == RC_SETUP)
        rc->state_since_us = clock_mono_us();
    if (old != RC_UP && state == RC_UP) {
        rc->backoff_ms = 100;
        atomic_fetch_add(&up_epoch, 1);
        metrics_gauge_add(MG_REDIS_UP, 1);
        log_info("redis %s: connected to %s", rc->name, rc->address);
        if (rc->on_state)
            rc->on_state(rc, 1, rc->state_arg);
    } else if (old == RC_UP && state != RC_UP) {
        metrics_gauge_add(MG_REDIS_UP, -1);
        if (rc->on_state && !rc->freeing)
            rc->on_state(rc, 0, rc->state_arg);
    }
}

static void schedule_reconnect(struct rconn *rc)
{
    if (rc->freeing)
        return;
    struct timeval tv = {rc->backoff_ms / 1000, (rc->backoff_ms % 1000) * 1000};
    rc->down_epoch = atomic_load(&up_epoch);
    event_add(rc->reconnect_timer, &tv);
    rc->backoff_ms = rc->backoff_ms * 2 > 2000 ? 2000 : rc->backoff_ms * 2;
}

/* Drop the connection now: every pending callback runs with NULL. */
static void drop(struct rconn *rc, const char *why)
{
    redisAsyncContext *ac = rc->ac;
    if (ac == NULL)
        return;
    if (why)
        log_warn("redis %s: dropping connection to %s: %s", rc->name, rc->address, why);
    rc->ac = NULL;
    ac->data = NULL; /* our disconnect callback ignores contexts we already let go */
    set_state(rc, RC_DOWN);
    rc->setup_pending = 0;
    redisAsyncFree(ac);
    schedule_reconnect(rc);
}

static void on_connect(const redisAsyncContext *ac, int status);
static void on_disconnect(const redisAsyncContext *ac, int status);

static void log_error_limited(struct rconn *rc, const char *what, const char *detail)
{
    int64_t now = clock_mono_us();
    if (now - rc->last_error_log_us > 1000000) {
        rc->last_error_log_us = now;
        log_warn("redis %s: %s: %s", rc->name, what, detail);
    }
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct pending *p = privdata;
    struct rconn *rc = p->rc;
    redisReply *reply = r;
    int64_t now = clock_mono_us();

    rc->pending--;
    rc->progress_us = now;
    if (reply != NULL)
        heard_from_redis(now);
    metrics_observe(MH_REDIS_LATENCY, (double)(now - p->sent_us) / 1e6);

    if (reply == NULL) {
        metrics_inc(MC_REDIS_ERRORS, 1);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        metrics_inc(MC_REDIS_ERRORS, 1);
        if (strncmp(reply->str, "NOSCRIPT", 8) == 0 && rc->load_scripts && !rc->reload_scheduled && ac) {
            /* Someone flushed the script cache: load everything again on this connection. */
            rc->reload_scheduled = 1;
            log_warn("redis %s: scripts missing (SCRIPT FLUSH?); loading them again", rc->name);
            for (int id = 0; id < SCRIPT_COUNT; id++)
                redisAsyncCommand(ac, NULL, NULL, "SCRIPT LOAD %s", script_text((enum script_id)id));
        } else {
            log_error_limited(rc, "command failed", reply->str);
        }
        reply = NULL;
    }
    p->fn(reply, p->arg);
    free(p);
}

static int send_argv(struct rconn *rc, rconn_reply_fn fn, void *arg, int argc, const char **argv, const size_t *lens)
{
    struct pending *p = malloc(sizeof *p);
    if (p == NULL)
        return -1;
    p->rc = rc;
    p->fn = fn;
    p->arg = arg;
    p->sent_us = clock_mono_us();
    if (redisAsyncCommandArgv(rc->ac, on_reply, p, argc, argv, lens) != REDIS_OK) {
        free(p);
        return -1;
    }
    if (rc->pending++ == 0)
        rc->progress_us = p->sent_us;
    return 0;
}

int rconn_command(struct rconn *rc, rconn_reply_fn fn, void *arg, int argc, const char **argv, const size_t *lens)
{
    if (rc->state != RC_UP || rc->subscriber)
        return -1;
    return send_argv(rc, fn, arg, argc, argv, lens);
}

int rconn_eval(struct rconn *rc, enum script_id script, int argc, const char **argv, size_t *lens, rconn_reply_fn fn,
               void *arg)
{
    argv[0] = "EVALSHA";
    lens[0] = 7;
    argv[1] = script_sha(script);
    lens[1] = 40;
    argv[2] = "1";
    lens[2] = 1;
    return rconn_command(rc, fn, arg, argc, argv, lens);
}

/* Set-up replies: AUTH, SELECT, SCRIPT LOAD x N, SUBSCRIBE. Up once all have answered. */
static void on_setup_reply(redisReply *reply, void *arg)
{
    struct rconn *rc = arg;
    if (rc->state != RC_SETUP)
        return;
    if (reply == NULL) {
        drop(rc, "set-up command failed (wrong password or db?)");
        return;
    }
    if (--rc->setup_pending == 0)
        set_state(rc, RC_UP);
}

static void on_subscribe_message(redisAsyncContext *ac, void *r, void *privdata)
{
    struct rconn *rc = privdata;
    redisReply *reply = r;
    if (reply == NULL || rc->ac != ac)
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3)
        return;
    heard_from_redis(clock_mono_us());
    const char *kind = reply->element[0]->str;
    if (kind == NULL)
        return;
    if (strcmp(kind, "subscribe") == 0) {
        rc->progress_us = clock_mono_us();
        if (rc->state == RC_SETUP && --rc->setup_pending == 0)
            set_state(rc, RC_UP);
    } else if (strcmp(kind, "message") == 0 && reply->element[1]->str && reply->element[2]->str) {
        rc->on_message(reply->element[1]->str, reply->element[2]->str, reply->element[2]->len, rc->message_arg);
    }
}

static void begin_setup(struct rconn *rc)
{
    set_state(rc, RC_SETUP);
    rc->setup_pending = 0;
    rc->reload_scheduled = 0;
    if (rc->password[0]) {
        const char *argv[] = {"AUTH", rc->password};
        size_t lens[] = {4, strlen(rc->password)};
        if (send_argv(rc, on_setup_reply, rc, 2, argv, lens) == 0)
            rc->setup_pending++;
    }
    if (rc->db != 0 && !rc->subscriber) {
        char db[16];
        snprintf(db, sizeof db, "%d", rc->db);
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, strlen(db)};
        if (send_argv(rc, on_setup_reply, rc, 2, argv, lens) == 0)
            rc->setup_pending++;
    }
    {
        /* Named for CLIENT LIST ("hourglass-http-0", "hourglass-keeper"...). Not part of the
         * set-up that must succeed: a Redis that forbids CLIENT still serves us. */
        char name[sizeof rc->name + 16];
        snprintf(name, sizeof name, "hourglass-%s", rc->name);
        const char *argv[] = {"CLIENT", "SETNAME", name};
        size_t lens[] = {6, 7, strlen(name)};
        redisAsyncCommandArgv(rc->ac, NULL, NULL, 3, argv, lens);
    }
    if (rc->load_scripts)
        for (int id = 0; id < SCRIPT_COUNT; id++) {
            const char *text = script_text((enum script_id)id);
            const char *argv[] = {"SCRIPT", "LOAD", text};
            size_t lens[] = {6, 4, strlen(text)};
            if (send_argv(rc, on_setup_reply, rc, 3, argv, lens) == 0)
                rc->setup_pending++;
        }
    if (rc->subscriber) {
        const char *argv[CHANNELS_MAX + 1];
        size_t lens[CHANNELS_MAX + 1];
        argv[0] = "SUBSCRIBE";
        lens[0] = 9;
        for (int i = 0; i < rc->nchannels; i++) {
            argv[i + 1] = rc->channels[i];
            lens[i + 1] = strlen(rc->channels[i]);
        }
        /* The subscribe callback stays registered for every message on these channels. */
        if (redisAsyncCommandArgv(rc->ac, on_subscribe_message, rc, rc->nchannels + 1, argv, lens) == REDIS_OK)
            rc->setup_pending += rc->nchannels;
    }
    if (rc->setup_pending == 0)
        set_state(rc, RC_UP);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct rconn *rc = ac->data;
    if (rc == NULL)
        return;
    if (status != REDIS_OK) {
        log_error_limited(rc, "cannot connect", ac->errstr);
        rc->ac = NULL; /* hiredis frees the context after this callback */
        set_state(rc, RC_DOWN);
        schedule_reconnect(rc);
        return;
    }
    metrics_inc(MC_REDIS_RECONNECTS, 1);
    begin_setup(rc);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    struct rconn *rc = ac->data;
    if (rc == NULL)
        return;
    if (status != REDIS_OK)
        log_warn("redis %s: connection lost: %s", rc->name, ac->errstr);
    rc->ac = NULL;
    set_state(rc, RC_DOWN);
    schedule_reconnect(rc);
}

static void connect_now(struct rconn *rc)
{
    char host[256];
    int port, is_unix;
    if (rconn_parse_address(rc->address, host, sizeof host, &port, &is_unix) < 0)
        return;
    redisAsyncContext *ac = is_unix ? redisAsyncConnectUnix(host) : redisAsyncConnect(host, port);
    if (ac == NULL || ac->err) {
        log_error_limited(rc, "cannot connect", ac ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        schedule_reconnect(rc);
        return;
    }
    ac->data = rc;
    rc->ac = ac;
    redisLibeventAttach(ac, rc->base);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    set_state(rc, RC_CONNECTING);
}

static void on_reconnect_timer(evutil_socket_t fd, short what, void *arg)
{
    struct rconn *rc = arg;
    if (rc->ac == NULL)
        connect_now(rc);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    struct rconn *rc = arg;
    int64_t now = clock_mono_us();
    int64_t limit = (int64_t)rc->timeout_ms * 1000;
    if (rc->ac == NULL) {
        /* Backing off while another connection of ours got through: Redis is back. */
        if (atomic_load(&up_epoch) != rc->down_epoch && evtimer_pending(rc->reconnect_timer, NULL)) {
            event_del(rc->reconnect_timer);
            rc->backoff_ms = 100;
            connect_now(rc);
        }
        return;
    }
    if ((rc->state == RC_CONNECTING || rc->state == RC_SETUP) && now - rc->state_since_us > limit) {
        metrics_inc(MC_REDIS_TIMEOUTS, 1);
        atomic_store(&last_hang_us, now);
        drop(rc, rc->state == RC_CONNECTING ? "connect timed out" : "set-up timed out");
    } else if (rc->pending > 0 && now - rc->progress_us > limit) {
        metrics_inc(MC_REDIS_TIMEOUTS, 1);
        atomic_store(&last_hang_us, now);
        drop(rc, "no reply within the timeout");
    }
}

struct rconn *rconn_new(struct event_base *base, const struct rconn_config *cfg, rconn_state_fn on_state,
                        void *state_arg)
{
    char host[256];
    int port, is_unix;
    if (rconn_parse_address(cfg->address, host, sizeof host, &port, &is_unix) < 0)
        return NULL;
    struct rconn *rc = calloc(1, sizeof *rc);
    if (rc == NULL)
        return NULL;
    rc->base = base;
    snprintf(rc->name, sizeof rc->name, "%s", cfg->name);
    snprintf(rc->address, sizeof rc->address, "%s", cfg->address);
    snprintf(rc->password, sizeof rc->password, "%s", cfg->password ? cfg->password : "");
    rc->db = cfg->db;
    rc->timeout_ms = cfg->timeout_ms;
    rc->load_scripts = cfg->load_scripts;
    rc->on_state = on_state;
    rc->state_arg = state_arg;
    rc->backoff_ms = 100;
    rc->reconnect_timer = evtimer_new(base, on_reconnect_timer, rc);
    rc->watchdog = event_new(base, -1, EV_PERSIST, on_watchdog, rc);
    int tick = rc->timeout_ms / 4 < WATCHDOG_TICK_MAX_MS ? rc->timeout_ms / 4 : WATCHDOG_TICK_MAX_MS;
    struct timeval tv = {tick / 1000, (tick % 1000) * 1000};
    event_add(rc->watchdog, &tv);
    /* Connect from the loop, so a subscriber can register its channels first. */
    struct timeval now = {0, 0};
    event_add(rc->reconnect_timer, &now);
    return rc;
}

int rconn_subscribe(struct rconn *rc, const char *const *channels, int n, rconn_message_fn on_message, void *arg)
{
    if (n < 1 || n > CHANNELS_MAX || rc->ac != NULL)
        return -1;
    rc->subscriber = 1;
    rc->load_scripts = 0;
    for (int i = 0; i < n; i++)
        rc->channels[i] = strdup(channels[i]);
    rc->nchannels = n;
    rc->on_message = on_message;
    rc->message_arg = arg;
    return 0;
}

void rconn_free(struct rconn *rc)
{
    if (rc == NULL)
        return;
    rc->freeing = 1;
    if (rc->ac)
        drop(rc, NULL);
    event_free(rc->reconnect_timer);
    event_free(rc->watchdog);
    for (int i = 0; i < rc->nchannels; i++)
        free(rc->channels[i]);
    free(rc);
}

int rconn_is_up(const struct rconn *rc)
{
    return rc->state == RC_UP &&
           atomic_load_explicit(&last_hang_us, memory_order_relaxed) <=
               atomic_load_explicit(&last_answer_us, memory_order_relaxed);
}
