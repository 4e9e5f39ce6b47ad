/* pager_commit.h — step 3 of paging (pager.h) and the pipeline that runs it beside steps 1-2.
 *
 * Step 3 (a MySQL transaction over a chunk of rows) takes about as long as steps 1 and 2
 * together, so PAGER_COMMITTERS threads do it while the pager thread reads and sends the next
 * chunks: shard s's chunks go to committer s mod PAGER_COMMITTERS, a depth-one queue each
 * (pager_commit_hand_off). Different shards' chunks lock disjoint rows (message ids, whose far
 * keys are per shard, topics and far_mark rows), so two commit side by side, and a shard's
 * chunks keep their order on one. The next read starts after the last key of the chunk before
 * (keyset), since that chunk's rows keep their far keys until its commit. A failed commit is
 * reported to the pager thread at its next hand-off or drain, which starts the shard's pass
 * again (its rows are still there: paging them again is harmless, see pager.h).
 *
 * Threads: the committers run in the pager's bgthread, so one stop and one deadline end them
 * all, and a cut past it reaches every pager thread's connections (pager_conns). They end once
 * the pager thread has said no chunk will come any more (pager_commit_close) and their own is
 * committed. Everything else here is the pager thread's to call. */
#ifndef HG_PAGER_COMMIT_H
#define HG_PAGER_COMMIT_H

#include <mysql.h>
#include <stdint.h>

#include "redis/reinsert.h"
#include "redis/store.h"

struct app;
struct bgthread;
struct rblock_shards;

/* Step 3 threads: a chunk's commit takes longer than reading it and putting it into Redis (~60
 * against ~45 ms per 1,000 rows), so one committer would hold the pager thread up. */
#define PAGER_COMMITTERS 2
#define PAGER_MAX_SHARDS 4096

/* A row being paged. */
struct far_row {
    struct mrow m;      /* the message row */
    int64_t far_run_at; /* its far key (message.far_shard, far_run_at, m.id) as step 1 read it */
    enum reinsert_outcome out;
    int cur_state; /* under the lock in step 3 */
    unsigned cur_ver;
    int64_t cur_run_at;
    int key_exists; /* its far key is still the one step 1 read (step 3, locked) */
    int moved_on;   /* paged by an earlier step that died before its commit */
};

/* What steps 1 and 2 hand to step 3. */
struct chunk {
    int shard;
    struct far_row *rows;
    int n;
    MYSQL_RES *res; /* the rows' strings */
    int64_t now, through;
    char token[STORE_WHO_MAX + 24]; /* its member of the shard's "paging" set; "" = none added */
};

/* Free a chunk and its rows (NULL is fine). */
void pager_chunk_free(struct chunk *ch);

/* A pager thread's connections: MySQL, and blocking Redis connections (one per shard: rblock.h),
 * published in the pager's bgthread (slots 2 * thread and 2 * thread + 1) for a stop to cut. */
enum { PAGER_READER, PAGER_COMMITTER }; /* threads: PAGER_READER, PAGER_COMMITTER + i */
struct pager_conns {
    MYSQL *db;
    struct rblock_shards *c;
    int thread;
    int64_t last_complaint; /* unix ms: a failure to connect is logged every 10 s at most */
};

/* Connect what is not connected (and remake a MySQL connection left on a node the process no
 * longer uses: db_stale) and publish both in `bg`. 0 when both are up. */
int pager_conns_open(struct pager_conns *k, const struct config *cfg, struct bgthread *bg);
/* Unpublish and close both (after a failure: the next step starts on fresh connections). */
void pager_conns_close(struct pager_conns *k, struct bgthread *bg);

/* Start the committers in `bg` (the pager's bgthread; the pager thread is started after them).
 * 0, or -1 when one could not be started (then close and stop `bg`). */
int pager_commit_start(struct app *app, struct bgthread *bg) __attribute__((warn_unused_result));

/* Hand a chunk to its shard's committer (waiting while that one still has one queued). -1 when
 * a commit failed since the last call (the chunk is dropped: its rows are paged again). */
int pager_commit_hand_off(struct chunk *ch) __attribute__((warn_unused_result));

/* Wait until everything handed off is committed. 0, or -1 when a commit failed. */
int pager_commit_drain(void) __attribute__((warn_unused_result));

/* No chunk will come any more (the pager thread ends, or never started). */
void pager_commit_close(void);

/* After the threads have ended: free the chunks handed off but never committed (paged again by
 * whoever pages next). */
void pager_commit_free_left(void);

/* Jobs this instance paged (committed by step 3): in all, and of one shard. */
long long pager_commit_paged(void);
long long pager_commit_shard_paged(int shard);

#endif
