/* rsync.c — see rsync.h. */
#include "rsync.h"
#include "raddr.h"

#include <stdio.h>
#include <string.h>

redisContext *rsync_connect(const struct config *cfg, int load_scripts, enum rsync_failure *why, char *err,
                            size_t errlen)
{
    char host[256];
    int port, is_unix;
    enum rsync_failure ignored;
    if (why == NULL)
        why = &ignored;
    *why = RSYNC_UNREACHABLE;
    if (raddr_parse(cfg->redis_address, host, sizeof host, &port, &is_unix) < 0) {
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
    if (cfg->redis_db) {
        redisAppendCommand(c, "SELECT %d", cfg->redis_db);
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
