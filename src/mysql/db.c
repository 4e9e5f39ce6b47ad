/* db.c — see db.h. */
#include "mysql/db.h"
#include "mysql/dbnode.h"
#include "base/fault.h"
#include "base/log.h"
#include "core/metrics.h"
#include "base/sbuf.h"

#include <errmsg.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* The values of a SHOW VARIABLES / SHOW STATUS: each row's value (second column) whose name
 * (first column, any case) is names[i] goes to out[i] (left empty when there is no such row). */
static int show_values(MYSQL *db, const char *sql, const char *const *names, char (*out)[16], int n)
{
    for (int i = 0; i < n; i++)
        out[i][0] = '\0';
    if (mysql_query(db, sql) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL)
        return -1;
    for (MYSQL_ROW row; mysql_num_fields(res) >= 2 && (row = mysql_fetch_row(res)) != NULL;)
        for (int i = 0; i < n; i++)
            if (row[0] && row[1] && strcasecmp(row[0], names[i]) == 0)
                snprintf(out[i], sizeof out[i], "%s", row[1]);
    mysql_free_result(res);
    return 0;
}

/* Can this node take the daemon's writes? With [mysql] hosts a connection goes where the writes
 * go, so a node that cannot take them counts as failed and the next is tried:
 * - a Galera node takes a connection before it can serve it: outside the primary component (cut
 *   off from the majority) or while it joins, every statement is answered 1047 "WSREP has not
 *   yet prepared node for application use";
 * - a standby (read_only) refuses writes until it is promoted.
 * A Galera node that is ready gets wsrep_sync_wait = 1 on the session: a read waits until the
 * node has applied every write the cluster committed before it (docs/architecture.md, "MySQL as
 * a cluster": why, and what it costs). A server without Galera (wsrep_on absent, as on MySQL,
 * or OFF) and writable needs nothing. 0 / -1 with err filled. */
static int node_prepare(MYSQL *db, char *err, size_t errlen)
{
    static const char *const vars[] = {"wsrep_on", "read_only"}, *const status[] = {"wsrep_ready", "wsrep_local_state"};
    char v[2][16], st[2][16];
    if (show_values(db, "SHOW VARIABLES WHERE Variable_name IN ('wsrep_on', 'read_only')", vars, v, 2) < 0)
        goto failed;
    if (strcasecmp(v[0], "ON") != 0) {
        if (strcasecmp(v[1], "ON") == 0) {
            snprintf(err, errlen, "read-only (a standby not promoted)");
            return -1;
        }
        return 0;
    }
    if (show_values(db, "SHOW STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state')", status, st, 2) < 0)
        goto failed;
    /* wsrep_local_state 4 = Synced, 2 = Donor/Desynced (serves, and catches up on its own) */
    if (strcasecmp(st[0], "ON") != 0 || (strcmp(st[1], "4") != 0 && strcmp(st[1], "2") != 0)) {
        snprintf(err, errlen,
                 "Galera node not ready (wsrep_ready %s, wsrep_local_state %s): outside the primary component or "
                 "not synced",
                 st[0][0] ? st[0] : "?", st[1][0] ? st[1] : "?");
        return -1;
    }
    static const char sync[] = "SET SESSION wsrep_sync_wait = 1";
    if (mysql_real_query(db, sync, sizeof sync - 1) != 0)
        goto failed;
    return 0;
failed:
    snprintf(err, errlen, "%s", mysql_error(db));
    return -1;
}

/* One server: host:port, or the socket when given. */
static MYSQL *connect_to(const struct config *cfg, const char *host, int port, const char *socket, char *err,
                         size_t errlen)
{
    MYSQL *db = mysql_init(NULL);
    if (db == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    unsigned int timeout = (unsigned int)cfg->mysql_timeout;
    my_bool off = 0;
    mysql_options(db, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(db, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(db, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    mysql_options(db, MYSQL_OPT_RECONNECT, &off); /* we reconnect ourselves, knowing what was lost */
    mysql_options(db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (mysql_real_connect(db, socket ? NULL : host, cfg->mysql_user, cfg->mysql_password, cfg->mysql_database,
                           (unsigned int)port, socket, 0) == NULL) {
        snprintf(err, errlen, "%s", mysql_error(db));
        mysql_close(db);
        return NULL;
    }
    if (mysql_autocommit(db, 0) != 0) {
        snprintf(err, errlen, "autocommit off failed: %s", mysql_error(db));
        mysql_close(db);
        return NULL;
    }
    if (node_prepare(db, err, errlen) < 0) {
        mysql_close(db);
        return NULL;
    }
    return db;
}

MYSQL *db_connect(const struct config *cfg, char *err, size_t errlen)
{
    int n = cfg->mysql_socket[0] ? 0 : dbnode_setup(cfg);
    if (n <= 0) /* one server (a bad list is refused by config_validate before this runs) */
        return connect_to(cfg, cfg->mysql_host, cfg->mysql_port, cfg->mysql_socket[0] ? cfg->mysql_socket : NULL, err,
                          errlen);
    /* The node in use first; each that fails moves the whole process on (dbnode.h), so the
     * other threads' next connections go where this one went. Every node once at most. */
    size_t used = 0;
    err[0] = '\0';
    for (int tries = 0; tries < n; tries++) {
        int i = dbnode_current();
        const struct netaddr *a = dbnode_at(i);
        char why[300];
        MYSQL *db = connect_to(cfg, a->host, a->port, NULL, why, sizeof why);
        if (db != NULL)
            return db;
        if (used < errlen) {
            int k = snprintf(err + used, errlen - used, "%s%s:%d: %s", used ? "; " : "", a->host, a->port, why);
            used += k > 0 ? (size_t)k : 0;
        }
        dbnode_failed(i, why);
    }
    return NULL;
}

int db_stale(MYSQL *db)
{
    if (db == NULL || dbnode_count() < 2)
        return 0;
    const char *host = NULL;
    unsigned int port = 0;
    if (mariadb_get_infov(db, MARIADB_CONNECTION_HOST, &host) != 0 ||
        mariadb_get_infov(db, MARIADB_CONNECTION_PORT, &port) != 0 || host == NULL)
        return 0; /* cannot tell: left to fail on its own if its node is gone */
    const struct netaddr *a = dbnode_at(dbnode_current());
    return strcmp(host, a->host) != 0 || (int)port != a->port;
}

int db_check_schema(MYSQL *db, char *err, size_t errlen)
{
    static const char sql[] = "SELECT MAX(version) FROM schema_version";
    if (mysql_real_query(db, sql, sizeof sql - 1) != 0) {
        unsigned int e = mysql_errno(db);
        if (e == ER_NO_SUCH_TABLE || e == ER_BAD_DB_ERROR) {
            snprintf(err, errlen, "the hourglass tables are missing: apply sql/schema.sql to this database (%s)",
                     mysql_error(db));
            return -1;
        }
        snprintf(err, errlen, "schema check failed: %s", mysql_error(db));
        return -2;
    }
    MYSQL_RES *res = mysql_store_result(db);
    MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
    long version = row && row[0] ? atol(row[0]) : 0;
    if (res)
        mysql_free_result(res);
    mysql_commit(db);
    if (version < SCHEMA_VERSION_REQUIRED) {
        snprintf(err, errlen, "schema version %ld is older than %d: apply sql/schema.sql", version,
                 SCHEMA_VERSION_REQUIRED);
        return -1;
    }
    /* Every column the journal writes: CREATE TABLE IF NOT EXISTS leaves a table made by an
     * older sql/schema.sql as it was, and the schema version alone would not tell. */
    static const char *const checks[][2] = {
        {"message", "SELECT " MESSAGE_COLUMNS " FROM message LIMIT 0"},
        {"transition", "SELECT " TRANSITION_COLUMNS " FROM transition LIMIT 0"},
        {"job_history", "SELECT " TRANSITION_COLUMNS " FROM job_history LIMIT 0"},
        {"refused_record", "SELECT " REFUSED_COLUMNS " FROM refused_record LIMIT 0"},
        {"topic_setting", "SELECT " TOPIC_SETTING_COLUMNS " FROM topic_setting LIMIT 0"},
        {"topic_change", "SELECT " TOPIC_CHANGE_COLUMNS " FROM topic_change LIMIT 0"}};
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        if (mysql_real_query(db, checks[i][1], (unsigned long)strlen(checks[i][1])) != 0) {
            if (mysql_errno(db) == ER_BAD_FIELD_ERROR) {
                snprintf(err, errlen,
                         "table %s is not the one sql/schema.sql defines (%s): it was made by an older "
                         "sql/schema.sql; bring it to the current definition (or start from an empty database)",
                         checks[i][0], mysql_error(db));
                return -3;
            }
            snprintf(err, errlen, "table %s: %s: apply sql/schema.sql", checks[i][0], mysql_error(db));
            return db_error_is_connection(db) ? -2 : -1;
        }
        MYSQL_RES *r = mysql_store_result(db);
        if (r)
            mysql_free_result(r);
    }
    mysql_commit(db);
    return 0;
}

int db_errno_is_lock_conflict(unsigned err)
{
    return err == ER_LOCK_DEADLOCK || err == ER_LOCK_WAIT_TIMEOUT;
}

int db_error_is_connection(MYSQL *db)
{
    if (db_errno_is_lock_conflict(mysql_errno(db)))
        return 1; /* the transaction is gone: callers that simply reconnect retry it too */
    switch (mysql_errno(db)) {
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_SERVER_LOST_EXTENDED:
    case CR_COMMANDS_OUT_OF_SYNC:
    case ER_SERVER_SHUTDOWN:
    case ER_CONNECTION_KILLED:
    case ER_QUERY_INTERRUPTED:
    case ER_OPTION_PREVENTS_STATEMENT: /* read-only server during failover */
    /* Galera: 1047 "WSREP has not yet prepared node for application use" — the node left the
     * primary component (or has not synced): a new connection finds it not ready and moves to
     * the next node (db_connect). 1180 is how a COMMIT whose replication failed answers (the
     * node lost the cluster mid-commit): whether the others applied it is unknown, as for a
     * lost answer. */
    case ER_UNKNOWN_COM_ERROR:
    case ER_ERROR_DURING_COMMIT:
    /* out of room: the disk, a table, memory. Nothing is wrong with the statement; it goes
     * through once the operator has made room (before, a journal record met this was set
     * aside in refused_record and its job stayed behind Redis for good) */
    case ER_RECORD_FILE_FULL:
    case ER_DISK_FULL:
    case ER_ERROR_ON_WRITE:
    case ER_OUT_OF_RESOURCES:
    case ER_OUTOFMEMORY:
        return 1;
    case ER_GET_ERRNO: /* "Got error 28 ... from storage engine": ENOSPC */
        return strncmp(mysql_error(db), "Got error 28 ", 13) == 0;
    default:
        return mysql_errno(db) >= 2000 && mysql_errno(db) < 3000; /* client-side errors */
    }
}

static enum fault_action fault_before(MYSQL *db, enum fault_point point);
static int fault_after(MYSQL *db, enum fault_action f);
static void note_failure(MYSQL *db, const char *what, int statement, const char *sql);

MYSQL_RES *db_query(MYSQL *db, struct sbuf *sql)
{
    enum fault_action f = sql->oom ? FA_NONE : fault_before(db, FP_MYSQL_EXEC); /* reads are statements too */
    int rc = sql->oom ? -1 : mysql_real_query(db, sql->data, sql->len);
    sb_free(sql);
    MYSQL_RES *res = rc == 0 ? mysql_store_result(db) : NULL;
    if (res != NULL && fault_after(db, f) < 0) {
        mysql_free_result(res);
        res = NULL;
    }
    return res;
}

int db_is_galera(MYSQL *db)
{
    /* node_prepare set the sync wait on every Galera session; both, or the read would not wait */
    static const char q[] = "SELECT @@SESSION.wsrep_on = 1 AND (@@SESSION.wsrep_sync_wait & 1) = 1";
    if (mysql_real_query(db, q, sizeof q - 1) != 0)
        return 0; /* no such variables: MySQL without wsrep */
    MYSQL_RES *res = mysql_store_result(db);
    MYSQL_ROW row = res != NULL ? mysql_fetch_row(res) : NULL;
    int waits = row != NULL && row[0] != NULL && atoi(row[0]) != 0;
    if (res != NULL)
        mysql_free_result(res);
    return waits;
}

int db_begin(MYSQL *db)
{
    static const char q[] = "START TRANSACTION";
    if (mysql_real_query(db, q, sizeof q - 1) != 0) { /* as a read: not a statement to the fault seam */
        note_failure(db, "statement", 1, q);
        return -1;
    }
    return 0;
}

int db_wait_for_cluster(MYSQL *db)
{
    /* wsrep_sync_wait bit 1 covers BEGIN as well as reads; and it opens the transaction, which
     * the cycle's statements would have opened anyway (autocommit is off) */
    return db_begin(db);
}

void db_cut(void *db)
{
    shutdown((int)mysql_get_socket(db), SHUT_RDWR);
}

/* ---- the fault seam (fault.h) ----
 * Faults are made with the real connection so that every error path runs as it would:
 * "fail" shuts the socket before the statement is sent (the server rolls back, the client
 * sees CR_SERVER_LOST); "lost" lets the statement run and then shuts the socket, so the
 * caller gets a connection error for something that did happen. */

/* Before a statement: what the seam does to it (for "fail" it breaks the connection now). */
static enum fault_action fault_before(MYSQL *db, enum fault_point point)
{
    if (!fault_armed(point))
        return FA_NONE;
    enum fault_action f = fault_at(point);
    if (f == FA_FAIL)
        db_cut(db);
    return f;
}

/* After a statement that succeeded: -1 when the seam loses its answer (after the read
 * timeout for a hang); the connection's error is then the one a lost answer leaves. */
static int fault_after(MYSQL *db, enum fault_action f)
{
    if (f != FA_LOST && f != FA_HANG)
        return 0;
    if (f == FA_HANG) {
        unsigned int timeout = 0;
        mysql_get_option(db, MYSQL_OPT_READ_TIMEOUT, &timeout);
        sleep(timeout ? timeout : 1);
    }
    db_cut(db);
    if (mysql_ping(db) == 0) /* cannot succeed on a shut socket; if it did, say so rather than lie */
        log_error("fault seam: the connection survived its shutdown");
    return -1;
}

static void note_failure(MYSQL *db, const char *what, int statement, const char *sql)
{
    metrics_inc(MC_MYSQL_ERRORS, 1);
    log_warn("mysql: %s (errno %u) in %s %d of: %.120s", mysql_error(db), mysql_errno(db), what, statement, sql);
}

int db_commit(MYSQL *db)
{
    enum fault_action f = fault_before(db, FP_MYSQL_COMMIT);
    if (mysql_commit(db) != 0 || fault_after(db, f) < 0) {
        note_failure(db, "COMMIT", 1, "COMMIT");
        return -1;
    }
    return 0;
}

int db_exec(MYSQL *db, const char *sql, size_t len)
{
    enum fault_action f = fault_before(db, FP_MYSQL_EXEC);
    if (mysql_real_query(db, sql, (unsigned long)len) != 0 || fault_after(db, f) < 0) {
        note_failure(db, "statement", 1, sql);
        return -1;
    }
    return 0;
}

/* Execute `stmt` as the fault seam's `point`; a failure is logged as `kind`'s. */
static int stmt_execute_as(MYSQL *db, MYSQL_STMT *stmt, const char *what, enum fault_point point, const char *kind)
{
    enum fault_action f = fault_before(db, point);
    if (mysql_stmt_execute(stmt) != 0 || fault_after(db, f) < 0) {
        note_failure(db, kind, 1, what);
        return -1;
    }
    return 0;
}

int db_stmt_execute(MYSQL *db, MYSQL_STMT *stmt, const char *what)
{
    return stmt_execute_as(db, stmt, what, FP_MYSQL_EXEC, "prepared statement");
}

int db_stmt_commit(MYSQL *db, MYSQL_STMT *stmt, const char *what)
{
    return stmt_execute_as(db, stmt, what, FP_MYSQL_COMMIT, "COMMIT");
}

int db_exec_script(MYSQL *db, const char *sql, size_t len, unsigned long long *affected)
{
    /* mysql_real_query: 0 = the first statement succeeded; mysql_next_result: 0 = the next
     * one succeeded, -1 = there is no next one, > 0 = it failed. */
    enum fault_action f = fault_before(db, FP_MYSQL_EXEC);
    int failed = mysql_real_query(db, sql, (unsigned long)len) != 0;
    for (int statement = 1;; statement++) {
        if (failed) {
            note_failure(db, "statement", statement, sql);
            return -1;
        }
        MYSQL_RES *res = mysql_store_result(db); /* none expected; freed if a statement returned rows */
        if (res)
            mysql_free_result(res);
        else if (affected)
            *affected = mysql_affected_rows(db); /* this statement's: asked after the last one, it is -1 */
        int rc = mysql_next_result(db);
        if (rc < 0 && fault_after(db, f) < 0) {
            note_failure(db, "statement", statement, sql);
            return -1;
        }
        if (rc < 0)
            return 0;
        failed = rc > 0;
    }
}

int db_enable_scripts(MYSQL *db)
{
    return mysql_set_server_option(db, MYSQL_OPTION_MULTI_STATEMENTS_ON) == 0 ? 0 : -1;
}

void db_quote(MYSQL *db, struct sbuf *sb, const char *s, size_t len)
{
    sb_putc(sb, '\'');
    if (sb_reserve(sb, len * 2 + 1) < 0)
        return;
    unsigned long n = mysql_real_escape_string(db, sb->data + sb->len, s, (unsigned long)len);
    sb->len += n;
    sb->data[sb->len] = '\0';
    sb_putc(sb, '\'');
}
