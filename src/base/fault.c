/* fault.c — see fault.h. */
#include "base/fault.h"
#include "base/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RULES_MAX 16

struct rule {
    enum fault_point point;
    enum fault_action action;
    char thread[32];   /* "" = any thread */
    long first, count; /* arrivals first .. first+count-1 fire */
    atomic_long seen;  /* arrivals counted so far */
};

static struct rule rules[RULES_MAX];
static int nrules;
static atomic_int armed[FP_COUNT];

static const char *const point_names[FP_COUNT] = {"mysql.exec", "mysql.commit", "redis.send", "redis.reply"};
static const char *const action_names[] = {"none", "fail", "lost", "hang"};

static int allowed(enum fault_point p, enum fault_action a)
{
    switch (p) {
    case FP_MYSQL_EXEC:
    case FP_MYSQL_COMMIT:
        return a != FA_NONE;
    case FP_REDIS_SEND:
        return a == FA_FAIL;
    case FP_REDIS_REPLY:
        return a == FA_LOST || a == FA_HANG;
    default:
        return 0;
    }
}

static int lookup(const char *const *names, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
            return i;
    return -1;
}

/* One "[thread:]point=action@N[+K]" of `len` bytes into *r. */
static int parse_rule(const char *s, size_t len, struct rule *r, char *err, size_t errlen)
{
    char text[128];
    if (len == 0 || len >= sizeof text) {
        snprintf(err, errlen, "HOURGLASS_FAULTS: empty or overlong rule");
        return -1;
    }
    memcpy(text, s, len);
    text[len] = '\0';
    char *eq = strchr(text, '='), *atsign = strchr(text, '@');
    if (eq == NULL || atsign == NULL || atsign < eq) {
        snprintf(err, errlen, "HOURGLASS_FAULTS: '%s' is not [thread:]point=action@N[+K]", text);
        return -1;
    }
    char *point = text, *colon = memchr(text, ':', (size_t)(eq - text));
    memset(r, 0, sizeof *r);
    if (colon) {
        if ((size_t)(colon - text) >= sizeof r->thread) {
            snprintf(err, errlen, "HOURGLASS_FAULTS: thread name too long in '%s'", text);
            return -1;
        }
        memcpy(r->thread, text, (size_t)(colon - text));
        point = colon + 1;
    }
    int p = lookup(point_names, FP_COUNT, point, (size_t)(eq - point));
    int a = lookup(action_names, 4, eq + 1, (size_t)(atsign - eq - 1));
    if (p < 0 || a < 0 || !allowed((enum fault_point)p, (enum fault_action)a)) {
        snprintf(err, errlen, "HOURGLASS_FAULTS: no such point and action in '%s'", text);
        return -1;
    }
    char *end;
    r->first = strtol(atsign + 1, &end, 10);
    r->count = 1;
    if (*end == '+')
        r->count = strtol(end + 1, &end, 10);
    if (*end != '\0' || r->first < 1 || r->count < 1) {
        snprintf(err, errlen, "HOURGLASS_FAULTS: bad count in '%s' (N and K are >= 1)", text);
        return -1;
    }
    r->point = (enum fault_point)p;
    r->action = (enum fault_action)a;
    return 0;
}

int fault_arm(const char *spec, char *err, size_t errlen)
{
    struct rule parsed[RULES_MAX];
    int n = 0;
    for (const char *s = spec; *spec;) { /* "" arms nothing; "a," has an empty second rule */
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (n == RULES_MAX) {
            snprintf(err, errlen, "HOURGLASS_FAULTS: more than %d rules", RULES_MAX);
            return -1;
        }
        if (parse_rule(s, len, &parsed[n], err, errlen) < 0)
            return -1;
        n++;
        if (end == NULL)
            break;
        s = end + 1;
    }
    fault_disarm();
    memcpy(rules, parsed, sizeof parsed[0] * (size_t)n);
    nrules = n;
    for (int i = 0; i < n; i++)
        atomic_store(&armed[rules[i].point], 1);
    return 0;
}

void fault_disarm(void)
{
    for (int p = 0; p < FP_COUNT; p++)
        atomic_store(&armed[p], 0);
    nrules = 0;
}

int fault_armed(enum fault_point p)
{
    return atomic_load_explicit(&armed[p], memory_order_relaxed);
}

enum fault_action fault_at(enum fault_point p)
{
    if (!fault_armed(p))
        return FA_NONE;
    enum fault_action action = FA_NONE;
    for (int i = 0; i < nrules; i++) {
        struct rule *r = &rules[i];
        if (r->point != p || (r->thread[0] && strcmp(r->thread, log_thread_name()) != 0))
            continue;
        long n = atomic_fetch_add(&r->seen, 1) + 1;
        if (n >= r->first && n < r->first + r->count && action == FA_NONE) {
            action = r->action;
            log_warn("fault seam: %s %s (arrival %ld)", point_names[p], action_names[action], n);
        }
    }
    return action;
}
