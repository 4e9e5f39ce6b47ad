/* tz.c — TZif reader and the offset / local-time arithmetic on top of it.
 *
 * Design: a zone is a sorted array of transition instants, the offset in force after each,
 * the offset before the first (the file's type 0, as RFC 8536 says), and optionally the
 * footer's POSIX rule, which governs every instant after the last transition (zic's
 * "slim" files stop their table at the last rule change, so 2026 already needs it).
 * Everything is computed from that immutable data on the caller's stack: no locks, no
 * globals, no libc time-zone state.
 *
 * Mapping a wall time back to instants walks the handful of constant-offset periods that
 * can contain an answer: if t + off(t) = local, then t lies within
 * [local - max offset, local - min offset]. */
#include "base/tz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TZ_FILE_MAX  (1 << 20) /* real files are a few KiB */
#define TZ_TIMES_MAX 65536
#define TZ_OFF_MIN   (-89999) /* RFC 8536: -24:59:59 .. +25:59:59 */
#define TZ_OFF_MAX   93599
#define TZ_T_LIMIT   (INT64_C(1) << 60) /* instants beyond +-2^60 s (36 billion years) are clamped */

/* One rule date of a POSIX TZ string: Jn (1-365, Feb 29 never counted), n (0-365) or Mm.w.d. */
struct tz_rdate {
    char kind; /* 'J', 'N' or 'M' */
    int n, m, w, d;
    int32_t time; /* seconds after local midnight; v3 allows -167h..167h */
};

struct tz_posix {
    int32_t std_off, dst_off; /* seconds east */
    int has_dst;
    struct tz_rdate start, end;
};

struct tz {
    char name[TZ_NAME_MAX + 1];
    size_t n;
    int64_t *at;                /* transition instants, strictly ascending */
    int32_t *off;               /* offset from at[i] on */
    int32_t *suf_min, *suf_max; /* extremes of off[i..] and the rule: tz_span_after */
    int32_t off0;               /* offset before at[0] */
    int has_rule;               /* footer rule governs instants >= at[n-1] (all instants if n == 0) */
    struct tz_posix rule;
    int32_t off_min, off_max;   /* over all instants */
    int32_t rule_min, rule_max; /* from the last transition on */
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void tz_civil_from_days(int64_t z, int64_t *y_out, int *m_out, int *d_out)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y_out = yoe + era * 400 + (m <= 2);
    *m_out = m;
    *d_out = (int)(doy - (153 * mp + 2) / 5 + 1);
}

int64_t tz_days_from_civil(int64_t y, int m, int d)
{
    return days_from_civil(y, m, d);
}

static int64_t year_of_days(int64_t z)
{
    int64_t y;
    int m, d;
    tz_civil_from_days(z, &y, &m, &d);
    return y;
}

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* ---- POSIX TZ strings ---------------------------------------------------------------- */

static const char *posix_name(const char *s)
{
    if (*s == '<') {
        const char *e = strchr(s, '>');
        return (e && e - s >= 4) ? e + 1 : NULL;
    }
    const char *p = s;
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
        p++;
    return p - s >= 3 ? p : NULL;
}

/* [+-]hh[:mm[:ss]] with hours up to max_h; the value in seconds, sign applied. */
static const char *posix_hms(const char *s, int max_h, int32_t *out)
{
    int sign = 1;
    if (*s == '+' || *s == '-')
        sign = *s++ == '-' ? -1 : 1;
    int32_t v[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        if (i > 0) {
            if (*s != ':')
                break;
            s++;
        }
        if (*s < '0' || *s > '9')
            return NULL;
        int x = 0, digits = 0;
        while (*s >= '0' && *s <= '9' && digits < 3) {
            x = x * 10 + (*s++ - '0');
            digits++;
        }
        if ((i == 0 && x > max_h) || (i > 0 && x > 59))
            return NULL;
        v[i] = x;
    }
    *out = sign * (v[0] * 3600 + v[1] * 60 + v[2]);
    return s;
}

static const char *posix_int(const char *s, int lo, int hi, int *out)
{
    if (*s < '0' || *s > '9')
        return NULL;
    int x = 0;
    while (*s >= '0' && *s <= '9') {
        x = x * 10 + (*s++ - '0');
        if (x > hi)
            return NULL;
    }
    if (x < lo)
        return NULL;
    *out = x;
    return s;
}

static const char *posix_rdate(const char *s, struct tz_rdate *r)
{
    memset(r, 0, sizeof *r);
    if (*s == 'J') {
        r->kind = 'J';
        s = posix_int(s + 1, 1, 365, &r->n);
    } else if (*s == 'M') {
        r->kind = 'M';
        s = posix_int(s + 1, 1, 12, &r->m);
        if (s && *s == '.')
            s = posix_int(s + 1, 1, 5, &r->w);
        else
            s = NULL;
        if (s && *s == '.')
            s = posix_int(s + 1, 0, 6, &r->d);
        else
            s = NULL;
    } else {
        r->kind = 'N';
        s = posix_int(s, 0, 365, &r->n);
    }
    if (!s)
        return NULL;
    r->time = 7200;
    if (*s == '/')
        s = posix_hms(s + 1, 167, &r->time);
    return s;
}

static int posix_parse(const char *s, struct tz_posix *p)
{
    memset(p, 0, sizeof *p);
    int32_t west;
    if (!(s = posix_name(s)) || !(s = posix_hms(s, 24, &west)))
        return -1;
    p->std_off = -west;
    if (*s == '\0')
        return 0;
    if (!(s = posix_name(s)))
        return -1;
    p->has_dst = 1;
    p->dst_off = p->std_off + 3600;
    if (*s != ',' && *s != '\0') {
        if (!(s = posix_hms(s, 24, &west)))
            return -1;
        p->dst_off = -west;
    }
    if (*s == '\0') {
        /* No rule: POSIX leaves it to the implementation; glibc and zic assume US rules. */
        p->start = (struct tz_rdate){'M', 0, 3, 2, 0, 7200};
        p->end = (struct tz_rdate){'M', 0, 11, 1, 0, 7200};
        return 0;
    }
    if (*s != ',' || !(s = posix_rdate(s + 1, &p->start)) || *s != ',' || !(s = posix_rdate(s + 1, &p->end)))
        return -1;
    return *s == '\0' ? 0 : -1;
}

/* Wall-clock seconds (local calendar) at which rule date r happens in year y. */
static int64_t rdate_local(const struct tz_rdate *r, int64_t y)
{
    int64_t jan1 = days_from_civil(y, 1, 1), day;
    if (r->kind == 'J')
        day = jan1 + r->n - 1 + (is_leap(y) && r->n >= 60);
    else if (r->kind == 'N')
        day = jan1 + r->n;
    else {
        int64_t first = days_from_civil(y, r->m, 1);
        int wd = (int)((first % 7 + 11) % 7); /* 1970-01-01 was a Thursday (4) */
        day = first + (r->d - wd + 7) % 7 + (int64_t)(r->w - 1) * 7;
        int64_t next_month = r->m == 12 ? days_from_civil(y + 1, 1, 1) : days_from_civil(y, r->m + 1, 1);
        while (day >= next_month)
            day -= 7;
    }
    return day * 86400 + r->time;
}

/* Offset at t under rule p, and the next instant > t at which a rule event happens. */
static void posix_period(const struct tz_posix *p, int64_t t, int32_t *off, int64_t *next)
{
    if (!p->has_dst) {
        *off = p->std_off;
        *next = INT64_MAX;
        return;
    }
    int64_t y = year_of_days(floor_div(t + p->std_off, 86400));
    /* Events of the years around t; an end sorts before a start at the same instant, so
     * "all year DST" rules (start Jan 1 00:00, end Dec 31 24:00 + 1h) stay in DST. */
    int64_t ev[6];
    int32_t evoff[6];
    int ne = 0;
    for (int64_t yy = y - 1; yy <= y + 1; yy++) {
        ev[ne] = rdate_local(&p->end, yy) - p->dst_off;
        evoff[ne++] = p->std_off;
        ev[ne] = rdate_local(&p->start, yy) - p->std_off;
        evoff[ne++] = p->dst_off;
    }
    for (int i = 1; i < ne; i++) /* insertion sort, stable: ties keep end-before-start */
        for (int j = i; j > 0 && ev[j] < ev[j - 1]; j--) {
            int64_t te = ev[j];
            ev[j] = ev[j - 1];
            ev[j - 1] = te;
            int32_t to = evoff[j];
            evoff[j] = evoff[j - 1];
            evoff[j - 1] = to;
        }
    *off = p->std_off;
    *next = INT64_MAX;
    for (int i = 0; i < ne; i++) {
        if (ev[i] <= t)
            *off = evoff[i];
        else if (*next == INT64_MAX)
            *next = ev[i];
    }
}

/* ---- zones ----------------------------------------------------------------------------- */

static struct tz *tz_alloc(const char *name, size_t n)
{
    struct tz *tz = calloc(1, sizeof *tz);
    if (!tz)
        return NULL;
    if (n) {
        tz->at = malloc(n * sizeof *tz->at);
        tz->off = malloc(n * sizeof *tz->off);
        tz->suf_min = malloc(n * sizeof *tz->suf_min);
        tz->suf_max = malloc(n * sizeof *tz->suf_max);
        if (!tz->at || !tz->off || !tz->suf_min || !tz->suf_max) {
            tz_free(tz);
            return NULL;
        }
    }
    tz->n = n;
    snprintf(tz->name, sizeof tz->name, "%s", name ? name : "");
    return tz;
}

static void tz_finish(struct tz *tz)
{
    /* Offsets of the footer rule, which governs from the last transition on. */
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    if (tz->has_rule) {
        lo = hi = tz->rule.std_off;
        if (tz->rule.has_dst) {
            lo = tz->rule.dst_off < lo ? tz->rule.dst_off : lo;
            hi = tz->rule.dst_off > hi ? tz->rule.dst_off : hi;
        }
    }
    for (size_t i = tz->n; i-- > 0;) {
        lo = tz->off[i] < lo ? tz->off[i] : lo;
        hi = tz->off[i] > hi ? tz->off[i] : hi;
        tz->suf_min[i] = lo;
        tz->suf_max[i] = hi;
    }
    tz->rule_min = tz->has_rule ? (tz->n ? tz->suf_min[tz->n - 1] : lo) : (tz->n ? tz->off[tz->n - 1] : tz->off0);
    tz->rule_max = tz->has_rule ? (tz->n ? tz->suf_max[tz->n - 1] : hi) : (tz->n ? tz->off[tz->n - 1] : tz->off0);
    if (tz->n == 0 && tz->has_rule) {
        tz->off_min = lo;
        tz->off_max = hi;
    } else {
        tz->off_min = tz->off0 < lo ? tz->off0 : lo;
        tz->off_max = tz->off0 > hi ? tz->off0 : hi;
    }
}

void tz_free(struct tz *tz)
{
    if (!tz)
        return;
    free(tz->at);
    free(tz->off);
    free(tz->suf_min);
    free(tz->suf_max);
    free(tz);
}

const char *tz_name(const struct tz *tz)
{
    return tz->name;
}

/* Index of the period holding t: -1 before the first transition, n-1 from the last on. */
static long tz_index(const struct tz *tz, int64_t t)
{
    if (tz->n == 0 || t < tz->at[0])
        return -1;
    size_t lo = 0, hi = tz->n; /* largest i with at[i] <= t */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (tz->at[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return (long)lo;
}

int32_t tz_span_after(const struct tz *tz, int64_t t)
{
    long i = tz_index(tz, t);
    if (i < 0)
        return tz->off_max - tz->off_min;
    if ((size_t)i == tz->n - 1)
        return tz->rule_max - tz->rule_min;
    /* Period i's own offset is off[i]; later ones and the rule are in the suffix. */
    return tz->suf_max[i] - tz->suf_min[i];
}

struct tz *tz_from_posix(const char *spec, char *err, size_t errlen)
{
    struct tz_posix p;
    if (!spec || posix_parse(spec, &p) < 0) {
        set_err(err, errlen, "invalid POSIX TZ string");
        return NULL;
    }
    struct tz *tz = tz_alloc(spec, 0);
    if (!tz) {
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    tz->has_rule = 1;
    tz->rule = p;
    tz->off0 = p.std_off;
    tz_finish(tz);
    return tz;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct tzif_hdr {
    int version;
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

static int tzif_hdr(const unsigned char *p, size_t len, struct tzif_hdr *h)
{
    if (len < 44 || memcmp(p, "TZif", 4) != 0)
        return -1;
    h->version = p[4] == 0 ? 1 : p[4] - '0';
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    if (h->version < 1 || h->version > 9 || h->typecnt < 1 || h->typecnt > 256 || h->timecnt > TZ_TIMES_MAX ||
        h->charcnt > 65536 || h->leapcnt > 65536 || (h->isutcnt && h->isutcnt != h->typecnt) ||
        (h->isstdcnt && h->isstdcnt != h->typecnt))
        return -1;
    return 0;
}

static size_t tzif_block(const struct tzif_hdr *h, size_t tsize)
{
    return (size_t)h->timecnt * (tsize + 1) + (size_t)h->typecnt * 6 + h->charcnt + (size_t)h->leapcnt * (tsize + 4) +
           h->isstdcnt + h->isutcnt;
}

struct tz *tz_from_tzif(const unsigned char *buf, size_t len, const char *name, char *err, size_t errlen)
{
    struct tzif_hdr h;
    if (tzif_hdr(buf, len, &h) < 0) {
        set_err(err, errlen, "not a TZif file");
        return NULL;
    }
    size_t tsize = 4;
    const unsigned char *p = buf + 44, *end = buf + len;
    if (h.version >= 2) {
        /* Skip the 32-bit block; the 64-bit one that follows covers all instants. */
        size_t skip = tzif_block(&h, 4);
        if ((size_t)(end - p) < skip || tzif_hdr(p + skip, (size_t)(end - p) - skip, &h) < 0) {
            set_err(err, errlen, "truncated TZif file");
            return NULL;
        }
        p += skip + 44;
        tsize = 8;
    }
    if (h.leapcnt) {
        set_err(err, errlen, "zones with leap seconds are not supported");
        return NULL;
    }
    if ((size_t)(end - p) < tzif_block(&h, tsize)) {
        set_err(err, errlen, "truncated TZif file");
        return NULL;
    }
    const unsigned char *times = p, *idx = p + (size_t)h.timecnt * tsize, *types = idx + h.timecnt;
    int32_t utoff[256];
    for (uint32_t i = 0; i < h.typecnt; i++) {
        utoff[i] = (int32_t)be32(types + 6 * i);
        if (utoff[i] < TZ_OFF_MIN || utoff[i] > TZ_OFF_MAX) {
            set_err(err, errlen, "TZif offset out of range");
            return NULL;
        }
    }
    struct tz *tz = tz_alloc(name, h.timecnt);
    if (!tz) {
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    tz->off0 = utoff[0];
    for (uint32_t i = 0; i < h.timecnt; i++) {
        tz->at[i] = tsize == 8 ? be64(times + 8 * i) : (int32_t)be32(times + 4 * i);
        if (idx[i] >= h.typecnt || (i > 0 && tz->at[i] <= tz->at[i - 1]) || tz->at[i] < -TZ_T_LIMIT ||
            tz->at[i] > TZ_T_LIMIT) {
            set_err(err, errlen, "corrupt TZif transition table");
            tz_free(tz);
            return NULL;
        }
        tz->off[i] = utoff[idx[i]];
    }
    p += tzif_block(&h, tsize);
    if (h.version >= 2 && p < end) {
        /* Footer: "\n<POSIX TZ string>\n"; an empty string means no rule. */
        const unsigned char *nl = (*p == '\n') ? memchr(p + 1, '\n', (size_t)(end - p - 1)) : NULL;
        size_t slen = nl ? (size_t)(nl - p - 1) : 0;
        char spec[128];
        if (!nl || slen >= sizeof spec) {
            set_err(err, errlen, "corrupt TZif footer");
            tz_free(tz);
            return NULL;
        }
        memcpy(spec, p + 1, slen);
        spec[slen] = '\0';
        if (slen) {
            if (posix_parse(spec, &tz->rule) < 0) {
                set_err(err, errlen, "unsupported TZif footer \"%s\"", spec);
                tz_free(tz);
                return NULL;
            }
            tz->has_rule = 1;
        }
    }
    tz_finish(tz);
    return tz;
}

int tz_name_valid(const char *name)
{
    size_t len = strlen(name), comp = 0;
    if (len == 0 || len > TZ_NAME_MAX || name[0] == '/')
        return -1;
    /* Not zones: "localtime" links to the host's /etc/localtime (outside the database, and
     * different per machine), "posixrules" is zic's internal default. */
    if (strcmp(name, "localtime") == 0 || strcmp(name, "posixrules") == 0)
        return -1;
    for (size_t i = 0; i <= len; i++) {
        char c = name[i];
        if (c == '/' || c == '\0') {
            /* Empty, "." and ".." components could leave the database directory. */
            if (comp == 0 || (comp == 1 && name[i - 1] == '.') ||
                (comp == 2 && name[i - 1] == '.' && name[i - 2] == '.'))
                return -1;
            comp = 0;
            continue;
        }
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '+' || c == '.'))
            return -1;
        if (comp == 0 && (c == '-' || c == '.')) /* no option-like or hidden names */
            return -1;
        comp++;
    }
    return 0;
}

struct tz *tz_load_dir(const char *dir, const char *name, char *err, size_t errlen)
{
    if (!name || tz_name_valid(name) < 0) {
        set_err(err, errlen, "invalid time zone name");
        return NULL;
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        set_err(err, errlen, "time zone path too long");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, errlen, "unknown time zone \"%s\"", name);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 44 || st.st_size > TZ_FILE_MAX) {
        close(fd);
        set_err(err, errlen, "unknown time zone \"%s\"", name);
        return NULL;
    }
    size_t len = (size_t)st.st_size, got = 0;
    unsigned char *buf = malloc(len);
    if (!buf) {
        close(fd);
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    struct tz *tz = NULL;
    char why[128] = "";
    if (got == len)
        tz = tz_from_tzif(buf, len, name, why, sizeof why);
    else
        snprintf(why, sizeof why, "short read");
    free(buf);
    if (!tz)
        set_err(err, errlen, "time zone \"%s\": %s", name, why);
    return tz;
}

struct tz *tz_load(const char *name, char *err, size_t errlen)
{
    if (name && strcmp(name, "UTC") == 0) {
        /* Built in: the default zone of every schedule should not depend on a file. */
        struct tz *tz = tz_from_posix("UTC0", err, errlen);
        if (tz)
            snprintf(tz->name, sizeof tz->name, "UTC");
        return tz;
    }
    return tz_load_dir(TZ_DEFAULT_DIR, name, err, errlen);
}

/* ---- arithmetic ------------------------------------------------------------------------ */

/* Offset at t and the next instant > t at which the offset may change (INT64_MAX: never). */
/* Offset at t and the next instant > t at which the offset may change (INT64_MAX: never). */
static void tz_period(const struct tz *tz, int64_t t, int32_t *off, int64_t *next)
{
    /* Far past or future instants are clamped, which keeps the rule arithmetic in range. */
    t = t > TZ_T_LIMIT ? TZ_T_LIMIT : t < -TZ_T_LIMIT ? -TZ_T_LIMIT : t;
    long i = tz_index(tz, t);
    if (i < 0) {
        if (tz->n == 0 && tz->has_rule) {
            posix_period(&tz->rule, t, off, next);
            return;
        }
        *off = tz->off0;
        *next = tz->n ? tz->at[0] : INT64_MAX;
    } else if ((size_t)i + 1 < tz->n) {
        *off = tz->off[i];
        *next = tz->at[i + 1];
    } else if (tz->has_rule) {
        posix_period(&tz->rule, t, off, next);
    } else {
        *off = tz->off[i];
        *next = INT64_MAX;
    }
    if (*next > TZ_T_LIMIT)
        *next = INT64_MAX;
}

int32_t tz_offset(const struct tz *tz, int64_t t)
{
    int32_t off;
    int64_t next;
    tz_period(tz, t, &off, &next);
    return off;
}

void tz_wall_extent(const struct tz *tz, int64_t a, int64_t b, int64_t *lo, int64_t *hi)
{
    a = a > TZ_T_LIMIT ? TZ_T_LIMIT : a < -TZ_T_LIMIT ? -TZ_T_LIMIT : a;
    b = b > TZ_T_LIMIT ? TZ_T_LIMIT : b < a ? a : b;
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    int64_t t = a;
    for (int guard = 0; guard < 1024; guard++) {
        int32_t off;
        int64_t next;
        tz_period(tz, t, &off, &next);
        int64_t last = next == INT64_MAX || next > b ? b : next - 1;
        if (t + off < *lo)
            *lo = t + off;
        if (last + off > *hi)
            *hi = last + off;
        if (last == b)
            return;
        t = next;
    }
    /* Absurdly many transitions: fall back to the zone-wide bounds, which are safe. */
    *lo = a + tz->off_min < *lo ? a + tz->off_min : *lo;
    *hi = b + tz->off_max;
}

int tz_local_to_utc(const struct tz *tz, int64_t local, int64_t out[2], int64_t *gap_end)
{
    local = local > TZ_T_LIMIT ? TZ_T_LIMIT : local < -TZ_T_LIMIT ? -TZ_T_LIMIT : local;
    int64_t t = local - tz->off_max, stop = local - tz->off_min;
    int n = 0;
    *gap_end = INT64_MAX;
    for (int guard = 0; guard < 64; guard++) {
        int32_t off, off_next;
        int64_t next, next2;
        tz_period(tz, t, &off, &next);
        int64_t cand = local - off;
        if (cand >= t && cand < next && n < 2 && (n == 0 || cand > out[n - 1]))
            out[n++] = cand;
        if (next == INT64_MAX || next > stop)
            break;
        tz_period(tz, next, &off_next, &next2);
        /* The wall clock jumps from next + off to next + off_next at this transition. */
        if (next + off <= local && local < next + off_next && *gap_end == INT64_MAX)
            *gap_end = next;
        t = next;
    }
    return n;
}
