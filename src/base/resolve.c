/* resolve.c — see resolve.h.
 *
 * A lookup is shared by two owners: the loop (until its callback ran or it was cancelled) and
 * the lookup thread (until getaddrinfo returned and the loop was told). Whoever lets go last
 * frees it. The thread tells the loop under the lookup's lock, and cancelling takes the same
 * lock before freeing the event, so the thread never activates an event that is gone. */
#include "base/resolve.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct resolve {
    pthread_mutex_t lock;
    atomic_int owners;
    int cancelled;      /* under lock */
    struct event *done; /* on the caller's loop; freed there */
    resolve_fn fn;
    void *arg;
    char host[256];
    struct resolve_result result;
};

static _Atomic(resolve_lookup_fn) lookup_hook;

void resolve_set_lookup(resolve_lookup_fn fn)
{
    atomic_store(&lookup_hook, fn);
}

int resolve_is_numeric(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

static void system_lookup(const char *host, struct resolve_result *out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        out->error = rc;
        out->error_text = gai_strerror(rc);
        return;
    }
    for (struct addrinfo *a = res; a && out->count < RESOLVE_MAX_ADDRS; a = a->ai_next) {
        const void *src = a->ai_family == AF_INET    ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                          : a->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr
                                                     : NULL;
        char *dst = out->addrs[out->count];
        if (src == NULL || inet_ntop(a->ai_family, src, dst, INET6_ADDRSTRLEN) == NULL)
            continue;
        int seen = 0; /* getaddrinfo lists an address once per protocol on some systems */
        for (int i = 0; i < out->count && !seen; i++)
            seen = strcmp(out->addrs[i], dst) == 0;
        if (!seen)
            out->count++;
    }
    freeaddrinfo(res);
    if (out->count == 0) {
        out->error = EAI_NONAME;
        out->error_text = gai_strerror(EAI_NONAME);
    }
}

static void let_go(struct resolve *r)
{
    if (atomic_fetch_sub(&r->owners, 1) == 1) {
        pthread_mutex_destroy(&r->lock);
        free(r);
    }
}

static void *lookup_thread(void *arg)
{
    struct resolve *r = arg;
    resolve_lookup_fn hook = atomic_load(&lookup_hook);
    (hook ? hook : system_lookup)(r->host, &r->result);
    pthread_mutex_lock(&r->lock);
    if (!r->cancelled)
        event_active(r->done, EV_READ, 0);
    pthread_mutex_unlock(&r->lock);
    let_go(r);
    return NULL;
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct resolve *r = arg;
    event_free(r->done);
    r->done = NULL;
    r->fn(&r->result, r->arg);
    let_go(r);
}

struct resolve *resolve_start(struct event_base *base, const char *host, resolve_fn fn, void *arg)
{
    if (strlen(host) >= sizeof((struct resolve *)0)->host)
        return NULL;
    struct resolve *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    strcpy(r->host, host);
    r->fn = fn;
    r->arg = arg;
    atomic_init(&r->owners, 2);
    pthread_mutex_init(&r->lock, NULL);
    r->done = event_new(base, -1, 0, on_done, r);
    pthread_attr_t attr;
    pthread_t t;
    int ok = r->done != NULL && pthread_attr_init(&attr) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&t, &attr, lookup_thread, r) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!ok) {
        if (r->done)
            event_free(r->done);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

void resolve_cancel(struct resolve *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    r->cancelled = 1;
    pthread_mutex_unlock(&r->lock);
    event_free(r->done); /* also takes it off the active queue if the thread already woke it */
    r->done = NULL;
    let_go(r);
}
