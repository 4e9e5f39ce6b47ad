/* raddr.c — see raddr.h. */
#include "core/raddr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int raddr_parse(const char *address, char *host, size_t hostlen, int *port, int *is_unix)
{
    if (strncmp(address, "unix:", 5) == 0) {
        if (address[5] == '\0' || strlen(address + 5) >= hostlen)
            return -1;
        strcpy(host, address + 5);
        *port = 0;
        *is_unix = 1;
        return 0;
    }
    *is_unix = 0;
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon == address)
        return -1;
    const char *h = address;
    size_t hlen = (size_t)(colon - address);
    if (h[0] == '[') {
        if (hlen < 3 || h[hlen - 1] != ']')
            return -1;
        h++;
        hlen -= 2;
    } else if (memchr(h, ':', hlen) != NULL) {
        return -1; /* an IPv6 host must be bracketed: "::1" is not "::" port 1 */
    }
    if (hlen >= hostlen)
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535)
        return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
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
            char seed[CLUSTER_ADDR_MAX], host[CLUSTER_ADDR_MAX];
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
            if (raddr_parse(seed, host, sizeof host, &port, &is_unix) < 0 || is_unix) {
                snprintf(err, errlen, "seed \"%s\" is not host:port or [IPv6]:port (port 1..65535)", seed);
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
