/* reinsert.c — see reinsert.h. */
#include "redis/reinsert.h"
#include "core/job.h"
#include "core/jobpack.h"
#include "redis/rcodec.h"
#include "redis/rblock.h"

#include <stdlib.h>
#include <string.h>

void reinsert_row_read(MYSQL_ROW m, unsigned long *len, struct mrow *r)
{
    r->id = strtoull(m[0], NULL, 10);
    r->topic = m[1];
    r->topic_len = len[1];
    r->biz = m[2] ? m[2] : "";
    r->biz_len = m[2] ? len[2] : 0;
    r->body = m[3];
    r->body_len = len[3];
    r->run_at = strtoll(m[4], NULL, 10);
    r->priority = atoi(m[5]);
    r->ttr = strtoll(m[6], NULL, 10);
    r->tries = atoi(m[7]);
    r->attempts = atoi(m[8]);
    r->ver = (unsigned)strtoul(m[9], NULL, 10);
    r->state = job_state_parse(m[10]);
    r->backoff = m[11] ? strtoll(m[11], NULL, 10) : -1;
    /* a traceparent as the journal writes them, else none (a row edited by hand) */
    r->traceparent = m[12] && len[12] == TRACE_PARENT_LEN ? m[12] : NULL;
    r->tracestate = r->traceparent ? m[13] : NULL;
    r->tracestate_len = r->tracestate ? len[13] : 0;
    r->group = m[14] && job_group_valid(m[14], len[14]) ? m[14] : NULL;
    r->group_len = r->group ? len[14] : 0;
}

/* Queue one restore.lua call for rows[0..n) (all on `shard`). */
int reinsert_append(redisContext *c, const struct config *cfg, int shard, struct mrow **rows, int n, int64_t now,
                    int expire, int journal, const char *who)
{
    struct rargv b;
    int rc = -1;
    /* the tails of the rows that have one (most have none), alive until the call is queued:
     * rargv keeps pointers */
    size_t tail_bytes = 0;
    for (int i = 0; i < n; i++)
        if (rows[i]->backoff >= 0 || rows[i]->traceparent || rows[i]->group)
            tail_bytes += JOBPACK_TAIL_MAX;
    char *tails = tail_bytes ? malloc(tail_bytes) : NULL, *tail = tails;
    if (tail_bytes && tails == NULL)
        return -1;
    if (rargv_init(&b, 9 + 12 * n, 4 + 8 * n, n) == 0) {
        rargv_key(&b, cfg->redis_prefix, shard, "jobs");
        rargv_int(&b, now);
        rargv_int(&b, expire);
        rargv_str(&b, who, strlen(who));
        rargv_int(&b, journal);
        rargv_int(&b, n);
        for (int i = 0; i < n; i++) {
            const struct mrow *r = rows[i];
            rargv_id(&b, r->id);
            rargv_str(&b, r->topic, r->topic_len);
            rargv_str(&b, r->body, r->body_len);
            rargv_int(&b, r->run_at);
            rargv_int(&b, r->priority);
            rargv_int(&b, r->ttr);
            rargv_int(&b, r->tries);
            rargv_str(&b, r->biz, r->biz_len);
            rargv_int(&b, r->attempts);
            rargv_int(&b, r->ver);
            rargv_int(&b, r->state);
            /* its optional values as a record's tail ('' for none: most jobs) */
            struct jobpack_extra x = {.has_backoff = r->backoff >= 0,
                                      .backoff = r->backoff,
                                      .traceparent = r->traceparent,
                                      .tracestate = r->tracestate,
                                      .tracestate_len = r->tracestate_len,
                                      .group = r->group,
                                      .group_len = r->group_len};
            size_t len = x.has_backoff || x.traceparent || x.group ? jobpack_tail(tail, &x) : 0;
            rargv_str(&b, len ? tail : "", len);
            tail += len;
        }
        rc = rblock_append_eval(c, SCRIPT_RESTORE, b.argc, b.argv, b.lens);
    }
    rargv_free(&b);
    free(tails);
    return rc;
}

/* Map restore.lua's answer for one job; on OUT_RESTORED also its new state and version. */
enum reinsert_outcome reinsert_outcome(const redisReply *e, int *state, unsigned *ver)
{
    if (!rreply_is_array(e, 1))
        return OUT_FAILED;
    if (rreply_is(e, 0, "restored") && e->elements >= 3) {
        *state = (int)rreply_int(e, 1);
        *ver = (unsigned)rreply_int(e, 2);
        return OUT_RESTORED;
    }
    static const struct {
        const char *word;
        enum reinsert_outcome out;
    } words[] = {{"present", OUT_PRESENT}, {"gone", OUT_GONE}, {"bizheld", OUT_BIZHELD}, {"expired", OUT_EXPIRED}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (rreply_is(e, 0, words[i].word))
            return words[i].out;
    return OUT_FAILED;
}
