/* router.c — see router.h. */
#include "core/router.h"

#include <string.h>

struct rule {
    const char *prefix; /* exact path, or prefix ending in '/' that takes one argument */
    enum endpoint endpoint;
};

/* Exact paths first; "/reStore" and "/reStore/" differ by the argument. */
static const struct rule rules[] = {
    {"/push", EP_PUSH},
    {"/finish", EP_FINISH},
    {"/release", EP_RELEASE},
    {"/touch", EP_TOUCH},
    {"/delete", EP_DELETE},
    {"/reschedule", EP_RESCHEDULE},
    {"/reStore", EP_RESTORE},
    {"/health", EP_HEALTH},
    {"/stats", EP_STATS},
    {"/metrics", EP_METRICS},
    {"/get/", EP_GET},
    {"/jobs/", EP_JOBS},
    {"/dead/", EP_DEAD},
    {"/reStore/", EP_RESTORE_ONE},
    {"/topics", EP_TOPICS},
    {"/topics/", EP_TOPIC},
    {"/console", EP_CONSOLE},
    {"/console/", EP_CONSOLE},
    {"/fleet", EP_FLEET},
    {"/throughput", EP_THROUGHPUT},
    {"/schedules", EP_SCHEDULES},
    {"/schedules/", EP_SCHEDULE},
    {"/jobs", EP_LOOKUP},
    {"/openapi.json", EP_OPENAPI},
};

/* Paths with their argument in the middle ("/topics/{topic}/jobs"): tried before the rules
 * above, whose "/x/" prefixes take a single segment only. */
static const struct {
    const char *prefix, *suffix;
    enum endpoint endpoint;
} mid_rules[] = {
    {"/topics/", "/jobs", EP_TOPIC_JOBS},
    {"/topics/", "/purge", EP_PURGE},
    {"/topics/", "/groups", EP_TOPIC_GROUPS},
};

static const char *const names[EP_COUNT] = {
    [EP_NOT_FOUND] = "not_found",
    [EP_PUSH] = "push",
    [EP_GET] = "get",
    [EP_FINISH] = "finish",
    [EP_RELEASE] = "release",
    [EP_TOUCH] = "touch",
    [EP_DELETE] = "delete",
    [EP_RESCHEDULE] = "reschedule",
    [EP_JOBS] = "jobs",
    [EP_DEAD] = "dead",
    [EP_RESTORE] = "restore",
    [EP_RESTORE_ONE] = "restore_one",
    [EP_HEALTH] = "health",
    [EP_STATS] = "stats",
    [EP_METRICS] = "metrics",
    [EP_TOPICS] = "topics",
    [EP_TOPIC] = "topic",
    [EP_CONSOLE] = "console",
    [EP_TOPIC_JOBS] = "topic_jobs",
    [EP_FLEET] = "fleet",
    [EP_THROUGHPUT] = "throughput",
    [EP_SCHEDULES] = "schedules",
    [EP_SCHEDULE] = "schedule",
    [EP_LOOKUP] = "lookup",
    [EP_PURGE] = "purge",
    [EP_OPENAPI] = "openapi",
    [EP_TOPIC_GROUPS] = "topic_groups",
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long router_percent_decode(const char *src, size_t len, char *dst, size_t dstcap, int plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hexval(src[i + 1]), lo = hexval(src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (o + 1 >= dstcap)
            return -1;
        dst[o++] = c;
    }
    if (dstcap > 0)
        dst[o] = '\0';
    return (long)o;
}

/* Decode one path segment into out->arg. */
static enum route_status take_arg(const char *arg, size_t arg_len, struct route *out)
{
    if (memchr(arg, '/', arg_len) != NULL)
        return ROUTE_NOT_FOUND; /* one segment only: no nesting, no traversal */
    if (arg_len > 3 * ROUTE_ARG_MAX)
        return ROUTE_TOO_LONG;
    long n = router_percent_decode(arg, arg_len, out->arg, sizeof out->arg, 0);
    if (n < 0)
        return arg_len > ROUTE_ARG_MAX ? ROUTE_TOO_LONG : ROUTE_BAD_ENCODING;
    if (memchr(out->arg, '\0', (size_t)n) != NULL)
        return ROUTE_BAD_ENCODING;
    out->arg_len = (size_t)n;
    return ROUTE_OK;
}

enum route_status router_match(const char *path, size_t len, struct route *out)
{
    out->endpoint = EP_NOT_FOUND;
    out->arg[0] = '\0';
    out->arg_len = 0;

    for (size_t r = 0; r < sizeof mid_rules / sizeof mid_rules[0]; r++) {
        size_t plen = strlen(mid_rules[r].prefix), slen = strlen(mid_rules[r].suffix);
        if (len <= plen + slen || memcmp(path, mid_rules[r].prefix, plen) != 0 ||
            memcmp(path + len - slen, mid_rules[r].suffix, slen) != 0)
            continue;
        enum route_status st = take_arg(path + plen, len - plen - slen, out);
        if (st == ROUTE_OK)
            out->endpoint = mid_rules[r].endpoint;
        return st;
    }
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        const char *prefix = rules[r].prefix;
        size_t plen = strlen(prefix);
        if (prefix[plen - 1] != '/') {
            if (len == plen && memcmp(path, prefix, plen) == 0) {
                out->endpoint = rules[r].endpoint;
                return ROUTE_OK;
            }
            continue;
        }
        if (len < plen || memcmp(path, prefix, plen) != 0)
            continue;
        enum route_status st = take_arg(path + plen, len - plen, out);
        if (st == ROUTE_OK)
            out->endpoint = rules[r].endpoint;
        return st;
    }
    return ROUTE_NOT_FOUND;
}

int router_method_allowed(enum endpoint ep, enum method m, const char **allow)
{
    switch (ep) {
    case EP_PUSH:
    case EP_PURGE: /* destructive: never on a GET a crawler or a prefetch might send */
        *allow = "POST";
        return m == METHOD_POST;
    case EP_GET:
    case EP_FINISH:
    case EP_RELEASE:
    case EP_TOUCH:
    case EP_DELETE:
    case EP_RESCHEDULE:
    case EP_RESTORE:
    case EP_RESTORE_ONE:
        *allow = "GET, POST";
        return m == METHOD_GET || m == METHOD_POST;
    case EP_TOPIC:
    case EP_SCHEDULE:
        *allow = "GET, HEAD, PUT, DELETE";
        return m == METHOD_GET || m == METHOD_HEAD || m == METHOD_PUT || m == METHOD_DELETE;
    case EP_SCHEDULES:
        *allow = "GET, HEAD, POST";
        return m == METHOD_GET || m == METHOD_HEAD || m == METHOD_POST;
    default:
        *allow = "GET, HEAD";
        return m == METHOD_GET || m == METHOD_HEAD;
    }
}

int router_is_admin(enum endpoint ep, enum method m)
{
    if (ep == EP_TOPIC || ep == EP_SCHEDULE)
        return m == METHOD_PUT || m == METHOD_DELETE;
    if (ep == EP_SCHEDULES)
        return m == METHOD_POST;
    return ep == EP_RESTORE || ep == EP_RESTORE_ONE || ep == EP_DEAD || ep == EP_CONSOLE || ep == EP_TOPIC_JOBS ||
           ep == EP_PURGE || ep == EP_TOPIC_GROUPS;
}

const char *router_endpoint_name(enum endpoint ep)
{
    return (unsigned)ep < EP_COUNT ? names[ep] : "unknown";
}
