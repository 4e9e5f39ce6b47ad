/* pager.c — see pager.h. */
#include "durable/pager.h"
#include "core/app.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "mysql/db.h"
#include "core/ids.h"
#include "core/job.h"
#include "core/jobchange.h"
#include "base/log.h"
#include "core/metrics.h"
#include "redis/rcodec.h"
#include "redis/reinsert.h"
#include "redis/layout.h"
#include "redis/rblock.h"
#include "base/sbuf.h"
#include "redis/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1000
#define PACED_CHUNK 250 /* paced: smaller MySQL transactions, so each holds a core for less */
#define CHUNK_ROWS(paced) ((paced) ? PACED_CHUNK : CHUNK) /* rows a chunk reads; fewer: the range's end */
#define MAX_SHARDS 4096
/* The shard's "paging" key is a set of page steps whose commit has not landed: step 2 adds
 * its token, step 3's commit removes it, and finish/delete leave tombstones while the set is
 * there. A pager that dies leaves its token behind: the key expires this long after the last
 * step 2 (longer than any lease takeover), so its successor re-pages under tombstones too. */
#define PAGING_FLAG_MS 60000
#define TOMBSTONE_KEEP_MS 600000   /* far tombstones outlive any page step by far */
#define PRUNE_EVERY_MS 10000
#define COUNTS_EVERY_MS 500
#define REDIS_TIER_EVERY_MS 10000 /* HVALS of every shard's counters: O(topics) for Redis */
#define REQUESTS_MAX 256
#define STOP_DEADLINE_MS 1000
/* Step 3 threads. A chunk's commit takes longer than reading it and putting it into Redis
 * (~60 against ~45 ms per 1,000 rows), so one committer would hold the reader up; chunks of
 * different shards lock disjoint rows (message ids, whose far keys are per shard, topics and
 * far_mark rows), so two commit side by side, and a shard's chunks keep their order on one. */
#define COMMITTERS 2

/* jobs paged per bucket, for hourglass_pager_bucket_jobs */
static const double BUCKET_BOUNDS[] = {0, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
#define NBOUNDS (sizeof BUCKET_BOUNDS / sizeof BUCKET_BOUNDS[0])

/* A thread's connections: MySQL, and blocking Redis connections (one per shard: rblock.h),
 * published in pager.bg's slots 2 * thread and 2 * thread + 1 for a stop to cut. */
struct conns {
    MYSQL *db;
    struct rblock_shards *c;
};
enum { PAGER, COMMITTER }; /* threads: PAGER, COMMITTER + i */

struct page_req {
    int shard;
    int64_t run_at;
    uint64_t id;
};

static struct {
    struct app *app;
    const struct config *cfg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bgthread bg;                  /* the committers (step 3, the pipeline below), then the pager */
    int reader_done;                     /* under lock: the pager thread has ended (a stopping committer
                                            waits for it: it may still hand off a chunk) */
    struct chunk *slot[COMMITTERS];      /* under lock: the chunk handed to each committer */
    int committing[COMMITTERS];          /* under lock */
    int commit_failed;
    _Atomic long long shard_paged[MAX_SHARDS];
    char owned[MAX_SHARDS];              /* under lock */
    struct page_req req[REQUESTS_MAX];   /* under lock */
    int nreq;
    struct far_topic *counts;            /* under lock: far_count, sorted by topic */
    int ncounts;
    char who[STORE_WHO_MAX];
    /* figures */
    _Atomic long long paged, far_total, redis_total, lag_ms, bucket_sum;
    _Atomic int shards_paging;
    _Atomic unsigned long long bucket_hist[NBOUNDS + 1];
    _Atomic unsigned long long buckets;
} pager = {.lock = PTHREAD_MUTEX_INITIALIZER,
           .cond = PTHREAD_COND_INITIALIZER,
           .bg = BGTHREAD_INIT(&pager.lock, &pager.cond,
                               "pager: a call outlived the stop deadline; cutting its connections")};

/* The thread's own view of each shard. */
struct shard_view {
    int64_t paged_through; /* every far job due before it is in Redis (this process's knowledge;
                              0 until its first chunk: not counted in the lag) */
    int64_t bound;         /* the bucket end the current pass pages up to */
    long long bucket_start; /* shard_paged when that bucket began */
};

/* As far ahead as the horizon allows, less a margin of min(60 s, horizon / 2) between what is
 * paged and where far pushes begin (now + horizon): Redis is meant to hold what is due within
 * the horizon anyway, and the longer the lead, the bigger the burst that is in Redis before it
 * is due (1 h of lead at ~10,000 jobs/s is tens of millions). With horizon 0 no push is far,
 * but far jobs of an earlier configuration still page in, 60 s ahead. */
int64_t pager_lead_ms(const struct config *cfg)
{
    if (cfg->horizon <= 0)
        return 60000;
    int64_t margin = cfg->horizon / 2 < 60000 ? cfg->horizon / 2 : 60000;
    return cfg->horizon - margin;
}

int64_t pager_bucket_ms(const struct config *cfg)
{
    if (cfg->horizon == 0)
        return 10000;
    int64_t b = cfg->horizon / 8;
    if (b < 50)
        b = 50;
    return b < 10000 ? b : 10000;
}

int64_t pager_pace_slack_ms(const struct config *cfg)
{
    int64_t lead = pager_lead_ms(cfg), quarter = lead / 4;
    if (lead <= 60000)
        return lead; /* never paced */
    return quarter > 60000 ? quarter : 60000;
}

static int64_t bucket_end(const struct config *cfg, int64_t t)
{
    int64_t b = pager_bucket_ms(cfg);
    return (t / b + 1) * b;
}

/* ---- far counts (far_count) and the Redis tier's size ---- */

static int refresh_counts(MYSQL *db)
{
    static const char sql[] = "SELECT topic, jobs FROM far_count WHERE jobs <> 0 ORDER BY topic";
    if (mysql_real_query(db, sql, sizeof sql - 1) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db); /* end the read's snapshot: the next one sees newer commits */
    if (res == NULL)
        return -1;
    int n = (int)mysql_num_rows(res);
    struct far_topic *t = calloc((size_t)(n ? n : 1), sizeof *t);
    long long total = 0;
    if (t == NULL) {
        mysql_free_result(res);
        return 0; /* keep the last copy */
    }
    MYSQL_ROW row;
    for (int i = 0; i < n && (row = mysql_fetch_row(res)) != NULL; i++) {
        snprintf(t[i].topic, sizeof t[i].topic, "%s", row[0]);
        t[i].jobs = strtoll(row[1], NULL, 10);
        total += t[i].jobs;
    }
    mysql_free_result(res);
    pthread_mutex_lock(&pager.lock);
    free(pager.counts);
    pager.counts = t;
    pager.ncounts = n;
    pthread_mutex_unlock(&pager.lock);
    atomic_store(&pager.far_total, total);
    return 0;
}

int pager_far_counts(struct far_topic **out)
{
    pthread_mutex_lock(&pager.lock);
    int n = pager.ncounts;
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    if (*out && n)
        memcpy(*out, pager.counts, (size_t)n * sizeof **out);
    pthread_mutex_unlock(&pager.lock);
    return *out ? n : -1;
}

int64_t pager_far_count(const char *topic, size_t len)
{
    int64_t jobs = 0;
    pthread_mutex_lock(&pager.lock);
    int lo = 0, hi = pager.ncounts - 1;
    while (lo <= hi) { /* sorted by name, as strcmp orders them */
        int mid = (lo + hi) / 2;
        int c = strncmp(pager.counts[mid].topic, topic, len);
        if (c == 0 && pager.counts[mid].topic[len] != '\0')
            c = 1;
        if (c == 0) {
            jobs = pager.counts[mid].jobs;
            break;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    pthread_mutex_unlock(&pager.lock);
    return jobs;
}

/* Jobs Redis holds (the shards' counters of live and dead jobs), for hourglass_jobs_tier. */
static int refresh_redis_tier(struct rblock_shards *set)
{
    const struct config *cfg = pager.cfg;
    for (int s = 0; s < cfg->redis_shards; s++) {
        char key[160];
        rkey(key, sizeof key, cfg->redis_prefix, s, "count");
        redisAppendCommand(rblock_shard(set, s), "HVALS %s", key);
    }
    long long total = 0;
    int rc = 0;
    for (int s = 0; s < cfg->redis_shards; s++) { /* in the order each shard's connection got them */
        redisReply *r = rblock_shard_reply(rblock_shard(set, s));
        if (r == NULL)
            return -1;
        if (r->type == REDIS_REPLY_ARRAY)
            for (size_t i = 0; i < r->elements; i++)
                total += rreply_int(r, i);
        else
            rc = -1;
        freeReplyObject(r);
    }
    if (rc == 0)
        atomic_store(&pager.redis_total, total);
    return 0;
}

/* ---- one step: rows read from MySQL into Redis, then marked paged ---- */

struct far_row {
    struct mrow m;       /* the message row */
    int64_t far_run_at;  /* its far key (message.far_shard, far_run_at, m.id) as step 1 read it */
    enum reinsert_outcome out;
    int cur_state;       /* under the lock in step 3 */
    unsigned cur_ver;
    int64_t cur_run_at;
    int key_exists;      /* its far key is still the one step 1 read (step 3, locked) */
    int moved_on;        /* paged by an earlier step that died before its commit */
};

static const char ROW_COLUMNS[] = "m.id, m.topic, m.biz_key, m.body, m.run_at, m.priority, m.ttr, m.tries, "
                                  "m.attempts, m.version, m.state, m.backoff, m.far_run_at";

static int cmp_row_id(const void *a, const void *b)
{
    uint64_t x = (*(const struct far_row *const *)a)->m.id, y = (*(const struct far_row *const *)b)->m.id;
    return x < y ? -1 : x > y;
}

static int cmp_row_topic(const void *a, const void *b)
{
    const struct mrow *x = &(*(struct far_row *const *)a)->m, *y = &(*(struct far_row *const *)b)->m;
    return topic_cmp(x->topic, x->topic_len, y->topic, y->topic_len);
}

/* One more id of a comma-separated list that `sb` holds alone. */
static void put_id(struct sbuf *sb, uint64_t id)
{
    if (sb->len)
        sb_putc(sb, ',');
    sb_json_uint(sb, id);
}

/* The ids of rows[0..n), comma-separated, appended to whatever sb holds. */
static void put_ids(struct sbuf *sb, struct far_row **rows, int n)
{
    for (int i = 0; i < n; i++) {
        if (i)
            sb_putc(sb, ',');
        sb_json_uint(sb, rows[i]->m.id);
    }
}

/* Step 2: restore.lua for the rows that are far jobs (a token for this step in the shard's
 * "paging" set first), in calls of at most SCRIPT_JOBS: Redis runs one script at a time, so a
 * call's length is what everyone else may wait (a 1,000-job call holds it for ~10 ms, more
 * than the lateness paging may add). At full speed all of a chunk's calls go in one round
 * trip: on a busy Redis each round trip waits behind everyone else's commands, and rounds of
 * 2 x 100 jobs made step 2 twice as long and a million-job bucket late (figure 13's runs,
 * 2026-11-26). Paced (`paced`, see page_pass) there is time to spare: one call per round trip,
 * so Redis is never held for more than one call's ~2 ms at a time. */
#define SCRIPT_JOBS 200
static int to_redis(redisContext *c, int shard, struct far_row *rows, int n, int64_t now, int paced, char *token,
                    size_t tsize)
{
    const struct config *cfg = pager.cfg;
    struct mrow **put = malloc((size_t)(n ? n : 1) * sizeof *put);
    struct far_row **whose = malloc((size_t)(n ? n : 1) * sizeof *whose);
    int k = 0, rc = 0;
    if (put == NULL || whose == NULL) {
        free(put);
        free(whose);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        rows[i].out = OUT_FAILED;
        if (rows[i].m.state == JS_FAR && rows[i].m.run_at == rows[i].far_run_at) {
            whose[k] = &rows[i];
            put[k++] = &rows[i].m;
        }
    }
    token[0] = '\0';
    if (k > 0) {
        static _Atomic unsigned long long steps;
        char flag[160];
        rkey(flag, sizeof flag, cfg->redis_prefix, shard, "paging");
        snprintf(token, tsize, "%s#%llu", pager.who, atomic_fetch_add(&steps, 1));
        redisAppendCommand(c, "SADD %s %s", flag, token);
        redisAppendCommand(c, "PEXPIRE %s %d", flag, PAGING_FLAG_MS);
    }
    int per_round = paced ? SCRIPT_JOBS : k; /* jobs per round trip */
    for (int round = 0; round * per_round < k && rc == 0; round++) {
        int lo = round * per_round, hi = lo + per_round < k ? lo + per_round : k, calls = 0;
        for (int from = lo; from < hi && rc == 0; from += SCRIPT_JOBS, calls++)
            rc = reinsert_append(c, cfg, shard, put + from, hi - from < SCRIPT_JOBS ? hi - from : SCRIPT_JOBS, now, 1,
                                 0, pager.who); /* not journaled: step 3 writes the transitions */
        if (rc == 0 && round == 0)
            rc = rblock_drain(c, 2); /* the token's SADD and PEXPIRE */
        for (int call = 0; call < calls && rc == 0; call++) {
            int from = lo + call * SCRIPT_JOBS, m = hi - from < SCRIPT_JOBS ? hi - from : SCRIPT_JOBS;
            redisReply *r = rblock_reply(c);
            if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)m) {
                log_warn("pager: shard %d: Redis failed restore.lua: %s", shard, r && r->str ? r->str : c->errstr);
                rc = -1;
            } else {
                for (int j = 0; j < m; j++) {
                    int to = 0;
                    unsigned ver = 0;
                    whose[from + j]->out = reinsert_outcome(r->element[j], &to, &ver);
                    if (whose[from + j]->out == OUT_RESTORED)
                        metrics_transition(JS_FAR, to, 1);
                }
            }
            if (r)
                freeReplyObject(r);
        }
    }
    free(put);
    free(whose);
    return rc;
}

/* Run the query `sql` holds (and free it); its result, or NULL. */
static MYSQL_RES *query(MYSQL *db, struct sbuf *sql)
{
    int rc = sql->oom ? -1 : mysql_real_query(db, sql->data, sql->len);
    sb_free(sql);
    return rc == 0 ? mysql_store_result(db) : NULL;
}

/* Step 3's lock and read: each row's current state, version and due time, and whether its far
 * key is still the one step 1 read in `shard`. */
static int lock_rows(MYSQL *db, int shard, struct far_row **byid, int n)
{
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT id, state, version, run_at, far_shard, far_run_at FROM message WHERE id IN (");
    put_ids(&sql, byid, n);
    sb_puts(&sql, ") ORDER BY id FOR UPDATE");
    MYSQL_RES *res = query(db, &sql);
    if (res == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        byid[i]->cur_state = JS_NONE;
        byid[i]->key_exists = 0;
    }
    MYSQL_ROW row;
    int i = 0;
    while ((row = mysql_fetch_row(res)) != NULL) {
        uint64_t id = strtoull(row[0], NULL, 10);
        while (i < n && byid[i]->m.id < id)
            i++;
        for (int j = i; j < n && byid[j]->m.id == id; j++) {
            byid[j]->cur_state = job_state_parse(row[1]);
            byid[j]->cur_ver = (unsigned)strtoul(row[2], NULL, 10);
            byid[j]->cur_run_at = strtoll(row[3], NULL, 10);
            byid[j]->key_exists = row[4] != NULL && atoi(row[4]) == shard && row[5] != NULL &&
                                  strtoll(row[5], NULL, 10) == byid[j]->far_run_at;
        }
    }
    mysql_free_result(res);
    return 0;
}

/* Did step 2 settle this row, and is the row still as step 1 read it? */
static int settled(const struct far_row *r)
{
    return r->out != OUT_FAILED && r->cur_state == JS_FAR && r->cur_ver == r->m.ver;
}

static int exec(MYSQL *db, struct sbuf *sql)
{
    int rc = sql->oom ? -1 : db_exec(db, sql->data, sql->len);
    sb_reset(sql);
    return rc;
}

/* Rows `ids` (still 'far': guarded) leave the tier for `to_state` (an SQL expression): their
 * history row, then their state and version, and their far keys go in the same UPDATE (one
 * change of each row, not two: paging runs beside live traffic). */
static int leave_tier(MYSQL *db, struct sbuf *sql, const struct sbuf *ids, const char *to_state, const char *actor,
                      int64_t now)
{
    sb_printf(sql, "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") SELECT id, version + 1, 'far', %s, %lld, ",
              to_state, (long long)now);
    db_quote(db, sql, actor, strlen(actor));
    sb_putc(sql, ',');
    db_quote(db, sql, pager.app->hostname, strlen(pager.app->hostname));
    sb_putc(sql, ',');
    db_quote(db, sql, pager.app->instance, strlen(pager.app->instance));
    sb_printf(sql, ", attempts FROM message WHERE state = 'far' AND id IN (%.*s)", (int)ids->len, ids->data);
    int rc = exec(db, sql);
    if (rc == 0) {
        sb_printf(sql, "UPDATE message SET state = %s, far_shard = NULL, far_run_at = NULL, version = version + 1, "
                       "updated_at = %lld WHERE state = 'far' AND id IN (%.*s)", to_state, (long long)now,
                  (int)ids->len, ids->data);
        rc = exec(db, sql);
    }
    return rc;
}

/* Step 3. *paged gets the jobs now in Redis by this step. */
static int mark_paged(MYSQL *db, int shard, struct far_row *rows, int n, int64_t now, int64_t through, long *paged,
                      struct far_row ***unpage, int *nunpage)
{
    if (n <= 0)
        return 0;
    struct far_row **byid = malloc((size_t)n * 3 * sizeof *byid);
    if (byid == NULL)
        return -1;
    struct far_row **done = byid + n, **held = byid + 2 * n;
    int ndone = 0, nheld = 0;
    for (int i = 0; i < n; i++)
        byid[i] = &rows[i];
    qsort(byid, (size_t)n, sizeof *byid, cmp_row_id);
    struct sbuf sql = SBUF_INIT;
    int rc = db_exec(db, "START TRANSACTION", 17);
    if (rc == 0)
        rc = lock_rows(db, shard, byid, n);
    if (rc < 0)
        goto out;
    struct sbuf ids = SBUF_INIT;
    *nunpage = 0;
    for (int i = 0; i < n; i++) {
        struct far_row *r = &rows[i];
        /* What the row's far key and state say now, under the row's lock:
         *  - still far at the version read: paged by this step (or its bizKey was lost);
         *  - no longer far, key still there: paged by an earlier step whose pager died before
         *    its commit (restore.lua's transition reached MySQL since): paged, the message as
         *    it is;
         *  - key gone (the row too, retention's), or far at another version: a delete or a
         *    reschedule committed since step 1 and manages the key; what step 2 put in Redis
         *    from the old row goes again, unless another pager marked it paged meanwhile (then
         *    it is live in Redis). */
        int moved_on = r->cur_state != JS_FAR && r->cur_state != JS_NONE;
        if (r->key_exists && settled(r) && r->out == OUT_BIZHELD) {
            held[nheld++] = r;
        } else if (r->key_exists && (settled(r) || moved_on)) {
            r->moved_on = moved_on;
            done[ndone++] = r;
        } else {
            int live_near = r->cur_state == JS_DELAYED || r->cur_state == JS_READY || r->cur_state == JS_RESERVED;
            if (r->out == OUT_RESTORED && !live_near)
                (*unpage)[(*nunpage)++] = r;
            continue;
        }
        if (moved_on)
            put_id(&ids, r->m.id);
    }
    if (ids.len) { /* moved on: only their far keys go (locked above, checked to be the ones read) */
        sb_printf(&sql, "UPDATE message SET far_shard = NULL, far_run_at = NULL WHERE id IN (%.*s)", (int)ids.len,
                  ids.data);
        rc = exec(db, &sql);
    }
    sb_free(&ids);
    sb_reset(&sql);
    /* the rows this step pages (the history and the state change; restore.lua was told not to
     * journal them: one statement here costs far less than a million outbox entries through
     * the journal), and those whose bizKey went to another job (a replace whose delete of them
     * had not landed) */
    struct sbuf marked = SBUF_INIT, lost = SBUF_INIT;
    for (int i = 0; i < ndone; i++)
        if (!done[i]->moved_on)
            put_id(&marked, done[i]->m.id);
    for (int i = 0; i < nheld; i++)
        put_id(&lost, held[i]->m.id);
    char to[80], actor[JOBCHANGE_ACTOR_MAX]; /* as the outbox would have written it: "pager <prefix>:{n}:jobs" */
    snprintf(to, sizeof to, "IF(run_at > %lld, 'delayed', 'ready')", (long long)now);
    store_actor(actor, sizeof actor, "pager", pager.cfg->redis_prefix, shard, "jobs");
    if (rc == 0 && marked.len)
        rc = leave_tier(db, &sql, &marked, to, actor, now);
    if (rc == 0 && lost.len)
        rc = leave_tier(db, &sql, &lost, "'deleted'", "pager: its bizKey is held by another job", now);
    sb_free(&marked);
    sb_free(&lost);
    /* far_biz rows of the jobs that left the tier, and far_count per topic (last: lock order) */
    int nleft = ndone + nheld;
    struct far_row **left = done; /* done has room for held after it: n slots in all */
    for (int i = 0; i < nheld; i++)
        done[ndone + i] = held[i];
    int any_biz = 0;
    for (int i = 0; i < nleft; i++)
        any_biz |= left[i]->m.biz_len > 0;
    if (rc == 0 && any_biz) {
        sb_puts(&sql, "DELETE FROM far_biz WHERE id IN (");
        put_ids(&sql, left, nleft);
        sb_putc(&sql, ')');
        rc = exec(db, &sql);
    }
    /* in topic_cmp order (job.h), the order the journal locks far_count rows in too */
    if (nleft > 1)
        qsort(left, (size_t)nleft, sizeof *left, cmp_row_topic);
    for (int i = 0, k; rc == 0 && i < nleft; i += k) {
        const struct mrow *m = &left[i]->m;
        for (k = 1; i + k < nleft && topic_cmp(left[i + k]->m.topic, left[i + k]->m.topic_len, m->topic, m->topic_len) == 0;)
            k++;
        sb_printf(&sql, "UPDATE far_count SET jobs = jobs - %d WHERE topic = ", k);
        db_quote(db, &sql, m->topic, m->topic_len);
        rc = exec(db, &sql);
    }
    if (rc == 0) {
        sb_printf(&sql, "INSERT INTO far_mark (shard, paged_through, paged_at, paged) VALUES (%d, %lld, %lld, %d) "
                        "ON DUPLICATE KEY UPDATE paged_through = GREATEST(paged_through, VALUES(paged_through)), "
                        "paged_at = VALUES(paged_at), paged = paged + VALUES(paged)",
                  shard, (long long)through, (long long)now, ndone);
        rc = exec(db, &sql);
    }
    if (rc == 0)
        rc = db_commit(db);
    if (rc == 0)
        *paged = ndone;
out:
    if (rc < 0)
        mysql_rollback(db);
    sb_free(&sql);
    free(byid);
    return rc;
}

/* unpage.lua for rows that changed while they were being paged. */
static int take_back(redisContext *c, int shard, struct far_row **rows, int n)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 5 + 3 * n, 1 + 2 * n, n) == 0) {
        rargv_key(&b, pager.cfg->redis_prefix, shard, "jobs");
        rargv_int(&b, n);
        for (int i = 0; i < n; i++) {
            rargv_id(&b, rows[i]->m.id);
            rargv_int(&b, rows[i]->m.ver + 1);
            if (rows[i]->cur_state == JS_FAR)
                rargv_int(&b, rows[i]->cur_run_at);
            else
                rargv_str(&b, "", 0);
        }
        rc = rblock_append_eval(c, SCRIPT_UNPAGE, b.argc, b.argv, b.lens);
        if (rc == 0)
            rc = rblock_drain(c, 1);
    }
    rargv_free(&b);
    if (rc < 0)
        log_warn("pager: shard %d: could not take back %d jobs changed while paging: %s", shard, n, c->errstr);
    return rc;
}

/* ---- the pipeline: steps 1-2 on the pager thread, step 3 on the committer ----
 * Step 3 (a MySQL transaction over the chunk) takes about as long as steps 1 and 2 together,
 * so the committer thread does it while the pager reads and sends the next chunk: a depth-one
 * queue (`slot`). The next read starts after the last key of the chunk before (keyset), since
 * that chunk's rows keep their far keys until its commit. A failed commit is reported to the
 * pager, which starts the shard's pass again (its rows are still there: paging them again is
 * harmless, see pager.h). */

struct chunk {
    int shard;
    struct far_row *rows;
    int n;
    MYSQL_RES *res; /* the rows' strings */
    int64_t now, through;
    char token[STORE_WHO_MAX + 24]; /* its member of the shard's "paging" set; "" = none added */
};

static void chunk_free(struct chunk *ch)
{
    if (ch == NULL)
        return;
    free(ch->rows);
    if (ch->res)
        mysql_free_result(ch->res);
    free(ch);
}

/* Connect what is not connected (complaining at most every 10 s) and publish both for a
 * stop to cut. 0 when both are up. */
static int conns_open(struct conns *k, int thread, int64_t *last_complaint)
{
    char err[256];
    int64_t now = clock_unix_ms();
    if (k->db == NULL && (k->db = db_connect(pager.cfg, err, sizeof err)) == NULL && now - *last_complaint > 10000) {
        log_warn("pager: MySQL: %s", err);
        *last_complaint = now;
    }
    if (k->c == NULL && (k->c = layout_open_shards(pager.cfg, 1, NULL, err, sizeof err)) == NULL &&
        now - *last_complaint > 10000) {
        log_warn("pager: Redis: %s", err);
        *last_complaint = now;
    }
    bgthread_publish(&pager.bg, 2 * thread, k->db, db_cut);
    bgthread_publish(&pager.bg, 2 * thread + 1, k->c, rblock_shards_cut);
    return k->db && k->c ? 0 : -1;
}

/* Unpublish and close both (after a failure: the next step starts on fresh connections). */
static void conns_close(struct conns *k, int thread)
{
    bgthread_publish(&pager.bg, 2 * thread, NULL, NULL);
    bgthread_publish(&pager.bg, 2 * thread + 1, NULL, NULL);
    if (k->db)
        mysql_close(k->db);
    rblock_shards_free(k->c);
    *k = (struct conns){NULL, NULL};
}

/* Hand a chunk to its shard's committer (waiting while that one still has one queued). -1 when
 * a commit failed since the last call (the chunk is dropped: its rows are paged again). */
static int hand_off(struct chunk *ch)
{
    int i = ch->shard % COMMITTERS;
    pthread_mutex_lock(&pager.lock);
    while (pager.slot[i] != NULL && !pager.commit_failed)
        pthread_cond_wait(&pager.cond, &pager.lock);
    int failed = pager.commit_failed;
    pager.commit_failed = 0;
    if (!failed) {
        pager.slot[i] = ch;
        pthread_cond_broadcast(&pager.cond);
    }
    pthread_mutex_unlock(&pager.lock);
    if (failed)
        chunk_free(ch);
    return failed ? -1 : 0;
}

/* Under lock: a chunk handed off or being committed. */
static int commits_pending(void)
{
    for (int i = 0; i < COMMITTERS; i++)
        if (pager.slot[i] != NULL || pager.committing[i])
            return 1;
    return 0;
}

/* Wait until everything handed off is committed. 0, or -1 when a commit failed. */
static int drain_commits(void)
{
    pthread_mutex_lock(&pager.lock);
    while (commits_pending() && !pager.commit_failed)
        pthread_cond_wait(&pager.cond, &pager.lock);
    int failed = pager.commit_failed;
    pager.commit_failed = 0;
    pthread_mutex_unlock(&pager.lock);
    return failed ? -1 : 0;
}

/* Steps 1 and 2 for the rows `where` selects (a condition on the far key m.far_run_at, m.id),
 * then hand-off. Returns rows read, -1 on failure; *last = the last row's key. `paced`: see
 * to_redis. */
static int read_and_send(MYSQL *db, struct rblock_shards *set, int shard, const char *where, int64_t through_if_all,
                         int paced, int64_t *last_run_at, uint64_t *last_id)
{
    char sql[640];
    snprintf(sql, sizeof sql,
             "SELECT %s FROM message m WHERE m.far_shard = %d AND %s ORDER BY m.far_run_at, m.id LIMIT %d",
             ROW_COLUMNS, shard, where, CHUNK_ROWS(paced));
    int64_t t0 = clock_mono_us();
    if (mysql_query(db, sql) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db); /* end the read's snapshot */
    if (res == NULL)
        return -1;
    int n = (int)mysql_num_rows(res);
    if (n == 0) {
        mysql_free_result(res);
        return 0;
    }
    struct chunk *ch = calloc(1, sizeof *ch);
    struct far_row *rows = calloc((size_t)n, sizeof *rows);
    if (ch == NULL || rows == NULL) {
        free(ch);
        free(rows);
        mysql_free_result(res);
        return -1;
    }
    *ch = (struct chunk){.shard = shard, .rows = rows, .n = n, .res = res};
    for (int i = 0; i < n; i++) {
        MYSQL_ROW m = mysql_fetch_row(res);
        unsigned long *len = mysql_fetch_lengths(res);
        mrow_read(m, len, &rows[i].m);
        rows[i].far_run_at = strtoll(m[12], NULL, 10);
    }
    *last_run_at = rows[n - 1].far_run_at;
    *last_id = rows[n - 1].m.id;
    ch->now = clock_unix_ms();
    ch->through = n < CHUNK_ROWS(paced) ? through_if_all : *last_run_at;
    int64_t t1 = clock_mono_us();
    if (to_redis(rblock_shard(set, shard), shard, rows, n, ch->now, paced, ch->token, sizeof ch->token) < 0) {
        chunk_free(ch);
        return -1;
    }
    log_debug("pager: shard %d: %d rows: read %lld us, redis %lld us", shard, n, (long long)(t1 - t0),
              (long long)(clock_mono_us() - t1));
    return hand_off(ch) < 0 ? -1 : n;
}

/* A step 3 committed: its rows are no longer far in MySQL, so no later pass can page them
 * again and jobs of theirs that end need no tombstone. Its token leaves the shard's "paging"
 * set; the set (and the tombstones for every delivery that ends) lasts only while some step is
 * between 2 and 3, not for a minute into the burst it paged in. Another step's token, a later
 * one or another instance's after a takeover, keeps the set. 0 / -1 (then the set expires). */
static int step_committed(redisContext *c, int shard, const char *token)
{
    char flag[160];
    rkey(flag, sizeof flag, pager.cfg->redis_prefix, shard, "paging");
    redisAppendCommand(c, "SREM %s %s", flag, token);
    if (rblock_drain(c, 1) == 0)
        return 0;
    log_warn("pager: shard %d: could not end a page step's flag: %s", shard, c->errstr);
    return -1;
}

/* Step 3 of one chunk, on the committer's connections; 0 / -1. */
static int commit_chunk(MYSQL *db, struct rblock_shards *set, struct chunk *ch)
{
    redisContext *c = rblock_shard(set, ch->shard);
    struct far_row **unpage = calloc((size_t)ch->n, sizeof *unpage);
    int nunpage = 0, rc = -1;
    long paged = 0;
    int64_t t0 = clock_mono_us();
    if (unpage != NULL && mark_paged(db, ch->shard, ch->rows, ch->n, ch->now, ch->through, &paged, &unpage,
                                     &nunpage) == 0 &&
        (nunpage == 0 || take_back(c, ch->shard, unpage, nunpage) == 0))
        rc = 0;
    free(unpage);
    if (rc == 0 && ch->token[0] != '\0')
        rc = step_committed(c, ch->shard, ch->token);
    if (rc == 0) {
        atomic_fetch_add(&pager.paged, paged);
        atomic_fetch_add(&pager.shard_paged[ch->shard], paged);
        log_debug("pager: shard %d: %d rows, %ld paged: commit %lld us", ch->shard, ch->n, paged,
                  (long long)(clock_mono_us() - t0));
    }
    return rc;
}

static void *committer_main(void *arg)
{
    int self = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof name, "pager-commit-%d", self);
    log_set_thread_name(name);
    struct conns k = {NULL, NULL};
    int64_t last_complaint = 0;
    for (;;) {
        pthread_mutex_lock(&pager.lock);
        while (pager.slot[self] == NULL && !(pager.bg.stop && pager.reader_done))
            pthread_cond_wait(&pager.cond, &pager.lock);
        struct chunk *ch = pager.slot[self];
        pager.slot[self] = NULL;
        pager.committing[self] = ch != NULL;
        pthread_mutex_unlock(&pager.lock);
        if (ch == NULL)
            break;
        int failed = conns_open(&k, COMMITTER + self, &last_complaint) < 0 || commit_chunk(k.db, k.c, ch) < 0;
        chunk_free(ch);
        if (failed) {
            log_warn("pager: a commit failed (%s); its rows are paged again", k.db ? mysql_error(k.db) : "no MySQL");
            conns_close(&k, COMMITTER + self);
        }
        pthread_mutex_lock(&pager.lock);
        pager.committing[self] = 0;
        pager.commit_failed |= failed;
        pthread_cond_broadcast(&pager.cond);
        pthread_mutex_unlock(&pager.lock);
    }
    conns_close(&k, COMMITTER + self);
    mysql_thread_end();
    return NULL;
}

static void observe_bucket(long long jobs)
{
    size_t b = 0;
    while (b < NBOUNDS && (double)jobs > BUCKET_BOUNDS[b])
        b++;
    atomic_fetch_add(&pager.bucket_hist[b], 1);
    atomic_fetch_add(&pager.bucket_sum, jobs);
    atomic_fetch_add(&pager.buckets, 1);
}

/* Between two chunks of a pass, and once per tick: what must not wait for a whole pass —
 * jobs a reschedule brought near (pager_page_now), the far counts /stats shows, the lag. */
struct pass {
    MYSQL *db;
    struct rblock_shards *c;
    const char *owned;
    struct shard_view *views;
    int64_t last_counts;
};

static void note_lag(const struct pass *p)
{
    const struct config *cfg = pager.cfg;
    int64_t lag = 0, want = clock_unix_ms() + pager_lead_ms(cfg);
    for (int s = 0; s < cfg->redis_shards; s++)
        if (p->owned[s] && p->views[s].paged_through != 0 && want - p->views[s].paged_through > lag)
            lag = want - p->views[s].paged_through;
    atomic_store(&pager.lag_ms, lag);
}

static int between_chunks(struct pass *p)
{
    struct page_req req[REQUESTS_MAX];
    pthread_mutex_lock(&pager.lock);
    int nreq = pager.nreq;
    memcpy(req, pager.req, (size_t)nreq * sizeof req[0]);
    pager.nreq = 0;
    pthread_mutex_unlock(&pager.lock);
    for (int i = 0; i < nreq; i++) {
        char where[96];
        int64_t last;
        uint64_t last_id;
        snprintf(where, sizeof where, "m.far_run_at = %lld AND m.id = %llu", (long long)req[i].run_at,
                 (unsigned long long)req[i].id);
        if (read_and_send(p->db, p->c, req[i].shard, where, 0, 0, &last, &last_id) < 0)
            return -1;
    }
    int64_t now = clock_unix_ms();
    if (now - p->last_counts >= COUNTS_EVERY_MS) {
        if (refresh_counts(p->db) < 0)
            return -1;
        p->last_counts = now;
    }
    note_lag(p);
    return 0;
}

/* Wait until the monotonic time `until_us`, or less: a stop, or a reschedule's page-now
 * request (served between chunks, never held up by pacing). */
static void pace_until(int64_t until_us)
{
    pthread_mutex_lock(&pager.lock);
    for (;;) {
        int64_t left = until_us - clock_mono_us();
        if (pager.bg.stop || pager.nreq > 0 || left <= 0)
            break;
        clock_cond_wait_us(&pager.cond, &pager.lock, left);
    }
    pthread_mutex_unlock(&pager.lock);
}

/* A pass's pacing (pager.h, "Pacing"): the jobs it pages, and the time by which it must have
 * paged them to leave the rest of the lead for full speed. */
struct pace {
    int64_t deadline;   /* unix ms; paced while now is before it (0: never) */
    long long left;     /* jobs still to page by then */
    int64_t next_us;    /* monotonic: the next chunk may start then */
};

/* Count what the pass will page and its earliest due time, in one scan of the key range the
 * pass reads (index only, no temporary table: far cheaper than paging the rows); the deadline
 * is that time less pager_pace_slack_ms. A count of PACE_COUNT_MAX or more is paged flat out:
 * a backlog that size is behind, not early. 0 / -1. */
#define PACE_COUNT_MAX 5000000
static int pace_begin(struct pass *p, int64_t bound, struct pace *pc)
{
    const struct config *cfg = pager.cfg;
    *pc = (struct pace){0, 0, 0};
    int64_t slack = pager_pace_slack_ms(cfg), now = clock_unix_ms();
    if (slack >= pager_lead_ms(cfg))
        return 0; /* never paced */
    struct sbuf sql = SBUF_INIT;
    sb_printf(&sql, "SELECT COUNT(*), MIN(far_run_at) FROM message WHERE far_run_at < %lld AND far_shard IN (",
              (long long)bound);
    int any = 0;
    for (int s = 0; s < cfg->redis_shards; s++)
        if (p->owned[s])
            sb_printf(&sql, "%s%d", any++ ? "," : "", s);
    if (!any) {
        sb_free(&sql);
        return 0;
    }
    sb_putc(&sql, ')');
    MYSQL_RES *res = query(p->db, &sql);
    mysql_commit(p->db); /* end the read's snapshot */
    if (res == NULL)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    if (row && row[0] && row[1]) {
        pc->left = strtoll(row[0], NULL, 10);
        int64_t deadline = strtoll(row[1], NULL, 10) - slack;
        if (pc->left < PACE_COUNT_MAX && deadline > now)
            pc->deadline = deadline;
    }
    mysql_free_result(res);
    return 0;
}

/* After a paced chunk of n jobs: wait as long as the jobs left allow — they are spread evenly
 * until the deadline, at PAGER_PACED_RATE at least. */
static void pace_chunk(struct pace *pc, int n)
{
    pc->left -= n;
    int64_t now_us = clock_mono_us(), ms_left = pc->deadline - clock_unix_ms();
    if (ms_left <= 0)
        return;
    double rate = pc->left > 0 ? (double)pc->left * 1000.0 / (double)ms_left : 0;
    if (rate < PAGER_PACED_RATE)
        rate = PAGER_PACED_RATE;
    pc->next_us = (pc->next_us > now_us ? pc->next_us : now_us) + (int64_t)((double)n * 1e6 / rate);
    pace_until(pc->next_us);
}

/* One pass: every owned shard up to the end of the bucket now + lead falls in, a chunk of each
 * in turn (so one shard's big bucket does not hold up another's earlier jobs). 0 / -1. */
static int page_pass(struct pass *p)
{
    const struct config *cfg = pager.cfg;
    int64_t bound = bucket_end(cfg, clock_unix_ms() + pager_lead_ms(cfg));
    struct cursor {
        int active;
        int64_t run_at; /* after this key (the previous chunk's last, still uncommitted) */
        uint64_t id;
    } *cur = calloc((size_t)cfg->redis_shards, sizeof *cur);
    if (cur == NULL)
        return -1;
    int nowned = 0;
    for (int s = 0; s < cfg->redis_shards; s++) {
        struct shard_view *v = &p->views[s];
        if (!p->owned[s])
            continue;
        nowned++;
        long long paged = atomic_load(&pager.shard_paged[s]);
        if (bound != v->bound) {
            if (paged > v->bucket_start)
                observe_bucket(paged - v->bucket_start);
            v->bound = bound;
            v->bucket_start = paged;
        }
        cur[s].active = 1;
        cur[s].run_at = INT64_MIN;
    }
    atomic_store(&pager.shards_paging, nowned);
    int rc = 0;
    struct pace pace;
    if (pace_begin(p, bound, &pace) < 0) {
        free(cur);
        return -1;
    }
    for (int any = 1; any && rc == 0 && !bgthread_stopping(&pager.bg);) {
        any = 0;
        for (int s = 0; s < cfg->redis_shards && rc == 0; s++) {
            if (!cur[s].active)
                continue;
            char where[160];
            if (cur[s].run_at == INT64_MIN)
                snprintf(where, sizeof where, "m.far_run_at < %lld", (long long)bound);
            else
                snprintf(where, sizeof where,
                         "m.far_run_at < %lld AND m.far_run_at >= %lld AND (m.far_run_at > %lld OR m.id > %llu)", (long long)bound,
                         (long long)cur[s].run_at, (long long)cur[s].run_at, (unsigned long long)cur[s].id);
            int paced = clock_unix_ms() < pace.deadline;
            int n = read_and_send(p->db, p->c, s, where, bound, paced, &cur[s].run_at, &cur[s].id);
            if (n < 0) {
                rc = -1;
                break;
            }
            if (paced)
                pace_chunk(&pace, n);
            if (n < CHUNK_ROWS(paced)) {
                cur[s].active = 0;
                p->views[s].paged_through = bound; /* once its last chunk commits (drained below) */
            } else {
                p->views[s].paged_through = cur[s].run_at;
                any = 1;
            }
            rc = between_chunks(p);
        }
    }
    free(cur);
    if (drain_commits() < 0)
        rc = -1;
    return rc;
}

/* goneexpire.lua on every owned shard: its far tombstones older than TOMBSTONE_KEEP_MS go. */
static int prune_tombstones(struct rblock_shards *set, const char *owned)
{
    const struct config *cfg = pager.cfg;
    int sent = 0;
    for (int s = 0; s < cfg->redis_shards; s++) {
        if (!owned[s])
            continue;
        struct rargv b;
        int rc = rargv_init(&b, 5, 1, 0);
        if (rc == 0) {
            rargv_key(&b, cfg->redis_prefix, s, "jobs");
            rargv_int(&b, clock_unix_ms() - TOMBSTONE_KEEP_MS);
            rc = rblock_append_eval(rblock_shard(set, s), SCRIPT_GONEEXPIRE, b.argc, b.argv, b.lens);
        }
        rargv_free(&b);
        if (rc < 0)
            return -1;
        sent++;
    }
    int rc = 0;
    for (int s = 0; s < cfg->redis_shards && sent > 0; s++) /* in the order each connection got them */
        if (owned[s] && rblock_drain(rblock_shard(set, s), 1) < 0)
            rc = -1;
    return rc;
}

static void wait_tick(void)
{
    pthread_mutex_lock(&pager.lock);
    if (!pager.bg.stop && pager.nreq == 0)
        clock_cond_wait_us(&pager.cond, &pager.lock, PAGER_TICK_MS * 1000);
    pthread_mutex_unlock(&pager.lock);
}

/* The pager thread has ended, or will not start: a stopping committer may end too. */
static void reader_ended(void)
{
    pthread_mutex_lock(&pager.lock);
    pager.reader_done = 1;
    pthread_cond_broadcast(&pager.cond);
    pthread_mutex_unlock(&pager.lock);
}

static void *pager_main(void *unused)
{
    (void)unused;
    log_set_thread_name("pager");
    const struct config *cfg = pager.cfg;
    struct conns k = {NULL, NULL};
    int64_t last_counts = 0, last_prune = 0, last_tier = 0, last_complaint = 0;
    struct shard_view *views = calloc((size_t)cfg->redis_shards, sizeof *views);
    char owned[MAX_SHARDS];
    while (!bgthread_stopping(&pager.bg) && views) {
        int64_t now = clock_unix_ms();
        conns_open(&k, PAGER, &last_complaint);
        MYSQL *db = k.db;
        struct rblock_shards *c = k.c;
        int failed = 0;
        if (db && now - last_counts >= COUNTS_EVERY_MS) {
            failed |= refresh_counts(db) < 0;
            last_counts = now;
        }
        if (c && now - last_tier >= REDIS_TIER_EVERY_MS) {
            failed |= refresh_redis_tier(c) < 0;
            last_tier = now;
        }
        if (db && c && !failed) {
            pthread_mutex_lock(&pager.lock);
            memcpy(owned, pager.owned, (size_t)cfg->redis_shards);
            pthread_mutex_unlock(&pager.lock);
            struct pass p = {db, c, owned, views, last_counts};
            failed |= page_pass(&p) < 0;
            last_counts = p.last_counts;
            note_lag(&p);
            if (!failed && now - last_prune >= PRUNE_EVERY_MS) {
                failed |= prune_tombstones(c, owned) < 0;
                last_prune = now;
            }
        }
        if (failed) {
            /* start again on fresh connections (a failed step is simply repeated) */
            log_warn("pager: a step failed (%s%s); retrying", db ? mysql_error(db) : "MySQL down",
                     c ? rblock_shards_errstr(c) : "");
            conns_close(&k, PAGER);
            pthread_mutex_lock(&pager.lock);
            if (!pager.bg.stop)
                clock_cond_wait_us(&pager.cond, &pager.lock, 1000000);
            pthread_mutex_unlock(&pager.lock);
            continue;
        }
        wait_tick();
    }
    free(views);
    conns_close(&k, PAGER);
    reader_ended();
    mysql_thread_end();
    return NULL;
}

int pager_start(struct app *app)
{
    pager.app = app;
    pager.cfg = &app->cfg;
    if (app->cfg.redis_shards > MAX_SHARDS)
        return -1;
    memset(pager.owned, 1, sizeof pager.owned); /* alone until the fleet says otherwise, like the mover */
    store_who(pager.who, sizeof pager.who, app->instance, "pager", app->hostname);
    pager.reader_done = 0;
    int made = 0;
    while (made < COMMITTERS && bgthread_start(&pager.bg, committer_main, (void *)(intptr_t)made) == 0)
        made++;
    if (made < COMMITTERS || bgthread_start(&pager.bg, pager_main, NULL) < 0) {
        reader_ended();
        bgthread_stop(&pager.bg, STOP_DEADLINE_MS);
        return -1;
    }
    return 0;
}

void pager_stop(void)
{
    if (!bgthread_running(&pager.bg))
        return;
    bgthread_stop(&pager.bg, STOP_DEADLINE_MS);
    for (int i = 0; i < COMMITTERS; i++) {
        chunk_free(pager.slot[i]); /* handed off but not committed: paged again by whoever pages next */
        pager.slot[i] = NULL;
    }
    free(pager.counts);
    pager.counts = NULL;
    pager.ncounts = 0;
}

void pager_set_owned(const char *owned, int shards)
{
    pthread_mutex_lock(&pager.lock);
    memcpy(pager.owned, owned, (size_t)(shards < MAX_SHARDS ? shards : MAX_SHARDS));
    pthread_mutex_unlock(&pager.lock);
}

void pager_page_now(int shard, int64_t run_at, uint64_t id)
{
    pthread_mutex_lock(&pager.lock);
    if (pager.nreq < REQUESTS_MAX) /* else the regular pass takes it at run_at - lead */
        pager.req[pager.nreq++] = (struct page_req){shard, run_at, id};
    pthread_cond_broadcast(&pager.cond);
    pthread_mutex_unlock(&pager.lock);
}

void pager_stats_json(const struct config *cfg, struct sbuf *sb)
{
    sb_printf(sb,
              ",\"pager\":{\"horizon\":%lld,\"lead\":%lld,\"bucket\":%lld,\"lag\":%lld,\"paged\":%lld,\"shards\":%d,"
              "\"farJobs\":%lld}",
              (long long)cfg->horizon, (long long)pager_lead_ms(cfg), (long long)pager_bucket_ms(cfg),
              (long long)atomic_load(&pager.lag_ms), (long long)atomic_load(&pager.paged), atomic_load(&pager.shards_paging),
              (long long)atomic_load(&pager.far_total));
}

void pager_metrics(struct sbuf *sb)
{
    sb_puts(sb, "# HELP hourglass_jobs_tier Jobs held by each tier: redis (the near future, live and dead) and "
                "mysql (far jobs, paged in before they are due).\n# TYPE hourglass_jobs_tier gauge\n");
    sb_printf(sb, "hourglass_jobs_tier{tier=\"redis\"} %lld\n", (long long)atomic_load(&pager.redis_total));
    sb_printf(sb, "hourglass_jobs_tier{tier=\"mysql\"} %lld\n", (long long)atomic_load(&pager.far_total));
    sb_puts(sb, "# HELP hourglass_pager_lag_seconds How far this instance's paging is behind now + lead, over the "
                "shards it pages.\n# TYPE hourglass_pager_lag_seconds gauge\n");
    sb_printf(sb, "hourglass_pager_lag_seconds %.3f\n", (double)atomic_load(&pager.lag_ms) / 1000.0);
    sb_puts(sb, "# HELP hourglass_pager_paged_total Far jobs this instance paged into Redis.\n"
                "# TYPE hourglass_pager_paged_total counter\n");
    sb_printf(sb, "hourglass_pager_paged_total %lld\n", (long long)atomic_load(&pager.paged));
    sb_puts(sb, "# HELP hourglass_pager_bucket_jobs Jobs paged per bucket (per shard).\n"
                "# TYPE hourglass_pager_bucket_jobs histogram\n");
    unsigned long long cum = 0;
    for (size_t b = 0; b < NBOUNDS; b++) {
        cum += atomic_load(&pager.bucket_hist[b]);
        sb_printf(sb, "hourglass_pager_bucket_jobs_bucket{le=\"%g\"} %llu\n", BUCKET_BOUNDS[b], cum);
    }
    cum += atomic_load(&pager.bucket_hist[NBOUNDS]);
    sb_printf(sb, "hourglass_pager_bucket_jobs_bucket{le=\"+Inf\"} %llu\n", cum);
    sb_printf(sb, "hourglass_pager_bucket_jobs_sum %lld\nhourglass_pager_bucket_jobs_count %llu\n",
              (long long)atomic_load(&pager.bucket_sum), (unsigned long long)atomic_load(&pager.buckets));
}
