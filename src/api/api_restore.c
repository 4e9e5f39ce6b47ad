/* api_restore.c — GET /reStore and GET /reStore/{id}: read the parameters, hand the work to
 * the restore engine (durable/restore.h, on the MySQL pool) and answer with what it reports. */
#include "api/handlers.h"
#include "api/api_util.h"
#include "redis/jobjson.h"
#include "core/app.h"
#include "core/ids.h"
#include "core/job.h"
#include "durable/restore.h"

/* Answer r unless the engine took the work (then its done callback answers). */
static void answer_unless_submitted(struct request *r, enum restore_submitted s)
{
    switch (s) {
    case RESTORE_SUBMITTED:
        break;
    case RESTORE_BUSY:
        respond_error(r, 409, "conflict", "a restore is already running on this instance");
        break;
    case RESTORE_NO_MEMORY:
        respond_unavailable(r, "memory");
        break;
    case RESTORE_NO_QUEUE:
        respond_unavailable(r, "the MySQL task queue");
        break;
    }
}

static void answer_restore(const struct restore_report *rep, void *arg)
{
    struct request *r = arg;
    if (rep->unavailable) {
        respond_unavailable(r, rep->unavailable);
        return;
    }
    struct sbuf sb = SBUF_INIT;
    sb_printf(&sb,
              "{\"scanned\":%ld,\"restored\":%ld,\"present\":%ld,\"expiredSkipped\":%ld,\"gone\":%ld,"
              "\"bizHeld\":%ld,\"misplaced\":%ld,\"checked\":%ld,\"aligned\":%ld,\"removed\":%ld,"
              "\"farBizKeys\":%ld,\"expire\":%s,\"ms\":%lld}",
              rep->scanned, rep->restored, rep->present, rep->expired_skipped, rep->gone, rep->biz_held, rep->misplaced,
              rep->checked, rep->aligned, rep->removed, rep->far_biz, rep->expire ? "true" : "false",
              (long long)rep->ms);
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

/* The endpoint's one parameter, the boolean `name` (false when absent); any other answers
 * 400. 0, or -1 after answering. */
static int only_flag(struct request *r, const char *name, int *on)
{
    const char *const allowed[] = {name, NULL};
    char err[128];
    if (api_params_only(r, allowed) < 0)
        return -1;
    if (param_bool(&r->params, name, 0, on, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return -1;
    }
    return 0;
}

void api_restore(struct request *r)
{
    int expire;
    if (only_flag(r, "expire", &expire) < 0)
        return;
    answer_unless_submitted(r, restore_submit(r->ctx->app, expire, r->client, r->ctx->inbox, answer_restore, r));
}

static void answer_restore_job(const struct restore_job_report *rep, void *arg)
{
    struct request *r = arg;
    switch (rep->outcome) {
    case RESTORE_JOB_DONE: {
        struct sbuf sb = SBUF_INIT;
        sb_puts(&sb, "{\"id\":");
        jobjson_id(&sb, rep->id);
        sb_printf(&sb, ",\"restored\":%s,\"state\":\"%s\"}", rep->restored ? "true" : "false",
                  job_state_name(rep->state));
        respond_json(r, 200, &sb);
        sb_free(&sb);
        return;
    }
    case RESTORE_JOB_NOT_FOUND:
        respond_error(r, 404, "not_found", "%s", rep->message);
        return;
    case RESTORE_JOB_REFUSED:
        respond_error(r, 409, "conflict", "%s", rep->message);
        return;
    case RESTORE_JOB_UNAVAILABLE:
        respond_unavailable(r, rep->message);
    }
}

void api_restore_one(struct request *r)
{
    int force;
    uint64_t id;
    if (only_flag(r, "force", &force) < 0)
        return;
    if (id_parse(r->route.arg, r->route.arg_len, &id) < 0) {
        respond_error(r, 400, "bad_request", "a job id is a decimal number of up to 19 digits");
        return;
    }
    answer_unless_submitted(
        r, restore_job_submit(r->ctx->app, id, force, r->client, r->ctx->inbox, answer_restore_job, r));
}
