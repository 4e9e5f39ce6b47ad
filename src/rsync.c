/* rsync.c — see rsync.h. */
#include "rsync.h"
#include "cluster.h"
#include "raddr.h"

#include <stdio.h>
#include <string.h>

/* Connect to one server: address, db (0 for a cluster node), scripts. */
static redisContext *connect_to(const struct config *cfg, const char *address, int db, int load_scripts,
                                enum rsync_failure *why, char *err, size_t errlen)
{
    char host[256];
    int port, is_unix;
    *why = RSYNC_UNREACHABLE;
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
    const char *step[2 + SCRIPT_COUNT];
    int n = 0;
    if (cfg->redis_password[0]) {
        redisAppendCommand(c, "AUTH %s", cfg->redis_password);
        step[n++] = "AUTH failed (check [redis] password)";
    }
    if (db) {
        redisAppendCommand(c, "SELECT %d", db);
        step[n++] = "SELECT failed (check [redis] db)";
    }
    for (int id = 0; load_scripts && id < SCRIPT_COUNT; id++) {
        redisAppendCommand(c, "SCRIPT LOAD %s", script_text((enum script_id)id));
        step[n++] = "SCRIPT LOAD failed";
    }
    for (int i = 0; i < n; i++) {
        redisReply *r = rsync_reply(c);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            *why = r ? RSYNC_REFUSED : RSYNC_UNREACHABLE;
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

redisContext *rsync_connect(const struct config *cfg, int load_scripts, enum rsync_failure *why, char *err,
                            size_t errlen)
{
    enum rsync_failure ignored;
    return connect_to(cfg, cfg->redis_address, cfg->redis_db, load_scripts, why ? why : &ignored, err, errlen);
}

/* The master that serves `slot`, by the map (CLUSTER SLOTS) one seed gives, into out. */
static int slot_master(const struct config *cfg, const char *seed, int slot, char *out, size_t cap,
                       enum rsync_failure *why, char *err, size_t errlen)
{
    redisContext *c = connect_to(cfg, seed, 0, 0, why, err, errlen);
    if (c == NULL)
        return -1;
    char host[CLUSTER_ADDR_MAX];
    int port, is_unix;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    struct cluster_map *m = NULL;
    if (r == NULL)
        snprintf(err, errlen, "%s: %s", seed, c->errstr);
    else if (raddr_parse(seed, host, sizeof host, &port, &is_unix) == 0 &&
             (m = cluster_map_parse(r, host, err, errlen)) == NULL)
        *why = RSYNC_REFUSED; /* it answered, but no map: not a cluster node? (err says) */
    int i = m ? cluster_map_lookup(m, slot) : -1;
    if (m != NULL && i < 0)
        snprintf(err, errlen, "%s: no master serves slot %d (the cluster is not whole)", seed, slot);
    if (i >= 0)
        snprintf(out, cap, "%s", m->masters[i].node.addr);
    cluster_map_free(m);
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return i >= 0 ? 0 : -1;
}

redisContext *rsync_connect_key(const struct config *cfg, const char *key, size_t len, int load_scripts,
                                enum rsync_failure *why, char *err, size_t errlen)
{
    enum rsync_failure ignored;
    if (why == NULL)
        why = &ignored;
    if (!cfg->redis_cluster)
        return connect_to(cfg, cfg->redis_address, cfg->redis_db, load_scripts, why, err, errlen);
    char seeds[RADDR_SEEDS_MAX][CLUSTER_ADDR_MAX], master[CLUSTER_ADDR_MAX];
    *why = RSYNC_UNREACHABLE;
    int n = raddr_seeds(cfg->redis_address, seeds, RADDR_SEEDS_MAX, err, errlen);
    for (int i = 0; i < n; i++)
        if (slot_master(cfg, seeds[i], cluster_keyslot(key, len), master, sizeof master, why, err, errlen) == 0)
            return connect_to(cfg, master, 0, load_scripts, why, err, errlen);
    return NULL;
}

int rsync_append_eval(redisContext *c, enum script_id script, int argc, const char **argv, size_t *lens)
{
    script_evalsha_head(script, argv, lens);
    return redisAppendCommandArgv(c, argc, argv, lens) == REDIS_OK ? 0 : -1;
}

redisReply *rsync_reply(redisContext *c)
{
    void *reply = NULL;
    if (redisGetReply(c, &reply) != REDIS_OK)
        return NULL;
    return reply;
}

int rsync_drain(redisContext *c, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        redisReply *r = rsync_reply(c);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            ok = -1;
        if (r)
            freeReplyObject(r);
    }
    return ok;
}
