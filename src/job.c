/* job.c — see job.h. */
#include "job.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {"", "delayed", "ready", "reserved", "finished",
                                          "deleted", "dead", "aborted"};

const char *job_state_name(int state)
{
    return state >= 0 && state <= JS_ABORTED ? state_names[state] : "unknown";
}

int job_state_parse(const char *name)
{
    for (int i = 1; i <= JS_ABORTED; i++)
        if (strcmp(name, state_names[i]) == 0)
            return i;
    return -1;
}

int topic_valid(const char *s, size_t len)
{
    if (len == 0 || len > TOPIC_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

int topic_list_parse(char *list, size_t len, const char **topics, size_t *lens, char *err, size_t errlen)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && list[i] != ',')
            continue;
        size_t tlen = i - start;
        if (!topic_valid(list + start, tlen)) {
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

int bizkey_valid(const char *s, size_t len)
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
        if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029)
            return 0;
        i += (size_t)extra + 1;
        chars++;
    }
    return chars >= 1 && chars <= BIZKEY_MAX;
}

void job_specs_free(struct job_spec *jobs, int count)
{
    if (jobs == NULL)
        return;
    for (int i = 0; i < count; i++) {
        free(jobs[i].body);
        free(jobs[i].biz_key);
    }
    free(jobs);
}

/* Integer member `name` of `obj` in [min, max]; absent -> def. */
static int get_int(json_t *obj, const char *name, int64_t min, int64_t max, int64_t def, int64_t *out, int *present,
                   const char *where, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, name);
    if (present)
        *present = v != NULL;
    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        snprintf(err, errlen, "%s%s must be an integer from %lld to %lld", where, name, (long long)min,
                 (long long)max);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

static const char *const known_fields[] = {"topic", "body", "delay", "runAt", "priority",
                                           "ttr",   "tries", "bizKey", "replace", NULL};

static int parse_one(json_t *obj, const struct job_limits *lim, int64_t now, struct job_spec *job, const char *where,
                     char *err, size_t errlen)
{
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "%sa job must be a JSON object", where);
        return PUSH_BAD;
    }
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        int known = 0;
        for (const char *const *f = known_fields; *f; f++)
            if (strcmp(*f, key) == 0)
                known = 1;
        if (!known) {
            snprintf(err, errlen, "%sunknown field \"%.64s\" (known: topic, body, delay, runAt, priority, ttr, tries, "
                                  "bizKey, replace)",
                     where, key);
            return PUSH_BAD;
        }
    }

    json_t *topic = json_object_get(obj, "topic");
    if (!json_is_string(topic) || !topic_valid(json_string_value(topic), json_string_length(topic))) {
        snprintf(err, errlen, "%stopic is required: 1-%d characters of A-Z a-z 0-9 _ . : -", where, TOPIC_MAX);
        return PUSH_BAD;
    }
    job->topic_len = json_string_length(topic);
    memcpy(job->topic, json_string_value(topic), job->topic_len + 1);

    int64_t delay, run_at, v;
    int has_delay, has_run_at;
    if (get_int(obj, "delay", 0, lim->max_delay, 0, &delay, &has_delay, where, err, errlen) < 0 ||
        get_int(obj, "runAt", 0, INT64_C(253402300799999), 0, &run_at, &has_run_at, where, err, errlen) < 0)
        return PUSH_BAD;
    if (has_delay && has_run_at) {
        snprintf(err, errlen, "%sgive delay or runAt, not both", where);
        return PUSH_BAD;
    }
    if (has_run_at) {
        if (run_at - now > lim->max_delay) {
            snprintf(err, errlen, "%srunAt is more than max_delay (%lld ms) from now", where, (long long)lim->max_delay);
            return PUSH_BAD;
        }
        job->run_at = run_at < now ? now : run_at;
    } else {
        job->run_at = now + delay;
    }

    if (get_int(obj, "priority", 0, 9, 5, &v, NULL, where, err, errlen) < 0)
        return PUSH_BAD;
    job->priority = (int)v;
    if (get_int(obj, "ttr", 0, lim->max_ttr, lim->default_ttr, &job->ttr, NULL, where, err, errlen) < 0)
        return PUSH_BAD;
    if (get_int(obj, "tries", 1, lim->max_tries, lim->default_tries, &v, NULL, where, err, errlen) < 0)
        return PUSH_BAD;
    job->tries = (int)v;

    json_t *biz = json_object_get(obj, "bizKey");
    if (biz != NULL && !json_is_null(biz)) {
        if (!json_is_string(biz) || !bizkey_valid(json_string_value(biz), json_string_length(biz))) {
            snprintf(err, errlen, "%sbizKey must be a string of 1-%d printable characters", where, BIZKEY_MAX);
            return PUSH_BAD;
        }
        job->biz_len = json_string_length(biz);
        job->biz_key = malloc(job->biz_len + 1);
        if (job->biz_key == NULL)
            return PUSH_NOMEM;
        memcpy(job->biz_key, json_string_value(biz), job->biz_len + 1);
    }
    json_t *replace = json_object_get(obj, "replace");
    if (replace != NULL) {
        if (!json_is_boolean(replace)) {
            snprintf(err, errlen, "%sreplace must be true or false", where);
            return PUSH_BAD;
        }
        job->replace = json_is_true(replace);
        if (job->replace && job->biz_key == NULL) {
            snprintf(err, errlen, "%sreplace needs a bizKey to know which job to replace", where);
            return PUSH_BAD;
        }
    }

    json_t *body = json_object_get(obj, "body");
    if (body == NULL)
        body = json_null();
    job->body = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    if (job->body == NULL)
        return PUSH_NOMEM;
    job->body_len = strlen(job->body);
    return PUSH_OK;
}

enum push_parse_result job_parse_push(const char *body, size_t len, const struct job_limits *limits,
                                      int64_t now_ms, struct job_spec **jobs_out, int *count_out, int *is_array,
                                      char *err, size_t errlen)
{
    *jobs_out = NULL;
    *count_out = 0;
    *is_array = 0;
    if (len == 0) {
        snprintf(err, errlen, "body is empty: send a job object or an array of them");
        return PUSH_BAD;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        return PUSH_BAD;
    }

    enum push_parse_result rc = PUSH_OK;
    size_t n = 1;
    if (json_is_array(root)) {
        *is_array = 1;
        n = json_array_size(root);
        if (n == 0) {
            snprintf(err, errlen, "the job array is empty");
            rc = PUSH_BAD;
        } else if (n > (size_t)limits->max_batch) {
            snprintf(err, errlen, "at most %d jobs per push (got %zu)", limits->max_batch, n);
            rc = PUSH_TOO_MANY;
        }
    } else if (!json_is_object(root)) {
        snprintf(err, errlen, "body must be a job object or an array of job objects");
        rc = PUSH_BAD;
    }

    struct job_spec *jobs = NULL;
    if (rc == PUSH_OK) {
        jobs = calloc(n, sizeof *jobs);
        if (jobs == NULL)
            rc = PUSH_NOMEM;
    }
    size_t done = 0;
    for (; rc == PUSH_OK && done < n; done++) {
        char where[32] = "";
        if (*is_array)
            snprintf(where, sizeof where, "jobs[%zu]: ", done);
        json_t *item = *is_array ? json_array_get(root, done) : root;
        rc = parse_one(item, limits, now_ms, &jobs[done], where, err, errlen);
    }
    json_decref(root);
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
