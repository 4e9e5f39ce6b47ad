/* test_journal_sql.c — the SQL text of a journal cycle (journal_sql.h), read exactly as MySQL
 * would be sent it: rows gathered per statement, kinds never mixed in one INSERT, values
 * escaped (quotes, backslashes, NUL bytes), the newest update per job staged with its
 * version, replacements guarded by version, long scripts cut between statements only, and
 * failures of the sender passed on. */
#include "mysql/journal_sql.h"
#include "mysql/db.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static MYSQL *db; /* never connected: used for its escaping only */

struct capture {
    char *scripts[4096];
    size_t n;
    int fail_at; /* 1-based send that fails; 0 = none */
};

static int capture_send(void *arg, const char *sql, size_t len)
{
    struct capture *c = arg;
    ck_assert_uint_lt(c->n, sizeof c->scripts / sizeof c->scripts[0]);
    c->scripts[c->n] = malloc(len + 1);
    memcpy(c->scripts[c->n], sql, len);
    c->scripts[c->n][len] = '\0';
    c->n++;
    return c->fail_at && (size_t)c->fail_at == c->n ? -1 : 0;
}

static void capture_free(struct capture *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->scripts[i]);
    c->n = 0;
}

static struct capture c;     /* what each test's builder sent */
static struct journal_sql b; /* each test's builder, sending to c */

/* A fresh builder that sends past `flush_bytes`, its send failing at the fail_at-th call. */
static void rebuild(size_t flush_bytes, int fail_at)
{
    journal_sql_free(&b);
    capture_free(&c);
    c.fail_at = fail_at;
    journal_sql_init(&b, db, flush_bytes, capture_send, &c);
}

static void setup(void)
{
    db = mysql_init(NULL);
    ck_assert_ptr_nonnull(db);
    memset(&c, 0, sizeof c); /* without fork, the previous test's settings are still here */
    journal_sql_init(&b, db, 1 << 20, capture_send, &c);
}

static void teardown(void)
{
    journal_sql_free(&b);
    capture_free(&c);
    mysql_close(db);
}

static struct jobchange transition(uint64_t id, uint32_t ver, int from, int to)
{
    struct jobchange r = {.kind = JC_TRANSITION,
                          .from = (uint8_t)from,
                          .to = (uint8_t)to,
                          .ver = ver,
                          .id = id,
                          .at = 1700000000000 + (int64_t)ver,
                          .run_at = 1700000005000,
                          .attempts = ver / 2};
    snprintf(r.actor, sizeof r.actor, "mover hg:{1}:delay");
    snprintf(r.host, sizeof r.host, "10.0.0.1");
    return r;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

START_TEST(message_row_exact_text)
{
    char body[] = "{\"a\":1}";
    struct job_spec j = {.topic = "orders",
                         .topic_len = 6,
                         .body = body,
                         .body_len = 7,
                         .run_at = 1700000060000,
                         .priority = 5,
                         .ttr = 30000,
                         .tries = 3};
    struct jobchange r = {
        .kind = JC_INSERT, .from = JS_NONE, .to = JS_DELAYED, .ver = 1, .id = 42, .at = 1700000000000, .job = &j};
    snprintf(r.actor, sizeof r.actor, "http-0 hg:{3}:jobs");
    snprintf(r.host, sizeof r.host, "10.0.0.1");
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    ck_assert_uint_eq(c.n, 0); /* nothing is sent before journal_sql_send */
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 1);
    ck_assert_str_eq(c.scripts[0], "INSERT INTO message (" MESSAGE_COLUMNS ") VALUES "
                                   "(42,'orders',NULL,'{\\\"a\\\":1}',1700000060000,5,30000,3,0,NULL,'delayed',1,"
                                   "1700000000000,1700000000000,NULL,NULL,NULL,NULL,NULL,"
                                   "'delayed','http-0 hg:{3}:jobs','10.0.0.1','me:7000');");
    ck_assert_int_eq(journal_sql_send(&b), 0); /* nothing built: nothing sent */
    ck_assert_uint_eq(c.n, 1);
    /* a job pushed with its own backoff keeps it in its row (restore reads it back) */
    j.has_backoff = 1;
    j.backoff = 1500;
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 2);
    ck_assert_ptr_nonnull(strstr(c.scripts[1], ",3,0,1500,'delayed',1,"));
    /* a far job's row carries its far key, the pager's index: its shard and due time */
    r.to = JS_FAR;
    r.shard = 9;
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 3);
    ck_assert_ptr_nonnull(
        strstr(c.scripts[2], ",'far',1,1700000000000,1700000000000,9,1700000060000,NULL,NULL,NULL,'far',"));
    /* the push's instance is the record's own when it names one (a schedule's fire, say) */
    snprintf(r.instance, sizeof r.instance, "other:7001");
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_ptr_nonnull(strstr(c.scripts[3], ",'10.0.0.1','other:7001');"));
}
END_TEST

START_TEST(values_are_escaped)
{
    static char body[] = "it's \\ a \"x\"\n\0end", biz[] = "o'brien";
    struct job_spec j = {.topic = "t",
                         .topic_len = 1,
                         .body = body,
                         .body_len = sizeof body - 1,
                         .biz_key = biz,
                         .biz_len = 7,
                         .run_at = 1,
                         .ttr = 1,
                         .tries = 1};
    struct jobchange r = {.kind = JC_INSERT, .to = JS_READY, .ver = 1, .id = 7, .at = 2, .job = &j};
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_ptr_nonnull(strstr(c.scripts[0], "'o\\'brien'"));
    /* every quote, backslash, newline and the NUL byte escaped; the text after the NUL kept */
    ck_assert_ptr_nonnull(strstr(c.scripts[0], "'it\\'s \\\\ a \\\"x\\\"\\n\\0end'"));
}
END_TEST

START_TEST(transition_rows_share_one_insert)
{
    struct jobchange a = transition(1, 2, JS_DELAYED, JS_READY), z = transition(2, 3, JS_READY, JS_RESERVED);
    snprintf(z.instance, sizeof z.instance, "other:7001");
    ck_assert_int_eq(journal_sql_transition_row(&b, &a, "me:7000"), 0);
    ck_assert_int_eq(journal_sql_transition_row(&b, &z, "me:7000"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_str_eq(c.scripts[0],
                     "INSERT IGNORE INTO transition (" TRANSITION_COLUMNS ") VALUES "
                     "(1,2,'delayed','ready',1700000000002,'mover hg:{1}:delay','10.0.0.1','me:7000',1),"
                     "(2,3,'ready','reserved',1700000000003,'mover hg:{1}:delay','10.0.0.1','other:7001',1);");
}
END_TEST

START_TEST(full_size_fields_without_nul_are_cut_at_their_size)
{
    struct jobchange r = transition(9, 1, JS_NONE, JS_READY);
    memset(r.actor, 'a', sizeof r.actor); /* no NUL anywhere in the field */
    memset(r.host, 'h', sizeof r.host);
    ck_assert_int_eq(journal_sql_transition_row(&b, &r, "i"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    char actor[JOBCHANGE_ACTOR_MAX + 3] = "'", host[JOBCHANGE_HOST_MAX + 3] = "'";
    memset(actor + 1, 'a', JOBCHANGE_ACTOR_MAX);
    memset(host + 1, 'h', JOBCHANGE_HOST_MAX);
    strcat(actor, "'");
    strcat(host, "'");
    ck_assert_ptr_nonnull(strstr(c.scripts[0], actor));
    ck_assert_ptr_nonnull(strstr(c.scripts[0], host));
    ck_assert_ptr_null(strstr(c.scripts[0], "aaaah")); /* the actor did not run into the host */
}
END_TEST

START_TEST(switching_kinds_ends_the_statement)
{
    char one[] = "1";
    struct job_spec j = {.topic = "t", .topic_len = 1, .body = one, .body_len = 1, .ttr = 1, .tries = 1};
    struct jobchange ins = {.kind = JC_INSERT, .to = JS_READY, .ver = 1, .id = 1, .at = 1, .job = &j};
    struct jobchange tr = transition(1, 1, JS_NONE, JS_READY);
    ck_assert_int_eq(journal_sql_message_row(&b, &ins, "i"), 0);
    ck_assert_int_eq(journal_sql_transition_row(&b, &tr, "i"), 0);
    ck_assert_int_eq(journal_sql_message_row(&b, &ins, "i"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    const char *s = c.scripts[0];
    ck_assert_uint_eq(count(s, "INSERT INTO message"), 2);
    ck_assert_uint_eq(count(s, "INSERT IGNORE INTO transition"), 1);
    ck_assert_uint_eq(count(s, ";"), 3);
    ck_assert_ptr_nonnull(strstr(s, ");INSERT IGNORE INTO transition"));
    ck_assert_ptr_nonnull(strstr(s, ");INSERT INTO message"));
}
END_TEST

START_TEST(updates_keep_the_newest_per_job)
{
    struct jobchange r[5] = {transition(5, 4, JS_READY, JS_RESERVED), transition(3, 2, JS_DELAYED, JS_READY),
                             transition(5, 6, JS_RESERVED, JS_FINISHED), transition(5, 5, JS_RESERVED, JS_READY),
                             transition(3, 2, JS_READY, JS_DELETED)};
    r[4].force = 1; /* a delete at the same version wins over the update it follows */
    const struct jobchange *u[5] = {&r[0], &r[1], &r[2], &r[3], &r[4]};
    ck_assert_int_eq(journal_sql_update_messages(&b, u, 5), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 1);
    ck_assert_str_eq(c.scripts[0],
                     "DELETE FROM journal_update;"
                     "INSERT INTO journal_update (id,state,attempts,run_at,version,at,force_apply) VALUES "
                     "(3,'deleted',1,1700000005000,2,1700000000002,1),"
                     "(5,'finished',3,1700000005000,6,1700000000006,0);"
                     "UPDATE message m JOIN journal_update u ON m.id = u.id SET m.state = u.state, "
                     "m.attempts = u.attempts, m.run_at = u.run_at, m.updated_at = u.at, m.version = u.version "
                     "WHERE u.version > m.version OR u.force_apply = 1;");
    ck_assert_int_eq(journal_sql_update_messages(&b, u, 0), 0); /* none: no statement at all */
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 1);
}
END_TEST

START_TEST(replacements_are_guarded_by_version)
{
    char body[] = "new'body";
    struct job_spec rep = {.body = body, .body_len = 8, .priority = 9, .ttr = 500, .tries = 4};
    struct jobchange r = transition(11, 3, JS_DELAYED, JS_DELAYED);
    r.kind = JC_REPLACE;
    r.replacement = &rep;
    struct jobchange later = transition(11, 4, JS_DELAYED, JS_READY);
    const struct jobchange *u[2] = {&later, &r};
    ck_assert_int_eq(journal_sql_update_messages(&b, u, 2), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    const char *s = c.scripts[0];
    ck_assert_ptr_nonnull(strstr(s, "(11,'ready',2,1700000005000,4,1700000000004,0);"));
    /* the replacement is not the newest version: its statement still runs, guarded by version 3 */
    ck_assert_ptr_nonnull(
        strstr(s, ";UPDATE message SET body = 'new\\'body', priority = 9, ttr = 500, tries = 4, backoff = NULL, "
                  "traceparent = NULL, tracestate = NULL, group_key = NULL WHERE id = 11 AND version = 3;"));
}
END_TEST

/* A job's trace context: two more values of its row, quoted; a replacement sets the replacing
 * push's (none: NULL, so the row never keeps a context its job no longer has). */
START_TEST(trace_context_columns)
{
    char body[] = "1", state[] = "k=v's";
    struct job_spec j = {.topic = "t", .topic_len = 1, .body = body, .body_len = 1, .run_at = 5, .ttr = 1, .tries = 1};
    memcpy(j.traceparent, TP, sizeof TP);
    j.tracestate = state;
    j.tracestate_len = 5;
    struct jobchange r = {.kind = JC_INSERT, .to = JS_READY, .ver = 1, .id = 7, .at = 3, .job = &j};
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    struct jobchange rep = transition(7, 2, JS_READY, JS_READY);
    rep.kind = JC_REPLACE;
    rep.replacement = &j;
    const struct jobchange *u[1] = {&rep};
    ck_assert_int_eq(journal_sql_update_messages(&b, u, 1), 0);
    j.tracestate = NULL; /* a traceparent alone */
    r.id = 8;
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    const char *s = c.scripts[0];
    ck_assert_ptr_nonnull(strstr(s, "(7,'t',NULL,'1',5,0,1,1,0,NULL,'ready',1,3,3,NULL,NULL,'" TP
                                    "','k=v\\'s',NULL,'ready','','','me:7000');"));
    ck_assert_ptr_nonnull(strstr(s, "tries = 1, backoff = NULL, traceparent = '" TP
                                    "', tracestate = 'k=v\\'s', group_key = NULL "
                                    "WHERE id = 7 AND version = 2;"));
    ck_assert_ptr_nonnull(strstr(s, "(8,'t',NULL,'1',5,0,1,1,0,NULL,'ready',1,3,3,NULL,NULL,'" TP
                                    "',NULL,NULL,'ready','','','me:7000')"));
}
END_TEST

/* A job's group: one more value of its row, quoted; a replacement sets the replacing push's. */
START_TEST(group_column)
{
    char body[] = "1", group[] = "cust'7";
    struct job_spec j = {.topic = "t", .topic_len = 1, .body = body, .body_len = 1, .run_at = 5, .ttr = 1, .tries = 1};
    j.group = group;
    j.group_len = 6;
    struct jobchange r = {.kind = JC_INSERT, .to = JS_READY, .ver = 1, .id = 7, .at = 3, .job = &j};
    ck_assert_int_eq(journal_sql_message_row(&b, &r, "me:7000"), 0);
    struct jobchange rep = transition(7, 2, JS_READY, JS_READY);
    rep.kind = JC_REPLACE;
    rep.replacement = &j;
    const struct jobchange *u[1] = {&rep};
    ck_assert_int_eq(journal_sql_update_messages(&b, u, 1), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    const char *s = c.scripts[0];
    ck_assert_ptr_nonnull(strstr(
        s, "(7,'t',NULL,'1',5,0,1,1,0,NULL,'ready',1,3,3,NULL,NULL,NULL,NULL,'cust\\'7','ready','','','me:7000');"));
    ck_assert_ptr_nonnull(strstr(s, "tracestate = NULL, group_key = 'cust\\'7' WHERE id = 7 AND version = 2;"));
}
END_TEST

/* A long cycle goes out in several scripts, each of whole statements, with every row once. */
START_TEST(long_scripts_are_cut_between_statements)
{
    enum { N = 3000 };
    rebuild(4096, 0);
    static struct jobchange r[N];
    static const struct jobchange *u[N];
    for (int i = 0; i < N; i++) {
        r[i] = transition((uint64_t)i + 1, 2, JS_DELAYED, JS_READY);
        u[i] = &r[i];
        ck_assert_int_eq(journal_sql_transition_row(&b, &r[i], "i"), 0);
    }
    ck_assert_int_eq(journal_sql_update_messages(&b, u, N), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_gt(c.n, 10);
    size_t transitions = 0, updates = 0;
    for (size_t k = 0; k < c.n; k++) {
        const char *s = c.scripts[k];
        size_t len = strlen(s);
        ck_assert_msg(len > 0 && s[len - 1] == ';', "script %zu does not end a statement", k);
        ck_assert_msg(strncmp(s, "INSERT", 6) == 0 || strncmp(s, "DELETE", 6) == 0 || strncmp(s, "UPDATE", 6) == 0,
                      "script %zu starts inside a statement: %.40s", k, s);
        ck_assert_uint_lt(len, 4096 + 200); /* past the limit by at most one row */
        transitions += count(s, "'delayed','ready'");
        updates += count(s, "'ready',1,1700000005000,2,");
    }
    ck_assert_uint_eq(transitions, N);
    ck_assert_uint_eq(updates, N);
    /* the staging table is cleared once, before the first staged row, and applied once after */
    size_t clears = 0, applies = 0;
    for (size_t k = 0; k < c.n; k++) {
        clears += count(c.scripts[k], "DELETE FROM journal_update");
        applies += count(c.scripts[k], "UPDATE message m JOIN");
    }
    ck_assert_uint_eq(clears, 1);
    ck_assert_uint_eq(applies, 1);
    ck_assert_ptr_nonnull(strstr(c.scripts[c.n - 1], "UPDATE message m JOIN"));
}
END_TEST

START_TEST(a_failed_send_stops_the_build)
{
    rebuild(256, 2);
    int rc = 0, i;
    for (i = 0; i < 100 && rc == 0; i++) {
        struct jobchange r = transition((uint64_t)i + 1, 2, JS_DELAYED, JS_READY);
        rc = journal_sql_transition_row(&b, &r, "i");
    }
    ck_assert_int_eq(rc, -1);
    ck_assert_uint_eq(c.n, 2); /* nothing sent after the failure */
    ck_assert_int_lt(i, 100);
}
END_TEST

/* ---- the far tier ---- */

START_TEST(far_inserts_count_and_keep_bizkeys)
{
    char body[] = "1";
    struct job_spec a = {.topic = "orders", .topic_len = 6, .body = body, .body_len = 1, .run_at = 1800000000000};
    struct job_spec bz = a;
    char key[] = "o-'7";
    bz.biz_key = key;
    bz.biz_len = 4;
    struct job_spec m = a, pre = a;
    memcpy(m.topic, "mail", 5);
    m.topic_len = 4;
    memcpy(pre.topic, "mai", 4);
    pre.topic_len = 3;
    struct jobchange r[4] = {{.kind = JC_INSERT, .to = JS_FAR, .id = 10, .shard = 3, .job = &a},
                             {.kind = JC_INSERT, .to = JS_FAR, .id = 12, .shard = 5, .job = &m},
                             {.kind = JC_INSERT, .to = JS_FAR, .id = 11, .shard = 3, .job = &bz},
                             {.kind = JC_INSERT, .to = JS_FAR, .id = 13, .shard = 1, .job = &pre}};
    const struct jobchange *p[4] = {&r[0], &r[1], &r[2], &r[3]};
    ck_assert_int_eq(journal_sql_far_inserts(&b, p, 4), 0);
    ck_assert_int_eq(journal_sql_far_counts(&b, p, 4), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 1);
    /* no statement for the far keys: they are in the message rows (message_row_exact_text) */
    ck_assert_str_eq(c.scripts[0],
                     "INSERT INTO far_biz (id,topic,biz_key,run_at) VALUES (11,'orders','o-\\'7',1800000000000);"
                     /* one row per topic, whatever the records' order, and in one order of topics for
                      * every writer (the pager's too): no two transactions lock two topics crosswise */
                     "INSERT INTO far_count (topic,jobs) VALUES ('mai',1),('mail',1),('orders',2) "
                     "ON DUPLICATE KEY UPDATE jobs = jobs + VALUES(jobs);");
}
END_TEST

START_TEST(biz_latest_upserts_only_bizkey_pushes)
{
    char body[] = "1", key[] = "k-'1";
    struct job_spec plain = {.topic = "orders", .topic_len = 6, .body = body, .body_len = 1, .run_at = 1};
    struct job_spec keyed = plain;
    keyed.biz_key = key;
    keyed.biz_len = 4;
    struct jobchange r[3] = {{.kind = JC_INSERT, .to = JS_DELAYED, .id = 20, .job = &plain},
                             {.kind = JC_INSERT, .to = JS_FAR, .id = 21, .job = &keyed},
                             transition(22, 3, JS_READY, JS_RESERVED)};
    const struct jobchange *p[3] = {&r[0], &r[1], &r[2]};
    ck_assert_int_eq(journal_sql_biz_latest(&b, p, 3), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 1);
    ck_assert_str_eq(c.scripts[0],
                     "INSERT INTO biz_latest (topic,biz_key,id) VALUES ('orders','k-\\'1',21) ON DUPLICATE KEY "
                     "UPDATE prev_id = IF(VALUES(id) > id, id, prev_id), id = GREATEST(id, VALUES(id));");
}
END_TEST

START_TEST(aborted_pushes_give_the_key_back)
{
    struct jobchange dup = transition(30, 2, JS_DELAYED, JS_ABORTED), lost = transition(31, 2, JS_READY, JS_ABORTED);
    struct jobchange other = transition(32, 2, JS_READY, JS_RESERVED);
    dup.biz_holder = 9;
    const struct jobchange *p[3] = {&dup, &lost, &other};
    ck_assert_int_eq(journal_sql_biz_aborted(&b, p, 3), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 1);
    ck_assert_str_eq(c.scripts[0],
                     "UPDATE biz_latest b JOIN message m ON m.topic = b.topic AND m.biz_key = b.biz_key SET "
                     "b.id = 9 WHERE m.id = 30 AND b.id = 30;"
                     "UPDATE biz_latest b JOIN message m ON m.topic = b.topic AND m.biz_key = b.biz_key SET "
                     "b.id = COALESCE(b.prev_id, b.id) WHERE m.id = 31 AND b.id = 31;");
}
END_TEST

START_TEST(far_changes_are_guarded_on_the_row_being_far)
{
    struct jobchange del = transition(77, 2, JS_FAR, JS_DELETED);
    del.kind = JC_FAR_LEAVE;
    del.shard = 4;
    struct jobchange mv = transition(78, 2, JS_FAR, JS_FAR);
    mv.kind = JC_FAR_MOVE;
    mv.shard = 6;
    mv.run_at = 1900000000000;
    const struct jobchange *p[2] = {&del, &mv};
    ck_assert_int_eq(journal_sql_far_change(&b, &del, 0, "inst"), 0);
    ck_assert_int_eq(journal_sql_far_change(&b, &mv, 1, "inst"), 0);
    ck_assert_int_eq(journal_sql_far_leave_counts(&b, p, 2), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    ck_assert_uint_eq(c.n, 1);
    const char *q = c.scripts[0];
    /* the row is locked first and read into variables the later statements test */
    ck_assert_ptr_nonnull(strstr(q, "SET @far_topic_0 = NULL;SELECT topic INTO @far_topic_0 FROM message WHERE "
                                    "id = 77 AND state = 'far' FOR UPDATE;"));
    ck_assert_ptr_nonnull(strstr(q, "SELECT id, version + 1, 'far', 'deleted',"));
    ck_assert_ptr_nonnull(strstr(q, "DELETE FROM far_biz WHERE id = 77 AND @far_topic_0 IS NOT NULL;"));
    /* a leave clears the far key with the state, in one guarded UPDATE */
    ck_assert_ptr_nonnull(strstr(q,
                                 "UPDATE message SET state = 'deleted', far_shard = NULL, far_run_at = NULL, "
                                 "version = version + 1, updated_at = 1700000000002 WHERE id = 77 AND state = 'far';"));
    /* a move re-keys the far key with the due time and keeps the job far */
    ck_assert_ptr_nonnull(
        strstr(q, "UPDATE far_biz SET run_at = 1900000000000 WHERE id = 78 AND @far_topic_1 IS NOT NULL;"));
    ck_assert_ptr_nonnull(strstr(q,
                                 "UPDATE message SET run_at = 1900000000000, far_run_at = 1900000000000, "
                                 "version = version + 1, updated_at = 1700000000002 WHERE id = 78 AND state = 'far';"));
    ck_assert_ptr_null(strstr(q, "far_job"));
    /* only the leave is subtracted, and last (lock order: message, far_biz, far_count) */
    const char *count = strstr(q, "UPDATE far_count SET jobs = jobs - 1 WHERE topic = @far_topic_0;");
    ck_assert_ptr_nonnull(count);
    ck_assert_ptr_null(strstr(q, "@far_topic_1;"));
    ck_assert_str_eq(count + strlen("UPDATE far_count SET jobs = jobs - 1 WHERE topic = @far_topic_0;"), "");
}
END_TEST

START_TEST(refused_row_keeps_the_record_as_json)
{
    struct jobchange r = transition(77, 5, JS_RESERVED, JS_FINISHED);
    snprintf(r.actor, sizeof r.actor, "http-0 o'k");
    ck_assert_int_eq(journal_sql_refused_row(&b, &r, "1406: Data too long for 'actor'", 1234, "me:1"), 0);
    ck_assert_int_eq(journal_sql_send(&b), 0);
    const char *s = c.scripts[0];
    ck_assert_ptr_nonnull(strstr(s, "INSERT INTO refused_record (" REFUSED_COLUMNS ") VALUES (77,1234,"
                                    "'1406: Data too long for \\'actor\\''"));
    ck_assert_ptr_nonnull(strstr(s, "\\\"id\\\":\\\"77\\\""));
    ck_assert_ptr_nonnull(strstr(s, "\\\"from\\\":\\\"reserved\\\",\\\"to\\\":\\\"finished\\\""));
    ck_assert_ptr_nonnull(strstr(s, "\\\"actor\\\":\\\"http-0 o\\'k\\\""));
    ck_assert_ptr_nonnull(strstr(s, ",'me:1');"));

    struct sbuf json = SBUF_INIT;
    journal_sql_record_json(&json, &r);
    ck_assert_ptr_nonnull(strstr(json.data, "\"version\":5,\"attempts\":2,"));
    sb_free(&json);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("journal_sql");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, message_row_exact_text);
    tcase_add_test(tc, values_are_escaped);
    tcase_add_test(tc, transition_rows_share_one_insert);
    tcase_add_test(tc, full_size_fields_without_nul_are_cut_at_their_size);
    tcase_add_test(tc, switching_kinds_ends_the_statement);
    tcase_add_test(tc, updates_keep_the_newest_per_job);
    tcase_add_test(tc, replacements_are_guarded_by_version);
    tcase_add_test(tc, trace_context_columns);
    tcase_add_test(tc, group_column);
    tcase_add_test(tc, long_scripts_are_cut_between_statements);
    tcase_add_test(tc, a_failed_send_stops_the_build);
    tcase_add_test(tc, refused_row_keeps_the_record_as_json);
    tcase_add_test(tc, far_inserts_count_and_keep_bizkeys);
    tcase_add_test(tc, far_changes_are_guarded_on_the_row_being_far);
    tcase_add_test(tc, biz_latest_upserts_only_bizkey_pushes);
    tcase_add_test(tc, aborted_pushes_give_the_key_back);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
