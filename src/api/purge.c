/* purge.c — POST /topics/{topic}/purge (purge.h says what it promises).
 *
 * The request is checked on its worker, then the whole purge runs on a MySQL pool thread, as
 * /reStore does: a purge of 100,000 jobs takes a while, and the loop must go on serving. The
 * thread has the pool's MySQL connection (the far tier) and a blocking Redis connection of its
 * own (rblock.h), and each round walks:
 *
 *   far jobs (delayed, MySQL tier) — the far keys of the topic's shard (message.idx_far), a
 *     page of keys at a time, kept to the topic's rows still 'far'; per batch one transaction
 *     that locks those message rows first (the order every writer of the far tables keeps),
 *     writes their far → deleted transitions, clears their far keys, deletes their far_biz
 *     rows and takes them from the count; then
 *     fardelete.lua per job: a job the pager paged in meanwhile is deleted in Redis too, and
 *     one it is about to page in is tombstoned, exactly as a by-id far delete (architecture.md,
 *     "Tiers"). Far jobs go first: one the pager takes into Redis during the purge is then
 *     met by the walk of the delay zset that follows;
 *   the delay zset, the ready zset, the dead zset — purge.lua from a position, batch by batch.
 *
 * Every job purged in Redis left its `deleted` transition in the shard's outbox; the purge waits
 * for the journal when it falls behind (journal_accepting) and, at the end, for the outbox to
 * be carried (outbox_barrier), then answers the total. */
#include "api/purge.h"
#include "api/handlers.h"
#include "api/api_util.h"
#include "mysql/db.h"
#include "mysql/dbtask.h"
#include "core/ids.h"
#include "durable/journal.h"
#include "base/log.h"
#include "core/metrics.h"
#include "durable/outbox.h"
#include "redis/rcodec.h"
#include "redis/rblock.h"
#include "core/app.h"
#include "base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PURGE_ROUNDS_MAX   20    /* a safety bound: two rounds are the rule */
#define PURGE_PACE         4     /* rest four times as long as each script call took (pace) */
#define PURGE_FAR_PAGE     1000  /* far keys read per query */
#define PURGE_JOURNAL_WAIT 30000 /* ms the journal may refuse more transitions before we give up */

unsigned purge_parse_state(const char *s, size_t len)
{
    static const struct {
        const char *name;
        unsigned mask;
    } names[] = {{"delayed", PURGE_DELAYED}, {"ready", PURGE_READY}, {"dead", PURGE_DEAD}, {"all", PURGE_ALL}};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == len && memcmp(names[i].name, s, len) == 0)
            return names[i].mask;
    return 0;
}

struct purge_task {
    struct request *r;
    const struct config *cfg;
    char topic[TOPIC_MAX + 1];
    size_t topic_len;
    int shard;
    unsigned states;
    char who[STORE_WHO_MAX];         /* for the scripts' outbox entries */
    char actor[JOBCHANGE_ACTOR_MAX]; /* for the far rows' transitions */
    char host[JOBCHANGE_HOST_MAX];
    char instance[64];
    uint64_t max_id; /* jobs above it were pushed after the purge began */
    char max_key[ID_KEY_LEN + 1];
    /* outcome */
    long long deleted;
    const char *failed; /* NULL, or what failed: "MySQL", "Redis", "journal", "shutdown" */
};

static int stop_waiting(int second, void *arg)
{
    (void)second;
    (void)arg;
    return dbtask_stopping();
}

/* Back-pressure: wait while the journal refuses more transitions. 0, or -1 (t->failed set). */
static int wait_journal(struct purge_task *t)
{
    int64_t until = clock_unix_ms() + PURGE_JOURNAL_WAIT;
    while (!journal_accepting()) {
        if (dbtask_stopping()) {
            t->failed = "shutdown";
            return -1;
        }
        if (clock_unix_ms() > until) {
            t->failed = "journal";
            return -1;
        }
        usleep(20000);
    }
    return 0;
}

/* Rest PURGE_PACE times `cost_us` (at most 0.1 s). */
static void rest_after(int64_t cost_us)
{
    int64_t rest = cost_us * PURGE_PACE;
    if (rest > 0)
        usleep((useconds_t)(rest < 100000 ? rest : 100000));
}

/* After a batch: rest PURGE_PACE times as long as the batch cost the shared pipeline, so the
 * purge keeps about 1 / (1 + PURGE_PACE) of it. Redis runs one script at a time, and back to
 * back a purge's calls make every other client's command wait behind one most of the time
 * (figure 14 of make bench measured the lateness p99 of other topics at 2.6x while a purge ran
 * flat out). But a deleted job costs the journal more than it costs Redis (the outbox carries
 * its `deleted` transition, MySQL writes it), so the cost counted is the script call's time
 * plus the time until the journal has the batch's transitions (outbox_wait): paced by the
 * script alone, a purge on a fast Redis ran at ~9,000 jobs/s and took the journal's and the
 * cores' time from everyone else (figure 14: 1.3-2.2x). -1 on shutdown or when the journal
 * could not be reached (t->failed set). */
static int pace(struct purge_task *t, int64_t took_us, long long deleted)
{
    int64_t journaled_us = 0;
    if (deleted > 0) {
        int64_t since = clock_mono_us();
        if (!outbox_wait(stop_waiting, NULL)) {
            t->failed = dbtask_stopping() ? "shutdown" : "journal";
            return -1;
        }
        journaled_us = clock_mono_us() - since;
    }
    rest_after(took_us + journaled_us);
    return 0;
}

/* ---- near jobs: one state's index, purge.lua batch by batch ---- */

static int purge_near(struct purge_task *t, redisContext *c, int state, long long *deleted)
{
    char score[32] = "", idkey[ID_KEY_LEN + 1] = "";
    for (;;) {
        if (wait_journal(t) < 0)
            return -1;
        struct rargv b;
        int rc = rargv_init(&b, 14, 5, 0);
        if (rc == 0) {
            rargv_key(&b, t->cfg->redis_prefix, t->shard, "jobs");
            rargv_str(&b, t->topic, t->topic_len);
            rargv_int(&b, state);
            rargv_str(&b, score, strlen(score));
            rargv_str(&b, idkey, strlen(idkey));
            rargv_int(&b, PURGE_BATCH);
            rargv_int(&b, PURGE_SCAN);
            rargv_str(&b, t->max_key, strlen(t->max_key));
            rargv_int(&b, clock_unix_ms());
            rargv_str(&b, t->who, strlen(t->who));
            rc = rblock_append_eval(c, SCRIPT_PURGE, b.argc, b.argv, b.lens);
        }
        rargv_free(&b);
        int64_t sent_us = clock_mono_us();
        redisReply *reply = rc == 0 ? rblock_reply(c) : NULL;
        int64_t took_us = clock_mono_us() - sent_us;
        size_t slen = 0, klen = 0;
        const char *s = rreply_is_array(reply, 3) ? rreply_str(reply, 0, &slen) : NULL;
        const char *k = s ? rreply_str(reply, 1, &klen) : NULL;
        if (s == NULL || k == NULL || slen >= sizeof score || klen >= sizeof idkey) {
            log_error("purge: topic %s: purge.lua failed: %s", t->topic,
                      reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "no answer");
            if (reply)
                freeReplyObject(reply);
            t->failed = "Redis";
            return -1;
        }
        long long n = rreply_int(reply, 2);
        memcpy(score, s, slen);
        score[slen] = '\0';
        memcpy(idkey, k, klen);
        idkey[klen] = '\0';
        freeReplyObject(reply);
        if (n > 0) {
            *deleted += n;
            metrics_transition(state, JS_DELETED, (int)n);
        }
        if (slen == 0) /* the index was walked to its end */
            return 0;
        if (dbtask_stopping()) {
            t->failed = "shutdown";
            return -1;
        }
        if (pace(t, took_us, n) < 0)
            return -1;
    }
}

/* ---- far jobs (MySQL tier) ---- */

struct far_row {
    uint64_t id;
    char biz[4 * BIZKEY_MAX + 1];
};

/* Run `sql` and return its result (caller frees), NULL on failure (logged). */
static MYSQL_RES *query(MYSQL *db, const struct sbuf *sql)
{
    if (sql->oom || mysql_real_query(db, sql->data, sql->len) != 0) {
        log_error("purge: MySQL: %s", sql->oom ? "out of memory" : mysql_error(db));
        return NULL;
    }
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL)
        log_error("purge: MySQL: %s", mysql_error(db));
    return res;
}

static void put_ids(struct sbuf *sb, const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_putc(sb, ',');
        sb_json_uint(sb, ids[i]);
    }
}

/* One statement of the delete transaction; 0 / -1. */
static int exec(MYSQL *db, struct sbuf *q)
{
    int rc = q->oom ? -1 : db_exec(db, q->data, q->len);
    sb_reset(q);
    return rc;
}

/* Delete cands[0..n) that are still far, in one transaction, as JC_FAR_LEAVE does one by one.
 * The rows deleted go to rows[] (with their bizKeys, for fardelete.lua). -1 on failure. */
static long far_delete_rows(struct purge_task *t, MYSQL *db, const uint64_t *cands, size_t n, struct far_row *rows)
{
    struct sbuf q = SBUF_INIT;
    long m = 0;
    /* lock the message rows first, as every writer of the far tables does */
    sb_puts(&q, "SELECT id, biz_key FROM message WHERE id IN (");
    put_ids(&q, cands, n);
    sb_puts(&q, ") AND state = 'far' FOR UPDATE");
    MYSQL_RES *res = query(db, &q);
    sb_reset(&q);
    if (res == NULL)
        goto fail;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct far_row *f = &rows[m++];
        f->id = strtoull(row[0], NULL, 10);
        snprintf(f->biz, sizeof f->biz, "%s", row[1] ? row[1] : "");
    }
    mysql_free_result(res);
    if (m == 0) {
        mysql_commit(db);
        sb_free(&q);
        return 0;
    }
    uint64_t *ids = malloc((size_t)m * sizeof *ids);
    if (ids == NULL)
        goto fail;
    for (long i = 0; i < m; i++)
        ids[i] = rows[i].id;
    int64_t now = clock_unix_ms();

    sb_puts(&q, "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") SELECT id, version + 1, 'far', 'deleted', ");
    sb_json_int(&q, now);
    sb_putc(&q, ',');
    db_quote(db, &q, t->actor, strlen(t->actor));
    sb_putc(&q, ',');
    db_quote(db, &q, t->host, strlen(t->host));
    sb_putc(&q, ',');
    db_quote(db, &q, t->instance, strlen(t->instance));
    sb_puts(&q, ", attempts FROM message WHERE id IN (");
    put_ids(&q, ids, (size_t)m);
    sb_putc(&q, ')');
    int rc = exec(db, &q);

    sb_puts(&q, "UPDATE message SET state = 'deleted', far_shard = NULL, far_run_at = NULL, version = version + 1, "
                "updated_at = ");
    sb_json_int(&q, now);
    sb_puts(&q, " WHERE state = 'far' AND id IN (");
    put_ids(&q, ids, (size_t)m);
    sb_putc(&q, ')');
    rc = rc < 0 ? rc : exec(db, &q);

    sb_puts(&q, "DELETE FROM far_biz WHERE id IN (");
    put_ids(&q, ids, (size_t)m);
    sb_putc(&q, ')');
    rc = rc < 0 ? rc : exec(db, &q);

    sb_printf(&q, "UPDATE far_count SET jobs = jobs - %ld WHERE topic = ", m);
    db_quote(db, &q, t->topic, t->topic_len);
    rc = rc < 0 ? rc : exec(db, &q);
    free(ids);
    if (rc < 0 || db_commit(db) < 0)
        goto fail;
    sb_free(&q);
    return m;
fail:
    mysql_rollback(db);
    sb_free(&q);
    return -1;
}

/* fardelete.lua for each row deleted: deleted in Redis too if the pager had paged it, else
 * tombstoned; its bizKey entry released. Pipelined. 0 / -1. */
static int far_delete_redis(struct purge_task *t, redisContext *c, const struct far_row *rows, long n)
{
    int64_t now = clock_unix_ms();
    long sent = 0;
    for (long i = 0; i < n; i++) {
        struct rargv b;
        int rc = rargv_init(&b, 10, 1, 1);
        if (rc == 0) {
            rargv_key(&b, t->cfg->redis_prefix, t->shard, "jobs");
            rargv_id(&b, rows[i].id);
            rargv_int(&b, now);
            rargv_str(&b, t->who, strlen(t->who));
            rargv_str(&b, t->topic, t->topic_len);
            rargv_str(&b, rows[i].biz, strlen(rows[i].biz));
            rc = rblock_append_eval(c, SCRIPT_FARDELETE, b.argc, b.argv, b.lens);
        }
        rargv_free(&b);
        if (rc < 0)
            break;
        sent++;
    }
    int failed = sent < n;
    for (long i = 0; i < sent; i++) {
        redisReply *reply = rblock_reply(c);
        if (reply == NULL) {
            failed = 1;
            break;
        }
        if (!rreply_is_array(reply, 1))
            failed = 1;
        freeReplyObject(reply);
    }
    if (failed) {
        log_warn("purge: topic %s: far jobs are deleted in MySQL, but Redis did not take all their tombstones; "
                 "their bizKey entries may linger until /reStore",
                 t->topic);
        t->failed = "Redis";
        return -1;
    }
    return 0;
}

static int purge_far(struct purge_task *t, MYSQL *db, redisContext *c, long long *deleted)
{
    uint64_t *cands = malloc(PURGE_FAR_PAGE * sizeof *cands);
    struct far_row *rows = malloc(PURGE_FAR_BATCH * sizeof *rows);
    int64_t after_run = -1;
    uint64_t after_id = 0;
    int rc = -1;
    if (cands == NULL || rows == NULL) {
        t->failed = "memory";
        goto out;
    }
    for (;;) {
        if (dbtask_stopping()) {
            t->failed = "shutdown";
            goto out;
        }
        /* a page of the shard's far keys, in key order (one range of idx_far), each marked
         * whether it is a candidate: this topic's, still 'far', pushed before the purge began
         * (a consistent read, no lock; far_delete_rows locks and checks again) */
        struct sbuf q = SBUF_INIT;
        sb_printf(&q,
                  "SELECT far_run_at, id, state = 'far' AND id <= %llu AND topic = ", (unsigned long long)t->max_id);
        db_quote(db, &q, t->topic, t->topic_len);
        sb_printf(&q,
                  " FROM message WHERE far_shard = %d AND (far_run_at > %lld OR (far_run_at = %lld AND id > %llu)) "
                  "ORDER BY far_run_at, id LIMIT %d",
                  t->shard, (long long)after_run, (long long)after_run, (unsigned long long)after_id, PURGE_FAR_PAGE);
        MYSQL_RES *res = query(db, &q);
        sb_free(&q);
        mysql_commit(db); /* end the read's snapshot */
        if (res == NULL) {
            t->failed = "MySQL";
            goto out;
        }
        size_t nkeys = 0;
        long ncands = 0;
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(res)) != NULL) {
            after_run = strtoll(row[0], NULL, 10);
            after_id = strtoull(row[1], NULL, 10);
            nkeys++;
            if (row[2] != NULL && row[2][0] == '1')
                cands[ncands++] = after_id;
        }
        mysql_free_result(res);
        if (nkeys == 0) {
            rc = 0;
            goto out;
        }
        for (long first = 0; first < ncands; first += PURGE_FAR_BATCH) {
            size_t n = (size_t)(ncands - first < PURGE_FAR_BATCH ? ncands - first : PURGE_FAR_BATCH);
            int64_t began_us = clock_mono_us();
            long m = far_delete_rows(t, db, cands + first, n, rows);
            if (m < 0) {
                t->failed = "MySQL";
                goto out;
            }
            if (m > 0) {
                *deleted += m;
                metrics_transition(JS_FAR, JS_DELETED, (int)m);
                if (far_delete_redis(t, c, rows, m) < 0)
                    goto out;
            }
            /* the batch's transaction wrote its transitions itself: its time is the cost */
            rest_after(clock_mono_us() - began_us);
        }
    }
out:
    free(cands);
    free(rows);
    return rc;
}

/* ---- the task ---- */

static void purge_run(MYSQL *db, void *arg)
{
    struct purge_task *t = arg;
    if (db == NULL) {
        t->failed = "MySQL";
        return;
    }
    char err[256];
    redisContext *c = rblock_connect_shard(t->cfg, t->shard, 1, NULL, err, sizeof err); /* a topic is one shard */
    if (c == NULL) {
        log_error("purge: %s", err);
        t->failed = "Redis";
        return;
    }
    static const int near_states[] = {JS_DELAYED, JS_READY, JS_DEAD};
    static const unsigned near_masks[] = {PURGE_DELAYED, PURGE_READY, PURGE_DEAD};
    int64_t started = clock_unix_ms();
    for (int round = 0; round < PURGE_ROUNDS_MAX && t->failed == NULL; round++) {
        long long before = t->deleted;
        if ((t->states & PURGE_DELAYED) && purge_far(t, db, c, &t->deleted) < 0)
            break;
        for (size_t i = 0; i < 3 && t->failed == NULL; i++)
            if (t->states & near_masks[i])
                purge_near(t, c, near_states[i], &t->deleted);
        if (t->deleted == before)
            break;
    }
    redisFree(c);
    int64_t walked = clock_unix_ms();
    if (t->failed == NULL && !outbox_wait(stop_waiting, NULL))
        t->failed = "journal";
    log_info("purge: topic %s: %lld jobs deleted in %lld ms (%lld walking the indexes, then %lld until the journal "
             "had every transition)%s%s",
             t->topic, t->deleted, (long long)(clock_unix_ms() - started), (long long)(walked - started),
             (long long)(clock_unix_ms() - walked), t->failed ? "; stopped: " : "", t->failed ? t->failed : "");
}

static void purge_done(void *arg)
{
    struct purge_task *t = arg;
    if (t->failed == NULL) {
        struct sbuf sb = SBUF_INIT;
        sb_printf(&sb, "{\"deleted\":%lld}", t->deleted);
        respond_json(t->r, 200, &sb);
        sb_free(&sb);
        return;
    }
    respond_header(t->r, "Retry-After", "1");
    respond_error(t->r, 503, "unavailable",
                  "the purge stopped (%s unavailable) after deleting %lld jobs; purge again to finish", t->failed,
                  t->deleted);
}

void api_purge(struct request *r)
{
    static const char *const allowed[] = {"state", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    const char *state = params_get(&r->params, "state");
    unsigned states = state ? purge_parse_state(state, strlen(state)) : 0;
    if (states == 0) {
        respond_error(r, 400, "bad_request", "state must be one of delayed, ready, dead, all");
        return;
    }
    if (!job_topic_valid(r->route.arg, r->route.arg_len)) {
        respond_error(r, 400, "bad_request", "topic must be 1-%d characters of [A-Za-z0-9_.:-]", TOPIC_MAX);
        return;
    }
    if (api_require_redis(r) < 0 || api_require_mysql(r) < 0)
        return;
    struct purge_task *t = api_state_new(r, sizeof *t, NULL);
    if (t == NULL)
        return;
    const struct app *app = r->ctx->app;
    t->r = r;
    t->cfg = &app->cfg;
    memcpy(t->topic, r->route.arg, r->route.arg_len);
    t->topic_len = r->route.arg_len;
    t->shard = id_topic_shard(t->topic, t->topic_len, app->cfg.redis_shards);
    t->states = states;
    store_who(t->who, sizeof t->who, app->instance, "purge", r->client);
    store_actor(t->actor, sizeof t->actor, "purge", app->cfg.redis_prefix, t->shard, "jobs");
    snprintf(t->host, sizeof t->host, "%s", r->client);
    snprintf(t->instance, sizeof t->instance, "%s", app->instance);
    /* a second of slack for the fleet's clocks: a job pushed just before on an instance whose
     * clock runs a little ahead is still purged */
    t->max_id = id_max_at(clock_unix_ms() + 1000);
    id_to_key(t->max_id, t->max_key);
    if (dbtask_submit(purge_run, purge_done, r->ctx->inbox, t) < 0)
        respond_unavailable(r, "MySQL");
}
