/* tz.h — IANA time zones read from the system tz database, without the C library's TZ state.
 *
 * setenv("TZ")/tzset()/localtime() share one process-wide zone, so a daemon that computes
 * fire times for schedules in many zones from several threads cannot use them. This module
 * reads TZif files (RFC 8536, versions 1-3; the 64-bit section when present, and the footer
 * POSIX TZ string for instants after the last transition) into an immutable struct tz.
 * A loaded zone is never modified, so any number of threads may use it at once; the caller
 * owns it and frees it with tz_free() once no thread uses it any more.
 *
 * Offsets are seconds east of UTC; instants are unix seconds. Local ("wall") times are
 * given as seconds since 1970-01-01T00:00 on the local calendar, i.e. the wall clock
 * reading encoded as if it were UTC. Zones with leap seconds (the "right/" zones) are
 * refused: their transition times are not unix times. Instants beyond +-2^60 s are clamped. */
#ifndef HG_TZ_H
#define HG_TZ_H

#include <stddef.h>
#include <stdint.h>

#define TZ_NAME_MAX    255
#define TZ_DEFAULT_DIR "/usr/share/zoneinfo"

struct tz;

/* 0 if `name` is an acceptable zone name (relative path of [A-Za-z0-9_+-.] components
 * separated by '/', none empty or starting with '.' or '-', at most TZ_NAME_MAX bytes, not
 * "localtime" or "posixrules"), else -1. */
int tz_name_valid(const char *name) __attribute__((warn_unused_result));

/* Load zone `name` from TZ_DEFAULT_DIR ("UTC" is built in and needs no file). NULL on error,
 * with the reason in err (may be NULL). The caller owns the result (tz_free). */
struct tz *tz_load(const char *name, char *err, size_t errlen) __attribute__((warn_unused_result));

/* As tz_load, from database directory `dir` (tests; a future config key). */
struct tz *tz_load_dir(const char *dir, const char *name, char *err, size_t errlen) __attribute__((warn_unused_result));

/* Parse a TZif image already in memory (`len` bytes); `name` is only remembered. */
struct tz *tz_from_tzif(const unsigned char *buf, size_t len, const char *name, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* A zone described only by a POSIX TZ string such as "CET-1CEST,M3.5.0,M10.5.0/3". */
struct tz *tz_from_posix(const char *spec, char *err, size_t errlen) __attribute__((warn_unused_result));

/* Free a zone (NULL is fine). */
void tz_free(struct tz *tz);

/* The name the zone was loaded under (owned by the zone). */
const char *tz_name(const struct tz *tz);

/* UTC offset in seconds east at unix second `t`. */
int32_t tz_offset(const struct tz *tz, int64_t t);

/* Largest minus smallest offset in force at instants >= t: for instants after t, wall-clock
 * order and instant order differ by no more than this (cron.c bounds its search with it). */
int32_t tz_span_after(const struct tz *tz, int64_t t);

/* The earliest and latest wall time of the instants in [a, b] (the wall clock is not
 * monotonic: it jumps back at a fall-back transition). */
void tz_wall_extent(const struct tz *tz, int64_t a, int64_t b, int64_t *lo, int64_t *hi);

/* The unix seconds whose wall time is `local`: returns how many (0, 1 or 2; written to
 * out[] ascending). 2 means the wall time repeats (a fall-back overlap). 0 means it falls
 * in a gap (spring forward); *gap_end then gets the transition instant ending the gap,
 * the first instant whose wall time is later than `local`. */
int tz_local_to_utc(const struct tz *tz, int64_t local, int64_t out[2], int64_t *gap_end);

/* Calendar helpers (proleptic Gregorian): days since 1970-01-01 of a date, and back. */
int64_t tz_days_from_civil(int64_t y, int m, int d);
void tz_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

#endif
