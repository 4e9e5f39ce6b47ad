/* rcluster.h — the asynchronous connections of one thread to a Redis Cluster: one rconn per
 * master, each command sent to the master that owns its key's slot (issue 14, [redis] cluster).
 *
 * The slot map is read (CLUSTER SLOTS, parsed by cluster.c) from any connected master, or
 * from the seeds and every node the last map named, in turn, when no master answers. It is
 * read again, at most one read in flight and at most every RCLUSTER_REFRESH_MIN_MS:
 *   - on MOVED, and the command is re-sent at once to the node the redirect names (connected
 *     to first if it is new);
 *   - while a master of the map is down (a killed node), every RCLUSTER_DOWN_REFRESH_MS until
 *     a map names its heir (or the node is back); then a connection to the heir comes up
 *     (loading the scripts there, like any rconn) and the heir's slots work again;
 *   - every RCLUSTER_IDLE_REFRESH_MS anyway, and on CLUSTERDOWN.
 * ASK is answered with ASKING + the command on the named node's connection, back to back.
 * TRYAGAIN (a multi-key command during a migration), a guarded script's "non local key"
 * (cluster.h: CLUSTER_ERR_NONLOCAL) and CLUSTERDOWN are retried after a short
 * backoff. Each command follows at most RCLUSTER_MAX_REDIRECTS redirects in a row (a retry
 * starts the count again) and is retried only
 * until timeout_ms after it was first sent; then it fails (reply NULL) like an rconn command.
 * Connections to nodes that are no longer masters are closed once nothing waits on them.
 *
 * Fail fast: a command whose slot's master is not connected (dead, or its heir still coming
 * up) is refused at once (-1), never queued; callers answer 503 as they do for rconn.
 *
 * Callbacks: when rcluster_command/rcluster_eval return 0, the callback runs exactly once —
 * with the reply, or NULL on failure (the connection dropped, timeout, an error reply: logged
 * and classified by rconn, read with rconn_last_error) — never from inside the call, and at
 * the latest from rcluster_free. Not from inside a callback: rcluster_free.
 *
 * Owned by the thread of its event_base, like rconn; never touch it from another thread. */
#ifndef HG_RCLUSTER_H
#define HG_RCLUSTER_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cluster.h"
#include "redis/rconn.h"
#include "redis/scripts.h"

struct event_base;
struct rcluster;

#define RCLUSTER_MAX_REDIRECTS   5   /* MOVED + ASK one command follows before it fails */
#define RCLUSTER_REFRESH_MIN_MS  100 /* between two map reads */
#define RCLUSTER_DOWN_REFRESH_MS 200 /* between map reads while a master is down */
#define RCLUSTER_IDLE_REFRESH_MS 10000
#define RCLUSTER_RETRY_FIRST_MS  10 /* TRYAGAIN/CLUSTERDOWN backoff: 10, 20, 40... */
#define RCLUSTER_RETRY_MAX_MS    200

struct rcluster_config {
    const char *name;     /* for logs; each node's rconn is "<name>@<port>" */
    const char *seeds;    /* "host:port,host:port,..." — any nodes of the cluster */
    const char *password; /* "" = none */
    int timeout_ms;       /* rconn's, and the bound of one command's redirects and retries */
    int load_scripts;     /* SCRIPT LOAD every script on every master (rconn) */
};

/* Create and start reading the map; the strings in cfg are copied. NULL on a bad seed
 * list or memory. Commands are refused until the map has arrived and the masters are up
 * (rcluster_ready). */
struct rcluster *rcluster_new(struct event_base *base, const struct rcluster_config *cfg);

/* Close every connection; every callback still due runs (reply NULL) before this returns. */
void rcluster_free(struct rcluster *rc);

/* A map is known, every slot has a master, and every master's connection is up. */
int rcluster_ready(const struct rcluster *rc);

/* Send a command to the master of `slot` (0..16383), or of its key's slot when slot is -1
 * (rcluster_command_slot; a keyless command goes to any connected master). 0: the callback
 * will run exactly once. -1: not sent, the callback will not run (no map yet, the slot's
 * master is not connected, bad arguments, memory). */
int rcluster_command(struct rcluster *rc, int slot, rconn_reply_fn fn, void *arg, int argc, const char **argv,
                     const size_t *lens) __attribute__((warn_unused_result));

/* FCALL of `script` (argv as rconn_eval: argv[0..2] reserved, argv[3] = KEYS[1], which routes
 * it). NOSCRIPT is handled by rconn (reload on that master, re-send). Same return. */
int rcluster_eval(struct rcluster *rc, enum script_id script, int argc, const char **argv, size_t *lens,
                  rconn_reply_fn fn, void *arg) __attribute__((warn_unused_result));

/* One master's answer to rcluster_command_all: its address, and the reply (NULL on failure). */
typedef void (*rcluster_each_fn)(const char *addr, redisReply *reply, void *arg);

/* Send a keyless command (SCRIPT LOAD, INFO, PING...) to every master of the map whose
 * connection is up. Returns how many it was sent to — exactly that many callbacks will run —
 * or -1 when there is no map. Masters that are down are skipped (rcluster_nodes shows them). */
int rcluster_command_all(struct rcluster *rc, rcluster_each_fn fn, void *arg, int argc, const char **argv,
                         const size_t *lens) __attribute__((warn_unused_result));

/* One node, for /health and /metrics. Counters count since the node was first connected to. */
struct rcluster_node_status {
    char addr[CLUSTER_ADDR_MAX];
    int up;                         /* its connection is usable */
    int master;                     /* a master of the current map */
    int nslots;                     /* slots it serves in the current map */
    int nreplicas;                  /* replicas the map lists for it (synced ones only: cluster.h) */
    uint64_t sent;                  /* commands sent to it (re-sends included) */
    uint64_t answered;              /* replies, error replies included */
    uint64_t failed;                /* failed on it: NULL from rconn (dropped, timeout, error reply) */
    uint64_t moved, asked, retried; /* MOVED, ASK, TRYAGAIN/CLUSTERDOWN answers it gave */
    uint64_t latency_us;            /* sum over the replies counted in `answered` */
};

/* Cluster-wide counters. */
struct rcluster_stats {
    uint64_t map_reads;    /* CLUSTER SLOTS sent */
    uint64_t map_changes;  /* maps applied that differ from the one before */
    uint64_t map_errors;   /* reads that failed or did not parse (the old map was kept) */
    uint64_t gave_up;      /* commands failed after too many redirects or retries */
    int nmasters, covered; /* of the current map (0, 0 before the first) */
};

/* Up to max nodes (masters of the map first, then nodes being let go) into out; returns how
 * many there are in all. */
int rcluster_nodes(const struct rcluster *rc, struct rcluster_node_status *out, int max);

void rcluster_stats(const struct rcluster *rc, struct rcluster_stats *out);

/* fn is told whenever rcluster_ready changes (from a node's state change or a map read; at
 * once, from inside this call, if it is ready already). One callback per rcluster. */
typedef void (*rcluster_ready_fn)(int ready, void *arg);
void rcluster_on_ready(struct rcluster *rc, rcluster_ready_fn fn, void *arg);

/* A map is known and at least one of its masters' connections is up: worth sending commands
 * (each is still refused at once, -1, when its own slot's master is down). */
int rcluster_any_up(const struct rcluster *rc);

/* The most recent current error over the nodes' connections (rconn_last_error; inside a
 * command's callback, the failing node's), else RCAUSE_DOWN when no master is up. Returns
 * out->cause. */
enum rcause rcluster_last_error(const struct rcluster *rc, struct rconn_error *out);

/* ---- pure parts, exposed for tests ---- */

/* The slot a command routes by: its first KEY for EVAL/EVALSHA/EVAL_RO/EVALSHA_RO/FCALL
 * (argv[3], when numkeys > 0), else argv[1]; -1 for a keyless command (argc < 2, numkeys 0). */
int rcluster_command_slot(int argc, const char **argv, const size_t *lens);

/* What to do after an answer of `kind` (cluster.h), for a command that already followed
 * `redirects` redirects and was retried `retries` times, `elapsed_ms` after it was first sent.
 * CLUSTER_ERR_TRYAGAIN also stands for "the target is not connected yet" on a re-send. */
enum rcluster_step {
    RCLUSTER_DELIVER, /* not about the cluster: hand the reply to the caller */
    RCLUSTER_FOLLOW,  /* MOVED/ASK: send it where the redirect says, now */
    RCLUSTER_RETRY,   /* send it again after *delay_ms */
    RCLUSTER_GIVE_UP, /* fail it (reply NULL) */
};
enum rcluster_step rcluster_next_step(enum cluster_error_kind kind, int redirects, int retries, int64_t elapsed_ms,
                                      int timeout_ms, int *delay_ms);

#endif
