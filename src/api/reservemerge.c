/* reservemerge.c — see reservemerge.h. */
#include "api/reservemerge.h"
#include "base/log.h"
#include "core/job.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

/* One request's part of a merged call. */
struct member {
    int count;
    store_reserve_fn fn;
    void *arg;
};

/* One call being gathered: the shard, topics and actor its requests share. */
struct group {
    struct group *next;
    int shard, ntopics, total;
    const char *topics[TOPICS_PER_GET];
    size_t lens[TOPICS_PER_GET];
    char who[STORE_WHO_MAX];
    struct member *members;
    int n, cap;
};

struct reservemerge {
    struct event *pass_end; /* active while something is queued: runs after the pass's callbacks */
    struct group *queued;   /* in the order first asked */
    struct group **tail;
    reservemerge_send_fn send;
    void *send_arg;
};

static void group_free(struct group *g)
{
    free(g->members);
    free(g);
}

/* The call's jobs, handed out in the order the requests were queued. */
static void on_answer(const struct delivered *jobs, int n, int failed, int64_t wait_ms, void *arg)
{
    struct group *g = arg;
    int at = 0;
    for (int i = 0; i < g->n; i++) {
        const struct member *mb = &g->members[i];
        int share = n - at < mb->count ? n - at : mb->count;
        mb->fn(share > 0 ? jobs + at : NULL, share, failed, wait_ms, mb->arg);
        at += share;
    }
    group_free(g);
}

void reservemerge_flush(struct reservemerge *m)
{
    struct group *g = m->queued;
    m->queued = NULL;
    m->tail = &m->queued;
    while (g) {
        struct group *next = g->next;
        if (m->send(m->send_arg, g->shard, g->topics, g->lens, g->ntopics, g->total, g->who, on_answer, g) < 0)
            on_answer(NULL, 0, 1, 0, g); /* not sent: every request hears it failed, as its own call would */
        g = next;
    }
}

static void on_pass_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    reservemerge_flush(arg);
}

struct reservemerge *reservemerge_new(struct event_base *base, reservemerge_send_fn send, void *send_arg)
{
    struct reservemerge *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->pass_end = event_new(base, -1, 0, on_pass_end, m);
    if (m->pass_end == NULL) {
        free(m);
        return NULL;
    }
    m->tail = &m->queued;
    m->send = send;
    m->send_arg = send_arg;
    return m;
}

static int same_call(const struct group *g, int shard, const char *const *topics, const size_t *lens, int ntopics,
                     const char *who)
{
    if (g->shard != shard || g->ntopics != ntopics || strcmp(g->who, who) != 0)
        return 0;
    for (int i = 0; i < ntopics; i++)
        if (g->lens[i] != lens[i] || memcmp(g->topics[i], topics[i], lens[i]) != 0)
            return 0;
    return 1;
}

static struct group *group_for(struct reservemerge *m, int shard, const char *const *topics, const size_t *lens,
                               int ntopics, int count, const char *who)
{
    for (struct group *g = m->queued; g; g = g->next)
        if (g->total + count <= RESERVEMERGE_COUNT_MAX && same_call(g, shard, topics, lens, ntopics, who))
            return g;
    size_t who_len = strlen(who);
    if (ntopics < 1 || ntopics > TOPICS_PER_GET || who_len >= sizeof((struct group *)0)->who)
        return NULL;
    struct group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->shard = shard;
    g->ntopics = ntopics;
    memcpy(g->topics, topics, (size_t)ntopics * sizeof *topics);
    memcpy(g->lens, lens, (size_t)ntopics * sizeof *lens);
    memcpy(g->who, who, who_len + 1);
    *m->tail = g;
    m->tail = &g->next;
    return g;
}

int reservemerge_add(struct reservemerge *m, int shard, const char *const *topics, const size_t *lens, int ntopics,
                     int count, const char *who, store_reserve_fn fn, void *arg)
{
    struct group *g = group_for(m, shard, topics, lens, ntopics, count, who);
    if (g == NULL)
        return -1;
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 8;
        struct member *grown = realloc(g->members, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            if (g->n == 0) { /* just made for this request: unqueue it */
                struct group **at = &m->queued;
                while (*at != g)
                    at = &(*at)->next;
                *at = NULL;
                m->tail = at;
                group_free(g);
            }
            return -1;
        }
        g->members = grown;
        g->cap = cap;
    }
    g->members[g->n++] = (struct member){count, fn, arg};
    g->total += count;
    event_active(m->pass_end, EV_TIMEOUT, 1);
    return 0;
}

void reservemerge_free(struct reservemerge *m)
{
    if (m == NULL)
        return;
    for (struct group *g = m->queued, *next; g; g = next) {
        next = g->next;
        group_free(g);
    }
    event_free(m->pass_end);
    free(m);
}
