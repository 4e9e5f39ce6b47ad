/* rconn.h — one asynchronous Redis connection on an event_base that looks after itself.
 *
 * hiredis (0.14, as Debian ships it) has no command timeouts and no reconnection, so this
 * wrapper adds both: it reconnects with backoff, re-authenticates, re-selects the db and
 * re-loads every Lua script on each connect; a watchdog drops a connection whose oldest
 * command has waited longer than the timeout (a paused or hung Redis), which fails every
 * pending command at once. A connection counts as up only after its set-up commands were
 * answered, so callers get an immediate "down" instead of waiting on a half-open socket.
 *
 * Error replies are classified (enum rcause) rather than all read as "Redis down": each
 * connection keeps its current trouble, readable by its own thread (rconn_last_error) and by
 * any thread for the whole process (rconn_process_error), and /metrics counts them by cause.
 * A script call answered "Function not found" (someone ran FUNCTION FLUSH, or Redis lost its
 * data) loads the library again and is re-sent transparently, however often that happens. READONLY (we talk to a
 * replica) and LOADING drop the connection, which then counts as down and reconnects with backoff; a connection whose
 * server says ROLE slave at set-up does not come up.
 *
 * Owned by the thread of its event_base; never touch it from another thread. */
#ifndef HG_RCONN_H
#define HG_RCONN_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rcause.h"
#include "redis/scripts.h"

struct event_base;
struct rconn;

/* A command's outcome. `reply` is NULL when the command failed in any way (connection down
 * or dropped, timeout, or an error reply, which is logged and classified: rconn_last_error
 * names why, from inside the callback too); it is freed after the callback. */
typedef void (*rconn_reply_fn)(redisReply *reply, void *arg);

/* Told whenever the connection becomes usable (up = 1) or stops being so (up = 0). */
typedef void (*rconn_state_fn)(struct rconn *rc, int up, void *arg);

/* A published message on a subscribed channel. */
typedef void (*rconn_message_fn)(const char *channel, const char *payload, size_t len, void *arg);

struct rconn_config {
    const char *name;     /* for logs: "http-0", "keeper", "subscriber" */
    const char *address;  /* host:port or unix:/path */
    const char *password; /* "" = none */
    int db;
    int timeout_ms;
    int load_scripts; /* FUNCTION LOAD the scripts' library on connect */
};

/* Create and start connecting. The strings in cfg are copied. NULL on bad address/memory. */
struct rconn *rconn_new(struct event_base *base, const struct rconn_config *cfg, rconn_state_fn on_state,
                        void *state_arg);

/* Turn this connection into a subscriber of `channels` (re-subscribed after every reconnect).
 * Call once, right after rconn_new; no commands may be sent on it afterwards. */
int rconn_subscribe(struct rconn *rc, const char *const *channels, int n, rconn_message_fn on_message, void *arg);

/* For a Redis Cluster node (rcluster.c): MOVED, ASK, TRYAGAIN and CLUSTERDOWN error replies
 * reach the callback as they are (type REDIS_REPLY_ERROR) instead of failing the command, and
 * are neither logged, counted nor kept as the connection's trouble: they say where a slot
 * lives or that the cluster is settling, and the caller follows them. Every other error reply
 * still fails the command with NULL. Call right after rconn_new. */
void rconn_pass_cluster_errors(struct rconn *rc);

/* Close; pending callbacks run with reply = NULL before this returns. */
void rconn_free(struct rconn *rc);

/* Usable: set up, and Redis not hung — no connection of the process timed out since some
 * connection last heard from Redis (see rconn.c). */
int rconn_is_up(const struct rconn *rc);

/* Send a command. Returns 0 (the callback will run exactly once) or -1 when the connection
 * is not up (the callback will not run). */
int rconn_command(struct rconn *rc, rconn_reply_fn fn, void *arg, int argc, const char **argv, const size_t *lens)
    __attribute__((warn_unused_result));

/* FCALL of `script` with one key. argv[0..2] are reserved for this function (left unset by
 * the caller); argv[3] is KEYS[1], argv[4..] are ARGV. Same return as rconn_command. */
int rconn_eval(struct rconn *rc, enum script_id script, int argc, const char **argv, size_t *lens, rconn_reply_fn fn,
               void *arg) __attribute__((warn_unused_result));
/* The same with `nkeys` keys, argv[3..3 + nkeys): a script that works on several shards at
 * once (push.lua), on a single Redis only (under Cluster a call stays in one slot). */
int rconn_eval_keys(struct rconn *rc, enum script_id script, int nkeys, int argc, const char **argv, size_t *lens,
                    rconn_reply_fn fn, void *arg) __attribute__((warn_unused_result));

#define RCONN_ERROR_TEXT 160
/* How long an error that leaves the connection up stays "current" without repeating. */
#define RCONN_ERROR_HOLD_MS 10000

struct rconn_error {
    enum rcause cause;
    char text[RCONN_ERROR_TEXT]; /* Redis's own words, or ours for down/timeout */
    int64_t age_ms;              /* since it last happened */
};

/* This connection's current trouble, into *out (cause RCAUSE_NONE when there is none). An
 * error is current until a later call of the same script (or any command, for a plain one)
 * succeeds, or RCONN_ERROR_HOLD_MS pass without it repeating; a connection that is not up
 * keeps why it went down until it is up again. Owner thread only. Returns out->cause. */
enum rcause rconn_last_error(const struct rconn *rc, struct rconn_error *out);

/* The same over every connection of the process (any thread): the most recent current error,
 * preferring one that refuses work. Returns out->cause. */
enum rcause rconn_process_error(struct rconn_error *out);

/* ---- fault seam (tests only) ----
 * A hook asked before each command leaves through rconn_command/rconn_eval (RCONN_AT_SEND)
 * and before each reply is handed on (RCONN_AT_REPLY); `script` is the script id of a script
 * call, -1 otherwise. What it returns happens instead of the normal course:
 *   RCONN_FAULT_FAIL  at send: the send fails as if hiredis had refused it (returns -1);
 *   RCONN_FAULT_DROP  at reply: the connection drops as if the socket died (every pending
 *                     callback, this one's too, runs with NULL; reconnect as usual);
 *   RCONN_FAULT_HANG  at reply: the reply is swallowed, the command stays pending (the
 *                     watchdog's timeout then drops the connection; its callback runs then).
 * Process-wide; set it before any connection exists and never in production. */
enum rconn_fault_at { RCONN_AT_SEND, RCONN_AT_REPLY };
enum rconn_fault { RCONN_FAULT_NONE, RCONN_FAULT_FAIL, RCONN_FAULT_DROP, RCONN_FAULT_HANG };
typedef enum rconn_fault (*rconn_fault_fn)(const struct rconn *rc, enum rconn_fault_at at, int script, void *arg);
void rconn_set_fault_hook(rconn_fault_fn fn, void *arg);

/* Make the next close of socket `fd` abortive (SO_LINGER 0: a reset, unsent data dropped).
 * For a connection given up on: a plain close lets the kernel keep retransmitting what was
 * queued, and after a partition heals Redis runs those commands seconds late (a lossmark
 * mark.lua that set a mark back and made every shard look rolled back; pushes answered 503). */
void rconn_abort_fd(int fd);

#endif
