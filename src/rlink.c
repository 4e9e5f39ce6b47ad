/* rlink.c — see rlink.h. */
#include "rlink.h"

#include <stdlib.h>

static void on_plain_state(struct rconn *rc, int up, void *arg)
{
    struct rlink *l = arg;
    (void)rc;
    if (l->on_state)
        l->on_state(up, l->state_arg);
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
    if (cfg->cluster) {
        struct rcluster_config cc = {cfg->name, cfg->address, cfg->password, cfg->timeout_ms, cfg->load_scripts};
        if ((l->cluster = rcluster_new(base, &cc)) != NULL)
            rcluster_on_ready(l->cluster, on_cluster_ready, l);
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
    if (l->cluster)
        rcluster_free(l->cluster);
    else
        rconn_free(l->plain);
    free(l);
}

int rlink_usable(const struct rlink *l)
{
    return l->cluster == NULL ? rconn_is_up(l->plain) : rcluster_any_up(l->cluster);
}

enum rconn_cause rlink_last_error(const struct rlink *l, struct rconn_error *out)
{
    if (l->cluster == NULL)
        return rconn_last_error(l->plain, out);
    return rcluster_last_error(l->cluster, out);
}
