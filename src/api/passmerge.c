/* passmerge.c — see passmerge.h. */
#include "api/passmerge.h"
#include "core/job.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

enum kind { RESERVE, FINISH };

/* One request's part of a merged call. */
struct member {
    store_reserve_fn reserved; /* RESERVE */
    store_id_fn finished;      /* FINISH */
    void *arg;
    int count;   /* RESERVE: jobs asked */
    uint64_t id; /* FINISH: the job, and the attempt it finishes */
    int attempt;
};

/* One call being gathered: the kind, shard, topics and actor its requests share. */
struct group {
    struct group *next;
    enum kind kind;
    int shard, ntopics, total; /* total: RESERVE, the jobs asked */
    const char *topics[TOPICS_PER_GET];
    size_t lens[TOPICS_PER_GET];
    char who[STORE_WHO_MAX];
    struct member *members;
    int n, cap;
};

struct passmerge {
    struct event *pass_end; /* active while something is queued: runs after the pass's callbacks */
    struct group *queued;   /* in the order first asked */
    struct group **tail;
    struct passmerge_sends sends;
    void *send_arg;
};

static void group_free(struct group *g)
{
    free(g->members);
    free(g);
}

/* The call's jobs, handed out in the order the requests were queued. */
static void on_reserved(const struct delivered *jobs, int n, int failed, int64_t wait_ms, void *arg)
{
    struct group *g = arg;
    int at = 0;
    for (int i = 0; i < g->n; i++) {
        const struct member *mb = &g->members[i];
        int share = n - at < mb->count ? n - at : mb->count;
        mb->reserved(share > 0 ? jobs + at : NULL, share, failed, wait_ms, mb->arg);
        at += share;
    }
    group_free(g);
}

/* Each job's outcome to its request (outs NULL: the call failed). */
static void on_finished(const struct id_outcome *outs, int n, void *arg)
{
    struct group *g = arg;
    for (int i = 0; i < g->n; i++)
        g->members[i].finished(outs && i < n ? &outs[i] : NULL, g->members[i].arg);
    group_free(g);
}

static void send_group(struct passmerge *m, struct group *g)
{
    if (g->kind == RESERVE) {
        if (m->sends.reserve(m->send_arg, g->shard, g->topics, g->lens, g->ntopics, g->total, g->who, on_reserved, g) <
            0)
            on_reserved(NULL, 0, 1, 0, g); /* not sent: every request hears it failed, as its own call would */
        return;
    }
    uint64_t *ids = malloc((size_t)g->n * sizeof *ids);
    int *attempts = malloc((size_t)g->n * sizeof *attempts);
    int sent = -1;
    if (ids && attempts) {
        for (int i = 0; i < g->n; i++) {
            ids[i] = g->members[i].id;
            attempts[i] = g->members[i].attempt;
        }
        sent = m->sends.finish(m->send_arg, g->shard, ids, attempts, g->n, g->who, on_finished, g);
    }
    free(ids);
    free(attempts);
    if (sent < 0)
        on_finished(NULL, 0, g);
}

void passmerge_flush(struct passmerge *m)
{
    struct group *g = m->queued;
    m->queued = NULL;
    m->tail = &m->queued;
    while (g) {
        struct group *next = g->next;
        send_group(m, g);
        g = next;
    }
}

static void on_pass_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    passmerge_flush(arg);
}

struct passmerge *passmerge_new(struct event_base *base, const struct passmerge_sends *sends, void *send_arg)
{
    struct passmerge *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->pass_end = event_new(base, -1, 0, on_pass_end, m);
    if (m->pass_end == NULL) {
        free(m);
        return NULL;
    }
    m->tail = &m->queued;
    m->sends = *sends;
    m->send_arg = send_arg;
    return m;
}

static int same_call(const struct group *g, enum kind kind, int shard, const char *const *topics, const size_t *lens,
                     int ntopics, const char *who)
{
    if (g->kind != kind || g->shard != shard || g->ntopics != ntopics || strcmp(g->who, who) != 0)
        return 0;
    for (int i = 0; i < ntopics; i++)
        if (g->lens[i] != lens[i] || memcmp(g->topics[i], topics[i], lens[i]) != 0)
            return 0;
    return 1;
}

static int has_room(const struct group *g, int count)
{
    return g->kind == RESERVE ? g->total + count <= PASSMERGE_COUNT_MAX : g->n < PASSMERGE_FINISH_MAX;
}

/* The queued call a request joins: one of its kind, shard, topics and actor with room, or a new
 * one at the end. NULL when out of memory. */
static struct group *group_for(struct passmerge *m, enum kind kind, int shard, const char *const *topics,
                               const size_t *lens, int ntopics, int count, const char *who)
{
    for (struct group *g = m->queued; g; g = g->next)
        if (has_room(g, count) && same_call(g, kind, shard, topics, lens, ntopics, who))
            return g;
    size_t who_len = strlen(who);
    if (ntopics < 0 || ntopics > TOPICS_PER_GET || who_len >= sizeof((struct group *)0)->who)
        return NULL;
    struct group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->kind = kind;
    g->shard = shard;
    g->ntopics = ntopics;
    if (ntopics > 0) {
        memcpy(g->topics, topics, (size_t)ntopics * sizeof *topics);
        memcpy(g->lens, lens, (size_t)ntopics * sizeof *lens);
    }
    memcpy(g->who, who, who_len + 1);
    *m->tail = g;
    m->tail = &g->next;
    return g;
}

/* Add `mb` to the call it joins, and have the pass's end send it. */
static int queue(struct passmerge *m, enum kind kind, int shard, const char *const *topics, const size_t *lens,
                 int ntopics, const char *who, const struct member *mb)
{
    struct group *g = group_for(m, kind, shard, topics, lens, ntopics, mb->count, who);
    if (g == NULL)
        return -1;
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 8;
        struct member *grown = realloc(g->members, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            if (g->n == 0) { /* just made for this request, so the last queued: unqueue it */
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
    g->members[g->n++] = *mb;
    g->total += mb->count;
    event_active(m->pass_end, EV_TIMEOUT, 1);
    return 0;
}

int passmerge_reserve(struct passmerge *m, int shard, const char *const *topics, const size_t *lens, int ntopics,
                      int count, const char *who, store_reserve_fn fn, void *arg)
{
    if (ntopics < 1)
        return -1;
    struct member mb = {.reserved = fn, .arg = arg, .count = count};
    return queue(m, RESERVE, shard, topics, lens, ntopics, who, &mb);
}

int passmerge_finish(struct passmerge *m, int shard, uint64_t id, int attempt, const char *who, store_id_fn fn,
                     void *arg)
{
    struct member mb = {.finished = fn, .arg = arg, .id = id, .attempt = attempt};
    return queue(m, FINISH, shard, NULL, NULL, 0, who, &mb);
}

void passmerge_free(struct passmerge *m)
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
