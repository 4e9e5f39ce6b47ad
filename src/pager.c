/* pager.c — see pager.h. */
#include "pager.h"
#include "app.h"
#include "clock.h"
#include "db.h"
#include "ids.h"
#include "job.h"
#include "log.h"
#include "metrics.h"
#include "rcodec.h"
#include "reinsert.h"
#include "rsync.h"
#include "sbuf.h"
#include "store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1000
#define MAX_SHARDS 4096
#define PAGING_FLAG_MS 60000       /* finish/delete leave tombstones this long after a page step */
#define TOMBSTONE_KEEP_MS 600000   /* far tombstones outlive any page step by far */
#define PRUNE_EVERY_MS 10000
#define COUNTS_EVERY_MS 500
#define REDIS_TIER_EVERY_MS 2000
#define REQUESTS_MAX 256

/* jobs paged per bucket, for hourglass_pager_bucket_jobs */
static const double BUCKET_BOUNDS[] = {0, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
#define NBOUNDS (sizeof BUCKET_BOUNDS / sizeof BUCKET_BOUNDS[0])

struct page_req {
    int shard;
    int64_t run_at;
    uint64_t id;
};

static struct {
    struct app *app;
    const struct config *cfg;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int stop;                            /* under mu */
    char owned[MAX_SHARDS];              /* under mu */
    struct page_req req[REQUESTS_MAX];   /* under mu */
    int nreq;
    struct far_topic *counts;            /* under mu: far_count, sorted by topic */
    int ncounts;
    char who[STORE_WHO_MAX];
    /* figures */
    _Atomic long long paged, far_total, redis_total, lag_ms, bucket_sum;
    _Atomic int shards_paging;
    _Atomic unsigned long long bucket_hist[NBOUNDS + 1];
    _Atomic unsigned long long buckets;
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* The thread's own view of each shard. */
struct shard_view {
    int64_t paged_through; /* every far job due before it is in Redis (this process's knowledge) */
    int64_t bound;         /* the bucket end the current pass pages up to */
    long long bucket_jobs; /* jobs paged for that bucket so far */
};

int64_t pager_lead_ms(const struct config *cfg)
{
    int64_t half = cfg->horizon / 2;
    return half < 60000 ? half : 60000;
}

int64_t pager_bucket_ms(const struct config *cfg)
{
    int64_t b = cfg->horizon / 8;
    if (b < 50)
        b = 50;
    return b < 10000 ? b : 10000;
}

static int64_t bucket_end(const struct config *cfg, int64_t t)
{
    int64_t b = pager_bucket_ms(cfg);
    return (t / b + 1) * b;
}

static int stopping(void)
{
    pthread_mutex_lock(&P.mu);
    int s = P.stop;
    pthread_mutex_unlock(&P.mu);
    return s;
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
    pthread_mutex_lock(&P.mu);
    free(P.counts);
    P.counts = t;
    P.ncounts = n;
    pthread_mutex_unlock(&P.mu);
    atomic_store(&P.far_total, total);
    return 0;
}

int pager_far_counts(struct far_topic **out)
{
    pthread_mutex_lock(&P.mu);
    int n = P.ncounts;
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    if (*out && n)
        memcpy(*out, P.counts, (size_t)n * sizeof **out);
    pthread_mutex_unlock(&P.mu);
    return *out ? n : -1;
}

/* Jobs Redis holds (the shards' counters of live and dead jobs), for hourglass_jobs_tier. */
static int refresh_redis_tier(redisContext *c)
{
    const struct config *cfg = P.cfg;
    for (int s = 0; s < cfg->redis_shards; s++) {
        char key[160];
        rkey(key, sizeof key, cfg->redis_prefix, s, "count");
        redisAppendCommand(c, "HVALS %s", key);
    }
    long long total = 0;
    int rc = 0;
    for (int s = 0; s < cfg->redis_shards; s++) {
        redisReply *r = rsync_reply(c);
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
        atomic_store(&P.redis_total, total);
    return 0;
}

/* ---- one step: rows read from MySQL into Redis, then marked paged ---- */

struct far_row {
    struct mrow m;       /* the message row (m.id == 0: none, a stray far_job row) */
    int64_t far_run_at;  /* the far_job row's key */
    uint64_t far_id;
    enum reinsert_outcome out;
    int cur_state;       /* under the lock in step 3 */
    unsigned cur_ver;
    int64_t cur_run_at;
};

static const char ROW_COLUMNS[] = "m.id, m.topic, m.biz_key, m.body, m.run_at, m.priority, m.ttr, m.tries, "
                                  "m.attempts, m.version, m.state, m.backoff, f.run_at, f.id";

static int cmp_row_id(const void *a, const void *b)
{
    uint64_t x = (*(const struct far_row *const *)a)->far_id, y = (*(const struct far_row *const *)b)->far_id;
    return x < y ? -1 : x > y;
}

static void put_ids(struct sbuf *sb, struct far_row **rows, int n)
{
    for (int i = 0; i < n; i++) {
        if (i)
            sb_putc(sb, ',');
        sb_json_uint(sb, rows[i]->far_id);
    }
}

/* Step 2: restore.lua for the rows that are far jobs (the shard's "paging" flag set first). */
static int to_redis(redisContext *c, int shard, struct far_row *rows, int n, int64_t now)
{
    const struct config *cfg = P.cfg;
    struct mrow **put = malloc((size_t)(n ? n : 1) * sizeof *put);
    int k = 0;
    if (put == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        rows[i].out = OUT_FAILED;
        if (rows[i].m.id != 0 && rows[i].m.state == JS_FAR && rows[i].m.run_at == rows[i].far_run_at)
            put[k++] = &rows[i].m;
    }
    int rc = 0;
    if (k > 0) {
        char flag[160];
        rkey(flag, sizeof flag, cfg->redis_prefix, shard, "paging");
        redisAppendCommand(c, "SET %s 1 PX %d", flag, PAGING_FLAG_MS);
        rc = reinsert_append(c, cfg, shard, put, k, now, 1, P.who);
        if (rc == 0)
            rc = rsync_drain(c, 1);
        redisReply *r = rc == 0 ? rsync_reply(c) : NULL;
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)k) {
            log_warn("pager: shard %d: Redis failed restore.lua: %s", shard, r && r->str ? r->str : c->errstr);
            rc = -1;
        } else {
            for (int i = 0, j = 0; i < n && j < k; i++) {
                if (&rows[i].m != put[j])
                    continue;
                int to = 0;
                unsigned ver = 0;
                rows[i].out = reinsert_outcome(r->element[j++], &to, &ver);
                if (rows[i].out == OUT_RESTORED)
                    metrics_transition(JS_FAR, to, 1);
            }
        }
        if (r)
            freeReplyObject(r);
    }
    free(put);
    return rc;
}

/* Step 3's lock and read: each row's current state, version and due time. */
static int lock_rows(MYSQL *db, struct far_row **byid, int n)
{
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT id, state, version, run_at FROM message WHERE id IN (");
    put_ids(&sql, byid, n);
    sb_puts(&sql, ") ORDER BY id FOR UPDATE");
    int rc = sql.oom ? -1 : mysql_real_query(db, sql.data, sql.len);
    sb_free(&sql);
    if (rc != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        byid[i]->cur_state = JS_NONE;
    MYSQL_ROW row;
    int i = 0;
    while ((row = mysql_fetch_row(res)) != NULL) {
        uint64_t id = strtoull(row[0], NULL, 10);
        while (i < n && byid[i]->far_id < id)
            i++;
        for (int j = i; j < n && byid[j]->far_id == id; j++) {
            byid[j]->cur_state = job_state_parse(row[1]);
            byid[j]->cur_ver = (unsigned)strtoul(row[2], NULL, 10);
            byid[j]->cur_run_at = strtoll(row[3], NULL, 10);
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

/* Step 3. *paged gets the jobs now in Redis by this step. */
static int mark_paged(MYSQL *db, int shard, struct far_row *rows, int n, int64_t now, int64_t through, long *paged,
                      struct far_row ***unpage, int *nunpage)
{
    struct far_row **byid = malloc((size_t)n * 3 * sizeof *byid);
    if (byid == NULL)
        return -1;
    struct far_row **done = byid + n, **held = byid + 2 * n;
    int ndone = 0, nheld = 0, nstray = 0, nlock = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].m.id != 0)
            byid[nlock++] = &rows[i];
    qsort(byid, (size_t)nlock, sizeof *byid, cmp_row_id);
    struct sbuf sql = SBUF_INIT;
    int rc = db_exec(db, "START TRANSACTION", 17);
    if (rc == 0 && nlock > 0)
        rc = lock_rows(db, byid, nlock);
    if (rc < 0)
        goto out;

    int64_t lo = INT64_MAX, hi = INT64_MIN;
    sb_printf(&sql, "DELETE FROM far_job WHERE shard = %d AND run_at BETWEEN ", shard);
    struct sbuf ids = SBUF_INIT;
    *nunpage = 0;
    for (int i = 0; i < n; i++) {
        struct far_row *r = &rows[i];
        int stray = r->m.id == 0 || r->m.state != JS_FAR || r->m.run_at != r->far_run_at;
        if (!stray && !settled(r)) {
            /* Changed since step 1 (deleted, rescheduled): what step 2 put in Redis from the old
             * row goes again, unless another pager marked it paged meanwhile (then it is live
             * in Redis at that version: left). The far_job row is the change's to manage. */
            int live_near = r->cur_state == JS_DELAYED || r->cur_state == JS_READY || r->cur_state == JS_RESERVED;
            if (r->out == OUT_RESTORED && !live_near)
                (*unpage)[(*nunpage)++] = r;
            continue;
        }
        if (stray)
            nstray++; /* a row its message left without removing it (an aborted push in doubt) */
        else if (r->out == OUT_BIZHELD)
            held[nheld++] = r;
        else
            done[ndone++] = r;
        if (ids.len)
            sb_putc(&ids, ',');
        sb_json_uint(&ids, r->far_id);
        if (r->far_run_at < lo)
            lo = r->far_run_at;
        if (r->far_run_at > hi)
            hi = r->far_run_at;
    }
    if (ids.len) {
        sb_printf(&sql, "%lld AND %lld AND id IN (%.*s)", (long long)lo, (long long)hi, (int)ids.len, ids.data);
        rc = exec(db, &sql);
    }
    sb_free(&ids);
    sb_reset(&sql);
    if (rc == 0 && ndone > 0) {
        sb_puts(&sql, "UPDATE message SET state = IF(run_at > ");
        sb_json_int(&sql, now);
        sb_puts(&sql, ", 'delayed', 'ready'), version = version + 1, updated_at = ");
        sb_json_int(&sql, now);
        sb_puts(&sql, " WHERE state = 'far' AND id IN (");
        put_ids(&sql, done, ndone);
        sb_putc(&sql, ')');
        rc = exec(db, &sql);
    }
    if (rc == 0 && nheld > 0) {
        /* its bizKey went to another job (a replace whose delete of it had not landed) */
        sb_puts(&sql, "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") SELECT id, version + 1, 'far', "
                      "'deleted', ");
        sb_json_int(&sql, now);
        sb_puts(&sql, ", 'pager: its bizKey is held by another job', ");
        db_quote(db, &sql, P.app->hostname, strlen(P.app->hostname));
        sb_putc(&sql, ',');
        db_quote(db, &sql, P.app->instance, strlen(P.app->instance));
        sb_puts(&sql, ", attempts FROM message WHERE state = 'far' AND id IN (");
        put_ids(&sql, held, nheld);
        sb_putc(&sql, ')');
        rc = exec(db, &sql);
        if (rc == 0) {
            sb_puts(&sql, "UPDATE message SET state = 'deleted', version = version + 1, updated_at = ");
            sb_json_int(&sql, now);
            sb_puts(&sql, " WHERE state = 'far' AND id IN (");
            put_ids(&sql, held, nheld);
            sb_putc(&sql, ')');
            rc = exec(db, &sql);
        }
    }
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
    for (int i = 0; rc == 0 && i < nleft; i++) {
        const struct mrow *m = &left[i]->m;
        if (m->topic == NULL)
            continue; /* counted with an earlier row of its topic */
        long k = 0;
        for (int j = i; j < nleft; j++) {
            struct mrow *o = &left[j]->m;
            if (o->topic && o->topic_len == m->topic_len && memcmp(o->topic, m->topic, m->topic_len) == 0) {
                k++;
                if (j > i)
                    o->topic = NULL;
            }
        }
        sb_printf(&sql, "UPDATE far_count SET jobs = jobs - %ld WHERE topic = ", k);
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
        rargv_key(&b, P.cfg->redis_prefix, shard, "jobs");
        rargv_int(&b, n);
        for (int i = 0; i < n; i++) {
            rargv_id(&b, rows[i]->far_id);
            rargv_int(&b, rows[i]->m.ver + 1);
            if (rows[i]->cur_state == JS_FAR)
                rargv_int(&b, rows[i]->cur_run_at);
            else
                rargv_str(&b, "", 0);
        }
        rc = rsync_append_eval(c, SCRIPT_UNPAGE, b.argc, b.argv, b.lens);
        if (rc == 0)
            rc = rsync_drain(c, 1);
    }
    rargv_free(&b);
    if (rc < 0)
        log_warn("pager: shard %d: could not take back %d jobs changed while paging: %s", shard, n, c->errstr);
    return rc;
}

/* Steps 1-3 for the rows `where` selects (a condition on f). Returns rows read, -1 on failure;
 * *last_run_at = the last row's due time. */
static int page_rows(MYSQL *db, redisContext *c, int shard, const char *where, int64_t through_if_all,
                     int64_t *last_run_at, long *paged)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT %s FROM far_job f LEFT JOIN message m ON m.id = f.id WHERE f.shard = %d AND %s "
             "ORDER BY f.run_at, f.id LIMIT %d",
             ROW_COLUMNS, shard, where, CHUNK);
    if (mysql_query(db, sql) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db); /* end the read's snapshot */
    if (res == NULL)
        return -1;
    int n = (int)mysql_num_rows(res);
    *paged = 0;
    if (n == 0) {
        mysql_free_result(res);
        return 0;
    }
    struct far_row *rows = calloc((size_t)n, sizeof *rows);
    struct far_row **unpage = calloc((size_t)n, sizeof *unpage);
    int rc = -1, nunpage = 0;
    if (rows == NULL || unpage == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        MYSQL_ROW m = mysql_fetch_row(res);
        unsigned long *len = mysql_fetch_lengths(res);
        if (m[0] != NULL)
            mrow_read(m, len, &rows[i].m);
        rows[i].far_run_at = strtoll(m[12], NULL, 10);
        rows[i].far_id = strtoull(m[13], NULL, 10);
    }
    *last_run_at = rows[n - 1].far_run_at;
    int64_t now = clock_unix_ms();
    if (to_redis(c, shard, rows, n, now) < 0)
        goto out;
    int64_t through = n < CHUNK ? through_if_all : *last_run_at;
    if (mark_paged(db, shard, rows, n, now, through, paged, &unpage, &nunpage) < 0)
        goto out;
    if (nunpage > 0 && take_back(c, shard, unpage, nunpage) < 0)
        goto out;
    rc = n;
out:
    free(rows);
    free(unpage);
    mysql_free_result(res);
    return rc;
}

static void observe_bucket(long long jobs)
{
    size_t b = 0;
    while (b < NBOUNDS && (double)jobs > BUCKET_BOUNDS[b])
        b++;
    atomic_fetch_add(&P.bucket_hist[b], 1);
    atomic_fetch_add(&P.bucket_sum, jobs);
    atomic_fetch_add(&P.buckets, 1);
}

/* Page one shard up to the end of the bucket now + lead falls in. 0 / -1. */
static int page_shard(MYSQL *db, redisContext *c, int shard, struct shard_view *v)
{
    const struct config *cfg = P.cfg;
    int64_t bound = bucket_end(cfg, clock_unix_ms() + pager_lead_ms(cfg));
    if (bound != v->bound) {
        if (v->bucket_jobs > 0)
            observe_bucket(v->bucket_jobs);
        v->bound = bound;
        v->bucket_jobs = 0;
    }
    char where[64];
    snprintf(where, sizeof where, "f.run_at < %lld", (long long)bound);
    for (;;) {
        int64_t last = 0;
        long paged = 0;
        int n = page_rows(db, c, shard, where, bound, &last, &paged);
        if (n < 0)
            return -1;
        v->bucket_jobs += paged;
        atomic_fetch_add(&P.paged, paged);
        if (n < CHUNK) {
            v->paged_through = bound;
            return 0;
        }
        v->paged_through = last;
        if (stopping())
            return 0;
    }
}

static int prune_tombstones(redisContext *c, const char *owned)
{
    const struct config *cfg = P.cfg;
    static const char script[] = "if redis.call('EXISTS', KEYS[2]) == 0 then "
                                 "return redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1]) end return 0";
    int sent = 0;
    for (int s = 0; s < cfg->redis_shards; s++) {
        if (!owned[s])
            continue;
        char gone[160], restoring[160];
        rkey(gone, sizeof gone, cfg->redis_prefix, s, "gone");
        rkey(restoring, sizeof restoring, cfg->redis_prefix, s, "restoring");
        redisAppendCommand(c, "EVAL %s 2 %s %s %lld", script, gone, restoring,
                           (long long)(clock_unix_ms() - TOMBSTONE_KEEP_MS));
        sent++;
    }
    return rsync_drain(c, sent);
}

static void wait_tick(void)
{
    pthread_mutex_lock(&P.mu);
    if (!P.stop && P.nreq == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += PAGER_TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&P.cond, &P.mu, &ts);
    }
    pthread_mutex_unlock(&P.mu);
}

static void *pager_main(void *unused)
{
    (void)unused;
    log_set_thread_name("pager");
    const struct config *cfg = P.cfg;
    MYSQL *db = NULL;
    redisContext *c = NULL;
    int64_t last_counts = 0, last_prune = 0, last_tier = 0, last_complaint = 0;
    struct shard_view *views = calloc((size_t)cfg->redis_shards, sizeof *views);
    char owned[MAX_SHARDS];
    while (!stopping() && views) {
        char err[256] = "";
        int64_t now = clock_unix_ms();
        if (db == NULL && (db = db_connect(cfg, err, sizeof err)) == NULL && now - last_complaint > 10000) {
            log_warn("pager: MySQL: %s", err);
            last_complaint = now;
        }
        if (c == NULL && (c = rsync_connect(cfg, 1, NULL, err, sizeof err)) == NULL && now - last_complaint > 10000) {
            log_warn("pager: Redis: %s", err);
            last_complaint = now;
        }
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
            struct page_req req[REQUESTS_MAX];
            pthread_mutex_lock(&P.mu);
            int nreq = P.nreq;
            memcpy(req, P.req, (size_t)nreq * sizeof req[0]);
            P.nreq = 0;
            memcpy(owned, P.owned, (size_t)cfg->redis_shards);
            pthread_mutex_unlock(&P.mu);
            for (int i = 0; i < nreq && !failed; i++) {
                char where[96];
                int64_t last;
                long paged = 0;
                snprintf(where, sizeof where, "f.run_at = %lld AND f.id = %llu", (long long)req[i].run_at,
                         (unsigned long long)req[i].id);
                failed |= page_rows(db, c, req[i].shard, where, 0, &last, &paged) < 0;
                atomic_fetch_add(&P.paged, paged);
            }
            int nowned = 0;
            int64_t lag = 0, want = clock_unix_ms() + pager_lead_ms(cfg);
            for (int s = 0; s < cfg->redis_shards && !failed && cfg->horizon > 0; s++) {
                if (!owned[s])
                    continue;
                nowned++;
                failed |= page_shard(db, c, s, &views[s]) < 0;
                if (want - views[s].paged_through > lag)
                    lag = want - views[s].paged_through;
            }
            atomic_store(&P.shards_paging, nowned);
            atomic_store(&P.lag_ms, lag);
            if (!failed && now - last_prune >= PRUNE_EVERY_MS) {
                failed |= prune_tombstones(c, owned) < 0;
                last_prune = now;
            }
        }
        if (failed) {
            /* start again on fresh connections (a failed step is simply repeated) */
            log_warn("pager: a step failed (%s%s); retrying", db ? mysql_error(db) : "MySQL down",
                     c && c->err ? c->errstr : "");
            if (db)
                mysql_close(db);
            if (c)
                redisFree(c);
            db = NULL;
            c = NULL;
            pthread_mutex_lock(&P.mu);
            if (!P.stop) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 1;
                pthread_cond_timedwait(&P.cond, &P.mu, &ts);
            }
            pthread_mutex_unlock(&P.mu);
            continue;
        }
        wait_tick();
    }
    free(views);
    if (db)
        mysql_close(db);
    if (c)
        redisFree(c);
    mysql_thread_end();
    return NULL;
}

int pager_start(struct app *app)
{
    P.app = app;
    P.cfg = &app->cfg;
    if (app->cfg.redis_shards > MAX_SHARDS)
        return -1;
    memset(P.owned, 1, sizeof P.owned); /* alone until the fleet says otherwise, like the mover */
    store_who(P.who, sizeof P.who, app->instance, "pager", app->hostname);
    if (pthread_create(&P.thread, NULL, pager_main, NULL) != 0)
        return -1;
    P.started = 1;
    return 0;
}

void pager_stop(void)
{
    if (!P.started)
        return;
    pthread_mutex_lock(&P.mu);
    P.stop = 1;
    pthread_cond_broadcast(&P.cond);
    pthread_mutex_unlock(&P.mu);
    pthread_join(P.thread, NULL);
    P.started = 0;
    free(P.counts);
    P.counts = NULL;
    P.ncounts = 0;
}

void pager_set_owned(const char *owned, int shards)
{
    pthread_mutex_lock(&P.mu);
    memcpy(P.owned, owned, (size_t)(shards < MAX_SHARDS ? shards : MAX_SHARDS));
    pthread_mutex_unlock(&P.mu);
}

void pager_page_now(int shard, int64_t run_at, uint64_t id)
{
    pthread_mutex_lock(&P.mu);
    if (P.nreq < REQUESTS_MAX) /* else the regular pass takes it at run_at - lead */
        P.req[P.nreq++] = (struct page_req){shard, run_at, id};
    pthread_cond_broadcast(&P.cond);
    pthread_mutex_unlock(&P.mu);
}

void pager_stats_json(const struct config *cfg, struct sbuf *sb)
{
    sb_printf(sb,
              ",\"pager\":{\"horizon\":%lld,\"lead\":%lld,\"bucket\":%lld,\"lag\":%lld,\"paged\":%lld,\"shards\":%d,"
              "\"farJobs\":%lld}",
              (long long)cfg->horizon, (long long)pager_lead_ms(cfg), (long long)pager_bucket_ms(cfg),
              (long long)atomic_load(&P.lag_ms), (long long)atomic_load(&P.paged), atomic_load(&P.shards_paging),
              (long long)atomic_load(&P.far_total));
}

void pager_metrics(struct sbuf *sb)
{
    sb_puts(sb, "# HELP hourglass_jobs_tier Jobs held by each tier: redis (the near future, live and dead) and "
                "mysql (far jobs, paged in before they are due).\n# TYPE hourglass_jobs_tier gauge\n");
    sb_printf(sb, "hourglass_jobs_tier{tier=\"redis\"} %lld\n", (long long)atomic_load(&P.redis_total));
    sb_printf(sb, "hourglass_jobs_tier{tier=\"mysql\"} %lld\n", (long long)atomic_load(&P.far_total));
    sb_puts(sb, "# HELP hourglass_pager_lag_seconds How far this instance's paging is behind now + lead, over the "
                "shards it pages.\n# TYPE hourglass_pager_lag_seconds gauge\n");
    sb_printf(sb, "hourglass_pager_lag_seconds %.3f\n", (double)atomic_load(&P.lag_ms) / 1000.0);
    sb_puts(sb, "# HELP hourglass_pager_paged_total Far jobs this instance paged into Redis.\n"
                "# TYPE hourglass_pager_paged_total counter\n");
    sb_printf(sb, "hourglass_pager_paged_total %lld\n", (long long)atomic_load(&P.paged));
    sb_puts(sb, "# HELP hourglass_pager_bucket_jobs Jobs paged per bucket (per shard).\n"
                "# TYPE hourglass_pager_bucket_jobs histogram\n");
    unsigned long long cum = 0;
    for (size_t b = 0; b < NBOUNDS; b++) {
        cum += atomic_load(&P.bucket_hist[b]);
        sb_printf(sb, "hourglass_pager_bucket_jobs_bucket{le=\"%g\"} %llu\n", BUCKET_BOUNDS[b], cum);
    }
    cum += atomic_load(&P.bucket_hist[NBOUNDS]);
    sb_printf(sb, "hourglass_pager_bucket_jobs_bucket{le=\"+Inf\"} %llu\n", cum);
    sb_printf(sb, "hourglass_pager_bucket_jobs_sum %lld\nhourglass_pager_bucket_jobs_count %llu\n",
              (long long)atomic_load(&P.bucket_sum), (unsigned long long)atomic_load(&P.buckets));
}
