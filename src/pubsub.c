/* pubsub.c — see pubsub.h. */
#include "pubsub.h"
#include "app.h"
#include "metrics.h"
#include "rconn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pubsub {
    struct rconn *sub;
    struct pubsub_handlers h;
};

/* "<shard> <due>" */
static void wake(struct pubsub *ps, const char *payload, size_t len)
{
    char buf[64];
    if (len >= sizeof buf)
        return;
    memcpy(buf, payload, len);
    buf[len] = '\0';
    char *end;
    long shard = strtol(buf, &end, 10);
    long long due = strtoll(end, NULL, 10);
    ps->h.on_wake((int)shard, (int64_t)due, ps->h.arg);
}

static void on_message(const char *channel, const char *payload, size_t len, void *arg)
{
    struct pubsub *ps = arg;
    metrics_inc(MC_PUBSUB_MESSAGES, 1);
    size_t clen = strlen(channel);
    if (clen > 5 && strcmp(channel + clen - 5, ":wake") == 0)
        wake(ps, payload, len);
    else if (len > 0)
        ps->h.on_ready(payload, len, ps->h.arg);
}

static void on_state(struct rconn *rc, int up, void *arg)
{
    struct pubsub *ps = arg;
    if (up)
        ps->h.on_resync(ps->h.arg);
}

struct pubsub *pubsub_start(struct app *app, struct event_base *base, const struct pubsub_handlers *h)
{
    const struct config *cfg = &app->cfg;
    struct pubsub *ps = calloc(1, sizeof *ps);
    if (ps == NULL)
        return NULL;
    ps->h = *h;
    struct rconn_config scfg = {"subscriber", cfg->redis_address, cfg->redis_password, cfg->redis_db,
                                cfg->redis_timeout_ms, 0};
    ps->sub = rconn_new(base, &scfg, on_state, ps);
    char ready[96], wake_ch[96];
    snprintf(ready, sizeof ready, "%s:ready", cfg->redis_prefix);
    snprintf(wake_ch, sizeof wake_ch, "%s:wake", cfg->redis_prefix);
    const char *channels[] = {ready, wake_ch};
    if (ps->sub == NULL || rconn_subscribe(ps->sub, channels, 2, on_message, ps) < 0) {
        pubsub_free(ps);
        return NULL;
    }
    return ps;
}

void pubsub_free(struct pubsub *ps)
{
    if (ps == NULL)
        return;
    rconn_free(ps->sub);
    free(ps);
}
