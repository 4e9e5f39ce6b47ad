/* retention.c — see retention.h. */
#include "retention.h"
#include "clock.h"
#include "db.h"
#include "dbtask.h"
#include "log.h"
#include "metrics.h"
#include "sbuf.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define BATCH 500
#define PAUSE_US 20000
#define MAX_BATCHES_PER_PASS 2000

static atomic_int running;
static atomic_llong deleted_total;

int64_t retention_deleted_total(void)
{
    return atomic_load(&deleted_total);
}

/* Delete up to BATCH old messages of one state. Returns how many, or -1. */
static int delete_batch(MYSQL *db, const char *state, int64_t cutoff)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT id FROM message WHERE state = '%s' AND updated_at < %lld ORDER BY updated_at LIMIT %d", state,
             (long long)cutoff, BATCH);
    if (mysql_query(db, sql) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL)
        return -1;
    struct sbuf ids = SBUF_INIT;
    int n = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL) {
        sb_printf(&ids, "%s%s", n ? "," : "", row[0]);
        n++;
    }
    mysql_free_result(res);
    if (n > 0) {
        struct sbuf q = SBUF_INIT;
        sb_printf(&q, "DELETE FROM transition WHERE message_id IN (%s)", ids.data);
        int rc = db_exec(db, q.data, q.len);
        sb_reset(&q);
        /* the state condition again: a forced restore may have revived one meanwhile */
        sb_printf(&q, "DELETE FROM message WHERE id IN (%s) AND state = '%s'", ids.data, state);
        if (rc == 0)
            rc = db_exec(db, q.data, q.len);
        if (rc == 0 && mysql_commit(db) != 0)
            rc = -1;
        if (rc < 0) {
            mysql_rollback(db);
            n = -1;
        }
        sb_free(&q);
    }
    mysql_commit(db);
    sb_free(&ids);
    return n;
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
        int n;
        while (batches < MAX_BATCHES_PER_PASS && !dbtask_stopping() && (n = delete_batch(db, terminal[s], cutoff)) > 0) {
            total += n;
            batches++;
            usleep(PAUSE_US);
        }
    }
    if (total > 0) {
        atomic_fetch_add(&deleted_total, total);
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
