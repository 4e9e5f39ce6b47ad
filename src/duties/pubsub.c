/* pubsub.c — see pubsub.h. */
#include "duties/pubsub.h"
#include "core/app.h"
#include "base/clock.h"
#include "base/log.h"
#include "core/metrics.h"
#include "core/raddr.h"
#include "redis/rlink.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pubsub {
    struct rconn *sub;
    struct pubsub_handlers h;
    /* cluster mode only */
    struct event_base *base;
    const struct config *cfg;
    struct rlink *link;
    struct event *check;   /* every PUBSUB_CHECK_MS: is the node usable? */
    int64_t down_since_us; /* 0 while usable */
    char addr[CLUSTER_ADDR_MAX];
    char seeds[RADDR_SEEDS_MAX][CLUSTER_ADDR_MAX];
    int nseeds, next_seed, next_master;
    char channels[2][96];
};

/* "<shard> <due>" */
static void wake(struct pubsub *ps, const char *payload, size_t len)
{
    char buf[64];
    if (len >= sizeof buf)
        return;
    memcpy(buf, payload, len);
    buf[len] = '\0';
    char *end;
    long shard = strtol(buf, &end, 10);
    long long due = strtoll(end, NULL, 10);
    ps->h.on_wake((int)shard, (int64_t)due, ps->h.arg);
}

static void on_message(const char *channel, const char *payload, size_t len, void *arg)
{
    struct pubsub *ps = arg;
    metrics_inc(MC_PUBSUB_MESSAGES, 1);
    size_t clen = strlen(channel);
    if (clen > 5 && strcmp(channel + clen - 5, ":wake") == 0)
        wake(ps, payload, len);
    else if (len > 0)
        ps->h.on_ready(payload, len, ps->h.arg);
}

static void on_state(struct rconn *rc, int up, void *arg)
{
    struct pubsub *ps = arg;
    if (up)
        ps->h.on_resync(ps->h.arg);
}

/* The subscriber connection to addr (a single Redis, or one node of a cluster). */
static struct rconn *subscribe(struct pubsub *ps, const char *addr)
{
    const struct config *cfg = ps->cfg;
    struct rconn_config scfg = {
        "subscriber", addr, cfg->redis_password, cfg->redis_cluster ? 0 : cfg->redis_db, cfg->redis_timeout_ms, 0};
    struct rconn *sub = rconn_new(ps->base, &scfg, on_state, ps);
    const char *channels[] = {ps->channels[0], ps->channels[1]};
    if (sub != NULL && rconn_subscribe(sub, channels, 2, on_message, ps) < 0) {
        rconn_free(sub);
        return NULL;
    }
    return sub;
}

/* Cluster: the next node to listen on, into ps->addr — an up master of the link's map other
 * than the node in use, taking turns, else the next seed. */
static void next_node(struct pubsub *ps)
{
    struct rcluster_node_status st[16];
    int n = ps->link && ps->link->cluster ? rcluster_nodes(ps->link->cluster, st, 16) : 0;
    if (n > 16)
        n = 16;
    for (int k = 0; k < n; k++) {
        const struct rcluster_node_status *s = &st[(ps->next_master + k) % n];
        if (s->master && s->up && strcmp(s->addr, ps->addr) != 0) {
            ps->next_master = (ps->next_master + k + 1) % n;
            snprintf(ps->addr, sizeof ps->addr, "%s", s->addr);
            return;
        }
    }
    snprintf(ps->addr, sizeof ps->addr, "%s", ps->seeds[ps->next_seed]);
    ps->next_seed = (ps->next_seed + 1) % ps->nseeds;
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
    struct pubsub *ps = arg;
    int64_t now = clock_mono_us();
    if (ps->sub != NULL && rconn_is_up(ps->sub)) {
        ps->down_since_us = 0;
        return;
    }
    if (ps->down_since_us == 0)
        ps->down_since_us = now;
    if (now - ps->down_since_us < (int64_t)PUBSUB_MOVE_MS * 1000)
        return;
    char was[CLUSTER_ADDR_MAX];
    snprintf(was, sizeof was, "%s", ps->addr);
    next_node(ps);
    log_info("redis subscriber: %s not usable for %d ms; listening on %s instead", was, PUBSUB_MOVE_MS, ps->addr);
    rconn_free(ps->sub); /* a subscriber has no callbacks pending */
    ps->sub = subscribe(ps, ps->addr);
    ps->down_since_us = now; /* the new node gets PUBSUB_MOVE_MS too */
}

struct pubsub *pubsub_start(struct app *app, struct event_base *base, const struct pubsub_handlers *h,
                            struct rlink *link)
{
    const struct config *cfg = &app->cfg;
    struct pubsub *ps = calloc(1, sizeof *ps);
    if (ps == NULL)
        return NULL;
    ps->h = *h;
    ps->base = base;
    ps->cfg = cfg;
    ps->link = link;
    snprintf(ps->channels[0], sizeof ps->channels[0], "%s:ready", cfg->redis_prefix);
    snprintf(ps->channels[1], sizeof ps->channels[1], "%s:wake", cfg->redis_prefix);
    const char *addr = cfg->redis_address;
    if (cfg->redis_cluster) {
        char err[CLUSTER_ADDR_MAX + 64];
        ps->nseeds = raddr_seeds(cfg->redis_address, ps->seeds, RADDR_SEEDS_MAX, err, sizeof err);
        ps->check = ps->nseeds > 0 ? event_new(base, -1, EV_PERSIST, on_check, ps) : NULL;
        if (ps->check == NULL) {
            pubsub_free(ps);
            return NULL;
        }
        struct timeval tv = {0, PUBSUB_CHECK_MS * 1000};
        event_add(ps->check, &tv);
        addr = ps->seeds[ps->next_seed++ % ps->nseeds];
    }
    snprintf(ps->addr, sizeof ps->addr, "%s", addr);
    if ((ps->sub = subscribe(ps, addr)) == NULL) {
        pubsub_free(ps);
        return NULL;
    }
    return ps;
}

void pubsub_free(struct pubsub *ps)
{
    if (ps == NULL)
        return;
    if (ps->check)
        event_free(ps->check);
    rconn_free(ps->sub);
    free(ps);
}
