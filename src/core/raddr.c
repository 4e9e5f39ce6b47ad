/* raddr.c — see raddr.h. */
#include "core/raddr.h"
#include "base/netaddr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* raddr_parse, saying what is wrong in err (err NULL with errlen 0: nothing said). */
static int parse(const char *address, char *host, size_t hostlen, int *port, int *is_unix, char *err, size_t errlen)
{
    struct netaddr a;
    *is_unix = strncmp(address, "unix:", 5) == 0;
    const char *found = *is_unix ? address + 5 : a.host;
    if (*is_unix && *found == '\0') {
        snprintf(err, errlen, "no socket path after \"unix:\"");
        return -1;
    }
    if (!*is_unix && netaddr_parse(address, strlen(address), 0, &a, err, errlen) < 0)
        return -1;
    if (strlen(found) >= hostlen) {
        snprintf(err, errlen, "%s is longer than %zu bytes", *is_unix ? "the socket path" : "host", hostlen - 1);
        return -1;
    }
    strcpy(host, found);
    *port = *is_unix ? 0 : a.port;
    return 0;
}

int raddr_parse(const char *address, char *host, size_t hostlen, int *port, int *is_unix)
{
    return parse(address, host, hostlen, port, is_unix, NULL, 0);
}

int raddr_check(const char *address, char *err, size_t errlen)
{
    char host[CLUSTER_ADDR_MAX];
    int port, is_unix;
    return parse(address, host, sizeof host, &port, &is_unix, err, errlen);
}

int raddr_seeds(const char *list, char (*out)[CLUSTER_ADDR_MAX], int max, char *err, size_t errlen)
{
    int n = 0;
    const char *p = list;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len > 0) {
            char seed[CLUSTER_ADDR_MAX], host[CLUSTER_ADDR_MAX], why[128];
            int port, is_unix;
            if (n == max) {
                snprintf(err, errlen, "more than %d seed nodes", max);
                return -1;
            }
            if (len >= sizeof seed) {
                snprintf(err, errlen, "seed \"%.40s...\" is longer than %zu characters", p, sizeof seed - 1);
                return -1;
            }
            memcpy(seed, p, len);
            seed[len] = '\0';
            if (parse(seed, host, sizeof host, &port, &is_unix, why, sizeof why) < 0 || is_unix) {
                if (is_unix) /* cluster nodes name each other by TCP address */
                    snprintf(why, sizeof why, "a cluster node is reached over TCP, not a unix socket");
                snprintf(err, errlen, "seed \"%s\" is not host:port or [IPv6]:port: %s", seed, why);
                return -1;
            }
            if (out)
                memcpy(out[n], seed, len + 1);
            n++;
        }
        p = end ? end + 1 : NULL;
    }
    if (n == 0) {
        snprintf(err, errlen, "no seed node (host:port,host:port...)");
        return -1;
    }
    return n;
}
