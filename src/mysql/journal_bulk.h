/* journal_bulk.h — a journal cycle's new jobs written through MariaDB's bulk binary protocol.
 *
 * A push costs MySQL two rows: its message row and its first transition row. Sent as text
 * (journal_sql.h), the server parses every value of every row; about a quarter of MariaDB's
 * time under a push load went to its SQL parser (docs/performance.md, figure 1's profile).
 * Here the two INSERTs are prepared once per connection and executed once per cycle with the
 * rows bound as arrays (libmariadb's array binding, STMT_ATTR_ARRAY_SIZE, which sends them as
 * one COM_STMT_BULK_EXECUTE): the values travel in binary and nothing is parsed per row.
 *
 * The rows are exactly those journal_sql_message_row and journal_sql_transition_row write
 * (tests/integration/test_journal_bulk.py compares the two paths row for row); the caller
 * leaves the new jobs out of its text script and runs these first, in the same transaction,
 * so the locks are taken in the same order as before (message rows, then transition rows).
 *
 * Only when the server and the client library can: MariaDB 10.2+ announces bulk operations
 * in its extended capabilities; against a server that does not (MySQL), or a client library
 * without array binding, journal_bulk_new answers NULL and the journal writes text as before.
 * Statements go through db_stmt_execute, so the fault seam counts each as a statement. */
#ifndef HG_JOURNAL_BULK_H
#define HG_JOURNAL_BULK_H

#include <mysql.h>
#include <stddef.h>

#include "core/jobchange.h"

struct journal_bulk;

/* Prepare the two statements on `db` (a journal connection, after its schema check). NULL when
 * the server or library cannot do bulk operations, or a statement could not be prepared (then
 * *why says which, for one line of the log). */
struct journal_bulk *journal_bulk_new(MYSQL *db, const char **why);

/* Close the statements (before the connection is closed) and free. NULL is fine. */
void journal_bulk_free(struct journal_bulk *jb);

/* Insert the message rows, then the first transition rows, of recs[0..n) (JC_INSERT records
 * with their job), in chunks of about `chunk_bytes` of values each; `instance` is written where a
 * record names none. 0, or -1 with the connection's error set (mysql_errno of the handle), as
 * a failed statement of the script would leave it. */
int journal_bulk_insert(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance,
                        size_t chunk_bytes);

#endif
