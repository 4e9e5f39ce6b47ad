/* journal_bulk.h — a journal cycle's rows written through MariaDB's bulk binary protocol.
 *
 * A push costs MySQL one row, its message row, which records the push itself (schema 9: it had a
 * transition row of its own too); a delivery two transition rows and two updates of its message
 * row. Sent as text (journal_sql.h), the server
 * parses every value of every row: about a quarter of MariaDB's time under a push load went to
 * its SQL parser (docs/performance.md, figure 1's profile). Here three statements are prepared
 * once per connection — INSERT INTO message, INSERT IGNORE INTO transition, and an UPDATE of one
 * message row — and each is executed once per cycle (and ~1 MB chunk) with its rows bound as
 * arrays (libmariadb's array binding, STMT_ATTR_ARRAY_SIZE, which sends them as one
 * COM_STMT_BULK_EXECUTE): the values travel in binary and nothing is parsed per row.
 *
 * The rows are exactly those the text path writes (tests/integration/test_journal_bulk.py
 * compares the two paths row for row); the caller runs these in the text script's order, in the
 * same transaction — message rows, transition rows, then the message rows' updates (sorted by
 * job, as the text path's UPDATE ... JOIN meets them) — so two writers meet the locks in one
 * order.
 *
 * Only when the server and the client library can: MariaDB 10.2+ announces bulk operations
 * in its extended capabilities; against a server that does not (MySQL), or a client library
 * without array binding, journal_bulk_new answers NULL and the journal writes text as before.
 * Statements go through db_stmt_execute, so the fault seam counts each as a statement (and the
 * one that commits by itself as a commit). */
#ifndef HG_JOURNAL_BULK_H
#define HG_JOURNAL_BULK_H

#include <mysql.h>
#include <stddef.h>

#include "core/jobchange.h"

struct journal_bulk;

/* Prepare the three statements on `db` (a journal connection, after its schema check). NULL when
 * the server or library cannot do bulk operations, or a statement could not be prepared (then
 * *why says which, for one line of the log). */
struct journal_bulk *journal_bulk_new(MYSQL *db, const char **why);

/* Close the statements (before the connection is closed) and free. NULL is fine. */
void journal_bulk_free(struct journal_bulk *jb);

/* Each writes its rows in chunks of about `chunk_bytes` of values, and answers 0, or -1 with
 * the connection's error set (mysql_errno of the handle), as a failed statement of the script
 * would leave it. */

/* The message rows of new jobs (JC_INSERT records with their job), each with its push (`instance`
 * when the record names none). */
int journal_bulk_messages(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance,
                          size_t chunk_bytes);

/* Do the message rows of recs[0..n) fit in one statement of about `chunk_bytes`? */
int journal_bulk_messages_fit(const struct jobchange *const *recs, size_t n, size_t chunk_bytes);

/* The message rows of recs[0..n) as ONE statement, on a connection in autocommit: the statement
 * commits them by itself (all or none), so it is the cycle's commit, and it goes through the
 * fault seam as one (db_stmt_commit). The caller checked journal_bulk_messages_fit. */
int journal_bulk_messages_commit(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n,
                                 const char *instance);

/* The transition rows of recs[0..n); `instance` is written where a record names none. */
int journal_bulk_transitions(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n,
                             const char *instance, size_t chunk_bytes);

/* The newest of updates[0..n) per job (sorted by journal_sql_sort_updates) applied to its message
 * row where it is newer than the row, or forced: the text path's journal_update rows and UPDATE
 * ... JOIN. Replacements' bodies are the caller's (journal_sql_replacements). */
int journal_bulk_updates(struct journal_bulk *jb, const struct jobchange *const *updates, size_t n, size_t chunk_bytes);

#endif
