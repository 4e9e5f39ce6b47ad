/* dutywatch.c — see dutywatch.h. */
#include "core/dutywatch.h"
#include "base/clock.h"
#include "base/sbuf.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int per_shard, periodic;
} duties[DUTY_COUNT] = {
    [DUTY_OUTBOX] = {"outbox", 1, 1},   [DUTY_PAGER] = {"pager", 0, 1},
    [DUTY_MOVER] = {"mover", 1, 1},     [DUTY_RECONCILER] = {"reconciler", 0, 0},
    [DUTY_RESTORE] = {"restore", 0, 0}, [DUTY_SCHEDULER] = {"scheduler", 0, 1},
};

struct watch {
    int64_t last_ok;       /* unix ms of the last success; 0 = none seen (or cleared) */
    int64_t failing_since; /* unix ms of the first failure after the last success; 0 = none */
    char error[120];
};

/* Per-shard duties: one watch per shard; the others: one. Small: a few KiB. */
static struct watch outbox[DUTYWATCH_SHARDS], mover[DUTYWATCH_SHARDS], single[DUTY_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The watches of `duty` (*n of them: one per shard, or one). */
static struct watch *watches(int duty, int *n)
{
    *n = duties[duty].per_shard ? DUTYWATCH_SHARDS : 1;
    return !duties[duty].per_shard ? &single[duty] : duty == DUTY_OUTBOX ? outbox : mover;
}

static struct watch *watch_of(enum dutywatch_duty duty, int shard)
{
    int n;
    struct watch *set = watches(duty, &n);
    return &set[shard < 0 ? 0 : shard < n ? shard : n - 1];
}

/* Under the lock: a success (error NULL) or a failure of `w` at `now`. */
static void note(struct watch *w, int64_t now, const char *error)
{
    if (error == NULL) {
        w->last_ok = now;
        w->failing_since = 0;
        w->error[0] = '\0';
        return;
    }
    if (w->failing_since == 0)
        w->failing_since = now;
    snprintf(w->error, sizeof w->error, "%s", error);
}

void dutywatch_ok(enum dutywatch_duty duty, int shard)
{
    int64_t now = clock_unix_ms();
    pthread_mutex_lock(&lock);
    note(watch_of(duty, shard), now, NULL);
    pthread_mutex_unlock(&lock);
}

void dutywatch_failed(enum dutywatch_duty duty, int shard, const char *error)
{
    int64_t now = clock_unix_ms();
    pthread_mutex_lock(&lock);
    note(watch_of(duty, shard), now, error ? error : "");
    pthread_mutex_unlock(&lock);
}

void dutywatch_all_shards(enum dutywatch_duty duty, int shards, const char *error)
{
    int64_t now = clock_unix_ms();
    pthread_mutex_lock(&lock);
    for (int s = 0; s < shards; s++)
        note(watch_of(duty, s), now, error);
    pthread_mutex_unlock(&lock);
}

void dutywatch_clear(enum dutywatch_duty duty, int shard)
{
    pthread_mutex_lock(&lock);
    *watch_of(duty, shard) = (struct watch){0};
    pthread_mutex_unlock(&lock);
}

/* Since when `w` has not succeeded, if that is past the bound; 0 when it is not stuck. */
static int64_t stuck_since(const struct watch *w, int periodic, int64_t now)
{
    if (w->failing_since && now - w->failing_since > DUTYWATCH_BOUND_MS)
        return w->last_ok && w->last_ok < w->failing_since ? w->last_ok : w->failing_since;
    if (periodic && w->last_ok && now - w->last_ok > DUTYWATCH_BOUND_MS)
        return w->last_ok;
    return 0;
}

typedef void (*stuck_fn)(int duty, int shard, const struct watch *w, int64_t since, int64_t now, void *arg);

/* Call fn for every stuck watch (shard -1 for a duty that is not per shard), under the lock. */
static int each_stuck(int64_t now, stuck_fn fn, void *arg)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    for (int d = 0; d < DUTY_COUNT; d++) {
        int n;
        const struct watch *set = watches(d, &n);
        for (int s = 0; s < n; s++) {
            int64_t since = stuck_since(&set[s], duties[d].periodic, now);
            if (since) {
                fn(d, duties[d].per_shard ? s : -1, &set[s], since, now, arg);
                found++;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

static void json_entry(int duty, int shard, const struct watch *w, int64_t since, int64_t now, void *arg)
{
    struct sbuf *sb = arg;
    sb_puts(sb, sb->len == 0 ? "{\"duty\":\"" : ",{\"duty\":\"");
    sb_puts(sb, duties[duty].name);
    if (shard >= 0)
        sb_printf(sb, "\",\"shard\":%d", shard);
    else
        sb_puts(sb, "\",\"shard\":null");
    sb_printf(sb, ",\"sinceMs\":%lld,\"error\":", (long long)(now - since));
    sb_json_cstr(sb, w->error[0] ? w->error : "no success within its bound (hung?)");
    sb_putc(sb, '}');
}

int dutywatch_stuck_json(struct sbuf *sb, int64_t now_ms)
{
    struct sbuf entries = SBUF_INIT;
    int n = each_stuck(now_ms, json_entry, &entries);
    if (n > 0) {
        sb_puts(sb, ",\"stuck\":[");
        sb_put(sb, entries.data, entries.len);
        sb_putc(sb, ']');
    }
    sb_free(&entries);
    return n;
}

static void metric_entry(int duty, int shard, const struct watch *w, int64_t since, int64_t now, void *arg)
{
    struct sbuf *sb = arg;
    char label[16] = "";
    if (shard >= 0)
        snprintf(label, sizeof label, "%d", shard);
    sb_printf(sb, "hourglass_duty_stuck_seconds{duty=\"%s\",shard=\"%s\"} %.3f\n", duties[duty].name, label,
              (double)(now - since) / 1000.0);
}

void dutywatch_metrics(struct sbuf *sb, int64_t now_ms)
{
    sb_puts(sb, "# HELP hourglass_duty_stuck_seconds how long a stuck background duty has not succeeded\n"
                "# TYPE hourglass_duty_stuck_seconds gauge\n");
    int n = each_stuck(now_ms, metric_entry, sb);
    sb_printf(sb,
              "# HELP hourglass_duties_stuck background duties that have not succeeded for longer than their bound\n"
              "# TYPE hourglass_duties_stuck gauge\nhourglass_duties_stuck %d\n",
              n);
}

void dutywatch_reset(void)
{
    pthread_mutex_lock(&lock);
    memset(outbox, 0, sizeof outbox);
    memset(mover, 0, sizeof mover);
    memset(single, 0, sizeof single);
    pthread_mutex_unlock(&lock);
}
