/* store.h — the job store in Redis: one typed call per Lua script, and the few reads that
 * need no script.
 *
 * Builds each script's KEYS/ARGV (documented in src/redis/lua/<name>.lua), sends it on an
 * rlink, checks the reply's shape and hands the caller a C struct. Reads of one key that need
 * no atomic step go as plain commands through the same calls (a topic's ready counts and a
 * bizKey's holder, HMGET/HGET; the counters behind /stats, HMGET per topic and XLEN per shard,
 * fanned out with redis/fanout.h): the caller gets a C struct either way. Strings in results
 * point into the Redis reply and are valid only during the callback.
 *
 * Every call returns 0 when sent (the callback will run exactly once) or -1 when Redis is
 * not usable (the callback will not run): the caller answers 503 at once. A callback's
 * result pointer is NULL when the command failed after being sent.
 *
 * Calls that change a job take `who` — "<instance>\x1f<thread>\x1f<client host>", see
 * store_who() — which the script writes with the transition into the shard's journal
 * outbox stream (src/redis/lua/lib.lua). */
#ifndef HG_STORE_H
#define HG_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"

struct rlink;

struct store {
    struct rlink *rc;
    const char *prefix;
    int shards;
};

#define STORE_WHO_MAX 192

/* Format `who` for the outbox: instance, thread, client host. */
void store_who(char *out, size_t cap, const char *instance, const char *thread, const char *host);

/* "<thread> <prefix>:{<tag>}:<what>": who made a transition, as the transition table records it
 * (the Redis key acted on, with the shard's tag: shardtag.h; what = jobs, ready, delay...).
 * Truncated to cap. */
void store_actor(char *out, size_t cap, const char *thread, const char *prefix, int shard, const char *what);

/* ---- push ---- */
enum push_code { PUSHED_NEW, PUSHED_DUP, PUSHED_REPLACED, PUSHED_CONFLICT };
struct push_outcome {
    enum push_code code;
    uint64_t id; /* the new job, or the existing one for DUP/REPLACED/CONFLICT */
    int64_t run_at;
    uint32_t ver;
    int state;             /* state after the push (NEW, REPLACED) */
    int from_state;        /* REPLACED: the state it had */
    uint64_t far_replaced; /* NEW: a far job (MySQL only) that held the bizKey, replaced: to delete */
};
/* One job of a push.lua call; jobs of several requests may share a call. */
struct push_item {
    const struct job_spec *job;
    int64_t now;     /* the pusher's clock: due at or before it, the job starts ready */
    const char *who; /* store_who() of the request */
};
/* A run of one shard's jobs in a push.lua call. */
struct push_segment {
    int shard;
    int n;
};
typedef void (*store_push_fn)(const struct push_outcome *out, int n, void *arg);
/* One push.lua call for items[0..n): segs[0..nseg) say whose shard they are, in order (the
 * first segs[0].n items on segs[0].shard, and so on). More than one segment only where
 * store_push_spans_shards says a call may. The callback gets one outcome per item, in order,
 * or NULL when there is no answer. 0 when sent, -1 when not (the callback never runs). */
int store_push(struct store *s, const struct push_segment *segs, int nseg, const struct push_item *items, int n,
               store_push_fn fn, void *arg) __attribute__((warn_unused_result));
/* Whether one store_push call may carry the jobs of several shards: on a single Redis, where
 * one call for everything a journal commit released costs Redis a call's fixed part once
 * instead of once a shard; not under Cluster (a call stays in its slot). */
int store_push_spans_shards(const struct store *s);

/* ---- reserve ---- */
struct delivered {
    uint64_t id;
    const char *topic, *body, *biz;
    size_t topic_len, body_len, biz_len;
    int priority, tries, attempt, state;
    int64_t ttr, run_at, lease_until;
    uint32_t ver;
    struct trace_ref trace; /* W3C Trace Context; parent NULL: none */
    const char *group;      /* flow control by key; NULL: none */
    size_t group_len;
};
/* `wait_ms` > 0: a topic's rate held ready jobs back (n may be 0 or more); its next token comes
 * in that many ms (a caller that waits should try again then). */
typedef void (*store_reserve_fn)(const struct delivered *jobs, int n, int failed, int64_t wait_ms, void *arg);
/* lease_ms: how long each job is leased; 0 = its own ttr. */
int store_reserve(struct store *s, int shard, const char *const *topics, const size_t *lens, int ntopics, int count,
                  int64_t now, const char *who, int64_t lease_ms, store_reserve_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* ---- operations on one job id ---- */
enum id_status { ID_OK, ID_MISSING, ID_WRONG_STATE, ID_STALE, ID_BIZ_HELD };
struct id_outcome {
    enum id_status status;
    int lost;       /* MISSING, delete only: Redis lost its data too (the shard's marks are gone) */
    int state;      /* OK: state after; WRONG_STATE: the state it is in */
    int from_state; /* OK: state before (delete, reschedule, release) */
    int64_t run_at, lease_until;
    uint32_t ver, attempts;
};
typedef void (*store_id_fn)(const struct id_outcome *out, void *arg);
int store_finish(struct store *s, uint64_t id, int64_t now, int attempt, const char *who, store_id_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* store_finish for n jobs of one shard in one call (finishmany.lua): `fn` hears outs[0..n) in
 * order, or outs NULL when the call failed. */
typedef void (*store_ids_fn)(const struct id_outcome *outs, int n, void *arg);
int store_finish_many(struct store *s, int shard, const uint64_t *ids, const int *attempts, int n, int64_t now,
                      const char *who, store_ids_fn fn, void *arg) __attribute__((warn_unused_result));
/* delay -1: after the job's backoff (topic settings). */
int store_release(struct store *s, uint64_t id, int64_t now, int64_t delay, int attempt, const char *who,
                  store_id_fn fn, void *arg) __attribute__((warn_unused_result));
/* What a delivery route (deliver.h) made of a reserved job, written with `outcome` (no spaces,
 * e.g. "webhook:200", "amqp:nacked") as the transition's key in the job's history:
 *   DELIVERED    finished (finish.lua);
 *   FAILED       a failed attempt: due again after its backoff, or dead after its tries;
 *   UNDELIVERED  it never reached anyone (the broker was down): ready again, not counted. */
enum store_route_result { ROUTE_DELIVERED, ROUTE_FAILED, ROUTE_UNDELIVERED };
int store_route_outcome(struct store *s, uint64_t id, int64_t now, int attempt, const char *who,
                        enum store_route_result result, const char *outcome, store_id_fn fn, void *arg)
    __attribute__((warn_unused_result));
int store_touch(struct store *s, uint64_t id, int64_t now, int attempt, store_id_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* A far job's delete in Redis, after its row committed (fardelete.lua): OK when the pager had
 * put it in Redis (deleted there too), MISSING when not (a tombstone keeps the pager from doing
 * so now); its bizKey entry goes either way. topic, biz: NUL-terminated ("" = no bizKey). */
int store_fardelete(struct store *s, uint64_t id, int64_t now, const char *who, const char *topic, const char *biz,
                    store_id_fn fn, void *arg) __attribute__((warn_unused_result));
int store_delete(struct store *s, uint64_t id, int64_t now, const char *who, store_id_fn fn, void *arg)
    __attribute__((warn_unused_result));
int store_reschedule(struct store *s, uint64_t id, int64_t now, int64_t run_at, const char *who, store_id_fn fn,
                     void *arg) __attribute__((warn_unused_result));

/* What an id script answers in "ok" (exposed, with the decoders below, for tests). */
enum store_id_shape { SHAPE_FINISH, SHAPE_RELEASE, SHAPE_TOUCH, SHAPE_DELETE, SHAPE_RESCHEDULE, SHAPE_REQUEUE };

/* ---- inspect ---- */
struct job_view {
    int found;
    int state, priority, tries;
    uint32_t ver, attempts;
    int64_t ttr, run_at, lease_until;
    int64_t backoff; /* the job's own, -1 = its topic's */
    const char *topic, *biz, *body;
    size_t topic_len, biz_len, body_len;
    struct trace_ref trace;
    const char *group; /* NULL: none */
    size_t group_len;
};
typedef void (*store_inspect_fn)(const struct job_view *view, void *arg);
int store_inspect(struct store *s, uint64_t id, store_inspect_fn fn, void *arg) __attribute__((warn_unused_result));

/* ---- dead jobs of a topic ---- */
struct dead_job {
    uint64_t id;
    int64_t died_at, ttr, run_at;
    int attempts, priority, tries;
    const char *biz, *body;
    size_t biz_len, body_len;
    struct trace_ref trace;
    const char *group; /* NULL: none */
    size_t group_len;
};
typedef void (*store_dead_fn)(const struct dead_job *jobs, int n, int failed, void *arg);
int store_dead_list(struct store *s, const char *topic, size_t topic_len, int limit, store_dead_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* ---- a page of a topic's groups (groups.lua) ---- */
struct group_count {
    const char *group;
    size_t group_len;
    int64_t delayed, ready, reserved;
};
/* groups NULL: the call failed. next: the position of the next page, "" when none (valid
 * during the callback, as the groups). */
typedef void (*store_groups_fn)(const struct group_count *groups, int n, const char *next, void *arg);
int store_topic_groups(struct store *s, const char *topic, size_t topic_len, const char *cursor, int limit,
                       store_groups_fn fn, void *arg) __attribute__((warn_unused_result));

/* ---- a page of a topic's jobs in one state (topicjobs.lua) ---- */
struct listed_job {
    uint64_t id;
    int64_t score; /* due (delayed), lease deadline (reserved), died at (dead), ready order (ready) */
    int64_t ttr, run_at;
    int attempts, priority, tries;
    const char *biz, *body;
    size_t biz_len, body_len;
    struct trace_ref trace;
    const char *group; /* NULL: none */
    size_t group_len;
};
struct job_page {
    const struct listed_job *jobs;
    int n;
    long scanned; /* index entries looked at */
    int more;     /* the listing goes on after (next_score, next_id) */
    int64_t next_score;
    uint64_t next_id;
};
/* page NULL when the command failed. */
typedef void (*store_page_fn)(const struct job_page *page, void *arg);
/* Jobs of `topic` in `state` (JS_DELAYED, JS_READY, JS_RESERVED or JS_DEAD) after the entry
 * (after_score, after_id) — after_id 0: from the first — at most `limit` of them, looking at
 * no more than `scan` index entries. */
int store_topic_jobs(struct store *s, const char *topic, size_t topic_len, int state, int64_t after_score,
                     uint64_t after_id, int limit, int scan, store_page_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* ---- the mover's step on one shard ---- */
struct moved {
    uint64_t id;
    int from, to;
    uint32_t ver, attempts;
    int64_t run_at;
};
struct move_outcome {
    int64_t next_due; /* earliest remaining entry of the delay zset, -1 when empty */
    int more;         /* the batch limit was hit: call again at once */
    int n;
    const struct moved *moved;
};
typedef void (*store_move_fn)(const struct move_outcome *out, void *arg);
int store_move(struct store *s, int shard, int64_t now, int limit, const char *who, store_move_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* ---- per-topic counts over all shards (for /stats) ---- */
struct topic_counts {
    char topic[TOPIC_MAX + 1];
    int64_t delayed, ready, reserved, dead;
};
/* `outbox` = transitions waiting in the outbox streams for the journal. Topics sorted by name;
 * merged across shards in O(topics) with a hash map. */
typedef void (*store_counts_fn)(const struct topic_counts *topics, int n, long outbox, int failed, void *arg);
int store_counts(struct store *s, store_counts_fn fn, void *arg) __attribute__((warn_unused_result));

/* ---- dead jobs past their lifetime (deadexpire.lua): one bounded step of a pass ---- */
/* cursor: where to go on ("0": the shard's pass is done); NULL when the command failed. */
typedef void (*store_expire_fn)(const char *cursor, long long removed, void *arg);
int store_dead_expire(struct store *s, int shard, const char *cursor, int64_t cutoff, int limit, store_expire_fn fn,
                      void *arg) __attribute__((warn_unused_result));

/* ---- loss detection (mark.lua): this instance's mark in one shard ---- */
enum store_mark_verdict { MARK_FAILED = -1, MARK_OK = 0, MARK_BEHIND = 1, MARK_MISSING = 2 };
/* `restored`: when a restore last completed on the shard (unix ms, 0 = never); `fenced`: when
 * the shard was fenced after a rollback (0 = it is not; mark.lua). */
typedef void (*store_mark_fn)(enum store_mark_verdict v, int64_t restored, int64_t fenced, void *arg);
/* expected 0: this process has written no mark there yet (nothing to compare). */
int store_mark(struct store *s, int shard, const char *instance, int64_t expected, int64_t next, store_mark_fn fn,
               void *arg) __attribute__((warn_unused_result));

/* ---- ready counts of some topics of one shard (one HMGET on the shard's counters) ---- */
/* ready[i] = jobs ready on topics[i]; NULL when the command failed. */
typedef void (*store_ready_fn)(const int64_t *ready, int n, void *arg);
int store_ready_counts(struct store *s, int shard, const char *const *topics, const size_t *lens, int n,
                       store_ready_fn fn, void *arg) __attribute__((warn_unused_result));

/* ---- one topic: its counts and its settings ---- */
/* counts[0..3] = delayed, ready, reserved, dead (n = 4); NULL when the command failed. */
int store_topic_counts(struct store *s, const char *topic, size_t len, store_ready_fn fn, void *arg)
    __attribute__((warn_unused_result));
typedef void (*store_done_fn)(int ok, void *arg);
/* Write a topic's settings as the scripts read them (topicconf_script_value; topicset.lua keeps
 * the newest seq). */
int store_topicset(struct store *s, const char *topic, size_t len, const char *value, store_done_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* ---- the holder of a bizKey (the topic's index: lib.lua biz_holder) ---- */
/* status: 1 held (id = the holder, near or far), 0 not held, -1 the command failed or the
 * entry did not decode. */
typedef void (*store_holder_fn)(int status, uint64_t id, void *arg);
/* One HGET on the topic's shard. */
int store_biz_holder(struct store *s, const char *topic, size_t topic_len, const char *biz, size_t biz_len,
                     store_holder_fn fn, void *arg) __attribute__((warn_unused_result));

/* ---- running totals of some topics (lib.lua tally; GET /throughput) ---- */
struct topic_tally {
    int64_t pushed, delivered, first, late_ms; /* late_ms: summed over the first deliveries */
};
/* tallies[i] belongs to topics[i]; NULL when a command failed. */
typedef void (*store_tally_fn)(const struct topic_tally *tallies, int n, void *arg);
/* One HMGET per topic, on its shard. */
int store_tallies(struct store *s, const char *const *topics, const size_t *lens, int n, store_tally_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* ---- the outbox's length (XLEN of every shard's stream) ---- */
/* `failed`: some shard did not answer (total counts the others). */
typedef void (*store_outbox_fn)(long total, int failed, void *arg);
int store_outbox_len(struct store *s, store_outbox_fn fn, void *arg) __attribute__((warn_unused_result));

/* ---- reply decoding: pure functions of a reply, used by the calls above ---- */
struct redisReply;
/* An id script's reply (finish, release, touch, delete, reschedule, requeue). 0, or -1 when
 * the reply has the wrong shape (daemon and scripts out of step: the caller answers 503). */
int store_decode_id(const struct redisReply *r, enum store_id_shape shape, struct id_outcome *out);
/* inspect.lua's reply; view->found = 0 for an absent job. Strings point into r. 0 / -1. */
int store_decode_view(const struct redisReply *r, struct job_view *view);

#endif
