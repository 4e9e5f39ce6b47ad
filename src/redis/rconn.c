/* rconn.c — see rconn.h.
 *
 * States: DOWN (waiting to reconnect) -> CONNECTING (TCP/unix connect in flight) ->
 * SETUP (AUTH/SELECT/FUNCTION LOAD sent, waiting for their replies) -> UP. Any failure
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
 * error reply, a pub/sub message — the reconnecting one's set-up replies at the latest).
 *
 * The scripts are one Redis Functions library (scripts.h), loaded at set-up with FUNCTION LOAD
 * ("already exists" is as good as loaded: another connection or instance of this version was
 * first). A script call keeps its formatted command until answered. When it is answered
 * "Function not found" (cause "noscript": FUNCTION FLUSH, a Redis restarted without its data,
 * a proxy that moved us to another server) the library is loaded again and the call re-sent
 * behind the load on the same connection; Redis runs a connection's commands in order, so the
 * re-sent call finds its function. One reload serves every call that was sent before it: a
 * call triggers a new reload only when none was sent after the call itself (seq numbers below),
 * so a flush costs one reload however many calls were in flight, and every later flush gets its
 * own.
 *
 * Error replies are classified (rcause_classify). READONLY and LOADING are about the server,
 * not the command: the connection is dropped and counts as down until a reconnect finds a
 * master that has loaded (set-up asks ROLE). Every other error is the command's: the reply
 * fails, the cause is remembered for the HTTP layer (503 message, /health) and counted. */
#include "redis/rconn.h"
#include "redis/rcodec.h"
#include "base/clock.h"
#include "core/cluster.h"
#include "base/log.h"
#include "core/metrics.h"
#include "core/raddr.h"
#include "base/resolve.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>

enum rc_state { RC_DOWN, RC_CONNECTING, RC_SETUP, RC_UP };

#define CHANNELS_MAX         4
#define WATCHDOG_TICK_MAX_MS 100
#define NOSCRIPT_SENDS       5 /* sends of one script call before "not found" fails it (a flush per round trip) */

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
    int pass_cluster_errors; /* rconn_pass_cluster_errors */

    rconn_state_fn on_state;
    void *state_arg;

    /* subscriber mode */
    int subscriber;
    char *channels[CHANNELS_MAX];
    int nchannels;
    rconn_message_fn on_message;
    void *message_arg;

    /* A host name is resolved off the loop (resolve.h), then its addresses are tried in order,
     * one connect each, before backing off; being up again forgets them, so the next reconnect
     * resolves anew (a failover that moves the name is followed). */
    struct resolve *lookup; /* in flight, or NULL */
    char addrs[RESOLVE_MAX_ADDRS][INET6_ADDRSTRLEN];
    int naddrs, next_addr;

    struct event *reconnect_timer;
    struct event *watchdog;
    int backoff_ms;
    unsigned down_epoch;    /* up_epoch when the reconnect timer was armed */
    int64_t state_since_us; /* when CONNECTING/SETUP began */
    int pending;            /* commands sent, not answered */
    int64_t progress_us;    /* last reply, or first send after idle */
    int setup_pending;      /* set-up replies still awaited */
    uint64_t seq;           /* commands sent on this connection so far */
    uint64_t reload_seq;    /* seq of the last FUNCTION LOAD sent */
    unsigned seen_demote_epoch;
    struct pending *hung; /* replies swallowed by the fault seam, failed on drop */
    int64_t last_error_log_us;
    int freeing;

    /* Current trouble. Written by the owner thread under err_lock; read by any thread under
     * it (rconn_process_error), by the owner without it. */
    enum rcause cause;
    int cause_sticky; /* lasts until the connection is up again (it went down for it) */
    int cause_script; /* script whose call failed, -1 for a plain command */
    int64_t cause_at_us;
    char cause_text[RCONN_ERROR_TEXT];
    struct rconn *next_all, *prev_all; /* every connection of the process, under err_lock */
};

struct pending {
    struct rconn *rc;
    rconn_reply_fn fn;
    void *arg;
    int64_t sent_us;
    uint64_t seq;
    int script;       /* script id of a script call, -1 otherwise */
    int library_load; /* FUNCTION LOAD: "already exists" is a success */
    int sends;
    char *cmd; /* a script call's formatted command, kept for a re-send */
    size_t cmdlen;
    struct pending *next_hung;
};

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rconn *all_rconns;

/* READONLY and LOADING are the server's state, not one connection's: an idle connection to
 * the same server would go on counting as up (so requests pass api_require_redis and fail
 * later, or /health says up). The first connection to see it bumps this epoch; every other
 * connection to that address drops itself at its next watchdog tick, and its set-up (ROLE)
 * keeps it down while the server is a replica. */
static atomic_uint demote_epoch;
static struct {
    char address[256];
    enum rcause cause;
    char text[RCONN_ERROR_TEXT];
} demoted; /* under err_lock */

static rconn_fault_fn fault_fn;
static void *fault_arg;

void rconn_set_fault_hook(rconn_fault_fn fn, void *arg)
{
    fault_fn = fn;
    fault_arg = arg;
}

/* Remember why something failed (and count it). `text` need not be terminated. */
static void set_error(struct rconn *rc, enum rcause cause, int sticky, int script, const char *text, size_t len)
{
    if (len >= RCONN_ERROR_TEXT)
        len = RCONN_ERROR_TEXT - 1;
    pthread_mutex_lock(&err_lock);
    rc->cause = cause;
    rc->cause_sticky = sticky;
    rc->cause_script = script;
    rc->cause_at_us = clock_mono_us();
    for (size_t i = 0; i < len; i++) /* one line, printable: it goes into JSON and logs */
        rc->cause_text[i] = (text[i] == '\r' || text[i] == '\n') ? ' ' : text[i];
    rc->cause_text[len] = '\0';
    pthread_mutex_unlock(&err_lock);
}

static void set_error_str(struct rconn *rc, enum rcause cause, const char *text)
{
    set_error(rc, cause, 1, -1, text, strlen(text));
}

static void clear_error(struct rconn *rc)
{
    if (rc->cause == RCAUSE_NONE)
        return;
    pthread_mutex_lock(&err_lock);
    rc->cause = RCAUSE_NONE;
    pthread_mutex_unlock(&err_lock);
}

/* Caller holds err_lock or is the owner thread. */
static int error_current(const struct rconn *rc, int64_t now)
{
    return rc->cause != RCAUSE_NONE &&
           (rc->cause_sticky || now - rc->cause_at_us < (int64_t)RCONN_ERROR_HOLD_MS * 1000);
}

static void fill_error(const struct rconn *rc, int64_t now, struct rconn_error *out)
{
    out->cause = rc->cause;
    memcpy(out->text, rc->cause_text, sizeof out->text);
    out->age_ms = (now - rc->cause_at_us) / 1000;
}

enum rcause rconn_last_error(const struct rconn *rc, struct rconn_error *out)
{
    int64_t now = clock_mono_us();
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&err_lock);
    if (rc && error_current(rc, now))
        fill_error(rc, now, out);
    pthread_mutex_unlock(&err_lock);
    return out->cause;
}

enum rcause rconn_process_error(struct rconn_error *out)
{
    int64_t now = clock_mono_us();
    const struct rconn *best = NULL;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&err_lock);
    for (const struct rconn *rc = all_rconns; rc; rc = rc->next_all) {
        if (!error_current(rc, now))
            continue;
        int refuses = rcause_refuses(rc->cause), best_refuses = best && rcause_refuses(best->cause);
        if (best == NULL || refuses > best_refuses || (refuses == best_refuses && rc->cause_at_us > best->cause_at_us))
            best = rc;
    }
    if (best)
        fill_error(best, now, out);
    pthread_mutex_unlock(&err_lock);
    return out->cause;
}

static void count_error(enum rcause cause)
{
    metrics_inc(MC_REDIS_ERRORS, 1);
    metrics_redis_error((int)cause);
}

static void connect_now(struct rconn *rc);

static void set_state(struct rconn *rc, enum rc_state state)
{
    enum rc_state old = rc->state;
    rc->state = state;
    if (state == RC_CONNECTING || state == RC_SETUP)
        rc->state_since_us = clock_mono_us();
    if (old != RC_UP && state == RC_UP) {
        rc->backoff_ms = 100;
        rc->naddrs = rc->next_addr = 0;
        clear_error(rc);
        rc->seen_demote_epoch = atomic_load(&demote_epoch); /* checked anew by ROLE just now */
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
    if (rc->next_addr < rc->naddrs) { /* another address of the host is still untried: now */
        struct timeval now = {0, 0};
        event_add(rc->reconnect_timer, &now);
        return;
    }
    rc->naddrs = rc->next_addr = 0;
    struct timeval tv = {rc->backoff_ms / 1000, (rc->backoff_ms % 1000) * 1000};
    rc->down_epoch = atomic_load(&up_epoch);
    event_add(rc->reconnect_timer, &tv);
    rc->backoff_ms = rc->backoff_ms * 2 > 2000 ? 2000 : rc->backoff_ms * 2;
}

static void free_pending(struct pending *p)
{
    free(p->cmd);
    free(p);
}

/* Replies the fault seam swallowed: their commands failed with the connection. */
static void fail_hung(struct rconn *rc)
{
    while (rc->hung) {
        struct pending *p = rc->hung;
        rc->hung = p->next_hung;
        rc->pending--;
        count_error(rc->cause != RCAUSE_NONE ? rc->cause : RCAUSE_DOWN);
        p->fn(NULL, p->arg);
        free_pending(p);
    }
}

void rconn_abort_fd(int fd)
{
    struct linger now = {1, 0};
    if (fd >= 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
}

/* Drop the connection now: every pending callback runs with NULL. `cause` (unless NONE, which
 * keeps the one already recorded) says why, for the callbacks and for the HTTP layer. The
 * close is abortive (rconn_abort_fd): commands still queued in the socket are dropped, not
 * delivered once a partition heals — by then they were given up on and answered. */
static void drop(struct rconn *rc, const char *why, enum rcause cause)
{
    redisAsyncContext *ac = rc->ac;
    if (ac == NULL)
        return;
    rconn_abort_fd(ac->c.fd);
    if (why)
        log_warn("redis %s: dropping connection to %s: %s", rc->name, rc->address, why);
    if (cause != RCAUSE_NONE)
        set_error_str(rc, cause, why ? why : rcause_name(cause));
    else if (rc->cause != RCAUSE_NONE) {
        pthread_mutex_lock(&err_lock);
        rc->cause_sticky = 1;
        pthread_mutex_unlock(&err_lock);
    }
    rc->ac = NULL;
    ac->data = NULL; /* our disconnect callback ignores contexts we already let go */
    set_state(rc, RC_DOWN);
    rc->setup_pending = 0;
    redisAsyncFree(ac); /* deferred by hiredis when we are inside one of its callbacks */
    fail_hung(rc);
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

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);
static void on_reload_reply(redisReply *reply, void *arg);
static int load_library(struct rconn *rc, rconn_reply_fn fn);

/* A script call answered "Function not found": reload (unless a reload already went out after this call
 * was sent) and re-send it behind the reload. 0 when re-sent: its callback waits for the new
 * answer. */
static int retry_after_reload(struct rconn *rc, redisAsyncContext *ac, struct pending *p)
{
    if (p->cmd == NULL || p->sends >= NOSCRIPT_SENDS || ac == NULL || rc->ac != ac || !rc->load_scripts)
        return -1;
    if (rc->reload_seq < p->seq) {
        log_warn("redis %s: functions missing (FUNCTION FLUSH?); loading library %s again", rc->name,
                 script_library_name());
        if (load_library(rc, on_reload_reply) < 0)
            return -1;
    }
    if (redisAsyncFormattedCommand(ac, on_reply, p, p->cmd, p->cmdlen) != REDIS_OK)
        return -1;
    p->seq = ++rc->seq;
    p->sends++;
    rc->pending++;
    return 0;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct pending *p = privdata;
    struct rconn *rc = p->rc;
    redisReply *reply = r;
    int64_t now = clock_mono_us();

    if (fault_fn && reply != NULL && rc->ac == ac) {
        enum rconn_fault f = fault_fn(rc, RCONN_AT_REPLY, p->script, fault_arg);
        if (f == RCONN_FAULT_HANG) {
            p->next_hung = rc->hung; /* still pending: the watchdog will see no progress */
            rc->hung = p;
            return;
        }
        if (f == RCONN_FAULT_DROP) {
            rc->pending--;
            drop(rc, "fault injected: reply dropped", RCAUSE_DOWN);
            count_error(RCAUSE_DOWN);
            p->fn(NULL, p->arg);
            free_pending(p);
            return;
        }
    }

    rc->pending--;
    rc->progress_us = now;
    if (reply != NULL)
        heard_from_redis(now);
    metrics_observe(MH_REDIS_LATENCY, (double)(now - p->sent_us) / 1e6);

    if (reply == NULL) {
        /* A drop recorded why (sticky); otherwise the socket went away and hiredis fails the
         * pending before it says so: an older error must not be taken for this one's cause. */
        if (rc->cause == RCAUSE_NONE || !rc->cause_sticky)
            set_error_str(rc, RCAUSE_DOWN, ac && ac->errstr[0] ? ac->errstr : "connection lost");
        count_error(rc->cause);
    } else if (reply->type == REDIS_REPLY_ERROR && rc->pass_cluster_errors &&
               cluster_error_kind(reply->str, reply->len) != CLUSTER_ERR_OTHER) {
        /* Where the slot lives, or a cluster settling: the owner re-routes the command. */
    } else if (reply->type == REDIS_REPLY_ERROR && p->library_load && script_library_present(reply->str, reply->len)) {
        /* loaded already: as good as an OK */
    } else if (reply->type == REDIS_REPLY_ERROR) {
        enum rcause cause = rcause_classify(reply->str, reply->len);
        count_error(cause);
        if (cause == RCAUSE_NOSCRIPT && retry_after_reload(rc, ac, p) == 0)
            return;
        set_error(rc, cause, 0, p->script, reply->str, reply->len);
        if ((cause == RCAUSE_READONLY || cause == RCAUSE_LOADING) && rc->ac == ac && ac != NULL) {
            /* The server, not this command, is the problem: reconnect until it is a master
             * that has loaded its data. Counts as down meanwhile. */
            char why[RCONN_ERROR_TEXT + 32];
            snprintf(why, sizeof why, "%s; reconnecting", rc->cause_text);
            pthread_mutex_lock(&err_lock);
            snprintf(demoted.address, sizeof demoted.address, "%s", rc->address);
            demoted.cause = cause;
            memcpy(demoted.text, rc->cause_text, sizeof demoted.text);
            rc->seen_demote_epoch = atomic_fetch_add(&demote_epoch, 1) + 1;
            pthread_mutex_unlock(&err_lock);
            drop(rc, why, RCAUSE_NONE);
        } else {
            log_error_limited(rc, "command failed", reply->str);
        }
        /* A full Redis refuses FUNCTION LOAD (it may write): the connection comes up all the
         * same — the library is most likely there already, and a call that finds it missing is
         * refused as OOM, which /health names — instead of staying down as if unreachable. */
        if (!(p->library_load && cause == RCAUSE_OOM))
            reply = NULL;
    } else if (rc->cause != RCAUSE_NONE && !rc->cause_sticky &&
               (rc->cause_script < 0 || rc->cause_script == p->script)) {
        clear_error(rc); /* what failed before works again */
    }
    p->fn(reply, p->arg);
    free_pending(p);
}

static struct pending *pending_new(struct rconn *rc, rconn_reply_fn fn, void *arg, int script)
{
    struct pending *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->rc = rc;
    p->fn = fn;
    p->arg = arg;
    p->script = script;
    return p;
}

/* Send p's command (argv, or p->cmd already formatted for a script call). */
static int send_pending(struct rconn *rc, struct pending *p, int argc, const char **argv, const size_t *lens)
{
    p->sent_us = clock_mono_us();
    int ok = p->cmd ? redisAsyncFormattedCommand(rc->ac, on_reply, p, p->cmd, p->cmdlen)
                    : redisAsyncCommandArgv(rc->ac, on_reply, p, argc, argv, lens);
    if (ok != REDIS_OK)
        return -1;
    p->seq = ++rc->seq;
    p->sends = 1;
    if (rc->pending++ == 0)
        rc->progress_us = p->sent_us;
    return 0;
}

/* Send a plain command; `library_load`: it is FUNCTION LOAD ("already exists" answers it). */
static int send_argv_as(struct rconn *rc, rconn_reply_fn fn, void *arg, int argc, const char **argv, const size_t *lens,
                        int library_load)
{
    struct pending *p = pending_new(rc, fn, arg, -1);
    if (p == NULL)
        return -1;
    p->library_load = library_load;
    if (send_pending(rc, p, argc, argv, lens) < 0) {
        free_pending(p);
        return -1;
    }
    return 0;
}

static int send_argv(struct rconn *rc, rconn_reply_fn fn, void *arg, int argc, const char **argv, const size_t *lens)
{
    return send_argv_as(rc, fn, arg, argc, argv, lens, 0);
}

int rconn_command(struct rconn *rc, rconn_reply_fn fn, void *arg, int argc, const char **argv, const size_t *lens)
{
    if (rc->state != RC_UP || rc->subscriber)
        return -1;
    if (fault_fn && fault_fn(rc, RCONN_AT_SEND, -1, fault_arg) == RCONN_FAULT_FAIL)
        return -1;
    return send_argv(rc, fn, arg, argc, argv, lens);
}

int rconn_eval(struct rconn *rc, enum script_id script, int argc, const char **argv, size_t *lens, rconn_reply_fn fn,
               void *arg)
{
    return rconn_eval_keys(rc, script, 1, argc, argv, lens, fn, arg);
}

int rconn_eval_keys(struct rconn *rc, enum script_id script, int nkeys, int argc, const char **argv, size_t *lens,
                    rconn_reply_fn fn, void *arg)
{
    char numkeys[INT_TEXT_MAX]; /* read by the formatting below, before this returns */
    script_call_head(script, argv, lens);
    if (nkeys != 1) {
        argv[2] = numkeys;
        lens[2] = sb_int_to_text(nkeys, numkeys);
    }
    if (rc->state != RC_UP || rc->subscriber)
        return -1;
    if (fault_fn && fault_fn(rc, RCONN_AT_SEND, (int)script, fault_arg) == RCONN_FAULT_FAIL)
        return -1;
    struct pending *p = pending_new(rc, fn, arg, (int)script);
    if (p == NULL)
        return -1;
    /* Formatted once and kept: the same bytes are re-sent if the script cache was flushed. */
    long len = rcodec_format_command(&p->cmd, argc, argv, lens);
    if (len < 0) {
        p->cmd = NULL;
        free_pending(p);
        return -1;
    }
    p->cmdlen = (size_t)len;
    if (send_pending(rc, p, 0, NULL, NULL) < 0) {
        free_pending(p);
        return -1;
    }
    return 0;
}

static void on_reload_reply(redisReply *reply, void *arg)
{
    /* Nothing to do: a failed load shows as "not found" on the call that needed it (logged). */
    (void)reply;
    (void)arg;
}

/* FUNCTION LOAD the library; 0 when sent. Calls sent before this point that come back "not
 * found" are re-sent behind this load without asking for another one. */
static int load_library(struct rconn *rc, rconn_reply_fn fn)
{
    const char *argv[3];
    size_t lens[3];
    script_load_argv(argv, lens);
    if (send_argv_as(rc, fn, rc, 3, argv, lens, 1) < 0)
        return -1;
    rc->reload_seq = rc->seq;
    return 0;
}

/* Set-up replies: AUTH, SELECT, ROLE, FUNCTION LOAD, SUBSCRIBE. Up once all have answered. */
static void on_setup_reply(redisReply *reply, void *arg)
{
    struct rconn *rc = arg;
    if (rc->state != RC_SETUP)
        return;
    if (reply == NULL) {
        char why[RCONN_ERROR_TEXT + 32];
        snprintf(why, sizeof why, "set-up command failed: %s", rc->cause != RCAUSE_NONE ? rc->cause_text : "no reply");
        drop(rc, why, RCAUSE_NONE);
        return;
    }
    if (--rc->setup_pending == 0)
        set_state(rc, RC_UP);
}

/* Scripts write, so a command connection is of no use on a replica (after a failover, or a
 * REPLICAOF by mistake): stay down, with the cause, until the server is a master again. A
 * server that refuses ROLE (ACL) is taken at its word that it is fine. */
static void on_role_reply(redisReply *reply, void *arg)
{
    struct rconn *rc = arg;
    if (rc->state != RC_SETUP)
        return;
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
        reply->element[0]->type == REDIS_REPLY_STRING && strcmp(reply->element[0]->str, "master") != 0) {
        drop(rc, "READONLY the server is a replica (ROLE); waiting for it to become a master", RCAUSE_READONLY);
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
    if (rc->load_scripts) {
        const char *argv[] = {"ROLE"};
        size_t lens[] = {4};
        if (send_argv(rc, on_role_reply, rc, 1, argv, lens) == 0)
            rc->setup_pending++;
        if (load_library(rc, on_setup_reply) == 0)
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
        set_error_str(rc, RCAUSE_DOWN, ac->errstr[0] ? ac->errstr : "cannot connect");
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
    set_error_str(rc, RCAUSE_DOWN, status != REDIS_OK && ac->errstr[0] ? ac->errstr : "connection closed");
    rc->ac = NULL;
    fail_hung(rc);
    set_state(rc, RC_DOWN);
    schedule_reconnect(rc);
}

/* Connect to `host` (numeric, or a unix socket path): the connect itself never blocks. */
static void connect_to(struct rconn *rc, const char *host, int port, int is_unix)
{
    redisAsyncContext *ac = is_unix ? redisAsyncConnectUnix(host) : redisAsyncConnect(host, port);
    if (ac == NULL || ac->err) {
        log_error_limited(rc, "cannot connect", ac ? ac->errstr : "out of memory");
        set_error_str(rc, RCAUSE_DOWN, ac ? ac->errstr : "out of memory");
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

static void on_resolved(const struct resolve_result *res, void *arg)
{
    struct rconn *rc = arg;
    rc->lookup = NULL;
    char host[256];
    int port, is_unix;
    raddr_parse(rc->address, host, sizeof host, &port, &is_unix);
    if (res->error) {
        char text[sizeof host + 128]; /* set_error cuts it to RCONN_ERROR_TEXT */
        snprintf(text, sizeof text, "cannot resolve %s: %s", host, res->error_text ? res->error_text : "?");
        log_error_limited(rc, "cannot connect", text);
        set_error_str(rc, RCAUSE_DOWN, text);
        schedule_reconnect(rc);
        return;
    }
    memcpy(rc->addrs, res->addrs, sizeof rc->addrs);
    rc->naddrs = res->count;
    rc->next_addr = 0;
    connect_to(rc, rc->addrs[rc->next_addr++], port, 0);
}

static void connect_now(struct rconn *rc)
{
    char host[256];
    int port, is_unix;
    if (rc->lookup != NULL || raddr_parse(rc->address, host, sizeof host, &port, &is_unix) < 0)
        return;
    if (is_unix || resolve_is_numeric(host)) {
        connect_to(rc, host, port, is_unix);
    } else if (rc->next_addr < rc->naddrs) {
        connect_to(rc, rc->addrs[rc->next_addr++], port, 0);
    } else if ((rc->lookup = resolve_start(rc->base, host, on_resolved, rc)) == NULL) {
        log_error_limited(rc, "cannot connect", "cannot start a name lookup (out of memory or threads)");
        set_error_str(rc, RCAUSE_DOWN, "cannot start a name lookup");
        schedule_reconnect(rc);
    }
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
    unsigned epoch = atomic_load(&demote_epoch);
    if (epoch != rc->seen_demote_epoch) {
        rc->seen_demote_epoch = epoch;
        enum rcause cause = RCAUSE_NONE;
        char text[RCONN_ERROR_TEXT + 48];
        pthread_mutex_lock(&err_lock);
        if (strcmp(demoted.address, rc->address) == 0) {
            cause = demoted.cause;
            snprintf(text, sizeof text, "%s (seen by another connection)", demoted.text);
        }
        pthread_mutex_unlock(&err_lock);
        if (cause != RCAUSE_NONE && rc->state == RC_UP && !rc->subscriber) { /* subscribing works on a replica */
            drop(rc, text, cause);
            return;
        }
    }
    if ((rc->state == RC_CONNECTING || rc->state == RC_SETUP) && now - rc->state_since_us > limit) {
        metrics_inc(MC_REDIS_TIMEOUTS, 1);
        atomic_store(&last_hang_us, now);
        drop(rc, rc->state == RC_CONNECTING ? "connect timed out" : "set-up timed out", RCAUSE_TIMEOUT);
    } else if (rc->pending > 0 && now - rc->progress_us > limit) {
        metrics_inc(MC_REDIS_TIMEOUTS, 1);
        atomic_store(&last_hang_us, now);
        drop(rc, "no reply within the timeout", RCAUSE_TIMEOUT);
    }
}

struct rconn *rconn_new(struct event_base *base, const struct rconn_config *cfg, rconn_state_fn on_state,
                        void *state_arg)
{
    char host[256];
    int port, is_unix;
    if (raddr_parse(cfg->address, host, sizeof host, &port, &is_unix) < 0)
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
    pthread_mutex_lock(&err_lock);
    rc->next_all = all_rconns;
    if (all_rconns)
        all_rconns->prev_all = rc;
    all_rconns = rc;
    pthread_mutex_unlock(&err_lock);
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

void rconn_pass_cluster_errors(struct rconn *rc)
{
    rc->pass_cluster_errors = 1;
}

void rconn_free(struct rconn *rc)
{
    if (rc == NULL)
        return;
    rc->freeing = 1;
    resolve_cancel(rc->lookup);
    rc->lookup = NULL;
    if (rc->ac)
        drop(rc, NULL, RCAUSE_NONE);
    fail_hung(rc);
    pthread_mutex_lock(&err_lock);
    if (rc->prev_all)
        rc->prev_all->next_all = rc->next_all;
    else
        all_rconns = rc->next_all;
    if (rc->next_all)
        rc->next_all->prev_all = rc->prev_all;
    pthread_mutex_unlock(&err_lock);
    event_free(rc->reconnect_timer);
    event_free(rc->watchdog);
    for (int i = 0; i < rc->nchannels; i++)
        free(rc->channels[i]);
    free(rc);
}

int rconn_is_up(const struct rconn *rc)
{
    return rc->state == RC_UP && atomic_load_explicit(&last_hang_us, memory_order_relaxed) <=
                                     atomic_load_explicit(&last_answer_us, memory_order_relaxed);
}
