/* api_jobs.c — endpoints that act on one job by id (finish, release, touch, delete,
 * reschedule, inspect) and the dead-job listing.
 *
 * Each transition is one Lua script on the job's shard (the shard comes from the id), then a
 * batched journal record. Delete is the exception the contract makes durable: its transition
 * is committed in MySQL before Redis is changed, so a 503 means nothing happened and a 200
 * means no restore can ever bring the job back. */
#include "api/handlers.h"
#include "api/api_util.h"
#include "redis/jobjson.h"
#include "base/clock.h"
#include "mysql/dbtask.h"
#include "durable/doubt.h"
#include "core/ids.h"
#include "durable/journal.h"
#include "base/log.h"
#include "durable/outbox.h"
#include "durable/pager.h"
#include "core/metrics.h"
#include "core/app.h"

#include <stdlib.h>
#include <string.h>

/* Per-request state for the by-id endpoints. */
struct id_state {
    struct request *r;
    uint64_t id;
    int shard;
    char who[STORE_WHO_MAX];
    struct jobchange rec; /* delete: the durable transition */
    int64_t due;          /* reschedule: the new due time */
    int retried;          /* a far lookup found the job paged in meanwhile: Redis was asked again */
    struct far_view {     /* the job's message row, when Redis lacks the job (it may be far) */
        int found;        /* 1, 0 (no row), -1 (MySQL failed) */
        int state;
        unsigned ver;
        int64_t run_at;
        char topic[TOPIC_MAX + 1];
        char biz[4 * BIZKEY_MAX + 1];
    } far;
};

static void id_state_free(void *p)
{
    free(p);
}

static struct id_state *id_state_new(struct request *r, uint64_t id)
{
    struct id_state *st = api_state_new(r, sizeof *st, id_state_free);
    if (st == NULL)
        return NULL;
    st->r = r;
    st->id = id;
    st->shard = id_shard(id, r->ctx->app->cfg.redis_shards);
    api_who(r, st->who, sizeof st->who);
    return st;
}

/* Common prologue: allowed params, id, Redis up, journal room. NULL when answered. */
static struct id_state *begin(struct request *r, const char *const *allowed, int journals)
{
    uint64_t id;
    if (api_params_only(r, allowed) < 0 || api_param_id(r, &id) < 0 || api_require_redis(r) < 0)
        return NULL;
    if (journals && api_require_journal_room(r) < 0)
        return NULL;
    return id_state_new(r, id);
}

static void answer_state(struct id_state *st, const char *state, const char *extra_key, int64_t extra)
{
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "{\"id\":");
    jobjson_id(&sb, st->id);
    if (state) {
        sb_puts(&sb, ",\"state\":");
        sb_json_cstr(&sb, state);
    }
    if (extra_key)
        sb_printf(&sb, ",\"%s\":%lld", extra_key, (long long)extra);
    sb_putc(&sb, '}');
    respond_json(st->r, 200, &sb);
    sb_free(&sb);
}

/* ---- finish ---- */

static void on_finished(const struct id_outcome *o, void *arg)
{
    struct id_state *st = arg;
    if (api_answer_outcome(st->r, o, "reserved"))
        return;
    metrics_transition(JS_RESERVED, JS_FINISHED, 1);
    answer_state(st, "finished", NULL, 0);
}

void api_finish(struct request *r)
{
    static const char *const allowed[] = {"id", "attempt", NULL};
    struct id_state *st = begin(r, allowed, 1);
    int attempt;
    if (st == NULL || api_param_attempt(r, &attempt) < 0)
        return;
    /* with the other finishes of this pass, in one call (passmerge.h) */
    if (api_merged_finish(r->ctx, st->id, attempt, st->who, on_finished, st) < 0)
        respond_unavailable(r, "memory");
}

/* ---- release ---- */

static void on_released(const struct id_outcome *o, void *arg)
{
    struct id_state *st = arg;
    if (api_answer_outcome(st->r, o, "reserved"))
        return;
    metrics_transition(JS_RESERVED, o->state, 1);
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "{\"id\":");
    jobjson_id(&sb, st->id);
    sb_printf(&sb, ",\"state\":\"%s\",\"runAt\":%lld}", job_state_name(o->state), (long long)o->run_at);
    respond_json(st->r, 200, &sb);
    sb_free(&sb);
}

void api_release(struct request *r)
{
    static const char *const allowed[] = {"id", "delay", "attempt", NULL};
    struct id_state *st = begin(r, allowed, 1);
    int attempt;
    int64_t delay;
    char err[128];
    if (st == NULL || api_param_attempt(r, &attempt) < 0)
        return;
    /* no delay: after the topic's backoff (0 unless configured: at once, as before) */
    if (param_int(&r->params, "delay", 0, r->ctx->app->cfg.max_delay, -1, &delay, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    if (store_release(&r->ctx->store, st->id, clock_unix_ms(), delay, attempt, st->who, on_released, st) < 0)
        respond_unavailable(r, "Redis");
}

/* ---- touch ---- */

static void on_touched(const struct id_outcome *o, void *arg)
{
    struct id_state *st = arg;
    if (api_answer_outcome(st->r, o, "reserved"))
        return;
    answer_state(st, NULL, "leaseUntil", o->lease_until);
}

void api_touch(struct request *r)
{
    static const char *const allowed[] = {"id", "attempt", NULL};
    struct id_state *st = begin(r, allowed, 0);
    int attempt;
    if (st == NULL || api_param_attempt(r, &attempt) < 0)
        return;
    if (store_touch(&r->ctx->store, st->id, clock_unix_ms(), attempt, on_touched, st) < 0)
        respond_unavailable(r, "Redis");
}

/* ---- the far tier: a job MySQL alone holds (state 'far', due beyond the horizon) ----
 * A by-id operation that finds nothing in Redis reads the message row on a pool thread; a far
 * job is then changed in MySQL (JC_FAR_LEAVE / JC_FAR_MOVE, guarded on the row still being
 * far: if the pager took it meanwhile, the change is a no-op there and the Redis step after it
 * finds the job). */

static void far_read_run(MYSQL *db, void *arg)
{
    struct id_state *st = arg;
    struct far_view *f = &st->far;
    f->found = -1;
    if (db == NULL)
        return;
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT state, version, run_at, topic, biz_key FROM message WHERE id = %llu",
             (unsigned long long)st->id);
    if (mysql_query(db, sql) != 0)
        return;
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db);
    if (res == NULL)
        return;
    MYSQL_ROW row = mysql_fetch_row(res);
    f->found = row != NULL;
    if (row) {
        f->state = job_state_parse(row[0]);
        f->ver = (unsigned)strtoul(row[1], NULL, 10);
        f->run_at = strtoll(row[2], NULL, 10);
        snprintf(f->topic, sizeof f->topic, "%s", row[3]);
        snprintf(f->biz, sizeof f->biz, "%s", row[4] ? row[4] : "");
    }
    mysql_free_result(res);
}

/* Read the row, then `done` on the worker; 1 when it was submitted, 0 when answered (503). */
static int far_lookup(struct id_state *st, dbtask_done_fn done)
{
    if (dbtask_submit(far_read_run, done, st->r->ctx->inbox, st) == 0)
        return 1;
    respond_unavailable(st->r, "MySQL");
    return 0;
}

/* After far_lookup: 1 when the row is a far job; 0 when answered (404 or 503); -1 when the row
 * is live in Redis's tier — the pager took the job between the Redis call and the read: the
 * caller goes to Redis once more (st->retried). */
static int far_found(struct id_state *st)
{
    if (st->far.found < 0) {
        respond_unavailable(st->r, "MySQL");
        return 0;
    }
    int near = st->far.state == JS_DELAYED || st->far.state == JS_READY || st->far.state == JS_RESERVED;
    if (st->far.found && near && !st->retried) {
        st->retried = 1;
        return -1;
    }
    if (!st->far.found || st->far.state != JS_FAR) {
        respond_error(st->r, 404, "not_found", "no live job with this id (unknown, finished or deleted)");
        return 0;
    }
    return 1;
}

/* Submit st->rec (a far change) durably; `done` runs once committed. 0, or -1 when answered. */
static int far_commit(struct id_state *st, int kind, int to, int64_t run_at, journal_done_fn done)
{
    struct request *r = st->r;
    api_fill_jobchange(&st->rec, r, st->id, st->shard, "jobs", JS_FAR, to, st->far.ver + 1, 0, run_at);
    st->rec.kind = (uint8_t)kind;
    if (journal_submit_sync(&st->rec, 1, r->ctx->inbox, done, st) == 0)
        return 0;
    respond_unavailable(r, "MySQL");
    return -1;
}

static void on_far_deleted(const struct id_outcome *o, void *arg)
{
    struct id_state *st = arg;
    if (o == NULL)
        log_warn("delete: far job %llu is deleted in MySQL, but Redis did not take its tombstone; its bizKey "
                 "entry may linger until /reStore",
                 (unsigned long long)st->id);
    metrics_transition(o && o->status == ID_OK ? o->from_state : JS_FAR, JS_DELETED, 1);
    answer_state(st, "deleted", NULL, 0);
}

static void on_far_delete_committed(int ok, void *arg)
{
    struct id_state *st = arg;
    if (!ok) {
        respond_unavailable(st->r, "MySQL");
        return;
    }
    /* Committed: the job is deleted whatever Redis says now (the pager, finding the row
     * deleted, takes back anything it paged in from it). */
    if (store_fardelete(&st->r->ctx->store, st->id, clock_unix_ms(), st->who, st->far.topic, st->far.biz,
                        on_far_deleted, st) < 0)
        on_far_deleted(NULL, st);
}

static void on_delete_checked(const struct job_view *v, void *arg);

static void on_far_delete_read(void *arg)
{
    struct id_state *st = arg;
    switch (far_found(st)) {
    case 1:
        far_commit(st, JC_FAR_LEAVE, JS_DELETED, st->far.run_at, on_far_delete_committed);
        break;
    case -1:
        if (store_inspect(&st->r->ctx->store, st->id, on_delete_checked, st) < 0)
            respond_unavailable(st->r, "Redis");
        break;
    }
}

/* ---- delete: MySQL first ---- */

static void on_deleted(const struct id_outcome *o, void *arg)
{
    struct id_state *st = arg;
    if (o == NULL) {
        /* MySQL says deleted, Redis did not answer (or refused): the reconciler carries the
         * delete out in Redis unless the job moved on meanwhile (doubt.h). */
        doubt_delete(st->id, st->rec.ver - 1, NULL);
        respond_unavailable(st->r, "Redis");
        return;
    }
    if (o->status != ID_OK && !o->lost && atomic_load(&st->r->ctx->app->redis_loss_at) == 0) {
        /* it ended meanwhile (a finish, another delete): that transition is newer than this
         * delete's commit and wins in MySQL, so the delete did not happen */
        respond_error(st->r, 404, "not_found", "the job ended before it could be deleted");
        return;
    }
    if (o->status != ID_OK) {
        /* Redis lost the job with its data (the shard's marks gone, or a loss this instance saw
         * and no restore has repaired yet) between the pre-check and now: no newer transition
         * can follow, the delete's commit holds and no restore brings the job back — a 404
         * would say it did not happen (CI of stop 39) */
        log_debug("delete: job %llu went with Redis's data before delete.lua ran; deleted in MySQL",
                  (unsigned long long)st->id);
        metrics_transition(st->rec.from, JS_DELETED, 1);
        answer_state(st, "deleted", NULL, 0);
        return;
    }
    /* delete.lua's outbox entry brings the row to the version Redis reached, newer than
     * anything that happened between the pre-check and now */
    metrics_transition(o->from_state, JS_DELETED, 1);
    answer_state(st, "deleted", NULL, 0);
}

static void on_delete_committed(int ok, void *arg)
{
    struct id_state *st = arg;
    if (!ok) {
        respond_unavailable(st->r, "MySQL");
        return;
    }
    if (store_delete(&st->r->ctx->store, st->id, clock_unix_ms(), st->who, on_deleted, st) < 0) {
        doubt_delete(st->id, st->rec.ver - 1, NULL); /* committed in MySQL, not sent to Redis */
        respond_unavailable(st->r, "Redis");
    }
}

static void on_delete_checked(const struct job_view *v, void *arg)
{
    struct id_state *st = arg;
    struct request *r = st->r;
    if (v == NULL) {
        respond_unavailable(r, "Redis");
        return;
    }
    if (!v->found) {
        far_lookup(st, on_far_delete_read); /* a far job, or none */
        return;
    }
    api_fill_jobchange(&st->rec, r, st->id, st->shard, "jobs", v->state, JS_DELETED, v->ver + 1, v->attempts,
                       v->run_at);
    st->rec.force = 1;
    if (journal_submit_sync(&st->rec, 1, r->ctx->inbox, on_delete_committed, st) < 0)
        respond_unavailable(r, "MySQL");
}

void api_delete(struct request *r)
{
    static const char *const allowed[] = {"id", NULL};
    struct id_state *st = begin(r, allowed, 0);
    if (st == NULL)
        return;
    if (api_require_mysql(r) < 0)
        return;
    if (store_inspect(&r->ctx->store, st->id, on_delete_checked, st) < 0)
        respond_unavailable(r, "Redis");
}

/* ---- reschedule ---- */

static void on_far_rescheduled(const struct id_outcome *o, void *arg)
{
    struct id_state *st = arg;
    if (o == NULL) {
        respond_unavailable(st->r, "Redis");
        return;
    }
    /* OK: the pager had taken the job into Redis just before, and it is rescheduled there;
     * MISSING: it is far, at its new due time (paged in at once when that is near) */
    metrics_transition(JS_FAR, o->status == ID_OK ? o->state : JS_FAR, 1);
    answer_state(st, NULL, "runAt", st->due);
}

static void on_far_moved(int ok, void *arg)
{
    struct id_state *st = arg;
    if (!ok) {
        respond_unavailable(st->r, "MySQL");
        return;
    }
    const struct config *cfg = &st->r->ctx->app->cfg;
    int64_t now = clock_unix_ms();
    if (cfg->horizon == 0 || st->due <= now + cfg->horizon)
        pager_page_now(st->shard, st->due, st->id);
    if (store_reschedule(&st->r->ctx->store, st->id, now, st->due, st->who, on_far_rescheduled, st) < 0)
        respond_unavailable(st->r, "Redis");
}

static void on_rescheduled(const struct id_outcome *o, void *arg);

static void on_far_reschedule_read(void *arg)
{
    struct id_state *st = arg;
    switch (far_found(st)) {
    case 1:
        far_commit(st, JC_FAR_MOVE, JS_FAR, st->due, on_far_moved);
        break;
    case -1:
        if (store_reschedule(&st->r->ctx->store, st->id, clock_unix_ms(), st->due, st->who, on_rescheduled, st) < 0)
            respond_unavailable(st->r, "Redis");
        break;
    }
}

static void on_rescheduled(const struct id_outcome *o, void *arg)
{
    struct id_state *st = arg;
    if (o && o->status == ID_MISSING) {
        far_lookup(st, on_far_reschedule_read); /* a far job, or none */
        return;
    }
    if (o && o->status == ID_WRONG_STATE) {
        respond_error(st->r, 409, "conflict", "the job is %s; only delayed or ready jobs can be rescheduled",
                      job_state_name(o->state));
        return;
    }
    if (api_answer_outcome(st->r, o, "delayed or ready"))
        return;
    metrics_transition(o->from_state, o->state, 1);
    answer_state(st, NULL, "runAt", o->run_at);
}

void api_reschedule(struct request *r)
{
    static const char *const allowed[] = {"id", "delay", "runAt", NULL};
    struct id_state *st = begin(r, allowed, 1);
    if (st == NULL)
        return;
    const struct config *cfg = &r->ctx->app->cfg;
    int64_t now = clock_unix_ms(), delay, run_at;
    char err[160];
    int has_delay = params_get(&r->params, "delay") != NULL, has_run_at = params_get(&r->params, "runAt") != NULL;
    if (has_delay == has_run_at) {
        respond_error(r, 400, "bad_request", "give exactly one of delay (ms from now) or runAt (epoch ms)");
        return;
    }
    if (param_int(&r->params, "delay", 0, cfg->max_delay, 0, &delay, err, sizeof err) < 0 ||
        param_int(&r->params, "runAt", 0, now + cfg->max_delay, 0, &run_at, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    int64_t due = has_delay ? now + delay : (run_at < now ? now : run_at);
    st->due = due;
    if (store_reschedule(&r->ctx->store, st->id, now, due, st->who, on_rescheduled, st) < 0)
        respond_unavailable(r, "Redis");
}

/* ---- inspect: Redis for the live job, MySQL for the history (and for ended jobs) ---- */

struct inspect_state {
    struct request *r;
    uint64_t id;
    int in_redis;
    struct sbuf job;     /* the job object without its closing brace */
    int db_ok;           /* MySQL answered */
    struct sbuf history; /* JSON array */
};

static void inspect_state_free(void *p)
{
    struct inspect_state *st = p;
    sb_free(&st->job);
    sb_free(&st->history);
    free(st);
}

/* Pool thread: the message row (when Redis lacks the job) and the transitions. */
static void inspect_run(MYSQL *db, void *arg)
{
    struct inspect_state *st = arg;
    char sql[288];
    if (db == NULL)
        return;
    if (!st->in_redis) {
        snprintf(sql, sizeof sql,
                 "SELECT topic, state, body, priority, ttr, tries, attempts, run_at, created_at, biz_key, backoff, "
                 "traceparent, tracestate, group_key FROM message WHERE id = %llu",
                 (unsigned long long)st->id);
        if (mysql_query(db, sql) != 0)
            return;
        MYSQL_RES *res = mysql_store_result(db);
        MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
        unsigned long *len = row ? mysql_fetch_lengths(res) : NULL;
        if (row) {
            int far = strcmp(row[1], "far") == 0; /* the API knows it as delayed, in the MySQL tier */
            struct jobjson j = {.id = st->id,
                                .topic = row[0],
                                .topic_len = len[0],
                                .state = far ? "delayed" : row[1],
                                .body = row[2],
                                .body_len = len[2],
                                .priority = strtoll(row[3], NULL, 10),
                                .ttr = strtoll(row[4], NULL, 10),
                                .tries = strtoll(row[5], NULL, 10),
                                .attempt = strtoll(row[6], NULL, 10),
                                .run_at = strtoll(row[7], NULL, 10),
                                .created_at = strtoll(row[8], NULL, 10),
                                .biz = row[9],
                                .biz_len = row[9] ? len[9] : 0,
                                .has_backoff = row[10] != NULL,
                                .backoff = row[10] ? strtoll(row[10], NULL, 10) : 0,
                                .trace = {.parent = row[11],
                                          .parent_len = row[11] ? len[11] : 0,
                                          .state = row[11] ? row[12] : NULL,
                                          .state_len = row[11] && row[12] ? len[12] : 0},
                                .group = row[13],
                                .group_len = row[13] ? len[13] : 0};
            jobjson_open(&st->job, &j);
            if (far)
                sb_puts(&st->job, ",\"tier\":\"mysql\"");
        }
        if (res)
            mysql_free_result(res);
    }
    /* job_history: the transitions with the push, which its message row records (sql/schema.sql,
     * schema 9); the condition reaches both halves of the view, each one primary-key range */
    snprintf(sql, sizeof sql,
             "SELECT from_state, to_state, at, actor, host, instance, attempts FROM job_history "
             "WHERE message_id = %llu ORDER BY version, at LIMIT 1000",
             (unsigned long long)st->id);
    if (mysql_query(db, sql) != 0)
        return;
    MYSQL_RES *res = mysql_store_result(db);
    if (res == NULL)
        return;
    sb_putc(&st->history, '[');
    MYSQL_ROW row;
    int first = 1;
    while ((row = mysql_fetch_row(res)) != NULL) {
        unsigned long *len = mysql_fetch_lengths(res);
        sb_puts(&st->history, first ? "{\"state\":" : ",{\"state\":");
        first = 0;
        sb_json_str(&st->history, row[1], len[1]);
        sb_puts(&st->history, ",\"from\":");
        sb_json_str(&st->history, row[0], len[0]);
        sb_printf(&st->history, ",\"at\":%s,\"by\":", row[2]);
        sb_json_str(&st->history, row[3], len[3]);
        sb_puts(&st->history, ",\"host\":");
        sb_json_str(&st->history, row[4], len[4]);
        sb_puts(&st->history, ",\"instance\":");
        sb_json_str(&st->history, row[5], len[5]);
        sb_printf(&st->history, ",\"attempt\":%s}", row[6]);
    }
    sb_putc(&st->history, ']');
    mysql_free_result(res);
    mysql_commit(db);
    st->db_ok = 1;
}

static void inspect_done(void *arg)
{
    struct inspect_state *st = arg;
    struct request *r = st->r;
    if (st->job.len == 0) {
        if (!st->db_ok)
            respond_unavailable(r, "MySQL");
        else
            respond_error(r, 404, "not_found", "no job with this id");
        return;
    }
    struct sbuf *out = &st->job;
    sb_puts(out, ",\"history\":");
    if (st->db_ok)
        sb_put(out, st->history.data, st->history.len);
    else
        sb_puts(out, "null,\"historyError\":\"MySQL is unavailable\"");
    sb_putc(out, '}');
    respond_json(r, 200, out);
}

static void read_history(struct inspect_state *st)
{
    if (dbtask_submit(inspect_run, inspect_done, st->r->ctx->inbox, st) < 0)
        inspect_done(st);
}

/* Everything changed before the request is in MySQL now (or cannot be soon: read anyway). */
static void on_outbox_caught_up(int ok, void *arg)
{
    read_history(arg);
}

static void on_inspected(const struct job_view *v, void *arg)
{
    struct inspect_state *st = arg;
    if (v == NULL) {
        respond_unavailable(st->r, "Redis");
        return;
    }
    if (v->found) {
        st->in_redis = 1;
        jobjson_view(&st->job, st->id, v);
    }
    /* Read your writes: a finish answered a moment ago must show, though transitions reach
     * MySQL through the outbox a few milliseconds after they happen. */
    if (outbox_barrier(st->r->ctx->inbox, on_outbox_caught_up, st) < 0)
        read_history(st);
}

void api_jobs(struct request *r)
{
    static const char *const none[] = {NULL};
    uint64_t id;
    if (api_params_only(r, none) < 0)
        return;
    if (id_parse(r->route.arg, r->route.arg_len, &id) < 0) {
        respond_error(r, 400, "bad_request", "a job id is a decimal number of up to 19 digits");
        return;
    }
    if (api_require_redis(r) < 0)
        return;
    api_jobs_show(r, id);
}

void api_jobs_show(struct request *r, uint64_t id)
{
    struct inspect_state *st = api_state_new(r, sizeof *st, inspect_state_free);
    if (st == NULL)
        return;
    st->r = r;
    st->id = id;
    if (store_inspect(&r->ctx->store, id, on_inspected, st) < 0)
        respond_unavailable(r, "Redis");
}

/* ---- dead jobs of a topic ---- */

static void on_dead_list(const struct dead_job *jobs, int n, int failed, void *arg)
{
    struct request *r = arg;
    if (failed) {
        respond_unavailable(r, "Redis");
        return;
    }
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "{\"topic\":");
    sb_json_str(&sb, r->route.arg, r->route.arg_len);
    sb_puts(&sb, ",\"jobs\":[");
    for (int i = 0; i < n; i++) {
        const struct dead_job *d = &jobs[i];
        if (i)
            sb_putc(&sb, ',');
        struct jobjson j = {.id = d->id,
                            .state = "dead",
                            .body = d->body,
                            .body_len = d->body_len,
                            .biz = d->biz,
                            .biz_len = d->biz_len,
                            .priority = d->priority,
                            .ttr = d->ttr,
                            .tries = d->tries,
                            .attempt = d->attempts,
                            .run_at = d->run_at,
                            .died_at = d->died_at,
                            .trace = d->trace,
                            .group = d->group,
                            .group_len = d->group_len};
        jobjson_open(&sb, &j);
        sb_putc(&sb, '}');
    }
    sb_puts(&sb, "]}");
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

void api_dead(struct request *r)
{
    static const char *const allowed[] = {"limit", NULL};
    int64_t limit;
    char err[128];
    if (api_params_only(r, allowed) < 0)
        return;
    if (param_int(&r->params, "limit", 1, 1000, 100, &limit, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    if (!job_topic_valid(r->route.arg, r->route.arg_len)) {
        respond_error(r, 400, "bad_request", "topic must be 1-%d characters of A-Z a-z 0-9 _ . : -", TOPIC_MAX);
        return;
    }
    if (api_require_redis(r) < 0)
        return;
    if (store_dead_list(&r->ctx->store, r->route.arg, r->route.arg_len, (int)limit, on_dead_list, r) < 0)
        respond_unavailable(r, "Redis");
}
