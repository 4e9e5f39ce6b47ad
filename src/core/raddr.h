/* raddr.h — [redis] address, parsed without I/O: one server ("host:port", "[v6]:port" or
 * "unix:/path") for a single Redis, or a seed list ("host:port,host:port") for a Redis Cluster.
 * The config check (config.c) and every connection (rconn.c, rblock.c, rcluster.c) read
 * addresses through these functions, so what `hourglassd -t` accepts is what connects. A
 * host:port follows base/netaddr.h's rules (a port is required) and its messages. */
#ifndef HG_RADDR_H
#define HG_RADDR_H

#include <stddef.h>

#include "core/cluster.h"

#define RADDR_SEEDS_MAX 64 /* seed nodes a list may name */

/* One address into host (hostlen bytes) and *port, *is_unix (the path is then in host, port 0).
 * An IPv6 host must be bracketed ("::1" is not "::" port 1); the port is 1..65535. 0 / -1. */
int raddr_parse(const char *address, char *host, size_t hostlen, int *port, int *is_unix);

/* Does raddr_parse take `address`? 0, or -1 with err saying what is wrong (the config check). */
int raddr_check(const char *address, char *err, size_t errlen) __attribute__((warn_unused_result));

/* A Cluster seed list: comma-separated "host:port" or "[v6]:port" (no unix sockets: cluster nodes
 * name each other by TCP address), blanks around each ignored, empty elements skipped. Copies
 * up to `max` seeds into out (unless out is NULL: a check only) and returns how many (>= 1);
 * -1 with err naming the first bad element, or saying there are none or more than max. */
int raddr_seeds(const char *list, char (*out)[CLUSTER_ADDR_MAX], int max, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
