/* topics.c — see topics.h. */
#include "duties/topics.h"
#include "mysql/db.h"
#include "mysql/dbtask.h"
#include "base/hmap.h"
#include "core/ids.h"
#include "base/log.h"
#include "redis/rcodec.h"
#include "redis/layout.h"
#include "redis/rblock.h"
#include "base/sbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNC_PAIRS_PER_CALL 500 /* topics written per topicset.lua call: a short script */

struct entry {
    struct topic_conf conf;
    uint64_t seq;
};

static struct {
    const struct config *cfg;
    pthread_mutex_t lock;
    struct hmap map; /* topic -> struct entry */
    uint64_t seen;   /* highest seq read from MySQL */
    atomic_int loaded;
    atomic_int running;          /* a refresh is queued or running */
    struct rblock_shards *redis; /* the refresh's own connections, kept between refreshes */
} topics = {.lock = PTHREAD_MUTEX_INITIALIZER};

int topics_init(const struct config *cfg)
{
    topics.cfg = cfg;
    return 0;
}

void topics_free(void)
{
    pthread_mutex_lock(&topics.lock);
    size_t pos = 0;
    struct entry *e;
    while ((e = hmap_next(&topics.map, &pos, NULL, NULL)) != NULL)
        free(e);
    hmap_free(&topics.map);
    topics.seen = 0;
    pthread_mutex_unlock(&topics.lock);
    if (topics.redis) {
        rblock_shards_free(topics.redis);
        topics.redis = NULL;
    }
    atomic_store(&topics.loaded, 0);
}

int topics_loaded(void)
{
    return atomic_load(&topics.loaded);
}

/* Under the lock. A newer seq only: a refresh that read the row before a PUT committed never
 * undoes what topics_apply put there. */
static void put_locked(const char *topic, size_t len, const struct topic_conf *c, uint64_t seq)
{
    struct entry *e = hmap_get(&topics.map, topic, len);
    if (e == NULL) {
        if ((e = malloc(sizeof *e)) == NULL || hmap_put(&topics.map, topic, len, e) < 0) {
            free(e);
            log_error("topics: out of memory; the settings of %.*s are not applied here", (int)len, topic);
            return;
        }
    } else if (e->seq >= seq) {
        return;
    }
    e->conf = *c;
    e->seq = seq;
}

void topics_apply(const char *topic, const struct topic_conf *c, uint64_t seq)
{
    pthread_mutex_lock(&topics.lock);
    put_locked(topic, strlen(topic), c, seq);
    pthread_mutex_unlock(&topics.lock);
}

int topics_get(const char *topic, size_t len, struct topic_conf *out)
{
    pthread_mutex_lock(&topics.lock);
    struct entry *e = hmap_get(&topics.map, topic, len);
    if (e)
        *out = e->conf;
    pthread_mutex_unlock(&topics.lock);
    if (e == NULL || topicconf_is_default(out)) {
        topicconf_defaults(out);
        return 0;
    }
    return 1;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void topics_names_free(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Names of the entries `keep` accepts, sorted. */
static int collect(int (*keep)(const char *name, size_t len, const struct entry *e, const void *arg), const void *arg,
                   char ***out)
{
    pthread_mutex_lock(&topics.lock);
    char **names = malloc((topics.map.count + 1) * sizeof *names);
    int n = 0;
    size_t pos = 0, len;
    const void *key;
    struct entry *e;
    while (names && (e = hmap_next(&topics.map, &pos, &key, &len)) != NULL) {
        if (!keep(key, len, e, arg))
            continue;
        if ((names[n] = strndup(key, len)) == NULL) {
            topics_names_free(names, n);
            names = NULL;
            break;
        }
        n++;
    }
    pthread_mutex_unlock(&topics.lock);
    if (names == NULL)
        return -1;
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    *out = names;
    return n;
}

struct name_filter {
    const char *after, *prefix;
};

static int keep_named(const char *name, size_t len, const struct entry *e, const void *arg)
{
    const struct name_filter *f = arg;
    if (topicconf_is_default(&e->conf))
        return 0;
    if (f->prefix && (len < strlen(f->prefix) || memcmp(name, f->prefix, strlen(f->prefix)) != 0))
        return 0;
    if (f->after) {
        size_t alen = strlen(f->after);
        int c = memcmp(name, f->after, len < alen ? len : alen);
        if (c < 0 || (c == 0 && len <= alen))
            return 0;
    }
    return 1;
}

int topics_names(const char *after, const char *prefix, int limit, char ***names)
{
    struct name_filter f = {after && *after ? after : NULL, prefix && *prefix ? prefix : NULL};
    int n = collect(keep_named, &f, names);
    if (n > limit) {
        for (int i = limit; i < n; i++)
            free((*names)[i]);
        n = limit;
    }
    return n;
}

static int keep_route(const char *name, size_t len, const struct entry *e, const void *arg)
{
    return e->conf.route == *(const enum topic_route *)arg;
}

int topics_with_route(enum topic_route route, char ***names)
{
    return collect(keep_route, &route, names);
}

/* ---- the MySQL side ---- */

/* The settings row of `topic` (locked FOR UPDATE when `lock`). 1 found, 0 none, -1 error. */
static int read_row(MYSQL *db, const char *topic, int lock, struct topic_conf *c, char *err, size_t errlen)
{
    struct sbuf q = SBUF_INIT;
    sb_puts(&q, "SELECT settings FROM topic_setting WHERE topic = ");
    db_quote(db, &q, topic, strlen(topic));
    if (lock)
        sb_puts(&q, " FOR UPDATE");
    int rc = q.oom ? -1 : db_exec(db, q.data, q.len);
    sb_free(&q);
    MYSQL_RES *res = rc == 0 ? mysql_store_result(db) : NULL;
    if (res == NULL) {
        snprintf(err, errlen, "MySQL: %s", mysql_error(db));
        return -1;
    }
    MYSQL_ROW row = mysql_fetch_row(res);
    unsigned long *lens = row ? mysql_fetch_lengths(res) : NULL;
    topicconf_defaults(c);
    int found = row != NULL && row[0] != NULL;
    if (found && topicconf_merge_json(c, row[0], lens[0], err, errlen) < 0) {
        /* written by this code, so only a hand edit gets here: say so and use the defaults */
        log_error("topics: the stored settings of %s do not parse (%s); using the defaults", topic, err);
        topicconf_defaults(c);
    }
    mysql_free_result(res);
    return found;
}

int topics_write(MYSQL *db, const char *topic, const char *json, size_t len, const struct topics_actor *who,
                 int64_t now, struct topic_conf *out, uint64_t *seq, char *err, size_t errlen)
{
    struct topic_conf c;
    if (read_row(db, topic, 1, &c, err, errlen) < 0)
        goto failed;
    if (json && topicconf_merge_json(&c, json, len, err, errlen) < 0) {
        mysql_rollback(db);
        return -1; /* valid alone, but e.g. "signed" needs what is stored: cannot happen today */
    }
    if (!json)
        topicconf_defaults(&c);

    struct sbuf stored = SBUF_INIT, audit = SBUF_INIT, q = SBUF_INIT;
    sb_putc(&stored, '{');
    topicconf_json(&c, 1, &stored);
    sb_putc(&stored, '}');
    sb_putc(&audit, '{');
    topicconf_json(&c, 0, &audit);
    sb_putc(&audit, '}');
    sb_puts(&q, "INSERT INTO topic_change (" TOPIC_CHANGE_COLUMNS ") VALUES (");
    db_quote(db, &q, topic, strlen(topic));
    sb_printf(&q, ",%lld,", (long long)now);
    db_quote(db, &q, who->actor, strlen(who->actor));
    sb_putc(&q, ',');
    db_quote(db, &q, who->host, strlen(who->host));
    sb_putc(&q, ',');
    db_quote(db, &q, who->instance, strlen(who->instance));
    sb_putc(&q, ',');
    db_quote(db, &q, audit.data, audit.len);
    sb_putc(&q, ')');
    int rc = q.oom || stored.oom || audit.oom ? -1 : db_exec(db, q.data, q.len);
    if (rc == 0) {
        *seq = (uint64_t)mysql_insert_id(db);
        sb_reset(&q);
        sb_puts(&q, "INSERT INTO topic_setting (" TOPIC_SETTING_COLUMNS ") VALUES (");
        db_quote(db, &q, topic, strlen(topic));
        sb_putc(&q, ',');
        db_quote(db, &q, stored.data, stored.len);
        sb_printf(&q,
                  ",%llu,%lld) ON DUPLICATE KEY UPDATE settings = VALUES(settings), seq = VALUES(seq), "
                  "updated_at = VALUES(updated_at)",
                  (unsigned long long)*seq, (long long)now);
        rc = q.oom ? -1 : db_exec(db, q.data, q.len);
    }
    sb_free(&stored);
    sb_free(&audit);
    sb_free(&q);
    if (rc == 0 && db_commit(db) == 0) {
        *out = c;
        return 0;
    }
    snprintf(err, errlen, "MySQL: %s", mysql_error(db));
failed:
    mysql_rollback(db);
    return -2;
}

/* Read the changes after topics.seen into the copy. 0, or -1. */
static int read_changes(MYSQL *db, uint64_t *max_seq)
{
    for (;;) {
        pthread_mutex_lock(&topics.lock);
        uint64_t after = topics.seen;
        pthread_mutex_unlock(&topics.lock);
        char sql[160];
        snprintf(sql, sizeof sql,
                 "SELECT topic, settings, seq FROM topic_setting FORCE INDEX (idx_seq) WHERE seq > %llu "
                 "ORDER BY seq LIMIT 1000",
                 (unsigned long long)after);
        if (db_exec(db, sql, strlen(sql)) != 0)
            return -1;
        MYSQL_RES *res = mysql_store_result(db);
        if (res == NULL)
            return -1;
        int rows = 0;
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(res)) != NULL) {
            unsigned long *lens = mysql_fetch_lengths(res);
            struct topic_conf c;
            char err[256];
            topicconf_defaults(&c);
            if (row[1] && topicconf_merge_json(&c, row[1], lens[1], err, sizeof err) < 0) {
                log_error("topics: the stored settings of %s do not parse (%s); using the defaults", row[0], err);
                topicconf_defaults(&c);
            }
            uint64_t seq = strtoull(row[2], NULL, 10);
            pthread_mutex_lock(&topics.lock);
            put_locked(row[0], lens[0], &c, seq);
            if (seq > topics.seen)
                topics.seen = seq;
            pthread_mutex_unlock(&topics.lock);
            rows++;
        }
        mysql_free_result(res);
        mysql_commit(db); /* a fresh snapshot next time */
        if (rows < 1000)
            break;
    }
    pthread_mutex_lock(&topics.lock);
    *max_seq = topics.seen;
    pthread_mutex_unlock(&topics.lock);
    return 0;
}

/* ---- the Redis side: repair shards that are behind ---- */

struct shard_batch {
    struct sbuf values; /* "<value>\0" per topic, in order */
    char **names;
    int n, cap;
};

/* Send one shard's settings (all of them) and mark it synced up to max_seq. 0 or -1. */
static int sync_shard(redisContext *c, int shard, struct shard_batch *b, uint64_t max_seq)
{
    const struct config *cfg = topics.cfg;
    const char *v = b->values.data;
    int i = 0;
    do {
        int k = b->n - i < SYNC_PAIRS_PER_CALL ? b->n - i : SYNC_PAIRS_PER_CALL;
        int last = i + k == b->n;
        struct rargv a;
        redisReply *reply = NULL;
        if (rargv_init(&a, 5 + 2 * k, 1, 0) == 0) {
            rargv_key(&a, cfg->redis_prefix, shard, "jobs");
            rargv_int(&a, last ? (int64_t)max_seq : 0);
            for (int j = i; j < i + k; j++) {
                rargv_str(&a, b->names[j], strlen(b->names[j]));
                size_t vl = strlen(v);
                rargv_str(&a, v, vl);
                v += vl + 1;
            }
            if (rblock_append_eval(c, SCRIPT_TOPICSET, a.argc, a.argv, a.lens) == 0)
                reply = rblock_reply(c);
        }
        rargv_free(&a);
        int ok = reply && reply->type == REDIS_REPLY_INTEGER;
        if (!ok)
            log_warn("topics: writing settings to shard %d failed: %s", shard,
                     reply && reply->str ? reply->str : c->errstr);
        if (reply)
            freeReplyObject(reply);
        if (!ok)
            return -1;
        i += k;
    } while (i < b->n);
    return 0;
}

static int sync_redis(uint64_t max_seq)
{
    const struct config *cfg = topics.cfg;
    char err[256];
    if (topics.redis == NULL && (topics.redis = layout_open_shards(cfg, 1, NULL, err, sizeof err)) == NULL) {
        log_debug("topics: Redis: %s", err);
        return -1;
    }
    int shards = cfg->redis_shards;
    if (shards < 1) /* config.c refuses it; said here for the compiler's size analysis */
        return -1;
    char key[256];
    for (int s = 0; s < shards; s++) {
        rkey(key, sizeof key, cfg->redis_prefix, s, "topic");
        redisAppendCommand(rblock_shard(topics.redis, s), "HGET %s ~synced", key);
    }
    uint64_t *synced = calloc((size_t)shards, sizeof *synced);
    int rc = synced ? 0 : -1;
    for (int s = 0; s < shards; s++) { /* in order on each shard's connection */
        redisReply *r = rblock_reply(rblock_shard(topics.redis, s));
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            rc = -1;
        else if (synced && r->type == REDIS_REPLY_STRING)
            synced[s] = strtoull(r->str, NULL, 10);
        if (r)
            freeReplyObject(r);
        if (r == NULL)
            break;
    }
    for (int s = 0; rc == 0 && s < shards; s++) {
        if (synced[s] >= max_seq)
            continue;
        /* this shard missed something: send it every setting of its topics */
        struct shard_batch b = {SBUF_INIT, NULL, 0, 0};
        pthread_mutex_lock(&topics.lock);
        size_t pos = 0, len;
        const void *name;
        struct entry *e;
        while ((e = hmap_next(&topics.map, &pos, &name, &len)) != NULL) {
            if (id_topic_shard(name, len, shards) != s)
                continue;
            if (b.n == b.cap) {
                int cap = b.cap ? b.cap * 2 : 64;
                char **grown = realloc(b.names, (size_t)cap * sizeof *grown);
                if (grown == NULL)
                    break;
                b.names = grown;
                b.cap = cap;
            }
            if ((b.names[b.n] = strndup(name, len)) == NULL)
                break;
            char value[128];
            size_t vl = topicconf_script_value(&e->conf, e->seq, value, sizeof value);
            sb_put(&b.values, value, vl + 1);
            b.n++;
        }
        pthread_mutex_unlock(&topics.lock);
        if (b.values.oom || sync_shard(rblock_shard(topics.redis, s), s, &b, max_seq) < 0)
            rc = -1;
        else if (b.n > 0)
            log_info("topics: shard %d was behind (held changes up to %llu of %llu): wrote %d topics' settings", s,
                     (unsigned long long)synced[s], (unsigned long long)max_seq, b.n);
        topics_names_free(b.names, b.n);
        sb_free(&b.values);
    }
    free(synced);
    if (rc < 0) { /* made again next time: after a failure its replies may be out of step */
        rblock_shards_free(topics.redis);
        topics.redis = NULL;
    }
    return rc;
}

static void refresh_run(MYSQL *db, void *arg)
{
    uint64_t max_seq = 0;
    if (db == NULL || read_changes(db, &max_seq) < 0) {
        log_debug("topics: cannot read settings from MySQL now");
    } else {
        atomic_store(&topics.loaded, 1);
        if (max_seq > 0)
            sync_redis(max_seq);
    }
    atomic_store(&topics.running, 0);
}

void topics_schedule(void)
{
    if (atomic_exchange(&topics.running, 1))
        return;
    if (dbtask_submit(refresh_run, NULL, NULL, NULL) < 0)
        atomic_store(&topics.running, 0);
}
