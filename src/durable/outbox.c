/* outbox.c — see outbox.h. */
#include "durable/outbox.h"
#include "core/dutywatch.h"
#include "base/bgthread.h"
#include "base/clock.h"
#include "core/cluster.h"
#include "core/ids.h"
#include "base/log.h"
#include "base/loopq.h"
#include "core/metrics.h"
#include "redis/layout.h"
#include "redis/rblock.h"
#include "redis/rcodec.h"
#include "redis/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GROUP "journal"
/* Reads do not block in Redis: Redis checks BLOCK timeouts only at its `hz` (10 times a
 * second), which made every cycle — and every /jobs barrier — take ~100 ms. Instead the thread
 * polls, sleeping on its condition variable in between, which a new barrier cuts short. */
#define IDLE_POLL_US   10000 /* nothing came: look again after this */
#define LINGER_US      5000  /* a small batch came: let entries gather before the next one */
#define SMALL_BATCH    256
#define CLAIM_EVERY_US 5000000
#define RETRY_US       1000000
#define ENTRY_ID_MAX   48

/* An entry the outbox cannot read: kept, as it was, in <prefix>:{n}:logbad when the batch is
 * acknowledged, rather than dropped. */
struct bad_entry {
    char id[ENTRY_ID_MAX];
    int n; /* fields and values */
    char **v;
    size_t *len;
};

struct shard_state {
    char key[160], badkey[168];
    struct bad_entry *bad;
    int nbad, capbad;
    int group_ok;              /* XGROUP CREATE done (or found) */
    int reread;                /* our own pending entries ("0") come before new ones (">") */
    char (*ids)[ENTRY_ID_MAX]; /* entries of the batch in flight, to acknowledge */
    int nids, capids;
};

struct barrier {
    struct barrier *next;
    int64_t asked_us;
    struct loopq *reply_to;
    journal_done_fn done;
    void *arg;
    int ok;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bgthread bg; /* the outbox thread; bg.stop and bg.stop_deadline_us under lock */
    const struct config *cfg;
    char consumer[64];
    struct rblock_shards *set; /* the thread's own (published in bg for a stop to cut) */
    int64_t last_connect_us, last_claim_us;
    int layout_refused; /* the last connect found another layout's data (layout.h) */
    int shards;
    struct shard_state *s;
    struct jobchange *recs;
    int max;
    int committed, commit_ok; /* outcome of the batch handed to the journal */
    /* The last batch could not be committed (the journal refused it, or its commit failed):
     * this instance cannot reach MySQL, and claims no other instance's entries meanwhile (it
     * could not carry them). Only the outbox thread reads or writes it. */
    int cannot_commit;
    struct barrier *barriers;
} outbox = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .cond = PTHREAD_COND_INITIALIZER,
            .bg = BGTHREAD_INIT(&outbox.lock, &outbox.cond,
                                "outbox: a Redis call outlived the stop deadline; cutting the connection")};

/* ---- barriers ---- */

static void deliver_barrier(void *arg)
{
    struct barrier *b = arg;
    b->done(b->ok, b->arg);
    free(b);
}

/* Answer barriers asked before `before` (all of them when before < 0) with `ok`. */
static void settle_barriers(int64_t before, int ok)
{
    pthread_mutex_lock(&outbox.lock);
    struct barrier **link = &outbox.barriers, *settled = NULL;
    while (*link) {
        struct barrier *b = *link;
        if (before < 0 || b->asked_us < before) {
            *link = b->next;
            b->next = settled;
            settled = b;
        } else {
            link = &b->next;
        }
    }
    pthread_mutex_unlock(&outbox.lock);
    while (settled) {
        struct barrier *next = settled->next;
        settled->ok = ok;
        if (settled->reply_to == NULL)
            deliver_barrier(settled); /* the caller waits on a thread of its own */
        else if (loopq_post(settled->reply_to, deliver_barrier, settled) < 0)
            free(settled);
        settled = next;
    }
}

/* outbox_wait's state, shared with the barrier's callback (on the outbox thread): whichever
 * lets go last frees it. */
struct outbox_waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, ok, refs;
};

static void waiter_put(struct outbox_waiter *w)
{
    pthread_mutex_lock(&w->lock);
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->lock);
    if (last) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        free(w);
    }
}

static void waiter_done(int ok, void *arg)
{
    struct outbox_waiter *w = arg;
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    w->ok = ok;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    waiter_put(w);
}

int outbox_wait(int (*tick)(int second, void *arg), void *arg)
{
    struct outbox_waiter *w = calloc(1, sizeof *w);
    if (w == NULL)
        return 0;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->refs = 2;
    if (outbox_barrier(NULL, waiter_done, w) < 0) {
        w->refs = 1;
        waiter_put(w);
        return 0;
    }
    int stop = 0;
    pthread_mutex_lock(&w->lock);
    for (int second = 1; !w->done && !stop; second++) {
        clock_cond_wait_us(&w->cond, &w->lock, 1000000);
        if (w->done)
            break;
        pthread_mutex_unlock(&w->lock);
        stop = tick(second, arg);
        pthread_mutex_lock(&w->lock);
    }
    int ok = w->done && w->ok;
    pthread_mutex_unlock(&w->lock);
    waiter_put(w);
    return ok;
}

/* ---- the fleet's outboxes (outbox_wait_fleet) ---- */

/* One command per shard (fmt with the shard's stream key, then ids[s] when ids is not NULL),
 * then each shard's reply: marks[s] gets the id of the first entry answered ("" for none).
 * Replies after an error answer are still read, so the connections stay in step; a lost
 * connection ends the reading (the caller gives up). 0 / -1. */
static int stream_probe(struct rblock_shards *set, const char *fmt, char (*ids)[ENTRY_ID_MAX],
                        char (*marks)[ENTRY_ID_MAX])
{
    int n = outbox.shards;
    for (int s = 0; s < n; s++) {
        char key[160];
        rkey(key, sizeof key, outbox.cfg->redis_prefix, s, "log");
        if (ids)
            redisAppendCommand(rblock_shard(set, s), fmt, key, ids[s]);
        else
            redisAppendCommand(rblock_shard(set, s), fmt, key);
    }
    int rc = 0;
    for (int s = 0; s < n; s++) {
        redisReply *r = rblock_shard_reply(rblock_shard(set, s));
        marks[s][0] = '\0';
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            rc = -1;
        } else if (r->elements > 0 && r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements > 0 &&
                   r->element[0]->element[0]->type == REDIS_REPLY_STRING) {
            snprintf(marks[s], ENTRY_ID_MAX, "%s", r->element[0]->element[0]->str);
        }
        if (r)
            freeReplyObject(r);
        if (r == NULL)
            break; /* the connection is gone: nothing more to read on it */
    }
    return rc;
}

int outbox_wait_fleet(struct rblock_shards *set, int (*tick)(int second, void *arg), void *arg)
{
    if (outbox.cfg == NULL) /* not started (a tool, a test): it cannot tell, so it gives up */
        return 0;
    int n = outbox.shards;
    char(*newest)[ENTRY_ID_MAX] = calloc((size_t)n, sizeof *newest);
    char(*left)[ENTRY_ID_MAX] = calloc((size_t)n, sizeof *left);
    int ok = 0;
    /* the newest entry of each stream now */
    if (newest == NULL || left == NULL || stream_probe(set, "XREVRANGE %s + - COUNT 1", NULL, newest) < 0)
        goto out;
    for (int s = 0; s < n; s++)
        if (!newest[s][0])
            snprintf(newest[s], ENTRY_ID_MAX, "0-0"); /* the stream was empty: nothing to wait for */
    int64_t start = clock_mono_ms();
    for (int second = 0;;) {
        /* is any entry up to that one still there (not committed by whoever holds it)? */
        if (stream_probe(set, "XRANGE %s - %s COUNT 1", newest, left) < 0)
            goto out;
        int waiting = 0;
        for (int s = 0; s < n; s++)
            waiting |= left[s][0] != '\0';
        if (!waiting) {
            ok = 1;
            goto out;
        }
        int64_t waited = clock_mono_ms() - start;
        if (waited > OUTBOX_FLEET_WAIT_MS) {
            log_warn("outbox: entries older than this wait are still not committed after %lld ms (held by an "
                     "instance that cannot reach MySQL?)",
                     (long long)waited);
            goto out;
        }
        if (waited / 1000 > second) { /* the caller's tick says it is waiting (restore.c's logs it) */
            second = (int)(waited / 1000);
            if (tick(second, arg))
                goto out;
        }
        usleep(10000);
    }
out:
    free(newest);
    free(left);
    return ok;
}

int outbox_barrier(struct loopq *reply_to, journal_done_fn done, void *arg)
{
    struct barrier *b = calloc(1, sizeof *b);
    if (b == NULL)
        return -1;
    b->asked_us = clock_mono_us();
    b->reply_to = reply_to;
    b->done = done;
    b->arg = arg;
    pthread_mutex_lock(&outbox.lock);
    if (!bgthread_running(&outbox.bg) || outbox.bg.stop) {
        pthread_mutex_unlock(&outbox.lock);
        free(b);
        return -1;
    }
    b->next = outbox.barriers;
    outbox.barriers = b;
    pthread_cond_signal(&outbox.cond); /* wake a sleeping poll: read now */
    pthread_mutex_unlock(&outbox.lock);
    return 0;
}

/* ---- Redis ---- */

/* Set or clear the connections, published first, so that a stop's cut never shuts a socket
 * that redisFree has closed (its number may already belong to someone else). One per shard
 * (rblock_shards: the same one for every shard of a single Redis, a cluster master's for its
 * shards); commands pipelined on a shard's connection are read back from it in order. */
static void set_connection(struct rblock_shards *set)
{
    bgthread_publish(&outbox.bg, 0, set, rblock_shards_cut);
    rblock_shards_free(outbox.set);
    outbox.set = set;
}

static redisContext *conn(int shard)
{
    return rblock_shard(outbox.set, shard);
}

static void disconnect(void)
{
    set_connection(NULL);
    for (int i = 0; i < outbox.shards; i++) {
        outbox.s[i].group_ok = 0;
        outbox.s[i].reread = 1;
        outbox.s[i].nids = 0;
    }
}

static int ensure_connected(void)
{
    if (outbox.set)
        return 0;
    int64_t now = clock_mono_us();
    if (now - outbox.last_connect_us < RETRY_US)
        return -1;
    outbox.last_connect_us = now;
    char err[512];
    enum layout_verdict v;
    set_connection(layout_open_shards(outbox.cfg, 1, &v, err, sizeof err));
    if (outbox.set == NULL && v == LAYOUT_DIFFERS) {
        if (!outbox.layout_refused)
            log_warn("outbox: %s; it writes nothing into that data until the configuration matches", err);
        outbox.layout_refused = 1;
        return -1;
    }
    if (outbox.set == NULL) {
        log_debug("outbox: cannot connect to Redis: %s", err);
        return -1;
    }
    if (outbox.layout_refused)
        log_info("outbox: the data layout matches again; carrying transitions");
    outbox.layout_refused = 0;
    return 0;
}

static void create_group(int shard)
{
    redisReply *r = redisCommand(conn(shard), "XGROUP CREATE %s " GROUP " 0 MKSTREAM", outbox.s[shard].key);
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSYGROUP", 9) != 0 &&
        cluster_error_kind(r->str, r->len) != CLUSTER_ERR_OTHER) {
        freeReplyObject(r); /* the map changed: connect again */
        r = NULL;
    }
    if (r && (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "BUSYGROUP", 9) == 0))
        outbox.s[shard].group_ok = 1;
    if (r)
        freeReplyObject(r);
    else
        disconnect();
}

/* ---- entries -> journal records ---- */

static int remember_id(struct shard_state *st, const char *id, size_t len)
{
    if (len >= ENTRY_ID_MAX)
        return -1;
    if (st->nids == st->capids) {
        int cap = st->capids ? st->capids * 2 : 256;
        void *grown = realloc(st->ids, (size_t)cap * sizeof *st->ids);
        if (grown == NULL)
            return -1;
        st->ids = grown;
        st->capids = cap;
    }
    memcpy(st->ids[st->nids], id, len);
    st->ids[st->nids][len] = '\0';
    st->nids++;
    return 0;
}

static const redisReply *field(const redisReply *fields, const char *name)
{
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
        if (fields->element[i]->type == REDIS_REPLY_STRING && strcmp(fields->element[i]->str, name) == 0)
            return fields->element[i + 1];
    return NULL;
}

/* "instance\x1fthread\x1fhost" -> three parts (pointers into buf). */
static void split_who(const char *who, char *buf, size_t cap, const char **parts)
{
    snprintf(buf, cap, "%s", who);
    char *p = buf;
    for (int k = 0; k < 3; k++) {
        parts[k] = p;
        char *sep = p ? strchr(p, '\x1f') : NULL;
        if (sep) {
            *sep = '\0';
            p = sep + 1;
        } else {
            p = NULL;
        }
        if (parts[k] == NULL)
            parts[k] = "";
    }
}

/* One stream entry -> one journal record. 0, or -1 for an entry that cannot be read. */
static int parse_entry(int shard, const redisReply *fields, struct jobchange *r)
{
    const redisReply *t = field(fields, "t"), *w = field(fields, "w");
    if (t == NULL || t->type != REDIS_REPLY_STRING)
        return -1;
    char idkey[ID_KEY_LEN + 2], key[16];
    int from, to;
    unsigned ver, att;
    long long run_at, at;
    memset(r, 0, sizeof *r);
    if (sscanf(t->str, "%12s %d %d %u %u %lld %lld %15s", idkey, &from, &to, &ver, &att, &run_at, &at, key) != 8 ||
        id_from_key(idkey, strlen(idkey), &r->id) < 0 || from < 0 || from > JS_FAR || to < 0 || to > JS_FAR)
        return -1;
    r->kind = JC_TRANSITION;
    r->from = (uint8_t)from;
    r->to = (uint8_t)to;
    r->ver = ver;
    r->attempts = att;
    r->run_at = run_at;
    r->at = at;
    char buf[STORE_WHO_MAX];
    const char *who[3];
    split_who(w && w->type == REDIS_REPLY_STRING ? w->str : "", buf, sizeof buf, who);
    snprintf(r->instance, sizeof r->instance, "%s", who[0]);
    store_actor(r->actor, sizeof r->actor, who[1], outbox.cfg->redis_prefix, shard, key);
    snprintf(r->host, sizeof r->host, "%s", who[2]);

    const redisReply *settings = field(fields, "r"), *body = field(fields, "b");
    if (settings && body && settings->type == REDIS_REPLY_STRING && body->type == REDIS_REPLY_STRING) {
        struct job_spec *j = calloc(1, sizeof *j);
        long long ttr, backoff = -1; /* "<priority> <ttr> <tries>[ <backoff>]": -1 = the topic's */
        int got = j ? sscanf(settings->str, "%d %lld %d %lld", &j->priority, &ttr, &j->tries, &backoff) : 0;
        if (j == NULL || got < 3 || (j->body = malloc(body->len + 1)) == NULL) {
            free(j);
            return 0; /* the transition stands; only the body update is lost */
        }
        j->ttr = ttr;
        j->has_backoff = backoff >= 0;
        j->backoff = backoff >= 0 ? backoff : 0;
        /* c = "<traceparent>[ <tracestate>]": the replacing push's trace context; none, none */
        const redisReply *c = field(fields, "c");
        if (c && c->type == REDIS_REPLY_STRING &&
            trace_parent_valid(c->str, c->len > TRACE_PARENT_LEN ? TRACE_PARENT_LEN : c->len)) {
            memcpy(j->traceparent, c->str, TRACE_PARENT_LEN);
            if (c->len > TRACE_PARENT_LEN + 1 && (j->tracestate = strdup(c->str + TRACE_PARENT_LEN + 1)) != NULL)
                j->tracestate_len = c->len - TRACE_PARENT_LEN - 1;
        }
        /* g = the replacing push's group; none, none */
        const redisReply *g = field(fields, "g");
        if (g && g->type == REDIS_REPLY_STRING && job_group_valid(g->str, g->len) &&
            (j->group = strndup(g->str, g->len)) != NULL)
            j->group_len = g->len;
        memcpy(j->body, body->str, body->len);
        j->body[body->len] = '\0';
        j->body_len = body->len;
        r->kind = JC_REPLACE;
        r->replacement = j;
    }
    return 0;
}

static void bad_free(struct bad_entry *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->v[i]);
    free(b->v);
    free(b->len);
}

/* Copy an unreadable entry to be kept in the shard's logbad stream at the next ack. */
static void keep_bad(struct shard_state *st, const redisReply *e)
{
    const redisReply *f = e->element[1];
    if (st->nbad == st->capbad) {
        int cap = st->capbad ? st->capbad * 2 : 8;
        struct bad_entry *grown = realloc(st->bad, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return;
        st->bad = grown;
        st->capbad = cap;
    }
    struct bad_entry *b = &st->bad[st->nbad];
    memset(b, 0, sizeof *b);
    snprintf(b->id, sizeof b->id, "%s", e->element[0]->str);
    size_t n = f->type == REDIS_REPLY_ARRAY ? f->elements : 0;
    b->v = calloc(n + 1, sizeof *b->v);
    b->len = calloc(n + 1, sizeof *b->len);
    for (size_t i = 0; b->v && b->len && i < n; i++) {
        const redisReply *x = f->element[i];
        size_t len = x->type == REDIS_REPLY_STRING ? x->len : 0;
        if ((b->v[b->n] = malloc(len + 1)) == NULL)
            break;
        memcpy(b->v[b->n], len ? x->str : "", len);
        b->len[b->n++] = len;
    }
    st->nbad++;
    metrics_inc(MC_OUTBOX_UNREADABLE, 1);
}

/* Entries [[id, [field, value, ...]], ...] of one stream into outbox.recs from index n. */
static int take_entries(int shard, const redisReply *list, int n)
{
    for (size_t i = 0; i < list->elements && n < outbox.max; i++) {
        const redisReply *e = list->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[0]->type != REDIS_REPLY_STRING)
            continue;
        if (remember_id(&outbox.s[shard], e->element[0]->str, e->element[0]->len) < 0)
            continue; /* not acknowledged: read again later */
        const redisReply *fields = e->element[1];
        if (fields->type != REDIS_REPLY_ARRAY || parse_entry(shard, fields, &outbox.recs[n]) < 0) {
            log_error("outbox: unreadable entry %s on shard %d: kept in %s", e->element[0]->str, shard,
                      outbox.s[shard].badkey);
            keep_bad(&outbox.s[shard], e); /* then acknowledged with the rest: it would never read better */
            continue;
        }
        n++;
    }
    return n;
}

static int shard_of_key(const char *key)
{
    for (int i = 0; i < outbox.shards; i++)
        if (strcmp(outbox.s[i].key, key) == 0)
            return i;
    return -1;
}

static int append_read_new(int first, const char *count);
static int take_new(redisReply *r, int per, int *np, int *fullp);

/* Read a batch: our pending entries first (after a failure or restart), entries others left
 * behind (claimed), then new ones. Returns how many records, -1 when Redis failed.
 * *drained: every stream was read to its end. */
/* An error reply the last read_batch met (a stream Redis refuses to read, WRONGTYPE...): the
 * cycle goes on with the other shards, but the duty is not succeeding. "" when none. */
static char read_error[160];

/* Entries some outbox read and has not committed for OUTBOX_CLAIM_IDLE_MS — judged by their
 * age (a stream id is the Redis time it was added at; clock_unix_ms follows that clock), not
 * by their idle time: an instance that cannot reach MySQL rereads its pending entries again
 * and again, which resets their idle time, and would keep them from MySQL for as long as it
 * is cut off (and a /reStore waiting for them, outbox_wait_fleet). Such entries are taken
 * over (XCLAIM) by this outbox; an instance that died leaves its entries the same way. One
 * that was merely slow commits them too: writes are idempotent. Added to the batch at n;
 * the new n, or -1 when Redis failed. */
static int claim_stuck(int per, int n)
{
    if (outbox.shards <= 0)
        return n;
    char cutoff[32];
    snprintf(cutoff, sizeof cutoff, "%lld", (long long)(clock_unix_ms() - OUTBOX_CLAIM_IDLE_MS));
    redisReply **pending = calloc((size_t)outbox.shards, sizeof *pending);
    if (pending == NULL)
        return n; /* the next round tries again */
    for (int i = 0; i < outbox.shards; i++)
        redisAppendCommand(conn(i), "XPENDING %s " GROUP " - %s %d", outbox.s[i].key, cutoff, per);
    int rc = 0;
    for (int i = 0; i < outbox.shards; i++) {
        redisReply *r = rblock_shard_reply(conn(i));
        if (r == NULL)
            rc = -1;
        if (rc < 0 || r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
            if (r)
                freeReplyObject(r);
            if (rc < 0)
                break;
            continue;
        }
        pending[i] = r;
    }
    for (int i = 0; rc == 0 && i < outbox.shards; i++) {
        if (pending[i] == NULL)
            continue;
        /* XCLAIM <key> journal <us> 0 <id>...: each listed entry becomes ours, whoever held it */
        size_t m = pending[i]->elements, argc = 0;
        const char **argv = calloc(m + 5, sizeof *argv);
        size_t *lens = calloc(m + 5, sizeof *lens);
        if (argv == NULL || lens == NULL) {
            free(argv);
            free(lens);
            continue;
        }
        argv[argc++] = "XCLAIM";
        argv[argc++] = outbox.s[i].key;
        argv[argc++] = GROUP;
        argv[argc++] = outbox.consumer;
        argv[argc++] = "0";
        for (size_t e = 0; e < m; e++) {
            const redisReply *p = pending[i]->element[e];
            if (p->type == REDIS_REPLY_ARRAY && p->elements >= 1 && p->element[0]->type == REDIS_REPLY_STRING)
                argv[argc++] = p->element[0]->str;
        }
        for (size_t a = 0; a < argc; a++)
            lens[a] = strlen(argv[a]);
        if (argc > 5)
            redisAppendCommandArgv(conn(i), (int)argc, argv, lens);
        free(argv);
        free(lens);
        if (argc > 5) { /* read it before the next shard's is sent: pending[i] holds the ids */
            redisReply *r = rblock_shard_reply(conn(i));
            if (r == NULL) {
                rc = -1;
                break;
            }
            if (r->type == REDIS_REPLY_ARRAY) {
                log_info("outbox: took over %zu entries of shard %d not committed for %d s", r->elements, i,
                         OUTBOX_CLAIM_IDLE_MS / 1000);
                n = take_entries(i, r, n);
            }
            freeReplyObject(r);
        }
    }
    for (int i = 0; i < outbox.shards; i++)
        if (pending[i])
            freeReplyObject(pending[i]);
    free(pending);
    return rc < 0 ? -1 : n;
}

static int read_batch(int *drained)
{
    *drained = 0;
    read_error[0] = '\0';
    for (int i = 0; i < outbox.shards; i++) {
        outbox.s[i].nids = 0;
        if (!outbox.s[i].group_ok) {
            create_group(i);
            if (outbox.set == NULL)
                return -1;
        }
    }
    int per = (outbox.max + outbox.shards - 1) / outbox.shards;
    int n = 0, any_full = 0;

    int64_t now = clock_mono_us();
    int claim = now - outbox.last_claim_us > CLAIM_EVERY_US && !outbox.cannot_commit;
    if (claim)
        outbox.last_claim_us = now;
    int pipelined = 0;
    for (int i = 0; i < outbox.shards; i++) {
        if (outbox.s[i].reread) {
            redisAppendCommand(conn(i), "XREADGROUP GROUP " GROUP " %s COUNT %d STREAMS %s 0", outbox.consumer, per,
                               outbox.s[i].key);
            pipelined++;
        }
    }
    for (int i = 0, k = 0; k < pipelined; i++) {
        if (outbox.s[i].reread) {
            redisReply *r = rblock_shard_reply(conn(i));
            k++;
            if (r == NULL)
                return -1;
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->elements == 2) {
                const redisReply *list = r->element[0]->element[1];
                if ((int)list->elements < per)
                    outbox.s[i].reread = 0;
                else
                    any_full = 1;
                n = take_entries(i, list, n);
            } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOGROUP", 7) == 0) {
                outbox.s[i].group_ok = 0; /* Redis lost its data: the group is made again */
            } else {
                outbox.s[i].reread = 0;
            }
            freeReplyObject(r);
        }
    }
    if (claim && (n = claim_stuck(per, n)) < 0)
        return -1;
    if (n > 0 || any_full)
        return n; /* old business first; new entries on the next call */

    /* New entries: all shards in one command on a single Redis; a command per shard in a
     * cluster (rblock_shards_first), every one sent before any is read. */
    char count[16];
    snprintf(count, sizeof count, "%d", per);
    int full = 0;
    for (int i = 0; i < outbox.shards; i++)
        if (rblock_shards_first(outbox.set, i) == i && append_read_new(i, count) < 0)
            return -1;
    for (int i = 0; i < outbox.shards; i++)
        if (rblock_shards_first(outbox.set, i) == i && take_new(rblock_shard_reply(conn(i)), per, &n, &full) < 0)
            return -1;
    *drained = !full;
    return n;
}

/* XREADGROUP ... STREAMS <the streams of first's group> > ..., queued on its connection. */
static int append_read_new(int first, const char *count)
{
    const char *argv[8 + 2 * 256];
    size_t lens[8 + 2 * 256];
    int a = 0;
    const char *head[] = {"XREADGROUP", "GROUP", GROUP, outbox.consumer, "COUNT", count, "STREAMS"};
    for (int h = 0; h < 7; h++) {
        argv[a] = head[h];
        lens[a++] = strlen(head[h]);
    }
    int k = 0;
    for (int i = first; i < outbox.shards; i++)
        if (rblock_shards_first(outbox.set, i) == first) {
            argv[a] = outbox.s[i].key;
            lens[a++] = strlen(outbox.s[i].key);
            k++;
        }
    for (int i = 0; i < k; i++) {
        argv[a] = ">";
        lens[a++] = 1;
    }
    return redisAppendCommandArgv(conn(first), a, argv, lens) == REDIS_OK ? 0 : -1;
}

/* One group's answer to append_read_new: its entries taken into the batch. -1 when
 * Redis failed. */
static int take_new(redisReply *r, int per, int *np, int *fullp)
{
    int n = *np, full = *fullp;
    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t k = 0; k < r->elements; k++) {
            const redisReply *st = r->element[k];
            if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 || st->element[0]->type != REDIS_REPLY_STRING)
                continue;
            int shard = shard_of_key(st->element[0]->str);
            if (shard < 0)
                continue;
            if ((int)st->element[1]->elements >= per)
                full = 1;
            n = take_entries(shard, st->element[1], n);
        }
    } else if (r->type == REDIS_REPLY_ERROR) {
        if (strncmp(r->str, "NOGROUP", 7) == 0)
            for (int i = 0; i < outbox.shards; i++)
                outbox.s[i].group_ok = 0;
        else {
            log_warn("outbox: XREADGROUP: %s", r->str);
            snprintf(read_error, sizeof read_error, "XREADGROUP: %s", r->str);
        }
        full = 1;
    }
    freeReplyObject(r);
    *np = n;
    *fullp = full;
    return 0;
}

static int ack_batch(void)
{
    int *sent = calloc((size_t)outbox.shards, sizeof *sent); /* commands queued per shard */
    if (sent == NULL)
        return -1;
    for (int i = 0; i < outbox.shards; i++) {
        struct shard_state *st = &outbox.s[i];
        /* unreadable entries first: kept (capped) before they are acknowledged */
        for (int b = 0; b < st->nbad; b++) {
            struct bad_entry *e = &st->bad[b];
            const char **argv = malloc((size_t)(e->n + 8) * sizeof *argv);
            size_t *lens = malloc((size_t)(e->n + 8) * sizeof *lens);
            if (argv && lens) {
                static const char *const head[] = {"XADD", NULL, "MAXLEN", "~", "100000", "*", "entry"};
                int a = 0;
                for (; a < 7; a++) {
                    argv[a] = a == 1 ? st->badkey : head[a];
                    lens[a] = strlen(argv[a]);
                }
                argv[a] = e->id;
                lens[a++] = strlen(e->id);
                for (int f = 0; f + 1 < e->n; f += 2) { /* field/value pairs, as they were */
                    argv[a] = e->v[f];
                    lens[a++] = e->len[f];
                    argv[a] = e->v[f + 1];
                    lens[a++] = e->len[f + 1];
                }
                redisAppendCommandArgv(conn(i), a, argv, lens);
                sent[i]++;
            }
            free(argv);
            free(lens);
            bad_free(e);
        }
        st->nbad = 0;
        for (int at = 0; at < st->nids; at += 500) {
            int k = st->nids - at < 500 ? st->nids - at : 500;
            const char *argv[504];
            size_t lens[504];
            for (int cmd = 0; cmd < 2; cmd++) {
                int a = 0;
                argv[a] = cmd == 0 ? "XACK" : "XDEL";
                lens[a++] = 4;
                argv[a] = st->key;
                lens[a++] = strlen(st->key);
                if (cmd == 0) {
                    argv[a] = GROUP;
                    lens[a++] = strlen(GROUP);
                }
                for (int j = 0; j < k; j++) {
                    argv[a] = st->ids[at + j];
                    lens[a++] = strlen(st->ids[at + j]);
                }
                redisAppendCommandArgv(conn(i), a, argv, lens);
                sent[i]++;
            }
        }
        st->nids = 0;
    }
    int rc = 0;
    for (int i = 0; i < outbox.shards && rc == 0; i++) /* in the order each connection got them */
        for (int k = 0; k < sent[i]; k++) {
            redisReply *r = rblock_shard_reply(conn(i));
            if (r == NULL) {
                rc = -1; /* unacknowledged entries are read again, and written again idempotently */
                break;
            }
            freeReplyObject(r);
        }
    free(sent);
    return rc;
}

static void free_batch(int n)
{
    for (int i = 0; i < n; i++)
        if (outbox.recs[i].replacement) {
            job_specs_free(outbox.recs[i].replacement, 1);
            outbox.recs[i].replacement = NULL;
        }
}

/* ---- the thread ---- */

static void on_committed(int ok, void *arg)
{
    pthread_mutex_lock(&outbox.lock);
    outbox.committed = 1;
    outbox.commit_ok = ok;
    pthread_cond_signal(&outbox.cond);
    pthread_mutex_unlock(&outbox.lock);
}

/* Sleep up to `us`, or until stopped or a barrier is asked for. */
static void pause_us(int64_t us)
{
    pthread_mutex_lock(&outbox.lock);
    if (!outbox.bg.stop && outbox.barriers == NULL)
        clock_cond_wait_us(&outbox.cond, &outbox.lock, us);
    pthread_mutex_unlock(&outbox.lock);
}

/* Stop once asked and a read found nothing left (entries may have arrived while the last
 * batch was being committed), or at the deadline. */
static int stopping(int drained)
{
    pthread_mutex_lock(&outbox.lock);
    int stop = bgthread_stop_due_locked(&outbox.bg, drained);
    pthread_mutex_unlock(&outbox.lock);
    return stop;
}

/* Every shard's reader succeeded (why NULL) or failed (why), for /health's stuck duties
 * (dutywatch.h): one thread reads all shards, so a cycle succeeds or fails for all. */
static void report(const char *why)
{
    dutywatch_all_shards(DUTY_OUTBOX, outbox.shards, why);
}

static void *outbox_main(void *unused)
{
    log_set_thread_name("outbox");
    int drained = 0; /* the last read returned nothing and found every stream empty */
    for (;;) {
        if (stopping(drained))
            break;
        if (ensure_connected() < 0) {
            report("cannot connect to Redis");
            settle_barriers(clock_mono_us() - 2 * RETRY_US, 0); /* Redis down: don't keep /jobs waiting */
            drained = 1;                                        /* nothing we can carry now: a stop need not wait */
            pause_us(RETRY_US / 4);
            continue;
        }
        int64_t cycle_start = clock_mono_us();
        int read_all = 0;
        int n = read_batch(&read_all);
        drained = read_all && n == 0;
        if (n < 0) {
            const char *why = outbox.set ? rblock_shards_errstr(outbox.set) : "";
            log_warn("outbox: Redis failed (%s); reconnecting", why[0] ? why : "no reply");
            report("Redis failed while reading the outbox");
            metrics_inc(MC_REDIS_ERRORS, 1);
            disconnect();
            drained = 0;
            continue;
        }
        int have_ids = 0;
        for (int i = 0; i < outbox.shards; i++)
            have_ids |= outbox.s[i].nids > 0;
        if (n == 0 && !have_ids) {
            report(read_error[0] ? read_error : NULL); /* read, and nothing to carry */
            if (read_all)
                settle_barriers(cycle_start, 1);
            pause_us(IDLE_POLL_US);
            continue;
        }
        if (n == 0) { /* only unreadable entries: drop them */
            if (ack_batch() < 0)
                disconnect();
            continue;
        }
        /* Hand the batch to the journal and wait for its commit. */
        pthread_mutex_lock(&outbox.lock);
        outbox.committed = 0;
        pthread_mutex_unlock(&outbox.lock);
        if (journal_submit_outbox(outbox.recs, n, on_committed, NULL) < 0) {
            outbox.cannot_commit = 1;
            report("the journal refuses (MySQL down or shutting down)");
            free_batch(n);
            for (int i = 0; i < outbox.shards; i++) {
                outbox.s[i].nids = 0;
                outbox.s[i].reread = 1; /* MySQL is down: keep them pending and try again */
            }
            settle_barriers(-1, 0);
            drained = 1;
            pause_us(RETRY_US);
            continue;
        }
        pthread_mutex_lock(&outbox.lock);
        while (!outbox.committed)
            pthread_cond_wait(&outbox.cond, &outbox.lock);
        int ok = outbox.commit_ok;
        pthread_mutex_unlock(&outbox.lock);
        free_batch(n);
        outbox.cannot_commit = !ok;
        if (!ok) {
            report("MySQL did not commit the batch");
            for (int i = 0; i < outbox.shards; i++) {
                outbox.s[i].nids = 0;
                outbox.s[i].reread = 1;
            }
            drained = 0;
            continue;
        }
        if (ack_batch() < 0) {
            report("Redis failed while acknowledging the outbox");
            disconnect();
            drained = 0;
            continue;
        }
        report(read_error[0] ? read_error : NULL);
        if (read_all)
            settle_barriers(cycle_start, 1);
        /* A trickle would otherwise cost MySQL one commit per few transitions: wait a moment
         * so the next batch carries more (transitions reach MySQL 5 ms later, that is all). */
        if (n < SMALL_BATCH && read_all)
            pause_us(LINGER_US);
    }
    settle_barriers(-1, 0);
    set_connection(NULL);
    return NULL;
}

int outbox_start(const struct config *cfg, const char *consumer)
{
    outbox.cfg = cfg;
    snprintf(outbox.consumer, sizeof outbox.consumer, "%s", consumer);
    outbox.shards = cfg->redis_shards;
    outbox.max = cfg->journal_batch;
    outbox.s = calloc((size_t)outbox.shards, sizeof *outbox.s);
    outbox.recs = calloc((size_t)outbox.max, sizeof *outbox.recs);
    if (outbox.s == NULL || outbox.recs == NULL)
        return -1;
    for (int i = 0; i < outbox.shards; i++) {
        rkey(outbox.s[i].key, sizeof outbox.s[i].key, cfg->redis_prefix, i, "log");
        rkey(outbox.s[i].badkey, sizeof outbox.s[i].badkey, cfg->redis_prefix, i, "logbad");
        outbox.s[i].reread = 1; /* after a restart, first finish what this consumer had pending */
    }
    return bgthread_start(&outbox.bg, outbox_main, NULL);
}

void outbox_stop(int deadline_ms)
{
    if (!bgthread_running(&outbox.bg))
        return;
    bgthread_stop(&outbox.bg, deadline_ms);
    for (int i = 0; i < outbox.shards; i++) {
        for (int b = 0; b < outbox.s[i].nbad; b++)
            bad_free(&outbox.s[i].bad[b]);
        free(outbox.s[i].bad);
        free(outbox.s[i].ids);
    }
    free(outbox.s);
    free(outbox.recs);
    outbox.s = NULL;
    outbox.recs = NULL;
}
