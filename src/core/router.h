/* router.h — map a request path and method onto an endpoint. Pure functions: no I/O, no
 * allocation, so they are unit-tested and fuzzed directly. */
#ifndef HG_ROUTER_H
#define HG_ROUTER_H

#include <stddef.h>

enum endpoint {
    EP_NOT_FOUND = 0,
    EP_PUSH,
    EP_GET,
    EP_FINISH,
    EP_RELEASE,
    EP_TOUCH,
    EP_DELETE,
    EP_RESCHEDULE,
    EP_JOBS,
    EP_DEAD,
    EP_RESTORE,
    EP_RESTORE_ONE,
    EP_HEALTH,
    EP_STATS,
    EP_METRICS,
    EP_TOPICS,
    EP_TOPIC,
    EP_CONSOLE,    /* /console, /console/<file> */
    EP_TOPIC_JOBS, /* /topics/{topic}/jobs */
    EP_FLEET,
    EP_THROUGHPUT,
    EP_SCHEDULES,    /* /schedules */
    EP_SCHEDULE,     /* /schedules/{id} */
    EP_LOOKUP,       /* /jobs?topic=&bizKey= */
    EP_PURGE,        /* /topics/{topic}/purge */
    EP_OPENAPI,      /* /openapi.json */
    EP_TOPIC_GROUPS, /* /topics/{topic}/groups */
    EP_COUNT
};

enum method { METHOD_GET, METHOD_POST, METHOD_HEAD, METHOD_PUT, METHOD_DELETE, METHOD_OTHER };

#define ROUTE_ARG_MAX 4096

enum route_status { ROUTE_OK, ROUTE_NOT_FOUND, ROUTE_BAD_ENCODING, ROUTE_TOO_LONG };

struct route {
    enum endpoint endpoint;
    char arg[ROUTE_ARG_MAX + 1]; /* percent-decoded path argument ({topic}, {id}, a console file); "" when none */
    size_t arg_len;
};

/* Match `path` (the raw path, without query). Fills `out` and returns ROUTE_OK, or why not. */
enum route_status router_match(const char *path, size_t len, struct route *out);

/* Whether `m` may be used on `ep`; the Allow header value for a 405 goes in *allow. */
int router_method_allowed(enum endpoint ep, enum method m, const char **allow);

/* Admin endpoints need the admin token (or a loopback client when none is set); for some
 * endpoints only the methods that change something are admin (PUT/DELETE /topics/{topic}). */
int router_is_admin(enum endpoint ep, enum method m);

/* Stable lowercase name, used in metrics labels and logs ("push", "get", ...). */
const char *router_endpoint_name(enum endpoint ep);

/* Decode %XX escapes (and '+' as space when plus_is_space) from src into dst (capacity
 * dstcap). Returns the decoded length, or -1 on a malformed escape or lack of room. */
long router_percent_decode(const char *src, size_t len, char *dst, size_t dstcap, int plus_is_space);

#endif
