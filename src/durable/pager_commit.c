/* pager_commit.c — see pager_commit.h. */
#include "durable/pager_commit.h"
#include "core/app.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "mysql/db.h"
#include "core/job.h"
#include "core/jobchange.h"
#include "base/log.h"
#include "redis/layout.h"
#include "redis/rblock.h"
#include "redis/rcodec.h"
#include "base/sbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    struct app *app;
    const struct config *cfg;
    struct bgthread *bg; /* the pager's: the committers run in it */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct chunk *slot[PAGER_COMMITTERS]; /* under lock: the chunk handed to each committer */
    int committing[PAGER_COMMITTERS];     /* under lock */
    int failed;                           /* under lock: a commit failed since the last hand-off or drain */
    int closed;                           /* under lock: no chunk will come any more */
    _Atomic long long paged;
    _Atomic long long shard_paged[PAGER_MAX_SHARDS];
} commit = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* ---- step 3: the rows marked paged in one transaction ---- */

static int cmp_row_id(const void *a, const void *b)
{
    uint64_t x = (*(const struct far_row *const *)a)->m.id, y = (*(const struct far_row *const *)b)->m.id;
    return x < y ? -1 : x > y;
}

static int cmp_row_topic(const void *a, const void *b)
{
    const struct mrow *x = &(*(struct far_row *const *)a)->m, *y = &(*(struct far_row *const *)b)->m;
    return job_topic_cmp(x->topic, x->topic_len, y->topic, y->topic_len);
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

/* Step 3's lock and read: each row's current state, version and due time, and whether its far
 * key is still the one step 1 read in `shard`. */
static int lock_rows(MYSQL *db, int shard, struct far_row **byid, int n)
{
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT id, state, version, run_at, far_shard, far_run_at FROM message WHERE id IN (");
    put_ids(&sql, byid, n);
    sb_puts(&sql, ") ORDER BY id FOR UPDATE");
    MYSQL_RES *res = db_query(db, &sql);
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
    db_quote(db, sql, commit.app->hostname, strlen(commit.app->hostname));
    sb_putc(sql, ',');
    db_quote(db, sql, commit.app->instance, strlen(commit.app->instance));
    sb_printf(sql, ", attempts FROM message WHERE state = 'far' AND id IN (%.*s)", (int)ids->len, ids->data);
    int rc = exec(db, sql);
    if (rc == 0) {
        sb_printf(sql,
                  "UPDATE message SET state = %s, far_shard = NULL, far_run_at = NULL, version = version + 1, "
                  "updated_at = %lld WHERE state = 'far' AND id IN (%.*s)",
                  to_state, (long long)now, (int)ids->len, ids->data);
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
    store_actor(actor, sizeof actor, "pager", commit.cfg->redis_prefix, shard, "jobs");
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
    /* in job_topic_cmp order (job.h), the order the journal locks far_count rows in too */
    if (nleft > 1)
        qsort(left, (size_t)nleft, sizeof *left, cmp_row_topic);
    for (int i = 0, k; rc == 0 && i < nleft; i += k) {
        const struct mrow *m = &left[i]->m;
        for (k = 1; i + k < nleft &&
                    job_topic_cmp(left[i + k]->m.topic, left[i + k]->m.topic_len, m->topic, m->topic_len) == 0;)
            k++;
        sb_printf(&sql, "UPDATE far_count SET jobs = jobs - %d WHERE topic = ", k);
        db_quote(db, &sql, m->topic, m->topic_len);
        rc = exec(db, &sql);
    }
    if (rc == 0) {
        sb_printf(&sql,
                  "INSERT INTO far_mark (shard, paged_through, paged_at, paged) VALUES (%d, %lld, %lld, %d) "
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
        rargv_key(&b, commit.cfg->redis_prefix, shard, "jobs");
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

/* ---- the pipeline ---- */

void pager_chunk_free(struct chunk *ch)
{
    if (ch == NULL)
        return;
    free(ch->rows);
    if (ch->res)
        mysql_free_result(ch->res);
    free(ch);
}

int pager_conns_open(struct pager_conns *k, const struct config *cfg, struct bgthread *bg)
{
    char err[256];
    int64_t now = clock_unix_ms();
    if (k->db != NULL && db_stale(k->db)) { /* [mysql] hosts: follow the process to its node now */
        bgthread_publish(bg, 2 * k->thread, NULL, NULL);
        mysql_close(k->db);
        k->db = NULL;
    }
    if (k->db == NULL) {
        k->db = db_connect(cfg, err, sizeof err);
        /* The reader only reads: with autocommit each read is a transaction of its own and sees
         * every commit before it, without a COMMIT's round trip to end its snapshot. */
        if (k->db != NULL && k->thread == PAGER_READER && mysql_autocommit(k->db, 1) != 0) {
            snprintf(err, sizeof err, "autocommit on failed: %s", mysql_error(k->db));
            mysql_close(k->db);
            k->db = NULL;
        }
        if (k->db == NULL && now - k->last_complaint > 10000) {
            log_warn("pager: MySQL: %s", err);
            k->last_complaint = now;
        }
    }
    if (k->c == NULL && (k->c = layout_open_shards(cfg, 1, NULL, err, sizeof err)) == NULL &&
        now - k->last_complaint > 10000) {
        log_warn("pager: Redis: %s", err);
        k->last_complaint = now;
    }
    bgthread_publish(bg, 2 * k->thread, k->db, db_cut);
    bgthread_publish(bg, 2 * k->thread + 1, k->c, rblock_shards_cut);
    return k->db && k->c ? 0 : -1;
}

void pager_conns_close(struct pager_conns *k, struct bgthread *bg)
{
    bgthread_publish(bg, 2 * k->thread, NULL, NULL);
    bgthread_publish(bg, 2 * k->thread + 1, NULL, NULL);
    if (k->db)
        mysql_close(k->db);
    rblock_shards_free(k->c);
    k->db = NULL;
    k->c = NULL;
}

int pager_commit_hand_off(struct chunk *ch)
{
    int i = ch->shard % PAGER_COMMITTERS;
    pthread_mutex_lock(&commit.lock);
    while (commit.slot[i] != NULL && !commit.failed)
        pthread_cond_wait(&commit.cond, &commit.lock);
    int failed = commit.failed;
    commit.failed = 0;
    if (!failed) {
        commit.slot[i] = ch;
        pthread_cond_broadcast(&commit.cond);
    }
    pthread_mutex_unlock(&commit.lock);
    if (failed)
        pager_chunk_free(ch);
    return failed ? -1 : 0;
}

/* Under lock: a chunk handed off or being committed. */
static int commits_pending(void)
{
    for (int i = 0; i < PAGER_COMMITTERS; i++)
        if (commit.slot[i] != NULL || commit.committing[i])
            return 1;
    return 0;
}

int pager_commit_drain(void)
{
    pthread_mutex_lock(&commit.lock);
    while (commits_pending() && !commit.failed)
        pthread_cond_wait(&commit.cond, &commit.lock);
    int failed = commit.failed;
    commit.failed = 0;
    pthread_mutex_unlock(&commit.lock);
    return failed ? -1 : 0;
}

/* A step 3 committed: its rows are no longer far in MySQL, so no later pass can page them
 * again and jobs of theirs that end need no tombstone. Its token leaves the shard's "paging"
 * set; the set (and the tombstones for every delivery that ends) lasts only while some step is
 * between 2 and 3, not for a minute into the burst it paged in. Another step's token, a later
 * one or another instance's after a takeover, keeps the set. 0 / -1 (then the set expires). */
static int step_committed(redisContext *c, int shard, const char *token)
{
    char flag[160];
    rkey(flag, sizeof flag, commit.cfg->redis_prefix, shard, "paging");
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
    if (unpage != NULL &&
        mark_paged(db, ch->shard, ch->rows, ch->n, ch->now, ch->through, &paged, &unpage, &nunpage) == 0 &&
        (nunpage == 0 || take_back(c, ch->shard, unpage, nunpage) == 0))
        rc = 0;
    free(unpage);
    if (rc == 0 && ch->token[0] != '\0')
        rc = step_committed(c, ch->shard, ch->token);
    if (rc == 0) {
        atomic_fetch_add(&commit.paged, paged);
        atomic_fetch_add(&commit.shard_paged[ch->shard], paged);
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
    struct pager_conns k = {.thread = PAGER_COMMITTER + self};
    for (;;) {
        pthread_mutex_lock(&commit.lock);
        while (commit.slot[self] == NULL && !commit.closed)
            pthread_cond_wait(&commit.cond, &commit.lock);
        struct chunk *ch = commit.slot[self];
        commit.slot[self] = NULL;
        commit.committing[self] = ch != NULL;
        pthread_mutex_unlock(&commit.lock);
        if (ch == NULL)
            break;
        int failed = pager_conns_open(&k, commit.cfg, commit.bg) < 0 || commit_chunk(k.db, k.c, ch) < 0;
        pager_chunk_free(ch);
        if (failed) {
            log_warn("pager: a commit failed (%s); its rows are paged again", k.db ? mysql_error(k.db) : "no MySQL");
            pager_conns_close(&k, commit.bg);
        }
        pthread_mutex_lock(&commit.lock);
        commit.committing[self] = 0;
        commit.failed |= failed;
        pthread_cond_broadcast(&commit.cond);
        pthread_mutex_unlock(&commit.lock);
    }
    pager_conns_close(&k, commit.bg);
    mysql_thread_end();
    return NULL;
}

int pager_commit_start(struct app *app, struct bgthread *bg)
{
    commit.app = app;
    commit.cfg = &app->cfg;
    commit.bg = bg;
    commit.closed = 0;
    commit.failed = 0;
    for (int i = 0; i < PAGER_COMMITTERS; i++)
        if (bgthread_start(bg, committer_main, (void *)(intptr_t)i) < 0)
            return -1;
    return 0;
}

void pager_commit_close(void)
{
    pthread_mutex_lock(&commit.lock);
    commit.closed = 1;
    pthread_cond_broadcast(&commit.cond);
    pthread_mutex_unlock(&commit.lock);
}

void pager_commit_free_left(void)
{
    for (int i = 0; i < PAGER_COMMITTERS; i++) {
        pager_chunk_free(commit.slot[i]);
        commit.slot[i] = NULL;
    }
}

long long pager_commit_paged(void)
{
    return atomic_load(&commit.paged);
}

long long pager_commit_shard_paged(int shard)
{
    return atomic_load(&commit.shard_paged[shard]);
}
