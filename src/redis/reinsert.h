/* reinsert.h — putting jobs read from MySQL back into Redis with restore.lua, insert-if-absent:
 * what /reStore (restore.c) and the pager (pager.c) share. A message row is read with
 * MROW_COLUMNS; rows of one shard go in one pipelined restore.lua call; each job's answer says
 * whether it was put back, already there, ended meanwhile (tombstone), or its bizKey is held by
 * another job. */
#ifndef HG_REINSERT_H
#define HG_REINSERT_H

#include <hiredis/hiredis.h>
#include <mysql.h>
#include <stdint.h>

#include "core/config.h"

enum reinsert_outcome { OUT_RESTORED, OUT_PRESENT, OUT_GONE, OUT_BIZHELD, OUT_EXPIRED, OUT_FAILED };

/* One message row, as read from MySQL (pointers into the MYSQL_RES). */
struct mrow {
    uint64_t id;
    const char *topic, *biz, *body;
    unsigned long topic_len, biz_len, body_len;
    int64_t run_at, ttr;
    int priority, tries, attempts;
    unsigned ver;
    int state;
    int64_t backoff;         /* -1: the topic's */
    const char *traceparent; /* W3C Trace Context; NULL: none */
    const char *tracestate;  /* NULL: none */
    unsigned long tracestate_len;
    const char *group; /* flow control by key; NULL: none */
    unsigned long group_len;
};

/* The columns reinsert_row_read expects, in order (of table message); MROW_NCOLUMNS of them. */
#define MROW_COLUMNS                                                                                                   \
    "id, topic, biz_key, body, run_at, priority, ttr, tries, attempts, version, state, backoff, traceparent, "         \
    "tracestate, group_key"
#define MROW_NCOLUMNS 15

void reinsert_row_read(MYSQL_ROW m, unsigned long *len, struct mrow *r);

/* Queue one restore.lua call for rows[0..n) (all on `shard`); read it with rblock_reply. journal:
 * the script logs each job put back in the outbox (else the caller writes the transitions). 0 / -1. */
int reinsert_append(redisContext *c, const struct config *cfg, int shard, struct mrow **rows, int n, int64_t now,
                    int expire, int journal, const char *who);

/* restore.lua's answer for one job; on OUT_RESTORED also its new state and version. */
enum reinsert_outcome reinsert_outcome(const redisReply *e, int *state, unsigned *ver);

#endif
