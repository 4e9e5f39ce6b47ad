/* doubt.c — see doubt.h.
 *
 * The file holds one line per outcome: "P <id> <at ms> <ticket>" (push) or "D <id> <version
 * before> <at ms> <ticket>" (delete), the ticket naming the connection that lost the answer
 * (dbfence_format; "-" for none; lines of older versions have no ticket and read as "-").
 * Lines are appended with O_APPEND and fsync'd under the module lock; after a settle pass the
 * file is rewritten with what is left (temporary file, fsync, rename). A lock file next to it
 * (flock, held for the process's life) keeps two instances from sharing one state_dir. */
#include "durable/doubt.h"
#include "core/dutywatch.h"
#include "base/clock.h"
#include "mysql/db.h"
#include "mysql/dbfence.h"
#include "mysql/dbtask.h"
#include "core/ids.h"
#include "core/job.h"
#include "base/log.h"
#include "core/metrics.h"
#include "redis/rcodec.h"
#include "redis/layout.h"
#include "redis/rblock.h"
#include "base/sbuf.h"
#include "redis/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SETTLE_BATCH  1000 /* outcomes looked at per pass */
#define FENCE_WAIT_MS 5000 /* how long a killed connection may take to leave the server's list */

struct entry {
    uint64_t id;
    uint32_t ver;          /* delete: the job's version before it */
    char kind;             /* 'P' push, 'D' delete */
    int64_t at_ms;         /* when it was noted */
    struct dbfence ticket; /* the connection whose answer was lost (ok = 0: unknown) */
};

static struct {
    pthread_mutex_t lock;
    struct entry *v;
    size_t n, cap;
    int fd, lock_fd; /* -1: memory only */
    char path[1024], tmp[1040];
    char who[STORE_WHO_MAX]; /* the reconciler's actor in the outbox */
    char instance[64];
    atomic_int queued;
} ledger = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .lock_fd = -1};

static int add_locked(const struct entry *e)
{
    if (ledger.n == ledger.cap) {
        size_t cap = ledger.cap ? ledger.cap * 2 : 64;
        struct entry *grown = realloc(ledger.v, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        ledger.v = grown;
        ledger.cap = cap;
    }
    ledger.v[ledger.n++] = *e;
    return 0;
}

#define LINE_MAX_BYTES (96 + DBFENCE_WORD_MAX)

static int format_entry(const struct entry *e, char *buf, size_t cap)
{
    char ticket[DBFENCE_WORD_MAX];
    dbfence_format(&e->ticket, ticket, sizeof ticket);
    if (e->kind == 'P')
        return snprintf(buf, cap, "P %llu %lld %s\n", (unsigned long long)e->id, (long long)e->at_ms, ticket);
    return snprintf(buf, cap, "D %llu %u %lld %s\n", (unsigned long long)e->id, e->ver, (long long)e->at_ms, ticket);
}

static void note(char kind, uint64_t id, uint32_t ver, const struct dbfence *ticket)
{
    struct entry e = {id, ver, kind, clock_unix_ms(), ticket ? *ticket : (struct dbfence){0}};
    char line[LINE_MAX_BYTES];
    int len = format_entry(&e, line, sizeof line);
    pthread_mutex_lock(&ledger.lock);
    if (add_locked(&e) < 0)
        log_error("doubt: out of memory; the outcome of job %llu stays unsettled", (unsigned long long)id);
    if (ledger.fd >= 0 && (write(ledger.fd, line, (size_t)len) != len || fdatasync(ledger.fd) != 0))
        log_error("doubt: cannot write %s: %s; job %llu is in doubt in memory only", ledger.path, strerror(errno),
                  (unsigned long long)id);
    metrics_gauge_set(MG_IN_DOUBT, (int64_t)ledger.n);
    pthread_mutex_unlock(&ledger.lock);
}

void doubt_push(uint64_t id, const struct dbfence *ticket)
{
    note('P', id, 0, ticket);
}

void doubt_delete(uint64_t id, uint32_t ver_before, const struct dbfence *ticket)
{
    note('D', id, ver_before, ticket);
}

long doubt_count(void)
{
    pthread_mutex_lock(&ledger.lock);
    long n = (long)ledger.n;
    pthread_mutex_unlock(&ledger.lock);
    return n;
}

static void load(FILE *f)
{
    char line[LINE_MAX_BYTES + 32];
    while (fgets(line, sizeof line, f)) {
        struct entry e = {0};
        unsigned long long id;
        long long at;
        unsigned ver;
        char ticket[DBFENCE_WORD_MAX] = "-"; /* %63s below: DBFENCE_WORD_MAX - 1 */
        struct dbfence t;
        if (sscanf(line, "P %llu %lld %63s", &id, &at, ticket) >= 2 && dbfence_parse(ticket, &t) == 0) {
            e = (struct entry){id, 0, 'P', at, t};
        } else if (sscanf(line, "D %llu %u %lld %63s", &id, &ver, &at, ticket) >= 3 && dbfence_parse(ticket, &t) == 0) {
            e = (struct entry){id, ver, 'D', at, t};
        } else {
            log_warn("doubt: %s: ignoring a line it cannot read: %.60s", ledger.path, line);
            continue;
        }
        if (add_locked(&e) < 0)
            break;
    }
}

int doubt_open(const struct config *cfg, const char *instance, const char *host, char *err, size_t errlen)
{
    snprintf(ledger.instance, sizeof ledger.instance, "%s", instance);
    store_who(ledger.who, sizeof ledger.who, instance, "reconciler", host);
    if (cfg->state_dir[0] == '\0') {
        log_warn("doubt: no [instance] state_dir: outcomes in doubt (a lost COMMIT or Redis reply) are kept in "
                 "memory only, and a crash forgets them");
        return 0;
    }
    if (mkdir(cfg->state_dir, 0750) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "[instance] state_dir %s: %s", cfg->state_dir, strerror(errno));
        return -1;
    }
    char lock_path[1040];
    snprintf(ledger.path, sizeof ledger.path, "%s/in-doubt", cfg->state_dir);
    snprintf(ledger.tmp, sizeof ledger.tmp, "%s.tmp", ledger.path);
    snprintf(lock_path, sizeof lock_path, "%s.lock", ledger.path);
    ledger.lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (ledger.lock_fd < 0 || flock(ledger.lock_fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, errlen, "[instance] state_dir %s: %s", cfg->state_dir,
                 ledger.lock_fd < 0 ? strerror(errno) : "in use by another hourglassd (each instance needs its own)");
        return -1;
    }
    FILE *f = fopen(ledger.path, "r");
    if (f) {
        load(f);
        fclose(f);
    }
    ledger.fd = open(ledger.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (ledger.fd < 0) {
        snprintf(err, errlen, "[instance] state_dir: cannot write %s: %s", ledger.path, strerror(errno));
        return -1;
    }
    metrics_gauge_set(MG_IN_DOUBT, (int64_t)ledger.n);
    if (ledger.n)
        log_warn("doubt: %zu outcomes a previous run left in doubt; settling them", ledger.n);
    return 0;
}

void doubt_close(void)
{
    pthread_mutex_lock(&ledger.lock);
    if (ledger.n)
        log_warn("doubt: stopping with %zu outcomes in doubt%s", ledger.n,
                 ledger.fd >= 0 ? " (kept in the state file: the next start settles them)"
                                : " (forgotten: no state_dir)");
    if (ledger.fd >= 0)
        close(ledger.fd);
    if (ledger.lock_fd >= 0)
        close(ledger.lock_fd);
    ledger.fd = ledger.lock_fd = -1;
    free(ledger.v);
    ledger.v = NULL;
    ledger.n = ledger.cap = 0;
    pthread_mutex_unlock(&ledger.lock);
}

/* Drop settled[0..n) from the list and rewrite the file with what is left. */
static void forget(const struct entry *settled, size_t n)
{
    pthread_mutex_lock(&ledger.lock);
    size_t keep = 0;
    for (size_t i = 0; i < ledger.n; i++) {
        int gone = 0;
        for (size_t k = 0; k < n && !gone; k++)
            gone = ledger.v[i].id == settled[k].id && ledger.v[i].kind == settled[k].kind &&
                   ledger.v[i].at_ms == settled[k].at_ms;
        if (!gone)
            ledger.v[keep++] = ledger.v[i];
    }
    ledger.n = keep;
    if (ledger.fd >= 0) {
        int fd = open(ledger.tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
        int ok = fd >= 0;
        for (size_t i = 0; ok && i < ledger.n; i++) {
            char line[LINE_MAX_BYTES];
            int len = format_entry(&ledger.v[i], line, sizeof line);
            ok = write(fd, line, (size_t)len) == len;
        }
        ok = ok && fsync(fd) == 0;
        if (fd >= 0)
            close(fd);
        if (ok && rename(ledger.tmp, ledger.path) == 0) {
            close(ledger.fd);
            ledger.fd = open(ledger.path, O_WRONLY | O_APPEND | O_CLOEXEC);
        } else {
            log_warn("doubt: cannot rewrite %s (%s); settled outcomes will be looked at again", ledger.path,
                     strerror(errno));
        }
    }
    metrics_gauge_set(MG_IN_DOUBT, (int64_t)ledger.n);
    pthread_mutex_unlock(&ledger.lock);
}

/* MySQL's view: state and version per id (rows that exist). */
struct row_view {
    int state; /* JS_NONE when there is no row */
    uint32_t ver;
};

static int read_rows(MYSQL *db, const struct entry *e, size_t n, struct row_view *rows)
{
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT id, state, version FROM message WHERE id IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_putc(&sql, ',');
        sb_json_uint(&sql, e[i].id);
        rows[i] = (struct row_view){JS_NONE, 0};
    }
    sb_putc(&sql, ')');
    int rc = sql.oom || mysql_real_query(db, sql.data, sql.len) != 0 ? -1 : 0;
    sb_free(&sql);
    MYSQL_RES *res = rc == 0 ? mysql_store_result(db) : NULL;
    if (res == NULL)
        return -1;
    for (MYSQL_ROW r; (r = mysql_fetch_row(res)) != NULL;) {
        uint64_t id = strtoull(r[0], NULL, 10);
        for (size_t i = 0; i < n; i++)
            if (e[i].id == id)
                rows[i] = (struct row_view){job_state_parse(r[1]), (uint32_t)strtoul(r[2], NULL, 10)};
    }
    mysql_free_result(res);
    return 0;
}

/* The connection that serves job id's shard. */
static redisContext *shard_conn(struct rblock_shards *set, const struct config *cfg, uint64_t id)
{
    return rblock_shard(set, id_shard(id, cfg->redis_shards));
}

/* Redis's view of each job: found? its state and version (inspect.lua, pipelined). */
static int read_jobs(struct rblock_shards *set, const struct config *cfg, const struct entry *e, size_t n,
                     struct row_view *jobs)
{
    for (size_t i = 0; i < n; i++) {
        struct rargv b;
        int rc = rargv_init(&b, 5, 0, 1);
        if (rc == 0) {
            rargv_key(&b, cfg->redis_prefix, id_shard(e[i].id, cfg->redis_shards), "jobs");
            rargv_id(&b, e[i].id);
            rc = rblock_append_eval(shard_conn(set, cfg, e[i].id), SCRIPT_INSPECT, b.argc, b.argv, b.lens);
        }
        rargv_free(&b);
        if (rc < 0)
            return -1;
    }
    int failed = 0;
    for (size_t i = 0; i < n; i++) { /* in the order each connection got them */
        redisReply *r = rblock_shard_reply(shard_conn(set, cfg, e[i].id));
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY)
            failed = 1;
        else if (r->elements == 0)
            jobs[i] = (struct row_view){JS_NONE, 0};
        else
            jobs[i] = (struct row_view){(int)rreply_int(r, 0), (uint32_t)rreply_int(r, 1)};
        freeReplyObject(r);
    }
    return failed ? -1 : 0;
}

/* Mark the rows of pushes[0..n) aborted when they are still live at version 1. */
static int abort_pushes(MYSQL *db, const uint64_t *ids, size_t n, unsigned long long *aborted)
{
    int64_t now = clock_unix_ms();
    struct sbuf in = SBUF_INIT, sql = SBUF_INIT;
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_putc(&in, ',');
        sb_json_uint(&in, ids[i]);
    }
    /* the pool's connections run one statement per round trip: a transaction of two */
    static const char begin[] = "START TRANSACTION";
    static const char live[] = " AND version = 1 AND state IN ('delayed','ready','reserved','far') AND id IN (";
    /* A far job's row has companions (far_biz, its count): they go first, while the row is
     * still 'far'; its far key goes with its state (upd). */
    struct sbuf farcount = SBUF_INIT, farbiz = SBUF_INIT;
    sb_printf(&farcount,
              "UPDATE far_count c SET jobs = jobs - (SELECT COUNT(*) FROM message m WHERE m.topic = c.topic "
              "AND m.version = 1 AND m.state = 'far' AND m.id IN (%.*s)) WHERE topic IN (SELECT topic FROM "
              "message WHERE version = 1 AND state = 'far' AND id IN (%.*s))",
              (int)in.len, in.data ? in.data : "", (int)in.len, in.data ? in.data : "");
    sb_printf(&farbiz,
              "DELETE b FROM message m JOIN far_biz b ON b.id = m.id WHERE m.version = 1 AND m.state = 'far' "
              "AND m.id IN (%.*s)",
              (int)in.len, in.data ? in.data : "");
    struct sbuf upd = SBUF_INIT;
    sb_puts(&sql, "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") SELECT id, version + 1, state, 'aborted', ");
    sb_json_int(&sql, now);
    sb_puts(&sql, ", 'reconciler: push in doubt (answered 503, never in Redis)', '', ");
    db_quote(db, &sql, ledger.instance, strlen(ledger.instance));
    sb_puts(&sql, ", attempts FROM message WHERE 1");
    sb_puts(&sql, live);
    sb_put(&sql, in.data, in.len);
    sb_putc(&sql, ')');
    sb_puts(&upd, "UPDATE message SET state = 'aborted', far_shard = NULL, far_run_at = NULL, version = version + 1, "
                  "updated_at = ");
    sb_json_int(&upd, now);
    sb_puts(&upd, " WHERE 1");
    sb_puts(&upd, live);
    sb_put(&upd, in.data, in.len);
    sb_putc(&upd, ')');
    int rc = sql.oom || in.oom || upd.oom || farcount.oom || farbiz.oom ? -1 : db_exec(db, begin, sizeof begin - 1);
    if (rc == 0)
        rc = db_exec(db, sql.data, sql.len);
    if (rc == 0)
        rc = db_exec(db, farbiz.data, farbiz.len);
    if (rc == 0)
        rc = db_exec(db, farcount.data, farcount.len);
    if (rc == 0 && (rc = db_exec(db, upd.data, upd.len)) == 0)
        *aborted = mysql_affected_rows(db);
    if (rc == 0 && db_commit(db) < 0)
        rc = -1;
    if (rc < 0) {
        log_warn("reconciler: marking rows aborted failed: %s", mysql_error(db));
        mysql_rollback(db);
    }
    sb_free(&in);
    sb_free(&sql);
    sb_free(&upd);
    sb_free(&farcount);
    sb_free(&farbiz);
    return rc;
}

/* Run delete.lua on jobs[0..n) guarded by the version each had before its delete. */
static int delete_in_redis(struct rblock_shards *set, const struct config *cfg, const struct entry *e, size_t n,
                           long *done)
{
    int64_t now = clock_unix_ms();
    for (size_t i = 0; i < n; i++) {
        struct rargv b;
        int rc = rargv_init(&b, 8, 2, 1);
        if (rc == 0) {
            rargv_key(&b, cfg->redis_prefix, id_shard(e[i].id, cfg->redis_shards), "jobs");
            rargv_id(&b, e[i].id);
            rargv_int(&b, now);
            rargv_str(&b, ledger.who, strlen(ledger.who));
            rargv_int(&b, e[i].ver);
            rc = rblock_append_eval(shard_conn(set, cfg, e[i].id), SCRIPT_DELETE, b.argc, b.argv, b.lens);
        }
        rargv_free(&b);
        if (rc < 0)
            return -1;
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *r = rblock_shard_reply(shard_conn(set, cfg, e[i].id));
        if (r == NULL)
            return -1;
        if (rreply_is_array(r, 1) && rreply_is(r, 0, "ok"))
            (*done)++;
        else if (rreply_is_array(r, 1) && rreply_is(r, 0, "moved"))
            log_warn("reconciler: job %llu moved on in Redis after its delete committed; left to its newer state",
                     (unsigned long long)e[i].id);
        freeReplyObject(r);
    }
    return 0;
}

/* Close, for good, each connection that lost the answer of e[0..n) (dbfence.h): what it may still
 * hold in its socket would otherwise commit after the rows were read. Keeps, in place, the
 * outcomes that can be read now (their connection is gone, or cannot be reached from here, as
 * before tickets); the others wait for the next pass. Returns how many are kept. */
static size_t fence_old_connections(MYSQL *db, struct entry *e, size_t n)
{
    enum { REMEMBERED = 8 }; /* a pass meets one or two connections; more are closed again */
    struct dbfence seen[REMEMBERED];
    enum dbfence_result result[REMEMBERED];
    size_t nseen = 0, keep = 0;
    for (size_t i = 0; i < n; i++) {
        enum dbfence_result r = DBFENCE_ELSEWHERE;
        if (e[i].ticket.ok) {
            size_t k = 0;
            while (k < nseen && !dbfence_same(&seen[k], &e[i].ticket))
                k++;
            if (k < nseen) {
                r = result[k];
            } else {
                r = dbfence_close(db, &e[i].ticket, FENCE_WAIT_MS);
                if (r == DBFENCE_FAILED)
                    log_warn("reconciler: the MySQL connection %llu that lost an answer is not closed yet (%s); its "
                             "outcomes stay in doubt for now",
                             (unsigned long long)e[i].ticket.conn_id,
                             mysql_errno(db) ? mysql_error(db) : "still listed");
                else if (r == DBFENCE_ELSEWHERE)
                    log_warn("reconciler: the MySQL connection %llu that lost an answer cannot be closed from here "
                             "(another server, or another user's); its outcomes are read without closing it first",
                             (unsigned long long)e[i].ticket.conn_id);
                if (nseen < REMEMBERED) {
                    seen[nseen] = e[i].ticket;
                    result[nseen++] = r;
                }
            }
        }
        if (r != DBFENCE_FAILED)
            e[keep++] = e[i];
    }
    return keep;
}

long doubt_settle(MYSQL *db, const struct config *cfg, int all)
{
    size_t ripe_n = 0;
    int64_t ripe = all ? INT64_MAX : clock_unix_ms() - DOUBT_GRACE_MS;
    struct entry *e = malloc(SETTLE_BATCH * sizeof *e);
    struct row_view *rows = malloc(SETTLE_BATCH * sizeof *rows), *jobs = malloc(SETTLE_BATCH * sizeof *jobs);
    uint64_t *aborts = malloc(SETTLE_BATCH * sizeof *aborts);
    struct entry *dels = malloc(SETTLE_BATCH * sizeof *dels);
    size_t n = 0;
    long settled = -1;
    if (!e || !rows || !jobs || !aborts || !dels)
        goto out;
    pthread_mutex_lock(&ledger.lock);
    for (size_t i = 0; i < ledger.n && n < SETTLE_BATCH; i++)
        if (ledger.v[i].at_ms <= ripe)
            e[n++] = ledger.v[i];
    pthread_mutex_unlock(&ledger.lock);
    if (n == 0) {
        settled = 0;
        goto out;
    }
    ripe_n = n;
    n = fence_old_connections(db, e, n);
    if (n == 0) {
        log_warn("reconciler: %zu outcomes stay in doubt for now (their connections are not closed yet)", ripe_n);
        goto out;
    }
    char err[256];
    struct rblock_shards *c = layout_open_shards(cfg, 1, NULL, err, sizeof err);
    if (c == NULL || read_rows(db, e, n, rows) < 0 || read_jobs(c, cfg, e, n, jobs) < 0) {
        rblock_shards_free(c);
        log_warn("reconciler: %zu outcomes stay in doubt for now (%s)", n, c ? "MySQL or Redis failed" : err);
        goto out;
    }
    size_t naborts = 0, ndels = 0;
    for (size_t i = 0; i < n; i++) {
        int live = rows[i].state == JS_DELAYED || rows[i].state == JS_READY || rows[i].state == JS_RESERVED ||
                   rows[i].state == JS_FAR;
        if (e[i].kind == 'P' && live && rows[i].ver == 1 && jobs[i].state == JS_NONE)
            aborts[naborts++] = e[i].id;
        if (e[i].kind == 'D' && rows[i].state == JS_DELETED && rows[i].ver == e[i].ver + 1 &&
            jobs[i].state != JS_NONE && jobs[i].ver == e[i].ver)
            dels[ndels++] = e[i];
    }
    unsigned long long aborted = 0;
    long deleted = 0;
    int rc = naborts ? abort_pushes(db, aborts, naborts, &aborted) : 0;
    if (rc == 0 && ndels)
        rc = delete_in_redis(c, cfg, dels, ndels, &deleted);
    rblock_shards_free(c);
    if (rc < 0) {
        log_warn("reconciler: %zu outcomes stay in doubt for now (MySQL or Redis failed while settling)", n);
        goto out;
    }
    log_info("reconciler: %zu outcomes in doubt settled: %llu pushes answered 503 had committed rows, now aborted; "
             "%ld deletes that had committed were carried out in Redis",
             n, aborted, deleted);
    metrics_inc(MC_DOUBT_SETTLED, n);
    forget(e, n);
    /* some connections could not be closed yet: their outcomes wait, and the pass says it failed
     * (a /reStore must not go on with them in doubt) */
    settled = n < ripe_n ? -1 : (long)n;
out:
    free(e);
    free(rows);
    free(jobs);
    free(aborts);
    free(dels);
    return settled;
}

static void settle_task(MYSQL *db, void *arg)
{
    const struct config *cfg = arg;
    if (db != NULL && doubt_settle(db, cfg, 0) >= 0)
        dutywatch_ok(DUTY_RECONCILER, -1);
    else
        dutywatch_failed(DUTY_RECONCILER, -1,
                         db == NULL ? "MySQL unavailable" : "MySQL or Redis failed while settling");
    atomic_store(&ledger.queued, 0);
}

void doubt_schedule(const struct config *cfg)
{
    int64_t ripe = clock_unix_ms() - DOUBT_GRACE_MS;
    int any = 0;
    pthread_mutex_lock(&ledger.lock);
    for (size_t i = 0; i < ledger.n && !any; i++)
        any = ledger.v[i].at_ms <= ripe;
    pthread_mutex_unlock(&ledger.lock);
    int idle = 0;
    if (!any) {
        dutywatch_ok(DUTY_RECONCILER, -1); /* nothing to settle (a /reStore may have settled it) */
        return;
    }
    if (!atomic_compare_exchange_strong(&ledger.queued, &idle, 1))
        return;
    if (dbtask_submit(settle_task, NULL, NULL, (void *)cfg) < 0)
        atomic_store(&ledger.queued, 0);
}
