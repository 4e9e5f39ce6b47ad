/* rnodes.c — see rnodes.h. */
#include "redis/rnodes.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    int used;
    char name[24];
    uint64_t seq; /* of its last post: the highest is the freshest view of the map */
    int n;
    struct rcluster_node_status nodes[RNODES_MAX];
    struct rcluster_stats stats;
};

static struct {
    pthread_mutex_t lock;
    struct slot **slots;
    int nslots;
    uint64_t seq;
    int posted;                                      /* some slot posted once: render the series */
    struct rcluster_node_status retired[RNODES_MAX]; /* counts of nodes slots no longer list */
    int nretired;
    struct rcluster_stats gone; /* counters of slots that left */
} registry = {.lock = PTHREAD_MUTEX_INITIALIZER};

int rnodes_join(const char *name)
{
    struct slot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -1;
    s->used = 1;
    snprintf(s->name, sizeof s->name, "%s", name ? name : "");
    pthread_mutex_lock(&registry.lock);
    int i = 0;
    while (i < registry.nslots && registry.slots[i] != NULL)
        i++;
    if (i == registry.nslots) {
        struct slot **grown = realloc(registry.slots, (size_t)(registry.nslots + 1) * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&registry.lock);
            free(s);
            return -1;
        }
        registry.slots = grown;
        registry.slots[registry.nslots++] = NULL;
    }
    registry.slots[i] = s;
    pthread_mutex_unlock(&registry.lock);
    return i;
}

static void add_counters(struct rcluster_node_status *to, const struct rcluster_node_status *n)
{
    to->sent += n->sent;
    to->answered += n->answered;
    to->failed += n->failed;
    to->moved += n->moved;
    to->asked += n->asked;
    to->retried += n->retried;
    to->latency_us += n->latency_us;
}

/* Under the lock. */
static void retire(const struct rcluster_node_status *n)
{
    int i = 0;
    while (i < registry.nretired && strcmp(registry.retired[i].addr, n->addr) != 0)
        i++;
    if (i == registry.nretired) {
        if (registry.nretired == RNODES_MAX)
            return; /* more nodes than a cluster of this size has ever had: dropped */
        memset(&registry.retired[i], 0, sizeof registry.retired[i]);
        snprintf(registry.retired[i].addr, sizeof registry.retired[i].addr, "%s", n->addr);
        registry.nretired++;
    }
    add_counters(&registry.retired[i], n);
}

static const struct rcluster_node_status *find(const struct rcluster_node_status *nodes, int n, const char *addr)
{
    for (int i = 0; i < n; i++)
        if (strcmp(nodes[i].addr, addr) == 0)
            return &nodes[i];
    return NULL;
}

/* The new snapshot's counters for this node started again (the link let it go and came back
 * to it between two posts): the old ones are retired, not lost. */
static int restarted(const struct rcluster_node_status *old, const struct rcluster_node_status *now)
{
    return now->sent < old->sent || now->answered < old->answered || now->failed < old->failed ||
           now->moved < old->moved || now->asked < old->asked || now->retried < old->retried ||
           now->latency_us < old->latency_us;
}

void rnodes_post(int slot, const struct rcluster_node_status *nodes, int n, const struct rcluster_stats *stats)
{
    if (n > RNODES_MAX)
        n = RNODES_MAX;
    pthread_mutex_lock(&registry.lock);
    struct slot *s = slot >= 0 && slot < registry.nslots ? registry.slots[slot] : NULL;
    if (s != NULL) {
        for (int i = 0; i < s->n; i++) {
            const struct rcluster_node_status *now = find(nodes, n, s->nodes[i].addr);
            if (now == NULL || restarted(&s->nodes[i], now))
                retire(&s->nodes[i]);
        }
        if (n > 0)
            memcpy(s->nodes, nodes, (size_t)n * sizeof *nodes);
        s->n = n > 0 ? n : 0;
        s->stats = *stats;
        s->seq = ++registry.seq;
        registry.posted = 1;
    }
    pthread_mutex_unlock(&registry.lock);
}

void rnodes_leave(int slot)
{
    pthread_mutex_lock(&registry.lock);
    struct slot *s = slot >= 0 && slot < registry.nslots ? registry.slots[slot] : NULL;
    if (s != NULL) {
        for (int i = 0; i < s->n; i++)
            retire(&s->nodes[i]);
        registry.gone.map_reads += s->stats.map_reads;
        registry.gone.map_changes += s->stats.map_changes;
        registry.gone.map_errors += s->stats.map_errors;
        registry.gone.gave_up += s->stats.gave_up;
        registry.slots[slot] = NULL;
    }
    pthread_mutex_unlock(&registry.lock);
    free(s);
}

/* The entry of addr in sums (n of them, up to max), added when new; NULL when full. */
static struct rnodes_sum *entry(struct rnodes_sum *sums, int *n, int max, const char *addr)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(sums[i].node.addr, addr) == 0)
            return &sums[i];
    if (*n == max)
        return NULL;
    struct rnodes_sum *e = &sums[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->node.addr, sizeof e->node.addr, "%s", addr);
    return e;
}

static int by_addr(const void *a, const void *b)
{
    return strcmp(((const struct rnodes_sum *)a)->node.addr, ((const struct rnodes_sum *)b)->node.addr);
}

/* Under the lock: every node into all (RNODES_MAX entries). */
static int sum_locked(struct rnodes_sum *all, struct rcluster_stats *stats)
{
    int n = 0;
    uint64_t fresh[RNODES_MAX] = {0}; /* seq of the snapshot each node's master and nslots came from */
    if (stats) {
        *stats = registry.gone;
        stats->nmasters = stats->covered = 0;
    }
    uint64_t stats_seq = 0;
    for (int i = 0; i < registry.nretired; i++) {
        struct rnodes_sum *e = entry(all, &n, RNODES_MAX, registry.retired[i].addr);
        if (e == NULL)
            break;
        add_counters(&e->node, &registry.retired[i]);
    }
    for (int k = 0; k < registry.nslots; k++) {
        const struct slot *s = registry.slots[k];
        if (s == NULL)
            continue;
        if (stats) {
            stats->map_reads += s->stats.map_reads;
            stats->map_changes += s->stats.map_changes;
            stats->map_errors += s->stats.map_errors;
            stats->gave_up += s->stats.gave_up;
            if (s->seq > stats_seq) {
                stats_seq = s->seq;
                stats->nmasters = s->stats.nmasters;
                stats->covered = s->stats.covered;
            }
        }
        for (int i = 0; i < s->n; i++) {
            const struct rcluster_node_status *st = &s->nodes[i];
            struct rnodes_sum *e = entry(all, &n, RNODES_MAX, st->addr);
            if (e == NULL)
                continue;
            e->links++;
            e->node.up += st->up != 0;
            add_counters(&e->node, st);
            if (s->seq > fresh[e - all]) {
                fresh[e - all] = s->seq;
                e->node.master = st->master;
                e->node.nslots = st->nslots;
                e->node.nreplicas = st->nreplicas;
            }
        }
    }
    return n;
}

int rnodes_sum(struct rnodes_sum *out, int max, struct rcluster_stats *stats)
{
    struct rnodes_sum *all = calloc(RNODES_MAX, sizeof *all);
    if (all == NULL) {
        if (stats)
            memset(stats, 0, sizeof *stats);
        return 0;
    }
    pthread_mutex_lock(&registry.lock);
    int n = sum_locked(all, stats);
    pthread_mutex_unlock(&registry.lock);
    qsort(all, (size_t)n, sizeof *all, by_addr);
    if (max > 0)
        memcpy(out, all, (size_t)(n < max ? n : max) * sizeof *all);
    free(all);
    return n;
}

struct series {
    const char *name, *help, *type;
};

static void head(struct sbuf *out, const struct series *s)
{
    sb_printf(out, "# HELP %s %s\n# TYPE %s %s\n", s->name, s->help, s->name, s->type);
}

void rnodes_render(struct sbuf *out)
{
    pthread_mutex_lock(&registry.lock);
    int posted = registry.posted;
    pthread_mutex_unlock(&registry.lock);
    if (!posted)
        return;
    struct rnodes_sum *nodes = calloc(RNODES_MAX, sizeof *nodes);
    if (nodes == NULL)
        return;
    struct rcluster_stats st;
    int n = rnodes_sum(nodes, RNODES_MAX, &st);
    if (n > RNODES_MAX)
        n = RNODES_MAX;
    static const struct series gauges[] = {
        {"hourglass_redis_node_up", "Threads whose connection to this Redis Cluster node is up", "gauge"},
        {"hourglass_redis_node_master", "1 while the node is a master of the slot map", "gauge"},
        {"hourglass_redis_node_slots", "Hash slots the node serves in the slot map", "gauge"},
    };
    for (size_t g = 0; g < sizeof gauges / sizeof gauges[0]; g++) {
        head(out, &gauges[g]);
        for (int i = 0; i < n; i++)
            sb_printf(out, "%s{node=\"%s\"} %d\n", gauges[g].name, nodes[i].node.addr,
                      g == 0   ? nodes[i].node.up
                      : g == 1 ? nodes[i].node.master
                               : nodes[i].node.nslots);
    }
    static const struct series counters[] = {
        {"hourglass_redis_node_commands_total", "Commands sent to the node (re-sends after a redirect included)",
         "counter"},
        {"hourglass_redis_node_errors_total", "Commands that failed on the node (error reply, timeout, drop)",
         "counter"},
        {"hourglass_redis_node_retries_total", "TRYAGAIN and CLUSTERDOWN answers of the node (the command was retried)",
         "counter"},
    };
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
        head(out, &counters[c]);
        for (int i = 0; i < n; i++) {
            const struct rcluster_node_status *x = &nodes[i].node;
            sb_printf(out, "%s{node=\"%s\"} %llu\n", counters[c].name, x->addr,
                      (unsigned long long)(c == 0   ? x->sent
                                           : c == 1 ? x->failed
                                                    : x->retried));
        }
    }
    static const struct series redirects = {"hourglass_redis_node_redirects_total",
                                            "MOVED and ASK answers of the node (the command was sent on)", "counter"};
    head(out, &redirects);
    for (int i = 0; i < n; i++)
        sb_printf(out, "%s{node=\"%s\",kind=\"moved\"} %llu\n%s{node=\"%s\",kind=\"ask\"} %llu\n", redirects.name,
                  nodes[i].node.addr, (unsigned long long)nodes[i].node.moved, redirects.name, nodes[i].node.addr,
                  (unsigned long long)nodes[i].node.asked);
    static const struct series latency = {"hourglass_redis_node_command_seconds",
                                          "Round-trip time of the node's replies", "summary"};
    head(out, &latency);
    for (int i = 0; i < n; i++)
        sb_printf(out, "%s_sum{node=\"%s\"} %.6f\n%s_count{node=\"%s\"} %llu\n", latency.name, nodes[i].node.addr,
                  (double)nodes[i].node.latency_us / 1e6, latency.name, nodes[i].node.addr,
                  (unsigned long long)nodes[i].node.answered);
    free(nodes);
    sb_printf(out,
              "# HELP hourglass_redis_cluster_masters Masters of the slot map\n"
              "# TYPE hourglass_redis_cluster_masters gauge\nhourglass_redis_cluster_masters %d\n"
              "# HELP hourglass_redis_cluster_slots_covered Hash slots with a master in the slot map\n"
              "# TYPE hourglass_redis_cluster_slots_covered gauge\nhourglass_redis_cluster_slots_covered %d\n"
              "# HELP hourglass_redis_cluster_map_reads_total Slot map reads (CLUSTER SLOTS) sent\n"
              "# TYPE hourglass_redis_cluster_map_reads_total counter\nhourglass_redis_cluster_map_reads_total %llu\n"
              "# HELP hourglass_redis_cluster_map_changes_total Slot maps read that differed from the one before\n"
              "# TYPE hourglass_redis_cluster_map_changes_total counter\n"
              "hourglass_redis_cluster_map_changes_total %llu\n"
              "# HELP hourglass_redis_cluster_map_errors_total Slot map reads that failed (the old map was kept)\n"
              "# TYPE hourglass_redis_cluster_map_errors_total counter\nhourglass_redis_cluster_map_errors_total %llu\n"
              "# HELP hourglass_redis_cluster_gave_up_total Commands failed after too many redirects or retries\n"
              "# TYPE hourglass_redis_cluster_gave_up_total counter\nhourglass_redis_cluster_gave_up_total %llu\n",
              st.nmasters, st.covered, (unsigned long long)st.map_reads, (unsigned long long)st.map_changes,
              (unsigned long long)st.map_errors, (unsigned long long)st.gave_up);
}
