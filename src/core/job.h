/* job.h — the job model: states, and validation of what producers push.
 *
 * Validation is all-or-nothing for an array: the first bad item fails the whole request
 * with a message naming its index and field. Pure functions (no I/O, no jansson: a push is scanned by
 * base/jscan.h, its body kept byte for byte), unit-tested and fuzzed directly. */
#ifndef HG_JOB_H
#define HG_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "core/trace.h"

#define TOPIC_MAX       128
#define BIZKEY_MAX      128 /* characters (code points), not bytes */
#define GROUP_MAX       128 /* bytes (contract "Flow control by key") */
#define TOPICS_PER_GET  32
#define JOB_BACKOFF_MAX (365LL * 24 * 3600 * 1000) /* ms; as a topic's (topicconf.h) */

/* Numbers match the Lua scripts (src/redis/lua/lib.lua); ABORTED exists only in MySQL. FAR too: a
 * delayed job due beyond [queue] horizon, held by MySQL alone until the pager (pager.h) puts
 * it in Redis; the API shows it as "delayed" (with "tier":"mysql"). */
enum job_state {
    JS_NONE = 0,
    JS_DELAYED = 1,
    JS_READY = 2,
    JS_RESERVED = 3,
    JS_FINISHED = 4,
    JS_DELETED = 5,
    JS_DEAD = 6,
    JS_ABORTED = 7,
    JS_FAR = 8,
};

const char *job_state_name(int state); /* "" for JS_NONE */
int job_state_parse(const char *name); /* -1 when unknown */

/* A state a job ends in (finished, deleted, aborted): it is then in no tier, and Redis no
 * longer holds it. Dead is not an end: a dead job stays, to be requeued. */
static inline int job_state_ended(int state)
{
    return state == JS_FINISHED || state == JS_DELETED || state == JS_ABORTED;
}

struct job_limits {
    int64_t max_delay;
    int64_t default_ttr, max_ttr;
    int default_tries, max_tries;
    int max_batch;
};

/* One validated job from POST /push. */
struct job_spec {
    char topic[TOPIC_MAX + 1];
    size_t topic_len;
    char *body; /* compact JSON text, malloc'd */
    size_t body_len;
    int64_t run_at; /* unix ms, never before the time of the push */
    int priority;
    int64_t ttr;
    int tries;
    int has_backoff; /* the job's own backoff, else (0) the topic's */
    int64_t backoff; /* ms after a failed attempt (doubling, capped by the topic's maxBackoff) */
    char *biz_key;   /* NULL when absent; malloc'd */
    size_t biz_len;
    int replace;
    /* W3C Trace Context (trace.h): the job's own "traceparent" field, else the push's header;
     * "" = none. Inline, so a job without one costs no allocation. */
    char traceparent[TRACE_PARENT_LEN + 1];
    char *tracestate; /* with a traceparent only; NULL when absent; malloc'd */
    size_t tracestate_len;
    char *group; /* flow control by key: the job's group; NULL when absent; malloc'd */
    size_t group_len;
    /* filled by the caller */
    uint64_t id;
    int shard;
    int far; /* due beyond [queue] horizon: MySQL alone holds it (JS_FAR) */
};

enum push_parse_result { PUSH_OK = 0, PUSH_BAD = -1, PUSH_TOO_MANY = -2, PUSH_NOMEM = -3 };

/* Parse and validate a push body. On PUSH_OK, *jobs (malloc'd array, free with
 * job_specs_free) holds *count jobs and *is_array tells which form was sent. */
enum push_parse_result job_parse_push(const char *body, size_t len, const struct job_limits *limits, int64_t now_ms,
                                      struct job_spec **jobs, int *count, int *is_array, char *err, size_t errlen)
    __attribute__((warn_unused_result));

void job_specs_free(struct job_spec *jobs, int count);

/* The trace context of a push's headers (traceparent, tracestate: NULL when absent) for every
 * job of it that brought none of its own: a job's own "traceparent" wins, with its own
 * "tracestate" (or none). A traceparent that trace.h refuses is ignored, its tracestate with
 * it; a refused tracestate alone is dropped. 0, or -1 out of memory (a tracestate's copy). */
int job_trace_from_headers(struct job_spec *jobs, int count, const char *traceparent, const char *tracestate)
    __attribute__((warn_unused_result));

/* The state a new job starts in, pushed at `now` (unix ms): due by then = ready, else
 * delayed. push.lua places it by the same rule, from the same runAt and now. */
int job_initial_state(const struct job_spec *j, int64_t now);

/* 1..128 chars of [A-Za-z0-9_.:-]. */
int job_topic_valid(const char *s, size_t len);

/* The one order of topic names that every MySQL writer of per-topic rows (far_count) locks
 * them in, so that two transactions never wait on each other's topics (a deadlock): bytes,
 * then length. <0, 0, >0 like memcmp. */
int job_topic_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Split "a,b,c" into up to TOPICS_PER_GET validated topics (pointers into `list`, which is
 * modified: commas become NULs). Duplicates are an error. Returns the count, or -1. */
int job_topic_list_parse(char *list, size_t len, const char **topics, size_t *lens, char *err, size_t errlen);

/* 1..128 code points of valid UTF-8 with no control characters. */
int job_bizkey_valid(const char *s, size_t len);

/* A group (contract "Flow control by key"): 1-GROUP_MAX bytes of UTF-8, no control characters
 * (the scripts separate a group from what follows it with a NUL byte). */
int job_group_valid(const char *s, size_t len);

#endif
