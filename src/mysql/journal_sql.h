/* journal_sql.h — the SQL text of one journal cycle, built from records. No I/O of its own:
 * the statements go out through the `send` callback, so a unit test can read exactly what
 * MySQL would be sent (tests/unit/test_journal_sql.c).
 *
 * A cycle is a multi-statement script of:
 *   INSERT INTO message (...) VALUES (...),(...)            — one row per new job, its push in it
 *   INSERT IGNORE INTO transition (...) VALUES (...),(...)  — one row per other record
 *   DELETE FROM journal_update; INSERT INTO journal_update ...; UPDATE message m JOIN ...
 *                                                           — the newest update per job,
 *                                                             applied only where it is newer
 *   UPDATE message SET body = ... WHERE id = .. AND version = ..   — per replacement
 * Rows of one kind are gathered into one multi-row INSERT; adding a row of another kind ends
 * the statement being built first, so any call order yields valid SQL. Once the script
 * passes `flush_bytes` it is handed to `send` between statements (never inside one), so a
 * huge batch is sent in pieces of bounded size within the same transaction.
 *
 * Values are escaped with the MySQL handle's charset (db_quote); numbers are written by
 * sbuf's digit loops. Strings of fixed-size record fields are read up to their NUL or size. */
#ifndef HG_JOURNAL_SQL_H
#define HG_JOURNAL_SQL_H

#include <mysql.h>
#include <stddef.h>

#include "core/jobchange.h"
#include "base/sbuf.h"

/* Called with a script of complete statements (each ended by ';'); 0 or -1 (stop). */
typedef int (*journal_sql_send_fn)(void *arg, const char *sql, size_t len);

struct journal_sql {
    MYSQL *db;          /* for escaping only: never queried */
    size_t flush_bytes; /* hand the script to `send` once it is longer than this */
    journal_sql_send_fn send;
    void *send_arg;
    struct sbuf sql;  /* complete statements, then the one being built */
    const char *head; /* the INSERT being built (its "INSERT ... VALUES "), NULL if none */
    int rows;         /* rows in it */
};

void journal_sql_init(struct journal_sql *b, MYSQL *db, size_t flush_bytes, journal_sql_send_fn send, void *send_arg);
void journal_sql_free(struct journal_sql *b);

/* A new job's message row (r->kind == JC_INSERT, r->job set), its push recorded in it (push_state,
 * push_actor, push_host, push_instance: schema 9), so that a push writes no transition row.
 * `instance` is written when the record names none. 0 / -1. */
int journal_sql_message_row(struct journal_sql *b, const struct jobchange *r, const char *instance);

/* A record's transition row (any change but a push); `instance` is written when the record names
 * none. 0 / -1. */
int journal_sql_transition_row(struct journal_sql *b, const struct jobchange *r, const char *instance);

/* Sort updates[0..n) in place by job, then version (a forced change after an unforced one of
 * the same version): a job's newest change ends its run (journal_sql_newest_update). */
void journal_sql_sort_updates(const struct jobchange **updates, size_t n);

/* Whether sorted updates[i] is its job's newest: the one its message row takes. */
static inline int journal_sql_newest_update(const struct jobchange *const *updates, size_t n, size_t i)
{
    return i + 1 == n || updates[i + 1]->id != updates[i]->id;
}

/* Apply the newest of updates[0..n) per job to its message row (the array is sorted in
 * place), then journal_sql_replacements. 0 / -1. */
int journal_sql_update_messages(struct journal_sql *b, const struct jobchange **updates, size_t n);

/* The body/priority/ttr/tries (and trace context, group) of the replacements among
 * updates[0..n), each applied only if its version is still the row's. 0 / -1. */
int journal_sql_replacements(struct journal_sql *b, const struct jobchange *const *updates, size_t n);

/* One refused_record row: the record as JSON with the server's error (its own statement). */
int journal_sql_refused_row(struct journal_sql *b, const struct jobchange *r, const char *error, int64_t at,
                            const char *instance);

/* End the statement being built and hand everything built to `send`. 0 / -1 (also when
 * memory ran out while building: nothing incomplete is ever sent). */
int journal_sql_send(struct journal_sql *b);

/* The far tier (architecture.md, "Tiers"), written after everything above in a cycle so that
 * the locks are taken in the order every writer of these tables keeps: message rows, far_biz,
 * far_count last. A new far job's key (far_shard, far_run_at) is in its message row
 * (journal_sql_message_row), so it costs no statement of its own.
 * journal_sql_far_inserts: the far_biz rows of new far jobs that carry a bizKey (JC_INSERT to
 * JS_FAR); journal_sql_far_counts: their far_count additions, one row per topic, in job_topic_cmp order
 * (job.h; it sorts recs[0..n) so).
 * journal_sql_far_change: a JC_FAR_LEAVE or JC_FAR_MOVE record, the k-th of the script's;
 * journal_sql_far_leave_counts: the far_count subtractions of changes[0..n) (the same k's). 0 / -1. */
int journal_sql_far_inserts(struct journal_sql *b, const struct jobchange *const *recs, size_t n);
int journal_sql_far_counts(struct journal_sql *b, const struct jobchange **recs, size_t n);
int journal_sql_far_change(struct journal_sql *b, const struct jobchange *r, size_t k, const char *instance);
int journal_sql_far_leave_counts(struct journal_sql *b, const struct jobchange *const *changes, size_t n);

/* biz_latest (GET /jobs?topic=&bizKey=): the newest job pushed with each (topic, bizKey).
 * journal_sql_biz_latest: upserts for the new jobs among recs[0..n) that carry a bizKey (JC_INSERT);
 * the higher id wins (ids are time-ordered), the one it displaced is kept as prev_id.
 * journal_sql_biz_aborted: for each record to JS_ABORTED (a push that never became a job), a row
 * still pointing at it points back at its biz_holder, else at prev_id. 0 / -1. */
int journal_sql_biz_latest(struct journal_sql *b, const struct jobchange *const *recs, size_t n);
int journal_sql_biz_aborted(struct journal_sql *b, const struct jobchange *const *recs, size_t n);

/* A record as JSON (what an operator needs to replay it by hand). */
void journal_sql_record_json(struct sbuf *sb, const struct jobchange *r);

#endif
