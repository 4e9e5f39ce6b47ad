/* retention.c — see retention.h. */
#include "duties/retention.h"
#include "base/clock.h"
#include "mysql/db.h"
#include "mysql/dbtask.h"
#include "core/ids.h"
#include "base/log.h"
#include "core/metrics.h"
#include "base/sbuf.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define BATCH                500
#define PAUSE_US             20000
#define MAX_BATCHES_PER_PASS 2000
#define CONFLICT_RETRIES     5 /* lock conflicts met in one state's pass before it waits for the next */

static atomic_int running;

/* Look at the next BATCH messages of one state made before the cutoff (ids are time-ordered,
 * so that is an id range of idx_state_id, read in order from *after), and delete those whose
 * last change is older than the cutoff with their transitions. Returns rows looked at (0 =
 * done), -2 when the delete lost a lock conflict (nothing deleted: run it again from the same
 * *after), or -1; *deleted grows by what was deleted. */
static int delete_batch(MYSQL *db, const char *state, int64_t cutoff, uint64_t *after, long *deleted)
{
    char sql[320];
    snprintf(sql, sizeof sql,
             "SELECT id, updated_at < %lld FROM message FORCE INDEX (idx_state_id) WHERE state = '%s' AND id > %llu "
             "AND id <= %llu ORDER BY id LIMIT %d",
             (long long)cutoff, state, (unsigned long long)*after, (unsigned long long)id_max_at(cutoff), BATCH);
    if (mysql_query(db, sql) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL)
        return -1;
    struct sbuf ids = SBUF_INIT;
    int seen = 0, n = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL) {
        seen++;
        *after = strtoull(row[0], NULL, 10);
        if (row[1] == NULL || row[1][0] != '1')
            continue; /* made long ago but changed recently: kept */
        if (n++)
            sb_putc(&ids, ',');
        sb_puts(&ids, row[0]);
    }
    mysql_free_result(res);
    if (n > 0) {
        /* Between that read and now a forced restore may have revived a message: lock the
         * rows that are still terminal and old, and delete exactly those with their
         * transitions, in one transaction. A revived message keeps its history. */
        struct sbuf q = SBUF_INIT, still = SBUF_INIT;
        sb_printf(&q, "SELECT id FROM message WHERE id IN (%s) AND state = '%s' AND updated_at < %lld FOR UPDATE",
                  ids.data, state, (long long)cutoff);
        int rc = q.oom ? -1 : mysql_real_query(db, q.data, q.len) == 0 ? 0 : -1;
        MYSQL_RES *locked = rc == 0 ? mysql_store_result(db) : NULL;
        int nlocked = 0;
        for (MYSQL_ROW r; locked && (r = mysql_fetch_row(locked)) != NULL;) {
            if (nlocked++)
                sb_putc(&still, ',');
            sb_puts(&still, r[0]);
        }
        if (locked)
            mysql_free_result(locked);
        else
            rc = -1;
        if (rc == 0 && nlocked > 0) {
            sb_reset(&q);
            sb_printf(&q, "DELETE FROM message WHERE id IN (%s)", still.data);
            rc = db_exec(db, q.data, q.len);
            sb_reset(&q);
            sb_printf(&q, "DELETE FROM transition WHERE message_id IN (%s)", still.data);
            if (rc == 0)
                rc = db_exec(db, q.data, q.len);
            /* the bizKey lookup's rows for them: a key whose latest job is gone is unknown */
            sb_reset(&q);
            sb_printf(&q, "DELETE FROM biz_latest WHERE id IN (%s)", still.data);
            if (rc == 0)
                rc = db_exec(db, q.data, q.len);
        }
        if (rc == 0 && db_commit(db) < 0)
            rc = -1;
        if (rc < 0) {
            /* a deadlock, or on Galera a certification failure at COMMIT (a row it deletes was
             * changed through another node meanwhile): rolled back, the batch can run again */
            seen = db_errno_is_lock_conflict(mysql_errno(db)) ? -2 : -1;
            mysql_rollback(db);
        } else {
            *deleted += nlocked;
        }
        sb_free(&q);
        sb_free(&still);
    }
    mysql_commit(db);
    sb_free(&ids);
    return seen;
}

static void retention_run(MYSQL *db, void *arg)
{
    const struct config *cfg = arg;
    if (db == NULL) {
        atomic_store(&running, 0);
        return;
    }
    int64_t cutoff = clock_unix_ms() - (int64_t)cfg->retention_days * 86400000;
    static const char *const terminal[] = {"finished", "deleted", "dead", "aborted"};
    long total = 0;
    int batches = 0;
    for (int s = 0; s < 4; s++) {
        uint64_t after = 0;
        int conflicts = 0;
        while (batches < MAX_BATCHES_PER_PASS && !dbtask_stopping()) {
            uint64_t from = after;
            int seen = delete_batch(db, terminal[s], cutoff, &after, &total);
            if (seen == -2 && ++conflicts <= CONFLICT_RETRIES) {
                after = from; /* the same batch again, read anew: a row changed meanwhile is kept */
                usleep(PAUSE_US * conflicts);
                continue;
            }
            if (seen <= 0)
                break;
            batches++;
            usleep(PAUSE_US);
        }
    }
    if (total > 0) {
        metrics_inc(MC_RETENTION_DELETED, (uint64_t)total);
        log_info("retention: deleted %ld messages older than %d days", total, cfg->retention_days);
    }
    atomic_store(&running, 0);
}

void retention_schedule(const struct config *cfg)
{
    if (cfg->retention_days <= 0)
        return;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&running, &idle, 1))
        return;
    if (dbtask_submit(retention_run, NULL, NULL, (void *)cfg) < 0)
        atomic_store(&running, 0);
}
