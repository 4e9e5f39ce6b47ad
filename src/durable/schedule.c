/* schedule.c — see schedule.h. */
#include "durable/schedule.h"
#include "base/clock.h"
#include "base/cron.h"
#include "mysql/db.h"
#include "core/ids.h"
#include "base/sbuf.h"
#include "core/trace.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char *const catch_up_names[] = {"skip", "one", "all"};

const char *schedule_catch_up_name(enum catch_up c)
{
    return (unsigned)c < 3 ? catch_up_names[c] : "skip";
}

void schedule_clear(struct schedule *s)
{
    free(s->job);
    s->job = NULL;
    s->job_len = 0;
}

int schedule_cron_rule(const struct schedule *s, const struct tz *tz, struct cron_rule *out, char *err, size_t errlen)
{
    if (s->cron[0])
        return cron_rule_init_cron(out, s->cron, tz, err, errlen);
    return cron_rule_init_every(out, s->every_ms, s->anchor_ms, err, errlen);
}

/* The fields a job template may have: what /push takes, less what each fire decides. */
static const char *const job_fields[] = {"body", "priority", "ttr", "tries", "backoff", NULL};

static int check_job(json_t *job, const char *topic, const struct job_limits *lim, struct schedule *out, char *err,
                     size_t errlen)
{
    if (!json_is_object(job)) {
        snprintf(err, errlen, "job: must be a JSON object {body, priority, ttr, tries, backoff}");
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(job, key, v)
    {
        int known = 0;
        for (int i = 0; job_fields[i] && !known; i++)
            known = strcmp(key, job_fields[i]) == 0;
        if (!known) {
            snprintf(err, errlen,
                     "job.%.40s: not a field of a schedule's job (known: body, priority, ttr, tries, "
                     "backoff; each fire sets topic, runAt, bizKey and a new traceparent)",
                     key);
            return -1;
        }
    }
    char *text = json_dumps(job, JSON_COMPACT);
    if (text == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t len = strlen(text);
    if (len > SCHEDULE_JOB_MAX) {
        snprintf(err, errlen, "job: at most %d bytes of JSON", SCHEDULE_JOB_MAX);
        free(text);
        return -1;
    }
    /* Checked as /push will check each fire: the same limits, the same messages. */
    struct sbuf probe = SBUF_INIT;
    sb_puts(&probe, "{\"topic\":");
    sb_json_cstr(&probe, topic);
    if (len > 2) {
        sb_putc(&probe, ',');
        sb_put(&probe, text + 1, len - 1);
    } else {
        sb_putc(&probe, '}');
    }
    struct job_spec *jobs = NULL;
    int n = 0, is_array = 0;
    char perr[256];
    enum push_parse_result pr = probe.oom ? PUSH_NOMEM
                                          : job_parse_push(probe.data, probe.len, lim, clock_unix_ms(), &jobs, &n,
                                                           &is_array, perr, sizeof perr);
    sb_free(&probe);
    if (pr != PUSH_OK) {
        snprintf(err, errlen, "job: %s", pr == PUSH_NOMEM ? "out of memory" : perr);
        free(text);
        return -1;
    }
    job_specs_free(jobs, n);
    out->job = text;
    out->job_len = len;
    return 0;
}

int schedule_load_zone(const struct schedule *s, struct tz **zone, char *err, size_t errlen)
{
    *zone = NULL;
    if (s->cron[0] == '\0')
        return 0;
    char zerr[256];
    if ((*zone = tz_load(s->tz, zerr, sizeof zerr)) == NULL) {
        snprintf(err, errlen, "tz: %s", zerr);
        return -1;
    }
    return 0;
}

int schedule_parse(const char *json, size_t len, const struct job_limits *lim, struct schedule *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "body is not valid JSON: %s", jerr.text);
        return -1;
    }
    int rc = -1;
    const char *key;
    json_t *v;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "body must be a JSON object {topic, cron | every, tz, job, catchUp}");
        goto out;
    }
    json_object_foreach(root, key, v)
    {
        static const char *const known[] = {"topic", "cron", "every", "tz", "job", "catchUp", "paused", NULL};
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++)
            ok = strcmp(key, known[i]) == 0;
        if (!ok) {
            snprintf(err, errlen, "unknown field \"%.40s\" (known: topic, cron, every, tz, job, catchUp, paused)", key);
            goto out;
        }
    }
    json_t *topic = json_object_get(root, "topic");
    if (!json_is_string(topic) || json_string_length(topic) == 0 || json_string_length(topic) > TOPIC_MAX ||
        !job_topic_valid(json_string_value(topic), json_string_length(topic))) {
        snprintf(err, errlen, "topic: required, 1-%d characters of A-Z a-z 0-9 _ . : -", TOPIC_MAX);
        goto out;
    }
    snprintf(out->topic, sizeof out->topic, "%s", json_string_value(topic));

    json_t *tzv = json_object_get(root, "tz");
    if (tzv && !json_is_string(tzv)) {
        snprintf(err, errlen, "tz: must be an IANA zone name such as \"Europe/Berlin\"");
        goto out;
    }
    snprintf(out->tz, sizeof out->tz, "%s", tzv ? json_string_value(tzv) : "UTC");
    if (tz_name_valid(out->tz) < 0) {
        snprintf(err, errlen, "tz: \"%.64s\" is not a zone name such as \"Europe/Berlin\"", out->tz);
        goto out;
    }
    json_t *cron = json_object_get(root, "cron"), *every = json_object_get(root, "every");
    if ((cron == NULL) == (every == NULL)) {
        snprintf(err, errlen, "give cron (\"minute hour day-of-month month day-of-week\") or every (ms), not %s",
                 cron ? "both" : "neither");
        goto out;
    }
    if (cron) {
        if (!json_is_string(cron) || json_string_length(cron) > SCHEDULE_CRON_MAX) {
            snprintf(err, errlen, "cron: must be a string of 5 fields, at most %d characters", SCHEDULE_CRON_MAX);
            goto out;
        }
        snprintf(out->cron, sizeof out->cron, "%s", json_string_value(cron));
        struct cron_expr expr;
        char cerr[CRON_ERR_MAX];
        if (cron_parse(out->cron, &expr, cerr, sizeof cerr) < 0) {
            snprintf(err, errlen, "cron: %s", cerr);
            goto out;
        }
    } else {
        if (!json_is_integer(every) || json_integer_value(every) < SCHEDULE_EVERY_MIN ||
            json_integer_value(every) > lim->max_delay) {
            snprintf(err, errlen, "every: must be an integer number of ms from %d to max_delay (%lld)",
                     SCHEDULE_EVERY_MIN, (long long)lim->max_delay);
            goto out;
        }
        out->every_ms = json_integer_value(every);
        if (tzv) {
            snprintf(err, errlen, "tz: only for cron; an interval counts milliseconds, not wall time");
            goto out;
        }
    }
    json_t *cu = json_object_get(root, "catchUp");
    if (cu) {
        int found = -1;
        for (int i = 0; i < 3 && json_is_string(cu); i++)
            if (strcmp(json_string_value(cu), catch_up_names[i]) == 0)
                found = i;
        if (found < 0) {
            snprintf(err, errlen, "catchUp: must be \"skip\", \"one\" or \"all\"");
            goto out;
        }
        out->catch_up = (enum catch_up)found;
    }
    json_t *paused = json_object_get(root, "paused");
    if (paused && !json_is_boolean(paused)) {
        snprintf(err, errlen, "paused: must be true or false");
        goto out;
    }
    out->paused = paused && json_is_true(paused);
    json_t *job = json_object_get(root, "job");
    if (job == NULL) {
        snprintf(err, errlen, "job: required, the job each fire pushes: {body, priority, ttr, tries, backoff}");
        goto out;
    }
    rc = check_job(job, out->topic, lim, out, err, errlen);
out:
    json_decref(root);
    if (rc < 0)
        schedule_clear(out);
    return rc;
}

/* How many fires of sc in (a, b]: counted a chunk at a time, up to SCHEDULE_COUNT_MAX. */
static int64_t count_fires(const struct cron_rule *sc, int64_t a, int64_t b)
{
    int64_t buf[SCHEDULE_CATCHUP_MAX], n = 0;
    while (n < SCHEDULE_COUNT_MAX) {
        size_t k = cron_rule_fires(sc, a, b, buf, SCHEDULE_CATCHUP_MAX);
        if (k <= SCHEDULE_CATCHUP_MAX)
            return n + (int64_t)k;
        n += SCHEDULE_CATCHUP_MAX;
        a = buf[SCHEDULE_CATCHUP_MAX - 1];
    }
    return n;
}

int schedule_due(const struct schedule *s, const struct cron_rule *sc, int64_t now, int64_t grace, int64_t lookahead,
                 int64_t *at, int cap, struct schedule_due *due)
{
    int64_t from = s->fired_through, to = now + lookahead;
    int64_t missed_edge = now - grace;
    memset(due, 0, sizeof *due);
    int n = 0, missed_any = 0;
    if (from < missed_edge) {
        /* the daemon (or the fleet) was down: the fires older than the grace follow catchUp */
        if (cron_rule_fires(sc, from, missed_edge, NULL, 0) > 0) {
            missed_any = 1;
            int64_t missed = count_fires(sc, from, missed_edge);
            if (s->catch_up == CATCHUP_ONE) {
                at[n++] = cron_rule_last(sc, from, missed_edge);
            } else if (s->catch_up == CATCHUP_ALL) {
                size_t all = cron_rule_fires(sc, from, missed_edge, at, (size_t)cap);
                n = all > (size_t)cap ? cap : (int)all;
            }
            due->caught_up = n;
            due->skipped = missed - n;
        }
        from = missed_edge;
    }
    if (n == cap) { /* the missed ones now, the on-time ones next time round */
        due->n = n;
        due->through = from;
        return 1;
    }
    size_t more = cron_rule_fires(sc, from, to, at + n, (size_t)(cap - n));
    if (more > (size_t)(cap - n)) { /* more than fit: the rest next time round */
        due->n = cap;
        due->through = at[cap - 1];
        return 1;
    }
    n += (int)more;
    if (n == 0 && !missed_any)
        return 0;
    due->n = n;
    due->through = to;
    return 1;
}

static void put_id(struct sbuf *sb, uint64_t id)
{
    char dec[ID_DECIMAL_MAX + 1];
    int n = id_format(id, dec);
    sb_putc(sb, '"');
    sb_put(sb, dec, (size_t)n);
    sb_putc(sb, '"');
}

void schedule_json(struct sbuf *sb, const struct schedule *s, int64_t next)
{
    sb_puts(sb, "{\"id\":");
    put_id(sb, s->id);
    sb_puts(sb, ",\"topic\":");
    sb_json_cstr(sb, s->topic);
    if (s->cron[0]) {
        sb_puts(sb, ",\"cron\":");
        sb_json_cstr(sb, s->cron);
        sb_puts(sb, ",\"tz\":");
        sb_json_cstr(sb, s->tz);
    } else {
        sb_printf(sb, ",\"every\":%lld", (long long)s->every_ms);
    }
    sb_puts(sb, ",\"job\":");
    sb_put(sb, s->job ? s->job : "{}", s->job ? s->job_len : 2);
    sb_printf(sb, ",\"catchUp\":\"%s\",\"paused\":%s", schedule_catch_up_name(s->catch_up),
              s->paused ? "true" : "false");
    if (next == CRON_NEVER)
        sb_puts(sb, ",\"next\":null");
    else
        sb_printf(sb, ",\"next\":%lld", (long long)next);
    sb_printf(
        sb, ",\"firedThrough\":%lld,\"missed\":{\"made\":%lld,\"skipped\":%lld},\"createdAt\":%lld,\"updatedAt\":%lld}",
        (long long)s->fired_through, (long long)s->missed_made, (long long)s->missed_skipped, (long long)s->created_at,
        (long long)s->updated_at);
}

/* A new trace for one fire (core/trace.h): random ids from the kernel's generator. 0, or -1
 * when it has none to give (the fire is pushed without a trace rather than not at all). */
static int new_traceparent(char out[TRACE_PARENT_LEN + 1])
{
    unsigned char bytes[TRACE_RANDOM_BYTES];
    for (int tries = 0; tries < 4; tries++) {
        if (getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != (ssize_t)sizeof bytes)
            return -1;
        if (trace_parent_make(out, bytes) == 0)
            return 0;
    }
    return -1; /* all-zero ids four times: a broken generator */
}

void schedule_push_body(struct sbuf *sb, const struct schedule *s, const int64_t *at, int n)
{
    char dec[ID_DECIMAL_MAX + 1];
    int dlen = id_format(s->id, dec);
    sb_putc(sb, '[');
    for (int i = 0; i < n; i++) {
        if (i)
            sb_putc(sb, ',');
        sb_puts(sb, "{\"topic\":");
        sb_json_cstr(sb, s->topic);
        sb_printf(sb, ",\"runAt\":%lld,\"bizKey\":\"%.*s@%lld\"", (long long)at[i], dlen, dec, (long long)at[i]);
        char traceparent[TRACE_PARENT_LEN + 1]; /* each fire starts a trace of its own */
        if (new_traceparent(traceparent) == 0)
            sb_printf(sb, ",\"traceparent\":\"%s\"", traceparent);
        if (s->job_len > 2) { /* the template's members: "{...}" without its braces */
            sb_putc(sb, ',');
            sb_put(sb, s->job + 1, s->job_len - 2);
        }
        sb_putc(sb, '}');
    }
    sb_putc(sb, ']');
}

/* ---- MySQL ---- */

#define COLUMNS                                                                                                        \
    "id, topic, cron, every_ms, tz, job, catch_up, paused, anchor_ms, fired_through, created_at, "                     \
    "updated_at, version, missed_made, missed_skipped"

static void db_err(MYSQL *db, char *err, size_t errlen)
{
    snprintf(err, errlen, "MySQL: %s", mysql_error(db));
}

/* A statement or COMMIT failed: its words into err, and the transaction rolled back. -1. */
static int failed(MYSQL *db, char *err, size_t errlen)
{
    db_err(db, err, errlen);
    mysql_rollback(db);
    return -1;
}

/* Send one statement (sql is freed). Writes and commits go through db.h (db_exec, db_commit):
 * the fault seam's points, so a test can lose the watermark after the fires were pushed (the
 * window a crash leaves); reads do not, so the seam's arrivals on the scheduler thread count
 * its writes alone, whatever it polls. */
static int send_sql(MYSQL *db, struct sbuf *sql, int is_write, char *err, size_t errlen)
{
    int rc = sql->oom   ? -1
             : is_write ? db_exec(db, sql->data, sql->len)
                        : mysql_real_query(db, sql->data, (unsigned long)sql->len);
    sb_free(sql);
    return rc != 0 ? failed(db, err, errlen) : 0;
}

static int run(MYSQL *db, struct sbuf *sql, char *err, size_t errlen)
{
    return send_sql(db, sql, 1, err, errlen);
}

static int query(MYSQL *db, struct sbuf *sql, char *err, size_t errlen)
{
    return send_sql(db, sql, 0, err, errlen);
}

static int commit(MYSQL *db, char *err, size_t errlen)
{
    return db_commit(db) != 0 ? failed(db, err, errlen) : 0;
}

int schedule_db_insert(MYSQL *db, const struct schedule *s, char *err, size_t errlen)
{
    struct sbuf sql = SBUF_INIT;
    sb_printf(&sql, "INSERT INTO schedule (" COLUMNS ") VALUES (%llu,", (unsigned long long)s->id);
    db_quote(db, &sql, s->topic, strlen(s->topic));
    sb_putc(&sql, ',');
    if (s->cron[0])
        db_quote(db, &sql, s->cron, strlen(s->cron));
    else
        sb_puts(&sql, "NULL");
    sb_printf(&sql, ",%lld,", (long long)s->every_ms);
    db_quote(db, &sql, s->tz, strlen(s->tz));
    sb_putc(&sql, ',');
    db_quote(db, &sql, s->job, s->job_len);
    sb_printf(&sql, ",'%s',%d,%lld,%lld,%lld,%lld,1,0,0)", schedule_catch_up_name(s->catch_up), s->paused,
              (long long)s->anchor_ms, (long long)s->fired_through, (long long)s->created_at, (long long)s->updated_at);
    if (run(db, &sql, err, errlen) < 0)
        return -1;
    return commit(db, err, errlen);
}

static int read_row(MYSQL_ROW row, unsigned long *lens, struct schedule *s)
{
    memset(s, 0, sizeof *s);
    s->id = strtoull(row[0], NULL, 10);
    snprintf(s->topic, sizeof s->topic, "%s", row[1]);
    snprintf(s->cron, sizeof s->cron, "%s", row[2] ? row[2] : "");
    s->every_ms = strtoll(row[3], NULL, 10);
    snprintf(s->tz, sizeof s->tz, "%s", row[4]);
    if ((s->job = malloc(lens[5] + 1)) == NULL)
        return -1;
    memcpy(s->job, row[5], lens[5]);
    s->job[lens[5]] = '\0';
    s->job_len = lens[5];
    s->catch_up = CATCHUP_SKIP;
    for (int i = 0; i < 3; i++)
        if (strcmp(row[6], catch_up_names[i]) == 0)
            s->catch_up = (enum catch_up)i;
    s->paused = atoi(row[7]) != 0;
    s->anchor_ms = strtoll(row[8], NULL, 10);
    s->fired_through = strtoll(row[9], NULL, 10);
    s->created_at = strtoll(row[10], NULL, 10);
    s->updated_at = strtoll(row[11], NULL, 10);
    s->version = (unsigned)strtoul(row[12], NULL, 10);
    s->missed_made = strtoll(row[13], NULL, 10);
    s->missed_skipped = strtoll(row[14], NULL, 10);
    return 0;
}

/* Run a SELECT of COLUMNS; the rows read into a new array. The count, or -1. */
static int select_rows(MYSQL *db, struct sbuf *sql, struct schedule **out, char *err, size_t errlen)
{
    *out = NULL;
    if (query(db, sql, err, errlen) < 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db); /* end the read's snapshot: the next read sees newer commits */
    if (res == NULL) {
        db_err(db, err, errlen);
        return -1;
    }
    int n = (int)mysql_num_rows(res), k = 0;
    struct schedule *list = calloc((size_t)(n ? n : 1), sizeof *list);
    MYSQL_ROW row;
    while (list && k < n && (row = mysql_fetch_row(res)) != NULL) {
        if (read_row(row, mysql_fetch_lengths(res), &list[k]) < 0)
            break;
        k++;
    }
    mysql_free_result(res);
    if (list == NULL || k < n) {
        schedule_list_free(list, k);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (n == 0) { /* nothing to hand over (the one-slot array was only there to be non-NULL) */
        free(list);
        list = NULL;
    }
    *out = list;
    return n;
}

int schedule_db_get(MYSQL *db, uint64_t id, struct schedule *out, char *err, size_t errlen)
{
    struct sbuf sql = SBUF_INIT;
    sb_printf(&sql, "SELECT " COLUMNS " FROM schedule WHERE id = %llu", (unsigned long long)id);
    struct schedule *list;
    int n = select_rows(db, &sql, &list, err, errlen);
    if (n <= 0)
        return n;
    *out = list[0];
    free(list);
    return 1;
}

int schedule_db_list(MYSQL *db, struct schedule **out, char *err, size_t errlen)
{
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT " COLUMNS " FROM schedule ORDER BY id");
    return select_rows(db, &sql, out, err, errlen);
}

void schedule_list_free(struct schedule *list, int n)
{
    for (int i = 0; list && i < n; i++)
        schedule_clear(&list[i]);
    free(list);
}

/* Run an UPDATE/DELETE and commit: the rows it matched (1 or 0), or -1. A change asked for
 * through the API (`after_cluster`) first waits for what the cluster committed: on Galera a
 * schedule just created through another node may not be applied on this one yet, and its
 * DELETE or pause would match nothing and answer 404 (db_wait_for_cluster). */
static int change(MYSQL *db, struct sbuf *sql, int after_cluster, char *err, size_t errlen)
{
    if (after_cluster && db_wait_for_cluster(db) < 0) {
        sb_free(sql);
        return failed(db, err, errlen);
    }
    if (run(db, sql, err, errlen) < 0)
        return -1;
    my_ulonglong affected = mysql_affected_rows(db);
    if (commit(db, err, errlen) < 0)
        return -1;
    return affected > 0 ? 1 : 0;
}

int schedule_db_delete(MYSQL *db, uint64_t id, char *err, size_t errlen)
{
    struct sbuf sql = SBUF_INIT;
    sb_printf(&sql, "DELETE FROM schedule WHERE id = %llu", (unsigned long long)id);
    return change(db, &sql, 1, err, errlen);
}

int schedule_db_set_paused(MYSQL *db, uint64_t id, int paused, int64_t now, char *err, size_t errlen)
{
    /* Only a real change bumps the version (the instances' signature): a resume of a running
     * schedule must not move its watermark, or it would skip a fire being made right now. */
    struct sbuf sql = SBUF_INIT;
    sb_printf(&sql,
              "UPDATE schedule SET fired_through = IF(paused = 1 AND %d = 0, GREATEST(fired_through, %lld), "
              "fired_through), version = version + 1, updated_at = %lld, paused = %d WHERE id = %llu AND paused <> %d",
              paused, (long long)now, (long long)now, paused, (unsigned long long)id, paused);
    int rc = change(db, &sql, 1, err, errlen);
    if (rc != 0)
        return rc;
    struct schedule s; /* nothing changed: already so, or no such schedule */
    rc = schedule_db_get(db, id, &s, err, errlen);
    if (rc == 1)
        schedule_clear(&s);
    return rc;
}

int schedule_db_advance(MYSQL *db, uint64_t id, int64_t from, const struct schedule_due *due, char *err, size_t errlen)
{
    struct sbuf sql = SBUF_INIT;
    sb_printf(&sql,
              "UPDATE schedule SET fired_through = %lld, missed_made = missed_made + %lld, missed_skipped = "
              "missed_skipped + %lld WHERE id = %llu AND fired_through = %lld",
              (long long)due->through, (long long)due->caught_up, (long long)due->skipped, (unsigned long long)id,
              (long long)from);
    return change(db, &sql, 0, err, errlen); /* its row was read first, after the cluster */
}

int schedule_db_made(MYSQL *db, const struct schedule *s, const int64_t *at, int n, char *made, char *err,
                     size_t errlen)
{
    memset(made, 0, (size_t)n);
    if (n <= 0)
        return 0;
    char dec[ID_DECIMAL_MAX + 1];
    int dlen = id_format(s->id, dec);
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT b.biz_key FROM biz_latest b JOIN message m ON m.id = b.id WHERE b.topic = ");
    db_quote(db, &sql, s->topic, strlen(s->topic));
    sb_puts(&sql, " AND m.state <> 'aborted' AND b.biz_key IN (");
    for (int i = 0; i < n; i++)
        sb_printf(&sql, "%s'%.*s@%lld'", i ? "," : "", dlen, dec, (long long)at[i]);
    sb_putc(&sql, ')');
    if (query(db, &sql, err, errlen) < 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db);
    if (res == NULL) {
        db_err(db, err, errlen);
        return -1;
    }
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL) {
        const char *at_text = strchr(row[0], '@');
        int64_t t = at_text ? strtoll(at_text + 1, NULL, 10) : -1;
        for (int i = 0; i < n; i++)
            if (at[i] == t)
                made[i] = 1;
    }
    mysql_free_result(res);
    return 0;
}

int schedule_db_signature(MYSQL *db, char *out, size_t cap)
{
    static const char sql[] = "SELECT COUNT(*), COALESCE(SUM(version), 0), COALESCE(MAX(updated_at), 0), "
                              "COALESCE(BIT_XOR(id), 0) FROM schedule";
    if (mysql_real_query(db, sql, sizeof sql - 1) != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db);
    if (res == NULL)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    if (row)
        snprintf(out, cap, "%s/%s/%s/%s", row[0], row[1], row[2], row[3]);
    mysql_free_result(res);
    return row ? 0 : -1;
}
