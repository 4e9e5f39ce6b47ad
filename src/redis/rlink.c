/* rlink.c — see rlink.h. */
#include "redis/rlink.h"
#include "redis/rnodes.h"

#include <event2/event.h>
#include <stdlib.h>

static void on_plain_state(struct rconn *rc, int up, void *arg)
{
    struct rlink *l = arg;
    (void)rc;
    if (l->on_state)
        l->on_state(up, l->state_arg);
}

/* Posted from the link's own thread, the only one that may read its rcluster. */
static void post_nodes(evutil_socket_t fd, short what, void *arg)
{
    struct rlink *l = arg;
    struct rcluster_node_status nodes[RNODES_MAX];
    struct rcluster_stats st;
    int n = rcluster_nodes(l->cluster, nodes, RNODES_MAX);
    rcluster_stats(l->cluster, &st);
    rnodes_post(l->post_slot, nodes, n < RNODES_MAX ? n : RNODES_MAX, &st);
}

static void on_cluster_ready(int up, void *arg)
{
    struct rlink *l = arg;
    if (l->on_state)
        l->on_state(up, l->state_arg);
}

struct rlink *rlink_new(struct event_base *base, const struct rlink_config *cfg, rlink_state_fn on_state,
                        void *state_arg)
{
    struct rlink *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    l->on_state = on_state;
    l->state_arg = state_arg;
    l->post_slot = -1;
    if (cfg->cluster) {
        struct rcluster_config cc = {cfg->name, cfg->address, cfg->password, cfg->timeout_ms, cfg->load_scripts};
        if ((l->cluster = rcluster_new(base, &cc)) != NULL)
            rcluster_on_ready(l->cluster, on_cluster_ready, l);
        /* without the post (memory), the link works; /metrics misses its figures */
        if (l->cluster != NULL && (l->post_slot = rnodes_join(cfg->name)) >= 0 &&
            (l->post = event_new(base, -1, EV_PERSIST, post_nodes, l)) != NULL) {
            struct timeval every = {RNODES_POST_MS / 1000, (RNODES_POST_MS % 1000) * 1000};
            event_add(l->post, &every);
        }
    } else {
        struct rconn_config rc = {cfg->name, cfg->address, cfg->password, cfg->db, cfg->timeout_ms, cfg->load_scripts};
        l->plain = rconn_new(base, &rc, on_plain_state, l);
    }
    if (l->plain == NULL && l->cluster == NULL) {
        free(l);
        return NULL;
    }
    return l;
}

void rlink_free(struct rlink *l)
{
    if (l == NULL)
        return;
    if (l->post)
        event_free(l->post);
    if (l->cluster) {
        post_nodes(-1, 0, l); /* its last figures are kept (rnodes_leave retires them) */
        rnodes_leave(l->post_slot);
        rcluster_free(l->cluster);
    } else {
        rconn_free(l->plain);
    }
    free(l);
}

int rlink_usable(const struct rlink *l)
{
    return l->cluster == NULL ? rconn_is_up(l->plain) : rcluster_any_up(l->cluster);
}

enum rcause rlink_last_error(const struct rlink *l, struct rconn_error *out)
{
    if (l->cluster == NULL)
        return rconn_last_error(l->plain, out);
    return rcluster_last_error(l->cluster, out);
}
