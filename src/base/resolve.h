/* resolve.h — host name resolution off the event loop.
 *
 * getaddrinfo() blocks for as long as the system's resolver takes: with a nameserver that does
 * not answer, that is its timeout times its attempts, seconds. A Redis connection that resolved
 * its host on an HTTP worker's loop (hiredis does, inside redisAsyncConnect) stalled every
 * request of that worker meanwhile, /health included, while the daemon should be answering 503
 * at once. A lookup here runs getaddrinfo() on a thread of its own and hands the numeric
 * addresses back on the caller's loop, so the caller connects to an address that needs no
 * resolving.
 *
 * The event base must have been made after evthread_use_pthreads() (main.c does that first):
 * the lookup thread wakes the loop with event_active(). */
#ifndef HG_RESOLVE_H
#define HG_RESOLVE_H

#include <netinet/in.h>

struct event_base;
struct resolve;

#define RESOLVE_MAX_ADDRS 8

struct resolve_result {
    int error;                                       /* 0, or getaddrinfo's EAI_* code */
    const char *error_text;                          /* gai_strerror(error), or NULL */
    int count;                                       /* addresses, in getaddrinfo's order */
    char addrs[RESOLVE_MAX_ADDRS][INET6_ADDRSTRLEN]; /* numeric, no brackets */
};

/* Called on the loop's thread, once, unless the lookup was cancelled first. */
typedef void (*resolve_fn)(const struct resolve_result *result, void *arg);

/* Is `host` already an IPv4 or IPv6 address (nothing to resolve)? */
int resolve_is_numeric(const char *host);

/* Resolve `host` (TCP addresses of any family) and call fn(result, arg) on `base`'s loop. Call
 * on that loop's thread. NULL when the lookup could not be started (no memory, no thread). */
struct resolve *resolve_start(struct event_base *base, const char *host, resolve_fn fn, void *arg);

/* Forget a lookup whose callback has not run: it never will. Call on the loop's thread. The
 * thread, if still in getaddrinfo(), finishes on its own and frees what it holds. */
void resolve_cancel(struct resolve *r);

/* Tests: replace getaddrinfo() (a slow or failing resolver, or a chosen address order). NULL
 * puts getaddrinfo() back. The function runs on the lookup thread. */
typedef void (*resolve_lookup_fn)(const char *host, struct resolve_result *out);
void resolve_set_lookup(resolve_lookup_fn fn);

#endif
