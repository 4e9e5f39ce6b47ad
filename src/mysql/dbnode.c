/* dbnode.c — see dbnode.h. */
#include "mysql/dbnode.h"
#include "base/log.h"

#include <pthread.h>
#include <stdatomic.h>

static struct {
    pthread_mutex_t lock; /* guards the one-time read of the list */
    int ready;            /* list read (under lock; then read without it, published by the lock) */
    int count;            /* nodes in the list, 0 = one server from host/port/socket, -1 = bad list */
    struct netaddr nodes[CONFIG_MYSQL_NODES_MAX];
    atomic_int current;
    atomic_uint switches;
} nodes = {.lock = PTHREAD_MUTEX_INITIALIZER};

int dbnode_setup(const struct config *cfg)
{
    pthread_mutex_lock(&nodes.lock);
    if (!nodes.ready) {
        char err[200];
        nodes.count = config_mysql_nodes(cfg, nodes.nodes, CONFIG_MYSQL_NODES_MAX, err, sizeof err);
        if (nodes.count < 0)
            log_error("mysql: [mysql] hosts: %s", err);
        nodes.ready = 1;
    }
    int n = nodes.count;
    pthread_mutex_unlock(&nodes.lock);
    return n;
}

int dbnode_count(void)
{
    pthread_mutex_lock(&nodes.lock);
    int n = nodes.ready ? nodes.count : 0;
    pthread_mutex_unlock(&nodes.lock);
    return n;
}

int dbnode_current(void)
{
    return atomic_load(&nodes.current);
}

const struct netaddr *dbnode_at(int i)
{
    return &nodes.nodes[i];
}

int dbnode_failed(int i, const char *why)
{
    if (nodes.count < 2)
        return 0;
    int next = (i + 1) % nodes.count;
    if (atomic_compare_exchange_strong(&nodes.current, &i, next)) {
        atomic_fetch_add(&nodes.switches, 1);
        log_warn("mysql: node %s:%d failed (%s); every connection moves to %s:%d", nodes.nodes[i].host,
                 nodes.nodes[i].port, why, nodes.nodes[next].host, nodes.nodes[next].port);
        return next;
    }
    return i; /* another thread moved it first: i now holds the node in use */
}

unsigned dbnode_switches(void)
{
    return atomic_load(&nodes.switches);
}

void dbnode_reset(void)
{
    pthread_mutex_lock(&nodes.lock);
    nodes.ready = 0;
    nodes.count = 0;
    atomic_store(&nodes.current, 0);
    atomic_store(&nodes.switches, 0);
    pthread_mutex_unlock(&nodes.lock);
}
