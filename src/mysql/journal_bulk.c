/* journal_bulk.c — see journal_bulk.h.
 *
 * Column-wise array binding: every parameter is an array of n values (a pointer array and a
 * length array for strings), with an indicator array where a column may be NULL. The arrays
 * live in one arena per chunk, sized for its rows. */
#include "mysql/journal_bulk.h"
#include "mysql/db.h"
#include "mysql/journal_sql.h"
#include "base/log.h"
#include "core/job.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(MARIADB_PACKAGE_VERSION_ID) && MARIADB_PACKAGE_VERSION_ID >= 30000
#define HAVE_ARRAY_BINDING 1
#include <mariadb_com.h>
#endif

/* The columns of MESSAGE_COLUMNS with a parameter each, except attempts (0 for a new job). */
static const char MESSAGE_INSERT[] = "INSERT INTO message (" MESSAGE_COLUMNS ") VALUES "
                                     "(?,?,?,?,?,?,?,?,0,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
enum {
    M_ID,
    M_TOPIC,
    M_BIZ,
    M_BODY,
    M_RUN_AT,
    M_PRIORITY,
    M_TTR,
    M_TRIES,
    M_BACKOFF,
    M_STATE,
    M_VERSION,
    M_CREATED,
    M_UPDATED,
    M_FAR_SHARD,
    M_FAR_RUN_AT,
    M_TRACEPARENT,
    M_TRACESTATE,
    M_GROUP,
    M_PUSH_STATE,
    M_PUSH_ACTOR,
    M_PUSH_HOST,
    M_PUSH_INSTANCE,
    M_COLUMNS
};

static const char TRANSITION_INSERT[] = "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") VALUES "
                                        "(?,?,?,?,?,?,?,?,?)";
enum { T_ID, T_VERSION, T_FROM, T_TO, T_AT, T_ACTOR, T_HOST, T_INSTANCE, T_ATTEMPTS, T_COLUMNS };

/* A job's newest change in a cycle applied to its message row, only where it is newer than the
 * row (or forced: a delete, an abort) — the text path's UPDATE ... JOIN journal_update, row by
 * row: the version is bound twice, once to set and once to compare. */
static const char MESSAGE_UPDATE[] = "UPDATE message SET state = ?, attempts = ?, run_at = ?, updated_at = ?, "
                                     "version = ? WHERE id = ? AND (version < ? OR ? = 1)";
enum { U_STATE, U_ATTEMPTS, U_RUN_AT, U_AT, U_VERSION, U_ID, U_OLDER_THAN, U_FORCE, U_COLUMNS };

struct journal_bulk {
    MYSQL *db;
    MYSQL_STMT *message, *transition, *update;
};

#ifdef HAVE_ARRAY_BINDING

/* One column's arrays: numbers, or strings (pointer + length), and NULL indicators. */
struct column {
    long long *num;
    char **str;
    unsigned long *len;
    char *ind;
};

static MYSQL_STMT *prepare(MYSQL *db, const char *sql, size_t len)
{
    MYSQL_STMT *st = mysql_stmt_init(db);
    if (st == NULL)
        return NULL;
    if (mysql_stmt_prepare(st, sql, (unsigned long)len) != 0) {
        log_warn("mysql: cannot prepare the journal's bulk insert (%s): %.60s", mysql_stmt_error(st), sql);
        mysql_stmt_close(st);
        return NULL;
    }
    return st;
}

struct journal_bulk *journal_bulk_new(MYSQL *db, const char **why)
{
    unsigned long ext = 0;
    if (mariadb_get_infov(db, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES, &ext) != 0 ||
        !(ext & (unsigned long)(MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32))) {
        *why = "the server does not offer bulk operations (MariaDB 10.2+ does)";
        return NULL;
    }
    struct journal_bulk *jb = calloc(1, sizeof *jb);
    if (jb == NULL) {
        *why = "out of memory";
        return NULL;
    }
    jb->db = db;
    jb->message = prepare(db, MESSAGE_INSERT, sizeof MESSAGE_INSERT - 1);
    jb->transition = jb->message ? prepare(db, TRANSITION_INSERT, sizeof TRANSITION_INSERT - 1) : NULL;
    jb->update = jb->transition ? prepare(db, MESSAGE_UPDATE, sizeof MESSAGE_UPDATE - 1) : NULL;
    if (jb->update == NULL) {
        *why = "a statement could not be prepared";
        journal_bulk_free(jb);
        return NULL;
    }
    return jb;
}

void journal_bulk_free(struct journal_bulk *jb)
{
    if (jb == NULL)
        return;
    if (jb->message)
        mysql_stmt_close(jb->message);
    if (jb->transition)
        mysql_stmt_close(jb->transition);
    if (jb->update)
        mysql_stmt_close(jb->update);
    free(jb);
}

/* Carve the arrays of `ncols` columns for n rows out of one allocation: every column gets a
 * number array, a string pointer array, a length array and an indicator array (a few bytes
 * more than each needs, for one free), each array aligned for its type. */
static void *columns_alloc(struct column *cols, int ncols, size_t n)
{
    size_t ind_bytes = (n + 7) & ~(size_t)7; /* so the next column's arrays stay 8-byte aligned */
    size_t per_col = n * (sizeof(long long) + sizeof(char *) + sizeof(unsigned long)) + ind_bytes;
    char *arena = malloc((size_t)ncols * per_col);
    if (arena == NULL)
        return NULL;
    char *p = arena;
    for (int c = 0; c < ncols; c++) {
        cols[c].num = (long long *)(void *)p;
        p += n * sizeof(long long);
        cols[c].str = (char **)(void *)p;
        p += n * sizeof(char *);
        cols[c].len = (unsigned long *)(void *)p;
        p += n * sizeof(unsigned long);
        cols[c].ind = p;
        p += ind_bytes;
        memset(cols[c].ind, STMT_INDICATOR_NONE, n);
    }
    return arena;
}

static void set_str(struct column *c, size_t row, const char *s, size_t len)
{
    c->str[row] = (char *)(uintptr_t)s; /* bound for sending only: never written through */
    c->len[row] = (unsigned long)len;
}

static void set_null(struct column *c, size_t row)
{
    c->ind[row] = STMT_INDICATOR_NULL;
    c->str[row] = NULL;
    c->len[row] = 0;
    c->num[row] = 0;
}

/* A column's kind: a number (an id: unsigned), bound by its number array, or a string (a blob),
 * bound by its pointer and length arrays. */
enum column_kind { NUM, ID, STR, BLOB };
static const enum column_kind MESSAGE_KINDS[M_COLUMNS] = {
    [M_ID] = ID,           [M_TOPIC] = STR,        [M_BIZ] = STR,     [M_BODY] = BLOB,      [M_RUN_AT] = NUM,
    [M_PRIORITY] = NUM,    [M_TTR] = NUM,          [M_TRIES] = NUM,   [M_BACKOFF] = NUM,    [M_STATE] = STR,
    [M_VERSION] = NUM,     [M_CREATED] = NUM,      [M_UPDATED] = NUM, [M_FAR_SHARD] = NUM,  [M_FAR_RUN_AT] = NUM,
    [M_TRACEPARENT] = STR, [M_TRACESTATE] = STR,   [M_GROUP] = STR,   [M_PUSH_STATE] = STR, [M_PUSH_ACTOR] = STR,
    [M_PUSH_HOST] = STR,   [M_PUSH_INSTANCE] = STR};
static const enum column_kind TRANSITION_KINDS[T_COLUMNS] = {
    [T_ID] = ID,     [T_VERSION] = NUM, [T_FROM] = STR,     [T_TO] = STR,      [T_AT] = NUM,
    [T_ACTOR] = STR, [T_HOST] = STR,    [T_INSTANCE] = STR, [T_ATTEMPTS] = NUM};
static const enum column_kind UPDATE_KINDS[U_COLUMNS] = {
    [U_STATE] = STR,   [U_ATTEMPTS] = NUM, [U_RUN_AT] = NUM,     [U_AT] = NUM,
    [U_VERSION] = NUM, [U_ID] = ID,        [U_OLDER_THAN] = NUM, [U_FORCE] = NUM};

/* Bind cols[0..ncols) by their kinds and execute `st` once for their n rows. */
static int execute(MYSQL *db, MYSQL_STMT *st, struct column *cols, const enum column_kind *kinds, int ncols, size_t n,
                   const char *what, int commits)
{
    static const enum enum_field_types types[] = {
        [NUM] = MYSQL_TYPE_LONGLONG, [ID] = MYSQL_TYPE_LONGLONG, [STR] = MYSQL_TYPE_STRING, [BLOB] = MYSQL_TYPE_BLOB};
    MYSQL_BIND binds[M_COLUMNS]; /* the widest statement */
    for (int c = 0; c < ncols; c++) {
        int is_str = kinds[c] == STR || kinds[c] == BLOB;
        binds[c] = (MYSQL_BIND){.buffer_type = types[kinds[c]],
                                .buffer = is_str ? (void *)cols[c].str : (void *)cols[c].num,
                                .length = is_str ? cols[c].len : NULL,
                                .is_unsigned = kinds[c] == ID};
        binds[c].u.indicator = cols[c].ind;
    }
    unsigned int rows = (unsigned int)n;
    if (mysql_stmt_attr_set(st, STMT_ATTR_ARRAY_SIZE, &rows) != 0 || mysql_stmt_bind_param(st, binds) != 0) {
        log_warn("mysql: cannot bind the journal's bulk %s: %s", what, mysql_stmt_error(st));
        return -1;
    }
    return commits ? db_stmt_commit(db, st, what) : db_stmt_execute(db, st, what);
}

/* Who made a change: its actor, host and instance (`instance` when the record names none), into
 * row `i` of three columns. */
static void set_who(struct column *actor, struct column *host, struct column *inst, size_t i, const struct jobchange *r,
                    const char *instance)
{
    set_str(actor, i, r->actor, strnlen(r->actor, sizeof r->actor));
    set_str(host, i, r->host, strnlen(r->host, sizeof r->host));
    const char *who = r->instance[0] ? r->instance : instance;
    set_str(inst, i, who, strnlen(who, sizeof r->instance));
}

/* `commits`: the connection is in autocommit and this one statement is the cycle's commit. */
static int write_messages(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance,
                          int commits)
{
    struct column cols[M_COLUMNS];
    void *arena = columns_alloc(cols, M_COLUMNS, n);
    if (arena == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct jobchange *r = recs[i];
        const struct job_spec *j = r->job;
        cols[M_ID].num[i] = (long long)r->id;
        set_str(&cols[M_TOPIC], i, j->topic, j->topic_len);
        if (j->biz_key)
            set_str(&cols[M_BIZ], i, j->biz_key, j->biz_len);
        else
            set_null(&cols[M_BIZ], i);
        set_str(&cols[M_BODY], i, j->body, j->body_len);
        cols[M_RUN_AT].num[i] = j->run_at;
        cols[M_PRIORITY].num[i] = j->priority;
        cols[M_TTR].num[i] = j->ttr;
        cols[M_TRIES].num[i] = j->tries;
        if (j->has_backoff)
            cols[M_BACKOFF].num[i] = j->backoff;
        else
            set_null(&cols[M_BACKOFF], i);
        const char *state = job_state_name(r->to);
        set_str(&cols[M_STATE], i, state, strlen(state));
        cols[M_VERSION].num[i] = r->ver;
        cols[M_CREATED].num[i] = r->at;
        cols[M_UPDATED].num[i] = r->at;
        if (r->to == JS_FAR) { /* its far key (far_shard, far_run_at): the pager's index */
            cols[M_FAR_SHARD].num[i] = r->shard;
            cols[M_FAR_RUN_AT].num[i] = j->run_at;
        } else {
            set_null(&cols[M_FAR_SHARD], i);
            set_null(&cols[M_FAR_RUN_AT], i);
        }
        if (j->traceparent[0] == '\0') {
            set_null(&cols[M_TRACEPARENT], i);
            set_null(&cols[M_TRACESTATE], i);
        } else {
            set_str(&cols[M_TRACEPARENT], i, j->traceparent, TRACE_PARENT_LEN);
            if (j->tracestate)
                set_str(&cols[M_TRACESTATE], i, j->tracestate, j->tracestate_len);
            else
                set_null(&cols[M_TRACESTATE], i);
        }
        if (j->group)
            set_str(&cols[M_GROUP], i, j->group, j->group_len);
        else
            set_null(&cols[M_GROUP], i);
        set_str(&cols[M_PUSH_STATE], i, state, strlen(state)); /* the push itself: its transition */
        set_who(&cols[M_PUSH_ACTOR], &cols[M_PUSH_HOST], &cols[M_PUSH_INSTANCE], i, r, instance);
    }
    int rc = execute(jb->db, jb->message, cols, MESSAGE_KINDS, M_COLUMNS, n, "INSERT INTO message (bulk)", commits);
    free(arena);
    return rc;
}

static int insert_messages(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance)
{
    return write_messages(jb, recs, n, instance, 0);
}

static int insert_transitions(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n,
                              const char *instance)
{
    struct column cols[T_COLUMNS];
    void *arena = columns_alloc(cols, T_COLUMNS, n);
    if (arena == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct jobchange *r = recs[i];
        cols[T_ID].num[i] = (long long)r->id;
        cols[T_VERSION].num[i] = r->ver;
        const char *from = job_state_name(r->from), *to = job_state_name(r->to);
        set_str(&cols[T_FROM], i, from, strlen(from));
        set_str(&cols[T_TO], i, to, strlen(to));
        cols[T_AT].num[i] = r->at;
        set_who(&cols[T_ACTOR], &cols[T_HOST], &cols[T_INSTANCE], i, r, instance);
        cols[T_ATTEMPTS].num[i] = r->attempts;
    }
    int rc = execute(jb->db, jb->transition, cols, TRANSITION_KINDS, T_COLUMNS, n,
                     "INSERT IGNORE INTO transition (bulk)", 0);
    free(arena);
    return rc;
}

static int update_messages(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance)
{
    (void)instance;
    struct column cols[U_COLUMNS];
    void *arena = columns_alloc(cols, U_COLUMNS, n);
    if (arena == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct jobchange *r = recs[i];
        const char *state = job_state_name(r->to);
        set_str(&cols[U_STATE], i, state, strlen(state));
        cols[U_ATTEMPTS].num[i] = r->attempts;
        cols[U_RUN_AT].num[i] = r->run_at;
        cols[U_AT].num[i] = r->at;
        cols[U_VERSION].num[i] = r->ver;
        cols[U_ID].num[i] = (long long)r->id;
        cols[U_OLDER_THAN].num[i] = r->ver;
        cols[U_FORCE].num[i] = r->force;
    }
    int rc = execute(jb->db, jb->update, cols, UPDATE_KINDS, U_COLUMNS, n, "UPDATE message (bulk)", 0);
    free(arena);
    return rc;
}

/* The bytes of values a row carries (the server's packet limit is what a chunk must stay well
 * under; numbers and states are a few dozen bytes a row). */
static size_t message_bytes(const struct jobchange *r)
{
    const struct job_spec *j = r->job;
    return 256 + j->topic_len + j->body_len + (j->biz_key ? j->biz_len : 0) + j->tracestate_len + j->group_len +
           strnlen(r->actor, sizeof r->actor) + strnlen(r->host, sizeof r->host) + sizeof r->instance;
}

static size_t transition_bytes(const struct jobchange *r)
{
    return 64 + strnlen(r->actor, sizeof r->actor) + strnlen(r->host, sizeof r->host) +
           strnlen(r->instance, sizeof r->instance);
}

static size_t update_bytes(const struct jobchange *r)
{
    (void)r;
    return 64;
}

typedef int (*rows_fn)(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance);

/* write(recs[start..end)) for consecutive runs of about chunk_bytes each (one row at least). */
static int in_chunks(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance,
                     size_t chunk_bytes, size_t (*bytes_of)(const struct jobchange *), rows_fn write)
{
    size_t start = 0;
    while (start < n) {
        size_t end = start, bytes = 0;
        while (end < n) {
            size_t row = bytes_of(recs[end]);
            if (end > start && bytes + row > chunk_bytes)
                break;
            bytes += row;
            end++;
        }
        if (write(jb, recs + start, end - start, instance) < 0)
            return -1;
        start = end;
    }
    return 0;
}

int journal_bulk_messages(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance,
                          size_t chunk_bytes)
{
    return in_chunks(jb, recs, n, instance, chunk_bytes, message_bytes, insert_messages);
}

int journal_bulk_messages_fit(const struct jobchange *const *recs, size_t n, size_t chunk_bytes)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n && bytes <= chunk_bytes; i++)
        bytes += message_bytes(recs[i]);
    return bytes <= chunk_bytes;
}

int journal_bulk_messages_commit(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n,
                                 const char *instance)
{
    return write_messages(jb, recs, n, instance, 1);
}

int journal_bulk_transitions(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n,
                             const char *instance, size_t chunk_bytes)
{
    return in_chunks(jb, recs, n, instance, chunk_bytes, transition_bytes, insert_transitions);
}

int journal_bulk_updates(struct journal_bulk *jb, const struct jobchange *const *updates, size_t n, size_t chunk_bytes)
{
    const struct jobchange **newest = malloc((n ? n : 1) * sizeof *newest);
    if (newest == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (journal_sql_newest_update(updates, n, i))
            newest[k++] = updates[i];
    int rc = in_chunks(jb, newest, k, NULL, chunk_bytes, update_bytes, update_messages);
    free(newest);
    return rc;
}

#else /* a client library without array binding: the journal writes text */

struct journal_bulk *journal_bulk_new(MYSQL *db, const char **why)
{
    (void)db;
    *why = "the client library has no array binding (libmariadb 3 has)";
    return NULL;
}

void journal_bulk_free(struct journal_bulk *jb)
{
    (void)jb;
}

int journal_bulk_messages(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n, const char *instance,
                          size_t chunk_bytes)
{
    (void)jb, (void)recs, (void)n, (void)instance, (void)chunk_bytes;
    return -1;
}

int journal_bulk_messages_fit(const struct jobchange *const *recs, size_t n, size_t chunk_bytes)
{
    (void)recs, (void)n, (void)chunk_bytes;
    return 0;
}

int journal_bulk_messages_commit(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n,
                                 const char *instance)
{
    (void)jb, (void)recs, (void)n, (void)instance;
    return -1;
}

int journal_bulk_transitions(struct journal_bulk *jb, const struct jobchange *const *recs, size_t n,
                             const char *instance, size_t chunk_bytes)
{
    (void)jb, (void)recs, (void)n, (void)instance, (void)chunk_bytes;
    return -1;
}

int journal_bulk_updates(struct journal_bulk *jb, const struct jobchange *const *updates, size_t n, size_t chunk_bytes)
{
    (void)jb, (void)updates, (void)n, (void)chunk_bytes;
    return -1;
}

#endif
