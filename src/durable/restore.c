/* restore.c — rebuild Redis from the MySQL journal: the engine behind /reStore, /reStore/{id}
 * and [redis] auto_restore (restore.h; the handler is api_restore.c).
 *
 * A whole restore pages through the message rows in a live state (delayed, ready, reserved),
 * 1000 at a time in id order per state (keyset pagination on idx_state_id: memory stays flat
 * whatever the table size), and pipelines them into Redis with restore.lua, which inserts a
 * job only where Redis lacks it. So it is idempotent, and safe beside live traffic: a job
 * that Redis holds is untouched; a job finished or deleted while the restore runs left a
 * tombstone (the scripts keep them while the per-shard "restoring" flag is set) and is not
 * brought back. expire=false (the default) leaves jobs whose runAt has passed in MySQL and
 * counts them. Every job put back is journaled as a transition.
 *
 * Both run on a MySQL pool thread (dbtask.c) with a blocking Redis connection; the submitter
 * hears of the result on its loop. One whole restore at a time per instance. */
#include "durable/restore.h"
#include "core/dutywatch.h"
#include "core/app.h"
#include "base/clock.h"
#include "mysql/db.h"
#include "mysql/dbtask.h"
#include "durable/doubt.h"
#include "core/ids.h"
#include "durable/journal.h"
#include "base/log.h"
#include "core/metrics.h"
#include "durable/outbox.h"
#include "redis/rcodec.h"
#include "redis/reinsert.h"
#include "redis/layout.h"
#include "redis/rblock.h"
#include "redis/store.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE_ROWS   1000
#define FLAG_TTL_MS 120000

static atomic_int restore_running;
/* A fence check and a whole restore never overlap on one instance: the restore does what the
 * check does (and lifts the fences at its end), and two passes aligning and re-inserting the
 * same shard at once were seen to bring a job finished in between back (the fault suite's
 * Redis snapshot run). */
static atomic_int fence_check_running;

/* restore.lua / requeue.lua logged the transition in the outbox; count it here. */
static void count_restored(const struct mrow *r, int to)
{
    metrics_transition(r->state > 0 ? r->state : JS_NONE, to, 1);
}

/* Set (on) or clear the per-shard "restoring" flags; clearing also drops tombstones, unless a
 * pager's page step needs them (restoreend.lua). */
static int set_restoring(struct rblock_shards *set, const struct config *cfg, int on)
{
    for (int s = 0; s < cfg->redis_shards; s++) {
        redisContext *c = rblock_shard(set, s);
        if (on) {
            char flag[160];
            rkey(flag, sizeof flag, cfg->redis_prefix, s, "restoring");
            redisAppendCommand(c, "SET %s 1 PX %d", flag, FLAG_TTL_MS);
            continue;
        }
        struct rargv b;
        if (rargv_init(&b, 4, 0, 0) == 0) { /* within rargv's own room: cannot fail */
            rargv_key(&b, cfg->redis_prefix, s, "jobs");
            rblock_append_eval(c, SCRIPT_RESTOREEND, b.argc, b.argv, b.lens);
        }
        rargv_free(&b);
    }
    return rblock_shards_drain(set);
}

/* The flags expire FLAG_TTL_MS after they were set, so a crashed restore cannot leave them
 * up; while the restore runs they must never lapse (a job finished meanwhile would leave no
 * tombstone and could come back), so they are renewed every quarter of that, also while
 * the restore waits for the journal. 0, or -1 when Redis did not take the renewal. */
static int renew_flags(struct rblock_shards *set, const struct config *cfg, int64_t *set_at)
{
    if (clock_mono_ms() - *set_at <= FLAG_TTL_MS / 4)
        return 0;
    if (set_restoring(set, cfg, 1) < 0)
        return -1;
    *set_at = clock_mono_ms();
    return 0;
}

/* ---- waiting for the outbox ----
 * A job that ended just before the restoring flags went up left no tombstone; if its end is
 * still in the outbox, the MySQL snapshot says it is live and the restore would bring it
 * back. So the restore waits until every outbox entry older than the flags is committed —
 * by whichever instance's outbox holds it (outbox_wait_fleet) — renewing the flags meanwhile. */
static int renew_flags(struct rblock_shards *set, const struct config *cfg, int64_t *set_at);

struct outbox_tick {
    struct rblock_shards *c;
    const struct config *cfg;
    int64_t *flags_set;
};

static int outbox_tick(int second, void *arg)
{
    struct outbox_tick *t = arg;
    if (second == 2) /* once, and not for the usual few milliseconds */
        log_info("restore: waiting for the journal to commit the outbox entries older than this restore "
                 "(%ld waiting); the restoring flags are renewed meanwhile",
                 journal_backlog());
    return dbtask_stopping() || renew_flags(t->c, t->cfg, t->flags_set) < 0;
}

/* 0 once the outbox has caught up; -1 when it cannot (MySQL or Redis down, or stopping). */
static int wait_for_outbox(struct rblock_shards *c, const struct config *cfg, int64_t *flags_set)
{
    struct outbox_tick t = {c, cfg, flags_set};
    return outbox_wait_fleet(c, outbox_tick, &t) ? 0 : -1;
}

/* Tell every instance's loss detection (lossmark.h) that the shards are repaired now. */
static void note_restored(struct rblock_shards *set, const struct config *cfg)
{
    char key[160];
    long long now = (long long)clock_unix_ms();
    for (int s = 0; s < cfg->redis_shards; s++) {
        rkey(key, sizeof key, cfg->redis_prefix, s, "marks");
        redisAppendCommand(rblock_shard(set, s), "HSET %s restored %lld", key, now);
    }
    if (rblock_shards_drain(set) < 0)
        log_warn("restore: could not note the repair in every shard (instances keep reporting the loss until the "
                 "next restore)");
}

static int unfence(redisContext *c, const struct config *cfg, int shard, int64_t started);

/* ---- a whole restore ---- */

struct restore_all {
    const struct app *app;
    int64_t started_ms;
    char who[STORE_WHO_MAX];
    struct restore_report rep;
    restore_done_fn done; /* NULL: restore_auto */
    void *arg;
};

/* ---- the other way: jobs Redis holds at an older version than MySQL ----
 *
 * Redis that came back from a snapshot, or a replica promoted after losing the master's last
 * writes, holds jobs as they were: a job deleted or finished since is live again, a
 * reschedule or release is undone. MySQL has every change the client was told about, each
 * with the job's version, so for every job Redis holds the newer version wins: jobscan.lua
 * reads a page of (id, version) from a shard, one primary-key lookup by IN (...) reads their
 * rows, and align.lua rewrites or removes those MySQL has newer, each only if Redis still
 * holds the version that was compared (a job that moved on meanwhile is left alone). */

struct held {
    uint64_t id;
    unsigned ver;
};

static int cmp_held(const void *a, const void *b)
{
    const struct held *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* A job to align: what Redis held and what MySQL says. */
struct newer {
    uint64_t id;
    unsigned seen_ver, mysql_ver;
    int mysql_state;
    int64_t run_at;
    unsigned attempts;
};

/* align.lua over todo[0..n) of `shard`; counts its outcomes. 0 / -1 (Redis failed). */
static int align_jobs(struct restore_all *ra, redisContext *c, int shard, const struct newer *todo, int n)
{
    const struct config *cfg = &ra->app->cfg;
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 7 + 6 * n, 2 + 5 * n, n) == 0) {
        rargv_key(&b, cfg->redis_prefix, shard, "jobs");
        rargv_int(&b, clock_unix_ms());
        rargv_str(&b, ra->who, strlen(ra->who));
        rargv_int(&b, n);
        for (int i = 0; i < n; i++) {
            rargv_id(&b, todo[i].id);
            rargv_int(&b, todo[i].seen_ver);
            rargv_int(&b, todo[i].mysql_state);
            rargv_int(&b, todo[i].mysql_ver);
            rargv_int(&b, todo[i].run_at);
            rargv_int(&b, todo[i].attempts);
        }
        rc = rblock_append_eval(c, SCRIPT_ALIGN, b.argc, b.argv, b.lens);
    }
    rargv_free(&b);
    redisReply *reply = rc == 0 ? rblock_reply(c) : NULL;
    if (!rreply_is_array(reply, 0)) {
        log_warn("restore: align.lua failed: %s", reply && reply->str ? reply->str : c->errstr);
        if (reply)
            freeReplyObject(reply);
        return -1;
    }
    for (size_t i = 0; i < reply->elements && i < (size_t)n; i++) {
        const redisReply *e = reply->element[i];
        if (rreply_is(e, 0, "removed")) {
            ra->rep.removed++;
        } else if (rreply_is(e, 0, "aligned") && e->elements >= 2) {
            ra->rep.aligned++;
            if (todo[i].mysql_state != JS_DEAD)
                metrics_transition(todo[i].mysql_state, (int)rreply_int(e, 1), 1);
        }
    }
    freeReplyObject(reply);
    return 0;
}

/* Compare one page of a shard's jobs (held[0..n)) with their MySQL rows; align those MySQL
 * has newer. 0 / -1 (ra->rep.unavailable says which side failed). */
static int align_page(struct restore_all *ra, MYSQL *db, redisContext *c, int shard, struct held *held, int n)
{
    qsort(held, (size_t)n, sizeof *held, cmp_held);
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT id, state, version, run_at, attempts FROM message WHERE id IN (");
    for (int i = 0; i < n; i++) {
        if (i)
            sb_putc(&sql, ',');
        sb_json_uint(&sql, held[i].id);
    }
    sb_putc(&sql, ')');
    if (sql.oom || mysql_real_query(db, sql.data, (unsigned long)sql.len) != 0) {
        log_warn("restore: %s", sql.oom ? "out of memory" : mysql_error(db));
        sb_free(&sql);
        ra->rep.unavailable = "MySQL";
        return -1;
    }
    sb_free(&sql);
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL) {
        ra->rep.unavailable = "MySQL";
        return -1;
    }
    struct newer *todo = calloc((size_t)n, sizeof *todo);
    int k = 0, rc = 0;
    if (todo == NULL) {
        ra->rep.unavailable = "memory";
        rc = -1;
    }
    MYSQL_ROW m;
    while (rc == 0 && (m = mysql_fetch_row(res)) != NULL) {
        struct held key = {.id = strtoull(m[0], NULL, 10)};
        const struct held *h = bsearch(&key, held, (size_t)n, sizeof *held, cmp_held);
        unsigned ver = (unsigned)strtoul(m[2], NULL, 10);
        int state = job_state_parse(m[1]);
        /* Redis as new as MySQL or newer: the journal lags behind it. But the same version with
         * an end in MySQL is two histories, not one: a job ends by leaving Redis, so Redis
         * holding it at the version MySQL ended it at means Redis was rolled back and a move
         * made after the rollback reached the version of the end (align.lua); the end wins. */
        if (h == NULL || ver < h->ver || (ver == h->ver && !job_state_ended(state)))
            continue;
        todo[k++] =
            (struct newer){h->id, h->ver, ver, state, strtoll(m[3], NULL, 10), (unsigned)strtoul(m[4], NULL, 10)};
    }
    mysql_free_result(res);
    if (rc == 0 && k > 0 && align_jobs(ra, c, shard, todo, k) < 0) {
        ra->rep.unavailable = "Redis";
        rc = -1;
    }
    free(todo);
    return rc;
}

#define ALIGN_PAGE 1000

/* The jobs of shards [first, last), a page at a time. flags_set: the restoring flags to renew
 * meanwhile (NULL: none are up, as in a fence check). */
static void align_shards(struct restore_all *ra, MYSQL *db, struct rblock_shards *set, int first, int last,
                         int64_t *flags_set)
{
    const struct config *cfg = &ra->app->cfg;
    struct held *held = NULL;
    size_t cap = 0;
    for (int shard = first; shard < last && !ra->rep.unavailable; shard++) {
        char cursor[32] = "0";
        redisContext *c = rblock_shard(set, shard);
        do {
            if (flags_set != NULL && renew_flags(set, cfg, flags_set) < 0) {
                ra->rep.unavailable = "Redis";
                break;
            }
            struct rargv b;
            redisReply *reply = NULL;
            if (rargv_init(&b, 6, 1, 0) == 0) {
                rargv_key(&b, cfg->redis_prefix, shard, "jobs");
                rargv_str(&b, cursor, strlen(cursor));
                rargv_int(&b, ALIGN_PAGE);
                if (rblock_append_eval(c, SCRIPT_JOBSCAN, b.argc, b.argv, b.lens) == 0)
                    reply = rblock_shard_reply(c);
            }
            rargv_free(&b);
            size_t clen = 0;
            const char *next = rreply_is_array(reply, 2) ? rreply_str(reply, 0, &clen) : NULL;
            const redisReply *list = next ? reply->element[1] : NULL;
            if (next == NULL || clen >= sizeof cursor || list->type != REDIS_REPLY_ARRAY) {
                log_warn("restore: jobscan.lua failed: %s", reply && reply->str ? reply->str : c->errstr);
                if (reply)
                    freeReplyObject(reply);
                ra->rep.unavailable = "Redis";
                break;
            }
            memcpy(cursor, next, clen);
            cursor[clen] = '\0';
            if (list->elements / 3 > cap) { /* HSCAN's COUNT is a hint: a page can be longer */
                struct held *grown = realloc(held, list->elements / 3 * sizeof *held);
                if (grown == NULL) {
                    freeReplyObject(reply);
                    ra->rep.unavailable = "memory";
                    break;
                }
                held = grown;
                cap = list->elements / 3;
            }
            int n = 0;
            for (size_t i = 0; i + 2 < list->elements; i += 3) {
                uint64_t id;
                size_t klen;
                const char *key = rreply_str(list, i, &klen);
                if (key == NULL || id_from_key(key, klen, &id) < 0)
                    continue;
                held[n++] = (struct held){id, (unsigned)rreply_int(list, i + 1)};
            }
            freeReplyObject(reply);
            ra->rep.checked += n;
            if (n > 0 && align_page(ra, db, c, shard, held, n) < 0)
                break;
        } while (strcmp(cursor, "0") != 0);
    }
    free(held);
}

/* One page of one state. Returns rows read (0 = done), or -1 on failure. */
static int restore_page(struct restore_all *ra, MYSQL *db, struct rblock_shards *set, const char *state,
                        uint64_t *after)
{
    const struct config *cfg = &ra->app->cfg;
    char sql[384];
    /* FORCE INDEX: MariaDB 10.11 otherwise looks rows up on `state` alone and filters id one
     * entry at a time, so every page walked the index from its start (a 1M-row restore took
     * 48 s; a range scan makes each page ~6 ms whatever its position) */
    snprintf(sql, sizeof sql,
             "SELECT %s FROM message FORCE INDEX (idx_state_id) WHERE state = '%s' AND id > %llu ORDER BY id LIMIT %d",
             MROW_COLUMNS, state, (unsigned long long)*after, PAGE_ROWS);
    if (mysql_query(db, sql) != 0) {
        log_warn("restore: %s", mysql_error(db));
        ra->rep.unavailable = "MySQL";
        return -1;
    }
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL) {
        ra->rep.unavailable = "MySQL";
        return -1;
    }
    int n = (int)mysql_num_rows(res);
    struct mrow *rows = calloc((size_t)(n ? n : 1), sizeof *rows);
    struct mrow **by_shard = calloc((size_t)(n ? n : 1), sizeof *by_shard);
    int *shard_of = calloc((size_t)(n ? n : 1), sizeof *shard_of);
    int rc = n;
    if (!rows || !by_shard || !shard_of) {
        rc = -1;
        ra->rep.unavailable = "memory";
        goto out;
    }
    int64_t now = clock_unix_ms();
    int take = 0;
    for (int i = 0; i < n; i++) {
        MYSQL_ROW m = mysql_fetch_row(res);
        reinsert_row_read(m, mysql_fetch_lengths(res), &rows[i]);
        *after = rows[i].id;
        ra->rep.scanned++;
        shard_of[i] = -1;
        int s = id_shard(rows[i].id, cfg->redis_shards);
        if (s != id_topic_shard(rows[i].topic, rows[i].topic_len, cfg->redis_shards)) {
            ra->rep.misplaced++; /* written under another [redis] shards value: cannot be placed */
            continue;
        }
        shard_of[i] = s;
        take++;
    }
    if (take == 0)
        goto out;

    /* One restore.lua call per shard, pipelined; replies come back in the same order. */
    int calls = 0;
    int order[256]; /* shard of each call */
    for (int s = 0; s < cfg->redis_shards; s++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (shard_of[i] == s)
                by_shard[k++] = &rows[i];
        if (k == 0)
            continue;
        if (reinsert_append(rblock_shard(set, s), cfg, s, by_shard, k, now, ra->rep.expire, 1, ra->who) < 0) {
            rc = -1;
            ra->rep.unavailable = "memory";
            goto out;
        }
        order[calls++] = s;
    }
    for (int call = 0; call < calls; call++) { /* in the order each shard's connection got them */
        redisReply *reply = rblock_shard_reply(rblock_shard(set, order[call]));
        if (reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
            log_warn("restore: Redis failed: %s", reply && reply->str ? reply->str : rblock_shards_errstr(set));
            if (reply)
                freeReplyObject(reply);
            ra->rep.unavailable = "Redis";
            rc = -1;
            goto out;
        }
        int s = order[call], k = 0;
        for (int i = 0; i < n && (size_t)k < reply->elements; i++) {
            if (shard_of[i] != s)
                continue;
            int to = 0;
            unsigned ver = 0;
            switch (reinsert_outcome(reply->element[k++], &to, &ver)) {
            case OUT_RESTORED:
                ra->rep.restored++;
                count_restored(&rows[i], to);
                break;
            case OUT_PRESENT:
                ra->rep.present++;
                break;
            case OUT_GONE:
                ra->rep.gone++;
                break;
            case OUT_BIZHELD:
                ra->rep.biz_held++;
                break;
            case OUT_EXPIRED:
                ra->rep.expired_skipped++;
                break;
            case OUT_FAILED:
                break;
            }
        }
        freeReplyObject(reply);
    }
out:
    free(rows);
    free(by_shard);
    free(shard_of);
    mysql_free_result(res);
    return rc;
}

/* The bizKeys of far jobs (MySQL alone holds those jobs: they are not restored, the pager
 * brings them in time) go back into the topics' bizKey hashes, so dedupe holds across the
 * tiers after a Redis loss. far_biz a page at a time in id order, one farbiz.lua per shard. */
static void restore_far_biz(struct restore_all *ra, MYSQL *db, struct rblock_shards *set)
{
    const struct config *cfg = &ra->app->cfg;
    uint64_t after = 0;
    for (;;) {
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT id, topic, biz_key, run_at FROM far_biz WHERE id > %llu ORDER BY id LIMIT %d",
                 (unsigned long long)after, PAGE_ROWS);
        if (mysql_query(db, sql) != 0) {
            ra->rep.unavailable = "MySQL";
            return;
        }
        MYSQL_RES *res = mysql_store_result(db);
        if (res == NULL) {
            ra->rep.unavailable = "MySQL";
            return;
        }
        int n = (int)mysql_num_rows(res);
        MYSQL_ROW *rows = calloc((size_t)(n ? n : 1), sizeof *rows);
        int calls = 0;
        int order[256]; /* shard of each call */
        if (rows == NULL) {
            ra->rep.unavailable = "memory";
            mysql_free_result(res);
            return;
        }
        for (int i = 0; i < n; i++)
            rows[i] = mysql_fetch_row(res);
        for (int s = 0; s < cfg->redis_shards && n > 0; s++) {
            struct rargv b;
            int k = 0;
            for (int i = 0; i < n; i++)
                k += id_shard(strtoull(rows[i][0], NULL, 10), cfg->redis_shards) == s;
            if (k == 0)
                continue;
            if (rargv_init(&b, 5 + 4 * k, 1, k) < 0) {
                rargv_free(&b);
                ra->rep.unavailable = "memory";
                break;
            }
            rargv_key(&b, cfg->redis_prefix, s, "jobs");
            rargv_int(&b, k);
            for (int i = 0; i < n; i++) {
                uint64_t id = strtoull(rows[i][0], NULL, 10);
                if (id_shard(id, cfg->redis_shards) != s)
                    continue;
                rargv_id(&b, id);
                rargv_str(&b, rows[i][1], strlen(rows[i][1]));
                rargv_str(&b, rows[i][2], strlen(rows[i][2]));
                rargv_str(&b, rows[i][3], strlen(rows[i][3]));
            }
            int rc = rblock_append_eval(rblock_shard(set, s), SCRIPT_FARBIZ, b.argc, b.argv, b.lens);
            rargv_free(&b);
            if (rc < 0) {
                ra->rep.unavailable = "memory";
                break;
            }
            order[calls++] = s;
        }
        for (int i = 0; i < calls; i++) {
            redisReply *r = rblock_shard_reply(rblock_shard(set, order[i]));
            if (r == NULL || r->type != REDIS_REPLY_INTEGER)
                ra->rep.unavailable = "Redis";
            else
                ra->rep.far_biz += (long)r->integer;
            if (r)
                freeReplyObject(r);
        }
        if (n > 0)
            after = strtoull(rows[n - 1][0], NULL, 10);
        free(rows);
        mysql_free_result(res);
        if (n < PAGE_ROWS || ra->rep.unavailable)
            return;
    }
}

static void restore_all_run(MYSQL *db, void *arg)
{
    struct restore_all *ra = arg;
    const struct config *cfg = &ra->app->cfg;
    for (int waited = 0; atomic_load(&fence_check_running) && waited < 30000 && !dbtask_stopping(); waited += 10)
        usleep(10000); /* a fence check in progress ends first (they never overlap) */
    if (db == NULL) {
        ra->rep.unavailable = "MySQL";
        return;
    }
    char err[256];
    struct rblock_shards *c = layout_open_shards(cfg, 1, NULL, err, sizeof err);
    if (c == NULL) {
        log_warn("restore: cannot connect to Redis: %s", err);
        ra->rep.unavailable = "Redis";
        return;
    }
    if (set_restoring(c, cfg, 1) < 0) {
        ra->rep.unavailable = "Redis";
        rblock_shards_free(c);
        return;
    }
    /* In-doubt outcomes first: a push answered 503 whose row committed must not come back. */
    if (doubt_settle(db, cfg, 1) < 0) {
        ra->rep.unavailable = "MySQL or Redis (settling outcomes in doubt)";
        set_restoring(c, cfg, 0);
        rblock_shards_free(c);
        return;
    }
    int64_t flags_set = clock_mono_ms();
    if (wait_for_outbox(c, cfg, &flags_set) < 0) {
        ra->rep.unavailable = "the journal (the outbox could not catch up: MySQL or Redis down)";
        set_restoring(c, cfg, 0);
        rblock_shards_free(c);
        return;
    }
    /* One snapshot for the whole scan, taken after the flags are up: every live row is seen
     * in exactly one state, even while the journal moves rows between states (a row moving
     * to a state whose pass is already past its id would otherwise be seen by no pass).
     * Anything that ends after this point leaves a tombstone, so the snapshot's staleness
     * cannot resurrect it. */
    static const char isolation[] = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ";
    static const char snapshot[] = "START TRANSACTION WITH CONSISTENT SNAPSHOT";
    if (db_exec(db, isolation, sizeof isolation - 1) < 0 || db_exec(db, snapshot, sizeof snapshot - 1) < 0) {
        ra->rep.unavailable = "MySQL";
        set_restoring(c, cfg, 0);
        rblock_shards_free(c);
        return;
    }
    /* The other way first, over what Redis held before this restore adds to it. */
    align_shards(ra, db, c, 0, cfg->redis_shards, &flags_set);
    static const char *const live[] = {"delayed", "ready", "reserved"};
    int waited = 0;
    for (int st = 0; st < 3 && !ra->rep.unavailable; st++) {
        uint64_t after = 0;
        for (;;) {
            /* back-pressure: the journal must keep up with the transitions we add */
            int renewed = 0;
            if (!waited && !journal_accepting() && !dbtask_stopping()) {
                waited = 1; /* once per restore: it may wait before every page */
                log_info("restore: waiting for the journal to take its backlog (%ld of [mysql] backlog %d); the "
                         "restoring flags are renewed meanwhile",
                         journal_backlog(), cfg->journal_backlog);
            }
            while (!journal_accepting() && !dbtask_stopping() && (renewed = renew_flags(c, cfg, &flags_set)) == 0)
                usleep(10000);
            if (dbtask_stopping()) {
                ra->rep.unavailable = "this instance (shutting down)";
                break;
            }
            if (renewed < 0 || renew_flags(c, cfg, &flags_set) < 0) {
                ra->rep.unavailable = "Redis";
                break;
            }
            int got = restore_page(ra, db, c, live[st], &after);
            if (got <= 0)
                break;
        }
    }
    if (!ra->rep.unavailable)
        restore_far_biz(ra, db, c);
    mysql_commit(db); /* end the snapshot */
    if (!ra->rep.unavailable) {
        note_restored(c, cfg);
        /* every shard was checked both ways: a fence raised before this restore began goes */
        for (int s = 0; s < cfg->redis_shards; s++)
            if (unfence(rblock_shard(c, s), cfg, s, ra->started_ms) < 0)
                log_warn("restore: could not lift shard %d's fence; its fence check will", s);
    }
    set_restoring(c, cfg, 0);
    rblock_shards_free(c);
    const struct restore_report *rep = &ra->rep;
    metrics_inc(MC_RESTORED, (uint64_t)rep->restored);
    log_info("restore: scanned %ld, restored %ld, present %ld, expiredSkipped %ld, gone %ld, bizHeld %ld; Redis held "
             "%ld, aligned %ld, removed %ld (MySQL newer) in %lld ms",
             rep->scanned, rep->restored, rep->present, rep->expired_skipped, rep->gone, rep->biz_held, rep->checked,
             rep->aligned, rep->removed, (long long)(clock_unix_ms() - ra->started_ms));
}

static void restore_all_done(void *arg)
{
    struct restore_all *ra = arg;
    atomic_store(&restore_running, 0);
    ra->rep.ms = clock_unix_ms() - ra->started_ms;
    ra->done(&ra->rep, ra->arg);
    free(ra);
}

/* Claim this instance's one whole restore and make its state; NULL (*why says which) when a
 * restore runs already or memory is short. */
static struct restore_all *restore_all_new(const struct app *app, int expire, const char *thread, const char *host,
                                           enum restore_submitted *why)
{
    int idle = 0;
    if (!atomic_compare_exchange_strong(&restore_running, &idle, 1)) {
        *why = RESTORE_BUSY;
        return NULL;
    }
    struct restore_all *ra = calloc(1, sizeof *ra);
    if (ra == NULL) {
        atomic_store(&restore_running, 0);
        *why = RESTORE_NO_MEMORY;
        return NULL;
    }
    ra->app = app;
    ra->rep.expire = expire;
    ra->started_ms = clock_unix_ms();
    store_who(ra->who, sizeof ra->who, app->instance, thread, host);
    return ra;
}

enum restore_submitted restore_submit(const struct app *app, int expire, const char *client, struct loopq *reply_to,
                                      restore_done_fn done, void *arg)
{
    enum restore_submitted why = RESTORE_SUBMITTED;
    struct restore_all *ra = restore_all_new(app, expire, "restore", client, &why);
    if (ra == NULL)
        return why;
    ra->done = done;
    ra->arg = arg;
    log_info("restore: started by %s (expire=%s)", client, expire ? "true" : "false");
    if (dbtask_submit(restore_all_run, restore_all_done, reply_to, ra) < 0) {
        atomic_store(&restore_running, 0);
        free(ra);
        return RESTORE_NO_QUEUE;
    }
    return RESTORE_SUBMITTED;
}

/* ---- the same without a request ([redis] auto_restore) ---- */

#define AUTO_LOCK_MS 600000 /* held while it runs; a crashed holder's lock lapses */

static void restore_auto_run(MYSQL *db, void *arg)
{
    struct restore_all *ra = arg;
    const struct config *cfg = &ra->app->cfg;
    char err[256], key[160];
    rkey(key, sizeof key, cfg->redis_prefix, 0, "autorestore");
    redisContext *c = rblock_connect_shard(cfg, 0, 1, NULL, err, sizeof err); /* the lock is shard 0's */
    redisReply *lock = c ? redisCommand(c, "SET %s %s NX PX %d", key, ra->app->instance, AUTO_LOCK_MS) : NULL;
    int mine = lock && lock->type == REDIS_REPLY_STATUS;
    if (lock)
        freeReplyObject(lock);
    if (c == NULL || !mine) {
        log_info("auto-restore: %s", c ? "another instance is restoring" : "Redis unreachable; retried later");
    } else {
        log_info("auto-restore: Redis lost data; restoring both ways (expire=true)");
        restore_all_run(db, ra);
        redisReply *r = redisCommand(c, "DEL %s", key);
        if (r)
            freeReplyObject(r);
        if (ra->rep.unavailable) {
            log_warn("auto-restore: could not finish (%s unavailable); retried later", ra->rep.unavailable);
            dutywatch_failed(DUTY_RESTORE, -1, "auto-restore could not finish");
        } else {
            dutywatch_ok(DUTY_RESTORE, -1);
        }
    }
    if (c)
        redisFree(c);
    atomic_store(&restore_running, 0);
    free(ra);
}

void restore_auto(const struct app *app)
{
    enum restore_submitted why;
    struct restore_all *ra = restore_all_new(app, 1, "auto-restore", app->hostname, &why);
    if (ra == NULL)
        return; /* busy: the restore running here repairs it */
    if (dbtask_submit(restore_auto_run, NULL, NULL, ra) < 0) {
        atomic_store(&restore_running, 0);
        free(ra);
    }
}

/* ---- a rolled-back shard's fence check ---- */

struct fence_check {
    struct restore_all ra; /* for its counts, its actor and align_shards */
    int shard;
};

/* Lift the shard's fence if it is no newer than `started` (unfence.lua). 1 lifted, 0 a newer
 * one stays, -1 Redis failed. */
static int unfence(redisContext *c, const struct config *cfg, int shard, int64_t started)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 5, 1, 0) == 0) {
        rargv_key(&b, cfg->redis_prefix, shard, "jobs");
        rargv_int(&b, started);
        rc = rblock_append_eval(c, SCRIPT_UNFENCE, b.argc, b.argv, b.lens);
    }
    rargv_free(&b);
    redisReply *r = rc == 0 ? rblock_shard_reply(c) : NULL;
    rc = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (r)
        freeReplyObject(r);
    return rc;
}

static void fence_check_run(MYSQL *db, void *arg)
{
    struct fence_check *fc = arg;
    struct restore_all *ra = &fc->ra;
    const struct config *cfg = &ra->app->cfg;
    char err[256];
    struct rblock_shards *set = db ? layout_open_shards(cfg, 1, NULL, err, sizeof err) : NULL;
    if (set == NULL) {
        log_warn("redis: shard %d: fence check: %s unavailable; tried again shortly", fc->shard,
                 db ? "Redis" : "MySQL");
        dutywatch_failed(DUTY_RESTORE, -1, db ? "fence check: Redis unavailable" : "fence check: MySQL unavailable");
    } else {
        /* The shard moves and delivers nothing meanwhile (mark.lua), so what it holds is what
         * the rollback left, plus what was pushed to it since; MySQL's rows are read fresh. */
        align_shards(ra, db, set, fc->shard, fc->shard + 1, NULL);
        int lifted = ra->rep.unavailable ? -1 : unfence(rblock_shard(set, fc->shard), cfg, fc->shard, ra->started_ms);
        if (lifted < 0) {
            dutywatch_failed(DUTY_RESTORE, -1, "fence check: Redis or MySQL failed");
            log_warn("redis: shard %d: fence check could not finish (%s unavailable); tried again shortly", fc->shard,
                     ra->rep.unavailable ? ra->rep.unavailable : "Redis");
        } else {
            dutywatch_ok(DUTY_RESTORE, -1);
            log_info("redis: shard %d: fence check: Redis held %ld jobs, aligned %ld, removed %ld (MySQL newer); %s",
                     fc->shard, ra->rep.checked, ra->rep.aligned, ra->rep.removed,
                     lifted ? "the shard moves and delivers again" : "rolled back again meanwhile: checked again");
        }
        rblock_shards_free(set);
    }
    free(fc);
    atomic_store(&fence_check_running, 0);
}

void restore_fence_check(const struct app *app, int shard)
{
    /* One at a time, never beside a whole restore (which does the same and lifts the fences
     * itself): the keeper asks again each second while a shard is fenced. */
    int idle = 0;
    if (shard < 0 || shard >= app->cfg.redis_shards || atomic_load(&restore_running) ||
        !atomic_compare_exchange_strong(&fence_check_running, &idle, 1))
        return;
    if (atomic_load(&restore_running)) { /* a restore began meanwhile: it does the work */
        atomic_store(&fence_check_running, 0);
        return;
    }
    struct fence_check *fc = calloc(1, sizeof *fc);
    if (fc != NULL) {
        fc->ra.app = app;
        fc->ra.started_ms = clock_unix_ms();
        fc->shard = shard;
        store_who(fc->ra.who, sizeof fc->ra.who, app->instance, "fence-check", app->hostname);
    }
    if (fc == NULL || dbtask_submit(fence_check_run, NULL, NULL, fc) < 0) {
        free(fc);
        atomic_store(&fence_check_running, 0);
    }
}

/* ---- one job ---- */

struct restore_job {
    const struct app *app;
    int force;
    char who[STORE_WHO_MAX];
    struct restore_job_report rep;
    restore_job_done_fn done;
    void *arg;
};

/* Run one script on the job's shard and return its reply (caller frees). `who` NULL: the
 * script takes only the id (inspect); otherwise ARGV = id, now, who (requeue). */
static redisReply *eval_one(redisContext *c, const struct config *cfg, enum script_id script, uint64_t id, int64_t now,
                            const char *who)
{
    struct rargv b;
    int rc = rargv_init(&b, 7, 1, 1);
    if (rc == 0) {
        rargv_key(&b, cfg->redis_prefix, id_shard(id, cfg->redis_shards), "jobs");
        rargv_id(&b, id);
        if (who) {
            rargv_int(&b, now);
            rargv_str(&b, who, strlen(who));
        }
        rc = rblock_append_eval(c, script, b.argc, b.argv, b.lens);
    }
    rargv_free(&b);
    return rc == 0 ? rblock_reply(c) : NULL;
}

static void restore_job_run(MYSQL *db, void *arg)
{
    struct restore_job *rj = arg;
    struct restore_job_report *rep = &rj->rep;
    const struct config *cfg = &rj->app->cfg;
    rep->outcome = RESTORE_JOB_UNAVAILABLE;
    snprintf(rep->message, sizeof rep->message, "MySQL");
    if (db == NULL)
        return;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM message WHERE id = %llu", MROW_COLUMNS, (unsigned long long)rep->id);
    if (mysql_query(db, sql) != 0)
        return;
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL)
        return;
    MYSQL_ROW m = mysql_fetch_row(res);
    struct mrow row;
    memset(&row, 0, sizeof row);
    if (m)
        reinsert_row_read(m, mysql_fetch_lengths(res), &row);

    char err[256];
    int shard = id_shard(rep->id, cfg->redis_shards);
    redisContext *c = rblock_connect_shard(cfg, shard, 1, NULL, err, sizeof err);
    snprintf(rep->message, sizeof rep->message, "Redis");
    if (c == NULL)
        goto out;
    int64_t now = clock_unix_ms();
    redisReply *view = eval_one(c, cfg, SCRIPT_INSPECT, rep->id, now, NULL);
    if (view == NULL || view->type != REDIS_REPLY_ARRAY)
        goto out_reply;

    if (view->elements > 0) {
        /* Redis holds it: only a dead job has anything to restore (a requeue). */
        rep->state = (int)rreply_int(view, 0);
        if (rep->state != JS_DEAD) {
            rep->outcome = RESTORE_JOB_DONE;
            goto out_reply;
        }
        redisReply *rq = eval_one(c, cfg, SCRIPT_REQUEUE, rep->id, now, rj->who);
        if (rreply_is_array(rq, 2) && rreply_is(rq, 0, "ok")) {
            rep->outcome = RESTORE_JOB_DONE;
            rep->restored = 1;
            rep->state = JS_READY;
            row.state = JS_DEAD;
            row.attempts = 0;
            if (m)
                count_restored(&row, JS_READY);
        } else if (rreply_is_array(rq, 1) && rreply_is(rq, 0, "bizheld")) {
            rep->outcome = RESTORE_JOB_REFUSED;
            snprintf(rep->message, sizeof rep->message, "another live job holds this job's bizKey");
        }
        if (rq)
            freeReplyObject(rq);
        goto out_reply;
    }

    /* Redis lacks it: MySQL decides. */
    if (m == NULL) {
        rep->outcome = RESTORE_JOB_NOT_FOUND;
        snprintf(rep->message, sizeof rep->message, "no job with this id in MySQL");
        goto out_reply;
    }
    if (row.state == JS_FAR) {
        /* MySQL alone holds it, by design: the pager brings it in before it is due (only the
         * pager may, since its rows' far keys must go with it) */
        rep->outcome = RESTORE_JOB_REFUSED;
        snprintf(rep->message, sizeof rep->message,
                 "the job is due beyond [queue] horizon and kept in MySQL; it is paged into Redis before it is due");
        goto out_reply;
    }
    int live = row.state == JS_DELAYED || row.state == JS_READY || row.state == JS_RESERVED;
    if (!live && row.state != JS_DEAD && !rj->force) {
        rep->outcome = RESTORE_JOB_REFUSED;
        snprintf(rep->message, sizeof rep->message, "the job is %s; add force=true to run it again",
                 job_state_name(row.state));
        goto out_reply;
    }
    struct mrow put = row;
    if (!live) {
        put.attempts = 0; /* a dead or ended job starts over */
        put.run_at = now;
    }
    struct mrow *one = &put;
    redisReply *rr = NULL;
    if (reinsert_append(c, cfg, shard, &one, 1, now, 1, 1, rj->who) == 0)
        rr = rblock_reply(c);
    int to = 0;
    unsigned ver = 0;
    enum reinsert_outcome out = (rr && rr->type == REDIS_REPLY_ARRAY && rr->elements == 1)
                                    ? reinsert_outcome(rr->element[0], &to, &ver)
                                    : OUT_FAILED;
    if (rr)
        freeReplyObject(rr);
    switch (out) {
    case OUT_RESTORED:
        rep->outcome = RESTORE_JOB_DONE;
        rep->restored = 1;
        rep->state = to;
        count_restored(&put, to);
        metrics_inc(MC_RESTORED, 1);
        break;
    case OUT_PRESENT:
        rep->outcome = RESTORE_JOB_DONE;
        rep->state = row.state;
        break;
    case OUT_BIZHELD:
        rep->outcome = RESTORE_JOB_REFUSED;
        snprintf(rep->message, sizeof rep->message, "another live job holds this job's bizKey");
        break;
    case OUT_GONE:
        rep->outcome = RESTORE_JOB_REFUSED;
        snprintf(rep->message, sizeof rep->message, "the job ended while a restore was running");
        break;
    case OUT_EXPIRED:
    case OUT_FAILED:
        break;
    }
out_reply:
    if (view)
        freeReplyObject(view);
    redisFree(c);
out:
    mysql_free_result(res);
    mysql_commit(db);
}

static void restore_job_done(void *arg)
{
    struct restore_job *rj = arg;
    rj->done(&rj->rep, rj->arg);
    free(rj);
}

enum restore_submitted restore_job_submit(const struct app *app, uint64_t id, int force, const char *client,
                                          struct loopq *reply_to, restore_job_done_fn done, void *arg)
{
    struct restore_job *rj = calloc(1, sizeof *rj);
    if (rj == NULL)
        return RESTORE_NO_MEMORY;
    rj->app = app;
    rj->rep.id = id;
    rj->force = force;
    rj->done = done;
    rj->arg = arg;
    store_who(rj->who, sizeof rj->who, app->instance, "restore", client);
    if (dbtask_submit(restore_job_run, restore_job_done, reply_to, rj) < 0) {
        free(rj);
        return RESTORE_NO_QUEUE;
    }
    return RESTORE_SUBMITTED;
}
