/* dbfence.c — see dbfence.h. */
#include "mysql/dbfence.h"
#include "base/log.h"

#include <inttypes.h>
#include <mysqld_error.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Who this connection is and which server run it talks to; `host`: what the server's list of
 * connections shows as this connection's client ("ip:port", or "localhost" over a socket). */
static int identify(MYSQL *db, struct dbfence *t, char *host, size_t hostcap)
{
    static const char q[] =
        "SELECT CONNECTION_ID(), @@hostname, @@port, @@server_id, UNIX_TIMESTAMP() - s.VARIABLE_VALUE, "
        "(SELECT p.HOST FROM information_schema.PROCESSLIST p WHERE p.ID = CONNECTION_ID()) "
        "FROM information_schema.GLOBAL_STATUS s WHERE s.VARIABLE_NAME = 'UPTIME'";
    if (mysql_real_query(db, q, sizeof q - 1) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
    int rc = -1;
    if (row != NULL && row[0] && row[1] && row[2] && row[3] && row[4]) {
        /* FNV-1a over "hostname:port:server_id", from 1469598103934665603: one digit short of the
         * standard offset basis, and kept, since in-doubt lines written before carry this value
         * and compare it (any fixed start makes the same kind of hash) */
        char name[300];
        snprintf(name, sizeof name, "%s:%s:%s", row[1], row[2], row[3]);
        uint64_t h = 1469598103934665603ull;
        for (const char *p = name; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        *t = (struct dbfence){
            .ok = 1, .conn_id = strtoull(row[0], NULL, 10), .server = h, .started_s = strtoll(row[4], NULL, 10)};
        snprintf(host, hostcap, "%s", row[5] ? row[5] : "");
        rc = 0;
    }
    if (res)
        mysql_free_result(res);
    return rc;
}

/* Does the server see this connection's client where this process sits? Over TCP the list's
 * "ip:port" (or "name:port") must end in this socket's own port; over a Unix socket it says
 * "localhost". A relay in between shows its own port instead. */
static int seen_as_self(MYSQL *db, const char *host)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname((int)mysql_get_socket(db), (struct sockaddr *)&sa, &len) != 0)
        return 0;
    if (sa.ss_family == AF_UNIX)
        return strcmp(host, "localhost") == 0;
    unsigned port;
    if (sa.ss_family == AF_INET)
        port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
    else if (sa.ss_family == AF_INET6)
        port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    else
        return 0;
    const char *colon = strrchr(host, ':');
    return colon != NULL && strtoul(colon + 1, NULL, 10) == port;
}

int dbfence_take(MYSQL *db, struct dbfence *t)
{
    char host[300];
    *t = (struct dbfence){0}; /* identify fills it only when it succeeds */
    if (identify(db, t, host, sizeof host) < 0)
        return -1;
    if (!seen_as_self(db, host)) {
        log_info("mysql: the server lists this connection as '%s', not as this process's socket (a proxy in "
                 "between?): a connection whose answer is lost is not fenced before its outcome is read",
                 host);
        *t = (struct dbfence){0};
    }
    mysql_commit(db); /* the reads opened a transaction (autocommit is off): end it */
    return 0;
}

/* Is connection `id` still in the server's list? 1 / 0, -1 when the query failed. */
static int listed(MYSQL *db, uint64_t id)
{
    char q[128];
    int len = snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %" PRIu64, id);
    if (mysql_real_query(db, q, (unsigned long)len) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
    int rc = row && row[0] ? atoi(row[0]) > 0 : -1;
    if (res)
        mysql_free_result(res);
    return rc;
}

enum dbfence_result dbfence_close(MYSQL *db, const struct dbfence *t, int wait_ms)
{
    struct dbfence here;
    char host[300];
    enum dbfence_result r = DBFENCE_FAILED;
    if (!t->ok) {
        r = DBFENCE_ELSEWHERE;
    } else if (identify(db, &here, host, sizeof host) < 0) {
        r = DBFENCE_FAILED;
    } else if (here.server != t->server) {
        r = DBFENCE_ELSEWHERE;
    } else if (llabs(here.started_s - t->started_s) > 2) {
        r = DBFENCE_GONE; /* the server restarted since: every connection of its last run ended */
    } else if (here.conn_id == t->conn_id) {
        r = DBFENCE_GONE; /* cannot be: the old connection was closed before this one was made */
    } else {
        char q[64];
        int len = snprintf(q, sizeof q, "KILL CONNECTION %" PRIu64, t->conn_id);
        if (mysql_real_query(db, q, (unsigned long)len) != 0 && mysql_errno(db) == ER_KILL_DENIED_ERROR) {
            /* another user's (the [mysql] user changed since it was noted): not ours to close */
            log_warn("mysql: connection %" PRIu64 " is not this user's to KILL: %s", t->conn_id, mysql_error(db));
            r = DBFENCE_ELSEWHERE;
        } else if (mysql_errno(db) != 0 && mysql_errno(db) != ER_NO_SUCH_THREAD) {
            log_warn("mysql: KILL of connection %" PRIu64 " failed: %s", t->conn_id, mysql_error(db));
        } else {
            /* KILL only marks it: the connection may be finishing a commit. Gone from the list, it
             * is done. */
            for (int waited = 0;; waited += 10) {
                int on = listed(db, t->conn_id);
                if (on == 0) {
                    r = DBFENCE_GONE;
                    break;
                }
                if (on < 0 || waited >= wait_ms)
                    break;
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
    }
    if (r != DBFENCE_FAILED && mysql_commit(db) != 0)
        r = DBFENCE_FAILED;
    return r;
}

int dbfence_format(const struct dbfence *t, char *out, size_t cap)
{
    if (!t->ok)
        return snprintf(out, cap, "-");
    return snprintf(out, cap, "%" PRIu64 "/%016" PRIx64 "/%" PRId64, t->conn_id, t->server, t->started_s);
}

int dbfence_parse(const char *word, struct dbfence *t)
{
    *t = (struct dbfence){0};
    if (strcmp(word, "-") == 0)
        return 0;
    uint64_t id, server;
    int64_t started;
    int used = 0;
    if (sscanf(word, "%" SCNu64 "/%" SCNx64 "/%" SCNd64 "%n", &id, &server, &started, &used) != 3 || word[used] != '\0')
        return -1;
    *t = (struct dbfence){.ok = 1, .conn_id = id, .server = server, .started_s = started};
    return 0;
}

int dbfence_same(const struct dbfence *a, const struct dbfence *b)
{
    return a->ok == b->ok && a->conn_id == b->conn_id && a->server == b->server && a->started_s == b->started_s;
}
