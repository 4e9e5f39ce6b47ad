/* rblock.c — see rblock.h. */
#include "redis/rblock.h"
#include "core/rcause.h"
#include "redis/rconn.h"
#include "core/cluster.h"
#include "core/raddr.h"
#include "core/shardtag.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The nodes of the last slot map any blocking connection of this process read (masters, then
 * their replicas), tried before the configured seeds: a seed that died for good must not cut
 * the blocking users (the outbox readers, the pager, /reStore) off a cluster whose other nodes
 * answer, as every Redis Cluster client keeps using the nodes it has discovered. The seeds
 * are tried only when none of these answers. Shared by every thread. */
#define KNOWN_MAX 128
static struct {
    pthread_mutex_t lock;
    char addr[KNOWN_MAX][CLUSTER_ADDR_MAX];
    int n;
} known = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void add_known(const char *addr)
{
    for (int i = 0; i < known.n; i++)
        if (strcmp(known.addr[i], addr) == 0)
            return;
    if (known.n < KNOWN_MAX)
        snprintf(known.addr[known.n++], CLUSTER_ADDR_MAX, "%s", addr);
}

static void remember_nodes(const struct cluster_map *m)
{
    pthread_mutex_lock(&known.lock);
    known.n = 0;
    for (int i = 0; i < m->nmasters; i++)
        add_known(m->masters[i].node.addr);
    for (int i = 0; i < m->nmasters; i++)
        for (int r = 0; r < m->masters[i].nreplicas; r++)
            add_known(m->masters[i].replicas[r].addr);
    pthread_mutex_unlock(&known.lock);
}

/* Where to ask for the map, in order: the known nodes, then the seeds not among them. */
static int map_sources(const struct config *cfg, char (*out)[CLUSTER_ADDR_MAX], int max, char *err, size_t errlen)
{
    char seeds[RADDR_SEEDS_MAX][CLUSTER_ADDR_MAX];
    int nseeds = raddr_seeds(cfg->redis_address, seeds, RADDR_SEEDS_MAX, err, errlen);
    int n = 0;
    pthread_mutex_lock(&known.lock);
    for (int i = 0; i < known.n && n < max; i++)
        memcpy(out[n++], known.addr[i], CLUSTER_ADDR_MAX);
    pthread_mutex_unlock(&known.lock);
    int nknown = n;
    for (int s = 0; s < nseeds && n < max; s++) {
        int dup = 0;
        for (int i = 0; i < nknown && !dup; i++)
            dup = strcmp(out[i], seeds[s]) == 0;
        if (!dup)
            memcpy(out[n++], seeds[s], CLUSTER_ADDR_MAX);
    }
    return n;
}

/* FUNCTION LOAD's answer: loaded, or loaded already, or refused by a full Redis — whose calls
 * will say so themselves (OOM, named), as rconn.c's set-up does. */
static int library_loaded(const redisReply *r)
{
    return r != NULL && (r->type != REDIS_REPLY_ERROR || script_library_present(r->str, r->len) ||
                         rcause_classify(r->str, r->len) == RCAUSE_OOM);
}

/* Connect to one server: address, db (0 for a cluster node), the scripts' library. */
static redisContext *connect_to(const struct config *cfg, const char *address, int db, int load_scripts,
                                enum rblock_failure *why, char *err, size_t errlen)
{
    char host[256];
    int port, is_unix;
    *why = RBLOCK_UNREACHABLE;
    if (raddr_parse(address, host, sizeof host, &port, &is_unix) < 0) {
        snprintf(err, errlen, "bad [redis] address");
        return NULL;
    }
    struct timeval tv = {cfg->redis_timeout_ms / 1000, (cfg->redis_timeout_ms % 1000) * 1000};
    redisContext *c = is_unix ? redisConnectUnixWithTimeout(host, tv) : redisConnectWithTimeout(host, port, tv);
    if (c == NULL || c->err) {
        snprintf(err, errlen, "%s", c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    /* pipelined; each reply names what a failure means to the operator */
    const char *step[3];
    int n = 0, library_step = -1;
    if (cfg->redis_password[0]) {
        redisAppendCommand(c, "AUTH %s", cfg->redis_password);
        step[n++] = "AUTH failed (check [redis] password)";
    }
    if (db) {
        redisAppendCommand(c, "SELECT %d", db);
        step[n++] = "SELECT failed (check [redis] db)";
    }
    if (load_scripts) {
        const char *argv[3];
        size_t lens[3];
        script_load_argv(argv, lens);
        redisAppendCommandArgv(c, 3, argv, lens);
        library_step = n;
        step[n++] = "FUNCTION LOAD failed";
    }
    for (int i = 0; i < n; i++) {
        redisReply *r = rblock_reply(c);
        if (i == library_step && library_loaded(r)) {
            freeReplyObject(r);
            continue;
        }
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            *why = r ? RBLOCK_REFUSED : RBLOCK_UNREACHABLE;
            snprintf(err, errlen, "%s: %s", step[i], r ? r->str : c->errstr);
            if (r)
                freeReplyObject(r);
            redisFree(c);
            return NULL;
        }
        freeReplyObject(r);
    }
    return c;
}

/* The slot map (CLUSTER SLOTS) of the first known node, or else seed, that answers with one.
 * NULL with err. */
static struct cluster_map *read_map(const struct config *cfg, enum rblock_failure *why, char *err, size_t errlen)
{
    char(*sources)[CLUSTER_ADDR_MAX] = malloc((KNOWN_MAX + RADDR_SEEDS_MAX) * sizeof *sources);
    *why = RBLOCK_UNREACHABLE;
    if (sources == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int n = map_sources(cfg, sources, KNOWN_MAX + RADDR_SEEDS_MAX, err, errlen);
    struct cluster_map *found = NULL;
    for (int i = 0; i < n && found == NULL; i++) {
        redisContext *c = connect_to(cfg, sources[i], 0, 0, why, err, errlen);
        if (c == NULL)
            continue;
        char host[CLUSTER_ADDR_MAX];
        int port, is_unix;
        redisReply *r = redisCommand(c, "CLUSTER SLOTS");
        struct cluster_map *m = NULL;
        if (r == NULL)
            snprintf(err, errlen, "%s: %s", sources[i], c->errstr);
        else if (raddr_parse(sources[i], host, sizeof host, &port, &is_unix) == 0 &&
                 (m = cluster_map_parse(r, host, err, errlen)) == NULL)
            *why = RBLOCK_REFUSED; /* it answered, but no map: not a cluster node? (err says) */
        if (r)
            freeReplyObject(r);
        redisFree(c);
        if (m != NULL) {
            remember_nodes(m);
            found = m;
        }
    }
    free(sources);
    return found;
}

/* Map master i's context in conns (connected on first use). NULL with err. */
static redisContext *master_conn(const struct config *cfg, const struct cluster_map *m, int i, redisContext **conns,
                                 int load_scripts, enum rblock_failure *why, char *err, size_t errlen)
{
    if (i < 0) {
        snprintf(err, errlen, "a slot has no master (the cluster is not whole)");
        *why = RBLOCK_UNREACHABLE;
        return NULL;
    }
    if (conns[i] == NULL)
        conns[i] = connect_to(cfg, m->masters[i].node.addr, 0, load_scripts, why, err, errlen);
    return conns[i];
}

redisContext *rblock_connect_key(const struct config *cfg, const char *key, size_t len, int load_scripts,
                                 enum rblock_failure *why, char *err, size_t errlen)
{
    enum rblock_failure ignored;
    if (why == NULL)
        why = &ignored;
    if (!cfg->redis_cluster)
        return connect_to(cfg, cfg->redis_address, cfg->redis_db, load_scripts, why, err, errlen);
    struct cluster_map *m = read_map(cfg, why, err, errlen);
    int i = m ? cluster_map_lookup(m, cluster_keyslot(key, len)) : -1;
    redisContext *c = NULL;
    if (i >= 0)
        c = connect_to(cfg, m->masters[i].node.addr, 0, load_scripts, why, err, errlen);
    else if (m != NULL) {
        /* not whole (a failover, a slot being assigned): like a master that does not answer */
        snprintf(err, errlen, "no master serves the slot of %.*s (the cluster is not whole)", (int)len, key);
        *why = RBLOCK_UNREACHABLE;
    }
    cluster_map_free(m);
    return c;
}

redisContext *rblock_connect_shard(const struct config *cfg, int shard, int load_scripts, enum rblock_failure *why,
                                   char *err, size_t errlen)
{
    char key[CLUSTER_TAG_MAX + 2];
    size_t len = 0;
    const char *tag = shardtag(shard, &len);
    if (tag == NULL || len + 2 >= sizeof key) {
        snprintf(err, errlen, "no shard %d", shard);
        return NULL;
    }
    snprintf(key, sizeof key, "{%s}", tag);
    return rblock_connect_key(cfg, key, len + 2, load_scripts, why, err, errlen);
}

struct rblock_shards {
    int shards, nconns;
    int cluster;             /* every shard a slot of its own */
    redisContext **by_shard; /* shard -> one of conns */
    redisContext **conns;    /* one per server (map master index) */
};

void rblock_shards_free(struct rblock_shards *set)
{
    if (set == NULL)
        return;
    for (int i = 0; i < set->nconns; i++)
        if (set->conns[i]) {
            if (set->conns[i]->err) /* given up on: its queued commands must not run later */
                rconn_abort_fd(set->conns[i]->fd);
            redisFree(set->conns[i]);
        }
    free(set->conns);
    free(set->by_shard);
    free(set);
}

struct rblock_shards *rblock_shards_open(const struct config *cfg, int load_scripts, enum rblock_failure *why,
                                         char *err, size_t errlen)
{
    enum rblock_failure ignored;
    if (why == NULL)
        why = &ignored;
    struct cluster_map *m = NULL;
    if (cfg->redis_cluster && (m = read_map(cfg, why, err, errlen)) == NULL)
        return NULL;
    struct rblock_shards *set = calloc(1, sizeof *set);
    int nconns = m ? m->nmasters : 1;
    if (set == NULL || (set->by_shard = calloc((size_t)cfg->redis_shards, sizeof *set->by_shard)) == NULL ||
        (set->conns = calloc((size_t)nconns, sizeof *set->conns)) == NULL) {
        snprintf(err, errlen, "out of memory");
        cluster_map_free(m);
        rblock_shards_free(set);
        return NULL;
    }
    set->shards = cfg->redis_shards;
    set->nconns = nconns;
    set->cluster = m != NULL;
    if (m == NULL) /* one server holds every shard */
        set->conns[0] = connect_to(cfg, cfg->redis_address, cfg->redis_db, load_scripts, why, err, errlen);
    for (int n = 0; n < set->shards; n++) {
        size_t len = 0;
        const char *tag = shardtag(n, &len);
        int i = m ? cluster_map_lookup(m, tag ? cluster_keyslot(tag, len) : -1) : 0;
        set->by_shard[n] = m ? master_conn(cfg, m, i, set->conns, load_scripts, why, err, errlen) : set->conns[0];
        if (set->by_shard[n] == NULL) {
            cluster_map_free(m);
            rblock_shards_free(set);
            return NULL;
        }
    }
    cluster_map_free(m);
    return set;
}

redisContext *rblock_shard(const struct rblock_shards *set, int shard)
{
    return set->by_shard[shard];
}

int rblock_shards_first(const struct rblock_shards *set, int shard)
{
    if (set->cluster)
        return shard;
    int first = 0;
    while (set->by_shard[first] != set->by_shard[shard])
        first++;
    return first;
}

void rblock_shards_cut(void *arg)
{
    const struct rblock_shards *set = arg;
    for (int i = 0; i < set->nconns; i++)
        if (set->conns[i])
            shutdown(set->conns[i]->fd, SHUT_RDWR);
}

int rblock_shards_drain(struct rblock_shards *set)
{
    int ok = 0;
    for (int n = 0; n < set->shards; n++) {
        redisReply *r = rblock_shard_reply(set->by_shard[n]);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            ok = -1;
        if (r)
            freeReplyObject(r);
        if (r == NULL)
            break; /* the connection is gone: the caller opens a new set */
    }
    return ok;
}

const char *rblock_shards_errstr(const struct rblock_shards *set)
{
    for (int i = 0; i < set->nconns; i++)
        if (set->conns[i] && set->conns[i]->errstr[0])
            return set->conns[i]->errstr;
    return "";
}

redisReply *rblock_shard_reply(redisContext *c)
{
    redisReply *r = rblock_reply(c);
    if (r != NULL && r->type == REDIS_REPLY_ERROR && cluster_error_kind(r->str, r->len) != CLUSTER_ERR_OTHER) {
        snprintf(c->errstr, sizeof c->errstr, "%.*s", (int)(sizeof c->errstr - 1), r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

int rblock_append_eval(redisContext *c, enum script_id script, int argc, const char **argv, size_t *lens)
{
    script_call_head(script, argv, lens);
    return redisAppendCommandArgv(c, argc, argv, lens) == REDIS_OK ? 0 : -1;
}

redisReply *rblock_reply(redisContext *c)
{
    void *reply = NULL;
    if (redisGetReply(c, &reply) != REDIS_OK)
        return NULL;
    return reply;
}

int rblock_drain(redisContext *c, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        redisReply *r = rblock_reply(c);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            ok = -1;
        if (r)
            freeReplyObject(r);
    }
    return ok;
}

int rblock_load_library(redisContext *c, char *err, size_t errlen)
{
    const char *argv[3];
    size_t lens[3];
    script_load_argv(argv, lens);
    redisReply *r = redisCommandArgv(c, 3, argv, lens);
    int ok = library_loaded(r);
    if (!ok)
        snprintf(err, errlen, "FUNCTION LOAD failed: %s", r ? r->str : c->errstr);
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}
