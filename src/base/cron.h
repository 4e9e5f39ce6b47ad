/* cron.h — schedules: 5-field cron expressions in an IANA zone, or a fixed interval, and
 * their fire times. Pure functions of their arguments: no globals, no locks, safe from any
 * thread (a struct tz is immutable; see tz.h).
 *
 * Expressions: "minute hour day-of-month month day-of-week", fields separated by blanks.
 * Each field is a comma list of `*`, `n`, `a-b`, `* /s` (written without the space) or
 * `a-b/s`; month accepts JAN-DEC and day-of-week SUN-SAT (any case); day-of-week 0 and 7
 * are both Sunday. As in Vixie cron (and cronie), when neither day field starts with `*`
 * a day matches if EITHER matches; otherwise both must match (so `* /2` counts as `*`).
 * Expressions that can never fire (`0 0 30 2 *`) are rejected by cron_parse.
 *
 * Daylight saving time. A local time is a wall-clock minute in the schedule's zone.
 *  - Fixed-time expressions (neither minute nor hour field starts with `*`, e.g. `30 2 * * *`)
 *    fire once per matching local time: in a fall-back overlap at its first occurrence only;
 *    in a spring-forward gap at the first instant after the gap (the transition itself, so
 *    02:30 Europe/Berlin on the spring day fires at 03:00 CEST), and all gap times of one
 *    expression collapse into that single fire.
 *  - Wildcard expressions (minute or hour field starts with `*`, e.g. `0 * * * *`,
 *    `* /5 * * * *`) follow the clock: they fire at every instant whose wall time matches,
 *    so both occurrences of a repeated hour fire and times in a gap do not exist.
 * This is cronie's rule (its MIN_STAR/HR_STAR "wildcard jobs"; man 8 cron, "Daylight Saving
 * Time and other time changes"): a job meant for 02:30 runs once on both transition days,
 * and an hourly or every-5-minutes job keeps its real-time spacing instead of going silent
 * for an hour in autumn.
 *
 * Fire times are unix milliseconds. CRON_NEVER (INT64_MAX) means "no fire": nothing
 * matches within CRON_HORIZON_YEARS, which after cron_parse's checks only happens near the
 * end of representable time. */
#ifndef HG_CRON_H
#define HG_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "base/tz.h"

#define CRON_NEVER INT64_MAX
/* Searches give up after this many years. It exceeds 28, the Gregorian weekday cycle, so
 * every expression cron_parse accepts fires within it (even "February 1st on a Monday"). */
#define CRON_HORIZON_YEARS 30
#define CRON_ERR_MAX       128 /* a buffer of this size holds any cron_parse message */

#define CRON_DOM_STAR 0x1 /* day-of-month field starts with '*' */
#define CRON_DOW_STAR 0x2 /* day-of-week field starts with '*' */
#define CRON_WILDCARD 0x4 /* minute or hour field starts with '*': follows the clock across DST */

struct cron_expr {
    uint64_t minute; /* bit m: minute m (0-59) */
    uint32_t hour;   /* bit h: hour h (0-23) */
    uint32_t dom;    /* bit d: day d (1-31) */
    uint16_t month;  /* bit m: month m (1-12) */
    uint8_t dow;     /* bit d: weekday d (0 = Sunday .. 6) */
    uint8_t flags;   /* CRON_* */
};

enum cron_rule_kind { CRON_RULE_CRON, CRON_RULE_EVERY };

/* A schedule: a cron expression in a zone, or every `every_ms` from `anchor_ms` on. The zone
 * is borrowed: it must outlive every call that uses the schedule. */
struct cron_rule {
    enum cron_rule_kind kind;
    struct cron_expr cron;
    const struct tz *tz;
    int64_t every_ms;
    int64_t anchor_ms;
};

/* Parse `text` into *out. 0, or -1 with "<field>: <what is wrong>" in err (field being one
 * of minute, hour, day-of-month, month, day-of-week; or a message about the field count). */
int cron_parse(const char *text, struct cron_expr *out, char *err, size_t errlen) __attribute__((warn_unused_result));

/* The first fire time strictly after after_ms, in zone tz; CRON_NEVER if none. */
int64_t cron_next(const struct cron_expr *c, const struct tz *tz, int64_t after_ms);

/* Fill *s with a cron schedule in zone tz (borrowed). Returns cron_parse's result. */
int cron_rule_init_cron(struct cron_rule *s, const char *text, const struct tz *tz, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Fill *s with "every every_ms milliseconds, at anchor_ms + k * every_ms". 0, or -1 with a
 * message when every_ms < 1. */
int cron_rule_init_every(struct cron_rule *s, int64_t every_ms, int64_t anchor_ms, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The first fire time strictly after after_ms; CRON_NEVER if none. */
int64_t cron_rule_next(const struct cron_rule *s, int64_t after_ms);

/* The fire times in (a, b], ascending: writes at most cap of them to out (out may be NULL
 * when cap is 0) and returns how many there are in all, counting no further than cap + 1,
 * so a result > cap means "more than cap" (catch-up policies: skip / one / all, bounded). */
size_t cron_rule_fires(const struct cron_rule *s, int64_t a, int64_t b, int64_t *out, size_t cap);

/* The last fire time in (a, b], or CRON_NEVER if there is none (catch-up "one" after a
 * long outage, without walking every missed fire). */
int64_t cron_rule_last(const struct cron_rule *s, int64_t a, int64_t b);

#endif
