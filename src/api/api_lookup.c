/* api_lookup.c — GET /jobs?topic=T&bizKey=K: the live (or latest) job holding a business key,
 * answered exactly as GET /jobs/{id} answers for its id (api_jobs_show).
 *
 * Two index lookups, never a scan:
 *   1. Redis: the topic's bizKey index (lib.lua biz_holder) names the live holder, near or far
 *      ("<id>@<runAt>" for a far one) — one HGET on the topic's shard;
 *   2. none: MySQL's biz_latest, the (topic, bizKey) → newest job pushed with it, which the
 *      journal upserts in the push's own group commit (journal_sql.h). `message` keeps its one
 *      secondary index: every push would pay for a (topic, biz_key) index, and only pushes
 *      with a bizKey pay for this table. A row pointing at an aborted push (Redis failed it)
 *      is not an answer: 404, as if the key had never been used. */
#include "api/handlers.h"
#include "api/api_util.h"
#include "mysql/db.h"
#include "mysql/dbtask.h"
#include "core/ids.h"
#include "core/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lookup_state {
    struct request *r;
    const char *topic, *biz; /* the request's parameters (live until it is answered) */
    size_t topic_len, biz_len;
    int found; /* after the MySQL read: 1, 0 (no row), -1 (MySQL failed) */
    uint64_t id;
};

/* The request's own state gives way to api_jobs_show's. */
static void show(struct lookup_state *st, uint64_t id)
{
    struct request *r = st->r;
    free(st);
    r->state = NULL;
    r->state_free = NULL;
    api_jobs_show(r, id);
}

/* Pool thread: biz_latest's row, unless it names a push that never became a job. */
static void latest_run(MYSQL *db, void *arg)
{
    struct lookup_state *st = arg;
    st->found = -1;
    if (db == NULL)
        return;
    struct sbuf q = SBUF_INIT;
    sb_puts(&q, "SELECT b.id FROM biz_latest b JOIN message m ON m.id = b.id WHERE b.topic = ");
    db_quote(db, &q, st->topic, st->topic_len);
    sb_puts(&q, " AND b.biz_key = ");
    db_quote(db, &q, st->biz, st->biz_len);
    sb_puts(&q, " AND m.state <> 'aborted'");
    if (q.oom || mysql_real_query(db, q.data, q.len) != 0) {
        sb_free(&q);
        return;
    }
    sb_free(&q);
    MYSQL_RES *res = mysql_store_result(db);
    mysql_commit(db);
    if (res == NULL)
        return;
    MYSQL_ROW row = mysql_fetch_row(res);
    st->found = row != NULL && row[0] != NULL;
    if (st->found)
        st->id = strtoull(row[0], NULL, 10);
    mysql_free_result(res);
}

static void latest_done(void *arg)
{
    struct lookup_state *st = arg;
    if (st->found < 0)
        respond_unavailable(st->r, "MySQL");
    else if (st->found == 0)
        respond_error(st->r, 404, "not_found", "no job of this topic was ever pushed with this bizKey");
    else
        show(st, st->id);
}

static void on_holder(int status, uint64_t id, void *arg)
{
    struct lookup_state *st = arg;
    if (status < 0) {
        respond_unavailable(st->r, "Redis");
        return;
    }
    if (status == 1) {
        show(st, id); /* a job that ends in between is shown from its row, as it ended */
        return;
    }
    if (dbtask_submit(latest_run, latest_done, st->r->ctx->inbox, st) < 0)
        respond_unavailable(st->r, "MySQL");
}

/* A required, non-empty parameter; NULL after answering 400. */
static const char *param_required(struct request *r, const char *name, size_t *len)
{
    const char *v = params_get(&r->params, name);
    *len = v ? strlen(v) : 0;
    if (*len == 0)
        respond_error(r, 400, "bad_request", "%s is required", name);
    return *len ? v : NULL;
}

void api_lookup(struct request *r)
{
    static const char *const allowed[] = {"topic", "bizKey", NULL};
    const char *topic, *biz;
    size_t topic_len, biz_len;
    if (api_params_only(r, allowed) < 0 || (topic = param_required(r, "topic", &topic_len)) == NULL ||
        (biz = param_required(r, "bizKey", &biz_len)) == NULL)
        return;
    if (topic_len > TOPIC_MAX || !job_topic_valid(topic, topic_len)) {
        respond_error(r, 400, "bad_request", "topic must be 1-%d characters of [A-Za-z0-9_.:-]", TOPIC_MAX);
        return;
    }
    if (!job_bizkey_valid(biz, biz_len)) {
        respond_error(r, 400, "bad_request", "bizKey must be 1-%d characters of printable UTF-8", BIZKEY_MAX);
        return;
    }
    if (api_require_redis(r) < 0)
        return;
    struct lookup_state *st = api_state_new(r, sizeof *st, NULL);
    if (st == NULL)
        return;
    *st = (struct lookup_state){.r = r, .topic = topic, .topic_len = topic_len, .biz = biz, .biz_len = biz_len};
    if (store_biz_holder(&r->ctx->store, topic, topic_len, biz, biz_len, on_holder, st) < 0)
        respond_unavailable(r, "Redis");
}
