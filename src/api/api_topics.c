/* api_topics.c — topic settings and counts: GET /topics, GET|PUT|DELETE /topics/{topic}
 * (docs/api.md "Topics").
 *
 * A change is a MySQL transaction first (topics_write, on the MySQL pool): once it commits the
 * change is the fleet's, and every instance reads it within 1 s (topics.h). Then this worker
 * writes it into Redis on the topic's shard, where the scripts read it, before answering —
 * so when a PUT {"paused":true} is answered no instance delivers from the topic any more. If
 * that Redis write fails the answer is still 200 (MySQL has it): the refresh writes it within
 * half a second of Redis answering again. */
#include "api/handlers.h"
#include "api/api_util.h"
#include "core/app.h"
#include "base/clock.h"
#include "mysql/dbtask.h"
#include "base/log.h"
#include "durable/pager.h"
#include "duties/topics.h"
#include "delivery/whclient.h"

#include <stdlib.h>
#include <string.h>

#define TOPICS_LIMIT_DEFAULT 100
#define TOPICS_LIMIT_MAX     1000

/* Redis's counts plus the topic's far jobs (MySQL only), which are delayed jobs too. */
static void json_counts(struct sbuf *sb, const char *topic, size_t len, const int64_t *c)
{
    int64_t far = pager_far_count(topic, len);
    sb_printf(sb, "\"counts\":{\"delayed\":%lld,\"ready\":%lld,\"reserved\":%lld,\"dead\":%lld,\"far\":%lld}",
              (long long)(c[0] + far), (long long)c[1], (long long)c[2], (long long)c[3], (long long)far);
}

static void json_topic(struct sbuf *sb, const char *topic, size_t len, const struct topic_conf *c,
                       const int64_t *counts)
{
    sb_puts(sb, "{\"topic\":");
    sb_json_str(sb, topic, len);
    sb_putc(sb, ',');
    topicconf_json(c, 0, sb);
    if (counts) {
        sb_putc(sb, ',');
        json_counts(sb, topic, len, counts);
    }
    sb_putc(sb, '}');
}

/* ---- GET /topics/{topic} ---- */

struct one_state {
    struct request *r;
    /* PUT/DELETE */
    int is_put;
    int rc; /* topics_write: 0, -1 bad input, -2 MySQL */
    char err[256];
    char *body;
    size_t body_len;
    char actor[JOBCHANGE_ACTOR_MAX], host[JOBCHANGE_HOST_MAX];
    const char *instance;
    struct topic_conf conf;
    uint64_t seq;
};

static void one_state_free(void *p)
{
    struct one_state *st = p;
    free(st->body);
    free(st);
}

static void on_one_counts(const int64_t *counts, int n, void *arg)
{
    struct one_state *st = arg;
    struct request *r = st->r;
    if (counts == NULL || n != 4) {
        respond_unavailable(r, "Redis");
        return;
    }
    struct topic_conf c;
    topics_get(r->route.arg, r->route.arg_len, &c);
    struct sbuf sb = SBUF_INIT;
    json_topic(&sb, r->route.arg, r->route.arg_len, &c, counts);
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

/* ---- PUT / DELETE /topics/{topic} ---- */

static void write_run(MYSQL *db, void *arg)
{
    struct one_state *st = arg;
    if (db == NULL) {
        st->rc = -2;
        snprintf(st->err, sizeof st->err, "MySQL is unreachable");
        return;
    }
    struct topics_actor who = {st->actor, st->host, st->instance};
    st->rc = topics_write(db, st->r->route.arg, st->is_put ? st->body : NULL, st->body_len, &who, clock_unix_ms(),
                          &st->conf, &st->seq, st->err, sizeof st->err);
}

static void answer_written(struct one_state *st)
{
    struct request *r = st->r;
    struct sbuf sb = SBUF_INIT;
    json_topic(&sb, r->route.arg, r->route.arg_len, &st->conf, NULL);
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

static void on_redis_written(int ok, void *arg)
{
    struct one_state *st = arg;
    if (!ok)
        log_warn("topics: %s's settings are in MySQL but Redis did not take them now; the refresh will write them",
                 st->r->route.arg);
    answer_written(st);
}

static void write_done(void *arg)
{
    struct one_state *st = arg;
    struct request *r = st->r;
    if (st->rc == -1) {
        respond_error(r, 400, "bad_request", "%s", st->err);
        return;
    }
    if (st->rc < 0) {
        log_warn("topics: %s %s: %s", st->is_put ? "PUT" : "DELETE", r->route.arg, st->err);
        respond_unavailable(r, "MySQL");
        return;
    }
    topics_apply(r->route.arg, &st->conf, st->seq);
    char value[128];
    topicconf_script_value(&st->conf, st->seq, value, sizeof value);
    if (store_topicset(&r->ctx->store, r->route.arg, r->route.arg_len, value, on_redis_written, st) < 0)
        on_redis_written(0, st);
}

static int check_topic(struct request *r)
{
    if (r->route.arg_len == 0 || r->route.arg_len > TOPIC_MAX || !job_topic_valid(r->route.arg, r->route.arg_len)) {
        respond_error(r, 400, "bad_request", "topic must be 1-%d characters of [A-Za-z0-9_.:-]", TOPIC_MAX);
        return -1;
    }
    return 0;
}

void api_topic(struct request *r)
{
    static const char *const none[] = {NULL};
    if (check_topic(r) < 0 || api_params_only(r, none) < 0)
        return;
    struct one_state *st = api_state_new(r, sizeof *st, one_state_free);
    if (st == NULL)
        return;
    st->r = r;
    if (r->method == METHOD_GET || r->method == METHOD_HEAD) {
        if (api_require_redis(r) < 0)
            return;
        if (store_topic_counts(&r->ctx->store, r->route.arg, r->route.arg_len, on_one_counts, st) < 0)
            respond_unavailable(r, "Redis");
        return;
    }
    st->is_put = r->method == METHOD_PUT;
    if (st->is_put) {
        if (r->body_len == 0) {
            respond_error(r, 400, "bad_request", "PUT needs a JSON object of settings as its body");
            return;
        }
        /* The body is checked here, before any MySQL work: its fields, the URL by the webhook
         * client that will use it, an amqp route against this instance's broker. */
        struct topic_conf probe;
        char err[256];
        struct wh_url url;
        topicconf_defaults(&probe);
        if (topicconf_merge_json(&probe, r->body, r->body_len, err, sizeof err) < 0) {
            respond_error(r, 400, "bad_request", "%s", err);
            return;
        }
        if (probe.route == TOPIC_ROUTE_WEBHOOK && whclient_parse_url(probe.url, &url, err, sizeof err) < 0) {
            respond_error(r, 400, "bad_request", "deliver.webhook: %s", err);
            return;
        }
        if (probe.route == TOPIC_ROUTE_AMQP && r->ctx->app->cfg.amqp_url[0] == '\0') {
            respond_error(r, 400, "bad_request",
                          "deliver.amqp: this instance has no [amqp] url configured to publish to");
            return;
        }
        /* the request body lives until the answer, but the pool thread reads it: copy */
        if ((st->body = malloc(r->body_len + 1)) == NULL) {
            respond_unavailable(r, "memory");
            return;
        }
        memcpy(st->body, r->body, r->body_len);
        st->body[r->body_len] = '\0';
        st->body_len = r->body_len;
    }
    request_actor(r, id_topic_shard(r->route.arg, r->route.arg_len, r->ctx->store.shards), "topics", st->actor,
                  sizeof st->actor);
    sb_str_put(st->host, sizeof st->host, 0, r->client);
    st->instance = r->ctx->app->instance;
    if (dbtask_submit(write_run, write_done, r->ctx->inbox, st) < 0)
        respond_unavailable(r, "MySQL (its task queue is full)");
}

/* ---- GET /topics ---- */

struct list_state {
    struct request *r;
    const char *after, *prefix; /* in the request's parameters */
    int64_t limit;
};

static const int64_t zero_counts[4] = {0, 0, 0, 0};

static void emit(struct sbuf *sb, int *listed, const char *name, const int64_t *counts)
{
    struct topic_conf c;
    topics_get(name, strlen(name), &c);
    if ((*listed)++)
        sb_putc(sb, ',');
    json_topic(sb, name, strlen(name), &c, counts);
}

/* The topics Redis counts and the topics with settings, merged in name order (both are sorted;
 * a topic in both is listed once). */
static void on_list_counts(const struct topic_counts *topics, int n, long outbox, int failed, void *arg)
{
    struct list_state *q = arg;
    struct request *r = q->r;
    if (failed) {
        respond_unavailable(r, "Redis");
        return;
    }
    char **conf = NULL;
    int nconf = topics_names(q->after, q->prefix, (int)q->limit + 1, &conf);
    if (nconf < 0) {
        respond_unavailable(r, "memory");
        return;
    }
    size_t plen = q->prefix ? strlen(q->prefix) : 0;
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "{\"topics\":[");
    int listed = 0, i = 0, k = 0;
    const char *last = NULL, *next = NULL;
    for (;;) {
        /* the next counted topic in range */
        while (i < n && ((plen && strncmp(topics[i].topic, q->prefix, plen) != 0) ||
                         (q->after && strcmp(topics[i].topic, q->after) <= 0)))
            i++;
        const char *a = i < n ? topics[i].topic : NULL, *b = k < nconf ? conf[k] : NULL;
        if (a == NULL && b == NULL)
            break;
        int c = a && b ? strcmp(a, b) : a ? -1 : 1;
        const char *name = c <= 0 ? a : b;
        if (listed == q->limit) {
            next = last;
            break;
        }
        int64_t counts[4] = {0, 0, 0, 0};
        if (c <= 0) {
            counts[0] = topics[i].delayed;
            counts[1] = topics[i].ready;
            counts[2] = topics[i].reserved;
            counts[3] = topics[i].dead;
        }
        emit(&sb, &listed, name, c <= 0 ? counts : zero_counts);
        last = name;
        if (c <= 0)
            i++;
        if (c >= 0)
            k++;
    }
    sb_putc(&sb, ']');
    if (next) {
        sb_puts(&sb, ",\"next\":");
        sb_json_cstr(&sb, next);
    }
    sb_putc(&sb, '}');
    respond_json(r, 200, &sb);
    sb_free(&sb);
    topics_names_free(conf, nconf);
}

void api_topics(struct request *r)
{
    static const char *const allowed[] = {"prefix", "after", "limit", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    struct list_state *q = api_state_new(r, sizeof *q, NULL);
    if (q == NULL)
        return;
    q->r = r;
    char err[256];
    size_t len;
    if (api_param_topicish(r, "prefix", &q->prefix, &len) < 0 || api_param_topicish(r, "after", &q->after, &len) < 0)
        return;
    if (param_int(&r->params, "limit", 1, TOPICS_LIMIT_MAX, TOPICS_LIMIT_DEFAULT, &q->limit, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    if (api_require_redis(r) < 0)
        return;
    if (store_counts(&r->ctx->store, on_list_counts, q) < 0)
        respond_unavailable(r, "Redis");
}
