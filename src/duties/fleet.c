/* fleet.c — see fleet.h. */
#include "duties/fleet.h"
#include "base/hmap.h"
#include "core/app.h"
#include "base/clock.h"
#include "base/log.h"
#include "redis/rlink.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE_MS 3000

struct fleet {
    struct app *app;
    struct rlink *rc;
    fleet_owned_fn on_change;
    void *arg;
    int busy;
    char key[128];
    char *owned; /* per shard */
    int ninstances;
    pthread_mutex_t lock; /* guards view */
    struct sbuf view;     /* JSON array of the live instances' stats */
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

int fleet_owner(const char *const *names, int n, int shard)
{
    int best = -1;
    uint64_t best_score = 0;
    for (int i = 0; i < n; i++) {
        uint64_t h = hmap_hash_bytes(names[i], strlen(names[i]));
        uint64_t score = mix64(h ^ mix64((uint64_t)shard + 1));
        if (best < 0 || score > best_score || (score == best_score && strcmp(names[i], names[best]) < 0)) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

static void on_beat(redisReply *r, void *arg)
{
    struct fleet *f = arg;
    f->busy = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return; /* keep the last ownership until Redis answers again */
    int n = (int)r->elements / 2;
    const char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    if (names == NULL)
        return;
    int me_listed = 0;
    for (int i = 0; i < n; i++) {
        names[i] = r->element[2 * i]->str ? r->element[2 * i]->str : "";
        if (strcmp(names[i], f->app->instance) == 0)
            me_listed = 1;
    }
    if (!me_listed) {
        free(names);
        return;
    }
    int shards = f->app->cfg.redis_shards, changed = 0;
    for (int s = 0; s < shards; s++) {
        int mine = strcmp(names[fleet_owner(names, n, s)], f->app->instance) == 0;
        if (mine != f->owned[s]) {
            f->owned[s] = (char)mine;
            changed = 1;
        }
    }
    if (n != f->ninstances)
        log_info("fleet: %d live instance%s", n, n == 1 ? "" : "s");
    f->ninstances = n;

    struct sbuf view = SBUF_INIT;
    sb_putc(&view, '[');
    for (int i = 0; i < n; i++) {
        const redisReply *st = r->element[2 * i + 1];
        if (i)
            sb_putc(&view, ',');
        if (st->str && st->len > 1 && st->str[0] == '{')
            sb_put(&view, st->str, st->len);
        else {
            sb_puts(&view, "{\"instance\":");
            sb_json_cstr(&view, names[i]);
            sb_putc(&view, '}');
        }
    }
    sb_putc(&view, ']');
    pthread_mutex_lock(&f->lock);
    sb_free(&f->view);
    f->view = view;
    pthread_mutex_unlock(&f->lock);
    free(names);

    if (changed) {
        int count = 0;
        for (int s = 0; s < shards; s++)
            count += f->owned[s];
        log_info("fleet: this instance now moves %d of %d shards", count, shards);
        f->on_change(f->owned, shards, f->arg);
    }
}

static void send_op(struct fleet *f, const char *op, const char *stats, rconn_reply_fn fn)
{
    char now[24], live[16];
    snprintf(now, sizeof now, "%lld", (long long)clock_unix_ms());
    snprintf(live, sizeof live, "%d", LIVE_MS);
    const char *argv[9] = {NULL, NULL, NULL, f->key, op, now, f->app->instance, stats, live};
    size_t lens[9] = {
        0, 0, 0, strlen(f->key), strlen(op), strlen(now), strlen(f->app->instance), strlen(stats), strlen(live)};
    if (rlink_eval(f->rc, SCRIPT_FLEET, 9, argv, lens, fn, f) == 0)
        f->busy = 1;
}

void fleet_tick(struct fleet *f, const char *local_stats)
{
    if (!f->busy && rlink_usable(f->rc))
        send_op(f, "beat", local_stats, on_beat);
}

static void on_left(redisReply *r, void *arg)
{
    struct fleet *f = arg;
    f->busy = 0;
}

void fleet_leave(struct fleet *f)
{
    if (rlink_usable(f->rc))
        send_op(f, "leave", "", on_left);
}

void fleet_stats_json(struct fleet *f, struct sbuf *sb)
{
    sb_puts(sb, ",\"fleet\":{\"instances\":");
    if (f)
        pthread_mutex_lock(&f->lock);
    if (f && f->view.len)
        sb_put(sb, f->view.data, f->view.len);
    else
        sb_puts(sb, "[]");
    if (f)
        pthread_mutex_unlock(&f->lock);
    sb_putc(sb, '}');
}

struct fleet *fleet_new(struct app *app, struct rlink *rc, fleet_owned_fn on_change, void *arg)
{
    struct fleet *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->owned = malloc((size_t)app->cfg.redis_shards);
    if (f->owned == NULL) {
        free(f);
        return NULL;
    }
    memset(f->owned, 1, (size_t)app->cfg.redis_shards); /* alone until told otherwise */
    f->app = app;
    f->rc = rc;
    f->on_change = on_change;
    f->arg = arg;
    pthread_mutex_init(&f->lock, NULL);
    snprintf(f->key, sizeof f->key, "%s:{w}:instances", app->cfg.redis_prefix);
    return f;
}

void fleet_free(struct fleet *f)
{
    if (f == NULL)
        return;
    pthread_mutex_destroy(&f->lock);
    sb_free(&f->view);
    free(f->owned);
    free(f);
}
