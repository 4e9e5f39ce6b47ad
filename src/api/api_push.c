/* api_push.c — POST /push: one job or an array of them.
 *
 * Order of work, which is what makes a 200 durable (contract, "Durability"):
 *   1. validate everything (all-or-nothing) and give each job an id on its topic's shard;
 *   2. commit the message rows in MySQL (the journal's group commit) — MySQL down: 503, and
 *      nothing was written anywhere;
 *   3. add the jobs to Redis, one push.lua call for all the pushes whose commits this worker
 *      received together (one per shard under Cluster; below) — Redis failing now: 503, and
 *      the rows just committed are marked 'aborted' so /reStore never brings them back;
 *   4. answer. A bizKey duplicate (or a replace) leaves the new row 'aborted' too: the job
 *      that counts is the one that already held the bizKey.
 *
 * "Redis failing" has two cases. When the call was never sent (the connection was down) the
 * job is certainly not in Redis and its row is marked aborted at once. When the call was sent
 * but its reply was lost (a timeout), Redis may still have run it: its outcome is in doubt.
 * The push is answered 503 naming such jobs (under "maybeQueued", the API's word for it),
 * and each goes to the reconciler (doubt.h), which looks it up once Redis answers again —
 * present, its row is right as it stands; absent, the row is marked aborted (unless later
 * transitions, journaled through the outbox, made the row newer). */
#include "api/handlers.h"
#include "api/api_util.h"
#include "redis/jobjson.h"
#include "base/clock.h"
#include "durable/doubt.h"
#include "core/ids.h"
#include "durable/journal.h"
#include "base/log.h"
#include "core/metrics.h"
#include "redis/rlink.h"
#include "core/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct push_state {
    struct request *r;
    struct job_spec *jobs;
    int n;
    int is_array;
    int64_t now;
    struct jobchange *recs;
    struct push_outcome *outcomes;
    char *failed;   /* per job: Redis did not take it (or may not have: see in_doubt) */
    char *in_doubt; /* per job: the call was sent but its reply was lost */
    char who[STORE_WHO_MAX];
    int calls_pending;
};

struct pending_job {
    struct push_state *st;
    int index; /* into st->jobs */
};

/* A worker's push state (hctx.pushes): jobs committed and waiting for their shard's call. */
struct push_batch {
    int nshards;
    struct shard_jobs {
        struct pending_job *jobs;
        int n, cap;
    } shard[];
};

static void push_state_free(void *p)
{
    struct push_state *st = p;
    job_specs_free(st->jobs, st->n);
    free(st->recs);
    free(st->outcomes);
    free(st->failed);
    free(st->in_doubt);
    free(st);
}

/* Mark the row just committed for job j as aborted: Redis certainly did not take it (or a
 * bizKey holder answered instead), so it stands for no job. Version 2: nothing but this push
 * can have touched a row committed a moment ago for a job that never reached Redis. */
static void journal_abort(struct request *r, const struct job_spec *j, int from, uint64_t biz_holder)
{
    struct jobchange rec;
    api_fill_jobchange(&rec, r, j->id, j->shard, "jobs", from, JS_ABORTED, 2, 0, j->run_at);
    rec.force = 1;
    rec.biz_holder = biz_holder; /* biz_latest goes back to the job that kept the key */
    if (from == JS_FAR)
        rec.kind = JC_FAR_LEAVE; /* its far key and far_biz row go too */
    journal_submit(&rec, 1);
    metrics_transition(from, JS_ABORTED, 1);
}

/* A far job that held the bizKey a push replaced (push.lua gave the key to the new job): its
 * row is to be deleted (unless the pager took it into Redis meanwhile: then the pager finds its
 * key held by the new job and deletes it itself, pager.c). */
static void far_replaced_rec(struct jobchange *rec, struct request *r, uint64_t holder, uint64_t by)
{
    api_fill_jobchange(rec, r, holder, id_shard(holder, r->ctx->app->cfg.redis_shards), "jobs", JS_FAR, JS_DELETED, 0,
                       0, 0);
    snprintf(rec->actor, sizeof rec->actor, "push: bizKey replaced by %llu", (unsigned long long)by);
    rec->kind = JC_FAR_LEAVE;
    metrics_transition(JS_FAR, JS_DELETED, 1);
}

/* 503 for a push Redis did not take. Jobs whose call was sent but not answered may have been
 * queued all the same: the answer lists their ids under "maybeQueued", so a client can look
 * them up (GET /jobs/{id}) rather than guess; every other job of the push certainly was not. */
static void respond_push_unavailable(struct push_state *st)
{
    struct sbuf ids = SBUF_INIT;
    for (int i = 0; i < st->n; i++) {
        if (!st->in_doubt[i])
            continue;
        sb_puts(&ids, ids.len ? "," : "\"maybeQueued\":[");
        jobjson_id(&ids, st->jobs[i].id);
    }
    if (ids.len == 0 || ids.oom) {
        sb_free(&ids);
        respond_unavailable(st->r, "Redis");
        return;
    }
    sb_putc(&ids, ']');
    /* Name what Redis said when it said something (OOM, READONLY...: rconn.h). */
    struct rconn_error rerr;
    if (rlink_last_error(st->r->ctx->redis, &rerr) != RCAUSE_NONE && rerr.cause != RCAUSE_DOWN) {
        char msg[RCONN_ERROR_TEXT + 192];
        snprintf(msg, sizeof msg,
                 "Redis failed the push (%s: %s): the jobs in maybeQueued may have been queued (GET /jobs/{id} "
                 "tells); the rest were not; retry shortly",
                 rcause_name(rerr.cause), rerr.text);
        respond_error_members(st->r, 503, "unavailable", msg, &ids);
        sb_free(&ids);
        return;
    }
    respond_error_members(st->r, 503, "unavailable",
                          "Redis did not answer once the push was sent: the jobs in maybeQueued may have been "
                          "queued (GET /jobs/{id} tells); the rest were not; retry shortly",
                          &ids);
    sb_free(&ids);
}

static void on_far_holders_deleted(int ok, void *arg);
static void answer_push(struct push_state *st);

/* Journal what Redis decided, then answer. */
static void finish_push(struct push_state *st)
{
    struct request *r = st->r;
    int nfailed = 0, nleaves = 0; /* far holders replaced: st->recs[0..nleaves) */

    for (int i = 0; i < st->n; i++) {
        struct job_spec *j = &st->jobs[i];
        const struct push_outcome *o = &st->outcomes[i];
        int first = j->far ? JS_FAR : job_initial_state(j, st->now);
        if (st->failed[i] && st->in_doubt[i]) {
            doubt_push(j->id, NULL); /* the reconciler looks it up in Redis, persisted across a crash */
            nfailed++;
            continue;
        }
        if (st->failed[i] || o->code != PUSHED_NEW) {
            /* The row committed in step 2 stands for no job: mark it so restore skips it. */
            journal_abort(r, j, first, st->failed[i] ? 0 : o->id);
        }
        if (st->failed[i]) {
            nfailed++;
            continue;
        }
        switch (o->code) {
        case PUSHED_NEW:
            metrics_inc(MC_JOBS_PUSHED, 1);
            if (o->far_replaced) {
                far_replaced_rec(&st->recs[nleaves++], r, o->far_replaced, j->id); /* its row is committed */
                metrics_inc(MC_JOBS_REPLACED, 1);
            }
            break;
        case PUSHED_DUP:
            metrics_inc(MC_JOBS_DUPLICATE, 1);
            break;
        case PUSHED_CONFLICT:
            break; /* answered 409 (alone) or listed (array) by answer_push */
        case PUSHED_REPLACED:
            /* push.lua logged the holder's new body and settings in the outbox */
            metrics_inc(MC_JOBS_REPLACED, 1);
            metrics_transition(o->from_state, o->state, 1);
            break;
        }
    }

    /* A replaced far holder is deleted before the answer, as a delete would be: once told
     * "replaced", a client never finds the old job live. */
    if (nleaves > 0 && nfailed == 0 &&
        journal_submit_sync(st->recs, nleaves, r->ctx->inbox, on_far_holders_deleted, st) == 0)
        return;
    if (nleaves > 0) /* MySQL refused at once: batched (the pager deletes them itself otherwise) */
        journal_submit(st->recs, nleaves);
    if (nfailed > 0) {
        if (st->is_array && nfailed < st->n)
            log_warn("push: Redis took %d of %d jobs of an array; the rest were not queued", st->n - nfailed, st->n);
        respond_push_unavailable(st);
        return;
    }
    answer_push(st);
}

static void on_far_holders_deleted(int ok, void *arg)
{
    struct push_state *st = arg;
    if (!ok)
        log_warn("push: the far jobs a replace took a bizKey from were not deleted in MySQL now; the pager deletes "
                 "them when their time comes (it finds their keys held)");
    answer_push(st);
}

/* The answer of a push Redis took (conflicts aside). */
static void answer_push(struct push_state *st)
{
    struct request *r = st->r;
    int nconflict = 0;
    for (int i = 0; i < st->n; i++)
        nconflict += st->outcomes[i].code == PUSHED_CONFLICT;
    if (!st->is_array && nconflict) {
        respond_error(r, 409, "conflict",
                      "the job holding this bizKey is reserved by a consumer; it cannot be replaced");
        return;
    }

    struct sbuf sb = SBUF_INIT;
    if (!st->is_array) {
        const struct push_outcome *o = &st->outcomes[0];
        sb_puts(&sb, "{\"id\":");
        jobjson_id(&sb, o->id);
        sb_puts(&sb, ",\"runAt\":");
        sb_json_int(&sb, o->run_at);
        if (o->code == PUSHED_DUP)
            sb_puts(&sb, ",\"duplicate\":true");
        if (o->code == PUSHED_REPLACED || (o->code == PUSHED_NEW && o->far_replaced))
            sb_puts(&sb, ",\"duplicate\":true,\"replaced\":true");
        sb_putc(&sb, '}');
    } else {
        sb_puts(&sb, "{\"ids\":[");
        for (int i = 0; i < st->n; i++) {
            if (i)
                sb_putc(&sb, ',');
            jobjson_id(&sb, st->outcomes[i].id);
        }
        sb_putc(&sb, ']');
        const char *lists[] = {"duplicates", "replaced", "conflicts"};
        const enum push_code codes[] = {PUSHED_DUP, PUSHED_REPLACED, PUSHED_CONFLICT};
        for (int l = 0; l < 3; l++) {
            int any = 0;
            for (int i = 0; i < st->n; i++) {
                int far_replaced =
                    codes[l] == PUSHED_REPLACED && st->outcomes[i].code == PUSHED_NEW && st->outcomes[i].far_replaced;
                if (st->outcomes[i].code != codes[l] && !far_replaced)
                    continue;
                if (any)
                    sb_putc(&sb, ',');
                else
                    sb_printf(&sb, ",\"%s\":[", lists[l]);
                sb_printf(&sb, "%d", i);
                any = 1;
            }
            if (any)
                sb_putc(&sb, ']');
        }
        sb_putc(&sb, '}');
    }
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

/* ---- to Redis: one push.lua call for everything one inbox drain committed ----
 *
 * A journal cycle commits the rows of ~20-100 pushes at once and its completions reach this
 * worker together (one drain of its inbox). Each push's jobs wait here, by shard, until the
 * drain is over (api_push_flush); then they go to Redis in commit order, each with its own
 * request's clock and actor: on a single Redis in one call for every shard (push.lua takes a
 * run of jobs per shard), since a call's fixed part costs Redis more than a plain job's own
 * commands and a drain's ~20 jobs spread over every shard (one call per shard was 8 calls of
 * two or three jobs); under Redis Cluster one call per shard, which stays in its slot. A
 * call carries at most PUSH_CALL_MAX jobs, so one call never holds Redis (single-threaded)
 * for long, however many pushes one drain brings. */

#define PUSH_CALL_MAX 1000

struct shard_call {
    int n, nseg;
    struct push_segment *seg;  /* nseg runs of one shard each, in the same allocation */
    struct pending_job jobs[]; /* within a segment, a push's jobs are consecutive */
};

/* Outcome of jobs[0..n), all of one shard (out == NULL: no answer; `sent`: the call may have
 * run all the same). Each push counts one pending run per shard (and per cut, below). */
static void settle_jobs(const struct pending_job *jobs, int n, const struct push_outcome *out, int sent)
{
    for (int k = 0; k < n;) {
        struct push_state *st = jobs[k].st;
        for (; k < n && jobs[k].st == st; k++) {
            int i = jobs[k].index;
            if (out == NULL) {
                st->failed[i] = 1;
                st->in_doubt[i] = (char)sent; /* sent: Redis may have run it */
            } else {
                st->outcomes[i] = out[k];
            }
        }
        if (--st->calls_pending == 0)
            finish_push(st); /* st is not looked at again: its jobs were consecutive */
    }
}

static void settle_call(struct shard_call *call, const struct push_outcome *out, int sent)
{
    for (int k = 0, from = 0; k < call->nseg; from += call->seg[k++].n)
        settle_jobs(call->jobs + from, call->seg[k].n, out ? out + from : NULL, sent);
}

static void on_pushed(const struct push_outcome *out, int n, void *arg)
{
    struct shard_call *call = arg;
    /* No answer: in doubt — unless Redis said it refused the call outright (OOM, BUSY,
     * READONLY, LOADING, NOSCRIPT, auth), which it says before running anything. The cause
     * was recorded for this very reply, just before this callback (rconn.h). */
    int maybe_ran = 1;
    struct rconn_error e;
    if (out == NULL && call->n > 0 && rlink_last_error(call->jobs[0].st->r->ctx->redis, &e) != RCAUSE_NONE &&
        rcause_refuses(e.cause))
        maybe_ran = 0;
    settle_call(call, out != NULL && n == call->n ? out : NULL, maybe_ran);
    free(call);
}

/* A part of one shard's queue that goes into a call. */
struct call_part {
    struct push_segment seg; /* its shard, and how many of the queue's jobs */
    const struct pending_job *jobs;
    int ends_call; /* the last part of its call */
};

/* Send parts[0..nparts) as one push.lua call (their jobs add up to PUSH_CALL_MAX at most).
 * `items` has room. */
static void send_call(struct hctx *ctx, const struct call_part *parts, int nparts, struct push_item *items)
{
    int n = 0;
    for (int k = 0; k < nparts; k++)
        n += parts[k].seg.n;
    struct shard_call *call =
        malloc(sizeof *call + (size_t)n * sizeof call->jobs[0] + (size_t)nparts * sizeof call->seg[0]);
    if (call == NULL) {
        for (int k = 0; k < nparts; k++) /* not sent: 503, and their rows are marked aborted */
            settle_jobs(parts[k].jobs, parts[k].seg.n, NULL, 0);
        return;
    }
    call->n = n;
    call->nseg = nparts;
    call->seg = (struct push_segment *)(call->jobs + n);
    for (int k = 0, at = 0; k < nparts; at += parts[k++].seg.n) {
        call->seg[k] = parts[k].seg;
        memcpy(call->jobs + at, parts[k].jobs, (size_t)parts[k].seg.n * sizeof call->jobs[0]);
    }
    for (int k = 0; k < n; k++) {
        const struct push_state *st = call->jobs[k].st;
        items[k].job = &st->jobs[call->jobs[k].index];
        items[k].now = st->now;
        items[k].who = st->who;
    }
    if (store_push(&ctx->store, call->seg, nparts, items, n, on_pushed, call) < 0) {
        settle_call(call, NULL, 0);
        free(call);
    }
}

void api_push_flush(struct hctx *ctx)
{
    struct push_batch *p = ctx->pushes;
    if (p == NULL)
        return;
    int total = 0;
    for (int shard = 0; shard < p->nshards; shard++)
        total += p->shard[shard].n;
    if (total == 0)
        return;
    /* each queue is cut where a call is full: at most a part per shard and one per cut */
    struct call_part *parts = malloc((size_t)(p->nshards + total / PUSH_CALL_MAX + 1) * sizeof *parts);
    struct push_item *items = malloc(PUSH_CALL_MAX * sizeof *items);
    if (parts == NULL || items == NULL) {
        for (int shard = 0; shard < p->nshards; shard++) { /* not sent: 503, rows marked aborted */
            struct shard_jobs *q = &p->shard[shard];
            int n = q->n;
            q->n = 0;
            settle_jobs(q->jobs, n, NULL, 0);
        }
        free(parts);
        free(items);
        return;
    }
    /* Plan the calls first: each shard's queue in parts, a call closed when it is full or, under
     * Cluster, at the end of its shard. A push whose jobs straddle a cut inside one shard's
     * queue is settled by both calls: its extra run is counted before any call is sent, so that
     * it is not finished by whichever call answers (or fails to be sent) first. */
    int spans = store_push_spans_shards(&ctx->store);
    int nparts = 0, room = PUSH_CALL_MAX;
    for (int shard = 0; shard < p->nshards; shard++) {
        struct shard_jobs *q = &p->shard[shard];
        for (int from = 0; from < q->n;) {
            int n = q->n - from < room ? q->n - from : room;
            parts[nparts++] = (struct call_part){{shard, n}, q->jobs + from, 0};
            room -= n;
            from += n;
            if (from < q->n && q->jobs[from - 1].st == q->jobs[from].st)
                q->jobs[from].st->calls_pending++;
            if (room == 0 || (!spans && from == q->n)) {
                parts[nparts - 1].ends_call = 1;
                room = PUSH_CALL_MAX;
            }
        }
        q->n = 0; /* its jobs stay where they are until sent: nothing queues during a flush */
    }
    parts[nparts - 1].ends_call = 1;
    for (int k = 0, first = 0; k < nparts; k++)
        if (parts[k].ends_call) {
            send_call(ctx, parts + first, k - first + 1, items);
            first = k + 1;
        }
    free(items);
    free(parts);
}

void api_push_free(struct hctx *ctx)
{
    struct push_batch *p = ctx->pushes;
    if (p == NULL)
        return;
    for (int i = 0; i < p->nshards; i++)
        free(p->shard[i].jobs);
    free(p);
    ctx->pushes = NULL;
}

static struct push_batch *batch_of(struct hctx *ctx)
{
    if (ctx->pushes == NULL) {
        int nshards = ctx->app->cfg.redis_shards;
        ctx->pushes = calloc(1, sizeof *ctx->pushes + (size_t)nshards * sizeof ctx->pushes->shard[0]);
        if (ctx->pushes)
            ctx->pushes->nshards = nshards;
    }
    return ctx->pushes;
}

/* Queue job i of st for its shard's call; 1 when it starts st's run in that shard's list. */
static int queue_job(struct push_batch *p, struct push_state *st, int i)
{
    struct shard_jobs *q = &p->shard[st->jobs[i].shard];
    if (q->n == q->cap) {
        int cap = q->cap ? q->cap * 2 : 64;
        struct pending_job *grown = realloc(q->jobs, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        q->jobs = grown;
        q->cap = cap;
    }
    int starts_run = q->n == 0 || q->jobs[q->n - 1].st != st;
    q->jobs[q->n++] = (struct pending_job){st, i};
    return starts_run;
}

static void on_committed(int ok, void *arg)
{
    struct push_state *st = arg;
    if (!ok) {
        respond_unavailable(st->r, "MySQL");
        return;
    }
    struct push_batch *p = batch_of(st->r->ctx);
    st->calls_pending = 0;
    for (int i = 0; i < st->n; i++) {
        const struct job_spec *j = &st->jobs[i];
        if (j->far && j->biz_key == NULL) {
            /* committed: that is all a far job needs (the pager brings it to Redis) */
            st->outcomes[i] =
                (struct push_outcome){.code = PUSHED_NEW, .id = j->id, .run_at = j->run_at, .ver = 1, .state = JS_FAR};
            continue;
        }
        int rc = p ? queue_job(p, st, i) : -1;
        if (rc < 0)
            st->failed[i] = 1; /* not sent: certainly not in Redis */
        else
            st->calls_pending += rc;
    }
    if (st->calls_pending == 0)
        finish_push(st); /* nothing could be queued */
    /* else: api_push_flush sends them once this drain of the inbox is over */
}

void api_push(struct request *r)
{
    static const char *const none[] = {NULL};
    if (api_params_only(r, none) < 0)
        return;
    struct hctx *ctx = r->ctx;
    struct app *app = ctx->app;
    char err[512];

    struct push_state *st = api_state_new(r, sizeof *st, push_state_free);
    if (st == NULL)
        return;
    st->r = r;
    st->now = clock_unix_ms();

    switch (job_parse_push(r->body, r->body_len, &app->limits, st->now, &st->jobs, &st->n, &st->is_array, err,
                           sizeof err)) {
    case PUSH_OK:
        break;
    case PUSH_BAD:
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    case PUSH_TOO_MANY:
        respond_error(r, 413, "too_large", "%s", err);
        return;
    case PUSH_NOMEM:
        respond_unavailable(r, "memory");
        return;
    }
    /* W3C Trace Context: one header lookup per request; a push without one costs nothing more */
    const char *traceparent = request_header(r, "traceparent");
    if (traceparent && job_trace_from_headers(st->jobs, st->n, traceparent, request_header(r, "tracestate")) < 0) {
        respond_unavailable(r, "memory");
        return;
    }
    /* Known-down dependencies answer at once, before anything is written. */
    if (api_require_redis(r) < 0 || api_require_mysql(r) < 0)
        return;

    st->recs = calloc((size_t)st->n, sizeof *st->recs);
    st->outcomes = calloc((size_t)st->n, sizeof *st->outcomes);
    st->failed = calloc((size_t)st->n, 1);
    st->in_doubt = calloc((size_t)st->n, 1);
    api_who(r, st->who, sizeof st->who);
    if (!st->recs || !st->outcomes || !st->failed || !st->in_doubt) {
        respond_unavailable(r, "memory");
        return;
    }
    for (int i = 0; i < st->n; i++) {
        struct job_spec *j = &st->jobs[i];
        j->shard = id_topic_shard(j->topic, j->topic_len, app->cfg.redis_shards);
        /* Tiers: beyond the horizon, MySQL alone holds the job until the pager pages it in. */
        j->far = app->cfg.horizon > 0 && j->run_at > st->now + app->cfg.horizon;
        if (idgen_next(&app->ids, j->shard, st->now, &j->id) < 0) {
            respond_unavailable(r, "the id generator (no worker id held yet)");
            return;
        }
        struct jobchange *rec = &st->recs[i];
        api_fill_jobchange(rec, r, j->id, j->shard, "jobs", JS_NONE, j->far ? JS_FAR : job_initial_state(j, st->now), 1,
                           0, j->run_at);
        rec->kind = JC_INSERT;
        rec->at = st->now;
        rec->job = j;
        metrics_transition(JS_NONE, rec->to, 1);
    }
    if (journal_submit_sync(st->recs, st->n, ctx->inbox, on_committed, st) < 0)
        respond_unavailable(r, "MySQL");
}
