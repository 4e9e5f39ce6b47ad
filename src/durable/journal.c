/* journal.c — see journal.h.
 *
 * Queue: durable submissions are a linked list of groups (each group commits or fails as
 * one); batched records live in a ring that grows up to the backlog limit (and a little
 * past it: records that describe transitions already made in Redis are never dropped).
 *
 * One cycle of a lane: take every durable group and up to [mysql] batch records from the
 * ring, write them in one transaction, commit, then report to the durable submitters and pop
 * the batched records. On failure the durable submitters are told "not committed" (their
 * clients get 503) and the batched records stay at the head of the ring to be retried after
 * a reconnect: nothing already true in Redis is lost from the journal.
 *
 * Lanes ([mysql] journal_lanes, default 1): that many threads, each with its own connection,
 * run cycles side by side; an idle lane takes what is queued at once instead of waiting for the
 * cycle in progress. On one machine with a local MariaDB they were measured not to pay (cycles
 * of fewer rows at the same fixed cost; docs/architecture.md, "Lanes"): they are for a commit
 * that waits on the network, as on Galera across machines. Records of one job never need the
 * order of two lanes: a job's row is committed before its job reaches Redis (so no later
 * record of it can be in an earlier cycle), message updates apply only when newer (version
 * order), and transition rows are INSERT IGNORE on their key. Rows two cycles both lock
 * (far_count, biz_latest) are locked in one order by every writer (job_topic_cmp); a deadlock
 * all the same is written again (lock_conflict_victim). The local ring is taken by one lane at
 * a time, since its records leave it from the head, in order, once committed.
 *
 * Message-row updates are ordered by the job's version: updates are staged in a MEMORY
 * temporary table and applied with one UPDATE ... JOIN ... WHERE newer, so a batch that
 * arrives late never rolls a row back.
 *
 * A COMMIT whose answer never came (the server hung or the connection broke after it was
 * sent) may or may not have happened. The pushes in it were answered 503 and never reach
 * Redis, so if their rows did commit they stand for no job, and a /reStore after a Redis
 * loss would bring back jobs whose producers were told they failed (and have likely pushed
 * again). The same holds for a delete whose row may say 'deleted' while the job is still in
 * Redis. Such outcomes are handed to the reconciler (doubt.h), which remembers them across a
 * crash and settles each against the job's state in Redis, once the connection that lost the
 * answer can commit nothing more (dbfence.h: the connection's ticket, taken when it was made).
 *
 * A cycle of new jobs alone (no bizKey, none far, rows that fit one statement: what a load of
 * pushes makes) is one round trip: its rows in one bulk statement on a connection in autocommit,
 * which commits them by itself, instead of the statement and then a COMMIT. Its outcome is known
 * or in doubt exactly as a COMMIT's is, so it is taken only on a connection with a ticket (and
 * not on Galera, whose reconciler cannot reach a connection on another node). In autocommit
 * every other cycle begins with START TRANSACTION, a round trip more; out of it, such a cycle
 * pays its COMMIT. So a lane's connection follows what most of its recent cycles were (`lean`,
 * with hysteresis: each switch is a round trip too): a load of pushes, with an outbox batch
 * among them now and then, runs in autocommit; a load of deliveries in transactions. */
#include "durable/journal.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "mysql/db.h"
#include "mysql/dbfence.h"
#include "durable/doubt.h"
#include "mysql/journal_bulk.h"
#include "mysql/journal_sql.h"
#include "base/log.h"
#include "base/loopq.h"
#include "core/metrics.h"
#include "base/sbuf.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SCRIPT_FLUSH_BYTES  (1u << 20) /* send the statements built so far past this */
#define DURABLE_MAX_RECORDS 200000     /* durable records queued before refusing */
/* A cycle this large came of a machine short of CPU, not of waiting: there the COMMIT's round trip
 * is what lets the next cycle gather more rows, and fewer, larger cycles cost fewer wake-ups and
 * Redis calls a push (docs/performance.md, 2026-11-29 21:47). */
#define SELF_COMMIT_MAX_ROWS 48
#define LEAN_SWITCH          4 /* a lane enters autocommit at lean >= this, leaves it at <= -this */
#define LEAN_MAX             8 /* lean is kept within +-this: a change of load shows within 12 cycles */

/* One lane: a thread, its connection, and what its last failed cycle left to know. */
struct lane {
    int index;
    MYSQL *db;
    struct journal_bulk *bulk; /* the cycle's rows in binary (journal_bulk.h); NULL: as text */
    int galera;                /* on a Galera node: changes of existing rows wait for the cluster */
    int after_conflict;        /* writing a cycle again after a lock conflict: every write waits */
    /* The last failed write broke the connection during COMMIT (its pushes may have committed
     * although they were answered 503: doubt.h). */
    int commit_in_doubt;
    struct dbfence ticket; /* names this connection for the reconciler (dbfence.h); ok = 0: none */
    int autocommit;        /* the connection is in autocommit: cycles of new jobs alone are one statement */
    int lean;              /* +1 a cycle of new jobs alone, -1 another, within +-LEAN_MAX */
    char last_error[512];  /* the server's words for the last batch it refused */
    unsigned last_errno;   /* and its number */
};

struct jsync {
    struct jsync *next;
    struct jobchange *recs;
    int n;
    int split; /* refused as a whole: write its records one by one (outbox batches) */
    struct loopq *reply_to;
    journal_done_fn done;
    void *arg;
    int ok;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bgthread bg; /* the journal thread; bg.stop and bg.stop_deadline_us under lock */

    struct jobchange *ring;
    size_t cap, head, count;

    struct jsync *sync_head, *sync_tail;
    long sync_records;
    long outbox_backlog; /* entries waiting in the Redis outbox streams (last measured) */

    int up;         /* a lane is connected (connected > 0), as last reported */
    int connected;  /* lanes with a connection */
    int ring_taken; /* a lane is writing records of the ring's head */
    const struct config *cfg;
    char instance[64];
    struct lane lanes[JOURNAL_LANES_MAX];
} journal = {.lock = PTHREAD_MUTEX_INITIALIZER,
             .cond = PTHREAD_COND_INITIALIZER,
             .bg = BGTHREAD_INIT(&journal.lock, &journal.cond, NULL)};

int journal_up(void)
{
    pthread_mutex_lock(&journal.lock);
    int up = journal.up;
    pthread_mutex_unlock(&journal.lock);
    return up;
}

long journal_backlog(void)
{
    pthread_mutex_lock(&journal.lock);
    long n = (long)journal.count + (journal.outbox_backlog > 0 ? journal.outbox_backlog : 0);
    pthread_mutex_unlock(&journal.lock);
    return n;
}

long journal_local_backlog(void)
{
    pthread_mutex_lock(&journal.lock);
    long n = (long)journal.count;
    pthread_mutex_unlock(&journal.lock);
    return n;
}

long journal_durable_waiting(void)
{
    pthread_mutex_lock(&journal.lock);
    long n = journal.sync_records;
    pthread_mutex_unlock(&journal.lock);
    return n;
}

int journal_accepting(void)
{
    pthread_mutex_lock(&journal.lock);
    int ok = (long)journal.count + (journal.outbox_backlog > 0 ? journal.outbox_backlog : 0) <
             (long)journal.cfg->journal_backlog;
    pthread_mutex_unlock(&journal.lock);
    return ok;
}

static void free_rec(struct jobchange *r)
{
    if (r->replacement) {
        job_specs_free(r->replacement, 1);
        r->replacement = NULL;
    }
}

/* Ring append; grows by doubling. Caller holds the lock. */
static int ring_push(const struct jobchange *r)
{
    if (journal.count == journal.cap) {
        size_t cap = journal.cap ? journal.cap * 2 : 1024;
        struct jobchange *ring = malloc(cap * sizeof *ring);
        if (ring == NULL)
            return -1;
        for (size_t i = 0; i < journal.count; i++)
            ring[i] = journal.ring[(journal.head + i) % journal.cap];
        free(journal.ring);
        journal.ring = ring;
        journal.cap = cap;
        journal.head = 0;
    }
    journal.ring[(journal.head + journal.count) % journal.cap] = *r;
    journal.count++;
    return 0;
}

void journal_submit(const struct jobchange *recs, int n)
{
    pthread_mutex_lock(&journal.lock);
    for (int i = 0; i < n; i++) {
        if (ring_push(&recs[i]) < 0) {
            log_error("journal: out of memory; a transition of job %llu is not journaled",
                      (unsigned long long)recs[i].id);
            struct jobchange copy = recs[i];
            free_rec(&copy);
        }
    }
    metrics_gauge_set(MG_JOURNAL_BACKLOG, (int64_t)journal.count);
    pthread_cond_broadcast(&journal.cond); /* every lane: one may be waiting to reconnect */
    pthread_mutex_unlock(&journal.lock);
}

static int submit_group(struct jobchange *recs, int n, int split, struct loopq *reply_to, journal_done_fn done,
                        void *arg)
{
    struct jsync *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -1;
    s->recs = recs;
    s->n = n;
    s->split = split;
    s->reply_to = reply_to;
    s->done = done;
    s->arg = arg;
    pthread_mutex_lock(&journal.lock);
    if (!journal.up || journal.bg.stop || journal.sync_records + n > DURABLE_MAX_RECORDS) {
        pthread_mutex_unlock(&journal.lock);
        free(s);
        return -1;
    }
    if (journal.sync_tail)
        journal.sync_tail->next = s;
    else
        journal.sync_head = s;
    journal.sync_tail = s;
    journal.sync_records += n;
    metrics_gauge_set(MG_JOURNAL_INFLIGHT, journal.sync_records);
    pthread_cond_broadcast(&journal.cond); /* every lane: one may be waiting to reconnect */
    pthread_mutex_unlock(&journal.lock);
    return 0;
}

int journal_submit_sync(struct jobchange *recs, int n, struct loopq *reply_to, journal_done_fn done, void *arg)
{
    return submit_group(recs, n, 0, reply_to, done, arg);
}

int journal_submit_outbox(struct jobchange *recs, int n, journal_done_fn done, void *arg)
{
    return submit_group(recs, n, 1, NULL, done, arg);
}

static void publish_backlog_locked(void)
{
    long outbox = journal.outbox_backlog > 0 ? journal.outbox_backlog : 0;
    metrics_gauge_set(MG_JOURNAL_BACKLOG, (int64_t)journal.count + outbox);
    metrics_gauge_set(MG_JOURNAL_INFLIGHT, journal.sync_records);
}

void journal_note_outbox(long n)
{
    pthread_mutex_lock(&journal.lock);
    journal.outbox_backlog = n;
    publish_backlog_locked();
    pthread_mutex_unlock(&journal.lock);
}

static void deliver(void *arg)
{
    struct jsync *s = arg;
    s->done(s->ok, s->arg);
    free(s);
}

/* Report the outcome of a list of durable groups to their submitters: those of one event loop
 * in one post (loopq_post_many), so a loop hears a whole cycle in one drain and sends its
 * pushes to Redis together rather than one wake and one script call per push. Each pass posts
 * the groups of the first loop it meets, in submission order, and keeps the others for the
 * next pass (a cycle's completions go to a handful of loops). */
#define COMPLETE_POST_MAX 256 /* outcomes posted to one loop at once */

static void complete(struct jsync *list, int ok)
{
    while (list) {
        void *batch[COMPLETE_POST_MAX];
        struct loopq *loop = NULL;
        int n = 0;
        struct jsync *rest = NULL, **rest_tail = &rest;
        for (struct jsync *g = list, *next; g; g = next) {
            next = g->next;
            g->next = NULL;
            g->ok = ok;
            if (g->reply_to == NULL) {
                deliver(g); /* the submitter waits on its own thread (the outbox) */
            } else if (n < COMPLETE_POST_MAX && (loop == NULL || g->reply_to == loop)) {
                loop = g->reply_to;
                batch[n++] = g;
            } else {
                *rest_tail = g;
                rest_tail = &g->next;
            }
        }
        int posted = n > 0 ? loopq_post_many(loop, deliver, batch, n) : 0;
        if (posted < n)
            log_error("journal: cannot report %d commit outcomes (out of memory)", n - posted);
        for (int i = posted; i < n; i++)
            free(batch[i]);
        list = rest;
    }
}

/* A cycle's statements (journal_sql.h) are sent as one multi-statement script, then COMMIT:
 * two round trips to MySQL instead of three to six, which was most of a cycle's time
 * besides the commit's fsync. The server stops at the first statement that fails. */
static int send_script(void *db, const char *sql, size_t len)
{
    return db_exec_script(db, sql, len, NULL);
}

/* A commit failed: did its answer get lost (the connection broke, or no answer came in time), so
 * that it may have happened? A deadlock at commit is Galera's certification failure: rolled back
 * on every node, so not in doubt — the cycle is simply written again (lock_conflict_victim). */
static int answer_lost(MYSQL *db)
{
    return (db_error_is_connection(db) && !db_errno_is_lock_conflict(mysql_errno(db))) || mysql_errno(db) == 0;
}

static int is_far_change(const struct jobchange *r)
{
    return r->kind == JC_FAR_LEAVE || r->kind == JC_FAR_MOVE;
}

/* Write durable groups and batched records in one transaction. 0 = committed; on failure
 * *lost_connection tells whether the connection broke (retry) or the server refused it. */
static int write_batch(struct lane *l, struct jsync *groups, struct jobchange *recs, size_t nrecs, const char *instance,
                       int *lost_connection)
{
    MYSQL *db = l->db;
    struct journal_sql b;
    journal_sql_init(&b, db, SCRIPT_FLUSH_BYTES, send_script, db);
    size_t nupdates = 0, cap = nrecs;
    for (struct jsync *g = groups; g; g = g->next)
        cap += (size_t)g->n;
    if (cap == 0)
        cap = 1;
    const struct jobchange **updates = malloc(cap * 6 * sizeof *updates);
    const struct jobchange **far_inserts = updates + cap, **far_changes = far_inserts + cap;
    const struct jobchange **inserts = far_changes + cap, **aborts = inserts + cap, **transitions = aborts + cap;
    size_t ninserts = 0, nchanges = 0, nnew = 0, naborts = 0, ntransitions = 0;
    int rc = -1, one_statement = 0; /* a cycle of new jobs alone, committed by its statement */
    if (updates == NULL)
        goto out;

    /* Who goes where: new jobs' message rows (each records its push: no transition row), every
     * other record's transition row (a far job's change writes its own), the message rows'
     * updates, and the bizKey and far-tier bookkeeping. */
    for (struct jsync *g = groups; g; g = g->next)
        for (int i = 0; i < g->n; i++) {
            const struct jobchange *r = &g->recs[i];
            if (r->to == JS_ABORTED)
                aborts[naborts++] = r;
            if (is_far_change(r)) {
                far_changes[nchanges++] = r;
                continue;
            }
            if (r->kind != JC_INSERT) {
                transitions[ntransitions++] = r;
                updates[nupdates++] = r;
                continue;
            }
            inserts[nnew++] = r;
            if (r->to == JS_FAR)
                far_inserts[ninserts++] = r;
        }
    for (size_t i = 0; i < nrecs; i++) {
        if (recs[i].to == JS_ABORTED)
            aborts[naborts++] = &recs[i];
        if (is_far_change(&recs[i])) {
            far_changes[nchanges++] = &recs[i];
            continue;
        }
        transitions[ntransitions++] = &recs[i];
        updates[nupdates++] = &recs[i];
    }

    /* A cycle of new jobs alone, on a connection with a ticket: one statement that commits by
     * itself, on a connection in autocommit (the file's header says when it is). Any other cycle
     * runs in a transaction. */
    int may_self_commit = l->ticket.ok && l->bulk != NULL && !l->galera && !journal.cfg->journal_per_row;
    int plain = may_self_commit && nnew > 0 && nnew <= SELF_COMMIT_MAX_ROWS && nupdates == 0 && naborts == 0 &&
                nchanges == 0 && ninserts == 0 && journal_bulk_messages_fit(inserts, nnew, SCRIPT_FLUSH_BYTES);
    for (size_t i = 0; plain && i < nnew; i++)
        plain = inserts[i]->job->biz_key == NULL;
    if (may_self_commit) {
        l->lean += plain ? (l->lean < LEAN_MAX) : -(l->lean > -LEAN_MAX);
        int want = l->autocommit ? l->lean > -LEAN_SWITCH : l->lean >= LEAN_SWITCH;
        if (want != l->autocommit) {
            if (mysql_autocommit(db, (my_bool)want) != 0)
                goto out;
            l->autocommit = want;
        }
    }
    if (l->autocommit && !plain && db_begin(db) < 0)
        goto out;
    if (l->autocommit && plain) {
        one_statement = 1;
        if (journal_bulk_messages_commit(l->bulk, inserts, nnew, instance) < 0) {
            l->commit_in_doubt = answer_lost(db);
            goto out;
        }
        metrics_inc(MC_JOURNAL_STATEMENT_COMMITS, 1);
        rc = 0;
        goto out;
    }

    /* On a Galera node, changes of rows that exist already (updates, bizKey and far-tier
     * bookkeeping) need the node to have applied what the cluster committed before them. The
     * row may have come from another instance through another node: its push committed there
     * (certified everywhere, applied here a little later), went to Redis, was delivered and
     * finished through this instance; the finish's UPDATE, run here before the push is applied,
     * would match no row, certify without a conflict, and be lost ('delayed' for good in MySQL).
     * One causal read first makes the cycle see it. Cycles of new jobs alone need none — unless
     * they are written again after losing a certification conflict: the winner (another
     * instance's bizKey row, say) may not be applied here yet, and without the wait the cycle
     * would be certified against it, and fail, again. */
    if (l->galera && (nupdates > 0 || naborts > 0 || nchanges > 0 || l->after_conflict) && db_wait_for_cluster(db) < 0)
        goto out;

    /* The rows, in binary when the connection can (journal_bulk.h), else as the script's first
     * statements; either way message rows, transition rows, then the updates. */
    if (l->bulk != NULL) {
        journal_sql_sort_updates(updates, nupdates);
        if ((nnew > 0 && journal_bulk_messages(l->bulk, inserts, nnew, instance, SCRIPT_FLUSH_BYTES) < 0) ||
            (ntransitions > 0 &&
             journal_bulk_transitions(l->bulk, transitions, ntransitions, instance, SCRIPT_FLUSH_BYTES) < 0) ||
            (nupdates > 0 && journal_bulk_updates(l->bulk, updates, nupdates, SCRIPT_FLUSH_BYTES) < 0) ||
            journal_sql_replacements(&b, updates, nupdates) < 0)
            goto out;
    } else {
        for (size_t i = 0; i < nnew; i++)
            if (journal_sql_message_row(&b, inserts[i], instance) < 0)
                goto out;
        for (size_t i = 0; i < ntransitions; i++)
            if (journal_sql_transition_row(&b, transitions[i], instance) < 0)
                goto out;
        if (journal_sql_update_messages(&b, updates, nupdates) < 0)
            goto out;
    }
    if (journal_sql_biz_latest(&b, inserts, nnew) < 0 || journal_sql_biz_aborted(&b, aborts, naborts) < 0 ||
        journal_sql_far_inserts(&b, far_inserts, ninserts) < 0)
        goto out;
    for (size_t k = 0; k < nchanges; k++)
        if (journal_sql_far_change(&b, far_changes[k], k, instance) < 0)
            goto out;
    if (journal_sql_far_counts(&b, far_inserts, ninserts) < 0 ||
        journal_sql_far_leave_counts(&b, far_changes, nchanges) < 0 || journal_sql_send(&b) < 0)
        goto out;
    /* COMMIT on its own, only once every statement succeeded: sent inside the script it would
     * run even after we gave up on a hung server (the script waits in its socket), committing
     * pushes already answered 503 (HeldScriptTest in tests/integration/test_journal_in_doubt.py)
     * with nothing to stop it on a connection without a ticket (through a proxy). With a ticket
     * the reconciler fences the old connection first; the cycles that commit by themselves above
     * are taken only then. */
    if (db_commit(db) < 0) {
        l->commit_in_doubt = answer_lost(db);
        goto out;
    }
    rc = 0;
out:
    if (rc < 0) {
        *lost_connection = db_error_is_connection(db) || mysql_errno(db) == 0;
        /* the rollback clears the error: keep what the server said, for refused_record */
        l->last_errno = mysql_errno(db);
        snprintf(l->last_error, sizeof l->last_error, "%u: %s", mysql_errno(db), mysql_error(db));
        if (!one_statement)
            mysql_rollback(db);
    }
    free(updates);
    journal_sql_free(&b);
    return rc;
}

/* The connection is gone: refuse durable submissions from now on, and answer the ones
 * queued behind the failed batch at once rather than after a reconnect attempt (which can
 * take the whole connect timeout against a hung server). Caller holds the lock. */
static void mark_down_locked(void)
{
    journal.up = 0;
    metrics_gauge_set(MG_MYSQL_UP, 0);
    struct jsync *waiting = journal.sync_head;
    journal.sync_head = journal.sync_tail = NULL;
    journal.sync_records = 0;
    complete(waiting, 0);
}

static MYSQL *connect_db(void)
{
    char err[512];
    MYSQL *db = db_connect(journal.cfg, err, sizeof err);
    if (db == NULL) {
        metrics_inc(MC_MYSQL_ERRORS, 1);
        return NULL;
    }
    int rc = db_check_schema(db, err, sizeof err);
    if (rc < 0) {
        log_error("journal: %s", err);
        mysql_close(db);
        return NULL;
    }
    static const char temp[] = "CREATE TEMPORARY TABLE IF NOT EXISTS journal_update (id BIGINT UNSIGNED NOT NULL "
                               "PRIMARY KEY, state VARCHAR(16) NOT NULL, attempts INT UNSIGNED NOT NULL, run_at "
                               "BIGINT NOT NULL, version INT UNSIGNED NOT NULL, at BIGINT NOT NULL, force_apply "
                               "TINYINT NOT NULL) ENGINE=MEMORY";
    if (db_exec(db, temp, sizeof temp - 1) < 0 || db_enable_scripts(db) < 0) {
        mysql_close(db);
        return NULL;
    }
    return db;
}

static void lane_close(struct lane *l);

/* Connect the lane, with its bulk statements unless [mysql] bulk_inserts is off or the server
 * cannot (said once per process: every lane meets the same server), and its ticket (dbfence.h)
 * unless it is on Galera. */
static int lane_connect(struct lane *l)
{
    static int said;
    l->db = connect_db();
    if (l->db == NULL)
        return -1;
    l->galera = db_is_galera(l->db);
    l->autocommit = l->lean = 0;
    l->ticket = (struct dbfence){0};
    if (!l->galera && dbfence_take(l->db, &l->ticket) < 0) {
        log_warn("journal: cannot read this connection's id: %s", mysql_error(l->db));
        lane_close(l);
        return -1;
    }
    const char *why = "[mysql] bulk_inserts = false";
    l->bulk = journal.cfg->journal_bulk ? journal_bulk_new(l->db, &why) : NULL;
    if (l->bulk == NULL && !said++)
        log_info("journal: rows are written as SQL text (%s)", why);
    return 0;
}

static void lane_close(struct lane *l)
{
    journal_bulk_free(l->bulk);
    l->bulk = NULL;
    if (l->db)
        mysql_close(l->db);
    l->db = NULL;
}

static void wait_locked(int64_t us)
{
    clock_cond_wait_us(&journal.cond, &journal.lock, us);
}

/* Write taken[0..n) and the groups in one transaction; on success the groups are told. In
 * the benchmark baseline mode, one transaction per group and per record: each group is told
 * as soon as it is committed, and those not yet written stay in *groups on failure. */
static int write_all(struct lane *l, struct jsync **groups, struct jobchange *taken, size_t n, int *lost)
{
    if (!journal.cfg->journal_per_row) {
        if (write_batch(l, *groups, taken, n, journal.instance, lost) < 0)
            return -1;
        complete(*groups, 1);
        *groups = NULL;
        return 0;
    }
    while (*groups) {
        struct jsync *g = *groups, *next = g->next;
        g->next = NULL;
        int rc = g->split ? 0 : write_batch(l, g, NULL, 0, journal.instance, lost);
        for (int i = 0; g->split && i < g->n && rc == 0; i++)
            rc = write_batch(l, NULL, &g->recs[i], 1, journal.instance, lost);
        if (rc < 0) {
            g->next = next; /* g and the rest stay in *groups, to be answered by the caller */
            return rc;
        }
        *groups = next;
        complete(g, 1); /* g alone: complete() walks the list it is given */
    }
    for (size_t i = 0; i < n; i++)
        if (write_batch(l, NULL, &taken[i], 1, journal.instance, lost) < 0)
            return -1;
    return 0;
}

/* The connection broke during a COMMIT: the durable submissions about to be answered 503 may
 * have been committed all the same. Their outcomes go to the reconciler (doubt.h), which
 * persists them and settles each by the job's real state in MySQL and Redis. */
static void note_in_doubt(const struct jsync *groups, const struct dbfence *ticket)
{
    for (const struct jsync *g = groups; g; g = g->next)
        for (int i = 0; i < g->n; i++) {
            const struct jobchange *r = &g->recs[i];
            if (r->kind == JC_INSERT)
                doubt_push(r->id, ticket);
            else if (r->kind == JC_TRANSITION && r->to == JS_DELETED && r->ver > 0)
                doubt_delete(r->id, r->ver - 1, ticket);
        }
}

/* Keep a record MySQL refused in refused_record, with the server's error. 0, or -1 when that
 * failed too (then the record is in the log only). */
static int park_refused(MYSQL *db, const struct jobchange *r, const char *error)
{
    struct journal_sql b;
    journal_sql_init(&b, db, SCRIPT_FLUSH_BYTES, send_script, db);
    int rc = journal_sql_refused_row(&b, r, error, clock_unix_ms(), journal.instance);
    if (rc == 0)
        rc = journal_sql_send(&b);
    if (rc == 0)
        rc = db_commit(db);
    if (rc < 0) {
        struct sbuf json = SBUF_INIT;
        journal_sql_record_json(&json, r);
        log_error("journal: could not keep the refused record either (%s); it was: %s", mysql_error(db),
                  json.data ? json.data : "(out of memory)");
        mysql_rollback(db);
        sb_free(&json);
    }
    journal_sql_free(&b);
    return rc;
}

/* A deadlock (InnoDB rolled the whole transaction back) or a lock wait that timed out (the
 * rollback in write_batch undoes the rest): the connection is fine and nothing of the cycle
 * is committed, so it is written again on the same connection, up to LOCK_RETRIES times,
 * rather than marking MySQL down and answering the cycle's pushes 503. Two writers of the
 * same rows (the pager and the journal, say) can meet this under load however carefully they
 * order their locks (job.h, job_topic_cmp). On Galera it is also a COMMIT that failed
 * certification: two instances writing the same job's row through different nodes (the outbox
 * carries a job's transitions from whichever instance reads them). */
#define LOCK_RETRIES        3
#define LOCK_RETRY_PAUSE_US 50000 /* times the attempt: 50, 100, 150 ms, 300 ms in all */

static int lock_conflict_victim(const struct lane *l)
{
    return !l->commit_in_doubt && db_errno_is_lock_conflict(l->last_errno);
}

/* Write records one by one; those the server refuses go to refused_record, counted (so one
 * bad record cannot block the journal, and none is lost silently). -1 only when the
 * connection broke meanwhile. */
static int write_each(struct lane *l, struct jobchange *recs, size_t n, int *lost)
{
    MYSQL *db = l->db;
    for (size_t i = 0; i < n; i++) {
        if (write_batch(l, NULL, &recs[i], 1, journal.instance, lost) == 0)
            continue;
        if (*lost)
            return -1;
        const char *error = l->last_error;
        log_error("journal: MySQL refused the record for job %llu (%s -> %s): %s; kept in refused_record",
                  (unsigned long long)recs[i].id, job_state_name(recs[i].from), job_state_name(recs[i].to), error);
        metrics_inc(MC_MYSQL_ERRORS, 1);
        metrics_inc(MC_JOURNAL_REFUSED, 1);
        if (park_refused(db, &recs[i], error) < 0 && db_error_is_connection(db)) {
            *lost = 1;
            return -1;
        }
    }
    return 0;
}

/* The whole batch was refused (not a connection problem): retry group by group. A push's
 * rows stand or fall together (its client gets 503); an outbox batch is split so only the
 * records refused alone are dropped. Returns -1 if the connection broke meanwhile, with the
 * groups not yet settled left in *groups. */
static int settle_refused(struct lane *l, struct jsync **groups, struct jobchange *taken, size_t n, int *lost)
{
    while (*groups) {
        struct jsync *g = *groups, *next = g->next;
        g->next = NULL;
        int rc = write_batch(l, g, NULL, 0, journal.instance, lost);
        if (rc < 0 && !*lost && g->split)
            rc = write_each(l, g->recs, (size_t)g->n, lost);
        if (rc < 0 && *lost) {
            g->next = next;
            return -1;
        }
        *groups = next;
        complete(g, rc == 0);
    }
    return write_each(l, taken, n, lost);
}

/* A lane's connection is gone (or was never made): when no lane has one any more, refuse
 * durable submissions and answer the queued ones 503 (mark_down_locked); while another lane is
 * connected, the queue is left to it. Caller holds the lock. */
static void lane_down_locked(int was_connected)
{
    if (was_connected)
        journal.connected--;
    if (journal.connected == 0)
        mark_down_locked();
}

static void *journal_main(void *arg)
{
    struct lane *l = arg;
    char name[16];
    snprintf(name, sizeof name, l->index == 0 ? "journal" : "journal-%d", l->index);
    log_set_thread_name(name);
    int64_t last_connect_try = 0;
    int warned_down = 0;
    size_t batch_cap = (size_t)journal.cfg->journal_batch;
    struct jobchange *taken = malloc(batch_cap * sizeof *taken);
    if (taken == NULL) {
        log_error("journal: out of memory at start");
        abort();
    }

    pthread_mutex_lock(&journal.lock);
    for (;;) {
        int ring_work = journal.count > 0 && !journal.ring_taken;
        int has_work = journal.sync_head != NULL || ring_work;
        if (bgthread_stop_due_locked(&journal.bg, !has_work))
            break;

        if (l->db == NULL) {
            int64_t now = clock_mono_us();
            if (now - last_connect_try < 1000000) {
                wait_locked(1000000 - (now - last_connect_try));
                continue;
            }
            last_connect_try = now;
            pthread_mutex_unlock(&journal.lock);
            (void)lane_connect(l); /* l->db stays NULL when it failed */
            pthread_mutex_lock(&journal.lock);
            if (l->db == NULL) {
                if (!warned_down && journal.connected == 0)
                    log_warn("journal: MySQL is unreachable; pushes and deletes get 503 until it is back; "
                             "transitions wait in the Redis outbox");
                warned_down = 1;
                lane_down_locked(0); /* durable submissions cannot wait for a reconnect: 503 */
                continue;
            }
            if (warned_down)
                metrics_inc(MC_MYSQL_RECONNECTS, 1);
            if (l->ticket.ok) /* the log line's thread names the lane */
                log_info("journal: connected to MySQL (connection %llu)", (unsigned long long)l->ticket.conn_id);
            else
                log_info("journal: connected to MySQL");
            warned_down = 0;
            journal.connected++;
            journal.up = 1;
            metrics_gauge_set(MG_MYSQL_UP, 1);
            continue;
        }

        if (db_stale(l->db)) {
            /* [mysql] hosts: another thread moved the process to the next node (dbnode.h). Between
             * cycles nothing is open: reconnect now, without a 503, to where the others write. */
            pthread_mutex_unlock(&journal.lock);
            log_info("journal: following the other connections to the MySQL node now in use");
            lane_close(l);
            last_connect_try = 0;
            pthread_mutex_lock(&journal.lock);
            journal.connected--;
            continue;
        }

        if (!has_work) {
            wait_locked(1000000);
            continue;
        }

        /* Take every durable group and, unless another lane holds the ring's head, a batch of
         * the local records. */
        struct jsync *groups = journal.sync_head;
        long group_records = journal.sync_records;
        journal.sync_head = journal.sync_tail = NULL;
        journal.sync_records = 0;
        size_t n = 0;
        if (ring_work) {
            n = journal.count < batch_cap ? journal.count : batch_cap;
            for (size_t i = 0; i < n; i++)
                taken[i] = journal.ring[(journal.head + i) % journal.cap];
            journal.ring_taken = 1;
        }
        pthread_mutex_unlock(&journal.lock);

        int64_t t0 = clock_mono_us();
        int lost = 0;
        l->commit_in_doubt = 0;
        l->after_conflict = 0;
        int rc = write_all(l, &groups, taken, n, &lost);
        for (int again = 1; again <= LOCK_RETRIES && rc < 0 && lost && lock_conflict_victim(l); again++) {
            log_warn("journal: MySQL rolled this cycle back on a lock (%s); writing it again (%d of %d)", l->last_error,
                     again, LOCK_RETRIES);
            metrics_inc(MC_JOURNAL_LOCK_RETRIES, 1);
            /* On Galera the winner of a certification conflict committed on another node and may
             * not be applied on this one yet: written again at once, the cycle would be certified
             * against the same write and fail again. So the attempt waits for the cluster first
             * (after_conflict), and the pause spaces the attempts (on one server, two cycles that
             * deadlocked would meet again at once). */
            usleep((useconds_t)(LOCK_RETRY_PAUSE_US * again));
            lost = 0;
            l->after_conflict = 1;
            rc = write_all(l, &groups, taken, n, &lost);
        }
        int64_t t1 = clock_mono_us();
        if (rc == 0) {
            metrics_observe(MH_MYSQL_COMMIT, (double)(t1 - t0) / 1e6);
            metrics_observe(MH_JOURNAL_BATCH, (double)((size_t)group_records + n));
            metrics_inc(MC_JOURNAL_RECORDS, (uint64_t)group_records + n);
            metrics_inc(MC_JOURNAL_BATCHES, 1);
        } else if (!lost) { /* refused, not lost: write_batch left commit_in_doubt at 0 */
            rc = settle_refused(l, &groups, taken, n, &lost);
        }

        if (lost) {
            /* The connection broke: the unsettled durable submitters get their 503 now, the
             * local records stay queued for the next connection. */
            if (l->commit_in_doubt)
                note_in_doubt(groups, &l->ticket);
            lane_close(l);
            last_connect_try = clock_mono_us();
            pthread_mutex_lock(&journal.lock);
            /* Down first, then the 503s: a client that heard its 503 and asks /health must
             * not be told MySQL is up (FaultSeamTest waits for health to come back). */
            lane_down_locked(1);
            complete(groups, 0);
        } else {
            for (size_t i = 0; i < n; i++)
                free_rec(&taken[i]);
            pthread_mutex_lock(&journal.lock);
            journal.head = (journal.head + n) % (journal.cap ? journal.cap : 1);
            journal.count -= n;
        }
        if (n > 0) { /* written or left for the next connection: the ring's head is free for any lane */
            journal.ring_taken = 0;
            if (journal.count > 0)
                pthread_cond_broadcast(&journal.cond);
        }
        publish_backlog_locked();
    }

    if (journal.count > 0 || journal.sync_head)
        log_warn("journal: stopping with %zu local records not written to MySQL", journal.count);
    complete(journal.sync_head, 0);
    journal.sync_head = journal.sync_tail = NULL;
    journal.up = 0;
    if (l->db)
        journal.connected--;
    pthread_mutex_unlock(&journal.lock);
    lane_close(l);
    free(taken);
    mysql_thread_end();
    return NULL;
}

int journal_start(const struct config *cfg, const char *instance)
{
    journal.cfg = cfg;
    snprintf(journal.instance, sizeof journal.instance, "%s", instance);
    /* The per-row baseline measures one transaction after another: one lane. */
    int lanes = cfg->journal_per_row ? 1 : cfg->journal_lanes;
    if (lanes < 1)
        lanes = 1;
    if (lanes > JOURNAL_LANES_MAX)
        lanes = JOURNAL_LANES_MAX;
    for (int i = 0; i < lanes; i++) {
        journal.lanes[i] = (struct lane){.index = i};
        if (bgthread_start(&journal.bg, journal_main, &journal.lanes[i]) < 0) {
            if (i == 0)
                return -1;
            log_warn("journal: could not start lane %d; writing with %d", i + 1, i);
            break;
        }
    }
    return 0;
}

void journal_stop(int deadline_ms)
{
    if (!bgthread_running(&journal.bg))
        return;
    bgthread_stop(&journal.bg, deadline_ms);
    for (size_t i = 0; i < journal.count; i++)
        free_rec(&journal.ring[(journal.head + i) % journal.cap]);
    free(journal.ring);
    journal.ring = NULL;
    journal.cap = journal.count = journal.head = 0;
}
