/* api_schedules.c — /schedules: create, list, read, pause/resume and delete schedules
 * (docs/api.md "Schedules"). The definitions live in MySQL (schedule.h); every statement runs
 * on the MySQL task pool (dbtask.h), never on the worker's loop. The scheduler thread of each
 * instance sees a change within a second (firing.h). */
#include "api/handlers.h"
#include "api/api_util.h"
#include "redis/jobjson.h"
#include "base/clock.h"
#include "base/cron.h"
#include "mysql/dbtask.h"
#include "core/ids.h"
#include "base/log.h"
#include "durable/schedule.h"
#include "core/app.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX 10000 /* a listing answers at most this many (a fleet has tens, not thousands) */

enum op { OP_CREATE, OP_LIST, OP_GET, OP_DELETE, OP_PAUSE };
#define BAD_ZONE (-2) /* OP_CREATE: the schedule's zone does not load (err says why): 400 */

struct schedules_call {
    struct request *r;
    enum op op;
    uint64_t id;
    int paused;
    int64_t now;
    struct schedule s;     /* OP_CREATE: the new one; OP_GET/OP_PAUSE: the one read */
    struct schedule *list; /* OP_LIST */
    int n;                 /* OP_LIST: rows; else 1 found / 0 not / -1 MySQL failed / BAD_ZONE */
    int64_t next;          /* next fire of `s`, or of each of `list` (nexts) */
    int64_t *nexts;
    struct tz *zone; /* OP_CREATE: the schedule's zone, read once for the check and `next` */
    char err[256];
};

static void schedules_call_free(void *p)
{
    struct schedules_call *st = p;
    schedule_clear(&st->s);
    schedule_list_free(st->list, st->n > 0 ? st->n : 0);
    free(st->nexts);
    tz_free(st->zone);
    free(st);
}

/* The next fire after `now` in zone tz (schedule_load_zone's). */
static int64_t next_fire_in(const struct schedule *s, const struct tz *tz, int64_t now)
{
    struct cron_rule sc;
    char err[256];
    if (schedule_cron_rule(s, tz, &sc, err, sizeof err) < 0)
        return CRON_NEVER;
    return cron_rule_next(&sc, now > s->fired_through || s->paused ? now : s->fired_through);
}

/* The next fire after `now` (CRON_NEVER when its zone cannot be loaded any more). Reads the
 * zone's file: on the pool thread, never on the worker's loop. */
static int64_t next_fire(const struct schedule *s, int64_t now)
{
    struct tz *tz;
    char err[256];
    if (schedule_load_zone(s, &tz, err, sizeof err) < 0)
        return CRON_NEVER;
    int64_t next = next_fire_in(s, tz, now);
    tz_free(tz);
    return next;
}

static void run(MYSQL *db, void *arg)
{
    struct schedules_call *st = arg;
    /* the zone's file is read here, not on the worker's loop (schedule_parse checked its name),
     * and before MySQL is needed: a bad zone is the client's 400 whatever MySQL's state */
    if (st->op == OP_CREATE && schedule_load_zone(&st->s, &st->zone, st->err, sizeof st->err) < 0) {
        st->n = BAD_ZONE;
        return;
    }
    if (db == NULL) {
        st->n = -1;
        snprintf(st->err, sizeof st->err, "MySQL unreachable");
        return;
    }
    switch (st->op) {
    case OP_CREATE:
        st->n = schedule_db_insert(db, &st->s, st->err, sizeof st->err) == 0 ? 1 : -1;
        break;
    case OP_LIST:
        st->n = schedule_db_list(db, &st->list, st->err, sizeof st->err);
        break;
    case OP_GET:
        st->n = schedule_db_get(db, st->id, &st->s, st->err, sizeof st->err);
        break;
    case OP_DELETE:
        st->n = schedule_db_delete(db, st->id, st->err, sizeof st->err);
        break;
    case OP_PAUSE:
        st->n = schedule_db_set_paused(db, st->id, st->paused, st->now, st->err, sizeof st->err);
        if (st->n == 1)
            st->n = schedule_db_get(db, st->id, &st->s, st->err, sizeof st->err);
        break;
    }
    int64_t now = clock_unix_ms();
    if (st->op == OP_LIST && st->n > 0 && (st->nexts = malloc((size_t)st->n * sizeof *st->nexts)) != NULL)
        for (int i = 0; i < st->n; i++)
            st->nexts[i] = next_fire(&st->list[i], now);
    else if (st->op == OP_CREATE && st->n == 1)
        st->next = next_fire_in(&st->s, st->zone, now);
    else if (st->op != OP_LIST && st->op != OP_DELETE && st->n == 1)
        st->next = next_fire(&st->s, now);
}

static void done(void *arg)
{
    struct schedules_call *st = arg;
    struct request *r = st->r;
    if (st->n == BAD_ZONE) {
        respond_error(r, 400, "bad_request", "%s", st->err);
        return;
    }
    if (st->n < 0) {
        log_warn("schedules: %s", st->err);
        respond_unavailable(r, "MySQL");
        return;
    }
    if (st->n == 0 && st->op != OP_LIST) {
        respond_error(r, 404, "not_found", "no such schedule");
        return;
    }
    if (st->op == OP_LIST && st->n > 0 && st->nexts == NULL) {
        respond_unavailable(r, "memory");
        return;
    }
    struct sbuf sb = SBUF_INIT;
    switch (st->op) {
    case OP_CREATE:
        sb_puts(&sb, "{\"id\":");
        jobjson_id(&sb, st->s.id);
        if (st->next == CRON_NEVER)
            sb_puts(&sb, ",\"next\":null}");
        else
            sb_printf(&sb, ",\"next\":%lld}", (long long)st->next);
        respond_json(r, 200, &sb);
        break;
    case OP_LIST:
        sb_puts(&sb, "{\"schedules\":[");
        for (int i = 0; i < st->n && i < LIST_MAX; i++) {
            if (i)
                sb_putc(&sb, ',');
            schedule_json(&sb, &st->list[i], st->nexts[i]);
        }
        sb_puts(&sb, "]}");
        respond_json(r, 200, &sb);
        break;
    case OP_DELETE:
        sb_puts(&sb, "{\"deleted\":true}");
        respond_json(r, 200, &sb);
        break;
    case OP_GET:
    case OP_PAUSE:
        schedule_json(&sb, &st->s, st->next);
        respond_json(r, 200, &sb);
        break;
    }
    sb_free(&sb);
}

static void submit(struct schedules_call *st)
{
    if (dbtask_submit(run, done, st->r->ctx->inbox, st) < 0)
        respond_unavailable(st->r, "MySQL (its task queue is full)");
}

/* POST /schedules and GET /schedules. */
void api_schedules(struct request *r)
{
    static const char *const none[] = {NULL};
    if (api_params_only(r, none) < 0)
        return;
    struct schedules_call *st = api_state_new(r, sizeof *st, schedules_call_free);
    if (st == NULL)
        return;
    st->r = r;
    if (r->method != METHOD_POST) {
        st->op = OP_LIST;
        submit(st);
        return;
    }
    st->op = OP_CREATE;
    struct app *app = r->ctx->app;
    char err[512];
    if (r->body_len == 0) {
        respond_error(r, 400, "bad_request",
                      "POST needs a JSON object: {topic, cron | every, tz, job: {body, ...}, catchUp}");
        return;
    }
    if (schedule_parse(r->body, r->body_len, &app->limits, &st->s, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    int64_t now = clock_unix_ms();
    /* The id carries its topic's shard: the instance that moves the topic's jobs fires it. */
    int shard = id_topic_shard(st->s.topic, strlen(st->s.topic), r->ctx->store.shards);
    if (idgen_next(&app->ids, shard, now, &st->s.id) < 0) {
        respond_unavailable(r, "the id generator (no worker number yet)");
        return;
    }
    st->s.anchor_ms = now;
    st->s.fired_through = now; /* fires strictly after its creation */
    st->s.created_at = st->s.updated_at = now;
    submit(st);
}

/* GET, PUT ({"paused": bool}) and DELETE /schedules/{id}. */
void api_schedule(struct request *r)
{
    static const char *const none[] = {NULL};
    if (api_params_only(r, none) < 0)
        return;
    uint64_t id;
    if (id_parse(r->route.arg, r->route.arg_len, &id) < 0) {
        respond_error(r, 400, "bad_request", "a schedule id is a decimal number");
        return;
    }
    struct schedules_call *st = api_state_new(r, sizeof *st, schedules_call_free);
    if (st == NULL)
        return;
    st->r = r;
    st->id = id;
    st->now = clock_unix_ms();
    if (r->method == METHOD_DELETE) {
        st->op = OP_DELETE;
    } else if (r->method == METHOD_PUT) {
        st->op = OP_PAUSE;
        json_error_t jerr;
        json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &jerr) : NULL;
        json_t *paused = json_is_object(body) ? json_object_get(body, "paused") : NULL;
        int only_paused = json_is_object(body) && json_object_size(body) == 1;
        if (!json_is_boolean(paused) || !only_paused) {
            json_decref(body);
            respond_error(r, 400, "bad_request", "PUT takes {\"paused\": true|false}");
            return;
        }
        st->paused = json_is_true(paused);
        json_decref(body);
    } else {
        st->op = OP_GET;
    }
    submit(st);
}
