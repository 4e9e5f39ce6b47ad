/* rlink.h — a thread's way to Redis: one rconn (a single Redis, [redis] cluster = false, as
 * always) or one rcluster (a Redis Cluster: one rconn per master, each command sent to its
 * key's master), behind one set of calls, so the threads that talk to Redis (workers, keeper,
 * delivery) and what they call (store.c, layout.c, idlease.c, fleet.c) need not know which.
 *
 * Contract, the same in both modes (rconn.h, rcluster.h):
 *   - rlink_command / rlink_eval return 0 when sent (the callback runs exactly once, with the
 *     reply or NULL, never from inside the call) or -1 when not sent (the callback never
 *     runs): the caller answers 503 at once.
 *   - Every command names its shard by its key: argv[1] for a plain command, KEYS[1]
 *     (argv[3]) for a script, and every key a call touches carries the shard's hash tag
 *     (shardtag.h), so in cluster mode it goes to the master of the shard's slot. A keyless
 *     command goes to any master.
 *   - The state callback is told when the link becomes usable as a whole (up = 1) and when it
 *     stops being so (up = 0): for a cluster, "every slot has a master and every master's
 *     connection is up" (rcluster_ready).
 *
 * In cluster mode a link also posts its nodes' counters to rnodes.h once a second, for
 * /metrics' per-node series.
 *
 * Plain mode is a direct call to rconn behind one branch (the calls are inline): the hot path
 * (push, reserve) costs what it did before the facade.
 *
 * Owned by the thread of its event_base, like rconn and rcluster. */
#ifndef HG_RLINK_H
#define HG_RLINK_H

#include "redis/rcluster.h"
#include "redis/rconn.h"

struct event_base;

typedef void (*rlink_state_fn)(int up, void *arg);

struct rlink_config {
    const char *name;     /* for logs: "http-0", "keeper", "deliver" */
    const char *address;  /* host:port or unix:/path; with cluster, a seed list "h:p,h:p" */
    const char *password; /* "" = none */
    int db;               /* ignored with cluster (a cluster has db 0 only) */
    int timeout_ms;
    int load_scripts; /* SCRIPT LOAD everything on every connection */
    int cluster;      /* [redis] cluster */
};

struct rlink {
    struct rconn *plain; /* exactly one of plain and cluster is set */
    struct rcluster *cluster;
    rlink_state_fn on_state; /* may be NULL */
    void *state_arg;
    struct event *post; /* cluster: posts its nodes' figures for /metrics (rnodes.h) */
    int post_slot;
};

/* Create and start connecting; the strings in cfg are copied. NULL on a bad address or memory. */
struct rlink *rlink_new(struct event_base *base, const struct rlink_config *cfg, rlink_state_fn on_state,
                        void *state_arg);

/* Close; every callback still due runs (reply NULL) before this returns. NULL is fine. */
void rlink_free(struct rlink *l);

/* Worth sending commands: the connection is up; for a cluster, a map is known and some master
 * of it is up (a command for a slot whose master is down is still refused at once, -1). */
int rlink_usable(const struct rlink *l);

/* Usable as a whole: the connection is up; for a cluster, rcluster_ready. */
static inline int rlink_ready(const struct rlink *l)
{
    return l->cluster == NULL ? rconn_is_up(l->plain) : rcluster_ready(l->cluster);
}

static inline __attribute__((warn_unused_result)) int rlink_command(struct rlink *l, rconn_reply_fn fn, void *arg,
                                                                    int argc, const char **argv, const size_t *lens)
{
    if (l->cluster == NULL)
        return rconn_command(l->plain, fn, arg, argc, argv, lens);
    return rcluster_command(l->cluster, -1, fn, arg, argc, argv, lens);
}

/* Send a keyless command (TIME, PING) to the server that holds `key`: in a Cluster, the master
 * of its slot; otherwise the one connection. 0 / -1 as rlink_command. */
static inline __attribute__((warn_unused_result)) int rlink_command_for_key(struct rlink *l, const char *key,
                                                                            size_t keylen, rconn_reply_fn fn, void *arg,
                                                                            int argc, const char **argv,
                                                                            const size_t *lens)
{
    if (l->cluster == NULL)
        return rconn_command(l->plain, fn, arg, argc, argv, lens);
    return rcluster_command(l->cluster, cluster_keyslot(key, keylen), fn, arg, argc, argv, lens);
}

/* FCALL of `script` with `nkeys` keys, argv[3..3 + nkeys) (rconn_eval_keys): keys of several
 * shards in one call, on a single Redis only. Under Cluster a call stays in one slot: only
 * nkeys = 1 is sent there, more is refused (-1, not sent). */
static inline __attribute__((warn_unused_result)) int rlink_eval_keys(struct rlink *l, enum script_id script, int nkeys,
                                                                      int argc, const char **argv, size_t *lens,
                                                                      rconn_reply_fn fn, void *arg)
{
    if (l->cluster == NULL)
        return rconn_eval_keys(l->plain, script, nkeys, argc, argv, lens, fn, arg);
    return nkeys == 1 ? rcluster_eval(l->cluster, script, argc, argv, lens, fn, arg) : -1;
}

/* Whether one call may carry keys of several shards (rlink_eval_keys): on a single Redis. */
static inline int rlink_spans_shards(const struct rlink *l)
{
    return l->cluster == NULL;
}

/* FCALL of `script`, argv as rconn_eval (argv[0..2] reserved, argv[3] = KEYS[1]). */
static inline __attribute__((warn_unused_result)) int rlink_eval(struct rlink *l, enum script_id script, int argc,
                                                                 const char **argv, size_t *lens, rconn_reply_fn fn,
                                                                 void *arg)
{
    return rlink_eval_keys(l, script, 1, argc, argv, lens, fn, arg);
}

/* The link's current trouble (rconn_last_error): for a cluster, the most recent one over its
 * nodes (inside a command's callback, that is the failing node's), else "down" while it is not
 * usable. Owner thread only. Returns out->cause. */
enum rcause rlink_last_error(const struct rlink *l, struct rconn_error *out);

#endif
