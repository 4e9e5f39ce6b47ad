/* firing.c — see firing.h. */
#include "durable/firing.h"
#include "core/dutywatch.h"
#include "core/app.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "base/cron.h"
#include "mysql/db.h"
#include "core/ids.h"
#include "base/log.h"
#include "durable/schedule.h"
#include "base/sbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHARDS        4096
#define STOP_DEADLINE_MS  1000
#define RETRY_MS          1000  /* after an unavailable answer */
#define ANSWER_WAIT_MS    30000 /* a push is answered within the Redis and MySQL timeouts */
#define COMPLAIN_EVERY_MS 10000

/* One push in flight. The scheduler waits for its answer; if it gives up (stop, or no answer
 * in ANSWER_WAIT_MS) the sink frees the call when the answer comes after all. */
struct call {
    struct sbuf body;
    int done, abandoned; /* under fire_thread.lock */
    int status;
    char answer[256];
};

/* The thread's copy of one schedule. */
struct entry {
    struct schedule s;
    struct cron_rule sc;
    struct tz *tz;    /* NULL for an interval */
    int usable;       /* its expression and zone loaded (else logged once and left) */
    int verify;       /* before the next push, ask MySQL which fires already have a job */
    int64_t retry_at; /* after an unavailable answer */
};

static struct {
    struct app *app;
    const struct config *cfg;
    firing_push_fn push;
    void *push_ctx;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bgthread bg;     /* the scheduler thread; its connection published in bg for a stop to cut */
    char owned[MAX_SHARDS]; /* under lock */
    unsigned owned_epoch;   /* under lock: bumped by every change of `owned` */
    /* figures */
    _Atomic long long fired, dropped, failed;
    atomic_int count, firing;
} fire_thread = {.lock = PTHREAD_MUTEX_INITIALIZER,
                 .cond = PTHREAD_COND_INITIALIZER,
                 .bg = BGTHREAD_INIT(&fire_thread.lock, &fire_thread.cond,
                                     "scheduler: a MySQL call outlived the stop deadline; cutting its connection")};

/* ---- the push and its answer ---- */

static void on_answer(int status, const char *body, size_t len, void *arg)
{
    struct call *c = arg;
    pthread_mutex_lock(&fire_thread.lock);
    c->status = status;
    snprintf(c->answer, sizeof c->answer, "%.*s", (int)(len < sizeof c->answer ? len : sizeof c->answer - 1), body);
    c->done = 1;
    int abandoned = c->abandoned;
    pthread_cond_broadcast(&fire_thread.cond);
    pthread_mutex_unlock(&fire_thread.lock);
    if (abandoned) {
        sb_free(&c->body);
        free(c);
    }
}

/* Push the fires at[0..n) of `s`: the answer's status (0 when it could not be sent, or no
 * answer came), with its text in `answer`. */
static int push_fires(const struct schedule *s, const int64_t *at, int n, char *answer, size_t cap)
{
    struct call *c = calloc(1, sizeof *c);
    if (c == NULL)
        return 0;
    schedule_push_body(&c->body, s, at, n);
    if (c->body.oom || fire_thread.push(c->body.data, c->body.len, on_answer, c, fire_thread.push_ctx) < 0) {
        sb_free(&c->body);
        free(c);
        snprintf(answer, cap, "could not hand the push to an HTTP worker");
        return 0;
    }
    /* Even when stopping, the answer is worth waiting for until the stop's deadline: with it
     * the watermark moves, and the next start need not push these fires again. */
    int64_t until = clock_mono_us() + (int64_t)ANSWER_WAIT_MS * 1000;
    pthread_mutex_lock(&fire_thread.lock);
    while (!c->done && clock_mono_us() < until && !bgthread_stop_due_locked(&fire_thread.bg, 0))
        clock_cond_wait_us(&fire_thread.cond, &fire_thread.lock, 100000);
    int done = c->done, status = c->status;
    if (done)
        snprintf(answer, cap, "%s", c->answer);
    else
        c->abandoned = 1; /* the sink frees it */
    pthread_mutex_unlock(&fire_thread.lock);
    if (!done) {
        snprintf(answer, cap, "no answer");
        return 0;
    }
    sb_free(&c->body);
    free(c);
    return status;
}

/* ---- the copy of the table ---- */

static void entries_free(struct entry *e, int n)
{
    for (int i = 0; e && i < n; i++) {
        schedule_clear(&e[i].s);
        tz_free(e[i].tz);
    }
    free(e);
}

/* Read every schedule. The new array, or NULL (the old copy stays) with *n unchanged. */
static struct entry *load(MYSQL *db, int *n)
{
    struct schedule *rows;
    char err[256];
    int k = schedule_db_list(db, &rows, err, sizeof err);
    if (k < 0) {
        log_warn("scheduler: reading the schedules: %s", err);
        return NULL;
    }
    struct entry *e = calloc((size_t)(k ? k : 1), sizeof *e);
    if (e == NULL) {
        schedule_list_free(rows, k);
        return NULL;
    }
    for (int i = 0; i < k; i++) {
        e[i].s = rows[i]; /* takes over the job text */
        if (e[i].s.cron[0] && (e[i].tz = tz_load(e[i].s.tz, err, sizeof err)) == NULL) {
            log_warn("scheduler: schedule %llu: zone %s: %s; it does not fire", (unsigned long long)e[i].s.id,
                     e[i].s.tz, err);
            continue;
        }
        if (schedule_cron_rule(&e[i].s, e[i].tz, &e[i].sc, err, sizeof err) < 0) {
            log_warn("scheduler: schedule %llu: %s; it does not fire", (unsigned long long)e[i].s.id, err);
            continue;
        }
        e[i].usable = 1;
        e[i].verify = 1; /* another instance, or this one before a crash, may have pushed fires past the watermark */
    }
    free(rows);
    *n = k;
    return e;
}

/* ---- firing one schedule ---- */

/* Make the fires of `e` that are due. -1 when MySQL failed (reconnect). */
static int fire(MYSQL *db, struct entry *e, int64_t now)
{
    int cap = fire_thread.cfg->max_batch < SCHEDULE_CATCHUP_MAX ? fire_thread.cfg->max_batch : SCHEDULE_CATCHUP_MAX;
    int64_t at[SCHEDULE_CATCHUP_MAX];
    struct schedule_due due;
    if (schedule_due(&e->s, &e->sc, now, fire_thread.cfg->schedule_grace, FIRING_LOOKAHEAD_MS, at, cap, &due) == 0)
        return 0;
    char err[256];
    if (due.n > 0 && e->verify) {
        /* Fires pushed before the watermark moved (a crash, a takeover): their jobs may be
         * finished and gone from Redis, where the bizKey dedupe would not see them. */
        char made[SCHEDULE_CATCHUP_MAX];
        if (schedule_db_made(db, &e->s, at, due.n, made, err, sizeof err) < 0) {
            log_warn("scheduler: schedule %llu: %s", (unsigned long long)e->s.id, err);
            return -1;
        }
        int k = 0;
        for (int i = 0; i < due.n; i++)
            if (!made[i])
                at[k++] = at[i];
        if (k < due.n)
            log_info("scheduler: schedule %llu: %d fires had been made already (before the watermark moved)",
                     (unsigned long long)e->s.id, due.n - k);
        due.n = k;
    }
    if (due.n > 0) {
        char answer[256];
        int status = push_fires(&e->s, at, due.n, answer, sizeof answer);
        if (status == 0 || status >= 500) {
            atomic_fetch_add(&fire_thread.failed, 1);
            log_warn("scheduler: schedule %llu: pushing %d fires: %d %s; trying again in %d ms",
                     (unsigned long long)e->s.id, due.n, status, answer, RETRY_MS);
            e->retry_at = now + RETRY_MS;
            e->verify = 1; /* an unanswered push may have been made */
            return 0;
        }
        if (status >= 400) {
            atomic_fetch_add(&fire_thread.dropped, due.n);
            log_error("scheduler: schedule %llu: its job was refused (%d %s); %d fires dropped",
                      (unsigned long long)e->s.id, status, answer, due.n);
        } else {
            atomic_fetch_add(&fire_thread.fired, due.n);
        }
    }
    if (due.skipped || due.caught_up)
        log_warn("scheduler: schedule %llu: %lld fires were missed (older than schedule_grace): %lld made, %lld "
                 "skipped (catchUp %s)",
                 (unsigned long long)e->s.id, (long long)(due.skipped + due.caught_up), (long long)due.caught_up,
                 (long long)due.skipped, schedule_catch_up_name(e->s.catch_up));
    int rc = schedule_db_advance(db, e->s.id, e->s.fired_through, &due, err, sizeof err);
    if (rc < 0) {
        log_warn("scheduler: schedule %llu: moving its watermark: %s", (unsigned long long)e->s.id, err);
        return -1; /* the fires are live in Redis: pushing them again is answered by their bizKeys */
    }
    if (rc == 1) {
        e->s.fired_through = due.through;
        e->verify = 0;
        return 0;
    }
    /* Someone else moved it (ownership changed hands) or the schedule is gone: read it again. */
    struct schedule fresh;
    rc = schedule_db_get(db, e->s.id, &fresh, err, sizeof err);
    if (rc < 0)
        return -1;
    e->verify = 1; /* whoever moved it may have pushed fires beyond it */
    if (rc == 1) {
        e->s.fired_through = fresh.fired_through;
        e->s.paused = fresh.paused;
        schedule_clear(&fresh);
    } else {
        e->usable = 0; /* deleted: the next poll drops it */
    }
    return 0;
}

/* ---- the thread ---- */

static void wait_ms(int ms)
{
    pthread_mutex_lock(&fire_thread.lock);
    if (!fire_thread.bg.stop)
        clock_cond_wait_us(&fire_thread.cond, &fire_thread.lock, (int64_t)ms * 1000);
    pthread_mutex_unlock(&fire_thread.lock);
}

/* The thread's connection, for a stop to cut (cleared before it is closed). */
static void publish(MYSQL *db)
{
    bgthread_publish(&fire_thread.bg, 0, db, db_cut);
}

static void *firing_main(void *unused)
{
    (void)unused;
    log_set_thread_name("scheduler");
    const struct config *cfg = fire_thread.cfg;
    MYSQL *db = NULL;
    struct entry *entries = NULL;
    int n = 0;
    char signature[160] = "", owned[MAX_SHARDS];
    unsigned seen_epoch = 0;
    int64_t last_poll = 0, last_complaint = 0;
    while (!bgthread_stopping(&fire_thread.bg)) {
        int64_t now = clock_unix_ms();
        if (db_stale(db)) { /* [mysql] hosts: the process moved to another node; follow it */
            publish(NULL);
            mysql_close(db);
            db = NULL;
        }
        if (db == NULL) {
            char err[256];
            if ((db = db_connect(cfg, err, sizeof err)) == NULL) {
                if (now - last_complaint >= COMPLAIN_EVERY_MS) {
                    log_warn("scheduler: MySQL: %s; schedules wait for it", err);
                    last_complaint = now;
                }
                dutywatch_failed(DUTY_SCHEDULER, -1, "MySQL unavailable");
                wait_ms(1000);
                continue;
            }
            publish(db);
            signature[0] = '\0'; /* read everything again: it may have changed meanwhile */
        }
        pthread_mutex_lock(&fire_thread.lock);
        memcpy(owned, fire_thread.owned, (size_t)cfg->redis_shards);
        unsigned epoch = fire_thread.owned_epoch;
        pthread_mutex_unlock(&fire_thread.lock);
        int failed = 0;
        if (now - last_poll >= FIRING_POLL_MS || epoch != seen_epoch) {
            char sig[sizeof signature];
            last_poll = now;
            if (schedule_db_signature(db, sig, sizeof sig) < 0) {
                failed = 1;
            } else if (strcmp(sig, signature) != 0 || epoch != seen_epoch) {
                /* A change of ownership reloads too: the watermarks of schedules that were
                 * another instance's moved meanwhile. */
                int k = n;
                struct entry *fresh = load(db, &k);
                if (fresh == NULL) {
                    failed = 1;
                } else {
                    entries_free(entries, n);
                    entries = fresh;
                    n = k;
                    snprintf(signature, sizeof signature, "%s", sig);
                    seen_epoch = epoch;
                    atomic_store(&fire_thread.count, n);
                }
            }
        }
        int firing = 0;
        for (int i = 0; i < n && !failed && !bgthread_stopping(&fire_thread.bg); i++) {
            struct entry *e = &entries[i];
            if (!e->usable || e->s.paused || !owned[id_shard(e->s.id, cfg->redis_shards)])
                continue;
            firing++;
            if (e->retry_at > now)
                continue;
            failed = fire(db, e, clock_unix_ms()) < 0;
        }
        atomic_store(&fire_thread.firing, firing);
        if (failed) {
            log_warn("scheduler: MySQL failed (%s); reconnecting", mysql_error(db));
            dutywatch_failed(DUTY_SCHEDULER, -1, "MySQL failed");
            publish(NULL);
            mysql_close(db);
            db = NULL;
            wait_ms(1000);
            continue;
        }
        dutywatch_ok(DUTY_SCHEDULER, -1);
        wait_ms(FIRING_TICK_MS);
    }
    entries_free(entries, n);
    publish(NULL);
    if (db)
        mysql_close(db);
    mysql_thread_end();
    return NULL;
}

int firing_start(struct app *app, firing_push_fn push, void *push_ctx)
{
    fire_thread.app = app;
    fire_thread.cfg = &app->cfg;
    fire_thread.push = push;
    fire_thread.push_ctx = push_ctx;
    if (app->cfg.redis_shards > MAX_SHARDS)
        return -1;
    memset(fire_thread.owned, 1, sizeof fire_thread.owned); /* alone until the fleet says otherwise, like the mover */
    return bgthread_start(&fire_thread.bg, firing_main, NULL);
}

void firing_stop(void)
{
    bgthread_stop(&fire_thread.bg, STOP_DEADLINE_MS);
}

void firing_set_owned(const char *owned, int shards)
{
    size_t len = (size_t)(shards < MAX_SHARDS ? shards : MAX_SHARDS);
    pthread_mutex_lock(&fire_thread.lock);
    if (memcmp(fire_thread.owned, owned, len) != 0) {
        memcpy(fire_thread.owned, owned, len);
        fire_thread.owned_epoch++;
    }
    pthread_mutex_unlock(&fire_thread.lock);
}

void firing_stats_json(struct sbuf *sb)
{
    sb_printf(sb, ",\"schedules\":{\"count\":%d,\"firing\":%d,\"fired\":%lld,\"dropped\":%lld,\"failedPushes\":%lld}",
              atomic_load(&fire_thread.count), atomic_load(&fire_thread.firing),
              (long long)atomic_load(&fire_thread.fired), (long long)atomic_load(&fire_thread.dropped),
              (long long)atomic_load(&fire_thread.failed));
}

void firing_metrics(struct sbuf *sb)
{
    sb_puts(sb, "# HELP hourglass_schedule_fires_total Schedule fires this instance pushed (made: a job, or its "
                "bizKey's job already there; dropped: the job template was refused).\n"
                "# TYPE hourglass_schedule_fires_total counter\n");
    sb_printf(sb, "hourglass_schedule_fires_total{outcome=\"made\"} %lld\n",
              (long long)atomic_load(&fire_thread.fired));
    sb_printf(sb, "hourglass_schedule_fires_total{outcome=\"dropped\"} %lld\n",
              (long long)atomic_load(&fire_thread.dropped));
    sb_puts(sb, "# HELP hourglass_schedule_push_failures_total Pushes of schedule fires answered unavailable (tried "
                "again a second later).\n# TYPE hourglass_schedule_push_failures_total counter\n");
    sb_printf(sb, "hourglass_schedule_push_failures_total %lld\n", (long long)atomic_load(&fire_thread.failed));
}
