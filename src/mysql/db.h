/* db.h — MySQL/MariaDB connection helpers shared by the journal and the background
 * (restore, retention, history) threads. Every connection has connect/read/write timeouts,
 * so a hung server turns into an error within [mysql] timeout seconds instead of a hang.
 * db_exec, db_exec_script and db_commit carry the fault seam (fault.h): a test can make a
 * chosen statement or COMMIT fail, lose its answer or hang. */
#ifndef HG_DB_H
#define HG_DB_H

#include <mysql.h>
#include <stddef.h>

#include "core/config.h"

#define SCHEMA_VERSION_REQUIRED 9

/* The columns the journal writes, in the order its INSERTs list them; db_check_schema()
 * reads them all, so a table made by an older sql/schema.sql is refused at start rather than
 * failing every journal cycle. */
#define MESSAGE_COLUMNS                                                                                                \
    "id,topic,biz_key,body,run_at,priority,ttr,tries,attempts,backoff,state,version,created_at,updated_at,"            \
    "far_shard,far_run_at,traceparent,tracestate,group_key,push_state,push_actor,push_host,push_instance"
#define TRANSITION_COLUMNS    "message_id,version,from_state,to_state,at,actor,host,instance,attempts"
#define REFUSED_COLUMNS       "message_id,at,error,record,instance"
#define TOPIC_SETTING_COLUMNS "topic,settings,seq,updated_at"
#define TOPIC_CHANGE_COLUMNS  "topic,at,actor,host,instance,settings"

/* Connect with the configured timeouts, utf8mb4, autocommit off. With [mysql] hosts: to the node
 * the process uses (dbnode.h), moving on to the next while one cannot be connected to or cannot
 * take writes (a Galera node not ready, a read-only standby; so does a single server that is
 * either); on a Galera node the session reads with wsrep_sync_wait = 1. NULL with err filled
 * (every node tried, each one's error). */
MYSQL *db_connect(const struct config *cfg, char *err, size_t errlen);

/* Is `db` connected to a node other than the one the process uses now ([mysql] hosts, after a
 * move: dbnode.h)? Its owner closes it after its current transaction and connects again, so all
 * of an instance's connections come to agree on one node. 0 without a list, or for NULL. */
int db_stale(MYSQL *db);

/* Is this session on a Galera node, its reads waiting for the cluster (wsrep_sync_wait, set by
 * db_connect)? Ask once per connection; 0 on a server without Galera, or when asking failed. */
int db_is_galera(MYSQL *db);

/* Begin a transaction once this Galera node has applied every write set the cluster had
 * committed when it was called (START TRANSACTION, which wsrep_sync_wait makes wait as it does a
 * read). Call it between transactions: a statement inside an active transaction does not wait.
 * For writes that depend on rows another node committed: an UPDATE of a row this node has not
 * applied yet matches nothing, and certifies without a conflict. On a server without Galera it
 * only begins the transaction. Not a statement to the fault seam (it counts as a read). 0 / -1,
 * logged (the error is the connection's). */
int db_wait_for_cluster(MYSQL *db) __attribute__((warn_unused_result));

/* START TRANSACTION, on a connection in autocommit (which would otherwise commit each statement
 * by itself). Like db_wait_for_cluster, which is this on a Galera session: not a statement to
 * the fault seam. 0 / -1, logged. */
int db_begin(MYSQL *db) __attribute__((warn_unused_result));

/* Is the schema there, new enough, and are its tables' columns the ones this binary writes?
 * 0; -1 with err saying to apply sql/schema.sql; -3 when a table lacks a column (made by an
 * older sql/schema.sql: applying it again does not change the table); -2 when the check
 * itself failed (connection problem). */
int db_check_schema(MYSQL *db, char *err, size_t errlen);

/* Run one statement; logs and returns -1 on failure. */
int db_exec(MYSQL *db, const char *sql, size_t len) __attribute__((warn_unused_result));

/* COMMIT; logs and counts a failure, returns -1 (then db_error_is_connection tells whether
 * the answer was lost, i.e. the outcome is unknown). */
int db_commit(MYSQL *db) __attribute__((warn_unused_result));

/* Execute a prepared statement (its parameters bound; an array of them for a bulk operation):
 * a statement to the fault seam, as db_exec. Logs a failure as `what` and returns -1; the
 * error is then the connection's too (mysql_errno(db)). */
int db_stmt_execute(MYSQL *db, MYSQL_STMT *stmt, const char *what) __attribute__((warn_unused_result));

/* Execute a prepared statement that commits by itself (the connection in autocommit): as
 * db_stmt_execute, but the fault seam's commit point, and a failure is logged as a COMMIT's. */
int db_stmt_commit(MYSQL *db, MYSQL_STMT *stmt, const char *what) __attribute__((warn_unused_result));

/* Run several statements separated by ';' in one round trip (needs db_enable_scripts).
 * The server stops at the first failing one; logs it and returns -1. 0 when all succeeded,
 * with *affected (unless NULL) set to the rows the last statement without a result set
 * changed. */
int db_exec_script(MYSQL *db, const char *sql, size_t len, unsigned long long *affected)
    __attribute__((warn_unused_result));

/* Run the query `sql` holds (and free it): its result set, or NULL (the statement failed, or
 * returned none). For reads; the fault seam's mysql.exec applies (a test can stop a thread
 * that only reads, such as the pager's reader). */
struct sbuf;
MYSQL_RES *db_query(MYSQL *db, struct sbuf *sql);

/* Allow multi-statement scripts on this connection (only the journal's: its SQL is built
 * from escaped values, and the other connections never need it). 0 / -1. */
int db_enable_scripts(MYSQL *db) __attribute__((warn_unused_result));

/* Was this error a lost/broken connection, or the server out of room for now (its disk or a
 * table full, out of memory), or a Galera node that left the cluster (1047, and 1180 from a
 * COMMIT it could not replicate) — reconnect and retry — rather than a bad statement? A record
 * is refused (refused_record) only for what retrying cannot fix. */
int db_error_is_connection(MYSQL *db);
/* Was error number `err` a deadlock or a lock wait timeout: the transaction (or, for a lock
 * wait, its statement) rolled back by the server, the connection itself still good? Such
 * errors also count as db_error_is_connection, for callers that simply reconnect. On Galera a
 * deadlock is also how a COMMIT that failed certification answers (another node committed a
 * conflicting write first): the transaction was rolled back everywhere, so its outcome is
 * known — not committed — and writing it again is right. */
int db_errno_is_lock_conflict(unsigned err);

/* Append `s` escaped and single-quoted for SQL (uses the connection's charset). */
void db_quote(MYSQL *db, struct sbuf *sb, const char *s, size_t len);

/* Shut the socket of `db`, a MYSQL * (another thread may be blocked in a call on it: it fails
 * now). The connection must still be closed by its owner. A bgthread_cut_fn (bgthread.h), for a
 * stop to cut loose a thread blocked on it. */
void db_cut(void *db);

#endif
