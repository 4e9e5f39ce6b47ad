/* api_push.c — POST /push: one job or an array of them.
 *
 * Order of work, which is what makes a 200 durable (contract, "Durability"):
 *   1. validate everything (all-or-nothing) and give each job an id on its topic's shard;
 *   2. commit the message rows in MySQL (the journal's group commit) — MySQL down: 503, and
 *      nothing was written anywhere;
 *   3. add the jobs to Redis, one push.lua call per shard — Redis failing now: 503, and the
 *      rows just committed are marked 'aborted' so /reStore never brings them back;
 *   4. answer. A bizKey duplicate (or a replace) leaves the new row 'aborted' too: the job
 *      that counts is the one that already held the bizKey.
 *
 * "Redis failing" has two cases. When the call was never sent (the connection was down) the
 * job is certainly not in Redis and its row is marked aborted at once. When the call was sent
 * but its reply was lost (a timeout), Redis may still have run it: the push is answered 503,
 * and the job is remembered and looked up once Redis answers again — present, its row is
 * right as it stands; absent, the row is marked aborted (unless later transitions, journaled
 * through the outbox, made the row newer). */
#include "api.h"
#include "api_util.h"
#include "clock.h"
#include "ids.h"
#include "journal.h"
#include "log.h"
#include "metrics.h"
#include "rconn.h"
#include "worker.h"

#include <stdlib.h>
#include <string.h>

struct push_state {
    struct request *r;
    struct job_spec *jobs;
    int n;
    int is_array;
    int64_t now;
    struct jrec *recs;
    struct push_outcome *outcomes;
    char *failed;           /* per job: Redis did not take it (or may not have: see unsure) */
    char *unsure;           /* per job: the call was sent but its reply was lost */
    char who[STORE_WHO_MAX];
    int calls_pending;
};

/* A push whose outcome in Redis is unknown, waiting to be looked up. */
struct unsure_push {
    struct unsure_push *next;
    struct worker *w;
    uint64_t id;
    int shard, first_state;
    int64_t run_at;
    char host[JREC_HOST_MAX];
};

static void push_state_free(void *p)
{
    struct push_state *st = p;
    job_specs_free(st->jobs, st->n);
    free(st->recs);
    free(st->outcomes);
    free(st->failed);
    free(st->unsure);
    free(st);
}

/* Mark a committed row that stands for no job (or no job any more) as aborted. `force` only
 * when certain: an unsure one must not overwrite transitions the job made meanwhile. */
static void journal_abort(struct worker *w, uint64_t id, int shard, int from, int64_t run_at, int force,
                          const char *host)
{
    struct jrec rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = JR_TRANSITION;
    rec.id = id;
    rec.from = (uint8_t)from;
    rec.to = JS_ABORTED;
    rec.ver = 2;
    rec.force = (uint8_t)force;
    rec.at = clock_unix_ms();
    rec.run_at = run_at;
    snprintf(rec.actor, sizeof rec.actor, "%s %s:{%d}:jobs", w->name, w->app->cfg.redis_prefix, shard);
    snprintf(rec.host, sizeof rec.host, "%s", host);
    journal_submit(&rec, 1);
    metrics_transition(from, JS_ABORTED, 1);
}

static void remember_unsure(struct worker *w, const struct job_spec *j, int first, const char *host)
{
    struct unsure_push *u = calloc(1, sizeof *u);
    if (u == NULL) {
        log_error("push: out of memory; job %llu may be in Redis while its row stays live", (unsigned long long)j->id);
        return;
    }
    u->w = w;
    u->id = j->id;
    u->shard = j->shard;
    u->first_state = first;
    u->run_at = j->run_at;
    snprintf(u->host, sizeof u->host, "%s", host);
    u->next = w->unsure_pushes;
    w->unsure_pushes = u;
}

static void on_unsure_looked_up(const struct job_view *v, void *arg)
{
    struct unsure_push *u = arg;
    if (v == NULL) { /* Redis failed again: look again on the next tick */
        u->next = u->w->unsure_pushes;
        u->w->unsure_pushes = u;
        return;
    }
    if (!v->found)
        journal_abort(u->w, u->id, u->shard, u->first_state, u->run_at, 0, u->host);
    free(u);
}

void api_push_tick(struct worker *w)
{
    if (w->unsure_pushes == NULL || !rconn_is_up(w->redis))
        return;
    struct unsure_push *list = w->unsure_pushes;
    w->unsure_pushes = NULL;
    while (list) {
        struct unsure_push *next = list->next;
        if (store_inspect(&w->store, list->id, on_unsure_looked_up, list) < 0) {
            list->next = w->unsure_pushes;
            w->unsure_pushes = list;
        }
        list = next;
    }
}

static int initial_state(const struct job_spec *j, int64_t now)
{
    return j->run_at > now ? JS_DELAYED : JS_READY;
}

/* 503 for a push Redis did not take. Jobs whose call was sent but not answered may have been
 * queued all the same: the answer lists their ids under "maybeQueued", so a client can look
 * them up (GET /jobs/{id}) rather than guess; every other job of the push certainly was not. */
static void respond_push_unavailable(struct push_state *st)
{
    struct sbuf ids = SBUF_INIT;
    for (int i = 0; i < st->n; i++) {
        if (!st->unsure[i])
            continue;
        sb_puts(&ids, ids.len ? "," : "\"maybeQueued\":[");
        api_json_id(&ids, st->jobs[i].id);
    }
    if (ids.len == 0 || ids.oom) {
        sb_free(&ids);
        respond_unavailable(st->r, "Redis");
        return;
    }
    sb_putc(&ids, ']');
    respond_error_members(st->r, 503, "unavailable",
                          "Redis did not answer once the push was sent: the jobs in maybeQueued may have been "
                          "queued (GET /jobs/{id} tells); the rest were not; retry shortly",
                          &ids);
    sb_free(&ids);
}

/* Journal what Redis decided, then answer. */
static void finish_push(struct push_state *st)
{
    struct request *r = st->r;
    int nfailed = 0, nconflict = 0;

    for (int i = 0; i < st->n; i++) {
        struct job_spec *j = &st->jobs[i];
        const struct push_outcome *o = &st->outcomes[i];
        int first = initial_state(j, st->now);
        if (st->failed[i] && st->unsure[i]) {
            remember_unsure(r->w, j, first, r->client);
            nfailed++;
            continue;
        }
        if (st->failed[i] || o->code != PUSHED_NEW) {
            /* The row committed in step 2 stands for no job: mark it so restore skips it. */
            journal_abort(r->w, j->id, j->shard, first, j->run_at, 1, r->client);
        }
        if (st->failed[i]) {
            nfailed++;
            continue;
        }
        switch (o->code) {
        case PUSHED_NEW:
            metrics_inc(MC_JOBS_PUSHED, 1);
            break;
        case PUSHED_DUP:
            metrics_inc(MC_JOBS_DUPLICATE, 1);
            break;
        case PUSHED_CONFLICT:
            nconflict++;
            break;
        case PUSHED_REPLACED:
            /* push.lua logged the holder's new body and settings in the outbox */
            metrics_inc(MC_JOBS_REPLACED, 1);
            metrics_transition(o->from_state, o->state, 1);
            break;
        }
    }

    if (nfailed > 0) {
        if (st->is_array && nfailed < st->n)
            log_warn("push: Redis took %d of %d jobs of an array; the rest were not queued", st->n - nfailed, st->n);
        respond_push_unavailable(st);
        return;
    }
    if (!st->is_array && nconflict) {
        respond_error(r, 409, "conflict", "the job holding this bizKey is reserved by a consumer; it cannot be replaced");
        return;
    }

    struct sbuf sb = SBUF_INIT;
    if (!st->is_array) {
        const struct push_outcome *o = &st->outcomes[0];
        sb_puts(&sb, "{\"id\":");
        api_json_id(&sb, o->id);
        sb_puts(&sb, ",\"runAt\":");
        sb_json_int(&sb, o->run_at);
        if (o->code == PUSHED_DUP)
            sb_puts(&sb, ",\"duplicate\":true");
        if (o->code == PUSHED_REPLACED)
            sb_puts(&sb, ",\"duplicate\":true,\"replaced\":true");
        sb_putc(&sb, '}');
    } else {
        sb_puts(&sb, "{\"ids\":[");
        for (int i = 0; i < st->n; i++) {
            if (i)
                sb_putc(&sb, ',');
            api_json_id(&sb, st->outcomes[i].id);
        }
        sb_putc(&sb, ']');
        const char *lists[] = {"duplicates", "replaced", "conflicts"};
        const enum push_code codes[] = {PUSHED_DUP, PUSHED_REPLACED, PUSHED_CONFLICT};
        for (int l = 0; l < 3; l++) {
            int any = 0;
            for (int i = 0; i < st->n; i++) {
                if (st->outcomes[i].code != codes[l])
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

struct shard_call {
    struct push_state *st;
    int *index;   /* job indices of this call, in order */
    int n;
};

static void on_pushed(const struct push_outcome *out, int n, void *arg)
{
    struct shard_call *call = arg;
    struct push_state *st = call->st;
    for (int k = 0; k < call->n; k++) {
        int i = call->index[k];
        if (out == NULL || k >= n) {
            st->failed[i] = 1;
            st->unsure[i] = 1; /* sent: Redis may have run it */
        } else
            st->outcomes[i] = out[k];
    }
    free(call->index);
    free(call);
    if (--st->calls_pending == 0)
        finish_push(st);
}

static void on_committed(int ok, void *arg)
{
    struct push_state *st = arg;
    if (!ok) {
        respond_unavailable(st->r, "MySQL");
        return;
    }
    struct worker *w = st->r->w;
    st->calls_pending = 1; /* our hold while sending */
    int *shard_of = malloc((size_t)st->n * sizeof *shard_of);
    char *sent = calloc((size_t)st->n, 1);
    for (int i = 0; shard_of && sent && i < st->n; i++)
        shard_of[i] = st->jobs[i].shard;
    for (int i = 0; i < st->n; i++) {
        if (sent == NULL || shard_of == NULL) {
            st->failed[i] = 1;
            continue;
        }
        if (sent[i])
            continue;
        /* one call per shard, jobs in request order */
        struct shard_call *call = calloc(1, sizeof *call);
        struct job_spec **ptrs = malloc((size_t)st->n * sizeof *ptrs);
        if (call)
            call->index = malloc((size_t)st->n * sizeof *call->index);
        if (!call || !ptrs || !call->index) {
            if (call)
                free(call->index);
            free(call);
            free(ptrs);
            st->failed[i] = 1;
            sent[i] = 1;
            continue;
        }
        call->st = st;
        for (int k = i; k < st->n; k++)
            if (!sent[k] && shard_of[k] == shard_of[i]) {
                sent[k] = 1;
                call->index[call->n] = k;
                ptrs[call->n++] = &st->jobs[k];
            }
        st->calls_pending++;
        if (store_push(&w->store, shard_of[i], ptrs, call->n, st->now, st->who, on_pushed, call) < 0) {
            for (int k = 0; k < call->n; k++)
                st->failed[call->index[k]] = 1;
            st->calls_pending--;
            free(call->index);
            free(call);
        }
        free(ptrs);
    }
    free(shard_of);
    free(sent);
    if (--st->calls_pending == 0)
        finish_push(st);
}

void api_push(struct request *r)
{
    static const char *const none[] = {NULL};
    if (api_params_only(r, none) < 0)
        return;
    struct worker *w = r->w;
    struct app *app = w->app;
    char err[512];

    struct push_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        respond_unavailable(r, "memory");
        return;
    }
    st->r = r;
    r->state = st;
    r->state_free = push_state_free;
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
    /* Known-down dependencies answer at once, before anything is written. */
    if (api_require_redis(r) < 0)
        return;
    if (!journal_up()) {
        respond_unavailable(r, "MySQL");
        return;
    }

    st->recs = calloc((size_t)st->n, sizeof *st->recs);
    st->outcomes = calloc((size_t)st->n, sizeof *st->outcomes);
    st->failed = calloc((size_t)st->n, 1);
    st->unsure = calloc((size_t)st->n, 1);
    api_who(r, st->who, sizeof st->who);
    if (!st->recs || !st->outcomes || !st->failed || !st->unsure) {
        respond_unavailable(r, "memory");
        return;
    }
    for (int i = 0; i < st->n; i++) {
        struct job_spec *j = &st->jobs[i];
        j->shard = topic_shard(j->topic, j->topic_len, app->cfg.redis_shards);
        if (idgen_next(&app->ids, j->shard, st->now, &j->id) < 0) {
            respond_unavailable(r, "the id generator (no worker id held yet)");
            return;
        }
        struct jrec *rec = &st->recs[i];
        api_fill_jrec(rec, r, j->id, j->shard, "jobs", JS_NONE, initial_state(j, st->now), 1, 0, j->run_at);
        rec->kind = JR_INSERT;
        rec->at = st->now;
        rec->job = j;
        metrics_transition(JS_NONE, rec->to, 1);
    }
    if (journal_submit_sync(st->recs, st->n, w->inbox, on_committed, st) < 0)
        respond_unavailable(r, "MySQL");
}
