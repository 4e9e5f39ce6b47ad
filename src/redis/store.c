/* store.c — see store.h. Reply parsing is defensive: a reply of the wrong shape (a script
 * and daemon of different versions, say) is logged and treated as a failed command. */
#include "redis/store.h"
#include "base/hmap.h"
#include "redis/fanout.h"
#include "redis/rcodec.h"
#include "core/ids.h"
#include "core/jobpack.h"
#include "base/log.h"
#include "core/metrics.h"
#include "redis/rlink.h"
#include "base/sbuf.h"
#include "core/shardtag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void store_who(char *out, size_t cap, const char *instance, const char *thread, const char *host)
{
    size_t n = sb_str_put(out, cap, 0, instance);
    n = sb_str_put(out, cap, n, "\x1f");
    n = sb_str_put(out, cap, n, thread);
    n = sb_str_put(out, cap, n, "\x1f");
    sb_str_put(out, cap, n, host);
}

void store_actor(char *out, size_t cap, const char *thread, const char *prefix, int shard, const char *what)
{
    char num[INT_TEXT_MAX];
    const char *tag = shardtag(shard, NULL);
    if (tag == NULL) /* a description, not a key: the shard's number will do */
        sb_int_to_text(shard, num);
    size_t n = sb_str_put(out, cap, 0, thread);
    n = sb_str_put(out, cap, n, " ");
    n = sb_str_put(out, cap, n, prefix);
    n = sb_str_put(out, cap, n, ":{");
    n = sb_str_put(out, cap, n, tag ? tag : num);
    n = sb_str_put(out, cap, n, "}:");
    sb_str_put(out, cap, n, what);
}

static void shape_error(const char *script)
{
    log_error("redis: unexpected reply shape from %s.lua (daemon and scripts out of step?)", script);
}

/* Records a script set aside (lib.lua set_aside): count and log them. */
static void count_bad_records(long long bad, const char *script)
{
    if (bad <= 0)
        return;
    metrics_inc(MC_BAD_RECORDS, (uint64_t)bad);
    log_error("%s.lua: %lld job record(s) missing or corrupt; corrupt ones were moved to <prefix>:{shard}:bad "
              "(docs/operations.md, \"Bad job records\")",
              script, bad);
}

/* move.lua ends its reply with one more element, an integer, when it set records aside:
 * count and log it. Returns the elements before it. */
static size_t bad_records_tail(const redisReply *r, const char *script, size_t expect)
{
    size_t n = r->elements;
    if (n != expect + 1 || r->element[n - 1]->type != REDIS_REPLY_INTEGER)
        return n;
    count_bad_records(r->element[n - 1]->integer, script);
    return n - 1;
}

struct call {
    void *fn;
    void *arg;
};

static int send(struct store *s, enum script_id script, struct rargv *b, rconn_reply_fn on_reply, void *fn, void *arg)
{
    struct call *c = malloc(sizeof *c);
    if (c == NULL)
        return -1;
    c->fn = fn;
    c->arg = arg;
    if (rlink_eval(s->rc, script, b->argc, b->argv, b->lens, on_reply, c) < 0) {
        free(c);
        return -1;
    }
    return 0;
}

/* ---- push ---- */

/* A push.lua call in flight: who to tell, and each job's id and due time, which the script's
 * short answer for a plain new job (its state alone) leaves out. */
struct push_call {
    store_push_fn fn;
    void *arg;
    int n;
    struct {
        uint64_t id;
        int64_t run_at;
    } jobs[];
};

/* Element i of a push.lua entry: '' or the idkey of a far job the push replaced. */
static int far_replaced(const redisReply *e, size_t i, uint64_t *id)
{
    *id = 0;
    if (e->element[i]->type == REDIS_REPLY_STRING && e->element[i]->len == 0)
        return 0;
    return rreply_id(e, i, id);
}

static void on_push(redisReply *r, void *arg)
{
    struct push_call *c = arg;
    store_push_fn fn = c->fn;
    void *user = c->arg;
    if (!rreply_is_array(r, 1) || r->elements != (size_t)c->n) {
        if (r)
            shape_error("push");
        free(c);
        fn(NULL, 0, user);
        return;
    }
    int n = (int)r->elements;
    struct push_outcome *out = calloc((size_t)n, sizeof *out);
    if (out == NULL) {
        free(c);
        fn(NULL, 0, user);
        return;
    }
    for (int i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_INTEGER) { /* a new job without a bizKey: its state */
            out[i].code = PUSHED_NEW;
            out[i].id = c->jobs[i].id;
            out[i].run_at = c->jobs[i].run_at;
            out[i].ver = 1;
            out[i].state = (int)e->integer;
            continue;
        }
        if (!rreply_is_array(e, 2) || rreply_id(e, 1, &out[i].id) < 0)
            goto bad;
        if (rreply_is(e, 0, "ok") && e->elements >= 6) {
            out[i].code = PUSHED_NEW;
            out[i].run_at = rreply_int(e, 2);
            out[i].ver = (uint32_t)rreply_int(e, 3);
            out[i].state = (int)rreply_int(e, 4);
            if (far_replaced(e, 5, &out[i].far_replaced) < 0)
                goto bad;
        } else if (rreply_is(e, 0, "far") && e->elements >= 4) {
            out[i].code = PUSHED_NEW;
            out[i].run_at = rreply_int(e, 2);
            out[i].ver = 1;
            out[i].state = JS_FAR;
            if (far_replaced(e, 3, &out[i].far_replaced) < 0)
                goto bad;
        } else if (rreply_is(e, 0, "dup") && e->elements >= 3) {
            out[i].code = PUSHED_DUP;
            out[i].run_at = rreply_int(e, 2);
        } else if (rreply_is(e, 0, "replaced") && e->elements >= 6) {
            out[i].code = PUSHED_REPLACED;
            out[i].run_at = rreply_int(e, 2);
            out[i].ver = (uint32_t)rreply_int(e, 3);
            out[i].from_state = (int)rreply_int(e, 4);
            out[i].state = (int)rreply_int(e, 5);
        } else if (rreply_is(e, 0, "conflict")) {
            out[i].code = PUSHED_CONFLICT;
        } else {
            goto bad;
        }
    }
    free(c);
    fn(out, n, user);
    free(out);
    return;
bad:
    shape_error("push");
    free(c);
    free(out);
    fn(NULL, 0, user);
}

/* A job's trace context at e->element[i] and [i + 1], where a script put it (lib.lua reply_trace):
 * absent or nil, none. Only a traceparent of its stored length counts. */
static void read_trace(const redisReply *e, size_t i, struct trace_ref *t)
{
    *t = (struct trace_ref){0};
    if (e->elements <= i)
        return;
    size_t len;
    const char *tp = rreply_str(e, i, &len);
    if (tp == NULL || len != TRACE_PARENT_LEN)
        return;
    t->parent = tp;
    t->parent_len = len;
    if (e->elements > i + 1)
        t->state = rreply_str(e, i + 1, &t->state_len);
    if (t->state == NULL)
        t->state_len = 0;
}

/* A job's group at e->element[i], after its trace context (lib.lua reply_trace): absent, none. */
static void read_group(const redisReply *e, size_t i, const char **group, size_t *len)
{
    *group = e->elements > i ? rreply_str(e, i, len) : NULL;
    if (*group == NULL)
        *len = 0;
}

int store_push_spans_shards(const struct store *s)
{
    return rlink_spans_shards(s->rc);
}

int store_push(struct store *s, const struct push_segment *segs, int nseg, const struct push_item *items, int n,
               store_push_fn fn, void *arg)
{
    /* Plain new jobs (no bizKey) go with their records built here (jobpack.h), in one buffer. */
    size_t record_bytes = 0;
    for (int i = 0; i < n; i++)
        if (items[i].job->biz_key == NULL)
            record_bytes += jobpack_max_size(items[i].job);
        else if (items[i].job->has_backoff || items[i].job->traceparent[0] || items[i].job->group)
            record_bytes += JOBPACK_TAIL_MAX; /* its tail, for push.lua to build its record with */
    struct push_call *c = malloc(sizeof *c + (size_t)n * sizeof c->jobs[0]);
    char *records = malloc(record_bytes ? record_bytes : 1);
    struct rargv b;
    int rc = -1;
    /* the first shard's key is kept in the builder, the others here */
    char(*keys)[sizeof b.key] = nseg > 1 ? malloc((size_t)(nseg - 1) * sizeof *keys) : NULL;
    if (c == NULL || records == NULL || (nseg > 1 && keys == NULL))
        goto out;
    if (rargv_init(&b, 4 + 2 * nseg + 12 * n, 1 + nseg + 6 * n, n) < 0)
        goto out_argv;
    c->fn = fn;
    c->arg = arg;
    c->n = n;
    rargv_key(&b, s->prefix, segs[0].shard, "jobs");
    for (int k = 1; k < nseg; k++) {
        int len = rkey(keys[k - 1], sizeof *keys, s->prefix, segs[k].shard, "jobs");
        rargv_str(&b, keys[k - 1], len < 0 ? 0 : (size_t)len);
    }
    char *rec = records;
    for (int i = 0, k = 0, seg_end = 0; i < n; i++) {
        if (i == seg_end) { /* the next shard's jobs start: their count first */
            rargv_int(&b, segs[k].n);
            seg_end += segs[k++].n;
        }
        const struct job_spec *j = items[i].job;
        c->jobs[i].id = j->id;
        c->jobs[i].run_at = j->run_at;
        size_t rec_len = 0, tail_len = 0;
        if (j->biz_key == NULL) {
            rec_len = jobpack_encode(rec, j, 1, job_initial_state(j, items[i].now), 0);
        } else if (j->has_backoff || j->traceparent[0] || j->group) {
            struct jobpack_extra x = jobpack_extra_of(j);
            tail_len = jobpack_tail(rec, &x);
        }
        rargv_id(&b, j->id);
        rargv_str(&b, j->topic, j->topic_len);
        if (rec_len) /* the record carries the body */
            rargv_str(&b, "", 0);
        else
            rargv_str(&b, j->body, j->body_len);
        rargv_int(&b, j->run_at);
        rargv_int(&b, j->priority);
        rargv_int(&b, j->ttr);
        rargv_int(&b, j->tries);
        rargv_str(&b, j->biz_key ? j->biz_key : "", j->biz_key ? j->biz_len : 0);
        rargv_int(&b, (j->replace ? 1 : 0) + (j->far ? 2 : 0) + (j->group ? 4 : 0)); /* push.lua's mode */
        rargv_int(&b, items[i].now);
        rargv_str(&b, items[i].who, strlen(items[i].who));
        /* the record (its optional values included), or for a bizKey job, whose record push.lua
         * builds, those values alone ('' when it has none) */
        rargv_str(&b, rec, rec_len ? rec_len : tail_len);
        rec += rec_len + tail_len;
    }
    /* rlink_eval copies the arguments into the command it queues */
    if (rlink_eval_keys(s->rc, SCRIPT_PUSH, nseg, b.argc, b.argv, b.lens, on_push, c) == 0) {
        c = NULL; /* on_push frees it */
        rc = 0;
    }
out_argv:
    rargv_free(&b);
out:
    free(keys);
    free(records);
    free(c);
    return rc;
}

/* ---- reserve ---- */

static void on_reserve(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_reserve_fn fn = (store_reserve_fn)c->fn;
    void *user = c->arg;
    free(c);
    /* {wait, bad, job...} */
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        if (r)
            shape_error("reserve");
        fn(NULL, 0, 1, 0, user);
        return;
    }
    int64_t wait = r->element[0]->integer;
    count_bad_records(r->element[1]->integer, "reserve");
    int n = (int)r->elements - 2;
    if (n == 0) {
        fn(NULL, 0, 0, wait, user);
        return;
    }
    struct delivered *out = calloc((size_t)n, sizeof *out);
    if (out == NULL) {
        /* The jobs are reserved in Redis: their leases will expire and redeliver them. */
        log_error("reserve: out of memory; %d reserved jobs will be redelivered after their lease", n);
        fn(NULL, 0, 1, 0, user);
        return;
    }
    for (int i = 0; i < n; i++) {
        const redisReply *e = r->element[i + 2];
        struct delivered *d = &out[i];
        if (!rreply_is_array(e, 12) || rreply_id(e, 0, &d->id) < 0 || !rreply_str(e, 1, &d->topic_len) ||
            !rreply_str(e, 2, &d->body_len)) {
            shape_error("reserve");
            free(out);
            fn(NULL, 0, 1, 0, user);
            return;
        }
        d->topic = rreply_str(e, 1, &d->topic_len);
        d->body = rreply_str(e, 2, &d->body_len);
        d->priority = (int)rreply_int(e, 3);
        d->ttr = rreply_int(e, 4);
        d->tries = (int)rreply_int(e, 5);
        d->attempt = (int)rreply_int(e, 6);
        d->run_at = rreply_int(e, 7);
        d->biz = rreply_str(e, 8, &d->biz_len);
        d->lease_until = rreply_int(e, 9);
        d->ver = (uint32_t)rreply_int(e, 10);
        d->state = (int)rreply_int(e, 11);
        read_trace(e, 12, &d->trace);
        read_group(e, 14, &d->group, &d->group_len);
    }
    fn(out, n, 0, wait, user);
    free(out);
}

int store_reserve(struct store *s, int shard, const char *const *topics, const size_t *lens, int ntopics, int count,
                  int64_t now, const char *who, int64_t lease_ms, store_reserve_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 8 + ntopics, 3, 0) == 0) {
        rargv_key(&b, s->prefix, shard, "jobs");
        rargv_int(&b, now);
        rargv_int(&b, count);
        rargv_str(&b, who, strlen(who));
        rargv_int(&b, lease_ms);
        for (int i = 0; i < ntopics; i++)
            rargv_str(&b, topics[i], lens[i]);
        rc = send(s, SCRIPT_RESERVE, &b, on_reserve, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- id operations ---- */

struct id_call {
    store_id_fn fn;
    void *arg;
    enum store_id_shape shape;
};

int store_decode_id(const redisReply *r, enum store_id_shape shape, struct id_outcome *o)
{
    memset(o, 0, sizeof *o);
    if (!rreply_is_array(r, 1))
        return -1;
    if (rreply_is(r, 0, "missing")) {
        o->status = ID_MISSING;
        return 0;
    }
    if (rreply_is(r, 0, "lost")) {
        o->status = ID_MISSING;
        o->lost = 1;
        return 0;
    }
    if (rreply_is(r, 0, "state") && r->elements >= 2) {
        o->status = ID_WRONG_STATE;
        o->state = (int)rreply_int(r, 1);
        return 0;
    }
    if (rreply_is(r, 0, "stale") && r->elements >= 2) {
        o->status = ID_STALE;
        o->attempts = (uint32_t)rreply_int(r, 1);
        return 0;
    }
    if (rreply_is(r, 0, "bizheld")) {
        o->status = ID_BIZ_HELD;
        return 0;
    }
    static const size_t need[] = {[SHAPE_FINISH] = 4, [SHAPE_RELEASE] = 5,    [SHAPE_TOUCH] = 2,
                                  [SHAPE_DELETE] = 5, [SHAPE_RESCHEDULE] = 6, [SHAPE_REQUEUE] = 2};
    if (!rreply_is(r, 0, "ok") || r->elements < need[shape])
        return -1;
    o->status = ID_OK;
    switch (shape) {
    case SHAPE_FINISH: /* ok, ver, attempts, runAt */
        o->state = JS_FINISHED;
        o->from_state = JS_RESERVED;
        o->ver = (uint32_t)rreply_int(r, 1);
        o->attempts = (uint32_t)rreply_int(r, 2);
        o->run_at = rreply_int(r, 3);
        break;
    case SHAPE_RELEASE: /* ok, state, runAt, ver, attempts */
        o->from_state = JS_RESERVED;
        o->state = (int)rreply_int(r, 1);
        o->run_at = rreply_int(r, 2);
        o->ver = (uint32_t)rreply_int(r, 3);
        o->attempts = (uint32_t)rreply_int(r, 4);
        break;
    case SHAPE_TOUCH: /* ok, leaseUntil */
        o->state = JS_RESERVED;
        o->lease_until = rreply_int(r, 1);
        break;
    case SHAPE_DELETE: /* ok, from, ver, attempts, runAt */
        o->state = JS_DELETED;
        o->from_state = (int)rreply_int(r, 1);
        o->ver = (uint32_t)rreply_int(r, 2);
        o->attempts = (uint32_t)rreply_int(r, 3);
        o->run_at = rreply_int(r, 4);
        break;
    case SHAPE_RESCHEDULE: /* ok, from, state, runAt, ver, attempts */
        o->from_state = (int)rreply_int(r, 1);
        o->state = (int)rreply_int(r, 2);
        o->run_at = rreply_int(r, 3);
        o->ver = (uint32_t)rreply_int(r, 4);
        o->attempts = (uint32_t)rreply_int(r, 5);
        break;
    case SHAPE_REQUEUE: /* ok, ver */
        o->from_state = JS_DEAD;
        o->state = JS_READY;
        o->ver = (uint32_t)rreply_int(r, 1);
        break;
    }
    return 0;
}

static void on_id_reply(redisReply *r, void *arg)
{
    struct id_call *c = arg;
    store_id_fn fn = c->fn;
    void *user = c->arg;
    enum store_id_shape shape = c->shape;
    free(c);
    struct id_outcome o;
    if (store_decode_id(r, shape, &o) < 0) {
        if (r)
            shape_error("id operation");
        fn(NULL, user);
        return;
    }
    fn(&o, user);
}

/* Each id script's ARGV: idkey, now, the numbers in `extra`, who, then the strings in `tail`. */
static int id_call_tail(struct store *s, enum script_id script, enum store_id_shape shape, uint64_t id, int64_t now,
                        const int64_t *extra, int nextra, const char *who, const char *const *tail, int ntail,
                        store_id_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    struct id_call *c = malloc(sizeof *c);
    if (c == NULL)
        return -1;
    c->fn = fn;
    c->arg = arg;
    c->shape = shape;
    if (rargv_init(&b, 7 + nextra + ntail, 1 + nextra, 1) == 0) {
        rargv_key(&b, s->prefix, id_shard(id, s->shards), "jobs");
        rargv_id(&b, id);
        rargv_int(&b, now);
        for (int i = 0; i < nextra; i++)
            rargv_int(&b, extra[i]);
        if (who)
            rargv_str(&b, who, strlen(who));
        for (int i = 0; i < ntail; i++)
            rargv_str(&b, tail[i], strlen(tail[i]));
        rc = rlink_eval(s->rc, script, b.argc, b.argv, b.lens, on_id_reply, c);
    }
    rargv_free(&b);
    if (rc < 0)
        free(c);
    return rc;
}

static int id_call(struct store *s, enum script_id script, enum store_id_shape shape, uint64_t id, int64_t now,
                   const int64_t *extra, int nextra, const char *who, store_id_fn fn, void *arg)
{
    return id_call_tail(s, script, shape, id, now, extra, nextra, who, NULL, 0, fn, arg);
}

int store_finish(struct store *s, uint64_t id, int64_t now, int attempt, const char *who, store_id_fn fn, void *arg)
{
    int64_t extra[] = {attempt};
    return id_call(s, SCRIPT_FINISH, SHAPE_FINISH, id, now, extra, 1, who, fn, arg);
}

struct ids_call {
    store_ids_fn fn;
    void *arg;
    int n;
};

static void on_finished_many(redisReply *r, void *arg)
{
    struct ids_call *c = arg;
    struct ids_call call = *c;
    free(c);
    struct id_outcome *outs = NULL;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)call.n &&
        (outs = malloc((size_t)call.n * sizeof *outs)) != NULL) {
        for (int i = 0; i < call.n; i++)
            if (store_decode_id(r->element[i], SHAPE_FINISH, &outs[i]) < 0) {
                free(outs);
                outs = NULL;
                break;
            }
    }
    if (outs == NULL && r != NULL)
        shape_error("finishmany");
    call.fn(outs, call.n, call.arg);
    free(outs);
}

int store_finish_many(struct store *s, int shard, const uint64_t *ids, const int *attempts, int n, int64_t now,
                      const char *who, store_ids_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    struct ids_call *c = malloc(sizeof *c);
    if (c == NULL)
        return -1;
    *c = (struct ids_call){fn, arg, n};
    if (rargv_init(&b, 6 + 2 * n, 1 + n, n) == 0) {
        rargv_key(&b, s->prefix, shard, "jobs");
        rargv_int(&b, now);
        rargv_str(&b, who, strlen(who));
        for (int i = 0; i < n; i++) {
            rargv_id(&b, ids[i]);
            rargv_int(&b, attempts[i]);
        }
        rc = rlink_eval(s->rc, SCRIPT_FINISHMANY, b.argc, b.argv, b.lens, on_finished_many, c);
    }
    rargv_free(&b);
    if (rc < 0)
        free(c);
    return rc;
}

int store_release(struct store *s, uint64_t id, int64_t now, int64_t delay, int attempt, const char *who,
                  store_id_fn fn, void *arg)
{
    int64_t extra[] = {delay, attempt};
    return id_call(s, SCRIPT_RELEASE, SHAPE_RELEASE, id, now, extra, 2, who, fn, arg);
}

int store_route_outcome(struct store *s, uint64_t id, int64_t now, int attempt, const char *who,
                        enum store_route_result result, const char *outcome, store_id_fn fn, void *arg)
{
    if (result == ROUTE_DELIVERED) {
        int64_t extra[] = {attempt};
        const char *tail[] = {outcome};
        return id_call_tail(s, SCRIPT_FINISH, SHAPE_FINISH, id, now, extra, 1, who, tail, 1, fn, arg);
    }
    /* failed: after its backoff (-1); undelivered: ready again at once, not counted */
    int64_t extra[] = {result == ROUTE_FAILED ? -1 : 0, attempt};
    const char *tail[] = {result == ROUTE_FAILED ? "1" : "2", outcome};
    return id_call_tail(s, SCRIPT_RELEASE, SHAPE_RELEASE, id, now, extra, 2, who, tail, 2, fn, arg);
}

int store_touch(struct store *s, uint64_t id, int64_t now, int attempt, store_id_fn fn, void *arg)
{
    int64_t extra[] = {attempt};
    return id_call(s, SCRIPT_TOUCH, SHAPE_TOUCH, id, now, extra, 1, NULL, fn, arg);
}

int store_delete(struct store *s, uint64_t id, int64_t now, const char *who, store_id_fn fn, void *arg)
{
    return id_call(s, SCRIPT_DELETE, SHAPE_DELETE, id, now, NULL, 0, who, fn, arg);
}

int store_fardelete(struct store *s, uint64_t id, int64_t now, const char *who, const char *topic, const char *biz,
                    store_id_fn fn, void *arg)
{
    const char *tail[] = {topic, biz};
    return id_call_tail(s, SCRIPT_FARDELETE, SHAPE_DELETE, id, now, NULL, 0, who, tail, 2, fn, arg);
}

int store_reschedule(struct store *s, uint64_t id, int64_t now, int64_t run_at, const char *who, store_id_fn fn,
                     void *arg)
{
    int64_t extra[] = {run_at};
    return id_call(s, SCRIPT_RESCHEDULE, SHAPE_RESCHEDULE, id, now, extra, 1, who, fn, arg);
}

/* ---- inspect ---- */

int store_decode_view(const redisReply *r, struct job_view *v)
{
    memset(v, 0, sizeof *v);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return -1;
    if (r->elements == 0)
        return 0; /* not found */
    if (r->elements < 11 || !rreply_str(r, 7, NULL) || !rreply_str(r, 9, NULL))
        return -1;
    v->found = 1;
    v->state = (int)rreply_int(r, 0);
    v->ver = (uint32_t)rreply_int(r, 1);
    v->attempts = (uint32_t)rreply_int(r, 2);
    v->priority = (int)rreply_int(r, 3);
    v->ttr = rreply_int(r, 4);
    v->tries = (int)rreply_int(r, 5);
    v->run_at = rreply_int(r, 6);
    v->topic = rreply_str(r, 7, &v->topic_len);
    v->biz = rreply_str(r, 8, &v->biz_len);
    v->body = rreply_str(r, 9, &v->body_len);
    v->lease_until = rreply_int(r, 10);
    v->backoff = r->elements > 11 ? rreply_int(r, 11) : -1;
    read_trace(r, 12, &v->trace);
    read_group(r, 14, &v->group, &v->group_len);
    return 0;
}

static void on_inspect(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_inspect_fn fn = (store_inspect_fn)c->fn;
    void *user = c->arg;
    free(c);
    struct job_view v;
    if (store_decode_view(r, &v) < 0) {
        if (r)
            shape_error("inspect");
        fn(NULL, user);
        return;
    }
    fn(&v, user);
}

int store_inspect(struct store *s, uint64_t id, store_inspect_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 5, 0, 1) == 0) {
        rargv_key(&b, s->prefix, id_shard(id, s->shards), "jobs");
        rargv_id(&b, id);
        rc = send(s, SCRIPT_INSPECT, &b, on_inspect, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- dead list ---- */

static void on_dead(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_dead_fn fn = (store_dead_fn)c->fn;
    void *user = c->arg;
    free(c);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            shape_error("deadlist");
        fn(NULL, 0, 1, user);
        return;
    }
    int n = (int)r->elements;
    struct dead_job *out = calloc((size_t)(n ? n : 1), sizeof *out);
    if (out == NULL) {
        fn(NULL, 0, 1, user);
        return;
    }
    for (int i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        struct dead_job *d = &out[i];
        if (!rreply_is_array(e, 9) || rreply_id(e, 0, &d->id) < 0 || !rreply_str(e, 8, NULL)) {
            shape_error("deadlist");
            free(out);
            fn(NULL, 0, 1, user);
            return;
        }
        d->died_at = rreply_int(e, 1);
        d->attempts = (int)rreply_int(e, 2);
        d->priority = (int)rreply_int(e, 3);
        d->ttr = rreply_int(e, 4);
        d->tries = (int)rreply_int(e, 5);
        d->run_at = rreply_int(e, 6);
        d->biz = rreply_str(e, 7, &d->biz_len);
        d->body = rreply_str(e, 8, &d->body_len);
        read_trace(e, 9, &d->trace);
        read_group(e, 11, &d->group, &d->group_len);
    }
    fn(out, n, 0, user);
    free(out);
}

int store_dead_list(struct store *s, const char *topic, size_t topic_len, int limit, store_dead_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 6, 1, 0) == 0) {
        rargv_key(&b, s->prefix, id_topic_shard(topic, topic_len, s->shards), "jobs");
        rargv_str(&b, topic, topic_len);
        rargv_int(&b, limit);
        rc = send(s, SCRIPT_DEADLIST, &b, on_dead, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- a page of a topic's jobs ---- */

static void on_topic_jobs(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_page_fn fn = (store_page_fn)c->fn;
    void *user = c->arg;
    free(c);
    const redisReply *list = rreply_is_array(r, 4) ? r->element[3] : NULL;
    if (list == NULL || list->type != REDIS_REPLY_ARRAY) {
        if (r)
            shape_error("topicjobs");
        fn(NULL, user);
        return;
    }
    struct job_page page = {.n = (int)list->elements, .scanned = (long)rreply_int(r, 2)};
    size_t next_len = 0;
    const char *next = rreply_str(r, 0, &next_len);
    if (next && next_len > 0) {
        page.more = 1;
        page.next_score = rreply_int(r, 0);
        if (rreply_id(r, 1, &page.next_id) < 0)
            page.more = 0; /* cannot happen with our keys; then the listing just ends */
    }
    struct listed_job *jobs = calloc((size_t)(page.n ? page.n : 1), sizeof *jobs);
    if (jobs == NULL) {
        fn(NULL, user);
        return;
    }
    for (int i = 0; i < page.n; i++) {
        const redisReply *e = list->element[i];
        struct listed_job *j = &jobs[i];
        if (!rreply_is_array(e, 9) || rreply_id(e, 0, &j->id) < 0 || !rreply_str(e, 8, NULL)) {
            shape_error("topicjobs");
            free(jobs);
            fn(NULL, user);
            return;
        }
        j->score = rreply_int(e, 1);
        j->attempts = (int)rreply_int(e, 2);
        j->priority = (int)rreply_int(e, 3);
        j->ttr = rreply_int(e, 4);
        j->tries = (int)rreply_int(e, 5);
        j->run_at = rreply_int(e, 6);
        j->biz = rreply_str(e, 7, &j->biz_len);
        j->body = rreply_str(e, 8, &j->body_len);
        read_trace(e, 9, &j->trace);
        read_group(e, 11, &j->group, &j->group_len);
    }
    page.jobs = jobs;
    fn(&page, user);
    free(jobs);
}

static void on_topic_groups(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_groups_fn fn = (store_groups_fn)c->fn;
    void *user = c->arg;
    free(c);
    /* {cursor, {group, delayed, ready, reserved}...} */
    if (!rreply_is_array(r, 1) || !rreply_str(r, 0, NULL)) {
        if (r)
            shape_error("groups");
        fn(NULL, 0, NULL, user);
        return;
    }
    int n = (int)r->elements - 1;
    struct group_count *out = calloc((size_t)(n ? n : 1), sizeof *out);
    if (out == NULL) {
        fn(NULL, 0, NULL, user);
        return;
    }
    for (int i = 0; i < n; i++) {
        const redisReply *e = r->element[i + 1];
        if (!rreply_is_array(e, 4) || !rreply_str(e, 0, NULL)) {
            shape_error("groups");
            free(out);
            fn(NULL, 0, NULL, user);
            return;
        }
        out[i].group = rreply_str(e, 0, &out[i].group_len);
        out[i].delayed = rreply_int(e, 1);
        out[i].ready = rreply_int(e, 2);
        out[i].reserved = rreply_int(e, 3);
    }
    fn(out, n, r->element[0]->str, user);
    free(out);
}

int store_topic_groups(struct store *s, const char *topic, size_t topic_len, const char *cursor, int limit,
                       store_groups_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 6, 1, 0) == 0) {
        rargv_key(&b, s->prefix, id_topic_shard(topic, topic_len, s->shards), "jobs");
        rargv_str(&b, topic, topic_len);
        rargv_str(&b, cursor, strlen(cursor));
        rargv_int(&b, limit);
        rc = send(s, SCRIPT_GROUPS, &b, on_topic_groups, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

int store_topic_jobs(struct store *s, const char *topic, size_t topic_len, int state, int64_t after_score,
                     uint64_t after_id, int limit, int scan, store_page_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 10, 4, 1) == 0) {
        rargv_key(&b, s->prefix, id_topic_shard(topic, topic_len, s->shards), "jobs");
        rargv_str(&b, topic, topic_len);
        rargv_int(&b, state);
        if (after_id) {
            rargv_int(&b, after_score);
            rargv_id(&b, after_id);
        } else {
            rargv_str(&b, "", 0);
            rargv_str(&b, "", 0);
        }
        rargv_int(&b, limit);
        rargv_int(&b, scan);
        rc = send(s, SCRIPT_TOPICJOBS, &b, on_topic_jobs, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- move ---- */

static void on_move(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_move_fn fn = (store_move_fn)c->fn;
    void *user = c->arg;
    free(c);
    if (!rreply_is_array(r, 3)) {
        if (r)
            shape_error("move");
        fn(NULL, user);
        return;
    }
    struct move_outcome o;
    o.next_due = rreply_int(r, 0);
    o.more = (int)rreply_int(r, 1);
    o.n = (int)rreply_int(r, 2);
    if (o.n < 0 || bad_records_tail(r, "move", 3 + (size_t)o.n * 6) != 3 + (size_t)o.n * 6) {
        shape_error("move");
        fn(NULL, user);
        return;
    }
    struct moved *m = calloc((size_t)(o.n ? o.n : 1), sizeof *m);
    if (m == NULL) {
        fn(NULL, user);
        return;
    }
    for (int i = 0; i < o.n; i++) {
        size_t at = 3 + (size_t)i * 6;
        if (rreply_id(r, at, &m[i].id) < 0) {
            shape_error("move");
            free(m);
            fn(NULL, user);
            return;
        }
        m[i].from = (int)rreply_int(r, at + 1);
        m[i].to = (int)rreply_int(r, at + 2);
        m[i].ver = (uint32_t)rreply_int(r, at + 3);
        m[i].attempts = (uint32_t)rreply_int(r, at + 4);
        m[i].run_at = rreply_int(r, at + 5);
    }
    o.moved = m;
    fn(&o, user);
    free(m);
}

int store_move(struct store *s, int shard, int64_t now, int limit, const char *who, store_move_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 7, 2, 0) == 0) {
        rargv_key(&b, s->prefix, shard, "jobs");
        rargv_int(&b, now);
        rargv_int(&b, limit);
        rargv_str(&b, who, strlen(who));
        rc = send(s, SCRIPT_MOVE, &b, on_move, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- dead expiry ---- */

static void on_dead_expire(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_expire_fn fn = (store_expire_fn)c->fn;
    size_t len = 0;
    const char *cursor = rreply_is_array(r, 2) ? rreply_str(r, 0, &len) : NULL;
    char buf[32];
    if (cursor == NULL || len >= sizeof buf) {
        if (r)
            shape_error("deadexpire");
        fn(NULL, 0, c->arg);
    } else {
        memcpy(buf, cursor, len);
        buf[len] = '\0';
        fn(buf, (long long)rreply_int(r, 1), c->arg);
    }
    free(c);
}

int store_dead_expire(struct store *s, int shard, const char *cursor, int64_t cutoff, int limit, store_expire_fn fn,
                      void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 7, 2, 0) == 0) {
        rargv_key(&b, s->prefix, shard, "jobs");
        rargv_str(&b, cursor, strlen(cursor));
        rargv_int(&b, cutoff);
        rargv_int(&b, limit);
        rc = send(s, SCRIPT_DEADEXPIRE, &b, on_dead_expire, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- loss detection ---- */

static void on_mark(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_mark_fn fn = (store_mark_fn)c->fn;
    enum store_mark_verdict v = MARK_FAILED;
    if (rreply_is_array(r, 3))
        v = rreply_is(r, 0, "ok")        ? MARK_OK
            : rreply_is(r, 0, "behind")  ? MARK_BEHIND
            : rreply_is(r, 0, "missing") ? MARK_MISSING
                                         : MARK_FAILED;
    else if (r)
        shape_error("mark");
    fn(v, v == MARK_FAILED ? 0 : rreply_int(r, 1), v == MARK_FAILED ? 0 : rreply_int(r, 2), c->arg);
    free(c);
}

int store_mark(struct store *s, int shard, const char *instance, int64_t expected, int64_t next, store_mark_fn fn,
               void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 7, 2, 0) == 0) {
        rargv_key(&b, s->prefix, shard, "jobs");
        rargv_str(&b, instance, strlen(instance));
        if (expected > 0)
            rargv_int(&b, expected);
        else
            rargv_str(&b, "", 0);
        rargv_int(&b, next);
        rc = send(s, SCRIPT_MARK, &b, on_mark, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- ready counts ---- */

struct ready_call {
    store_ready_fn fn;
    void *arg;
};

static void on_ready_counts(redisReply *r, void *arg)
{
    struct ready_call *c = arg;
    int64_t *ready = rreply_is_array(r, 1) ? malloc(r->elements * sizeof *ready) : NULL;
    for (size_t i = 0; ready && i < r->elements; i++)
        ready[i] = r->element[i]->type == REDIS_REPLY_NIL ? 0 : rreply_int(r, i);
    c->fn(ready, ready ? (int)r->elements : 0, c->arg);
    free(ready);
    free(c);
}

int store_ready_counts(struct store *s, int shard, const char *const *topics, const size_t *lens, int n,
                       store_ready_fn fn, void *arg)
{
    /* HMGET <prefix>:{shard}:count ready:<topic>... (fields as lib.lua's counters name them) */
    const char **argv = malloc((size_t)(n + 2) * sizeof *argv);
    size_t *alens = malloc((size_t)(n + 2) * sizeof *alens);
    char **fields = calloc((size_t)n, sizeof *fields);
    struct ready_call *c = malloc(sizeof *c);
    char key[160];
    int klen = rkey(key, sizeof key, s->prefix, shard, "count");
    int rc = -1;
    if (argv && alens && fields && c && klen > 0) {
        argv[0] = "HMGET";
        alens[0] = 5;
        argv[1] = key;
        alens[1] = (size_t)klen;
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            fields[i] = malloc(6 + lens[i]);
            ok = fields[i] != NULL;
            if (ok) {
                memcpy(fields[i], "ready:", 6);
                memcpy(fields[i] + 6, topics[i], lens[i]);
                argv[i + 2] = fields[i];
                alens[i + 2] = 6 + lens[i];
            }
        }
        c->fn = fn;
        c->arg = arg;
        rc = ok ? rlink_command(s->rc, on_ready_counts, c, n + 2, argv, alens) : -1;
    }
    for (int i = 0; fields && i < n; i++)
        free(fields[i]);
    free(fields);
    free(argv);
    free(alens);
    if (rc < 0)
        free(c);
    return rc;
}

/* ---- one topic's counts, and its settings ---- */

int store_topic_counts(struct store *s, const char *topic, size_t len, store_ready_fn fn, void *arg)
{
    /* HMGET <prefix>:{shard}:count delayed:<topic> ready:<topic> reserved:<topic> dead:<topic> */
    static const char *const states[4] = {"delayed:", "ready:", "reserved:", "dead:"};
    char key[160];
    int klen = rkey(key, sizeof key, s->prefix, id_topic_shard(topic, len, s->shards), "count");
    char fields[4][16 + TOPIC_MAX];
    const char *argv[6] = {"HMGET", key};
    size_t alens[6] = {5, (size_t)klen};
    if (klen <= 0 || len > TOPIC_MAX)
        return -1;
    for (int i = 0; i < 4; i++) {
        size_t sl = strlen(states[i]);
        memcpy(fields[i], states[i], sl);
        memcpy(fields[i] + sl, topic, len);
        argv[i + 2] = fields[i];
        alens[i + 2] = sl + len;
    }
    struct ready_call *c = malloc(sizeof *c);
    if (c == NULL)
        return -1;
    c->fn = fn;
    c->arg = arg;
    if (rlink_command(s->rc, on_ready_counts, c, 6, argv, alens) < 0) {
        free(c);
        return -1;
    }
    return 0;
}

/* ---- the holder of a bizKey ---- */

static void on_biz_holder(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_holder_fn fn = (store_holder_fn)c->fn;
    uint64_t id = 0;
    int status = -1;
    if (r != NULL && r->type == REDIS_REPLY_NIL) {
        status = 0;
    } else if (r != NULL && r->type == REDIS_REPLY_STRING) {
        /* "<id key>" for a job in Redis, "<id key>@<runAt>" for a far one */
        const char *at = memchr(r->str, '@', r->len);
        size_t klen = at ? (size_t)(at - r->str) : r->len;
        status = id_from_key(r->str, klen, &id) == 0 ? 1 : -1;
    }
    fn(status, id, c->arg);
    free(c);
}

int store_biz_holder(struct store *s, const char *topic, size_t topic_len, const char *biz, size_t biz_len,
                     store_holder_fn fn, void *arg)
{
    /* HGET <prefix>:{shard}:biz:<topic> <bizKey> */
    char key[200];
    if (topic_len > TOPIC_MAX)
        return -1;
    int klen = rkey(key, sizeof key - TOPIC_MAX - 1, s->prefix, id_topic_shard(topic, topic_len, s->shards), "biz:");
    if (klen <= 0)
        return -1;
    memcpy(key + klen, topic, topic_len);
    const char *argv[3] = {"HGET", key, biz};
    size_t alens[3] = {4, (size_t)klen + topic_len, biz_len};
    struct call *c = malloc(sizeof *c);
    if (c == NULL)
        return -1;
    c->fn = (void *)fn;
    c->arg = arg;
    if (rlink_command(s->rc, on_biz_holder, c, 3, argv, alens) < 0) {
        free(c);
        return -1;
    }
    return 0;
}

static void on_topicset(redisReply *r, void *arg)
{
    struct call *c = arg;
    ((store_done_fn)c->fn)(r != NULL && r->type == REDIS_REPLY_INTEGER, c->arg);
    free(c);
}

int store_topicset(struct store *s, const char *topic, size_t len, const char *value, store_done_fn fn, void *arg)
{
    struct rargv b;
    int rc = -1;
    if (rargv_init(&b, 7, 1, 0) == 0) {
        rargv_key(&b, s->prefix, id_topic_shard(topic, len, s->shards), "jobs");
        rargv_int(&b, 0);
        rargv_str(&b, topic, len);
        rargv_str(&b, value, strlen(value));
        rc = send(s, SCRIPT_TOPICSET, &b, on_topicset, (void *)fn, arg);
    }
    rargv_free(&b);
    return rc;
}

/* ---- tallies ---- */

struct tally_call {
    store_tally_fn fn;
    void *arg;
    int n;
    struct topic_tally *out;
};

static void on_tallies(int failed, void *arg)
{
    struct tally_call *tc = arg;
    tc->fn(failed ? NULL : tc->out, tc->n, tc->arg);
    free(tc->out);
    free(tc);
}

static int on_tally(redisReply *r, int index, void *arg)
{
    struct tally_call *tc = arg;
    if (!rreply_is_array(r, 4))
        return -1;
    struct topic_tally *t = &tc->out[index];
    t->pushed = rreply_int(r, 0); /* a nil (never counted) reads as 0 */
    t->delivered = rreply_int(r, 1);
    t->first = t->delivered - rreply_int(r, 2); /* the script counts redeliveries */
    t->late_ms = rreply_int(r, 3);
    return 0;
}

int store_tallies(struct store *s, const char *const *topics, const size_t *lens, int n, store_tally_fn fn, void *arg)
{
    static const char *const what[4] = {"pushed:", "delivered:", "redelivered:", "late:"};
    struct tally_call *tc = calloc(1, sizeof *tc);
    struct fanout *fan = NULL;
    if (tc == NULL || (tc->out = calloc((size_t)(n ? n : 1), sizeof *tc->out)) == NULL ||
        (fan = fanout_new(s->rc, n, on_tally, on_tallies, tc)) == NULL) {
        if (tc)
            free(tc->out);
        free(tc);
        return -1;
    }
    tc->fn = fn;
    tc->arg = arg;
    tc->n = n;
    for (int i = 0; i < n; i++) {
        char key[160], fields[4][16 + TOPIC_MAX];
        const char *argv[6] = {"HMGET", key};
        size_t alens[6] = {
            5, (size_t)rkey(key, sizeof key, s->prefix, id_topic_shard(topics[i], lens[i], s->shards), "tally")};
        for (int f = 0; f < 4; f++) {
            size_t wlen = strlen(what[f]);
            memcpy(fields[f], what[f], wlen);
            memcpy(fields[f] + wlen, topics[i], lens[i]);
            argv[2 + f] = fields[f];
            alens[2 + f] = wlen + lens[i];
        }
        if (fanout_send(fan, i, 6, argv, alens) < 0)
            break;
    }
    if (fanout_end(fan) < 0) { /* nothing was sent */
        free(tc->out);
        free(tc);
        return -1;
    }
    return 0;
}

/* ---- outbox length ---- */

struct outbox_call {
    store_outbox_fn fn;
    void *arg;
    long total;
};

static void on_outbox_lens(int failed, void *arg)
{
    struct outbox_call *oc = arg;
    oc->fn(oc->total, failed, oc->arg);
    free(oc);
}

static int on_outbox_len(redisReply *r, int shard, void *arg)
{
    struct outbox_call *oc = arg;
    if (r->type != REDIS_REPLY_INTEGER)
        return -1;
    oc->total += r->integer;
    return 0;
}

int store_outbox_len(struct store *s, store_outbox_fn fn, void *arg)
{
    struct outbox_call *oc = calloc(1, sizeof *oc);
    struct fanout *fan = oc ? fanout_new(s->rc, s->shards, on_outbox_len, on_outbox_lens, oc) : NULL;
    if (fan == NULL) {
        free(oc);
        return -1;
    }
    oc->fn = fn;
    oc->arg = arg;
    for (int shard = 0; shard < s->shards; shard++) {
        char key[160];
        int n = rkey(key, sizeof key, s->prefix, shard, "log");
        const char *argv[] = {"XLEN", key};
        size_t lens[] = {4, (size_t)n};
        if (fanout_send(fan, shard, 2, argv, lens) < 0)
            break;
    }
    if (fanout_end(fan) < 0) { /* nothing was sent */
        free(oc);
        return -1;
    }
    return 0;
}

/* ---- counts ---- */

struct counts_call {
    store_counts_fn fn;
    void *arg;
    struct fanout *fan;
    long outbox;
    struct topic_counts *topics;
    int n, cap;
    struct hmap index; /* topic -> 1 + its index in topics */
};

static void add_count(struct counts_call *cc, const char *field, size_t len, int64_t value)
{
    const char *colon = memchr(field, ':', len);
    if (colon == NULL)
        return;
    size_t slen = (size_t)(colon - field);
    const char *topic = colon + 1;
    size_t tlen = len - slen - 1;
    if (tlen == 0 || tlen > TOPIC_MAX)
        return;
    uintptr_t at = (uintptr_t)hmap_get(&cc->index, topic, tlen);
    struct topic_counts *t;
    if (at) {
        t = &cc->topics[at - 1];
    } else {
        if (cc->n == cc->cap) {
            int cap = cc->cap ? cc->cap * 2 : 16;
            struct topic_counts *grown = realloc(cc->topics, (size_t)cap * sizeof *grown);
            if (grown == NULL)
                return;
            cc->topics = grown;
            cc->cap = cap;
        }
        if (hmap_put(&cc->index, topic, tlen, (void *)(uintptr_t)(cc->n + 1)) < 0)
            return;
        t = &cc->topics[cc->n++];
        memset(t, 0, sizeof *t);
        memcpy(t->topic, topic, tlen);
    }
    if (slen == 7 && memcmp(field, "delayed", 7) == 0)
        t->delayed += value;
    else if (slen == 5 && memcmp(field, "ready", 5) == 0)
        t->ready += value;
    else if (slen == 8 && memcmp(field, "reserved", 8) == 0)
        t->reserved += value;
    else if (slen == 4 && memcmp(field, "dead", 4) == 0)
        t->dead += value;
}

static int cmp_topic(const void *a, const void *b)
{
    return strcmp(((const struct topic_counts *)a)->topic, ((const struct topic_counts *)b)->topic);
}

static void on_all_counts(int failed, void *arg)
{
    struct counts_call *cc = arg;
    if (!failed && cc->n > 1) /* qsort's base may not be NULL, even for nothing to sort */
        qsort(cc->topics, (size_t)cc->n, sizeof *cc->topics, cmp_topic);
    cc->fn(cc->topics, failed ? 0 : cc->n, cc->outbox, failed, cc->arg);
    hmap_free(&cc->index);
    free(cc->topics);
    free(cc);
}

static void on_counts_outbox(long total, int failed, void *arg)
{
    struct counts_call *cc = arg;
    cc->outbox = total; /* a shard that did not answer counts 0: /stats still answers */
    fanout_release(cc->fan);
}

static int on_counts(redisReply *r, int shard, void *arg)
{
    struct counts_call *cc = arg;
    if (r->type != REDIS_REPLY_ARRAY)
        return -1;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        size_t len;
        const char *field = rreply_str(r, i, &len);
        if (field)
            add_count(cc, field, len, rreply_int(r, i + 1));
    }
    return 0;
}

int store_counts(struct store *s, store_counts_fn fn, void *arg)
{
    struct counts_call *cc = calloc(1, sizeof *cc);
    if (cc == NULL || (cc->fan = fanout_new(s->rc, s->shards, on_counts, on_all_counts, cc)) == NULL) {
        free(cc);
        return -1;
    }
    cc->fn = fn;
    cc->arg = arg;
    for (int shard = 0; shard < s->shards; shard++) {
        char key[160];
        int n = rkey(key, sizeof key, s->prefix, shard, "count");
        const char *argv[] = {"HGETALL", key};
        size_t lens[] = {7, (size_t)n};
        if (fanout_send(cc->fan, shard, 2, argv, lens) < 0)
            break;
    }
    if (fanout_sent(cc->fan) < 0) { /* nothing was sent */
        free(cc);
        return -1;
    }
    fanout_hold(cc->fan); /* the outbox's length too */
    if (store_outbox_len(s, on_counts_outbox, cc) < 0)
        fanout_release(cc->fan);
    fanout_release(cc->fan);
    return 0;
}
