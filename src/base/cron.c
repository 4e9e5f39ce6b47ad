/* cron.c — cron expression parser and fire-time search.
 *
 * Design: an expression is five bit sets. The search walks wall-clock (local) minutes in
 * calendar order, jumping over whole months, days and hours that cannot match, and maps
 * each matching local minute to instants with tz_local_to_utc, applying the DST rules in
 * cron.h. Local order and UTC order agree except around a fall-back, where the wall clock
 * goes back: so the walk starts at the earliest wall time of the instants just after
 * `after`, and once it has a candidate instant it stops at the latest wall time of the
 * instants up to that candidate, past which no wall time can map to an earlier instant.
 * Away from transitions both bounds are the plain wall times and the first match is the
 * answer. The walk is bounded by CRON_HORIZON_YEARS, so an expression that
 * never matches cannot loop forever; cron_parse already rejects the ones that cannot match
 * (a day-of-month that no listed month has), leaving the bound as a safety net. */
#include "base/cron.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct field {
    const char *name;
    int lo, hi;               /* accepted values; day-of-week accepts 7 for Sunday */
    int star_hi;              /* upper end of '*' */
    const char *const *names; /* names[i] is value lo + i; NULL: numbers only */
};

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL",
                                          "AUG", "SEP", "OCT", "NOV", "DEC", NULL};
static const char *const dow_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", NULL};

static const struct field fields[5] = {
    {"minute", 0, 59, 59, NULL},       {"hour", 0, 23, 23, NULL},           {"day-of-month", 1, 31, 31, NULL},
    {"month", 1, 12, 12, month_names}, {"day-of-week", 0, 7, 6, dow_names},
};

static const int month_days[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}; /* Feb: leap */

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int upper(int c)
{
    return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

/* A number or (for month/day-of-week) a three-letter name, in range. */
static int parse_value(const struct field *f, const char *s, size_t len, int *out, char *err, size_t errlen)
{
    if (len == 0)
        return fail(err, errlen, "%s: missing value", f->name);
    if (s[0] >= '0' && s[0] <= '9') {
        long v = 0;
        for (size_t i = 0; i < len; i++) {
            if (s[i] < '0' || s[i] > '9' || v > 1000)
                return fail(err, errlen, "%s: \"%.*s\" is not a number", f->name, (int)(len > 20 ? 20 : len), s);
            v = v * 10 + (s[i] - '0');
        }
        if (v < f->lo || v > f->hi)
            return fail(err, errlen, "%s: %ld is out of range %d-%d", f->name, v, f->lo, f->hi);
        *out = (int)v;
        return 0;
    }
    if (f->names && len == 3) {
        for (int i = 0; f->names[i]; i++)
            if (upper(s[0]) == f->names[i][0] && upper(s[1]) == f->names[i][1] && upper(s[2]) == f->names[i][2]) {
                *out = f->lo + i;
                return 0;
            }
    }
    return fail(err, errlen, "%s: \"%.*s\" is not a %s", f->name, (int)(len > 20 ? 20 : len), s,
                f->names ? "number or name" : "number");
}

/* One comma-separated field into a bit set. */
static int parse_field(const struct field *f, const char *s, size_t len, uint64_t *mask, char *err, size_t errlen)
{
    *mask = 0;
    const char *end = s + len;
    while (1) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma ? comma : end;
        if (item_end == s)
            return fail(err, errlen, "%s: empty list item", f->name);
        const char *slash = memchr(s, '/', (size_t)(item_end - s));
        const char *base_end = slash ? slash : item_end;
        int a, b, step = 1;
        if (base_end - s == 1 && *s == '*') {
            a = f->lo;
            b = f->star_hi;
        } else {
            const char *dash = memchr(s, '-', (size_t)(base_end - s));
            if (parse_value(f, s, (size_t)((dash ? dash : base_end) - s), &a, err, errlen) < 0)
                return -1;
            if (dash) {
                if (parse_value(f, dash + 1, (size_t)(base_end - dash - 1), &b, err, errlen) < 0)
                    return -1;
                if (a > b)
                    return fail(err, errlen, "%s: range %d-%d goes backwards", f->name, a, b);
            } else {
                if (slash)
                    return fail(err, errlen, "%s: a step needs '*' or a range before it", f->name);
                b = a;
            }
        }
        if (slash) {
            int span = f->star_hi - f->lo + 1;
            const char *p = slash + 1;
            long v = 0;
            if (p == item_end)
                return fail(err, errlen, "%s: missing step after '/'", f->name);
            for (; p < item_end; p++) {
                if (*p < '0' || *p > '9' || v > 1000)
                    return fail(err, errlen, "%s: step \"%.*s\" is not a number", f->name,
                                (int)(item_end - slash - 1 > 20 ? 20 : item_end - slash - 1), slash + 1);
                v = v * 10 + (*p - '0');
            }
            if (v < 1 || v > span)
                return fail(err, errlen, "%s: step %ld is out of range 1-%d", f->name, v, span);
            step = (int)v;
        }
        for (int v = a; v <= b; v += step)
            *mask |= UINT64_C(1) << (f->names == dow_names && v == 7 ? 0 : v);
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

int cron_parse(const char *text, struct cron_expr *out, char *err, size_t errlen)
{
    const char *tok[6];
    size_t toklen[6];
    int n = 0;
    const char *p = text;
    memset(out, 0, sizeof *out);
    while (1) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        const char *start = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        if (n < 6) {
            tok[n] = start;
            toklen[n] = (size_t)(p - start);
        }
        n++;
    }
    if (n != 5)
        return fail(err, errlen, "expected 5 fields (minute hour day-of-month month day-of-week), got %d", n);
    uint64_t m[5];
    for (int i = 0; i < 5; i++)
        if (parse_field(&fields[i], tok[i], toklen[i], &m[i], err, errlen) < 0)
            return -1;
    out->minute = m[0];
    out->hour = (uint32_t)m[1];
    out->dom = (uint32_t)m[2];
    out->month = (uint16_t)m[3];
    out->dow = (uint8_t)m[4];
    if (tok[2][0] == '*')
        out->flags |= CRON_DOM_STAR;
    if (tok[4][0] == '*')
        out->flags |= CRON_DOW_STAR;
    if (tok[0][0] == '*' || tok[1][0] == '*')
        out->flags |= CRON_WILDCARD;
    /* Only "some days of the month, any weekday" can be impossible: '*' day-of-month sets
     * contain day 1, and with both fields restricted any listed weekday will do. */
    if ((out->flags & CRON_DOW_STAR) && !(out->flags & CRON_DOM_STAR)) {
        int ok = 0;
        for (int mon = 1; mon <= 12 && !ok; mon++)
            if (out->month & (1u << mon))
                ok = (out->dom & (((UINT32_C(2) << month_days[mon]) - 1) & ~UINT32_C(1))) != 0;
        if (!ok)
            return fail(err, errlen, "day-of-month: no listed day exists in any listed month");
    }
    return 0;
}

static int days_in_month(int64_t y, int m)
{
    if (m != 2)
        return month_days[m];
    return ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) ? 29 : 28;
}

static int day_matches(const struct cron_expr *c, int d, int64_t days)
{
    int wd = (int)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday */
    int dom_ok = (c->dom >> d) & 1, dow_ok = (c->dow >> wd) & 1;
    if (c->flags & (CRON_DOM_STAR | CRON_DOW_STAR))
        return dom_ok && dow_ok;
    return dom_ok || dow_ok; /* Vixie: both restricted, either will do */
}

/* The first local minute >= local (seconds, a multiple of 60) that matches, or CRON_NEVER
 * past `limit`. */
static int64_t next_local(const struct cron_expr *c, int64_t local, int64_t limit)
{
    int64_t days = floor_div(local, 86400), y;
    int sod = (int)(local - days * 86400), m, d;
    int h = sod / 3600, mi = sod % 3600 / 60;
    tz_civil_from_days(days, &y, &m, &d);
    while (days * 86400 <= limit) {
        if (!((c->month >> m) & 1)) {
            days += days_in_month(y, m) - d + 1;
            d = 1;
            if (++m > 12) {
                m = 1;
                y++;
            }
            h = mi = 0;
            continue;
        }
        if (h < 24 && day_matches(c, d, days)) {
            while (h < 24 && !((c->hour >> h) & 1)) {
                h++;
                mi = 0;
            }
            while (h < 24 && mi < 60 && !((c->minute >> mi) & 1))
                mi++;
            if (h < 24 && mi < 60)
                return days * 86400 + h * 3600 + mi * 60;
            if (h < 24) { /* no minute left in this hour: try the next one */
                h++;
                mi = 0;
                continue;
            }
        }
        days++;
        h = mi = 0;
        if (++d > days_in_month(y, m)) {
            d = 1;
            if (++m > 12) {
                m = 1;
                y++;
            }
        }
    }
    return CRON_NEVER;
}

int64_t cron_next(const struct cron_expr *c, const struct tz *tz, int64_t after_ms)
{
    /* Keep every intermediate in range: fire times are whole seconds times 1000. */
    const int64_t edge = INT64_MAX / 1000 - 2 * 366 * 86400LL * CRON_HORIZON_YEARS;
    int64_t after_s = floor_div(after_ms, 1000);
    if (after_s > edge)
        return CRON_NEVER;
    if (after_s < -edge) {
        after_s = -edge;
        after_ms = after_s * 1000;
    }
    /* Wall times that can map after `after`: from the earliest wall time of the instants
     * just after it (an overlap ahead can make that earlier than its own wall time). */
    int64_t lo, hi;
    tz_wall_extent(tz, after_s, after_s + tz_span_after(tz, after_s), &lo, &hi);
    int64_t local = floor_div(lo, 60) * 60;
    int64_t limit = local + (int64_t)CRON_HORIZON_YEARS * 366 * 86400;
    int64_t best = CRON_NEVER, stop = CRON_NEVER;
    while ((local = next_local(c, local, limit)) != CRON_NEVER && local <= stop) {
        int64_t sol[2], gap_end, cand[2];
        int n = tz_local_to_utc(tz, local, sol, &gap_end), nc = 0;
        if (c->flags & CRON_WILDCARD) {
            for (int i = 0; i < n; i++)
                cand[nc++] = sol[i];
        } else if (n > 0) {
            cand[nc++] = sol[0];
        } else if (gap_end != INT64_MAX) {
            cand[nc++] = gap_end;
        }
        for (int i = 0; i < nc; i++) {
            if (cand[i] * 1000 > after_ms && cand[i] < best) {
                /* A later wall time maps to an earlier instant only if it is not past the
                 * latest wall time of the instants up to this candidate. */
                best = cand[i];
                tz_wall_extent(tz, after_s, best, &lo, &stop);
            }
        }
        local += 60;
    }
    return best == CRON_NEVER ? CRON_NEVER : best * 1000;
}

int cron_rule_init_cron(struct cron_rule *s, const char *text, const struct tz *tz, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->kind = CRON_RULE_CRON;
    s->tz = tz;
    return cron_parse(text, &s->cron, err, errlen);
}

int cron_rule_init_every(struct cron_rule *s, int64_t every_ms, int64_t anchor_ms, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (every_ms < 1)
        return fail(err, errlen, "every: must be at least 1 ms");
    s->kind = CRON_RULE_EVERY;
    s->every_ms = every_ms;
    s->anchor_ms = anchor_ms;
    return 0;
}

int64_t cron_rule_next(const struct cron_rule *s, int64_t after_ms)
{
    if (s->kind == CRON_RULE_CRON)
        return cron_next(&s->cron, s->tz, after_ms);
    if (after_ms < s->anchor_ms)
        return s->anchor_ms;
    int64_t diff, k, t;
    if (__builtin_sub_overflow(after_ms, s->anchor_ms, &diff))
        return CRON_NEVER;
    k = diff / s->every_ms + 1;
    if (__builtin_mul_overflow(k, s->every_ms, &t) || __builtin_add_overflow(t, s->anchor_ms, &t) || t == CRON_NEVER)
        return CRON_NEVER;
    return t;
}

size_t cron_rule_fires(const struct cron_rule *s, int64_t a, int64_t b, int64_t *out, size_t cap)
{
    size_t n = 0;
    int64_t t = a;
    while (n <= cap) {
        t = cron_rule_next(s, t);
        if (t == CRON_NEVER || t > b)
            break;
        if (n < cap)
            out[n] = t;
        n++;
    }
    return n;
}

int64_t cron_rule_last(const struct cron_rule *s, int64_t a, int64_t b)
{
    if (a >= b)
        return CRON_NEVER;
    if (s->kind == CRON_RULE_EVERY) {
        if (b < s->anchor_ms)
            return CRON_NEVER;
        int64_t diff, t;
        if (__builtin_sub_overflow(b, s->anchor_ms, &diff))
            return CRON_NEVER;
        t = s->anchor_ms + diff / s->every_ms * s->every_ms; /* <= b, no overflow */
        return t > a ? t : CRON_NEVER;
    }
    /* Look back over growing windows so a long outage costs a few searches, not one per
     * missed fire; within the first window that has a fire, walk forward to the last. */
    int64_t w = 3600 * 1000;
    while (1) {
        int64_t lo = (b - a > w) ? b - w : a;
        int64_t t = cron_rule_next(s, lo);
        if (t != CRON_NEVER && t <= b) {
            int64_t last = t;
            while ((t = cron_rule_next(s, t)) != CRON_NEVER && t <= b)
                last = t;
            return last;
        }
        if (lo == a)
            return CRON_NEVER;
        w = w > INT64_MAX / 4 ? INT64_MAX : w * 4;
    }
}
