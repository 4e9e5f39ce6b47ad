/* rnodes.h — the Redis Cluster nodes as the whole process sees them, for /metrics.
 *
 * Every thread that talks to a cluster owns its own rcluster (rlink.h), whose per-node
 * counters only that thread may read. So each such link posts a snapshot of them
 * (rcluster_nodes, rcluster_stats) here once a second, from its own thread, into a slot of its
 * own; /metrics, on any thread, sums the slots by node under one mutex. Figures are at most
 * RNODES_POST_MS old.
 *
 * The counters stay monotonic across a thread letting a node go (a failed master, a node a
 * redirect named once): what a slot last posted for a node that is no longer in its snapshot
 * is kept in a per-node "retired" total. A single Redis posts nothing: /metrics then shows no
 * node series at all. */
#ifndef HG_RNODES_H
#define HG_RNODES_H

#include "redis/rcluster.h"
#include "base/sbuf.h"

#define RNODES_POST_MS 1000
#define RNODES_MAX     64 /* nodes per snapshot, and nodes with retired totals */

/* A slot for one link's snapshots (name for nothing but debugging); -1 when the table is full
 * or out of memory (that link's figures are then missing from /metrics). */
int rnodes_join(const char *name);

/* Replace slot's snapshot (n nodes, as rcluster_nodes wrote them; at most RNODES_MAX). */
void rnodes_post(int slot, const struct rcluster_node_status *nodes, int n, const struct rcluster_stats *stats);

/* Give the slot up; what it counted is kept (retired). */
void rnodes_leave(int slot);

/* One node summed over every slot: node.addr; node.up, how many of the slots listing it
 * have their connection to it up; node.master, node.nslots and node.nreplicas from the
 * freshest snapshot that lists it; the counters summed, retired ones included. */
struct rnodes_sum {
    struct rcluster_node_status node;
    int links; /* slots whose snapshot lists it */
};

/* Up to max nodes (by address order) into out; how many there are in all. stats (unless
 * NULL) gets the sums of every slot's rcluster_stats (nmasters and covered: the freshest). */
int rnodes_sum(struct rnodes_sum *out, int max, struct rcluster_stats *stats);

/* The per-node series in Prometheus text (nothing when no slot ever posted). */
void rnodes_render(struct sbuf *out);

#endif
