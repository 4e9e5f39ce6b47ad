/* dbnode.h — the MySQL node this process uses, when [mysql] hosts names several: the nodes of a
 * MariaDB Galera cluster, or a primary and its standbys (docs/architecture.md, "MySQL as a
 * cluster").
 *
 * One choice for the whole process. Every connection — journal, pool, pager and its committers,
 * scheduler, restore, reconciler, retention — is made to the node in use (db_connect), so an
 * instance never writes through two nodes at once: Galera would have to certify those writes
 * against each other (and fail some at COMMIT), a standby would refuse them. The node in use
 * changes only when a connection to it cannot be made, or it answers that it is not ready (a
 * Galera node outside the primary component, or not synced): then the next in the list, round.
 * Connections made before the change are stale (db_stale, db.h): their owners close them after
 * their current unit of work and reconnect — to the new node.
 *
 * Thread-safe: the node in use is an atomic index; the list is read once, from the first config
 * that asks (the process has one). Without [mysql] hosts there is no list (dbnode_count 0) and
 * [mysql] host, port and socket name the one server, as they always did. */
#ifndef HG_DBNODE_H
#define HG_DBNODE_H

#include "base/netaddr.h"
#include "core/config.h"

/* Read [mysql] hosts once (later calls return the same). The number of nodes, 0 when hosts is
 * empty (one server, from host/port/socket); -1 when the list does not parse (config_validate
 * refuses such a config first). */
int dbnode_setup(const struct config *cfg);

/* The number of nodes dbnode_setup read (0: one server from host/port/socket). */
int dbnode_count(void);

/* The node in use: its index (0 when there is no list). */
int dbnode_current(void);

/* Node i of the list (0 <= i < dbnode_setup's count). Never freed. */
const struct netaddr *dbnode_at(int i);

/* A connection to node i failed, or it was not ready: if i is still the node in use, the next one
 * becomes it (logged, with `why`, and counted). Returns the node in use after the call. */
int dbnode_failed(int i, const char *why);

/* How many times the node in use changed since start. */
unsigned dbnode_switches(void);

/* For tests: forget the list and start again from node 0. */
void dbnode_reset(void);

#endif
