/* dbfence.h — a connection whose last answer was lost, closed for good before its outcome is
 * read.
 *
 * When the answer to a COMMIT (or to a statement that commits by itself) never came, the journal
 * cannot tell whether MySQL committed; the reconciler (doubt.h) later reads the job's row to
 * find out. That reading is only an answer once the old connection can commit nothing more: a
 * hung server that resumes, or a packet that a broken link delivers late (the client's kernel
 * retransmits what it had sent, even after the socket was closed), runs what is still waiting
 * in the old connection — after the reconciler read "no row", if nothing stops it. So the
 * reconciler first KILLs the old connection by its id and waits until the server no longer lists
 * it: from then on, whatever it did is all it will ever do, and a packet that arrives later
 * finds its socket closed.
 *
 * A ticket names the connection: its id, and the server it lives on (hostname, port and
 * server_id, and when that server started: ids are unique within one run of a server only).
 * It is taken once, when the connection is made, and only when the server's own list of
 * connections shows this connection with this client's address: through a proxy (ProxySQL,
 * MaxScale, a test's TCP relay) the id would be the proxy's business, and no ticket is given.
 * Killing needs no privilege: a user may KILL its own connections, and every connection of an
 * instance uses the one [mysql] user. */
#ifndef HG_DBFENCE_H
#define HG_DBFENCE_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

struct dbfence {
    int ok;            /* 0: no ticket (not taken, or a proxy in between) */
    uint64_t conn_id;  /* CONNECTION_ID() */
    uint64_t server;   /* a hash of @@hostname, @@port and @@server_id */
    int64_t started_s; /* when that server started, unix s (±1: read as now - Uptime) */
};

/* Take the ticket of `db` (one query). 0 with t->ok set when the server lists this connection
 * with this client's address; 0 with t->ok = 0 when it does not (a proxy); -1 when the query
 * failed (the connection's error is set). */
int dbfence_take(MYSQL *db, struct dbfence *t) __attribute__((warn_unused_result));

enum dbfence_result {
    DBFENCE_GONE,      /* the old connection is gone: killed now, ended before, or its server restarted */
    DBFENCE_ELSEWHERE, /* not ours to close: `db` is on another server ([mysql] hosts moved on), or the
                        * connection belongs to another user (the [mysql] user changed since) */
    DBFENCE_FAILED,    /* a query failed, or the old connection was still listed after `wait_ms` */
};

/* Using `db` (another connection, to any server), make sure the connection ticket `t` names
 * commits nothing more: KILL it when it is on this server, then wait up to `wait_ms` for the
 * server to stop listing it. A ticket that is not ok answers DBFENCE_ELSEWHERE (nothing can be
 * done: the caller goes on as it did before tickets). Ends with a COMMIT, so that `db`'s next
 * read sees everything the old connection committed. */
enum dbfence_result dbfence_close(MYSQL *db, const struct dbfence *t, int wait_ms);

/* The ticket as one word for a text file ("-" when not ok) and back. format: the length
 * written (< cap), as snprintf. parse: 0, or -1 when `word` is not a ticket. */
#define DBFENCE_WORD_MAX 64
int dbfence_format(const struct dbfence *t, char *out, size_t cap);
int dbfence_parse(const char *word, struct dbfence *t);

/* Do two tickets name the same connection? */
int dbfence_same(const struct dbfence *a, const struct dbfence *b);

#endif
