/* job.c — see job.h. */
#include "core/job.h"

#include "base/jscan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {"",        "delayed", "ready",   "reserved", "finished",
                                          "deleted", "dead",    "aborted", "far"};

const char *job_state_name(int state)
{
    return state >= 0 && state <= JS_FAR ? state_names[state] : "unknown";
}

int job_state_parse(const char *name)
{
    for (int i = 1; i <= JS_FAR; i++)
        if (strcmp(name, state_names[i]) == 0)
            return i;
    return -1;
}

int job_topic_valid(const char *s, size_t len)
{
    if (len == 0 || len > TOPIC_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

int job_topic_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c;
    return (alen > blen) - (alen < blen);
}

int job_topic_list_parse(char *list, size_t len, const char **topics, size_t *lens, char *err, size_t errlen)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && list[i] != ',')
            continue;
        size_t tlen = i - start;
        if (!job_topic_valid(list + start, tlen)) {
            snprintf(err, errlen, "topic must be 1-%d characters of A-Z a-z 0-9 _ . : - (comma-separated for several)",
                     TOPIC_MAX);
            return -1;
        }
        if (n == TOPICS_PER_GET) {
            snprintf(err, errlen, "at most %d topics per request", TOPICS_PER_GET);
            return -1;
        }
        for (int k = 0; k < n; k++)
            if (lens[k] == tlen && memcmp(topics[k], list + start, tlen) == 0) {
                snprintf(err, errlen, "topic \"%.*s\" is listed twice", (int)tlen, list + start);
                return -1;
            }
        if (i < len)
            list[i] = '\0';
        topics[n] = list + start;
        lens[n] = tlen;
        n++;
        start = i + 1;
    }
    return n;
}

int job_bizkey_valid(const char *s, size_t len)
{
    size_t chars = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        int extra;
        if (c < 0x80) {
            cp = c;
            extra = 0;
        } else if ((c & 0xE0) == 0xC0) {
            cp = c & 0x1F;
            extra = 1;
        } else if ((c & 0xF0) == 0xE0) {
            cp = c & 0x0F;
            extra = 2;
        } else if ((c & 0xF8) == 0xF0) {
            cp = c & 0x07;
            extra = 3;
        } else {
            return 0;
        }
        if (extra > 0 && i + (size_t)extra >= len)
            return 0;
        for (int k = 1; k <= extra; k++) {
            unsigned char cc = (unsigned char)s[i + (size_t)k];
            if ((cc & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (cc & 0x3F);
        }
        /* overlong forms, surrogates and out-of-range code points are not valid UTF-8 */
        if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029)
            return 0;
        i += (size_t)extra + 1;
        chars++;
    }
    return chars >= 1 && chars <= BIZKEY_MAX;
}

int job_group_valid(const char *s, size_t len)
{
    /* the bizKey rule (UTF-8, printable) bounds characters; a group is bounded in bytes */
    return len >= 1 && len <= GROUP_MAX && job_bizkey_valid(s, len);
}

void job_specs_free(struct job_spec *jobs, int count)
{
    if (jobs == NULL)
        return;
    for (int i = 0; i < count; i++) {
        free(jobs[i].body);
        free(jobs[i].biz_key);
        free(jobs[i].tracestate);
        free(jobs[i].group);
    }
    free(jobs);
}

/* ---- push parsing ----
 *
 * The push body is walked with jscan (jscan.h), not parsed into a tree: every job's "body"
 * is kept as the exact text the producer sent, and the other fields are read straight from
 * their text. Strictness matches the contract: unknown or repeated fields, wrong types and
 * values out of range are errors naming the job's index and the field. */

enum field {
    F_TOPIC,
    F_BODY,
    F_DELAY,
    F_RUNAT,
    F_PRIORITY,
    F_TTR,
    F_TRIES,
    F_BIZKEY,
    F_REPLACE,
    F_BACKOFF,
    F_TRACEPARENT,
    F_TRACESTATE,
    F_GROUP,
    F_COUNT
};

static const char *const field_names[F_COUNT] = {"topic",       "body",       "delay",  "runAt",   "priority",
                                                 "ttr",         "tries",      "bizKey", "replace", "backoff",
                                                 "traceparent", "tracestate", "group"};

/* The text of one field's value. */
struct span {
    const char *p;
    size_t len;
};

/* An integer field: JSON integer text (no fraction or exponent) within [min, max]. */
static int span_int(struct span v, const char *name, int64_t min, int64_t max, int64_t *out, const char *where,
                    char *err, size_t errlen)
{
    size_t i = 0;
    int neg = 0;
    uint64_t n = 0;
    int ok = v.len > 0;
    if (ok && v.p[0] == '-') {
        neg = 1;
        i = 1;
        ok = v.len > 1;
    }
    for (; ok && i < v.len; i++) {
        if (v.p[i] < '0' || v.p[i] > '9' || n > (UINT64_MAX - 9) / 10) {
            ok = 0;
            break;
        }
        n = n * 10 + (uint64_t)(v.p[i] - '0');
    }
    int64_t value = 0;
    if (ok && n <= (uint64_t)INT64_MAX)
        value = neg ? -(int64_t)n : (int64_t)n;
    else if (ok)
        value = neg ? INT64_MIN : INT64_MAX; /* certainly out of range below */
    if (!ok || value < min || value > max || (neg && n > (uint64_t)INT64_MAX)) {
        snprintf(err, errlen, "%s%s must be an integer from %lld to %lld", where, name, (long long)min, (long long)max);
        return -1;
    }
    *out = value;
    return 0;
}

/* A string field, decoded into out (cap bytes). -1 when not a string or too long. */
static int span_string(struct span v, char *out, size_t cap, size_t *outlen)
{
    if (v.len == 0 || v.p[0] != '"')
        return -1;
    struct jscan j;
    int truncated = 0;
    jscan_init(&j, v.p, v.len);
    if (jscan_string(&j, out, cap, outlen, &truncated) < 0 || truncated)
        return -1;
    return 0;
}

static int span_is(struct span v, const char *word)
{
    return v.len == strlen(word) && memcmp(v.p, word, v.len) == 0;
}

/* Read one job object at the scanner's position into spans (validating its syntax). */
static int scan_job(struct jscan *j, struct span *fields, const char *where, char *err, size_t errlen)
{
    if (jscan_peek(j) != '{') {
        snprintf(err, errlen, "%sa job must be a JSON object", where);
        return -1;
    }
    if (jscan_expect(j, '{') < 0)
        return -1;
    if (jscan_peek(j) == '}') {
        j->pos++;
        return 0;
    }
    for (;;) {
        char key[64];
        size_t klen;
        int truncated;
        if (jscan_peek(j) != '"') {
            snprintf(err, errlen, "%sexpected a field name at byte %zu", where, j->pos);
            return -1;
        }
        if (jscan_string(j, key, sizeof key - 1, &klen, &truncated) < 0) {
            snprintf(err, errlen, "body is not valid JSON: %s", j->err);
            return -1;
        }
        key[klen] = '\0';
        int f = 0;
        while (f < F_COUNT && (truncated || strlen(field_names[f]) != klen || memcmp(field_names[f], key, klen)))
            f++;
        if (f == F_COUNT) {
            snprintf(err, errlen,
                     "%sunknown field \"%.40s\" (known: topic, body, delay, runAt, priority, ttr, tries, bizKey, "
                     "replace, backoff, traceparent, tracestate, group)",
                     where, key);
            return -1;
        }
        if (fields[f].p != NULL) {
            snprintf(err, errlen, "%sfield \"%s\" is given twice", where, field_names[f]);
            return -1;
        }
        size_t start, end;
        if (jscan_expect(j, ':') < 0 || jscan_value(j, &start, &end) < 0) {
            snprintf(err, errlen, "body is not valid JSON: %s", j->err);
            return -1;
        }
        fields[f].p = j->s + start;
        fields[f].len = end - start;
        int next = jscan_peek(j);
        if (next == ',') {
            j->pos++;
            continue;
        }
        if (next == '}') {
            j->pos++;
            return 0;
        }
        snprintf(err, errlen, "body is not valid JSON: expected ',' or '}' at byte %zu", j->pos);
        return -1;
    }
}

/* Keep a tracestate s[0..len) beside the job's traceparent, when trace.h lets it pass. 0 / -1
 * (out of memory). */
static int keep_tracestate(struct job_spec *job, const char *s, size_t len)
{
    size_t start, keep;
    if (!trace_state_valid(s, len, &start, &keep))
        return 0;
    job->tracestate = malloc(keep + 1);
    if (job->tracestate == NULL)
        return -1;
    memcpy(job->tracestate, s + start, keep);
    job->tracestate[keep] = '\0';
    job->tracestate_len = keep;
    return 0;
}

/* The job's own "traceparent" (and "tracestate"): kept when valid, ignored otherwise — whatever
 * its JSON type: trace context is never a reason to refuse a job (trace.h). 0 / -1 (memory). */
static int build_trace(struct span tp, struct span ts, struct job_spec *job)
{
    char text[256]; /* a later version may carry more than 55 characters */
    size_t len;
    if (span_string(tp, text, sizeof text - 1, &len) < 0 || !trace_parent_valid(text, len))
        return 0;
    memcpy(job->traceparent, text, TRACE_PARENT_LEN);
    job->traceparent[TRACE_PARENT_LEN] = '\0';
    char state[TRACE_STATE_MAX + 64];
    if (ts.p && span_string(ts, state, sizeof state - 1, &len) == 0)
        return keep_tracestate(job, state, len);
    return 0;
}

int job_trace_from_headers(struct job_spec *jobs, int count, const char *traceparent, const char *tracestate)
{
    if (traceparent == NULL || !trace_parent_valid(traceparent, strlen(traceparent)))
        return 0;
    size_t start = 0, keep = 0;
    if (tracestate && !trace_state_valid(tracestate, strlen(tracestate), &start, &keep))
        keep = 0;
    for (int i = 0; i < count; i++) {
        struct job_spec *j = &jobs[i];
        if (j->traceparent[0])
            continue; /* its own wins */
        memcpy(j->traceparent, traceparent, TRACE_PARENT_LEN);
        j->traceparent[TRACE_PARENT_LEN] = '\0';
        if (keep > 0) {
            if ((j->tracestate = malloc(keep + 1)) == NULL)
                return -1;
            memcpy(j->tracestate, tracestate + start, keep);
            j->tracestate[keep] = '\0';
            j->tracestate_len = keep;
        }
    }
    return 0;
}

static enum push_parse_result build_job(struct span *f, const struct job_limits *lim, int64_t now, struct job_spec *job,
                                        const char *where, char *err, size_t errlen)
{
    if (f[F_TOPIC].p == NULL || span_string(f[F_TOPIC], job->topic, TOPIC_MAX, &job->topic_len) < 0 ||
        !job_topic_valid(job->topic, job->topic_len)) {
        snprintf(err, errlen, "%stopic is required: 1-%d characters of A-Z a-z 0-9 _ . : -", where, TOPIC_MAX);
        return PUSH_BAD;
    }
    job->topic[job->topic_len] = '\0';

    int64_t delay = 0, run_at = 0, v;
    if (f[F_DELAY].p && span_int(f[F_DELAY], "delay", 0, lim->max_delay, &delay, where, err, errlen) < 0)
        return PUSH_BAD;
    if (f[F_RUNAT].p && span_int(f[F_RUNAT], "runAt", 0, INT64_C(253402300799999), &run_at, where, err, errlen) < 0)
        return PUSH_BAD;
    if (f[F_DELAY].p && f[F_RUNAT].p) {
        snprintf(err, errlen, "%sgive delay or runAt, not both", where);
        return PUSH_BAD;
    }
    if (f[F_RUNAT].p) {
        if (run_at - now > lim->max_delay) {
            snprintf(err, errlen, "%srunAt is more than max_delay (%lld ms) from now", where,
                     (long long)lim->max_delay);
            return PUSH_BAD;
        }
        job->run_at = run_at < now ? now : run_at;
    } else {
        job->run_at = now + delay;
    }

    job->priority = 5;
    if (f[F_PRIORITY].p) {
        if (span_int(f[F_PRIORITY], "priority", 0, 9, &v, where, err, errlen) < 0)
            return PUSH_BAD;
        job->priority = (int)v;
    }
    job->ttr = lim->default_ttr;
    if (f[F_TTR].p && span_int(f[F_TTR], "ttr", 0, lim->max_ttr, &job->ttr, where, err, errlen) < 0)
        return PUSH_BAD;
    job->tries = lim->default_tries;
    if (f[F_TRIES].p) {
        if (span_int(f[F_TRIES], "tries", 1, lim->max_tries, &v, where, err, errlen) < 0)
            return PUSH_BAD;
        job->tries = (int)v;
    }
    if (f[F_BACKOFF].p) {
        if (span_int(f[F_BACKOFF], "backoff", 0, JOB_BACKOFF_MAX, &job->backoff, where, err, errlen) < 0)
            return PUSH_BAD;
        job->has_backoff = 1;
    }

    if (f[F_BIZKEY].p && !span_is(f[F_BIZKEY], "null")) {
        char biz[BIZKEY_MAX * 4 + 1];
        size_t blen;
        if (span_string(f[F_BIZKEY], biz, sizeof biz - 1, &blen) < 0 || !job_bizkey_valid(biz, blen)) {
            snprintf(err, errlen, "%sbizKey must be a string of 1-%d printable characters", where, BIZKEY_MAX);
            return PUSH_BAD;
        }
        job->biz_len = blen;
        job->biz_key = malloc(blen + 1);
        if (job->biz_key == NULL)
            return PUSH_NOMEM;
        memcpy(job->biz_key, biz, blen);
        job->biz_key[blen] = '\0';
    }
    if (f[F_REPLACE].p) {
        if (!span_is(f[F_REPLACE], "true") && !span_is(f[F_REPLACE], "false")) {
            snprintf(err, errlen, "%sreplace must be true or false", where);
            return PUSH_BAD;
        }
        job->replace = span_is(f[F_REPLACE], "true");
        if (job->replace && job->biz_key == NULL) {
            snprintf(err, errlen, "%sreplace needs a bizKey to know which job to replace", where);
            return PUSH_BAD;
        }
    }

    if (f[F_GROUP].p && !span_is(f[F_GROUP], "null")) {
        char grp[GROUP_MAX + 1];
        size_t glen;
        if (span_string(f[F_GROUP], grp, sizeof grp - 1, &glen) < 0 || !job_group_valid(grp, glen)) {
            snprintf(err, errlen, "%sgroup must be a string of 1-%d bytes of printable characters", where, GROUP_MAX);
            return PUSH_BAD;
        }
        job->group = malloc(glen + 1);
        if (job->group == NULL)
            return PUSH_NOMEM;
        memcpy(job->group, grp, glen);
        job->group[glen] = '\0';
        job->group_len = glen;
    }

    if (f[F_TRACEPARENT].p && build_trace(f[F_TRACEPARENT], f[F_TRACESTATE], job) < 0)
        return PUSH_NOMEM;

    /* The body as sent, minus whitespace between tokens (it is valid JSON: jscan checked).
     * Absent means null. */
    struct span body = f[F_BODY].p ? f[F_BODY] : (struct span){"null", 4};
    job->body = malloc(body.len + 1);
    if (job->body == NULL)
        return PUSH_NOMEM;
    size_t n = 0;
    int in_string = 0;
    for (size_t i = 0; i < body.len; i++) {
        char c = body.p[i];
        if (in_string) {
            if (c == '\\') {
                job->body[n++] = c;
                c = body.p[++i]; /* the escaped character is never the closing quote */
            } else if (c == '"') {
                in_string = 0;
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        }
        job->body[n++] = c;
    }
    job->body[n] = '\0';
    job->body_len = n;
    return PUSH_OK;
}

enum push_parse_result job_parse_push(const char *text, size_t len, const struct job_limits *limits, int64_t now_ms,
                                      struct job_spec **jobs_out, int *count_out, int *is_array, char *err,
                                      size_t errlen)
{
    *jobs_out = NULL;
    *count_out = 0;
    *is_array = 0;
    struct jscan j;
    jscan_init(&j, text, len);
    int first = jscan_peek(&j);
    if (first == -1) {
        snprintf(err, errlen, "body is empty: send a job object or an array of them");
        return PUSH_BAD;
    }
    if (first != '{' && first != '[') {
        /* say whether it is JSON at all */
        size_t s, e;
        if (jscan_value(&j, &s, &e) < 0 || jscan_end(&j) < 0)
            snprintf(err, errlen, "body is not valid JSON: %s", j.err);
        else
            snprintf(err, errlen, "body must be a job object or an array of job objects");
        return PUSH_BAD;
    }

    /* Validate the whole document first, so a syntax error anywhere wins over field errors,
     * and count the jobs of an array. */
    size_t n = 1;
    {
        struct jscan all;
        jscan_init(&all, text, len);
        size_t s, e;
        if (jscan_value(&all, &s, &e) < 0 || jscan_end(&all) < 0) {
            snprintf(err, errlen, "body is not valid JSON: %s", all.err);
            return PUSH_BAD;
        }
    }
    if (first == '[') {
        *is_array = 1;
        n = 0;
        struct jscan count;
        jscan_init(&count, text, len);
        if (jscan_expect(&count, '[') < 0)
            return PUSH_BAD;
        if (jscan_peek(&count) != ']')
            for (;;) {
                size_t s, e;
                if (jscan_value(&count, &s, &e) < 0)
                    return PUSH_BAD;
                n++;
                if (jscan_peek(&count) != ',')
                    break;
                count.pos++;
            }
        if (n == 0) {
            snprintf(err, errlen, "the job array is empty");
            return PUSH_BAD;
        }
        if (n > (size_t)limits->max_batch) {
            snprintf(err, errlen, "at most %d jobs per push (got %zu)", limits->max_batch, n);
            return PUSH_TOO_MANY;
        }
        j.pos++; /* past '[' */
    }

    struct job_spec *jobs = calloc(n, sizeof *jobs);
    if (jobs == NULL) {
        snprintf(err, errlen, "out of memory");
        return PUSH_NOMEM;
    }
    enum push_parse_result rc = PUSH_OK;
    for (size_t i = 0; i < n && rc == PUSH_OK; i++) {
        char where[32] = "";
        if (*is_array)
            snprintf(where, sizeof where, "jobs[%zu]: ", i);
        if (i > 0 && jscan_expect(&j, ',') < 0) {
            rc = PUSH_BAD;
            break;
        }
        struct span fields[F_COUNT];
        memset(fields, 0, sizeof fields);
        if (scan_job(&j, fields, where, err, errlen) < 0)
            rc = PUSH_BAD;
        else
            rc = build_job(fields, limits, now_ms, &jobs[i], where, err, errlen);
    }
    if (rc != PUSH_OK) {
        job_specs_free(jobs, (int)n);
        if (rc == PUSH_NOMEM)
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    *jobs_out = jobs;
    *count_out = (int)n;
    return PUSH_OK;
}

int job_initial_state(const struct job_spec *j, int64_t now)
{
    return j->run_at > now ? JS_DELAYED : JS_READY;
}
