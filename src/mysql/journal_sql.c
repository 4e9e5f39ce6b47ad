/* journal_sql.c — see journal_sql.h. */
#include "mysql/journal_sql.h"
#include "mysql/db.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

static const char MESSAGE_HEAD[] = "INSERT INTO message (" MESSAGE_COLUMNS ") VALUES ";
/* IGNORE: a transition is unique per (job, version, state); an outbox entry read twice (a
 * journal that died before acknowledging it) is written once */
static const char TRANSITION_HEAD[] = "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") VALUES ";
static const char FARBIZ_HEAD[] = "INSERT INTO far_biz (id,topic,biz_key,run_at) VALUES ";
static const char FARCOUNT_HEAD[] = "INSERT INTO far_count (topic,jobs) VALUES ";
static const char FARCOUNT_TAIL[] = " ON DUPLICATE KEY UPDATE jobs = jobs + VALUES(jobs)";
static const char BIZLATEST_HEAD[] = "INSERT INTO biz_latest (topic,biz_key,id) VALUES ";
/* MariaDB applies the assignments in order: prev_id reads the id it replaces */
static const char BIZLATEST_TAIL[] =
    " ON DUPLICATE KEY UPDATE prev_id = IF(VALUES(id) > id, id, prev_id), id = GREATEST(id, VALUES(id))";
static const char UPDATE_HEAD[] =
    "INSERT INTO journal_update (id,state,attempts,run_at,version,at,force_apply) VALUES ";

void journal_sql_init(struct journal_sql *b, MYSQL *db, size_t flush_bytes, journal_sql_send_fn send, void *send_arg)
{
    *b = (struct journal_sql){
        .db = db, .flush_bytes = flush_bytes, .send = send, .send_arg = send_arg, .sql = SBUF_INIT};
}

void journal_sql_free(struct journal_sql *b)
{
    sb_free(&b->sql);
}

static void close_insert(struct journal_sql *b)
{
    if (b->rows > 0 && b->head == FARCOUNT_HEAD)
        sb_puts(&b->sql, FARCOUNT_TAIL);
    if (b->rows > 0 && b->head == BIZLATEST_HEAD)
        sb_puts(&b->sql, BIZLATEST_TAIL);
    if (b->rows > 0)
        sb_putc(&b->sql, ';');
    b->head = NULL;
    b->rows = 0;
}

int journal_sql_send(struct journal_sql *b)
{
    close_insert(b);
    if (b->sql.oom) {
        log_error("journal: out of memory building a statement");
        return -1;
    }
    if (b->sql.len == 0)
        return 0;
    int rc = b->send(b->send_arg, b->sql.data, b->sql.len);
    sb_reset(&b->sql);
    return rc;
}

/* Between statements: send what is built once the script is long. */
static int statement_boundary(struct journal_sql *b)
{
    close_insert(b);
    return b->sql.len > b->flush_bytes ? journal_sql_send(b) : 0;
}

/* Begin a row of the multi-row INSERT `head`, ending another INSERT (or a long one) first. */
static int begin_row(struct journal_sql *b, const char *head)
{
    if (b->rows > 0 && (b->head != head || b->sql.len > b->flush_bytes) && statement_boundary(b) < 0)
        return -1;
    if (b->rows == 0) {
        sb_puts(&b->sql, head);
        b->head = head;
    } else {
        sb_putc(&b->sql, ',');
    }
    b->rows++;
    sb_putc(&b->sql, '(');
    return 0;
}

/* A whole statement of its own (no trailing ';' in `sql`). */
static int add_statement(struct journal_sql *b, const char *sql, size_t len)
{
    if (statement_boundary(b) < 0)
        return -1;
    sb_put(&b->sql, sql, len);
    sb_putc(&b->sql, ';');
    return 0;
}

static void put_state(struct sbuf *sb, int state)
{
    sb_putc(sb, '\'');
    sb_puts(sb, job_state_name(state));
    sb_putc(sb, '\'');
}

static void put_field(struct journal_sql *b, const char *s, size_t size)
{
    db_quote(b->db, &b->sql, s, strnlen(s, size));
}

/* The job's traceparent, or its tracestate (`state`), as an SQL value: NULL when it has none. */
static void put_trace_value(struct journal_sql *b, const struct job_spec *j, int state)
{
    if (j->traceparent[0] == '\0' || (state && j->tracestate == NULL))
        sb_puts(&b->sql, "NULL");
    else if (state)
        db_quote(b->db, &b->sql, j->tracestate, j->tracestate_len);
    else
        db_quote(b->db, &b->sql, j->traceparent, TRACE_PARENT_LEN);
}

/* ",<traceparent>,<tracestate>": two NULLs for a job without (most: no work beyond the words). */
static void put_trace(struct journal_sql *b, const struct job_spec *j)
{
    if (j->traceparent[0] == '\0') {
        sb_puts(&b->sql, ",NULL,NULL");
        return;
    }
    sb_putc(&b->sql, ',');
    put_trace_value(b, j, 0);
    sb_putc(&b->sql, ',');
    put_trace_value(b, j, 1);
}

/* The job's group as an SQL value: NULL when it has none. */
static void put_group(struct journal_sql *b, const struct job_spec *j)
{
    if (j->group == NULL)
        sb_puts(&b->sql, "NULL");
    else
        db_quote(b->db, &b->sql, j->group, j->group_len);
}

/* Who made a change: its actor, host and instance (`instance` when the record names none). */
static void put_who(struct journal_sql *b, const struct jobchange *r, const char *instance)
{
    put_field(b, r->actor, sizeof r->actor);
    sb_putc(&b->sql, ',');
    put_field(b, r->host, sizeof r->host);
    sb_putc(&b->sql, ',');
    put_field(b, r->instance[0] ? r->instance : instance, sizeof r->instance);
}

int journal_sql_message_row(struct journal_sql *b, const struct jobchange *r, const char *instance)
{
    const struct job_spec *j = r->job;
    if (begin_row(b, MESSAGE_HEAD) < 0)
        return -1;
    sb_json_uint(&b->sql, r->id);
    sb_putc(&b->sql, ',');
    db_quote(b->db, &b->sql, j->topic, j->topic_len);
    sb_putc(&b->sql, ',');
    if (j->biz_key)
        db_quote(b->db, &b->sql, j->biz_key, j->biz_len);
    else
        sb_puts(&b->sql, "NULL");
    sb_putc(&b->sql, ',');
    db_quote(b->db, &b->sql, j->body, j->body_len);
    const int64_t fields[] = {j->run_at, j->priority, j->ttr, j->tries, 0};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        sb_putc(&b->sql, ',');
        sb_json_int(&b->sql, fields[f]);
    }
    sb_putc(&b->sql, ',');
    if (j->has_backoff)
        sb_json_int(&b->sql, j->backoff);
    else
        sb_puts(&b->sql, "NULL");
    sb_putc(&b->sql, ',');
    put_state(&b->sql, r->to);
    sb_putc(&b->sql, ',');
    sb_json_uint(&b->sql, r->ver);
    sb_putc(&b->sql, ',');
    sb_json_int(&b->sql, r->at); /* created_at */
    sb_putc(&b->sql, ',');
    sb_json_int(&b->sql, r->at); /* updated_at */
    if (r->to == JS_FAR) {       /* its far key (far_shard, far_run_at): the pager's index */
        sb_printf(&b->sql, ",%u,", r->shard);
        sb_json_int(&b->sql, j->run_at);
    } else {
        sb_puts(&b->sql, ",NULL,NULL");
    }
    put_trace(b, j);
    sb_putc(&b->sql, ',');
    put_group(b, j);
    /* the push itself (push_state, push_actor, push_host, push_instance): its transition */
    sb_putc(&b->sql, ',');
    put_state(&b->sql, r->to);
    sb_putc(&b->sql, ',');
    put_who(b, r, instance);
    sb_putc(&b->sql, ')');
    return 0;
}

int journal_sql_transition_row(struct journal_sql *b, const struct jobchange *r, const char *instance)
{
    if (begin_row(b, TRANSITION_HEAD) < 0)
        return -1;
    sb_json_uint(&b->sql, r->id);
    sb_putc(&b->sql, ',');
    sb_json_uint(&b->sql, r->ver);
    sb_putc(&b->sql, ',');
    put_state(&b->sql, r->from);
    sb_putc(&b->sql, ',');
    put_state(&b->sql, r->to);
    sb_putc(&b->sql, ',');
    sb_json_int(&b->sql, r->at);
    sb_putc(&b->sql, ',');
    put_who(b, r, instance);
    sb_putc(&b->sql, ',');
    sb_json_uint(&b->sql, r->attempts);
    sb_putc(&b->sql, ')');
    return 0;
}

static int cmp_update(const void *a, const void *b)
{
    const struct jobchange *x = *(const struct jobchange *const *)a, *y = *(const struct jobchange *const *)b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->ver != y->ver)
        return x->ver < y->ver ? -1 : 1;
    return (int)x->force - (int)y->force;
}

void journal_sql_sort_updates(const struct jobchange **updates, size_t n)
{
    if (n > 1)
        qsort(updates, n, sizeof *updates, cmp_update);
}

int journal_sql_update_messages(struct journal_sql *b, const struct jobchange **updates, size_t n)
{
    if (n == 0)
        return 0;
    journal_sql_sort_updates(updates, n);
    static const char clear[] = "DELETE FROM journal_update";
    if (add_statement(b, clear, sizeof clear - 1) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!journal_sql_newest_update(updates, n, i))
            continue;
        const struct jobchange *r = updates[i];
        if (begin_row(b, UPDATE_HEAD) < 0)
            return -1;
        sb_json_uint(&b->sql, r->id);
        sb_putc(&b->sql, ',');
        put_state(&b->sql, r->to);
        sb_putc(&b->sql, ',');
        sb_json_uint(&b->sql, r->attempts);
        sb_putc(&b->sql, ',');
        sb_json_int(&b->sql, r->run_at);
        sb_putc(&b->sql, ',');
        sb_json_uint(&b->sql, r->ver);
        sb_putc(&b->sql, ',');
        sb_json_int(&b->sql, r->at);
        sb_puts(&b->sql, r->force ? ",1)" : ",0)");
    }
    static const char apply[] = "UPDATE message m JOIN journal_update u ON m.id = u.id SET m.state = "
                                "u.state, m.attempts = u.attempts, "
                                "m.run_at = u.run_at, m.updated_at = u.at, m.version = u.version "
                                "WHERE u.version > m.version OR u.force_apply = 1";
    if (add_statement(b, apply, sizeof apply - 1) < 0)
        return -1;
    return journal_sql_replacements(b, updates, n);
}

int journal_sql_replacements(struct journal_sql *b, const struct jobchange *const *updates, size_t n)
{
    /* rare, so one statement each */
    for (size_t i = 0; i < n; i++) {
        const struct jobchange *r = updates[i];
        if (r->kind != JC_REPLACE || r->replacement == NULL)
            continue;
        const struct job_spec *j = r->replacement;
        if (statement_boundary(b) < 0)
            return -1;
        sb_puts(&b->sql, "UPDATE message SET body = ");
        db_quote(b->db, &b->sql, j->body, j->body_len);
        /* only if this replacement is the job's newest version (a later one may have landed) */
        sb_printf(&b->sql, ", priority = %d, ttr = %lld, tries = %d, backoff = ", j->priority, (long long)j->ttr,
                  j->tries);
        if (j->has_backoff)
            sb_json_int(&b->sql, j->backoff);
        else
            sb_puts(&b->sql, "NULL");
        sb_puts(&b->sql, ", traceparent = "); /* the replacing push's context, or none */
        put_trace_value(b, j, 0);
        sb_puts(&b->sql, ", tracestate = ");
        put_trace_value(b, j, 1);
        sb_puts(&b->sql, ", group_key = "); /* the replacing push's group, or none */
        put_group(b, j);
        sb_printf(&b->sql, " WHERE id = %llu AND version = %u;", (unsigned long long)r->id, r->ver);
    }
    return statement_boundary(b);
}

/* ---- the far tier ---- */

int journal_sql_far_inserts(struct journal_sql *b, const struct jobchange *const *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct jobchange *r = recs[i];
        const struct job_spec *j = r->job;
        if (j->biz_key == NULL)
            continue;
        if (begin_row(b, FARBIZ_HEAD) < 0)
            return -1;
        sb_json_uint(&b->sql, r->id);
        sb_putc(&b->sql, ',');
        db_quote(b->db, &b->sql, j->topic, j->topic_len);
        sb_putc(&b->sql, ',');
        db_quote(b->db, &b->sql, j->biz_key, j->biz_len);
        sb_putc(&b->sql, ',');
        sb_json_int(&b->sql, j->run_at);
        sb_putc(&b->sql, ')');
    }
    return 0;
}

static int cmp_rec_topic(const void *a, const void *b)
{
    const struct job_spec *x = (*(const struct jobchange *const *)a)->job,
                          *y = (*(const struct jobchange *const *)b)->job;
    return job_topic_cmp(x->topic, x->topic_len, y->topic, y->topic_len);
}

int journal_sql_far_counts(struct journal_sql *b, const struct jobchange **recs, size_t n)
{
    /* In topic order: one row per topic, and the rows locked in the order the pager locks
     * them too (job.h, job_topic_cmp). */
    if (n > 1)
        qsort(recs, n, sizeof *recs, cmp_rec_topic);
    for (size_t i = 0; i < n;) {
        const struct job_spec *j = recs[i]->job;
        size_t k = i + 1;
        while (k < n && recs[k]->job->topic_len == j->topic_len &&
               memcmp(recs[k]->job->topic, j->topic, j->topic_len) == 0)
            k++;
        if (begin_row(b, FARCOUNT_HEAD) < 0)
            return -1;
        db_quote(b->db, &b->sql, j->topic, j->topic_len);
        sb_printf(&b->sql, ",%zu)", k - i);
        i = k;
    }
    return 0;
}

/* A far job's change, guarded on its row still being 'far'. The row is locked first (the
 * order every writer of these tables keeps: message, far_biz, far_count), its topic kept in
 * @far_topic_<k>: NULL when the row is no longer far, which the statements after test, and
 * the topic journal_sql_far_leave_counts subtracts from at the end of the script. */
int journal_sql_far_change(struct journal_sql *b, const struct jobchange *r, size_t k, const char *instance)
{
    char id[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)r->id);
    if (statement_boundary(b) < 0)
        return -1;
    struct sbuf *q = &b->sql;
    sb_printf(q, "SET @far_topic_%zu = NULL;", k);
    sb_printf(q, "SELECT topic INTO @far_topic_%zu FROM message WHERE id = %s AND state = 'far' FOR UPDATE;", k, id);
    sb_puts(q, "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") SELECT id, version + 1, 'far', ");
    put_state(q, r->to);
    sb_putc(q, ',');
    sb_json_int(q, r->at);
    sb_putc(q, ',');
    put_field(b, r->actor, sizeof r->actor);
    sb_putc(q, ',');
    put_field(b, r->host, sizeof r->host);
    sb_putc(q, ',');
    put_field(b, r->instance[0] ? r->instance : instance, sizeof r->instance);
    sb_printf(q, ", attempts FROM message WHERE id = %s AND @far_topic_%zu IS NOT NULL;", id, k);
    /* The far key is the row's own (far_shard, far_run_at): re-keyed with the due time, or
     * cleared as the job leaves the tier, in the same UPDATE. */
    if (r->kind == JC_FAR_MOVE) {
        sb_puts(q, "UPDATE far_biz SET run_at = ");
        sb_json_int(q, r->run_at);
        sb_printf(q, " WHERE id = %s AND @far_topic_%zu IS NOT NULL;", id, k);
        sb_puts(q, "UPDATE message SET run_at = ");
        sb_json_int(q, r->run_at);
        sb_puts(q, ", far_run_at = ");
        sb_json_int(q, r->run_at);
        sb_puts(q, ", version = version + 1, updated_at = ");
    } else {
        sb_printf(q, "DELETE FROM far_biz WHERE id = %s AND @far_topic_%zu IS NOT NULL;", id, k);
        sb_puts(q, "UPDATE message SET state = ");
        put_state(q, r->to);
        sb_puts(q, ", far_shard = NULL, far_run_at = NULL, version = version + 1, updated_at = ");
    }
    sb_json_int(q, r->at);
    sb_printf(q, " WHERE id = %s AND state = 'far';", id);
    return 0;
}

int journal_sql_far_leave_counts(struct journal_sql *b, const struct jobchange *const *changes, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (changes[k]->kind != JC_FAR_LEAVE)
            continue;
        if (statement_boundary(b) < 0)
            return -1;
        sb_printf(&b->sql, "UPDATE far_count SET jobs = jobs - 1 WHERE topic = @far_topic_%zu;", k);
    }
    return 0;
}

/* ---- biz_latest ---- */

int journal_sql_biz_latest(struct journal_sql *b, const struct jobchange *const *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct jobchange *r = recs[i];
        if (r->kind != JC_INSERT || r->job == NULL || r->job->biz_key == NULL)
            continue;
        if (begin_row(b, BIZLATEST_HEAD) < 0)
            return -1;
        db_quote(b->db, &b->sql, r->job->topic, r->job->topic_len);
        sb_putc(&b->sql, ',');
        db_quote(b->db, &b->sql, r->job->biz_key, r->job->biz_len);
        sb_putc(&b->sql, ',');
        sb_json_uint(&b->sql, r->id);
        sb_putc(&b->sql, ')');
    }
    return 0;
}

int journal_sql_biz_aborted(struct journal_sql *b, const struct jobchange *const *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct jobchange *r = recs[i];
        if (r->to != JS_ABORTED)
            continue;
        if (statement_boundary(b) < 0)
            return -1;
        /* one assignment only: a multi-table UPDATE applies its assignments in no set order */
        sb_puts(&b->sql, "UPDATE biz_latest b JOIN message m ON m.topic = b.topic AND m.biz_key = b.biz_key SET "
                         "b.id = ");
        if (r->biz_holder)
            sb_json_uint(&b->sql, r->biz_holder);
        else
            sb_puts(&b->sql, "COALESCE(b.prev_id, b.id)");
        sb_puts(&b->sql, " WHERE m.id = ");
        sb_json_uint(&b->sql, r->id);
        sb_puts(&b->sql, " AND b.id = ");
        sb_json_uint(&b->sql, r->id);
        sb_putc(&b->sql, ';');
    }
    return 0;
}

void journal_sql_record_json(struct sbuf *sb, const struct jobchange *r)
{
    sb_puts(sb, "{\"id\":\"");
    sb_json_uint(sb, r->id);
    sb_printf(sb, "\",\"kind\":%d,\"from\":", r->kind);
    sb_json_cstr(sb, job_state_name(r->from));
    sb_puts(sb, ",\"to\":");
    sb_json_cstr(sb, job_state_name(r->to));
    sb_printf(sb, ",\"version\":%u,\"attempts\":%u,\"at\":%lld,\"runAt\":%lld,\"force\":%d,\"actor\":", r->ver,
              r->attempts, (long long)r->at, (long long)r->run_at, r->force);
    sb_json_str(sb, r->actor, strnlen(r->actor, sizeof r->actor));
    sb_puts(sb, ",\"host\":");
    sb_json_str(sb, r->host, strnlen(r->host, sizeof r->host));
    sb_puts(sb, ",\"instance\":");
    sb_json_str(sb, r->instance, strnlen(r->instance, sizeof r->instance));
    sb_putc(sb, '}');
}

int journal_sql_refused_row(struct journal_sql *b, const struct jobchange *r, const char *error, int64_t at,
                            const char *instance)
{
    struct sbuf json = SBUF_INIT;
    journal_sql_record_json(&json, r);
    int rc = statement_boundary(b);
    if (rc == 0) {
        sb_puts(&b->sql, "INSERT INTO refused_record (" REFUSED_COLUMNS ") VALUES (");
        sb_json_uint(&b->sql, r->id);
        sb_putc(&b->sql, ',');
        sb_json_int(&b->sql, at);
        sb_putc(&b->sql, ',');
        db_quote(b->db, &b->sql, error, strnlen(error, 500));
        sb_putc(&b->sql, ',');
        db_quote(b->db, &b->sql, json.data ? json.data : "", json.len);
        sb_putc(&b->sql, ',');
        db_quote(b->db, &b->sql, instance, strlen(instance));
        sb_puts(&b->sql, ");");
        if (json.oom)
            b->sql.oom = 1; /* never send the row without the record it keeps */
    }
    sb_free(&json);
    return rc;
}
