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
    int shard;
    char error[120];
};

/* Per-shard duties: one watch per shard; the others: one. Small: a few KiB. */
static struct watch outbox[DUTYWATCH_SHARDS], mover[DUTYWATCH_SHARDS], single[DUTY_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct watch *watch_of(enum dutywatch_duty duty, int shard)
{
    if (!duties[duty].per_shard || shard < 0)
        return &single[duty];
    if (shard >= DUTYWATCH_SHARDS)
        shard = DUTYWATCH_SHARDS - 1;
    struct watch *w = duty == DUTY_OUTBOX ? &outbox[shard] : &mover[shard];
    w->shard = shard;
    return w;
}

void dutywatch_ok(enum dutywatch_duty duty, int shard)
{
    int64_t now = clock_unix_ms();
    pthread_mutex_lock(&lock);
    struct watch *w = watch_of(duty, shard);
    w->last_ok = now;
    w->failing_since = 0;
    w->error[0] = '\0';
    pthread_mutex_unlock(&lock);
}

void dutywatch_failed(enum dutywatch_duty duty, int shard, const char *error)
{
    int64_t now = clock_unix_ms();
    pthread_mutex_lock(&lock);
    struct watch *w = watch_of(duty, shard);
    if (w->failing_since == 0)
        w->failing_since = now;
    snprintf(w->error, sizeof w->error, "%s", error ? error : "");
    pthread_mutex_unlock(&lock);
}

void dutywatch_clear(enum dutywatch_duty duty, int shard)
{
    pthread_mutex_lock(&lock);
    struct watch *w = watch_of(duty, shard);
    w->last_ok = 0;
    w->failing_since = 0;
    w->error[0] = '\0';
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

/* Call fn for every stuck watch, under the lock. */
static int each_stuck(int64_t now, void (*fn)(int duty, const struct watch *w, int64_t since, int64_t now, void *arg),
                      void *arg)
{
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int d = 0; d < DUTY_COUNT; d++) {
        if (!duties[d].per_shard) {
            int64_t since = stuck_since(&single[d], duties[d].periodic, now);
            if (since) {
                fn(d, &single[d], since, now, arg);
                n++;
            }
            continue;
        }
        const struct watch *set = d == DUTY_OUTBOX ? outbox : mover;
        for (int s = 0; s < DUTYWATCH_SHARDS; s++) {
            int64_t since = stuck_since(&set[s], duties[d].periodic, now);
            if (since) {
                fn(d, &set[s], since, now, arg);
                n++;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return n;
}

static void json_entry(int duty, const struct watch *w, int64_t since, int64_t now, void *arg)
{
    struct sbuf *sb = arg;
    sb_puts(sb, sb->len == 0 ? "{\"duty\":\"" : ",{\"duty\":\"");
    sb_puts(sb, duties[duty].name);
    if (duties[duty].per_shard)
        sb_printf(sb, "\",\"shard\":%d", w->shard);
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

static void metric_entry(int duty, const struct watch *w, int64_t since, int64_t now, void *arg)
{
    struct sbuf *sb = arg;
    if (duties[duty].per_shard)
        sb_printf(sb, "hourglass_duty_stuck_seconds{duty=\"%s\",shard=\"%d\"} %.3f\n", duties[duty].name, w->shard,
                  (double)(now - since) / 1000.0);
    else
        sb_printf(sb, "hourglass_duty_stuck_seconds{duty=\"%s\",shard=\"\"} %.3f\n", duties[duty].name,
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
