/* db.h — MySQL/MariaDB connection helpers shared by the journal and the background
 * (restore, retention, history) threads. Every connection has connect/read/write timeouts,
 * so a hung server turns into an error within [mysql] timeout seconds instead of a hang. */
#ifndef HG_DB_H
#define HG_DB_H

#include <mysql.h>
#include <stddef.h>

#include "config.h"

#define SCHEMA_VERSION_REQUIRED 1

/* Connect with the configured timeouts, utf8mb4, autocommit off. NULL with err filled. */
MYSQL *db_connect(const struct config *cfg, char *err, size_t errlen);

/* Is the schema there and new enough? 0; -1 with err saying to apply sql/schema.sql;
 * -2 when the check itself failed (connection problem). */
int db_check_schema(MYSQL *db, char *err, size_t errlen);

/* Run one statement; logs and returns -1 on failure. */
int db_exec(MYSQL *db, const char *sql, size_t len) __attribute__((warn_unused_result));

/* Run several statements separated by ';' in one round trip (needs db_enable_scripts).
 * The server stops at the first failing one; logs it and returns -1. 0 when all succeeded,
 * with *affected (unless NULL) set to the rows the last statement without a result set
 * changed. */
int db_exec_script(MYSQL *db, const char *sql, size_t len, unsigned long long *affected)
    __attribute__((warn_unused_result));

/* Allow multi-statement scripts on this connection (only the journal's: its SQL is built
 * from escaped values, and the other connections never need it). 0 / -1. */
int db_enable_scripts(MYSQL *db) __attribute__((warn_unused_result));

/* Was this error a lost/broken connection (reconnect and retry) rather than a bad statement? */
int db_error_is_connection(MYSQL *db);

/* Append `s` escaped and single-quoted for SQL (uses the connection's charset). */
struct sbuf;
void db_quote(MYSQL *db, struct sbuf *sb, const char *s, size_t len);

#endif
