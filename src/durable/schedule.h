/* schedule.h — a schedule (docs/api.md "Schedules"): the definition POST /schedules gives, its
 * JSON, the /push body of its fires, and its row in MySQL's `schedule` table.
 *
 * A schedule is a cron expression in an IANA zone, or a fixed interval from its creation time
 * (cron.h computes the fire times). Each fire pushes one job whose bizKey is
 * "<schedule id>@<fire time ms>", so that two pushes for one fire time (two instances, a
 * restart between a push and the watermark below) make one job while it is live.
 *
 * `fired_through` is the durable watermark: every fire time up to it has been pushed (or
 * skipped by the catch-up policy). The scheduler advances it after a push is answered, with a
 * compare-and-set on its old value, so an instance that lost the schedule to another (fleet
 * ownership moved) cannot move it back. Pausing keeps it; resuming sets it to the time of the
 * resume, so a pause is not made up afterwards.
 *
 * The parsing and JSON functions are pure (unit-tested); the schedule_db_* functions run
 * blocking statements on the connection they are given (a dbtask or the scheduler thread). */
#ifndef HG_SCHEDULE_H
#define HG_SCHEDULE_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "base/tz.h"

struct sbuf;
struct cron_rule;

#define SCHEDULE_CRON_MAX    255
#define SCHEDULE_JOB_MAX     65536   /* the job template's JSON text */
#define SCHEDULE_CATCHUP_MAX 1000    /* catchUp "all": at most this many missed fires are made */
#define SCHEDULE_EVERY_MIN   1000    /* ms: an interval below a second is a busy loop, not a schedule */
#define SCHEDULE_COUNT_MAX   1000000 /* missed fires are counted up to this many */

enum catch_up { CATCHUP_SKIP = 0, CATCHUP_ONE = 1, CATCHUP_ALL = 2 };

struct schedule {
    uint64_t id;
    char topic[TOPIC_MAX + 1];
    char cron[SCHEDULE_CRON_MAX + 1]; /* "" for an interval */
    int64_t every_ms;                 /* 0 for a cron expression */
    char tz[TZ_NAME_MAX + 1];
    char *job; /* the job template: a compact JSON object, malloc'd */
    size_t job_len;
    enum catch_up catch_up;
    int paused;
    int64_t anchor_ms; /* an interval fires at anchor + k * every */
    int64_t fired_through;
    int64_t missed_made, missed_skipped; /* missed fires (downtime) made and skipped, in all */
    int64_t created_at, updated_at;
    unsigned version;
};

/* Parse a POST /schedules body into *out (id and times left 0 for the caller). Every field is
 * checked — the zone's name by its form only: no file is read, so it is safe on an event
 * loop — and the job template as /push would check it (limits `lim`). 0; -1 with a message
 * naming the field in err. */
int schedule_parse(const char *json, size_t len, const struct job_limits *lim, struct schedule *out, char *err,
                   size_t errlen) __attribute__((warn_unused_result));

/* A cron schedule's zone from the tz database, into *zone (the caller's: tz_free); NULL for an
 * interval, which has none. Reads a file: call it off the event loop (POST /schedules does, on
 * the MySQL task thread, before the insert). 0; -1 with "tz: ..." in err (*zone NULL). */
int schedule_load_zone(const struct schedule *s, struct tz **zone, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Free what *s owns (not s). */
void schedule_clear(struct schedule *s);

/* The fire times of `s` as cron.h computes them, in zone `tz` (borrowed; NULL for an
 * interval). 0, or -1 with err. */
int schedule_cron_rule(const struct schedule *s, const struct tz *tz, struct cron_rule *out, char *err, size_t errlen);

/* What to do for a schedule at one moment (schedule_due). */
struct schedule_due {
    int n;             /* fires to push: at[0..n) */
    int64_t through;   /* the watermark once they are pushed */
    int64_t caught_up; /* missed fires among them (catchUp one or all) */
    int64_t skipped;   /* missed fires skipped (counted up to SCHEDULE_COUNT_MAX) */
};

/* Which fires of `s` (fire times `sc`) to make at `now`, looking `lookahead` ms ahead: fires at
 * least `grace` old were missed (the daemon was down) and follow s->catch_up — skipped, only
 * the last, or all of them (the first `cap`; the rest skipped); younger ones are made, late.
 * Writes at most `cap` fire times, ascending, to at[]. 1 with *due filled when there is
 * something to do (fires to push, or only the watermark to move past skipped fires); 0 when
 * there is nothing. */
int schedule_due(const struct schedule *s, const struct cron_rule *sc, int64_t now, int64_t grace, int64_t lookahead,
                 int64_t *at, int cap, struct schedule_due *due);

/* The JSON object of a schedule, with its next fire time (CRON_NEVER: null). */
void schedule_json(struct sbuf *sb, const struct schedule *s, int64_t next);

/* The /push body (a JSON array) for the fires `at[0..n)`; each fire's job starts a new W3C
 * trace: a random "traceparent" of its own (sampled), so a consumer sees every fire as a trace. */
void schedule_push_body(struct sbuf *sb, const struct schedule *s, const int64_t *at, int n);

/* "skip", "one", "all". */
const char *schedule_catch_up_name(enum catch_up c);

/* ---- MySQL ---- */

/* Insert a new schedule; 0 / -1 (err). */
int schedule_db_insert(MYSQL *db, const struct schedule *s, char *err, size_t errlen);

/* One schedule: 1 found, 0 none, -1 error. */
int schedule_db_get(MYSQL *db, uint64_t id, struct schedule *out, char *err, size_t errlen);

/* Every schedule, in id order (*out malloc'd; schedule_list_free). The count, or -1. */
int schedule_db_list(MYSQL *db, struct schedule **out, char *err, size_t errlen);
void schedule_list_free(struct schedule *list, int n);

/* Delete: 1 deleted, 0 there was none, -1 error. */
int schedule_db_delete(MYSQL *db, uint64_t id, char *err, size_t errlen);

/* Pause or resume (a resume moves fired_through up to `now`): 1 changed (or already so),
 * 0 no such schedule, -1 error. */
int schedule_db_set_paused(MYSQL *db, uint64_t id, int paused, int64_t now, char *err, size_t errlen);

/* fired_through from `from` to due->through (adding due's missed fires to the counts), only if
 * it still is `from`: 1 advanced, 0 it was not (another instance moved it, or the schedule is
 * gone), -1 error. */
int schedule_db_advance(MYSQL *db, uint64_t id, int64_t from, const struct schedule_due *due, char *err, size_t errlen);

/* Which of the fires at[0..n) of `s` already have a job: made[i] = 1 when the bizKey of fire i
 * names a job that is not aborted (biz_latest, written in the push's own commit). For a fire
 * pushed by an instance that died before moving the watermark: its job may be gone from Redis
 * already (delivered and finished), where the bizKey dedupe no longer sees it. 0 / -1. */
int schedule_db_made(MYSQL *db, const struct schedule *s, const int64_t *at, int n, char *made, char *err,
                     size_t errlen);

/* A short text that changes whenever any schedule is added, changed or deleted (not when a
 * watermark moves): instances poll it and reload on a change. 0 / -1. */
int schedule_db_signature(MYSQL *db, char *out, size_t cap);

#endif
