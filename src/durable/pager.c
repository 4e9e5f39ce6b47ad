/* pager.c — see pager.h: the pager thread, steps 1 and 2 of a page step, a pass over the owned
 * shards and its pacing, and the pruning of far tombstones. */
#include "durable/pager.h"
#include "core/dutywatch.h"
#include "core/app.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "mysql/db.h"
#include "core/ids.h"
#include "core/job.h"
#include "base/log.h"
#include "core/metrics.h"
#include "durable/pager_commit.h"
#include "durable/pager_counts.h"
#include "redis/rcodec.h"
#include "redis/reinsert.h"
#include "redis/rblock.h"
#include "base/sbuf.h"
#include "redis/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK             1000
#define PACED_CHUNK       250 /* paced: smaller MySQL transactions, so each holds a core for less */
#define CHUNK_ROWS(paced) ((paced) ? PACED_CHUNK : CHUNK) /* rows a chunk reads; fewer: the range's end */
/* The shard's "paging" key is a set of page steps whose commit has not landed: step 2 adds
 * its token, step 3's commit removes it, and finish/delete leave tombstones while the set is
 * there. A pager that dies leaves its token behind: the key expires this long after the last
 * step 2 (longer than any lease takeover), so its successor re-pages under tombstones too. */
#define PAGING_FLAG_MS      60000
#define TOMBSTONE_KEEP_MS   600000 /* far tombstones outlive any page step by far */
#define PRUNE_EVERY_MS      10000
#define COUNTS_EVERY_MS     500
#define REDIS_TIER_EVERY_MS 10000 /* HVALS of every shard's counters: O(topics) for Redis */
#define REQUESTS_MAX        256
#define STOP_DEADLINE_MS    1000

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
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bgthread bg;                /* the committers (step 3: pager_commit.h), then the pager */
    char owned[PAGER_MAX_SHARDS];      /* under lock */
    struct page_req req[REQUESTS_MAX]; /* under lock */
    int nreq;
    char who[STORE_WHO_MAX];
    /* figures */
    _Atomic long long redis_total, lag_ms, bucket_sum;
    _Atomic int shards_paging;
    _Atomic unsigned long long bucket_hist[NBOUNDS + 1];
    _Atomic unsigned long long buckets;
} pager = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .bg = BGTHREAD_INIT(&pager.lock, &pager.cond, "pager: a call outlived the stop deadline; cutting its connections")};

/* The thread's own view of each shard. */
struct shard_view {
    int64_t paged_through;  /* every far job due before it is in Redis (this process's knowledge;
                               0 until its first chunk: not counted in the lag) */
    int64_t bound;          /* the bucket end the current pass pages up to */
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

/* ---- the Redis tier's size (the far counts: pager_counts.h) ---- */

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

/* ---- steps 1 and 2: rows read from MySQL into Redis (step 3: pager_commit.h) ---- */

static const char ROW_COLUMNS[] = "m.id, m.topic, m.biz_key, m.body, m.run_at, m.priority, m.ttr, m.tries, "
                                  "m.attempts, m.version, m.state, m.backoff, m.traceparent, m.tracestate, "
                                  "m.group_key, m.far_run_at"; /* reinsert.h's MROW_COLUMNS, then far_run_at */

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

/* Steps 1 and 2 for the rows `where` selects (a condition on the far key m.far_run_at, m.id),
 * then hand-off. Returns rows read, -1 on failure; *last = the last row's key. `paced`: see
 * to_redis. */
static int read_and_send(MYSQL *db, struct rblock_shards *set, int shard, const char *where, int64_t through_if_all,
                         int paced, int64_t *last_run_at, uint64_t *last_id)
{
    struct sbuf sql = SBUF_INIT;
    sb_printf(&sql, "SELECT %s FROM message m WHERE m.far_shard = %d AND %s ORDER BY m.far_run_at, m.id LIMIT %d",
              ROW_COLUMNS, shard, where, CHUNK_ROWS(paced));
    int64_t t0 = clock_mono_us();
    MYSQL_RES *res = db_query(db, &sql); /* its own transaction: the reader's autocommit (pager_conns_open) */
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
        reinsert_row_read(m, len, &rows[i].m);
        rows[i].far_run_at = strtoll(m[MROW_NCOLUMNS], NULL, 10);
    }
    *last_run_at = rows[n - 1].far_run_at;
    *last_id = rows[n - 1].m.id;
    ch->now = clock_unix_ms();
    ch->through = n < CHUNK_ROWS(paced) ? through_if_all : *last_run_at;
    int64_t t1 = clock_mono_us();
    if (to_redis(rblock_shard(set, shard), shard, rows, n, ch->now, paced, ch->token, sizeof ch->token) < 0) {
        pager_chunk_free(ch);
        return -1;
    }
    log_debug("pager: shard %d: %d rows: read %lld us, redis %lld us", shard, n, (long long)(t1 - t0),
              (long long)(clock_mono_us() - t1));
    return pager_commit_hand_off(ch) < 0 ? -1 : n;
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
    dutywatch_ok(DUTY_PAGER, -1); /* a long pass is progress, not a hang */
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
        if (pager_counts_refresh(p->db) < 0)
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
    int64_t deadline; /* unix ms; paced while now is before it (0: never) */
    long long left;   /* jobs still to page by then */
    int64_t next_us;  /* monotonic: the next chunk may start then */
    int none;         /* the count found nothing below the bound in any owned shard */
};

/* Count what the pass will page and its earliest due time, in one scan of the key range the
 * pass reads (index only, no temporary table: far cheaper than paging the rows); the deadline
 * is that time less pager_pace_slack_ms. A count of PACE_COUNT_MAX or more is paged flat out:
 * a backlog that size is behind, not early. Also counted when the pass is never paced: a count
 * of 0 (pc->none), the usual answer between two buckets, spares the pass a read per shard. 0 / -1. */
#define PACE_COUNT_MAX 5000000
static int pace_begin(struct pass *p, int64_t bound, struct pace *pc)
{
    const struct config *cfg = pager.cfg;
    *pc = (struct pace){0, 0, 0, 0};
    int64_t slack = pager_pace_slack_ms(cfg), now = clock_unix_ms();
    int pacing = slack < pager_lead_ms(cfg); /* else never paced */
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
    MYSQL_RES *res = db_query(p->db, &sql);
    if (res == NULL)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    pc->none = row && row[0] && strtoll(row[0], NULL, 10) == 0;
    if (pacing && row && row[0] && row[1]) {
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
        long long paged = pager_commit_shard_paged(s);
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
    if (pace.none) {
        /* Nothing to page, as of the count: each shard is paged through the bound, as its read
         * would have found. A row committed since the count is read by the next pass, a tick
         * later — as one committed just after a read would be. An idle pager costs one query a
         * tick instead of one per owned shard. */
        for (int s = 0; s < cfg->redis_shards; s++)
            if (cur[s].active) {
                p->views[s].paged_through = bound;
                cur[s].active = 0;
            }
        rc = between_chunks(p); /* page-now requests are served every tick */
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
                         "m.far_run_at < %lld AND m.far_run_at >= %lld AND (m.far_run_at > %lld OR m.id > %llu)",
                         (long long)bound, (long long)cur[s].run_at, (long long)cur[s].run_at,
                         (unsigned long long)cur[s].id);
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
    if (pager_commit_drain() < 0)
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

static void *pager_main(void *unused)
{
    (void)unused;
    log_set_thread_name("pager");
    const struct config *cfg = pager.cfg;
    struct pager_conns k = {.thread = PAGER_READER};
    int64_t last_counts = 0, last_prune = 0, last_tier = 0;
    struct shard_view *views = calloc((size_t)cfg->redis_shards, sizeof *views);
    char owned[PAGER_MAX_SHARDS];
    while (!bgthread_stopping(&pager.bg) && views) {
        int64_t now = clock_unix_ms();
        pager_conns_open(&k, cfg, &pager.bg);
        MYSQL *db = k.db;
        struct rblock_shards *c = k.c;
        int failed = 0;
        if (db && now - last_counts >= COUNTS_EVERY_MS) {
            failed |= pager_counts_refresh(db) < 0;
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
            dutywatch_failed(DUTY_PAGER, -1, !db ? "MySQL unavailable" : !c ? "Redis unavailable" : "a step failed");
            pager_conns_close(&k, &pager.bg);
            pthread_mutex_lock(&pager.lock);
            if (!pager.bg.stop)
                clock_cond_wait_us(&pager.cond, &pager.lock, 1000000);
            pthread_mutex_unlock(&pager.lock);
            continue;
        }
        dutywatch_ok(DUTY_PAGER, -1);
        wait_tick();
    }
    free(views);
    pager_conns_close(&k, &pager.bg);
    pager_commit_close(); /* the committers end once theirs are committed */
    mysql_thread_end();
    return NULL;
}

int pager_start(struct app *app)
{
    pager.app = app;
    pager.cfg = &app->cfg;
    if (app->cfg.redis_shards > PAGER_MAX_SHARDS)
        return -1;
    memset(pager.owned, 1, sizeof pager.owned); /* alone until the fleet says otherwise, like the mover */
    store_who(pager.who, sizeof pager.who, app->instance, "pager", app->hostname);
    if (pager_commit_start(app, &pager.bg) < 0 || bgthread_start(&pager.bg, pager_main, NULL) < 0) {
        pager_commit_close();
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
    pager_commit_free_left();
    pager_counts_free();
}

void pager_set_owned(const char *owned, int shards)
{
    pthread_mutex_lock(&pager.lock);
    memcpy(pager.owned, owned, (size_t)(shards < PAGER_MAX_SHARDS ? shards : PAGER_MAX_SHARDS));
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
              (long long)atomic_load(&pager.lag_ms), pager_commit_paged(), atomic_load(&pager.shards_paging),
              pager_counts_total());
}

void pager_metrics(struct sbuf *sb)
{
    sb_puts(sb, "# HELP hourglass_jobs_tier Jobs held by each tier: redis (the near future, live and dead) and "
                "mysql (far jobs, paged in before they are due).\n# TYPE hourglass_jobs_tier gauge\n");
    sb_printf(sb, "hourglass_jobs_tier{tier=\"redis\"} %lld\n", (long long)atomic_load(&pager.redis_total));
    sb_printf(sb, "hourglass_jobs_tier{tier=\"mysql\"} %lld\n", pager_counts_total());
    sb_puts(sb, "# HELP hourglass_pager_lag_seconds How far this instance's paging is behind now + lead, over the "
                "shards it pages.\n# TYPE hourglass_pager_lag_seconds gauge\n");
    sb_printf(sb, "hourglass_pager_lag_seconds %.3f\n", (double)atomic_load(&pager.lag_ms) / 1000.0);
    sb_puts(sb, "# HELP hourglass_pager_paged_total Far jobs this instance paged into Redis.\n"
                "# TYPE hourglass_pager_paged_total counter\n");
    sb_printf(sb, "hourglass_pager_paged_total %lld\n", pager_commit_paged());
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
