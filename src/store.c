/* store.c — see store.h. Reply parsing is defensive: a reply of the wrong shape (a script
 * and daemon of different versions, say) is logged and treated as a failed command. */
#include "store.h"
#include "ids.h"
#include "jobrec.h"
#include "log.h"
#include "metrics.h"
#include "rconn.h"
#include "sbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_key(char *buf, size_t cap, const char *prefix, int shard, const char *suffix)
{
    int n = snprintf(buf, cap, "%s:{%d}:%s", prefix, shard, suffix);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

void store_who(char *out, size_t cap, const char *instance, const char *thread, const char *host)
{
    size_t n = str_put(out, cap, 0, instance);
    n = str_put(out, cap, n, "\x1f");
    n = str_put(out, cap, n, thread);
    n = str_put(out, cap, n, "\x1f");
    str_put(out, cap, n, host);
}

/* ---- reply helpers ---- */

static int is_array(const redisReply *r, size_t min)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements >= min;
}

static const char *elem_str(const redisReply *r, size_t i, size_t *len)
{
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) {
        if (len)
            *len = e->len;
        return e->str;
    }
    if (len)
        *len = 0;
    return NULL;
}

static int64_t elem_int(const redisReply *r, size_t i)
{
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    if (e->type == REDIS_REPLY_STRING)
        return strtoll(e->str, NULL, 10);
    return 0;
}

static int elem_is(const redisReply *r, size_t i, const char *word)
{
    size_t len;
    const char *s = elem_str(r, i, &len);
    return s && len == strlen(word) && memcmp(s, word, len) == 0;
}

static int elem_id(const redisReply *r, size_t i, uint64_t *id)
{
    size_t len;
    const char *s = elem_str(r, i, &len);
    return s ? id_from_key(s, len, id) : -1;
}

static void shape_error(const char *script)
{
    log_error("redis: unexpected reply shape from %s.lua (daemon and scripts out of step?)", script);
}

/* move.lua and reserve.lua end their reply with one more element, an integer, when they set
 * records aside (lib.lua set_aside): count and log it. Returns the elements before it. */
static size_t bad_records_tail(const redisReply *r, const char *script, size_t expect)
{
    size_t n = r->elements;
    if (n != expect + 1 || r->element[n - 1]->type != REDIS_REPLY_INTEGER)
        return n;
    long long bad = r->element[n - 1]->integer;
    if (bad > 0) {
        metrics_inc(MC_BAD_RECORDS, (uint64_t)bad);
        log_error("%s.lua: %lld job record(s) missing or corrupt; corrupt ones were moved to <prefix>:{shard}:bad "
                  "(docs/operations.md, \"Bad job records\")", script, bad);
    }
    return n - 1;
}

/* ---- argv building ---- */

/* Small calls (everything but batches) build their arguments on the stack. */
#define AB_SMALL_ARGS 40
#define AB_SMALL_NUMS 16
#define AB_SMALL_IDS 8

struct argv_builder {
    const char **argv;
    size_t *lens;
    int argc, cap;
    char (*nums)[INT_TEXT_MAX]; /* storage for formatted numbers */
    int nnums, numcap;
    char (*idkeys)[ID_KEY_LEN + 1];
    int nids, idcap;
    char key[160];
    const char *argv_small[AB_SMALL_ARGS];
    size_t lens_small[AB_SMALL_ARGS];
    char nums_small[AB_SMALL_NUMS][INT_TEXT_MAX];
    char ids_small[AB_SMALL_IDS][ID_KEY_LEN + 1];
};

static int ab_init(struct argv_builder *b, int cap, int nums, int ids)
{
    b->argc = 3; /* EVALSHA sha numkeys, filled by rconn_eval */
    b->cap = cap;
    b->numcap = nums;
    b->idcap = ids;
    b->nnums = b->nids = 0;
    b->argv = cap <= AB_SMALL_ARGS ? b->argv_small : malloc((size_t)cap * sizeof *b->argv);
    b->lens = cap <= AB_SMALL_ARGS ? b->lens_small : malloc((size_t)cap * sizeof *b->lens);
    b->nums = nums <= AB_SMALL_NUMS ? b->nums_small : malloc((size_t)nums * sizeof *b->nums);
    b->idkeys = ids <= AB_SMALL_IDS ? b->ids_small : malloc((size_t)ids * sizeof *b->idkeys);
    if (!b->argv || !b->lens || !b->nums || !b->idkeys)
        return -1;
    return 0;
}

static void ab_free(struct argv_builder *b)
{
    if (b->argv != b->argv_small)
        free(b->argv);
    if (b->lens != b->lens_small)
        free(b->lens);
    if (b->nums != b->nums_small)
        free(b->nums);
    if (b->idkeys != b->ids_small)
        free(b->idkeys);
}

static void ab_str(struct argv_builder *b, const char *s, size_t len)
{
    b->argv[b->argc] = s;
    b->lens[b->argc] = len;
    b->argc++;
}

static void ab_int(struct argv_builder *b, int64_t v)
{
    char *slot = b->nums[b->nnums++];
    ab_str(b, slot, int_to_text(v, slot));
}

static void ab_id(struct argv_builder *b, uint64_t id)
{
    char *slot = b->idkeys[b->nids++];
    id_to_key(id, slot);
    ab_str(b, slot, ID_KEY_LEN);
}

static void ab_jobs_key(struct argv_builder *b, const char *prefix, int shard)
{
    int n = store_key(b->key, sizeof b->key, prefix, shard, "jobs");
    ab_str(b, b->key, (size_t)n);
}

struct call {
    void *fn;
    void *arg;
};

static int send(struct store *s, enum script_id script, struct argv_builder *b, rconn_reply_fn on_reply, void *fn,
                void *arg)
{
    struct call *c = malloc(sizeof *c);
    if (c == NULL)
        return -1;
    c->fn = fn;
    c->arg = arg;
    if (rconn_eval(s->rc, script, b->argc, b->argv, b->lens, on_reply, c) < 0) {
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

static void on_push(redisReply *r, void *arg)
{
    struct push_call *c = arg;
    store_push_fn fn = c->fn;
    void *user = c->arg;
    if (!is_array(r, 1) || r->elements != (size_t)c->n) {
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
        if (!is_array(e, 2) || elem_id(e, 1, &out[i].id) < 0)
            goto bad;
        if (elem_is(e, 0, "ok") && e->elements >= 5) {
            out[i].code = PUSHED_NEW;
            out[i].run_at = elem_int(e, 2);
            out[i].ver = (uint32_t)elem_int(e, 3);
            out[i].state = (int)elem_int(e, 4);
        } else if (elem_is(e, 0, "dup") && e->elements >= 3) {
            out[i].code = PUSHED_DUP;
            out[i].run_at = elem_int(e, 2);
        } else if (elem_is(e, 0, "replaced") && e->elements >= 6) {
            out[i].code = PUSHED_REPLACED;
            out[i].run_at = elem_int(e, 2);
            out[i].ver = (uint32_t)elem_int(e, 3);
            out[i].from_state = (int)elem_int(e, 4);
            out[i].state = (int)elem_int(e, 5);
        } else if (elem_is(e, 0, "conflict")) {
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

int store_push(struct store *s, int shard, const struct push_item *items, int n, store_push_fn fn, void *arg)
{
    /* Plain new jobs (no bizKey) go with their records built here (jobrec.h), in one buffer. */
    size_t record_bytes = 0;
    for (int i = 0; i < n; i++)
        if (items[i].job->biz_key == NULL)
            record_bytes += jobrec_max_size(items[i].job);
    struct push_call *c = malloc(sizeof *c + (size_t)n * sizeof c->jobs[0]);
    char *records = malloc(record_bytes ? record_bytes : 1);
    struct argv_builder b;
    int rc = -1;
    if (c == NULL || records == NULL)
        goto out;
    if (ab_init(&b, 5 + 12 * n, 2 + 5 * n, n) < 0)
        goto out_argv;
    c->fn = fn;
    c->arg = arg;
    c->n = n;
    ab_jobs_key(&b, s->prefix, shard);
    ab_int(&b, n);
    char *rec = records;
    for (int i = 0; i < n; i++) {
        const struct job_spec *j = items[i].job;
        c->jobs[i].id = j->id;
        c->jobs[i].run_at = j->run_at;
        size_t rec_len = 0;
        if (j->biz_key == NULL)
            rec_len = jobrec_encode(rec, j, 1, job_initial_state(j, items[i].now), 0);
        ab_id(&b, j->id);
        ab_str(&b, j->topic, j->topic_len);
        if (rec_len) /* the record carries the body */
            ab_str(&b, "", 0);
        else
            ab_str(&b, j->body, j->body_len);
        ab_int(&b, j->run_at);
        ab_int(&b, j->priority);
        ab_int(&b, j->ttr);
        ab_int(&b, j->tries);
        ab_str(&b, j->biz_key ? j->biz_key : "", j->biz_key ? j->biz_len : 0);
        ab_str(&b, j->replace ? "1" : "0", 1);
        ab_int(&b, items[i].now);
        ab_str(&b, items[i].who, strlen(items[i].who));
        ab_str(&b, rec, rec_len);
        rec += rec_len;
    }
    /* rconn_eval copies the arguments into the command it queues */
    if (rconn_eval(s->rc, SCRIPT_PUSH, b.argc, b.argv, b.lens, on_push, c) == 0) {
        c = NULL; /* on_push frees it */
        rc = 0;
    }
out_argv:
    ab_free(&b);
out:
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
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            shape_error("reserve");
        fn(NULL, 0, 1, user);
        return;
    }
    int n = (int)r->elements;
    if (n > 0 && r->element[n - 1]->type == REDIS_REPLY_INTEGER) /* jobs are arrays */
        n = (int)bad_records_tail(r, "reserve", (size_t)n - 1);
    if (n == 0) {
        fn(NULL, 0, 0, user);
        return;
    }
    struct delivered *out = calloc((size_t)n, sizeof *out);
    if (out == NULL) {
        /* The jobs are reserved in Redis: their leases will expire and redeliver them. */
        log_error("reserve: out of memory; %d reserved jobs will be redelivered after their lease", n);
        fn(NULL, 0, 1, user);
        return;
    }
    for (int i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        struct delivered *d = &out[i];
        if (!is_array(e, 12) || elem_id(e, 0, &d->id) < 0 || !elem_str(e, 1, &d->topic_len) ||
            !elem_str(e, 2, &d->body_len)) {
            shape_error("reserve");
            free(out);
            fn(NULL, 0, 1, user);
            return;
        }
        d->topic = elem_str(e, 1, &d->topic_len);
        d->body = elem_str(e, 2, &d->body_len);
        d->priority = (int)elem_int(e, 3);
        d->ttr = elem_int(e, 4);
        d->tries = (int)elem_int(e, 5);
        d->attempt = (int)elem_int(e, 6);
        d->run_at = elem_int(e, 7);
        d->biz = elem_str(e, 8, &d->biz_len);
        d->lease_until = elem_int(e, 9);
        d->ver = (uint32_t)elem_int(e, 10);
        d->state = (int)elem_int(e, 11);
    }
    fn(out, n, 0, user);
    free(out);
}

int store_reserve(struct store *s, int shard, const char *const *topics, const size_t *lens, int ntopics, int count,
                  int64_t now, const char *who, store_reserve_fn fn, void *arg)
{
    struct argv_builder b;
    int rc = -1;
    if (ab_init(&b, 7 + ntopics, 2, 0) == 0) {
        ab_jobs_key(&b, s->prefix, shard);
        ab_int(&b, now);
        ab_int(&b, count);
        ab_str(&b, who, strlen(who));
        for (int i = 0; i < ntopics; i++)
            ab_str(&b, topics[i], lens[i]);
        rc = send(s, SCRIPT_RESERVE, &b, on_reserve, (void *)fn, arg);
    }
    ab_free(&b);
    return rc;
}

/* ---- id operations ---- */

enum id_script_shape { SHAPE_FINISH, SHAPE_RELEASE, SHAPE_TOUCH, SHAPE_DELETE, SHAPE_RESCHEDULE, SHAPE_REQUEUE };

struct id_call {
    store_id_fn fn;
    void *arg;
    enum id_script_shape shape;
};

static void on_id_reply(redisReply *r, void *arg)
{
    struct id_call *c = arg;
    store_id_fn fn = c->fn;
    void *user = c->arg;
    enum id_script_shape shape = c->shape;
    free(c);
    if (!is_array(r, 1)) {
        if (r)
            shape_error("id operation");
        fn(NULL, user);
        return;
    }
    struct id_outcome o;
    memset(&o, 0, sizeof o);
    if (elem_is(r, 0, "missing")) {
        o.status = ID_MISSING;
    } else if (elem_is(r, 0, "state") && r->elements >= 2) {
        o.status = ID_WRONG_STATE;
        o.state = (int)elem_int(r, 1);
    } else if (elem_is(r, 0, "stale") && r->elements >= 2) {
        o.status = ID_STALE;
        o.attempts = (uint32_t)elem_int(r, 1);
    } else if (elem_is(r, 0, "bizheld")) {
        o.status = ID_BIZ_HELD;
    } else if (elem_is(r, 0, "ok")) {
        o.status = ID_OK;
        size_t need[] = {[SHAPE_FINISH] = 4, [SHAPE_RELEASE] = 5, [SHAPE_TOUCH] = 2,
                         [SHAPE_DELETE] = 5, [SHAPE_RESCHEDULE] = 6, [SHAPE_REQUEUE] = 2};
        if (r->elements < need[shape]) {
            shape_error("id operation");
            fn(NULL, user);
            return;
        }
        switch (shape) {
        case SHAPE_FINISH: /* ok, ver, attempts, runAt */
            o.state = JS_FINISHED;
            o.from_state = JS_RESERVED;
            o.ver = (uint32_t)elem_int(r, 1);
            o.attempts = (uint32_t)elem_int(r, 2);
            o.run_at = elem_int(r, 3);
            break;
        case SHAPE_RELEASE: /* ok, state, runAt, ver, attempts */
            o.from_state = JS_RESERVED;
            o.state = (int)elem_int(r, 1);
            o.run_at = elem_int(r, 2);
            o.ver = (uint32_t)elem_int(r, 3);
            o.attempts = (uint32_t)elem_int(r, 4);
            break;
        case SHAPE_TOUCH: /* ok, leaseUntil */
            o.state = JS_RESERVED;
            o.lease_until = elem_int(r, 1);
            break;
        case SHAPE_DELETE: /* ok, from, ver, attempts, runAt */
            o.state = JS_DELETED;
            o.from_state = (int)elem_int(r, 1);
            o.ver = (uint32_t)elem_int(r, 2);
            o.attempts = (uint32_t)elem_int(r, 3);
            o.run_at = elem_int(r, 4);
            break;
        case SHAPE_RESCHEDULE: /* ok, from, state, runAt, ver, attempts */
            o.from_state = (int)elem_int(r, 1);
            o.state = (int)elem_int(r, 2);
            o.run_at = elem_int(r, 3);
            o.ver = (uint32_t)elem_int(r, 4);
            o.attempts = (uint32_t)elem_int(r, 5);
            break;
        case SHAPE_REQUEUE: /* ok, ver */
            o.from_state = JS_DEAD;
            o.state = JS_READY;
            o.ver = (uint32_t)elem_int(r, 1);
            break;
        }
    } else {
        shape_error("id operation");
        fn(NULL, user);
        return;
    }
    fn(&o, user);
}

static int id_call(struct store *s, enum script_id script, enum id_script_shape shape, uint64_t id, int64_t now,
                   const int64_t *extra, int nextra, const char *who, store_id_fn fn, void *arg)
{
    struct argv_builder b;
    int rc = -1;
    struct id_call *c = malloc(sizeof *c);
    if (c == NULL)
        return -1;
    c->fn = fn;
    c->arg = arg;
    c->shape = shape;
    if (ab_init(&b, 9, 1 + nextra, 1) == 0) {
        ab_jobs_key(&b, s->prefix, id_shard(id, s->shards));
        ab_id(&b, id);
        ab_int(&b, now);
        for (int i = 0; i < nextra; i++)
            ab_int(&b, extra[i]);
        if (who)
            ab_str(&b, who, strlen(who));
        rc = rconn_eval(s->rc, script, b.argc, b.argv, b.lens, on_id_reply, c);
    }
    ab_free(&b);
    if (rc < 0)
        free(c);
    return rc;
}

int store_finish(struct store *s, uint64_t id, int64_t now, int attempt, const char *who, store_id_fn fn, void *arg)
{
    int64_t extra[] = {attempt};
    return id_call(s, SCRIPT_FINISH, SHAPE_FINISH, id, now, extra, 1, who, fn, arg);
}

int store_release(struct store *s, uint64_t id, int64_t now, int64_t delay, int attempt, const char *who,
                  store_id_fn fn, void *arg)
{
    int64_t extra[] = {delay, attempt};
    return id_call(s, SCRIPT_RELEASE, SHAPE_RELEASE, id, now, extra, 2, who, fn, arg);
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

int store_reschedule(struct store *s, uint64_t id, int64_t now, int64_t run_at, const char *who, store_id_fn fn,
                     void *arg)
{
    int64_t extra[] = {run_at};
    return id_call(s, SCRIPT_RESCHEDULE, SHAPE_RESCHEDULE, id, now, extra, 1, who, fn, arg);
}

int store_requeue(struct store *s, uint64_t id, int64_t now, const char *who, store_id_fn fn, void *arg)
{
    return id_call(s, SCRIPT_REQUEUE, SHAPE_REQUEUE, id, now, NULL, 0, who, fn, arg);
}

/* ---- inspect ---- */

static void on_inspect(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_inspect_fn fn = (store_inspect_fn)c->fn;
    void *user = c->arg;
    free(c);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            shape_error("inspect");
        fn(NULL, user);
        return;
    }
    struct job_view v;
    memset(&v, 0, sizeof v);
    if (r->elements == 0) {
        fn(&v, user);
        return;
    }
    if (r->elements < 11 || !elem_str(r, 7, NULL) || !elem_str(r, 9, NULL)) {
        shape_error("inspect");
        fn(NULL, user);
        return;
    }
    v.found = 1;
    v.state = (int)elem_int(r, 0);
    v.ver = (uint32_t)elem_int(r, 1);
    v.attempts = (uint32_t)elem_int(r, 2);
    v.priority = (int)elem_int(r, 3);
    v.ttr = elem_int(r, 4);
    v.tries = (int)elem_int(r, 5);
    v.run_at = elem_int(r, 6);
    v.topic = elem_str(r, 7, &v.topic_len);
    v.biz = elem_str(r, 8, &v.biz_len);
    v.body = elem_str(r, 9, &v.body_len);
    v.lease_until = elem_int(r, 10);
    fn(&v, user);
}

int store_inspect(struct store *s, uint64_t id, store_inspect_fn fn, void *arg)
{
    struct argv_builder b;
    int rc = -1;
    if (ab_init(&b, 5, 0, 1) == 0) {
        ab_jobs_key(&b, s->prefix, id_shard(id, s->shards));
        ab_id(&b, id);
        rc = send(s, SCRIPT_INSPECT, &b, on_inspect, (void *)fn, arg);
    }
    ab_free(&b);
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
        if (!is_array(e, 9) || elem_id(e, 0, &d->id) < 0 || !elem_str(e, 8, NULL)) {
            shape_error("deadlist");
            free(out);
            fn(NULL, 0, 1, user);
            return;
        }
        d->died_at = elem_int(e, 1);
        d->attempts = (int)elem_int(e, 2);
        d->priority = (int)elem_int(e, 3);
        d->ttr = elem_int(e, 4);
        d->tries = (int)elem_int(e, 5);
        d->run_at = elem_int(e, 6);
        d->biz = elem_str(e, 7, &d->biz_len);
        d->body = elem_str(e, 8, &d->body_len);
    }
    fn(out, n, 0, user);
    free(out);
}

int store_dead_list(struct store *s, const char *topic, size_t topic_len, int limit, store_dead_fn fn, void *arg)
{
    struct argv_builder b;
    int rc = -1;
    if (ab_init(&b, 6, 1, 0) == 0) {
        ab_jobs_key(&b, s->prefix, topic_shard(topic, topic_len, s->shards));
        ab_str(&b, topic, topic_len);
        ab_int(&b, limit);
        rc = send(s, SCRIPT_DEADLIST, &b, on_dead, (void *)fn, arg);
    }
    ab_free(&b);
    return rc;
}

/* ---- move ---- */

static void on_move(redisReply *r, void *arg)
{
    struct call *c = arg;
    store_move_fn fn = (store_move_fn)c->fn;
    void *user = c->arg;
    free(c);
    if (!is_array(r, 3)) {
        if (r)
            shape_error("move");
        fn(NULL, user);
        return;
    }
    struct move_outcome o;
    o.next_due = elem_int(r, 0);
    o.more = (int)elem_int(r, 1);
    o.n = (int)elem_int(r, 2);
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
        if (elem_id(r, at, &m[i].id) < 0) {
            shape_error("move");
            free(m);
            fn(NULL, user);
            return;
        }
        m[i].from = (int)elem_int(r, at + 1);
        m[i].to = (int)elem_int(r, at + 2);
        m[i].ver = (uint32_t)elem_int(r, at + 3);
        m[i].attempts = (uint32_t)elem_int(r, at + 4);
        m[i].run_at = elem_int(r, at + 5);
    }
    o.moved = m;
    fn(&o, user);
    free(m);
}

int store_move(struct store *s, int shard, int64_t now, int limit, const char *who, store_move_fn fn, void *arg)
{
    struct argv_builder b;
    int rc = -1;
    if (ab_init(&b, 7, 2, 0) == 0) {
        ab_jobs_key(&b, s->prefix, shard);
        ab_int(&b, now);
        ab_int(&b, limit);
        ab_str(&b, who, strlen(who));
        rc = send(s, SCRIPT_MOVE, &b, on_move, (void *)fn, arg);
    }
    ab_free(&b);
    return rc;
}

/* ---- counts ---- */

struct counts_call {
    store_counts_fn fn;
    void *arg;
    int waiting;
    int failed;
    long outbox;
    struct topic_counts *topics;
    int n, cap;
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
    struct topic_counts *t = NULL;
    for (int i = 0; i < cc->n; i++)
        if (strlen(cc->topics[i].topic) == tlen && memcmp(cc->topics[i].topic, topic, tlen) == 0)
            t = &cc->topics[i];
    if (t == NULL) {
        if (cc->n == cc->cap) {
            int cap = cc->cap ? cc->cap * 2 : 16;
            struct topic_counts *grown = realloc(cc->topics, (size_t)cap * sizeof *grown);
            if (grown == NULL)
                return;
            cc->topics = grown;
            cc->cap = cap;
        }
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

static void counts_release(struct counts_call *cc)
{
    if (--cc->waiting > 0)
        return;
    if (!cc->failed && cc->n > 1) /* qsort's base may not be NULL, even for nothing to sort */
        qsort(cc->topics, (size_t)cc->n, sizeof *cc->topics, cmp_topic);
    cc->fn(cc->topics, cc->failed ? 0 : cc->n, cc->outbox, cc->failed, cc->arg);
    free(cc->topics);
    free(cc);
}

static void on_outbox_len(redisReply *r, void *arg)
{
    struct counts_call *cc = arg;
    if (r && r->type == REDIS_REPLY_INTEGER)
        cc->outbox += r->integer;
    counts_release(cc);
}

static void on_counts(redisReply *r, void *arg)
{
    struct counts_call *cc = arg;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        cc->failed = 1;
    else
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            size_t len;
            const char *field = elem_str(r, i, &len);
            if (field)
                add_count(cc, field, len, elem_int(r, i + 1));
        }
    counts_release(cc);
}

int store_counts(struct store *s, store_counts_fn fn, void *arg)
{
    struct counts_call *cc = calloc(1, sizeof *cc);
    if (cc == NULL)
        return -1;
    cc->fn = fn;
    cc->arg = arg;
    cc->waiting = 1; /* our own hold, so an early reply cannot finish the call */
    for (int shard = 0; shard < s->shards; shard++) {
        char key[160];
        int n = store_key(key, sizeof key, s->prefix, shard, "count");
        const char *argv[] = {"HGETALL", key};
        size_t lens[] = {7, (size_t)n};
        cc->waiting++;
        if (rconn_command(s->rc, on_counts, cc, 2, argv, lens) < 0) {
            cc->waiting--;
            cc->failed = 1;
            break;
        }
        n = store_key(key, sizeof key, s->prefix, shard, "log");
        const char *xlen[] = {"XLEN", key};
        size_t xlens[] = {4, (size_t)n};
        cc->waiting++;
        if (rconn_command(s->rc, on_outbox_len, cc, 2, xlen, xlens) < 0)
            cc->waiting--;
    }
    if (cc->waiting == 1 && cc->failed) { /* nothing was sent */
        free(cc);
        return -1;
    }
    counts_release(cc);
    return 0;
}
